//! The memory model for TorchTitan configs: peak bytes per GPU of the first pipeline stage, from
//! the module's dotted keys ([`crate::megatron::titan::Titan`]) and its model flavor.
//!
//! Sources (torchtitan as Primus pins it: v0.2.2, `research/primus.md` §0):
//! * sharding: `parallelize_llama` → `apply_fsdp`: FSDP2 `fully_shard` on every transformer block
//!   and on the root (token embedding, final norm, output layer), with
//!   `MixedPrecisionPolicy(param_dtype=training.mixed_precision_param,
//!   reduce_dtype=training.mixed_precision_reduce)`. Parameters, gradients and AdamW's two
//!   moments are sharded in fp32 over the `dp_shard × cp` mesh: 4 + 4 + 8 = 16 bytes per
//!   parameter divided by the shard degree (ZeRO-3's count, `research/tuners.md` §2.2). While it
//!   runs a unit is gathered in the param dtype: the root for the whole step, a block and the
//!   next one prefetched (every block with `fsdp_reshard_after_forward: never`); in backward the
//!   root's unsharded gradient lives until the root's reduce-scatter at the end, plus one
//!   block's. Routed experts are split over EP (borrowed from the shard dimension) and sharded
//!   over the rest: expert parameters / max(dp_shard × CP, EP) per GPU. TP shards the
//!   attention, MLP, embedding and output weights; norms are replicated.
//! * activations: Korthikanti et al. 2022, Table 2, term by term as the Megatron model
//!   (`research/tuners.md` §7.4), for TorchTitan's block: RMSNorm and no dropout (no masks),
//!   SDPA flash/memory-efficient attention (no score matrix), SwiGLU (`w1`, `w3` and the product
//!   kept: 3 F-wide tensors under `torch.compile`, 4 in eager mode where `silu(w1·x)` is kept
//!   too). TorchTitan's TP plan runs the norms sequence-parallel, so TP divides every term (the
//!   TP+SP row); CP divides the sequence. MoE blocks as in the Megatron model (fp32 router
//!   scores, top-k routed rows through the experts, balanced routing).
//! * checkpointing: `torchtitan/distributed/activation_checkpoint.py`: `full` wraps every block
//!   (its input kept, the block rerun in backward); selective `op` saves, per block, the output
//!   of SDPA and of every other `aten.mm` (`_save_list` with `mm_count % 2`: `wq`, `wv`, `w1`,
//!   `w2` of the block's `wq wk wv wo w1 w3 w2`), plus the block input, and recomputes the rest;
//!   selective N (`_apply_layer_sac`) fully checkpoints every N-th block. A recomputed block is
//!   whole while it reruns. MoE blocks under `op`: the routed experts (grouped GEMMs, not in the
//!   save list) are recomputed; the router output and the shared experts' `w1`, `w3` and `w2`
//!   outputs are counted as saved (an upper bound).
//! * without FSDP (`ParallelDims.fsdp_enabled` false: one GPU, or DDP) mixed precision is
//!   `torch.autocast` (`distributed/utils.py::maybe_enable_amp`): parameters, gradients and the
//!   residual stream stay fp32, the matmuls run in bf16 and keep the bf16 copies of their
//!   weights for backward; a norm keeps its fp32 input, the next matmul its bf16 output; a
//!   checkpointed block keeps its fp32 input. With TP or PP and no FSDP mixed precision is off
//!   (activations counted twice). Qwen3's per-head query and key norms keep their inputs.
//! * output: the final norm, and the loss (`components/loss.py`: cross-entropy on
//!   `pred.float()`, `pred` deleted before backward): as its backward starts it holds the
//!   log-softmax output it kept, the incoming gradient and the gradient it makes, 3 fp32 copies of
//!   the logits in eager mode; a compiled loss (fused) as one. Sharded over TP by loss
//!   parallelism.
//! * the peak: gradients are set to None after each step, so without accumulation (several
//!   microbatches, or a pipeline) the sharded fp32 gradients build up only as backward frees the
//!   activations: the peak is the larger of the activations (as backward starts) and the
//!   gradients (as it ends), `grads_bytes` what of them is live at the peak.
//!
//! Measured on the H200 (docs/validation/h200-2026-12-03-titan/: upstream TorchTitan v0.2.2,
//! Qwen3 1.7B, one GPU, eager, local batch 1–32 × none/selective/full): the uncalibrated model is
//! within −16 … −1 % of the 14 peaks (TorchTitan's `memory:`, the allocator's max reserved), and
//! names the 4 OOMs; before the autocast, loss and peak terms it was up to 50 % low. Compiled
//! (model and loss, Primus' default): −5 … +2 % on 3 runs. Held out (h200-2026-12-04-titan4b/:
//! Qwen3 4B, sequence 4096, local batch 1–8): −15 … −4 % of the 8 peaks, 3 of the 4 OOMs named.
//! A probe of the saved tensors there (that folder's README) found what eager autocast keeps
//! beyond this count: each of `wq`/`wk`/`wv` and `w1`/`w3` its own bf16 cast of the norm output,
//! and the query/key norms 8 bytes an element; counted since, the uncalibrated model is within
//! −5.5 … −1.3 % without checkpointing on both grids (−13.3 … +0.1 % in all), the rest being
//! mostly the caching allocator's reserve (1.3–5.8 GiB above the tensors' peak in the probe),
//! left to the search's calibration (per recompute setting, since it is largest with full).
//!
//! Float8 linears (`quantize.linear.float8`, torchao's `Float8Linear`, torchao 0.17): the layer
//! keeps its fp32 weight for backward and casts it to float8 in each matmul, so under autocast
//! there is no bf16 weight copy of a converted linear. On the H200 (upstream TorchTitan, Qwen3
//! 4B, compiled, docs/validation/h200-2026-12-04-float8/) float8 peaks were 4.4 GiB + 3.1 GiB a
//! sample below bf16's; this term is 6.8 GiB there. The per-sample part (torchao saves the bf16
//! input; under compile the partitioner decides what is kept) is measured, not derived: 1.36
//! bytes per element of a dense block's linear inputs (3h + F a token), fitted on that grid and
//! checked on a held-out Qwen3 1.7B grid (float8 forecasts +0.3 … +5.0 %, were +13 … +18 %).
//!
//! What no closed form sees (allocator, RCCL, compile's own choices) is left to the calibration.

