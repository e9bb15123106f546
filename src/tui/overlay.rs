//! Boxes drawn over the screen: help, the guided tour, the diff before saving, errors, the
//! message log, the questions. The ones that can be taller than the terminal scroll
//! (`scroll.rs`).

use crate::config::diag::Severity;
use crate::tui::app::{App, Level, Overlay, TOUR};
use crate::tui::keymap::{Action, Scope};
use crate::tui::scroll::{self, ScrollBox};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

/// A box of at most `w`×`h` centred in `area`.
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

fn boxed(f: &mut Frame, area: Rect, title: &str, lines: Vec<Line>, theme: &Theme) {
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(format!(" {title} "), theme.title())),
        ),
        area,
    );
}

/// Draws the open box; one that scrolls keeps its offset within its rows and makes `app.page`
/// its height (PgUp/PgDn move by it).
pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme) {
    let full = f.area();
    if let Some(b) = scroll_box(app, theme, full)
        && let Some(at) = app.overlay.as_mut().and_then(Overlay::scroll_mut)
    {
        app.page = scroll::draw(f, full, &b, at, theme);
        return;
    }
    match &app.overlay {
        None
        | Some(Overlay::Help { .. })
        | Some(Overlay::Diff { .. })
        | Some(Overlay::Error { .. })
        | Some(Overlay::Messages { .. })
        | Some(Overlay::Backups { .. })
        | Some(Overlay::Restore { .. }) => {}
        Some(Overlay::Tour(i)) => draw_tour(f, full, app, theme, *i),
        Some(Overlay::ConfirmQuit) => draw_quit(f, full, app, theme),
        Some(Overlay::ConfirmLaunch(launch)) => draw_launch(f, full, theme, launch),
        Some(Overlay::ConfirmApply(plan)) => draw_apply(f, full, theme, plan),
        Some(Overlay::Acknowledge { rule, text, reason }) => {
            draw_ack(f, full, theme, (rule, text, reason))
        }
    }
}

fn draw_tour(f: &mut Frame, full: Rect, app: &App, theme: &Theme, i: usize) {
    let (title, text) = TOUR[i.min(TOUR.len() - 1)];
    // The keys in force (the defaults file's `[keys]` may have moved them).
    let km = &app.keymap;
    let key = |scope, action| km.key_for(scope, action);
    let (next, back) = (
        key(Scope::Tour, Action::TourNext),
        key(Scope::Tour, Action::TourBack),
    );
    let (skip, quit) = (
        key(Scope::Overlay, Action::CloseOverlay),
        key(Scope::Overlay, Action::Quit),
    );
    let text = text
        .replace("{skip}", &skip)
        .replace("{tour}", &key(Scope::Global, Action::Tour))
        .replace("{quit}", &quit);
    let lines = vec![
        Line::raw(text.clone()),
        Line::raw(""),
        Line::styled(
            format!(
                "{}/{} · {next} next · {back} back · {skip} skip the tour · {quit} quit",
                i + 1,
                TOUR.len()
            ),
            theme.dim(),
        ),
    ];
    // Height: the wrapped text plus the blank line, the hint line and the border.
    let w = 70u16.min(full.width);
    let text_rows = (text.chars().count() as u16).div_ceil(w.saturating_sub(4).max(1)) + 1;
    let area = centered(full, w, text_rows + 4);
    boxed(f, area, title, lines, theme);
}

fn draw_quit(f: &mut Frame, full: Rect, app: &App, theme: &Theme) {
    let mut lines = Vec::new();
    if app.trial_running() {
        lines.push(Line::raw(
            "A trial is running. Stop it (its whole process group) and quit?",
        ));
    }
    if !app.pending.is_empty() {
        lines.push(Line::raw(format!(
            "{} will be lost (s saves them first).",
            count(app.pending.len(), "unsaved edit", "unsaved edits")
        )));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled("y quit · n stay", theme.warn()));
    let area = centered(full, 60, lines.len() as u16 + 4);
    boxed(f, area, "Quit?", lines, theme);
}

fn draw_launch(f: &mut Frame, full: Rect, theme: &Theme, launch: &crate::tui::launch::Launch) {
    let mut lines: Vec<Line> = launch.lines.iter().map(|l| Line::raw(l.clone())).collect();
    lines.push(Line::raw(""));
    lines.push(Line::styled("y start · n not now", theme.warn()));
    let w = 72u16.min(full.width);
    let inner = usize::from(w.saturating_sub(2).max(1));
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
    let area = centered(full, w, rows as u16 + 2);
    boxed(f, area, &launch.title, lines, theme);
}

fn draw_apply(
    f: &mut Frame,
    full: Rect,
    theme: &Theme,
    plan: &crate::app::views::trials::ApplyPlan,
) {
    let mut lines = vec![
        Line::raw(format!(
            "Trial {} ran another experiment: {}.",
            plan.trial,
            plan.other_experiment.clone().unwrap_or_default()
        )),
        Line::raw(format!(
            "Apply the {} it ran differently from this one as unsaved edits?",
            count(plan.edits.len(), "value", "values")
        )),
    ];
    for (k, v) in plan.edits.iter().take(8) {
        lines.push(Line::styled(format!("  {k}: {v}"), theme.pending()));
    }
    if plan.edits.len() > 8 {
        lines.push(Line::styled(
            format!("  … and {} more", plan.edits.len() - 8),
            theme.dim(),
        ));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "y apply · n keep the config as it is",
        theme.warn(),
    ));
    let area = centered(full, 72, lines.len() as u16 + 4);
    boxed(f, area, "Apply another experiment's trial?", lines, theme);
}

