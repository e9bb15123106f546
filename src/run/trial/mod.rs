//! One trial, end to end: write its folder (effective config, resolved parameters, argv, env),
//! launch it through a profile, watch the log (iterations, steady state, failures, hangs), stop
//! it as a group when the measurement is done, and store everything.

//! One trial, end to end, in three steps: [`materialise()`] writes its folder (effective config,
//! resolved parameters, argv, env) and store row and builds the launch; [`run_trial`] runs it
//! through its profile, feeding the log to the parser and asking [`watch`]'s pure stop policy
//! when to stop the process group; [`finish`] classifies how it ended, and everything is stored.

pub mod finish;
pub mod materialise;
pub mod nodes;
pub mod pending;
pub mod slurm_job;
pub mod watch;

pub use materialise::{Materialised, config_env, config_hash, effective_config_text, materialise};

use super::capabilities::{Capabilities, LaunchKind};
use super::failure::FailureDetector;
use super::logparse::LogParser;
use super::process::{self, Stream};
use super::profile::Profile;
use super::steady::SteadyConfig;
use crate::config::overrides::Override;
use crate::config::resolve::{Experiment, LoadOptions};
use crate::domain::trial::{
    ExitInfo, Iteration, LogEvent, MemoryReport, StopReason, Summary, TrialResult,
};
use crate::megatron::World;
use crate::store::{Store, TrialEnd};
use crate::telemetry::host::Host;
use crate::telemetry::sampler::{self, Sampler, SamplerConfig, Snapshot};
use crate::telemetry::select::{self, Roots};
use slurm_job as job;
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
    /// GPUs the trial uses (world size).
    pub gpus: u64,
    /// Said at the start of the trial, in its log: how the world was chosen when nothing
    /// named it (the launch's fallback of [`FALLBACK_GPUS`] ranks).
    pub world_note: Option<String>,
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
    /// Run the trial as a Slurm job (None: on this node).
    pub slurm: Option<slurm_job::SlurmLaunch>,
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
    /// A Slurm trial's job: submitted, or its state changed (pending with Slurm's reason,
    /// running on its nodes, ended).
    Job(Box<crate::domain::trial::SlurmJob>),
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
    #[error("Slurm: {0}")]
    Slurm(String),
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

/// The world of a trial: `requested` (`--gpus`), else the launcher's variables
/// (`GPUS_PER_NODE` × `NNODES`), else the defaults file's `gpus` (`configured`), else the one
/// process of a one-process workload (the proxies), else the GPUs `detected` on this node.
/// None when nothing says: the launch then starts [`FALLBACK_GPUS`] ranks, and lint treats the
/// world as unknown.
pub fn trial_world(
    requested: Option<u64>,
    env: &crate::config::env::Env,
    configured: Option<u64>,
    caps: &Capabilities,
    detected: Option<World>,
) -> Option<World> {
    requested
        .and_then(World::flag)
        .or_else(|| World::from_env(|k| env.get(k)))
        .or_else(|| configured.and_then(World::configured))
        .or_else(|| (caps.launch == LaunchKind::OneProcess).then(World::one_process))
        .or(detected)
}

/// Ranks a GPU launch starts when nothing says how many (no `--gpus`, launcher variables or
/// detected GPU): one 8-GPU node, the launchers' own default. Only the launch uses it; lint
/// checks no world rule against it.
pub const FALLBACK_GPUS: u64 = 8;

