//! TorchTitan experiments of the real Primus tree under `../shared/fixtures/primus`: the spaces
//! that apply to them (and the Megatron ones that do not), their candidates resolved, the proxy
//! sized as the Megatron config of the same model, and the memory model's estimates.
//! Each test is ignored, with the reason, when the fixtures were absent at build time (`build.rs`),
//! and skips with a message on stderr if they go missing after.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use primus_tune::config::overrides::parse_assignment;
use primus_tune::config::{Env, Experiment, LoadOptions};
use primus_tune::proxy::ProxyShape;
use primus_tune::tune::{memory, space};
use std::path::{Path, PathBuf};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/primus");
    if !p.join("primus/configs").is_dir() {
        eprintln!(
            "skipped: the shared Primus fixture tree {} is absent",
            p.display()
        );
        return None;
    }
    Some(p)
}

macro_rules! root_or_skip {
    () => {
        match fixtures() {
            Some(root) => root,
            None => return,
        }
    };
}

const TITAN: [&str; 2] = [
    "examples/torchtitan/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml",
    "examples/torchtitan/configs/MI300X/deepseek_v3_16b-FP8-pretrain.yaml",
];
const MEGATRON_LLAMA: &str = "examples/megatron/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml";

fn load(root: &Path, rel: &str, set: &[&str]) -> Experiment {
    let opts = LoadOptions {
        env: Env::default(),
        overrides: set.iter().map(|a| parse_assignment(a).unwrap()).collect(),
        ..LoadOptions::default()
    };
    Experiment::load(&root.join(rel), &opts).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The DeepSeek-V3 experiment with `set`, linted for `world` (None: unknown).
fn lint_titan(
    root: &Path,
    set: &[&str],
    world: Option<primus_tune::megatron::World>,
) -> Vec<primus_tune::config::diag::Diagnostic> {
    let exp = load(root, TITAN[1], set);
    let catalog = primus_tune::config::catalog::Catalog::builtin();
    primus_tune::config::lint::lint(
        &exp,
        &primus_tune::config::Env::default(),
        world.as_ref(),
        catalog,
    )
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn torchtitan_experiments_get_the_titan_spaces_and_megatron_ones_do_not() {
    let root = root_or_skip!();
    for rel in TITAN {
        let exp = load(&root, rel, &[]);
        for s in space::builtin() {
            match (s.name.starts_with("titan-"), s.not_applicable(&exp)) {
                (true, None) => {}
                (false, Some(why)) => assert!(why.contains("Megatron"), "{rel}: {why}"),
                (titan, why) => panic!("{rel}: {} titan={titan} n/a={why:?}", s.name),
            }
        }
        // Every candidate of the TorchTitan spaces is legal and resolves.
        for name in ["titan-memory-fit", "titan-float8"] {
            let s = space::find(name, None).unwrap();
            let cands = s.candidates_with_baseline(&exp);
            let opts = LoadOptions::default();
            let legal = space::legality(&exp, &opts, &cands, &[]);
            assert!(legal.iter().all(Result::is_ok), "{rel} {name}: {legal:?}");
        }
    }
    let megatron = load(&root, MEGATRON_LLAMA, &[]);
    for name in ["titan-memory-fit", "titan-float8"] {
        let why = space::find(name, None).unwrap().not_applicable(&megatron);
        assert!(why.is_some_and(|w| w.contains("TorchTitan")));
    }
    assert_eq!(
        space::find("memory-fit", None)
            .unwrap()
            .not_applicable(&megatron),
        None
    );
}

fn shape(exp: &Experiment, world: u64) -> ProxyShape {
    let resolved = primus_tune::run::profile::resolved_json(&exp.main_module().values(), world);
    ProxyShape::from_resolved(&resolved)
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn llama3_1_8b_sizes_the_proxy_as_primus_megatron_llama3_1_8b() {
    let root = root_or_skip!();
    // TorchTitan: local batch 4 × seq 8192, FSDP over 8 GPUs; the Megatron example at the same
    // micro batch, global batch and sequence. With mock data Primus runs NullTokenizer (its
    // mock_data patch), so mock data is off here to compare the real Llama 3 tokenizer.
    let titan = shape(&load(&root, TITAN[0], &[]), 8);
    let set = [
        "micro_batch_size=4",
        "global_batch_size=32",
        "mock_data=false",
    ];
    let megatron = shape(&load(&root, MEGATRON_LLAMA, &set), 8);
    let geometry = |s: &ProxyShape| {
        (
            (s.hidden, s.heads, s.head_dim, s.kv_heads, s.ffn, s.swiglu),
            (s.layers, s.seq, s.vocab, s.micro_batch, s.micro_batches),
            (s.data_parallel, s.recompute, s.recompute_layers),
        )
    };
    assert_eq!(geometry(&titan), geometry(&megatron));
    assert_eq!((titan.hidden, titan.ffn, titan.vocab), (128, 448, 501));
    // Checkpointing full ↔ recompute full, every layer.
    let full = shape(
        &load(&root, TITAN[0], &["activation_checkpoint.mode=full"]),
        8,
    );
    assert_eq!(full.recompute_layers, full.layers);
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn the_memory_model_orders_torchtitan_checkpointing_and_batch() {
    let root = root_or_skip!();
    let gib = |x: f64| x / f64::from(1u32 << 30);
    let total = |rel: &str, set: &[&str]| {
        let exp = load(&root, rel, set);
        memory::estimate(&exp.main_module().values(), 8)
            .unwrap_or_else(|e| panic!("{rel} {set:?}: {e}"))
            .total_bytes
    };
    for rel in TITAN {
        let modes = [
            "activation_checkpoint.mode=none",
            "activation_checkpoint.mode=selective",
            "activation_checkpoint.mode=full",
        ];
        let m: Vec<f64> = modes.iter().map(|kv| total(rel, &[kv])).collect();
        assert!(m[0] > m[1] && m[1] > m[2], "{rel}: {m:?}");
        let b: Vec<f64> = [1, 2, 4, 8]
            .iter()
            .map(|n| total(rel, &[&format!("training.local_batch_size={n}")]))
            .collect();
        assert!(b.windows(2).all(|w| w[0] < w[1]), "{rel}: {b:?}");
    }
    // Llama 3.1 8B at 4 × 8192 tokens without checkpointing, FSDP over 8: 8.03 B params ×
    // 16 bytes / 8 ≈ 15 GiB of state, ≈ 4.5 GB of activations per block × 32 and 16 GiB of
    // fp32 logits: meant for one MI300X node (192 GiB).
    let llama = gib(total(TITAN[0], &[]));
    assert!((120.0..192.0).contains(&llama), "{llama} GiB");
}

/// A TorchTitan local batch size sets the global batch (`global_batch_size: -1`), so the sweep
/// times every candidate on the current settings' global batch, and says so. Before, local batch
/// 1 ranked about 5 times faster than 8 for doing an eighth of the work.
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn a_titan_sweep_times_every_local_batch_on_the_same_work() {
    let root = root_or_skip!();
    let d = tempfile::tempdir().unwrap();
    let exp = root.join(TITAN[1]);
    let out = common::cli(d.path())
        .args([
            "sweep",
            exp.to_str().unwrap(),
            "--space",
            "titan-memory-fit",
            // the CPU stand-in measures the step, not what fits a GPU: a labelled demo
            "--allow-unmodeled",
        ])
        .args([
            "--max-trials",
            "2",
            "--no-telemetry",
            // every local batch is measured (else local batch 8, the current one, fits first
            // and the batch rule skips 1)
            "--no-batch-rule",
            "--json",
            "--workspace",
        ])
        .arg(d.path().join("ws"))
        .output()
        .unwrap();
    let rec = &common::last_json(&out)["record"];
    assert_eq!(rec["per_samples"], 8, "local batch 8 at one process: {rec}");
    let step = |lbs: u64| {
        rec["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["overrides"]["training.local_batch_size"] == lbs
                    && c["overrides"]["activation_checkpoint.mode"] == "none"
                    && c["step_ms"].is_number()
            })
            .and_then(|c| c["step_ms"].as_f64())
            .unwrap_or_else(|| panic!("a measured local batch {lbs}: {rec}"))
    };
    let (one, eight) = (step(1), step(8));
    assert!(
        one > 0.5 * eight,
        "per 8 samples, local batch 1 ({one} ms) is not 2× faster than 8 ({eight} ms)"
    );
    let text = common::cli(d.path())
        .args(["studies", "show"])
        .arg(rec_name(&out))
        .arg("--config")
        .arg(&exp)
        .arg("--workspace")
        .arg(d.path().join("ws"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(
            "step times: the 20 % trimmed mean of each candidate's steady steps, ms per 8 samples, \
             the current settings' global batch"
        ),
        "{text}"
    );
}

/// The study name a `sweep --json` printed.
fn rec_name(out: &std::process::Output) -> String {
    common::last_json(out)["study"]
        .as_str()
        .expect("the study's name")
        .to_string()
}

/// `set` on a key that holds a TorchTitan section is refused, naming the section's keys, and
/// nothing is written; its keys are set one by one.
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn setting_a_whole_torchtitan_section_is_refused() {
    let root = root_or_skip!();
    let d = tempfile::tempdir().unwrap();
    let exp = d.path().join("exp.yaml");
    std::fs::copy(root.join(TITAN[1]), &exp).unwrap();
    let before = std::fs::read_to_string(&exp).unwrap();
    let primus = format!("--primus-root={}", root.display());
    let out = common::cli(d.path())
        .args([
            "set",
            exp.to_str().unwrap(),
            "training=3",
            "--write",
            &primus,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`training` is a section (5 keys: local_batch_size"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&exp).unwrap(), before);
    common::cli(d.path())
        .args([
            "set",
            exp.to_str().unwrap(),
            "training.local_batch_size=4",
            "--write",
            &primus,
        ])
        .assert()
        .success();
    let after = std::fs::read_to_string(&exp).unwrap();
    assert!(after.contains("local_batch_size: 4"), "{after}");
}

/// TorchTitan's world asserts (torchtitan v0.2.2, the commit Primus pins), on the DeepSeek-V3
/// 16B experiment (EP 8, `data_parallel_shard_degree: -1`, `global_batch_size: -1`): each
/// rule fires on the settings torchtitan refuses at start-up, names its key, and is silent on
/// the settings it accepts; without a known world only what holds at every world is checked.
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn torchtitan_world_rules_catch_what_torchtitan_asserts_at_start_up() {
    use primus_tune::megatron::{World, WorldSource};
    let root = root_or_skip!();
    let codes = |set: &[&str], gpus: Option<u64>| -> Vec<(String, String)> {
        let world = gpus.map(|gpus| World {
            gpus,
            source: WorldSource::Flag,
        });
        lint_titan(&root, set, world)
            .into_iter()
            .filter(|d| d.code.starts_with("titan-"))
            .map(|d| (d.code.to_string(), d.flag.clone().unwrap_or_default()))
            .collect()
    };
    let code = |set: &[&str], gpus: Option<u64>| -> Vec<String> {
        codes(set, gpus).into_iter().map(|c| c.0).collect()
    };
    // As shipped, on 8 and 16 GPUs: clean.
    assert_eq!(code(&[], Some(8)), Vec::<String>::new());
    assert_eq!(code(&[], Some(16)), Vec::<String>::new());
    // 6 GPUs: dp_shard 6 does not hold EP 8.
    assert_eq!(code(&[], Some(6)), ["titan-world-expert-parallel"]);
    // TP 3 on 8 GPUs: the degrees do not tile the world (no other world rule is checked
    // then); the rules that hold at any world add that 4096 and 16 heads do not split by 3.
    let tp = "parallelism.tensor_parallel_degree".to_string();
    assert_eq!(
        codes(&["parallelism.tensor_parallel_degree=3"], Some(8)),
        [
            ("titan-world-parallel".to_string(), tp.clone()),
            ("titan-seq-divisor".to_string(), tp.clone()),
            ("titan-heads-tensor-parallel".to_string(), tp),
        ]
    );
    // An explicit shard degree that does not multiply out to the world.
    assert_eq!(
        code(&["parallelism.data_parallel_shard_degree=4"], Some(8)),
        ["titan-world-parallel"]
    );
    // ETP other than TP or 1 with EP > 1, at any world size.
    assert!(
        code(
            &[
                "parallelism.tensor_parallel_degree=4",
                "parallelism.expert_tensor_parallel_degree=2"
            ],
            None
        )
        .contains(&"titan-expert-tensor-parallel".to_string())
    );
    // The global batch: a multiple of local × DP (8 × 8 = 64) is accepted, 96 is not; without
    // a world, only a multiple of the local batch is required.
    assert_eq!(
        code(&["training.global_batch_size=128"], Some(8)),
        Vec::<String>::new()
    );
    assert_eq!(
        code(&["training.global_batch_size=96"], Some(8)),
        ["titan-global-batch"]
    );
    assert_eq!(
        code(&["training.global_batch_size=96"], None),
        Vec::<String>::new()
    );
    assert_eq!(
        code(&["training.global_batch_size=12"], None),
        ["titan-global-batch"]
    );
    // A one-process profile (the proxies) builds no parallel groups: no world rule applies.
    let proxy = World {
        gpus: 1,
        source: WorldSource::Profile,
    };
    assert!(
        lint_titan(&root, &[], Some(proxy))
            .iter()
            .all(|d| !d.code.starts_with("titan-world")),
    );
}

/// The TorchTitan rules that hold at any world: Turbo switches without the master flag, async
/// TP without TP, CPU offload with pipeline parallelism; each silent when its condition is not met.
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn torchtitan_turbo_async_tp_and_offload_rules() {
    let root = root_or_skip!();
    let warned = |set: &[&str]| -> Vec<String> {
        lint_titan(&root, set, None)
            .into_iter()
            .map(|d| d.code.to_string())
            .collect()
    };
    assert!(warned(&[]).is_empty(), "{:?}", warned(&[]));
    let off = [
        "primus_turbo.enable_primus_turbo=false",
        "primus_turbo.use_turbo_attention=true",
    ];
    assert!(warned(&off).contains(&"turbo-flag-without-master".to_string()));
    assert!(!warned(&off[1..]).contains(&"turbo-flag-without-master".to_string()));
    let async_tp = ["parallelism.enable_async_tensor_parallel=true"];
    assert!(warned(&async_tp).contains(&"async-tp-without-tp".to_string()));
    let with_tp = [async_tp[0], "parallelism.tensor_parallel_degree=2"];
    assert!(!warned(&with_tp).contains(&"async-tp-without-tp".to_string()));
    let offload = [
        "training.enable_cpu_offload=true",
        "parallelism.pipeline_parallel_degree=2",
    ];
    assert!(warned(&offload).contains(&"cpu-offload-with-pp".to_string()));
    assert!(!warned(&offload[..1]).contains(&"cpu-offload-with-pp".to_string()));
}

/// TorchTitan's rules on a layout that hold at any world: the sequence over TP × 2·CP, the
/// local batch over pipeline microbatches, the heads over TP; each silent as shipped.
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn torchtitan_layout_rules_catch_a_sequence_a_batch_and_heads_that_do_not_split() {
    let root = root_or_skip!();
    let codes = |rel: &str, set: &[&str]| -> Vec<String> {
        let exp = load(&root, rel, set);
        let catalog = primus_tune::config::catalog::Catalog::builtin();
        primus_tune::config::lint::lint(&exp, &primus_tune::config::Env::default(), None, catalog)
            .into_iter()
            .map(|d| d.code.to_string())
            .filter(|c| c.starts_with("titan-"))
            .collect()
    };
    let llama = TITAN[0];
    assert_eq!(codes(llama, &[]), Vec::<String>::new());
    // 8192 over TP 2 × 2·CP 2 = 8: fine; 8190 is not.
    let cp = [
        "parallelism.context_parallel_degree=2",
        "parallelism.tensor_parallel_degree=2",
    ];
    assert_eq!(codes(llama, &cp), Vec::<String>::new());
    let odd = [cp[0], cp[1], "training.seq_len=8190"];
    assert_eq!(codes(llama, &odd), ["titan-seq-divisor"]);
    // PP 2 with a local batch of 4 in microbatches of 3.
    let pp = [
        "parallelism.pipeline_parallel_degree=2",
        "parallelism.pipeline_parallel_microbatch_size=3",
    ];
    assert_eq!(codes(llama, &pp), ["titan-pipeline-microbatch"]);
    assert_eq!(codes(llama, &pp[..1]), Vec::<String>::new(), "microbatch 1");
    // Llama 3 8B has 8 key/value heads: TP 16 cannot split them.
    let tp16 = ["parallelism.tensor_parallel_degree=16"];
    assert_eq!(codes(llama, &tp16), ["titan-heads-tensor-parallel"]);
}
