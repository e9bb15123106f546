//! Run screen: the launch profile, the live trial (progress, step time and TFLOP/s charts,
//! tokens/s, loss, memory), per-GPU telemetry with sparklines and charts, and the log tail with
//! failure lines marked. Telemetry shows whether or not a trial runs.

use crate::app::AppError;
use crate::app::launch::view::scheduler_title;
use crate::domain::job::Job;
use crate::domain::trial::{Iteration, Summary, TrialResult};
use crate::run::process::Stream;
use crate::run::trial::TrialEvent;
use crate::tui::app::{App, Effect, LOG_LINES, quit_if_done};
use crate::tui::keymap::Action;
use crate::tui::screens::Tab;
use crate::tui::theme::Theme;
use crate::tui::widgets::{fit, num};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::symbols;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Block, Borders, Chart, Dataset, GraphType, Paragraph, Sparkline};
use std::collections::VecDeque;
use std::path::PathBuf;

/// The trial the screen follows (the last one started here).
#[derive(Debug, Clone, Default)]
pub struct LiveTrial {
    pub id: Option<i64>,
    pub argv: Vec<String>,
    pub dir: Option<PathBuf>,
    pub iters: Vec<Iteration>,
    pub summary: Option<Summary>,
    pub log: VecDeque<(Stream, String)>,
    pub stopping: Option<String>,
    /// Set when the trial has ended.
    pub result: Option<Result<TrialResult, String>>,
    /// A Slurm trial's job (state, pending reason, nodes).
    pub job: Option<crate::domain::job::Job>,
    /// The latest telemetry of each node of a job.
    pub nodes: std::collections::BTreeMap<String, crate::telemetry::sampler::Snapshot>,
    /// What its figures are evidence of.
    pub basis: Option<crate::domain::evidence::Basis>,
}

impl LiveTrial {
    pub fn running(&self) -> bool {
        self.result.is_none()
    }

    /// Its figures are a CPU stand-in's: per process, not per GPU.
    pub fn stand_in(&self) -> bool {
        self.basis
            .as_ref()
            .is_some_and(crate::domain::evidence::Basis::is_proxy)
    }
}

/// What the screen's telemetry chart shows (and, on short terminals, whether the bottom panel
/// is the log or that chart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunPanel {
    #[default]
    Log,
    Util,
    Vram,
    Power,
    Temp,
    Clock,
}

impl RunPanel {
    pub fn next(self) -> RunPanel {
        match self {
            RunPanel::Log => RunPanel::Util,
            RunPanel::Util => RunPanel::Vram,
            RunPanel::Vram => RunPanel::Power,
            RunPanel::Power => RunPanel::Temp,
            RunPanel::Temp => RunPanel::Clock,
            RunPanel::Clock => RunPanel::Log,
        }
    }

