//! The memory model the sweep uses to prune candidates before running them: peak bytes per GPU
//! of the most loaded rank (the first pipeline stage), from a module's resolved Megatron params.
//!
//! Sources (`shared/research/tuners.md` §7, §6.2; `primus.md` §5):
//! * weights, gradients, optimizer: Megatron `theoretical_memory_usage.py`
//!   (`compute_weight_and_optimizer_memory`): 2 + 4 + 12 = 18 bytes/param, 6 + 12/d with the
//!   distributed optimizer (fp16 and fp32 params: the other rows of Megatron's
//!   `dist_optimizer.md` table), d = DP×CP as Megatron shards it; routed experts split over
//!   EP×ETP and sharded over the expert data-parallel size `world / (ETP·EP·PP)`.
//!   `memory/published_tests.rs` checks these against the published figures (docs/memory.md).
//! * activations: Korthikanti et al. 2022, Table 2, term by term (so GQA, SwiGLU, flash attention
//!   and selective recompute change the right terms), Megatron's in-flight microbatch factors.
//! * MoE activations: Primus projection `moe_mlp.py` (top-k routed tokens through the expert MLP).
//! * DeepEP: Primus projection `estimate_deepep_buffer_bytes`, plus the worst-case sizes Primus'
//!   flex dispatcher uses from sync-free stage 2 (`num_worst_tokens`) and 3
//!   (`permute_max_token_num`).
//!
//! What no closed form sees (allocator, RCCL, workspaces) is left to [`Calibration`].
//!
//! TorchTitan configs (dotted keys, a model flavor) have their own model, `titan`: FSDP
//! sharding, TorchTitan's checkpointing modes; [`estimate`] picks it from the keys.

#[cfg(test)]
mod published_tests;
mod terms;
mod titan;

use crate::domain::value::Value;
use crate::megatron;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

type Params = BTreeMap<String, Value>;
#[cfg(any(test, feature = "testkit"))]
const GIB: f64 = (1u64 << 30) as f64;

/// Why a config's memory cannot be estimated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MemoryError {
    #[error("missing `{0}` (a positive number)")]
    Missing(String),
    #[error("missing `padded_vocab_size` or `vocab_size`")]
    NoVocab,
    #[error("cannot read `recompute_layer_ids`")]
    RecomputeIds,
    #[error("missing `recompute_method` (uniform or block)")]
    RecomputeMethod,
    #[error("unknown recompute_granularity `{0}`")]
    RecomputeGranularity(String),
    #[error(transparent)]
    Layers(#[from] crate::megatron::LayerFreqError),
    #[error("unknown TorchTitan model `{model}` (known: {known})")]
    UnknownModel { model: String, known: String },
    #[error("unknown activation checkpointing `{0}` (none, selective with op or N, full)")]
    Checkpointing(String),
    #[error("world size {world} not divisible by {group} {size}")]
    World {
        world: u64,
        group: &'static str,
        size: f64,
    },
}

/// Predicted peak memory of one GPU, by term, in bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEstimate {
    pub weights_bytes: f64,
    pub grads_bytes: f64,
    pub optimizer_bytes: f64,
    pub activations_bytes: f64,
    pub moe_buffers_bytes: f64,
    pub total_bytes: f64,
    /// the terms that could not be modeled, in words (e.g. "optimizer offload fraction ignored")
    pub notes: Vec<String>,
}

/// The table of terms both backends' models fill (Megatron's from [`megatron::Params`]'s sizes,
/// TorchTitan's from [`crate::megatron::titan::Titan`]'s): what one GPU holds at its peak, by
/// kind, in bytes. [`MemoryEstimate::of`] is the one sum.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Terms {
    weights: f64,
    /// the gradients live at the peak
    grads: f64,
    optimizer: f64,
    activations: f64,
    moe_buffers: f64,
}

impl MemoryEstimate {
    /// The estimate of a table of terms: their sum, and the notes of what was not modeled.
    fn of(t: Terms, notes: Vec<String>) -> MemoryEstimate {
        MemoryEstimate {
            weights_bytes: t.weights,
            grads_bytes: t.grads,
            optimizer_bytes: t.optimizer,
            activations_bytes: t.activations,
            moe_buffers_bytes: t.moe_buffers,
            total_bytes: t.weights + t.grads + t.optimizer + t.activations + t.moe_buffers,
            notes,
        }
    }
}

