//! The TUI's state and its pure update: `update(&mut App, Msg) -> Vec<Effect>`. No I/O happens
//! here; the event loop (`mod.rs`) performs the effects by calling the core and feeds the results
//! back as messages. Key handling goes through `keymap::action` first.

use super::keymap::{self, Action};
use crate::app::views::config::{ConfigView, FlagRow, PendingEdit, PlanView};
use crate::config::catalog::{FlagType, Step};
use crate::domain::study::StudyRecord;
use crate::domain::trial::Iteration;
use crate::domain::trial::{Summary, TrialResult};
use crate::run::process::Stream;
use crate::run::trial::TrialEvent;
use crate::store::TrialRow;
use crate::telemetry::GpuInfo;
use crate::telemetry::sampler::{History, Snapshot};
use crossterm::event::KeyEvent;
use std::collections::VecDeque;
use std::path::PathBuf;

/// Samples of telemetry history kept per GPU: 10 minutes at 2 Hz.
pub const HISTORY: usize = 1200;
/// Log lines kept for the Run screen.
pub const LOG_LINES: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Checklist,
    Flags,
    Run,
    Trials,
    Sweep,
}

impl Tab {
    pub const ALL: [Tab; 5] = [
        Tab::Checklist,
        Tab::Flags,
        Tab::Run,
        Tab::Trials,
        Tab::Sweep,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Tab::Checklist => "Checklist",
            Tab::Flags => "Flags",
            Tab::Run => "Run",
            Tab::Trials => "Trials",
            Tab::Sweep => "Sweep",
        }
    }

    fn index(self) -> usize {
        Tab::ALL.iter().position(|t| *t == self).unwrap_or(0)
    }
}

/// What the loop feeds into `update`.
// Messages live briefly on a channel; the big trial results are boxed already.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    /// The config view was (re)built; `plan` is set when edits are pending.
    Loaded(Result<(Box<ConfigView>, Option<PlanView>), String>),
    Saved(Result<String, String>),
    Trial(TrialEvent),
    TrialDone(Result<Box<TrialResult>, String>),
    /// A GEMM stage ended: its last trial, and one line on what it produced.
    GemmDone(Result<(Box<TrialResult>, String), String>),
    Telemetry(Box<Snapshot>),
    /// The GPUs the live sampler reads, its backend, and a note when no GPU backend works.
    TelemetryReady {
        gpus: Vec<GpuInfo>,
        backend: String,
        note: Option<String>,
    },
    Trials(Result<Vec<TrialRow>, String>),
    /// One line of a running sweep's progress.
    SweepLine(String),
    /// The sweep ended: the study's name, its record (None when it was stopped) and the command
    /// that resumes it.
    SweepDone(Result<(String, Option<Box<StudyRecord>>, String), String>),
    /// A step of a running use case worth a line on the status bar.
    Note(String),
    /// The experiment file changed on disk (another program wrote it).
    DiskChanged,
    /// SIGTERM or SIGHUP: stop everything and leave.
    Terminate,
}

/// What `update` asks the loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Rebuild the config view with these unsaved edits.
    Load(Vec<PendingEdit>),
    Save(Vec<PendingEdit>),
    StartTrial {
        profile: String,
    },
    /// Run HipBLASLt stage `stage` (1–3) as trial(s) with this profile.
    StartGemmStage {
        stage: u8,
        profile: String,
    },
    StopTrial,
    StartSweep {
        space: String,
        profile: String,
    },
    StopSweep,
    LoadTrials,
    Quit,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    Help,
    /// The guided tour, at this step.
    Tour(usize),
    ConfirmQuit,
    /// The diff of the unsaved edits; `save` asks to confirm writing.
    Diff {
        save: bool,
    },
}

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

#[derive(Debug, Clone, Default)]
pub struct FlagsState {
    pub selected: usize,
    /// The search being typed (`/`), and the one in force.
    pub searching: bool,
    pub query: String,
    pub editor: Option<Editor>,
    /// Only this step's flags (set when coming from the checklist).
    pub step: Option<Step>,
}

