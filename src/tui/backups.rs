//! The versions of the experiment that saves replaced (kept in the workspace), in the TUI: `b`
//! on Flags lists them, Enter shows what restoring the selected one changes, `y` restores it.
//! The same use cases as `primus-tune backups` ([`crate::app::backups`]); a restore is a save
//! like any other, so the version it replaces is kept in turn.

use super::app::{App, Effect, Overlay};
use super::keymap::Action;
use super::theme::Theme;
use crate::app::AppError;
use crate::app::backups::{Backup, Restore};
use ratatui::style::Style;

/// `b` (list the kept versions) and Enter in the list (the selected one's diff).
pub fn on_action(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::Backups => vec![Effect::LoadBackups],
        Action::RestoreVersion => {
            let Some(Overlay::Backups { list, selected, .. }) = &app.overlay else {
                return vec![];
            };
            let Some(id) = list.get(*selected).map(|b| b.id.clone()) else {
                return vec![];
            };
            if !app.pending.is_empty() {
                app.error("save or undo your edits first: restoring replaces the file on disk");
                return vec![];
            }
            vec![Effect::Restore { id, write: false }]
        }
        _ => vec![],
    }
}

/// Up/Down/PgUp/PgDn/Home/End in the list move the selection (one row per version) and keep
/// it in view; false when the list is not open.
pub fn select(app: &mut App, action: Action, page: usize) -> bool {
    let Some(Overlay::Backups {
        list,
        selected,
        scroll,
    }) = &mut app.overlay
    else {
        return false;
    };
    let last = list.len().saturating_sub(1);
    *selected = match action {
        Action::Up => selected.saturating_sub(1),
        Action::Down => (*selected + 1).min(last),
        Action::PageUp => selected.saturating_sub(page),
        Action::PageDown => (*selected + page).min(last),
        Action::Top => 0,
        _ => last,
    };
    if *selected < *scroll {
        *scroll = *selected;
    } else if *selected >= *scroll + page {
        *scroll = *selected + 1 - page;
    }
    true
}

/// The kept versions arrived: the list, or why there is none.
pub fn on_list(app: &mut App, r: Result<Vec<Backup>, AppError>) -> Vec<Effect> {
    match r {
        Ok(list) if list.is_empty() => {
            app.info("no kept version yet: a save keeps the version it replaces")
        }
        Ok(list) => {
            app.overlay = Some(Overlay::Backups {
                list,
                selected: 0,
                scroll: 0,
            })
        }
        Err(e) => app.error(e.to_string()),
    }
    vec![]
}

/// A restore's diff (asked before writing) or its result (the file read again).
pub fn on_restore(app: &mut App, r: Result<Restore, AppError>) -> Vec<Effect> {
    match r {
        Ok(r) if r.diff.is_empty() => {
            app.info(format!("version {} is the file as it is now", r.id));
        }
        Ok(r) if !r.written => {
            app.overlay = Some(Overlay::Restore {
                id: r.id,
                diff: r.diff,
                scroll: 0,
            });
        }
        Ok(r) => {
            let list = app.keymap.key_for(
                super::keymap::Scope::Screen(super::screens::Tab::Flags),
                Action::Backups,
            );
            app.info(format!(
                "restored version {} (the version it replaced is kept: {list} lists it)",
                r.id
            ));
            return vec![Effect::Load(Vec::new())];
        }
        Err(e) => app.error(e.to_string()),
    }
    vec![]
}

/// Lines of a box, each in one style.
type Lines = Vec<(String, Style)>;

/// The list box: title, one line per version (the selected one marked), the keys pinned.
pub fn list_box(
    list: &[Backup],
    selected: usize,
    keys: (&str, &str),
    theme: &Theme,
) -> (String, Lines, Lines) {
    let lines = list
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let when = b.saved_at.as_deref().unwrap_or("before the first save");
            let text = format!(
                "{} {:<8} {:<22} {:>3} lines differ",
                if i == selected { ">" } else { " " },
                b.id,
                when,
                b.lines_changed
            );
            let style = if i == selected {
                theme.selected()
            } else {
                theme.text()
            };
            (text, style)
        })
        .collect();
    let (restore, close) = keys;
    let pinned = vec![(
        format!("{restore} shows what restoring it changes · {close} closes"),
        theme.dim(),
    )];
    ("Kept versions (newest first)".to_string(), lines, pinned)
}

/// The restore question: the diff from the file now to the version, the answer pinned.
pub fn restore_box(id: &str, diff: &str, theme: &Theme) -> (String, Lines, Lines) {
    let lines = diff
        .lines()
        .map(|l| (l.to_string(), super::overlay::diff_style(l, theme)))
        .collect();
    let pinned = vec![(
        "y restores it (the file now is kept in turn) · n cancels".to_string(),
        theme.warn(),
    )];
    (format!("Restore version {id}?"), lines, pinned)
}
