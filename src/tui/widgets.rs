//! Drawing: a pure function of the state. The frame every screen shares (tabs, the file line,
//! the status line with the key map's hints), then the active screen and any overlay; and the
//! small text helpers the screens use.

use super::app::{App, Level};
use super::screens::{self, Tab};
use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Whatever a screen drew, no control character reaches the terminal: a cell holding one (from
/// a config value or a log line, e.g. an escape sequence) shows `�` instead.
fn visible_cells(buf: &mut ratatui::buffer::Buffer) {
    for cell in buf.content.iter_mut() {
        if cell.symbol().chars().any(crate::util::text::is_control) {
            cell.set_symbol("\u{fffd}");
        }
    }
}

/// The smallest terminal the screens are drawn in (columns, rows); below it a notice says so.
pub const MIN_SIZE: (u16, u16) = (60, 16);

/// The terminal is below [`MIN_SIZE`]: one notice instead of screens cut into pieces (the keys
/// still work: `q` quits, a larger window brings the screens back).
fn draw_too_small(f: &mut Frame, theme: &Theme) {
    let area = f.area();
    let (w, h) = MIN_SIZE;
    let lines = vec![
        Line::styled(
            fit(
                &format!("terminal too small (need {w}×{h})"),
                area.width.into(),
            ),
            theme.error(),
        ),
        Line::raw(fit(
            &format!("now {}×{} · q quits", area.width, area.height),
            area.width.into(),
        )),
    ];
    let y = area.y + area.height.saturating_sub(lines.len() as u16) / 2;
    let rect = Rect {
        y,
        height: area.height.min(lines.len() as u16),
        ..area
    };
    f.render_widget(
        Paragraph::new(lines).alignment(ratatui::layout::Alignment::Center),
        rect,
    );
}

pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme) {
    let size = f.area();
    if size.width < MIN_SIZE.0 || size.height < MIN_SIZE.1 {
        draw_too_small(f, theme);
        visible_cells(f.buffer_mut());
        return;
    }
    let [top, file, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    app.hits.rows = None;
    app.hits.tabs = draw_tabs(f, app, theme, top);
    draw_file_line(f, app, theme, file);
    let needs_config = matches!(app.tab, Tab::Checklist | Tab::Flags);
    if needs_config && app.config.is_none() {
        let why = app.load_error.clone().unwrap_or_else(|| "reading…".into());
        f.render_widget(
            Paragraph::new(vec![
                Line::styled("The experiment could not be read:", theme.error()),
                Line::raw(why),
                Line::raw(""),
                Line::raw("Fix the file and press R to read it again."),
            ])
            .wrap(ratatui::widgets::Wrap { trim: false }),
            body,
        );
    } else {
        screens::draw(f, app, theme, body);
    }
    draw_status(f, app, theme, status);
    super::overlay::draw(f, app, theme);
    visible_cells(f.buffer_mut());
}

/// The tab line; returns where each tab's label was drawn (for clicks).
fn draw_tabs(f: &mut Frame, app: &App, theme: &Theme, area: Rect) -> Vec<(u16, u16, Tab)> {
    let mut spans = Vec::new();
    for (i, t) in Tab::ALL.iter().enumerate() {
        let label = format!(" {} {} ", i + 1, t.title());
        let style = if *t == app.tab {
            theme.tab_active()
        } else {
            theme.dim()
        };
        spans.push(Span::styled(label, style));
    }
    if app.trial_running() {
        spans.push(Span::styled(" ● trial", theme.warn()));
    }
    if app.screens.sweep.running {
        spans.push(Span::styled(" ● sweep", theme.warn()));
    }
    // The name goes first when the tabs and what runs need the room.
    let title = Span::styled(" primus-tune ", theme.title());
    let mut x = area.x;
    if spans.iter().map(|s| s.width()).sum::<usize>() + title.width() <= area.width as usize {
        x += title.width() as u16;
        spans.insert(0, title);
    }
    let mut hits = Vec::new();
    for t in Tab::ALL {
        let w = format!(" {} {} ", t.index() + 1, t.title()).chars().count() as u16;
        hits.push((x, x + w, t));
        x += w;
    }
    let used: usize = spans.iter().map(|s| s.width()).sum();
    let help = " ? help ";
    if used + help.len() <= area.width as usize {
        spans.push(Span::raw(
            " ".repeat(area.width as usize - used - help.len()),
        ));
        spans.push(Span::styled(help, theme.dim()));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
    hits
}

fn draw_file_line(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let Some(c) = &app.config else {
        f.render_widget(Paragraph::new(" no experiment loaded"), area);
        return;
    };
    let mut what = format!(
        " · {} ({}){} ",
        c.module,
        c.framework,
        c.model
            .as_ref()
            .map_or(String::new(), |m| format!(" · {m}"))
    );
    let mut figures = Vec::new();
    let (e, w) = (c.errors(), c.warnings());
    if e > 0 {
        let text = crate::util::text::count(e, "error", "errors");
        figures.push(Span::styled(format!("{text} "), theme.error()));
    }
    if w > 0 {
        let text = crate::util::text::count(w, "warning", "warnings");
        figures.push(Span::styled(format!("{text} "), theme.warn()));
    }
    if e == 0 && w == 0 {
        figures.push(Span::styled("lint clean ", theme.ok()));
    }
    if !app.pending.is_empty() {
        figures.push(Span::styled(
            format!("{} unsaved ", app.pending.len()),
            theme.pending(),
        ));
    }
    if app.disk_changed {
        figures.push(Span::styled("changed on disk ", theme.error()));
    }
    // The path gives way first (its start), the figures after it must stay visible; the model
    // preset's name goes when even the experiment's file name would be cut.
    let path = crate::util::paths::display_path(&c.path);
    let name_w = c
        .path
        .file_name()
        .map_or(0, |n| n.to_string_lossy().chars().count());
    let figures_w: usize = figures.iter().map(Span::width).sum();
    let mut room = (area.width as usize).saturating_sub(1 + what.chars().count() + figures_w);
    if room < name_w && c.model.is_some() {
        what = format!(" · {} ({}) ", c.module, c.framework);
        room = (area.width as usize).saturating_sub(1 + what.chars().count() + figures_w);
    }
    let mut spans = vec![
        Span::raw(format!(" {}", fit_left(&path, room))),
        Span::raw(what),
    ];
    spans.extend(figures);
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The status line: the last message, else the key hints. A message too long for it is cut
/// with `…` and names the key of the message log, which has it whole (an error is in its box
/// too).
fn draw_status(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let w = usize::from(area.width.saturating_sub(1));
    let said = |s: &str| {
        // A running trial's progress is not kept in the log: cut as it is.
        let progress = app.screens.run.status_line.as_deref() == Some(s);
        if s.chars().count() <= w || progress {
            return fit(s, w);
        }
        let log = format!(
            " ({} shows it whole)",
            app.keymap.key_for(
                super::keymap::Scope::Global,
                super::keymap::Action::Messages
            )
        );
        format!("{}{log}", fit(s, w.saturating_sub(log.chars().count())))
    };
    let line = match &app.status {
        Some((Level::Error, s)) => Line::styled(format!(" {}", said(s)), theme.error()),
        Some((Level::Info, s)) => Line::raw(format!(" {}", said(s))),
        None => Line::styled(format!(" {}", super::keymap::footer(app, w)), theme.dim()),
    };
    f.render_widget(Paragraph::new(line), area);
}

pub use crate::util::text::fit;

/// Cut `s` to `w` columns from the left, with `…` in front when cut (for paths).
pub fn fit_left(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut out = String::from("…");
    out.extend(s.chars().skip(n - (w - 1)));
    out
}

/// A number cut to `w` columns: whole when it fits, else shortened with a unit prefix
/// (`17518` → `17.5k`), else cut with `…` — never silently missing digits.
pub fn fit_num(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    let digits_end = s
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && *c == '-')))
        .map_or(s.len(), |(i, _)| i);
    if let Ok(x) = s[..digits_end].parse::<f64>() {
        let suffix = &s[digits_end..];
        // Fewer decimals first (123.4 → 123), then a unit prefix (17518 → 17.5k).
        let decimals = s[..digits_end].split_once('.').map_or(0, |(_, d)| d.len());
        for prec in (0..decimals).rev() {
            let t = format!("{x:.prec$}{suffix}");
            if t.chars().count() <= w {
                return t;
            }
        }
        for (scale, p) in [(1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T")] {
            let v = x / scale;
            if v.abs() >= 1000.0 {
                continue;
            }
            if v.abs() < 1.0 {
                break;
            }
            for prec in (0..=2).rev() {
                let t = format!("{v:.prec$}{p}{suffix}");
                if t.chars().count() <= w {
                    return t;
                }
            }
            break;
        }
    }
    fit(s, w)
}

/// Each cell's text cut to its column's width: numbers by [`fit_num`], text with `…`.
pub fn fit_cells(cells: Vec<String>, widths: &[u16]) -> Vec<String> {
    cells
        .into_iter()
        .zip(widths.iter().copied().chain(std::iter::repeat(u16::MAX)))
        .map(|(c, w)| {
            let w = usize::from(w);
            let numeric = c
                .chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_digit() || ch == '-')
                && c.chars().any(|ch| ch.is_ascii_digit());
            if numeric { fit_num(&c, w) } else { fit(&c, w) }
        })
        .collect()
}

