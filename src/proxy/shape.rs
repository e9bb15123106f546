//! The scaled-down model and run the proxy trains, derived from Megatron's parameters.

use super::*;
use crate::domain::value::map_from_json;
use crate::megatron::{self, DecayStyle, Params, Training};

/// Hidden size, attention width, FFN sizes are divided by this (then by TP where Megatron shards).
pub const WIDTH_DIV: usize = 32;
/// Sequence length is divided by this (then by the context-parallel size). Twice the width
/// divisor: one sequence then makes a GEMM of 64–128 rows, where (as on a GPU) a bigger micro
/// batch still buys efficiency; attention's share of the work is half the real one.
pub const SEQ_DIV: usize = 64;
/// Vocabulary is divided by this: width (÷32) times depth (÷8), so the LM head keeps its share
/// of the work.
pub const VOCAB_DIV: usize = 256;
/// Layers per pipeline stage are divided by this, then clamped to `1..=MAX_LAYERS`.
pub const LAYER_DIV: usize = 8;
pub const MAX_LAYERS: usize = 4;
/// At most this many experts (or `moe_router_topk` if larger); top-k is kept.
pub const MAX_EXPERTS: usize = 8;
/// The micro-batch count is divided down so one iteration stays within about this many FLOPs
/// (~0.05–0.3 s on one core at the 25–40 GFLOP/s the proxy's GEMM sizes reach).
pub const ITERATION_FLOP_BUDGET: f64 = 8e9;

/// Activation recomputation, from `recompute_granularity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recompute {
    None,
    /// Attention probabilities are recomputed in backward instead of kept.
    Selective,
    /// The first `recompute_layers` layers keep only their input and rerun their forward.
    Full,
}

/// `lr_decay_style`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LrDecay {
    Constant,
    Linear,
    Cosine,
    InverseSquareRoot,
}

/// The scaled-down model and run the proxy trains. Fields are public so a caller can adjust one.
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyShape {
    pub hidden: usize,
    pub heads: usize,
    pub head_dim: usize,
    /// Key/value heads (grouped-query attention; `heads` when not grouped).
    pub kv_heads: usize,
    /// Dense MLP intermediate size (per TP rank).
    pub ffn: usize,
    pub swiglu: bool,
    pub layers: usize,
    /// The last `moe_layers` layers are MoE layers (0 = dense model).
    pub moe_layers: usize,
    pub experts: usize,
    pub topk: usize,
    pub moe_ffn: usize,
    /// Shared-expert intermediate size (0 = none).
    pub shared_ffn: usize,
    pub seq: usize,
    pub vocab: usize,
    pub micro_batch: usize,
    /// Micro batches run per iteration (after the FLOP-budget cap).
    pub micro_batches: usize,
    /// `global_batch_size / (micro_batch_size × DP)` of the config.
    pub config_micro_batches: usize,
    pub data_parallel: usize,
    pub recompute: Recompute,
    /// With [`Recompute::Full`]: how many layers, from the first, are recomputed.
    pub recompute_layers: usize,
    /// `gradient_accumulation_fusion` (Megatron's default: on). Off, every micro batch writes its
    /// weight gradients to a fresh buffer and adds them to the accumulated ones: a per-micro-batch
    /// cost proportional to the parameters, which a larger micro batch amortises.
    pub grad_accum_fusion: bool,
    pub train_iters: u64,
    pub lr: f64,
    pub min_lr: f64,
    pub warmup_iters: u64,
    pub decay_iters: u64,
    pub decay: LrDecay,
    pub adam_beta1: f64,
    pub adam_beta2: f64,
    pub adam_eps: f64,
    pub weight_decay: f64,
    /// Global-norm gradient clipping threshold (0 = off).
    pub clip_grad: f64,
    pub init_std: f64,
    pub seed: u64,
}

fn ceil_div(a: usize, b: usize) -> usize {
    a.div_ceil(b.max(1))
}

