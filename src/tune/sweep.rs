//! One sweep, start to end: the study (new or resumed), legality, the memory model's predictions
//! (calibrated on stored trials), the search with real trials, and the study's record. Shared by
//! `primus-tune sweep` and the TUI's Sweep screen.

use super::memory::{self, Calibration};
use super::runner::{Progress, TrialRunner};
use super::search::{self, SearchConfig};
use super::space::{self, Space};
use super::study::record;
use crate::config::{Experiment, LoadOptions};
use crate::domain::study::Candidate;
use crate::domain::study::StudyRecord;
use crate::run::profile;
use crate::run::trial::{self, TelemetrySetup, TrialOptions};
use crate::store::Store;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;

/// What to sweep and how.
#[derive(Debug, Clone)]
pub struct SweepRequest {
    /// A new study of this space (a name or a YAML file), or `resume` one.
    pub space: Option<String>,
    pub name: Option<String>,
    pub resume: Option<String>,
    pub profile: String,
    pub gpus: Option<u64>,
    pub first_iters: u64,
    pub max_iters: u64,
    pub budget_minutes: Option<f64>,
    pub max_trials: Option<usize>,
    pub capacity_gib: Option<f64>,
    pub headroom: f64,
    /// Extra environment of the trials.
    pub env: Vec<(String, String)>,
}

impl Default for SweepRequest {
    fn default() -> Self {
        SweepRequest {
            space: None,
            name: None,
            resume: None,
            profile: profile::DEFAULT_PROFILE.into(),
            gpus: None,
            first_iters: 12,
            max_iters: 60,
            budget_minutes: None,
            max_trials: None,
            capacity_gib: None,
            headroom: 0.1,
            env: Vec::new(),
        }
    }
}

/// How a sweep ended.
#[derive(Debug, Clone)]
pub struct SweepOutcome {
    pub study: String,
    pub id: i64,
    /// None when it was stopped before the search ended (resume it).
    pub record: Option<StudyRecord>,
    pub replayed: usize,
    pub launched: usize,
}

/// Why a sweep could not start, in words (bad space, unknown study, store error, ...).
pub type SweepError = String;

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
    Some(e.main_module().values())
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

fn capacity(gib_given: Option<f64>) -> Option<f64> {
    if let Some(g) = gib_given {
        return Some(g * (1u64 << 30) as f64);
    }
    let (b, _) = crate::telemetry::select::open("auto", &Default::default()).ok()?;
    b?.gpus()
        .first()
        .and_then(|g| g.vram_total_bytes)
        .map(|b| b as f64)
}

