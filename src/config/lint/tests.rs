//! One passing and one failing config per rule, on a small Primus tree built in a temp folder.

use super::lint;
use crate::config::catalog::Catalog;
use crate::config::diag::{Diagnostic, Severity};
use crate::config::env::Env;
use crate::config::resolve::{Experiment, LoadOptions};
use crate::megatron::World;
use std::path::Path;

/// Module preset defaults the rules read (a tiny stand-in for Primus' trainer_base chain).
const MODULE: &str = "\
enable_primus_turbo: false
use_turbo_attention: false
use_turbo_gemm: false
use_turbo_grouped_gemm: false
use_turbo_deepep: false
turbo_deepep_num_cu: 32
turbo_sync_free_moe_stage: 0
moe_use_fused_router_with_aux_score: false
moe_use_legacy_grouped_gemm: false
fp8: null
fp8_recipe: delayed
fp4: null
fp4_recipe: nvfp4
bf16: true
fp16: false
first_last_layers_bf16: false
use_distributed_optimizer: true
overlap_grad_reduce: false
overlap_param_gather: false
optimizer_cpu_offload: false
use_precision_aware_optimizer: false
recompute_granularity: null
recompute_method: null
recompute_num_layers: null
recompute_layer_ids: null
overlap_moe_expert_parallel_comm: false
tensor_model_parallel_size: 1
pipeline_model_parallel_size: 1
virtual_pipeline_model_parallel_size: null
expert_model_parallel_size: 1
micro_batch_size: 2
lr: 1.0e-4
";

const MODEL: &str = "\
num_layers: 8
hidden_size: 256
moe_router_dtype: null
moe_shared_expert_overlap: true
moe_permute_fusion: false
moe_token_dispatcher_type: alltoall
";

pub(crate) fn write_tree(dir: &Path, overrides: &str) -> std::path::PathBuf {
    let m = dir.join("primus/configs/modules/megatron");
    let md = dir.join("primus/configs/models/megatron");
    std::fs::create_dir_all(&m).unwrap();
    std::fs::create_dir_all(&md).unwrap();
    std::fs::write(m.join("pre_trainer.yaml"), MODULE).unwrap();
    std::fs::write(md.join("tiny.yaml"), MODEL).unwrap();
    let mut text = String::from(
        "work_group: g\nuser_name: u\nexp_name: e\nworkspace: ./out\nmodules:\n  pre_trainer:\n    framework: megatron\n    config: pre_trainer.yaml\n    model: tiny.yaml\n    overrides:\n",
    );
    for line in overrides.lines() {
        text.push_str("      ");
        text.push_str(line);
        text.push('\n');
    }
    if overrides.trim().is_empty() {
        text.push_str("      train_iters: 10\n");
    }
    let p = dir.join("exp.yaml");
    std::fs::write(&p, text).unwrap();
    p
}

fn run(overrides: &str, env: Env) -> Vec<Diagnostic> {
    run_at(overrides, env, None)
}

fn run_at(overrides: &str, env: Env, world: Option<World>) -> Vec<Diagnostic> {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tree(dir.path(), overrides);
    let exp = Experiment::load(
        &p,
        &LoadOptions {
            env: env.clone(),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    lint(&exp, &env, world.as_ref(), Catalog::builtin())
}

fn codes(overrides: &str) -> Vec<&'static str> {
    codes_env(overrides, Env::empty())
}

fn codes_env(overrides: &str, env: Env) -> Vec<&'static str> {
    run(overrides, env).into_iter().map(|d| d.code).collect()
}

fn has(overrides: &str, code: &str) -> bool {
    codes(overrides).contains(&code)
}

#[test]
fn baseline_is_clean() {
    let d = run("", Env::empty());
    assert!(
        d.iter().all(|d| d.severity == Severity::Info),
        "unexpected: {d:#?}"
    );
}

#[test]
fn removed_flags() {
    assert!(has("use_turbo_grouped_mlp: true", "removed-flag"));
    assert!(has("use_turbo_parallel_linear: true", "removed-flag"));
    let d = run("use_turbo_grouped_mlp: true", Env::empty());
    let r = d.iter().find(|d| d.code == "removed-flag").unwrap();
    assert_eq!(r.severity, Severity::Error);
    assert_eq!(r.location.as_ref().unwrap().line, 11);
    assert!(r.hint.as_ref().unwrap().contains("use_turbo_grouped_gemm"));
}

#[test]
fn deepep_rules() {
    let ok = "enable_primus_turbo: true\nuse_turbo_deepep: true\nmoe_router_dtype: fp32\nmoe_shared_expert_overlap: false";
    assert!(!codes(ok).iter().any(|c| c.starts_with("deepep")));
    assert!(has(
        "enable_primus_turbo: true\nuse_turbo_deepep: true\nmoe_shared_expert_overlap: false",
        "deepep-router-dtype"
    ));
    assert!(has(
        "enable_primus_turbo: true\nuse_turbo_deepep: true\nmoe_router_dtype: fp32",
        "deepep-shared-expert-overlap"
    ));
    assert!(has(
        "use_turbo_deepep: true\nmoe_router_dtype: fp32\nmoe_shared_expert_overlap: false",
        "turbo-flag-without-master"
    ));
    let ep16 = format!("{ok}\nexpert_model_parallel_size: 16\nturbo_deepep_num_cu: 64");
    assert!(has(&ep16, "deepep-num-cu-ep16"));
    let ep16_ok = format!("{ok}\nexpert_model_parallel_size: 16\nturbo_deepep_num_cu: 32");
    assert!(!has(&ep16_ok, "deepep-num-cu-ep16"));
    let ep8 = format!("{ok}\nexpert_model_parallel_size: 8\nturbo_deepep_num_cu: 80");
    assert!(!has(&ep8, "deepep-num-cu-ep16"));
    // Another dispatch backend lifts the limit.
    let env = Env::empty().with("PRIMUS_TURBO_MOE_DISPATCH_COMBINE_BACKEND", "DEEP_EP");
    assert!(!codes_env(&ep16, env).contains(&"deepep-num-cu-ep16"));
}