#[derive(Debug, Clone, Default)]
pub struct LiveTrial {
    pub id: Option<i64>,
    pub profile: String,
    pub argv: Vec<String>,
    pub dir: Option<PathBuf>,
    pub iters: Vec<Iteration>,
    pub summary: Option<Summary>,
    pub log: VecDeque<(Stream, String)>,
    pub stopping: Option<String>,
    /// Set when the trial has ended.
    pub result: Option<Result<TrialResult, String>>,
}

impl LiveTrial {
    pub fn running(&self) -> bool {
        self.result.is_none()
    }
}

/// What the Run screen's telemetry chart shows (and, on short terminals, whether the bottom
/// panel is the log or that chart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPanel {
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
pub struct TrialsState {
    pub rows: Vec<TrialRow>,
    pub selected: usize,
    pub sort: SortKey,
    pub descending: bool,
    /// Marked for comparison (space).
    pub marked: Option<i64>,
    /// Show the selected trial in detail / compare the marked one with the selected one.
    pub detail: bool,
    pub compare: bool,
    pub error: Option<String>,
}

impl Default for TrialsState {
    fn default() -> Self {
        TrialsState {
            rows: Vec::new(),
            selected: 0,
            sort: SortKey::Id,
            descending: true,
            marked: None,
            detail: false,
            compare: false,
            error: None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub gpus: Vec<GpuInfo>,
    pub backend: String,
    pub note: Option<String>,
    pub history: Option<History>,
    pub last: Option<Snapshot>,
}

/// The Sweep screen: the spaces, a running sweep's progress, the last result.
#[derive(Debug, Clone, Default)]
pub struct SweepState {
    pub selected: usize,
    pub running: bool,
    pub log: VecDeque<String>,
    /// The last finished sweep: study name and record.
    pub result: Option<(String, StudyRecord)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Error,
}

pub struct App {
    pub tab: Tab,
    pub config: Option<ConfigView>,
    /// Why the config could not be read (shown instead of the screens that need it).
    pub load_error: Option<String>,
    pub pending: Vec<PendingEdit>,
    pub plan: Option<PlanView>,
    pub checklist_selected: usize,
    pub flags: FlagsState,
    pub profiles: Vec<String>,
    pub profile: usize,
    pub trial: Option<LiveTrial>,
    pub run_panel: RunPanel,
    pub telemetry: Telemetry,
    pub trials: TrialsState,
    pub sweep: SweepState,
    pub overlay: Option<Overlay>,
    pub status: Option<(Level, String)>,
    pub disk_changed: bool,
    pub quitting: bool,
    /// Trials and sweeps started here train with the tuned GEMMs (HipBLASLt stage 3).
    pub gemm_tuned: bool,
    /// Rows of the flag table that fit on screen (set by the view each frame; for paging).
    pub page: usize,
}

/// The guided tour's pages: title and text.
pub const TOUR: [(&str, &str); 5] = [
    (
        "Welcome to primus-tune",
        "This walks you through the Primus performance-tuning checklist for the experiment \
         shown at the top. Nothing is written to your files until you save, and every figure \
         shown was measured or is labelled as a rule. Esc skips the tour; t shows it again.",
    ),
    (
        "1 Checklist",
        "Six steps from the tuning guide: GEMMs (HipBLASLt tuning), kernels (Primus-Turbo), \
         precision, memory, communication overlap and MoE. Each says done, needs attention, \
         not applicable or not measured, and why. Enter opens the step's flags; on the GEMM \
         step n runs the next HipBLASLt tuning stage.",
    ),
    (
        "2 Flags",
        "Every flag the guide cares about: effective value, default and the file:line it comes \
         from. Enter edits (booleans toggle, enums cycle with Left/Right), u undoes, d shows \
         the diff, s saves with comments and layout kept. / searches.",
    ),
    (
        "3 Run",
        "Starts a short profiling trial of the current config with a launch profile \
         (proxy-cpu runs on any laptop). Step time, TFLOP/s, tokens/s, loss and memory come \
         from the training log; GPU charts from live telemetry. x stops the trial.",
    ),
    (
        "4 Trials",
        "Every trial stored beside the experiment: sort with s, Enter for detail, Space marks \
         one and c compares it with the selected one, a applies a trial's settings to the \
         config (shown as unsaved edits first). ? shows all keys.",
    ),
];

impl App {
    pub fn new(profiles: Vec<String>, default_profile: &str, tour: bool) -> App {
        let profile = profiles
            .iter()
            .position(|p| p == default_profile)
            .unwrap_or(0);
        App {
            tab: Tab::Checklist,
            config: None,
            load_error: None,
            pending: Vec::new(),
            plan: None,
            checklist_selected: 0,
            flags: FlagsState::default(),
            profiles,
            profile,
            trial: None,
            run_panel: RunPanel::Log,
            telemetry: Telemetry::default(),
            trials: TrialsState::default(),
            sweep: SweepState::default(),
            overlay: tour.then_some(Overlay::Tour(0)),
            status: None,
            disk_changed: false,
            quitting: false,
            gemm_tuned: false,
            page: 10,
        }
    }

    pub fn trial_running(&self) -> bool {
        self.trial.as_ref().is_some_and(LiveTrial::running)
    }

    /// A trial or a sweep is running (their processes must be stopped before leaving).
    pub fn busy(&self) -> bool {
        self.trial_running() || self.sweep.running
    }

    /// The flag rows the Flags screen lists (step filter and search applied).
    pub fn visible_flags(&self) -> Vec<&FlagRow> {
        let Some(c) = &self.config else {
            return Vec::new();
        };
        let q = self.flags.query.to_lowercase();
        let mut rows: Vec<&FlagRow> = c
            .flags
            .iter()
            .filter(|f| self.flags.step.is_none_or(|s| f.step == s))
            .filter(|f| q.is_empty() || f.name.to_lowercase().contains(&q))
            .collect();
        rows.sort_by_key(|f| (Step::ALL.iter().position(|s| *s == f.step), f.env_var));
        rows
    }

    /// The trials in the chosen order.
    pub fn sorted_trials(&self) -> Vec<&TrialRow> {
        let mut rows: Vec<&TrialRow> = self.trials.rows.iter().collect();
        let key = |r: &TrialRow| -> f64 {
            match self.trials.sort {
                SortKey::Id | SortKey::Status => r.id as f64,
                SortKey::Step => r.median_step_ms.unwrap_or(f64::INFINITY),
                SortKey::Tflops => r.tflops_per_gpu.unwrap_or(f64::NEG_INFINITY),
                SortKey::Tokens => r.tokens_per_s_per_gpu.unwrap_or(f64::NEG_INFINITY),
                SortKey::Memory => r.peak_mem_gib.unwrap_or(f64::INFINITY),
            }
        };
        rows.sort_by(|a, b| {
            let o = if self.trials.sort == SortKey::Status {
                a.status.as_str().cmp(b.status.as_str())
            } else {
                key(a).total_cmp(&key(b))
            };
            o.then(a.id.cmp(&b.id))
        });
        if self.trials.descending {
            rows.reverse();
        }
        rows
    }

    pub fn selected_trial(&self) -> Option<&TrialRow> {
        self.sorted_trials().get(self.trials.selected).copied()
    }

    fn info(&mut self, s: impl Into<String>) {
        self.status = Some((Level::Info, s.into()));
    }

    fn error(&mut self, s: impl Into<String>) {
        self.status = Some((Level::Error, s.into()));
    }
}

/// Apply one message; return what the loop must do.
pub fn update(app: &mut App, msg: Msg) -> Vec<Effect> {
    match msg {
        Msg::Key(k) => {
            let action = keymap::action(app, k);
            // A message stays until the next key (then the key hints come back), unless that
            // key sets a new one.
            if action != Action::None {
                app.status = None;
            }
            apply(app, action)
        }
        Msg::Loaded(Ok((view, plan))) => {
            app.config = Some(*view);
            app.plan = plan;
            app.load_error = None;
            app.disk_changed = false;
            clamp_selection(app);
            vec![]
        }
        Msg::Loaded(Err(e)) => {
            app.load_error = Some(e.clone());
            app.error(e);
            vec![]
        }
        Msg::Saved(Ok(what)) => {
            app.pending.clear();
            app.plan = None;
            app.info(what);
            vec![Effect::Load(Vec::new())]
        }
        Msg::Saved(Err(e)) => {
            app.error(e);
            vec![]
        }
        Msg::Trial(ev) => {
            on_trial_event(app, ev);
            vec![]
        }
        Msg::TrialDone(r) => {
            let ended = match &r {
                Ok(t) => format!(
                    "trial {} {} ({})",
                    t.trial_id.map_or("-".into(), |i| i.to_string()),
                    t.status,
                    t.stop_reason
                ),
                Err(e) => format!("the trial could not run: {e}"),
            };
            let trial = app.trial.get_or_insert_with(LiveTrial::default);
            if let Ok(t) = &r {
                trial.summary = Some(t.summary.clone());
            }
            trial.result = Some(r.map(|b| *b));
            app.info(ended);
            let mut fx = vec![Effect::LoadTrials];
            if app.quitting && !app.busy() {
                fx.push(Effect::Quit);
            }
            fx
        }
        Msg::GemmDone(r) => {
            let (trial, summary) = match r {
                Ok((t, summary)) => (Ok(t), Some(summary)),
                Err(e) => (Err(e), None),
            };
            let mut fx = update(app, Msg::TrialDone(trial));
            if let Some(summary) = summary {
                app.info(summary);
            }
            // The stage's files changed: the GEMM step's status is read again.
            fx.push(Effect::Load(app.pending.clone()));
            fx
        }
        Msg::SweepLine(line) => {
            if app.sweep.log.len() == LOG_LINES {
                app.sweep.log.pop_front();
            }
            app.sweep.log.push_back(line);
            vec![]
        }
        Msg::SweepDone(r) => {
            app.sweep.running = false;
            match r {
                Ok((study, Some(rec), _)) => {
                    app.info(format!(
                        "sweep {study} done: a applies its pick (as unsaved edits)"
                    ));
                    app.sweep.result = Some((study, *rec));
                }
                Ok((study, None, resume)) => {
                    app.info(format!("sweep {study} stopped; `{resume}` continues it"))
                }
                Err(e) => app.error(format!("the sweep could not run: {e}")),
            }
            let mut fx = vec![Effect::LoadTrials];
            if app.quitting && !app.busy() {
                fx.push(Effect::Quit);
            }
            fx
        }
        Msg::Telemetry(s) => {
            let h = app
                .telemetry
                .history
                .get_or_insert_with(|| History::new(HISTORY));
            h.push(&s);
            app.telemetry.last = Some(*s);
            vec![]
        }
        Msg::TelemetryReady {
            gpus,
            backend,
            note,
        } => {
            app.telemetry.gpus = gpus;
            app.telemetry.backend = backend;
            app.telemetry.note = note;
            vec![]
        }
        Msg::Trials(Ok(rows)) => {
            app.trials.rows = rows;
            app.trials.error = None;
            let n = app.trials.rows.len();
            app.trials.selected = app.trials.selected.min(n.saturating_sub(1));
            vec![]
        }
        Msg::Trials(Err(e)) => {
            app.trials.error = Some(e);
            vec![]
        }
        Msg::DiskChanged => {
            if app.pending.is_empty() {
                app.info("the experiment changed on disk; reloaded");
                vec![Effect::Load(Vec::new())]
            } else {
                app.disk_changed = true;
                app.error(
                    "the experiment changed on disk: R reloads it (drops your unsaved edits)",
                );
                vec![]
            }
        }
        Msg::Note(line) => {
            app.info(line);
            vec![]
        }
        Msg::Terminate => quit_now(app),
    }
}

fn quit_now(app: &mut App) -> Vec<Effect> {
    app.quitting = true;
    let mut fx = Vec::new();
    if app.trial_running() {
        fx.push(Effect::StopTrial);
    }
    if app.sweep.running {
        fx.push(Effect::StopSweep);
    }
    if fx.is_empty() {
        fx.push(Effect::Quit);
    }
    fx
}

fn on_trial_event(app: &mut App, ev: TrialEvent) {
    let t = app.trial.get_or_insert_with(LiveTrial::default);
    match ev {
        TrialEvent::Started {
            trial_id,
            argv,
            trial_dir,
        } => {
            t.id = Some(trial_id);
            t.argv = argv;
            t.dir = Some(trial_dir);
        }
        TrialEvent::Line { stream: s, line } => {
            if t.log.len() == LOG_LINES {
                t.log.pop_front();
            }
            t.log.push_back((s, line));
        }
        TrialEvent::Iteration { it, summary } => {
            t.iters.push(it);
            t.summary = Some(*summary);
        }
        TrialEvent::Stopping { reason } => t.stopping = Some(reason.to_string()),
        TrialEvent::Telemetry(_) => {} // the live sampler feeds the charts
        TrialEvent::TelemetryUnavailable { why } => {
            app.telemetry.note.get_or_insert(why);
        }
    }
}

fn clamp_selection(app: &mut App) {
    let n = app.visible_flags().len();
    app.flags.selected = app.flags.selected.min(n.saturating_sub(1));
    let steps = app.config.as_ref().map_or(0, |c| c.checklist.steps.len());
    app.checklist_selected = app.checklist_selected.min(steps.saturating_sub(1));
}

fn move_by(sel: &mut usize, delta: isize, len: usize) {
    if len == 0 {
        *sel = 0;
        return;
    }
    let v = (*sel as isize + delta).clamp(0, len as isize - 1);
    *sel = v as usize;
}

/// Perform one user action.
pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::None => vec![],
        Action::Quit => {
            if app.busy() || !app.pending.is_empty() {
                app.overlay = Some(Overlay::ConfirmQuit);
                vec![]
            } else {
                vec![Effect::Quit]
            }
        }
        Action::ForceQuit => quit_now(app),
        Action::CloseOverlay => {
            app.overlay = None;
            vec![]
        }
        Action::Help => {
            app.overlay = Some(Overlay::Help);
            vec![]
        }
        Action::Tour => {
            app.overlay = Some(Overlay::Tour(0));
            vec![]
        }
        Action::TourNext => {
            if let Some(Overlay::Tour(i)) = app.overlay {
                app.overlay = (i + 1 < TOUR.len()).then_some(Overlay::Tour(i + 1));
            }
            vec![]
        }
        Action::TourBack => {
            if let Some(Overlay::Tour(i)) = app.overlay {
                app.overlay = Some(Overlay::Tour(i.saturating_sub(1)));
            }
            vec![]
        }
        Action::GoTab(t) => {
            app.tab = t;
            if t == Tab::Trials {
                return vec![Effect::LoadTrials];
            }
            vec![]
        }
        Action::NextTab | Action::PrevTab => {
            let n = Tab::ALL.len();
            let i = app.tab.index();
            let j = if action == Action::NextTab {
                (i + 1) % n
            } else {
                (i + n - 1) % n
            };
            apply(app, Action::GoTab(Tab::ALL[j]))
        }
        Action::Up(n) | Action::Down(n) => {
            let d = if matches!(action, Action::Up(_)) {
                -(n as isize)
            } else {
                n as isize
            };
            match app.tab {
                Tab::Checklist => {
                    let len = app.config.as_ref().map_or(0, |c| c.checklist.steps.len());
                    move_by(&mut app.checklist_selected, d, len);
                }
                Tab::Flags => {
                    let len = app.visible_flags().len();
                    move_by(&mut app.flags.selected, d, len);
                }
                Tab::Trials => {
                    let len = app.trials.rows.len();
                    move_by(&mut app.trials.selected, d, len);
                }
                Tab::Sweep => {
                    let len = app.config.as_ref().map_or(0, |c| c.spaces.len());
                    move_by(&mut app.sweep.selected, d, len);
                }
                Tab::Run => {}
            }
            vec![]
        }
        Action::Top | Action::Bottom => {
            let top = action == Action::Top;
            let last = |len: usize| if top { 0 } else { len.saturating_sub(1) };
            match app.tab {
                Tab::Checklist => {
                    let len = app.config.as_ref().map_or(0, |c| c.checklist.steps.len());
                    app.checklist_selected = last(len);
                }
                Tab::Flags => app.flags.selected = last(app.visible_flags().len()),
                Tab::Trials => app.trials.selected = last(app.trials.rows.len()),
                Tab::Sweep => {
                    app.sweep.selected = last(app.config.as_ref().map_or(0, |c| c.spaces.len()))
                }
                Tab::Run => {}
            }
            vec![]
        }
        Action::OpenStep => {
            let step = app
                .config
                .as_ref()
                .and_then(|c| c.checklist.steps.get(app.checklist_selected))
                .map(|s| s.step);
            app.flags.step = step;
            app.flags.query.clear();
            app.flags.selected = 0;
            app.tab = Tab::Flags;
            vec![]
        }
        Action::ClearFilter => {
            app.flags.step = None;
            app.flags.query.clear();
            app.flags.selected = 0;
            vec![]
        }
        Action::SearchStart => {
            app.flags.searching = true;
            app.flags.query.clear();
            app.flags.step = None;
            app.flags.selected = 0;
            vec![]
        }
        Action::SearchInput(c) => {
            app.flags.query.push(c);
            app.flags.selected = 0;
            vec![]
        }
        Action::SearchBackspace => {
            app.flags.query.pop();
            vec![]
        }
        Action::SearchDone => {
            app.flags.searching = false;
            vec![]
        }
        Action::SearchCancel => {
            app.flags.searching = false;
            app.flags.query.clear();
            vec![]
        }
        Action::Edit => start_edit(app),
        Action::EditInput(c) => {
            if let Some(e) = &mut app.flags.editor {
                e.text.push(c);
                e.error = crate::app::edit::check_value(&e.key, &e.text)
                    .err()
                    .map(|e| e.0);
            }
            vec![]
        }
        Action::EditBackspace => {
            if let Some(e) = &mut app.flags.editor {
                e.text.pop();
                e.error = crate::app::edit::check_value(&e.key, &e.text)
                    .err()
                    .map(|e| e.0);
            }
            vec![]
        }
        Action::EditCycle(step) => {
            if let Some(e) = &mut app.flags.editor
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
                e.error = crate::app::edit::check_value(&e.key, &e.text)
                    .err()
                    .map(|e| e.0);
            }
            vec![]
        }
        Action::EditCancel => {
            app.flags.editor = None;
            vec![]
        }
        Action::EditCommit => {
            let Some(e) = app.flags.editor.take() else {
                return vec![];
            };
            if let Some(err) = &e.error {
                let msg = err.clone();
                app.flags.editor = Some(e);
                app.error(msg);
                return vec![];
            }
            let current = app
                .visible_flags()
                .into_iter()
                .find(|r| r.name == e.key)
                .map(|r| r.value.clone());
            if current.as_deref() == Some(e.text.as_str())
                && !app.pending.iter().any(|p| p.key == e.key)
            {
                app.info(format!("{} unchanged", e.key));
                return vec![];
            }
            add_pending(app, e.key, e.text)
        }
        Action::Undo => {
            match app.pending.pop() {
                Some(p) => app.info(format!("undid {} = {}", p.key, p.text)),
                None => app.info("nothing to undo"),
            }
            if app.pending.is_empty() {
                app.plan = None;
            }
            vec![Effect::Load(app.pending.clone())]
        }
        Action::ShowDiff => {
            if app.pending.is_empty() {
                app.info("no unsaved edits");
            } else {
                app.overlay = Some(Overlay::Diff { save: false });
            }
            vec![]
        }
        Action::Save => {
            if app.pending.is_empty() {
                app.info("no unsaved edits");
                return vec![];
            }
            if app.disk_changed {
                app.error("the file changed on disk since it was read: R reloads it first");
                return vec![];
            }
            app.overlay = Some(Overlay::Diff { save: true });
            vec![]
        }
        Action::ConfirmYes => match app.overlay.take() {
            Some(Overlay::Diff { save: true }) => {
                if app.plan.as_ref().is_some_and(|p| p.refused) {
                    app.error("not saved: the edits break a rule (see the diagnostics)");
                    return vec![];
                }
                vec![Effect::Save(app.pending.clone())]
            }
            Some(Overlay::ConfirmQuit) => quit_now(app),
            other => {
                app.overlay = other;
                vec![]
            }
        },
        Action::Reload => {
            app.pending.clear();
            app.plan = None;
            app.disk_changed = false;
            app.info("reloaded from disk");
            vec![Effect::Load(Vec::new())]
        }
        Action::ProfileNext | Action::ProfilePrev => {
            if !app.profiles.is_empty() && !app.trial_running() {
                let n = app.profiles.len();
                app.profile = if action == Action::ProfileNext {
                    (app.profile + 1) % n
                } else {
                    (app.profile + n - 1) % n
                };
            }
            vec![]
        }
        Action::StartTrial => {
            let Some(profile) = launch_profile(app) else {
                return vec![];
            };
            app.trial = Some(LiveTrial {
                profile: profile.clone(),
                ..LiveTrial::default()
            });
            app.tab = Tab::Run;
            app.info(format!("starting a trial with {profile}"));
            vec![Effect::StartTrial { profile }]
        }
        Action::GemmStage => start_gemm_stage(app),
        Action::ToggleGemmTuned => toggle_gemm_tuned(app),
        Action::StopTrial => {
            if app.trial_running() {
                app.info("stopping the trial (SIGINT, then SIGTERM, then SIGKILL)");
                vec![Effect::StopTrial]
            } else {
                vec![]
            }
        }
        Action::NextPanel => {
            app.run_panel = app.run_panel.next();
            vec![]
        }
        Action::SortNext => {
            app.trials.sort = app.trials.sort.next();
            app.trials.descending = app.trials.sort != SortKey::Step
                && app.trials.sort != SortKey::Memory
                && app.trials.sort != SortKey::Status;
            vec![]
        }
        Action::SortReverse => {
            app.trials.descending = !app.trials.descending;
            vec![]
        }
        Action::ToggleDetail => {
            app.trials.detail = !app.trials.detail;
            app.trials.compare = false;
            vec![]
        }
        Action::Mark => {
            let id = app.selected_trial().map(|t| t.id);
            app.trials.marked = if app.trials.marked == id { None } else { id };
            vec![]
        }
        Action::Compare => {
            match (app.trials.marked, app.selected_trial().map(|t| t.id)) {
                (Some(a), Some(b)) if a != b => {
                    app.trials.compare = !app.trials.compare;
                    app.trials.detail = false;
                }
                _ => app.info("mark a trial with Space, select another, then press c"),
            }
            vec![]
        }
        Action::ApplyTrial => {
            let Some(t) = app.selected_trial() else {
                return vec![];
            };
            let own = crate::run::trial::trial_settings(t);
            if own.is_empty() {
                let id = t.id;
                app.info(format!(
                    "trial {id} ran the config as it is: nothing to apply"
                ));
                return vec![];
            }
            let edits: Vec<(String, String)> =
                own.iter().map(|(k, v)| (k.clone(), json_text(v))).collect();
            let id = t.id;
            for (k, v) in edits {
                app.pending.retain(|p| p.key != k);
                app.pending.push(PendingEdit { key: k, text: v });
            }
            app.info(format!(
                "trial {id}'s settings are unsaved edits now: d shows the diff, s saves, u undoes"
            ));
            app.tab = Tab::Flags;
            vec![Effect::Load(app.pending.clone())]
        }
        Action::RefreshTrials => vec![Effect::LoadTrials],
        Action::StartSweep => start_sweep(app),
        Action::StopSweep => {
            if app.sweep.running {
                app.info("stopping the sweep (the trial in flight is stopped; resume later)");
                vec![Effect::StopSweep]
            } else {
                vec![]
            }
        }
        Action::ApplySweep => {
            let Some((study, rec)) = &app.sweep.result else {
                app.info("no finished sweep yet");
                return vec![];
            };
            let Some(pick) = rec
                .pick
                .and_then(|p| rec.candidates.iter().find(|c| c.id == p))
            else {
                app.info(format!("sweep {study} has no pick"));
                return vec![];
            };
            let study = study.clone();
            let edits: Vec<(String, String)> = pick
                .overrides
                .iter()
                .map(|(k, v)| (k.clone(), json_text(v)))
                .collect();
            for (k, v) in edits {
                app.pending.retain(|p| p.key != k);
                app.pending.push(PendingEdit { key: k, text: v });
            }
            app.info(format!(
                "sweep {study}'s pick is unsaved edits now: d shows the diff, s saves, u undoes"
            ));
            app.tab = Tab::Flags;
            vec![Effect::Load(app.pending.clone())]
        }
    }
}

