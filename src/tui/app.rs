//! The TUI's state and its pure update: `update(&mut App, Msg) -> Vec<Effect>`. No I/O happens
//! here; the event loop performs the effects (`effects.rs`, through the app layer) and feeds the
//! results back as messages. A key goes through the key map; the actions every screen shares
//! are handled here, a screen's own by its module in `screens/`.

use super::keymap::{self, Action};
use super::screens::{self, Move, Screens, Tab};
use crate::app::AppError;
use crate::app::views::compare::Comparison;
use crate::app::views::config::{ConfigView, PendingEdit, PlanView};
use crate::app::views::studies::{StudyDetail, StudySummary};
use crate::app::views::trials::{ApplyPlan, TrialSummary};
use crate::domain::study::StudyRecord;
use crate::domain::trial::TrialResult;
use crate::run::trial::TrialEvent;
use crate::telemetry::GpuInfo;
use crate::telemetry::sampler::{History, Snapshot};
use crossterm::event::KeyEvent;

/// Samples of telemetry history kept per GPU: 10 minutes at 2 Hz.
pub const HISTORY: usize = 1200;
/// Log lines kept for the Run screen.
pub const LOG_LINES: usize = 500;

/// What the loop feeds into `update`.
// Messages live briefly on a channel; the big trial results are boxed already.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    /// A click or a wheel turn (mouse capture on).
    Mouse(crossterm::event::MouseEvent),
    /// A rule of the checklist was acknowledged (written to `primus-tune.toml`), or not.
    Acknowledged(Result<crate::domain::advice::Ack, AppError>),
    /// The config view was (re)built; `plan` is set when edits are pending.
    Loaded(Result<(Box<ConfigView>, Option<PlanView>), AppError>),
    Saved(Result<String, AppError>),
    Trial(TrialEvent),
    TrialDone(Result<Box<TrialResult>, AppError>),
    /// A GEMM stage ended: its last trial, and one line on what it produced.
    GemmDone(Result<(Box<TrialResult>, String), AppError>),
    Telemetry(Box<Snapshot>),
    /// The GPUs the live sampler reads, its backend, and a note when no GPU backend works.
    TelemetryReady {
        gpus: Vec<GpuInfo>,
        backend: String,
        note: Option<String>,
    },
    Trials(Result<Vec<TrialSummary>, AppError>),
    /// Two trials compared (Trials screen, `c`).
    Comparison(Result<Box<Comparison>, AppError>),
    /// What applying a trial of another experiment would write (asked before it is applied).
    ApplyPlan(Result<ApplyPlan, AppError>),
    /// What applying a study's pick writes, as `recommend --study --apply` works it out.
    PickPlanned(
        String,
        Result<crate::app::views::recommend::apply::PickEdits, AppError>,
    ),
    /// One line of a running sweep's progress.
    SweepLine(String),
    /// The sweep ended: the study's name, its record (None when it was stopped) and the command
    /// that resumes it.
    SweepDone(Result<(String, Option<Box<StudyRecord>>, String), AppError>),
    /// The experiment's studies.
    Studies(Result<Vec<StudySummary>, AppError>),
    /// One study in full.
    Study(Result<Box<StudyDetail>, AppError>),
    /// The parallel layouts on the session's world.
    Layouts(Result<Box<crate::app::views::layouts::LayoutsView>, AppError>),
    /// A step of a running use case (or a report written) worth a line on the status bar.
    Note(String),
    /// The experiment file changed on disk (another program wrote it).
    DiskChanged,
    /// The versions saves replaced, for the list (`b` on Flags).
    Backups(Result<Vec<crate::app::backups::Backup>, AppError>),
    /// What restoring a version would change (`written: false`), or what it did.
    Restore(Result<crate::app::backups::Restore, AppError>),
    /// SIGTERM or SIGHUP: stop everything and leave.
    Terminate,
}

