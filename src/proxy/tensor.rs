//! The proxy's arithmetic: strided GEMMs through `matrixmultiply`, the caching buffer pool and
//! activation accounting, row softmax, and a weight with its gradient and Adam moments.

use super::*;

/// A strided matrix view into a slice: element (i, j) is at `off + i·rs + j·cs`.
#[derive(Debug, Clone, Copy)]
pub(super) struct View {
    pub(super) off: usize,
    pub(super) rs: usize,
    pub(super) cs: usize,
}

impl View {
    /// A row-major matrix with leading dimension `ld`.
    pub(super) const fn rows(off: usize, ld: usize) -> View {
        View { off, rs: ld, cs: 1 }
    }
    /// The transpose of a row-major matrix with leading dimension `ld`.
    pub(super) const fn cols(off: usize, ld: usize) -> View {
        View { off, rs: 1, cs: ld }
    }
    /// One past the last index a `rows × cols` view touches (both ≥ 1).
    pub(super) fn end(&self, rows: usize, cols: usize) -> usize {
        self.off + (rows - 1) * self.rs + (cols - 1) * self.cs + 1
    }
}

/// `C ← alpha·A·B + beta·C` for `A: m×k`, `B: k×n`, `C: m×n`; adds `2·m·k·n` to `flops`.
#[allow(unsafe_code)]
pub(super) fn gemm(
    flops: &mut u64,
    (m, k, n): (usize, usize, usize),
    alpha: f32,
    (a, av): (&[f32], View),
    (b, bv): (&[f32], View),
    beta: f32,
    (c, cv): (&mut [f32], View),
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(cv.end(m, n) <= c.len(), "gemm: C out of bounds");
    assert!(
        (cv.cs == 1 && cv.rs >= n) || (cv.rs == 1 && cv.cs >= m),
        "gemm: C elements must not alias"
    );
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                let x = &mut c[cv.off + i * cv.rs + j * cv.cs];
                *x = if beta == 0.0 { 0.0 } else { beta * *x };
            }
        }
        return;
    }
    assert!(av.end(m, k) <= a.len(), "gemm: A out of bounds");
    assert!(bv.end(k, n) <= b.len(), "gemm: B out of bounds");
    *flops += 2 * (m * k * n) as u64;
    let (a, b, c) = (&a[av.off..], &b[bv.off..], &mut c[cv.off..]);
    // SAFETY: the asserts above prove every element the three strided views address lies inside
    // its slice (A and B read-only, C exclusively borrowed), and that distinct C elements do not
    // alias, which is all `sgemm` requires of its pointers and strides. Strides are slice
    // offsets, far below isize::MAX.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            alpha,
            a.as_ptr(),
            av.rs as isize,
            av.cs as isize,
            b.as_ptr(),
            bv.rs as isize,
            bv.cs as isize,
            beta,
            c.as_mut_ptr(),
            cv.rs as isize,
            cv.cs as isize,
        );
    }
}

/// GEMMs over tokens run in tiles of at most this many rows, as a GPU kernel tiles them: a larger
/// micro batch amortises per-call costs up to the tile, and no further.
pub(super) const ROW_TILE: usize = 256;

/// Activation bytes held for backward: current and peak.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ActMem {
    pub(super) live: usize,
    pub(super) peak: usize,
}

/// Per-trainer compute context: the FLOP counter, a caching allocator for `f32` buffers, and the
/// activation-bytes account.
///
/// The allocator works like PyTorch's caching allocator: freed buffers are kept by capacity and
/// handed out again, so steady-state iterations reuse memory instead of page-faulting fresh
/// pages from the OS on every micro batch (which would make timings depend on `malloc`'s trim
/// heuristics rather than on the work).
#[derive(Debug, Default)]
pub(super) struct Cx {
    pub(super) flops: u64,
    pub(super) free: BTreeMap<usize, Vec<Vec<f32>>>,
    pub(super) mem: ActMem,
    /// `gradient_accumulation_fusion`: weight-gradient GEMMs accumulate straight into the
    /// gradient buffer.
    pub(super) fused_wgrad: bool,
}

impl Cx {
    /// A zeroed buffer of `len` floats, reusing a cached one of at most twice that capacity.
    pub(super) fn alloc(&mut self, len: usize) -> Vec<f32> {
        let cached = self
            .free
            .range_mut(len..=len.saturating_mul(2))
            .find_map(|(_, list)| list.pop());
        match cached {
            Some(mut v) => {
                v.clear();
                v.resize(len, 0.0);
                v
            }
            None => vec![0.0; len],
        }
    }
    pub(super) fn free(&mut self, v: Vec<f32>) {
        if v.capacity() > 0 {
            self.free.entry(v.capacity()).or_default().push(v);
        }
    }
    pub(super) fn hold(&mut self, bytes: usize) {
        self.mem.live += bytes;
        self.mem.peak = self.mem.peak.max(self.mem.live);
    }
    pub(super) fn release(&mut self, bytes: usize) {
        self.mem.live = self.mem.live.saturating_sub(bytes);
    }