    /// Title and unit of the chart.
    pub fn label(self) -> &'static str {
        match self {
            RunPanel::Log => "log",
            RunPanel::Util => "utilisation %",
            RunPanel::Vram => "VRAM used GiB",
            RunPanel::Power => "power W",
            RunPanel::Temp => "hottest sensor °C",
            RunPanel::Clock => "shader clock MHz",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct State {
    pub trial: Option<LiveTrial>,
    pub panel: RunPanel,
    /// The status line the trial last wrote: while the status line still shows it, it follows
    /// the trial (started, iteration i/n, stopping); a key or another message ends that.
    pub status_line: Option<String>,
}

impl State {
    pub fn running(&self) -> bool {
        self.trial.as_ref().is_some_and(LiveTrial::running)
    }
}

/// The Run screen's profile, when a trial may start now (none running; unsaved edits only
/// where `edits_ok`: a single trial runs them as overrides); otherwise says why on the status
/// line.
pub fn launch_profile(app: &mut App, edits_ok: bool) -> Option<String> {
    if app.trial_running() {
        app.info("a trial is already running (x stops it)");
        return None;
    }
    if !edits_ok && !app.pending.is_empty() {
        app.error("save or undo your edits first: this runs the file on disk");
        return None;
    }
    let profile = app.profile_name().map(str::to_string);
    if profile.is_none() {
        app.error("no launch profile found");
    }
    profile
}

/// A trial (or a stage's trials) is starting: the screen follows it.
pub fn starting(app: &mut App) {
    app.screens.run.trial = Some(LiveTrial::default());
    app.tab = Tab::Run;
}

/// Says `line` on the status line as the trial's own (see `State::status_line`): its
/// progress, not kept in the message log.
pub(crate) fn say_trial(app: &mut App, line: String) {
    app.status = Some((crate::tui::app::Level::Info, line.clone()));
    app.screens.run.status_line = Some(line);
}

/// The trial's state in one line: started, iteration i/n with the figures so far, stopping.
fn trial_line(t: &LiveTrial) -> String {
    let id = t.id.map_or("-".into(), |i| i.to_string());
    if let Some(why) = &t.stopping {
        return format!("trial {id} stopping ({why})");
    }
    let Some(last) = t.iters.last() else {
        return match &t.job {
            Some(j) => format!("trial {id}: {}", job_state(j, 60)),
            None => format!("trial {id} started: waiting for its first iteration (start-up)"),
        };
    };
    let of = last.train_iters.map_or(String::new(), |n| format!("/{n}"));
    let mut line = format!("trial {id} running · it {}{of}", last.iteration);
    if let Some(s) = &t.summary {
        if s.n == 0 {
            line.push_str(" · warming up");
        } else {
            // A stand-in's throughput is its one process's, not a GPU's.
            let per = if t.stand_in() {
                "tok/s/proc"
            } else {
                "tok/s/GPU"
            };
            line.push_str(&format!(
                " · median {} · {} {per}",
                num(s.median_step_ms, 1, " ms"),
                num(s.tokens_per_s_per_gpu, 0, "")
            ));
        }
    }
    line.push_str(" · x stops it");
    line
}

pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::ProfileNext | Action::ProfilePrev => {
            if !app.profiles.is_empty() && !app.trial_running() {
                let n = app.profiles.len();
                app.profile = if action == Action::ProfileNext {
                    (app.profile + 1) % n
                } else {
                    (app.profile + n - 1) % n
                };
                // Remembered for this experiment: the next start picks it again. The config is
                // read again with the variables its `env:` sets (what its trials see).
                if let Some(p) = app.profile_name() {
                    return vec![
                        Effect::RememberProfile(p.to_string()),
                        Effect::Load(app.pending.clone()),
                    ];
                }
            }
            vec![]
        }
        Action::StartTrial => {
            let Some(profile) = launch_profile(app, true) else {
                return vec![];
            };
            let edits = app.pending.clone();
            let said = if edits.is_empty() {
                format!("starting a trial with {profile}")
            } else {
                format!(
                    "starting a trial with {profile}, your {} as its overrides (the file is unchanged)",
                    crate::util::text::count(edits.len(), "unsaved edit", "unsaved edits")
                )
            };
            let mut lines = vec![
                format!("One trial of the config on disk with profile {profile}."),
                format!(
                    "Budget: up to {} iterations, stopped earlier once the step time is \
                     steady (95% CI within 1%).",
                    crate::app::trial::DEFAULT_ITERS
                ),
            ];
            lines.extend(crate::tui::launch::gpu_lines(app));
            if !edits.is_empty() {
                lines.push(format!(
                    "Your {} with it as overrides.",
                    crate::util::text::count(edits.len(), "unsaved edit goes", "unsaved edits go")
                ));
            }
            let launch = crate::tui::launch::Launch {
                title: "Start a trial on GPUs?".into(),
                lines,
                said,
                effect: Effect::StartTrial { profile, edits },
            };
            crate::tui::launch::ask_or_start(app, launch)
        }
        Action::StopTrial => {
            if app.trial_running() {
                app.info("stopping the trial (SIGINT, then SIGTERM, then SIGKILL)");
                vec![Effect::StopTrial]
            } else {
                vec![]
            }
        }
        Action::NextPanel => {
            app.screens.run.panel = app.screens.run.panel.next();
            vec![]
        }
        _ => vec![],
    }
}

/// One event of the running trial.
pub fn on_event(app: &mut App, ev: TrialEvent) {
    let t = app.screens.run.trial.get_or_insert_with(LiveTrial::default);
    match ev {
        TrialEvent::Started {
            trial_id,
            argv,
            trial_dir,
            basis,
        } => {
            t.id = Some(trial_id);
            t.argv = argv;
            t.dir = Some(trial_dir);
            t.basis = Some(basis);
        }
        TrialEvent::Line { stream, line } => {
            if t.log.len() == LOG_LINES {
                t.log.pop_front();
            }
            t.log.push_back((stream, line));
        }
        TrialEvent::Iteration { it, summary } => {
            t.iters.push(it);
            t.summary = Some(*summary);
        }
        TrialEvent::Stopping { reason } => t.stopping = Some(reason.to_string()),
        // On this node the live sampler feeds the charts; a job's nodes send their own.
        TrialEvent::Telemetry(s) => {
            if let Some(node) = s.node.clone() {
                t.nodes.insert(node, *s);
            }
        }
        TrialEvent::Job(j) => t.job = Some(*j),
        TrialEvent::TelemetryUnavailable { why } => {
            app.telemetry.note.get_or_insert(why);
        }
        // The terminal is the TUI's: the result itself went to the log file.
        TrialEvent::Unstored { why, .. } => {
            let line = format!(
                "primus-tune: the trial's result could not be stored or kept ({why}); it is \
                 written whole in the TUI's log"
            );
            if t.log.len() == LOG_LINES {
                t.log.pop_front();
            }
            t.log.push_back((Stream::Stderr, line));
        }
    }
    // The status line follows the trial while it shows the trial's last line.
    let follows = matches!(
        (&app.status, &app.screens.run.status_line),
        (Some((crate::tui::app::Level::Info, shown)), Some(ours)) if shown == ours
    );
    if follows && let Some(t) = &app.screens.run.trial {
        let line = trial_line(t);
        say_trial(app, line);
    }
}

