//! Runs a stage's plan through the run engine: its folders, a study that groups its trials,
//! stage 2's earlier result set aside, stage 3's baseline then tuned trial and their
//! comparison. Shared by `gemm-tune stage` and the TUI.

use super::stage::{self, StagePlan};
use super::status::{Comparison, TuneLayout};
use crate::config::{Experiment, LoadOptions};
use crate::domain::trial::TrialResult;
use crate::run::profile::Profile;
use crate::run::trial::{self, TrialError, TrialEvent, TrialOptions};
use crate::store::Store;
use std::path::{Path, PathBuf};
use tokio::sync::{mpsc, watch};

/// The study kind of stage `n`'s trials.
pub fn study_kind(n: u8) -> String {
    format!("gemm-stage-{n}")
}

/// What a stage did.
#[derive(Debug, Clone)]
pub struct StageRun {
    pub stage: u8,
    pub study_id: i64,
    /// In order: stage 3's baseline first.
    pub trials: Vec<TrialResult>,
    /// Stage 3 with both trials complete.
    pub comparison: Option<Comparison>,
    /// Stage 2: where the earlier result file was moved.
    pub set_aside: Option<PathBuf>,
}

impl StageRun {
    pub fn completed(&self) -> bool {
        !self.trials.is_empty()
            && self
                .trials
                .iter()
                .all(|t| t.status == crate::domain::trial::TrialStatus::Completed)
    }
}

/// The plan applied to a trial's options: its environment, length and (stage 2) command.
/// `iters_given`: the user chose the length, so stage 1's short default does not apply.
pub fn apply_plan(
    topts: &mut TrialOptions,
    plan: &StagePlan,
    primus_root: &Path,
    iters_given: bool,
) {
    topts.env.extend(plan.env.iter().cloned());
    if let (Some(n), false) = (plan.iters, iters_given) {
        topts.max_iters = n;
    }
    if !plan.trains {
        topts.trains = false;
        // Offline tuning takes minutes to hours: a day unless the caller set a limit.
        topts.max_seconds.get_or_insert(86_400.0);
    }
    if let Some(cmd) = &plan.command {
        topts.profile = Profile {
            slurm: None,
            name: format!("{}+offline-tune", topts.profile.name),
            description: "Primus' offline_tune_gemm.py (HipBLASLt stage 2)".into(),
            argv: cmd.clone(),
            overrides: topts.profile.overrides,
            workdir: Some(primus_root.display().to_string()),
            env: topts.profile.env.clone(),
            capabilities: crate::run::capabilities::Capabilities {
                trains: false,
                ..topts.profile.capabilities.clone()
            },
            source: "gemm-tune stage 2".into(),
            declares_capabilities: true,
        };
    }
}

fn store_err(e: crate::store::StoreError) -> TrialError {
    TrialError::Store(e)
}

/// The trial a stage runs, as the user asked for it.
#[derive(Debug, Clone, Copy)]
pub struct StageTrial<'a> {
    pub exp: &'a Experiment,
    pub load: &'a LoadOptions,
    /// Profile, GPUs, telemetry, `--env`.
    pub base: &'a TrialOptions,
    /// Where the stage's files go.
    pub layout: &'a TuneLayout,
    /// The user chose the length, so stage 1's short default does not apply.
    pub iters_given: bool,
}

