//! The experiment's sweeps, past and unfinished: what each swept, where it stands, what it cost
//! and what it picked — and one study in full (its record, ranked).

use crate::app::{AppError, Session};
use crate::domain::study::{Conclusion, Overrides, StudyRecord};
use crate::domain::trial::TrialStatus;
use crate::store::{Store, StudyRow, TrialFilter, TrialRow};
pub use crate::tune::study::memory_check;
use serde::Serialize;
use std::path::Path;

/// Where a study stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StudyStatus {
    /// The search ended and its record is stored.
    Finished,
    /// A trial of it is running now (or its runner died without saying so).
    Running,
    /// Stopped or interrupted before the search ended: `sweep --resume` continues it.
    Unfinished,
    /// The search was cut short by its budget before it could decide: its record names the
    /// best so far and no winner; `sweep --resume` with more budget continues it.
    Incomplete,
}

impl StudyStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            StudyStatus::Finished => "finished",
            StudyStatus::Running => "running",
            StudyStatus::Unfinished => "unfinished",
            StudyStatus::Incomplete => "incomplete",
        }
    }
}

/// One study as `studies` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StudySummary {
    pub id: i64,
    pub name: String,
    /// The knob space it swept.
    pub space: String,
    /// The experiment file it swept.
    pub experiment: String,
    pub status: StudyStatus,
    pub trials: u64,
    /// Wall time × GPUs of its trials.
    pub gpu_seconds: f64,
    /// The picked candidate's settings (null when there is no pick yet).
    pub pick: Option<Overrides>,
    /// When it was created (RFC 3339, UTC).
    pub started: String,
    /// The launch profile of its trials.
    pub profile: Option<String>,
    /// What produced its measurements, once finished.
    pub basis: Option<crate::domain::evidence::Basis>,
    /// What `gpu_seconds` counts: `GPU`-seconds, or a CPU stand-in's `CPU`-seconds.
    pub cost_unit: &'static str,
    /// Knobs its profile does not model (swept anyway): not applied from its pick.
    pub unmodeled: Vec<String>,
}

/// A study in full: its summary and, once finished, its record.
#[derive(Debug, Clone)]
pub struct StudyDetail {
    pub summary: StudySummary,
    pub record: Option<StudyRecord>,
}

/// GEMM tuning stages are studies too, listed with the Checklist's GEMM step instead.
fn is_sweep(s: &StudyRow) -> bool {
    !s.kind.starts_with("gemm-stage-")
}

fn same_file(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(b)
}