#[test]
fn sync_free_rules() {
    assert!(has("turbo_sync_free_moe_stage: 4", "sync-free-stage-range"));
    assert!(has(
        "turbo_sync_free_moe_stage: 1",
        "sync-free-requires-turbo"
    ));
    assert!(!has(
        "enable_primus_turbo: true\nturbo_sync_free_moe_stage: 1",
        "sync-free-requires-turbo"
    ));
    assert!(has(
        "enable_primus_turbo: true\nturbo_sync_free_moe_stage: 2\nmoe_router_dtype: fp32\nmoe_shared_expert_overlap: false",
        "sync-free-needs-grouped-gemm"
    ));
    let stage2 =
        "enable_primus_turbo: true\nturbo_sync_free_moe_stage: 2\nuse_turbo_grouped_gemm: true";
    // Stage 2 turns DeepEP on, which brings its own prerequisites.
    assert!(has(stage2, "deepep-router-dtype"));
    let stage2_ok = format!("{stage2}\nmoe_router_dtype: fp32\nmoe_shared_expert_overlap: false");
    let c = codes(&stage2_ok);
    assert!(
        !c.iter()
            .any(|c| c.starts_with("sync-free") || c.starts_with("deepep")),
        "{c:?}"
    );
    assert!(has(
        &format!("{stage2_ok}\nmoe_permute_fusion: false"),
        "sync-free-overrides-flag"
    ));
}

#[test]
fn grouped_gemm_and_legacy() {
    assert!(has(
        "enable_primus_turbo: true\nuse_turbo_grouped_gemm: true\nmoe_use_legacy_grouped_gemm: true",
        "turbo-grouped-gemm-legacy"
    ));
    assert!(!has(
        "enable_primus_turbo: true\nmoe_use_legacy_grouped_gemm: true",
        "turbo-grouped-gemm-legacy"
    ));
}

#[test]
fn precision_rules() {
    assert!(has("fp8: e4m3\nfp4: e2m1", "fp8-fp4-exclusive"));
    assert!(!has("fp8: e4m3", "fp8-fp4-exclusive"));
    let tg = "enable_primus_turbo: true\nuse_turbo_gemm: true\nfp8: hybrid";
    assert!(has(tg, "turbo-gemm-fp8-recipe"));
    assert!(!has(
        &format!("{tg}\nfp8_recipe: tensorwise"),
        "turbo-gemm-fp8-recipe"
    ));
    assert!(has(
        "enable_primus_turbo: true\nuse_turbo_gemm: true\nfp4: e2m1",
        "turbo-gemm-fp4-recipe"
    ));
    assert!(has(
        "enable_primus_turbo: true\nuse_turbo_gemm: true\ntensor_model_parallel_size: 2",
        "turbo-gemm-tp"
    ));
    assert!(has(
        "fp8: e4m3\nfirst_last_layers_bf16: true",
        "first-last-bf16-delayed"
    ));
    assert!(!has(
        "fp8: e4m3\nfp8_recipe: tensorwise\nfirst_last_layers_bf16: true",
        "first-last-bf16-delayed"
    ));
}

#[test]
fn overlap_and_optimizer_rules() {
    assert!(has(
        "overlap_param_gather: true",
        "overlap-param-gather-needs-grad-reduce"
    ));
    assert!(has(
        "overlap_param_gather: true\noverlap_grad_reduce: true\nuse_distributed_optimizer: false",
        "overlap-param-gather-needs-dist-opt"
    ));
    assert!(
        !codes("overlap_param_gather: true\noverlap_grad_reduce: true")
            .iter()
            .any(|c| c.starts_with("overlap-param-gather"))
    );
    assert!(has(
        "optimizer_cpu_offload: true",
        "cpu-offload-needs-precision-aware"
    ));
    assert!(!has(
        "optimizer_cpu_offload: true\nuse_precision_aware_optimizer: true",
        "cpu-offload-needs-precision-aware"
    ));
}

#[test]
fn recompute_rules() {
    assert!(has("recompute_granularity: full", "recompute-full-method"));
    assert!(has(
        "recompute_granularity: full",
        "recompute-full-num-layers"
    ));
    let ok = "recompute_granularity: full\nrecompute_method: uniform\nrecompute_num_layers: 2";
    assert!(!codes(ok).iter().any(|c| c.starts_with("recompute")));
    assert!(has(
        "recompute_granularity: full\nrecompute_method: block\nrecompute_num_layers: 9",
        "recompute-num-layers-range"
    ));
    assert!(has(
        "recompute_granularity: selective\nrecompute_method: uniform",
        "recompute-selective-args"
    ));
    assert!(has(
        "recompute_method: uniform",
        "recompute-without-granularity"
    ));
    assert!(!has(
        "recompute_granularity: full\nrecompute_layer_ids: \"0,3,7\"",
        "recompute-layer-ids-range"
    ));
    assert!(has(
        "recompute_granularity: full\nrecompute_layer_ids: [0, 8]",
        "recompute-layer-ids-range"
    ));
    assert!(has(
        "recompute_granularity: selective\nrecompute_layer_ids: [1]",
        "recompute-layer-ids-prereq"
    ));
    assert!(has(
        "recompute_granularity: full\nrecompute_layer_ids: \"a,b\"",
        "recompute-layer-ids-format"
    ));
}

#[test]
fn ep_overlap_rules() {
    let base = "overlap_moe_expert_parallel_comm: true\nmoe_shared_expert_overlap: false";
    assert!(has(base, "ep-overlap-prereq"));
    assert!(!has(
        &format!("{base}\nexpert_model_parallel_size: 8"),
        "ep-overlap-prereq"
    ));
    assert!(has(
        &format!(
            "{base}\nexpert_model_parallel_size: 8\nrecompute_granularity: full\nrecompute_method: uniform\nrecompute_num_layers: 1"
        ),
        "ep-overlap-prereq"
    ));
    assert!(has(
        &format!("{base}\nexpert_model_parallel_size: 8\npipeline_model_parallel_size: 2"),
        "ep-overlap-prereq"
    ));
    // Megatron derives the interleaving from these two keys and ignores a written
    // `virtual_pipeline_model_parallel_size` (`validate_args` sets it to None).
    let pp2 = format!("{base}\nexpert_model_parallel_size: 8\npipeline_model_parallel_size: 2");
    assert!(!has(
        &format!("{pp2}\nnum_virtual_stages_per_pipeline_rank: 2"),
        "ep-overlap-prereq"
    ));
    assert!(!has(
        &format!("{pp2}\nnum_layers: 8\nnum_layers_per_virtual_pipeline_stage: 2"),
        "ep-overlap-prereq"
    ));
    assert!(has(
        &format!("{pp2}\nvirtual_pipeline_model_parallel_size: 2"),
        "ep-overlap-prereq"
    ));
}