use super::{MemoryError, Terms};
use crate::domain::value::Value;
use crate::megatron::flavors::Flavor;
use crate::megatron::titan::{Checkpointing, Titan};
use std::collections::BTreeMap;

/// Bytes per element of a dense block's linear inputs that compiled float8 linears keep less
/// than bf16 ones (measured, see `estimate`).
const F8_SAVED_PER_INPUT: f64 = 1.36;

/// The sizes of a TorchTitan model's first stage and how it runs (FSDP, autocast).
#[derive(Clone, Copy)]
struct Model<'t> {
    t: &'t Titan,
    f: Flavor,
    p: &'t BTreeMap<String, Value>,
    shard: u64,
    s: f64,
    local: u64,
    h: f64,
    a: f64,
    g: f64,
    k: f64,
    ffn: f64,
    vocab: f64,
    tp: f64,
    cp: f64,
    ep: f64,
    layers: usize,
    e: f64,
    topk: f64,
    fm: f64,
    fs: f64,
    /// FSDP wraps the model; else, autocast's mixed precision, or fp32 compute with TP or PP.
    wrapped: bool,
    autocast: bool,
    fp32_compute: bool,
}

/// One microbatch on the first stage: its stored and working activations, its tokens, and the
/// bytes a norm keeps of them.
struct Stage {
    stored: f64,
    working: f64,
    tok: f64,
    norm: f64,
}

/// What the parameters cost: the sharded states, the gathered units FSDP adds to the weights
/// (`extra`) and their gradients (`unit_grads`).
struct States {
    weights: f64,
    grads: f64,
    optimizer: f64,
    extra: f64,
    unit_grads: f64,
}

/// The terms of the peak memory per GPU of a TorchTitan config on `world_size` GPUs (no MoE
/// buffer term: TorchTitan's all-to-all has no preallocated buffer).
pub(super) fn terms(
    p: &BTreeMap<String, Value>,
    world_size: u64,
    notes: &mut Vec<String>,
) -> Result<Terms, MemoryError> {
    let t = Titan::from_values(p).ok_or_else(|| MemoryError::Missing("model.name".into()))?;
    let m = Model::of(&t, p, world_size)?;
    let States {
        weights,
        mut grads,
        optimizer,
        extra,
        unit_grads,
    } = m.states(notes);
    let activations = m.activations(notes)?;
    let (t, local) = (m.t, m.local);
    // Gradients are set to None after each step: without accumulation (microbatches, pipeline)
    // the sharded fp32 gradients build up only as backward frees the activations, so the peak is
    // the larger of the two moments.
    let accumulates = t.pp > 1
        || t.global_batch
            .is_some_and(|gb| gb > local * t.data_parallel(world_size).unwrap_or(1).max(1));
    if !accumulates {
        grads = unit_grads + (grads - extra - activations).max(0.0);
    } else {
        grads += unit_grads;
    }

    m.notes(notes);
    Ok(Terms {
        weights,
        grads,
        optimizer,
        activations,
        moe_buffers: 0.0,
    })
}

