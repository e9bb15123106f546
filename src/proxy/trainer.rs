//! The training loop: micro batches, gradient accumulation, clipping and the Adam step.

use super::*;

/// What one training iteration measured.
#[derive(Debug, Clone, PartialEq)]
pub struct StepStats {
    pub iteration: u64,
    pub elapsed_s: f64,
    /// GEMM FLOPs executed in the iteration.
    pub flops: u64,
    pub loss: f64,
    pub grad_norm: f64,
    pub learning_rate: f64,
    /// Samples this process trained on (micro batches × micro batch size).
    pub samples: u64,
    /// The gradient was not finite, so the update was skipped.
    pub skipped: bool,
    /// The loss was not finite.
    pub nan: bool,
    /// Peak bytes of activations held during this iteration.
    pub peak_activation_bytes: usize,
}

impl StepStats {
    pub fn tflops(&self) -> f64 {
        self.flops as f64 / self.elapsed_s.max(1e-9) / 1e12
    }
}

/// The proxy's training state; [`run`] drives it and prints.
pub struct Trainer {
    pub(super) shape: ProxyShape,
    pub(super) model: Model,
    pub(super) data: MockData,
    pub(super) iteration: u64,
    pub(super) cx: Cx,
    pub(super) peak_activation_bytes: usize,
    pub(super) param_bytes: usize,
}

impl Trainer {
    pub fn new(shape: &ProxyShape) -> Trainer {
        let mut rng = Rng(shape.seed);
        let mut model = Model::new(shape, &mut rng);
        let param_bytes = model.params_mut().iter().map(|p| p.bytes()).sum();
        let data = MockData {
            rng: Rng(shape.seed ^ 0x5EED_DA7A),
            vocab: shape.vocab,
        };
        Trainer {
            shape: shape.clone(),
            model,
            data,
            iteration: 0,
            cx: Cx {
                fused_wgrad: shape.grad_accum_fusion,
                ..Cx::default()
            },
            peak_activation_bytes: 0,
            param_bytes,
        }
    }

    /// Bytes of weights, gradients and Adam moments.
    pub fn param_bytes(&self) -> usize {
        self.param_bytes
    }

    /// Activation bytes held now (zero between iterations) and their peak over the run.
    pub fn activation_bytes(&self) -> (usize, usize) {
        (self.cx.mem.live, self.peak_activation_bytes)
    }

    /// One training iteration: all micro batches, gradient clipping, one Adam step.
    pub fn step(&mut self) -> StepStats {
        let start = Instant::now();
        self.iteration += 1;
        let s = &self.shape;
        let micro_batches = s.micro_batches.max(1);
        let grad_scale = 1.0 / (micro_batches * s.micro_batch * s.seq) as f32;
        for p in self.model.params_mut() {
            p.g.fill(0.0);
        }
        self.cx.mem = ActMem::default();
        self.cx.flops = 0;
        let mut loss = 0.0;
        for _ in 0..micro_batches {
            let (tokens, targets) = self.data.batch(s.micro_batch, s.seq);
            loss += self.model.forward_backward(
                &mut self.cx,
                (&tokens, &targets),
                s.recompute,
                s.recompute_layers,
                grad_scale,
            );
        }
        loss /= micro_batches as f64;

        let lr = s.learning_rate(self.iteration);
        let (b1, b2, eps, wd) = (s.adam_beta1, s.adam_beta2, s.adam_eps, s.weight_decay);
        let clip = s.clip_grad;
        let step = self.iteration as i32;
        let mut params = self.model.params_mut();
        let sq: f64 = params
            .iter()
            .flat_map(|p| p.g.iter())
            .map(|g| f64::from(*g) * f64::from(*g))
            .sum();
        let grad_norm = sq.sqrt();
        let skipped = !grad_norm.is_finite();
        if !skipped {
            let clip_coeff = if clip > 0.0 && grad_norm > clip {
                clip / (grad_norm + 1e-6)
            } else {
                1.0
            };
            let c1 = 1.0 - b1.powi(step);
            let c2 = 1.0 - b2.powi(step);
            for p in params.iter_mut() {
                let Param { w, g, m, v } = &mut **p;
                for (((w, g), m), v) in w
                    .iter_mut()
                    .zip(g.iter())
                    .zip(m.iter_mut())
                    .zip(v.iter_mut())
                {
                    let g = f64::from(*g) * clip_coeff;
                    let mn = b1 * f64::from(*m) + (1.0 - b1) * g;
                    let vn = b2 * f64::from(*v) + (1.0 - b2) * g * g;
                    let upd = (mn / c1) / ((vn / c2).sqrt() + eps) + wd * f64::from(*w);
                    *m = mn as f32;
                    *v = vn as f32;
                    *w -= (lr * upd) as f32;
                }
            }
        }
        self.peak_activation_bytes = self.peak_activation_bytes.max(self.cx.mem.peak);
        StepStats {
            iteration: self.iteration,
            elapsed_s: start.elapsed().as_secs_f64(),
            flops: self.cx.flops,
            loss,
            grad_norm,
            learning_rate: lr,
            samples: (micro_batches * s.micro_batch) as u64,
            skipped,
            nan: !loss.is_finite(),
            peak_activation_bytes: self.cx.mem.peak,
        }
    }
}
