//! Megatron's asserts on the parallel layout itself (TP, CP, sequence parallelism, the virtual
//! pipeline), each checked against Megatron-LM at Primus' pin (d3528a21) and at its head: the
//! model's widths must split over the tensor-parallel ranks, the sequence over the context- and
//! sequence-parallel ranks, the layers over the virtual pipeline stages. All but one hold at
//! every world size and run always; the interleaved schedule's micro-batch rule needs the
//! data-parallel size, so it runs only against a known world ([`World`]), like world.rs' rules.
//!
//! Each message says when Megatron fails: at start-up (`validate_args`), when it builds the
//! model, or in the first training step (for these the job has spent its start-up already).

use super::Ctx;
use crate::config::diag::{Diagnostic, Severity};
use crate::config::tree::Layer;
use crate::megatron::World;

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    heads(cx, out);
    query_groups(cx, out);
    ffn(cx, out);
    moe_ffn(cx, out);
    context_parallel(cx, out);
    sequence_parallel(cx, out);
    sequence_parallel_tp1(cx, out);
    moe_sequence_parallel(cx, out);
    let vpp = virtual_pipeline(cx, out);
    if let (Some(w), Some(vpp)) = (cx.world.filter(World::builds_groups), vpp) {
        interleaved_microbatches(cx, &w, vpp, out);
    }
}

