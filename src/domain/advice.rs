//! The guide's rules by their stable ids — what `recommend` emits, what the checklist's to-dos
//! say, and what a user acknowledges — and an acknowledgement: a rule the user has decided not
//! to follow for this experiment, with the reason.

use serde::{Deserialize, Serialize};

/// A rule of the advice: its id, what it asks for, whether it is about Primus on AMD
/// (Primus-Turbo, sync-free MoE, DeepEP, HipBLASLt tuning: nothing upstream Megatron-LM or an
/// NVIDIA GPU has), and the flags (or launch variables) it governs: what its advice sets, and
/// so what no other advice may set once the user has acknowledged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub id: &'static str,
    pub what: &'static str,
    pub primus_amd: bool,
    pub flags: &'static [&'static str],
}

const fn rule(
    id: &'static str,
    what: &'static str,
    primus_amd: bool,
    flags: &'static [&'static str],
) -> Rule {
    Rule {
        id,
        what,
        primus_amd,
        flags,
    }
}

pub const PRIMUS_TURBO: &str = "primus-turbo";
pub const TURBO_ATTENTION: &str = "turbo-attention";
pub const TURBO_GROUPED_GEMM: &str = "turbo-grouped-gemm";
pub const SYNC_FREE_MOE: &str = "sync-free-moe";
pub const TURBO_DEEPEP: &str = "turbo-deepep";
pub const DEEPEP_NUM_CU: &str = "deepep-num-cu";
pub const FUSED_ROUTER: &str = "moe-fused-router";
pub const PERMUTE_FUSION: &str = "moe-permute-fusion";
pub const HIPBLASLT_TUNING: &str = "hipblaslt-tuning";
pub const CUDA_MAX_CONNECTIONS: &str = "cuda-max-connections";
pub const DISTRIBUTED_OPTIMIZER: &str = "distributed-optimizer";
pub const OVERLAP_GRAD_REDUCE: &str = "overlap-grad-reduce";
pub const OVERLAP_PARAM_GATHER: &str = "overlap-param-gather";
pub const OVERLAP_P2P: &str = "overlap-p2p-comm";
pub const ASYNC_TP: &str = "async-tensor-parallel";
pub const MIXED_PRECISION: &str = "mixed-precision";
pub const FIT_MEMORY: &str = "fit-memory";
pub const TP_WITHIN_NODE: &str = "tp-within-node";
pub const SEQUENCE_PARALLEL: &str = "sequence-parallel";
pub const INTERLEAVED_PIPELINE: &str = "interleaved-pipeline";
pub const EP_WITHIN_NODE: &str = "ep-within-node";

/// Every rule of the checklist and of `recommend` (lint's codes are ids too:
/// `config::lint::codes` lists them, and the two are one id space for acknowledgements).
pub const RULES: &[Rule] = &[
    rule(
        PRIMUS_TURBO,
        "turn on the Primus-Turbo kernels (enable_primus_turbo)",
        true,
        &["enable_primus_turbo"],
    ),
    rule(
        TURBO_ATTENTION,
        "Turbo attention kernels (use_turbo_attention)",
        true,
        &["use_turbo_attention"],
    ),
    rule(
        TURBO_GROUPED_GEMM,
        "MoE expert GEMMs through the Turbo grouped GEMM",
        true,
        &["use_turbo_grouped_gemm"],
    ),
    rule(
        SYNC_FREE_MOE,
        "the sync-free MoE stage for the GPU",
        true,
        &["turbo_sync_free_moe_stage"],
    ),
    rule(
        TURBO_DEEPEP,
        "the DeepEP token dispatcher (use_turbo_deepep)",
        true,
        &["use_turbo_deepep"],
    ),
    rule(
        DEEPEP_NUM_CU,
        "DeepEP CUs by expert parallelism (64/80 for EP 8, 32 from EP 16)",
        true,
        &["turbo_deepep_num_cu"],
    ),
    rule(
        FUSED_ROUTER,
        "fused router with aux score (Primus-Turbo)",
        true,
        &["moe_use_fused_router_with_aux_score"],
    ),
    rule(
        PERMUTE_FUSION,
        "fused MoE permutation (moe_permute_fusion)",
        false,
        &["moe_permute_fusion"],
    ),
    rule(
        HIPBLASLT_TUNING,
        "the HipBLASLt tuning stages 1–3",
        true,
        &["PRIMUS_HIPBLASLT_TUNING", "PRIMUS_HIPBLASLT_TUNING_STAGE"],
    ),
    rule(
        CUDA_MAX_CONNECTIONS,
        "CUDA_DEVICE_MAX_CONNECTIONS=1 with overlap or TP > 1",
        false,
        &["CUDA_DEVICE_MAX_CONNECTIONS"],
    ),
    rule(
        DISTRIBUTED_OPTIMIZER,
        "shard the optimizer state (use_distributed_optimizer)",
        false,
        &["use_distributed_optimizer"],
    ),
    rule(
        OVERLAP_GRAD_REDUCE,
        "overlap the gradient reduce (overlap_grad_reduce)",
        false,
        &["overlap_grad_reduce"],
    ),
    rule(
        OVERLAP_PARAM_GATHER,
        "overlap the parameter gather (overlap_param_gather)",
        false,
        &["overlap_param_gather"],
    ),
    rule(
        OVERLAP_P2P,
        "overlap pipeline send/receive (overlap_p2p_comm)",
        false,
        &["overlap_p2p_comm"],
    ),
    rule(
        TP_WITHIN_NODE,
        "tensor parallelism within one node",
        false,
        &["tensor_model_parallel_size"],
    ),
    rule(
        SEQUENCE_PARALLEL,
        "sequence parallelism with TP > 1",
        false,
        &["sequence_parallel"],
    ),
    rule(
        INTERLEAVED_PIPELINE,
        "the interleaved pipeline schedule when the bubble is large",
        false,
        &["num_virtual_stages_per_pipeline_rank"],
    ),
    rule(
        EP_WITHIN_NODE,
        "expert parallelism within one node where the experts fit",
        false,
        &["expert_model_parallel_size"],
    ),
    rule(
        ASYNC_TP,
        "asynchronous tensor parallel (TorchTitan)",
        false,
        &["parallelism.enable_async_tensor_parallel"],
    ),
    rule(
        MIXED_PRECISION,
        "train in BF16 or FP8/FP4, not FP32",
        false,
        &["bf16", "fp8", "fp4"],
    ),
    rule(
        FIT_MEMORY,
        "make the experiment fit the GPU's memory: recomputation, the distributed optimizer, CPU offload, accumulation",
        false,
        &[],
    ),
];

