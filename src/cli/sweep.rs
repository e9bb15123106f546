//! `primus-tune sweep [CONFIG] --space NAME [--resume STUDY] [--budget-minutes M] [--max-trials N]`

use super::{CliError, LoadArgs, display_path, print_json};
use crate::config::{Experiment, LoadOptions};
use crate::run::profile;
use crate::run::trial::{self, TelemetrySetup, TrialOptions};
use crate::store::Store;
use crate::tune::memory::{self, Calibration};
use crate::tune::runner::TrialRunner;
use crate::tune::search::{self, SearchConfig};
use crate::tune::space::{self, Space};
use crate::tune::study::{print_record, record};
use crate::tune::types::Candidate;
use clap::Args;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// The space: deepep-cu, sync-free-stage, memory-fit, precision, one of yours, or a YAML file.
    #[arg(long)]
    pub space: Option<String>,
    /// Launch profile of the trials (proxy-cpu, proxy-torch, primus, megatron, ...).
    #[arg(long, default_value = profile::DEFAULT_PROFILE)]
    pub profile: String,
    /// Name of the new study (default: the space and the time).
    #[arg(long)]
    pub name: Option<String>,
    /// Continue this study after a crash or Ctrl-C: finished trials are not run again.
    #[arg(long, value_name = "STUDY")]
    pub resume: Option<String>,
    /// Stop launching trials after this many minutes of GPU time (wall time × GPUs).
    #[arg(long)]
    pub budget_minutes: Option<f64>,
    /// Stop launching after this many trials.
    #[arg(long)]
    pub max_trials: Option<usize>,
    /// Iterations of the first, shortest trials.
    #[arg(long, default_value_t = 12)]
    pub first_iters: u64,
    /// Longest trial.
    #[arg(long, default_value_t = 60)]
    pub max_iters: u64,
    /// GPU memory per GPU in GiB (default: what telemetry reports for GPU 0).
    #[arg(long)]
    pub capacity_gib: Option<f64>,
    /// Share of the memory kept free when pruning by prediction.
    #[arg(long, default_value_t = 0.1)]
    pub headroom: f64,
    /// GPUs (world size) of each trial (default: as `run`).
    #[arg(long)]
    pub gpus: Option<u64>,
    /// Print the study as JSON.
    #[arg(long)]
    pub json: bool,
}

fn gib(b: f64) -> f64 {
    b / (1u64 << 30) as f64
}

/// A candidate's resolved parameters (the experiment with its overrides), for the memory model.
fn params_of(
    exp: &Experiment,
    opts: &LoadOptions,
    c: &Candidate,
) -> Option<BTreeMap<String, crate::config::value::Value>> {
    let mut with = opts.clone();
    with.overrides.extend(space::as_overrides(&c.overrides));
    let e = Experiment::load(&exp.path, &with).ok()?;
    Some(
        e.main_module()
            .params
            .leaves()
            .into_iter()
            .map(|(k, l)| (k, l.value.clone()))
            .collect(),
    )
}

/// Calibration points from stored trials of this experiment: the model's prediction for the
/// trial's resolved config against the peak it measured.
fn calibration_points(store: &Store, world: u64) -> Vec<(f64, f64)> {
    store
        .list_trials(&crate::store::TrialFilter::all())
        .unwrap_or_default()
        .iter()
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

fn capacity(a: &SweepArgs) -> Option<f64> {
    if let Some(g) = a.capacity_gib {
        return Some(g * (1u64 << 30) as f64);
    }
    let (b, _) = crate::telemetry::select::open("auto", &Default::default()).ok()?;
    b?.gpus()
        .first()
        .and_then(|g| g.vram_total_bytes)
        .map(|b| b as f64)
}

/// SIGINT, SIGTERM and SIGHUP stop the trial in flight and the sweep.
fn cancel_on_signals() -> tokio::sync::watch::Receiver<bool> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            crate::run::process::stop_signal().await;
            let _ = tx.send(true);
        });
    });
    rx
}