/// The trial ended (or could not run).
pub fn on_done(app: &mut App, r: Result<Box<TrialResult>, AppError>) -> Vec<Effect> {
    let ended = match &r {
        Ok(t) => format!(
            "trial {} {} ({})",
            t.trial_id.map_or("-".into(), |i| i.to_string()),
            t.status,
            t.stop_reason
        ),
        Err(e) => format!("the trial could not run: {e}"),
    };
    let trial = app.screens.run.trial.get_or_insert_with(LiveTrial::default);
    if let Ok(t) = &r {
        trial.summary = Some(t.summary.clone());
    }
    trial.result = Some(r.map(|b| *b).map_err(|e| e.to_string()));
    match &trial.result {
        Some(Err(_)) => app.error(ended),
        _ => app.info(ended),
    }
    let mut fx = vec![Effect::LoadTrials];
    quit_if_done(app, &mut fx);
    fx
}

pub fn draw(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    // A Slurm trial runs on its job's nodes: their table takes the place of this machine's GPUs.
    let job = app
        .screens
        .run
        .trial
        .as_ref()
        .and_then(|t| t.job.as_ref().map(|j| (t, j)));
    let tall = area.height >= 36;
    // Borders, a header row, a row per GPU or node; a line of text while a job has no node.
    let gpu_h = match job {
        Some((t, _)) if t.nodes.is_empty() => 3,
        Some((t, _)) => t.nodes.len().min(12) as u16 + 3,
        None => app.telemetry.gpus.len().max(1) as u16 + 3,
    }
    .min(if tall { 12 } else { 5 });
    let chart_h = if tall { 12 } else { 6 };
    let [head, charts, gpus, rest] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(chart_h),
        Constraint::Length(gpu_h),
        Constraint::Min(3),
    ])
    .areas(area);
    draw_head(f, app, theme, head);
    draw_charts(f, app, theme, charts);
    match job {
        Some((t, j)) => draw_nodes(f, t, j, theme, gpus),
        None => draw_gpus(f, app, theme, gpus),
    }
    if tall {
        // Room for both: the telemetry chart (utilisation unless another was chosen) and the log.
        let [chart_area, log] =
            Layout::vertical([Constraint::Length(12), Constraint::Min(3)]).areas(rest);
        let panel = if app.screens.run.panel == RunPanel::Log {
            RunPanel::Util
        } else {
            app.screens.run.panel
        };
        draw_telemetry_chart(f, app, theme, panel, chart_area);
        draw_log(f, app.screens.run.trial.as_ref(), theme, log);
    } else if app.screens.run.panel == RunPanel::Log {
        draw_log(f, app.screens.run.trial.as_ref(), theme, rest);
    } else {
        draw_telemetry_chart(f, app, theme, app.screens.run.panel, rest);
    }
}