#[test]
fn hipblaslt_env_rules() {
    let stage = Env::empty().with("PRIMUS_HIPBLASLT_TUNING_STAGE", "1");
    assert!(codes_env("", stage.clone()).contains(&"hipblaslt-stage-without-master"));
    let both = stage.clone().with("PRIMUS_HIPBLASLT_TUNING", "1");
    assert!(
        !codes_env("", both.clone())
            .iter()
            .any(|c| c.starts_with("hipblaslt"))
    );
    let det = both.with("PRIMUS_DETERMINISTIC", "1");
    assert!(codes_env("", det).contains(&"hipblaslt-stage-deterministic"));
    let bad = Env::empty()
        .with("PRIMUS_HIPBLASLT_TUNING", "1")
        .with("PRIMUS_HIPBLASLT_TUNING_STAGE", "5");
    assert!(codes_env("", bad).contains(&"hipblaslt-stage-invalid"));
    let s3 = Env::empty()
        .with("PRIMUS_HIPBLASLT_TUNING", "1")
        .with("PRIMUS_HIPBLASLT_TUNING_STAGE", "3");
    assert!(codes_env("", s3).contains(&"hipblaslt-stage3-missing-file"));
}

#[test]
fn max_connections_rule() {
    let tp2 = "tensor_model_parallel_size: 2\noverlap_grad_reduce: true";
    let env = Env::empty().with("CUDA_DEVICE_MAX_CONNECTIONS", "8");
    let d = run(tp2, env);
    let c = d.iter().find(|d| d.code == "cuda-max-connections").unwrap();
    assert_eq!(c.severity, Severity::Warning);
    let env = Env::empty().with("CUDA_DEVICE_MAX_CONNECTIONS", "1");
    assert!(!codes_env(tp2, env).contains(&"cuda-max-connections"));
    // TP1/PP1: nothing to say.
    let env = Env::empty().with("CUDA_DEVICE_MAX_CONNECTIONS", "8");
    assert!(!codes_env("overlap_grad_reduce: true", env).contains(&"cuda-max-connections"));
}

#[test]
fn types_ranges_and_typos() {
    assert!(has("micro_batch_size: \"4\"", "wrong-type"));
    assert!(has("micro_batch_size: 0", "out-of-range"));
    assert!(has("turbo_deepep_num_cu: 400", "out-of-range"));
    assert!(has("fp8_recipe: delay", "invalid-value"));
    assert!(has("lr: 1e-4", "float-read-as-string"));
    assert!(!has("lr: 1.0e-4", "float-read-as-string"));
    let d = run("micro_batch_sise: 4", Env::empty());
    let u = d.iter().find(|d| d.code == "unknown-key").unwrap();
    assert!(u.hint.as_ref().unwrap().contains("micro_batch_size"));
    assert_eq!(u.location.as_ref().unwrap().line, 11);
    assert!(has("my_site_knob: 3", "unlisted-key"));
    assert!(has("some_ratio: 5e-3", "float-read-as-string"));
    assert!(has("some_switch: on", "yaml11-bool"));
}

#[test]
fn dropped_model_values_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_tree(dir.path(), "");
    let model = dir.path().join("primus/configs/models/megatron/tiny.yaml");
    std::fs::write(&model, format!("{MODEL}micro_batch_size: 9\n")).unwrap();
    let exp = Experiment::load(&p, &LoadOptions::default()).unwrap();
    let d = lint(&exp, &Env::empty(), None, Catalog::builtin());
    let w = d.iter().find(|d| d.code == "model-value-dropped").unwrap();
    assert_eq!(w.severity, Severity::Warning);
    assert!(w.message.contains("micro_batch_size: 9"), "{}", w.message);
    assert!(w.location.as_ref().unwrap().file.ends_with("tiny.yaml"));
    assert_eq!(w.location.as_ref().unwrap().line, 7);
}

#[test]
fn moe_layer_freq_needs_one_entry_per_layer() {
    // The tiny model has 8 layers.
    assert!(!has("num_experts: 4\nmoe_layer_freq: 2", "moe-layer-freq"));
    assert!(!has(
        "num_experts: 4\nmoe_layer_freq: \"([0]*1+[1]*7)\"",
        "moe-layer-freq"
    ));
    assert!(has(
        "num_experts: 4\nmoe_layer_freq: \"([0]*1+[1]*26)\"",
        "moe-layer-freq"
    ));
    assert!(has(
        "num_experts: 4\nmoe_layer_freq: [1, 0]",
        "moe-layer-freq"
    ));
    // Dense models ignore it.
    assert!(!has("moe_layer_freq: [1, 0]", "moe-layer-freq"));
}

/// The diagnostics of one code at `gpus` GPUs given with `--gpus`.
fn at_gpus(overrides: &str, gpus: u64, code: &str) -> Vec<Diagnostic> {
    run_at(overrides, Env::empty(), World::flag(gpus))
        .into_iter()
        .filter(|d| d.code == code)
        .collect()
}

const WORLD_CODES: [&str; 3] = [
    "world-model-parallel",
    "world-expert-parallel",
    "global-batch-divisibility",
];

