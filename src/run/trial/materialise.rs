//! A trial before it runs: its overrides (the request's plus what the runner adds), its
//! effective config and resolved parameters, its folder and store row, and the exact argv and
//! environment of its launch. A failure after the row exists marks the trial failed, so no
//! trial stays `running` because it could not start.

use super::{TrialError, TrialOptions, assets_dir, io};
use crate::config::doc::YamlDoc;
use crate::config::literal;
use crate::config::overrides::Override;
use crate::config::resolve::{Experiment, LoadOptions};
use crate::domain::trial::{Failure, FailureClass, RunShape, TrialStatus};
use crate::domain::value::Value;
use crate::run::process::Launch;
use crate::run::profile::{TrialContext, resolved_json, trial_resolved_json};
use crate::store::{NewTrial, Store, TrialEnd};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A trial written to disk and the store, ready to launch.
#[derive(Debug, Clone)]
pub struct Materialised {
    pub trial_id: i64,
    pub dir: PathBuf,
    pub launch: Launch,
    /// The trial's resolved parameters.
    pub params: BTreeMap<String, Value>,
    /// What turns step times into tokens per second (None when the config lacks the sizes).
    pub shape: Option<RunShape>,
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

/// The request's overrides plus what the runner adds: the iteration budget (Megatron
/// `train_iters`, TorchTitan `training.steps`) and the console log level the profile's iteration
/// lines need.
pub fn trial_overrides(exp: &Experiment, opts: &TrialOptions) -> Vec<Override> {
    let mut out: Vec<Override> = opts.overrides.clone();
    let has = |out: &[Override], k: &str| out.iter().any(|o| o.key == k);
    let m = exp.main_module();
    let budget = if m.is_megatron() {
        Some("train_iters")
    } else if m.is_torchtitan() {
        Some("training.steps")
    } else {
        None
    };
    if let Some(key) = budget
        && !has(&out, key)
    {
        out.push(Override {
            key: key.into(),
            value: Value::Int(opts.max_iters as i64),
            text: format!("{key}={}", opts.max_iters),
        });
    }
    if let Some(level) = &opts.profile.capabilities.log_level
        && m.is_megatron()
        && m.value("stderr_sink_level").and_then(Value::as_str) != Some(level.as_str())
        && !has(&out, "stderr_sink_level")
    {
        out.push(Override {
            key: "stderr_sink_level".into(),
            value: Value::Str(level.clone()),
            text: format!("stderr_sink_level={level}"),
        });
    }
    out
}

/// The environment the trial's workload resolves its config with: `base` (the process's and
/// `--env`) under the profile's `env` and the trial's own
/// ([`crate::run::profile::Profile::config_env`]). The trial's `resolved.json`, and every view
/// a sweep takes of a candidate, resolve with it, so a profile that sets `PRIMUS_PP` is seen as
/// the pipeline the job runs.
pub fn config_env(
    base: &crate::config::env::Env,
    primus_root: &Path,
    opts: &TrialOptions,
) -> crate::config::env::Env {
    let known = crate::run::profile::KnownPlaceholders {
        primus_root: Some(primus_root.to_path_buf()),
        gpus: Some(opts.gpus),
        gpus_per_node: Some(opts.gpus_per_node),
    };
    opts.profile.config_env(base, &opts.env, &known)
}

/// Writes the trial's folder under `opts.trials_dir` and its store row, and builds its launch.
pub fn materialise(
    exp: &Experiment,
    load: &LoadOptions,
    store: &Store,
    opts: &TrialOptions,
) -> Result<Materialised, TrialError> {
    let overrides = trial_overrides(exp, opts);
    let text = effective_config_text(exp, &overrides)?;
    // Resolve the trial's config from its text (presets from the experiment's Primus root).
    let mut check = load.clone();
    check.env = config_env(&load.env, &exp.primus_root, opts);
    check.overrides.clear();
    check.texts.insert(exp.path.clone(), text.clone());
    check.primus_root = Some(exp.primus_root.clone());
    let trial_exp = Experiment::load(&exp.path, &check)?;
    let params: BTreeMap<String, Value> = trial_exp.main_module().values();

    let trials_root = &opts.trials_dir;
    std::fs::create_dir_all(trials_root).map_err(io(trials_root))?;
    let staging = tempfile::Builder::new()
        .prefix("new-")
        .tempdir_in(trials_root)
        .map_err(io(trials_root))?;
    let exe = match &opts.self_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(io(Path::new("current executable")))?,
    };
    let assets = assets_dir().map_err(io(Path::new("assets")))?;
    let trial_id = insert_row(store, exp, opts, &overrides, &params)?;
    let written = (|| -> Result<Materialised, TrialError> {
        let staged = staging.keep();
        let dir = place(&staged, trials_root, trial_id).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&staged);
        })?;
        let config_path = dir.join("config.yaml");
        let resolved_path = dir.join("resolved.json");
        std::fs::write(&config_path, text).map_err(io(&config_path))?;
        let resolved = trial_resolved_json(&params, opts.gpus);
        std::fs::write(
            &resolved_path,
            serde_json::to_string_pretty(&resolved).unwrap_or_default(),
        )
        .map_err(io(&resolved_path))?;

        let cx = TrialContext {
            exe,
            primus_root: exp.primus_root.clone(),
            config: config_path,
            resolved: resolved_path,
            trial_dir: dir.clone(),
            iters: opts.max_iters,
            gpus: opts.gpus,
            assets,
            python: crate::run::profile::PYTHON.into(),
            overrides,
            params: params.clone(),
            env: opts.env.clone(),
            process_env: load.env.clone(),
            gpus_per_node: opts.gpus_per_node,
            slurm_args: opts.launcher.submit_options(&dir),
        };
        let launch = launch_of(&cx, opts, store, trial_id)?;
        Ok(Materialised {
            trial_id,
            launch,
            dir,
            params,
            shape: run_shape(&resolved, opts),
        })
    })();
    if let Err(e) = &written {
        // The row exists: it must not stay `running`.
        let failure = Failure {
            class: FailureClass::NotLaunched,
            line: Some(format!("nothing was launched: {e}")),
        };
        store.finish_trial(
            trial_id,
            &TrialEnd::new(TrialStatus::Failed, 0.0).with_failure(Some(failure)),
        )?;
    }
    written
}