fn start_sweep(app: &mut App) -> Vec<Effect> {
    if app.busy() {
        app.info("a trial or a sweep is running (x stops it)");
        return vec![];
    }
    if !app.pending.is_empty() {
        app.error("save or undo your edits first: a sweep runs the file on disk");
        return vec![];
    }
    let Some(row) = app
        .config
        .as_ref()
        .and_then(|c| c.spaces.get(app.sweep.selected))
    else {
        return vec![];
    };
    if let Some(why) = &row.not_applicable {
        let why = why.clone();
        app.error(why);
        return vec![];
    }
    let space = row.name.clone();
    let Some(profile) = app.profiles.get(app.profile).cloned() else {
        app.error("no launch profile found");
        return vec![];
    };
    app.sweep.running = true;
    app.sweep.log.clear();
    app.info(format!("sweeping {space} with {profile} (x stops it)"));
    vec![Effect::StartSweep { space, profile }]
}

/// A stored override as the text `set` would take.
fn json_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn add_pending(app: &mut App, key: String, text: String) -> Vec<Effect> {
    app.pending.retain(|p| p.key != key);
    app.info(format!("{key} = {text} (unsaved: s saves, u undoes)"));
    app.pending.push(PendingEdit { key, text });
    vec![Effect::Load(app.pending.clone())]
}

