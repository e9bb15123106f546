//! Rules of the Megatron backend: Primus' ROCm argument validation, the Primus-Turbo patches and
//! Megatron's own `validate_args` (research/primus.md §5).

use super::Ctx;
use super::types::int_list;
use crate::config::diag::{Diagnostic, Severity};
use crate::domain::value::Value;

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    turbo_master(cx, out);
    sync_free(cx, out);
    deepep(cx, out);
    grouped_gemm(cx, out);
    precision(cx, out);
    overlap(cx, out);
    optimizer(cx, out);
    recompute(cx, out);
    ep_overlap(cx, out);
    moe_layers(cx, out);
}

/// `moe_layer_freq` must give one entry per layer (Megatron asserts it at start-up).
fn moe_layers(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let (Some(moe), Some(layers)) = (&cx.params.moe, cx.params.shape.layers) else {
        return;
    };
    if let Err(e) = moe.layer_pattern(layers) {
        out.push(
            cx.diag(
                Severity::Error,
                "moe-layer-freq",
                "moe_layer_freq",
                format!("{e}; Megatron refuses it at start-up"),
            )
            .hint("an int k (every k-th layer), or one 0/1 entry per layer such as ([0]*1+[1]*26)"),
        );
    }
}

/// Sync-free stage as set (0 when missing or not an int).
fn stage(cx: &Ctx<'_>) -> i64 {
    cx.int("turbo_sync_free_moe_stage").unwrap_or(0)
}

/// `use_turbo_deepep` as training will see it: stage >= 2 forces it on.
fn deepep_on(cx: &Ctx<'_>) -> bool {
    cx.on("use_turbo_deepep") || (cx.on("enable_primus_turbo") && stage(cx) >= 2)
}

const TURBO_SWITCHES: &[&str] = &[
    "use_turbo_attention",
    "use_turbo_gemm",
    "use_turbo_grouped_gemm",
    "use_turbo_rms_norm",
    "use_turbo_deepep",
    "use_turbo_fused_act_with_probs",
    "moe_use_fused_router_with_aux_score",
];

fn turbo_master(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.on("enable_primus_turbo") {
        return;
    }
    for f in TURBO_SWITCHES {
        if cx.on(f) {
            out.push(
                cx.diag(
                    Severity::Warning,
                    "turbo-flag-without-master",
                    f,
                    format!(
                        "`{f}` is on but `enable_primus_turbo` is off, so Primus never applies it"
                    ),
                )
                .hint("set `enable_primus_turbo: true` (and install the primus_turbo package)"),
            );
        }
    }
}

fn sync_free(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let key = "turbo_sync_free_moe_stage";
    let Some(s) = cx.int(key) else { return };
    if !(0..=3).contains(&s) {
        out.push(
            cx.diag(
                Severity::Error,
                "sync-free-stage-range",
                key,
                format!("`{key}: {s}` is outside 0–3; Primus raises \"turbo_sync_free_moe_stage only support [0-3]\""),
            )
            .hint("0 disables sync-free MoE; 2 is the recommended stage on MI300X/MI325X, 1 on MI355X"),
        );
        return;
    }
    if s > 0 && !cx.on("enable_primus_turbo") {
        out.push(
            cx.diag(
                Severity::Error,
                "sync-free-requires-turbo",
                key,
                format!("sync-free MoE stage {s} requires `enable_primus_turbo: true` (Primus asserts it)"),
            )
            .hint("set `enable_primus_turbo: true`, or set the stage to 0"),
        );
    }
    if s >= 2 && !cx.on("use_turbo_grouped_gemm") {
        out.push(
            cx.diag(
                Severity::Error,
                "sync-free-needs-grouped-gemm",
                "use_turbo_grouped_gemm",
                format!("sync-free MoE stage {s} requires `use_turbo_grouped_gemm: true` set explicitly (Primus raises ValueError otherwise)"),
            )
            .hint("set `use_turbo_grouped_gemm: true`, or use stage 1"),
        );
    }
    if s >= 1 {
        // Flags the stage force-sets after validation, overriding what the config says.
        let mut forced: Vec<(&str, bool)> = vec![
            ("moe_use_fused_router_with_aux_score", true),
            ("moe_permute_fusion", true),
        ];
        if s >= 2 {
            forced.push(("use_turbo_deepep", true));
        }
        if s >= 3 {
            forced.push(("use_turbo_fused_act_with_probs", true));
        }
        for (flag, v) in forced {
            if let Some(leaf) = cx.leaf(flag)
                && leaf.value == Value::Bool(!v)
                && leaf.origin.layer >= crate::config::tree::Layer::Experiment
            {
                out.push(
                    cx.diag(
                        Severity::Warning,
                        "sync-free-overrides-flag",
                        flag,
                        format!(
                            "`{flag}: {}` is overwritten to {v} by sync-free MoE stage {s}",
                            leaf.value
                        ),
                    )
                    .hint(format!(
                        "remove `{flag}` or lower `turbo_sync_free_moe_stage`"
                    )),
                );
            }
        }
    }
}