/// What `update` asks the loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Rebuild the config view with these unsaved edits.
    Load(Vec<PendingEdit>),
    Save(Vec<PendingEdit>),
    /// List the versions saves replaced.
    LoadBackups,
    /// Restore version `id` when `write`, else work out its diff.
    Restore {
        id: String,
        write: bool,
    },
    /// A trial of the file on disk with the unsaved edits as its overrides.
    StartTrial {
        profile: String,
        edits: Vec<PendingEdit>,
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
        /// Sweep knobs the profile does not model, as a labelled demo (`--allow-unmodeled`).
        demo: bool,
    },
    /// Continue an unfinished study (with the profile its trials ran with).
    ResumeSweep {
        study: String,
    },
    StopSweep,
    LoadTrials,
    /// Compare trial `b` with trial `a`.
    LoadComparison {
        a: i64,
        b: i64,
    },
    /// Work out what applying a trial (of another experiment) writes.
    PlanApply(i64),
    /// Work out what applying this study's pick writes.
    PlanPick(String),
    /// List every experiment's trials and studies (true) or this experiment's (false).
    SetScope(bool),
    LoadStudies,
    LoadStudy(String),
    /// The parallel layouts on the session's world (Sweep screen, the layout space's detail).
    LoadLayouts,
    /// Write a study's report into the workspace's reports folder.
    WriteReport(String),
    /// Acknowledge a rule of the checklist for this experiment, with the reason.
    Acknowledge {
        rule: String,
        reason: String,
    },
    /// Remember this launch profile as the one chosen for the experiment (the state file).
    RememberProfile(String),
    /// Give the terminal back and stop (SIGTSTP) until resumed, then redraw.
    Suspend,
    /// Run `$VISUAL`/`$EDITOR` on `path` at `line` (`+LINE`), then read the config again.
    OpenEditor {
        path: std::path::PathBuf,
        line: u32,
    },
    Quit,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    /// The key help, scrolled `scroll` rows down.
    Help {
        scroll: usize,
    },
    /// The guided tour, at this step.
    Tour(usize),
    ConfirmQuit,
    /// Start a trial or a sweep on GPUs? (what runs, its budget, the GPUs)
    ConfirmLaunch(Box<super::launch::Launch>),
    /// Apply the values of a trial that ran another experiment file?
    ConfirmApply(Box<ApplyPlan>),
    /// The diff of the unsaved edits, scrolled `scroll` rows down; `save` asks to confirm
    /// writing.
    Diff {
        save: bool,
        scroll: usize,
    },
    /// Errors not yet dismissed, each whole, over the box that was open (back when this one
    /// closes).
    Error {
        errors: Vec<String>,
        scroll: usize,
        under: Option<Box<Overlay>>,
    },
    /// The messages said so far (errors and notes), newest last.
    Messages {
        scroll: usize,
    },
    /// Acknowledge a to-do of the checklist: the reason being typed.
    Acknowledge {
        rule: &'static str,
        text: String,
        reason: String,
    },
    /// The versions saves replaced (kept in the workspace), newest first; `selected` is the
    /// one Enter restores.
    Backups {
        list: Vec<crate::app::backups::Backup>,
        selected: usize,
        scroll: usize,
    },
    /// Restore version `id`? The diff from the file now to it; `y` writes it.
    Restore {
        id: String,
        diff: String,
        scroll: usize,
    },
}

impl Overlay {
    /// The scroll offset of a box that scrolls (in rows; the view keeps it in range).
    pub fn scroll_mut(&mut self) -> Option<&mut usize> {
        match self {
            Overlay::Help { scroll }
            | Overlay::Diff { scroll, .. }
            | Overlay::Error { scroll, .. }
            | Overlay::Messages { scroll }
            | Overlay::Backups { scroll, .. }
            | Overlay::Restore { scroll, .. } => Some(scroll),
            _ => None,
        }
    }
}

/// Messages kept for the message log (`L`): the newest.
pub const MESSAGES: usize = 200;

#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub gpus: Vec<GpuInfo>,
    pub backend: String,
    pub note: Option<String>,
    pub history: Option<History>,
    pub last: Option<Snapshot>,
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
    /// A view of the experiment (with the plan of `pending`) is on its way: the plan shown is
    /// of older edits, so the save box waits for it rather than ask about the wrong diff.
    pub checking: bool,
    /// The launch profiles, and the one the Run screen has chosen (trials, sweeps, stages).
    pub profiles: Vec<String>,
    pub profile: usize,
    /// Per profile: its workload calls hipBLASLt (the GEMM stages apply to it).
    pub calls_hipblaslt: Vec<bool>,
    /// Per profile: it launches on GPUs (not a CPU stand-in): starting work asks first.
    pub on_gpus: Vec<bool>,
    /// Per profile: what it declares (what its measurements model).
    pub caps: Vec<crate::run::capabilities::Capabilities>,
    pub telemetry: Telemetry,
    pub screens: Screens,
    pub overlay: Option<Overlay>,
    pub status: Option<(Level, String)>,
    /// Every message said (errors and notes, not a running trial's progress), newest last:
    /// the message log's (the newest [`MESSAGES`]).
    pub messages: Vec<(Level, String)>,
    /// Messages the loop has not written to the log file yet (it takes them after each
    /// update).
    pub unlogged: Vec<(Level, String)>,
    pub disk_changed: bool,
    pub quitting: bool,
    /// Trials and sweeps started here train with the tuned GEMMs (HipBLASLt stage 3).
    pub gemm_tuned: bool,
    /// Rows of the active table that fit on screen (set by the view each frame; for paging).
    pub page: usize,
    /// The Trials and Studies screens list every experiment of the workspace.
    pub all_experiments: bool,
    /// Where the last frame drew the tabs and the active list (for mouse clicks).
    pub hits: super::mouse::Hits,
    /// The keys in force (the defaults file's `[keys]` applied).
    pub keymap: keymap::Keymap,
}

