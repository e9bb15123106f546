//! The dense MLP block (SwiGLU or GeLU), forward and backward.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Mlp {
    pub(super) w1: Param,
    pub(super) w2: Param,
    pub(super) ffn: usize,
    pub(super) swiglu: bool,
}

#[derive(Debug)]
pub(super) struct MlpCache {
    pub(super) pre: Vec<f32>,
    pub(super) act: Vec<f32>,
}

impl MlpCache {
    pub(super) fn bytes(&self) -> usize {
        floats(&self.pre) + floats(&self.act)
    }
    pub(super) fn recycle(self, cx: &mut Cx) {
        cx.free(self.pre);
        cx.free(self.act);
    }
}

pub(super) fn silu(x: f32) -> (f32, f32) {
    let s = 1.0 / (1.0 + (-x).exp());
    (x * s, s * (1.0 + x * (1.0 - s)))
}

pub(super) fn gelu(x: f32) -> (f32, f32) {
    const C: f32 = 0.797_884_6;
    let u = C * (x + 0.044_715 * x * x * x);
    let t = u.tanh();
    let d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * C * (1.0 + 3.0 * 0.044_715 * x * x);
    (0.5 * x * (1.0 + t), d)
}

impl Mlp {
    pub(super) fn new(
        rng: &mut Rng,
        hidden: usize,
        ffn: usize,
        swiglu: bool,
        std: f64,
        out_std: f64,
    ) -> Mlp {
        let w1_cols = if swiglu { 2 * ffn } else { ffn };
        Mlp {
            w1: Param::new(rng, hidden * w1_cols, std),
            w2: Param::new(rng, ffn * hidden, out_std),
            ffn,
            swiglu,
        }
    }
    pub(super) fn w1_cols(&self) -> usize {
        if self.swiglu { 2 * self.ffn } else { self.ffn }
    }
    pub(super) fn forward(
        &self,
        cx: &mut Cx,
        x: &[f32],
        rows: usize,
        h: usize,
    ) -> (Vec<f32>, MlpCache) {
        let (f, f1) = (self.ffn, self.w1_cols());
        let pre = cx.linear(x, &self.w1.w, rows, h, f1);
        let mut act = cx.alloc(rows * f);
        for (row, arow) in pre.chunks_exact(f1).zip(act.chunks_exact_mut(f)) {
            if self.swiglu {
                let (gate, up) = row.split_at(f);
                for ((a, g), u) in arow.iter_mut().zip(gate).zip(up) {
                    *a = silu(*g).0 * u;
                }
            } else {
                for (a, x) in arow.iter_mut().zip(row) {
                    *a = gelu(*x).0;
                }
            }
        }
        let out = cx.linear(&act, &self.w2.w, rows, f, h);
        (out, MlpCache { pre, act })
    }
    pub(super) fn backward(
        &mut self,
        cx: &mut Cx,
        x: &[f32],
        c: &MlpCache,
        dout: &[f32],
        rows: usize,
        h: usize,
    ) -> Vec<f32> {
        let (f, f1) = (self.ffn, self.w1_cols());
        cx.weight_grad(&c.act, dout, &mut self.w2.g, (rows, f, h));
        let dact = cx.input_grad(dout, &self.w2.w, rows, f, h);
        let mut dpre = cx.alloc(rows * f1);
        for ((prow, darow), dprow) in c
            .pre
            .chunks_exact(f1)
            .zip(dact.chunks_exact(f))
            .zip(dpre.chunks_exact_mut(f1))
        {
            if self.swiglu {
                let (gate, up) = prow.split_at(f);
                let (dgate, dup) = dprow.split_at_mut(f);
                for j in 0..f {
                    let (s, ds) = silu(gate[j]);
                    dgate[j] = darow[j] * up[j] * ds;
                    dup[j] = darow[j] * s;
                }
            } else {
                for ((dp, p), da) in dprow.iter_mut().zip(prow).zip(darow) {
                    *dp = da * gelu(*p).1;
                }
            }
        }
        cx.free(dact);
        cx.weight_grad(x, &dpre, &mut self.w1.g, (rows, h, f1));
        let dx = cx.input_grad(&dpre, &self.w1.w, rows, h, f1);
        cx.free(dpre);
        dx
    }
}