fn start_edit(app: &mut App) -> Vec<Effect> {
    let Some(row) = app
        .visible_flags()
        .get(app.flags.selected)
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
        return add_pending(app, row.name, new.to_string());
    }
    let text = if row.value == "-" {
        String::new()
    } else {
        row.value.clone()
    };
    app.flags.editor = Some(Editor {
        error: crate::app::edit::check_value(&row.name, &text)
            .err()
            .map(|e| e.0),
        key: row.name,
        text,
        ty: row.ty,
        choices: row.choices,
    });
    vec![]
}

/// `n` on the Checklist's GEMM step: the next HipBLASLt stage as trial(s) with the Run
/// screen's profile (not a proxy: the proxies never call hipBLASLt).
fn start_gemm_stage(app: &mut App) -> Vec<Effect> {
    let Some(c) = &app.config else { return vec![] };
    let on_gemms = c
        .checklist
        .steps
        .get(app.checklist_selected)
        .is_some_and(|s| s.step == crate::config::catalog::Step::Gemms);
    if !on_gemms {
        return vec![];
    }
    let Some(st) = &c.gemm else {
        app.info("HipBLASLt tuning through Primus' hook is for Megatron experiments");
        return vec![];
    };
    let Some(stage) = st.next else {
        app.info("all three GEMM stages are done");
        return vec![];
    };
    let Some(profile) = launch_profile(app) else {
        return vec![];
    };
    if profile.starts_with("proxy") {
        app.error(format!(
            "GEMM stage {stage} needs hipBLASLt: pick the primus or megatron profile on the Run screen (3, then [ ])"
        ));
        return vec![];
    }
    app.trial = Some(LiveTrial {
        profile: profile.clone(),
        ..LiveTrial::default()
    });
    app.tab = Tab::Run;
    app.info(format!("GEMM stage {stage} with {profile}"));
    vec![Effect::StartGemmStage { stage, profile }]
}

