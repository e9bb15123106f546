//! What a sweep is set up with before its study runs: the trials' plan and what their
//! profile can measure, the memory model's forecasts calibrated on stored peaks, the GPU the
//! trials run on, and the command that resumes a study.

use super::request::SweepRequest;
use crate::app::{AppError, Session};
use crate::config::{Experiment, LoadOptions};
use crate::domain::study::{Candidate, StudyRecord};
use crate::run::profile;
use crate::store::{Store, WorkspaceOrigin};
use crate::tune::memory::{self, Calibration};
use crate::tune::search;
use crate::tune::space::{self, Space};
use std::collections::BTreeMap;

/// How a sweep ended.
#[derive(Debug, Clone)]
pub struct SweepOutcome {
    pub study: String,
    pub id: i64,
    /// None when it was stopped before the search ended (resume it).
    pub record: Option<StudyRecord>,
    pub replayed: usize,
    pub launched: usize,
    /// The command that continues the study, as the user would paste it.
    pub resume: String,
    /// What its trials' time costs: `GPU` (seconds × ranks) or `CPU` (a stand-in's seconds ×
    /// processes).
    pub cost_unit: &'static str,
}

pub(super) fn gib(b: f64) -> f64 {
    b / (1u64 << 30) as f64
}

/// A value as the shell reads it (one quoting for every printed command).
pub use crate::util::shell::quote as shell_word;

/// The command that resumes `study` of this session: the experiment, the workspace when it is
/// not the default one, the profile and GPUs the study ran with.
pub fn resume_command(session: &Session, study: &str, req: &SweepRequest) -> String {
    let mut words = vec![
        "primus-tune".to_string(),
        "sweep".into(),
        shell_word(&session.display()),
        "--resume".into(),
        shell_word(study),
    ];
    if let Some(p) = &req.trial.profile {
        words.extend(["--profile".into(), shell_word(p)]);
    }
    // The study keeps its budget (a resume reuses it); written out, the line is whole on its own.
    if let (Some(f), Some(m)) = (req.first_iters, req.max_iters) {
        words.extend([
            "--first-iters".into(),
            f.to_string(),
            "--max-iters".into(),
            m.to_string(),
        ]);
    }
    if let Some(m) = req.budget_minutes {
        words.extend(["--budget-minutes".into(), m.to_string()]);
    }
    if let Some(n) = req.max_trials {
        words.extend(["--max-trials".into(), n.to_string()]);
    }
    if let Some(g) = req.trial.gpus {
        words.extend(["--gpus".into(), g.to_string()]);
    }
    if req.trial.gemm_tuned {
        words.push("--gemm-tuned".into());
    }
    if !req.carried_effects {
        words.push("--no-carried-effects".into());
    }
    if !req.batch_rule {
        words.push("--no-batch-rule".into());
    }
    if req.allow_unmodeled {
        words.push("--allow-unmodeled".into());
    }
    let sl = &req.trial.slurm;
    if sl.enabled {
        words.push("--slurm".into());
        let s = &sl.settings;
        for (flag, v) in [
            ("--nodes", s.nodes.map(|n| n.to_string())),
            ("--gpus-per-node", s.gpus_per_node.map(|n| n.to_string())),
            ("--partition", s.partition.clone()),
            ("--account", s.account.clone()),
            ("--time", s.time.clone()),
        ] {
            if let Some(v) = v {
                words.extend([flag.into(), shell_word(&v)]);
            }
        }
        for a in &s.sbatch_args {
            words.push(shell_word(&format!("--sbatch-arg={a}")));
        }
        if sl.requeue {
            words.push("--requeue".into());
        }
        if let Some(p) = sl.max_pending {
            words.extend([
                "--max-pending-seconds".into(),
                format!("{}", p.as_secs_f64()),
            ]);
        }
        if req.parallel > 1 {
            words.extend(["--parallel".into(), req.parallel.to_string()]);
        }
    }
    if session.workspace.origin == WorkspaceOrigin::Chosen {
        let db = session.workspace.db.clone();
        if db == session.workspace.root.join(crate::store::WORKSPACE_DB) {
            words.extend([
                "--workspace".into(),
                shell_word(&crate::util::paths::display_path(&session.workspace.root)),
            ]);
        } else {
            words.extend([
                "--db".into(),
                shell_word(&crate::util::paths::display_path(&db)),
            ]);
        }
    }
    words.join(" ")
}

/// A resolved config's flag values.
pub(super) type Values = BTreeMap<String, crate::domain::value::Value>;

/// A candidate's resolved parameters (the experiment with its overrides): what the memory model
/// and the pipeline stages ([`pipeline_stages`]) read.
pub(super) fn params_of(exp: &Experiment, opts: &LoadOptions, c: &Candidate) -> Option<Values> {
    let mut with = opts.clone();
    with.overrides.extend(space::as_overrides(&c.overrides));
    let e = Experiment::load(&exp.path, &with).ok()?;
    Some(e.main_module().values())
}

