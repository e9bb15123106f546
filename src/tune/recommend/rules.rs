//! The rules: the guide's quick checklist, Primus' patch notes and validation code, and the
//! fixes lint's findings call for. Each recommendation names its rule id and its source.

use super::{Basis, Context, Recommendation};
use crate::config::catalog::Catalog;
use crate::config::diag::{Diagnostic, Severity};
use crate::config::env::Env;
use crate::config::{Experiment, lint};
use crate::domain::advice as rule;
use serde_json::{Value as Json, json};

struct Cx<'a> {
    exp: &'a Experiment,
    env: &'a Env,
    out: Vec<Recommendation>,
    acked: &'a [String],
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
    fn add(
        &mut self,
        rule: &str,
        flag: &str,
        value: Json,
        reason: impl Into<String>,
        source: &str,
    ) {
        if self.out.iter().any(|r| r.flag == flag) || self.acked.iter().any(|a| a == rule) {
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
            rule: rule.to_string(),
            companion_of: None,
        });
    }

    fn add_env(
        &mut self,
        rule: &str,
        var: &str,
        value: &str,
        reason: impl Into<String>,
        source: &str,
    ) {
        if self.out.iter().any(|r| r.flag == var)
            || self.env.get(var) == Some(value)
            || self.acked.iter().any(|a| a == rule)
        {
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
            rule: rule.to_string(),
            companion_of: None,
        });
    }
}

/// One value that fixes a lint finding: the flag (or launch variable) and its value.
pub(super) struct Fix {
    pub flag: &'static str,
    pub value: Json,
    pub env: bool,
}

fn set(flag: &'static str, value: Json) -> Fix {
    Fix {
        flag,
        value,
        env: false,
    }
}

/// The values that fix a lint finding, where the fix is known (empty: no one-value fix).
pub(super) fn fixes(code: &str) -> Vec<Fix> {
    match code {
        "deepep-num-cu-ep16" => vec![set("turbo_deepep_num_cu", json!(32))],
        "sync-free-needs-grouped-gemm" => vec![set("use_turbo_grouped_gemm", json!(true))],
        "sync-free-requires-turbo" | "turbo-flag-without-master" => {
            vec![set("enable_primus_turbo", json!(true))]
        }
        "turbo-grouped-gemm-legacy" => vec![set("moe_use_legacy_grouped_gemm", json!(false))],
        "deepep-router-dtype" => vec![set("moe_router_dtype", json!("fp32"))],
        "deepep-shared-expert-overlap" => vec![set("moe_shared_expert_overlap", json!(false))],
        "overlap-param-gather-needs-grad-reduce" => vec![set("overlap_grad_reduce", json!(true))],
        "overlap-param-gather-needs-dist-opt" | "fp8-param-gather-needs-dist-opt" => {
            vec![set("use_distributed_optimizer", json!(true))]
        }
        "cpu-offload-needs-precision-aware" => {
            vec![set("use_precision_aware_optimizer", json!(true))]
        }
        "turbo-gemm-fp8-recipe" => vec![set("fp8_recipe", json!("tensorwise"))],
        "turbo-gemm-fp4-recipe" => vec![set("fp4_recipe", json!("mxfp4"))],
        "recompute-full-method" => vec![set("recompute_method", json!("uniform"))],
        "recompute-selective-args" => vec![
            set("recompute_method", Json::Null),
            set("recompute_num_layers", Json::Null),
        ],
        "moe-tp-sequence-parallel" => vec![set("sequence_parallel", json!(true))],
        "sequence-parallel-tp1" => vec![set("sequence_parallel", json!(false))],
        "cuda-max-connections" => vec![Fix {
            flag: "CUDA_DEVICE_MAX_CONNECTIONS",
            value: json!("1"),
            env: true,
        }],
        _ => Vec::new(),
    }
}

