//! The Megatron memory model as its terms: the first stage's shape from the params, then the
//! parameters it holds, the optimizer's state, the activations of its layers and the MoE
//! buffers, each a function of that shape ([`super::estimate`] sums them).

use super::{MemoryError, Params, Recompute, num, on, or, recompute, stage0_chunks, text, vocab};
use crate::domain::value::Value;
use crate::megatron;
use std::collections::BTreeSet;
use std::ops::Range;

/// The parameter dtype of a Megatron job.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Precision {
    Bf16,
    Fp16,
    Fp32,
}

/// The first pipeline stage of a Megatron job: model sizes, parallel degrees, MoE layers.
pub(super) struct Shape<'p> {
    p: &'p Params,
    h: f64,
    heads: f64,
    s: f64,
    b: f64,
    /// Parameters and fc1 outputs per FFN width: (1.5, 2) with SwiGLU, else (1, 1).
    gl: f64,
    glu: f64,
    f: f64,
    kv: f64,
    groups: f64,
    norm: f64,
    t: f64,
    pp: f64,
    cp: f64,
    ep: f64,
    etp: f64,
    vpp: f64,
    sp: bool,
    /// What divides the LayerNorm/dropout region (TP with sequence parallelism).
    spd: f64,
    vocab: f64,
    /// Data and expert-data parallel sizes.
    d: f64,
    edp: f64,
    experts: Option<f64>,
    pattern: Vec<bool>,
    e: f64,
    f_moe: f64,
    f_sh: f64,
    topk: f64,
    chunks: Vec<Range<usize>>,
    mp: megatron::Params,
}

impl<'p> Shape<'p> {
    pub(super) fn of(
        p: &'p Params,
        world_size: u64,
        notes: &mut Vec<String>,
    ) -> Result<Shape<'p>, MemoryError> {
        // Every size comes from Megatron's typed view; a missing one is named by its key.
        let mp = megatron::Params::from_values(p);
        let need = |v: Option<u64>, key: &str| {
            v.map(|v| v as f64)
                .ok_or_else(|| MemoryError::Missing(key.to_string()))
        };
        let h = need(mp.shape.hidden, "hidden_size")?;
        let layers = need(mp.shape.layers, "num_layers")? as usize;
        let heads = need(mp.shape.heads, "num_attention_heads")?;
        let s = need(mp.shape.seq, "seq_length")?;
        let b = need(mp.batch.micro, "micro_batch_size")?;
        let swiglu = mp.shape.swiglu;
        let (gl, glu) = if swiglu { (1.5, 2.0) } else { (1.0, 1.0) }; // params, fc1 outputs per F
        let f = mp.shape.ffn.map_or(4.0 * h, |f| f as f64);
        let kv = mp.shape.kv_channels.map_or(h / heads, |k| k as f64);
        let groups = mp.shape.query_groups.map_or(heads, |g| g as f64);
        let rms = text(p, "normalization") == Some("RMSNorm");
        let norm = if rms { 1.0 } else { 2.0 }; // weight (+ bias)
        let par = mp.parallelism;
        let t = par.tp as f64;
        let pp = par.pp as f64;
        let cp = par.cp as f64;
        let ep = par.ep as f64;
        let etp = par.etp as f64;
        let vpp = par.vpp.unwrap_or(1) as f64;
        let sp = par.sequence_parallel;
        let spd = if sp { t } else { 1.0 }; // divides the LayerNorm/dropout region
        let vocab = vocab(mp.vocab.as_ref(), par.tp, notes)?;
        let w = world_size as f64;
        let (d, edp) = (w / (t * pp * cp), w / (etp * ep * pp)); // data, expert data parallel
        let (model, experts_group) = (t * pp * cp, etp * ep * pp);
        if d < 1.0 || d.fract() != 0.0 {
            return Err(MemoryError::World {
                world: world_size,
                group: "TP×PP×CP",
                size: model,
            });
        }

