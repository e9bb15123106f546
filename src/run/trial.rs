//! One trial, end to end: write its folder (effective config, resolved parameters, argv, env),
//! launch it through a profile, watch the log (iterations, steady state, failures, hangs), stop
//! it as a group when the measurement is done, and store everything.

use super::failure::FailureDetector;
use super::logparse::LogParser;
use super::process::{self, Launch, Stream};
use super::profile::{Profile, TrialContext, resolved_json};
use super::steady::{self, SteadyConfig};
use crate::config::doc::YamlDoc;
use crate::config::literal;
use crate::config::overrides::Override;
use crate::config::resolve::{Experiment, LoadOptions};
use crate::config::value::Value;
use crate::domain::trial::{
    ExitInfo, Failure, FailureClass, Iteration, LogEvent, MemoryReport, RunShape,
};
use crate::domain::trial::{Summary, TrialResult};
use crate::store::{NewTrial, Store, TrialEnd, TrialStatus};
use crate::telemetry::host::Host;
use crate::telemetry::sampler::{self, Sampler, SamplerConfig, Snapshot};
use crate::telemetry::select::{self, Roots};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

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
    /// Hang threshold once iterations flow: max(3 × median step, this).
    pub hang_seconds: f64,
    /// Hang threshold before the first iteration.
    pub first_iteration_seconds: f64,
    /// Grace between SIGINT, SIGTERM and SIGKILL.
    pub grace: Duration,
    /// GPUs the trial uses (world size).
    pub gpus: u64,
    pub study_id: Option<i64>,
    /// Sample GPU/host telemetry during the trial (None: no sampling).
    pub telemetry: Option<TelemetrySetup>,
    /// The workload trains and prints iterations (false: a job such as offline GEMM tuning,
    /// which completes by exiting 0; it has no first-iteration hang limit, only
    /// `max_seconds`).
    pub trains: bool,
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
#[derive(Debug, Clone)]
pub enum TrialEvent {
    Started {
        trial_id: i64,
        argv: Vec<String>,
        trial_dir: PathBuf,
    },
    Line(Stream, String),
    Iteration {
        it: Iteration,
        /// Steady-state figures so far (after warm-up), when there are any.
        summary: Box<Summary>,
    },
    Stopping(String),
    Telemetry(Box<Snapshot>),
    /// Said once when no GPU telemetry backend works.
    TelemetryUnavailable(String),
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

/// GPUs of a trial when not given: the launcher's variables (`GPUS_PER_NODE` × `NNODES`), else 1
/// for the proxies and 8 for Primus.
pub fn default_gpus(env: &crate::config::env::Env, profile: &str) -> u64 {
    let get = |k: &str| env.get(k).and_then(|s| s.parse::<u64>().ok());
    match get("GPUS_PER_NODE") {
        Some(g) => g * get("NNODES").unwrap_or(1),
        None if profile.starts_with("proxy") => 1,
        None => 8,
    }
}

/// The folder primus-tune keeps beside an experiment: `<dir>/.primus-tune/`.
pub fn workspace_dir(experiment: &Path) -> PathBuf {
    experiment
        .parent()
        .unwrap_or(Path::new("."))
        .join(".primus-tune")
}

/// The trial's effective config: the experiment's own text with the overrides written into its
/// `overrides:` (comments kept) and `extends:` made absolute so it resolves from the trial folder.
pub fn effective_config_text(
    exp: &Experiment,
    overrides: &[Override],
) -> Result<String, TrialError> {
    let mut doc = YamlDoc::open(&exp.path)?;
    let module = exp.main_module().name.clone();
    if let Some(ext) = doc.node(&["extends"]) {
        let dir = exp.path.parent().unwrap_or(Path::new("."));
        let names: Vec<String> = match ext.typed() {
            Value::Str(s) => vec![s],
            Value::List(l) => l.iter().map(|v| v.to_string()).collect(),
            _ => Vec::new(),
        };
        let abs: Vec<Value> = names
            .iter()
            .map(|n| Value::Str(dir.join(n).display().to_string()))
            .collect();
        doc.set_literal(&["extends"], &literal::render(&Value::List(abs), None))?;
    }
    for o in overrides {
        let mut path = vec!["modules", module.as_str(), "overrides"];
        path.extend(o.key.split('.'));
        doc.set_literal(&path, &literal::render(&o.value, None))?;
    }
    Ok(doc.text().to_string())
}

/// FNV-1a over the resolved parameters: equal hashes mean the same effective config.
pub fn config_hash(params: &BTreeMap<String, Value>) -> String {
    let text = serde_json::to_string(&resolved_json(params, 0)).unwrap_or_default();
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// Overrides every trial gets: the iteration budget, and for Primus the DEBUG console level its
/// iteration lines need.
/// Keys the runner adds to trials by itself (the iteration budget, the log level the parser
/// needs): stored with the trial, but not settings a user would apply to the experiment.
pub const RUNNER_KEYS: [&str; 2] = ["train_iters", "stderr_sink_level"];

/// A stored trial's own settings: its overrides without the runner's keys.
pub fn trial_settings(t: &crate::store::TrialRow) -> BTreeMap<String, serde_json::Value> {
    t.overrides
        .iter()
        .filter(|(k, _)| !RUNNER_KEYS.contains(&k.as_str()))
        .cloned()
        .collect()
}

/// The iteration budget a stored trial ran with (`train_iters`).
pub fn trial_iters(t: &crate::store::TrialRow) -> Option<u64> {
    t.overrides
        .iter()
        .find(|(k, _)| k == "train_iters")
        .and_then(|(_, v)| v.as_u64())
}

fn trial_overrides(exp: &Experiment, opts: &TrialOptions) -> Vec<Override> {
    let mut out: Vec<Override> = opts.overrides.clone();
    let has = |out: &[Override], k: &str| out.iter().any(|o| o.key == k);
    if !has(&out, "train_iters") && exp.main_module().is_megatron() {
        out.push(Override {
            key: "train_iters".into(),
            value: Value::Int(opts.max_iters as i64),
            text: format!("train_iters={}", opts.max_iters),
        });
    }
    let m = exp.main_module();
    if opts.profile.name == "primus"
        && m.is_megatron()
        && m.value("stderr_sink_level").and_then(Value::as_str) != Some("DEBUG")
        && !has(&out, "stderr_sink_level")
    {
        out.push(Override {
            key: "stderr_sink_level".into(),
            value: Value::Str("DEBUG".into()),
            text: "stderr_sink_level=DEBUG".into(),
        });
    }
    out
}

/// The PyTorch proxy, shipped in the binary so a copied binary can still run it.
const TORCH_PROXY: &str = include_str!("../../assets/proxy/proxy_torch.py");

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
    mut cancel: watch::Receiver<bool>,
) -> Result<TrialResult, TrialError> {
    let overrides = trial_overrides(exp, opts);
    let text = effective_config_text(exp, &overrides)?;
    // Resolve the trial's config from its text (presets from the experiment's Primus root).
    let mut check = load.clone();
    check.overrides.clear();
    check.texts.insert(exp.path.clone(), text.clone());
    check.primus_root = Some(exp.primus_root.clone());
    let trial_exp = Experiment::load(&exp.path, &check)?;
    let params: BTreeMap<String, Value> = trial_exp.main_module().values();

    let ws = workspace_dir(&exp.path);
    let trials_root = ws.join("trials");
    std::fs::create_dir_all(&trials_root).map_err(io(&trials_root))?;
    let staging = tempfile::Builder::new()
        .prefix("new-")
        .tempdir_in(&trials_root)
        .map_err(io(&trials_root))?;

    let mut env: Vec<(String, String)> = Vec::new();
    let exe = std::env::current_exe().map_err(io(Path::new("current executable")))?;
    let assets = assets_dir().map_err(io(Path::new("assets")))?;
    let trial_id = store.insert_trial(&NewTrial {
        config_path: exp.path.clone(),
        config_hash: config_hash(&params),
        overrides: overrides
            .iter()
            .map(|o| (o.key.clone(), o.value.to_json()))
            .collect(),
        profile: Some(opts.profile.name.clone()),
        argv: Vec::new(),
        env: Vec::new(),
        trial_dir: PathBuf::new(),
        study_id: opts.study_id,
    })?;
    let dir = trials_root.join(trial_id.to_string());
    let staged = staging.keep();
    std::fs::rename(&staged, &dir).map_err(io(&dir))?;
    let config_path = dir.join("config.yaml");
    let resolved_path = dir.join("resolved.json");
    std::fs::write(&config_path, &text).map_err(io(&config_path))?;
    let resolved = resolved_json(&params, opts.gpus);
    std::fs::write(
        &resolved_path,
        serde_json::to_string_pretty(&resolved).unwrap_or_default(),
    )
    .map_err(io(&resolved_path))?;

    let cx = TrialContext {
        exe,
        primus_root: exp.primus_root.clone(),
        config: config_path.clone(),
        resolved: resolved_path,
        trial_dir: dir.clone(),
        iters: opts.max_iters,
        gpus: opts.gpus,
        assets,
        python: "python3".into(),
        overrides: overrides.clone(),
        params: params.clone(),
        env: opts.env.clone(),
        process_env: load.env.clone(),
    };
    env.extend(opts.profile.expand_env(&cx)?);
    env.extend(opts.env.iter().cloned());
    let (argv, cwd) = opts.profile.expand(&cx)?;
    let write_json = |name: &str, v: serde_json::Value| {
        let p = dir.join(name);
        std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap_or_default()).map_err(io(&p))
    };
    write_json("argv.json", serde_json::json!(argv))?;
    write_json(
        "env.json",
        serde_json::Value::Object(
            env.iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        ),
    )?;
    store.set_trial_launch(trial_id, &dir, &argv, &env)?;