/// Runs stage `plan.stage` of the trial `asked` for (`plan` from [`stage::plan`]).
pub async fn run_stage(
    asked: StageTrial<'_>,
    store: &Store,
    plan: &StagePlan,
    events: mpsc::Sender<TrialEvent>,
    cancel: watch::Receiver<bool>,
) -> Result<StageRun, TrialError> {
    let StageTrial {
        exp,
        load,
        base,
        layout,
        iters_given,
    } = asked;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| TrialError::Io { path, source }
    };
    for d in &plan.mkdirs {
        std::fs::create_dir_all(d).map_err(io(d))?;
    }
    let study_id = store
        .create_study(
            &format!(
                "gemm-{}-stage{}-{}",
                layout.model_tag,
                plan.stage,
                crate::store::now_rfc3339()
            ),
            &exp.path,
            &study_kind(plan.stage),
        )
        .map_err(store_err)?;
    let mut topts = base.clone();
    topts.study_id = Some(study_id);
    apply_plan(&mut topts, plan, &exp.primus_root, iters_given);
    let mut run = StageRun {
        stage: plan.stage,
        study_id,
        trials: Vec::new(),
        comparison: None,
        set_aside: None,
    };
    match plan.stage {
        2 => {
            run.set_aside = stage::set_aside_old_result(&layout.result_file)
                .map_err(io(&layout.result_file))?;
            let notes = serde_json::json!({"shapes": plan.shapes, "gpus": topts.gpus});
            store
                .set_study_notes(study_id, Some(&notes.to_string()))
                .map_err(store_err)?;
            run.trials
                .push(trial::run_trial(exp, load, store, &topts, events, cancel).await?);
        }
        3 => {
            let tuned_env = topts.env.clone();
            let mut base_env = tuned_env.clone();
            base_env.retain(|(k, _)| !plan.env.iter().any(|(pk, _)| pk == k));
            base_env.extend(plan.baseline_env.clone().unwrap_or_default());
            topts.env = base_env;
            let baseline =
                trial::run_trial(exp, load, store, &topts, events.clone(), cancel.clone()).await?;
            let go_on = baseline.status == crate::domain::trial::TrialStatus::Completed
                && !*cancel.borrow();
            run.trials.push(baseline);
            if go_on {
                topts.env = tuned_env;
                run.trials
                    .push(trial::run_trial(exp, load, store, &topts, events, cancel).await?);
            }
            let notes = serde_json::json!({
                "baseline": run.trials.first().and_then(|t| t.trial_id),
                "tuned": run.trials.get(1).and_then(|t| t.trial_id),
                "override_file": plan.override_file,
            });
            store
                .set_study_notes(study_id, Some(&notes.to_string()))
                .map_err(store_err)?;
            if run.completed() {
                run.comparison = study_comparison(store, study_id);
            }
        }
        _ => {
            run.trials
                .push(trial::run_trial(exp, load, store, &topts, events, cancel).await?);
        }
    }
    Ok(run)
}

/// The comparison a stage-3 study recorded (its notes name the two trials).
pub fn study_comparison(store: &Store, study_id: i64) -> Option<Comparison> {
    let s = store.study(study_id).ok()??;
    let notes: serde_json::Value = serde_json::from_str(s.notes.as_deref()?).ok()?;
    let b = store.trial(notes["baseline"].as_i64()?).ok()??;
    let t = store.trial(notes["tuned"].as_i64()?).ok()??;
    let (bm, tm) = (b.median_step_ms?, t.median_step_ms?);
    let (change, change_ci) =
        stage::compare(bm, b.ci95_ms.unwrap_or(0.0), tm, t.ci95_ms.unwrap_or(0.0));
    Some(Comparison {
        baseline_trial: b.id,
        tuned_trial: t.id,
        baseline_ms: bm,
        tuned_ms: tm,
        change,
        change_ci,
    })
}

/// The studies of stage `n` of this experiment, newest first.
fn stage_studies(store: &Store, experiment: &Path, n: u8) -> Vec<crate::store::StudyRow> {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let want = canon(experiment);
    let mut v: Vec<_> = store
        .list_studies()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.kind == study_kind(n) && canon(&s.config_path) == want)
        .collect();
    v.reverse();
    v
}

/// The latest finished stage-3 comparison of this experiment in the store.
pub fn latest_comparison(store: &Store, experiment: &Path) -> Option<Comparison> {
    stage_studies(store, experiment, 3)
        .iter()
        .find_map(|s| study_comparison(store, s.id))
}

/// Seconds per shape per GPU that the last completed stage 2 of this experiment took.
pub fn measured_rate(store: &Store, experiment: &Path) -> Option<f64> {
    stage_studies(store, experiment, 2).iter().find_map(|s| {
        let notes: serde_json::Value = serde_json::from_str(s.notes.as_deref()?).ok()?;
        let shapes = notes["shapes"].as_f64()?;
        let gpus = notes["gpus"].as_f64()?;
        let trials = store
            .list_trials(&crate::store::TrialFilter::all().study(s.id))
            .ok()?;
        let t = trials
            .iter()
            .find(|t| t.status == crate::domain::trial::TrialStatus::Completed)?;
        (shapes > 0.0).then(|| t.wall_s.unwrap_or(0.0) * gpus / shapes)
    })
}
