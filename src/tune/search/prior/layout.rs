//! **The layout prior** (issue 45): for a sweep over parallel layouts, each candidate's step as
//! the layout model predicts it ([`crate::tune::layout::cost`]), split into what scales with the
//! GPU (compute and the pipeline bubble) and what scales with the links (communication). It
//! orders the first rung (after the current settings, the layout predicted fastest first) and,
//! once a candidate is measured, rules out those predicted slower than the best measured step by
//! more than a margin.
//!
//! Its two scales are learnt from the study's own trials: measured ≈ a · compute + b · comm, by
//! least squares over the measured layouts, from three of them (a single ratio before, or while
//! they cannot tell the two terms apart: layouts with the same share of communication). So the assumed
//! efficiency and link speeds only order the first launches; what the GPUs and links deliver
//! decides the rest. A layout skipped on it is `predicted-slower`: a prediction, never a
//! measurement.

use super::super::{Search, State, Verdict};

/// A candidate's predicted step, seconds: what scales with the GPU's speed (compute and the
/// pipeline bubble) and what scales with the links (TP, DP, PP, EP and CP traffic).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepPrior {
    pub compute_s: f64,
    pub comm_s: f64,
}

/// How far above the best measured step a prediction fitted on one measured layout (a single
/// ratio) must be before it rules a layout out: the prior's relative error between layouts
/// before the links are measured.
pub const RATIO_MARGIN: f64 = 0.30;

/// The least margin once two terms are fitted: the prior's form is not exact (kernel
/// efficiency varies between shapes), whatever its residuals on a few layouts say.
pub const FITTED_MARGIN: f64 = 0.10;

/// The prior's scales, fitted on measured layouts: measured ms ≈ a · compute_s + b · comm_s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub a: f64,
    pub b: f64,
    pub points: usize,
    /// Whether both scales were fitted (else one ratio for both).
    pub two_terms: bool,
    /// Root mean square of the fit's relative residuals.
    pub spread: f64,
}

impl Fit {
    /// Fits the scales to (prior, measured ms) pairs; None without a pair.
    pub fn of(points: &[(StepPrior, f64)]) -> Option<Fit> {
        let points: Vec<&(StepPrior, f64)> = points
            .iter()
            .filter(|(p, ms)| *ms > 0.0 && p.compute_s + p.comm_s > 0.0)
            .collect();
        if points.is_empty() {
            return None;
        }
        // Least squares of relative errors: each row divided by its measurement.
        let (mut scc, mut smm, mut scm, mut sc, mut sm) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (p, ms) in &points {
            let (c, m) = (p.compute_s / ms, p.comm_s / ms);
            scc += c * c;
            smm += m * m;
            scm += c * m;
            sc += c;
            sm += m;
        }
        let det = scc * smm - scm * scm;
        let two = (det > 1e-9 * scc * smm.max(1e-30)).then(|| {
            let a = (sc * smm - sm * scm) / det;
            let b = (sm * scc - sc * scm) / det;
            (a, b)
        });
        let (a, b, two_terms) = match two {
            // Two scales from two layouts fit them exactly and say nothing of the form's own
            // error: a third gives the residual the margin needs.
            Some((a, b)) if points.len() >= 3 && a > 0.0 && b >= 0.0 => (a, b, true),
            _ => {
                // One ratio: the mean of measured / predicted.
                let r = points
                    .iter()
                    .map(|(p, ms)| ms / (p.compute_s + p.comm_s))
                    .sum::<f64>()
                    / points.len() as f64;
                (r, r, false)
            }
        };
        let spread = (points
            .iter()
            .map(|(p, ms)| ((a * p.compute_s + b * p.comm_s) / ms - 1.0).powi(2))
            .sum::<f64>()
            / points.len() as f64)
            .sqrt();
        Some(Fit {
            a,
            b,
            points: points.len(),
            two_terms,
            spread,
        })
    }

    pub fn predict_ms(&self, p: &StepPrior) -> f64 {
        self.a * p.compute_s + self.b * p.comm_s
    }

    /// How far above the best measured step a prediction must be to rule a layout out: at
    /// least twice the fit's residual, widened for the scales it fitted (n/(n − k)).
    pub fn margin(&self) -> f64 {
        let (floor, k) = if self.two_terms {
            (FITTED_MARGIN, 2.0)
        } else {
            (RATIO_MARGIN, 1.0)
        };
        let n = self.points as f64;
        let widen = if n > k { (n / (n - k)).sqrt() } else { 1.0 };
        floor.max(2.0 * self.spread * widen)
    }
}

/// The prior of candidate `i`, when the sweep gave one.
fn prior(s: &Search<'_>, i: usize) -> Option<StepPrior> {
    s.cfg.layout_prior.get(&s.cands[i].id).copied()
}