    let launch = Launch {
        argv: argv.clone(),
        env,
        cwd,
        stdout_log: dir.join("stdout.log"),
        stderr_log: dir.join("stderr.log"),
    };
    let _ = events
        .send(TrialEvent::Started {
            trial_id,
            argv: argv.clone(),
            trial_dir: dir.clone(),
        })
        .await;
    let (sampler, mut telemetry_rx) = match &opts.telemetry {
        Some(t) => {
            let (backend, notes) =
                select::open(&t.backend, &t.roots).unwrap_or_else(|e| (None, vec![e]));
            if backend.is_none() {
                let _ = events
                    .send(TrialEvent::TelemetryUnavailable(notes.join("; ")))
                    .await;
            }
            let (s, rx) = Sampler::start(backend, Host::new(&t.roots.procfs), t.config);
            (Some(s), Some(rx))
        }
        None => (None, None),
    };
    let mut snaps: Vec<Snapshot> = Vec::new();
    let mut snaps_pending: Vec<Snapshot> = Vec::new();
    let mut trial_pids: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
    let started = Instant::now();
    let spawned = process::spawn(&launch);
    let (mut running, mut lines) = match spawned {
        Ok(x) => x,
        Err(e) => {
            let failure = Failure {
                class: FailureClass::NonZeroExit,
                line: Some(e.to_string()),
            };
            store.finish_trial(
                trial_id,
                &TrialEnd::new(TrialStatus::Failed, 0.0).with_failure(Some(failure)),
            )?;
            return Err(e.into());
        }
    };

