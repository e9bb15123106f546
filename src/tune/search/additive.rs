//! The additive model of the log step time over knob values, fit by least squares to the
//! measured candidates: what lets the search place a candidate it has not run.

use super::effects::PriorRow;
use crate::domain::study::Candidate;

/// The additive model of the log step time over knob values: `ln(step) = b₀ + Σ_k b_k[value]`,
/// one dummy column per knob value other than the knob's first (lowest rank) among the
/// candidates. Fit by least squares on the measured candidates' log medians.
pub struct Additive {
    /// Dummy columns, (knob index, rank).
    cols: Vec<(usize, usize)>,
    nknobs: usize,
}

/// A least-squares fit of [`Additive`].
pub struct Fit {
    beta: Vec<f64>,
    /// `(XᵀX + ridge)⁻¹`: a prediction's variance is `s² · xᵀ A x`.
    ainv: Vec<Vec<f64>>,
    /// Residual standard deviation (log scale).
    pub s: f64,
    /// Residual degrees of freedom: measured candidates minus the design's rank.
    pub df: usize,
}

/// A direction the measured candidates do not determine gets this (tiny) ridge, so its
/// prediction variance is huge (about `1/RIDGE` × s²) and it is never pruned on.
const RIDGE: f64 = 1e-9;

impl Additive {
    pub fn new(cands: &[Candidate], nknobs: usize) -> Additive {
        let mut cols = Vec::new();
        for k in 0..nknobs {
            let mut ranks: Vec<usize> = cands
                .iter()
                .filter(|c| c.ranks.len() == nknobs)
                .map(|c| c.ranks[k])
                .collect();
            ranks.sort_unstable();
            ranks.dedup();
            cols.extend(ranks.into_iter().skip(1).map(|r| (k, r)));
        }
        Additive { cols, nknobs }
    }

    pub fn p(&self) -> usize {
        self.cols.len() + 1
    }

    /// The candidate's row of the design; `None` when its ranks do not fit the knobs.
    pub fn x(&self, c: &Candidate) -> Option<Vec<f64>> {
        if c.ranks.len() != self.nknobs {
            return None;
        }
        let mut x = Vec::with_capacity(self.p());
        x.push(1.0);
        x.extend(
            self.cols
                .iter()
                .map(|&(k, r)| if c.ranks[k] == r { 1.0 } else { 0.0 }),
        );
        Some(x)
    }

    /// The contrast `b_k[rb] − b_k[ra]` as a row over the design's columns.
    pub fn contrast(&self, k: usize, ra: usize, rb: usize) -> Vec<f64> {
        let mut x = vec![0.0; self.p()];
        for (j, &(kk, r)) in self.cols.iter().enumerate() {
            if kk == k && r == rb {
                x[j + 1] += 1.0;
            }
            if kk == k && r == ra {
                x[j + 1] -= 1.0;
            }
        }
        x
    }

    /// The rank of the rows' design.
    pub fn rank(&self, rows: &[Vec<f64>]) -> usize {
        let p = self.p();
        let mut m: Vec<Vec<f64>> = rows.to_vec();
        let mut rank = 0;
        for col in 0..p {
            let Some(piv) = (rank..m.len()).find(|&r| m[r][col].abs() > 1e-9) else {
                continue;
            };
            m.swap(rank, piv);
            let pr = m[rank].clone();
            for row in m.iter_mut().skip(rank + 1) {
                let f = row[col] / pr[col];
                if f != 0.0 {
                    for (a, b) in row.iter_mut().zip(&pr) {
                        *a -= f * b;
                    }
                }
            }
            rank += 1;
        }
        rank
    }

    pub fn fit(&self, rows: &[(Vec<f64>, f64)]) -> Option<Fit> {
        self.fit_with_prior(rows, &[], 1.0)
    }

    /// The fit with priors on contrasts ([`PriorRow`]), each weighted as `(sigma0 / sd)²`
    /// measured rows would be: the posterior mean, and `ainv` in units of `sigma0²` (the
    /// posterior covariance when a measured row's error is `sigma0`). The residual σ and degrees
    /// of freedom are the measured rows' own.
    pub fn fit_with_prior(
        &self,
        rows: &[(Vec<f64>, f64)],
        prior: &[PriorRow],
        sigma0: f64,
    ) -> Option<Fit> {
        let p = self.p();
        let n = rows.len();
        if n == 0 {
            return None;
        }
        let mut a = vec![vec![0.0; p]; p];
        let mut xty = vec![0.0; p];
        for (x, y) in rows {
            for i in 0..p {
                xty[i] += x[i] * y;
                for j in 0..p {
                    a[i][j] += x[i] * x[j];
                }
            }
        }
        for PriorRow { x, mean: m, sd } in prior {
            let w2 = (sigma0 / sd).powi(2);
            for i in 0..p {
                xty[i] += w2 * x[i] * m;
                for j in 0..p {
                    a[i][j] += w2 * x[i] * x[j];
                }
            }
        }
        for (i, row) in a.iter_mut().enumerate() {
            row[i] += RIDGE;
        }
        let ainv = invert(a)?;
        let beta: Vec<f64> = (0..p)
            .map(|i| (0..p).map(|j| ainv[i][j] * xty[j]).sum())
            .collect();
        let rank = self.rank(&rows.iter().map(|r| r.0.clone()).collect::<Vec<_>>());
        let df = n.saturating_sub(rank);
        let rss: f64 = rows.iter().map(|(x, y)| (y - dot(x, &beta)).powi(2)).sum();
        let s = if df > 0 {
            (rss / df as f64).sqrt()
        } else {
            0.0
        };
        Some(Fit { beta, ainv, s, df })
    }
}

impl Fit {
    pub fn predict(&self, x: &[f64]) -> f64 {
        dot(x, &self.beta)
    }

    /// `xᵀ A x`: the prediction's variance over `s²`.
    pub fn leverage(&self, x: &[f64]) -> f64 {
        let ax: Vec<f64> = self.ainv.iter().map(|row| dot(row, x)).collect();
        dot(x, &ax).max(0.0)
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Gauss–Jordan inverse with partial pivoting; `None` when singular.
fn invert(mut a: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut inv: Vec<Vec<f64>> = (0..n)
        .map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
        .collect();
    for col in 0..n {
        let piv = (col..n).max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))?;
        if a[piv][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, piv);
        inv.swap(col, piv);
        let d = a[col][col];
        for j in 0..n {
            a[col][j] /= d;
            inv[col][j] /= d;
        }
        for r in 0..n {
            if r != col {
                let f = a[r][col];
                if f != 0.0 {
                    for j in 0..n {
                        a[r][j] -= f * a[col][j];
                        inv[r][j] -= f * inv[col][j];
                    }
                }
            }
        }
    }
    Some(inv)
}
