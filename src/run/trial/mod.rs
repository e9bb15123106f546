//! One trial, end to end: [`materialise()`] writes its folder (effective config, resolved
//! parameters, argv, env) and store row and builds the launch; its [`Launcher`] starts it (a
//! process tree here, or a batch job) and hands back its output, its job's states and its
//! nodes' telemetry; [`run_trial`] watches those streams ([`observe`]) under [`watch`]'s pure
//! stop policy and stops it; [`finish`] classifies how it ended, and everything is stored.

pub mod finish;
pub mod materialise;
pub mod nodes;
pub mod observe;
pub mod pause;
pub mod pending;
pub mod watch;

pub use materialise::{Materialised, materialise};
#[cfg(any(test, feature = "testkit"))]
pub use materialise::{config_env, config_hash, effective_config_text};

use super::launch::{Launched, Launcher, Streams, batch};
use super::process::{self, Stream};
use super::profile::Profile;
use super::steady::SteadyConfig;
use crate::config::overrides::Override;
use crate::config::resolve::{Experiment, LoadOptions};
use crate::domain::evidence::Basis;
use crate::domain::trial::{ExitInfo, Iteration, StopReason, Summary, TrialResult};
use crate::store::{Store, TrialEnd};
use crate::telemetry::host::Host;
use crate::telemetry::sampler::{self, Sampler, SamplerConfig, Snapshot};
use crate::telemetry::select::{self, Roots};
use observe::Observed;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch as wch};
use watch::{Stop, StopPolicy};

/// How a trial is run and when it ends.
#[derive(Debug, Clone)]
pub struct TrialOptions {
    pub profile: Profile,
    /// Overrides of this trial (on top of the experiment), Primus-typed.
    pub overrides: Vec<Override>,
    /// Extra environment for the trial.
    pub env: Vec<(String, String)>,
    /// The iteration budget (becomes `train_iters`).
    pub max_iters: u64,
    pub max_seconds: Option<f64>,
    pub ci_target: f64,
    /// A sweep's bar: the trial stops once its steady samples are above it with 95 %
    /// confidence ([`super::steady::Race`]; `None`: no race).
    pub race: Option<super::steady::Race>,
    /// Hang threshold once iterations flow: max(3 × median step, this).
    pub hang_seconds: f64,
    /// Hang threshold before the first iteration.
    pub first_iteration_seconds: f64,
    /// Grace between SIGINT, SIGTERM and SIGKILL.
    pub grace: Duration,
    /// After a failure line (out of memory, NCCL, a traceback) with no iteration since, how
    /// long the workload may take to exit before it is stopped.
    pub failure_grace: Duration,
    /// After the last iteration of the budget, how long the workload may take to end by itself
    /// (its clean-up: a final checkpoint or evaluation, the launcher's exit) before it is
    /// stopped. Only when its own iteration count is the budget (the runner set it).
    pub end_grace: Duration,
    /// Ranks the trial launches (its world size, or the launch's fallback when the world is
    /// unknown): the `{gpus}` of the launch and `_world_size` of `resolved.json`.
    pub gpus: u64,
    /// Ranks on each node (`{gpus_per_node}`).
    pub gpus_per_node: u64,
    /// The world the trial runs at, when it is known (not the launch's fallback): what its
    /// per-GPU figures hold for.
    pub world: Option<u64>,
    /// What its figures are evidence of: a GPU measurement with its profile, or a stand-in's.
    /// A measured basis names the GPU its telemetry saw.
    pub basis: Basis,
    /// Said at the start of the trial, in its log (how the world was chosen when nothing named
    /// it, what a stand-in's telemetry covers).
    pub notes: Vec<String>,
    pub study_id: Option<i64>,
    /// Where the trial's folder goes (`<workspace>/trials`).
    pub trials_dir: PathBuf,
    /// The primus-tune binary `{self}` runs (None: this executable).
    pub self_exe: Option<PathBuf>,
    /// Sample GPU/host telemetry during the trial (None: no sampling).
    pub telemetry: Option<TelemetrySetup>,
    /// The workload trains and prints iterations (false: a job such as offline GEMM tuning,
    /// which completes by exiting 0; it has no first-iteration hang limit, only
    /// `max_seconds`).
    pub trains: bool,
    /// What runs it: a process tree on this node, or a batch job.
    pub launcher: Launcher,
}

