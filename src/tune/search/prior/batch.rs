//! **A larger batch is not slower without a pipeline.** With the global batch fixed (Megatron-LM),
//! a larger micro batch does the same work in fewer, larger micro steps: fewer kernel launches
//! and larger GEMMs, and the once-a-step costs (the optimizer, the gradients' reduction) do not
//! change. Per sample (TorchTitan's local batch), a larger batch spreads those costs over more
//! samples. The gain shrinks as the GPU fills, but does not turn into a loss: on every grid this
//! project recorded on the H200 (upstream Megatron-LM and TorchTitan, dense, MoE and float8,
//! one GPU; tests/fixtures/replay), a larger batch at the same other settings was never slower
//! by more than the 1 % tolerance (in 8 of 9 grids never at all; on the GQA grid micro batch 16
//! with selective recompute ran 1.0 % slower than 8).
//!
//! A pipeline changes that: with `p` stages and `m` micro batches a step, the bubble is
//! `(p − 1) / m` of the step's useful time (Narayanan et al. 2021; Megatron-LM's schedules),
//! and a larger micro batch means fewer micro batches, so it can be slower. The rule therefore holds only
//! between candidates whose configs are known to run in one pipeline stage
//! (`pipeline_model_parallel_size`, TorchTitan's `parallelism.pipeline_parallel_degree`).

use super::number;
use crate::domain::study::Overrides;
use serde_json::Value;

/// Flags that set the samples a GPU processes per micro step.
pub const BATCH_KEYS: [&str; 2] = ["micro_batch_size", "training.local_batch_size"];

/// Flags that set the pipeline-parallel stages.
pub const STAGE_KEYS: [&str; 2] = [
    "pipeline_model_parallel_size",
    "parallelism.pipeline_parallel_degree",
];

/// A candidate's micro (or local) batch, when its overrides set one.
pub fn size(o: &Overrides) -> Option<f64> {
    BATCH_KEYS.iter().find_map(|k| number(o.get(*k)))
}

/// The flags other than the batch and the recompute settings.
pub fn others(o: &Overrides) -> Vec<(&String, &Value)> {
    o.iter()
        .filter(|(k, _)| {
            !BATCH_KEYS.contains(&k.as_str()) && !super::RECOMPUTE_KEYS.contains(&k.as_str())
        })
        .collect()
}

/// A candidate's pipeline stages: its own override of a stage flag, else (no override, or
/// `null`: the config's value) the job's `base` (`None`: unknown).
pub fn stages(o: &Overrides, base: Option<u64>) -> Option<u64> {
    STAGE_KEYS
        .iter()
        .find_map(|k| o.get(*k).filter(|v| !v.is_null()))
        .map_or(base, |v| number(Some(v)).map(|n| n as u64))
}

#[cfg(test)]
mod tests {
    use super::super::tests::o;
    use super::*;
    use serde_json::json;

    #[test]
    fn the_batch_and_the_stages_are_read_from_either_framework_s_flags() {
        assert_eq!(size(&o(json!({"micro_batch_size": 4}))), Some(4.0));
        assert_eq!(
            size(&o(json!({"training.local_batch_size": "8"}))),
            Some(8.0)
        );
        assert_eq!(size(&o(json!({"recompute_num_layers": 2}))), None);
        let both =
            o(json!({"micro_batch_size": 4, "recompute_granularity": "full", "fp8": "e4m3"}));
        assert_eq!(others(&both), vec![(&"fp8".to_string(), &json!("e4m3"))]);
        assert_eq!(stages(&o(json!({"micro_batch_size": 4})), Some(1)), Some(1));
        assert_eq!(stages(&o(json!({"micro_batch_size": 4})), None), None);
        let pp = o(json!({"pipeline_model_parallel_size": 2}));
        assert_eq!(stages(&pp, Some(1)), Some(2));
        let titan = o(json!({"parallelism.pipeline_parallel_degree": 1}));
        assert_eq!(stages(&titan, None), Some(1));
        // A stage flag left to the config (null) is the job's; one that is not a number is
        // unknown.
        let null = o(json!({"pipeline_model_parallel_size": null}));
        assert_eq!(stages(&null, Some(1)), Some(1));
        let odd = o(json!({"pipeline_model_parallel_size": "auto"}));
        assert_eq!(stages(&odd, Some(1)), None);
    }
}
