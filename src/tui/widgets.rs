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

pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme) {
    let [top, file, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(f.area());
    draw_tabs(f, app, theme, top);
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

fn draw_tabs(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
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
    if spans.iter().map(|s| s.width()).sum::<usize>() + title.width() <= area.width as usize {
        spans.insert(0, title);
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
        figures.push(Span::styled(format!("{e} error(s) "), theme.error()));
    }
    if w > 0 {
        figures.push(Span::styled(format!("{w} warning(s) "), theme.warn()));
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

fn draw_status(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let w = usize::from(area.width.saturating_sub(1));
    let line = match &app.status {
        Some((Level::Error, s)) => Line::styled(format!(" {}", fit(s, w)), theme.error()),
        Some((Level::Info, s)) => Line::raw(format!(" {}", fit(s, w))),
        None => Line::styled(format!(" {}", super::keymap::footer(app, w)), theme.dim()),
    };
    f.render_widget(Paragraph::new(line), area);
}

/// Cut `s` to `w` columns, with `…` when cut.
pub fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(w - 1).collect();
    out.push('…');
    out
}

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

#[cfg(test)]
mod tests {
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