fn draw_ack(f: &mut Frame, full: Rect, theme: &Theme, (rule, text, reason): (&str, &str, &str)) {
    let lines = vec![
        Line::raw(format!("To do: {text}")),
        Line::raw(""),
        Line::raw(format!(
            "Acknowledge rule `{rule}` for this experiment: the checklist shows it as acknowledged and recommend stops proposing it. Why?"
        )),
        Line::styled(format!("> {reason}_"), theme.pending()),
        Line::raw(""),
        Line::styled("Enter acknowledges · Esc cancels", theme.warn()),
    ];
    let w = 72u16.min(full.width);
    let inner = usize::from(w.saturating_sub(2).max(1));
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
    let area = centered(full, w, rows as u16 + 2);
    boxed(f, area, "Acknowledge a to-do", lines, theme);
}

use crate::util::text::count;

/// The box of an overlay that scrolls: its title, text, pinned lines and size.
fn scroll_box(app: &App, theme: &Theme, full: Rect) -> Option<ScrollBox> {
    let key = |scope, action| app.keymap.key_for(scope, action);
    let close = key(Scope::Overlay, Action::CloseOverlay);
    let (title, lines, pinned, width) = match app.overlay.as_ref()? {
        Overlay::Help { .. } => (
            format!("Keys · {close} closes"),
            super::help::lines(&app.keymap, app.tab, theme),
            vec![],
            72,
        ),
        Overlay::Diff { save, .. } => {
            let (lines, pinned) = diff_lines(app, *save, &close, theme);
            let title = if *save {
                "Save these changes?"
            } else {
                "Unsaved changes"
            };
            (
                title.to_string(),
                lines,
                pinned,
                full.width.saturating_sub(4),
            )
        }
        Overlay::Error { errors, .. } => {
            let mut lines = Vec::new();
            for (i, e) in errors.iter().enumerate() {
                if i > 0 {
                    lines.push((String::new(), Style::default()));
                }
                lines.push((e.clone(), theme.error()));
            }
            let hint = format!(
                "Enter or {close} closes · {} all messages",
                key(Scope::Global, Action::Messages)
            );
            let title = match errors.len() {
                1 => "Error".to_string(),
                n => format!("{n} errors"),
            };
            (title, lines, vec![(hint, theme.dim())], 76)
        }
        Overlay::Messages { .. } => {
            let lines: Vec<(String, Style)> = if app.messages.is_empty() {
                vec![("nothing said yet".into(), theme.dim())]
            } else {
                app.messages
                    .iter()
                    .map(|(level, m)| match level {
                        Level::Error => (format!("error: {m}"), theme.error()),
                        Level::Info => (m.clone(), Style::default()),
                    })
                    .collect()
            };
            let title = format!("Messages · newest last · {close} closes");
            (title, lines, vec![], full.width.saturating_sub(4))
        }
        Overlay::Backups { list, selected, .. } => {
            let restore = key(Scope::Versions, Action::RestoreVersion);
            let (title, lines, pinned) =
                super::backups::list_box(list, *selected, (&restore, &close), theme);
            (title, lines, pinned, 72)
        }
        Overlay::Restore { id, diff, .. } => {
            let (title, lines, pinned) = super::backups::restore_box(id, diff, theme);
            (title, lines, pinned, full.width.saturating_sub(4))
        }
        _ => return None,
    };
    Some(ScrollBox {
        title,
        lines,
        pinned,
        width,
        height: full.height.saturating_sub(2),
    })
}

/// Lines of a box, each in one style.
type Lines = Vec<(String, Style)>;

/// A unified diff's line in its colour: added green, removed red.
pub fn diff_style(l: &str, theme: &Theme) -> Style {
    if l.starts_with('+') && !l.starts_with("+++") {
        theme.ok()
    } else if l.starts_with('-') && !l.starts_with("---") {
        theme.error()
    } else {
        theme.text()
    }
}

/// The diff box: the diagnostics, each edit as `key: old → new`, then the file's diff; the
/// answer (or why there is none) pinned below, so it shows whatever the scroll.
fn diff_lines(app: &App, save: bool, close: &str, theme: &Theme) -> (Lines, Lines) {
    let plan = app.plan.as_ref().filter(|_| !app.checking);
    let Some(plan) = plan else {
        return (
            vec![("checking the edits…".into(), Style::default())],
            vec![(format!("{close} closes"), theme.dim())],
        );
    };
    let mut lines = Vec::new();
    for d in &plan.diagnostics {
        let style = match d.severity {
            Severity::Error => theme.error(),
            Severity::Warning => theme.warn(),
            Severity::Info => theme.dim(),
        };
        lines.push((format!("{}: {}", d.severity.label(), d.message), style));
    }
    for c in &plan.changes {
        lines.push((format!("{}: {} → {}", c.key, c.old, c.new), theme.pending()));
    }
    if !plan.changes.is_empty() {
        lines.push((String::new(), Style::default()));
    }
    for l in plan.diff.lines() {
        lines.push((l.to_string(), diff_style(l, theme)));
    }
    let answer = match (save, plan.refused) {
        (true, false) => (
            format!(
                "y writes the file ({} lists the versions kept) · n cancels",
                app.keymap.key_for(
                    Scope::Screen(crate::tui::screens::Tab::Flags),
                    Action::Backups
                )
            ),
            theme.warn(),
        ),
        (true, true) => (
            format!("cannot be saved: fix the errors above (u undoes) · {close}"),
            theme.error(),
        ),
        (false, _) => (format!("{close} closes"), theme.dim()),
    };
    (lines, vec![answer])
}
