//! Causal multi-head attention with grouped query heads, forward and backward; selective
//! recompute drops the probabilities and recomputes them.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Attn {
    pub(super) wqkv: Param,
    pub(super) wo: Param,
}

#[derive(Debug)]
pub(super) struct AttnCache {
    pub(super) x: Vec<f32>,
    pub(super) qkv: Vec<f32>,
    /// Per (sequence, head) `seq × seq` probabilities; `None` under selective recompute.
    pub(super) probs: Option<Vec<f32>>,
    pub(super) ctx: Vec<f32>,
}

impl AttnCache {
    pub(super) fn bytes(&self) -> usize {
        floats(&self.x)
            + floats(&self.qkv)
            + floats(&self.ctx)
            + self.probs.as_deref().map_or(0, floats)
    }
    pub(super) fn recycle(self, cx: &mut Cx) {
        cx.free(self.x);
        cx.free(self.qkv);
        cx.free(self.ctx);
        if let Some(p) = self.probs {
            cx.free(p);
        }
    }
}

impl Attn {
    /// Offsets of head `j` of sequence `b` in the `qkv` rows (Q, K, V) and in `ctx`.
    /// Query head `j` reads key/value head `j / (heads / kv_heads)`.
    pub(super) fn offsets(d: Dims, b: usize, j: usize) -> (usize, usize, usize, usize) {
        let (w, hd) = (d.width(), d.head_dim);
        let row = b * d.seq * d.qkv_width();
        let group = j / (d.heads / d.kv_heads);
        let k = row + w + group * hd;
        (row + j * hd, k, k + d.kv_heads * hd, b * d.seq * w + j * hd)
    }

    /// Causal `softmax(Q Kᵀ / √d)` of one (sequence, head) into `p` (`seq × seq`).
    pub(super) fn probs(cx: &mut Cx, d: Dims, qkv: &[f32], b: usize, j: usize, p: &mut [f32]) {
        let (q, k, _, _) = Attn::offsets(d, b, j);
        let ld = d.qkv_width();
        let scale = 1.0 / (d.head_dim as f32).sqrt();
        let (qv, kv) = (View::rows(q, ld), View::cols(k, ld));
        let dims = (d.seq, d.head_dim, d.seq);
        gemm(
            &mut cx.flops,
            dims,
            scale,
            (qkv, qv),
            (qkv, kv),
            0.0,
            (p, View::rows(0, d.seq)),
        );
        softmax_rows(p, d.seq, |r| r + 1);
    }

    pub(super) fn forward(
        &self,
        cx: &mut Cx,
        d: Dims,
        x: Vec<f32>,
        keep_probs: bool,
    ) -> (Vec<f32>, AttnCache) {
        let (t, h, w, s, hd) = (d.tokens(), d.hidden, d.width(), d.seq, d.head_dim);
        let qkv = cx.linear(&x, &self.wqkv.w, t, h, d.qkv_width());
        let mut ctx = cx.alloc(t * w);
        let slots = if keep_probs { d.batch * d.heads } else { 1 };
        let mut probs = cx.alloc(slots * s * s);
        for b in 0..d.batch {
            for j in 0..d.heads {
                let slot = if keep_probs { b * d.heads + j } else { 0 };
                let p = &mut probs[slot * s * s..(slot + 1) * s * s];
                Attn::probs(cx, d, &qkv, b, j, p);
                let (_, _, v, c) = Attn::offsets(d, b, j);
                let (pv, vv, cv) = (
                    View::rows(0, s),
                    View::rows(v, d.qkv_width()),
                    View::rows(c, w),
                );
                gemm(
                    &mut cx.flops,
                    (s, s, hd),
                    1.0,
                    (p, pv),
                    (&qkv, vv),
                    0.0,
                    (&mut ctx, cv),
                );
            }
        }
        let y = cx.linear(&ctx, &self.wo.w, t, w, h);
        let probs = if keep_probs {
            Some(probs)
        } else {
            cx.free(probs);
            None
        };
        (y, AttnCache { x, qkv, probs, ctx })
    }

    pub(super) fn backward(&mut self, cx: &mut Cx, d: Dims, c: &AttnCache, dy: &[f32]) -> Vec<f32> {
        let (t, h, w, s, hd) = (d.tokens(), d.hidden, d.width(), d.seq, d.head_dim);
        let scale = 1.0 / (hd as f32).sqrt();
        cx.weight_grad(&c.ctx, dy, &mut self.wo.g, (t, w, h));
        let dctx = cx.input_grad(dy, &self.wo.w, t, w, h);
        let ld = d.qkv_width();
        let mut dqkv = cx.alloc(t * ld);
        let mut recomputed = cx.alloc(if c.probs.is_none() { s * s } else { 0 });
        let mut dp = cx.alloc(s * s);
        for b in 0..d.batch {
            for j in 0..d.heads {
                let (q, k, v, cx_off) = Attn::offsets(d, b, j);
                let p: &[f32] = match &c.probs {
                    Some(all) => {
                        let slot = b * d.heads + j;
                        &all[slot * s * s..(slot + 1) * s * s]
                    }
                    None => {
                        Attn::probs(cx, d, &c.qkv, b, j, &mut recomputed);
                        &recomputed
                    }
                };
                let fl = &mut cx.flops;
                let (sq, ctx_v) = (View::rows(0, s), View::rows(cx_off, w));
                let (qv, kv, vv) = (View::rows(q, ld), View::rows(k, ld), View::rows(v, ld));
                // dP = dctx · Vᵀ ; dV += Pᵀ · dctx (query heads of a group share K and V)
                let vt = View::cols(v, ld);
                gemm(
                    fl,
                    (s, hd, s),
                    1.0,
                    (&dctx, ctx_v),
                    (&c.qkv, vt),
                    0.0,
                    (&mut dp, sq),
                );
                let pt = View::cols(0, s);
                gemm(
                    fl,
                    (s, s, hd),
                    1.0,
                    (p, pt),
                    (&dctx, ctx_v),
                    1.0,
                    (&mut dqkv, vv),
                );
                softmax_backward_rows(p, &mut dp, s);
                // dQ = scale · dS · K ; dK += scale · dSᵀ · Q
                gemm(
                    fl,
                    (s, s, hd),
                    scale,
                    (&dp, sq),
                    (&c.qkv, kv),
                    0.0,
                    (&mut dqkv, qv),
                );
                gemm(
                    fl,
                    (s, s, hd),
                    scale,
                    (&dp, pt),
                    (&c.qkv, qv),
                    1.0,
                    (&mut dqkv, kv),
                );
            }
        }
        cx.free(dp);
        cx.free(recomputed);
        cx.free(dctx);
        cx.weight_grad(&c.x, &dqkv, &mut self.wqkv.g, (t, h, ld));
        let dx = cx.input_grad(&dqkv, &self.wqkv.w, t, h, ld);
        cx.free(dqkv);
        dx
    }
}