fn deepep(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if !deepep_on(cx) {
        return;
    }
    let why = if cx.on("use_turbo_deepep") {
        "`use_turbo_deepep` is on".to_string()
    } else {
        format!("sync-free MoE stage {} turns DeepEP on", stage(cx))
    };
    match cx.str("moe_router_dtype") {
        Some("fp32") => {}
        _ => out.push(
            cx.diag(
                Severity::Error,
                "deepep-router-dtype",
                "moe_router_dtype",
                format!(
                    "{why}, and DeepEP only supports float32 router probabilities, but {}",
                    cx.show("moe_router_dtype")
                ),
            )
            .hint("set `moe_router_dtype: fp32`"),
        ),
    }
    if cx.on("moe_shared_expert_overlap") {
        out.push(
            cx.diag(
                Severity::Error,
                "deepep-shared-expert-overlap",
                "moe_shared_expert_overlap",
                format!(
                    "{why}, and DeepEP does not support shared-expert overlap, but {}",
                    cx.show("moe_shared_expert_overlap")
                ),
            )
            .hint("set `moe_shared_expert_overlap: false` (the DeepSeek model presets turn it on)"),
        );
    }
    if cx.on("moe_pad_expert_input_to_capacity") {
        out.push(
            cx.diag(
                Severity::Error,
                "deepep-pad-to-capacity",
                "moe_pad_expert_input_to_capacity",
                format!("{why}, and DeepEP rejects `moe_pad_expert_input_to_capacity`"),
            )
            .hint("set `moe_pad_expert_input_to_capacity: false`"),
        );
    }
    let ep = cx.int_or("expert_model_parallel_size", 1);
    let backend = cx
        .env
        .get("PRIMUS_TURBO_MOE_DISPATCH_COMBINE_BACKEND")
        .unwrap_or("TURBO");
    if ep >= 16
        && backend.eq_ignore_ascii_case("TURBO")
        && let Some(cu) = cx.int("turbo_deepep_num_cu")
        && cu > 32
    {
        out.push(
            cx.diag(
                Severity::Error,
                "deepep-num-cu-ep16",
                "turbo_deepep_num_cu",
                format!("`turbo_deepep_num_cu: {cu}` with expert parallel size {ep}: the Turbo dispatcher allows at most 32 CUs when EP >= 16"),
            )
            .hint("use `turbo_deepep_num_cu: 32` (best practice for EP16–64)"),
        );
    }
}

fn grouped_gemm(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let grouped =
        cx.on("use_turbo_grouped_gemm") || (cx.on("enable_primus_turbo") && stage(cx) >= 2);
    if grouped && cx.on("moe_use_legacy_grouped_gemm") {
        out.push(
            cx.diag(
                Severity::Error,
                "turbo-grouped-gemm-legacy",
                "moe_use_legacy_grouped_gemm",
                "Turbo grouped GEMM cannot be combined with `moe_use_legacy_grouped_gemm: true` (ValueError)",
            )
            .hint("set `moe_use_legacy_grouped_gemm: false`, or turn off `use_turbo_grouped_gemm`"),
        );
    }
    if cx.on("turbo_grouped_gemm_without_padding") {
        if !grouped || !cx.on("enable_primus_turbo") {
            out.push(
                cx.diag(
                    Severity::Error,
                    "grouped-gemm-without-padding-prereq",
                    "turbo_grouped_gemm_without_padding",
                    "`turbo_grouped_gemm_without_padding` requires `enable_primus_turbo` and `use_turbo_grouped_gemm`",
                )
                .hint("turn both on, or turn this off"),
            );
        }
        if cx.on("moe_router_padding_for_quantization") {
            out.push(
                cx.diag(
                    Severity::Error,
                    "grouped-gemm-without-padding-prereq",
                    "moe_router_padding_for_quantization",
                    "`turbo_grouped_gemm_without_padding` requires `moe_router_padding_for_quantization: false`",
                ),
            );
        }
    }
}