#[test]
fn the_world_must_divide_by_tp_pp_cp() {
    let tp_pp = "tensor_model_parallel_size: 2\npipeline_model_parallel_size: 2";
    assert!(at_gpus(tp_pp, 8, "world-model-parallel").is_empty());
    assert!(at_gpus(tp_pp, 4, "world-model-parallel").is_empty());
    let d = at_gpus(tp_pp, 6, "world-model-parallel");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert!(
        d[0].message.contains("world size 6 (--gpus)") && d[0].message.contains("= 4"),
        "{}",
        d[0].message
    );
    // Located at the first parallel size above 1 (the first override line).
    let l = d[0].location.as_ref().unwrap();
    assert!(l.file.ends_with("exp.yaml"));
    assert_eq!((l.line, l.column), (11, 35));
    // Fewer GPUs than one replica needs.
    assert_eq!(
        at_gpus("context_parallel_size: 4", 2, "world-model-parallel").len(),
        1
    );
    // The source is named: the launcher's variables.
    let env = Env::empty().with("GPUS_PER_NODE", "3").with("NNODES", "2");
    let d = run_at(tp_pp, env.clone(), World::from_env(|k| env.get(k)));
    let m = d.iter().find(|d| d.code == "world-model-parallel").unwrap();
    assert!(
        m.message
            .contains("world size 6 (GPUS_PER_NODE × NNODES = 3 × 2)"),
        "{}",
        m.message
    );
}

#[test]
fn the_global_batch_must_split_over_micro_batches_and_data_parallel_ranks() {
    let cfg = "micro_batch_size: 2\nglobal_batch_size: 16";
    // DP 8 × micro 2 = 16 divides; DP 16 × 2 = 32 does not.
    assert!(at_gpus(cfg, 8, "global-batch-divisibility").is_empty());
    let d = at_gpus(cfg, 16, "global-batch-divisibility");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert!(d[0].message.contains("2 × 16 = 32"), "{}", d[0].message);
    assert!(
        d[0].message.contains("world size 16 (--gpus)"),
        "{}",
        d[0].message
    );
    assert_eq!(d[0].flag.as_deref(), Some("global_batch_size"));
    assert_eq!(d[0].location.as_ref().unwrap().line, 12);
    assert!(
        d[0].hint
            .as_ref()
            .unwrap()
            .contains("`global_batch_size: 32`"),
        "{:?}",
        d[0].hint
    );
    // DP counts TP × PP × CP out: 16 GPUs at TP 2 is DP 8.
    let tp = "micro_batch_size: 2\nglobal_batch_size: 16\ntensor_model_parallel_size: 2";
    assert!(at_gpus(tp, 16, "global-batch-divisibility").is_empty());
    // A micro batch not dividing the global batch per rank: 24 / DP 4 = 6, micro 4.
    let odd = "micro_batch_size: 4\nglobal_batch_size: 24";
    assert_eq!(at_gpus(odd, 4, "global-batch-divisibility").len(), 1);
    assert!(at_gpus(odd, 2, "global-batch-divisibility").is_empty());
    // decrease_batch_size_if_needed: Megatron lowers the batch (a warning) while at least one
    // micro batch per rank remains.
    let lower = format!("{cfg}\ndecrease_batch_size_if_needed: true");
    let d = at_gpus(&lower, 16, "global-batch-divisibility");
    assert_eq!(
        d[0].severity,
        Severity::Error,
        "32 > 16: nothing to lower to"
    );
    let d = at_gpus(
        &format!("{odd}\ndecrease_batch_size_if_needed: true"),
        4,
        "global-batch-divisibility",
    );
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(
        d[0].message.contains("global batch of 16"),
        "{}",
        d[0].message
    );
    // A ramp-up schedule has its own calculator.
    let ramp = "micro_batch_size: 2\nglobal_batch_size: 16\nrampup_batch_size: [4, 4, 100]";
    assert!(at_gpus(ramp, 16, "global-batch-divisibility").is_empty());
}

#[test]
fn a_micro_batch_larger_than_the_global_batch_is_an_error_at_any_size() {
    // No world known: only what fails at every data-parallel size.
    let d: Vec<_> = run("micro_batch_size: 32\nglobal_batch_size: 16", Env::empty())
        .into_iter()
        .filter(|d| d.code == "global-batch-divisibility")
        .collect();
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert!(
        d[0].message.contains("at no data-parallel size"),
        "{}",
        d[0].message
    );
    assert!(has(
        "micro_batch_size: 3\nglobal_batch_size: 16",
        "global-batch-divisibility"
    ));
    assert!(!has(
        "micro_batch_size: 4\nglobal_batch_size: 16",
        "global-batch-divisibility"
    ));
}

#[test]
fn expert_parallel_follows_what_megatron_asserts() {
    // world % (ETP × EP × PP): EP 4 × PP 2 = 8 does not divide 4 though TP × PP × CP = 2 does.
    let ep_pp = "num_experts: 8\nexpert_model_parallel_size: 4\npipeline_model_parallel_size: 2";
    assert!(at_gpus(ep_pp, 4, "world-model-parallel").is_empty());
    let d = at_gpus(ep_pp, 4, "world-expert-parallel");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert_eq!(d[0].flag.as_deref(), Some("expert_model_parallel_size"));
    assert!(d[0].message.contains("= 8"), "{}", d[0].message);
    assert!(at_gpus(ep_pp, 8, "world-expert-parallel").is_empty());
    // ETP follows TP when unset: TP 2 × EP 4 = 8 on 4 GPUs fails; ETP 1 fixes it.
    let tp_ep = "num_experts: 8\ntensor_model_parallel_size: 2\nexpert_model_parallel_size: 4";
    let d = at_gpus(tp_ep, 4, "world-expert-parallel");
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("follows TP"), "{}", d[0].message);
    assert!(
        at_gpus(
            &format!("{tp_ep}\nexpert_tensor_parallel_size: 1"),
            4,
            "world-expert-parallel"
        )
        .is_empty()
    );
    // CP does not enter the expert layout: CP 2 × EP 4 on 4 GPUs is legal.
    let cp_ep = "num_experts: 8\ncontext_parallel_size: 2\nexpert_model_parallel_size: 4";
    assert!(at_gpus(cp_ep, 4, "world-expert-parallel").is_empty());
    assert!(at_gpus(cp_ep, 4, "world-model-parallel").is_empty());
    // An expert TP that differs from TP is checked without EP.
    let etp = "expert_tensor_parallel_size: 2";
    let d = at_gpus(etp, 1, "world-expert-parallel");
    assert_eq!(d[0].flag.as_deref(), Some("expert_tensor_parallel_size"));
}

