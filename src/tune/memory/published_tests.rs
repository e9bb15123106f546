//! The Megatron memory model against published figures: Megatron-LM's distributed-optimizer
//! table, Korthikanti et al. 2022 (arXiv 2205.05198), and NeMo (Megatron Bridge)'s theoretical
//! memory estimator. Each test names its source; docs/memory.md tabulates them. Run with
//! `cargo test --lib published`.
//!
//! Where the model deliberately differs from a source (flash attention, token ids, LayerNorm
//! weights replicated over TP), the test says so and checks the rest exactly.

use super::{MemoryEstimate, estimate};
use crate::domain::value::Value;
use std::collections::BTreeMap;

/// Params from `key=value ...` (ints, floats, true/false, else strings).
fn with(kv: &str) -> BTreeMap<String, Value> {
    let parse = |v: &str| {
        if let Ok(i) = v.parse() {
            Value::Int(i)
        } else if let Ok(f) = v.parse() {
            Value::Float(f)
        } else if v == "true" || v == "false" {
            Value::Bool(v == "true")
        } else {
            Value::Str(v.into())
        }
    };
    kv.split_whitespace()
        .filter_map(|a| a.split_once('='))
        .map(|(k, v)| (k.to_string(), parse(v)))
        .collect()
}

fn est(kv: &str, world: u64) -> MemoryEstimate {
    estimate(&with(kv), world).unwrap_or_else(|e| panic!("{kv}: {e}"))
}

/// A GPT with standard attention: h = 1024, a = 16 heads of 64, F = 4h (GELU, no SwiGLU, no
/// GQA), LayerNorm, rope, V = 32,768 (a multiple of 128·TP for TP ≤ 256: no padding),
/// s = 2048, b = 1, Megatron's default dropout 0.1.
const GPT: &str = "hidden_size=1024 ffn_hidden_size=4096 num_attention_heads=16 \
    vocab_size=32768 seq_length=2048 micro_batch_size=1 position_embedding_type=rope \
    normalization=LayerNorm";

// ---------------------------------------------------------------------------------------------
// Megatron-LM, docs/user-guide/features/dist_optimizer.md @ d3528a21 (Primus' pinned
// Megatron-LM), "Distributed Optimizer", the table of theoretical bytes per parameter:
//   fp16 params, fp16 grads: 20 | 4 + 16/d;  bf16 params, fp32 grads: 18 | 6 + 12/d;
//   fp32 params, fp32 grads: 16 | 8 + 8/d   (non-distributed | distributed, d = DP size).
// ---------------------------------------------------------------------------------------------

/// Parameters of [`GPT`] with 4 layers, by hand: attention 2·h·kv·(a + g) = 2·1024·64·32 =
/// 4,194,304; MLP 2·h·F = 8,388,608; two LayerNorms 2·2·h = 4,096 → 12,587,008 a layer, ×4 =
/// 50,348,032; tied embedding h·V = 33,554,432; final LayerNorm 2h = 2,048 → 83,904,512.
const N: f64 = 83_904_512.0;

/// (weights + gradients, optimizer state) per parameter of the 4-layer GPT on `world` GPUs.
fn per_param(kv: &str, world: u64) -> (f64, f64) {
    let m = est(&format!("{GPT} num_layers=4 {kv}"), world);
    ((m.weights_bytes + m.grads_bytes) / N, m.optimizer_bytes / N)
}

#[test]
fn published_megatron_dist_optimizer_table() {
    // (dtype flags, non-distributed bytes/param, distributed: unsharded, sharded over d)
    let rows = [
        ("", 18.0, 6.0, 12.0), // bf16 (Primus' default: trainer_base sets bf16: true)
        ("bf16=true", 18.0, 6.0, 12.0),
        ("fp16=true bf16=false", 20.0, 4.0, 16.0),
        ("bf16=false", 16.0, 8.0, 8.0), // neither: Megatron's fp32 params
    ];
    for (dtype, plain, unsharded, sharded) in rows {
        for d in [1u64, 2, 4, 8, 64] {
            let (state, opt) = per_param(dtype, d);
            assert_eq!(state + opt, plain, "{dtype} d={d} non-distributed");
            let dist = format!("{dtype} use_distributed_optimizer=true");
            let (state, opt) = per_param(&dist, d);
            assert_eq!(state, unsharded, "{dtype} d={d}");
            assert_eq!(opt, sharded / d as f64, "{dtype} d={d}");
        }
    }
}