/// The fraction of the real layers that are MoE layers (all of them when `moe_layer_freq` is
/// unset or unreadable).
fn moe_fraction(moe: &megatron::Moe, layers: usize) -> f64 {
    match moe.layer_pattern(layers as u64) {
        Ok(p) if !p.is_empty() => p.iter().filter(|m| **m).count() as f64 / p.len() as f64,
        _ => 1.0,
    }
}

/// A trial's `resolved.json` object as the Megatron parameters the proxy reads, and the world
/// size the tool wrote beside them (`_world_size`, at least 1). A TorchTitan trial's values are
/// first read as the Megatron values of the same model and run
/// ([`megatron::titan::megatron_view`]); keys already held under Megatron names are kept.
pub fn params_of(v: &Value) -> (Params, usize) {
    let mut values = map_from_json(v);
    let world = values
        .get("_world_size")
        .and_then(|w| w.as_f64().or_else(|| w.as_str()?.trim().parse().ok()))
        .filter(|w| w.is_finite() && *w >= 1.0)
        .map_or(1, |w| w as usize);
    if let Some(view) = megatron::titan::megatron_view(&values, Some(world as u64)) {
        for (k, x) in view {
            values.entry(k).or_insert(x);
        }
    }
    (Params::from_values(&values), world)
}

/// The proxy's attention heads for a width of heads × kv_channels ÷ (32·TP): (heads, head
/// dimension, key/value heads in the config's query-group ratio, dividing the heads).
fn attention_heads(
    tp: usize,
    heads_real: usize,
    kv: usize,
    groups: usize,
) -> (usize, usize, usize) {
    let width = ceil_div(heads_real * kv, WIDTH_DIV * tp).max(8);
    let heads = ceil_div(width, (kv / 4).max(8)).max(1);
    let head_dim = ceil_div(width, heads);
    let mut kv_heads = (heads / (heads_real / groups.max(1)).max(1)).clamp(1, heads);
    while !heads.is_multiple_of(kv_heads) {
        kv_heads -= 1;
    }
    (heads, head_dim, kv_heads)
}

/// The config's recomputation, and how many of the proxy's `layers` it recomputes (`block`
/// keeps its fraction of the `stage_layers` a pipeline stage holds).
fn recompute_of(
    rc: &megatron::Recompute,
    layers: usize,
    stage_layers: usize,
) -> (Recompute, usize) {
    match rc {
        megatron::Recompute::Full {
            method, num_layers, ..
        } => {
            let n = match (method.as_deref(), num_layers) {
                (Some("block"), Some(n)) => {
                    ceil_div((*n as usize).min(stage_layers) * layers, stage_layers).min(layers)
                }
                _ => layers,
            };
            (Recompute::Full, n)
        }
        megatron::Recompute::Selective(_) => (Recompute::Selective, 0),
        megatron::Recompute::None | megatron::Recompute::Unknown(_) => (Recompute::None, 0),
    }
}

/// (train iterations, warm-up iterations, decay iterations, decay style), as Megatron reads
/// them; a style the proxy does not model runs constant.
fn lr_schedule(t: &Training) -> (u64, u64, u64, LrDecay) {
    let train_iters = t.train_iters.unwrap_or(10).max(1);
    let decay_iters = t.decay_iters.unwrap_or(train_iters);
    let warmup_iters = t
        .warmup_iters
        .or_else(|| t.warmup_fraction.map(|f| (f * decay_iters as f64) as u64))
        .unwrap_or(0);
    let decay = match t.decay_style {
        DecayStyle::Linear => LrDecay::Linear,
        DecayStyle::Cosine => LrDecay::Cosine,
        DecayStyle::InverseSquareRoot => LrDecay::InverseSquareRoot,
        DecayStyle::Constant | DecayStyle::Other => LrDecay::Constant,
    };
    (train_iters, warmup_iters, decay_iters, decay)
}

impl ProxyShape {
    /// The proxy of a trial's `resolved.json` object: [`params_of`], then
    /// [`ProxyShape::from_params`].
    pub fn from_resolved(v: &Value) -> ProxyShape {
        let (params, world) = params_of(v);
        ProxyShape::from_params(&params, world)
    }