        // Mixture of experts.
        let moe = mp.moe.as_ref();
        let experts = moe.map(|m| m.experts as f64);
        let pattern = match moe {
            Some(m) => m.layer_pattern(layers as u64)?,
            None => vec![false; layers],
        };
        let e = experts.unwrap_or(0.0);
        let f_moe = moe.and_then(|m| m.ffn).map_or(f, |x| x as f64);
        let f_sh = moe.map_or(0.0, |m| m.shared_ffn as f64);
        let topk = moe.map_or(2.0, |m| m.topk as f64);
        if experts.is_some() && (edp < 1.0 || edp.fract() != 0.0) {
            return Err(MemoryError::World {
                world: world_size,
                group: "ETP×EP×PP",
                size: experts_group,
            });
        }
        Ok(Shape {
            p,
            h,
            heads,
            s,
            b,
            gl,
            glu,
            f,
            kv,
            groups,
            norm,
            t,
            pp,
            cp,
            ep,
            etp,
            vpp,
            sp,
            spd,
            vocab,
            d,
            edp,
            experts,
            pattern,
            e,
            f_moe,
            f_sh,
            topk,
            chunks: stage0_chunks(layers, pp as usize, vpp as usize),
            mp,
        })
    }

    /// Parameters held by the first stage, per GPU: (dense: TP-sharded and replicated, routed
    /// experts split over EP×ETP).
    pub(super) fn params(&self) -> (f64, f64) {
        let (p, h, kv, heads, groups) = (self.p, self.h, self.kv, self.heads, self.groups);
        let (norm, gl, e, vocab) = (self.norm, self.gl, self.e, self.vocab);
        let (mut sharded, mut replicated, mut expert) = (h * vocab, 0.0, 0.0); // input embedding
        for i in self.chunks.iter().flat_map(Range::clone) {
            sharded += 2.0 * h * kv * (heads + groups); // Q, O: h·kv·a each; K, V: h·kv·g each
            replicated += 2.0 * norm * h;
            if self.pattern[i] {
                sharded += 2.0 * h * self.f_sh * gl;
                replicated += h * e; // router
                expert += 2.0 * h * self.f_moe * e * gl;
            } else {
                sharded += 2.0 * h * self.f * gl;
            }
        }
        if text(p, "position_embedding_type").unwrap_or("learned_absolute") == "learned_absolute" {
            replicated += or(p, "max_position_embeddings", self.s) * h;
        }
        if self.pp == 1.0 {
            replicated += norm * h; // final norm
            if on(p, "untie_embeddings_and_output_weights") {
                sharded += h * vocab; // output layer
            }
        }
        (sharded / self.t + replicated, expert / (self.ep * self.etp))
    }

    /// The model's parameter dtype: Megatron's `--fp16`, else `--bf16`, else fp32 (Primus'
    /// trainer_base sets `bf16: true`, so an absent `bf16` counts as bf16).
    fn precision(&self) -> Precision {
        if on(self.p, "fp16") {
            Precision::Fp16
        } else if matches!(self.p.get("bf16"), Some(Value::Bool(false))) {
            Precision::Fp32
        } else {
            Precision::Bf16
        }
    }

    /// Bytes per parameter (weights, gradients, optimizer state), Megatron's table in
    /// docs/user-guide/features/dist_optimizer.md: bf16 2 + 4 (fp32 main grads) + 12 (fp32
    /// main params, Adam m, v) = 18; fp16 2 + 2 + 16 (fp32 main grads too) = 20; fp32 4 + 4 + 8
    /// (the weights are the main params) = 16. The distributed optimizer shards the third.
    pub(super) fn bytes_per_param(&self) -> (f64, f64, f64) {
        match self.precision() {
            Precision::Bf16 => (2.0, 4.0, 12.0),
            Precision::Fp16 => (2.0, 2.0, 16.0),
            Precision::Fp32 => (4.0, 4.0, 8.0),
        }
    }

    /// The optimizer's state (see [`Shape::bytes_per_param`]), sharded with the distributed
    /// optimizer over the data-parallel ranks, dense over DP×CP (Megatron builds it on the
    /// `intra_dp_cp_group`), experts over the expert data-parallel ranks (CP included), less
    /// what is offloaded.
    pub(super) fn optimizer(&self, dense: f64, expert: f64, notes: &mut Vec<String>) -> f64 {
        let p = self.p;
        let dist = on(p, "use_distributed_optimizer");
        let (od, oe) = if dist {
            (self.d * self.cp, self.edp)
        } else {
            (1.0, 1.0)
        };
        let mut optimizer = self.bytes_per_param().2 * (dense / od + expert / oe);
        if on(p, "optimizer_cpu_offload") {
            let frac = num(p, "optimizer_offload_fraction")
                .unwrap_or(1.0)
                .clamp(0.0, 1.0);
            optimizer *= 1.0 - frac;
            let pct = frac * 100.0;
            notes.push(format!(
                "{pct:.0}% of optimizer state offloaded, staging not modeled"
            ));
        }
        optimizer
    }

    /// Expected routed rows per rank (balanced routing).
    fn rows(&self, tok: f64) -> f64 {
        tok * self.topk * self.etp / self.t
    }

    /// What the model leaves out, in words.
    pub(super) fn unmodeled(&self, notes: &mut Vec<String>) {
        let unmodeled = [
            ("fp8", "fp8: weights and activations counted as bf16"),
            ("fp4", "fp4: weights and activations counted as bf16"),
            (
                "use_precision_aware_optimizer",
                "optimizer dtypes other than fp32 not modeled",
            ),
            (
                "mtp_num_layers",
                "multi-token-prediction layers not modeled",
            ),
            (
                "multi_latent_attention",
                "multi-latent attention modeled as standard attention",
            ),
            (
                "use_torch_fsdp2",
                "FSDP2 parameter and gradient sharding not modeled",
            ),
            (
                "decoder_first_pipeline_num_layers",
                "uneven pipeline split not modeled",
            ),
        ];
        notes.extend(
            unmodeled
                .iter()
                .filter(|(k, _)| on(self.p, k))
                .map(|(_, what)| what.to_string()),
        );
        if self.precision() == Precision::Fp32 {
            notes.push("fp32 params: activations counted as 2-byte".into());
        }
        if self.pp > 1.0 {
            notes.push("only the first pipeline stage is modeled".into());
        }
        notes.push("allocator fragmentation, RCCL buffers, workspaces not modeled".into());
    }
}