#[test]
fn an_unknown_world_raises_no_world_error() {
    let cfg = "pipeline_model_parallel_size: 3\nnum_experts: 8\nexpert_model_parallel_size: 8\nmicro_batch_size: 2\nglobal_batch_size: 6";
    let d = run(cfg, Env::empty());
    assert!(
        !d.iter().any(|d| WORLD_CODES.contains(&d.code)),
        "no world, no world rule: {d:#?}"
    );
    // The same config has each of them on some world: 4 GPUs do not hold PP 3; on 6 (DP 2)
    // 6 samples do not split into micro batches of 2 on 2 ranks, and EP 8 × PP 3 needs 24.
    let codes = |g| -> Vec<&str> {
        run_at(cfg, Env::empty(), World::flag(g))
            .into_iter()
            .map(|d| d.code)
            .collect()
    };
    assert!(codes(4).contains(&"world-model-parallel"));
    let six = codes(6);
    assert!(six.contains(&"global-batch-divisibility"), "{six:?}");
    assert!(six.contains(&"world-expert-parallel"), "{six:?}");
}

#[test]
fn a_one_process_world_checks_the_batch_but_no_group_sizes() {
    // A proxy runs one process: no parallel group is built, so EP 8 cannot stop it ...
    let moe = "num_experts: 8\nexpert_model_parallel_size: 8\nmicro_batch_size: 4\nglobal_batch_size: 256";
    let d = run_at(moe, Env::empty(), Some(World::one_process()));
    assert!(!d.iter().any(|d| WORLD_CODES.contains(&d.code)), "{d:#?}");
    // ... but its global batch still has to split into its micro batches (DP 1).
    let d = run_at(
        "micro_batch_size: 32\nglobal_batch_size: 16",
        Env::empty(),
        Some(World::one_process()),
    );
    let b = d
        .iter()
        .find(|d| d.code == "global-batch-divisibility")
        .unwrap();
    assert!(
        b.message
            .contains("world size 1 (the launch profile runs one process)"),
        "{}",
        b.message
    );
}

#[test]
fn zero_or_one_for_a_switch_is_a_warning_other_values_stay_errors() {
    // AMD's Llama-3.1-70B FP8 example writes `sequence_parallel: 1`; Primus runs it.
    let d = run("sequence_parallel: 1", Env::empty());
    let w = d
        .iter()
        .find(|d| d.flag.as_deref() == Some("sequence_parallel"))
        .unwrap();
    assert_eq!(
        (w.severity, w.code),
        (Severity::Warning, "bool-written-as-int")
    );
    assert_eq!(w.hint.as_deref(), Some("write `true`"));
    assert_eq!(w.location.as_ref().unwrap().line, 11);
    let d = run("sequence_parallel: 0", Env::empty());
    let w = d.iter().find(|d| d.code == "bool-written-as-int").unwrap();
    assert_eq!(w.hint.as_deref(), Some("write `false`"));
    // Not 0/1, or not an int: a genuinely wrong type.
    for bad in [
        "sequence_parallel: 2",
        "sequence_parallel: \"true\"",
        "sequence_parallel: 1.0",
        "use_turbo_attention: [1]",
    ] {
        let d = run(bad, Env::empty());
        assert!(
            d.iter()
                .any(|d| d.code == "wrong-type" && d.severity == Severity::Error),
            "{bad}: {d:#?}"
        );
    }
    assert!(!has("sequence_parallel: true", "bool-written-as-int"));
}

#[test]
fn duplicate_keys_are_warnings_naming_both_places_in_every_file_read() {
    // In the experiment's overrides: the later `lr` wins.
    let d = run("lr: 1.0e-4\nmicro_batch_size: 4\nlr: 2.0e-4", Env::empty());
    let dup: Vec<_> = d.iter().filter(|d| d.code == "duplicate-key").collect();
    assert_eq!(dup.len(), 1, "{d:#?}");
    let w = dup[0];
    assert_eq!(w.severity, Severity::Warning);
    assert_eq!(w.flag.as_deref(), Some("lr"));
    let l = w.location.as_ref().unwrap();
    assert!(l.file.ends_with("exp.yaml"));
    assert_eq!((l.line, l.column), (11, 7));
    assert!(
        w.message.contains("exp.yaml:11:7")
            && w.message.contains("exp.yaml:13:7")
            && w.message.contains("the later one wins"),
        "{}",
        w.message
    );
    assert!(!has("lr: 1.0e-4\nmicro_batch_size: 4", "duplicate-key"));

    // In a file a preset extends.
    let dir = tempfile::tempdir().unwrap();
    let p = write_tree(dir.path(), "");
    let m = dir.path().join("primus/configs/modules/megatron");
    std::fs::write(m.join("base.yaml"), "log_interval: 1\nlog_interval: 5\n").unwrap();
    std::fs::write(
        m.join("pre_trainer.yaml"),
        format!("extends:\n  - base.yaml\n{MODULE}"),
    )
    .unwrap();
    let exp = Experiment::load(&p, &LoadOptions::default()).unwrap();
    assert_eq!(
        exp.main_module().value("log_interval"),
        Some(&crate::config::Value::Int(5))
    );
    let d = lint(&exp, &Env::empty(), None, Catalog::builtin());
    let w = d.iter().find(|d| d.code == "duplicate-key").unwrap();
    let l = w.location.as_ref().unwrap();
    assert!(l.file.ends_with("base.yaml"), "{l:?}");
    assert_eq!((l.line, l.column), (1, 1));
    assert!(w.message.contains("base.yaml:2:1"), "{}", w.message);
    assert_eq!(w.flag.as_deref(), Some("log_interval"));
}

#[test]
fn experts_must_split_over_expert_parallel_ranks() {
    assert!(!has(
        "num_experts: 8\nexpert_model_parallel_size: 4",
        "experts-expert-parallel"
    ));
    assert!(has(
        "num_experts: 6\nexpert_model_parallel_size: 4",
        "experts-expert-parallel"
    ));
    assert!(has(
        "expert_model_parallel_size: 2",
        "experts-expert-parallel"
    ));
    // EP 1 asks nothing.
    assert!(!has("num_experts: 6", "experts-expert-parallel"));
}