impl<'t> Model<'t> {
    fn of(
        t: &'t Titan,
        p: &'t BTreeMap<String, Value>,
        world_size: u64,
    ) -> Result<Model<'t>, MemoryError> {
        let f = t.flavor.ok_or_else(|| MemoryError::UnknownModel {
            model: t.model_label(),
            known: crate::megatron::flavors::known().join(", "),
        })?;
        let s = t
            .seq
            .ok_or_else(|| MemoryError::Missing("training.seq_len".into()))? as f64;
        let local = t
            .local_batch
            .ok_or_else(|| MemoryError::Missing("training.local_batch_size".into()))?;
        let shard = t.shard_degree(world_size).ok_or(MemoryError::World {
            world: world_size,
            group: "replicate×CP×TP×PP×dp_shard",
            size: (t.non_shard_size() * t.dp_shard.unwrap_or(1)) as f64,
        })?;
        let wrapped = t.fsdp(world_size);
        Ok(Model {
            t,
            f,
            p,
            shard,
            s,
            local,
            h: f.dim as f64,
            a: f.heads as f64,
            g: f.kv_heads as f64,
            k: f.head_dim as f64,
            ffn: f.ffn as f64,
            vocab: f.vocab as f64,
            tp: t.tp as f64,
            cp: t.cp as f64,
            ep: t.ep as f64,
            layers: t.stage_layers().unwrap_or(f.layers) as usize,
            e: f.moe.map_or(0.0, |m| m.experts as f64),
            topk: f.moe.map_or(0.0, |m| m.topk as f64),
            fm: f.moe.map_or(0.0, |m| m.ffn as f64),
            fs: f.moe.map_or(0.0, |m| m.shared_ffn as f64),
            wrapped,
            // Without FSDP (one GPU, or DDP) mixed precision is torch.autocast: fp32 parameters
            // and residual stream, bf16 matmuls; with TP or PP and no FSDP it is off (fp32
            // compute).
            autocast: !wrapped && t.tp == 1 && t.pp == 1 && t.bf16,
            fp32_compute: !wrapped && (t.tp > 1 || t.pp > 1),
        })
    }

    /// Block `i` is an MoE block.
    fn is_moe(&self, i: usize) -> bool {
        self.f.moe.is_some_and(|m| i as u64 >= m.dense_layers)
    }

    /// The parameters of the first stage (TP-sharded, replicated norms, routed experts) and
    /// what they cost.
    fn states(&self, notes: &mut Vec<String>) -> States {
        let Model {
            t,
            f,
            p,
            shard,
            h,
            a,
            g,
            k,
            ffn,
            vocab,
            tp,
            cp,
            ep,
            layers,
            e,
            fm,
            fs,
            wrapped,
            autocast,
            ..
        } = *self;
        let is_moe = |i: usize| self.is_moe(i);
        // Parameters of the first stage: TP-sharded, replicated (norms), routed experts.
        let attention = 2.0 * h * k * (a + g); // wq, wo: h·k·a each; wk, wv: h·k·g each
        let block = |i: usize| -> (f64, f64, f64) {
            if is_moe(i) {
                (attention + 3.0 * h * fs, 2.0 * h + h * e, 3.0 * h * fm * e)
            } else {
                (attention + 3.0 * h * ffn, 2.0 * h, 0.0)
            }
        };
        let root_sharded = if t.pp > 1 || f.tied {
            h * vocab
        } else {
            2.0 * h * vocab
        };
        let root_replicated = if t.pp > 1 { 0.0 } else { h };
        let (mut sharded, mut replicated, mut experts) = (root_sharded, root_replicated, 0.0);
        let mut unit_block = 0.0f64; // the largest block, as one GPU gathers it
        let expert_split = (shard as f64 * cp).max(ep);
        for i in 0..layers {
            let (sh, rep, ex) = block(i);
            sharded += sh;
            replicated += rep;
            experts += ex;
            unit_block = unit_block.max(sh / tp + rep + ex / ep);
        }
        let dense = sharded / tp + replicated;
        let fsdp = shard as f64 * cp;
        let per_gpu = dense / fsdp + experts / expert_split;
        let (mut weights, mut grads, mut optimizer) = (4.0 * per_gpu, 4.0 * per_gpu, 8.0 * per_gpu);
        if t.cpu_offload {
            (weights, grads, optimizer) = (0.0, 0.0, 0.0);
            notes.push(
                "CPU offload: sharded parameters, gradients and optimizer state on the host".into(),
            );
        }
        // FSDP's gathered units: the root all step, a block and the next; their gradients.
        // Under autocast instead: the bf16 copy of every matmul weight, which the matmuls keep for
        // backward (the output layer's too when it is tied to the embedding, which runs in fp32).
        let pbytes = if t.bf16 { 2.0 } else { 4.0 };
        let unit_root = root_sharded / tp + root_replicated;
        let never = text(p, "parallelism.fsdp_reshard_after_forward") == Some("never");
        let gathered_blocks = if never {
            (sharded - root_sharded) / tp + replicated - root_replicated + experts / ep
        } else {
            2.0 * unit_block
        };
        let (extra, unit_grads) = if wrapped {
            (
                pbytes * (unit_root + gathered_blocks),
                pbytes * (unit_root + unit_block),
            )
        } else if autocast {
            // Float8 linears (torchao's Float8Linear, `quantize.linear.float8`) keep the fp32 weight
            // itself for backward and cast it to float8 in each matmul: no bf16 copy (the blocks'
            // linears, and the output unless `filter_fqns` leaves it in bf16). Primus-Turbo's own
            // float8 linears are not measured: counted as bf16.
            let torchao = t.float8 && !t.turbo_float8;
            let linears = if torchao { 0.0 } else { sharded - root_sharded };
            let output = if t.pp > 1 || (torchao && t.float8_output) {
                0.0
            } else {
                h * vocab
            };
            (2.0 * ((linears + output) / tp + experts / ep), 0.0)
        } else {
            (0.0, 0.0)
        };
        weights += extra;
        States {
            weights,
            grads,
            optimizer,
            extra,
            unit_grads,
        }
    }

    /// The activations at the first stage's peak.
    fn activations(&self, notes: &mut Vec<String>) -> Result<f64, MemoryError> {
        let Model {
            t,
            f,
            s,
            local,
            h,
            a,
            g,
            k,
            ffn,
            tp,
            cp,
            layers,
            e,
            topk,
            fm,
            fs,
            autocast,
            ..
        } = *self;
        let is_moe = |i: usize| self.is_moe(i);
        // Activations of one microbatch on this rank.
        let micro = t.micro_batch().unwrap_or(local) as f64;
        let tok = s * micro / cp;
        let th = tok * h;
        let sw = if t.compiled { 3.0 } else { 4.0 }; // F-wide tensors a SwiGLU MLP keeps
        // A norm keeps its input (the residual stream: fp32 under autocast) and the next matmul its
        // bf16 output; Qwen3's per-head query and key norms keep their inputs. In eager mode under
        // autocast every matmul casts its fp32 input to bf16 itself and keeps its own copy (autocast
        // caches the casts of parameters only): `wq`, `wk` and `wv` keep three copies of the
        // attention norm's output, `w1` and `w3` two of the MLP norm's (dense blocks; an MoE block's
        // router and experts are counted as before, not probed); the query and key norms run
        // in fp32 (autocast's fp32 list) and keep the fp32 copy of their input and its normalized
        // value, 8 bytes an element (docs/validation/titan/memory_probe.py, saved tensors on the
        // H200). Compiled, the partitioner decides: one copy each, as the model had been measured.
        let eager_autocast = autocast && !t.compiled;
        let nb = if autocast { 4.0 } else { 2.0 };
        let norm = (nb + 2.0) * th;
        let (attn_casts, mlp_casts) = if eager_autocast {
            (4.0 * th, 2.0 * th)
        } else {
            (0.0, 0.0)
        };
        let qk_bytes = if eager_autocast { 8.0 } else { 2.0 };
        let qk_norm = if f.qk_norm {
            qk_bytes * tok * k * (a + g)
        } else {
            0.0
        };
        let attn_part =
            norm + attn_casts + 2.0 * tok * k * (a + 2.0 * g) + 2.0 * tok * k * a + qk_norm;
        // Compiled float8 linears keep less of their inputs than bf16 ones: on the H200 the peaks
        // fell by 1.36 bytes per element of the dense block's linear inputs (3h + F a token: the
        // attention and MLP norms' outputs, the attention output, the SwiGLU product) below bf16's,
        // fitted on the Qwen3 4B grid; on the held-out Qwen3 1.7B grid it puts the saving at 0.89
        // GiB a sample against 0.84 measured (docs/validation/h200-2026-12-04-float8/). Eager float8
        // is not measured (torchao saves the bf16 input there: counted as bf16), nor Primus-Turbo's.
        let float8_kept = if t.float8 && !t.turbo_float8 && t.compiled {
            F8_SAVED_PER_INPUT * tok * (3.0 * h + ffn)
        } else {
            0.0
        };
        let rows = tok * topk * t.etp as f64; // routed rows per rank, balanced routing
        let full = |i: usize| -> f64 {
            let mlp = if is_moe(i) {
                norm + 4.0 * tok * e
                    + rows * (2.0 * h + 2.0 * fm * sw + 4.0)
                    + 2.0 * th
                    + 2.0 * tok * fs * sw
            } else {
                norm + mlp_casts + 2.0 * tok * ffn * sw - float8_kept
            };
            (attn_part + mlp) / tp
        };
        let ckpt = nb * th / tp; // a checkpointed block's input
        let ops = |i: usize| -> f64 {
            let saved_attn = 2.0 * tok * k * (2.0 * a + g); // wq, wv, SDPA outputs
            let mlp = if is_moe(i) {
                let shared = if fs > 0.0 {
                    4.0 * tok * fs + 2.0 * th
                } else {
                    0.0
                };
                2.0 * tok * e + shared
            } else {
                2.0 * tok * ffn + 2.0 * th // w1, w2 outputs
            };
            ckpt + (saved_attn + mlp) / tp
        };
        let (mut stored, mut working) = (0.0, 0.0f64);
        for i in 0..layers {
            let recomputed = match &t.checkpointing {
                Checkpointing::None => None,
                Checkpointing::Full => Some(ckpt),
                Checkpointing::Ops => Some(ops(i)),
                Checkpointing::EveryNth(n) => ((i as u64 + 1).is_multiple_of(*n)).then_some(ckpt),
                Checkpointing::Unknown(m) => return Err(MemoryError::Checkpointing(m.clone())),
            };
            match recomputed {
                Some(kept) => {
                    stored += kept;
                    working = working.max(full(i));
                }
                None => stored += full(i),
            }
        }
        Ok(self.peak(
            Stage {
                stored,
                working,
                tok,
                norm,
            },
            notes,
        ))
    }

    /// The stage's activations at their peak: the stored ones of the microbatches in flight, one
    /// recompute's working set and (one stage) the loss's; doubled in fp32.
    fn peak(&self, st: Stage, notes: &mut Vec<String>) -> f64 {
        let Model {
            t,
            local,
            vocab,
            tp,
            autocast,
            fp32_compute,
            ..
        } = *self;
        let Stage {
            stored,
            working,
            tok,
            norm,
        } = st;
        let inflight = if t.pp > 1 {
            let microbatches = (local / t.pp_microbatch.max(1)).max(1) as f64;
            notes.push(
                "only the first pipeline stage is modeled (1F1B in-flight microbatches)".into(),
            );
            microbatches.min(t.pp as f64)
        } else {
            1.0
        };
        let embedding = 8.0 * tok; // token ids
        // The loss (torchtitan `components/loss.py`: cross-entropy on `pred.float()`, with `pred`
        // deleted before backward): in eager mode, as its backward starts, the log-softmax output
        // it kept, the incoming gradient and the gradient it makes, 3 fp32 copies of the logits
        // (the forward's bf16 logits + fp32 copy + log-softmax output are fewer); a compiled loss
        // is fused, one fp32 copy (both measured on the H200: the module's documentation).
        let logit_bytes = if t.compiled_loss { 4.0 } else { 12.0 };
        let output = if t.pp > 1 {
            0.0
        } else {
            (norm + logit_bytes * tok * vocab) / tp
        };
        let mut activations = (stored + embedding) * inflight + working + output;
        if fp32_compute {
            activations *= 2.0;
            notes.push("TP or PP without FSDP: no mixed precision, activations in fp32".into());
        }
        if autocast {
            notes.push(
                "no FSDP: mixed precision by torch.autocast (fp32 parameters and residual stream, \
             bf16 copies of the matmul weights)"
                    .into(),
            );
        }
        activations
    }

    /// What the model counts otherwise, or not at all, in words.
    fn notes(&self, notes: &mut Vec<String>) {
        let (t, f) = (self.t, self.f);
        let moe = f.moe;
        if t.turbo_float8 {
            notes.push("Primus-Turbo float8 linears: counted as bf16 (not measured)".into());
        } else if t.float8 {
            notes.push(
            "float8 linears: no bf16 weight copies under autocast; compiled, their inputs kept \
             smaller (measured on the H200); eager, activations counted as bf16"
                .into(),
        );
        }
        if f.mla {
            notes.push("multi-latent attention modeled as standard attention".into());
        }
        if moe.is_some() {
            notes.push("routed-token activations assume balanced routing".into());
        }
        if !t.compiled {
            notes.push("eager mode: SwiGLU keeps 4 F-wide tensors".into());
        }
        notes.push("allocator fragmentation, RCCL buffers, workspaces not modeled".into());
    }
}

