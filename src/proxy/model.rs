//! The model: embedding, layers (attention and a dense or MoE block), LM head; forward and
//! backward with full or selective recompute; the mock data.

use super::*;

#[derive(Debug, Clone)]
pub(super) enum Ffn {
    Dense(Mlp),
    Moe(Moe),
}

#[derive(Debug)]
pub(super) enum FfnCache {
    Dense(MlpCache),
    Moe(MoeCache),
}

#[derive(Debug, Clone)]
pub(super) struct Layer {
    pub(super) attn: Attn,
    pub(super) ffn: Ffn,
}

/// What a layer keeps for backward.
#[derive(Debug)]
pub(super) struct LayerCache {
    pub(super) attn: AttnCache,
    /// Input of the MLP / MoE block (attention output + residual).
    pub(super) x1: Vec<f32>,
    pub(super) ffn: FfnCache,
}

impl LayerCache {
    pub(super) fn bytes(&self) -> usize {
        let ffn = match &self.ffn {
            FfnCache::Dense(c) => c.bytes(),
            FfnCache::Moe(c) => c.bytes(),
        };
        self.attn.bytes() + floats(&self.x1) + ffn
    }
    pub(super) fn recycle(self, cx: &mut Cx) {
        self.attn.recycle(cx);
        cx.free(self.x1);
        match self.ffn {
            FfnCache::Dense(c) => c.recycle(cx),
            FfnCache::Moe(c) => c.recycle(cx),
        }
    }
}

impl Layer {
    pub(super) fn forward(
        &self,
        cx: &mut Cx,
        d: Dims,
        x: Vec<f32>,
        keep_probs: bool,
    ) -> (Vec<f32>, LayerCache) {
        let (t, h) = (d.tokens(), d.hidden);
        let (mut x1, attn) = self.attn.forward(cx, d, x, keep_probs);
        add_into(&mut x1, &attn.x);
        let (mut x2, ffn) = match &self.ffn {
            Ffn::Dense(m) => {
                let (out, c) = m.forward(cx, &x1, t, h);
                (out, FfnCache::Dense(c))
            }
            Ffn::Moe(m) => {
                let (out, c) = m.forward(cx, &x1, t, h);
                (out, FfnCache::Moe(c))
            }
        };
        add_into(&mut x2, &x1);
        (x2, LayerCache { attn, x1, ffn })
    }

    pub(super) fn backward(
        &mut self,
        cx: &mut Cx,
        d: Dims,
        c: &LayerCache,
        dx2: Vec<f32>,
    ) -> Vec<f32> {
        let (t, h) = (d.tokens(), d.hidden);
        let dffn = match (&mut self.ffn, &c.ffn) {
            (Ffn::Dense(m), FfnCache::Dense(mc)) => m.backward(cx, &c.x1, mc, &dx2, t, h),
            (Ffn::Moe(m), FfnCache::Moe(mc)) => m.backward(cx, &c.x1, mc, &dx2, t, h),
            _ => unreachable!("layer cache kind matches the layer"),
        };
        let mut dx1 = dx2;
        add_into(&mut dx1, &dffn);
        cx.free(dffn);
        let dattn = self.attn.backward(cx, d, &c.attn, &dx1);
        add_into(&mut dx1, &dattn);
        cx.free(dattn);
        dx1
    }
}

pub(super) enum Stored {
    Cache(LayerCache),
    /// Full recompute: only the layer input is kept.
    Input(Vec<f32>),
}

#[derive(Debug, Clone)]
pub(super) struct Model {
    pub(super) emb: Param,
    pub(super) layers: Vec<Layer>,
    pub(super) head: Param,
    pub(super) dims: Dims,
    pub(super) vocab: usize,
}

impl Model {
    pub(super) fn new(s: &ProxyShape, rng: &mut Rng) -> Model {
        let h = s.hidden;
        let std = s.init_std;
        let out_std = std / (2.0 * s.layers as f64).sqrt();
        let w = s.heads * s.head_dim;
        let layers = (0..s.layers)
            .map(|i| {
                let attn = Attn {
                    wqkv: Param::new(rng, h * (s.heads + 2 * s.kv_heads) * s.head_dim, std),
                    wo: Param::new(rng, w * h, out_std),
                };
                let ffn = if i >= s.layers - s.moe_layers.min(s.layers) && s.experts > 0 {
                    Ffn::Moe(Moe {
                        router: Param::new(rng, h * s.experts, std),
                        experts: (0..s.experts)
                            .map(|_| Mlp::new(rng, h, s.moe_ffn, s.swiglu, std, out_std))
                            .collect(),
                        shared: (s.shared_ffn > 0)
                            .then(|| Mlp::new(rng, h, s.shared_ffn, s.swiglu, std, out_std)),
                        topk: s.topk.clamp(1, s.experts),
                    })
                } else {
                    Ffn::Dense(Mlp::new(rng, h, s.ffn, s.swiglu, std, out_std))
                };
                Layer { attn, ffn }
            })
            .collect();
        Model {
            emb: Param::new(rng, s.vocab * h, std),
            layers,
            head: Param::new(rng, h * s.vocab, std),
            dims: Dims {
                batch: s.micro_batch,
                seq: s.seq,
                hidden: h,
                heads: s.heads,
                kv_heads: s.kv_heads,
                head_dim: s.head_dim,
            },
            vocab: s.vocab,
        }
    }

