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
use crate::checklist::{Checklist, Known};
use crate::config::Experiment;
use crate::config::catalog::Catalog;
use crate::config::diag::Diagnostic;
use crate::domain::advice::Ack;
use crate::gemm::status::GemmStatus;
use crate::store::Store;

/// The HipBLASLt tuning state of the experiment: its files, the environment, and the latest
/// stage-3 comparison stored in the session's workspace. No hipblaslt-bench probe (it launches
/// a GPU program; `gemm-tune status` runs it on request).
pub fn gemm_status(session: &Session, exp: &Experiment) -> GemmStatus {
    gemm_in(
        session,
        exp,
        session.existing_store().ok().flatten().as_ref(),
    )
}

fn gemm_in(session: &Session, exp: &Experiment, store: Option<&Store>) -> GemmStatus {
    let comparison = store.and_then(|s| crate::gemm::runner::latest_comparison(s, &exp.path));
    crate::gemm::status::of_experiment(exp, &session.load.env, None, comparison)
}

/// What the workspace holds for the experiment, read from one opening of the store: the
/// HipBLASLt state (with the stored stage-3 comparison) and the acknowledged rules.
pub fn stored(session: &Session, exp: &Experiment) -> (GemmStatus, Vec<Ack>) {
    let store = session.existing_store().ok().flatten();
    let acks = store
        .as_ref()
        .map(|s| crate::app::ack::acks_in(session, s))
        .unwrap_or_default();
    (gemm_in(session, exp, store.as_ref()), acks)
}

/// What the checklist knows of the session beyond the experiment: its acknowledgements, its
/// world, and what the job runs on (the GPU this machine or the experiment's path names).
pub fn known<'a>(session: &'a Session, acks: &'a [Ack]) -> Known<'a> {
    Known {
        acks,
        world: session.world(),
        target: recommend::local_target(session),
    }
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
    let (gemm, acks) = stored(session, &exp);
    let known = known(session, &acks);
    let checklist = crate::checklist::evaluate(
        &exp,
        &session.load.env,
        catalog,
        &diagnostics,
        &gemm,
        &known,
    );
    Ok(ChecklistView {
        checklist,
        diagnostics,
    })
}
