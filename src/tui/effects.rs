//! Performing the effects `update` asks for, by calling the app layer — the same use cases the
//! CLI calls. Reads run on the blocking pool; trials, sweeps and stages on a worker thread each,
//! their events forwarded to the loop as messages. Every result comes back as a [`Msg`].

use super::app::{App, Effect, Msg};
use crate::app::events::{self, AppEvent, Events};
use crate::app::gemm_stage::{self, StageRequest};
use crate::app::sweep::SweepRequest;
use crate::app::trial::{Cancel, TrialRequest};
use crate::app::{AppError, Session};
use crate::store::TrialFilter;
use tokio::sync::{mpsc, watch};

/// A trial, a stage or a sweep running on its own thread (the store's connection is not
/// shared across runtimes, so it gets a runtime of its own). Dropping the handle cancels it —
/// the trial in flight has its process group stopped — and waits for the thread.
pub struct Worker {
    cancel: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    pub fn stop(&self) {
        let _ = self.cancel.send(true);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.cancel.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the loop keeps to perform effects: the session, where results go, the workers.
pub struct Runner {
    pub session: Session,
    pub tx: mpsc::Sender<Msg>,
    /// Config views arrive tagged with the request's generation: a stale one is dropped.
    pub load_tx: mpsc::Sender<(u64, Msg)>,
    pub load_gen: u64,
    /// The generation of the last config view that arrived.
    pub loaded_gen: u64,
    /// A save of the experiment is under way (its `Msg::Saved` has not come back).
    pub saving: bool,
    pub trial: Option<Worker>,
    pub sweep: Option<Worker>,
    /// The state file the chosen profile is remembered in (None: not remembered).
    pub state_file: Option<std::path::PathBuf>,
    /// The profile to remember last: each write takes the latest, so quick Left/Right presses
    /// end with the last choice on disk whatever order the writes run in.
    pub remember: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

/// Whether the loop goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
    /// The loop gives the terminal back and stops until resumed.
    Suspend,
    /// The loop gives the terminal to the user's editor on this file and line.
    Editor(std::path::PathBuf, u32),
}

impl Runner {
    /// Performs one effect (must run inside a tokio runtime: reads use its blocking pool).
    pub fn perform(&mut self, fx: Effect, app: &App) -> Flow {
        match fx {
            Effect::Suspend => return Flow::Suspend,
            Effect::OpenEditor { path, line } => return Flow::Editor(path, line),
            Effect::Quit => {
                drop(self.trial.take());
                drop(self.sweep.take());
                return Flow::Quit;
            }
            Effect::Load(pending) => {
                self.load_gen += 1;
                let (g, t) = (self.load_gen, self.load_tx.clone());
                self.read_viewed(app, move |s| {
                    let r = crate::app::views::config::build(s, &pending)
                        .map(|(v, plan)| (Box::new(v), plan));
                    let _ = t.blocking_send((g, Msg::Loaded(r)));
                    None
                });
            }
            Effect::Save(pending) => {
                tracing::info!(edits = pending.len(), "saving");
                self.saving = true;
                self.read_viewed(app, move |s| {
                    Some(Msg::Saved(crate::app::edit::save(s, &pending)))
                });
            }
            Effect::LoadBackups => self.read(|s| Some(Msg::Backups(crate::app::backups::list(s)))),
            Effect::Restore { id, write } => {
                // A restore writes the experiment as a save does: its own write, not a change
                // on disk, until its result comes back.
                self.saving |= write;
                self.read(move |s| Some(Msg::Restore(crate::app::backups::restore(s, &id, write))))
            }
            Effect::LoadTrials => self.read(|s| {
                Some(Msg::Trials(crate::app::views::trials::list(
                    s,
                    &TrialFilter::all(),
                )))
            }),
            Effect::LoadComparison { a, b } => self.read(move |s| {
                Some(Msg::Comparison(
                    crate::app::views::trials::compare(s, a, b).map(Box::new),
                ))
            }),
            Effect::PlanApply(id) => self.read(move |s| {
                let r = crate::app::views::trials::summary(s, id)
                    .and_then(|t| crate::app::views::trials::apply_plan(s, &t));
                Some(Msg::ApplyPlan(r))
            }),
            Effect::PlanPick(study) => self.read(move |s| {
                let r = crate::app::views::recommend::apply::pick_edits(s, &study);
                Some(Msg::PickPlanned(study, r))
            }),
            Effect::SetScope(all) => {
                self.session.all_experiments = all;
                for fx in [Effect::LoadTrials, Effect::LoadStudies] {
                    self.perform(fx, app);
                }
            }
            Effect::LoadStudies => {
                self.read(|s| Some(Msg::Studies(crate::app::views::studies::list(s))))
            }
            Effect::LoadLayouts => self.read(|s| {
                let req = crate::app::views::layouts::LayoutsRequest::default();
                Some(Msg::Layouts(
                    crate::app::views::layouts::layouts(s, &req).map(Box::new),
                ))
            }),
            Effect::LoadStudy(name) => self.read(move |s| {
                Some(Msg::Study(
                    crate::app::views::studies::detail(s, &name).map(Box::new),
                ))
            }),
            Effect::RememberProfile(profile) => self.remember_profile(profile),
            Effect::Acknowledge { rule, reason } => self.read(move |s| {
                Some(Msg::Acknowledged(crate::app::ack::acknowledge(
                    s, &rule, &reason,
                )))
            }),
            Effect::WriteReport(name) => self.read(move |s| {
                let dir = crate::app::views::report::default_dir(s, &name);
                Some(Msg::Note(
                    match crate::app::views::report::write(s, &name, &dir) {
                        Ok(w) => format!(
                            "report of {name}: {} in {}",
                            crate::util::text::count(
                                w.iter()
                                    .filter(|x| matches!(x, crate::report::Written::File(_)))
                                    .count(),
                                "file",
                                "files"
                            ),
                            crate::util::paths::display_path(&dir)
                        ),
                        Err(e) => format!("no report: {e}"),
                    },
                ))
            }),
            Effect::StartTrial { profile, edits } => {
                tracing::info!(profile, edits = edits.len(), "trial started");
                let req = TrialRequest {
                    profile: Some(profile),
                    gemm_tuned: app.gemm_tuned,
                    ..TrialRequest::default()
                };
                match crate::app::trial::with_edits(req, &edits) {
                    Ok(req) => {
                        self.trial = Some(start_trial(&self.session, req, self.tx.clone()));
                    }
                    Err(e) => {
                        let _ = self.tx.try_send(Msg::TrialDone(Err(e)));
                    }
                }
            }
            Effect::StartGemmStage { stage, profile } => {
                tracing::info!(stage, profile, "GEMM stage started");
                let mut req = StageRequest::new(stage);
                req.trial.profile = Some(profile);
                self.trial = Some(start_gemm_stage(&self.session, req, self.tx.clone()));
            }
            Effect::StartSweep {
                space,
                profile,
                demo,
            } => {
                tracing::info!(space, profile, demo, "sweep started");
                let req = SweepRequest {
                    space: Some(space),
                    allow_unmodeled: demo,
                    trial: TrialRequest {
                        profile: Some(profile),
                        gemm_tuned: app.gemm_tuned,
                        ..TrialRequest::default()
                    },
                    ..SweepRequest::default()
                };
                self.sweep = Some(start_sweep(&self.session, req, self.tx.clone()));
            }
            Effect::ResumeSweep { study } => {
                tracing::info!(study, "sweep resumed");
                let req = SweepRequest {
                    resume: Some(study),
                    trial: TrialRequest {
                        gemm_tuned: app.gemm_tuned,
                        ..TrialRequest::default()
                    },
                    ..SweepRequest::default()
                };
                self.sweep = Some(start_sweep(&self.session, req, self.tx.clone()));
            }
            Effect::StopSweep => {
                tracing::info!("sweep stop requested");
                if let Some(h) = &self.sweep {
                    h.stop();
                }
            }
            Effect::StopTrial => {
                tracing::info!("trial stop requested");
                if let Some(h) = &self.trial {
                    h.stop();
                }
            }
        }
        Flow::Continue
    }

    /// Whether the TUI's own writes and reads of the experiment have all landed: only then is a
    /// file stamp other than the view's someone else's change. (Between its own save and the
    /// reload that follows, the file is newer than the view: not a change on disk.)
    pub fn settled(&self) -> bool {
        !self.saving && self.loaded_gen == self.load_gen
    }

    /// A config view of generation `g` arrived; whether it is the latest asked for (an older
    /// one is dropped).
    pub fn loaded(&mut self, g: u64) -> bool {
        let latest = g == self.load_gen;
        if latest {
            self.loaded_gen = g;
        }
        latest
    }

    /// A worker reported its end: its handle goes.
    pub fn ended(&mut self, msg: &Msg) {
        if matches!(msg, Msg::Saved(_) | Msg::Restore(_)) {
            self.saving = false;
        }
        match msg {
            Msg::TrialDone(r) => {
                tracing::info!(ok = r.is_ok(), "trial ended");
                drop(self.trial.take());
            }
            Msg::GemmDone(r) => {
                tracing::info!(ok = r.is_ok(), "GEMM stage ended");
                drop(self.trial.take());
            }
            Msg::SweepDone(r) => {
                tracing::info!(ok = r.is_ok(), "sweep ended");
                drop(self.sweep.take());
            }
            Msg::Saved(Err(e)) | Msg::Trials(Err(e)) | Msg::Studies(Err(e)) => {
                tracing::warn!("{e}")
            }
            _ => {}
        }
    }

    /// A read on the blocking pool; its message (if any) goes to the loop.
    /// Writes `profile` into the state file as this experiment's, off the loop.
    fn remember_profile(&self, profile: String) {
        let Some(state) = self.state_file.clone() else {
            return;
        };
        let latest = self.remember.clone();
        *latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(profile);
        let exp = self.session.experiment.clone();
        tokio::task::spawn_blocking(move || {
            let guard = latest
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(p) = guard.as_deref()
                && let Err(e) = crate::app::state::remember_profile(&state, &exp, p)
            {
                tracing::warn!(error = %e, "could not remember the launch profile");
            }
        });
    }

    /// [`Runner::read`] with the session as the Run screen's launch profile launches the
    /// experiment: the Flags and Checklist screens, and the lint that guards a save, see the
    /// variables its `env:` sets ([`Session::launched_by`]), as its trials will.
    fn read_viewed(&self, app: &App, work: impl FnOnce(&Session) -> Option<Msg> + Send + 'static) {
        let profile = app.profile_name().map(str::to_string);
        self.read(move |s| {
            let viewed = profile
                .and_then(|p| crate::app::trial::find_profile(Some(&p)).ok())
                .map(|p| s.launched_by(&p));
            work(viewed.as_ref().unwrap_or(s))
        });
    }

    fn read(&self, work: impl FnOnce(&Session) -> Option<Msg> + Send + 'static) {
        let (s, t) = (self.session.clone(), self.tx.clone());
        tokio::task::spawn_blocking(move || {
            if let Some(msg) = work(&s) {
                let _ = t.blocking_send(msg);
            }
        });
    }
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
        let _ = tx.blocking_send(Msg::TrialDone(r.map(Box::new)));
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
            r.map(|o| (o.study, o.record.map(Box::new), o.resume)),
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
        let _ = tx.blocking_send(Msg::GemmDone(r));
    })
}
