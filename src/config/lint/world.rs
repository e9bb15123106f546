//! Megatron's start-up asserts that depend on the world size: the parallel groups must tile the
//! world, and the global batch must split into micro batches on every data-parallel rank. They
//! run only against a known world ([`World`]); without one, only what holds at every world size
//! is checked (the global batch is a multiple of the micro batch, the experts split over EP,
//! the layers over PP).

use super::Ctx;
use crate::config::diag::{Diagnostic, Severity};
use crate::megatron::World;

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if let Some(w) = cx.world.filter(World::builds_groups) {
        model_parallel(cx, &w, out);
        expert_parallel(cx, &w, out);
    }
    batch(cx, out);
    experts(cx, out);
    pipeline_layers(cx, out);
}

/// `megatron/training/arguments.py` (`validate_args`, "Expert parallelism check"): with
/// `expert_model_parallel_size` > 1, `num_experts` must be set and a multiple of it.
fn experts(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let ep = cx.params.parallelism.ep;
    if ep <= 1 {
        return;
    }
    let message = match cx.int("num_experts") {
        None => format!(
            "`expert_model_parallel_size: {ep}` without `num_experts`; Megatron asserts \"num_experts must be non None to use expert model parallelism\" at start-up"
        ),
        Some(n) if n > 0 && (n as u64).is_multiple_of(ep) => return,
        Some(n) => format!(
            "`num_experts: {n}` is not a multiple of `expert_model_parallel_size: {ep}`; Megatron asserts it at start-up (\"Number of experts should be a multiple of expert model parallel_size\")"
        ),
    };
    out.push(
        cx.diag(
            Severity::Error,
            "experts-expert-parallel",
            "expert_model_parallel_size",
            message,
        )
        .hint("choose an expert parallel size that divides num_experts"),
    );
}

/// `validate_args`: without an uneven first/last stage (`decoder_first_pipeline_num_layers`,
/// `decoder_last_pipeline_num_layers`), a layout or a hybrid pattern, `num_layers` (+1 for each
/// of `account_for_embedding_in_pipeline_split` and `account_for_loss_in_pipeline_split`) must
/// be a multiple of the pipeline parallel size. With `num_virtual_stages_per_pipeline_rank`
/// validate_args skips it and `get_num_layers_to_build`
/// (megatron/core/transformer/transformer_block.py) asserts it when the model is built.
fn pipeline_layers(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let pp = cx.params.parallelism.pp;
    if pp <= 1 {
        return;
    }
    let uneven = [
        "decoder_first_pipeline_num_layers",
        "decoder_last_pipeline_num_layers",
        "pipeline_model_parallel_layout",
        "hybrid_layer_pattern",
        "hybrid_override_pattern",
    ]
    .iter()
    .any(|k| !cx.value(k).is_null());
    let (Some(layers), Some(counted)) = (cx.params.shape.layers, super::layout::counted_layers(cx))
    else {
        return;
    };
    if uneven {
        return;
    }
    let extra = counted - layers;
    if counted.is_multiple_of(pp) {
        return;
    }
    let with = if extra > 0 {
        format!(" ({layers} layers + {extra} for the embedding/loss stages = {counted})")
    } else {
        String::new()
    };
    // Each way of giving the virtual pipeline meets the same split in another assert.
    let when = if !cx.value("num_layers_per_virtual_pipeline_stage").is_null() {
        "at start-up (\"number of layers of the model must be divisible pipeline model parallel size\")"
    } else if !cx.value("num_virtual_stages_per_pipeline_rank").is_null() {
        "when it builds the model (\"num_layers should be divisible by pipeline_model_parallel_size\", transformer_block.py's get_num_layers_to_build)"
    } else {
        "at start-up (\"Number of layers should be divisible by the pipeline-model-parallel size\")"
    };
    out.push(
        cx.diag(
            Severity::Error,
            "pipeline-layers",
            "pipeline_model_parallel_size",
            format!(
                "`num_layers: {layers}`{with} is not divisible by `pipeline_model_parallel_size: {pp}`; Megatron asserts it {when}"
            ),
        )
        .hint("choose a pipeline parallel size that divides the layer count, or set decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers for uneven stages"),
    );
}

/// The key to point at for a product of parallel sizes: the first factor above 1 (the config
/// sets it), else the first one.
fn first_above_one<'k>(keys: &[(&'k str, u64)]) -> &'k str {
    keys.iter()
        .find(|(_, v)| *v > 1)
        .or(keys.first())
        .map_or("tensor_model_parallel_size", |(k, _)| *k)
}

