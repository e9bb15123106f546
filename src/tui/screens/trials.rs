//! Trials screen: the stored trials as a sortable table; the selected one in detail, or two side
//! by side (settings that differ, and the figures).

use super::Move;
use crate::app::AppError;
use crate::app::views::compare::Comparison;
use crate::app::views::trials::{ApplyPlan, TrialSummary};
use crate::store::TrialRow;
use crate::tui::app::{App, Effect, Overlay, add_edits};
use crate::tui::keymap::Action;
use crate::tui::theme::Theme;
use crate::tui::widgets::{class_name, column_widths, fit, fit_cells, num, sig};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    Id,
    Status,
    Step,
    Tflops,
    Tokens,
    Memory,
}

impl SortKey {
    pub fn label(self) -> &'static str {
        match self {
            SortKey::Id => "id",
            SortKey::Status => "status",
            SortKey::Step => "median step",
            SortKey::Tflops => "TFLOP/s",
            SortKey::Tokens => "tokens/s",
            SortKey::Memory => "peak memory",
        }
    }

    fn next(self) -> SortKey {
        match self {
            SortKey::Id => SortKey::Status,
            SortKey::Status => SortKey::Step,
            SortKey::Step => SortKey::Tflops,
            SortKey::Tflops => SortKey::Tokens,
            SortKey::Tokens => SortKey::Memory,
            SortKey::Memory => SortKey::Id,
        }
    }
}

#[derive(Debug, Clone)]
pub struct State {
    pub rows: Vec<TrialSummary>,
    pub selected: usize,
    pub sort: SortKey,
    pub descending: bool,
    /// Marked for comparison (space).
    pub marked: Option<i64>,
    /// Show the selected trial in detail / compare the marked one with the selected one.
    pub detail: bool,
    pub compare: bool,
    /// The comparison of the marked trial (a) with the selected one (b), once read.
    pub comparison: Option<Box<Comparison>>,
    pub error: Option<String>,
}

impl Default for State {
    fn default() -> Self {
        State {
            rows: Vec::new(),
            selected: 0,
            sort: SortKey::Id,
            descending: true,
            marked: None,
            detail: false,
            compare: false,
            comparison: None,
            error: None,
        }
    }
}

impl State {
    /// The trials in the chosen order.
    pub fn sorted(&self) -> Vec<&TrialSummary> {
        let mut rows: Vec<&TrialSummary> = self.rows.iter().collect();
        let key = |r: &TrialSummary| -> f64 {
            match self.sort {
                SortKey::Id | SortKey::Status => r.id as f64,
                SortKey::Step => r.median_step_ms.unwrap_or(f64::INFINITY),
                SortKey::Tflops => r.tflops_per_gpu.unwrap_or(f64::NEG_INFINITY),
                SortKey::Tokens => r.tokens_per_s_per_gpu.unwrap_or(f64::NEG_INFINITY),
                SortKey::Memory => r.peak_mem_gib.unwrap_or(f64::INFINITY),
            }
        };
        rows.sort_by(|a, b| {
            let o = if self.sort == SortKey::Status {
                a.status.as_str().cmp(b.status.as_str())
            } else {
                key(a).total_cmp(&key(b))
            };
            o.then(a.id.cmp(&b.id))
        });
        if self.descending {
            rows.reverse();
        }
        rows
    }

    pub fn selected(&self) -> Option<&TrialSummary> {
        self.sorted().get(self.selected).copied()
    }
}

/// Moving the selection closes a comparison (it compared the row that was selected).
pub fn move_selection(app: &mut App, to: Move) {
    let st = &mut app.screens.trials;
    st.selected = to.apply(st.selected, st.rows.len());
    st.compare = false;
    st.comparison = None;
}

/// The stored trials were read.
pub fn on_rows(app: &mut App, r: Result<Vec<TrialSummary>, AppError>) {
    let st = &mut app.screens.trials;
    super::rows_arrived(&mut st.rows, &mut st.selected, &mut st.error, r);
}

