//! Sizes in a range a training run can have: a model dimension, batch or parallel size that is
//! zero, negative or beyond anything trained (a typo such as `num_layers: 1000000000000`) is an
//! error here, before a launch spends start-up time on it (or a proxy tries to allocate it).
//! The upper bounds are generous: each is far above the largest published model's value.

use super::Ctx;
use crate::config::diag::{Diagnostic, Severity};

/// Key, the largest plausible value, and what it is.
const RANGES: &[(&str, i64, &str)] = &[
    ("num_layers", 4_096, "layers"),
    ("hidden_size", 1 << 20, "the hidden size"),
    ("ffn_hidden_size", 1 << 22, "the FFN hidden size"),
    ("moe_ffn_hidden_size", 1 << 22, "the expert FFN hidden size"),
    ("num_attention_heads", 16_384, "attention heads"),
    ("num_query_groups", 16_384, "query groups"),
    ("kv_channels", 1 << 16, "the head dimension"),
    ("seq_length", 1 << 26, "the sequence length"),
    (
        "max_position_embeddings",
        1 << 26,
        "the position embeddings",
    ),
    ("micro_batch_size", 1 << 20, "the micro batch"),
    ("global_batch_size", 1 << 30, "the global batch"),
    ("num_experts", 1 << 20, "experts"),
    ("moe_router_topk", 1 << 16, "the routed experts per token"),
    (
        "tensor_model_parallel_size",
        1 << 20,
        "the tensor-parallel size",
    ),
    (
        "pipeline_model_parallel_size",
        1 << 20,
        "the pipeline-parallel size",
    ),
    (
        "context_parallel_size",
        1 << 20,
        "the context-parallel size",
    ),
    (
        "expert_model_parallel_size",
        1 << 20,
        "the expert-parallel size",
    ),
    (
        "expert_tensor_parallel_size",
        1 << 20,
        "the expert tensor-parallel size",
    ),
    ("vocab_size", 1 << 26, "the vocabulary"),
    ("padded_vocab_size", 1 << 26, "the vocabulary"),
];

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    for (key, max, what) in RANGES {
        let Some(v) = cx.int(key) else { continue };
        // A bound the flag catalog sets is checked there (`out-of-range`), not twice.
        let flag = cx.catalog.flag(key);
        let has_min = flag.is_some_and(|f| f.min.is_some());
        let has_max = flag.is_some_and(|f| f.max.is_some());
        let problem = if v < 1 && !has_min {
            format!("{} must be at least 1", cx.show(key))
        } else if v > *max && !has_max {
            format!(
                "{} is beyond any trained model ({what} up to {max} are accepted); a typo?",
                cx.show(key)
            )
        } else {
            continue;
        };
        out.push(
            cx.diag(Severity::Error, "size-range", key, problem)
                .hint(format!("set {what} to a value from 1 to {max}")),
        );
    }
}