fn num(p: &Params, key: &str) -> Option<f64> {
    match p.get(key)? {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A value, else the default when absent, null or not positive.
fn or(p: &Params, key: &str, default: f64) -> f64 {
    num(p, key).filter(|x| *x > 0.0).unwrap_or(default)
}

fn on(p: &Params, key: &str) -> bool {
    p.get(key).is_some_and(Value::truthy)
}

fn text<'a>(p: &'a Params, key: &str) -> Option<&'a str> {
    p.get(key).and_then(Value::as_str)
}

/// The vocabulary Megatron runs with ([`megatron::Vocab::padded`]), noting when it was read from
/// the tokenizer's name.
fn vocab(
    v: Option<&megatron::Vocab>,
    tp: u64,
    notes: &mut Vec<String>,
) -> Result<f64, MemoryError> {
    let v = v.ok_or(MemoryError::NoVocab)?;
    if let megatron::VocabSource::Tokenizer(tok) = &v.source {
        notes.push(format!("vocab {} from the tokenizer name `{tok}`", v.size));
    }
    Ok(v.padded(tp) as f64)
}

/// The layers of the first pipeline stage, one range per virtual (interleaved) chunk.
fn stage0_chunks(layers: usize, pp: usize, vpp: usize) -> Vec<Range<usize>> {
    let per = layers.div_ceil(pp * vpp).max(1);
    let chunk = |k: usize| (k * pp * per).min(layers)..(k * pp * per + per).min(layers);
    (0..vpp).map(chunk).collect()
}

/// How the layers of the first stage keep their activations.
enum Recompute {
    /// No recompute, or selective: the names of the recomputed modules (`core_attn`, ...).
    Stored(BTreeSet<String>),
    /// Full, one checkpoint per group of n layers.
    Uniform(usize),
    /// Full, the first n layers of each chunk checkpointed one by one.
    Block(usize),
    /// Full, these global layer ids checkpointed (Primus `recompute_layer_ids`).
    Ids(BTreeSet<usize>),
}

const SELECTIVE: &str = "core_attn mlp layernorm moe moe_act shared_experts";

fn recompute(rc: &megatron::Recompute, notes: &mut Vec<String>) -> Result<Recompute, MemoryError> {
    let need_n = |n: &Option<u64>| {
        n.filter(|n| *n >= 1)
            .map(|n| n as usize)
            .ok_or_else(|| MemoryError::Missing("recompute_num_layers".into()))
    };
    match rc {
        megatron::Recompute::None => Ok(Recompute::Stored(BTreeSet::new())),
        megatron::Recompute::Selective(modules) => {
            for m in modules
                .iter()
                .filter(|m| !SELECTIVE.split(' ').any(|k| k == *m))
            {
                notes.push(format!("selective recompute of `{m}` not modeled (kept)"));
            }
            Ok(Recompute::Stored(modules.iter().cloned().collect()))
        }
        megatron::Recompute::Full {
            layer_ids: Some(ids),
            ..
        } => {
            let ids: Result<_, _> = ids.iter().map(|x| x.parse::<usize>()).collect();
            let ids = ids.map_err(|_| MemoryError::RecomputeIds)?;
            Ok(Recompute::Ids(ids))
        }
        megatron::Recompute::Full {
            method, num_layers, ..
        } => match method.as_deref() {
            Some("uniform") => Ok(Recompute::Uniform(need_n(num_layers)?)),
            Some("block") => Ok(Recompute::Block(need_n(num_layers)?)),
            _ => Err(MemoryError::RecomputeMethod),
        },
        megatron::Recompute::Unknown(g) => Err(MemoryError::RecomputeGranularity(g.clone())),
    }
}