/// Up to twelve divisors of `n`, for hints ("1, 2, 4, 8").
fn divisors(n: u64) -> String {
    (1..=n.min(1 << 20))
        .filter(|d| n.is_multiple_of(*d))
        .take(12)
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the config gives `key` a value (not missing, not null).
fn set(cx: &Ctx<'_>, key: &str) -> bool {
    !cx.value(key).is_null()
}

/// `megatron/core/transformer/transformer_config.py` (`TransformerConfig.__post_init__`, run
/// when `core_transformer_config_from_args` builds the model's config) raises `ValueError`
/// unless `num_attention_heads % tensor_model_parallel_size == 0`.
fn heads(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let tp = cx.params.parallelism.tp;
    let Some(heads) = cx.params.shape.heads else {
        return;
    };
    if heads.is_multiple_of(tp) {
        return;
    }
    out.push(
        cx.diag(
            Severity::Error,
            "heads-tensor-parallel",
            "tensor_model_parallel_size",
            format!(
                "`num_attention_heads: {heads}` does not split over `tensor_model_parallel_size: {tp}`; Megatron raises ValueError when it builds the model config (\"num_attention_heads ({heads}) must be a multiple of tensor_model_parallel_size ({tp}).\")"
            ),
        )
        .hint(format!(
            "choose a tensor-parallel size that divides {heads}: {}",
            divisors(heads)
        )),
    );
}

/// `TransformerConfig.__post_init__` raises `ValueError` unless `num_query_groups` is a multiple
/// or a divisor of the tensor-parallel size (with fewer groups than TP ranks, attention.py
/// replicates the key/value heads). Megatron passes `num_query_groups` only with
/// `group_query_attention` (`core_transformer_config_from_args`); without it the config takes
/// the head count, which [`heads`] checks. Its default is 1, a divisor of every TP.
fn query_groups(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if !cx.on("group_query_attention") {
        return;
    }
    let tp = cx.params.parallelism.tp;
    let Some(groups) = cx.params.shape.query_groups else {
        return;
    };
    if groups.is_multiple_of(tp) || tp.is_multiple_of(groups) {
        return;
    }
    out.push(
        cx.diag(
            Severity::Error,
            "query-groups-tensor-parallel",
            "tensor_model_parallel_size",
            format!(
                "`num_query_groups: {groups}` (group-query attention) is neither a multiple nor a divisor of `tensor_model_parallel_size: {tp}`; Megatron raises ValueError when it builds the model config (\"num_query_groups ({groups}) must be a multiple or divisor of tensor_model_parallel_size ({tp}).\")"
            ),
        )
        .hint(format!(
            "choose a tensor-parallel size that divides {groups} ({}) or is a multiple of it",
            divisors(groups)
        )),
    );
}

/// The MLP's linear layers split their width over the tensor-parallel ranks with
/// `megatron/core/utils.py`'s `divide` (`ensure_divisibility` asserts "{} is not divisible by
/// {}"): `megatron/core/tensor_parallel/layers.py`'s `ColumnParallelLinear` (fc1) and
/// `RowParallelLinear` (fc2, whose input is the FFN width). With Transformer Engine,
/// megatron/core/extensions/transformer_engine.py divides expert layers itself and hands other
/// layers the full width and the TP group for TE's own split (TE's source is not in the mirror;
/// that it refuses a remainder too is not verified here). Dense layers use `ffn_hidden_size`
/// (Megatron's default when unset), a shared expert `moe_shared_expert_intermediate_size`
/// (`moe/shared_experts.py`, on the TP group). A MoE model whose every layer is MoE builds no
/// dense MLP.
fn ffn(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let p = &cx.params;
    let tp = p.parallelism.tp;
    if tp <= 1 {
        return;
    }
    let dense = match (&p.moe, p.shape.layers) {
        (None, _) => true,
        (Some(m), Some(layers)) => m
            .layer_pattern(layers)
            .is_ok_and(|moe| moe.iter().any(|is_moe| !is_moe)),
        (Some(_), None) => false,
    };
    let mut widths = Vec::new();
    if let Some(f) = p.shape.ffn.filter(|_| dense) {
        let what = if set(cx, "ffn_hidden_size") {
            format!("`ffn_hidden_size: {f}`")
        } else {
            format!("the FFN width Megatron derives when `ffn_hidden_size` is unset ({f})")
        };
        widths.push(("ffn_hidden_size", f, what));
    }
    if let Some(s) = p.moe.as_ref().map(|m| m.shared_ffn).filter(|s| *s > 0) {
        widths.push((
            "moe_shared_expert_intermediate_size",
            s,
            format!("the shared expert's `moe_shared_expert_intermediate_size: {s}`"),
        ));
    }
    for (key, width, what) in widths {
        out.extend(split(
            cx,
            Split {
                code: "ffn-tensor-parallel",
                key,
                width,
                by: tp,
                what,
                over: format!("`tensor_model_parallel_size: {tp}`"),
                built: "the MLP (its parallel linear layers",
                size: "a tensor-parallel size",
            },
        ));
    }
}

/// A width that linear layers split over `by` ranks with `divide`, and what to say when it
/// does not split.
struct Split<'a> {
    code: &'static str,
    key: &'a str,
    width: u64,
    by: u64,
    /// The width as the config gives it, and the group size.
    what: String,
    over: String,
    /// What Megatron builds when it asserts, and the size a hint asks for.
    built: &'a str,
    size: &'a str,
}

/// The error of a width that does not split (`divide`'s "{} is not divisible by {}"), if any.
fn split(cx: &Ctx<'_>, s: Split<'_>) -> Option<Diagnostic> {
    let Split {
        code,
        key,
        width,
        by,
        what,
        over,
        built,
        size,
    } = s;
    if width.is_multiple_of(by) {
        return None;
    }
    Some(
        cx.diag(
            Severity::Error,
            code,
            key,
            format!(
                "{what} does not split over {over}; Megatron asserts it when it builds {built} split the width with `divide`: \"{width} is not divisible by {by}\")"
            ),
        )
        .hint(format!(
            "choose {size} that divides {width}: {}",
            divisors(width)
        )),
    )
}

