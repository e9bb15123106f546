//! The MoE block: softmax router, real top-k routing (only the chosen experts run, on their
//! tokens), optional shared expert.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Moe {
    pub(super) router: Param,
    pub(super) experts: Vec<Mlp>,
    pub(super) shared: Option<Mlp>,
    pub(super) topk: usize,
}

/// The tokens one expert processed in a micro batch.
#[derive(Debug)]
pub(super) struct Route {
    pub(super) tokens: Vec<usize>,
    pub(super) weights: Vec<f32>,
    pub(super) x: Vec<f32>,
    pub(super) cache: MlpCache,
    pub(super) out: Vec<f32>,
}

#[derive(Debug)]
pub(super) struct MoeCache {
    pub(super) probs: Vec<f32>,
    pub(super) routes: Vec<Route>,
    pub(super) shared: Option<MlpCache>,
}

impl MoeCache {
    pub(super) fn bytes(&self) -> usize {
        let routes: usize = self
            .routes
            .iter()
            .map(|r| {
                8 * r.tokens.len()
                    + floats(&r.weights)
                    + floats(&r.x)
                    + r.cache.bytes()
                    + floats(&r.out)
            })
            .sum();
        floats(&self.probs) + self.shared.as_ref().map_or(0, MlpCache::bytes) + routes
    }
    pub(super) fn recycle(self, cx: &mut Cx) {
        cx.free(self.probs);
        for r in self.routes {
            cx.free(r.weights);
            cx.free(r.x);
            cx.free(r.out);
            r.cache.recycle(cx);
        }
        if let Some(c) = self.shared {
            c.recycle(cx);
        }
    }
}

impl Moe {
    pub(super) fn forward(
        &self,
        cx: &mut Cx,
        x: &[f32],
        t: usize,
        h: usize,
    ) -> (Vec<f32>, MoeCache) {
        let e = self.experts.len();
        let mut probs = cx.linear(x, &self.router.w, t, h, e);
        softmax_rows(&mut probs, e, |_| e);
        let mut assigned: Vec<Vec<usize>> = vec![Vec::new(); e];
        let mut order: Vec<usize> = Vec::with_capacity(e);
        for (tok, row) in probs.chunks_exact(e).enumerate() {
            order.clear();
            order.extend(0..e);
            order.sort_by(|a, b| row[*b].total_cmp(&row[*a]));
            for &ex in &order[..self.topk] {
                assigned[ex].push(tok);
            }
        }
        let mut y = cx.alloc(t * h);
        let mut routes = Vec::with_capacity(e);
        for (ex, (expert, tokens)) in self.experts.iter().zip(assigned).enumerate() {
            let rows = tokens.len();
            let mut weights = cx.alloc(rows);
            let mut xe = cx.alloc(rows * h);
            for ((&tok, wt), xrow) in tokens
                .iter()
                .zip(weights.iter_mut())
                .zip(xe.chunks_exact_mut(h))
            {
                *wt = probs[tok * e + ex];
                xrow.copy_from_slice(&x[tok * h..(tok + 1) * h]);
            }
            let (out, cache) = expert.forward(cx, &xe, rows, h);
            for ((&tok, &wt), orow) in tokens.iter().zip(&weights).zip(out.chunks_exact(h)) {
                for (yv, ov) in y[tok * h..(tok + 1) * h].iter_mut().zip(orow) {
                    *yv += wt * ov;
                }
            }
            routes.push(Route {
                tokens,
                weights,
                x: xe,
                cache,
                out,
            });
        }
        let shared = self.shared.as_ref().map(|m| {
            let (out, cache) = m.forward(cx, x, t, h);
            add_into(&mut y, &out);
            cx.free(out);
            cache
        });
        (
            y,
            MoeCache {
                probs,
                routes,
                shared,
            },
        )
    }

    pub(super) fn backward(
        &mut self,
        cx: &mut Cx,
        x: &[f32],
        c: &MoeCache,
        dy: &[f32],
        t: usize,
        h: usize,
    ) -> Vec<f32> {
        let e = self.experts.len();
        let mut dx = cx.alloc(t * h);
        let mut dlogits = cx.alloc(t * e);
        for (ex, (expert, r)) in self.experts.iter_mut().zip(&c.routes).enumerate() {
            let rows = r.tokens.len();
            if rows == 0 {
                continue;
            }
            let mut dout = cx.alloc(rows * h);
            for (((&tok, &wt), orow), drow_out) in r
                .tokens
                .iter()
                .zip(&r.weights)
                .zip(r.out.chunks_exact(h))
                .zip(dout.chunks_exact_mut(h))
            {
                let drow = &dy[tok * h..(tok + 1) * h];
                dlogits[tok * e + ex] = dot(drow, orow);
                for (o, d) in drow_out.iter_mut().zip(drow) {
                    *o = d * wt;
                }
            }
            let dxe = expert.backward(cx, &r.x, &r.cache, &dout, rows, h);
            for (&tok, drow) in r.tokens.iter().zip(dxe.chunks_exact(h)) {
                add_into(&mut dx[tok * h..(tok + 1) * h], drow);
            }
            cx.free(dout);
            cx.free(dxe);
        }
        if let (Some(m), Some(sc)) = (self.shared.as_mut(), c.shared.as_ref()) {
            let d = m.backward(cx, x, sc, dy, t, h);
            add_into(&mut dx, &d);
            cx.free(d);
        }
        softmax_backward_rows(&c.probs, &mut dlogits, e);
        cx.weight_grad(x, &dlogits, &mut self.router.g, (t, h, e));
        let d = cx.input_grad(&dlogits, &self.router.w, t, h, e);
        add_into(&mut dx, &d);
        cx.free(d);
        cx.free(dlogits);
        dx
    }
}
