//! Read models: what the frontends show, built once here from the engines and the session's
//! workspace — the checklist, the experiment's flags, trial comparisons, recommendations, the
//! studies, a study's report inputs.

pub mod compare;
pub mod config;
pub mod recommend;
pub mod report;
pub mod studies;
pub mod trials;

use super::{AppError, Session};
use crate::checklist::Checklist;
use crate::config::Experiment;
use crate::config::catalog::Catalog;
use crate::config::diag::Diagnostic;
use crate::gemm::status::GemmStatus;

/// The HipBLASLt tuning state of the experiment: its files, the environment, and the latest
/// stage-3 comparison stored in the session's workspace. No hipblaslt-bench probe (it launches
/// a GPU program; `gemm-tune status` runs it on request).
pub fn gemm_status(session: &Session, exp: &Experiment) -> GemmStatus {
    let comparison = session
        .existing_store()
        .ok()
        .flatten()
        .and_then(|s| crate::gemm::runner::latest_comparison(&s, &exp.path));
    crate::gemm::status::of_experiment(exp, &session.load.env, None, comparison)
}

/// The quick checklist and the diagnostics behind it.
#[derive(Debug, Clone)]
pub struct ChecklistView {
    pub checklist: Checklist,
    pub diagnostics: Vec<Diagnostic>,
}

/// The guide's quick checklist for the session's experiment, with what the workspace measured.
pub fn checklist(session: &Session) -> Result<ChecklistView, AppError> {
    let exp = session.load()?;
    let catalog = Catalog::builtin();
    let diagnostics = crate::config::lint::lint(
        &exp,
        &session.load.env,
        session.load.world.as_ref(),
        catalog,
    );
    let gemm = gemm_status(session, &exp);
    let checklist = crate::checklist::evaluate(
        &exp,
        &session.load.env,
        catalog,
        &diagnostics,
        &gemm,
        &crate::app::ack::acks(session),
        session.world(),
    );
    Ok(ChecklistView {
        checklist,
        diagnostics,
    })
}