/// The activations of one microbatch on the first stage: Korthikanti's Table 2 term by term, per
/// layer, as its recompute keeps them.
pub(super) struct Activations<'s, 'p> {
    m: &'s Shape<'p>,
    /// Tokens of the microbatch on this context-parallel rank.
    tok: f64,
    th: f64,
    /// 1-byte dropout masks, when dropout is on.
    mask: f64,
    /// The attention scores a layer keeps (without flash or fused attention), in bytes.
    scores: f64,
    /// The scores' working copies while one layer's attention runs.
    attn_extra: f64,
    rc: Recompute,
    /// A full-recompute checkpoint: the layer input.
    ckpt: f64,
    /// Microbatches in flight on the first stage.
    inflight: f64,
}

impl<'s, 'p> Activations<'s, 'p> {
    pub(super) fn of(
        m: &'s Shape<'p>,
        notes: &mut Vec<String>,
    ) -> Result<Activations<'s, 'p>, MemoryError> {
        let (p, s, b, t, heads) = (m.p, m.s, m.b, m.t, m.heads);
        let tok = s * b / m.cp; // tokens of the microbatch on this context-parallel rank
        let dropout = |key: &str| num(p, key).unwrap_or(0.1) > 0.0; // Megatron's default 0.1
        let mask = if dropout("hidden_dropout") { 1.0 } else { 0.0 }; // 1-byte masks
        let local = text(p, "transformer_impl") == Some("local") && !on(p, "use_flash_attn");
        // without flash/fused attention: softmax output (+ dropout mask and output), 5·a·s²·b/t.
        // With the masked-softmax fusion off as well (Megatron's unfused path, upstream's
        // `--no-masked-softmax-fusion`), the softmax runs in fp32 (`attention_softmax_in_fp32`):
        // its 4-byte output is kept, and the 2-byte probabilities for the value matmul
        // (measured on the H200: 5.2 bytes per score without dropout,
        // docs/validation/h200-2026-12-02-grids).
        let attn_dropout = dropout("attention_dropout");
        let unfused = p.get("masked_softmax_fusion").is_some() && !on(p, "masked_softmax_fusion");
        let per_score = match (unfused, attn_dropout) {
            (false, true) => 5.0,
            (false, false) => 2.0,
            (true, true) => 9.0,
            (true, false) => 6.0,
        };
        let score_bytes = per_score * heads * s * tok / t;
        let scores = if local { score_bytes } else { 0.0 };
        // While one layer's attention runs (forward, or its recomputation in the backward), its
        // scores also exist as the matmul's bf16 output and, unfused, as the fp32 copy the
        // softmax reads: 2 or 2 + 4 bytes per score on top of what is kept. One layer at a
        // time, so a working set, not a stored term. Without it the model missed 12-16 bytes
        // per score of one layer with selective recompute on both H200 grids
        // (docs/validation/h200-2026-12-02-moe).
        let extra_per_score = if unfused { 6.0 } else { 2.0 };
        let attn_extra = if local {
            extra_per_score * heads * s * tok / t
        } else {
            0.0
        };
        let th = tok * m.h;
        let rc = recompute(&m.mp.recompute, notes)?;
        let microbatches = num(p, "global_batch_size").map(|g| g / (b * m.d));
        let (pp, vpp) = (m.pp, m.vpp);
        let inflight = if pp == 1.0 {
            1.0
        } else if vpp > 1.0 {
            pp * (1.0 + (pp - 1.0) / (pp * vpp)) // interleaved-schedule penalty
        } else {
            microbatches.map_or(pp, |mb| mb.min(pp))
        }
        .max(1.0);
        Ok(Activations {
            m,
            tok,
            th,
            mask,
            scores,
            attn_extra,
            rc,
            ckpt: 2.0 * th / m.spd,
            inflight,
        })
    }