/// The guided tour's pages: title and text.
pub const TOUR: [(&str, &str); 6] = [
    (
        "Welcome to primus-tune",
        "This walks you through the Primus performance-tuning checklist for the experiment \
         shown at the top. Nothing is written to your files until you save, and every figure \
         shown was measured or is labelled as a rule. {skip} skips the tour, {tour} shows it \
         again, {quit} quits.",
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
        "Every trial of this experiment's workspace: sort with s, Enter for detail, Space \
         marks one and c compares it with the selected one, a applies a trial's settings to \
         the config (shown as unsaved edits first). ? shows all keys.",
    ),
    (
        "5 Sweep",
        "Sweeps one knob space (micro batch, recompute, DeepEP CUs, ...) with short trials: \
         every legal candidate, longer runs for the best, until the leader stands out from \
         the noise. Enter shows a space's details; r starts the sweep (on GPUs it asks first, \
         showing the budget and the GPUs); x stops it, a applies the pick. 6 Studies keeps \
         every sweep to resume, report or apply.",
    ),
];

impl App {
    pub fn new(profiles: Vec<String>, default_profile: &str, tour: bool) -> App {
        let profile = profiles
            .iter()
            .position(|p| p == default_profile)
            .unwrap_or(0);
        // What the built-in profiles declare (no file is read here); the loop sets the user's.
        let calls_hipblaslt = profiles
            .iter()
            .map(|p| {
                crate::run::profile::find(p, None)
                    .map_or(true, |p| p.capabilities.calls_hipblaslt())
            })
            .collect();
        let on_gpus = profiles
            .iter()
            .map(|p| crate::run::profile::find(p, None).map_or(true, |p| launches_on_gpus(&p)))
            .collect();
        let caps = profiles
            .iter()
            .map(|p| {
                crate::run::profile::find(p, None)
                    .map_or_else(|_| Default::default(), |p| p.capabilities)
            })
            .collect();
        App {
            tab: Tab::Checklist,
            config: None,
            load_error: None,
            pending: Vec::new(),
            plan: None,
            checking: false,
            profiles,
            profile,
            calls_hipblaslt,
            on_gpus,
            caps,
            telemetry: Telemetry::default(),
            screens: Screens::default(),
            overlay: tour.then_some(Overlay::Tour(0)),
            status: None,
            messages: Vec::new(),
            unlogged: Vec::new(),
            disk_changed: false,
            quitting: false,
            gemm_tuned: false,
            page: 10,
            all_experiments: false,
            hits: Default::default(),
            keymap: keymap::Keymap::default(),
        }
    }

    pub fn trial_running(&self) -> bool {
        self.screens.run.running()
    }

    /// A trial or a sweep is running (their processes must be stopped before leaving).
    pub fn busy(&self) -> bool {
        self.trial_running() || self.screens.sweep.running
    }

    /// The Run screen's launch profile.
    pub fn profile_name(&self) -> Option<&str> {
        self.profiles.get(self.profile).map(String::as_str)
    }

    /// The launch profiles with what they declare (the loop reads the user's once).
    pub fn set_profiles(&mut self, profiles: &[crate::run::profile::Profile]) {
        let chosen = self.profile_name().map(str::to_string);
        self.profiles = profiles.iter().map(|p| p.name.clone()).collect();
        self.calls_hipblaslt = profiles
            .iter()
            .map(|p| p.capabilities.calls_hipblaslt())
            .collect();
        self.on_gpus = profiles.iter().map(launches_on_gpus).collect();
        self.caps = profiles.iter().map(|p| p.capabilities.clone()).collect();
        self.profile = chosen
            .and_then(|c| self.profiles.iter().position(|p| *p == c))
            .unwrap_or(0);
    }

