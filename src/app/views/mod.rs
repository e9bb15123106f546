//! Read models: what the frontends show, built once here from the engines and the session's
//! workspace — the checklist, the experiment's flags, trial comparisons, recommendations, the
//! studies, a study's report inputs.

pub mod basis;
pub mod compare;
pub mod config;
pub mod facts;
pub mod layouts;
pub mod recommend;
pub mod report;
pub mod studies;
pub mod trials;

use super::{AppError, Session};
use crate::checklist::{Checklist, Known, MeasuredMemory};
use crate::config::Experiment;
use crate::config::catalog::Catalog;
use crate::config::diag::Diagnostic;
use crate::domain::advice::Ack;

pub use facts::{gemm_status, stored};

/// What the checklist knows of the session beyond the experiment: its acknowledgements, its
/// world, what the job runs on (the GPU this machine or the experiment's path names), and the
/// memory a trial of the config measured.
pub fn known<'a>(
    session: &'a Session,
    acks: &'a [Ack],
    memory: Option<&'a MeasuredMemory>,
) -> Known<'a> {
    Known {
        acks,
        world: session.load.world.as_ref(),
        target: recommend::local_target(session),
        memory,
    }
}

/// Trials the checklist's memory step looks back over (the newest first).
const MEMORY_TRIALS: usize = 100;

/// The newest of the workspace's last [`MEMORY_TRIALS`] trials that ran `exp` exactly as it
/// resolves now (no flag differs, the session's pending edits included) at the session's
/// world (when both are known: a peak per GPU holds for its world) with a profile that runs
/// the real job, and either completed with a peak or ran out of memory. A proxy's peak is its
/// stand-in's or its scaled-down shape's, never the config's; a trial whose profile is gone
/// cannot say which it was, so it is passed over.
pub fn measured_memory(session: &Session, exp: &Experiment) -> Option<MeasuredMemory> {
    use crate::domain::trial::{FailureClass, TrialStatus};
    let store = session.existing_store().ok().flatten()?;
    let here = trials::canon(&session.experiment);
    let now = trials::params_of(exp);
    let rows = store
        .list_trials(&crate::store::TrialFilter::all().last(MEMORY_TRIALS))
        .ok()?;
    rows.into_iter().rev().find_map(|row| {
        let oom = row.status == TrialStatus::Failed
            && row
                .failure
                .as_ref()
                .is_some_and(|f| f.class == FailureClass::Oom);
        let measured = row.status == TrialStatus::Completed && row.peak_mem_gib.is_some();
        if !(oom || measured) || trials::canon(&row.config_path) != here {
            return None;
        }
        let world = row.ran_on_gpus();
        if world
            .zip(session.load.world.as_ref().map(|w| w.gpus))
            .is_some_and(|(a, b)| a != b)
        {
            return None;
        }
        let ran = crate::run::trial::trial_params(&row)?;
        if !compare::differences(&now, &ran).is_empty() {
            return None;
        }
        let profile = row.profile.clone()?;
        let caps = super::trial::find_profile(Some(&profile))
            .ok()?
            .capabilities;
        if caps.stand_in || caps.scaled_shape {
            return None;
        }
        Some(MeasuredMemory {
            trial: row.id,
            profile,
            oom,
            peak_gib: row.peak_mem_gib.filter(|_| !oom),
            kind: row.peak_mem_kind().filter(|_| !oom),
            capacity_gib: row
                .gpu_memory_bytes()
                .map(|b| b as f64 / (1u64 << 30) as f64),
            world,
        })
    })
}

/// The quick checklist, the diagnostics behind it, and those the user's decisions suppress.
#[derive(Debug, Clone)]
pub struct ChecklistView {
    pub checklist: Checklist,
    pub diagnostics: Vec<Diagnostic>,
    pub suppressed: Vec<crate::config::suppress::Suppressed>,
}

/// The guide's quick checklist for the session's experiment, with what the workspace measured.
pub fn checklist(session: &Session) -> Result<ChecklistView, AppError> {
    let exp = session.load()?;
    let catalog = Catalog::builtin();
    let (diagnostics, suppressed) = crate::app::ack::split(
        session,
        crate::config::lint::lint(
            &exp,
            &session.load.env,
            session.load.world.as_ref(),
            catalog,
        ),
    )?;
    let (gemm, acks) = stored(session, &exp)?;
    let memory = measured_memory(session, &exp);
    let known = known(session, &acks, memory.as_ref());
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
        suppressed,
    })
}