/// The prior fitted on the study's measured candidates.
fn fit(s: &Search<'_>) -> Option<Fit> {
    let points: Vec<(StepPrior, f64)> = s
        .measured()
        .into_iter()
        .filter_map(|i| Some((prior(s, i)?, s.stat(i)?.value)))
        .collect();
    Fit::of(&points)
}

/// The first rung's next launch when the sweep has a layout prior: the current settings while
/// they are pending, then the pending layout predicted fastest (as fitted so far). None without
/// a prior.
pub(in crate::tune::search) fn next(s: &Search<'_>, pending: &[usize]) -> Option<usize> {
    if s.cfg.layout_prior.is_empty() {
        return None;
    }
    if let Some(b) = s.baseline.filter(|b| pending.contains(b)) {
        return Some(b);
    }
    let f = fit(s);
    let key = |i: usize| {
        prior(s, i).map_or(f64::INFINITY, |p| match &f {
            Some(f) => f.predict_ms(&p),
            None => p.compute_s + p.comm_s,
        })
    };
    pending
        .iter()
        .copied()
        .min_by(|&x, &y| key(x).total_cmp(&key(y)))
}

/// Rules out each pending layout (the current settings excepted) that the fitted prior puts
/// above the best measured step by more than the margin.
pub(in crate::tune::search) fn prune(s: &mut Search<'_>) {
    let Some(f) = fit(s) else {
        return;
    };
    let Some((best, best_ms)) = s
        .measured()
        .into_iter()
        .filter_map(|i| Some((i, s.stat(i)?.value)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return;
    };
    let margin = f.margin();
    let how = if f.two_terms {
        format!(
            "compute × {:.2}, communication × {:.2} of the assumed speeds",
            f.a / 1000.0,
            f.b / 1000.0
        )
    } else {
        format!("one ratio, × {:.2} of the assumed speeds", f.a / 1000.0)
    };
    for i in 0..s.cands.len() {
        if s.state[i] != State::Pending || s.baseline == Some(i) {
            continue;
        }
        let Some(p) = prior(s, i) else { continue };
        let pred = f.predict_ms(&p);
        if pred <= best_ms * (1.0 + margin) {
            continue;
        }
        let reason = format!(
            "the layout prior predicts {pred:.1} ms, {:.0} % slower than #{} (measured {best_ms:.1} \
             ms), fitted on {} measured layouts ({how}; residual {:.1} %); the margin is {:.0} %; \
             a prediction, not a measurement",
            (pred / best_ms - 1.0) * 100.0,
            s.cands[best].id,
            f.points,
            f.spread * 100.0,
            margin * 100.0
        );
        s.log.push(format!(
            "{}: predicted slower, not run: {reason}",
            s.label(i)
        ));
        s.state[i] = State::Out(Verdict::PredictedSlower { reason });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(c: f64, m: f64) -> StepPrior {
        StepPrior {
            compute_s: c,
            comm_s: m,
        }
    }

    #[test]
    fn two_layouts_with_different_communication_give_both_scales() {
        // Truth: compute 1.5× slower than assumed, links 3× slower.
        let truth = |q: StepPrior| 1000.0 * (1.5 * q.compute_s + 3.0 * q.comm_s);
        let pts: Vec<(StepPrior, f64)> = [p(1.0, 0.0), p(1.0, 0.5), p(0.8, 0.3)]
            .iter()
            .map(|&q| (q, truth(q)))
            .collect();
        let f = Fit::of(&pts).unwrap();
        assert!(f.two_terms);
        assert!(
            (f.a - 1500.0).abs() < 1e-6 && (f.b - 3000.0).abs() < 1e-6,
            "{f:?}"
        );
        assert!(f.spread < 1e-9);
        assert_eq!(f.margin(), FITTED_MARGIN);
    }

    #[test]
    fn one_layout_or_the_same_share_gives_one_ratio() {
        let one = Fit::of(&[(p(1.0, 0.25), 2500.0)]).unwrap();
        assert!(!one.two_terms);
        assert!((one.a - 2000.0).abs() < 1e-9 && one.a == one.b);
        assert_eq!(one.margin(), RATIO_MARGIN);
        let same = Fit::of(&[(p(1.0, 0.5), 3000.0), (p(2.0, 1.0), 6000.0)]).unwrap();
        assert!(!same.two_terms, "{same:?}");
        assert!(Fit::of(&[]).is_none());
    }

    #[test]
    fn a_negative_scale_falls_back_to_one_ratio() {
        // Measurements that more communication makes faster: no physical fit.
        let f = Fit::of(&[
            (p(1.0, 0.0), 1000.0),
            (p(1.0, 0.5), 950.0),
            (p(1.0, 1.0), 900.0),
        ])
        .unwrap();
        assert!(!f.two_terms);
        assert!(f.spread > 0.0 && f.margin() >= RATIO_MARGIN);
    }
}