/// The experts' linear layers split `moe_ffn_hidden_size` (`ffn_hidden_size` when unset,
/// `validate_args`) over the expert tensor-parallel group with `divide`
/// (`megatron/core/transformer/moe/experts.py`; `megatron/core/extensions/transformer_engine.py`
/// divides explicitly for expert layers). The expert tensor-parallel size is TP when unset.
fn moe_ffn(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let etp = cx.params.parallelism.etp;
    let Some(width) = cx.params.moe.as_ref().and_then(|m| m.ffn) else {
        return;
    };
    let what = if set(cx, "moe_ffn_hidden_size") {
        format!("`moe_ffn_hidden_size: {width}`")
    } else {
        format!(
            "the expert width ({width}: `moe_ffn_hidden_size` is unset, so Megatron uses ffn_hidden_size)"
        )
    };
    let (key, size) = if set(cx, "expert_tensor_parallel_size") {
        (
            "expert_tensor_parallel_size",
            format!("`expert_tensor_parallel_size: {etp}`"),
        )
    } else {
        (
            "tensor_model_parallel_size",
            format!(
                "the expert tensor-parallel size {etp} (expert_tensor_parallel_size is unset, so it follows TP)"
            ),
        )
    };
    out.extend(split(
        cx,
        Split {
            code: "moe-ffn-expert-tensor-parallel",
            key,
            width,
            by: etp,
            what,
            over: size,
            built: "the experts (their linear layers",
            size: "an expert tensor-parallel size",
        },
    ));
}

/// `megatron/training/arguments.py` (`validate_args`) asserts, with `context_parallel_size` >
/// 1, that `seq_length` is a multiple of 2 × CP: each CP rank takes two of 2·CP chunks
/// (`get_batch_on_this_cp_rank`, megatron/core/utils.py, balancing causal attention). The
/// assert stops the job at start-up, before the first batch would fail to split.
fn context_parallel(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let cp = cx.params.parallelism.cp;
    let Some(seq) = cx.params.shape.seq.filter(|_| cp > 1) else {
        return;
    };
    if seq.is_multiple_of(2 * cp) {
        return;
    }
    out.push(
        cx.diag(
            Severity::Error,
            "context-parallel-seq-length",
            "context_parallel_size",
            format!(
                "`seq_length: {seq}` is not a multiple of 2 × `context_parallel_size: {cp}` = {} (each context-parallel rank takes two of 2·CP sequence chunks); Megatron asserts it at start-up (\"seq-length should be a multiple of 2 * context-parallel-size if context-parallel-size > 1.\")",
                2 * cp
            ),
        )
        .hint(format!(
            "choose a context-parallel size whose double divides {seq}, or a seq_length that is a multiple of {}",
            2 * cp
        )),
    );
}

/// With sequence parallelism (on at TP > 1) each tensor-parallel rank holds 1/TP of its
/// sequence (seq_length / CP with context parallelism): the embedding scatters it with
/// `megatron/core/tensor_parallel/mappings.py`'s `_split_along_first_dim` (or reduce-scatters it,
/// `_reduce_scatter_along_first_dim`), which assert the split. No start-up check covers it, so
/// the job fails in its first forward step.
fn sequence_parallel(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let p = cx.params.parallelism;
    let Some(seq) = cx.params.shape.seq.filter(|_| p.sequence_parallel) else {
        return;
    };
    // A sequence that does not split over CP is the context-parallel rule's.
    if !seq.is_multiple_of(p.cp) {
        return;
    }
    let local = seq / p.cp;
    if local.is_multiple_of(p.tp) {
        return;
    }
    let tp = p.tp;
    let held = if p.cp > 1 {
        format!(
            "the {local} tokens each of `context_parallel_size: {}` ranks holds (`seq_length: {seq}` / CP)",
            p.cp
        )
    } else {
        format!("`seq_length: {seq}`")
    };
    out.push(
        cx.diag(
            Severity::Error,
            "sequence-parallel-seq-length",
            "tensor_model_parallel_size",
            format!(
                "with `sequence_parallel` on, {held} must split over `tensor_model_parallel_size: {tp}`, and {local} is not divisible by {tp}; Megatron passes start-up and asserts it in the first forward step (\"First dimension of the tensor should be divisible by tensor parallel size\")"
            ),
        )
        .hint(format!(
            "choose a tensor-parallel size that divides {local} ({}), or a seq_length that is a multiple of TP × CP = {}",
            divisors(local),
            tp * p.cp
        )),
    );
}