    /// The Run screen's profile calls hipBLASLt.
    pub fn profile_calls_hipblaslt(&self) -> bool {
        self.calls_hipblaslt
            .get(self.profile)
            .copied()
            .unwrap_or(true)
    }

    /// What the Run screen's profile declares, when known.
    pub fn profile_caps(&self) -> Option<&crate::run::capabilities::Capabilities> {
        self.caps.get(self.profile)
    }

    /// The Run screen's profile launches on GPUs (unknown: it does).
    pub fn profile_on_gpus(&self) -> bool {
        self.on_gpus.get(self.profile).copied().unwrap_or(true)
    }

    /// A note on the status line, kept in the message log.
    pub(crate) fn info(&mut self, s: impl Into<String>) {
        let s = s.into();
        self.record(Level::Info, &s);
        self.status = Some((Level::Info, s));
    }

    /// An error: shown whole in a box over the screen (Enter or Esc closes it; one already
    /// open takes it below the others), on the status line, and kept in the message log.
    pub(crate) fn error(&mut self, s: impl Into<String>) {
        let s = s.into();
        self.record(Level::Error, &s);
        self.status = Some((Level::Error, s.clone()));
        match &mut self.overlay {
            Some(Overlay::Error { errors, .. }) => errors.push(s),
            other => {
                let under = other.take().map(Box::new);
                self.overlay = Some(Overlay::Error {
                    errors: vec![s],
                    scroll: 0,
                    under,
                });
            }
        }
    }

    /// An error already shown whole where it happened (the flag editor's own line): on the
    /// status line and in the message log, without a box over it.
    pub(crate) fn error_in_place(&mut self, s: impl Into<String>) {
        let s = s.into();
        self.record(Level::Error, &s);
        self.status = Some((Level::Error, s));
    }

    fn record(&mut self, level: Level, s: &str) {
        for list in [&mut self.messages, &mut self.unlogged] {
            if list.len() >= MESSAGES {
                list.remove(0);
            }
            list.push((level, s.to_string()));
        }
    }
}

/// A profile runs on GPUs: one rank per GPU and not a CPU stand-in.
fn launches_on_gpus(p: &crate::run::profile::Profile) -> bool {
    p.capabilities.launch == crate::run::capabilities::LaunchKind::Gpus && !p.capabilities.stand_in
}

/// A stored override as the text `set` would take.
pub(crate) use crate::app::views::trials::yaml_text as json_text;

/// Adds edits (flag, text) as unsaved edits, each replacing an earlier one of its flag, and
/// shows them on the Flags screen.
pub(crate) fn add_edits(app: &mut App, edits: Vec<(String, String)>, said: String) -> Vec<Effect> {
    for (k, v) in edits {
        app.pending.retain(|p| p.key != k);
        app.pending.push(PendingEdit { key: k, text: v });
    }
    app.info(said);
    app.tab = Tab::Flags;
    vec![Effect::Load(app.pending.clone())]
}

/// Apply one message; return what the loop must do.
pub fn update(app: &mut App, msg: Msg) -> Vec<Effect> {
    let fx = step(app, msg);
    // The loop keeps only the latest load's answer, so any load asked for makes the plan old.
    if fx.iter().any(|e| matches!(e, Effect::Load(_))) {
        app.checking = true;
    }
    fx
}