/// The fixes the lint engine's errors and warnings call for, where the fix is one value; the
/// rule is the lint code.
fn lint_fixes(cx: &mut Cx, diags: &[Diagnostic]) {
    for d in diags.iter().filter(|d| d.severity != Severity::Info) {
        let src = format!("lint: {}", d.code);
        for fix in fixes(d.code) {
            if fix.env {
                let v = fix.value.as_str().unwrap_or_default().to_string();
                cx.add_env(d.code, fix.flag, &v, d.message.clone(), &src);
            } else {
                cx.add(d.code, fix.flag, fix.value, d.message.clone(), &src);
            }
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
    let linted: Vec<Diagnostic>;
    let diags: &[Diagnostic] = match ctx.found {
        Some(found) => found,
        None => {
            linted = lint::lint(exp, env, ctx.world.as_ref(), catalog)
                .into_iter()
                .filter(|d| !ctx.quiet.contains(d))
                .collect();
            &linted
        }
    };
    let mut cx = Cx {
        exp,
        env,
        out: Vec::new(),
        acked: &ctx.acked,
    };
    lint_fixes(&mut cx, diags);
    let m = exp.main_module();
    if !m.is_megatron() {
        return cx.out;
    }
    let moe = cx.int("num_experts") > 0;
    let ep = cx.int("expert_model_parallel_size").max(1);
    let guide = "Primus performance-tuning guide §2 (Primus-Turbo)";
    // Kernels: Primus-Turbo on, attention and (MoE) grouped GEMMs through it.
    cx.add(
        rule::PRIMUS_TURBO,
        "enable_primus_turbo",
        json!(true),
        "the Primus-Turbo kernels are off; every other Turbo flag needs this master switch",
        guide,
    );
    cx.add(
        rule::TURBO_ATTENTION,
        "use_turbo_attention",
        json!(true),
        "Turbo attention kernels (needs enable_primus_turbo)",
        guide,
    );
    if moe {
        cx.add(
            rule::TURBO_GROUPED_GEMM,
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
            rule::CUDA_MAX_CONNECTIONS,
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "1",
            "with gradient-reduce overlap or TP > 1, one connection keeps the communication kernels ordered before compute",
            "Primus performance-tuning guide §5 (communication overlap); Megatron arguments.py",
        );
    }
    layout(&mut cx, ctx);
    hipblaslt(&mut cx, gemm);
    cx.out
}

/// The layout's rules: sequence parallelism with TP, and two virtual stages when the 1F1B
/// bubble is 10 % or more (where the layers and the micro batches split evenly: Megatron's
/// asserts, the `vpp-layers` and `vpp-microbatches` lint rules).
fn layout(cx: &mut Cx, ctx: &Context) {
    let p = crate::megatron::Params::from_values(&cx.exp.main_module().values());
    let par = &p.parallelism;
    if par.tp > 1 {
        cx.add(
            rule::SEQUENCE_PARALLEL,
            "sequence_parallel",
            json!(true),
            format!(
                "TP {}: sequence parallelism splits the norm and dropout activations TP keeps \
                 whole on every rank, for the same communication volume",
                par.tp
            ),
            "Korthikanti et al. 2022; Megatron-LM docs (sequence parallelism)",
        );
    }
    let Some(world) = ctx.world.filter(|_| par.pp > 1 && par.vpp.is_none()) else {
        return;
    };
    let Some(m) = par
        .data_parallel(world.gpus)
        .and_then(|dp| p.batch.accumulation_steps(dp))
    else {
        return;
    };
    let bubble = (par.pp - 1) as f64 / m as f64;
    let layers = p.shape.layers.unwrap_or(0);
    if bubble >= 0.10 && layers.is_multiple_of(par.pp * 2) && m.is_multiple_of(par.pp) {
        cx.add(
            rule::INTERLEAVED_PIPELINE,
            "num_virtual_stages_per_pipeline_rank",
            json!(2),
            format!(
                "PP {}, {m} micro batches a step on {}: the 1F1B bubble is {:.0} % of the \
                 compute; two virtual stages halve it",
                par.pp,
                world,
                bubble * 100.0
            ),
            "Narayanan et al. 2021 §2.2 (the interleaved schedule); Megatron-LM docs",
        );
    }
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
        rule::SYNC_FREE_MOE,
        "turbo_sync_free_moe_stage",
        json!(stage),
        format!("{why} (stage 3 only with memory to spare: it uses much more GPU memory)"),
        src,
    );
    if stage >= 2 {
        let pre = "sync-free stage >= 2 turns on DeepEP, which requires it";
        cx.add(
            rule::SYNC_FREE_MOE,
            "use_turbo_grouped_gemm",
            json!(true),
            pre,
            src,
        );
        cx.add(
            rule::SYNC_FREE_MOE,
            "moe_router_dtype",
            json!("fp32"),
            pre,
            "Primus DeepEP validation",
        );
        cx.add(
            rule::SYNC_FREE_MOE,
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
            rule::DEEPEP_NUM_CU,
            "turbo_deepep_num_cu",
            json!(32),
            format!("EP {ep} (>= 16): 32 CUs; Primus asserts <= 32 there"),
            src,
        );
    } else if ep <= 8 && cu != 64 && cu != 80 {
        cx.add(
            rule::DEEPEP_NUM_CU,
            "turbo_deepep_num_cu",
            json!(64),
            format!("EP {ep}: 64 or 80 CUs (then measure both with `sweep deepep-cu`)"),
            src,
        );
    }
}

/// The next HipBLASLt stage (Primus performance-tuning guide §1), from the same status `gemm-tune` shows.
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
        rule::HIPBLASLT_TUNING,
        "PRIMUS_HIPBLASLT_TUNING",
        "1",
        why,
        "Primus performance-tuning guide §1 (HipBLASLt autotuning)",
    );
    cx.add_env(
        rule::HIPBLASLT_TUNING,
        "PRIMUS_HIPBLASLT_TUNING_STAGE",
        &stage.to_string(),
        why,
        "Primus performance-tuning guide §1 (HipBLASLt autotuning)",
    );
}