/// Peak memory per GPU of the most loaded rank (first pipeline stage), Megatron's formulas with
/// the gaps of tuners.md §7.5 filled: full recompute (2·s·b·h/t per layer input + one layer's
/// working set), selective, none (Korthikanti table), SwiGLU, MoE expert weights split over EP×ETP
/// with the expert data-parallel size for the optimizer, MoE activations (top-k routed tokens
/// through the expert MLP), DeepEP/sync-free stage ≥ 2 buffers from primus.md, distributed
/// optimizer 6 + 12/d bytes (d = DP×CP), CPU offload moving optimizer state off the GPU.
///
/// A TorchTitan module's values ([`crate::megatron::titan::is_torchtitan`]) go to `titan`'s
/// model instead.
pub fn estimate(
    params: &BTreeMap<String, Value>,
    world_size: u64,
) -> Result<MemoryEstimate, MemoryError> {
    let mut notes = Vec::new();
    let terms = if crate::megatron::titan::is_torchtitan(params) {
        titan::terms(params, world_size, &mut notes)?
    } else {
        megatron_terms(params, world_size, &mut notes)?
    };
    Ok(MemoryEstimate::of(terms, notes))
}

/// The terms of the peak of a Megatron config's first stage (see [`estimate`]).
fn megatron_terms(
    params: &Params,
    world_size: u64,
    notes: &mut Vec<String>,
) -> Result<Terms, MemoryError> {
    let shape = terms::Shape::of(params, world_size, notes)?;
    // Bytes per parameter by dtype (bf16: 2 weights, 4 main grads, 12 optimizer state).
    let (dense_params, expert_params) = shape.params();
    let (weight_b, grad_b, _) = shape.bytes_per_param();
    let weights = weight_b * (dense_params + expert_params);
    let grads = grad_b * (dense_params + expert_params);
    let optimizer = shape.optimizer(dense_params, expert_params, notes);
    let act = terms::Activations::of(&shape, notes)?;
    let (activations, stored, working) = act.peak();
    let moe_buffers = act.moe_buffers(stored, working, notes);
    shape.unmodeled(notes);
    Ok(Terms {
        weights,
        grads,
        optimizer,
        activations,
        moe_buffers,
    })
}

/// Calibration from measured trials. While the measured points span a narrow range of
/// predictions (the largest under [`AFFINE_SPREAD`] times the smallest, e.g. the two lowest-memory
/// candidates a sweep runs first, or a single point), measured = a · predicted (through the
/// origin: a slope fitted on close points is noise, and extrapolated to a candidate twice as
/// large it errs by tens of %); over a wider range, measured = a · predicted + c by least
/// squares (the model's missing constant, allocator and communication buffers, is then
/// measurable). predict(x) applies it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Calibration {
    pub scale: f64,
    pub offset_bytes: f64,
    pub points: usize,
}

/// How far apart (largest / smallest prediction) the points must be before an offset is fitted.
pub const AFFINE_SPREAD: f64 = 1.5;

impl Default for Calibration {
    fn default() -> Self {
        Calibration::identity()
    }
}

impl Calibration {
    pub fn identity() -> Self {
        Calibration::fit(&[]) // no points: a = 1, c = 0
    }

    /// Over the finite points with a positive prediction: least squares with an offset when the
    /// predictions span [`AFFINE_SPREAD`] and the slope comes out positive, else the ratio
    /// through the origin (a = Σxy / Σx²); a = 1, c = 0 without points.
    pub fn fit(points: &[(f64 /*predicted*/, f64 /*measured*/)]) -> Calibration {
        let usable = |(x, y): &&(f64, f64)| x.is_finite() && y.is_finite() && *x > 0.0;
        let pts: Vec<(f64, f64)> = points.iter().filter(usable).copied().collect();
        if pts.is_empty() {
            return Calibration {
                scale: 1.0,
                offset_bytes: 0.0,
                points: 0,
            };
        }
        let n = pts.len() as f64;
        let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let hi = pts.iter().map(|p| p.0).fold(0.0, f64::max);
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = pts.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
        let sxy: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
        if hi >= AFFINE_SPREAD * lo && sxx > 0.0 && sxy > 0.0 {
            let scale = sxy / sxx;
            return Calibration {
                scale,
                offset_bytes: my - scale * mx,
                points: pts.len(),
            };
        }
        let xx: f64 = pts.iter().map(|(x, _)| x * x).sum();
        let xy: f64 = pts.iter().map(|(x, y)| x * y).sum();
        Calibration {
            scale: if xy > 0.0 { xy / xx } else { 1.0 },
            offset_bytes: 0.0,
            points: pts.len(),
        }
    }

    pub fn predict(&self, model_bytes: f64) -> f64 {
        self.scale * model_bytes + self.offset_bytes
    }