fn step(app: &mut App, msg: Msg) -> Vec<Effect> {
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
            app.checking = false;
            app.config = Some(*view);
            app.plan = plan;
            app.load_error = None;
            app.disk_changed = false;
            screens::flags::clamp(app);
            screens::checklist::clamp(app);
            screens::sweep::on_config_loaded(app)
        }
        Msg::Loaded(Err(e)) => {
            app.checking = false;
            app.load_error = Some(e.to_string());
            app.error(e.to_string());
            vec![]
        }
        Msg::Saved(Ok(what)) => {
            app.pending.clear();
            app.plan = None;
            app.info(what);
            vec![Effect::Load(Vec::new())]
        }
        Msg::Saved(Err(e)) => {
            app.error(e.to_string());
            vec![]
        }
        Msg::Backups(r) => super::backups::on_list(app, r),
        Msg::Restore(r) => super::backups::on_restore(app, r),
        Msg::Trial(ev) => {
            screens::run::on_event(app, ev);
            vec![]
        }
        Msg::TrialDone(r) => screens::run::on_done(app, r),
        Msg::GemmDone(r) => gemm_done(app, r),
        Msg::SweepLine(line) => {
            screens::sweep::on_line(app, line);
            vec![]
        }
        Msg::SweepDone(r) => screens::sweep::on_done(app, r),
        Msg::Studies(r) => {
            screens::studies::on_list(app, r);
            vec![]
        }
        Msg::Study(r) => {
            screens::studies::on_detail(app, r);
            vec![]
        }
        Msg::Layouts(r) => {
            screens::sweep::on_layouts(app, r);
            vec![]
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
        Msg::Trials(r) => {
            screens::trials::on_rows(app, r);
            vec![]
        }
        Msg::Comparison(r) => {
            screens::trials::on_comparison(app, r);
            vec![]
        }
        Msg::ApplyPlan(r) => screens::trials::on_apply_plan(app, r),
        Msg::PickPlanned(study, r) => screens::sweep::on_pick(app, &study, r),
        Msg::Acknowledged(Ok(a)) => {
            app.info(format!(
                "acknowledged `{}` in {}: {} (recommend --unack {} withdraws it)",
                a.rule, a.from, a.reason, a.rule
            ));
            vec![Effect::Load(app.pending.clone())]
        }
        Msg::Acknowledged(Err(e)) => {
            app.error(format!("not acknowledged: {e}"));
            vec![]
        }
        Msg::Note(line) => {
            app.info(line);
            vec![]
        }
        Msg::DiskChanged => disk_changed(app),
        Msg::Mouse(m) => super::mouse::on_mouse(app, m),
        Msg::Terminate => quit_now(app),
    }
}

/// A GEMM stage ended: as a trial's end, with one line on what it produced; the stage's files
/// changed, so the GEMM step's status is read again.
fn gemm_done(app: &mut App, r: Result<(Box<TrialResult>, String), AppError>) -> Vec<Effect> {
    let (trial, summary) = match r {
        Ok((t, summary)) => (Ok(t), Some(summary)),
        Err(e) => (Err(e), None),
    };
    let mut fx = screens::run::on_done(app, trial);
    if let Some(summary) = summary {
        app.info(summary);
    }
    fx.push(Effect::Load(app.pending.clone()));
    fx
}

/// Another program wrote the experiment: read again, unless edits are unsaved (then R does).
fn disk_changed(app: &mut App) -> Vec<Effect> {
    if app.pending.is_empty() {
        app.info("the experiment changed on disk; reloaded");
        vec![Effect::Load(Vec::new())]
    } else {
        app.disk_changed = true;
        app.error("the experiment changed on disk: R reloads it (drops your unsaved edits)");
        vec![]
    }
}

/// Stop what runs, then leave (the loop quits once the workers report their end).
pub(crate) fn quit_now(app: &mut App) -> Vec<Effect> {
    app.quitting = true;
    let mut fx = Vec::new();
    if app.trial_running() {
        fx.push(Effect::StopTrial);
    }
    if app.screens.sweep.running {
        fx.push(Effect::StopSweep);
    }
    if fx.is_empty() {
        fx.push(Effect::Quit);
    }
    fx
}

/// After a worker ended: quit when the user asked to and nothing runs any more.
pub(crate) fn quit_if_done(app: &App, fx: &mut Vec<Effect>) {
    if app.quitting && !app.busy() {
        fx.push(Effect::Quit);
    }
}

/// The tour's next page (past the last: the tour ends), or the one before.
fn turn_page(app: &mut App, next: bool) {
    if let Some(Overlay::Tour(i)) = app.overlay {
        app.overlay = match next {
            true => (i + 1 < TOUR.len()).then_some(Overlay::Tour(i + 1)),
            false => Some(Overlay::Tour(i.saturating_sub(1))),
        };
    }
}

/// Scrolls the open box (one that does not scroll ignores it); `app.page` is its height as
/// last drawn, and the view keeps the offset within its rows.
fn scroll(app: &mut App, action: Action) {
    let page = app.page.max(1);
    if super::backups::select(app, action, page) {
        return;
    }
    let Some(at) = app.overlay.as_mut().and_then(Overlay::scroll_mut) else {
        return;
    };
    *at = match action {
        Action::Up => at.saturating_sub(1),
        Action::Down => at.saturating_add(1),
        Action::PageUp => at.saturating_sub(page),
        Action::PageDown => at.saturating_add(page),
        Action::Top => 0,
        _ => usize::MAX,
    };
}

