//! Recommendations. Without measurements they are rules — the seed guide, Primus' patch notes
//! and validation code (research/primus.md §5) and the lint engine's fixes — each labelled `rule`
//! with its source. Measured recommendations come from a study (`measured`, with evidence).

use crate::config::catalog::Catalog;
use crate::config::diag::{Diagnostic, Severity};
use crate::config::env::Env;
use crate::config::{Experiment, lint};
use crate::telemetry::hardware::GpuModel;
use serde::Serialize;
use serde_json::{Value as Json, json};

/// What a recommendation rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// A rule of the guide, Primus or Megatron, with its source.
    Rule,
    /// A study's pick, measured on a GPU.
    Measured,
    /// A study's pick on a CPU stand-in: how the knob moves the step, not GPU evidence.
    Proxy,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    pub flag: String,
    /// The recommended value.
    pub value: Json,
    /// The effective value now (`null` when unset).
    pub current: Json,
    pub basis: Basis,
    pub reason: String,
    /// Where the rule or the evidence comes from.
    pub source: String,
    /// An environment variable of the launch (not written into the YAML by `--apply`).
    pub env: bool,
}

/// What the rules know about the machine.
#[derive(Debug, Clone, Default)]
pub struct Context<'a> {
    pub gpu: Option<&'a GpuModel>,
    /// The world size the job runs on (lint's world rules; None: unknown).
    pub world: Option<crate::megatron::World>,
}

struct Cx<'a> {
    exp: &'a Experiment,
    env: &'a Env,
    out: Vec<Recommendation>,
}

impl Cx<'_> {
    fn current(&self, flag: &str) -> Json {
        self.exp
            .main_module()
            .value(flag)
            .map_or(Json::Null, |v| v.to_json())
    }

    fn int(&self, flag: &str) -> i64 {
        self.current(flag).as_i64().unwrap_or(0)
    }

    fn on(&self, flag: &str) -> bool {
        self.current(flag).as_bool().unwrap_or(false)
    }

    /// Recommend `flag = value` unless it already is, or something already recommends the flag.
    fn add(&mut self, flag: &str, value: Json, reason: impl Into<String>, source: &str) {
        if self.out.iter().any(|r| r.flag == flag) {
            return;
        }
        let current = self.current(flag);
        if current == value || (value.is_null() && current.is_null()) {
            return;
        }
        self.out.push(Recommendation {
            flag: flag.to_string(),
            value,
            current,
            basis: Basis::Rule,
            reason: reason.into(),
            source: source.to_string(),
            env: false,
        });
    }

    fn add_env(&mut self, var: &str, value: &str, reason: impl Into<String>, source: &str) {
        if self.out.iter().any(|r| r.flag == var) || self.env.get(var) == Some(value) {
            return;
        }
        self.out.push(Recommendation {
            flag: var.to_string(),
            value: json!(value),
            current: self.env.get(var).map_or(Json::Null, |v| json!(v)),
            basis: Basis::Rule,
            reason: reason.into(),
            source: source.to_string(),
            env: true,
        });
    }
}

/// The fixes the lint engine's errors and warnings call for, where the fix is one value.
fn lint_fixes(cx: &mut Cx, diags: &[Diagnostic]) {
    for d in diags.iter().filter(|d| d.severity != Severity::Info) {
        let src = format!("lint: {}", d.code);
        let why = d.message.clone();
        match d.code {
            "deepep-num-cu-ep16" => cx.add("turbo_deepep_num_cu", json!(32), why, &src),
            "sync-free-needs-grouped-gemm" => {
                cx.add("use_turbo_grouped_gemm", json!(true), why, &src)
            }
            "sync-free-requires-turbo" | "turbo-flag-without-master" => {
                cx.add("enable_primus_turbo", json!(true), why, &src)
            }
            "deepep-router-dtype" => cx.add("moe_router_dtype", json!("fp32"), why, &src),
            "deepep-shared-expert-overlap" => {
                cx.add("moe_shared_expert_overlap", json!(false), why, &src)
            }
            "overlap-param-gather-needs-grad-reduce" => {
                cx.add("overlap_grad_reduce", json!(true), why, &src)
            }
            "overlap-param-gather-needs-dist-opt" | "fp8-param-gather-needs-dist-opt" => {
                cx.add("use_distributed_optimizer", json!(true), why, &src)
            }
            "cpu-offload-needs-precision-aware" => {
                cx.add("use_precision_aware_optimizer", json!(true), why, &src)
            }
            "turbo-gemm-fp8-recipe" => cx.add("fp8_recipe", json!("tensorwise"), why, &src),
            "turbo-gemm-fp4-recipe" => cx.add("fp4_recipe", json!("mxfp4"), why, &src),
            "recompute-full-method" => cx.add("recompute_method", json!("uniform"), why, &src),
            "recompute-selective-args" => {
                cx.add("recompute_method", Json::Null, why.clone(), &src);
                cx.add("recompute_num_layers", Json::Null, why, &src);
            }
            "cuda-max-connections" => cx.add_env("CUDA_DEVICE_MAX_CONNECTIONS", "1", why, &src),
            _ => {}
        }
    }
}

