//! TorchTitan's rules on a parallel layout that hold at every world size (torchtitan v0.2.2, the
//! commit Primus pins): the sequence splits over TP × 2·CP (every model's `parallelize_*`
//! asserts `seq_len % parallel_dims.seq_len_divisor == 0`), the local batch splits into pipeline
//! microbatches (`distributed/pipeline_parallel.py`, `build_pipeline_schedule`), and attention
//! heads split over TP (the colwise-sharded projections are viewed as `(-1, head_dim)` per rank
//! in `Attention.forward`, so an uneven split fails at the first forward, not at start-up).

use super::Ctx;
use crate::config::diag::{Diagnostic, Severity};
use crate::megatron::titan::Titan;

use super::titan_world::{CP, LOCAL, TP};

const SEQ: &str = "training.seq_len";
const MICRO: &str = "parallelism.pipeline_parallel_microbatch_size";

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some(t) = &cx.titan else {
        return;
    };
    sequence(cx, t, out);
    microbatches(cx, t, out);
    heads(cx, t, out);
}

/// `ParallelDims.seq_len_divisor` = TP × 2·CP: sequence parallelism splits the sequence over
/// TP, and context parallelism's load balancing splits it into 2·CP chunks.
fn sequence(cx: &Ctx<'_>, t: &Titan, out: &mut Vec<Diagnostic>) {
    let Some(seq) = t.seq else {
        return;
    };
    let divisor = t.tp * 2 * t.cp;
    if seq.is_multiple_of(divisor) {
        return;
    }
    let key = if t.cp > 1 { CP } else { TP };
    out.push(
        cx.diag(
            Severity::Error,
            "titan-seq-divisor",
            key,
            format!(
                "`{SEQ}: {seq}` is not divisible by TP × 2·CP = {} × 2·{} = {divisor}; torchtitan asserts \"Sequence length must be divisible by the product of TP degree and 2 * CP degree\" at start-up",
                t.tp, t.cp
            ),
        )
        .hint(format!(
            "set {SEQ} to a multiple of {divisor}, or lower TP or CP"
        )),
    );
}

/// `build_pipeline_schedule`: with PP > 1 the local batch is split into microbatches of
/// `pipeline_parallel_microbatch_size` ("Batch size must be divisible by microbatch_size").
fn microbatches(cx: &Ctx<'_>, t: &Titan, out: &mut Vec<Diagnostic>) {
    let Some(local) = t.local_batch else {
        return;
    };
    if t.pp <= 1 || local.is_multiple_of(t.pp_microbatch) {
        return;
    }
    out.push(
        cx.diag(
            Severity::Error,
            "titan-pipeline-microbatch",
            MICRO,
            format!(
                "`{LOCAL}: {local}` is not divisible by `{MICRO}: {}`; torchtitan raises \"Batch size must be divisible by microbatch_size\" when it builds the pipeline schedule",
                t.pp_microbatch
            ),
        )
        .hint(format!(
            "set {MICRO} to a divisor of {local}, or {LOCAL} to a multiple of {}",
            t.pp_microbatch
        )),
    );
}

/// The attention projections are sharded colwise over TP and each rank views its shard as
/// whole heads: the query heads and the key/value heads must both split over TP.
fn heads(cx: &Ctx<'_>, t: &Titan, out: &mut Vec<Diagnostic>) {
    let Some(f) = t.flavor else {
        return;
    };
    if t.tp <= 1 || (f.heads.is_multiple_of(t.tp) && f.kv_heads.is_multiple_of(t.tp)) {
        return;
    }
    out.push(
        cx.diag(
            Severity::Error,
            "titan-heads-tensor-parallel",
            TP,
            format!(
                "{} has {} attention heads and {} key/value heads, which `{TP}: {}` does not split evenly; each rank views its share of the projections as whole heads, so the first forward fails",
                t.model_label(),
                f.heads,
                f.kv_heads,
                t.tp
            ),
        )
        .hint(format!(
            "choose a TP degree that divides {}",
            gcd(f.heads, f.kv_heads)
        )),
    );
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