/// The pipeline-parallel stages a candidate's resolved config ([`params_of`]) has (Megatron-LM's
/// `pipeline_model_parallel_size`, TorchTitan's `parallelism.pipeline_parallel_degree`; both
/// default to one stage); `None` when it holds something else there. The search's batch rule
/// holds only in one stage.
pub(super) fn pipeline_stages(values: &Values) -> Option<u64> {
    let set: Vec<&crate::domain::value::Value> = search::prior::batch::STAGE_KEYS
        .iter()
        .filter_map(|k| values.get(*k).filter(|v| !v.is_null()))
        .collect();
    match set.as_slice() {
        [] => Some(1),
        [v] => v.as_i64().and_then(|n| u64::try_from(n).ok()),
        _ => None,
    }
}

/// The memory model's peak (uncalibrated, bytes) for `exp` with `opts` and each of the given
/// overrides on top (a `null` value leaves the key as the config has it), on `world` GPUs:
/// what a replay table's `predicted_bytes` holds. `None` for a config the model cannot read.
pub fn model_peaks(
    exp: &Experiment,
    opts: &LoadOptions,
    overrides: &[crate::domain::study::Overrides],
    world: u64,
) -> Vec<Option<f64>> {
    overrides
        .iter()
        .map(|o| {
            let set: crate::domain::study::Overrides = o
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let c = Candidate {
                id: 0,
                overrides: set,
                ranks: Vec::new(),
                baseline: false,
            };
            let p = params_of(exp, opts, &c)?;
            Some(memory::estimate(&p, world).ok()?.total_bytes)
        })
        .collect()
}

/// Calibration points from stored trials of this experiment on this profile: the model's
/// prediction for the trial's resolved config against the peak it measured. Only completed
/// trials count: a failed, OOM or rejected trial's "peak" is whatever it reached before it
/// ended, not the config's. Another profile's peaks are another workload's (a proxy's are its
/// stand-in's), so they never calibrate this one.
fn calibration_points(
    store: &Store,
    exp: &std::path::Path,
    profile: &str,
    world: u64,
) -> Vec<(f64, f64)> {
    store
        .list_trials(&crate::store::TrialFilter::all().status(crate::store::TrialStatus::Completed))
        .unwrap_or_default()
        .iter()
        .filter(|t| t.failure.is_none() && t.config_path == exp)
        .filter(|t| t.profile.as_deref() == Some(profile))
        .filter_map(|t| {
            let measured = t.peak_mem_gib? * (1u64 << 30) as f64;
            let text = std::fs::read_to_string(t.trial_dir.join("resolved.json")).ok()?;
            let j: serde_json::Value = serde_json::from_str(&text).ok()?;
            let params = profile::read_resolved(&j);
            let model = memory::estimate(&params, world).ok()?.total_bytes;
            Some((model, measured))
        })
        .collect()
}

/// The GPU the trials run on, as the session's telemetry backend reports GPU 0: its name and
/// memory (the memory as given when given).
pub(super) fn gpu_facts(
    session: &Session,
    gib_given: Option<f64>,
) -> (Option<f64>, Option<String>) {
    let t = session.telemetry.clone().unwrap_or_default();
    let gpu = crate::telemetry::select::open(&t.backend, &t.roots)
        .ok()
        .and_then(|(b, _)| b)
        .and_then(|b| b.gpus().first().cloned());
    let capacity = match gib_given {
        Some(g) => Some(g * (1u64 << 30) as f64),
        None => gpu
            .as_ref()
            .and_then(|g| g.vram_total_bytes)
            .map(|b| b as f64),
    };
    (capacity, gpu.map(|g| g.name))
}

/// The flags of a space (`flags`; `memory_flags`: those of its knobs that move memory) that a
/// profile's measurements cannot rank: those it does not model, and for a CPU stand-in, those
/// that move memory (which candidate fits a GPU is not a stand-in's to say: its peaks are the
/// host's).
pub fn unmodeled(
    caps: &crate::run::capabilities::Capabilities,
    flags: &[String],
    memory_flags: &[String],
) -> Vec<String> {
    let mut out = caps.unmodeled(flags.iter().map(String::as_str));
    if caps.stand_in {
        out.extend(memory_flags.iter().cloned());
    }
    out.sort();
    out.dedup();
    out
}

/// What the sweep's trials are set up with: their plan, the options every trial starts from,
/// the experiment as their job resolves it, and what the profile does not model.
pub(super) struct TrialSetup {
    pub(super) plan: crate::app::launch::LaunchPlan,
    pub(super) base: crate::run::trial::TrialOptions,
    /// The session's load options as the trials' job sees them (environment and world).
    pub(super) job: LoadOptions,
    pub(super) exp: Experiment,
    pub(super) unmodeled: Vec<String>,
}