/// `sequence_parallel` written in the experiment (or on the command line) at TP 1: Primus'
/// `sequence_parallel_tp1` patch (primus/backends/megatron/patches/args/) sets it to False
/// before Megatron starts, as `validate_args` would ("Disabling sequence parallelism because
/// tensor model parallelism is disabled", a warning). The presets' own `true` is the patch's
/// intended input and is not reported, nor is a TP written as `${VAR:1}`: the launch chooses
/// it, and the setting is there for the sizes above 1 it may take.
fn sequence_parallel_tp1(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if cx.module.patch_of("sequence_parallel").is_none()
        || cx
            .module
            .written("tensor_model_parallel_size")
            .is_some_and(|l| l.template.is_some())
    {
        return;
    }
    let Some(written) = cx.module.written("sequence_parallel") else {
        return;
    };
    if !written.value.truthy() || written.origin.layer < Layer::Experiment {
        return;
    }
    out.push(
        cx.diag(
            Severity::Warning,
            "sequence-parallel-tp1",
            "sequence_parallel",
            format!(
                "`sequence_parallel: {}` has no effect at `tensor_model_parallel_size: 1`: Primus turns it off before Megatron starts, as Megatron's validate_args would (\"Disabling sequence parallelism because tensor model parallelism is disabled\")",
                written.value
            ),
        )
        .hint("drop `sequence_parallel` here, or use it with a tensor-parallel size above 1"),
    );
}

/// `megatron/core/transformer/moe/moe_layer.py` (`MoELayer.forward`) raises `ValueError` in
/// training when the tensor-parallel group is larger than 1 and sequence parallelism is off.
/// Start-up passes; the first training step fails.
fn moe_sequence_parallel(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let p = cx.params.parallelism;
    let Some(moe) = cx.params.moe.as_ref() else {
        return;
    };
    if p.tp <= 1 || p.sequence_parallel {
        return;
    }
    out.push(
        cx.diag(
            Severity::Error,
            "moe-tp-sequence-parallel",
            "sequence_parallel",
            format!(
                "a MoE model (`num_experts: {}`) at `tensor_model_parallel_size: {}` needs `sequence_parallel: true`; Megatron passes start-up and its MoE layer raises ValueError in the first training step (\"During training, performance may degrade if MoE and tensor parallelismare enabled without also enabling sequence parallelism.\")",
                moe.experts, p.tp
            ),
        )
        .hint("set `sequence_parallel: true`, or tensor_model_parallel_size: 1"),
    );
}

/// The keys Megatron derives the virtual pipeline size from (`validate_args`, "Uneven virtual
/// pipeline parallelism"); at most one may be set.
const VPP_KEYS: [&str; 3] = [
    "num_layers_per_virtual_pipeline_stage",
    "num_virtual_stages_per_pipeline_rank",
    "pipeline_model_parallel_layout",
];

/// Megatron's virtual pipeline size as `validate_args` derives it, with its asserts reported:
/// Some(v ≥ 2) when the schedule interleaves and passes them. Hybrid (Mamba) patterns derive
/// it from their `|` segments and are not checked here.
fn virtual_pipeline(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) -> Option<u64> {
    if set(cx, "hybrid_layer_pattern") || set(cx, "hybrid_override_pattern") {
        return None;
    }
    let given: Vec<&str> = VPP_KEYS.into_iter().filter(|k| set(cx, k)).collect();
    if given.len() > 1 {
        exclusive(cx, &given, out);
        return None;
    }
    let vpp = match given.first().copied() {
        Some("pipeline_model_parallel_layout") => layout(cx, out)?,
        Some("num_layers_per_virtual_pipeline_stage") => layers_per_stage(cx, out)?,
        Some(_) => positive(cx, "num_virtual_stages_per_pipeline_rank")?,
        None => 1,
    };
    ignored_vpp_size(cx, vpp, out);
    // Megatron: a virtual pipeline size of 1 is None (no interleaving).
    if vpp <= 1 {
        return None;
    }
    interleaved_pipeline_size(cx, out)?;
    if given.first() == Some(&"num_virtual_stages_per_pipeline_rank") {
        virtual_stages_layers(cx, vpp, out)?;
    }
    Some(vpp)
}