/// With context parallelism Megatron builds the dense distributed optimizer on the DP×CP group
/// (megatron/core/optimizer/__init__.py @ d3528a21: `data_parallel_group=intra_dp_cp_group`),
/// and NeMo's estimator says so in words (Megatron-Bridge docs/training/memory-estimator.md
/// @ 067f987d, "What It Covers": "For dense parameters, shard_size is data_parallel_size *
/// context_parallel_size"). d in the table is then DP×CP.
#[test]
fn published_dist_optimizer_shards_over_dp_times_cp() {
    for (cp, dp) in [(2u64, 1u64), (2, 4), (4, 2), (8, 8)] {
        let kv = format!("context_parallel_size={cp} use_distributed_optimizer=true");
        let (state, opt) = per_param(&kv, cp * dp);
        assert_eq!(
            (state, opt),
            (6.0, 12.0 / (cp * dp) as f64),
            "CP {cp} DP {dp}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// arXiv 2205.05198, §4 and Table 2 (bytes of activations per transformer layer, 2-byte
// activations, 1-byte dropout masks): no parallelism s·b·h·(34 + 5·a·s/h); TP t
// s·b·h·(10 + 24/t + 5·a·s/(h·t)); TP + SP s·b·h/t·(34 + 5·a·s/h); TP + selective recompute
// s·b·h·(10 + 24/t); TP + SP + selective 34·s·b·h/t; full recompute 2·s·b·h (the layer input).
// Transcribed in shared/research/tuners.md §7.4; the per-layer 34·s·b·h (as 18 + 4·F/h), the
// interleaving factor and the output layer are also Megatron's own theoretical_memory_usage.py
// @ d3528a21, which cites Table 2.
// ---------------------------------------------------------------------------------------------

/// s·b·h of [`GPT`]: 2048 · 1 · 1024.
const SBH: f64 = 2_097_152.0;
/// 5·a·s/h of [`GPT`]: 5 · 16 · 2048 / 1024.
const SCORES: f64 = 160.0;

/// One layer's activations on TP `t` (world t): the activations of 2 layers less those of 1.
/// The embedding, the output layer and one layer's transient attention working set are the
/// same for both and cancel; with one stage one microbatch is in flight.
fn per_layer(kv: &str, t: u64) -> f64 {
    let act = |layers: u32| {
        let kv = format!("{GPT} {kv} num_layers={layers} tensor_model_parallel_size={t}");
        est(&kv, t).activations_bytes
    };
    act(2) - act(1)
}

#[test]
fn published_korthikanti_table2_per_layer() {
    // Standard attention (no flash): Megatron's local attention keeps the softmax output, its
    // dropout mask and output, the paper's 5·a·s²·b.
    let local = "transformer_impl=local";
    let sp = "sequence_parallel=true";
    let sel = "recompute_granularity=selective"; // recompute_modules unset: core_attn
    let t = 4.0;
    let cases = [
        (
            "no parallelism",
            local.to_string(),
            1,
            SBH * (34.0 + SCORES),
        ),
        (
            "TP",
            local.to_string(),
            4,
            SBH * (10.0 + 24.0 / t + SCORES / t),
        ),
        (
            "TP + SP",
            format!("{local} {sp}"),
            4,
            SBH / t * (34.0 + SCORES),
        ),
        (
            "TP + selective",
            format!("{local} {sel}"),
            4,
            SBH * (10.0 + 24.0 / t),
        ),
        (
            "TP + SP + selective",
            format!("{local} {sp} {sel}"),
            4,
            34.0 * SBH / t,
        ),
    ];
    for (case, kv, tp, paper) in cases {
        assert_eq!(per_layer(&kv, tp), paper, "{case}");
    }
    // e.g. no parallelism: 2,097,152 · 194 = 406,847,488 bytes a layer
    assert_eq!(per_layer(local, 1), 406_847_488.0);
    // Full recompute (uniform, one layer a group) keeps each layer's input, 2·s·b·h, split
    // over t with SP; the recomputed layer's working set is counted once, not per layer.
    let full = "recompute_granularity=full recompute_method=uniform recompute_num_layers=1";
    assert_eq!(per_layer(&format!("{local} {full}"), 1), 2.0 * SBH);
    assert_eq!(per_layer(&format!("{local} {sp} {full}"), 4), 2.0 * SBH / t);
}

/// The model's default attention is flash / fused (Transformer Engine): it stores no a·s²
/// scores, so it deliberately drops the paper's 5·a·s/h term in every row; the remaining
/// terms are the paper's.
#[test]
fn published_korthikanti_without_the_score_term_under_flash_attention() {
    let t = 4.0;
    let sp = "sequence_parallel=true";
    assert_eq!(per_layer("", 1), 34.0 * SBH);
    assert_eq!(per_layer("", 4), SBH * (10.0 + 24.0 / t));
    assert_eq!(per_layer(sp, 4), 34.0 * SBH / t);
    assert_eq!(
        per_layer(&format!("{sp} recompute_granularity=selective"), 4),
        34.0 * SBH / t
    );
}

/// TP 4 + SP + selective recompute (flash attention: no working set), PP 4, world 16.
fn pipeline_act(kv: &str) -> f64 {
    let base = "tensor_model_parallel_size=4 sequence_parallel=true \
        recompute_granularity=selective pipeline_model_parallel_size=4";
    est(&format!("{GPT} {base} {kv}"), 16).activations_bytes
}

/// Paper §4 (pipeline parallelism): under 1F1B the first stage holds p microbatches of its L/p
/// layers, 34·s·b·h·L/t in all, plus the embedding dropout mask s·b·h·p/t; interleaving with m
/// chunks multiplies by 1 + (p − 1)/(p·m). The model adds the embedding's int64 token ids,
/// 8·s·b a microbatch in flight (Megatron's theoretical_memory_usage.py has the same term, but
/// divides it by t; the ids are not split over TP).
#[test]
fn published_korthikanti_first_stage_under_1f1b() {
    let (t, p, m) = (4.0, 4.0, 2.0);
    let tokens = 8.0 * 2048.0;
    let embedding = SBH / t + tokens; // a microbatch in flight
    // 1F1B, L = 8, 8 microbatches: 34·SBH·8/4 = 142,606,336 + p·embedding 2,162,688
    let plain = pipeline_act("num_layers=8 global_batch_size=8");
    assert_eq!(plain, 34.0 * SBH * 8.0 / t + p * embedding);
    assert_eq!(plain, 144_769_024.0);
    // interleaved, m = 2 chunks, L = 16: 34·SBH·16/4 · (1 + 3/8) = 392,167,424, and (as
    // Megatron's code does) the embedding's terms times the same factor
    let factor = 1.0 + (p - 1.0) / (p * m);
    let kv = "num_layers=16 global_batch_size=8 num_virtual_stages_per_pipeline_rank=2";
    let interleaved = pipeline_act(kv);
    assert_eq!(
        interleaved,
        (34.0 * SBH * 16.0 / t + p * embedding) * factor
    );
    assert_eq!(interleaved, 395_141_120.0);
    // Megatron's code: with fewer microbatches than stages (2 < 4), only 2 are in flight
    let few = pipeline_act("num_layers=8 global_batch_size=2");
    assert_eq!(few, plain * 2.0 / p);
}

/// Paper §4 (total): with one stage, the output layer adds 4·s·b·h/t·(1 + v/h) (final LayerNorm
/// input and output, fp32 logits for the cross entropy).
#[test]
fn published_korthikanti_output_layer() {
    let t = 4.0;
    let kv = "num_layers=4 tensor_model_parallel_size=4 sequence_parallel=true \
        recompute_granularity=selective";
    let m = est(&format!("{GPT} {kv}"), 4);
    let layers = 4.0 * 34.0 * SBH / t;
    let embedding = SBH / t + 8.0 * 2048.0; // dropout mask; the model's token ids (see above)
    let output = 4.0 * SBH / t * (1.0 + 32768.0 / 1024.0);
    assert_eq!(m.activations_bytes, layers + embedding + output);
    assert_eq!(m.activations_bytes, 141_049_856.0);
}

// ---------------------------------------------------------------------------------------------
// NeMo: Megatron Bridge's theoretical memory estimator, documented in docs/training/
// memory-estimator.md, with its figures in tests/unit_tests/training/utils/
// test_theoretical_memory_utils.py (NVIDIA-NeMo/Megatron-Bridge @ 067f987d). Its `_make_config`:
// L = 4, h = 16, s = 8, F = 64, a = 4, kv = 4, V = 32 (no padding), tied embeddings, TP 2,
// PP 2, b = 2, DP 4, SP + selective recompute, distributed optimizer. NeMo's GPT has rope (no
// position table); its norms have weight and bias (`2 / hidden_size` per layer).
// ---------------------------------------------------------------------------------------------

const NEMO: &str = "num_layers=4 hidden_size=16 seq_length=8 ffn_hidden_size=64 \
    num_attention_heads=4 kv_channels=4 vocab_size=32 make_vocab_size_divisible_by=1 \
    tensor_model_parallel_size=2 micro_batch_size=2 sequence_parallel=true \
    recompute_granularity=selective use_distributed_optimizer=true \
    position_embedding_type=rope normalization=LayerNorm";

fn nemo(kv: &str, world: u64) -> MemoryEstimate {
    est(&format!("{NEMO} {kv}"), world)
}

fn state(m: &MemoryEstimate) -> f64 {
    m.weights_bytes + m.grads_bytes + m.optimizer_bytes
}

/// `test_dense_model_state_estimate_matches_legacy_arithmetic`: 9 bytes/param (6 + 12/4) on
/// 3,400 params, 30,600 bytes. The model holds 3,456 on the first stage's GPU: its LayerNorm
/// weights are replicated over TP as Megatron keeps them (NeMo divides them by TP: +64), and
/// the final LayerNorm lives on the last stage (NeMo puts 1/PP of it on the first: −8).
#[test]
fn published_nemo_dense_model_state() {
    let m = nemo("pipeline_model_parallel_size=2", 16);
    let (nemo_params, ours) = (3_400.0, 3_456.0);
    assert_eq!(m.weights_bytes, 2.0 * ours); // pins the model's count
    assert_eq!(state(&m), 9.0 * ours);
    assert_eq!(state(&m) - 30_600.0, 9.0 * (ours - nemo_params));
}

/// `test_moe_estimate_accounts_for_expert_parallel_sharding`: PP 1, CP 2, DP 8 (world 32), 8
/// experts of width 32 in layers 0 and 2 (`moe_layer_freq=2`), EP 4, ETP 1. Routed: 4,096
/// params a GPU at 7.5 bytes (6 + 12/8, expert DP 32/4 = 8) = 30,720 bytes; dense 4,496 params
/// at 6.75 bytes (6 + 12/(DP 8 × CP 2)) = 30,348. The model matches the routed part and the
/// 6.75 bytes; it holds 4,896 dense params: NeMo counts no router (2 layers × h·E = 256,
/// replicated) and divides the LayerNorms (288) by TP (+144).
#[test]
fn published_nemo_moe_model_state() {
    let kv = "pipeline_model_parallel_size=1 context_parallel_size=2 num_experts=8 \
        moe_layer_freq=2 moe_ffn_hidden_size=32 expert_model_parallel_size=4 \
        expert_tensor_parallel_size=1 moe_router_topk=1";
    let m = nemo(kv, 32);
    let (routed, dense) = (4_096.0, 4_896.0);
    assert_eq!(m.weights_bytes, 2.0 * (dense + routed)); // pins the model's counts
    assert_eq!(routed * 7.5, 30_720.0);
    assert_eq!(state(&m), dense * 6.75 + 30_720.0);
    assert_eq!(state(&m) - 61_068.0, 6.75 * (dense - 4_496.0));
}

/// `test_activation_estimate_is_partitioned_by_tensor_and_context_parallelism` (PP 1, CP 2, one
/// microbatch: 9,568 bytes) and `test_activation_estimate_applies_virtual_pipeline_penalty`
/// (PP 2, VPP 2, 4 microbatches: 22,240 bytes). The model's layers and output match; its int64
/// token ids (8·s·b/CP a microbatch in flight) are not divided by TP, NeMo's are: +32 = 64/2,
/// and +160 = 128/2 × 2.5 microbatches in flight (p·(1 + 1/4)).
#[test]
fn published_nemo_activations() {
    let cp = nemo("context_parallel_size=2 global_batch_size=8", 16);
    assert_eq!(cp.activations_bytes, 9_568.0 + 32.0);
    let kv = "pipeline_model_parallel_size=2 num_virtual_stages_per_pipeline_rank=2 \
        global_batch_size=32";
    let vpp = nemo(kv, 16);
    assert_eq!(vpp.activations_bytes, 22_240.0 + 160.0);
}
