//! Two trials compared, drawn under the Trials list: the flags they ran differently (both
//! values), step time, throughput and memory with the change and its interval, the verdict,
//! and the two step-time curves overlaid.

use crate::app::views::compare::{Change, CompareVerdict, Comparison, show_json};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::symbols;
use ratatui::text::Span;
use ratatui::widgets::{Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Row, Table};

fn change_text(c: &Change) -> String {
    match c.ci95_pct {
        Some(ci) => format!("{:+.1} ± {ci:.1} %", c.change_pct),
        None => format!("{:+.1} %", c.change_pct),
    }
}

fn figure<'a>(name: &'a str, c: Option<&Change>, prec: usize) -> Row<'a> {
    match c {
        Some(c) => Row::new(vec![
            Cell::from(name),
            Cell::from(format!("{:.prec$}", c.a)),
            Cell::from(format!("{:.prec$}", c.b)),
            Cell::from(change_text(c)),
        ]),
        None => Row::new(vec![Cell::from(name), Cell::from("-"), Cell::from("-")]),
    }
}

/// Peak memory with what each figure measures; two kinds are shown, not compared.
fn memory_row(c: &Comparison) -> Row<'static> {
    let tag = |k: Option<crate::domain::trial::MemorySource>| k.map_or("", |k| k.tag());
    let [ka, kb] = c.peak_mem_kinds;
    match (&c.peak_mem_gib, ka == kb) {
        (Some(ch), true) => Row::new(vec![
            Cell::from(format!("peak GiB ({})", tag(ka))),
            Cell::from(format!("{:.2}", ch.a)),
            Cell::from(format!("{:.2}", ch.b)),
            Cell::from(change_text(ch)),
        ]),
        (_, false) => Row::new(vec![
            Cell::from("peak GiB"),
            Cell::from(tag(ka)),
            Cell::from(tag(kb)),
            Cell::from("not comparable"),
        ]),
        (None, true) => Row::new(vec![
            Cell::from("peak GiB"),
            Cell::from("-"),
            Cell::from("-"),
        ]),
    }
}

pub fn draw(f: &mut Frame, c: &Comparison, theme: &Theme, area: Rect) {
    let both = !c.steps[0].is_empty() && !c.steps[1].is_empty();
    let [left, right] = if both && area.width >= 100 {
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(area)
    } else {
        [area, Rect::default()]
    };
    let verdict_style = match c.verdict {
        CompareVerdict::Faster => theme.ok(),
        CompareVerdict::Slower => theme.error(),
        _ => theme.text(),
    };
    let step = match c.per_samples {
        Some(n) => format!("median ms/{n} samples"),
        None => "step ms (median)".to_string(),
    };
    let mut rows = vec![
        figure(&step, c.median_step_ms.as_ref(), 1),
        figure("tokens/s/GPU", c.tokens_per_s_per_gpu.as_ref(), 0),
        figure("TFLOP/s/GPU", c.tflops_per_gpu.as_ref(), 1),
        memory_row(c),
        Row::new(vec![
            Cell::from(format!("verdict ({} vs {})", c.b, c.a)),
            Cell::from(""),
            Cell::from(""),
            Cell::from(Span::styled(c.verdict.text(), verdict_style)),
        ]),
    ];
    if c.experiments[0] != c.experiments[1] {
        rows.push(
            Row::new(vec![
                Cell::from("experiment"),
                Cell::from(c.experiments[0].clone()),
                Cell::from(c.experiments[1].clone()),
            ])
            .style(theme.warn()),
        );
    }
    if c.differences.is_empty() {
        rows.push(Row::new(vec![
            Cell::from("settings"),
            Cell::from("ran the same values"),
        ]));
    }
    for d in &c.differences {
        rows.push(
            Row::new(vec![
                Cell::from(d.flag.clone()),
                Cell::from(show_json(&d.a)),
                Cell::from(show_json(&d.b)),
            ])
            .style(theme.pending()),
        );
    }
    let table = Table::new(
        rows,
        [
            Constraint::Length(24),
            Constraint::Length(14),
            Constraint::Length(14),
            Constraint::Min(8),
        ],
    )
    .header(
        Row::new(vec![
            String::new(),
            format!("trial {}", c.a),
            format!("trial {}", c.b),
            "change (95 % CI)".into(),
        ])
        .style(theme.title()),
    )
    .block(Block::default().borders(Borders::ALL).title(" Compare "));
    f.render_widget(table, left);
    if right.width == 0 {
        return;
    }
    let pts: [Vec<(f64, f64)>; 2] =
        [0, 1].map(|i| c.steps[i].iter().map(|&(it, ms)| (it as f64, ms)).collect());
    // The y range from the steady part (warm-up spikes would flatten the curves).
    let steady: Vec<(f64, f64)> = pts
        .iter()
        .flat_map(|p| p.iter().skip(p.len().min(2)).copied())
        .collect();
    let all: Vec<(f64, f64)> = pts.iter().flatten().copied().collect();
    let (xb, _) = super::run::bounds(&all);
    let (_, yb) = super::run::bounds(if steady.is_empty() { &all } else { &steady });
    let datasets: Vec<Dataset> = pts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            Dataset::default()
                .name(format!("trial {}", if i == 0 { c.a } else { c.b }))
                .marker(symbols::Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.series(i))
                .data(p)
        })
        .collect();
    let chart = Chart::new(datasets)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(" step time, ms per iteration "),
        )
        .x_axis(Axis::default().bounds(xb).labels(vec![
            Span::raw(format!("{:.0}", xb[0])),
            Span::raw("iteration"),
            Span::raw(format!("{:.0}", xb[1])),
        ]))
        .y_axis(Axis::default().bounds(yb).labels(vec![
            Span::raw(format!("{:.0}", yb[0])),
            Span::raw(format!("{:.0}", yb[1])),
        ]));
    f.render_widget(chart, right);
}