fn positive(cx: &Ctx<'_>, key: &str) -> Option<u64> {
    cx.int(key).filter(|n| *n > 0).map(|n| n as u64)
}

/// `validate_args` asserts "No more than one of the following arguments can be set at the same
/// time: --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,
/// --pipeline-model-parallel-layout".
fn exclusive(cx: &Ctx<'_>, given: &[&str], out: &mut Vec<Diagnostic>) {
    let named: Vec<String> = given.iter().map(|k| format!("`{k}`")).collect();
    out.push(
        cx.diag(
            Severity::Error,
            "vpp-args-exclusive",
            given[1],
            format!(
                "{} are set together; Megatron asserts at start-up that at most one is (\"No more than one of the following arguments can be set at the same time: --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,--pipeline-model-parallel-layout.\")",
                named.join(" and ")
            ),
        )
        .hint("keep one way of giving the virtual pipeline: a layout, the virtual stages per rank, or the layers per virtual stage"),
    );
}

/// `pipeline_model_parallel_layout`: `validate_args` asserts its stage count
/// (`PipelineParallelLayerLayout.get_num_stages_from_str`,
/// megatron/core/transformer/pipeline_parallel_layer_layout.py) divides by PP; the quotient is
/// the virtual pipeline size.
fn layout(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) -> Option<u64> {
    let pp = cx.params.parallelism.pp;
    let stages = layout_stages(cx.str("pipeline_model_parallel_layout")?)?;
    if stages.is_multiple_of(pp) {
        return Some(stages / pp);
    }
    out.push(
        cx.diag(
            Severity::Error,
            "pipeline-layout-stages",
            "pipeline_model_parallel_size",
            format!(
                "`pipeline_model_parallel_layout` has {stages} stages, which do not divide by `pipeline_model_parallel_size: {pp}`; Megatron asserts it at start-up (\"The length of pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size (num_stages={stages}, args.pipeline_model_parallel_size={pp})\")"
            ),
        )
        .hint(format!(
            "choose a pipeline-parallel size that divides {stages} ({}), or write a layout for this one",
            divisors(stages)
        )),
    );
    None
}

