//! The interactive frontend: `primus-tune [CONFIG]` on a terminal. State + pure update
//! (`app.rs`) + pure view (`view/`); this file is the one loop that merges keys, resizes, trial
//! events, telemetry and signals, performs the effects by calling the core, and redraws when
//! something changed (at most ~30 frames/s).
//!
//! The terminal is restored on every way out: normal exit, error, panic (the hook is installed
//! before the terminal is taken), SIGTERM and SIGHUP; a running trial's process group is stopped
//! in each case (`Worker`'s Drop covers unwinding).

pub mod app;
pub mod keymap;
pub mod load;
pub mod model;
pub mod theme;
pub mod view;

#[cfg(test)]
mod update_tests;

use crate::config::LoadOptions;
use crate::run::profile;
use crate::run::trial::{self, TelemetrySetup, TrialEvent, TrialOptions};
use crate::store::{Store, TrialFilter};
use crate::telemetry::host::Host;
use crate::telemetry::sampler::{Sampler, SamplerConfig};
use crate::telemetry::select::{self, Roots};
use app::{App, Effect, Msg};
use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::Stdout;
use std::path::{Path, PathBuf};
use std::time::Duration;
use theme::{Palette, Theme};
use tokio::sync::{mpsc, watch};

/// What the command line gives the TUI.
#[derive(Debug, Clone)]
pub struct TuiOptions {
    pub config: PathBuf,
    pub load: LoadOptions,
    /// Extra environment for trials (`--env`).
    pub env: Vec<(String, String)>,
    pub telemetry_backend: String,
    pub roots: Roots,
    /// Show the guided tour (first start, unless `--no-tour`).
    pub tour: bool,
}

/// Where the TUI writes its log (tracing), never the terminal.
pub fn log_path() -> PathBuf {
    crate::util::bundled::data_dir("logs").join("tui.log")
}

/// The marker that says the tour was shown once.
pub fn toured_marker() -> PathBuf {
    crate::util::bundled::data_dir("state").join("toured")
}

fn init_logging() {
    let path = log_path();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .try_init();
    }
}

type Term = Terminal<CrosstermBackend<Stdout>>;