pub fn run(a: &SweepArgs) -> Result<ExitCode, CliError> {
    let (exp, opts) = a.load.load()?;
    let db = trial::workspace_dir(&exp.path).join("trials.db");
    let store = Store::open(&db).map_err(|e| CliError::Usage(e.to_string()))?;
    // The study: resumed (its space comes from it) or new.
    let (study_id, study_name, space) = match &a.resume {
        Some(name) => {
            let s = store
                .study_by_name(name)
                .map_err(|e| CliError::Usage(e.to_string()))?
                .ok_or_else(|| {
                    CliError::Usage(format!("no study `{name}` in {}", display_path(&db)))
                })?;
            let space: Space = s
                .space
                .clone()
                .and_then(|v| serde_json::from_value(v).ok())
                .ok_or_else(|| CliError::Usage(format!("study `{name}` has no space recorded")))?;
            (s.id, name.clone(), space)
        }
        None => {
            let name = a.space.as_deref().ok_or_else(|| {
                CliError::Usage("--space NAME is needed (or --resume STUDY)".into())
            })?;
            let space = space::find(name, space::user_dir().as_deref()).map_err(CliError::Usage)?;
            let study = a.name.clone().unwrap_or_else(|| {
                format!(
                    "{}-{}",
                    space.name,
                    crate::store::now_rfc3339().replace([':', '-', '.'], "")
                )
            });
            let id = store
                .create_study(&study, &exp.path, &space.name)
                .map_err(|e| CliError::Usage(e.to_string()))?;
            store
                .set_study_space(id, serde_json::to_value(&space).ok().as_ref())
                .map_err(|e| CliError::Usage(e.to_string()))?;
            (id, study, space)
        }
    };
    if let Some(why) = space.not_applicable(&exp) {
        return Err(CliError::Usage(format!(
            "{}: {why}",
            display_path(&exp.path)
        )));
    }
    let prof = profile::find(&a.profile, profile::user_dir().as_deref())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let gpus = a
        .gpus
        .unwrap_or_else(|| trial::default_gpus(&opts.env, &prof.name));
    let cands = space.candidates();
    let legal = space::legality(&exp, &opts, &cands);
    let legal_cands: Vec<Candidate> = cands
        .iter()
        .zip(&legal)
        .filter(|(_, l)| l.is_ok())
        .map(|(c, _)| c.clone())
        .collect();
    let capacity = capacity(a);
    let points = calibration_points(&store, gpus);
    let cal = Calibration::fit(&points);
    let predicted: BTreeMap<usize, f64> = cands
        .iter()
        .filter_map(|c| {
            let p = params_of(&exp, &opts, c)?;
            let m = memory::estimate(&p, gpus).ok()?;
            Some((c.id, cal.predict(m.total_bytes)))
        })
        .collect();
    if !a.json {
        eprintln!(
            "study {study_name}: space {} · {} candidates, {} legal · profile {} · {} GPU(s){}",
            space.name,
            cands.len(),
            legal_cands.len(),
            prof.name,
            gpus,
            capacity.map_or(String::new(), |c| format!(" · {:.1} GiB each", gib(c)))
        );
        eprintln!(
            "memory model: {}",
            if points.is_empty() {
                "not calibrated yet (no stored trial with a peak)".to_string()
            } else {
                format!(
                    "calibrated on {} trial(s): measured ≈ {:.3} × model + {:.2} GiB",
                    points.len(),
                    cal.scale,
                    gib(cal.offset_bytes)
                )
            }
        );
    }
    let base = TrialOptions {
        profile: prof.clone(),
        // The command line's `--set` values apply to every trial (the candidate's on top).
        overrides: opts.overrides.clone(),
        env: a.load.env_pairs()?,
        max_iters: a.first_iters,
        max_seconds: None,
        ci_target: 0.01,
        hang_seconds: 120.0,
        first_iteration_seconds: 600.0,
        grace: Duration::from_secs(10),
        gpus,
        study_id: Some(study_id),
        telemetry: Some(TelemetrySetup::default()),
    };
    let cancel = cancel_on_signals();
    let json = a.json;
    let mut runner = TrialRunner::new(
        &exp,
        &opts,
        &store,
        base,
        study_id,
        cancel,
        Box::new(move |line: &str| {
            if !json {
                eprintln!("{line}");
            }
        }),
    )?;
    let cfg = SearchConfig {
        first_iters: a.first_iters,
        max_iters: a.max_iters.max(a.first_iters),
        max_trials: a.max_trials,
        budget_gpu_seconds: a.budget_minutes.map(|m| m * 60.0),
        capacity_bytes: capacity,
        headroom: a.headroom,
        ..SearchConfig::default()
    };
    let result = search::search(
        &space.knobs,
        &legal_cands,
        &mut runner,
        &cfg,
        &|c: &Candidate| predicted.get(&c.id).copied(),
    );
    if runner.cancelled() {
        eprintln!(
            "sweep stopped; finished trials are stored. Continue with: primus-tune sweep {} --resume {study_name}",
            display_path(&exp.path)
        );
        return Ok(ExitCode::from(3));
    }
    let record = record(
        &space, &exp.path, &prof.name, gpus, capacity, &cands, &legal, &predicted, &result,
    );
    store
        .set_study_notes(study_id, serde_json::to_string(&record).ok().as_deref())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if a.json {
        print_json(&serde_json::json!({"study": study_name, "id": study_id, "record": record}));
    } else {
        print_record(&study_name, &record);
        if runner.replayed > 0 {
            println!(
                "(resumed: {} finished trial(s) reused, {} launched)",
                runner.replayed, runner.launched
            );
        }
        println!(
            "next: primus-tune recommend {} --study {study_name} [--apply]",
            display_path(&exp.path)
        );
    }
    Ok(if result.pick.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
