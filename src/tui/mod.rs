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
pub mod theme;
pub mod view;

#[cfg(test)]
mod update_tests;

use crate::app::events::{self, AppEvent, Events};
use crate::app::gemm_stage::{self, StageRequest};
use crate::app::sweep::SweepRequest;
use crate::app::trial::{Cancel, TrialRequest};
use crate::app::{AppError, Session};
use crate::run::profile;
use crate::store::TrialFilter;
use crate::telemetry::host::Host;
use crate::telemetry::sampler::{Sampler, SamplerConfig};
use crate::telemetry::select::{self, Roots};
use app::{App, Effect, Msg};
use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::Stdout;
use std::path::PathBuf;
use std::time::Duration;
use theme::{Palette, Theme};
use tokio::sync::{mpsc, watch};

/// What the command line gives the TUI.
#[derive(Debug, Clone)]
pub struct TuiOptions {
    /// The experiment, its environment, workspace and the trials' telemetry.
    pub session: Session,
    /// The live sampler's backend and roots (the trials' come with the session).
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
    let session = &opts.session;
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
                    let (g, s, p, t) = (load_gen, session.clone(), pending, load_tx.clone());
                    tokio::task::spawn_blocking(move || {
                        let r = crate::app::views::config::build(&s, &p)
                            .map(|(v, plan)| (Box::new(v), plan))
                            .map_err(|e| e.to_string());
                        let _ = t.blocking_send((g, Msg::Loaded(r)));
                    });
                }
                Effect::Save(pending) => {
                    tracing::info!(edits = pending.len(), "saving");
                    let (s, t) = (session.clone(), tx.clone());
                    tokio::task::spawn_blocking(move || {
                        let r = crate::app::edit::save(&s, &pending).map_err(|e| e.to_string());
                        let _ = t.blocking_send(Msg::Saved(r));
                    });
                }
                Effect::LoadTrials => {
                    let (s, t) = (session.clone(), tx.clone());
                    tokio::task::spawn_blocking(move || {
                        let r = s
                            .existing_store()
                            .and_then(|st| match st {
                                Some(st) => Ok(st.list_trials(&TrialFilter::all())?),
                                None => Ok(Vec::new()),
                            })
                            .map_err(|e| e.to_string());
                        let _ = t.blocking_send(Msg::Trials(r));
                    });
                }
                Effect::StartTrial { profile } => {
                    tracing::info!(profile, config = %session.experiment.display(), "trial started");
                    let req = TrialRequest {
                        profile: Some(profile),
                        gemm_tuned: app.gemm_tuned,
                        ..TrialRequest::default()
                    };
                    trial = Some(start_trial(session, req, tx.clone()));
                }
                Effect::StartGemmStage { stage, profile } => {
                    tracing::info!(stage, profile, "GEMM stage started");
                    let mut req = StageRequest::new(stage);
                    req.trial.profile = Some(profile);
                    trial = Some(start_gemm_stage(session, req, tx.clone()));
                }
                Effect::StartSweep { space, profile } => {
                    tracing::info!(space, profile, "sweep started");
                    let req = SweepRequest {
                        space: Some(space),
                        trial: TrialRequest {
                            profile: Some(profile),
                            gemm_tuned: app.gemm_tuned,
                            ..TrialRequest::default()
                        },
                        ..SweepRequest::default()
                    };
                    sweep = Some(start_sweep(session, req, tx.clone()));
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
                    && crate::app::views::config::stamp(&session.experiment) != c.stamp
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

/// A named thread running `work` with a cancel signal; the handle stops and joins it.
fn spawn_worker(name: &str, work: impl FnOnce(Cancel) + Send + 'static) -> Worker {
    let (cancel, cancel_rx) = watch::channel(false);
    let thread = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || work(cancel_rx))
        .ok();
    Worker { cancel, thread }
}

/// What the screens take of a use case's events: a trial's own events feed the Run screen,
/// sweep steps the Sweep screen's log, stage steps the status line.
fn to_msg(ev: AppEvent, trial_events: bool) -> Option<Msg> {
    match ev {
        AppEvent::Trial(t) if trial_events => Some(Msg::Trial(t)),
        AppEvent::Sweep(s) => Some(Msg::SweepLine(s.to_string())),
        AppEvent::Stage(s) => Some(Msg::Note(s.to_string())),
        AppEvent::Trial(_) | AppEvent::TrialEnded(_) => None,
    }
}

/// Runs a use case on this (worker) thread with its events forwarded to the loop as they come.
fn forwarding<T>(tx: &mpsc::Sender<Msg>, trial_events: bool, work: impl FnOnce(&Events) -> T) -> T {
    let (etx, mut erx) = events::channel();
    let fwd = tx.clone();
    let forward = std::thread::spawn(move || {
        while let Some(ev) = erx.blocking_recv() {
            let Some(msg) = to_msg(ev, trial_events) else {
                continue;
            };
            if fwd.blocking_send(msg).is_err() {
                break;
            }
        }
    });
    let out = work(&etx);
    drop(etx);
    let _ = forward.join();
    out
}

/// A trial on its own thread, through the same use case as `primus-tune run`.
fn start_trial(session: &Session, req: TrialRequest, tx: mpsc::Sender<Msg>) -> Worker {
    let session = session.clone();
    spawn_worker("trial", move |cancel| {
        let r = forwarding(&tx, true, |events| {
            let p = crate::app::trial::prepare(&session, &req)?;
            crate::app::trial::run_blocking(&session, &p, events, cancel)
        });
        let _ = tx.blocking_send(Msg::TrialDone(r.map(Box::new).map_err(|e| e.to_string())));
    })
}

/// A sweep on its own thread, through the same use case as `primus-tune sweep`.
fn start_sweep(session: &Session, req: SweepRequest, tx: mpsc::Sender<Msg>) -> Worker {
    let session = session.clone();
    spawn_worker("sweep", move |cancel| {
        let r = forwarding(&tx, false, |events| {
            crate::app::sweep::run(&session, &req, events, cancel)
        });
        let _ = tx.blocking_send(Msg::SweepDone(
            r.map(|o| (o.study, o.record.map(Box::new), o.resume))
                .map_err(|e| e.to_string()),
        ));
    })
}

/// A HipBLASLt stage on its own thread, through the same use case as `gemm-tune stage`.
fn start_gemm_stage(session: &Session, req: StageRequest, tx: mpsc::Sender<Msg>) -> Worker {
    let session = session.clone();
    spawn_worker("gemm-stage", move |cancel| {
        let r = forwarding(&tx, true, |events| -> Result<_, AppError> {
            let p = gemm_stage::prepare(&session, &req)?;
            let out = gemm_stage::run_blocking(&session, &p, events, cancel)?;
            let last = out
                .run
                .trials
                .last()
                .cloned()
                .ok_or_else(|| AppError::Usage("the stage ran no trial".into()))?;
            Ok((Box::new(last), out.summary.to_string()))
        });
        let _ = tx.blocking_send(Msg::GemmDone(r.map_err(|e| e.to_string())));
    })
}
