//! The proxy sized from TorchTitan keys: the same shape as the Megatron config of the same model.

use super::*;
use crate::config::{Experiment, LoadOptions, overrides::parse_assignment};
use serde_json::json;

fn resolved(path: &str, set: &[&str], world: u64) -> Value {
    let opts = LoadOptions {
        overrides: set.iter().map(|a| parse_assignment(a).unwrap()).collect(),
        ..LoadOptions::default()
    };
    let exp = Experiment::load(Path::new(path), &opts).unwrap();
    crate::run::profile::resolved_json(&exp.main_module().values(), world)
}

/// What the shape says about the model and the run (not the optimizer's schedule).
fn geometry(s: &ProxyShape) -> Vec<usize> {
    vec![
        s.hidden,
        s.heads,
        s.head_dim,
        s.kv_heads,
        s.ffn,
        usize::from(s.swiglu),
        s.layers,
        s.moe_layers,
        s.seq,
        s.vocab,
        s.micro_batch,
        s.micro_batches,
        s.config_micro_batches,
        s.data_parallel,
        s.recompute_layers,
    ]
}

const TITAN: &str = "presets/examples/experiments/llama3.1_8B-torchtitan-pretrain.yaml";
const MEGATRON: &str = "presets/examples/experiments/llama3_8B-BF16-pretrain.yaml";

#[test]
fn llama3_8b_torchtitan_sizes_the_proxy_as_megatrons_llama3_8b() {
    // TorchTitan: local batch 4, seq 8192, FSDP over 8 → Megatron micro 4, global 4 × 8.
    // Real data on the Megatron side: with mock data Primus runs NullTokenizer (vocab 131072).
    let titan = ProxyShape::from_resolved(&resolved(TITAN, &[], 8));
    let megatron = ProxyShape::from_resolved(&resolved(
        MEGATRON,
        &[
            "micro_batch_size=4",
            "global_batch_size=32",
            "mock_data=false",
        ],
        8,
    ));
    assert_eq!(geometry(&titan), geometry(&megatron));
    // 4096/32, 32 heads × 128 → 128 wide in 4 heads of 32, 8 groups → 1 KV head; FFN 14336/32;
    // 32 layers / 8; seq 8192/64; vocab 128256/256 (the tokenizer's, on the Megatron side)
    assert_eq!(
        (titan.hidden, titan.heads, titan.head_dim, titan.kv_heads),
        (128, 4, 32, 1)
    );
    assert_eq!(
        (titan.ffn, titan.layers, titan.seq, titan.vocab),
        (448, 4, 128, 501)
    );
    assert_eq!((titan.micro_batch, titan.data_parallel), (4, 8));
    assert_eq!(titan.recompute, Recompute::None);
    assert_eq!(titan.train_iters, 50, "training.steps");

    // Checkpointing full / selective op ↔ recompute full uniform / selective.
    let pairs = [
        (
            "activation_checkpoint.mode=full",
            "recompute_granularity=full",
        ),
        (
            "activation_checkpoint.mode=selective",
            "recompute_granularity=selective",
        ),
    ];
    for (t, m) in pairs {
        let a = ProxyShape::from_resolved(&resolved(TITAN, &[t], 8));
        let mut set = vec![
            "micro_batch_size=4",
            "global_batch_size=32",
            "mock_data=false",
            m,
        ];
        if m.ends_with("full") {
            set.extend(["recompute_method=uniform", "recompute_num_layers=1"]);
        }
        let b = ProxyShape::from_resolved(&resolved(MEGATRON, &set, 8));
        assert_eq!(
            (a.recompute, geometry(&a)),
            (b.recompute, geometry(&b)),
            "{t}"
        );
    }
    // The local batch is the micro batch.
    let b2 = ProxyShape::from_resolved(&resolved(TITAN, &["training.local_batch_size=2"], 8));
    assert_eq!((b2.micro_batch, b2.config_micro_batches), (2, 1));
}

#[test]
fn qwen3_8b_from_its_flavor_not_the_defaults() {
    let v = json!({
        "_world_size": 8, "model.name": "qwen3", "model.flavor": "8B",
        "training.seq_len": 4096, "training.local_batch_size": 2,
        "parallelism.data_parallel_shard_degree": -1,
        "activation_checkpoint.mode": "none"
    });
    let s = ProxyShape::from_resolved(&v);
    // dim 4096 → 128; 32 heads × 128 → 4 heads of 32, KV 8 → 1; FFN 12288 → 384; 36 layers →
    // 5 → 4; seq 4096 → 64; vocab 151936 → 594
    assert_eq!(
        (s.hidden, s.heads, s.head_dim, s.kv_heads, s.ffn),
        (128, 4, 32, 1, 384)
    );
    assert_eq!((s.layers, s.seq, s.vocab, s.micro_batch), (4, 64, 594, 2));
    assert!(s.swiglu);
    // An unknown flavor keeps the run's keys and the defaults for the model.
    let mut odd = v.clone();
    odd["model.flavor"] = json!("9B");
    let s = ProxyShape::from_resolved(&odd);
    assert_eq!((s.hidden, s.seq, s.micro_batch), (32, 64, 2));
}