/// The widths a `Table` gives its columns for these constraints in `width` columns (its
/// inner width; one column of spacing, no highlight symbol), as ratatui lays them out.
pub fn column_widths(constraints: &[Constraint], width: u16) -> Vec<u16> {
    Layout::horizontal(constraints.to_vec())
        .flex(ratatui::layout::Flex::Start)
        .spacing(1)
        .split(Rect::new(0, 0, width, 1))
        .iter()
        .map(|r| r.width)
        .collect()
}

/// A value's origin (`file.yaml:12 via a.yaml → b.yaml`) cut to `w` columns: the `via` chain
/// gives way first, then the path's start, so that `file:line` keeps its line number.
pub fn fit_source(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let (loc, rest) = s.split_once(' ').map_or((s, ""), |(a, b)| (a, b));
    let loc_n = loc.chars().count();
    if loc_n + 2 <= w && !rest.is_empty() {
        return format!("{loc} {}", fit(rest, w - loc_n - 1));
    }
    if loc_n <= w {
        return loc.to_string();
    }
    match loc.rsplit_once(':') {
        Some((path, line)) if line.chars().all(|c| c.is_ascii_digit()) && line.len() + 2 < w => {
            format!("{}:{line}", fit_left(path, w - line.len() - 1))
        }
        _ => fit(s, w),
    }
}