/// How the trial samples telemetry.
#[derive(Debug, Clone)]
pub struct TelemetrySetup {
    /// `auto`, `nvml`, `amdgpu-sysfs`, `amd-smi` or `host`.
    pub backend: String,
    pub roots: Roots,
    pub config: SamplerConfig,
}

impl Default for TelemetrySetup {
    fn default() -> Self {
        TelemetrySetup {
            backend: "auto".into(),
            roots: Roots::default(),
            config: SamplerConfig::default(),
        }
    }
}

/// What a running trial reports to its frontend.
// Events are short-lived messages on a channel; the large ones are already boxed.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum TrialEvent {
    #[serde(rename = "trial-started")]
    Started {
        trial_id: i64,
        argv: Vec<String>,
        trial_dir: PathBuf,
        /// What its figures will be evidence of (a GPU measurement, or a stand-in's).
        basis: Basis,
    },
    Line {
        stream: Stream,
        line: String,
    },
    Iteration {
        it: Iteration,
        /// Steady-state figures so far (after warm-up), when there are any.
        summary: Box<Summary>,
    },
    Stopping {
        reason: StopReason,
    },
    Telemetry(Box<Snapshot>),
    /// Said once when no GPU telemetry backend works.
    TelemetryUnavailable {
        why: String,
    },
    /// A batch trial's job: submitted, or its state changed (pending with the scheduler's
    /// reason, running on its nodes, ended).
    Job(Box<crate::domain::job::Job>),
    /// The trial's result could be neither stored nor kept in its folder (a full disk): here it
    /// is whole, for the frontend to print. Saved as `file`, it is imported like a kept one.
    #[serde(rename = "result-unstored")]
    Unstored {
        why: String,
        file: PathBuf,
        result: Box<pending::PendingResult>,
    },
}