    /// Derives the proxy from Megatron's parameters ([`megatron::Params`], its only input) on
    /// `world` GPUs. Sizes the config leaves unknown get Megatron-like stand-ins (hidden 1024,
    /// 24 layers, 16 heads, seq 2048, vocabulary 32000, learning rate 1e-4, 10 iterations).
    ///
    /// Scaling (every rule is monotone in its knob, so the config's knobs keep their direction):
    /// - DP = world / (TP × PP × CP), at least 1;
    /// - hidden = ⌈hidden_size / 32⌉ (≥ 16); attention width = ⌈heads × kv_channels / (32·TP)⌉
    ///   split into heads of ⌈kv_channels / 4⌉ (≥ 8) dims, key/value heads in the config's
    ///   query-group ratio (≥ 1, dividing the heads); ffn = ⌈ffn_hidden_size / (32·TP)⌉;
    /// - layers = ⌈⌈num_layers / PP⌉ / 8⌉ clamped to 1..=4; MoE layers keep their fraction of
    ///   `moe_layer_freq` (at least one), placed last;
    /// - experts = min(num_experts, max(8, top-k)); top-k = min(moe_router_topk, experts);
    ///   expert ffn = ⌈moe_ffn_hidden_size / 32⌉; shared expert = ⌈size / (32·TP)⌉;
    /// - seq = ⌈seq_length / (64·CP)⌉ (≥ 8); vocab = ⌈vocabulary / (256·TP)⌉ (≥ 32), the
    ///   vocabulary before padding ([`megatron::Vocab`]);
    /// - micro batch size unchanged; micro batches n = global / (micro × DP), run as ⌈n / D⌉
    ///   with D = ⌈n × FLOPs per micro batch / [`ITERATION_FLOP_BUDGET`]⌉ (≥ 1). n × FLOPs per
    ///   micro batch does not depend on the micro batch size, so D does not either: the count
    ///   stays proportional to the config's (up to rounding) and is the config's when it fits;
    /// - recompute `full` with method `block` recomputes ⌈recompute_num_layers × layers /
    ///   stage layers⌉ layers, otherwise all layers.
    pub fn from_params(p: &Params, world: usize) -> ProxyShape {
        let par = &p.parallelism;
        let (tp, pp, cp) = (par.tp as usize, par.pp as usize, par.cp as usize);
        let data_parallel = (world.max(1) / (tp * pp * cp)).max(1);
        let size = |x: Option<u64>, stand_in: usize| x.map_or(stand_in, |x| x as usize).max(1);
        let hidden_real = size(p.shape.hidden, 1024);
        let heads_real = size(p.shape.heads, 16);
        let kv = p
            .shape
            .kv_channels
            .map_or(hidden_real / heads_real, |k| k as usize)
            .max(1);
        let groups = p.shape.query_groups.map_or(heads_real, |g| g as usize);
        let layers_real = size(p.shape.layers, 24);
        let ffn_real = p.shape.ffn.map_or_else(
            || megatron::default_ffn(hidden_real as u64, p.shape.swiglu) as usize,
            |f| f as usize,
        );
        let seq_real = p.shape.seq.map_or(2048, |s| s as usize);
        let micro_batch = size(p.batch.micro, 1);
        let global_batch = p
            .batch
            .global
            .map_or(micro_batch * data_parallel, |g| g as usize)
            .max(1);
        let vocab_real = p.vocab.as_ref().map_or(32_000, |v| v.size as usize);

        let hidden = ceil_div(hidden_real, WIDTH_DIV).max(16);
        let (heads, head_dim, kv_heads) = attention_heads(tp, heads_real, kv, groups);
        let ffn = ceil_div(ffn_real, WIDTH_DIV * tp).max(8);
        let layers = ceil_div(ceil_div(layers_real, pp), LAYER_DIV).clamp(1, MAX_LAYERS);

        let moe = p.moe.as_ref();
        let (experts, topk, moe_layers) = match moe {
            Some(m) => {
                let topk_real = (m.topk as usize).max(1);
                let experts = (m.experts as usize).min(MAX_EXPERTS.max(topk_real));
                let frac = moe_fraction(m, layers_real);
                let moe_layers = ((frac * layers as f64).round() as usize).clamp(1, layers);
                (experts, topk_real.min(experts), moe_layers)
            }
            None => (0, 0, 0),
        };
        let moe_ffn = ceil_div(
            moe.and_then(|m| m.ffn).map_or(ffn_real, |f| f as usize),
            WIDTH_DIV,
        )
        .max(4);
        let shared_ffn = match moe.map_or(0, |m| m.shared_ffn as usize) {
            n if n > 0 && experts > 0 => ceil_div(n, WIDTH_DIV * tp).max(4),
            _ => 0,
        };

        let (recompute, recompute_layers) =
            recompute_of(&p.recompute, layers, ceil_div(layers_real, pp));
        let t = &p.training;
        let (train_iters, warmup_iters, decay_iters, decay) = lr_schedule(t);

        let mut shape = ProxyShape {
            hidden,
            heads,
            head_dim,
            kv_heads,
            ffn,
            swiglu: p.shape.swiglu,
            layers,
            moe_layers,
            experts,
            topk,
            moe_ffn,
            shared_ffn,
            seq: ceil_div(seq_real, SEQ_DIV * cp).max(8),
            vocab: ceil_div(vocab_real, VOCAB_DIV * tp).max(32),
            micro_batch,
            micro_batches: 1,
            config_micro_batches: (global_batch / (micro_batch * data_parallel)).max(1),
            data_parallel,
            recompute,
            recompute_layers,
            grad_accum_fusion: t.grad_accum_fusion,
            train_iters,
            lr: t.lr.unwrap_or(1e-4),
            min_lr: t.min_lr,
            warmup_iters,
            decay_iters,
            decay,
            adam_beta1: t.adam_beta1,
            adam_beta2: t.adam_beta2,
            adam_eps: t.adam_eps,
            weight_decay: t.weight_decay,
            clip_grad: t.clip_grad,
            init_std: t.init_std,
            seed: t.seed,
        };
        let n = shape.config_micro_batches;
        let total = n as f64 * shape.estimated_flops_per_micro_batch();
        let divisor = ((total / ITERATION_FLOP_BUDGET).ceil() as usize).max(1);
        shape.micro_batches = n.div_ceil(divisor);
        shape
    }