    fn seq(&self, x: f64) -> f64 {
        x / self.m.spd
    }

    fn tp(&self, x: f64) -> f64 {
        x / self.m.t
    }

    /// One layer's stored activations (`sel`: the modules selective recompute recomputes;
    /// `rows`: the routed rows through its experts).
    fn layer(&self, moe: bool, rows: f64, sel: &BTreeSet<String>) -> f64 {
        let m = self.m;
        let (tok, th, kv, heads, groups) = (self.tok, self.th, m.kv, m.heads, m.groups);
        let (seq, tp) = (|x: f64| self.seq(x), |x: f64| self.tp(x));
        let no = |name: &str| !sel.contains(name);
        let ln_out = if no("layernorm") { seq(2.0 * th) } else { 0.0 };
        let ffn = |width: f64| tp(2.0 * tok * width * (m.glu + 1.0)); // fc1 out + activation out
        // LN input, LN output (QKV input), Q K V, context (out-projection input), dropout mask
        let mut x = seq(2.0 * th) + ln_out + tp(2.0 * tok * kv * (heads + 2.0 * groups));
        x += tp(2.0 * tok * kv * heads) + seq(self.mask * th);
        if no("core_attn") {
            x += self.scores;
        }
        x += seq(2.0 * th) + ln_out + seq(self.mask * th); // MLP: LN input, LN output, dropout mask
        if !moe && no("mlp") {
            x += ffn(m.f);
        } else if moe && no("moe") {
            let fe = m.f_moe / m.etp;
            let act = if no("moe_act") { 2.0 * fe } else { 0.0 };
            // fp32 router probs; per routed row: permuted input, fc1 output, activation output,
            // its prob; the combined output
            x += seq(4.0 * tok * m.e)
                + rows * (2.0 * m.h + 2.0 * fe * m.glu + act + 4.0)
                + seq(2.0 * th);
            if no("shared_experts") {
                x += ffn(m.f_sh);
            }
        }
        x
    }