    pub(super) fn params_mut(&mut self) -> Vec<&mut Param> {
        let mut out = vec![&mut self.emb];
        for l in &mut self.layers {
            out.push(&mut l.attn.wqkv);
            out.push(&mut l.attn.wo);
            let mlps: Vec<&mut Mlp> = match &mut l.ffn {
                Ffn::Dense(m) => vec![m],
                Ffn::Moe(m) => {
                    out.push(&mut m.router);
                    m.experts.iter_mut().chain(m.shared.as_mut()).collect()
                }
            };
            for m in mlps {
                out.push(&mut m.w1);
                out.push(&mut m.w2);
            }
        }
        out.push(&mut self.head);
        out
    }

    /// Forward and backward of one micro batch; accumulates `grad_scale`-scaled gradients and
    /// returns the mean loss over its tokens.
    pub(super) fn forward_backward(
        &mut self,
        cx: &mut Cx,
        (tokens, targets): (&[usize], &[usize]),
        recompute: Recompute,
        recompute_layers: usize,
        grad_scale: f32,
    ) -> f64 {
        let d = self.dims;
        let (t, h, v) = (d.tokens(), d.hidden, self.vocab);
        let mut x = cx.alloc(t * h);
        for (&tok, row) in tokens.iter().zip(x.chunks_exact_mut(h)) {
            row.copy_from_slice(&self.emb.w[tok * h..(tok + 1) * h]);
        }
        let mut stored = Vec::with_capacity(self.layers.len());
        for (i, layer) in self.layers.iter().enumerate() {
            if recompute == Recompute::Full && i < recompute_layers {
                let mut input = cx.alloc(x.len());
                input.copy_from_slice(&x);
                cx.hold(floats(&input));
                let (out, cache) = layer.forward(cx, d, x, true);
                cache.recycle(cx);
                x = out;
                stored.push(Stored::Input(input));
            } else {
                let (out, cache) = layer.forward(cx, d, x, recompute != Recompute::Selective);
                cx.hold(cache.bytes());
                stored.push(Stored::Cache(cache));
                x = out;
            }
        }
        let mut logits = cx.linear(&x, &self.head.w, t, h, v);
        let head_bytes = floats(&x) + floats(&logits);
        cx.hold(head_bytes);
        softmax_rows(&mut logits, v, |_| v);
        let mut loss = 0.0f64;
        for (row, &target) in logits.chunks_exact_mut(v).zip(targets) {
            loss -= f64::from(row[target].max(f32::MIN_POSITIVE)).ln();
            row[target] -= 1.0;
            for g in row.iter_mut() {
                *g *= grad_scale;
            }
        }
        cx.weight_grad(&x, &logits, &mut self.head.g, (t, h, v));
        let mut dx = cx.input_grad(&logits, &self.head.w, t, h, v);
        cx.release(head_bytes);
        cx.free(logits);
        cx.free(x);
        for (layer, s) in self.layers.iter_mut().zip(stored).rev() {
            let cache = match s {
                Stored::Cache(c) => c,
                Stored::Input(input) => {
                    cx.release(floats(&input));
                    let (out, c) = layer.forward(cx, d, input, true);
                    cx.free(out);
                    cx.hold(c.bytes());
                    c
                }
            };
            dx = layer.backward(cx, d, &cache, dx);
            cx.release(cache.bytes());
            cache.recycle(cx);
        }
        for (&tok, drow) in tokens.iter().zip(dx.chunks_exact(h)) {
            add_into(&mut self.emb.g[tok * h..(tok + 1) * h], drow);
        }
        cx.free(dx);
        loss / t as f64
    }
}

/// Mock data with structure to learn: each next token is `(5·tok + 3) mod V` with probability
/// 0.8, otherwise uniform.
#[derive(Debug, Clone)]
pub(super) struct MockData {
    pub(super) rng: Rng,
    pub(super) vocab: usize,
}

impl MockData {
    pub(super) fn batch(&mut self, batch: usize, seq: usize) -> (Vec<usize>, Vec<usize>) {
        let mut tokens = Vec::with_capacity(batch * seq);
        let mut targets = Vec::with_capacity(batch * seq);
        for _ in 0..batch {
            let mut tok = self.rng.below(self.vocab);
            for _ in 0..seq {
                let next = if self.rng.uniform() < 0.8 {
                    (5 * tok + 3) % self.vocab
                } else {
                    self.rng.below(self.vocab)
                };
                tokens.push(tok);
                targets.push(next);
                tok = next;
            }
        }
        (tokens, targets)
    }
}