/// The comparison asked for arrived.
pub fn on_comparison(app: &mut App, r: Result<Box<Comparison>, AppError>) {
    match r {
        Ok(c) => {
            let st = &mut app.screens.trials;
            let current = (st.marked, st.selected().map(|t| t.id)) == (Some(c.a), Some(c.b));
            if st.compare && current {
                st.comparison = Some(c);
            }
        }
        Err(e) => app.error(format!("could not compare: {e}")),
    }
}

/// The plan to apply a trial of another experiment arrived: ask before writing its values.
pub fn on_apply_plan(app: &mut App, r: Result<ApplyPlan, AppError>) -> Vec<Effect> {
    match r {
        Ok(plan) if plan.edits.is_empty() => {
            app.info(format!(
                "trial {} ran what this experiment says now: nothing to apply",
                plan.trial
            ));
            vec![]
        }
        Ok(plan) if plan.other_experiment.is_some() => {
            app.overlay = Some(Overlay::ConfirmApply(Box::new(plan)));
            vec![]
        }
        Ok(plan) => apply_edits(app, plan),
        Err(e) => {
            app.error(format!("could not apply: {e}"));
            vec![]
        }
    }
}

/// The trial's values become unsaved edits.
pub fn apply_edits(app: &mut App, plan: ApplyPlan) -> Vec<Effect> {
    let n = plan.edits.len();
    add_edits(
        app,
        plan.edits,
        format!(
            "trial {}'s {} unsaved edits now: d shows the diff, s saves, u undoes",
            plan.trial,
            crate::util::text::count(n, "differing value is", "differing values are")
        ),
    )
}

pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    let st = &mut app.screens.trials;
    match action {
        Action::SortNext => {
            st.sort = st.sort.next();
            st.descending = st.sort != SortKey::Step
                && st.sort != SortKey::Memory
                && st.sort != SortKey::Status;
        }
        Action::SortReverse => st.descending = !st.descending,
        Action::ToggleDetail => {
            st.detail = !st.detail;
            st.compare = false;
        }
        Action::Mark => {
            let id = st.selected().map(|t| t.id);
            st.marked = if st.marked == id { None } else { id };
        }
        Action::Compare => match (st.marked, st.selected().map(|t| t.id)) {
            (Some(a), Some(b)) if a != b => {
                st.compare = !st.compare;
                st.detail = false;
                st.comparison = None;
                if st.compare {
                    return vec![Effect::LoadComparison { a, b }];
                }
            }
            _ => app.info("mark a trial with Space, select another, then press c"),
        },
        Action::ApplyTrial => return apply_trial(app),
        _ => {}
    }
    vec![]
}

/// The selected trial's difference from the experiment (what it ran that the file does not
/// say now) becomes unsaved edits; a trial of another experiment asks first.
fn apply_trial(app: &mut App) -> Vec<Effect> {
    let Some(t) = app.screens.trials.selected() else {
        return vec![];
    };
    if !t.this_experiment {
        return vec![Effect::PlanApply(t.id)];
    }
    let edits: Vec<(String, String)> = match &t.differences {
        Some(d) => d
            .iter()
            .map(|x| (x.flag.clone(), crate::tui::app::json_text(&x.b)))
            .collect(),
        None => crate::run::trial::trial_settings(t)
            .iter()
            .map(|(k, v)| (k.clone(), crate::tui::app::json_text(v)))
            .collect(),
    };
    let plan = ApplyPlan {
        trial: t.id,
        edits,
        other_experiment: None,
    };
    on_apply_plan(app, Ok(plan))
}

fn status_text(t: &TrialRow) -> String {
    match &t.failure {
        Some(f) => class_name(f.class),
        None => t.status.as_str().to_string(),
    }
}

pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme, area: Rect) {
    let split = app.screens.trials.detail || app.screens.trials.compare;
    let (top, bottom) = if split {
        let [a, b] =
            Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(area);
        (a, Some(b))
    } else {
        (area, None)
    };
    app.page = top.height.saturating_sub(3) as usize;
    let wide = area.width >= 120;
    let rows_data = app.screens.trials.sorted();
    let marked = app.screens.trials.marked;
    // Trials of other experiments are listed (all experiments): say which each ran.
    let all = rows_data.iter().any(|t| !t.this_experiment);
    let fixed = 2
        + 1
        + 4
        + 14
        + 8
        + 6
        + 7
        + 8
        + 7
        + 8
        + if wide { 13 } else { 0 }
        + if all { 15 } else { 0 };
    let settings_w = (top.width as usize).saturating_sub(fixed).max(8);
    let mut widths = vec![
        Constraint::Length(1),
        Constraint::Length(4),
        Constraint::Length(14),
        Constraint::Length(8),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(7),
    ];
    // The peak's letter says what it measures: a(llocator), p(rocesses), d(evice in use).
    let mut header = vec![
        "", "id", "status", "step ms", "CI", "TFLOP/s", "tok/s", "GiB a/d",
    ];
    if wide {
        widths.push(Constraint::Length(12));
        header.push("profile");
    }
    if all {
        widths.push(Constraint::Length(14));
        header.push("experiment");
    }
    widths.push(Constraint::Min(10));
    header.push("differs from the config");
    let col_w = column_widths(&widths, top.width.saturating_sub(2));
    let rows: Vec<Row> = rows_data
        .iter()
        .map(|t| {
            let ci = match (t.median_step_ms, t.ci95_ms) {
                (Some(m), Some(c)) if m > 0.0 => format!("±{:.1}%", 100.0 * c / m),
                _ => "-".into(),
            };
            let status_style = match t.status.as_str() {
                "completed" => theme.ok(),
                "running" => theme.warn(),
                _ => theme.error(),
            };
            let mut texts = vec![
                if marked == Some(t.id) { "▸" } else { " " }.to_string(),
                t.id.to_string(),
                status_text(t),
                num(t.median_step_ms, 1, ""),
                ci,
                sig(t.tflops_per_gpu, ""),
                num(t.tokens_per_s_per_gpu, 0, ""),
                format!(
                    "{}{}",
                    sig(t.peak_mem_gib, ""),
                    t.peak_mem_kind().map_or("", |k| &k.tag()[..1])
                ),
            ];
            if wide {
                texts.push(t.profile.clone().unwrap_or_default());
            }
            if all {
                texts.push(experiment_name(t));
            }
            texts.push(fit(&t.settings_short(), settings_w));
            // What the columns really get (a narrow terminal shrinks them): figures shortened
            // or marked `…`, never silently missing digits.
            let cells = fit_cells(texts, &col_w)
                .into_iter()
                .enumerate()
                .map(|(i, text)| {
                    if i == 2 {
                        Cell::from(Span::styled(text, status_style))
                    } else {
                        Cell::from(text)
                    }
                });
            Row::new(cells)
        })
        .collect();
    let order = if app.screens.trials.descending {
        "↓"
    } else {
        "↑"
    };
    let title = format!(
        " Trials · {} of {} · sorted by {} {order} · A: {} ",
        rows_data.len(),
        if app.all_experiments {
            "every experiment"
        } else {
            "this experiment"
        },
        app.screens.trials.sort.label(),
        if app.all_experiments {
            "this one"
        } else {
            "all"
        }
    );
    let n = rows.len();
    let empty = rows.is_empty();
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(theme.title()))
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(title)
                .title_bottom(" TFLOP/s, tok/s: per GPU · GiB a/d: allocator, processes, device "),
        )
        .row_highlight_style(theme.selected());
    let mut state =
        TableState::default().with_selected((n > 0).then_some(app.screens.trials.selected));
    f.render_stateful_widget(table, top, &mut state);
    app.hits.rows = Some(crate::tui::mouse::Rows {
        tab: super::Tab::Trials,
        y: top.y + 2,
        height: top.height.saturating_sub(3),
        offset: state.offset(),
    });
    if empty {
        let msg = app.screens.trials.error.clone().unwrap_or_else(|| {
            "No trials yet. r starts one (profile chosen on the Run screen).".into()
        });
        let inner = Rect {
            x: top.x + 2,
            y: top.y + 2,
            width: top.width.saturating_sub(4),
            height: 1,
        };
        f.render_widget(Paragraph::new(msg).style(theme.dim()), inner);
    }
    let Some(bottom) = bottom else { return };
    // The selected row of the list just sorted (not sorted again).
    let selected = rows_data
        .get(app.screens.trials.selected)
        .map(|t| (*t).clone());
    if app.screens.trials.compare {
        match &app.screens.trials.comparison {
            Some(c) => super::compare::draw(f, c, theme, bottom),
            None => f.render_widget(
                Paragraph::new("comparing…")
                    .style(theme.dim())
                    .block(Block::default().borders(Borders::ALL).title(" Compare ")),
                bottom,
            ),
        }
    } else if let Some(t) = selected {
        draw_detail(f, &t, theme, bottom);
    }
}