fn text<'a>(p: &'a BTreeMap<String, Value>, key: &str) -> Option<&'a str> {
    p.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::super::{MemoryEstimate, estimate as any_estimate};
    use super::*;
    use crate::config::overrides::parse_assignment;

    fn with(base: &str, kv: &str) -> BTreeMap<String, Value> {
        format!("{base} {kv}")
            .split_whitespace()
            .map(|a| {
                let o = parse_assignment(a).unwrap();
                (o.key, o.value)
            })
            .collect()
    }

    /// torchtitan's llama3 debugmodel: h = 256, L = 6, a = g = 16, head 16, F = 768, V = 2048,
    /// untied; s = 2048, b = 1, one GPU, compiled.
    const DEBUG: &str = "model.name=llama3 model.flavor=debugmodel training.seq_len=2048 \
        training.local_batch_size=1 parallelism.data_parallel_shard_degree=-1 compile.enable=true";

    fn est(kv: &str, world: u64) -> MemoryEstimate {
        any_estimate(&with(DEBUG, kv), world).unwrap()
    }

    // Per block: attention 2·256·16·32 = 262,144, norms 512, MLP 3·256·768 = 589,824 →
    // 852,480; ×6 = 5,114,880; embedding + output 2·256·2048 = 1,048,576; final norm 256 →
    // N = 6,163,712.
    const N: f64 = 6_163_712.0;

    #[test]
    fn debugmodel_weights_grads_optimizer_by_hand() {
        // FSDP over 8: 16 bytes/param sharded over 8; gathered: root 1,048,832 + two blocks
        // 1,704,960 in bf16 = 5,507,584; gradients at the peak: root + one block 1,901,312 in
        // bf16 = 3,802,624 (the sharded fp32 ones build up as backward frees the activations)
        let m8 = est("", 8);
        assert_eq!(m8.optimizer_bytes, N);
        assert_eq!(m8.weights_bytes, 0.5 * N + 5_507_584.0);
        assert_eq!(m8.grads_bytes, 3_802_624.0);
        // One GPU, no FSDP: torch.autocast, fp32 parameters plus the bf16 copies of the matmul
        // weights, 6 blocks × 851,968 + the output layer 524,288 = 5,636,096 → 11,272,192
        let m = est("", 1);
        assert_eq!(m.weights_bytes, 4.0 * N + 11_272_192.0);
        assert_eq!(m.optimizer_bytes, 8.0 * N);
        assert_eq!(m.grads_bytes, 0.0, "not live at the activation peak");
        assert!(
            m.notes.iter().any(|n| n.contains("torch.autocast")),
            "{m:?}"
        );
        // gradient accumulation (global 4 = local 1 × 4 steps): the gradients are live
        let acc = est("training.global_batch_size=4", 1);
        assert_eq!(acc.grads_bytes, 4.0 * N);
        // HSDP: replicate 2 × shard 4 on 8 GPUs shards over 4 only
        let hsdp = est("parallelism.data_parallel_replicate_degree=2", 8);
        assert_eq!(hsdp.optimizer_bytes, 2.0 * N);
        let e = any_estimate(&with(DEBUG, "parallelism.tensor_parallel_degree=3"), 8);
        assert!(e.unwrap_err().to_string().contains("world size 8"));
        // TP without FSDP: no mixed precision, activations in fp32
        let tp = est("parallelism.tensor_parallel_degree=2", 2);
        let tp_bf16 = est(
            "parallelism.tensor_parallel_degree=2 parallelism.data_parallel_shard_degree=2",
            4,
        );
        assert_eq!(tp.activations_bytes, 2.0 * tp_bf16.activations_bytes);
    }

    // FSDP (bf16 compute), s·b·h = th = 524,288. Block without checkpointing: norms in/out
    // 4·th = 2,097,152; Q K V 2·2048·16·48 = 3,145,728; attention output 1,048,576; MLP norms
    // 2,097,152 and w1, w3, product 2·2048·768·3 = 9,437,184 → 17,825,792. Embedding ids
    // 8·2048 = 16,384; output: final norm 4·th + a compiled loss's fp32 logits 4·2048·2048 =
    // 18,874,368.
    const BLOCK: f64 = 17_825_792.0;
    const EDGES: f64 = 16_384.0 + 18_874_368.0;

    #[test]
    fn debugmodel_activations_by_checkpointing_mode() {
        let act = |kv: &str| est(kv, 8).activations_bytes;
        assert_eq!(act(""), 6.0 * BLOCK + EDGES); // 125,845,504
        // full: six inputs 2·th + one block rerun
        assert_eq!(
            act("activation_checkpoint.mode=full"),
            6.0 * 1_048_576.0 + BLOCK + EDGES
        );
        // op: input 2·th + wq, wv, SDPA 2·2048·16·48 + w1 2·2048·768 + w2 2·th = 8,388,608
        let op =
            "activation_checkpoint.mode=selective activation_checkpoint.selective_ac_option=op";
        assert_eq!(act(op), 6.0 * 8_388_608.0 + BLOCK + EDGES);
        // every 2nd block (the preset's "2"): blocks 2, 4, 6 checkpointed
        let every2 =
            "activation_checkpoint.mode=selective activation_checkpoint.selective_ac_option=2";
        assert_eq!(act(every2), 3.0 * 1_048_576.0 + 4.0 * BLOCK + EDGES);
        assert!(
            act("") > act(every2)
                && act(every2) > act(op)
                && act(op) > act("activation_checkpoint.mode=full")
        );
        // eager: one more F-wide tensor per block, 2·2048·768 = 3,145,728, and the loss's three
        // fp32 copies of the logits instead of one: + 8·2048·2048 = 33,554,432
        assert_eq!(
            act("compile.enable=false"),
            6.0 * (BLOCK + 3_145_728.0) + EDGES + 33_554_432.0
        );
        let bad = any_estimate(&with(DEBUG, "activation_checkpoint.mode=offload"), 1);
        assert!(bad.unwrap_err().to_string().contains("offload"));
    }

    #[test]
    fn one_gpu_autocast_keeps_the_residual_stream_in_fp32() {
        // Under torch.autocast a norm keeps its fp32 input (4·th) and the matmul its bf16
        // output (2·th): 2·th more per norm than with FSDP, so 2 norms × 1,048,576 per block
        // and 1,048,576 at the final norm; a checkpointed block keeps its fp32 input (4·th).
        let one = |kv: &str| est(kv, 1).activations_bytes;
        assert_eq!(one(""), 6.0 * (BLOCK + 2_097_152.0) + EDGES + 1_048_576.0);
        assert_eq!(
            one("activation_checkpoint.mode=full"),
            6.0 * 2_097_152.0 + BLOCK + 2_097_152.0 + EDGES + 1_048_576.0
        );
    }

    #[test]
    fn qwen3_keeps_its_query_and_key_norm_inputs() {
        // Qwen3 0.6B (h 1024, 16 heads of 128, 8 KV heads, F 3072, V 151,936, 28 layers),
        // s 2048, b 1, FSDP over 8, compiled. th = 2,097,152. Per block: norms 4·th
        // 8,388,608; Q K V 2·2048·128·32 = 16,777,216; attention output 8,388,608; the per-head
        // norms' inputs 2·2048·128·(16 + 8) = 12,582,912; MLP norms 8,388,608 and
        // 2·2048·3072·3 = 37,748,736 → 92,274,688, × 28 = 2,583,691,264. Token ids 16,384;
        // output: final norm 8,388,608 + fp32 logits 4·2048·151,936 = 1,244,659,712.
        assert_eq!(
            qwen3("0.6B", "compile.enable=true", 8),
            2_583_691_264.0 + 16_384.0 + 8_388_608.0 + 1_244_659_712.0
        );
    }

    /// Activation bytes of Qwen3 `flavor` at sequence 2048, local batch 1, with `kv`, on `world`
    /// GPUs.
    fn qwen3(flavor: &str, kv: &str, world: u64) -> f64 {
        let p = format!(
            "model.name=qwen3 model.flavor={flavor} training.seq_len=2048 \
             training.local_batch_size=1 {kv}"
        );
        any_estimate(&with(&p, ""), world)
            .unwrap()
            .activations_bytes
    }

    #[test]
    fn eager_autocast_keeps_a_cast_per_matmul_and_fp32_query_key_norms() {
        // Qwen3 1.7B (h 2048, 16 heads of 128, 8 KV heads, F 6144, 28 layers, V 151,936), one
        // GPU, eager, s 2048, b 1. Per block and token: the norms' fp32 inputs 2·4h, the bf16
        // casts of their outputs by wq, wk, wv (3·2h) and w1, w3 (2·2h), SDPA's q, k, v and
        // output 2·128·(16 + 2·8) + 2·128·16, the query/key norms' fp32 input copies and
        // normalized values 8·128·(16 + 8), SwiGLU's 4 F-wide tensors 8·6144: 122,880 bytes
        // (the probe on the H200 counted 123,304 saved by a block, rstd and RoPE included).
        // × 2048 tokens × 28 blocks = 7,046,430,720; token ids 16,384; the final norm
        // 6·2048·2048 = 25,165,824 and the loss's three fp32 copies of the logits
        // 12·2048·151,936 = 3,733,979,136.
        assert_eq!(
            qwen3("1.7B", "compile.enable=false", 1),
            7_046_430_720.0 + 16_384.0 + 25_165_824.0 + 3_733_979_136.0
        );
        // Compiled, one cast each and the query/key norms' bf16 inputs (as measured on 3
        // compiled runs): 92,160 bytes a block and token, and one fp32 copy of the logits.
        let sw = 2.0 * 6144.0; // a compiled SwiGLU keeps 3 F-wide tensors, not 4
        assert_eq!(
            qwen3("1.7B", "compile.enable=true", 1),
            (92_160.0 - sw) * 2048.0 * 28.0 + 16_384.0 + 25_165_824.0 + 4.0 * 2048.0 * 151_936.0
        );
    }

    #[test]
    fn batch_sequence_and_parallelism_move_memory_the_right_way() {
        let total = |kv: &str, w: u64| est(kv, w).total_bytes;
        for mode in ["none", "selective", "full"] {
            let kv =
                |b: u64| format!("activation_checkpoint.mode={mode} training.local_batch_size={b}");
            assert!(total(&kv(1), 8) < total(&kv(2), 8));
            assert!(total(&kv(2), 8) < total(&kv(4), 8));
        }
        assert!(total("", 16) < total("", 8), "more shards, less state");
        assert!(total("parallelism.tensor_parallel_degree=2", 8) < total("", 4));
        assert!(total("training.seq_len=4096", 1) > total("", 1));
        let off = est("training.enable_cpu_offload=true", 1);
        assert_eq!(off.optimizer_bytes, 0.0);
    }

    #[test]
    fn unknown_flavors_and_moe_models() {
        let p = with(DEBUG, "model.name=llama4 model.flavor=17Bx16E");
        let e = any_estimate(&p, 8).unwrap_err().to_string();
        assert!(
            e.contains("llama4/17Bx16E") && e.contains("llama3/8B"),
            "{e}"
        );
        // DeepSeek-V3 16B, EP 8 on 8 GPUs: experts 26·3·2048·1408·64 / 8 per GPU, 16 bytes each
        let ds = "model.name=deepseek_v3 model.flavor=16B training.seq_len=4096 \
            training.local_batch_size=8 parallelism.expert_parallel_degree=8 \
            model.converters=['primus_turbo','quantize.linear.float8']";
        let m = any_estimate(&with(ds, ""), 8).unwrap();
        let experts = 26.0 * 3.0 * 2048.0 * 1408.0 * 64.0 / 8.0;
        assert!(m.optimizer_bytes > 8.0 * experts, "{m:?}");
        assert!(m.notes.iter().any(|n| n.contains("float8")));
        assert!(m.notes.iter().any(|n| n.contains("multi-latent")));
    }
    #[test]
    fn float8_linears_keep_no_bf16_weight_copies_under_autocast() {
        // One GPU (autocast): bf16 keeps 6 blocks × 851,968 + the output 524,288 bf16 copies.
        let f8 = "model.converters=['quantize.linear.float8']";
        let bf16 = est("", 1).weights_bytes;
        assert_eq!(bf16, 4.0 * N + 11_272_192.0);
        // Float8Linear keeps the fp32 weight itself: no copy of a converted linear's weight ...
        assert_eq!(est(f8, 1).weights_bytes, 4.0 * N);
        // ... and the output keeps its copy when filter_fqns leaves it in bf16
        let filtered = format!("{f8} quantize.linear.float8.filter_fqns=['output']");
        assert_eq!(est(&filtered, 1).weights_bytes, 4.0 * N + 2.0 * 524_288.0);
        let other = format!("{f8} quantize.linear.float8.filter_fqns=['attention.wq']");
        assert_eq!(est(&other, 1).weights_bytes, 4.0 * N);
        // FSDP gathers bf16 parameters either way: nothing changes there
        assert_eq!(est(f8, 8).weights_bytes, est("", 8).weights_bytes);
        // Compiled, float8 blocks keep 1.36 bytes less per element of their linears' inputs
        // (3h + F = 1,536 a token, 2,048 tokens, 6 blocks); eager keeps bf16's (not measured).
        let kept = est("", 1).activations_bytes - est(f8, 1).activations_bytes;
        assert!((kept - 1.36 * 2048.0 * 1536.0 * 6.0).abs() < 1.0, "{kept}");
        let eager = |kv: &str| est(&format!("compile.enable=false {kv}"), 1).activations_bytes;
        assert_eq!(eager(f8), eager(""));
        // Primus-Turbo's float8 linears (not measured): as bf16, and said so
        let turbo = "model.converters=['primus_turbo','quantize.linear.float8'] \
            primus_turbo.enable_primus_turbo=true primus_turbo.use_turbo_float8_linear=true";
        let t = est(turbo, 1);
        assert_eq!(t.weights_bytes, bf16);
        assert_eq!(t.activations_bytes, est("", 1).activations_bytes);
        assert!(
            t.notes.iter().any(|n| n.contains("Primus-Turbo float8")),
            "{t:?}"
        );
    }
}