impl TrialEvent {
    /// What to tell a person about an [`TrialEvent::Unstored`] result, ending with the result
    /// itself (one line of JSON); None for any other event.
    pub fn unstored_note(&self) -> Option<String> {
        let TrialEvent::Unstored { why, file, result } = self else {
            return None;
        };
        Some(format!(
            "primus-tune: the trial's result could not be stored or kept ({why}); save the next \
             line as {} and the next primus-tune command that opens the workspace stores it:\n{}",
            file.display(),
            serde_json::to_string(result).unwrap_or_default()
        ))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Edit(#[from] crate::config::doc::EditError),
    #[error(transparent)]
    Profile(#[from] super::profile::ProfileError),
    #[error(transparent)]
    Spawn(#[from] process::SpawnError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("job: {0}")]
    Job(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TrialError + '_ {
    move |source| TrialError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Keys the runner adds to trials by itself (the iteration budget: Megatron `train_iters`,
/// TorchTitan `training.steps`; the log level the parser needs): stored with the trial, but not
/// settings a user would apply to the experiment.
pub const RUNNER_KEYS: [&str; 3] = ["train_iters", "training.steps", "stderr_sink_level"];

/// A stored trial's own settings: its overrides without the runner's keys.
pub fn trial_settings(t: &crate::store::TrialRow) -> BTreeMap<String, serde_json::Value> {
    t.overrides
        .iter()
        .filter(|(k, _)| !RUNNER_KEYS.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// What a stored trial ran, flag → value: its stored resolved parameters, else its folder's
/// `resolved.json`, without the runner's keys and the launcher's `_` entries. `None` for a trial
/// stored with neither (its folder gone).
pub fn trial_params(t: &crate::store::TrialRow) -> Option<BTreeMap<String, serde_json::Value>> {
    let obj = match &t.resolved {
        Some(serde_json::Value::Object(m)) => m.clone(),
        _ => {
            let text = std::fs::read_to_string(t.trial_dir.join("resolved.json")).ok()?;
            match serde_json::from_str(&text).ok()? {
                serde_json::Value::Object(m) => m,
                _ => return None,
            }
        }
    };
    Some(obj.into_iter().filter(|(k, _)| !is_runner_key(k)).collect())
}

/// A key the runner sets for every trial (its iteration budget, log level) or the launcher's
/// `_` entries: not a setting that tells trials apart.
pub fn is_runner_key(k: &str) -> bool {
    k.starts_with('_') || RUNNER_KEYS.contains(&k)
}

/// The global batch a stored trial was configured with, samples a step: `global_batch_size`
/// of its folder's `resolved.json` (for TorchTitan, the Megatron view's: local batch × the
/// data-parallel size when `training.global_batch_size` is -1). `None` when unknown.
pub fn trial_global_batch(t: &crate::store::TrialRow) -> Option<f64> {
    let text = std::fs::read_to_string(t.trial_dir.join("resolved.json")).ok()?;
    global_batch_of(&serde_json::from_str(&text).ok()?)
}

/// `global_batch_size` of a resolved parameter object (a positive number), if any.
pub fn global_batch_of(j: &serde_json::Value) -> Option<f64> {
    crate::run::profile::read_resolved(j)
        .get("global_batch_size")
        .and_then(|v| v.as_f64())
        .filter(|g| *g > 0.0)
}

/// The iteration budget a stored trial ran with (`train_iters`, TorchTitan `training.steps`).
pub fn trial_iters(t: &crate::store::TrialRow) -> Option<u64> {
    t.overrides
        .iter()
        .find(|(k, _)| k == "train_iters" || k == "training.steps")
        .and_then(|(_, v)| v.as_u64())
}

/// The PyTorch proxy, shipped in the binary so a copied binary can still run it.
const TORCH_PROXY: &str = include_str!("../../../assets/proxy/proxy_torch.py");

/// Where the shipped assets (the PyTorch proxy) are: the source checkout's `assets/`, else a copy
/// written once under the user's data folder.
pub fn assets_dir() -> std::io::Result<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    if source.join("proxy/proxy_torch.py").is_file() {
        return Ok(source);
    }
    let root = crate::util::bundled::data_dir(&format!("assets-{}", env!("CARGO_PKG_VERSION")));
    let p = root.join("proxy/proxy_torch.py");
    // Not a user file: keep it equal to the shipped script.
    if std::fs::read_to_string(&p).ok().as_deref() != Some(TORCH_PROXY) {
        std::fs::create_dir_all(root.join("proxy"))?;
        std::fs::write(&p, TORCH_PROXY)?;
    }
    Ok(root)
}

/// Run one trial to its end: materialise it, start it with its launcher, watch what it prints
/// (and its job's states) under the stop policy, stop it, classify how it ended, store it.
/// `cancel` flips to true when the user asks to stop.
pub async fn run_trial(
    exp: &Experiment,
    load: &LoadOptions,
    store: &Store,
    opts: &TrialOptions,
    events: mpsc::Sender<TrialEvent>,
    cancel: wch::Receiver<bool>,
) -> Result<TrialResult, TrialError> {
    let attach = opts.launcher.batch().and_then(|b| b.attach.as_ref());
    let m = match attach {
        Some(a) => materialise::reattach(a, opts)?,
        None => materialise(exp, load, store, opts)?,
    };
    // From here to its end the trial's runner writes its heartbeat, so that a process that
    // cannot see this one (another node, another PID namespace) can tell it still runs.
    tokio::select! {
        r = launch_and_watch(&m, store, opts, events, cancel) => r,
        never = heartbeat(store, m.trial_id) => match never {},
    }
}

/// Writes the trial's heartbeat every [`HEARTBEAT_EVERY`](crate::util::liveness::HEARTBEAT_EVERY),
/// for ever (the trial's end drops it). A write the database is too busy for at once is
/// skipped, never waited for: the watch of the log must not stall, and the staleness limit
/// spans many beats.
async fn heartbeat(store: &Store, trial_id: i64) -> std::convert::Infallible {
    let mut beats = tokio::time::interval(crate::util::liveness::HEARTBEAT_EVERY);
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        beats.tick().await;
        let _ = store.with_patience(Duration::ZERO, || store.beat_trial(trial_id));
    }
}

/// [`run_trial`] once the trial is materialised: launch, watch, stop, store.
async fn launch_and_watch(
    m: &Materialised,
    store: &Store,
    opts: &TrialOptions,
    events: mpsc::Sender<TrialEvent>,
    cancel: wch::Receiver<bool>,
) -> Result<TrialResult, TrialError> {
    let attach = opts.launcher.batch().and_then(|b| b.attach.as_ref());
    announce(m, opts, &events).await;
    // A job's telemetry comes from its nodes (its monitor step), not from here.
    let sampler = match opts.launcher {
        Launcher::Local => LocalSampler::start(opts.telemetry.as_ref(), &events).await,
        Launcher::Batch(_) => LocalSampler::default(),
    };
    let started = Instant::now();
    let (work, streams) = match opts.launcher.start(m, opts, store, &events).await {
        Ok(x) => x,
        Err(e) => {
            if attach.is_none() {
                not_launched(store, m.trial_id, &e)?;
            }
            return Err(e);
        }
    };
    if let (Some(s), Some(root)) = (&sampler.sampler, work.local_root()) {
        s.watch_tree(root);
    }
    let mut streams = streams;
    let mut sampler = sampler;
    // A job's telemetry comes from its nodes, a local trial's from its sampler.
    let snaps = streams.snaps.take().or_else(|| sampler.rx.take());
    let mut run = Running {
        m,
        opts,
        store,
        events: &events,
        work,
        streams,
        snaps,
        sampler,
        obs: Observed::new(m.shape),
        policy: stop_policy(opts, &m.dir, started),
        exit: ExitInfo::default(),
        stop_reason: StopReason::Exited,
        started,
        pauses: pause::Pauses::new(Instant::now()),
    };
    let local_exit = run.watch(cancel).await;
    run.drain().await;
    run.finish(local_exit).await
}

/// The trial's start, told to the frontend: its argv and folder, and how its world was
/// chosen when nothing named it.
async fn announce(m: &Materialised, opts: &TrialOptions, events: &mpsc::Sender<TrialEvent>) {
    let _ = events
        .send(TrialEvent::Started {
            trial_id: m.trial_id,
            argv: m.launch.argv.clone(),
            trial_dir: m.dir.clone(),
            basis: opts.basis.clone(),
        })
        .await;
    for note in &opts.notes {
        let _ = events
            .send(TrialEvent::Line {
                stream: Stream::Stderr,
                line: format!("primus-tune: note: {note}"),
            })
            .await;
    }
}

/// The stop rules of a trial started at `started`.
fn stop_policy(opts: &TrialOptions, dir: &Path, started: Instant) -> StopPolicy {
    let resolved: Option<serde_json::Value> = std::fs::read_to_string(dir.join("resolved.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    StopPolicy {
        steady: SteadyConfig {
            ci_target: opts.ci_target,
            max_iters: Some(opts.max_iters),
            ..SteadyConfig::default()
        },
        max_iters: opts.max_iters,
        trains: opts.trains,
        race: opts.race,
        global_batch: opts.race.and(resolved.as_ref()).and_then(global_batch_of),
        first_iteration: Duration::from_secs_f64(opts.first_iteration_seconds),
        hang: Duration::from_secs_f64(opts.hang_seconds),
        deadline: opts
            .max_seconds
            .map(|s| started + Duration::from_secs_f64(s)),
        failure_grace: opts.failure_grace,
        ends_itself: resolved.as_ref().and_then(own_budget) == Some(opts.max_iters),
        end_grace: opts.end_grace,
    }
}

/// The iteration count the workload runs to by itself (`train_iters`, TorchTitan
/// `training.steps`) as its resolved config says.
fn own_budget(j: &serde_json::Value) -> Option<u64> {
    let p = crate::run::profile::read_resolved(j);
    ["train_iters", "training.steps"]
        .iter()
        .find_map(|k| p.get(*k).and_then(|v| v.as_i64()))
        .and_then(|n| u64::try_from(n).ok())
}

/// The sampler of a trial on this node (none for a job, or without telemetry).
#[derive(Default)]
struct LocalSampler {
    sampler: Option<Sampler>,
    rx: Option<mpsc::Receiver<Snapshot>>,
    /// The GPU its backend reads (GPU 0's name).
    gpu: Option<String>,
}

impl LocalSampler {
    async fn start(t: Option<&TelemetrySetup>, events: &mpsc::Sender<TrialEvent>) -> LocalSampler {
        let Some(t) = t else {
            return LocalSampler::default();
        };
        let (backend, notes) =
            select::open(&t.backend, &t.roots).unwrap_or_else(|e| (None, vec![e.to_string()]));
        if backend.is_none() && t.backend != "host" {
            let _ = events
                .send(TrialEvent::TelemetryUnavailable {
                    why: notes.join("; "),
                })
                .await;
        }
        let gpu = backend
            .as_ref()
            .and_then(|b| b.gpus().first().map(|g| g.name.clone()));
        let (s, rx) = Sampler::start(backend, Host::new(&t.roots.procfs), t.config);
        LocalSampler {
            sampler: Some(s),
            rx: Some(rx),
            gpu,
        }
    }
}

/// A trial while it runs: what started it, what it has seen, and how it is to stop.
struct Running<'a> {
    m: &'a Materialised,
    opts: &'a TrialOptions,
    store: &'a Store,
    events: &'a mpsc::Sender<TrialEvent>,
    work: Launched,
    streams: Streams,
    /// The trial's telemetry: its nodes' (a job's), else its own sampler's.
    snaps: Option<mpsc::Receiver<Snapshot>>,
    sampler: LocalSampler,
    obs: Observed,
    policy: StopPolicy,
    exit: ExitInfo,
    stop_reason: StopReason,
    started: Instant,
    /// When the loop last ran: a long gap is a pause of the runner, not the workload's silence.
    pauses: pause::Pauses,
}

impl Running<'_> {
    /// Watches the trial until it ends by itself or is stopped; the local tree's exit.
    async fn watch(&mut self, mut cancel: wch::Receiver<bool>) -> (Option<i32>, Option<i32>) {
        let trial_id = self.m.trial_id;
        let mut last_progress = Instant::now();
        // When the budget's last iteration came to a workload that ends by itself there.
        let mut ending: Option<Instant> = None;
        loop {
            self.resumed(&mut last_progress, &mut ending).await;
            let failing = self
                .obs
                .failed_at
                .and_then(|_| self.obs.detector.pending_class());
            let mut wake = self.policy.wake_at(
                last_progress,
                !self.obs.iters.is_empty(),
                self.obs.median_ms,
                self.obs.failed_at,
                failing,
                ending,
            );
            if let Some(d) = self.work.pending_deadline() {
                wake = wake.min(d);
            }
            // Run at least every tick, so a pause of the runner shows as a gap.
            wake = wake.min(Instant::now() + pause::TICK);
            let stop: Stop = tokio::select! {
                line = self.streams.lines.recv() => {
                    let Some((stream, line)) = line else {
                        // Every stream closed: the process is exiting (a job: it is over).
                        return self.work.wait().await;
                    };
                    let seen = self.obs.line(&line, &self.policy.steady, self.store, trial_id);
                    if let Some((it, summary)) = seen.iteration {
                        last_progress = Instant::now();
                        let _ = self.events
                            .send(TrialEvent::Iteration { it, summary: Box::new(summary) })
                            .await;
                    }
                    let _ = self.events.send(TrialEvent::Line { stream, line }).await;
                    if ending.is_none()
                        && self.policy.ends_itself
                        && self.policy.budget_reached(&self.obs.iters)
                    {
                        ending = Some(Instant::now());
                    }
                    match self.policy.after_iteration(&self.obs.iters) {
                        Some(stop) => stop,
                        None => continue,
                    }
                }
                update = batch::recv_update(&mut self.streams.states) => {
                    let Some(u) = update else {
                        self.streams.states = None;
                        continue;
                    };
                    let v = self.work.on_update(&u, self.store, trial_id, self.events).await;
                    if v.began {
                        // It runs from now on: start-up, hang limits and the wall-clock budget
                        // count from the job's start, not from its time in the queue.
                        last_progress = Instant::now();
                        self.policy.deadline = self
                            .opts
                            .max_seconds
                            .map(|s| last_progress + Duration::from_secs_f64(s));
                    }
                    match v.failure {
                        Some(_) => Stop::failure(),
                        None => continue,
                    }
                }
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {
                    if self.resumed(&mut last_progress, &mut ending).await {
                        continue;
                    }
                    let now = Instant::now();
                    if self.work.waiting() {
                        if self.work.pending_over(now).is_some() {
                            Stop::failure()
                        } else {
                            // Still in the queue: no start-up or hang clock runs yet.
                            last_progress = now;
                            continue;
                        }
                    } else {
                        let (iters, median) = (&self.obs.iters, self.obs.median_ms);
                        match self
                            .policy
                            .after_failure(now, self.obs.failed_at, median, failing)
                            .or_else(|| {
                                self.policy
                                    .on_clock(now, last_progress, iters, self.m.shape, median, ending)
                            }) {
                            Some(stop) => stop,
                            None => continue,
                        }
                    }
                }
                snap = recv_snapshot(&mut self.snaps) => {
                    match snap {
                        Some(snap) => {
                            self.obs.snapshot(&snap, self.store, trial_id);
                            let _ = self.events.send(TrialEvent::Telemetry(Box::new(snap))).await;
                        }
                        None => self.snaps = None,
                    }
                    continue;
                }
                changed = cancel.changed() => {
                    if changed.is_err() || *cancel.borrow() {
                        Stop::user()
                    } else {
                        continue;
                    }
                }
            };
            return self.stop(stop).await;
        }
    }

    /// After a pause of the runner itself (its lines waited in the pipe meanwhile), the silences
    /// the stop rules measure (hang, failure grace, end grace) move on by the pause, and so does
    /// the wall-clock budget: as Slurm does not count a suspended job's suspended time against
    /// its time limit, the budget buys the trial measuring time, and a stopped runner measured
    /// nothing. (Its `wall_s` stays the wall time.) Whether there was a pause.
    async fn resumed(&mut self, last_progress: &mut Instant, ending: &mut Option<Instant>) -> bool {
        let now = Instant::now();
        let Some(p) = self.pauses.check(now) else {
            return false;
        };
        *last_progress = pause::moved(*last_progress, p, now);
        *ending = ending.map(|e| pause::moved(e, p, now));
        self.obs.failed_at = self.obs.failed_at.map(|f| pause::moved(f, p, now));
        self.policy.deadline = self.policy.deadline.map(|d| d + p);
        let line = format!(
            "primus-tune: this runner was stopped for {:.1} s; its hang and time limits do not \
             count that time",
            p.as_secs_f64()
        );
        let stream = Stream::Stderr;
        let _ = self.events.send(TrialEvent::Line { stream, line }).await;
        // Telling it took time of its own: the next gap starts now.
        self.pauses = pause::Pauses::new(Instant::now());
        true
    }

    /// Stops the trial for `stop` and waits for its end.
    async fn stop(&mut self, stop: Stop) -> (Option<i32>, Option<i32>) {
        self.stop_reason = stop.reason;
        stop.record(&mut self.exit);
        let _ = self
            .events
            .send(TrialEvent::Stopping {
                reason: stop.reason,
            })
            .await;
        self.obs.detector.mark_stop();
        // After a failure line the workload had its grace already: escalate at once.
        let grace = match stop.reason {
            StopReason::Failure => self.opts.grace.min(FAILURE_ESCALATION),
            _ => self.opts.grace,
        };
        self.work.stop(grace).await;
        self.work.wait().await
    }

    /// Reads what the pipes still hold (the failure line often comes last; a job's follower
    /// reads the nodes' files to their end and closes), and the last snapshots and job states.
    async fn drain(&mut self) {
        let mut rest = Vec::new();
        if self.work.drains() {
            while let Some(l) = self.streams.lines.recv().await {
                rest.push(l);
            }
        } else {
            // The tree has ended, but its pipes' last lines may still be on their way: read to
            // their end, for a moment only (a stray that holds a pipe open is killed below).
            let until = tokio::time::Instant::now() + PIPE_DRAIN;
            while let Ok(Some(l)) = tokio::time::timeout_at(until, self.streams.lines.recv()).await
            {
                rest.push(l);
            }
        }
        while let Ok(l) = self.streams.lines.try_recv() {
            rest.push(l);
        }
        for (_, line) in rest {
            self.obs.late_line(&line);
        }
        // A job's last state (its exit) came before its follower closed.
        if let Some(states) = self.streams.states.as_mut() {
            let mut late = Vec::new();
            while let Ok(u) = states.try_recv() {
                late.push(u);
            }
            for u in late {
                self.work
                    .on_update(&u, self.store, self.m.trial_id, self.events)
                    .await;
            }
        }
        let strays = self
            .work
            .sweep_up(&self.m.dir, self.store, self.m.trial_id)
            .await;
        if strays > 0 {
            let _ = self
                .events
                .send(TrialEvent::Line {
                    stream: Stream::Stderr,
                    line: format!(
                        "primus-tune: killed {} of this trial that had left its process tree",
                        crate::util::text::count(strays, "process", "processes")
                    ),
                })
                .await;
        }
        if let Some(s) = self.sampler.sampler.take() {
            s.stop();
        }
        if let Some(rx) = self.snaps.as_mut() {
            let mut late = Vec::new();
            while let Ok(snap) = rx.try_recv() {
                late.push(snap);
            }
            for snap in late {
                self.obs.snaps.push(snap.clone());
                self.obs.pending_snaps.push(snap);
            }
        }
    }

    /// Classifies how the trial ended and stores it.
    async fn finish(
        mut self,
        local_exit: (Option<i32>, Option<i32>),
    ) -> Result<TrialResult, TrialError> {
        (self.exit.code, self.exit.signal) = self.work.exit_status(local_exit);
        let summary = self.summary();
        let (mut status, mut failure) = finish::classify(
            self.obs
                .detector
                .finish(&self.exit, self.obs.iters.len() as u64),
            &self.exit,
            summary.n > 0,
            self.opts.trains,
        );
        if let Some(f) = self.work.job_failure() {
            status = crate::domain::trial::TrialStatus::Failed;
            failure = Some(f);
        }
        let wall_s = self.work.wall_s(self.started);
        let end = TrialEnd {
            status,
            failure: failure.clone(),
            exit_code: self.exit.code,
            exit_signal: self.exit.signal,
            iterations_seen: self.obs.iters.len() as u64,
            wall_s,
            // Why the trial ended is stored with its summary (`trials show`, a resumed sweep).
            summary: serde_json::to_value(&summary).ok().map(|mut v| {
                v["stop_reason"] = serde_json::json!(self.stop_reason.as_str());
                v
            }),
            median_step_ms: summary.median_step_ms,
            ci95_ms: summary.ci95_ms,
            tokens_per_s_per_gpu: summary.tokens_per_s_per_gpu,
            tflops_per_gpu: summary.tflops_per_gpu,
            peak_mem_gib: summary.peak_mem_gib,
        };
        self.store_end(end).await?;
        Ok(TrialResult {
            trial_id: Some(self.m.trial_id),
            status,
            failure,
            stop_reason: self.stop_reason,
            exit_code: self.exit.code,
            exit_signal: self.exit.signal,
            wall_s,
            trial_dir: Some(self.m.dir.display().to_string()),
            job: self.work.job().cloned(),
            summary,
        })
    }

    /// The trial's summary: its steady figures, its telemetry over its steady span, its
    /// start-up, basis and world, and (a job's) its queue time and nodes.
    fn summary(&self) -> Summary {
        let (obs, shape) = (&self.obs, self.m.shape);
        let cfg = &self.policy.steady;
        let summary = Summary::from_parts(&obs.iters, &obs.memory, shape, cfg);
        let steady = obs.steady_span(summary.warmup, summary.n);
        let (telemetry, span) =
            sampler::summarize_training(&obs.snaps, &obs.pids, steady, obs.training_span());
        let mut summary = summary.with_telemetry(telemetry);
        summary.telemetry_span = span;
        summary.world = self.opts.world;
        summary.basis = Some(self.opts.basis.seen_on(self.sampler.gpu.as_deref()));
        let run_start = self.work.run_start().unwrap_or(self.started);
        summary.startup_s = obs
            .first_iteration
            .map(|(t, _)| t.saturating_duration_since(run_start).as_secs_f64());
        if let Some(job) = self.work.job() {
            summary.pending_s = self.work.queued_s();
            summary.nodes = nodes::summarize(
                &self.m.dir,
                &job.node_list,
                &obs.snaps,
                steady,
                obs.training_span(),
                shape,
                cfg,
            );
            // On several nodes the per-GPU figures are per node; on one they are the trial's.
            summary.telemetry = match summary.nodes.as_slice() {
                [one] => one.gpus.clone(),
                _ => Vec::new(),
            };
        }
        summary
    }

    /// Everything not stored yet, with the store's full patience, tried again after a failure
    /// that was not a lock; a database that stays unavailable gets the result in the trial's
    /// folder instead, imported on the next access; a folder that cannot take it either (a full
    /// disk) gets it handed to the frontend, which prints it ([`TrialEvent::Unstored`]).
    async fn store_end(&mut self, end: TrialEnd) -> Result<(), TrialError> {
        let result = pending::PendingResult {
            db: self.store.path().to_path_buf(),
            trial_id: self.m.trial_id,
            iterations: std::mem::take(&mut self.obs.pending_iters),
            memory: std::mem::take(&mut self.obs.pending_memory),
            samples: std::mem::take(&mut self.obs.pending_snaps),
            end,
        };
        let mut failed = match result.store(self.store) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if !matches!(failed, crate::store::StoreError::Busy { .. }) {
            for pause in pending::RETRY_PAUSES {
                tokio::time::sleep(pause).await;
                match result.store(self.store) {
                    Ok(()) => return Ok(()),
                    Err(e) => failed = e,
                }
            }
        }
        let event = match result.keep(&self.m.dir) {
            Ok(kept) => TrialEvent::Line {
                stream: Stream::Stderr,
                line: format!(
                    "primus-tune: the trial database is unavailable ({failed}); the result is \
                     kept in {} and is stored the next time this workspace is opened",
                    kept.display()
                ),
            },
            Err(keep) => {
                let file = self.m.dir.join(pending::FILE);
                tracing::error!(
                    result = %serde_json::to_string(&result).unwrap_or_default(),
                    "trial {}: neither stored ({failed}) nor kept in {} ({keep})",
                    self.m.trial_id,
                    file.display()
                );
                TrialEvent::Unstored {
                    why: format!("{failed}; and {}: {keep}", file.display()),
                    file,
                    result: Box::new(result),
                }
            }
        };
        let _ = self.events.send(event).await;
        Ok(())
    }
}

/// Longest wait between signals when a trial is stopped after a failure line: the workload
/// had its failure grace to exit by itself already.
const FAILURE_ESCALATION: Duration = Duration::from_secs(1);

/// After a local trial's tree ended, how long its pipes' last lines may take to arrive.
const PIPE_DRAIN: Duration = Duration::from_secs(1);

/// Marks a trial that could not start as failed (`not-launched`), so it does not stay running.
fn not_launched(store: &Store, trial_id: i64, e: &TrialError) -> Result<(), TrialError> {
    let failure = crate::domain::trial::Failure {
        class: crate::domain::trial::FailureClass::NotLaunched,
        line: Some(format!("nothing was launched: {e}")),
    };
    store.finish_trial(
        trial_id,
        &TrialEnd::new(crate::domain::trial::TrialStatus::Failed, 0.0).with_failure(Some(failure)),
    )?;
    Ok(())
}

/// The next snapshot, or never when the trial samples no telemetry.
async fn recv_snapshot(rx: &mut Option<tokio::sync::mpsc::Receiver<Snapshot>>) -> Option<Snapshot> {
    match rx {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}