/// GPUs a stored trial ran on (its `resolved.json`), 1 when unknown.
fn world_of(t: &TrialRow) -> f64 {
    std::fs::read_to_string(t.trial_dir.join("resolved.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|j| j["_world_size"].as_f64())
        .filter(|w| *w >= 1.0)
        .unwrap_or(1.0)
}

fn record_of(s: &StudyRow) -> Option<StudyRecord> {
    serde_json::from_str(s.notes.as_deref()?).ok()
}

/// Wall time × the ranks each trial ran (a CPU stand-in: × its processes, one per node). Never
/// `-0.0` (the empty sum of f64 is): a study without trials cost nothing, printed `0.0`.
fn cost_of(trials: &[TrialRow], stand_in: bool) -> f64 {
    let total: f64 = trials
        .iter()
        .map(|t| {
            let per = if stand_in {
                t.job.as_ref().map_or(1.0, |j| f64::from(j.nodes.max(1)))
            } else {
                world_of(t)
            };
            t.wall_s.unwrap_or(0.0) * per
        })
        .sum();
    if total > 0.0 { total } else { 0.0 }
}

fn summarize(store: &Store, s: &StudyRow) -> Result<StudyDetail, AppError> {
    let trials = store.list_trials(&TrialFilter::all().study(s.id))?;
    let record = record_of(s);
    let status = match (
        &record,
        trials.iter().any(|t| t.status == TrialStatus::Running),
    ) {
        (Some(r), _) if matches!(r.conclusion, Some(Conclusion::Incomplete { .. })) => {
            StudyStatus::Incomplete
        }
        (Some(_), _) => StudyStatus::Finished,
        (None, true) => StudyStatus::Running,
        (None, false) => StudyStatus::Unfinished,
    };
    // What its trials cost: the record's, else their wall time × the ranks they ran (a CPU
    // stand-in: × its processes, one per node).
    let basis = record
        .as_ref()
        .and_then(|r| r.basis.clone())
        .or_else(|| trials.first().map(super::basis::basis_of));
    let stand_in = basis
        .as_ref()
        .is_some_and(crate::domain::evidence::Basis::is_proxy);
    let gpu_seconds = match &record {
        Some(r) => r.gpu_seconds,
        None => cost_of(&trials, stand_in),
    };
    Ok(StudyDetail {
        summary: StudySummary {
            id: s.id,
            name: s.name.clone(),
            space: s.kind.clone(),
            experiment: crate::util::paths::display_path(&s.config_path),
            status,
            trials: s.trials,
            gpu_seconds,
            pick: record
                .as_ref()
                .and_then(|r| r.pick())
                .map(|c| c.overrides.clone()),
            started: s.created_at.clone(),
            profile: trials.iter().find_map(|t| t.profile.clone()),
            cost_unit: basis
                .as_ref()
                .map_or("GPU", crate::domain::evidence::Basis::cost_unit),
            basis: record.as_ref().and_then(|r| r.basis.clone()),
            unmodeled: record
                .as_ref()
                .map(|r| r.unmodeled.clone())
                .unwrap_or_default(),
        },
        record,
    })
}

/// The experiment's sweeps, oldest first (none when nothing was stored yet).
pub fn list(session: &Session) -> Result<Vec<StudySummary>, AppError> {
    let Some(store) = session.existing_store()? else {
        return Ok(Vec::new());
    };
    store
        .list_studies()?
        .iter()
        .filter(|s| {
            is_sweep(s)
                && (session.all_experiments || same_file(&s.config_path, &session.experiment))
        })
        .map(|s| summarize(&store, s).map(|d| d.summary))
        .collect()
}

/// One study by name, with its record when finished.
pub fn detail(session: &Session, name: &str) -> Result<StudyDetail, AppError> {
    let store = session.require_store()?;
    let s = store
        .study_by_name(name)?
        .ok_or_else(|| AppError::NoStudy {
            name: name.to_string(),
            db: crate::util::paths::display_path(&session.workspace.db),
        })?;
    summarize(&store, &s)
}

/// The finished record of a study, or why there is none.
pub fn finished_record(session: &Session, name: &str) -> Result<StudyRecord, AppError> {
    let d = detail(session, name)?;
    d.record.ok_or_else(|| AppError::Unfinished {
        name: name.to_string(),
        resume: resume_hint(session, &d.summary),
    })
}

/// The command that continues an unfinished study, with the profile its trials used.
pub fn resume_hint(session: &Session, s: &StudySummary) -> String {
    let req = crate::app::sweep::SweepRequest {
        trial: crate::app::trial::TrialRequest {
            profile: s.profile.clone(),
            ..Default::default()
        },
        ..Default::default()
    };
    crate::app::sweep::resume_command(session, &s.name, &req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::evidence::Basis;
    use crate::domain::study::{CandidateRecord, MemoryCheck, VerdictKind};

    const GIB: f64 = (1u64 << 30) as f64;

    fn record(basis: Basis) -> StudyRecord {
        let cand = |id: usize, verdict: VerdictKind, peak: u64, predicted: f64| CandidateRecord {
            id,
            baseline: false,
            overrides: Default::default(),
            verdict,
            why: String::new(),
            n: 10,
            step_ms: Some(100.0),
            ci_low_ms: Some(99.0),
            ci_high_ms: Some(101.0),
            peak_memory_bytes: Some(peak << 30),
            peak_memory_source: None,
            predicted_bytes: Some(predicted * GIB),
        };
        StudyRecord {
            space: "mbs".into(),
            config: "/x/exp.yaml".into(),
            profile: "p".into(),
            gpus: 8,
            capacity_bytes: None,
            candidates: vec![
                cand(0, VerdictKind::Winner, 10, 11.0),
                cand(1, VerdictKind::Slower, 20, 18.0),
                // An OOM's peak is whatever it reached: never compared.
                cand(2, VerdictKind::Oom, 5, 90.0),
            ],
            pick: Some(0),
            gpu_seconds: 1.0,
            trials: 3,
            log: Vec::new(),
            memory_error: Some(0.1),
            basis: Some(basis),
            unmodeled: Vec::new(),
            baseline: None,
            conclusion: None,
            per_samples: None,
            knobs: Vec::new(),
            link_scale: None,
            statistic: crate::domain::study::StepStatistic::TrimmedMean,
        }
    }

    #[test]
    fn a_study_without_trials_cost_zero_not_minus_zero() {
        let c = cost_of(&[], false);
        assert!(c == 0.0 && c.is_sign_positive(), "{c}");
        assert_eq!(format!("{:.1}", cost_of(&[], true) / 60.0), "0.0");
    }

    #[test]
    fn the_memory_model_is_compared_with_gpu_peaks_only() {
        let gpu = record(Basis::Measured {
            profile: "primus".into(),
            gpu: Some("MI300X".into()),
        });
        match memory_check(&gpu) {
            MemoryCheck::Compared {
                mean_error,
                candidates,
            } => {
                assert_eq!(candidates, 2);
                assert!((mean_error - 0.1).abs() < 1e-9, "{mean_error}");
            }
            other => panic!("{other:?}"),
        }
        let proxy = record(Basis::Proxy {
            profile: "proxy-cpu".into(),
        });
        let check = memory_check(&proxy);
        assert!(
            matches!(check, MemoryCheck::NotCompared { .. }),
            "{check:?}"
        );
        assert!(check.to_string().contains("stand-in"), "{check}");
    }
}
