//! The experiment's trials as the lists show them: each with the experiment it ran and what it
//! ran that the experiment does not say now (the difference `a` applies), scoped to the
//! session's experiment unless the session lists every experiment of the workspace.

use super::basis::{basis_of, basis_with};
use super::compare::{Comparison, Difference, differences};
use crate::app::{AppError, Session};
use crate::config::{Experiment, LoadOptions};
use crate::run::trial::trial_params;
use crate::store::{TrialFilter, TrialRow};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// One stored trial, with where it came from and what it ran differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialSummary {
    #[serde(flatten)]
    pub row: TrialRow,
    /// It ran the session's experiment (the other rows appear only when listing all).
    pub this_experiment: bool,
    /// What its figures are evidence of ([`super::basis::basis_of`]).
    pub basis: crate::domain::evidence::Basis,
    /// The flags whose value it ran differs from its experiment as the file says now:
    /// `a` = the file now, `b` = the trial. `None`: not known (the trial's parameters were not
    /// stored and its folder is gone, or its experiment no longer loads).
    pub differences: Option<Vec<Difference>>,
}

impl std::ops::Deref for TrialSummary {
    type Target = TrialRow;
    fn deref(&self) -> &TrialRow {
        &self.row
    }
}

impl TrialSummary {
    /// The trial's settings that differ from the experiment (or its own, without one) as
    /// (key, value) texts; `Err` the words shown instead.
    fn setting_pairs(&self) -> Result<Vec<(String, String)>, &'static str> {
        let pairs: Vec<(String, String)> = match &self.differences {
            Some(d) if d.is_empty() => return Err("(as the config is)"),
            Some(d) => d
                .iter()
                .map(|x| (x.flag.clone(), super::compare::show_json(&x.b)))
                .collect(),
            None => crate::run::trial::trial_settings(&self.row)
                .iter()
                .map(|(k, v)| (k.clone(), super::compare::show_json(v)))
                .collect(),
        };
        if pairs.is_empty() {
            return Err("(settings unknown)");
        }
        Ok(pairs)
    }

    /// [`settings_text`](Self::settings_text) for a narrow column: dotted keys by their last
    /// part where unambiguous ([`crate::domain::study::short_key`]).
    pub fn settings_short(&self) -> String {
        match self.setting_pairs() {
            Ok(pairs) => pairs
                .iter()
                .map(|(k, v)| {
                    let all = pairs.iter().map(|p| p.0.as_str());
                    format!("{}={v}", crate::domain::study::short_key(k, all))
                })
                .collect::<Vec<_>>()
                .join(", "),
            Err(words) => words.into(),
        }
    }

    /// `flag=value, ...` of what it ran differently, `(as the config is)`, or its overrides
    /// when the difference is not known.
    pub fn settings_text(&self) -> String {
        match self.setting_pairs() {
            Ok(pairs) => pairs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", "),
            Err(words) => words.into(),
        }
    }
}

/// A stored trial's summary as evidence of its basis, and a note when something was left out:
/// a CPU stand-in's figures never include a GPU's — telemetry of this node's GPUs sampled beside
/// it (trials stored before stand-ins sampled the host only), and a peak taken from that
/// telemetry, are not its evidence.
pub fn evidence(
    row: &TrialRow,
    basis: &crate::domain::evidence::Basis,
) -> Option<(crate::domain::trial::Summary, Option<String>)> {
    use crate::domain::trial::MemorySource;
    let mut sum: crate::domain::trial::Summary =
        serde_json::from_value(row.summary.clone()?).ok()?;
    if !basis.is_proxy() {
        return Some((sum, None));
    }
    let gpu_peak = matches!(
        sum.peak_mem_kind,
        Some(MemorySource::Device | MemorySource::Processes)
    ) && sum
        .peak_mem_source
        .as_deref()
        .is_some_and(|s| s.starts_with("telemetry"));
    if sum.telemetry.is_empty() && !gpu_peak {
        return Some((sum, None));
    }
    sum.telemetry.clear();
    if gpu_peak {
        sum.peak_mem_gib = None;
        sum.peak_mem_source = None;
        sum.peak_mem_kind = None;
    }
    Some((
        sum,
        Some(
            "this node's GPUs were sampled beside the CPU stand-in: their telemetry (and a \
             peak taken from it) is not its evidence, and is left out"
                .into(),
        ),
    ))
}