/// The Run screen's profile, when a trial may start now (none running, no unsaved edits);
/// otherwise says why on the status line.
fn launch_profile(app: &mut App) -> Option<String> {
    if app.trial_running() {
        app.info("a trial is already running (x stops it)");
        return None;
    }
    if !app.pending.is_empty() {
        app.error("save or undo your edits first: a trial runs the file on disk");
        return None;
    }
    let profile = app.profiles.get(app.profile).cloned();
    if profile.is_none() {
        app.error("no launch profile found");
    }
    profile
}

/// `u` on the Checklist's GEMM step: later trials and sweeps from the TUI train with the tuned
/// file (or stop doing so). Only once stage 2 has produced one.
fn toggle_gemm_tuned(app: &mut App) -> Vec<Effect> {
    let Some(c) = &app.config else { return vec![] };
    let on_gemms = c
        .checklist
        .steps
        .get(app.checklist_selected)
        .is_some_and(|s| s.step == crate::config::catalog::Step::Gemms);
    if !on_gemms {
        return vec![];
    }
    let tuned = c
        .gemm
        .as_ref()
        .is_some_and(|g| g.results.as_ref().is_some_and(|r| r.entries > 0) || g.in_use);
    if !app.gemm_tuned && !tuned {
        app.info("no tuned GEMMs yet: stage 2 writes them (n runs the next stage)");
        return vec![];
    }
    app.gemm_tuned = !app.gemm_tuned;
    app.info(if app.gemm_tuned {
        "trials and sweeps started here now train with the tuned GEMMs (u again: untuned)"
    } else {
        "trials and sweeps started here train with the untuned GEMMs"
    });
    vec![]
}