/// `y` (or Enter on a typed reason): the open question's answer.
fn confirm_yes(app: &mut App) -> Vec<Effect> {
    match app.overlay.take() {
        Some(o @ Overlay::Diff { save: true, .. }) if app.checking => {
            app.overlay = Some(o);
            app.info("still checking the edits: y again once their diff shows");
            vec![]
        }
        Some(Overlay::Diff { save: true, .. }) => {
            if app.plan.as_ref().is_some_and(|p| p.refused) {
                app.error("not saved: the edits break a rule (see the diagnostics)");
                return vec![];
            }
            vec![Effect::Save(app.pending.clone())]
        }
        Some(Overlay::ConfirmQuit) => quit_now(app),
        Some(Overlay::Restore { id, .. }) => vec![Effect::Restore { id, write: true }],
        Some(Overlay::ConfirmLaunch(launch)) => super::launch::start(app, *launch),
        Some(Overlay::ConfirmApply(plan)) => screens::trials::apply_edits(app, *plan),
        Some(Overlay::Acknowledge { rule, text, reason }) => {
            if reason.trim().is_empty() {
                // The question stays, under the box that says why.
                app.overlay = Some(Overlay::Acknowledge { rule, text, reason });
                app.error("an acknowledgement needs a reason: type why, Esc cancels");
                return vec![];
            }
            vec![Effect::Acknowledge {
                rule: rule.to_string(),
                reason: reason.trim().to_string(),
            }]
        }
        other => {
            app.overlay = other;
            vec![]
        }
    }
}

/// Perform one user action: the ones every screen shares here, a screen's own in its module.
pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::None => vec![],
        Action::Quit => {
            // From an overlay too: it closes, and the quit question takes its place if needed.
            app.overlay = None;
            if app.busy() || !app.pending.is_empty() {
                app.overlay = Some(Overlay::ConfirmQuit);
                vec![]
            } else {
                vec![Effect::Quit]
            }
        }
        Action::ForceQuit => quit_now(app),
        Action::Suspend => vec![Effect::Suspend],
        Action::CloseOverlay => {
            // An error box gives back the box it covered.
            app.overlay = match app.overlay.take() {
                Some(Overlay::Error { under, .. }) => under.map(|o| *o),
                _ => None,
            };
            vec![]
        }
        Action::Help => {
            app.overlay = Some(Overlay::Help { scroll: 0 });
            vec![]
        }
        Action::Messages => {
            // Opened at its end: the newest message.
            app.overlay = Some(Overlay::Messages { scroll: usize::MAX });
            vec![]
        }
        Action::Tour => {
            app.overlay = Some(Overlay::Tour(0));
            vec![]
        }
        Action::TourNext | Action::TourBack => {
            turn_page(app, action == Action::TourNext);
            vec![]
        }
        Action::GoTab(t) => {
            app.tab = t;
            screens::on_show(app, t)
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
        Action::Up
        | Action::Down
        | Action::PageUp
        | Action::PageDown
        | Action::Top
        | Action::Bottom
            if app.overlay.is_some() =>
        {
            scroll(app, action);
            vec![]
        }
        Action::Up | Action::Down | Action::PageUp | Action::PageDown => {
            let page = app.page.max(1) as isize;
            let d = match action {
                Action::Up => -1,
                Action::Down => 1,
                Action::PageUp => -page,
                _ => page,
            };
            screens::move_selection(app, Move::By(d));
            vec![]
        }
        Action::Top => {
            screens::move_selection(app, Move::First);
            vec![]
        }
        Action::Bottom => {
            screens::move_selection(app, Move::Last);
            vec![]
        }
        Action::ConfirmYes => confirm_yes(app),
        Action::Backups | Action::RestoreVersion => super::backups::on_action(app, action),
        Action::PromptInput(ch) => {
            if let Some(Overlay::Acknowledge { reason, .. }) = &mut app.overlay {
                reason.push(ch);
            }
            vec![]
        }
        Action::PromptBackspace => {
            if let Some(Overlay::Acknowledge { reason, .. }) = &mut app.overlay {
                reason.pop();
            }
            vec![]
        }
        Action::ToggleScope => {
            app.all_experiments = !app.all_experiments;
            app.info(if app.all_experiments {
                "listing the trials and studies of every experiment in the workspace (A: this one)"
            } else {
                "listing this experiment's trials and studies (A: every experiment)"
            });
            vec![Effect::SetScope(app.all_experiments)]
        }
        Action::Reload => {
            app.pending.clear();
            app.plan = None;
            app.disk_changed = false;
            app.info("reloaded from disk");
            vec![Effect::Load(Vec::new())]
        }
        other => screens::apply(app, other),
    }
}