pub(super) fn canon(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// `exp`'s resolved parameters, flag → value, without the runner's keys: what a trial's
/// [`trial_params`] are compared with.
pub fn params_of(exp: &Experiment) -> BTreeMap<String, serde_json::Value> {
    exp.main_module()
        .values()
        .into_iter()
        .filter(|(k, _)| !crate::run::trial::is_runner_key(k))
        .map(|(k, v)| (k, v.to_json()))
        .collect()
}

/// The experiment's resolved parameters as the file says now (without `--set` values).
fn params_now(path: &Path, load: &LoadOptions) -> Option<BTreeMap<String, serde_json::Value>> {
    let mut o = load.clone();
    o.overrides.clear();
    Some(params_of(&Experiment::load(path, &o).ok()?))
}

/// The session's experiment's trials (every experiment's when the session lists all), by id.
pub fn list(session: &Session, filter: &TrialFilter) -> Result<Vec<TrialSummary>, AppError> {
    let Some(store) = session.existing_store()? else {
        return Ok(Vec::new());
    };
    let here = canon(&session.experiment);
    let mut now: HashMap<PathBuf, Option<BTreeMap<String, serde_json::Value>>> = HashMap::new();
    let mut stand_ins = HashMap::new();
    Ok(store
        .list_trials(filter)?
        .into_iter()
        .filter_map(|row| {
            let path = canon(&row.config_path);
            let this_experiment = path == here;
            if !this_experiment && !session.all_experiments {
                return None;
            }
            let current = now
                .entry(path.clone())
                .or_insert_with(|| params_now(&path, &session.load));
            let differences = match (current.as_ref(), trial_params(&row)) {
                (Some(c), Some(ran)) => Some(differences(c, &ran)),
                _ => None,
            };
            Some(TrialSummary {
                basis: basis_with(&row, &mut stand_ins),
                row,
                this_experiment,
                differences,
            })
        })
        .collect())
}

/// A trial id the workspace does not hold.
pub fn no_trial(session: &Session, id: i64) -> AppError {
    AppError::NoTrial {
        id,
        db: crate::util::paths::display_path(&session.workspace.db),
    }
}

/// One stored trial with its difference (any experiment of the workspace).
pub fn summary(session: &Session, id: i64) -> Result<TrialSummary, AppError> {
    let store = session.require_store()?;
    let row = store.trial(id)?.ok_or_else(|| no_trial(session, id))?;
    let this_experiment = canon(&row.config_path) == canon(&session.experiment);
    let differences = match (
        params_now(&row.config_path, &session.load),
        trial_params(&row),
    ) {
        (Some(c), Some(ran)) => Some(differences(&c, &ran)),
        _ => None,
    };
    Ok(TrialSummary {
        basis: basis_of(&row),
        row,
        this_experiment,
        differences,
    })
}

/// Trials `a` and `b` compared (`b` against `a`), with their step-time curves.
pub fn compare(session: &Session, a: i64, b: i64) -> Result<Comparison, AppError> {
    let store = session.require_store()?;
    let get = |id: i64| -> Result<(TrialRow, Vec<_>), AppError> {
        let row = store.trial(id)?.ok_or_else(|| no_trial(session, id))?;
        let iters = store.iterations(id)?;
        Ok((row, iters))
    };
    let (ta, ia) = get(a)?;
    let (tb, ib) = get(b)?;
    if let (Some(ka), Some(kb)) = (
        super::compare::backend_of(&ta),
        super::compare::backend_of(&tb),
    ) && ka != kb
    {
        return Err(AppError::Failed(format!(
            "trial {a} ran {ka} and trial {b} {kb}: their settings and step times are not \
             comparable"
        )));
    }
    // What two launches of one config differ by, as this workspace measured it (trials of the
    // first one's experiment and profile), else assumed.
    let noise = super::compare::LaunchNoise::of(
        crate::app::sweep::history::launch_history(
            &store,
            &ta.config_path,
            ta.profile.as_deref().unwrap_or_default(),
        )
        .launch_cv,
    );
    Ok(super::compare::compare(&ta, &tb, &ia, &ib, noise))
}

/// What applying a trial writes: its differing flags with the values it ran, as edits of the
/// session's experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyPlan {
    pub trial: i64,
    /// flag → the value the trial ran (YAML text).
    pub edits: Vec<(String, String)>,
    /// The trial ran another experiment file: ask before applying its values here.
    pub other_experiment: Option<String>,
}