fn precision(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let fp8 = !cx.value("fp8").is_null();
    let fp4 = !cx.value("fp4").is_null();
    if fp8 && fp4 {
        out.push(
            cx.diag(
                Severity::Error,
                "fp8-fp4-exclusive",
                "fp4",
                format!(
                    "{} and {} are both set; Megatron refuses FP8 and FP4 together",
                    cx.show("fp8"),
                    cx.show("fp4")
                ),
            )
            .hint("keep one of them and set the other to null"),
        );
    }
    let recipe = cx.str("fp8_recipe").unwrap_or("delayed");
    if cx.on("use_turbo_gemm") {
        if fp8 && !matches!(recipe, "tensorwise" | "blockwise" | "mxfp8") {
            out.push(
                cx.diag(
                    Severity::Error,
                    "turbo-gemm-fp8-recipe",
                    "fp8_recipe",
                    format!("`use_turbo_gemm` with FP8 supports the tensorwise, blockwise and mxfp8 recipes, not `{recipe}`"),
                )
                .hint("set `fp8_recipe: tensorwise` (or blockwise / mxfp8)"),
            );
        }
        if fp4 && cx.str("fp4_recipe") != Some("mxfp4") {
            out.push(
                cx.diag(
                    Severity::Error,
                    "turbo-gemm-fp4-recipe",
                    "fp4_recipe",
                    format!(
                        "`use_turbo_gemm` with FP4 needs `fp4_recipe: mxfp4`, but {}",
                        cx.show("fp4_recipe")
                    ),
                )
                .hint("set `fp4_recipe: mxfp4`"),
            );
        }
        let tp = cx.int_or("tensor_model_parallel_size", 1);
        if tp > 1 {
            out.push(
                cx.diag(
                    Severity::Error,
                    "turbo-gemm-tp",
                    "use_turbo_gemm",
                    format!("Primus-Turbo linear layers only support tensor parallel size 1, but TP is {tp}"),
                )
                .hint("turn off `use_turbo_gemm` or use `tensor_model_parallel_size: 1`"),
            );
        }
    }
    if fp8 && recipe == "delayed" && cx.on("first_last_layers_bf16") {
        out.push(
            cx.diag(
                Severity::Error,
                "first-last-bf16-delayed",
                "first_last_layers_bf16",
                "`first_last_layers_bf16` is not supported with the delayed FP8 recipe",
            )
            .hint("use `fp8_recipe: tensorwise` (or another non-delayed recipe), or turn it off"),
        );
    }
    if cx.on("fp4_param") && !fp4 {
        out.push(cx.diag(
            Severity::Error,
            "fp4-param-needs-fp4",
            "fp4_param",
            "`fp4_param` requires `fp4` to be set",
        ));
    }
    if cx.on("bf16") && cx.on("fp16") {
        out.push(cx.diag(
            Severity::Error,
            "bf16-fp16-exclusive",
            "fp16",
            "`bf16` and `fp16` are both on; choose one",
        ));
    }
    if cx.on("cross_entropy_loss_fusion") && cx.on("deterministic_mode") {
        out.push(cx.diag(
            Severity::Error,
            "ce-fusion-deterministic",
            "cross_entropy_loss_fusion",
            "cross-entropy loss fusion is not allowed in deterministic mode",
        ));
    }
}