/// Give the terminal back: leave the alternate screen, raw mode off, cursor on.
pub fn restore_terminal() {
    use crossterm::{cursor, execute, terminal};
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

fn take_terminal() -> std::io::Result<Term> {
    use crossterm::{execute, terminal};
    terminal::enable_raw_mode()?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
    Terminal::new(CrosstermBackend::new(std::io::stdout()))
}

/// A trial or a sweep running on its own thread (the store's connection is not `Sync`, so it gets
/// a runtime of its own). Dropping the handle cancels it — the trial in flight has its process
/// group stopped — and waits for the thread.
struct Worker {
    cancel: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.cancel.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn db_path(config: &Path) -> PathBuf {
    trial::workspace_dir(config).join("trials.db")
}

/// Set to a file path, the TUI writes `{"first_frame_ms": .., "rss_kb": ..}` there once the
/// first frame with the experiment loaded is drawn, and quits (for the start-up benchmark).
pub const FIRST_FRAME_ENV: &str = "PRIMUS_TUNE_FIRST_FRAME_REPORT";

/// Set, the TUI panics right after its first frame: lets a real-terminal test check that a panic
/// restores the terminal and stops a trial (tests/tui_tmux.rs).
pub const PANIC_ENV: &str = "PRIMUS_TUNE_PANIC_AFTER_FIRST_FRAME";

pub fn run(opts: TuiOptions) -> std::io::Result<()> {
    let started = std::time::Instant::now();
    init_logging();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut term = take_terminal()?;
    let result = rt.block_on(event_loop(&mut term, &opts, started));
    restore_terminal();
    if opts.tour {
        let m = toured_marker();
        if let Some(d) = m.parent() {
            let _ = std::fs::create_dir_all(d);
        }
        let _ = std::fs::write(m, "");
    }
    result
}

/// The profiles a trial can use: built-in and the user's.
pub fn profile_names() -> Vec<String> {
    profile::all(profile::user_dir().as_deref())
        .map(|v| v.into_iter().map(|p| p.name).collect())
        .unwrap_or_else(|_| vec![profile::DEFAULT_PROFILE.to_string()])
}

async fn event_loop(
    term: &mut Term,
    opts: &TuiOptions,
    started: std::time::Instant,
) -> std::io::Result<()> {
    let report = std::env::var_os(FIRST_FRAME_ENV).map(PathBuf::from);
    let theme = Theme::new(Palette::from_env());
    let mut app = App::new(profile_names(), profile::DEFAULT_PROFILE, opts.tour);
    // Declared before the channel so that, on every way out (return, error, panic unwinding),
    // the receiver is dropped first: the trial thread's sends then fail at once instead of
    // waiting for a loop that no longer drains them, and the handle's Drop stops the trial.
    let mut trial: Option<Worker> = None;
    let mut sweep: Option<Worker> = None;
    let (tx, mut rx) = mpsc::channel::<Msg>(1024);
    let mut keys = EventStream::new();
    // Live telemetry, whether or not a trial runs.
    let _sampler = start_sampler(opts, tx.clone());
    let mut pending_fx: Vec<Effect> = vec![Effect::Load(Vec::new()), Effect::LoadTrials];
    let mut load_gen = 0u64;
    let (load_tx, mut load_rx) = mpsc::channel::<(u64, Msg)>(16);
    let mut frame = tokio::time::interval(Duration::from_millis(33));
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut disk = tokio::time::interval(Duration::from_secs(1));
    disk.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let (mut term_sig, mut hup_sig) = signals()?;
    let mut dirty = true;
    loop {
        for fx in std::mem::take(&mut pending_fx) {
            match fx {
                Effect::Quit => {
                    drop(trial.take());
                    drop(sweep.take());
                    return Ok(());
                }
                Effect::Load(pending) => {
                    load_gen += 1;
                    let (g, o, p, t) = (load_gen, opts.clone(), pending, load_tx.clone());
                    tokio::task::spawn_blocking(move || {
                        let r = load::build(&o.config, &o.load, &p)
                            .map(|(v, plan)| (Box::new(v), plan));
                        let _ = t.blocking_send((g, Msg::Loaded(r)));
                    });
                }
                Effect::Save(pending) => {
                    tracing::info!(edits = pending.len(), "saving");
                    let (o, t) = (opts.clone(), tx.clone());
                    tokio::task::spawn_blocking(move || {
                        let r = load::save(&o.config, &o.load, &pending);
                        let _ = t.blocking_send(Msg::Saved(r));
                    });
                }
                Effect::LoadTrials => {
                    let (db, t) = (db_path(&opts.config), tx.clone());
                    tokio::task::spawn_blocking(move || {
                        let r = if db.exists() {
                            Store::open(&db)
                                .and_then(|s| s.list_trials(&TrialFilter::all()))
                                .map_err(|e| e.to_string())
                        } else {
                            Ok(Vec::new())
                        };
                        let _ = t.blocking_send(Msg::Trials(r));
                    });
                }
                Effect::StartTrial { profile } => {
                    tracing::info!(profile, config = %opts.config.display(), "trial started");
                    let o = launch_options(opts, &app);
                    trial = Some(start_trial(&o, &profile, tx.clone()));
                }
                Effect::StartGemmStage { stage, profile } => {
                    tracing::info!(stage, profile, "GEMM stage started");
                    trial = Some(start_gemm_stage(opts, stage, &profile, tx.clone()));
                }
                Effect::StartSweep { space, profile } => {
                    tracing::info!(space, profile, "sweep started");
                    let o = launch_options(opts, &app);
                    sweep = Some(start_sweep(&o, &space, &profile, tx.clone()));
                }
                Effect::StopSweep => {
                    tracing::info!("sweep stop requested");
                    if let Some(h) = &sweep {
                        let _ = h.cancel.send(true);
                    }
                }
                Effect::StopTrial => {
                    tracing::info!("trial stop requested");
                    if let Some(h) = &trial {
                        let _ = h.cancel.send(true);
                    }
                }
            }
        }
        tokio::select! {
            ev = keys.next() => match ev {
                Some(Ok(Event::Key(k))) => {
                    pending_fx = app::update(&mut app, Msg::Key(k));
                    // A key clears the last message unless the key set a new one.
                    dirty = true;
                }
                Some(Ok(Event::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(_)) | None => pending_fx = app::update(&mut app, Msg::Terminate),
            },
            Some(msg) = rx.recv() => {
                match &msg {
                    Msg::TrialDone(r) => {
                        tracing::info!(ok = r.is_ok(), "trial ended");
                        drop(trial.take());
                    }
                    Msg::GemmDone(r) => {
                        tracing::info!(ok = r.is_ok(), "GEMM stage ended");
                        drop(trial.take());
                    }
                    Msg::SweepDone(r) => {
                        tracing::info!(ok = r.is_ok(), "sweep ended");
                        drop(sweep.take());
                    }
                    Msg::Saved(Err(e)) | Msg::Trials(Err(e)) => tracing::warn!("{e}"),
                    _ => {}
                }
                pending_fx = app::update(&mut app, msg);
                dirty = true;
            }
            Some((g, msg)) = load_rx.recv() => {
                if g == load_gen {
                    pending_fx = app::update(&mut app, msg);
                    dirty = true;
                }
            }
            _ = disk.tick() => {
                if let Some(c) = &app.config
                    && !app.disk_changed
                    && load::stamp(&opts.config) != c.stamp
                {
                    pending_fx = app::update(&mut app, Msg::DiskChanged);
                    dirty = true;
                }
            }
            _ = term_sig.recv() => {
                tracing::info!("SIGTERM: stopping");
                pending_fx = app::update(&mut app, Msg::Terminate);
            }
            _ = hup_sig.recv() => {
                tracing::info!("SIGHUP (terminal gone): stopping");
                pending_fx = app::update(&mut app, Msg::Terminate);
            }
            _ = frame.tick() => {
                if dirty {
                    if let Err(e) = term.draw(|f| view::draw(f, &mut app, &theme)) {
                        // The terminal went away (SSH drop): stop the trial and leave.
                        tracing::warn!("drawing failed: {e}");
                        return Ok(()); // the receiver drops, then the trial handle stops it
                    }
                    dirty = false;
                    if app.config.is_some() && std::env::var_os(PANIC_ENV).is_some() {
                        panic!("{PANIC_ENV} is set: panicking after the first frame");
                    }
                    if let Some(path) = &report
                        && app.config.is_some()
                    {
                        let rss = crate::util::procfs::status_kb("VmHWM").unwrap_or(0);
                        let text = format!(
                            "{{\"first_frame_ms\": {:.2}, \"rss_kb\": {rss}}}\n",
                            started.elapsed().as_secs_f64() * 1000.0
                        );
                        let _ = std::fs::write(path, text);
                        return Ok(());
                    }
                }
            }
        }
    }
}

fn signals() -> std::io::Result<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)> {
    use tokio::signal::unix::{SignalKind, signal};
    Ok((
        signal(SignalKind::terminate())?,
        signal(SignalKind::hangup())?,
    ))
}

/// The live sampler; its snapshots go to the loop. Kept alive by the caller.
fn start_sampler(opts: &TuiOptions, tx: mpsc::Sender<Msg>) -> Option<Sampler> {
    let (backend, notes) = match select::open(&opts.telemetry_backend, &opts.roots) {
        Ok(x) => x,
        Err(e) => (None, vec![e]),
    };
    let note = backend
        .is_none()
        .then(|| format!("no GPU telemetry: {}", notes.join("; ")));
    let (sampler, mut srx) = Sampler::start(
        backend,
        Host::new(&opts.roots.procfs),
        SamplerConfig::default(),
    );
    let _ = tx.try_send(Msg::TelemetryReady {
        gpus: sampler.gpus.clone(),
        backend: sampler.backend.unwrap_or("host").to_string(),
        note,
    });
    tokio::spawn(async move {
        while let Some(s) = srx.recv().await {
            if tx.send(Msg::Telemetry(Box::new(s))).await.is_err() {
                break;
            }
        }
    });
    Some(sampler)
}

/// Options of a trial started from the TUI: the CLI's defaults, a shorter stop grace.
pub fn trial_options(opts: &TuiOptions, profile: profile::Profile) -> TrialOptions {
    let gpus = trial::default_gpus(&opts.load.env, &profile.capabilities);
    TrialOptions {
        profile,
        overrides: Vec::new(),
        env: opts.env.clone(),
        max_iters: 50,
        max_seconds: None,
        ci_target: 0.01,
        hang_seconds: 120.0,
        first_iteration_seconds: 600.0,
        grace: Duration::from_secs(5),
        gpus,
        study_id: None,
        trials_dir: trial::workspace_dir(&opts.config).join("trials"),
        telemetry: Some(TelemetrySetup {
            backend: opts.telemetry_backend.clone(),
            roots: opts.roots.clone(),
            config: SamplerConfig::default(),
        }),
        trains: true,
    }
}

fn start_trial(opts: &TuiOptions, profile_name: &str, tx: mpsc::Sender<Msg>) -> Worker {
    let opts = opts.clone();
    let name = profile_name.to_string();
    spawn_worker("trial", move |cancel_rx| {
        let r = run_one(&opts, &name, &tx, cancel_rx);
        let _ = tx.blocking_send(Msg::TrialDone(r.map(Box::new)));
    })
}

/// The options a trial or sweep starts with: with the tuned GEMMs chosen (`u` on the GEMM
/// step), the stage-3 environment added (when the file is gone by now, the trial runs untuned
/// and the log says why).
fn launch_options(opts: &TuiOptions, app: &app::App) -> TuiOptions {
    let mut o = opts.clone();
    if app.gemm_tuned {
        let env = crate::config::Experiment::load(&opts.config, &opts.load)
            .map_err(|e| e.to_string())
            .and_then(|exp| {
                crate::gemm::tuned_env_for(&exp.primus_root, &exp.path, &opts.load.env)
            });
        match env {
            Ok(env) => o.env.extend(env),
            Err(e) => tracing::warn!("tuned GEMMs not used: {e}"),
        }
    }
    o
}

/// A named thread running `work` with a cancel signal; the handle stops and joins it.
fn spawn_worker(name: &str, work: impl FnOnce(watch::Receiver<bool>) + Send + 'static) -> Worker {
    let (cancel, cancel_rx) = watch::channel(false);
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || work(cancel_rx))
        .ok();
    Worker { cancel, thread }
}

/// A sweep on its own thread, like a trial; its progress lines and end come back as messages.
fn start_sweep(opts: &TuiOptions, space: &str, profile: &str, tx: mpsc::Sender<Msg>) -> Worker {
    let opts = opts.clone();
    let req = crate::tune::sweep::SweepRequest {
        space: Some(space.to_string()),
        profile: profile.to_string(),
        first_iters: 8,
        max_iters: 24,
        env: opts.env.clone(),
        ..Default::default()
    };
    spawn_worker("sweep", move |cancel_rx| {
        let lines = tx.clone();
        let r = crate::config::Experiment::load(&opts.config, &opts.load)
            .map_err(|e| e.to_string())
            .and_then(|exp| {
                crate::tune::sweep::run_sweep(
                    &exp,
                    &opts.load,
                    &req,
                    cancel_rx,
                    Box::new(move |l: &str| {
                        let _ = lines.blocking_send(Msg::SweepLine(l.to_string()));
                    }),
                )
            })
            .map(|o| (o.study, o.record.map(Box::new)));
        let _ = tx.blocking_send(Msg::SweepDone(r));
    })
}

/// What every trial started from the TUI needs: the profile, the experiment as on disk, the
/// store beside it and the engine's options.
fn trial_setup(
    opts: &TuiOptions,
    profile_name: &str,
) -> Result<(crate::config::Experiment, Store, TrialOptions), String> {
    let profile =
        profile::find(profile_name, profile::user_dir().as_deref()).map_err(|e| e.to_string())?;
    let exp =
        crate::config::Experiment::load(&opts.config, &opts.load).map_err(|e| e.to_string())?;
    let store = Store::open(&db_path(&exp.path)).map_err(|e| e.to_string())?;
    let topts = trial_options(opts, profile);
    Ok((exp, store, topts))
}

fn run_one(
    opts: &TuiOptions,
    profile_name: &str,
    tx: &mpsc::Sender<Msg>,
    cancel: watch::Receiver<bool>,
) -> Result<crate::domain::trial::TrialResult, String> {
    let (exp, store, topts) = trial_setup(opts, profile_name)?;
    forwarding(tx, |etx| {
        trial::run_trial(&exp, &opts.load, &store, &topts, etx, cancel)
    })?
    .map_err(|e| e.to_string())
}

/// Runs `work` on a runtime of this thread, its trial events forwarded to the TUI as they come.
fn forwarding<T, F, Fut>(tx: &mpsc::Sender<Msg>, work: F) -> Result<T, String>
where
    F: FnOnce(mpsc::Sender<TrialEvent>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (etx, mut erx) = mpsc::channel::<TrialEvent>(256);
    let fwd = tx.clone();
    Ok(rt.block_on(async move {
        let forward = async move {
            while let Some(ev) = erx.recv().await {
                if fwd.send(Msg::Trial(ev)).await.is_err() {
                    break;
                }
            }
        };
        let (r, ()) = tokio::join!(work(etx), forward);
        r
    }))
}

/// A HipBLASLt stage on its own thread, like a trial.
fn start_gemm_stage(
    opts: &TuiOptions,
    stage: u8,
    profile_name: &str,
    tx: mpsc::Sender<Msg>,
) -> Worker {
    let opts = opts.clone();
    let name = profile_name.to_string();
    spawn_worker("gemm-stage", move |cancel_rx| {
        let r = run_gemm_stage(&opts, stage, &name, &tx, cancel_rx);
        let _ = tx.blocking_send(Msg::GemmDone(r));
    })
}

fn run_gemm_stage(
    opts: &TuiOptions,
    stage: u8,
    profile_name: &str,
    tx: &mpsc::Sender<Msg>,
    cancel: watch::Receiver<bool>,
) -> Result<(Box<crate::domain::trial::TrialResult>, String), String> {
    use crate::gemm::{runner, stage as gstage, status::TuneLayout};
    let (exp, store, topts) = trial_setup(opts, profile_name)?;
    let layout = TuneLayout::new(&exp.primus_root, &exp.path, &opts.load.env);
    let plan = gstage::plan(
        stage,
        &gstage::StageContext {
            layout: &layout,
            primus_root: &exp.primus_root,
            profile: &topts.profile.name,
            hipblaslt: topts.profile.capabilities.hipblaslt,
            gpus: topts.gpus,
            env: &opts.load.env,
            python: "python3",
            override_file: None,
        },
    )
    .map_err(|e| e.to_string())?;
    let run = forwarding(tx, |etx| {
        runner::run_stage(
            &exp, &opts.load, &store, &topts, &plan, &layout, false, etx, cancel,
        )
    })?
    .map_err(|e| e.to_string())?;
    let summary = match (stage, &run.comparison) {
        (3, Some(c)) => gstage::comparison_text(c.change, c.change_ci),
        (3, None) => "GEMM stage 3: no comparison (a trial did not complete)".to_string(),
        (1, _) => match crate::gemm::dump::read_dumps(&layout.shapes_dir) {
            Ok(d) if d.gemm_lines > 0 => {
                format!("GEMM stage 1: {} unique shapes dumped", d.shapes.len())
            }
            _ => "GEMM stage 1: no shape was dumped (the workload did not call hipBLASLt)".into(),
        },
        _ => match crate::gemm::results::read(&layout.result_file) {
            Ok(r) => format!("GEMM stage 2: {} GEMMs tuned", r.entries.len()),
            Err(e) => format!("GEMM stage 2: no usable result file: {e}"),
        },
    };
    let last = run
        .trials
        .last()
        .cloned()
        .ok_or_else(|| "the stage ran no trial".to_string())?;
    Ok((Box::new(last), summary))
}
