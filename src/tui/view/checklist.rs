//! Checklist screen: the six steps with status on the left, the selected step's why, flags,
//! problems and actions on the right (stacked when the terminal is narrow).

use super::fit;
use crate::checklist::{FindingKind, Status, StepReport};
use crate::tui::app::App;
use crate::tui::model::show_json;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Wrap};

fn status_style(theme: &Theme, s: Status) -> Style {
    match s {
        Status::Done => theme.ok(),
        Status::NeedsAttention => theme.warn(),
        Status::NotApplicable | Status::NotMeasured => theme.dim(),
    }
}

fn status_mark(s: Status) -> &'static str {
    match s {
        Status::Done => "[x]",
        Status::NeedsAttention => "[!]",
        Status::NotApplicable => "[-]",
        Status::NotMeasured => "[?]",
    }
}

pub fn draw(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Some(c) = &app.config else { return };
    let steps = &c.checklist.steps;
    let narrow = area.width < 70;
    let (left, right) = if narrow {
        let [a, b] = Layout::vertical([
            Constraint::Length(steps.len() as u16 + 2),
            Constraint::Min(3),
        ])
        .areas(area);
        (a, b)
    } else {
        let [a, b] = Layout::horizontal([Constraint::Length(36), Constraint::Min(30)]).areas(area);
        (a, b)
    };
    let items: Vec<ListItem> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let w = left.width.saturating_sub(8) as usize;
            ListItem::new(Line::from(vec![
                Span::styled(status_mark(s.status), status_style(theme, s.status)),
                Span::raw(format!(" {}", fit(&format!("{}. {}", i + 1, s.title), w))),
            ]))
        })
        .collect();
    let mut state = ListState::default().with_selected(Some(app.checklist_selected));
    f.render_stateful_widget(
        List::new(items)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" Quick checklist ")
                    .title_bottom(" [x] done [!] to do [?] unmeasured"),
            )
            .highlight_style(theme.selected()),
        left,
        &mut state,
    );
    if let Some(step) = steps.get(app.checklist_selected) {
        draw_step(f, step, theme, right);
    }
}

fn draw_step(f: &mut Frame, s: &StepReport, theme: &Theme, area: Rect) {
    let mut lines: Vec<Line> = Vec::new();
    lines.push(Line::from(vec![
        Span::styled(s.title, theme.title()),
        Span::raw(" — "),
        Span::styled(s.status.label(), status_style(theme, s.status)),
    ]));
    for p in &s.problems {
        lines.push(Line::styled(
            format!("{} {}", p.severity.label(), p.message),
            if p.severity == crate::config::diag::Severity::Error {
                theme.error()
            } else {
                theme.warn()
            },
        ));
    }
    for finding in &s.findings {
        let (mark, style) = match finding.kind {
            FindingKind::Ok => ("ok ", theme.ok()),
            FindingKind::Todo => ("to do ", theme.warn()),
            FindingKind::Info => ("· ", theme.dim()),
        };
        lines.push(Line::from(vec![
            Span::styled(mark, style),
            Span::raw(finding.text.clone()),
        ]));
    }
    if !s.actions.is_empty() {
        lines.push(Line::styled("Next", theme.title()));
        for a in &s.actions {
            lines.push(Line::raw(format!("  {a}")));
        }
    }
    // The why and what next wrap; the flags below take one line each and what is left.
    let block = Block::default().borders(Borders::ALL);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let w = usize::from(inner.width.max(1));
    let text_rows: usize = lines
        .iter()
        .map(|l| {
            let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
            wrapped_rows(&text, w)
        })
        .sum();
    let [top, bottom] =
        Layout::vertical([Constraint::Length(text_rows as u16), Constraint::Min(0)]).areas(inner);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), top);
    if s.flags.is_empty() || bottom.height < 2 {
        return;
    }
    let room = usize::from(bottom.height) - 1;
    let mut flags = vec![Line::styled(
        format!("Flags ({}; Enter edits them)", s.flags.len()),
        theme.title(),
    )];
    let shown = if s.flags.len() > room {
        room.saturating_sub(1)
    } else {
        s.flags.len()
    };
    for fl in s.flags.iter().take(shown) {
        let head = format!("  {} = {}", fl.name, show_json(&fl.value));
        let head = fit(&head, w);
        let rest = w.saturating_sub(head.chars().count() + 2);
        lines_push_flag(&mut flags, head, fit(&fl.source, rest), theme);
    }
    if shown < s.flags.len() {
        flags.push(Line::styled(
            format!("  … {} more on the Flags screen", s.flags.len() - shown),
            theme.dim(),
        ));
    }
    f.render_widget(Paragraph::new(flags), bottom);
}

/// Rows a line takes when wrapped at word boundaries to `w` columns (as the paragraph wraps).
fn wrapped_rows(text: &str, w: usize) -> usize {
    let (mut rows, mut col) = (1, 0usize);
    for word in text.split(' ') {
        let n = word.chars().count();
        let need = if col == 0 { n } else { col + 1 + n };
        if need <= w {
            col = need;
        } else if n > w {
            // A word longer than the line is broken across rows.
            let first = if col == 0 { 0 } else { 1 };
            rows += first + (n.saturating_sub(1)) / w;
            col = n % w;
        } else {
            rows += 1;
            col = n;
        }
    }
    rows
}

fn lines_push_flag(out: &mut Vec<Line<'static>>, head: String, source: String, theme: &Theme) {
    out.push(Line::from(vec![
        Span::raw(head),
        Span::styled(format!("  {source}"), theme.dim()),
    ]));
}