fn overlap(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.on("overlap_param_gather") {
        if !cx.on("use_distributed_optimizer") && !cx.on("use_torch_fsdp2") {
            out.push(
                cx.diag(
                    Severity::Error,
                    "overlap-param-gather-needs-dist-opt",
                    "use_distributed_optimizer",
                    format!(
                        "`overlap_param_gather` requires the distributed optimizer, but {}",
                        cx.show("use_distributed_optimizer")
                    ),
                )
                .hint("set `use_distributed_optimizer: true`"),
            );
        }
        if !cx.on("overlap_grad_reduce") {
            out.push(
                cx.diag(
                    Severity::Error,
                    "overlap-param-gather-needs-grad-reduce",
                    "overlap_grad_reduce",
                    "`overlap_param_gather` must be used with `overlap_grad_reduce` (Megatron asserts it)",
                )
                .hint("set `overlap_grad_reduce: true`"),
            );
        }
    }
    if cx.on("overlap_param_gather_with_optimizer_step")
        && (!cx.on("overlap_param_gather") || cx.params.parallelism.vpp.is_none())
    {
        out.push(cx.diag(
            Severity::Error,
            "overlap-param-gather-with-step",
            "overlap_param_gather_with_optimizer_step",
            "`overlap_param_gather_with_optimizer_step` needs the distributed optimizer, `overlap_param_gather` and interleaved pipelining (`num_virtual_stages_per_pipeline_rank` or `num_layers_per_virtual_pipeline_stage` giving more than one virtual stage)",
        ));
    }
    if cx.on("use_torch_fsdp2") && cx.on("use_distributed_optimizer") {
        out.push(
            cx.diag(
                Severity::Error,
                "fsdp2-dist-opt",
                "use_torch_fsdp2",
                "`use_torch_fsdp2` and `use_distributed_optimizer` are mutually exclusive",
            )
            .hint("set `use_distributed_optimizer: false` when using FSDP2"),
        );
    }
}

fn optimizer(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.on("optimizer_cpu_offload") && !cx.on("use_precision_aware_optimizer") {
        out.push(
            cx.diag(
                Severity::Error,
                "cpu-offload-needs-precision-aware",
                "use_precision_aware_optimizer",
                "`optimizer_cpu_offload` requires `use_precision_aware_optimizer: true`",
            )
            .hint("set `use_precision_aware_optimizer: true`"),
        );
    }
    if cx.on("fp8_param_gather") && !cx.on("use_distributed_optimizer") && !cx.on("use_torch_fsdp2")
    {
        out.push(cx.diag(
            Severity::Error,
            "fp8-param-gather-needs-dist-opt",
            "fp8_param_gather",
            "`fp8_param_gather` needs the distributed optimizer (or FSDP)",
        ));
    }
}