/// One telemetry figure over the kept history, one line per GPU.
fn draw_telemetry_chart(f: &mut Frame, app: &App, theme: &Theme, panel: RunPanel, area: Rect) {
    let metric = |s: &crate::telemetry::GpuSample| -> Option<f64> {
        match panel {
            RunPanel::Log | RunPanel::Util => s.util_pct,
            RunPanel::Vram => s.vram_used_bytes.map(gib),
            RunPanel::Power => s.power_w,
            RunPanel::Temp => s.temp_c.values().copied().reduce(f64::max),
            RunPanel::Clock => s.sclk_mhz,
        }
    };
    let series: Vec<(u32, Vec<(f64, f64)>)> = match &app.telemetry.history {
        Some(h) => h
            .per_gpu
            .keys()
            .map(|g| (*g, h.series(*g, metric)))
            .collect(),
        None => Vec::new(),
    };
    if series.is_empty() {
        let why = app
            .telemetry
            .note
            .clone()
            .unwrap_or_else(|| "no GPU telemetry yet".into());
        f.render_widget(
            Paragraph::new(why)
                .wrap(ratatui::widgets::Wrap { trim: true })
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(format!(" {} · m: next chart ", panel.label())),
                ),
            area,
        );
        return;
    }
    let all: Vec<(f64, f64)> = series.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    let (xb, raw) = bounds(&all);
    let (mut yb, decimals) = y_axis(&all, raw);
    if matches!(panel, RunPanel::Log | RunPanel::Util) {
        yb = [yb[0].max(0.0), yb[1].min(100.0)];
    }
    let datasets: Vec<Dataset> = series
        .iter()
        .enumerate()
        .map(|(i, (g, pts))| {
            Dataset::default()
                .name(format!("GPU {g}"))
                .marker(symbols::Marker::Braille)
                .graph_type(GraphType::Line)
                .style(theme.series(i))
                .data(pts)
        })
        .collect();
    // A Slurm trial runs elsewhere: these are the GPUs of the machine the TUI runs on.
    let whose = if app
        .screens
        .run
        .trial
        .as_ref()
        .is_some_and(|t| t.job.is_some())
    {
        "this machine's "
    } else {
        ""
    };
    let title = format!(
        " {} · {whose}{} · last {:.0} s · m: next chart ",
        panel.label(),
        crate::util::text::count(series.len(), "GPU", "GPUs"),
        xb[1] - xb[0]
    );
    let chart = Chart::new(datasets)
        .block(Block::default().borders(Borders::ALL).title(title))
        .x_axis(Axis::default().bounds(xb).labels(vec![
            Span::raw(format!("{:.0}", xb[0])),
            Span::raw("seconds"),
            Span::raw(format!("{:.0}", xb[1])),
        ]))
        .y_axis(
            Axis::default().bounds(yb).labels(
                crate::tui::axis::labels(yb, decimals)
                    .map(Span::raw)
                    .to_vec(),
            ),
        );
    f.render_widget(chart, area);
}

/// The y bounds and label decimals from the data's own range (not the padded one).
fn y_axis(points: &[(f64, f64)], fallback: [f64; 2]) -> ([f64; 2], usize) {
    if points.is_empty() {
        return (fallback, 0);
    }
    let lo = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    crate::tui::axis::nice(lo, hi)
}