    if let Some(s) = &sampler {
        s.watch_group(running.pgid);
    }
    let shape = RunShape {
        seq_length: params
            .get("seq_length")
            .and_then(Value::as_i64)
            .unwrap_or(0) as u64,
        global_batch_size: params
            .get("global_batch_size")
            .and_then(Value::as_i64)
            .unwrap_or(0) as u64,
        world_size: opts.gpus.max(1),
    };
    // The CPU proxy runs a scaled-down sequence: tokens per second count what really ran.
    let shape = if opts.profile.name == "proxy-cpu" {
        RunShape {
            seq_length: super::proxy::ProxyShape::from_resolved(&resolved).seq as u64,
            world_size: 1,
            ..shape
        }
    } else {
        shape
    };
    let shape = (shape.seq_length > 0 && shape.global_batch_size > 0).then_some(shape);
    let cfg = SteadyConfig {
        ci_target: opts.ci_target,
        max_iters: Some(opts.max_iters),
        ..SteadyConfig::default()
    };
    let mut parser = LogParser::new();
    let mut detector = FailureDetector::new();
    let mut iters: Vec<Iteration> = Vec::new();
    let mut memory: Vec<MemoryReport> = Vec::new();
    let mut exit = ExitInfo::default();
    let mut stop_reason = String::from("exited");
    let mut last_progress = Instant::now();
    // Median steady step (ms) so far: the hang threshold scales with it.
    let mut median_ms = 0.0_f64;
    let deadline = opts
        .max_seconds
        .map(|s| started + Duration::from_secs_f64(s));
    let mut pending: Vec<Iteration> = Vec::new();