/// `megatron/training/arguments.py` (`validate_args`) asserts
/// `world_size % (tensor_model_parallel_size × pipeline_model_parallel_size ×
/// context_parallel_size) == 0` before anything else; the data-parallel size is the quotient.
fn model_parallel(cx: &Ctx<'_>, w: &World, out: &mut Vec<Diagnostic>) {
    let p = cx.params.parallelism;
    let m = p.model_size();
    if w.gpus.is_multiple_of(m) {
        return;
    }
    let key = first_above_one(&[
        ("tensor_model_parallel_size", p.tp),
        ("pipeline_model_parallel_size", p.pp),
        ("context_parallel_size", p.cp),
    ]);
    out.push(
        cx.diag(
            Severity::Error,
            "world-model-parallel",
            key,
            format!(
                "{w} is not divisible by TP × PP × CP = {} × {} × {} = {m}; Megatron asserts it at start-up (\"world size is not divisible by total_model_size\")",
                p.tp, p.pp, p.cp
            ),
        )
        .hint(format!(
            "run on a multiple of {m} GPUs (--gpus, GPUS_PER_NODE × NNODES), or choose parallel sizes whose product divides {}",
            w.gpus
        )),
    );
}

/// `megatron/core/parallel_state.py` (`initialize_model_parallel`) takes
/// `expert_tensor_parallel_size` = TP when unset and raises `RuntimeError` unless
/// `world_size % (expert_tensor_parallel_size × expert_model_parallel_size ×
/// pipeline_model_parallel_size) == 0` (the expert data-parallel size is the quotient; CP does
/// not enter). With EP 1 and ETP = TP the product divides TP × PP × CP, so the rule above
/// already covers it.
fn expert_parallel(cx: &Ctx<'_>, w: &World, out: &mut Vec<Diagnostic>) {
    let p = cx.params.parallelism;
    if p.ep == 1 && p.etp == p.tp {
        return;
    }
    let m = p.expert_model_size();
    if w.gpus.is_multiple_of(m) {
        return;
    }
    let key = if p.ep > 1 {
        "expert_model_parallel_size"
    } else {
        "expert_tensor_parallel_size"
    };
    let etp_note = if cx.value("expert_tensor_parallel_size").is_null() {
        " (expert_tensor_parallel_size is unset, so it follows TP)"
    } else {
        ""
    };
    out.push(
        cx.diag(
            Severity::Error,
            "world-expert-parallel",
            key,
            format!(
                "{w} is not divisible by ETP × EP × PP = {} × {} × {} = {m}{etp_note}; Megatron raises RuntimeError at start-up (\"world_size is not divisible by expert_tensor_model_pipeline_parallel size\")",
                p.etp, p.ep, p.pp
            ),
        )
        .hint(format!(
            "run on a multiple of {m} GPUs, or choose an expert parallel size whose product with ETP and PP divides {}",
            w.gpus
        )),
    );
}

/// Megatron's micro-batch calculator (`megatron/core/num_microbatches_calculator.py`,
/// `ConstantNumMicroBatchesCalculator`) asserts `global_batch_size % (micro_batch_size ×
/// data_parallel_size) == 0` at start-up, unless `decrease_batch_size_if_needed` lowers the
/// running global batch to a multiple (at least one micro batch per rank). A batch ramp-up
/// (`rampup_batch_size`) uses another calculator and is not checked here.
fn batch(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let b = cx.params.batch;
    let (Some(mbs), Some(gbs)) = (b.micro, b.global) else {
        return;
    };
    if !cx.value("rampup_batch_size").is_null() {
        return;
    }
    let p = cx.params.parallelism;
    let known = cx
        .world
        .and_then(|w| p.data_parallel(w.gpus).map(|dp| (w, dp)));
    let per = mbs * known.map_or(1, |(_, dp)| dp);
    if gbs.is_multiple_of(per) {
        return;
    }
    let lower = gbs / per * per;
    let upper = lower + per;
    let decrease = cx.on("decrease_batch_size_if_needed");
    let severity = if decrease && lower > 0 {
        Severity::Warning
    } else {
        Severity::Error
    };
    let consequence = if severity == Severity::Warning {
        match known {
            Some(_) => format!(
                "`decrease_batch_size_if_needed` makes Megatron train with a global batch of {lower} instead"
            ),
            None => "`decrease_batch_size_if_needed` makes Megatron train with a smaller global batch instead".into(),
        }
    } else {
        "Megatron's micro-batch calculator asserts it at start-up".into()
    };
    let message = match known {
        Some((w, dp)) => format!(
            "`global_batch_size: {gbs}` is not divisible by micro_batch_size × data-parallel size = {mbs} × {dp} = {per} ({w}, DP = {} / (TP × PP × CP = {})); {consequence}",
            w.gpus,
            p.model_size()
        ),
        None => format!(
            "`global_batch_size: {gbs}` is not a multiple of `micro_batch_size: {mbs}`, so it splits into micro batches at no data-parallel size; {consequence}"
        ),
    };
    let mut fixes = Vec::new();
    if lower > 0 {
        fixes.push(format!("`global_batch_size: {lower}`"));
    }
    fixes.push(format!("`global_batch_size: {upper}`"));
    let mut hint = format!("set {}", fixes.join(" or "));
    match known {
        Some((_, dp)) if gbs.is_multiple_of(dp) => hint.push_str(&format!(
            ", or a micro batch size that divides {} (the global batch per data-parallel rank)",
            gbs / dp
        )),
        Some(_) => {}
        None => hint.push_str(&format!(", or a micro batch size that divides {gbs}")),
    }
    out.push(
        cx.diag(
            severity,
            "global-batch-divisibility",
            "global_batch_size",
            message,
        )
        .hint(hint),
    );
}