fn draw_head(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let w = usize::from(area.width.saturating_sub(2));
    let profile = app.profile_name().unwrap_or("-");
    let mut first = vec![
        Span::raw("profile "),
        Span::styled(format!("◀ {profile} ▶"), theme.title()),
    ];
    let mut second = Vec::new();
    match &app.screens.run.trial {
        None => first.push(Span::styled(
            "  no trial yet: r starts one of the config on disk",
            theme.dim(),
        )),
        Some(t) => {
            let id = t.id.map_or("-".into(), |i| i.to_string());
            let max = t.iters.last().and_then(|i| i.train_iters);
            let it = t.iters.last().map_or(0, |i| i.iteration);
            let state = match (&t.result, &t.stopping) {
                (Some(Ok(r)), _) => {
                    let fail = r.failure.as_ref().map_or(String::new(), |f| {
                        format!(" ({})", crate::tui::widgets::class_name(f.class))
                    });
                    format!("{}{fail}", r.status)
                }
                (Some(Err(e)), _) => format!("could not run: {e}"),
                (None, Some(why)) => format!("stopping ({why})"),
                (None, None) => match &t.job {
                    // The room the line leaves, for the job's node names.
                    Some(j) => {
                        let used = first.iter().map(Span::width).sum::<usize>() + 9 + id.len();
                        job_state(j, w.saturating_sub(used))
                    }
                    None => "running".into(),
                },
            };
            let style = match &t.result {
                Some(Ok(r)) if r.status == crate::domain::trial::TrialStatus::Completed => {
                    theme.ok()
                }
                Some(_) => theme.error(),
                None => theme.warn(),
            };
            first.push(Span::raw(format!("  trial {id} ")));
            first.push(Span::styled(state, style));
            // Once the trial ended (or is stopping), the job's last state follows its own.
            if let Some(j) = &t.job
                && (t.result.is_some() || t.stopping.is_some())
            {
                first.push(Span::styled(
                    format!(" · {} {}", job_name(j), j.state.to_lowercase()),
                    theme.dim(),
                ));
            }
            match &t.job {
                Some(j) if t.iters.is_empty() && t.result.is_none() && j.state == "PENDING" => {
                    second.push(Span::raw(format!(
                        "waiting in {}'s queue for {}{} (not GPU time)",
                        scheduler_title(&j.scheduler),
                        crate::util::text::count(j.nodes as usize, "node", "nodes"),
                        j.gpus_per_node.map_or(String::new(), |g| format!(
                            ", {} each",
                            crate::util::text::count(g as usize, "GPU", "GPUs")
                        ))
                    )));
                }
                _ => second.push(Span::raw(format!(
                    "it {it}{} · ",
                    max.map_or(String::new(), |m| format!("/{m}"))
                ))),
            }
            if let Some(s) = &t.summary {
                let ci = match (s.median_step_ms, s.ci95_ms) {
                    (Some(m), Some(c)) if m > 0.0 => format!(" ±{:.1}%", 100.0 * c / m),
                    _ => String::new(),
                };
                let per = if t.stand_in() {
                    "per process (CPU stand-in)"
                } else {
                    "per GPU"
                };
                second.push(Span::raw(format!(
                    "median {}{ci} · {per} {} tok/s · {} TFLOP/s · loss {} · {}{}",
                    num(s.median_step_ms, 1, " ms"),
                    num(s.tokens_per_s_per_gpu, 0, ""),
                    crate::tui::widgets::sig(s.tflops_per_gpu, ""),
                    num(s.last_loss, 3, ""),
                    num(s.peak_mem_gib, 1, " GiB"),
                    s.peak_mem_kind
                        .map_or(String::new(), |k| format!(" {}", k.tag())),
                )));
                if let Some(st) = s.startup_s {
                    second.push(Span::styled(format!(" · start-up {st:.0} s"), theme.dim()));
                }
                if s.n == 0 {
                    second.push(Span::styled("  (warming up)", theme.dim()));
                }
            }
        }
    }
    // A failure's first line matters more than the figures so far.
    let failure = app
        .screens
        .run
        .trial
        .as_ref()
        .and_then(|t| match &t.result {
            Some(Ok(r)) => r.failure.as_ref().and_then(|f| f.line.clone()),
            Some(Err(e)) => Some(e.clone()),
            None => None,
        });
    let second = match failure {
        Some(l) => Line::styled(fit(&l, w), theme.error()),
        None => {
            let text: String = second.iter().map(|s| s.content.as_ref()).collect();
            Line::raw(fit(&text, w))
        }
    };
    f.render_widget(
        Paragraph::new(vec![Line::from(first), second])
            .block(Block::default().borders(Borders::ALL).title(" Trial ")),
        area,
    );
}

pub(crate) fn bounds(points: &[(f64, f64)]) -> ([f64; 2], [f64; 2]) {
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in points {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
        y0 = y0.min(*y);
        y1 = y1.max(*y);
    }
    if points.is_empty() {
        return ([0.0, 1.0], [0.0, 1.0]);
    }
    let pad = ((y1 - y0) * 0.1).max(y1.abs() * 0.01).max(1e-9);
    ([x0, x1.max(x0 + 1.0)], [(y0 - pad).max(0.0), y1 + pad])
}

fn chart<'a>(
    title: String,
    points: &'a [(f64, f64)],
    skip: usize,
    x_label: &'a str,
    theme: &Theme,
    color: usize,
) -> Chart<'a> {
    let (xb, _) = bounds(points);
    let steady = if points.len() > skip + 1 {
        &points[skip..]
    } else {
        points
    };
    let (_, raw) = bounds(steady);
    let (yb, decimals) = y_axis(steady, raw);
    let data = Dataset::default()
        .marker(symbols::Marker::Braille)
        .graph_type(GraphType::Line)
        .style(theme.series(color))
        .data(points);
    Chart::new(vec![data])
        .block(Block::default().borders(Borders::ALL).title(title))
        .x_axis(Axis::default().bounds(xb).labels(vec![
            Span::raw(format!("{:.0}", xb[0])),
            Span::raw(x_label),
            Span::raw(format!("{:.0}", xb[1])),
        ]))
        .y_axis(
            Axis::default().bounds(yb).labels(
                crate::tui::axis::labels(yb, decimals)
                    .map(Span::raw)
                    .to_vec(),
            ),
        )
}

