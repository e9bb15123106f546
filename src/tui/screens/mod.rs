//! The screens: one module each, owning its state, what its actions and messages do to it, and
//! how it is drawn. This file is their registry: the tabs, the states, and the routing of a
//! screen's actions and drawing to its module.

pub mod checklist;
pub mod compare;
pub mod flags;
pub mod run;
pub mod studies;
pub mod sweep;
pub mod trials;

use super::app::{App, Effect};
use super::keymap::Action;
use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Checklist,
    Flags,
    Run,
    Trials,
    Sweep,
    Studies,
}

impl Tab {
    pub const ALL: [Tab; 6] = [
        Tab::Checklist,
        Tab::Flags,
        Tab::Run,
        Tab::Trials,
        Tab::Sweep,
        Tab::Studies,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Checklist => "Checklist",
            Tab::Flags => "Flags",
            Tab::Run => "Run",
            Tab::Trials => "Trials",
            Tab::Sweep => "Sweep",
            Tab::Studies => "Studies",
        }
    }

    pub fn index(self) -> usize {
        Tab::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }

    /// The screen is a list or a table the list keys move in.
    pub fn has_list(self) -> bool {
        self != Tab::Run
    }
}

/// Every screen's own state.
#[derive(Debug, Clone, Default)]
pub struct Screens {
    pub checklist: checklist::State,
    pub flags: flags::State,
    pub run: run::State,
    pub trials: trials::State,
    pub sweep: sweep::State,
    pub studies: studies::State,
}

/// What the screen asks for when it is shown (its data, read fresh).
pub fn on_show(_app: &mut App, tab: Tab) -> Vec<Effect> {
    match tab {
        Tab::Trials => vec![Effect::LoadTrials],
        Tab::Studies => vec![Effect::LoadStudies],
        _ => vec![],
    }
}

/// Moves the selection of the active screen's list by `delta` rows, or to an end.
pub fn move_selection(app: &mut App, to: Move) {
    match app.tab {
        Tab::Checklist => checklist::move_selection(app, to),
        Tab::Flags => flags::move_selection(app, to),
        Tab::Trials => trials::move_selection(app, to),
        Tab::Sweep => sweep::move_selection(app, to),
        Tab::Studies => studies::move_selection(app, to),
        Tab::Run => {}
    }
}

/// A list screen's rows arrived, or why they did not: the selection stays on a row.
pub(crate) fn rows_arrived<T>(
    rows: &mut Vec<T>,
    selected: &mut usize,
    error: &mut Option<String>,
    r: Result<Vec<T>, crate::app::AppError>,
) {
    match r {
        Ok(new) => {
            *rows = new;
            *error = None;
            *selected = (*selected).min(rows.len().saturating_sub(1));
        }
        Err(e) => *error = Some(e.to_string()),
    }
}

/// Where a list selection goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    By(isize),
    First,
    Last,
}

impl Move {
    /// The new index in a list of `len` rows.
    pub fn apply(self, sel: usize, len: usize) -> usize {
        if len == 0 {
            return 0;
        }
        match self {
            Move::By(d) => (sel as isize + d).clamp(0, len as isize - 1) as usize,
            Move::First => 0,
            Move::Last => len - 1,
        }
    }
}

/// A screen's action, handed to the module that owns it.
pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    use Action::*;
    match action {
        OpenStep | GemmStage | ToggleGemmTuned | Acknowledge => checklist::apply(app, action),
        ClearFilter | SearchStart | SearchInput(_) | SearchBackspace | SearchDone
        | SearchCancel | Edit | EditInput(_) | EditBackspace | EditCycle(_) | EditCancel
        | EditCommit | Undo | ShowDiff | Save | OpenEditor => flags::apply(app, action),
        ProfileNext | ProfilePrev | StartTrial | StopTrial | NextPanel => run::apply(app, action),
        SortNext | SortReverse | ToggleDetail | Mark | Compare | ApplyTrial => {
            trials::apply(app, action)
        }
        SpaceDetail | StartSweep | StopSweep | ApplySweep => sweep::apply(app, action),
        OpenStudy | ResumeStudy | ReportStudy | ApplyStudy | StudyLog => {
            studies::apply(app, action)
        }
        Refresh => on_show(app, app.tab),
        _ => vec![],
    }
}

/// Draws the active screen in `area`.
pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme, area: Rect) {
    match app.tab {
        Tab::Checklist => checklist::draw(f, app, theme, area),
        Tab::Flags => flags::draw(f, app, theme, area),
        Tab::Run => run::draw(f, app, theme, area),
        Tab::Trials => trials::draw(f, app, theme, area),
        Tab::Sweep => sweep::draw(f, app, theme, area),
        Tab::Studies => studies::draw(f, app, theme, area),
    }
}
