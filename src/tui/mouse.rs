//! The mouse (capture on unless `PRIMUS_TUNE_NO_MOUSE` is set): a click on a tab shows its
//! screen, a click on a row of the active list selects it, the wheel moves the selection (in a
//! box, scrolls it). Where the tabs and rows are comes from the last frame drawn (`Hits`, set
//! by the view), so the update stays pure.

use super::app::{App, Effect, apply};
use super::keymap::Action;
use super::screens::{self, Move, Tab};
use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};

/// The rows of the active list as last drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    pub tab: Tab,
    /// The first row's line and how many rows are shown.
    pub y: u16,
    pub height: u16,
    /// The index of the first row shown (the list's scroll offset).
    pub offset: usize,
}

/// Where the last frame put what a click can hit.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hits {
    /// Each tab's columns on the top line, `[from, to)`.
    pub tabs: Vec<(u16, u16, Tab)>,
    pub rows: Option<Rows>,
}

pub fn on_mouse(app: &mut App, m: MouseEvent) -> Vec<Effect> {
    if app.overlay.is_some() {
        // The wheel scrolls a box that scrolls; the rest of the mouse waits for it to close.
        return match m.kind {
            MouseEventKind::ScrollDown => apply(app, Action::Down),
            MouseEventKind::ScrollUp => apply(app, Action::Up),
            _ => vec![],
        };
    }
    match m.kind {
        MouseEventKind::Down(MouseButton::Left) => {
            let tab = app
                .hits
                .tabs
                .iter()
                .find(|(from, to, _)| m.row == 0 && (*from..*to).contains(&m.column))
                .map(|t| t.2);
            if let Some(tab) = tab {
                app.status = None;
                return apply(app, Action::GoTab(tab));
            }
            if let Some(r) = app.hits.rows
                && r.tab == app.tab
                && (r.y..r.y + r.height).contains(&m.row)
            {
                let index = r.offset + usize::from(m.row - r.y);
                screens::move_selection(app, Move::First);
                screens::move_selection(app, Move::By(index as isize));
            }
            vec![]
        }
        MouseEventKind::ScrollDown if app.tab.has_list() => apply(app, Action::Down),
        MouseEventKind::ScrollUp if app.tab.has_list() => apply(app, Action::Up),
        _ => vec![],
    }
}
