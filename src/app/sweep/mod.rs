//! One sweep as a use case: the study (new or resumed), legality, the memory model's
//! predictions (calibrated on stored trials), the search with real trials, and the study's
//! record. Its progress and every trial's events go to the frontend as [`SweepEvent`](super::events::SweepEvent)s.

pub mod effects;
pub mod history;
pub mod lease;
pub mod links;
pub mod open;
pub mod request;
pub mod runner;
mod setup;
mod study;

use super::events::Events;
use super::trial::Cancel;
use super::{AppError, Session};
pub use request::{FIRST_ITERS, MAX_ITERS, SweepRequest};
pub use setup::{SweepOutcome, model_peaks, resume_command, shell_word, unmodeled};

/// Run a sweep to its end (blocking: call it from a thread that is not inside a tokio
/// runtime). `cancel` stops the trial in flight and the sweep; the study can be resumed.
pub fn run(
    session: &Session,
    req: &SweepRequest,
    events: &Events,
    cancel: Cancel,
) -> Result<SweepOutcome, AppError> {
    let exp = session.load()?;
    let store = session.store()?;
    let study = study::prepare(session, &store, exp, req)?.calibrate();
    let ran = study.run(events, cancel)?;
    study.record(ran)
}

#[cfg(test)]
mod tests {
    use super::setup::{params_of, pipeline_stages};
    use crate::config::env::Env;
    use crate::config::{Experiment, LoadOptions};
    use crate::domain::study::Candidate;
    use crate::util::bundled;

    fn cand(o: serde_json::Value) -> Candidate {
        Candidate {
            id: 1,
            overrides: serde_json::from_value(o).unwrap(),
            ranks: vec![],
            baseline: false,
        }
    }

    #[test]
    fn each_candidate_s_pipeline_stages_come_from_its_resolved_config() {
        let dir = tempfile::tempdir().unwrap();
        bundled::extract(dir.path()).unwrap();
        let megatron = dir.path().join("experiments/llama3_8B-BF16-pretrain.yaml");
        let titan = dir
            .path()
            .join("experiments/llama3.1_8B-torchtitan-pretrain.yaml");
        let opts = LoadOptions {
            env: Env::empty(),
            ..Default::default()
        };
        let stages = |path: &std::path::Path, opts: &LoadOptions, o| {
            let exp = Experiment::load(path, opts).unwrap();
            pipeline_stages(&params_of(&exp, opts, &cand(o)).unwrap())
        };
        let mbs = serde_json::json!({"micro_batch_size": 2});
        // `pipeline_model_parallel_size: ${PRIMUS_PP:1}`: one stage, unless the environment or
        // the candidate says otherwise.
        assert_eq!(stages(&megatron, &opts, mbs.clone()), Some(1));
        let pp2 = LoadOptions {
            env: Env::empty().with("PRIMUS_PP", "2"),
            ..Default::default()
        };
        assert_eq!(stages(&megatron, &pp2, mbs), Some(2));
        let own = serde_json::json!({"micro_batch_size": 2, "pipeline_model_parallel_size": 4});
        assert_eq!(stages(&megatron, &opts, own), Some(4));
        // TorchTitan: the degree defaults to one stage.
        let lbs = serde_json::json!({"training.local_batch_size": 2});
        assert_eq!(stages(&titan, &opts, lbs), Some(1));
        let piped = serde_json::json!({"training.local_batch_size": 2,
                                       "parallelism.pipeline_parallel_degree": 2});
        assert_eq!(stages(&titan, &opts, piped), Some(2));
    }
}