/// The edits that make the session's experiment run what trial `t` ran: its difference from
/// the experiment now (for a trial of another experiment, from this one). A trial of another
/// backend (TorchTitan values for a Megatron-LM experiment) is refused.
pub fn apply_plan(session: &Session, t: &TrialSummary) -> Result<ApplyPlan, AppError> {
    let exp = session.load_plain()?;
    let m = exp.main_module();
    let here = if m.is_torchtitan() {
        Some("TorchTitan")
    } else if m.is_megatron() {
        Some("Megatron-LM")
    } else {
        None
    };
    if let (Some(there), Some(here)) = (super::compare::backend_of(&t.row), here)
        && there != here
    {
        return Err(AppError::Failed(format!(
            "trial {} ran {there}; {} is a {here} experiment: its values do not apply here",
            t.id,
            session.display()
        )));
    }
    let diffs = if t.this_experiment {
        t.differences.clone()
    } else {
        match (
            params_now(&session.experiment, &session.load),
            trial_params(&t.row),
        ) {
            (Some(c), Some(ran)) => Some(differences(&c, &ran)),
            _ => None,
        }
    };
    let edits = match diffs {
        Some(d) => d.into_iter().map(|x| (x.flag, yaml_text(&x.b))).collect(),
        // Not known: its overrides are the best record of what it changed.
        None => crate::run::trial::trial_settings(&t.row)
            .iter()
            .map(|(k, v)| (k.clone(), yaml_text(v)))
            .collect(),
    };
    Ok(ApplyPlan {
        trial: t.id,
        edits,
        other_experiment: (!t.this_experiment)
            .then(|| crate::util::paths::display_path(&t.row.config_path)),
    })
}

/// A JSON value as YAML text for the editor (`null`, `true`, `4`, `selective`).
pub fn yaml_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A summary whose difference is the trial's overrides (tests of the screens, which have no
/// experiment files behind their rows: the binary's own tests, so it is public).
#[doc(hidden)]
pub fn summary_of_overrides(row: TrialRow) -> TrialSummary {
    let differences = crate::run::trial::trial_settings(&row)
        .into_iter()
        .map(|(flag, b)| Difference {
            flag,
            a: serde_json::Value::Null,
            b,
        })
        .collect();
    TrialSummary {
        basis: basis_of(&row),
        row,
        this_experiment: true,
        differences: Some(differences),
    }
}

/// The words `trials --status` accepts: every word the status column prints — a trial status
/// (`running`, `completed`, `failed`, `stopped`, `interrupted`), or for a trial that did not
/// complete its failure class (`oom`, `host-oom`, `nccl`, ...).
pub fn status_words() -> Vec<String> {
    crate::store::TrialStatus::ALL
        .iter()
        .map(|s| s.as_str().to_string())
        .chain(
            crate::domain::trial::FailureClass::ALL
                .iter()
                .map(|c| c.name()),
        )
        .collect()
}