/// The stage count of a layout string as `PipelineParallelLayerLayout.parse_str_to_list`
/// reads it: commas dropped, `(...)*n` then `x*n` unrolled (as its two `re.sub`), split at
/// `|`. None for a string that would unroll beyond a million characters.
fn layout_stages(layout: &str) -> Option<u64> {
    const CAP: usize = 1 << 20;
    let s: Vec<char> = layout.chars().filter(|c| *c != ',').collect();
    let digits_at = |s: &[char], i: usize| -> usize {
        s[i.min(s.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let repeat = |out: &mut Vec<char>, body: &[char], n: &[char]| -> Option<()> {
        let n: usize = n.iter().collect::<String>().parse().ok()?;
        if out.len() + body.len().saturating_mul(n) > CAP {
            return None;
        }
        for _ in 0..n {
            out.extend_from_slice(body);
        }
        Some(())
    };
    // r'\(([^)]+)\)\*(\d+)': the body runs to the first ')'.
    let mut groups = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if s[i] == '('
            && let Some(close) = s[i + 1..].iter().position(|c| *c == ')').map(|k| i + 1 + k)
            && close > i + 1
            && s.get(close + 1) == Some(&'*')
        {
            let n = digits_at(&s, close + 2);
            if n > 0 {
                repeat(&mut groups, &s[i + 1..close], &s[close + 2..close + 2 + n])?;
                i = close + 2 + n;
                continue;
            }
        }
        groups.push(s[i]);
        i += 1;
    }
    // r'(.)\*(\d+)'
    let mut flat = Vec::new();
    let mut i = 0;
    while i < groups.len() {
        if groups[i] != '\n' && groups.get(i + 1) == Some(&'*') {
            let n = digits_at(&groups, i + 2);
            if n > 0 {
                repeat(&mut flat, &groups[i..=i], &groups[i + 2..i + 2 + n])?;
                i += 2 + n;
                continue;
            }
        }
        flat.push(groups[i]);
        i += 1;
    }
    Some(flat.iter().filter(|c| **c == '|').count() as u64 + 1)
}

/// `num_layers_per_virtual_pipeline_stage`: `validate_args` refuses uneven first/last stages
/// with it, and asserts the layers of a pipeline stage ((num_layers + the embedding/loss
/// stages) / PP) divide by it; the quotient is the virtual pipeline size. Layers that do not
/// divide by PP are `pipeline-layers`' finding.
fn layers_per_stage(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) -> Option<u64> {
    let key = "num_layers_per_virtual_pipeline_stage";
    let per_virtual = positive(cx, key)?;
    let pp = cx.params.parallelism.pp;
    let uneven = [
        "decoder_first_pipeline_num_layers",
        "decoder_last_pipeline_num_layers",
    ]
    .into_iter()
    .find(|k| set(cx, k));
    if let Some(uneven) = uneven {
        out.push(
            cx.diag(
                Severity::Error,
                "vpp-layers",
                key,
                format!(
                    "`{key}` with `{uneven}`: Megatron asserts at start-up that uneven stages take the virtual stages per rank instead (\"please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree when enable uneven pipeline parallelism\")"
                ),
            )
            .hint(format!("replace `{key}` with `num_virtual_stages_per_pipeline_rank`")),
        );
        return None;
    }
    let counted = counted_layers(cx)?;
    if !counted.is_multiple_of(pp) {
        return None;
    }
    let per_stage = counted / pp;
    if per_stage.is_multiple_of(per_virtual) {
        return Some(per_stage / per_virtual);
    }
    out.push(
        cx.diag(
            Severity::Error,
            "vpp-layers",
            key,
            format!(
                "each of `pipeline_model_parallel_size: {pp}` stages holds {per_stage} layers, which do not split into virtual stages of `{key}: {per_virtual}`; Megatron asserts it at start-up (\"number of layers per pipeline stage must be divisible number of layers per virtual pipeline stage\")"
            ),
        )
        .hint(format!(
            "choose layers per virtual stage that divide {per_stage}: {}",
            divisors(per_stage)
        )),
    );
    None
}

/// `num_layers` plus one for each of the embedding/loss pipeline-split flags (what
/// `validate_args` and `get_num_layers_to_build` divide by PP).
pub(super) fn counted_layers(cx: &Ctx<'_>) -> Option<u64> {
    let layers = cx.params.shape.layers?;
    let extra = [
        "account_for_embedding_in_pipeline_split",
        "account_for_loss_in_pipeline_split",
    ]
    .iter()
    .filter(|k| cx.on(k))
    .count() as u64;
    Some(layers + extra)
}

/// `num_virtual_stages_per_pipeline_rank` is taken as the virtual pipeline size as it is;
/// `megatron/core/transformer/transformer_block.py` (`get_num_layers_to_build`) asserts at model
/// build that the layers of a pipeline rank divide by it. Uneven stages are checked otherwise
/// (TransformerConfig) and not here.
fn virtual_stages_layers(cx: &Ctx<'_>, vpp: u64, out: &mut Vec<Diagnostic>) -> Option<()> {
    let pp = cx.params.parallelism.pp;
    if set(cx, "decoder_first_pipeline_num_layers") || set(cx, "decoder_last_pipeline_num_layers") {
        return Some(());
    }
    let Some(counted) = counted_layers(cx).filter(|n| n.is_multiple_of(pp)) else {
        return Some(());
    };
    let per_rank = counted / pp;
    if per_rank.is_multiple_of(vpp) {
        return Some(());
    }
    let key = "num_virtual_stages_per_pipeline_rank";
    out.push(
        cx.diag(
            Severity::Error,
            "vpp-layers",
            key,
            format!(
                "each of `pipeline_model_parallel_size: {pp}` ranks holds {per_rank} layers, which do not split into `{key}: {vpp}` virtual stages; Megatron asserts it when it builds the model (\"num_layers_per_pipeline_rank {per_rank} should be divisible by vp_size {vpp}\")"
            ),
        )
        .hint(format!(
            "choose virtual stages per rank that divide {per_rank}: {}",
            divisors(per_rank)
        )),
    );
    None
}

/// `validate_args`, with a virtual pipeline: with `overlap_p2p_comm` (Megatron's default, on
/// unless `--no-overlap-p2p-communication`) PP must be above 1; without it above 2.
fn interleaved_pipeline_size(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) -> Option<()> {
    let pp = cx.params.parallelism.pp;
    let overlap = match cx.leaf("overlap_p2p_comm") {
        Some(l) => l.value.truthy(),
        None => crate::config::megatron_defaults::get("overlap_p2p_comm")
            .is_none_or(crate::domain::value::Value::truthy),
    };
    let (min, quote) = if overlap {
        (
            2,
            "When interleaved schedule is used, pipeline-model-parallel size should be greater than 1",
        )
    } else {
        (
            3,
            "When interleaved schedule is used and p2p communication overlap is disabled, pipeline-model-parallel size should be greater than 2 to avoid having multiple p2p sends and recvs between same 2 ranks per communication batch",
        )
    };
    if pp >= min {
        return Some(());
    }
    let with = if overlap {
        ""
    } else {
        " with `overlap_p2p_comm: false`"
    };
    out.push(
        cx.diag(
            Severity::Error,
            "vpp-pipeline-size",
            "pipeline_model_parallel_size",
            format!(
                "the interleaved schedule (a virtual pipeline) needs `pipeline_model_parallel_size` of at least {min}{with}, not {pp}; Megatron asserts it at start-up (\"{quote}\")"
            ),
        )
        .hint(format!(
            "use a pipeline-parallel size of at least {min}, or no virtual pipeline stages"
        )),
    );
    None
}

/// `virtual_pipeline_model_parallel_size` is no argument of Megatron-LM at Primus' pin (its
/// argument list says "no CLI argument exists" for it): Primus' MegatronArgBuilder drops it,
/// and `validate_args` sets the virtual pipeline size from [`VPP_KEYS`] (None without them).
/// Set to another size than Megatron derives, the config does not run the schedule it says.
fn ignored_vpp_size(cx: &Ctx<'_>, runs: u64, out: &mut Vec<Diagnostic>) {
    let key = "virtual_pipeline_model_parallel_size";
    let Some(said) = positive(cx, key) else {
        return;
    };
    if said == runs || (said <= 1 && runs <= 1) {
        return;
    }
    let derived = if runs > 1 {
        format!("which give {runs}")
    } else {
        "none of which is set, so the schedule is not interleaved".into()
    };
    out.push(
        cx.diag(
            Severity::Warning,
            "vpp-size-ignored",
            key,
            format!(
                "`{key}: {said}` has no effect: it is not an argument of Megatron-LM (Primus drops it), and Megatron's validate_args takes the virtual pipeline size from `num_layers_per_virtual_pipeline_stage`, `num_virtual_stages_per_pipeline_rank` or `pipeline_model_parallel_layout`, {derived}"
            ),
        )
        .hint(format!(
            "set `num_virtual_stages_per_pipeline_rank: {said}` for {said} virtual stages per pipeline rank"
        )),
    );
}

/// The switches of Primus' own pipeline schedules (primus/backends/megatron/patches/parallelism/
/// `zero_bubble_patches.py`, `schedule_patches.py`): each replaces Megatron's
/// `get_forward_backward_func`, so Megatron's interleaved schedule and its micro-batch checks do
/// not run. (Primus' zero_bubble.yaml turns `enable_zb_runtime` and `enable_zero_bubble` on by
/// default; they choose among Primus' schedules only once `patch_zero_bubble` installs them.)
const OTHER_SCHEDULES: [&str; 2] = ["patch_zero_bubble", "patch_primus_pipeline"];

/// `megatron/core/pipeline_parallel/schedules.py` (`forward_backward_pipelining_with_interleaving`)
/// with N = `microbatch_group_size_per_vp_stage` (PP when unset, `ModelParallelConfig`) and M
/// micro batches per iteration (global batch / (micro batch × DP)): raises `ValueError` unless
/// PP ≤ N ≤ M, and `RuntimeError` when M mod N is between 1 and PP − 1 (with N = PP: M must be
/// a multiple of PP). Both in the first training step. Needs the world for DP.
fn interleaved_microbatches(cx: &Ctx<'_>, w: &World, vpp: u64, out: &mut Vec<Diagnostic>) {
    if OTHER_SCHEDULES.iter().any(|k| cx.on(k)) || set(cx, "rampup_batch_size") {
        return;
    }
    let p = cx.params.parallelism;
    let pp = p.pp;
    let Some(dp) = p.data_parallel(w.gpus) else {
        return;
    };
    // A global batch that does not split is `global-batch-divisibility`'s.
    let Some(m) = cx.params.batch.accumulation_steps(dp) else {
        return;
    };
    let group_key = "microbatch_group_size_per_vp_stage";
    let (n, group) = match positive(cx, group_key) {
        Some(n) => (n, format!("`{group_key}: {n}`")),
        None => (pp, format!("{pp} (`{group_key}` is unset, so it is PP)")),
    };
    let batches =
        format!("{m} micro batches per iteration (global batch / (micro batch × DP {dp}), {w})");
    let message = if n > m || n < pp {
        format!(
            "the interleaved schedule (virtual pipeline size {vpp}) runs micro batches in groups of {group}, which must range from PP = {pp} to the {batches}; Megatron passes start-up and raises ValueError in the first training step (\"The number of contiguous micro-batches in a virtual pipeline stageshould range in [PP={pp} , M={m}]\")"
        )
    } else {
        let rest = m % n;
        if rest == 0 || rest >= pp {
            return;
        }
        format!(
            "the interleaved schedule (virtual pipeline size {vpp}) runs the {batches} in groups of {group}, leaving a last group of {rest}, fewer than PP = {pp}; Megatron passes start-up and raises RuntimeError in the first training step (\"The remainder of M (the total micro-batches) divided by N (number of contiguous micro-batches in a virtual pipeline stage) should be 0, or larger than or equal to the pipeline-parallel size, but it is {rest}. ...\")"
        )
    };
    out.push(
        cx.diag(Severity::Error, "vpp-microbatches", "global_batch_size", message)
            .hint(format!(
                "make the micro batches per iteration a multiple of {pp} and at least {pp} (global_batch_size a multiple of micro_batch_size × DP × PP = {}), or drop the virtual pipeline",
                cx.params.batch.micro.unwrap_or(1) * dp * pp
            )),
    );
}

#[cfg(test)]
mod tests {
    use super::layout_stages;

    #[test]
    fn layout_stages_unroll_as_megatron_parses_them() {
        // The example of parse_str_to_list's docstring: [E,t,t,t] + [t,t]*29 + [m] + [L].
        assert_eq!(layout_stages("Ettt|(tt|)*29,m|L"), Some(32));
        assert_eq!(layout_stages("Et*3|t*4|t*4|t*4,L"), Some(4));
        // DeepSeek-V3's layout in AMD's MI355X example: 32 stages (PP 16 × VPP 2).
        let v3 = "Et*1|t*1|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*2|t*1,L";
        assert_eq!(layout_stages(v3), Some(32));
        assert_eq!(layout_stages("E(tt|)*3,ttL"), Some(4));
        assert_eq!(layout_stages("Ett"), Some(1));
        // A pipe repeated by `x*n`.
        assert_eq!(layout_stages("Et|*3tL"), Some(4));
        // Beyond a million characters: not read.
        assert_eq!(layout_stages("(t|)*999999999"), None);
    }
}
