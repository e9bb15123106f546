//! Boxes drawn over the screen: help, the guided tour, the diff before saving, quit confirmation.

use crate::config::diag::Severity;
use crate::tui::app::{App, Overlay, TOUR};
use crate::tui::keymap::{self, Action, HelpSection, Scope};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
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

/// The key map: one column when it fits the height, else two (80×24 shows it all).
fn draw_help(f: &mut Frame, full: Rect, theme: &Theme, keys: &keymap::Keymap) {
    let help = keymap::help(keys);
    let help = help.as_slice();
    let section_lines = |(section, keys): &HelpSection, key_w: usize| {
        let mut v = vec![Line::styled(section.clone(), theme.title())];
        for (k, what) in keys {
            v.push(Line::raw(format!(" {k:<key_w$} {what}")));
        }
        v
    };
    let total: usize = help.iter().map(|(_, k)| k.len() + 1).sum::<usize>() + 1;
    let fits_one = total + 2 <= usize::from(full.height);
    if fits_one {
        let mut lines: Vec<Line> = help.iter().flat_map(|s| section_lines(s, 20)).collect();
        lines.push(Line::styled("Esc closes", theme.dim()));
        let longest = lines.iter().map(Line::width).max().unwrap_or(0) as u16;
        let w = (longest + 2).max(40).min(full.width);
        let inner = usize::from(w.saturating_sub(2).max(1));
        let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
        let area = centered(full, w, rows as u16 + 2);
        boxed(f, area, "Keys", lines, theme);
        return;
    }
    // Two columns: sections split where the taller column is shortest; key names narrower.
    let sizes: Vec<usize> = help.iter().map(|(_, k)| k.len() + 1).collect();
    let split = (1..help.len())
        .min_by_key(|&i| {
            let left: usize = sizes[..i].iter().sum();
            let right: usize = sizes[i..].iter().sum::<usize>() + 1;
            left.max(right)
        })
        .unwrap_or(help.len());
    let col = |secs: &[HelpSection]| -> Vec<Line> {
        secs.iter().flat_map(|s| section_lines(s, 14)).collect()
    };
    let left = col(&help[..split]);
    let mut right = col(&help[split..]);
    right.push(Line::styled("Esc closes", theme.dim()));
    let h = left.len().max(right.len()) as u16 + 2;
    let area = centered(full, full.width, h);
    f.render_widget(Clear, area);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" Keys ", theme.title()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let half = inner.width / 2;
    let l = Rect {
        width: half,
        ..inner
    };
    let r = Rect {
        x: inner.x + half,
        width: inner.width - half,
        ..inner
    };
    f.render_widget(Paragraph::new(left).wrap(Wrap { trim: false }), l);
    f.render_widget(Paragraph::new(right).wrap(Wrap { trim: false }), r);
}

pub fn draw(f: &mut Frame, app: &App, theme: &Theme) {
    let full = f.area();
    match &app.overlay {
        None => {}
        Some(Overlay::Help) => draw_help(f, full, theme, &app.keymap),
        Some(Overlay::Tour(i)) => {
            let (title, text) = TOUR[(*i).min(TOUR.len() - 1)];
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
        Some(Overlay::ConfirmQuit) => {
            let mut lines = Vec::new();
            if app.trial_running() {
                lines.push(Line::raw(
                    "A trial is running. Stop it (its whole process group) and quit?",
                ));
            }
            if !app.pending.is_empty() {
                lines.push(Line::raw(format!(
                    "{} unsaved edit(s) will be lost (s saves them first).",
                    app.pending.len()
                )));
            }
            lines.push(Line::raw(""));
            lines.push(Line::styled("y quit · n stay", theme.warn()));
            let area = centered(full, 60, lines.len() as u16 + 4);
            boxed(f, area, "Quit?", lines, theme);
        }
        Some(Overlay::ConfirmLaunch(launch)) => {
            let mut lines: Vec<Line> = launch.lines.iter().map(|l| Line::raw(l.clone())).collect();
            lines.push(Line::raw(""));
            lines.push(Line::styled("y start · n not now", theme.warn()));
            let w = 72u16.min(full.width);
            let inner = usize::from(w.saturating_sub(2).max(1));
            let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
            let area = centered(full, w, rows as u16 + 2);
            boxed(f, area, &launch.title, lines, theme);
        }
        Some(Overlay::ConfirmApply(plan)) => {
            let mut lines = vec![
                Line::raw(format!(
                    "Trial {} ran another experiment: {}.",
                    plan.trial,
                    plan.other_experiment.clone().unwrap_or_default()
                )),
                Line::raw(format!(
                    "Apply the {} value(s) it ran differently from this one as unsaved edits?",
                    plan.edits.len()
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
        Some(Overlay::Acknowledge { rule, text, reason }) => {
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
        Some(Overlay::Diff { save }) => {
            let mut lines: Vec<Line> = Vec::new();
            if let Some(plan) = &app.plan {
                for d in &plan.diagnostics {
                    let style = match d.severity {
                        Severity::Error => theme.error(),
                        Severity::Warning => theme.warn(),
                        Severity::Info => theme.dim(),
                    };
                    lines.push(Line::styled(
                        format!("{}: {}", d.severity.label(), d.message),
                        style,
                    ));
                }
                for l in plan.diff.lines() {
                    let style = if l.starts_with('+') && !l.starts_with("+++") {
                        theme.ok()
                    } else if l.starts_with('-') && !l.starts_with("---") {
                        theme.error()
                    } else {
                        theme.text()
                    };
                    lines.push(Line::styled(l.to_string(), style));
                }
                lines.push(Line::raw(""));
                let refused = plan.refused;
                lines.push(match (save, refused) {
                    (true, false) => Line::styled(
                        "y writes the file (atomically; .orig and .bak.1 kept) · n cancels",
                        theme.warn(),
                    ),
                    (true, true) => Line::styled(
                        "cannot be saved: fix the errors above (u undoes) · Esc",
                        theme.error(),
                    ),
                    (false, _) => Line::styled("Esc closes", theme.dim()),
                });
            } else {
                lines.push(Line::raw("checking the edits…"));
            }
            let area = centered(
                full,
                full.width.saturating_sub(4),
                full.height.saturating_sub(2),
            );
            let title = if *save {
                "Save these changes?"
            } else {
                "Unsaved changes"
            };
            boxed(f, area, title, lines, theme);
        }
    }
}