fn draw_charts(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let empty = LiveTrial::default();
    let t = app.screens.run.trial.as_ref().unwrap_or(&empty);
    let step: Vec<(f64, f64)> = t
        .iters
        .iter()
        .filter_map(|i| i.elapsed_ms.map(|v| (i.iteration as f64, v)))
        .collect();
    let tflops: Vec<(f64, f64)> = t
        .iters
        .iter()
        .filter_map(|i| i.tflops_per_gpu.map(|v| (i.iteration as f64, v)))
        .collect();
    let last = |v: &[(f64, f64)]| v.last().map(|p| p.1);
    // Warm-up steps (often several times the steady ones) would flatten the chart: the y range
    // comes from the steady part once there is one.
    let warm = t.summary.as_ref().map_or(0, |s| s.warmup);
    let step_title = format!(" step time ms (last {}) ", num(last(&step), 1, ""));
    let per = if t.stand_in() {
        " (CPU stand-in)"
    } else {
        "/GPU"
    };
    let tf_title = format!(" TFLOP/s{per} (last {}) ", num(last(&tflops), 1, ""));
    if area.width >= 100 {
        let [a, b] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
            .areas(area);
        f.render_widget(chart(step_title, &step, warm, "iteration", theme, 0), a);
        f.render_widget(chart(tf_title, &tflops, warm, "iteration", theme, 1), b);
    } else {
        f.render_widget(chart(step_title, &step, warm, "iteration", theme, 0), area);
    }
}

fn draw_gpus(f: &mut Frame, app: &App, theme: &Theme, area: Rect) {
    let tel = &app.telemetry;
    let title = format!(
        " GPUs · {} ",
        if tel.backend.is_empty() {
            "starting telemetry…"
        } else {
            &tel.backend
        }
    );
    let mut block = Block::default().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    let mut lines = Vec::new();
    if let Some(note) = &tel.note {
        lines.push(Line::styled(fit(note, inner.width as usize), theme.dim()));
    }
    // Say so when the terminal is too short for every GPU's row.
    let fits = (inner.height as usize).saturating_sub(lines.len() + 1);
    let ngpus = tel.last.as_ref().map_or(0, |s| s.gpus.len());
    if ngpus > fits {
        block = block.title(format!(
            " {fits} of {ngpus} shown (a taller terminal shows all) "
        ));
    }
    f.render_widget(block, area);
    let host = tel.last.as_ref().map(|s| &s.host);
    lines.push(Line::styled(
        format!(
            "host CPU {} · RAM {}/{} GiB",
            num(host.and_then(|h| h.cpu_pct), 0, "%"),
            num(host.and_then(|h| h.ram_used_bytes).map(gib), 1, ""),
            num(host.and_then(|h| h.ram_total_bytes).map(gib), 1, ""),
        ),
        theme.dim(),
    ));
    let para_h = lines.len() as u16;
    let [text_area, rows_area] =
        Layout::vertical([Constraint::Length(para_h), Constraint::Min(0)]).areas(inner);
    f.render_widget(Paragraph::new(lines), text_area);
    let Some(last) = &tel.last else { return };
    let spark_w = if inner.width >= 120 { 40 } else { 12 };
    for (row, g) in last.gpus.iter().enumerate() {
        if row as u16 >= rows_area.height {
            break;
        }
        let r = Rect {
            x: rows_area.x,
            y: rows_area.y + row as u16,
            width: rows_area.width,
            height: 1,
        };
        let name = tel
            .gpus
            .iter()
            .find(|i| i.index == g.gpu)
            .map_or(String::new(), |i| short_gpu_name(&i.name).to_string());
        let temps: Vec<String> = g.temp_c.values().map(|t| format!("{t:.0}")).collect();
        let throttle = match &g.throttle {
            Some(t) if !t.is_empty() => format!(" [{}]", t.join(",")),
            _ => String::new(),
        };
        let text = format!(
            "{} {:<12} {:>4} {:>5}/{:<3}GiB {:>5} {:>5}°C {:>4}MHz{throttle}",
            g.gpu,
            fit(&name, 12),
            num(g.util_pct, 0, "%"),
            num(g.vram_used_bytes.map(gib), 1, ""),
            num(g.vram_total_bytes.map(gib), 0, ""),
            num(g.power_w, 0, "W"),
            if temps.is_empty() {
                "-".into()
            } else {
                temps.join("/")
            },
            num(g.sclk_mhz, 0, ""),
        );
        let text_w = r.width.saturating_sub(spark_w + 1);
        let [ta, sa] =
            Layout::horizontal([Constraint::Length(text_w), Constraint::Min(0)]).areas(r);
        f.render_widget(Paragraph::new(fit(&text, text_w as usize)), ta);
        if let Some(h) = &tel.history {
            let util: Vec<u64> = h
                .series(g.gpu, |s| s.util_pct)
                .iter()
                .rev()
                .take(sa.width as usize)
                .rev()
                .map(|(_, v)| *v as u64)
                .collect();
            f.render_widget(
                Sparkline::default()
                    .data(&util)
                    .max(100)
                    .style(theme.series(row)),
                sa,
            );
        }
    }
}