#[test]
fn layers_must_split_over_pipeline_stages_unless_uneven() {
    // The module has 8 layers.
    assert!(!has("pipeline_model_parallel_size: 4", "pipeline-layers"));
    let d: Vec<Diagnostic> = run("pipeline_model_parallel_size: 3", Env::empty())
        .into_iter()
        .filter(|d| d.code == "pipeline-layers")
        .collect();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Error);
    assert!(d[0].message.contains("num_layers: 8"), "{}", d[0].message);
    // The embedding stage counts as a layer: 8 + 1 splits over 3.
    assert!(!has(
        "pipeline_model_parallel_size: 3\naccount_for_embedding_in_pipeline_split: true",
        "pipeline-layers"
    ));
    // Uneven first/last stages are Megatron's way out.
    assert!(!has(
        "pipeline_model_parallel_size: 3\ndecoder_first_pipeline_num_layers: 2",
        "pipeline-layers"
    ));
    // With the virtual stages per rank, validate_args skips the split and the model build
    // asserts it.
    let d = only(
        "pipeline_model_parallel_size: 3\nnum_virtual_stages_per_pipeline_rank: 1",
        "pipeline-layers",
    );
    assert!(
        d.message.contains("when it builds the model"),
        "{}",
        d.message
    );
    let d = only("pipeline_model_parallel_size: 3", "pipeline-layers");
    assert!(d.message.contains("at start-up"), "{}", d.message);
}

#[test]
fn sizes_beyond_any_model_or_below_one_are_errors() {
    assert!(has("num_layers: 1000000000000", "size-range"));
    assert!(has("seq_length: 0", "size-range") || has("seq_length: 0", "out-of-range"));
    assert!(has("num_experts: -8", "size-range") || has("num_experts: -8", "out-of-range"));
    assert!(has("hidden_size: 2000000", "size-range"));
    assert!(!has("num_layers: 126", "size-range"));
    assert!(!has("seq_length: 131072", "size-range"));
    let d = run("num_layers: 1000000000000", Env::empty());
    let d = d.iter().find(|d| d.code == "size-range").unwrap();
    assert_eq!(d.severity, Severity::Error);
    assert!(
        d.message.contains("num_layers: 1000000000000"),
        "{}",
        d.message
    );
}

#[test]
fn a_mapping_where_an_int_belongs_is_an_error_not_the_default() {
    let d = run("micro_batch_size: {a: 1}", Env::empty());
    let e = d
        .iter()
        .find(|d| d.code == "wrong-type" && d.flag.as_deref() == Some("micro_batch_size"))
        .unwrap_or_else(|| panic!("{d:#?}"));
    assert_eq!(e.severity, Severity::Error);
    assert!(e.message.contains("mapping `{a: 1}`"), "{}", e.message);
}

// ---------------------------------------------------------------------------------------------
// The parallel layout (layout.rs)
// ---------------------------------------------------------------------------------------------

/// The findings above info at `world` (None: unknown), as (code, severity), without
/// `unknown-key`: the tiny presets here do not define every Megatron key the layout rules read.
fn layout_findings(overrides: &str, world: Option<World>) -> Vec<(&'static str, Severity)> {
    run_at(overrides, Env::empty(), world)
        .into_iter()
        .filter(|d| d.severity != Severity::Info && d.code != "unknown-key")
        .map(|d| (d.code, d.severity))
        .collect()
}

/// `overrides` breaks exactly one rule, `code`, with `severity` (at any world).
fn breaks_only(overrides: &str, code: &str, severity: Severity) {
    let f = layout_findings(overrides, None);
    assert!(
        f.len() == 1 && f[0].0 == code && f[0].1 == severity,
        "{overrides}: want only {code} ({severity:?}), got {f:?}"
    );
}

/// `overrides` is a legal layout: nothing above info.
fn legal(overrides: &str) {
    let f = layout_findings(overrides, None);
    assert!(f.is_empty(), "{overrides}: {f:?}");
}

/// The one finding of `code` for `overrides` (panics unless there is exactly one).
fn only(overrides: &str, code: &str) -> Diagnostic {
    let mut d: Vec<Diagnostic> = run(overrides, Env::empty())
        .into_iter()
        .filter(|d| d.code == code)
        .collect();
    assert_eq!(d.len(), 1, "{overrides}: {d:#?}");
    d.remove(0)
}

#[test]
fn attention_heads_must_split_over_tensor_parallel_ranks() {
    let bad = "hidden_size: 384\nnum_attention_heads: 12\ntensor_model_parallel_size: 8";
    breaks_only(bad, "heads-tensor-parallel", Severity::Error);
    let d = only(bad, "heads-tensor-parallel");
    assert!(
        d.message.contains(
            "\"num_attention_heads (12) must be a multiple of tensor_model_parallel_size (8).\""
        ),
        "{}",
        d.message
    );
    assert_eq!(d.flag.as_deref(), Some("tensor_model_parallel_size"));
    assert!(d.hint.unwrap().contains("1, 2, 3, 4, 6, 12"));
    legal("hidden_size: 384\nnum_attention_heads: 12\ntensor_model_parallel_size: 4");
}

#[test]
fn query_groups_must_be_a_multiple_or_divisor_of_tensor_parallel() {
    let gqa = "num_attention_heads: 16\ngroup_query_attention: true\ntensor_model_parallel_size: 4";
    breaks_only(
        &format!("{gqa}\nnum_query_groups: 6"),
        "query-groups-tensor-parallel",
        Severity::Error,
    );
    // A multiple of TP, and a divisor (the key/value heads are replicated).
    legal(&format!("{gqa}\nnum_query_groups: 8"));
    legal(&format!("{gqa}\nnum_query_groups: 2"));
    // Unset: Megatron's default 1 divides every TP.
    legal(gqa);
    // Without group-query attention Megatron ignores num_query_groups (the heads count).
    legal("num_attention_heads: 16\nnum_query_groups: 6\ntensor_model_parallel_size: 4");
}

