//! Two trials compared, drawn under the Trials list: the flags they ran differently (both
//! values), step time, throughput and memory with the change and its interval, the verdict,
//! and the two step-time curves overlaid.

use crate::app::views::compare::{Change, CompareVerdict, Comparison, show_json};
use crate::tui::theme::Theme;
use crate::tui::widgets::{fit, fit_num};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::symbols;
use ratatui::text::Span;
use ratatui::widgets::{Axis, Block, Borders, Cell, Chart, Dataset, GraphType, Row, Table};

fn change_text(c: &Change) -> String {
    match c.ci95_pct {
        Some(ci) => format!("{:+.1} ± {ci:.1} %", c.change_pct),
        None => format!("{:+.1} %", c.change_pct),
    }
}

/// A row of the table: its cells (name, trial a, trial b, change) and its style; `figures`
/// when the trials' cells are numbers (shortened, never cut, where a column is too narrow).
struct Line4 {
    cells: [String; 4],
    style: Style,
    figures: bool,
}

fn line(cells: [&str; 4], style: Style, figures: bool) -> Line4 {
    Line4 {
        cells: cells.map(str::to_string),
        style,
        figures,
    }
}

fn figure(name: &str, c: Option<&Change>, prec: usize, theme: &Theme) -> Line4 {
    match c {
        Some(c) => Line4 {
            cells: [
                name.to_string(),
                format!("{:.prec$}", c.a),
                format!("{:.prec$}", c.b),
                change_text(c),
            ],
            style: theme.text(),
            figures: true,
        },
        None => line([name, "-", "-", ""], theme.text(), true),
    }
}

/// Peak memory with what each figure measures; two kinds are shown, not compared.
fn memory_row(c: &Comparison, theme: &Theme) -> Line4 {
    let tag = |k: Option<crate::domain::trial::MemorySource>| k.map_or("", |k| k.tag());
    let [ka, kb] = c.peak_mem_kinds;
    match (&c.peak_mem_gib, ka == kb) {
        (Some(ch), true) => figure(&format!("peak GiB ({})", tag(ka)), Some(ch), 2, theme),
        (_, false) => line(
            ["peak GiB", tag(ka), tag(kb), "not comparable"],
            theme.text(),
            false,
        ),
        (None, true) => line(["peak GiB", "-", "-", ""], theme.text(), true),
    }
}

/// The table's rows: the figures, the verdict, the experiments when they differ, and the
/// settings the trials ran differently.
fn rows(c: &Comparison, theme: &Theme) -> Vec<Line4> {
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
        figure(&step, c.median_step_ms.as_ref(), 1, theme),
        figure("tokens/s/GPU", c.tokens_per_s_per_gpu.as_ref(), 0, theme),
        figure("TFLOP/s/GPU", c.tflops_per_gpu.as_ref(), 1, theme),
        memory_row(c, theme),
        line(
            [
                &format!("verdict ({} vs {})", c.b, c.a),
                "",
                "",
                c.verdict.text(),
            ],
            verdict_style,
            false,
        ),
    ];
    if c.experiments[0] != c.experiments[1] {
        let [a, b] = &c.experiments;
        rows.push(line(["experiment", a, b, ""], theme.warn(), false));
    }
    if c.differences.is_empty() {
        rows.push(line(
            ["settings", "", "", "ran the same values"],
            theme.text(),
            false,
        ));
    }
    for d in &c.differences {
        let (a, b) = (show_json(&d.a), show_json(&d.b));
        rows.push(line([&d.flag, &a, &b, ""], theme.pending(), false));
    }
    rows
}

/// The widest cell of column `i` among the figures' rows (the settings' values may be long:
/// they are cut with `…` rather than widen the column).
fn need(rows: &[Line4], i: usize) -> u16 {
    rows.iter()
        .filter(|r| r.figures || i == 3)
        .map(|r| r.cells[i].chars().count())
        .max()
        .unwrap_or(0)
        .max(7) as u16
}

/// The columns' widths in `inner` columns: the trials' figures and the change as wide as
/// their widest (every digit shown), then the names; where that leaves a name under 12
/// columns, the change gives way first, then the figures (shortened: `17.5k`).
fn widths(rows: &[Line4], inner: u16) -> [u16; 4] {
    let mut w = [0, need(rows, 1), need(rows, 2), need(rows, 3).min(26)];
    let names = rows
        .iter()
        .map(|r| r.cells[0].chars().count())
        .max()
        .unwrap_or(0) as u16;
    let room = inner.saturating_sub(3);
    let min_name = names.min(12);
    let mut over = (min_name + w[1] + w[2] + w[3]).saturating_sub(room);
    for (i, floor) in [(3, 8), (2, 5), (1, 5)] {
        let give = over.min(w[i].saturating_sub(floor));
        w[i] -= give;
        over -= give;
    }
    // What is left: the names as wide as the longest (24 at most), the change as its header
    // (16), the figures' columns up to 14, the rest to the change.
    let mut extra = room.saturating_sub(w[1] + w[2] + w[3]);
    w[0] = extra.min(names.min(24));
    extra -= w[0];
    for (i, up_to) in [(3, 16u16), (1, 14), (2, 14)] {
        let add = extra.min(up_to.saturating_sub(w[i]));
        w[i] += add;
        extra -= add;
    }
    w[3] += extra;
    w
}

/// The table's width that shows every name and figure whole (borders included).
fn natural_width(rows: &[Line4]) -> u16 {
    let names = rows
        .iter()
        .map(|r| r.cells[0].chars().count())
        .max()
        .unwrap_or(0) as u16;
    names.min(24) + need(rows, 1) + need(rows, 2) + need(rows, 3).min(26) + 3 + 2
}

pub fn draw(f: &mut Frame, c: &Comparison, theme: &Theme, area: Rect) {
    let both = !c.steps[0].is_empty() && !c.steps[1].is_empty();
    let lines = rows(c, theme);
    // The curves beside the table from 100 columns, the table keeping the room its figures
    // need.
    let [left, right] = if both && area.width >= 100 {
        let table_w = natural_width(&lines).clamp(area.width * 55 / 100, area.width - 30);
        Layout::horizontal([Constraint::Length(table_w), Constraint::Fill(1)]).areas(area)
    } else {
        [area, Rect::default()]
    };
    let w = widths(&lines, left.width.saturating_sub(2));
    let cut = |i: usize, text: &str, figures: bool| {
        let cols = usize::from(w[i]);
        if figures && (i == 1 || i == 2) {
            fit_num(text, cols)
        } else {
            fit(text, cols)
        }
    };
    let table_rows: Vec<Row> = lines
        .iter()
        .map(|l| {
            let cells = (0..4).map(|i| Cell::from(cut(i, &l.cells[i], l.figures)));
            Row::new(cells.collect::<Vec<_>>()).style(l.style)
        })
        .collect();
    let header = [
        String::new(),
        format!("trial {}", c.a),
        format!("trial {}", c.b),
        "change (95 % CI)".into(),
    ];
    let header: Vec<String> = header
        .iter()
        .enumerate()
        .map(|(i, h)| cut(i, h, false))
        .collect();
    let table = Table::new(table_rows, w.map(Constraint::Length))
        .header(Row::new(header).style(theme.title()))
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