/// `filter` narrowed to trials shown with `word` in the status column.
pub fn with_status(filter: TrialFilter, word: &str) -> Result<TrialFilter, AppError> {
    if let Ok(st) = word.parse::<crate::store::TrialStatus>() {
        return Ok(filter.status(st));
    }
    // A class's name, or the name it had before (`slurm-lost` for `job-lost`).
    let class = crate::domain::trial::FailureClass::ALL
        .into_iter()
        .find(|c| c.name() == word)
        .or_else(|| serde_json::from_value(serde_json::Value::String(word.to_string())).ok());
    match class {
        Some(c) => Ok(filter.failure(c)),
        None => Err(AppError::Usage(format!(
            "--status {word}: not a status the list shows (one of: {}){}",
            status_words().join(", "),
            crate::util::suggest::did_you_mean(word, &status_words())
        ))),
    }
}

#[cfg(test)]
mod evidence_tests {
    use super::*;
    use crate::domain::evidence::Basis;

    fn row(summary: serde_json::Value) -> TrialRow {
        serde_json::from_value(serde_json::json!({
            "id": 1, "study_id": null, "status": "stopped", "created_at": "t",
            "started_at": null, "finished_at": null, "updated_at": "t",
            "config_path": "x.yaml", "config_hash": "h", "overrides": [],
            "profile": "proxy-cpu", "argv": [], "env": [], "trial_dir": "/nonexistent",
            "runner_pid": null, "failure": null, "exit_code": null, "exit_signal": null,
            "iterations_seen": 3, "iterations_stored": 3, "wall_s": 1.0, "summary": summary,
            "median_step_ms": null, "ci95_ms": null, "tokens_per_s_per_gpu": null,
            "tflops_per_gpu": null, "peak_mem_gib": 150.0
        }))
        .unwrap()
    }

    /// A stand-in trial stored before stand-ins sampled the host only: this node's GPU
    /// (87 % busy with another job, 612 W, 150 GiB in use) is not its evidence.
    #[test]
    fn a_stand_in_s_trial_never_shows_the_gpu_sampled_beside_it() {
        let t = row(serde_json::json!({
            "iterations": 3, "n": 0, "warmup": 0, "peak_mem_gib": 150.0,
            "peak_mem_source": "telemetry: device memory in use", "peak_mem_kind": "device",
            "telemetry": [{"gpu": 0, "samples": 4, "util_mean_pct": 87.0, "power_mean_w": 612.0,
                           "vram_peak_bytes": 161061273600u64, "temp_max_c": {},
                           "throttled": false, "throttle_reasons": []}]
        }));
        let b = basis_of(&t);
        assert!(b.is_proxy(), "{b}");
        let (sum, note) = evidence(&t, &b).unwrap();
        assert!(sum.telemetry.is_empty());
        assert_eq!(sum.peak_mem_gib, None);
        assert!(note.unwrap().contains("not its evidence"));
        // A GPU measurement keeps all of it.
        let gpu = Basis::Measured {
            profile: "primus".into(),
            gpu: None,
        };
        let (sum, note) = evidence(&t, &gpu).unwrap();
        assert_eq!((sum.telemetry.len(), sum.peak_mem_gib), (1, Some(150.0)));
        assert!(note.is_none());
    }
}

#[cfg(test)]
mod status_tests {
    use super::*;
    use crate::domain::trial::FailureClass;
    use crate::store::TrialStatus;

    #[test]
    fn every_printed_status_word_filters() {
        let words = status_words();
        assert!(words.contains(&"host-oom".to_string()), "{words:?}");
        assert_eq!(
            words.len(),
            TrialStatus::ALL.len() + FailureClass::ALL.len()
        );
        for w in &words {
            assert!(with_status(TrialFilter::all(), w).is_ok(), "{w}");
        }
        let f = with_status(TrialFilter::all(), "oom").unwrap_or_default();
        assert_eq!(f.failures, vec![FailureClass::Oom]);
        assert!(f.statuses.is_empty());
        let e = with_status(TrialFilter::all(), "crashed").unwrap_err();
        assert!(e.to_string().contains("job-lost"), "{e}");
        // The names the classes had before the jobs were scheduler-neutral still filter.
        let f = with_status(TrialFilter::all(), "slurm-timeout").unwrap();
        assert_eq!(f.failures, vec![FailureClass::JobTimeLimit]);
    }
}