#[test]
fn ffn_widths_must_split_over_tensor_parallel_ranks() {
    breaks_only(
        "ffn_hidden_size: 1000\ntensor_model_parallel_size: 16",
        "ffn-tensor-parallel",
        Severity::Error,
    );
    let d = only(
        "ffn_hidden_size: 1000\ntensor_model_parallel_size: 16",
        "ffn-tensor-parallel",
    );
    assert!(
        d.message.contains("\"1000 is not divisible by 16\""),
        "{}",
        d.message
    );
    legal("ffn_hidden_size: 1024\ntensor_model_parallel_size: 16");
    // Megatron's default width when unset: 4 × 384 = 1536 does not split over 9; the finding
    // names the derived width.
    let d = only(
        "hidden_size: 384\ntensor_model_parallel_size: 9",
        "ffn-tensor-parallel",
    );
    assert!(d.message.contains("derives"), "{}", d.message);
    // A MoE model whose every layer is MoE has no dense MLP; its shared expert splits over TP.
    let moe = "num_experts: 8\nmoe_ffn_hidden_size: 512\nsequence_parallel: true\ntensor_model_parallel_size: 16\nffn_hidden_size: 1000";
    legal(moe);
    breaks_only(
        &format!("{moe}\nmoe_shared_expert_intermediate_size: 1000"),
        "ffn-tensor-parallel",
        Severity::Error,
    );
    // With a dense layer (moe_layer_freq) the dense width counts again.
    breaks_only(
        &format!("{moe}\nmoe_layer_freq: [0, 1, 1, 1, 1, 1, 1, 1]"),
        "ffn-tensor-parallel",
        Severity::Error,
    );
}

#[test]
fn expert_widths_must_split_over_expert_tensor_parallel_ranks() {
    let moe = "num_experts: 8\nexpert_tensor_parallel_size: 8";
    breaks_only(
        &format!("{moe}\nmoe_ffn_hidden_size: 100"),
        "moe-ffn-expert-tensor-parallel",
        Severity::Error,
    );
    legal(&format!("{moe}\nmoe_ffn_hidden_size: 128"));
    // ETP follows TP when unset (and TP 4 on a MoE model needs sequence parallelism).
    let d = only(
        "num_experts: 8\nmoe_ffn_hidden_size: 100\ntensor_model_parallel_size: 8\nsequence_parallel: true\nffn_hidden_size: 1024",
        "moe-ffn-expert-tensor-parallel",
    );
    assert_eq!(d.flag.as_deref(), Some("tensor_model_parallel_size"));
    assert!(d.message.contains("follows TP"), "{}", d.message);
}

#[test]
fn context_parallel_needs_a_sequence_of_two_chunks_per_rank() {
    breaks_only(
        "seq_length: 4098\ncontext_parallel_size: 2",
        "context-parallel-seq-length",
        Severity::Error,
    );
    let d = only(
        "seq_length: 4098\ncontext_parallel_size: 2",
        "context-parallel-seq-length",
    );
    assert!(d.message.contains("at start-up"), "{}", d.message);
    assert!(
        d.message
            .contains("seq-length should be a multiple of 2 * context-parallel-size"),
        "{}",
        d.message
    );
    legal("seq_length: 4096\ncontext_parallel_size: 2");
    // 4098 = 2 × 2049 splits over CP 1 (no context parallelism): nothing to check.
    legal("seq_length: 4098");
}

#[test]
fn sequence_parallel_splits_the_sequence_over_tensor_parallel_ranks() {
    let sp = "sequence_parallel: true\ntensor_model_parallel_size: 4";
    breaks_only(
        &format!("{sp}\nseq_length: 4098"),
        "sequence-parallel-seq-length",
        Severity::Error,
    );
    let d = only(
        &format!("{sp}\nseq_length: 4098"),
        "sequence-parallel-seq-length",
    );
    assert!(d.message.contains("first forward step"), "{}", d.message);
    legal(&format!("{sp}\nseq_length: 4096"));
    // Without sequence parallelism nothing is split.
    legal("tensor_model_parallel_size: 4\nseq_length: 4098");
    // With CP, each CP rank's part is split: 4104 is a multiple of 2 × CP 2 and of TP 8, but
    // its half, 2052, is not a multiple of 8.
    let cp = "sequence_parallel: true\ntensor_model_parallel_size: 8\ncontext_parallel_size: 2";
    breaks_only(
        &format!("{cp}\nseq_length: 4104"),
        "sequence-parallel-seq-length",
        Severity::Error,
    );
    legal(&format!("{cp}\nseq_length: 4096"));
}

#[test]
fn sequence_parallel_at_tp_1_is_a_warning_where_the_experiment_writes_it() {
    breaks_only(
        "sequence_parallel: true",
        "sequence-parallel-tp1",
        Severity::Warning,
    );
    let d = only("sequence_parallel: true", "sequence-parallel-tp1");
    assert_eq!(d.location.as_ref().unwrap().line, 11);
    legal("sequence_parallel: true\ntensor_model_parallel_size: 2");
    legal("sequence_parallel: false");
    // A TP the launch chooses (`${PRIMUS_TP:1}`, 1 here): the setting is for its other values.
    legal("sequence_parallel: true\ntensor_model_parallel_size: ${PRIMUS_TP:1}");
    // Written as 1 it is dead at every launch.
    breaks_only(
        "sequence_parallel: true\ntensor_model_parallel_size: 1",
        "sequence-parallel-tp1",
        Severity::Warning,
    );
}

#[test]
fn moe_with_tensor_parallelism_needs_sequence_parallelism() {
    breaks_only(
        "num_experts: 8\ntensor_model_parallel_size: 2",
        "moe-tp-sequence-parallel",
        Severity::Error,
    );
    legal("num_experts: 8\ntensor_model_parallel_size: 2\nsequence_parallel: true");
    // Dense models do not care.
    legal("tensor_model_parallel_size: 2");
}

#[test]
fn one_way_to_give_the_virtual_pipeline() {
    breaks_only(
        "pipeline_model_parallel_size: 4\nnum_layers_per_virtual_pipeline_stage: 1\nnum_virtual_stages_per_pipeline_rank: 2",
        "vpp-args-exclusive",
        Severity::Error,
    );
    legal("pipeline_model_parallel_size: 4\nnum_virtual_stages_per_pipeline_rank: 2");
}

