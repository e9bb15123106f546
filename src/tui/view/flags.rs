//! Flags screen: every catalog flag with effective value, default and where the value comes
//! from; the selected flag's help, problems and the value being typed below.

use super::fit;
use crate::app::views::config::FlagRow;
use crate::config::diag::Severity;
use crate::tui::app::App;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme, area: Rect) {
    let detail_h = if area.height >= 30 { 8 } else { 5 };
    let [top, bottom] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(detail_h)]).areas(area);
    app.page = top.height.saturating_sub(3) as usize;
    let wide = area.width >= 120;
    let rows_data = app.visible_flags();
    let mut title = match (&app.flags.step, app.flags.query.is_empty()) {
        (Some(s), _) => format!(" Flags · {} (a: all) ", s.title()),
        (None, false) => format!(" Flags · /{} ", app.flags.query),
        (None, true) => " Flags ".to_string(),
    };
    if app.flags.searching {
        title = format!(" Search: {}▏ ", app.flags.query);
    }
    let name_w = if wide { 34 } else { 28 };
    let value_w = if wide { 18 } else { 14 };
    // What is left for the `from` column (borders, the mark, the gaps between columns).
    let fixed = 2 + 1 + name_w + value_w + 3 + if wide { 12 + 24 + 2 } else { 0 };
    let from_w = (top.width as usize).saturating_sub(fixed).max(8);
    let rows: Vec<Row> = rows_data
        .iter()
        .map(|r| {
            let mark = if r.problems.iter().any(|p| p.0 == Severity::Error) {
                Span::styled("E", theme.error())
            } else if !r.problems.is_empty() {
                Span::styled("W", theme.warn())
            } else if r.pending {
                Span::styled("*", theme.pending())
            } else {
                Span::raw(" ")
            };
            let value_style = if r.pending {
                theme.pending()
            } else if r.source == "default" {
                theme.dim()
            } else {
                theme.text()
            };
            let mut cells = vec![
                Cell::from(mark),
                Cell::from(fit(&r.name, name_w)),
                Cell::from(Span::styled(fit(&r.value, value_w), value_style)),
            ];
            if wide {
                cells.push(Cell::from(Span::styled(fit(&r.default, 12), theme.dim())));
                cells.push(Cell::from(Span::styled(r.step.title(), theme.dim())));
            }
            cells.push(Cell::from(Span::styled(
                fit(&r.source, from_w),
                theme.dim(),
            )));
            Row::new(cells)
        })
        .collect();
    let mut widths = vec![
        Constraint::Length(1),
        Constraint::Length(name_w as u16),
        Constraint::Length(value_w as u16),
    ];
    let mut header = vec!["", "flag", "value"];
    if wide {
        widths.push(Constraint::Length(12));
        widths.push(Constraint::Length(24));
        header.extend(["default", "step"]);
    }
    widths.push(Constraint::Min(10));
    header.push("from");
    let n = rows.len();
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(theme.title()))
        .block(Block::default().borders(Borders::ALL).title(title))
        .row_highlight_style(theme.selected());
    let mut state = TableState::default().with_selected((n > 0).then_some(app.flags.selected));
    f.render_stateful_widget(table, top, &mut state);
    let selected = rows_data.get(app.flags.selected).copied();
    draw_detail(f, app, selected, theme, bottom);
}

/// The selected flag's help, problems and the value being typed (`row`: the selected row of
/// the list just drawn, not filtered and sorted again).
fn draw_detail(f: &mut Frame, app: &App, row: Option<&FlagRow>, theme: &Theme, area: Rect) {
    let Some(r) = row else {
        f.render_widget(
            Paragraph::new("no flag matches").block(Block::default().borders(Borders::ALL)),
            area,
        );
        return;
    };
    let mut lines = Vec::new();
    if let Some(e) = &app.flags.editor {
        let mut spans = vec![
            Span::styled(format!("{} = ", e.key), theme.title()),
            Span::styled(format!("{}▏", e.text), theme.pending()),
        ];
        if !e.choices.is_empty() {
            spans.push(Span::styled(
                format!("  ({})", e.choices.join(" | ")),
                theme.dim(),
            ));
        }
        lines.push(Line::from(spans));
        lines.push(match &e.error {
            Some(err) => Line::styled(err.clone(), theme.error()),
            None => Line::styled(
                format!("valid {} · Enter keeps it as an unsaved edit", e.ty.label()),
                theme.ok(),
            ),
        });
    } else {
        lines.push(Line::from(vec![
            Span::styled(r.name.clone(), theme.title()),
            Span::styled(
                format!(
                    "  {} · {} · default {} · from {}",
                    r.step.title(),
                    r.ty.label(),
                    r.default,
                    r.source
                ),
                theme.dim(),
            ),
        ]));
    }
    for (sev, msg) in &r.problems {
        let style = if *sev == Severity::Error {
            theme.error()
        } else {
            theme.warn()
        };
        lines.push(Line::styled(format!("{}: {msg}", sev.label()), style));
    }
    lines.push(Line::raw(r.help.clone()));
    lines.push(Line::styled(format!("see {}", r.doc), theme.dim()));
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: true })
            .block(Block::default().borders(Borders::ALL)),
        area,
    );
}
