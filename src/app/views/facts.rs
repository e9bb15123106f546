//! What the workspace holds for an experiment: its HipBLASLt state and the acknowledged rules
//! (a leaf of the views: the checklist, the config view and recommend all read it).

use crate::app::{AppError, Session};
use crate::config::Experiment;
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
/// HipBLASLt state (with the stored stage-3 comparison); and the acknowledged rules (the user's
/// tree's, then the workspace's of earlier versions).
pub fn stored(session: &Session, exp: &Experiment) -> Result<(GemmStatus, Vec<Ack>), AppError> {
    let store = session.existing_store().ok().flatten();
    let acks = crate::app::ack::acks_in(session, store.as_ref())?;
    Ok((gemm_in(session, exp, store.as_ref()), acks))
}
