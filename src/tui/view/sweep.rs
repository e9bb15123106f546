//! Sweep screen: the knob spaces (and why one does not apply), a running sweep's progress, and
//! the last result ranked with each candidate's verdict.

use super::{fit, num};
use crate::domain::study::VerdictKind;
use crate::tui::app::App;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, List, ListItem, ListState, Paragraph, Row, Table};

pub fn draw(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Some(c) = &app.config else { return };
    let [left, right] = if area.width >= 100 {
        Layout::horizontal([Constraint::Length(40), Constraint::Min(30)]).areas(area)
    } else {
        let n = c.spaces.len() as u16 + 2;
        Layout::vertical([Constraint::Length(n), Constraint::Min(3)]).areas(area)
    };
    let w = usize::from(left.width.saturating_sub(4));
    let items: Vec<ListItem> = c
        .spaces
        .iter()
        .map(|s| {
            let (mark, style) = match &s.not_applicable {
                None => ("   ", theme.text()),
                Some(_) => ("n/a", theme.dim()),
            };
            ListItem::new(Line::from(vec![
                Span::styled(mark, style),
                Span::styled(
                    fit(
                        &format!(" {} ({} candidates)", s.name, s.candidates),
                        w.saturating_sub(3),
                    ),
                    style,
                ),
            ]))
        })
        .collect();
    let profile = app.profiles.get(app.profile).map_or("-", String::as_str);
    let mut state = ListState::default().with_selected(Some(app.sweep.selected));
    f.render_stateful_widget(
        List::new(items)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" Spaces · profile {profile} "))
                    .title_bottom(" profile: ←→ on Run "),
            )
            .highlight_style(theme.selected()),
        left,
        &mut state,
    );
    let selected = c.spaces.get(app.sweep.selected);
    if app.sweep.running || app.sweep.result.is_none() {
        let mut lines: Vec<Line> = Vec::new();
        if let Some(s) = selected {
            lines.push(Line::styled(s.description.clone(), theme.title()));
            if let Some(why) = &s.not_applicable {
                lines.push(Line::styled(why.clone(), theme.warn()));
            }
        }
        if app.sweep.log.is_empty() && !app.sweep.running {
            lines.push(Line::raw(""));
            lines.push(Line::raw(
                "r sweeps it: short trials for every legal candidate, longer ones for the best, \
                 until the leader is separated from the rest by more than the noise.",
            ));
        }
        let h = usize::from(right.height.saturating_sub(2)).saturating_sub(lines.len());
        let n = app.sweep.log.len();
        let iw = usize::from(right.width.saturating_sub(2));
        for l in app.sweep.log.iter().skip(n.saturating_sub(h)) {
            lines.push(Line::raw(fit(l, iw)));
        }
        let title = if app.sweep.running {
            " Sweep · running "
        } else {
            " Sweep "
        };
        f.render_widget(
            Paragraph::new(lines)
                .wrap(ratatui::widgets::Wrap { trim: false })
                .block(Block::default().borders(Borders::ALL).title(title)),
            right,
        );
        return;
    }
    let Some((study, rec)) = &app.sweep.result else {
        return;
    };
    let rows: Vec<Row> = rec
        .candidates
        .iter()
        .map(|c| {
            let style = match c.verdict {
                VerdictKind::Winner => theme.ok(),
                VerdictKind::Tie | VerdictKind::Slower => theme.text(),
                _ => theme.dim(),
            };
            let ci = match (c.ci_low_ms, c.ci_high_ms) {
                (Some(l), Some(h)) => format!("{l:.0}–{h:.0}"),
                _ => "-".into(),
            };
            Row::new(vec![
                Cell::from(c.id.to_string()),
                Cell::from(c.verdict.as_str()),
                Cell::from(num(c.median_ms, 1, "")),
                Cell::from(ci),
                Cell::from(c.n.to_string()),
                Cell::from(super::sig(
                    c.peak_memory_bytes.map(|b| b as f64 / (1u64 << 30) as f64),
                    "",
                )),
                Cell::from(format!(
                    "{} · {}",
                    crate::domain::study::settings(&c.overrides),
                    c.why
                )),
            ])
            .style(style)
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(3),
            Constraint::Length(13),
            Constraint::Length(9),
            Constraint::Length(11),
            Constraint::Length(4),
            Constraint::Length(6),
            Constraint::Min(10),
        ],
    )
    .header(
        Row::new(vec![
            "id",
            "verdict",
            "median",
            "95% CI",
            "n",
            "GiB",
            "settings · why",
        ])
        .style(theme.title()),
    )
    .block(Block::default().borders(Borders::ALL).title(format!(
        " {study}: {} trials, {:.1} GPU-min · a applies the pick ",
        rec.trials,
        rec.gpu_seconds / 60.0
    )));
    f.render_widget(table, right);
}
