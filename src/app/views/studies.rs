//! The experiment's sweeps, past and unfinished: what each swept, where it stands, what it cost
//! and what it picked — and one study in full (its record, ranked).

use crate::app::{AppError, Session};
use crate::domain::study::{Conclusion, Overrides, StudyRecord};
use crate::domain::trial::TrialStatus;
use crate::store::{Store, StudyRow, TrialFilter, TrialRow};
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
    let gpu_seconds = match &record {
        Some(r) => r.gpu_seconds,
        None => trials
            .iter()
            .map(|t| t.wall_s.unwrap_or(0.0) * world_of(t))
            .sum(),
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