fn recompute(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let gran = cx.str("recompute_granularity");
    let method = cx.str("recompute_method");
    let num = cx.int("recompute_num_layers");
    let ids = cx.value("recompute_layer_ids");
    let has_ids = !ids.is_null();
    let layers = cx.params.shape.layers.map(|l| l as i64);
    let pp = cx.params.parallelism.pp as i64;
    match gran {
        Some("full") if !has_ids => {
            if !matches!(method, Some("uniform" | "block")) {
                out.push(
                    cx.diag(
                        Severity::Error,
                        "recompute-full-method",
                        "recompute_method",
                        format!("`recompute_granularity: full` needs `recompute_method` uniform or block, but {}", cx.show("recompute_method")),
                    )
                    .hint("set `recompute_method: uniform` (or block), or use `recompute_layer_ids`"),
                );
            }
            match num {
                None => out.push(
                    cx.diag(
                        Severity::Error,
                        "recompute-full-num-layers",
                        "recompute_num_layers",
                        "`recompute_granularity: full` needs `recompute_num_layers`",
                    )
                    .hint("set `recompute_num_layers` (1 .. layers per pipeline stage)"),
                ),
                Some(n) => {
                    if let (Some(l), Some(per_stage)) = (layers, cx.params.layers_per_stage()) {
                        let per_stage = per_stage as i64;
                        if n < 1 || n > per_stage {
                            out.push(cx.diag(
                                Severity::Error,
                                "recompute-num-layers-range",
                                "recompute_num_layers",
                                format!("`recompute_num_layers: {n}` must be within 1..={per_stage} (num_layers {l} / pipeline size {pp})"),
                            ));
                        }
                    }
                }
            }
        }
        Some("selective") if method.is_some() || num.is_some() => {
            out.push(
                cx.diag(
                    Severity::Error,
                    "recompute-selective-args",
                    if method.is_some() { "recompute_method" } else { "recompute_num_layers" },
                    "`recompute_granularity: selective` requires `recompute_method` and `recompute_num_layers` to be null",
                )
                .hint("set both to null"),
            );
        }
        None if method.is_some() || num.is_some() => {
            out.push(
                cx.diag(
                    Severity::Warning,
                    "recompute-without-granularity",
                    if method.is_some() { "recompute_method" } else { "recompute_num_layers" },
                    "`recompute_method` / `recompute_num_layers` are set but `recompute_granularity` is null, so nothing is recomputed",
                )
                .hint("set `recompute_granularity: full`"),
            );
        }
        _ => {}
    }
    if has_ids {
        if gran != Some("full") || method.is_some() {
            out.push(
                cx.diag(
                    Severity::Error,
                    "recompute-layer-ids-prereq",
                    "recompute_layer_ids",
                    "`recompute_layer_ids` requires `recompute_granularity: full` and `recompute_method: null`",
                )
                .hint("set `recompute_granularity: full` and `recompute_method: null`"),
            );
        }
        match int_list(&ids) {
            None => out.push(cx.diag(
                Severity::Error,
                "recompute-layer-ids-format",
                "recompute_layer_ids",
                format!("`recompute_layer_ids: {ids}` must be a list of ints or a comma-separated string of ints"),
            )),
            Some(list) if list.is_empty() => out.push(cx.diag(
                Severity::Error,
                "recompute-layer-ids-format",
                "recompute_layer_ids",
                "`recompute_layer_ids` must not be empty",
            )),
            Some(list) => {
                if let Some(l) = layers {
                    let mtp = cx.int_or("mtp_num_layers", 0).max(0);
                    let max = l + mtp - 1;
                    if let Some(bad) = list.iter().find(|i| **i < 0 || **i > max) {
                        out.push(
                            cx.diag(
                                Severity::Error,
                                "recompute-layer-ids-range",
                                "recompute_layer_ids",
                                format!("layer id {bad} in `recompute_layer_ids` is outside 0..={max} (global ids: num_layers {l}{})", if mtp > 0 { format!(" + {mtp} MTP") } else { String::new() }),
                            )
                            .hint("ids are global layer indices from 0 to num_layers - 1"),
                        );
                    }
                }
            }
        }
    }
}

fn ep_overlap(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let key = "overlap_moe_expert_parallel_comm";
    if !cx.on(key) {
        return;
    }
    let mut need = |ok: bool, what: String, flag: &str| {
        if !ok {
            out.push(
                cx.diag(
                    Severity::Error,
                    "ep-overlap-prereq",
                    flag,
                    format!("`{key}` requires {what}"),
                )
                .hint("fix the prerequisite or turn the overlap off"),
            );
        }
    };
    let ep = cx.int_or("expert_model_parallel_size", 1);
    need(
        ep > 1,
        format!("expert parallel size > 1 (it is {ep})"),
        "expert_model_parallel_size",
    );
    let dispatcher = cx.str("moe_token_dispatcher_type").unwrap_or("allgather");
    need(
        deepep_on(cx) || matches!(dispatcher, "alltoall" | "flex"),
        format!("the alltoall or flex token dispatcher (it is {dispatcher})"),
        "moe_token_dispatcher_type",
    );
    need(
        cx.str("recompute_granularity") != Some("full")
            && cx.value("recompute_method").is_null()
            && cx.value("recompute_num_layers").is_null(),
        "no full recompute (recompute_granularity not full, recompute_method and recompute_num_layers null)".into(),
        "recompute_granularity",
    );
    need(
        cx.on("bf16") || cx.on("fp16"),
        "bf16 or fp16 training".into(),
        "bf16",
    );
    need(
        !cx.on("moe_shared_expert_overlap"),
        "`moe_shared_expert_overlap: false`".into(),
        "moe_shared_expert_overlap",
    );
    let pp = cx.int_or("pipeline_model_parallel_size", 1);
    need(
        pp <= 1 || cx.params.parallelism.vpp.is_some(),
        format!(
            "virtual pipeline stages (`num_virtual_stages_per_pipeline_rank`) when pipeline parallel size is {pp}"
        ),
        "num_virtual_stages_per_pipeline_rank",
    );
}