    /// `y[rows×n] = x[rows×k] · w[k×n]`.
    pub(super) fn linear(
        &mut self,
        x: &[f32],
        w: &[f32],
        rows: usize,
        k: usize,
        n: usize,
    ) -> Vec<f32> {
        let mut y = self.alloc(rows * n);
        for r0 in (0..rows).step_by(ROW_TILE) {
            let r = ROW_TILE.min(rows - r0);
            let (a, c) = (View::rows(r0 * k, k), View::rows(r0 * n, n));
            let b = View::rows(0, n);
            gemm(
                &mut self.flops,
                (r, k, n),
                1.0,
                (x, a),
                (w, b),
                0.0,
                (&mut y, c),
            );
        }
        y
    }

    /// `g[k×n] += xᵀ · dy` for `x: rows×k`, `dy: rows×n`. Without gradient-accumulation fusion
    /// the GEMM writes a fresh buffer that is then added to `g`, as Megatron's
    /// `main_grad.add_(grad)` does per micro batch.
    /// (`dims`: rows, k, n.)
    pub(super) fn weight_grad(
        &mut self,
        x: &[f32],
        dy: &[f32],
        g: &mut [f32],
        dims: (usize, usize, usize),
    ) {
        let (rows, k, n) = dims;
        let mut tmp = if self.fused_wgrad {
            Vec::new()
        } else {
            self.alloc(k * n)
        };
        let target: &mut [f32] = if self.fused_wgrad { g } else { &mut tmp };
        for r0 in (0..rows).step_by(ROW_TILE) {
            let r = ROW_TILE.min(rows - r0);
            let (a, b) = (View::cols(r0 * k, k), View::rows(r0 * n, n));
            let beta = if self.fused_wgrad || r0 > 0 { 1.0 } else { 0.0 };
            let c = (&mut *target, View::rows(0, n));
            gemm(&mut self.flops, (k, r, n), 1.0, (x, a), (dy, b), beta, c);
        }
        if !self.fused_wgrad {
            add_into(g, &tmp);
            self.free(tmp);
        }
    }

    /// `dx[rows×k] = dy[rows×n] · wᵀ` for `w: k×n`.
    pub(super) fn input_grad(
        &mut self,
        dy: &[f32],
        w: &[f32],
        rows: usize,
        k: usize,
        n: usize,
    ) -> Vec<f32> {
        let mut dx = self.alloc(rows * k);
        for r0 in (0..rows).step_by(ROW_TILE) {
            let r = ROW_TILE.min(rows - r0);
            let (a, c) = (View::rows(r0 * n, n), View::rows(r0 * k, k));
            let b = View::cols(0, n);
            gemm(
                &mut self.flops,
                (r, n, k),
                1.0,
                (dy, a),
                (w, b),
                0.0,
                (&mut dx, c),
            );
        }
        dx
    }
}

pub(super) fn add_into(dst: &mut [f32], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d += *s;
    }
}

pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Row-wise softmax in place; only the first `valid(row)` entries of a row count, the rest are 0.
pub(super) fn softmax_rows(x: &mut [f32], cols: usize, valid: impl Fn(usize) -> usize) {
    for (r, row) in x.chunks_exact_mut(cols).enumerate() {
        let (live, masked) = row.split_at_mut(valid(r).min(cols));
        let max = live.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for v in live.iter_mut() {
            *v = (*v - max).exp();
            sum += *v;
        }
        for v in live.iter_mut() {
            *v /= sum;
        }
        masked.fill(0.0);
    }
}

/// Softmax backward in place: `d ← p ⊙ (d − Σ p·d)` per row.
pub(super) fn softmax_backward_rows(p: &[f32], d: &mut [f32], cols: usize) {
    for (prow, drow) in p.chunks_exact(cols).zip(d.chunks_exact_mut(cols)) {
        let s = dot(prow, drow);
        for (dv, pv) in drow.iter_mut().zip(prow) {
            *dv = pv * (*dv - s);
        }
    }
}

/// A weight with its gradient and Adam moments.
#[derive(Debug, Clone)]
pub(super) struct Param {
    pub(super) w: Vec<f32>,
    pub(super) g: Vec<f32>,
    pub(super) m: Vec<f32>,
    pub(super) v: Vec<f32>,
}

impl Param {
    pub(super) fn new(rng: &mut Rng, len: usize, std: f64) -> Param {
        let a = std * 3f64.sqrt();
        let w = (0..len)
            .map(|_| ((2.0 * rng.uniform() - 1.0) * a) as f32)
            .collect();
        Param {
            w,
            g: vec![0.0; len],
            m: vec![0.0; len],
            v: vec![0.0; len],
        }
    }
    pub(super) fn bytes(&self) -> usize {
        4 * (self.w.len() + self.g.len() + self.m.len() + self.v.len())
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Dims {
    pub(super) batch: usize,
    pub(super) seq: usize,
    pub(super) hidden: usize,
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) head_dim: usize,
}

impl Dims {
    pub(super) fn qkv_width(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_dim
    }
    pub(super) fn tokens(&self) -> usize {
        self.batch * self.seq
    }
    pub(super) fn width(&self) -> usize {
        self.heads * self.head_dim
    }
}

pub(super) fn floats(v: &[f32]) -> usize {
    4 * v.len()
}