#[test]
fn a_pipeline_layout_has_a_multiple_of_pp_stages() {
    // Ett|tt|tt|ttL: 4 stages of the module's 8 layers.
    let layout = "pipeline_model_parallel_layout: \"E(tt|)*3,ttL\"";
    breaks_only(
        &format!("{layout}\npipeline_model_parallel_size: 3"),
        "pipeline-layout-stages",
        Severity::Error,
    );
    legal(&format!("{layout}\npipeline_model_parallel_size: 4"));
    // 4 stages on PP 2: two virtual stages per rank, an interleaved schedule PP 2 allows.
    legal(&format!("{layout}\npipeline_model_parallel_size: 2"));
}

#[test]
fn virtual_stages_must_split_the_layers_of_a_pipeline_stage() {
    // 8 layers on PP 2: 4 per stage.
    breaks_only(
        "pipeline_model_parallel_size: 2\nnum_layers_per_virtual_pipeline_stage: 3",
        "vpp-layers",
        Severity::Error,
    );
    legal("pipeline_model_parallel_size: 2\nnum_layers_per_virtual_pipeline_stage: 2");
    breaks_only(
        "pipeline_model_parallel_size: 2\nnum_virtual_stages_per_pipeline_rank: 3",
        "vpp-layers",
        Severity::Error,
    );
    let d = only(
        "pipeline_model_parallel_size: 2\nnum_virtual_stages_per_pipeline_rank: 3",
        "vpp-layers",
    );
    assert!(d.message.contains("builds the model"), "{}", d.message);
    legal("pipeline_model_parallel_size: 2\nnum_virtual_stages_per_pipeline_rank: 4");
    // Layers per virtual stage with uneven stages: Megatron wants the virtual stages per rank.
    breaks_only(
        "pipeline_model_parallel_size: 2\nnum_layers_per_virtual_pipeline_stage: 2\ndecoder_first_pipeline_num_layers: 2",
        "vpp-layers",
        Severity::Error,
    );
}

#[test]
fn the_interleaved_schedule_needs_enough_pipeline_stages() {
    // p2p overlap on (Megatron's default): PP must be above 1.
    breaks_only(
        "num_virtual_stages_per_pipeline_rank: 2",
        "vpp-pipeline-size",
        Severity::Error,
    );
    // Without it, above 2.
    let no_overlap = "num_virtual_stages_per_pipeline_rank: 2\noverlap_p2p_comm: false";
    breaks_only(
        &format!("{no_overlap}\npipeline_model_parallel_size: 2"),
        "vpp-pipeline-size",
        Severity::Error,
    );
    legal(&format!("{no_overlap}\npipeline_model_parallel_size: 4"));
    legal("num_virtual_stages_per_pipeline_rank: 2\npipeline_model_parallel_size: 2");
    // One virtual stage is no virtual pipeline.
    legal("num_virtual_stages_per_pipeline_rank: 1");
}

#[test]
fn virtual_pipeline_model_parallel_size_alone_is_ignored() {
    breaks_only(
        "pipeline_model_parallel_size: 2\nvirtual_pipeline_model_parallel_size: 2",
        "vpp-size-ignored",
        Severity::Warning,
    );
    let d = only(
        "pipeline_model_parallel_size: 2\nvirtual_pipeline_model_parallel_size: 2",
        "vpp-size-ignored",
    );
    assert!(
        d.hint
            .unwrap()
            .contains("`num_virtual_stages_per_pipeline_rank: 2`")
    );
    // Agreeing with what Megatron derives, or saying 1, it misleads no one.
    legal(
        "pipeline_model_parallel_size: 2\nvirtual_pipeline_model_parallel_size: 2\nnum_virtual_stages_per_pipeline_rank: 2",
    );
    legal("virtual_pipeline_model_parallel_size: 1");
}

#[test]
fn the_interleaved_schedule_needs_micro_batches_in_groups_of_pp() {
    // PP 4 × VPP 2 over 8 layers; on 8 GPUs DP is 2, so M = global batch / 2.
    let vpp = "pipeline_model_parallel_size: 4\nnum_virtual_stages_per_pipeline_rank: 2\nmicro_batch_size: 1";
    let at = |gbs: u64, gpus: u64| {
        layout_findings(
            &format!("{vpp}\nglobal_batch_size: {gbs}"),
            World::flag(gpus),
        )
    };
    // M = 8: two groups of PP 4.
    assert!(at(16, 8).is_empty(), "{:?}", at(16, 8));
    // M = 3 < PP 4 (ValueError) and M = 6 (a last group of 2, RuntimeError).
    assert_eq!(at(6, 8), [("vpp-microbatches", Severity::Error)]);
    assert_eq!(at(12, 8), [("vpp-microbatches", Severity::Error)]);
    // On 4 GPUs (DP 1) 12 micro batches are three groups.
    assert!(at(12, 4).is_empty(), "{:?}", at(12, 4));
    // Unknown world: not checked.
    let none = |cfg: &str, world: Option<World>| {
        let f = layout_findings(cfg, world);
        assert!(f.is_empty(), "{cfg}: {f:?}");
    };
    none(&format!("{vpp}\nglobal_batch_size: 6"), None);
    // Not interleaved: any M.
    none(
        "pipeline_model_parallel_size: 4\nmicro_batch_size: 1\nglobal_batch_size: 6",
        World::flag(8),
    );
    // Primus' zero_bubble.yaml turns these on by default; without patch_zero_bubble Megatron's
    // interleaved schedule still runs.
    assert_eq!(
        layout_findings(
            &format!(
                "{vpp}\nglobal_batch_size: 6\nenable_zb_runtime: true\nenable_zero_bubble: true"
            ),
            World::flag(8)
        ),
        [("vpp-microbatches", Severity::Error)]
    );
    // Primus' zero-bubble schedules replace Megatron's interleaved one.
    none(
        &format!("{vpp}\nglobal_batch_size: 6\npatch_zero_bubble: true"),
        World::flag(8),
    );
}