pub fn find(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// Lint codes whose fix is Primus-on-AMD advice (Turbo, sync-free, DeepEP, HipBLASLt).
pub fn lint_code_is_primus_amd(code: &str) -> bool {
    ["turbo-", "sync-free", "deepep-", "hipblaslt-"]
        .iter()
        .any(|p| code.starts_with(p))
}

/// Whether the rule's advice is about Primus on AMD.
pub fn is_primus_amd(id: &str) -> bool {
    find(id).map_or_else(|| lint_code_is_primus_amd(id), |r| r.primus_amd)
}

/// The training code the job launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// Primus (its Megatron or TorchTitan backend): the experiment's own launcher.
    #[default]
    Primus,
    /// Upstream Megatron-LM (a profile whose overrides are Megatron's `--flag-name`s).
    UpstreamMegatron,
    /// Upstream TorchTitan (a profile whose overrides are TorchTitan's `--section.key`s).
    UpstreamTorchtitan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Target {
    pub framework: Framework,
    /// `amd` or `nvidia`; None when the GPU is unknown (the advice assumes Primus' AMD).
    pub vendor: Option<&'static str>,
}

impl Target {
    /// Why Primus-on-AMD advice does not apply to this job; None when it does.
    pub fn excludes_primus_amd(&self) -> Option<&'static str> {
        match (self.framework, self.vendor) {
            (Framework::UpstreamMegatron, _) => Some(
                "the job runs upstream Megatron-LM, which has no Primus-Turbo kernels, sync-free MoE, Turbo DeepEP or Primus' HipBLASLt tuning hook",
            ),
            (Framework::UpstreamTorchtitan, _) => Some(
                "the job runs upstream TorchTitan, which has no Primus-Turbo converters, Turbo DeepEP or Primus' HipBLASLt tuning hook",
            ),
            (Framework::Primus, Some("nvidia")) => Some(
                "the GPU is an NVIDIA GPU: Primus-Turbo, Turbo DeepEP and hipBLASLt tuning are for AMD GPUs (ROCm)",
            ),
            _ => None,
        }
    }

    /// The same, in a few words for a checklist line.
    pub fn excludes_primus_amd_briefly(&self) -> Option<&'static str> {
        match (self.framework, self.vendor) {
            (Framework::UpstreamMegatron, _) => Some("not in upstream Megatron-LM"),
            (Framework::UpstreamTorchtitan, _) => Some("not in upstream TorchTitan"),
            (Framework::Primus, Some("nvidia")) => Some("for AMD GPUs, not this NVIDIA one"),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        let fw = match self.framework {
            Framework::Primus => "Primus",
            Framework::UpstreamMegatron => "upstream Megatron-LM",
            Framework::UpstreamTorchtitan => "upstream TorchTitan",
        };
        match self.vendor {
            Some(v) => format!("{fw} on {}", v.to_uppercase()),
            None => format!("{fw} (GPU vendor unknown)"),
        }
    }
}

/// A rule (or lint code) the user chose not to follow for an experiment, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ack {
    pub rule: String,
    pub reason: String,
    /// When it was recorded (RFC 3339, UTC), where that is known: the workspace's record.
    pub at: Option<String>,
    /// Where it is written: `primus-tune.toml:7:1`, `exp.yaml:12:40` (a comment), or the
    /// workspace's database (what earlier versions recorded).
    pub from: String,
}

/// The acknowledgement of `rule` among `acks`.
pub fn acked<'a>(acks: &'a [Ack], rule: &str) -> Option<&'a Ack> {
    acks.iter().find(|a| a.rule == rule)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_kebab_case() {
        for (i, r) in RULES.iter().enumerate() {
            assert!(RULES[i + 1..].iter().all(|o| o.id != r.id), "{}", r.id);
            assert!(
                r.id.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            );
        }
    }

    #[test]
    fn primus_amd_rules_and_lint_codes() {
        assert!(is_primus_amd(SYNC_FREE_MOE));
        assert!(!is_primus_amd(OVERLAP_GRAD_REDUCE));
        assert!(is_primus_amd("turbo-grouped-gemm-legacy"));
        assert!(is_primus_amd("deepep-router-dtype"));
        assert!(!is_primus_amd("overlap-param-gather-needs-dist-opt"));
        assert!(find("cuda-max-connections").is_some());
        assert!(find("no-such-rule").is_none());
    }
}