    /// mean absolute relative error over points
    pub fn error(&self, points: &[(f64, f64)]) -> Option<f64> {
        let usable = |(x, y): &&(f64, f64)| x.is_finite() && y.is_finite() && *y > 0.0;
        let errs: Vec<f64> = points
            .iter()
            .filter(usable)
            .map(|(x, y)| (self.predict(*x) - y).abs() / y)
            .collect();
        (!errs.is_empty()).then(|| errs.iter().sum::<f64>() / errs.len() as f64)
    }
}

/// Why a prediction does not fit, with both numbers in GiB.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[cfg(any(test, feature = "testkit"))]
pub enum NoFit {
    #[error(
        "cannot compare {predicted_gib:.2} GiB with {capacity_gib:.2} GiB at headroom {headroom}"
    )]
    Incomparable {
        predicted_gib: f64,
        capacity_gib: f64,
        headroom: f64,
    },
    #[error(
        "predicted {predicted_gib:.2} GiB per GPU exceeds the {usable_gib:.2} GiB usable ({capacity_gib:.2} GiB less {:.0}% headroom)",
        headroom * 100.0
    )]
    TooBig {
        predicted_gib: f64,
        usable_gib: f64,
        capacity_gib: f64,
        headroom: f64,
    },
}

/// Would this fit? capacity × (1 − headroom) vs the calibrated prediction.
#[cfg(any(test, feature = "testkit"))]
pub fn fits(predicted_bytes: f64, capacity_bytes: f64, headroom: f64) -> Result<(), NoFit> {
    let (pred, cap, budget) = (predicted_bytes / GIB, capacity_bytes / GIB, 1.0 - headroom);
    if !(cap.is_finite() && cap > 0.0 && (0.0..1.0).contains(&headroom) && pred.is_finite()) {
        return Err(NoFit::Incomparable {
            predicted_gib: pred,
            capacity_gib: cap,
            headroom,
        });
    }
    if predicted_bytes <= capacity_bytes * budget {
        return Ok(());
    }
    Err(NoFit::TooBig {
        predicted_gib: pred,
        usable_gib: cap * budget,
        capacity_gib: cap,
        headroom,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Env, Experiment, LoadOptions};
    use proptest::prelude::*;

    /// Set `key=value ...` (ints, floats, true/false/null, else strings).
    fn with(p: &Params, kv: &str) -> Params {
        let mut p = p.clone();
        for (k, v) in kv.split_whitespace().filter_map(|a| a.split_once('=')) {
            let value = if let Ok(i) = v.parse() {
                Value::Int(i)
            } else if let Ok(f) = v.parse() {
                Value::Float(f)
            } else {
                match v {
                    "true" | "false" => Value::Bool(v == "true"),
                    "null" => Value::Null,
                    _ => Value::Str(v.into()),
                }
            };
            p.insert(k.into(), value);
        }
        p
    }

    /// h=1024, F=4096, a=16, L=4, V=32000 (a multiple of 128), s=2048, b=1, t=p=d=1, GELU,
    /// LayerNorm, tied embeddings, rope, Megatron's default dropout 0.1, TE (flash) attention.
    fn tiny() -> Params {
        let kv = "hidden_size=1024 ffn_hidden_size=4096 num_attention_heads=16 num_layers=4 \
            vocab_size=32000 seq_length=2048 micro_batch_size=1 global_batch_size=8 \
            position_embedding_type=rope normalization=LayerNorm";
        with(&Params::new(), kv)
    }

    fn est(p: &Params, world: u64) -> MemoryEstimate {
        estimate(p, world).unwrap()
    }

    fn weights_grads_optimizer(m: &MemoryEstimate) -> f64 {
        m.weights_bytes + m.grads_bytes + m.optimizer_bytes
    }

    // Parameters: attention 2·h·kv·(a+g) = 2·1024·64·32 = 4,194,304; MLP 2·h·F = 8,388,608;
    // norms 2·2·h = 4,096 → 12,587,008 per layer, ×4 = 50,348,032; embedding h·V =
    // 32,768,000; final norm 2h = 2,048 → N = 83,118,080.
    const N: f64 = 83_118_080.0;

    #[test]
    fn tiny_dense_weights_and_optimizer_by_hand() {
        let m = est(&tiny(), 1);
        let terms = (m.weights_bytes, m.grads_bytes, m.optimizer_bytes);
        assert_eq!(terms, (2.0 * N, 4.0 * N, 12.0 * N));
        // 18 bytes/param without the distributed optimizer: 1,496,125,440
        assert_eq!(weights_grads_optimizer(&m), 1_496_125_440.0);
        // distributed optimizer over d = 8: 6 + 12/8 = 7.5 bytes/param = 623,385,600
        let dist = with(&tiny(), "use_distributed_optimizer=true");
        assert_eq!(weights_grads_optimizer(&est(&dist, 8)), 623_385_600.0);
        // CPU offload of half the optimizer state: 12/8/2 bytes/param left on the GPU
        let half = "optimizer_cpu_offload=true optimizer_offload_fraction=0.5";
        let m = est(&with(&dist, half), 8);
        assert_eq!(m.optimizer_bytes, 0.75 * N);
        assert!(m.notes.iter().any(|n| n.contains("50% of optimizer state")));
    }

    // s·b·h = 2,097,152. Per layer (Table 2, TP+SP+selective, t = 1): 34·s·b·h = 71,303,168;
    // ×4 = 285,212,672. Embedding: 8·s·b = 16,384 and dropout mask s·b·h = 2,097,152. Output
    // (p = 1): 4·s·b·h·(1 + V/h) = 8,388,608 + 262,144,000 = 270,532,608. Sum 557,858,816,
    // which is Megatron's compute_activation_memory.
    const SELECTIVE_ACT: f64 = 557_858_816.0;

    fn act(kv: &str) -> f64 {
        est(&with(&tiny(), kv), 1).activations_bytes
    }

    #[test]
    fn tiny_dense_activations_match_the_table() {
        assert_eq!(act("recompute_granularity=selective"), SELECTIVE_ACT);
        // none with flash attention stores no scores: the same
        assert_eq!(act(""), SELECTIVE_ACT);
        // none without flash attention: + 5·a·s²·b = 335,544,320 per layer, ×4 = 1,342,177,280,
        // and while one layer's attention runs, its bf16 scores: 2·a·s²·b = 134,217,728
        const EXTRA: f64 = 134_217_728.0;
        assert_eq!(
            act("transformer_impl=local"),
            SELECTIVE_ACT + 1_342_177_280.0 + EXTRA
        );
        // ... and selective recompute drops that term (table: 34·s·b·h/t); one layer's scores
        // are rebuilt while its attention is recomputed
        let local = "transformer_impl=local recompute_granularity=selective";
        assert_eq!(act(local), SELECTIVE_ACT + 335_544_320.0 + EXTRA);
        // unfused softmax in fp32 (no dropout): 6 bytes a score kept, 2 + 4 more while it runs
        let unfused = "transformer_impl=local masked_softmax_fusion=false attention_dropout=0";
        let scores = 16.0 * 2048.0 * 2048.0;
        assert_eq!(
            act(unfused),
            SELECTIVE_ACT + 4.0 * 6.0 * scores + 6.0 * scores
        );
        let sel = format!("{unfused} recompute_granularity=selective");
        assert_eq!(act(&sel), SELECTIVE_ACT + 12.0 * scores);
        // full, uniform 1: 4 inputs of 2·s·b·h = 16,777,216 + one layer live 71,303,168
        // + embedding 2,113,536 + output 270,532,608 = 360,726,528
        let full = "recompute_granularity=full recompute_num_layers";
        assert_eq!(
            act(&format!("{full}=1 recompute_method=uniform")),
            360_726_528.0
        );
        // full, block 2: 2 inputs 8,388,608 + 2 stored layers 142,606,336 + one live
        // 71,303,168 + 272,646,144 = 494,944,256; Primus layer ids 0 and 1: the same
        assert_eq!(
            act(&format!("{full}=2 recompute_method=block")),
            494_944_256.0
        );
        let ids = "recompute_granularity=full recompute_layer_ids=0,1";
        assert_eq!(act(ids), 494_944_256.0);
    }

    /// The tiny model with 8 experts of width 512 in every layer, top-2, EP 4, world 8 (d = 8,
    /// expert data-parallel 8/(1·4·1) = 2), distributed optimizer.
    fn tiny_moe() -> Params {
        let kv = "num_experts=8 moe_ffn_hidden_size=512 moe_router_topk=2 \
            expert_model_parallel_size=4 use_distributed_optimizer=true";
        with(&tiny(), kv)
    }

    #[test]
    fn tiny_moe_by_hand() {
        let m = est(&tiny_moe(), 8);
        // dense: 4·(attention 4,194,304 + router 8·1024 + norms 4,096) + 32,768,000 + 2,048
        //      = 49,596,416; experts: 4·2·1024·512·8 / EP 4 = 8,388,608
        let (dense, expert) = (49_596_416.0, 8_388_608.0);
        assert_eq!(m.weights_bytes, 2.0 * (dense + expert));
        assert_eq!(m.grads_bytes, 4.0 * (dense + expert));
        assert_eq!(m.optimizer_bytes, 12.0 * (dense / 8.0 + expert / 2.0)); // 124,726,272
        // per layer: attention 13·s·b·h = 27,262,976; MLP part: LN in + out + mask 5·s·b·h =
        // 10,485,760, router probs 4·2048·8 = 65,536, 4,096 routed rows × (2h + 2F + 2F + 4)
        // = 16,793,600, combined output 2·s·b·h = 4,194,304 → 58,802,176; ×4 + 2,113,536
        // + 270,532,608 = 507,854,848
        assert_eq!(m.activations_bytes, 507_854_848.0);
        assert_eq!(m.moe_buffers_bytes, 0.0);
    }

    #[test]
    fn deepep_and_sync_free_buffers_by_hand() {
        let buf = |kv: &str| est(&with(&tiny_moe(), kv), 8).moe_buffers_bytes;
        // DeepEP: 2 · 2048 tokens · top-2 · 2.0 · h · 2 bytes = 33,554,432
        assert_eq!(buf("use_turbo_deepep=true"), 33_554_432.0);
        assert_eq!(buf("turbo_sync_free_moe_stage=1"), 0.0);
        // stage 2: + worst 2048 · 1 · (1·4) = 8,192 rows × (2h + 12·2) = 16,973,824
        assert_eq!(buf("turbo_sync_free_moe_stage=2"), 50_528_256.0);
        // stage 3: expert rows 8,192·2 = 16,384 instead of 4,096: 12,288 × 4,100 × 4 layers
        // = 201,523,200 more
        assert_eq!(buf("turbo_sync_free_moe_stage=3"), 252_051_456.0);
    }

    #[test]
    fn vocab_layer_pattern_and_errors() {
        // 32,001 pads to a multiple of 128·2 = 32,256
        let untied = "tensor_model_parallel_size=2 untie_embeddings_and_output_weights=true";
        let p = with(&tiny(), untied);
        let padded = |v: i64| est(&with(&p, &format!("vocab_size={v}")), 2).weights_bytes;
        assert_eq!(padded(32_001), padded(32_256));
        assert!(padded(32_257) > padded(32_256));
        let mut p = p;
        p.remove("vocab_size");
        assert!(
            estimate(&p, 2)
                .unwrap_err()
                .to_string()
                .contains("vocab_size")
        );
        let p = with(&p, "tokenizer_model=meta-llama/Meta-Llama-3-8B");
        assert!(est(&p, 2).notes.iter().any(|n| n.contains("128256")));
        for key in [
            "hidden_size",
            "num_layers",
            "seq_length",
            "micro_batch_size",
        ] {
            let mut q = tiny();
            q.remove(key);
            assert!(estimate(&q, 1).unwrap_err().to_string().contains(key));
        }
        let err = |p: &Params, kv: &str, w: u64| estimate(&with(p, kv), w).unwrap_err().to_string();
        assert!(err(&tiny(), "recompute_granularity=full", 1).contains("recompute_method"));
        assert!(err(&tiny(), "tensor_model_parallel_size=2", 3).contains("TP×PP×CP 2"));
        let e = err(&tiny_moe(), "moe_layer_freq=[1]*3", 8);
        assert!(e.contains("3 entries"), "{e}");
    }

    /// A small config picked by one number (mixed radix): h, L, TP, PP, VPP, dense or MoE
    /// (first layer dense, EP 2, SwiGLU), recompute mode, sync-free stage.
    fn config(mut n: u32) -> Params {
        let mut pick = |k: u32| {
            let r = n % k;
            n /= k;
            i64::from(r)
        };
        let (h, l, tp, pp) = (256 << pick(3), 4 << pick(2), 1 + pick(2), 1 + pick(2));
        let (vpp, moe, rc, stage) = (pick(2) == 1, pick(2) == 1, pick(5), pick(4));
        let mut kv = vec![
            format!("hidden_size={h} ffn_hidden_size={} num_layers={l}", 3 * h),
            format!("tensor_model_parallel_size={tp} pipeline_model_parallel_size={pp}"),
            "sequence_parallel=true global_batch_size=64".into(),
        ];
        if vpp && pp > 1 {
            kv.push("num_virtual_stages_per_pipeline_rank=2".into());
        }
        if moe {
            kv.push(format!(
                "num_experts=8 moe_ffn_hidden_size={} swiglu=true",
                h / 2
            ));
            kv.push(format!("moe_shared_expert_intermediate_size={h}"));
            kv.push(format!("moe_layer_freq=([0]*1+[1]*{})", l - 1));
            kv.push(format!(
                "expert_model_parallel_size=2 turbo_sync_free_moe_stage={stage}"
            ));
        }
        let full = "recompute_granularity=full recompute_method";
        kv.push(match rc {
            0 => String::new(),
            1 => "recompute_granularity=selective".into(),
            2 => format!("{full}=uniform recompute_num_layers=1"),
            _ => format!("{full}=block recompute_num_layers={}", rc - 2),
        });
        with(&tiny(), &kv.join(" "))
    }

    fn total(p: &Params, kv: &str, world: u64) -> f64 {
        est(&with(p, kv), world).total_bytes
    }

    proptest! {
        #[test]
        fn more_micro_batch_or_sequence_never_less(n: u32, b in 1i64..8, s in 1i64..8) {
            let p = config(n);
            let mb = |b: i64| total(&p, &format!("micro_batch_size={b}"), 16);
            prop_assert!(mb(b) <= mb(b + 1));
            let seq = |s: i64| total(&p, &format!("seq_length={}", 256 * s), 16);
            prop_assert!(seq(s) <= seq(s + 1));
        }

        #[test]
        fn more_block_recomputed_layers_never_more(n: u32, k in 1i64..8) {
            let full = "recompute_granularity=full recompute_method=block recompute_num_layers";
            let rc = |k: i64| total(&config(n), &format!("{full}={k}"), 16);
            prop_assert!(rc(k + 1) <= rc(k));
        }

        #[test]
        fn distributed_optimizer_and_more_data_parallel_never_more(n: u32, k in 1u64..4) {
            let p = config(n);
            let dist = |on: bool, w: u64| total(&p, &format!("use_distributed_optimizer={on}"), w);
            prop_assert!(dist(true, 16 * k) <= dist(false, 16 * k));
            prop_assert!(dist(true, 16 * (k + 1)) <= dist(true, 16 * k));
            prop_assert!(dist(false, 16 * (k + 1)) <= dist(false, 16 * k));
        }

        #[test]
        fn sync_free_stages_order_buffers(n: u32) {
            let p = config(n);
            prop_assume!(p.contains_key("num_experts"));
            let stage = |st: i64| format!("turbo_sync_free_moe_stage={st}");
            let buf = |st: i64| est(&with(&p, &stage(st)), 16).moe_buffers_bytes;
            prop_assert!(buf(1) <= buf(2) && buf(2) <= buf(3) && buf(2) > 0.0);
        }
    }

    #[test]
    fn calibration_recovers_scale_and_offset() {
        // measured = 1.25 · predicted + 2 GiB, exactly representable
        let line = |x: &f64| (x * GIB, 1.25 * x * GIB + 2.0 * GIB);
        let pts: Vec<(f64, f64)> = [10.0, 20.0, 40.0, 64.0].iter().map(line).collect();
        let c = Calibration::fit(&pts);
        assert_eq!((c.scale, c.offset_bytes, c.points), (1.25, 2.0 * GIB, 4));
        assert_eq!(c.error(&pts), Some(0.0));
        assert_eq!(c.predict(8.0 * GIB), 12.0 * GIB);
        // one point: a ratio through the origin
        let c = Calibration::fit(&[(50.0 * GIB, 56.0 * GIB)]);
        assert_eq!((c.scale, c.offset_bytes, c.points), (1.12, 0.0, 1));
        // no points: identity; predictions that do not vary, or close ones: a ratio
        assert_eq!(Calibration::fit(&[]), Calibration::identity());
        let c = Calibration::fit(&[(GIB, 2.0 * GIB), (GIB, 4.0 * GIB)]);
        assert_eq!((c.scale, c.offset_bytes), (3.0, 0.0));
        // two close points on a line with an offset: the slope between them would be noise;
        // the ratio errs by a few % at twice the prediction, not by the slope's error
        let close = [(50.0 * GIB, 20.0 * GIB), (70.0 * GIB, 30.0 * GIB)];
        let c = Calibration::fit(&close);
        assert_eq!(c.offset_bytes, 0.0);
        assert!((c.scale - 3100.0 / 7400.0).abs() < 1e-12);
        // spread over AFFINE_SPREAD: the offset is fitted
        let wide = [(50.0 * GIB, 20.0 * GIB), (110.0 * GIB, 50.0 * GIB)];
        let c = Calibration::fit(&wide);
        assert!((c.scale - 0.5).abs() < 1e-12 && (c.offset_bytes / GIB + 5.0).abs() < 1e-9);
        // identity on points 10 % over: error 1/11
        let id = Calibration::identity();
        let e = id.error(&[(10.0, 11.0), (20.0, 22.0)]).unwrap();
        assert!((e - 1.0 / 11.0).abs() < 1e-12);
        assert_eq!(id.error(&[]), None);
    }

    #[test]
    fn fits_boundaries() {
        let cap = 192.0 * GIB;
        assert!(fits(cap, cap, 0.0).is_ok());
        assert!(fits(cap * 0.9, cap, 0.1).is_ok());
        let err = fits(cap * 0.9 + 1024.0, cap, 0.1).unwrap_err().to_string();
        assert!(
            err.contains("172.80 GiB") && err.contains("192.00 GiB"),
            "{err}"
        );
        assert!(fits(cap + 1.0, cap, 0.0).is_err());
        let nonsense = [
            (0.0, cap, 1.0),
            (0.0, cap, -0.1),
            (0.0, 0.0, 0.1),
            (f64::NAN, cap, 0.1),
        ];
        for (pred, cap, room) in nonsense {
            assert!(fits(pred, cap, room).is_err());
        }
    }

    fn example(name: &str) -> Params {
        let opts = LoadOptions {
            env: Env::default(),
            ..LoadOptions::default()
        };
        let path = format!("presets/examples/experiments/{name}");
        let exp = Experiment::load(path.as_ref(), &opts).unwrap();
        exp.main_module().values()
    }

    #[test]
    fn bundled_examples_estimate_plausibly() {
        let gib = |x: f64| x / GIB;
        // Llama 3 8B on 8 GPUs, TP = PP = 1, distributed optimizer: 8.03 B params × 7.5 bytes
        // ≈ 56 GiB; no recompute at 2 × 8192 tokens: 139,264 bytes/token/layer × 16,384 × 32
        // ≈ 68 GiB + 4 GiB of logits. Meant for one MI300X node (192 GiB): 100–192 GiB.
        let dense = est(&example("llama3_8B-BF16-pretrain.yaml"), 8);
        assert!(
            (50.0..60.0).contains(&gib(weights_grads_optimizer(&dense))),
            "{dense:?}"
        );
        assert!(
            (100.0..192.0).contains(&gib(dense.total_bytes)),
            "{dense:?}"
        );
        // MoE 16B, EP 8: 1.39 B dense params × 7.5 bytes + 1.80 B expert params (26 layers × 64
        // experts / 8) × 18 bytes (expert DP 1) ≈ 40 GiB; 4 × 4096 tokens through 26 MoE
        // layers at ~2.1 GB each ≈ 55 GiB; DeepEP 1.5 GiB. Also sized for one node: 60–192 GiB.
        let moe = est(&example("moe_16B-BF16-pretrain.yaml"), 8);
        assert!((60.0..192.0).contains(&gib(moe.total_bytes)), "{moe:?}");
        assert!((1.0..2.0).contains(&gib(moe.moe_buffers_bytes)), "{moe:?}");
        // Mock data: Primus' mock_data patch runs NullTokenizer with vocab_size 131072, not the
        // tokenizer's 102400.
        assert!(!moe.notes.iter().any(|n| n.contains("102400")), "{moe:?}");
    }
}
