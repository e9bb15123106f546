//! Where a materialised trial runs: a [`Launcher`] starts it and hands back its output lines,
//! its state changes (a batch job's) and its nodes' telemetry (a job's monitor step); the
//! [`Launched`] handle stops it, says whether it still waits in a queue, and how it ended. The
//! trial's loop ([`crate::run::trial::run_trial`]) is the same whatever runs it.
//!
//! Two launchers: [`local`] (a process tree on this node) and [`batch`] (a job of a batch
//! scheduler, [`scheduler::Scheduler`]; Slurm is [`slurm`]).

pub mod batch;
pub mod local;
pub mod scheduler;
pub mod slurm;

use crate::domain::job::Job;
use crate::domain::telemetry::Snapshot;
use crate::domain::trial::Failure;
use crate::run::process::Stream;
use crate::run::trial::{Materialised, TrialError, TrialEvent, TrialOptions};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What runs a trial.
#[derive(Debug, Clone, Default)]
pub enum Launcher {
    /// A process tree on this node.
    #[default]
    Local,
    /// A job of a batch scheduler.
    Batch(Box<batch::BatchLaunch>),
}

impl Launcher {
    /// The batch launch, when it is one.
    pub fn batch(&self) -> Option<&batch::BatchLaunch> {
        match self {
            Launcher::Local => None,
            Launcher::Batch(b) => Some(b),
        }
    }

    pub fn batch_mut(&mut self) -> Option<&mut batch::BatchLaunch> {
        match self {
            Launcher::Local => None,
            Launcher::Batch(b) => Some(b),
        }
    }

    /// Nodes the trial runs on (a job's; 1 on this node).
    pub fn nodes(&self) -> u64 {
        self.batch().map_or(1, |b| u64::from(b.spec.nodes.max(1)))
    }

    /// The submit options of the job, for a profile's `{slurm_args}` (none on this node).
    pub fn submit_options(&self, dir: &Path) -> Vec<String> {
        self.batch()
            .map(|b| b.scheduler.submit_options(&b.spec, dir))
            .unwrap_or_default()
    }

    /// Starts the trial.
    pub async fn start(
        &self,
        m: &Materialised,
        opts: &TrialOptions,
        store: &crate::store::Store,
        events: &mpsc::Sender<TrialEvent>,
    ) -> Result<(Launched, Streams), TrialError> {
        match self {
            Launcher::Local => {
                let (run, lines) = local::start(m)?;
                Ok((
                    Launched::Local(Box::new(run)),
                    Streams {
                        lines,
                        snaps: None,
                        states: None,
                    },
                ))
            }
            Launcher::Batch(b) => {
                let (run, f) = batch::start(b, m, opts, store, events).await?;
                Ok((
                    Launched::Batch(Box::new(run)),
                    Streams {
                        lines: f.lines,
                        snaps: Some(f.snaps),
                        states: Some(f.states),
                    },
                ))
            }
        }
    }
}

/// What a started trial hands back: its output lines (closed when it is over), its nodes'
/// telemetry (a job's; on this node the trial samples its own), its job's state changes.
pub struct Streams {
    pub lines: mpsc::Receiver<(Stream, String)>,
    pub snaps: Option<mpsc::Receiver<Snapshot>>,
    pub states: Option<mpsc::Receiver<batch::JobUpdate>>,
}

/// A started trial.
pub enum Launched {
    Local(Box<local::LocalRun>),
    Batch(Box<batch::BatchRun>),
}

impl Launched {
    /// Stops it: the process tree (`grace` between signals), or the job (cancelled, until it
    /// left the queue).
    pub async fn stop(&mut self, grace: Duration) {
        match self {
            Launched::Local(r) => r.stop(grace).await,
            Launched::Batch(j) => j.cancel().await,
        }
    }

    /// The exit (code, signal) of a local tree; a job's comes with its last state.
    pub async fn wait(&mut self) -> (Option<i32>, Option<i32>) {
        match self {
            Launched::Local(r) => r.wait().await,
            Launched::Batch(_) => (None, None),
        }
    }

    /// A job still waiting in the queue.
    pub fn waiting(&self) -> bool {
        matches!(self, Launched::Batch(j) if j.running_since.is_none() && !j.over)
    }

    /// When the waiting job's pending limit ends.
    pub fn pending_deadline(&self) -> Option<Instant> {
        match self {
            Launched::Batch(j) => j.pending_deadline(),
            Launched::Local(_) => None,
        }
    }

    /// The failure of a job that waited past its pending limit at `now`.
    pub fn pending_over(&mut self, now: Instant) -> Option<Failure> {
        match self {
            Launched::Batch(j) => j.pending_over(now),
            Launched::Local(_) => None,
        }
    }

    /// Records a job's state change; what it means for the trial.
    pub async fn on_update(
        &mut self,
        u: &batch::JobUpdate,
        store: &crate::store::Store,
        trial_id: i64,
        events: &mpsc::Sender<TrialEvent>,
    ) -> batch::Verdict {
        match self {
            Launched::Batch(j) => j.update(u, store, trial_id, events).await,
            Launched::Local(_) => batch::Verdict::default(),
        }
    }

    /// When it started running (a job: when the scheduler started it; None on this node, where
    /// it runs from its launch).
    pub fn run_start(&self) -> Option<Instant> {
        match self {
            Launched::Local(_) => None,
            Launched::Batch(j) => j.running_since,
        }
    }

    /// The root of the local tree, for the sampler's per-process figures.
    pub fn local_root(&self) -> Option<i32> {
        match self {
            Launched::Local(r) => Some(r.running.root),
            Launched::Batch(_) => None,
        }
    }

    /// Whether its output ends only when it is over, so the runner reads it to its end (a
    /// job's follower reads the nodes' files to the end and closes).
    pub fn drains(&self) -> bool {
        matches!(self, Launched::Batch(_))
    }

    /// After the trial: no process of it may be left on this node (how many strays were
    /// killed), and no job of it in the queue.
    pub async fn sweep_up(
        &mut self,
        dir: &Path,
        store: &crate::store::Store,
        trial_id: i64,
    ) -> usize {
        match self {
            Launched::Local(r) => r.sweep_up(dir).await,
            Launched::Batch(j) => {
                j.settle(store, trial_id).await;
                0
            }
        }
    }

    /// How it exited: the local tree's status, or the job's script's.
    pub fn exit_status(&self, local: (Option<i32>, Option<i32>)) -> (Option<i32>, Option<i32>) {
        match self {
            Launched::Local(_) => local,
            Launched::Batch(j) => j.exit_status(),
        }
    }

    /// Seconds it ran: since `started` here, a job's running time (not its queue).
    pub fn wall_s(&self, started: Instant) -> f64 {
        match self {
            Launched::Local(_) => started.elapsed().as_secs_f64(),
            Launched::Batch(j) => j.wall_s(),
        }
    }

    /// Its job, when it is one.
    pub fn job(&self) -> Option<&Job> {
        match self {
            Launched::Local(_) => None,
            Launched::Batch(j) => Some(&j.record),
        }
    }

    /// Seconds a job waited in the queue.
    pub fn queued_s(&self) -> Option<f64> {
        match self {
            Launched::Local(_) => None,
            Launched::Batch(j) => j.queued_s(),
        }
    }

    /// The failure its job had, when the scheduler (or its states) ended it.
    pub fn job_failure(&self) -> Option<Failure> {
        match self {
            Launched::Local(_) => None,
            Launched::Batch(j) => j.job_failure(),
        }
    }
}