/// `Slurm job 12`.
fn job_name(j: &Job) -> String {
    format!("{} job {}", scheduler_title(&j.scheduler), j.id)
}

/// A batch job's state in words within `w` columns: `Slurm job 12 pending (Resources)`,
/// `Slurm job 12 running on n1,n2` (the names that fit, then `+N`), `Slurm job 12 timeout`.
pub(crate) fn job_state(j: &Job, w: usize) -> String {
    let head = job_name(j);
    match j.state.as_str() {
        "PENDING" => match &j.reason {
            Some(r) => format!("{head} pending ({r})"),
            None => format!("{head} pending"),
        },
        "RUNNING" if !j.node_list.is_empty() => {
            let head = format!("{head} running on ");
            let room = w.saturating_sub(head.chars().count());
            let n = j.node_list.len();
            let mut names = String::new();
            for (i, name) in j.node_list.iter().enumerate() {
                let more = if i + 1 < n {
                    format!(",+{}", n - i - 1)
                } else {
                    String::new()
                };
                let sep = if i == 0 { "" } else { "," };
                // Keep this name when it (and the count of those after it) still fits.
                if names.chars().count() + sep.len() + name.chars().count() + more.len() > room
                    && i > 0
                {
                    names.push_str(&format!(",+{}", n - i));
                    break;
                }
                names.push_str(sep);
                names.push_str(name);
            }
            format!("{head}{names}")
        }
        other => format!("{head} {}", other.to_lowercase()),
    }
}

/// The figures of one node's latest snapshot: mean GPU utilisation, the fullest GPU's VRAM
/// used and its total (GiB), the hottest GPU sensor (°C), host CPU (%), mean power per GPU.
struct NodeNow {
    gpus: usize,
    util: Option<f64>,
    vram: Option<(f64, Option<f64>)>,
    temp: Option<f64>,
    cpu: Option<f64>,
    power: Option<f64>,
}

impl NodeNow {
    fn of(s: &crate::telemetry::sampler::Snapshot) -> NodeNow {
        let mean =
            |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
        let fullest = s
            .gpus
            .iter()
            .filter(|g| g.vram_used_bytes.is_some())
            .max_by_key(|g| g.vram_used_bytes);
        NodeNow {
            gpus: s.gpus.len(),
            util: mean(s.gpus.iter().filter_map(|g| g.util_pct).collect()),
            vram: fullest
                .and_then(|g| Some((gib(g.vram_used_bytes?), g.vram_total_bytes.map(gib)))),
            temp: s
                .gpus
                .iter()
                .flat_map(|g| g.temp_c.values().copied())
                .reduce(f64::max),
            cpu: s.host.cpu_pct,
            power: mean(s.gpus.iter().filter_map(|g| g.power_w).collect()),
        }
    }
}

