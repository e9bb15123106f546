//! The run's schedule and optimizer settings, with Megatron's defaults where it has one
//! (`megatron/training/arguments.py`): what a short training loop needs besides the model.

use super::{number, switch, whole};
use crate::domain::value::Value;

/// `lr_decay_style`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecayStyle {
    Constant,
    Linear,
    Cosine,
    InverseSquareRoot,
    /// A style this view does not model (WSD, ...), named.
    Other,
}

/// Schedule, optimizer and seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Training {
    /// `train_iters` (no default: Megatron needs it or `train_samples`).
    pub train_iters: Option<u64>,
    /// `lr` (no default in Megatron).
    pub lr: Option<f64>,
    /// `min_lr` (default 0).
    pub min_lr: f64,
    /// `lr_warmup_iters` when set, else `lr_warmup_fraction` of the decay iterations.
    pub warmup_iters: Option<u64>,
    pub warmup_fraction: Option<f64>,
    /// `lr_decay_iters` (Megatron's default: the training iterations).
    pub decay_iters: Option<u64>,
    /// `lr_decay_style` (default linear).
    pub decay_style: DecayStyle,
    /// Adam's β1, β2, ε (defaults 0.9, 0.999, 1e-8), `weight_decay` (0.01), `clip_grad` (1.0).
    pub adam_beta1: f64,
    pub adam_beta2: f64,
    pub adam_eps: f64,
    pub weight_decay: f64,
    pub clip_grad: f64,
    /// `init_method_std` (0.02) and `seed` (1234).
    pub init_std: f64,
    pub seed: u64,
    /// `gradient_accumulation_fusion` (on unless `--no-gradient-accumulation-fusion`).
    pub grad_accum_fusion: bool,
    /// How gradients and parameters cross the data-parallel group: `use_distributed_optimizer`
    /// (reduce-scatter and all-gather instead of an all-reduce), `overlap_grad_reduce` (with
    /// the backward pass), `grad_reduce_in_bf16` (else fp32), all off by default.
    pub distributed_optimizer: bool,
    pub overlap_grad_reduce: bool,
    pub grad_reduce_in_bf16: bool,
}

impl Training {
    pub(super) fn from_values<'a>(get: &impl Fn(&str) -> Option<&'a Value>) -> Training {
        let float = |k: &str, default: f64| number(get(k)).unwrap_or(default);
        let count = |k: &str| whole(get(k));
        let style = get("lr_decay_style")
            .and_then(Value::as_str)
            .map(|s| s.trim().to_ascii_lowercase());
        Training {
            train_iters: count("train_iters"),
            lr: number(get("lr")),
            min_lr: float("min_lr", 0.0),
            warmup_iters: count("lr_warmup_iters"),
            warmup_fraction: number(get("lr_warmup_fraction")),
            decay_iters: count("lr_decay_iters"),
            decay_style: match style.as_deref() {
                None | Some("linear") => DecayStyle::Linear,
                Some("constant") => DecayStyle::Constant,
                Some("cosine") => DecayStyle::Cosine,
                Some("inverse-square-root") => DecayStyle::InverseSquareRoot,
                Some(_) => DecayStyle::Other,
            },
            adam_beta1: float("adam_beta1", 0.9),
            adam_beta2: float("adam_beta2", 0.999),
            adam_eps: float("adam_eps", 1e-8),
            weight_decay: float("weight_decay", 0.01),
            clip_grad: float("clip_grad", 1.0),
            init_std: float("init_method_std", 0.02),
            seed: count("seed").unwrap_or(1234),
            grad_accum_fusion: get("gradient_accumulation_fusion").is_none_or(|v| switch(Some(v))),
            distributed_optimizer: switch(get("use_distributed_optimizer")),
            overlap_grad_reduce: switch(get("overlap_grad_reduce")),
            grad_reduce_in_bf16: switch(get("grad_reduce_in_bf16")),
        }
    }
}