/// Run a sweep. `progress` gets one line per step (study, model, each trial); `cancel` stops the
/// trial in flight and the sweep (the study can be resumed).
pub fn run_sweep(
    exp: &Experiment,
    opts: &LoadOptions,
    req: &SweepRequest,
    cancel: watch::Receiver<bool>,
    mut progress: Progress,
) -> Result<SweepOutcome, SweepError> {
    let db = trial::workspace_dir(&exp.path).join("trials.db");
    let store = Store::open(&db).map_err(|e| e.to_string())?;
    let (study_id, study_name, space) = match &req.resume {
        Some(name) => {
            let s = store
                .study_by_name(name)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| {
                    format!(
                        "no study `{name}` in {}",
                        crate::util::paths::display_path(&db)
                    )
                })?;
            let space: Space = s
                .space
                .clone()
                .and_then(|v| serde_json::from_value(v).ok())
                .ok_or_else(|| format!("study `{name}` has no space recorded"))?;
            (s.id, name.clone(), space)
        }
        None => {
            let name = req
                .space
                .as_deref()
                .ok_or("a space is needed (or a study to resume)")?;
            let space = space::find(name, space::user_dir().as_deref())?;
            if let Some(why) = space.not_applicable(exp) {
                return Err(format!(
                    "{}: {why}",
                    crate::util::paths::display_path(&exp.path)
                ));
            }
            let study = req.name.clone().unwrap_or_else(|| {
                format!(
                    "{}-{}",
                    space.name,
                    crate::store::now_rfc3339().replace([':', '-', '.'], "")
                )
            });
            let id = store
                .create_study(&study, &exp.path, &space.name)
                .map_err(|e| e.to_string())?;
            store
                .set_study_space(id, serde_json::to_value(&space).ok().as_ref())
                .map_err(|e| e.to_string())?;
            (id, study, space)
        }
    };
    if let Some(why) = space.not_applicable(exp) {
        return Err(format!(
            "{}: {why}",
            crate::util::paths::display_path(&exp.path)
        ));
    }
    let prof =
        profile::find(&req.profile, profile::user_dir().as_deref()).map_err(|e| e.to_string())?;
    let gpus = req
        .gpus
        .unwrap_or_else(|| trial::default_gpus(&opts.env, &prof.capabilities));
    let cands = space.candidates();
    let legal = space::legality(exp, opts, &cands);
    let legal_cands: Vec<Candidate> = cands
        .iter()
        .zip(&legal)
        .filter(|(_, l)| l.is_ok())
        .map(|(c, _)| c.clone())
        .collect();
    let capacity = capacity(req.capacity_gib);
    let points = calibration_points(&store, gpus);
    let cal = Calibration::fit(&points);
    let predicted: BTreeMap<usize, f64> = cands
        .iter()
        .filter_map(|c| {
            let p = params_of(exp, opts, c)?;
            let m = memory::estimate(&p, gpus).ok()?;
            Some((c.id, cal.predict(m.total_bytes)))
        })
        .collect();
    progress(&format!(
        "study {study_name}: space {} · {} candidates, {} legal · profile {} · {} GPU(s){}",
        space.name,
        cands.len(),
        legal_cands.len(),
        prof.name,
        gpus,
        capacity.map_or(String::new(), |c| format!(" · {:.1} GiB each", gib(c)))
    ));
    progress(&format!(
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
    ));
    let base = TrialOptions {
        profile: prof.clone(),
        // The command line's `--set` values apply to every trial (the candidate's on top).
        overrides: opts.overrides.clone(),
        env: req.env.clone(),
        max_iters: req.first_iters,
        max_seconds: None,
        ci_target: 0.01,
        hang_seconds: 120.0,
        first_iteration_seconds: 600.0,
        grace: Duration::from_secs(10),
        gpus,
        study_id: Some(study_id),
        trials_dir: trial::workspace_dir(&exp.path).join("trials"),
        telemetry: Some(TelemetrySetup::default()),
        trains: true,
    };
    let mut runner = TrialRunner::new(exp, opts, &store, base, study_id, cancel, progress)
        .map_err(|e| e.to_string())?;
    let cfg = SearchConfig {
        first_iters: req.first_iters,
        max_iters: req.max_iters.max(req.first_iters),
        max_trials: req.max_trials,
        budget_gpu_seconds: req.budget_minutes.map(|m| m * 60.0),
        capacity_bytes: capacity,
        headroom: req.headroom,
        predictions_calibrated: !points.is_empty(),
        ..SearchConfig::default()
    };
    let result = search::search(
        &space.knobs,
        &legal_cands,
        &mut runner,
        &cfg,
        &|c: &Candidate| predicted.get(&c.id).copied(),
    );
    let (replayed, launched) = (runner.replayed, runner.launched);
    if runner.cancelled() {
        return Ok(SweepOutcome {
            study: study_name,
            id: study_id,
            record: None,
            replayed,
            launched,
        });
    }
    if result.calibration.points > 0 {
        let c = &result.calibration;
        runner.say(&format!(
            "memory model recalibrated on {} measured peak(s) of this study: measured ≈ {:.3} × model {:+.2} GiB (each candidate's prediction is the one in force before its first trial)",
            c.points,
            c.scale,
            gib(c.offset_bytes)
        ));
    }
    let rec = record(
        &space,
        &exp.path,
        &prof.name,
        gpus,
        capacity,
        &cands,
        &legal,
        &result.predicted_bytes,
        &result,
    );
    store
        .set_study_notes(study_id, serde_json::to_string(&rec).ok().as_deref())
        .map_err(|e| e.to_string())?;
    Ok(SweepOutcome {
        study: study_name,
        id: study_id,
        record: Some(rec),
        replayed,
        launched,
    })
}
