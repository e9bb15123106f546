//! Flags screen: every catalog flag with effective value, default and where the value comes
//! from; the selected flag's help, problems and the value being typed below. Edits stay unsaved
//! until `s` shows the diff and `y` writes it.

use super::Move;
use crate::app::views::config::FlagRow;
use crate::config::catalog::{FlagType, Step};
use crate::config::diag::Severity;
use crate::tui::app::{App, Effect, Overlay, add_edits};
use crate::tui::keymap::Action;
use crate::tui::theme::Theme;
use crate::tui::widgets::{fit, fit_source};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

/// The value being typed for a flag.
#[derive(Debug, Clone, PartialEq)]
pub struct Editor {
    pub key: String,
    pub text: String,
    pub ty: FlagType,
    pub choices: Vec<String>,
    /// What is wrong with `text`, checked as the user types.
    pub error: Option<String>,
}

impl Editor {
    fn check(&mut self) {
        self.error = crate::app::edit::check_value(&self.key, &self.text)
            .err()
            .map(|e| e.0);
    }
}

#[derive(Debug, Clone, Default)]
pub struct State {
    pub selected: usize,
    /// The search being typed (`/`), and the one in force.
    pub searching: bool,
    pub query: String,
    pub editor: Option<Editor>,
    /// Only this step's flags (set when coming from the checklist).
    pub step: Option<Step>,
}

/// The flag rows the screen lists (step filter and search applied). The catalog's flags are
/// listed by step; a search also finds the resolved keys outside the catalog, after them.
pub fn visible(app: &App) -> Vec<&FlagRow> {
    let Some(c) = &app.config else {
        return Vec::new();
    };
    let st = &app.screens.flags;
    let q = st.query.to_lowercase();
    let mut rows: Vec<&FlagRow> = c
        .flags
        .iter()
        .filter(|f| match (st.step, f.step) {
            (Some(want), step) => step == Some(want),
            (None, None) => !q.is_empty(),
            (None, Some(_)) => true,
        })
        .filter(|f| q.is_empty() || f.name.to_lowercase().contains(&q))
        .collect();
    rows.sort_by_key(|f| {
        let step = f.step.and_then(|s| Step::ALL.iter().position(|x| *x == s));
        (step.is_none(), step, f.env_var)
    });
    rows
}

/// The step column's text: the checklist step, or `other key` for a key outside the catalog.
fn step_title(r: &FlagRow) -> &'static str {
    r.step.map_or("other key", |s| s.title())
}

pub fn move_selection(app: &mut App, to: Move) {
    let len = visible(app).len();
    app.screens.flags.selected = to.apply(app.screens.flags.selected, len);
}

/// Keeps the selection on a row after the view was rebuilt.
pub fn clamp(app: &mut App) {
    move_selection(app, Move::By(0));
}

pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    let st = &mut app.screens.flags;
    match action {
        Action::ClearFilter => {
            st.step = None;
            st.query.clear();
            st.selected = 0;
        }
        Action::SearchStart => {
            st.searching = true;
            st.query.clear();
            st.step = None;
            st.selected = 0;
        }
        Action::SearchInput(c) => {
            st.query.push(c);
            st.selected = 0;
        }
        Action::SearchBackspace => {
            st.query.pop();
        }
        Action::SearchDone => st.searching = false,
        Action::SearchCancel => {
            st.searching = false;
            st.query.clear();
        }
        Action::Edit => return start_edit(app),
        Action::OpenEditor => return open_editor(app),
        Action::EditInput(c) => {
            if let Some(e) = &mut st.editor {
                e.text.push(c);
                e.check();
            }
        }
        Action::EditBackspace => {
            if let Some(e) = &mut st.editor {
                e.text.pop();
                e.check();
            }
        }
        Action::EditCycle(step) => {
            if let Some(e) = &mut st.editor
                && !e.choices.is_empty()
            {
                let n = e.choices.len() as isize;
                let i = e
                    .choices
                    .iter()
                    .position(|c| *c == e.text)
                    .map_or(if step > 0 { -1 } else { 0 }, |i| i as isize);
                let j = (i + step).rem_euclid(n) as usize;
                e.text = e.choices[j].clone();
                e.check();
            }
        }
        Action::EditCancel => st.editor = None,
        Action::EditCommit => return commit(app),
        Action::Undo => {
            match app.pending.pop() {
                Some(p) => app.info(format!("undid {} = {}", p.key, p.text)),
                None => app.info("nothing to undo"),
            }
            if app.pending.is_empty() {
                app.plan = None;
            }
            return vec![Effect::Load(app.pending.clone())];
        }
        Action::ShowDiff => {
            if app.pending.is_empty() {
                app.info("no unsaved edits");
            } else {
                app.overlay = Some(Overlay::Diff {
                    save: false,
                    scroll: 0,
                });
            }
        }
        Action::Save => {
            if app.pending.is_empty() {
                app.info("no unsaved edits");
            } else if app.disk_changed {
                app.error("the file changed on disk since it was read: R reloads it first");
            } else {
                app.overlay = Some(Overlay::Diff {
                    save: true,
                    scroll: 0,
                });
            }
        }
        _ => {}
    }
    vec![]
}