/// A figure with three significant digits (small ones keep their decimals), or `-`.
pub fn sig(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.abs() >= 100.0 || x == 0.0 => format!("{x:.0}{unit}"),
        Some(x) if x.abs() >= 10.0 => format!("{x:.1}{unit}"),
        Some(x) if x.abs() >= 1.0 => format!("{x:.2}{unit}"),
        Some(x) => format!("{x:.3}{unit}"),
    }
}

/// A figure with a unit, or `-`.
pub fn num(v: Option<f64>, prec: usize, unit: &str) -> String {
    v.map_or("-".into(), |x| format!("{x:.prec$}{unit}"))
}

/// The short name of a failure class, as stored (`oom`, `nccl`, ...).
pub fn class_name(c: crate::domain::trial::FailureClass) -> String {
    serde_json::to_value(c)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Rows a line takes when wrapped at word boundaries to `w` columns (as the paragraph wraps).
pub fn wrapped_rows(text: &str, w: usize) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_too_wide_is_shortened_or_marked_never_cut_silently() {
        assert_eq!(fit_num("17518", 8), "17518");
        assert_eq!(fit_num("17518", 5), "17518");
        assert_eq!(fit_num("17518", 4), "18k");
        assert_eq!(fit_num("17518", 3), "18k");
        assert_eq!(fit_num("1751800", 5), "1.75M");
        assert_eq!(fit_num("17518", 2), "1…");
        assert_eq!(fit_num("±3.5%", 3), "±3…");
        assert_eq!(fit_num("123.4", 4), "123");
        assert_eq!(fit_num("123.4", 2), "1…");
    }

    #[test]
    fn cells_are_cut_to_their_columns() {
        let got = fit_cells(vec!["17518".into(), "completed".into()], &[4, 6]);
        assert_eq!(got, ["18k", "compl…"]);
    }

    #[test]
    fn column_widths_follow_the_table_layout() {
        use ratatui::layout::Constraint::{Length, Min};
        assert_eq!(
            column_widths(&[Length(4), Length(6), Min(5)], 40),
            [4, 6, 28]
        );
        // Too narrow: the lengths give way, as in the drawn table.
        let w = column_widths(&[Length(8), Length(8), Min(10)], 20);
        assert!(
            w.iter().map(|x| *x as usize).sum::<usize>() + 2 <= 20,
            "{w:?}"
        );
    }

    #[test]
    fn a_source_keeps_its_line_number() {
        let s = "primus_turbo.yaml:18 via pre_trainer.yaml → trainer_base.yaml";
        assert_eq!(fit_source(s, 100), s);
        assert_eq!(fit_source(s, 30), "primus_turbo.yaml:18 via pre_…");
        assert_eq!(fit_source(s, 20), "primus_turbo.yaml:18");
        assert_eq!(fit_source(s, 12), "…rbo.yaml:18");
        let long = "moe_16B-BF16-pretrain-with-a-long-name.yaml:84";
        let cut = fit_source(long, 32);
        assert!(cut.ends_with(".yaml:84") && cut.starts_with('…'), "{cut}");
        assert_eq!(cut.chars().count(), 32);
        assert_eq!(fit_source("default", 4), "def…");
    }

    #[test]
    fn below_the_minimum_size_a_notice_is_drawn() {
        let mut app = App::new(vec!["proxy-cpu".into()], "proxy-cpu", false);
        let theme = Theme::new(crate::tui::theme::Palette::None);
        let mut drawn = |w: u16, h: u16| -> String {
            let mut term =
                ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
            term.draw(|f| draw(f, &mut app, &theme)).unwrap();
            term.backend()
                .buffer()
                .content
                .iter()
                .map(|c| c.symbol())
                .collect()
        };
        let text = drawn(40, 10);
        assert!(text.contains("terminal too small (need 60×16)"), "{text}");
        assert!(!text.contains("Checklist"), "{text}");
        let text = drawn(60, 16);
        assert!(!text.contains("too small"), "{text}");
    }
    #[test]
    fn a_cell_holding_a_control_character_is_replaced() {
        let mut buf = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, 3, 1));
        buf.content[0].set_symbol("\x1b");
        buf.content[1].set_symbol("a");
        buf.content[2].set_symbol("\u{9b}");
        super::visible_cells(&mut buf);
        let symbols: Vec<&str> = buf.content.iter().map(|c| c.symbol()).collect();
        assert_eq!(symbols, ["\u{fffd}", "a", "\u{fffd}"]);
    }
}