    /// (stored bytes of one microbatch over the stage's layers, working set of one recompute)
    fn stage(&self, rows: f64) -> (f64, f64) {
        let (ckpt, attn_extra, pattern) = (self.ckpt, self.attn_extra, &self.m.pattern);
        let none = BTreeSet::new();
        let full = |i: usize| self.layer(pattern[i], rows, &none);
        let (mut stored, mut working) = (0.0, 0.0f64);
        for ids in self
            .m
            .chunks
            .iter()
            .map(|c| c.clone().collect::<Vec<usize>>())
        {
            if let Recompute::Uniform(n) = self.rc {
                for g in ids.chunks(n.max(1)) {
                    stored += ckpt; // a whole group is live while it is recomputed
                    let group: f64 = g.iter().map(|&i| full(i)).sum();
                    working = working.max(group + attn_extra);
                }
                continue;
            }
            for (j, &i) in ids.iter().enumerate() {
                match &self.rc {
                    Recompute::Stored(sel) => {
                        stored += self.layer(pattern[i], rows, sel);
                        // its attention's transient, and with `core_attn` recomputed in the
                        // backward the scores it rebuilds as well
                        let rebuilt = if sel.contains("core_attn") {
                            self.scores
                        } else {
                            0.0
                        };
                        working = working.max(rebuilt + attn_extra);
                    }
                    Recompute::Block(n) if j >= *n => {
                        stored += full(i);
                        working = working.max(attn_extra);
                    }
                    Recompute::Ids(set) if !set.contains(&i) => {
                        stored += full(i);
                        working = working.max(attn_extra);
                    }
                    _ => {
                        // checkpointed: only its input is kept; it is all live while recomputed
                        stored += ckpt;
                        working = working.max(full(i) + attn_extra);
                    }
                }
            }
        }
        (stored, working)
    }

    /// The stage's activations at their peak: the stored ones of the microbatches in flight,
    /// one recompute's working set, and (one stage) the output layer's. Also the stored and
    /// working bytes of one microbatch, for the MoE buffers.
    pub(super) fn peak(&self) -> (f64, f64, f64) {
        let m = self.m;
        let (stored, working) = self.stage(m.rows(self.tok));
        let (tok, th) = (self.tok, self.th);
        let embedding = 8.0 * tok + self.seq(self.mask * th); // token ids, embedding dropout mask
        let fused_ce = on(m.p, "cross_entropy_loss_fusion"); // no fp32 copy of the logits
        let logit_b = if fused_ce { 2.0 } else { 4.0 };
        let output = 4.0 * self.seq(th) + self.tp(tok * m.vocab) * logit_b; // final LN in/out, logits
        let output = if m.pp == 1.0 { output } else { 0.0 };
        let activations = (stored + embedding) * self.inflight + working + output;
        (activations, stored, working)
    }

    /// DeepEP and sync-free MoE buffers (none without experts).
    pub(super) fn moe_buffers(&self, stored: f64, working: f64, notes: &mut Vec<String>) -> f64 {
        let m = self.m;
        let (p, s, b, t, cp, h, topk) = (m.p, m.s, m.b, m.t, m.cp, m.h, m.topk);
        let (ep, etp) = (m.ep, m.etp);
        let mut moe_buffers = 0.0;
        if m.experts.is_none() {
            return moe_buffers;
        }
        let stage_n = or(p, "turbo_sync_free_moe_stage", 0.0);
        let deepep = on(p, "use_turbo_deepep") || stage_n >= 2.0;
        if deepep && ep * etp > 1.0 {
            // Primus projection upper bound: dispatch + combine, 2× over-provisioned, bf16
            moe_buffers += 2.0 * (s * b / (t * cp)) * topk * 2.0 * h * 2.0;
        } else if deepep {
            notes.push("DeepEP needs TP×EP > 1: its buffers are not counted".into());
        } else {
            notes.push("all-to-all dispatcher transient buffers not modeled".into());
        }
        if stage_n >= 2.0 {
            // num_worst_tokens = seq(/ETP with SP) // CP · mbs · ETP·EP rows of a bf16 token,
            // fp32 probs and int64 indices; one layer at a time
            let s_loc = if m.sp { (s / etp).floor() } else { s };
            let worst = (s_loc / cp).floor() * b * etp * ep;
            moe_buffers += worst * (2.0 * h + 12.0 * topk);
            if stage_n >= 3.0 {
                // permute_max_token_num = worst · top-k rows: expert MLP tensors take that size
                let (st3, wk3) = self.stage(worst * topk);
                moe_buffers += ((st3 - stored) * self.inflight + wk3 - working).max(0.0);
            }
        }
        notes.push("routed-token activations assume balanced routing".into());
        moe_buffers
    }
}