/// Rule-based recommendations for the experiment's main module.
/// `gemm` is the HipBLASLt tuning state (with the stored stage-3 comparison), as the checklist
/// reads it.
pub fn rules(
    exp: &Experiment,
    env: &Env,
    ctx: &Context,
    gemm: &crate::gemm::status::GemmStatus,
) -> Vec<Recommendation> {
    let catalog = Catalog::builtin();
    let diags = lint::lint(exp, env, ctx.world.as_ref(), catalog);
    let mut cx = Cx {
        exp,
        env,
        out: Vec::new(),
    };
    lint_fixes(&mut cx, &diags);
    let m = exp.main_module();
    if !m.is_megatron() {
        return cx.out;
    }
    let moe = cx.int("num_experts") > 0;
    let ep = cx.int("expert_model_parallel_size").max(1);
    let guide = "Primus performance-tuning guide §2 (Primus-Turbo)";
    // Kernels: Primus-Turbo on, attention and (MoE) grouped GEMMs through it.
    cx.add(
        "enable_primus_turbo",
        json!(true),
        "the Primus-Turbo kernels are off; every other Turbo flag needs this master switch",
        guide,
    );
    cx.add(
        "use_turbo_attention",
        json!(true),
        "Turbo attention kernels (needs enable_primus_turbo)",
        guide,
    );
    if moe {
        cx.add(
            "use_turbo_grouped_gemm",
            json!(true),
            "MoE expert GEMMs through the Turbo grouped GEMM (also required by sync-free stage >= 2)",
            guide,
        );
        sync_free(&mut cx, ctx);
        deepep(&mut cx, ep);
    }
    // Communication overlap wants one hardware queue per device for ordering.
    let overlap = cx.on("overlap_grad_reduce") || cx.int("tensor_model_parallel_size") > 1;
    if overlap {
        cx.add_env(
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "1",
            "with gradient-reduce overlap or TP > 1, one connection keeps the communication kernels ordered before compute",
            "Primus performance-tuning guide §5 (communication overlap); Megatron arguments.py",
        );
    }
    hipblaslt(&mut cx, gemm);
    cx.out
}

fn sync_free(cx: &mut Cx, ctx: &Context) {
    let arch = ctx.gpu.map(|g| g.name.as_str());
    let (stage, why) = match arch {
        Some("MI300X" | "MI325X") => (2, "stage 2 is recommended on MI300X/MI325X"),
        Some("MI350X" | "MI355X") => (1, "stage 1 is recommended on MI355X"),
        _ => return, // the stage depends on the GPU; without it, the sweep measures it
    };
    let src = "Primus patch notes; docs/04-technical-guides/moe-training.md";
    if cx.int("turbo_sync_free_moe_stage") == stage {
        return;
    }
    cx.add(
        "turbo_sync_free_moe_stage",
        json!(stage),
        format!("{why} (stage 3 only with memory to spare: it uses much more GPU memory)"),
        src,
    );
    if stage >= 2 {
        let pre = "sync-free stage >= 2 turns on DeepEP, which requires it";
        cx.add("use_turbo_grouped_gemm", json!(true), pre, src);
        cx.add(
            "moe_router_dtype",
            json!("fp32"),
            pre,
            "Primus DeepEP validation",
        );
        cx.add(
            "moe_shared_expert_overlap",
            json!(false),
            pre,
            "Primus DeepEP validation",
        );
    }
}

fn deepep(cx: &mut Cx, ep: i64) {
    let uses = cx.on("use_turbo_deepep")
        || cx.int("turbo_sync_free_moe_stage") >= 2
        || cx
            .out
            .iter()
            .any(|r| r.flag == "turbo_sync_free_moe_stage" && r.value.as_i64() >= Some(2));
    if !uses {
        return;
    }
    let src = "Primus patch notes: \"64 or 80 for ep8, 32 for ep16-64 is best practice\"";
    let cu = cx.int("turbo_deepep_num_cu");
    if ep >= 16 && cu != 32 {
        cx.add(
            "turbo_deepep_num_cu",
            json!(32),
            format!("EP {ep} (>= 16): 32 CUs; Primus asserts <= 32 there"),
            src,
        );
    } else if ep <= 8 && cu != 64 && cu != 80 {
        cx.add(
            "turbo_deepep_num_cu",
            json!(64),
            format!("EP {ep}: 64 or 80 CUs (then measure both with `sweep deepep-cu`)"),
            src,
        );
    }
}