    let status = loop {
        let hang_after = match (iters.is_empty(), median_ms) {
            // A job prints no iterations: only its deadline stops it (a day when none is set,
            // so the timer stays representable).
            (true, _) if !opts.trains => Duration::from_secs(86_400),
            (true, _) => Duration::from_secs_f64(opts.first_iteration_seconds),
            (false, med) => Duration::from_secs_f64((3.0 * med / 1000.0).max(opts.hang_seconds)),
        };
        let hang_at = last_progress + hang_after;
        let wake = deadline.map_or(hang_at, |d| d.min(hang_at));
        tokio::select! {
            line = lines.recv() => {
                let Some((stream, line)) = line else {
                    // Both streams closed: the process is exiting.
                    break running.child.wait().await.ok();
                };
                detector.feed(&line);
                for ev in parser.feed(&line) {
                    match ev {
                        LogEvent::Iteration(it) => {
                            last_progress = Instant::now();
                            iters.push(it.clone());
                            pending.push(it.clone());
                            if pending.len() >= 8 {
                                store.add_iterations(trial_id, &pending)?;
                                pending.clear();
                            }
                            let summary = Summary::from_parts(&iters, &memory, shape, &cfg);
                            median_ms = summary.median_step_ms.or(it.elapsed_ms).unwrap_or(median_ms);
                            let _ = events.send(TrialEvent::Iteration { it, summary: Box::new(summary) }).await;
                        }
                        LogEvent::Memory(m) => {
                            store.add_memory_report(trial_id, &m)?;
                            memory.push(m);
                        }
                        LogEvent::Theoretical(_) => {}
                    }
                }
                let _ = events.send(TrialEvent::Line(stream, line)).await;
                let done_iters = iters.last().is_some_and(|i| i.iteration >= opts.max_iters);
                if steady::should_stop(&iters, &cfg) || done_iters {
                    stop_reason = if done_iters { "max-iters".into() } else { "ci-target".into() };
                    exit.stopped_complete = true;
                    let _ = events.send(TrialEvent::Stopping(stop_reason.clone())).await;
                    detector.mark_stop();
                    process::stop_group(&mut running, opts.grace).await;
                    break running.child.wait().await.ok();
                }
            }
            _ = tokio::time::sleep_until(tokio::time::Instant::from_std(wake)) => {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    stop_reason = "max-seconds".into();
                    let enough = steady::stats(&iters, shape, &cfg).is_some_and(|s| s.n >= cfg.min_samples);
                    exit.stopped_complete = enough;
                    exit.timeout = !enough;
                } else if Instant::now() >= hang_at {
                    stop_reason = "hang".into();
                    exit.hang = true;
                } else {
                    continue;
                }
                let _ = events.send(TrialEvent::Stopping(stop_reason.clone())).await;
                detector.mark_stop();
                process::stop_group(&mut running, opts.grace).await;
                break running.child.wait().await.ok();
            }
            snap = recv_snapshot(&mut telemetry_rx) => {
                if let Some(snap) = snap {
                    if let Some(g) = &snap.host.group {
                        trial_pids.extend(g.pids.iter().copied());
                    }
                    snaps.push(snap.clone());
                    snaps_pending.push(snap.clone());
                    if snaps_pending.len() >= 10 {
                        store.add_samples(trial_id, &snaps_pending)?;
                        snaps_pending.clear();
                    }
                    let _ = events.send(TrialEvent::Telemetry(Box::new(snap))).await;
                } else {
                    telemetry_rx = None;
                }
            }
            changed = cancel.changed() => {
                if changed.is_err() || *cancel.borrow() {
                    stop_reason = "user".into();
                    exit.stopped_by_user = true;
                    let _ = events.send(TrialEvent::Stopping(stop_reason.clone())).await;
                    detector.mark_stop();
                    process::stop_group(&mut running, opts.grace).await;
                    break running.child.wait().await.ok();
                }
            }
        }
    };
    // Drain what the pipes still hold (the failure line often comes last).
    while let Ok((_, line)) = lines.try_recv() {
        detector.feed(&line);
        for ev in parser.feed(&line) {
            if let LogEvent::Iteration(it) = ev {
                iters.push(it.clone());
                pending.push(it);
            }
        }
    }
    // No process of the trial may outlive it.
    if process::group_alive(running.pgid) {
        process::stop_group(&mut running, Duration::from_millis(200)).await;
    }
    running.guard.disarm();
    if let Some(s) = sampler {
        s.stop();
    }
    if let Some(rx) = telemetry_rx.as_mut() {
        while let Ok(snap) = rx.try_recv() {
            snaps.push(snap.clone());
            snaps_pending.push(snap);
        }
    }
    store.add_samples(trial_id, &snaps_pending)?;
    let telemetry = sampler::summarize(&snaps, &trial_pids);
    if !pending.is_empty() {
        store.add_iterations(trial_id, &pending)?;
    }
    {
        use std::os::unix::process::ExitStatusExt;
        exit.code = status.and_then(|s| s.code());
        exit.signal = status.and_then(|s| s.signal());
    }
    let wall_s = started.elapsed().as_secs_f64();
    let summary = Summary::from_parts(&iters, &memory, shape, &cfg).with_telemetry(telemetry);
    let failure = detector.finish(&exit, iters.len() as u64);
    let status = match (&failure, exit.stopped_by_user) {
        (None, _) if summary.n > 0 => TrialStatus::Completed,
        (None, false) if !opts.trains && exit.code == Some(0) => TrialStatus::Completed,
        (Some(f), _) if f.class == FailureClass::KilledByUser => TrialStatus::Stopped,
        (_, true) => TrialStatus::Stopped,
        _ => TrialStatus::Failed,
    };
    let failure = match (status, failure) {
        (TrialStatus::Failed, None) => Some(Failure {
            class: FailureClass::NonZeroExit,
            line: Some(format!(
                "the workload ended (exit {}) without a measurable iteration",
                exit.code.map_or("by signal".into(), |c| c.to_string())
            )),
        }),
        (_, f) => f,
    };
    store.finish_trial(
        trial_id,
        &TrialEnd {
            status,
            failure: failure.clone(),
            exit_code: exit.code,
            exit_signal: exit.signal,
            iterations_seen: iters.len() as u64,
            wall_s,
            summary: serde_json::to_value(&summary).ok(),
            median_step_ms: summary.median_step_ms,
            ci95_ms: summary.ci95_ms,
            tokens_per_s_per_gpu: summary.tokens_per_s_per_gpu,
            tflops_per_gpu: summary.tflops_per_gpu,
            peak_mem_gib: summary.peak_mem_gib,
        },
    )?;
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

/// The next snapshot, or never when the trial samples no telemetry.
async fn recv_snapshot(rx: &mut Option<tokio::sync::mpsc::Receiver<Snapshot>>) -> Option<Snapshot> {
    match rx {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}