/// A Slurm trial's nodes, one row each from its latest snapshot (the columns that fit, by
/// priority: node, GPU util, VRAM, hottest sensor, CPU, then GPU count, power, and the
/// summary's step time and flags when it has them).
fn draw_nodes(f: &mut Frame, t: &LiveTrial, job: &Job, theme: &Theme, area: Rect) {
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" Nodes · {} · latest sample ", job_name(job)));
    let inner = block.inner(area);
    let w = usize::from(inner.width);
    if t.nodes.is_empty() {
        let why = if t.result.is_some() {
            "no telemetry came from the job's nodes"
        } else if job.state == "PENDING" {
            "the job waits in the queue: its nodes report once it runs"
        } else {
            "no telemetry from the job's nodes yet"
        };
        f.render_widget(
            Paragraph::new(Line::styled(fit(why, w), theme.dim())).block(block),
            area,
        );
        return;
    }
    let shown = usize::from(inner.height.saturating_sub(1));
    if t.nodes.len() > shown {
        block = block.title(format!(
            " {shown} of {} shown (a taller terminal shows all) ",
            t.nodes.len()
        ));
    }
    let done: &[crate::domain::telemetry::NodeSummary] =
        t.summary.as_ref().map_or(&[], |s| s.nodes.as_slice());
    let summary_of = |name: &str| done.iter().find(|n| n.node == name);
    let rows: Vec<(&String, NodeNow)> = t.nodes.iter().map(|(n, s)| (n, NodeNow::of(s))).collect();
    // (priority, header, width, cell per row); the node name comes first and always shows.
    type Cell<'a> = Box<dyn Fn(&str, &NodeNow) -> String + 'a>;
    // In the order they show.
    let mut cols: Vec<(u8, &str, usize, Cell)> = vec![
        (6, "GPUs", 4, Box::new(|_, n| n.gpus.to_string())),
        (1, "GPU util", 8, Box::new(|_, n| num(n.util, 0, "%"))),
        (
            2,
            "VRAM GiB",
            11,
            Box::new(|_, n| match n.vram {
                Some((u, Some(t))) => format!("{u:.1}/{t:.0}"),
                Some((u, None)) => format!("{u:.1}"),
                None => "-".into(),
            }),
        ),
        (3, "max °C", 6, Box::new(|_, n| num(n.temp, 0, ""))),
        (7, "W/GPU", 5, Box::new(|_, n| num(n.power, 0, ""))),
        (4, "CPU", 4, Box::new(|_, n| num(n.cpu, 0, "%"))),
    ];
    if done.iter().any(|n| n.median_step_ms.is_some()) {
        cols.push((
            5,
            "step ms",
            8,
            Box::new(move |name, _| num(summary_of(name).and_then(|n| n.median_step_ms), 1, "")),
        ));
    }
    let name_w = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 16);
    let flags = |name: &str| {
        let Some(n) = summary_of(name) else {
            return String::new();
        };
        [(n.slowest, "slowest"), (n.hottest, "hottest")]
            .into_iter()
            .filter_map(|(on, f)| on.then_some(f))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let flags_w = rows.iter().map(|(n, _)| flags(n).len()).max().unwrap_or(0);
    // Drop the least important columns until the rest fit (the flags go first).
    let fits = |cols: &[(u8, &str, usize, Cell)], flags_w: usize| {
        name_w + cols.iter().map(|c| c.2 + 1).sum::<usize>() + flags_w.min(1) + flags_w <= w
    };
    let mut flags_w = flags_w;
    if !fits(&cols, flags_w) {
        flags_w = 0;
    }
    while !cols.is_empty() && !fits(&cols, flags_w) {
        let worst = cols
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| c.0)
            .map_or(0, |(i, _)| i);
        drop(cols.remove(worst));
    }
    let line = |name: String, cells: Vec<String>, flag: String| {
        let mut l = format!("{:<name_w$}", fit(&name, name_w));
        for (c, v) in cols.iter().zip(cells) {
            l.push_str(&format!(" {v:>w$}", w = c.2));
        }
        if flags_w > 0 && !flag.is_empty() {
            l.push(' ');
            l.push_str(&flag);
        }
        fit(&l, w)
    };
    let mut lines = vec![Line::styled(
        line(
            "node".into(),
            cols.iter().map(|c| c.1.to_string()).collect(),
            String::new(),
        ),
        theme.dim(),
    )];
    for (name, now) in rows.iter().take(shown) {
        let flag = flags(name);
        let text = line(
            (*name).clone(),
            cols.iter().map(|c| (c.3)(name, now)).collect(),
            flag.clone(),
        );
        lines.push(if flag.is_empty() {
            Line::raw(text)
        } else {
            Line::styled(text, theme.warn())
        });
    }
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// The GPU's name without the vendor's brand words, which leave no room for the model
/// (`AMD Instinct MI300X` -> `MI300X`).
fn short_gpu_name(name: &str) -> &str {
    ["AMD Instinct ", "AMD Radeon ", "NVIDIA "]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .unwrap_or(name)
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// A line that tells of a failure (marked in the log tail).
pub fn is_failure_line(l: &str) -> bool {
    const MARKS: [&str; 7] = [
        "Traceback",
        "Error",
        "error:",
        "OutOfMemory",
        "out of memory",
        "NCCL WARN",
        "Killed",
    ];
    MARKS.iter().any(|m| l.contains(m))
}

fn draw_log(f: &mut Frame, t: Option<&LiveTrial>, theme: &Theme, area: Rect) {
    let h = area.height.saturating_sub(2) as usize;
    let w = area.width.saturating_sub(2) as usize;
    let lines: Vec<Line> = t
        .map(|t| {
            let n = t.log.len();
            t.log
                .iter()
                .skip(n.saturating_sub(h))
                .map(|(s, l)| {
                    let style = if is_failure_line(l) {
                        theme.error()
                    } else if *s == Stream::Stderr {
                        theme.dim()
                    } else {
                        theme.text()
                    };
                    Line::styled(fit(l, w), style)
                })
                .collect()
        })
        .unwrap_or_default();
    let title = match t.and_then(|t| t.dir.as_ref()) {
        Some(d) => format!(" log · {} ", crate::util::paths::display_path(d)),
        None => " log ".into(),
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}