fn commit(app: &mut App) -> Vec<Effect> {
    let Some(e) = app.screens.flags.editor.take() else {
        return vec![];
    };
    if let Some(err) = &e.error {
        let msg = err.clone();
        app.screens.flags.editor = Some(e);
        // The editor shows it whole on its own line.
        app.error_in_place(msg);
        return vec![];
    }
    let current = visible(app)
        .into_iter()
        .find(|r| r.name == e.key)
        .map(|r| r.value.clone());
    if current.as_deref() == Some(e.text.as_str()) && !app.pending.iter().any(|p| p.key == e.key) {
        app.info(format!("{} unchanged", e.key));
        return vec![];
    }
    add_edit(app, e.key, e.text)
}

fn add_edit(app: &mut App, key: String, text: String) -> Vec<Effect> {
    let said = format!("{key} = {text} (unsaved: s saves, u undoes)");
    add_edits(app, vec![(key, text)], said)
}

fn start_edit(app: &mut App) -> Vec<Effect> {
    let Some(row) = visible(app)
        .get(app.screens.flags.selected)
        .map(|r| (*r).clone())
    else {
        return vec![];
    };
    if row.env_var {
        app.info(format!(
            "{} is an environment variable: set it in the launch environment or the run profile",
            row.name
        ));
        return vec![];
    }
    if row.ty == FlagType::Bool {
        let new = if row.value == "true" { "false" } else { "true" };
        return add_edit(app, row.name, new.to_string());
    }
    let text = if row.value == "-" {
        String::new()
    } else {
        row.value.clone()
    };
    let mut editor = Editor {
        key: row.name,
        text,
        ty: row.ty,
        choices: row.choices,
        error: None,
    };
    editor.check();
    app.screens.flags.editor = Some(editor);
    vec![]
}

/// `e`: the experiment in the user's editor at the selected flag's line when the experiment
/// sets it (else at its top, saying where the value comes from); read again on return.
fn open_editor(app: &mut App) -> Vec<Effect> {
    if !app.pending.is_empty() {
        app.error("save or undo your edits first: the editor changes the file on disk");
        return vec![];
    }
    let Some(path) = app.config.as_ref().map(|c| c.path.clone()) else {
        return vec![];
    };
    let row = visible(app)
        .get(app.screens.flags.selected)
        .map(|r| (r.name.clone(), r.source.clone(), r.experiment_line));
    let line = match row {
        Some((_, _, Some(line))) => line,
        Some((name, source, None)) => {
            app.info(format!(
                "{name} is not set in the experiment ({source}): opened at its top"
            ));
            1
        }
        None => 1,
    };
    vec![Effect::OpenEditor { path, line }]
}

pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme, area: Rect) {
    let detail_h = if area.height >= 30 { 8 } else { 5 };
    let [top, bottom] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(detail_h)]).areas(area);
    app.page = top.height.saturating_sub(3) as usize;
    let wide = area.width >= 120;
    let rows_data = visible(app);
    let mut title = match (&app.screens.flags.step, app.screens.flags.query.is_empty()) {
        (Some(s), _) => format!(" Flags · {} (a: all) ", s.title()),
        (None, false) => {
            let n = rows_data.len();
            let matches = if n == 1 { "match" } else { "matches" };
            format!(" Flags · /{} · {n} {matches} ", app.screens.flags.query)
        }
        (None, true) => " Flags ".to_string(),
    };
    // Values are resolved with the profile's `env:`: the title names it when it sets one the
    // screen shows.
    if let Some(p) = app
        .config
        .as_ref()
        .filter(|c| c.profile_shown)
        .and_then(|c| c.profile.as_ref())
    {
        title = format!("{title}· env of {} ", p.name);
    }
    if app.screens.flags.searching {
        title = format!(" Search: {}▏ ", app.screens.flags.query);
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
                cells.push(Cell::from(Span::styled(
                    fit(step_title(r), 24),
                    theme.dim(),
                )));
            }
            cells.push(Cell::from(Span::styled(
                fit_source(&r.source, from_w),
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
    let mut state =
        TableState::default().with_selected((n > 0).then_some(app.screens.flags.selected));
    f.render_stateful_widget(table, top, &mut state);
    let hit = crate::tui::mouse::Rows {
        tab: crate::tui::screens::Tab::Flags,
        y: top.y + 2,
        height: top.height.saturating_sub(3),
        offset: state.offset(),
    };
    let selected = rows_data.get(app.screens.flags.selected).copied();
    draw_detail(f, app, selected, theme, bottom);
    app.hits.rows = Some(hit);
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
    if let Some(e) = &app.screens.flags.editor {
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
                match r.step {
                    Some(step) => format!(
                        "  {} · {} · default {} · from {}",
                        step.title(),
                        r.ty.label(),
                        r.default,
                        r.source
                    ),
                    None => format!(
                        "  not in the catalog · {} · from {}",
                        r.ty.label(),
                        r.source
                    ),
                },
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