    /// GEMM FLOPs of one micro batch's forward + backward without recompute (the budget basis).
    pub fn estimated_flops_per_micro_batch(&self) -> f64 {
        let (h, w, s) = (self.hidden as f64, self.width() as f64, self.seq as f64);
        let mlp = |f: usize| {
            let f = f as f64;
            2.0 * h * f * if self.swiglu { 3.0 } else { 2.0 }
        };
        let qkv = ((self.heads + 2 * self.kv_heads) * self.head_dim) as f64;
        let attn = 2.0 * h * qkv + 2.0 * w * h + 4.0 * s * w;
        let dense = mlp(self.ffn);
        let shared = if self.shared_ffn > 0 {
            mlp(self.shared_ffn)
        } else {
            0.0
        };
        let moe = 2.0 * h * self.experts as f64 + self.topk as f64 * mlp(self.moe_ffn) + shared;
        let dense_layers = (self.layers - self.moe_layers.min(self.layers)) as f64;
        let per_token = self.layers as f64 * attn
            + dense_layers * dense
            + self.moe_layers as f64 * moe
            + 2.0 * h * self.vocab as f64;
        3.0 * per_token * (self.micro_batch * self.seq) as f64
    }

    fn width(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Samples one iteration stands for across DP ranks: what the line's `global batch size` says.
    pub fn global_batch(&self) -> u64 {
        (self.micro_batches * self.micro_batch * self.data_parallel) as u64
    }

    /// Megatron's learning-rate schedule at step `iteration` (1-based): linear warmup, then decay
    /// from `lr` to `min_lr` over `decay_iters`.
    pub fn learning_rate(&self, iteration: u64) -> f64 {
        let step = iteration as f64;
        let warmup = self.warmup_iters as f64;
        if self.warmup_iters > 0 && iteration <= self.warmup_iters {
            return self.lr * step / warmup;
        }
        match self.decay {
            LrDecay::Constant => self.lr,
            LrDecay::InverseSquareRoot => self
                .min_lr
                .max(self.lr * warmup.max(1.0).sqrt() / step.max(1.0).sqrt()),
            LrDecay::Linear | LrDecay::Cosine => {
                if iteration > self.decay_iters || self.decay_iters <= self.warmup_iters {
                    return self.min_lr;
                }
                let ratio = (step - warmup) / (self.decay_iters as f64 - warmup);
                let coeff = if self.decay == LrDecay::Linear {
                    1.0 - ratio
                } else {
                    0.5 * ((std::f64::consts::PI * ratio).cos() + 1.0)
                };
                self.min_lr + coeff * (self.lr - self.min_lr)
            }
        }
    }

    /// One line describing the proxy, printed before the first iteration.
    /// An upper estimate of the host memory the proxy needs, in bytes: four f32 arrays per
    /// parameter (value, gradient, two Adam moments) and one micro batch's activations (a
    /// dozen hidden-wide and three ffn-wide f32 vectors per token and layer, and the attention
    /// scores). Saturates instead of overflowing.
    pub fn estimated_bytes(&self) -> u128 {
        let u = |x: usize| x as u128;
        let width = u(self.heads) * u(self.head_dim);
        let kv = u(self.kv_heads) * u(self.head_dim);
        let attn = u(self.hidden) * (2 * width + 2 * kv);
        let mlp_mats = if self.swiglu { 3 } else { 2 };
        let dense_layers = u(self.layers.saturating_sub(self.moe_layers));
        let mlp = u(self.hidden) * u(self.ffn) * mlp_mats;
        let moe = u(self.experts) * u(self.hidden) * u(self.moe_ffn) * mlp_mats
            + u(self.hidden) * u(self.experts)
            + u(self.hidden) * u(self.shared_ffn) * mlp_mats;
        let params = u(self.layers) * attn
            + dense_layers * mlp
            + u(self.moe_layers) * moe
            + 2 * u(self.vocab) * u(self.hidden);
        let tokens = u(self.micro_batch) * u(self.seq);
        let per_token =
            12 * u(self.hidden) + 3 * u(self.ffn.max(self.moe_ffn)) + u(self.heads) * u(self.seq);
        let activations = tokens * per_token * u(self.layers) + tokens * u(self.vocab);
        (params * 4 + activations).saturating_mul(4)
    }

    pub fn describe(&self) -> String {
        let moe = if self.moe_layers > 0 {
            format!(
                " ({} MoE: {} experts top-{}, expert ffn {}, shared ffn {})",
                self.moe_layers, self.experts, self.topk, self.moe_ffn, self.shared_ffn
            )
        } else {
            String::new()
        };
        let recompute = match self.recompute {
            Recompute::None => "none".to_string(),
            Recompute::Selective => "selective".to_string(),
            Recompute::Full => format!("full ({} layers)", self.recompute_layers),
        };
        format!(
            "primus-tune proxy-cpu: hidden {}, heads {}x{} (kv {}), ffn {}{}, layers {}{}, seq {}, \
             vocab {}, micro batch {} x {} per iteration (config {}, DP {}), recompute {}, \
             grad-accumulation fusion {}, ~{:.2} GFLOP per micro batch",
            self.hidden,
            self.heads,
            self.head_dim,
            self.kv_heads,
            self.ffn,
            if self.swiglu { " swiglu" } else { "" },
            self.layers,
            moe,
            self.seq,
            self.vocab,
            self.micro_batch,
            self.micro_batches,
            self.config_micro_batches,
            self.data_parallel,
            recompute,
            if self.grad_accum_fusion { "on" } else { "off" },
            self.estimated_flops_per_micro_batch() / 1e9
        )
    }
}