/// Plans the sweep's trials (what they cannot measure is [`measurable`]'s to refuse).
pub(super) fn set_up(
    session: &Session,
    exp: Experiment,
    req: &SweepRequest,
) -> Result<TrialSetup, AppError> {
    // Every trial: the request's defaults, the command line's `--set` values (the candidate's
    // on top), the session's telemetry.
    let mut treq = req.trial.clone();
    treq.overrides
        .extend(session.load.overrides.iter().cloned());
    treq.max_iters = req.first_iters;
    let plan = crate::app::trial::plan(session, &exp, &treq)?;
    let base = crate::app::trial::options(session, &plan, &treq);
    // From here on, the experiment as the trials' workload resolves it: with the profile's
    // environment and the trials' own (a profile's `PRIMUS_PP` sets the pipeline the batch
    // rule, the memory model and the current settings see), at the plan's world.
    let job = plan.job_load(&session.load);
    let exp = if job.env == session.load.env {
        exp
    } else {
        Experiment::load(&exp.path, &job)?
    };
    if req.parallel > 1 && plan.launcher.batch().is_none() {
        return Err(AppError::Usage(
            "--parallel runs trials as concurrent Slurm jobs: it needs --slurm (on this node, \
             trials would share its GPUs and measure each other)"
                .into(),
        ));
    }
    Ok(TrialSetup {
        plan,
        base,
        job,
        exp,
        unmodeled: Vec::new(),
    })
}

/// Refuses a space whose flags the trials' profile cannot set or measure (unless allowed),
/// and notes the flags it does not model.
pub(super) fn measurable(
    session: &Session,
    t: &mut TrialSetup,
    space: &Space,
    req: &SweepRequest,
) -> Result<(), AppError> {
    let plan = &t.plan;
    crate::app::trial::refuse_settings(
        &plan.profile,
        space.flags().iter().map(String::as_str),
        session,
    )?;
    let caps = &plan.profile.capabilities;
    let memory_flags = space.memory_flags();
    let unmodeled = unmodeled(caps, &space.flags(), &memory_flags);
    if !unmodeled.is_empty() && !req.allow_unmodeled {
        return Err(AppError::Unmodeled {
            profile: plan.profile.name.clone(),
            space: space.name.clone(),
            memory: caps.stand_in && unmodeled.iter().any(|f| memory_flags.contains(f)),
            flags: unmodeled,
            stand_in: caps.stand_in,
        });
    }
    t.unmodeled = unmodeled;
    Ok(())
}

/// What the memory model says before any trial: its calibration on stored trials and each
/// candidate's forecast peak (none for a proxy), and each candidate's resolved config.
pub(super) struct Forecasts {
    pub(super) points: Vec<(f64, f64)>,
    pub(super) cal: Calibration,
    pub(super) params: BTreeMap<usize, Values>,
    pub(super) predicted: BTreeMap<usize, f64>,
    /// Why the memory model is not used at all.
    pub(super) off: Option<String>,
}

pub(super) fn forecasts(
    store: &Store,
    t: &TrialSetup,
    cands: &[Candidate],
    batch_rule: bool,
) -> Forecasts {
    let caps = &t.plan.profile.capabilities;
    let prof = &t.plan.profile.name;
    let gpus = t.base.gpus;
    // A proxy's peak is its stand-in's or its scaled-down shape's, not the config's: the
    // memory model neither calibrates on it nor prunes with it.
    let off = (caps.stand_in || caps.scaled_shape).then(|| {
        format!(
            "{prof} runs a proxy: its peaks are the proxy's, not the config's; no candidate is \
             ruled out on a memory forecast, and none is said to fit"
        )
    });
    let points = match off {
        Some(_) => Vec::new(),
        None => calibration_points(store, &t.exp.path, prof, gpus),
    };
    let cal = Calibration::fit(&points);
    // Each candidate's resolved config, loaded once: the memory forecast and the pipeline
    // stages (the batch rule) both read it.
    let params: BTreeMap<usize, Values> = cands
        .iter()
        .filter(|_| off.is_none() || batch_rule)
        .filter_map(|c| Some((c.id, params_of(&t.exp, &t.job, c)?)))
        .collect();
    let predicted: BTreeMap<usize, f64> = params
        .iter()
        .filter(|_| off.is_none())
        .filter_map(|(&id, p)| {
            let m = memory::estimate(p, gpus).ok()?;
            Some((id, cal.predict(m.total_bytes)))
        })
        .collect();
    Forecasts {
        points,
        cal,
        params,
        predicted,
        off,
    }
}
