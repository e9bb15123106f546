//! TorchTitan's start-up asserts that depend on the world size (torchtitan v0.2.2, the commit
//! Primus pins): the parallel degrees must tile the world (`ParallelDims._validate`), the
//! expert mesh must tile it too (`ParallelDims.build_mesh`: `efsdp = dp_shard × CP × TP /
//! (ETP × EP)`), ETP must be TP or 1 with EP > 1, and the global batch must split into local
//! batches over the data-parallel degree (`Trainer.__init__`). Like [`super::world`], the
//! world-dependent rules run only against a known world; without one, only what holds at every
//! world size is checked.

use super::Ctx;
use crate::config::diag::{Diagnostic, Severity};
use crate::megatron::World;
use crate::megatron::titan::Titan;

const SHARD: &str = "parallelism.data_parallel_shard_degree";
const REPLICATE: &str = "parallelism.data_parallel_replicate_degree";
pub(super) const TP: &str = "parallelism.tensor_parallel_degree";
const PP: &str = "parallelism.pipeline_parallel_degree";
pub(super) const CP: &str = "parallelism.context_parallel_degree";
const EP: &str = "parallelism.expert_parallel_degree";
const ETP: &str = "parallelism.expert_tensor_parallel_degree";
pub(super) const LOCAL: &str = "training.local_batch_size";
const GLOBAL: &str = "training.global_batch_size";

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some(t) = &cx.titan else {
        return;
    };
    expert_tensor(cx, t, out);
    let world = cx.world.filter(World::builds_groups);
    let shard = match world {
        Some(w) => match degrees(cx, t, &w, out) {
            Some(s) => Some(s),
            // The degrees do not tile the world: nothing built on them is checked.
            None => return,
        },
        None => None,
    };
    if let (Some(w), Some(s)) = (world, shard) {
        expert_mesh(cx, t, &w, s, out);
    }
    batch(
        cx,
        t,
        world.zip(shard).map(|(w, s)| (w, t.dp_replicate * s)),
        out,
    );
}

/// `ParallelDims._validate`: a shard degree of -1 takes what the world leaves after replicate
/// × CP × TP × PP (at least 1); then replicate × shard × CP × TP × PP must be the world size.
/// Returns the shard degree when the degrees tile the world.
fn degrees(cx: &Ctx<'_>, t: &Titan, w: &World, out: &mut Vec<Diagnostic>) -> Option<u64> {
    if let Some(shard) = t.shard_degree(w.gpus) {
        return Some(shard);
    }
    let rest = t.non_shard_size();
    let given = match t.dp_shard {
        Some(s) => format!("dp_shard {s}"),
        None => format!("dp_shard -1 → {}", w.gpus / rest),
    };
    let key = [
        (SHARD, t.dp_shard.unwrap_or(1)),
        (TP, t.tp),
        (PP, t.pp),
        (CP, t.cp),
        (REPLICATE, t.dp_replicate),
    ]
    .into_iter()
    .find(|(_, v)| *v > 1)
    .map_or(TP, |(k, _)| k);
    out.push(
        cx.diag(
            Severity::Error,
            "titan-world-parallel",
            key,
            format!(
                "{w} is not tiled by dp_replicate × dp_shard × CP × TP × PP = {} × ({given}) × {} × {} × {}; torchtitan asserts \"Invalid parallel dims\" at start-up",
                t.dp_replicate, t.cp, t.tp, t.pp
            ),
        )
        .hint(format!(
            "run on a multiple of {rest} GPUs (dp_replicate × CP × TP × PP) with {SHARD}: -1, or choose degrees whose product is {}",
            w.gpus
        )),
    );
    None
}

/// `ParallelDims._validate`: with EP > 1, "Currently we only support ETP=TP or ETP=1".
fn expert_tensor(cx: &Ctx<'_>, t: &Titan, out: &mut Vec<Diagnostic>) {
    if t.ep <= 1 || t.etp == t.tp || t.etp == 1 {
        return;
    }
    out.push(
        cx.diag(
            Severity::Error,
            "titan-expert-tensor-parallel",
            ETP,
            format!(
                "`{ETP}: {}` with `{EP}: {}` is neither TP ({}) nor 1; torchtitan asserts \"Currently we only support ETP=TP or ETP=1\" at start-up",
                t.etp, t.ep, t.tp
            ),
        )
        .hint(format!("set {ETP} to {} or 1", t.tp)),
    );
}

/// `ParallelDims.build_mesh`: the expert region is (PP, replicate, efsdp, EP, ETP) with
/// `efsdp = dp_shard × CP × TP // (ETP × EP)`; unless ETP × EP divides dp_shard × CP × TP, that
/// mesh does not cover the world and building it fails.
fn expert_mesh(cx: &Ctx<'_>, t: &Titan, w: &World, shard: u64, out: &mut Vec<Diagnostic>) {
    if t.ep <= 1 {
        return;
    }
    let region = shard * t.cp * t.tp;
    let experts = t.etp * t.ep;
    if region.is_multiple_of(experts) {
        return;
    }
    out.push(
        cx.diag(
            Severity::Error,
            "titan-world-expert-parallel",
            EP,
            format!(
                "on {w}, dp_shard × CP × TP = {shard} × {} × {} = {region} is not divisible by ETP × EP = {} × {} = {experts}, so torchtitan cannot build its expert mesh (efsdp = {region} / {experts}) at start-up",
                t.cp, t.tp, t.etp, t.ep
            ),
        )
        .hint(format!(
            "choose an expert parallel degree that divides {} (dp_shard × CP × TP / ETP)",
            region / t.etp.max(1)
        )),
    );
}

/// `Trainer.__init__`: a global batch of -1 is the local batch × the data-parallel degree; a
/// positive one must be a multiple of it (gradient accumulation steps are their quotient).
/// `dp`: the world and the data-parallel degree (replicate × shard) when known.
fn batch(cx: &Ctx<'_>, t: &Titan, dp: Option<(World, u64)>, out: &mut Vec<Diagnostic>) {
    let (Some(local), Some(global)) = (t.local_batch, t.global_batch) else {
        return;
    };
    let per = local * dp.map_or(1, |(_, d)| d);
    if global.is_multiple_of(per) {
        return;
    }
    let message = match dp {
        Some((w, d)) => format!(
            "`{GLOBAL}: {global}` is not a multiple of the local batch × the data-parallel degree = {local} × {d} = {per} ({w}); torchtitan asserts \"global batch size must be multiple of local batch size times data-parallel degree\" at start-up"
        ),
        None => format!(
            "`{GLOBAL}: {global}` is not a multiple of `{LOCAL}: {local}`, so it splits into local batches at no data-parallel degree; torchtitan asserts it at start-up"
        ),
    };
    let lower = global / per * per;
    let mut fixes = Vec::new();
    if lower > 0 {
        fixes.push(format!("`{GLOBAL}: {lower}`"));
    }
    fixes.push(format!("`{GLOBAL}: {}`", lower + per));
    fixes.push(format!(
        "`{GLOBAL}: -1` (one local batch per rank, no accumulation)"
    ));
    out.push(
        cx.diag(Severity::Error, "titan-global-batch", GLOBAL, message)
            .hint(format!("set {}", fixes.join(" or "))),
    );
}