/// GPUs a trial of `world` launches (the world's size, else [`FALLBACK_GPUS`]).
pub fn launch_gpus(world: Option<&World>) -> u64 {
    world.map_or(FALLBACK_GPUS, |w| w.gpus)
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

/// Run one trial to its end. `cancel` flips to true when the user asks to stop.
pub async fn run_trial(
    exp: &Experiment,
    load: &LoadOptions,
    store: &Store,
    opts: &TrialOptions,
    events: mpsc::Sender<TrialEvent>,
    mut cancel: wch::Receiver<bool>,
) -> Result<TrialResult, TrialError> {
    let m = match opts.slurm.as_ref().and_then(|s| s.attach.as_ref()) {
        Some(a) => materialise::reattach(a, opts)?,
        None => materialise(exp, load, store, opts)?,
    };
    let (trial_id, dir, shape) = (m.trial_id, m.dir.clone(), m.shape);
    let _ = events
        .send(TrialEvent::Started {
            trial_id,
            argv: m.launch.argv.clone(),
            trial_dir: dir.clone(),
        })
        .await;
    if let Some(note) = &opts.world_note {
        let _ = events
            .send(TrialEvent::Line {
                stream: Stream::Stderr,
                line: format!("primus-tune: note: {note}"),
            })
            .await;
    }
    // A Slurm trial's telemetry comes from its nodes (the job's monitor step), not from here.
    let local_telemetry = opts.telemetry.as_ref().filter(|_| opts.slurm.is_none());
    let (sampler, mut telemetry_rx) = match local_telemetry {
        Some(t) => {
            let (backend, notes) =
                select::open(&t.backend, &t.roots).unwrap_or_else(|e| (None, vec![e.to_string()]));
            if backend.is_none() {
                let _ = events
                    .send(TrialEvent::TelemetryUnavailable {
                        why: notes.join("; "),
                    })
                    .await;
            }
            let (s, rx) = Sampler::start(backend, Host::new(&t.roots.procfs), t.config);
            (Some(s), Some(rx))
        }
        None => (None, None),
    };
    let mut snaps: Vec<Snapshot> = Vec::new();
    // What is not stored yet: written in batches while the trial runs, with no wait for a
    // database another process holds (a miss waits for the next batch), and all at the end.
    let mut snaps_pending: Vec<Snapshot> = Vec::new();
    let mut memory_pending: Vec<MemoryReport> = Vec::new();
    let mut flush = Flush::default();
    let mut trial_pids: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
    let started = Instant::now();
    let (mut work, mut lines, mut job_states) = match &opts.slurm {
        Some(sl) => {
            let (job, followers) = match job::start(sl, &m, opts, store, &events).await {
                Ok(x) => x,
                Err(e) => {
                    if sl.attach.is_none() {
                        not_launched(store, trial_id, &e)?;
                    }
                    return Err(e);
                }
            };
            telemetry_rx = Some(followers.snaps);
            (
                Workload::Job(Box::new(job)),
                followers.lines,
                Some(followers.states),
            )
        }
        None => match process::spawn(&m.launch) {
            Ok((running, lines)) => (Workload::Local(running), lines, None),
            Err(e) => {
                let e = TrialError::from(e);
                not_launched(store, trial_id, &e)?;
                return Err(e);
            }
        },
    };
    if let (Some(s), Workload::Local(running)) = (&sampler, &work) {
        s.watch_tree(running.root);
    }
    let mut policy = StopPolicy {
        steady: SteadyConfig {
            ci_target: opts.ci_target,
            max_iters: Some(opts.max_iters),
            ..SteadyConfig::default()
        },
        max_iters: opts.max_iters,
        trains: opts.trains,
        race: opts.race,
        global_batch: opts
            .race
            .and_then(|_| std::fs::read_to_string(dir.join("resolved.json")).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .and_then(|j| global_batch_of(&j)),
        first_iteration: Duration::from_secs_f64(opts.first_iteration_seconds),
        hang: Duration::from_secs_f64(opts.hang_seconds),
        deadline: opts
            .max_seconds
            .map(|s| started + Duration::from_secs_f64(s)),
        failure_grace: opts.failure_grace,
    };
    let cfg = &policy.steady;
    let mut parser = LogParser::with_shape(shape);
    let mut detector = FailureDetector::new();
    let mut iters: Vec<Iteration> = Vec::new();
    let mut memory: Vec<MemoryReport> = Vec::new();
    let mut exit = ExitInfo::default();
    let mut stop_reason = StopReason::Exited;
    let mut last_progress = Instant::now();
    // Median steady step (ms) so far: the hang threshold scales with it.
    let mut median_ms = 0.0_f64;
    let mut pending: Vec<Iteration> = Vec::new();
    // When the first iteration was parsed (monotonic, and Unix ms as the snapshots are stamped):
    // the start-up ends there, and the telemetry summary starts there.
    let mut first_iteration: Option<(Instant, u64)> = None;
    // When each iteration's line arrived (Unix ms), parallel to `iters`: the steady span the
    // telemetry summary covers.
    let mut iter_ms: Vec<u64> = Vec::new();
    // When a failure line came with no iteration after it (the workload gets
    // `failure_grace` to exit by itself, then is stopped).
    let mut failed_at: Option<Instant> = None;

    let status = loop {
        let wake = policy.wake_at(last_progress, !iters.is_empty(), median_ms, failed_at);
        let stop: Stop = tokio::select! {
            line = lines.recv() => {
                let Some((stream, line)) = line else {
                    // Both streams closed: the process is exiting (a job: it is over).
                    break work.wait().await;
                };
                detector.feed(&line);
                if failed_at.is_none() && detector.failure_pending() {
                    failed_at = Some(Instant::now());
                }
                for ev in parser.feed(&line) {
                    match ev {
                        LogEvent::Iteration(it) => {
                            last_progress = Instant::now();
                            failed_at = None; // survived: training goes on
                            let unix_ms = job::unix_ms();
                            if first_iteration.is_none() {
                                first_iteration = Some((last_progress, unix_ms));
                            }
                            iter_ms.push(unix_ms);
                            iters.push(it.clone());
                            pending.push(it.clone());
                            if pending.len() >= 8 && flush.due() {
                                flush.done(store.with_patience(Duration::ZERO, || {
                                    store.add_iterations(trial_id, &pending)
                                }).map(|_| pending.clear()));
                            }
                            let summary = Summary::from_parts(&iters, &memory, shape, cfg);
                            median_ms = summary.median_step_ms.or(it.elapsed_ms).unwrap_or(median_ms);
                            let _ = events.send(TrialEvent::Iteration { it, summary: Box::new(summary) }).await;
                        }
                        LogEvent::Memory(m) => {
                            memory_pending.push(m.clone());
                            if flush.due() {
                                flush.done(store.with_patience(Duration::ZERO, || {
                                    memory_pending
                                        .iter()
                                        .try_for_each(|m| store.add_memory_report(trial_id, m).map(|_| ()))
                                }).map(|_| memory_pending.clear()));
                            }
                            memory.push(m);
                        }
                        LogEvent::Theoretical(_) => {}
                    }
                }
                let _ = events.send(TrialEvent::Line { stream, line }).await;
                match policy.after_iteration(&iters) {
                    Some(stop) => stop,
                    None => continue,
                }
            }
            update = job::recv_update(&mut job_states) => {
                match update {
                    Some(u) => {
                        if let Workload::Job(j) = &mut work
                            && j.update(&u, store, trial_id, &events).await
                        {
                            // It runs from now on: start-up, hang limits and the wall-clock
                            // budget count from the job's start, not from its time in the queue.
                            last_progress = Instant::now();
                            policy.deadline = opts
                                .max_seconds
                                .map(|s| last_progress + Duration::from_secs_f64(s));
                        }
                    }
                    None => job_states = None,
                }
                continue;
            }
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {
                let now = Instant::now();
                if work.waiting() {
                    // A job still in the queue: no start-up or hang clock runs yet.
                    last_progress = now;
                    continue;
                }
                match policy
                    .after_failure(now, failed_at, median_ms)
                    .or_else(|| policy.on_clock(now, last_progress, &iters, shape, median_ms))
                {
                    Some(stop) => stop,
                    None => continue,
                }
            }
            snap = recv_snapshot(&mut telemetry_rx) => {
                if let Some(snap) = snap {
                    if let Some(g) = &snap.host.group {
                        trial_pids.extend(g.pids.iter().copied());
                    }
                    snaps.push(snap.clone());
                    snaps_pending.push(snap.clone());
                    if snaps_pending.len() >= 10 && flush.due() {
                        flush.done(store.with_patience(Duration::ZERO, || {
                            store.add_samples(trial_id, &snaps_pending)
                        }).map(|_| snaps_pending.clear()));
                    }
                    let _ = events.send(TrialEvent::Telemetry(Box::new(snap))).await;
                } else {
                    telemetry_rx = None;
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
        stop_reason = stop.reason;
        stop.record(&mut exit);
        let _ = events
            .send(TrialEvent::Stopping {
                reason: stop.reason,
            })
            .await;
        detector.mark_stop();
        work.stop(opts.grace).await;
        break work.wait().await;
    };
    // Drain what the pipes still hold (the failure line often comes last); a job's follower
    // reads the nodes' files to their end and closes.
    let mut rest = Vec::new();
    if matches!(work, Workload::Job(_)) {
        while let Some(l) = lines.recv().await {
            rest.push(l);
        }
    }
    while let Ok(l) = lines.try_recv() {
        rest.push(l);
    }
    for (_, line) in rest {
        detector.feed(&line);
        for ev in parser.feed(&line) {
            if let LogEvent::Iteration(it) = ev {
                iter_ms.push(job::unix_ms());
                iters.push(it.clone());
                pending.push(it);
            }
        }
    }
    // No process of the trial may outlive it.
    let strays = match &mut work {
        Workload::Local(running) => {
            if running.alive() {
                process::stop_tree(running, Duration::from_millis(200)).await;
            }
            running.guard.disarm();
            process::kill_strays(materialise::TRIAL_DIR_ENV, &dir.display().to_string())
        }
        Workload::Job(_) => 0,
    };
    if strays > 0 {
        let _ = events
            .send(TrialEvent::Line {
                stream: Stream::Stderr,
                line: format!(
                    "primus-tune: killed {strays} process(es) of this trial that had left its \
                     process tree"
                ),
            })
            .await;
    }
    if let Some(s) = sampler {
        s.stop();
    }
    if let Some(rx) = telemetry_rx.as_mut() {
        while let Ok(snap) = rx.try_recv() {
            snaps.push(snap.clone());
            snaps_pending.push(snap);
        }
    }
    // A job's last state (its exit) came before its follower closed.
    if let (Workload::Job(j), Some(states)) = (&mut work, job_states.as_mut()) {
        while let Ok(u) = states.try_recv() {
            j.update(&u, store, trial_id, &events).await;
        }
    }
    (exit.code, exit.signal) = match &work {
        Workload::Job(j) => j.exit_status(),
        Workload::Local(_) => status,
    };
    let run_start = work.run_start().unwrap_or(started);
    let wall_s = match &work {
        Workload::Job(j) => j.wall_s(),
        Workload::Local(_) => started.elapsed().as_secs_f64(),
    };
    let summary = Summary::from_parts(&iters, &memory, shape, cfg);
    let (telemetry, span) = sampler::summarize_training(
        &snaps,
        &trial_pids,
        steady_span(&iter_ms, summary.warmup, summary.n),
        iter_ms.first().zip(iter_ms.last()).map(|(a, b)| (*a, *b)),
    );
    let mut summary = summary.with_telemetry(telemetry);
    summary.telemetry_span = span;
    summary.world = opts.world_note.is_none().then_some(opts.gpus);
    summary.startup_s =
        first_iteration.map(|(t, _)| t.saturating_duration_since(run_start).as_secs_f64());
    let (mut status, mut failure) = finish::classify(
        detector.finish(&exit, iters.len() as u64),
        &exit,
        summary.n > 0,
        opts.trains,
    );
    if let Workload::Job(j) = &work {
        summary.pending_s = j.pending_s();
        summary.nodes = nodes::summarize(
            &dir,
            &j.record.node_list,
            &snaps,
            steady_span(&iter_ms, summary.warmup, summary.n),
            iter_ms.first().zip(iter_ms.last()).map(|(a, b)| (*a, *b)),
            shape,
            cfg,
        );
        // On several nodes the per-GPU figures are per node; on one they are the trial's.
        summary.telemetry = match summary.nodes.as_slice() {
            [one] => one.gpus.clone(),
            _ => Vec::new(),
        };
        if let Some(f) = j.slurm_failure() {
            status = crate::domain::trial::TrialStatus::Failed;
            failure = Some(f);
        }
    }
    let end = TrialEnd {
        status,
        failure: failure.clone(),
        exit_code: exit.code,
        exit_signal: exit.signal,
        iterations_seen: iters.len() as u64,
        wall_s,
        // Why the trial ended is stored with its summary (`trials show`, a resumed sweep).
        summary: serde_json::to_value(&summary).ok().map(|mut v| {
            v["stop_reason"] = serde_json::json!(stop_reason.as_str());
            v
        }),
        median_step_ms: summary.median_step_ms,
        ci95_ms: summary.ci95_ms,
        tokens_per_s_per_gpu: summary.tokens_per_s_per_gpu,
        tflops_per_gpu: summary.tflops_per_gpu,
        peak_mem_gib: summary.peak_mem_gib,
    };
    // Everything not stored yet, with the store's full patience; a database that stays
    // unavailable gets the result in the trial's folder instead, imported on the next access.
    let result = pending::PendingResult {
        db: store.path().to_path_buf(),
        trial_id,
        iterations: pending,
        memory: memory_pending,
        samples: snaps_pending,
        end,
    };
    if let Err(e) = result.store(store) {
        let Ok(kept) = result.keep(&dir) else {
            return Err(e.into());
        };
        let _ = events
            .send(TrialEvent::Line {
                stream: Stream::Stderr,
                line: format!(
                    "primus-tune: the trial database is unavailable ({e}); the result is kept in \
                     {} and is stored the next time this workspace is opened",
                    kept.display()
                ),
            })
            .await;
    }
    Ok(TrialResult {
        trial_id: Some(trial_id),
        status,
        failure,
        stop_reason,
        exit_code: exit.code,
        exit_signal: exit.signal,
        wall_s,
        trial_dir: Some(dir.display().to_string()),
        summary,
    })
}

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

/// What a trial runs: a process tree on this node, or a Slurm job.
enum Workload {
    Local(process::Running),
    Job(Box<job::JobCtl>),
}

impl Workload {
    async fn stop(&mut self, grace: Duration) {
        match self {
            Workload::Local(r) => {
                process::stop_tree(r, grace).await;
            }
            Workload::Job(j) => j.cancel().await,
        }
    }

    /// The exit (code, signal) of a local process; a job's comes with its last state.
    async fn wait(&mut self) -> (Option<i32>, Option<i32>) {
        use std::os::unix::process::ExitStatusExt;
        match self {
            Workload::Local(r) => {
                let s = r.child.wait().await.ok();
                (s.and_then(|s| s.code()), s.and_then(|s| s.signal()))
            }
            Workload::Job(_) => (None, None),
        }
    }

    /// A job still waiting in Slurm's queue.
    fn waiting(&self) -> bool {
        matches!(self, Workload::Job(j) if j.running_since.is_none() && !j.over)
    }

    /// When the workload started running (a job: when Slurm started it).
    fn run_start(&self) -> Option<Instant> {
        match self {
            Workload::Local(_) => None,
            Workload::Job(j) => j.running_since,
        }
    }
}

/// When the running trial may try its next batch of writes: at once, or after a miss (the
/// database was held by another process) a few seconds later.
#[derive(Default)]
struct Flush {
    not_before: Option<Instant>,
}

impl Flush {
    /// How long to leave the database alone after a write it refused.
    const BACKOFF: Duration = Duration::from_secs(5);

    fn due(&self) -> bool {
        self.not_before.is_none_or(|t| Instant::now() >= t)
    }

    fn done<T>(&mut self, r: Result<T, crate::store::StoreError>) {
        self.not_before = r.is_err().then(|| Instant::now() + Self::BACKOFF);
    }
}

/// The next snapshot, or never when the trial samples no telemetry.
async fn recv_snapshot(rx: &mut Option<tokio::sync::mpsc::Receiver<Snapshot>>) -> Option<Snapshot> {
    match rx {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// The Unix-ms span of the steady iterations: from the end of the last warm-up iteration (the
/// first steady one starts there) to the end of the last; `arrived` holds when each
/// iteration's line arrived. None without steady iterations.
fn steady_span(arrived: &[u64], warmup: usize, n: usize) -> Option<(u64, u64)> {
    if n == 0 || arrived.is_empty() {
        return None;
    }
    let from = match warmup {
        0 => arrived[0],
        w => *arrived.get(w - 1)?,
    };
    Some((from, *arrived.last()?))
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_steady_span_starts_where_the_last_warm_up_iteration_ended() {
        let arrived = [100, 200, 300, 400, 500];
        assert_eq!(super::steady_span(&arrived, 2, 3), Some((200, 500)));
        assert_eq!(super::steady_span(&arrived, 0, 5), Some((100, 500)));
        assert_eq!(super::steady_span(&arrived, 5, 0), None);
        assert_eq!(super::steady_span(&[], 0, 0), None);
    }

    use super::*;
    use crate::config::env::Env;
    use crate::megatron::WorldSource;

    #[test]
    fn a_trials_world_is_asked_for_set_one_process_or_detected_never_assumed() {
        let gpu = Capabilities::default();
        let proxy = Capabilities {
            launch: LaunchKind::OneProcess,
            ..Capabilities::default()
        };
        let none = Env::empty();
        let env = Env::empty().with("GPUS_PER_NODE", "4").with("NNODES", "2");
        let found = World::detected("nvml", 1, |_| None);
        // --gpus first, then the launcher's variables, then the defaults file, for every
        // profile.
        for caps in [&gpu, &proxy] {
            assert_eq!(
                trial_world(Some(2), &env, Some(3), caps, found)
                    .unwrap()
                    .gpus,
                2
            );
            assert_eq!(
                trial_world(None, &env, Some(3), caps, found).unwrap().gpus,
                8
            );
            let w = trial_world(None, &none, Some(3), caps, found).unwrap();
            assert_eq!((w.gpus, w.source), (3, WorldSource::Defaults));
        }
        // A proxy runs its one process, whatever this node has.
        let w = trial_world(None, &none, None, &proxy, found).unwrap();
        assert_eq!(w.source, WorldSource::Profile);
        // A GPU launch runs on the GPUs found here ...
        let w = trial_world(None, &none, None, &gpu, found).unwrap();
        assert!(matches!(w.source, WorldSource::Detected { .. }));
        assert_eq!(launch_gpus(Some(&w)), 1);
        // ... and with nothing known the world is unknown; only the launch falls back.
        assert_eq!(trial_world(None, &none, None, &gpu, None), None);
        assert_eq!(launch_gpus(None), FALLBACK_GPUS);
    }
}