/// The trial's row, `running`, with its config's digest, overrides and resolved values.
fn insert_row(
    store: &Store,
    exp: &Experiment,
    opts: &TrialOptions,
    overrides: &[Override],
    params: &BTreeMap<String, Value>,
) -> Result<i64, TrialError> {
    Ok(store.insert_trial(&NewTrial {
        config_path: exp.path.clone(),
        config_hash: config_hash(params),
        overrides: overrides
            .iter()
            .map(|o| (o.key.clone(), o.value.to_json()))
            .collect(),
        profile: Some(opts.profile.name.clone()),
        argv: Vec::new(),
        env: Vec::new(),
        trial_dir: PathBuf::new(),
        study_id: opts.study_id,
        resolved: Some(serde_json::Value::Object(
            params
                .iter()
                .map(|(k, v)| (k.clone(), v.to_json()))
                .collect(),
        )),
    })?)
}

/// The profile's command and environment for the trial (with its identity), written into its
/// folder (`argv.json`, `env.json`) and its row.
fn launch_of(
    cx: &TrialContext,
    opts: &TrialOptions,
    store: &Store,
    trial_id: i64,
) -> Result<Launch, TrialError> {
    let dir = &cx.trial_dir;
    let mut env = opts.profile.expand_env(cx)?;
    env.extend(opts.env.iter().cloned());
    // Every process of the trial inherits its identity: the workload may use it, and a
    // process that escaped the trial's tree is still found by it.
    env.push((TRIAL_ID_ENV.into(), trial_id.to_string()));
    env.push((TRIAL_DIR_ENV.into(), dir.display().to_string()));
    let (argv, cwd) = opts.profile.expand(cx)?;
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
    store.set_trial_launch(trial_id, dir, &argv, &env)?;
    Ok(Launch {
        argv,
        env,
        cwd,
        stdout_log: dir.join("stdout.log"),
        stderr_log: dir.join("stderr.log"),
        supervisor: crate::run::supervise::supervisor_exe(opts.self_exe.as_deref()).map(|exe| {
            crate::run::supervise::Supervisor {
                exe,
                grace: opts.grace,
            }
        }),
    })
}