/// The next HipBLASLt stage (seed guide §1), from the same status `gemm-tune` shows.
fn hipblaslt(cx: &mut Cx, st: &crate::gemm::status::GemmStatus) {
    if !st.applicable || st.in_use {
        return;
    }
    let Some(stage) = st.next else { return };
    let why = match stage {
        1 => "GEMMs are not tuned yet: stage 1 dumps the GEMM shapes of a short run",
        2 => "shapes are dumped: stage 2 tunes them offline",
        _ => "tuned GEMMs exist: stage 3 trains with them",
    };
    cx.add_env(
        "PRIMUS_HIPBLASLT_TUNING",
        "1",
        why,
        "Primus performance-tuning guide §1 (HipBLASLt autotuning)",
    );
    cx.add_env(
        "PRIMUS_HIPBLASLT_TUNING_STAGE",
        &stage.to_string(),
        why,
        "Primus performance-tuning guide §1 (HipBLASLt autotuning)",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadOptions;
    use crate::config::overrides::Override;
    use crate::config::value::Value;
    use std::path::Path;

    const MOE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";

    fn rules_here(exp: &Experiment, ctx: &Context) -> Vec<Recommendation> {
        let st = crate::gemm::status::of_experiment(exp, &Env::default(), None, None);
        rules(exp, &Env::default(), ctx, &st)
    }

    fn load(sets: &[(&str, Value)]) -> Experiment {
        let opts = LoadOptions {
            env: Env::default(),
            overrides: sets
                .iter()
                .map(|(k, v)| Override {
                    key: k.to_string(),
                    value: v.clone(),
                    text: format!("{k}={v}"),
                })
                .collect(),
            ..LoadOptions::default()
        };
        Experiment::load(Path::new(MOE), &opts).unwrap()
    }

    fn find<'a>(r: &'a [Recommendation], flag: &str) -> Option<&'a Recommendation> {
        r.iter().find(|x| x.flag == flag)
    }

    fn gpu(name: &str) -> &'static GpuModel {
        crate::telemetry::hardware::lookup(name).unwrap()
    }

    #[test]
    fn ep16_with_too_many_cus_gets_32_from_the_lint_fix() {
        let exp = load(&[
            ("expert_model_parallel_size", Value::Int(16)),
            ("use_turbo_deepep", Value::Bool(true)),
            ("moe_router_dtype", Value::Str("fp32".into())),
            ("moe_shared_expert_overlap", Value::Bool(false)),
            ("turbo_deepep_num_cu", Value::Int(80)),
        ]);
        let r = rules_here(&exp, &Context::default());
        let cu = find(&r, "turbo_deepep_num_cu").expect("a CU recommendation");
        assert_eq!(cu.value, json!(32));
        assert_eq!(cu.current, json!(80));
        assert_eq!(cu.basis, Basis::Rule);
        assert!(cu.source.contains("deepep-num-cu-ep16"), "{}", cu.source);
    }

    #[test]
    fn ep8_gets_64_cus_when_deepep_is_on() {
        let exp = load(&[
            ("expert_model_parallel_size", Value::Int(8)),
            ("use_turbo_deepep", Value::Bool(true)),
            ("moe_router_dtype", Value::Str("bf16".into())),
            ("turbo_deepep_num_cu", Value::Int(32)),
        ]);
        let r = rules_here(&exp, &Context::default());
        assert_eq!(find(&r, "turbo_deepep_num_cu").unwrap().value, json!(64));
        // And the DeepEP prerequisites it breaks are fixed too.
        assert_eq!(find(&r, "moe_router_dtype").unwrap().value, json!("fp32"));
    }

    #[test]
    fn the_sync_free_stage_follows_the_gpu() {
        let exp = load(&[
            ("turbo_sync_free_moe_stage", Value::Int(0)),
            ("use_turbo_grouped_gemm", Value::Bool(false)),
        ]);
        let mi300 = Context {
            gpu: Some(gpu("AMD Instinct MI300X")),
            world: None,
        };
        let r = rules_here(&exp, &mi300);
        assert_eq!(
            find(&r, "turbo_sync_free_moe_stage").unwrap().value,
            json!(2)
        );
        assert_eq!(
            find(&r, "use_turbo_grouped_gemm").unwrap().value,
            json!(true)
        );
        let mi355 = Context {
            gpu: Some(gpu("AMD Instinct MI355X")),
            world: None,
        };
        let r = rules_here(&exp, &mi355);
        assert_eq!(
            find(&r, "turbo_sync_free_moe_stage").unwrap().value,
            json!(1)
        );
        let r = rules_here(&exp, &Context::default());
        assert!(
            find(&r, "turbo_sync_free_moe_stage").is_none(),
            "unknown GPU: no rule"
        );
    }

    #[test]
    fn hipblaslt_tuning_is_recommended_until_done() {
        let exp = load(&[]);
        let r = rules_here(&exp, &Context::default());
        let t = find(&r, "PRIMUS_HIPBLASLT_TUNING_STAGE").unwrap();
        assert!(t.env);
        assert_eq!(t.value, json!("1"));
    }

    #[test]
    fn nothing_is_recommended_that_is_already_set() {
        let exp = load(&[]);
        let r = rules_here(&exp, &Context::default());
        for x in &r {
            assert_ne!(x.value, x.current, "{x:?}");
        }
    }
}