/// The experiment file a trial ran, by its name.
fn experiment_name(t: &TrialSummary) -> String {
    t.config_path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

fn draw_detail(f: &mut Frame, t: &TrialSummary, theme: &Theme, area: Rect) {
    // A stand-in's peak taken from this node's GPU telemetry is not its own.
    let evidence = crate::app::views::trials::evidence(t, &t.basis);
    let (peak, peak_kind) = match &evidence {
        Some((s, Some(_))) => (s.peak_mem_gib, s.peak_mem_kind),
        _ => (t.peak_mem_gib, t.peak_mem_kind()),
    };
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("trial {} ", t.id), theme.title()),
            Span::raw(format!(
                "{} · {} · {} iterations{} · {}",
                status_text(t),
                t.profile.clone().unwrap_or_default(),
                t.iterations_seen,
                t.stop_reason()
                    .map_or(String::new(), |r| format!(" (stop: {})", r.as_str())),
                t.created_at
            )),
        ]),
        Line::raw(match &t.job {
            // A batch trial's job: where it stands (queued with the scheduler's reason, the
            // nodes it runs on, how it ended), then the basis of its figures.
            Some(j) => format!(
                "{} · {}",
                crate::tui::screens::run::job_state(j, 60),
                t.basis
            ),
            None => format!("basis: {}", t.basis),
        }),
        Line::raw(format!("differs from the config: {}", t.settings_text())),
        Line::raw(match t.median_step_ms {
            Some(m) => format!(
                "median step {m:.1} ms (CI ±{}) · {} tok/s/GPU · {} TFLOP/s/GPU · wall {}",
                num(t.ci95_ms, 2, " ms"),
                num(t.tokens_per_s_per_gpu, 0, ""),
                num(t.tflops_per_gpu, 1, ""),
                num(t.wall_s, 1, " s"),
            ),
            None => format!("no steady measurement · wall {}", num(t.wall_s, 1, " s")),
        }),
        Line::raw(format!(
            "peak memory {} GiB{}{}",
            num(peak, 2, ""),
            peak_kind.map_or(String::new(), |k| format!(": {}", k.label())),
            t.summary
                .as_ref()
                .and_then(|s| s.get("startup_s"))
                .and_then(|v| v.as_f64())
                .map_or(String::new(), |s| format!(
                    " · start-up {s:.1} s (not in the GPU figures)"
                ))
        )),
    ];
    if let Some(fl) = &t.failure {
        lines.push(Line::styled(
            format!(
                "failure: {}{}",
                fl.class.label(),
                fl.line
                    .as_ref()
                    .map_or(String::new(), |l| format!(" — {l}"))
            ),
            theme.error(),
        ));
    }
    lines.push(Line::styled(
        format!("folder {}", crate::util::paths::display_path(&t.trial_dir)),
        theme.dim(),
    ));
    lines.push(Line::styled(
        fit(&format!("argv {}", crate::util::shell::join(&t.argv)), 400),
        theme.dim(),
    ));
    if !t.this_experiment {
        lines.push(Line::styled(
            format!(
                "ran another experiment: {}",
                crate::util::paths::display_path(&t.config_path)
            ),
            theme.warn(),
        ));
    }
    if t.differences.as_ref().is_none_or(|d| !d.is_empty()) {
        lines.push(Line::styled(
            "a applies what it ran differently to the config (as unsaved edits)",
            theme.dim(),
        ));
    }
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::default().borders(Borders::ALL).title(" Detail ")),
        area,
    );
}