/// The environment variable naming the trial a process belongs to (its id).
pub const TRIAL_ID_ENV: &str = "PRIMUS_TUNE_TRIAL_ID";
/// The environment variable naming the trial's folder: unique per trial, whatever the database.
pub const TRIAL_DIR_ENV: &str = "PRIMUS_TUNE_TRIAL_DIR";

/// Moves the staged trial folder to `trials/<id>`, or `trials/<id>-2`, `-3`, ... when a folder
/// of that name exists already (another database's trial beside this one, `--db` in a used
/// workspace): a trial never takes over or fails on another's folder.
fn place(staged: &Path, trials_root: &Path, trial_id: i64) -> Result<PathBuf, TrialError> {
    let mut last = None;
    for n in 1..=100 {
        let name = match n {
            1 => trial_id.to_string(),
            n => format!("{trial_id}-{n}"),
        };
        let dir = trials_root.join(name);
        if dir.exists() {
            continue;
        }
        match std::fs::rename(staged, &dir) {
            Ok(()) => return Ok(dir),
            // Taken meanwhile by another process: try the next name.
            Err(e) => last = Some((dir, e)),
        }
    }
    let (dir, e) = last.unwrap_or_else(|| {
        (
            trials_root.join(trial_id.to_string()),
            std::io::Error::other("100 folders of this trial id exist"),
        )
    });
    Err(io(&dir)(e))
}

/// What turns step times into tokens per second, from the trial's `resolved.json` (a TorchTitan
/// trial's carries the Megatron names of its sizes). A profile that runs the proxy's
/// scaled-down shape counts the tokens of the sequence that ran, on one process.
fn run_shape(resolved: &serde_json::Value, opts: &TrialOptions) -> Option<RunShape> {
    let size = |k: &str| {
        resolved
            .get(k)
            .and_then(serde_json::Value::as_i64)
            .unwrap_or(0) as u64
    };
    let mut shape = RunShape {
        seq_length: size("seq_length"),
        global_batch_size: size("global_batch_size"),
        world_size: opts.gpus.max(1),
    };
    if opts.profile.capabilities.scaled_shape {
        shape.seq_length = crate::proxy::ProxyShape::from_resolved(resolved).seq as u64;
        shape.world_size = 1;
    }
    (shape.seq_length > 0 && shape.global_batch_size > 0).then_some(shape)
}

/// A trial whose batch job still runs, as a resumed sweep finds it: its folder and store row
/// exist, its launch is the one recorded in `argv.json` and `env.json`.
pub fn reattach(
    a: &crate::run::launch::batch::AttachTo,
    opts: &TrialOptions,
) -> Result<Materialised, TrialError> {
    let read = |name: &str| -> Result<serde_json::Value, TrialError> {
        let p = a.dir.join(name);
        let text = std::fs::read_to_string(&p).map_err(io(&p))?;
        serde_json::from_str(&text).map_err(|e| io(&p)(std::io::Error::other(e)))
    };
    let resolved = read("resolved.json")?;
    let params = crate::run::profile::read_resolved(&resolved);
    let argv: Vec<String> = serde_json::from_value(read("argv.json")?).unwrap_or_default();
    let env: Vec<(String, String)> = match read("env.json")? {
        serde_json::Value::Object(m) => m
            .into_iter()
            .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
            .collect(),
        _ => Vec::new(),
    };
    let shape = run_shape(&resolved, opts);
    Ok(Materialised {
        trial_id: a.trial_id,
        launch: Launch {
            argv,
            env,
            cwd: a.dir.clone(),
            stdout_log: a.dir.join("stdout.log"),
            stderr_log: a.dir.join("stderr.log"),
            supervisor: crate::run::supervise::supervisor_exe(opts.self_exe.as_deref()).map(
                |exe| crate::run::supervise::Supervisor {
                    exe,
                    grace: opts.grace,
                },
            ),
        },
        dir: a.dir.clone(),
        params,
        shape,
    })
}
