//! **The layout prior** (issue 45): for a sweep over parallel layouts, each candidate's step as
//! the layout model predicts it ([`crate::tune::layout::cost`]), split into what scales with the
//! GPU (compute), with the links (communication) and with the host (the fixed per-micro-batch
//! overhead), the pipeline bubble shared out between compute and overhead. It
//! orders the first rung (after the current settings, the layout predicted fastest first) and,
//! once a candidate is measured, rules out those predicted slower than the best measured step by
//! more than a margin.
//!
//! Its scales are learnt from the study's own trials: measured ≈ a · compute + b · comm + c ·
//! overhead, by least squares over the measured layouts, as many scales as the points can tell
//! apart ([`Fit`]): one ratio before three layouts are measured; two (the GPU's and the links',
//! or the compute's and the per-micro-batch overhead's) from three; all three from four; and a
//! scale only where the measured layouts set it within ±[`SCALE_ERROR`] (layouts of the same
//! micro batches cannot tell the overhead apart). So the assumed efficiency, link speeds and per-micro-batch cost only
//! order the first launches; what the GPUs, links and host deliver decides the rest. A layout
//! skipped on it is `predicted-slower`: a prediction, never a measurement.

use super::super::{Search, State, Verdict};

/// A candidate's predicted step, seconds: what scales with the GPU's speed (compute), with the
/// links (TP, DP, PP, EP and CP traffic) and with the host (the fixed per-micro-batch cost of
/// launches and bookkeeping, [`crate::tune::layout::cost::LAYER_MS`]); the pipeline bubble is
/// shared between compute and overhead.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepPrior {
    pub compute_s: f64,
    pub comm_s: f64,
    /// Absent in tables written before the prior had it: none.
    #[serde(default)]
    pub overhead_s: f64,
}

impl StepPrior {
    fn terms(&self) -> [f64; 3] {
        [self.compute_s, self.comm_s, self.overhead_s]
    }

    fn total(&self) -> f64 {
        self.compute_s + self.comm_s + self.overhead_s
    }
}

/// How far above the best measured step a prediction fitted on one measured layout (a single
/// ratio) must be before it rules a layout out: the prior's relative error between layouts
/// before the links are measured.
pub const RATIO_MARGIN: f64 = 0.30;

/// The least margin once two terms are fitted: the prior's form is not exact (kernel
/// efficiency varies between shapes), whatever its residuals on a few layouts say.
pub const FITTED_MARGIN: f64 = 0.10;

/// The least margin while the links' scale is carried from an earlier study
/// ([`Fit::with_links`]): the one ratio's. The carried scale makes the prediction's form
/// closer (communication apart from compute from the first measurement), not its error
/// smaller: that scale was measured on another model's layouts, whose traffic the prior may
/// misjudge differently. On the synthetic layout studies with shared links
/// (`bench-replay --synthetic-layouts 30 --shared-links --carry-links`, seeds 0, 7, 5, 3, 11;
/// 2026-12-06) a 15 % margin found the best within 1 % in 137 of 150 studies (142 without
/// carrying), 20 % in 143, 30 % in 147, each for fewer GPU-seconds than without carrying.
pub const CARRIED_MARGIN: f64 = RATIO_MARGIN;

/// The error of one layout's measured step against the prior's form that a fit assumes at
/// least, relative: half the [`FITTED_MARGIN`] (the synthetic layout studies draw 6 %). A fit of
/// k scales on k + 1 layouts has one residual, which can be near nought by chance.
pub const FORM_ERROR: f64 = 0.05;

/// The largest standard error of a scale fitted apart, relative to the scale: one the measured
/// layouts set less closely (at [`FORM_ERROR`] a layout, or the fit's own residual if larger) is
/// not fitted apart, and fewer scales are. Without it, three layouts whose communication barely
/// differed fitted the links 10–110× slower than the compute on the synthetic layout studies
/// (the truth: 0.8–3.6×) and ruled out the best layout (gaps to 19 %); at ±25 % the five
/// suites of 30 (`bench-replay --synthetic-layouts 30`, seeds 0, 7, 5, 3, 11) found the best
/// within 1 % in 143 of 150 studies, at ±50 % in 137, without the bound in 125 (2026-12-06,
/// at 85e3188).
pub const SCALE_ERROR: f64 = 0.25;

/// Which scales a [`Fit`] took apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scales {
    /// One ratio for every term.
    One,
    /// The GPU's (compute and overhead) and the links'.
    GpuAndLinks,
    /// The overhead's and the rest's (compute and communication).
    OverheadApart,
    /// Compute, communication and overhead each.
    Three,
}

impl Scales {
    /// The terms (compute 0, communication 1, overhead 2) each scale multiplies.
    fn groups(self) -> &'static [&'static [usize]] {
        match self {
            Scales::One => &[&[0, 1, 2]],
            Scales::GpuAndLinks => &[&[0, 2], &[1]],
            Scales::OverheadApart => &[&[0, 1], &[2]],
            Scales::Three => &[&[0], &[1], &[2]],
        }
    }

    /// How many scales it fits.
    pub fn count(self) -> usize {
        self.groups().len()
    }
}

/// The prior's scales, fitted on measured layouts: measured ms ≈ a · compute_s + b · comm_s +
/// c · overhead_s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub a: f64,
    pub b: f64,
    pub c: f64,
    pub points: usize,
    /// Which scales were fitted apart.
    pub scales: Scales,
    /// Root mean square of the fit's relative residuals.
    pub spread: f64,
    /// The links' scale `b` was carried from an earlier study ([`Fit::with_links`]), not
    /// fitted on these points.
    pub carried: bool,
}

impl Fit {
    /// Fits the scales to (prior, measured ms) pairs; None without a pair. The most scales the
    /// points determine ([`Scales`]; of two forms with as many, the closer), else one ratio.
    pub fn of(points: &[(StepPrior, f64)]) -> Option<Fit> {
        let points: Vec<(StepPrior, f64)> = points
            .iter()
            .copied()
            .filter(|(p, ms)| *ms > 0.0 && p.total() > 0.0)
            .collect();
        if points.is_empty() {
            return None;
        }
        // One ratio: the mean of measured / predicted.
        let r = points.iter().map(|(p, ms)| ms / p.total()).sum::<f64>() / points.len() as f64;
        let one = Fit::with(&points, Scales::One, [r, r, r]);
        [Scales::Three, Scales::GpuAndLinks, Scales::OverheadApart]
            .into_iter()
            .filter_map(|s| Some(Fit::with(&points, s, scales(&points, s)?)))
            .min_by(|x, y| {
                (y.scales.count(), x.spread)
                    .partial_cmp(&(x.scales.count(), y.spread))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .or(Some(one))
    }

    /// The fit of `points` with these scales, and its residual.
    fn with(points: &[(StepPrior, f64)], scales: Scales, [a, b, c]: [f64; 3]) -> Fit {
        let fit = Fit {
            a,
            b,
            c,
            points: points.len(),
            scales,
            spread: 0.0,
            carried: false,
        };
        let spread = (points
            .iter()
            .map(|(p, ms)| (fit.predict_ms(p) / ms - 1.0).powi(2))
            .sum::<f64>()
            / points.len() as f64)
            .sqrt();
        Fit { spread, ..fit }
    }

    /// Whether the links' scale is set apart from the compute's: fitted so, or carried.
    pub fn links_apart(&self) -> bool {
        self.carried || matches!(self.scales, Scales::GpuAndLinks | Scales::Three)
    }

    /// The fit with the links' scale carried from an earlier study on the same node (`b`, ms
    /// per predicted second of communication): what is left of each measurement after its
    /// communication is fitted on compute and overhead, as [`Fit::of`] fits them (one ratio,
    /// or the overhead apart where the points set it). None when a measurement is no more
    /// than its carried communication (those links are not this study's).
    pub fn with_links(points: &[(StepPrior, f64)], b: f64) -> Option<Fit> {
        let rest: Vec<(StepPrior, f64)> = points
            .iter()
            .map(|(p, ms)| {
                let left = ms - b * p.comm_s;
                (left > 0.0).then_some((StepPrior { comm_s: 0.0, ..*p }, left))
            })
            .collect::<Option<_>>()?;
        let f = Fit::of(&rest)?;
        let scales = match f.scales {
            Scales::OverheadApart | Scales::Three => Scales::Three,
            Scales::One | Scales::GpuAndLinks => Scales::GpuAndLinks,
        };
        // One ratio on the rest scales compute and overhead alike; the overhead apart keeps
        // its own scale (a communication scale fitted on none is meaningless: it is b).
        let (a, c) = match f.scales {
            Scales::OverheadApart | Scales::Three => (f.a, f.c),
            Scales::One | Scales::GpuAndLinks => (f.a, f.a),
        };
        let fit = Fit::with(points, scales, [a, b, c]);
        Some(Fit {
            carried: true,
            points: f.points,
            ..fit
        })
    }

    pub fn predict_ms(&self, p: &StepPrior) -> f64 {
        self.a * p.compute_s + self.b * p.comm_s + self.c * p.overhead_s
    }

    /// How far above the best measured step a prediction must be to rule a layout out: at
    /// least twice the fit's residual, widened for the scales it fitted (n/(n − k)).
    pub fn margin(&self) -> f64 {
        let k = self.scales.count() as f64 - if self.carried { 1.0 } else { 0.0 };
        let floor = if self.carried {
            CARRIED_MARGIN
        } else if k > 1.0 {
            FITTED_MARGIN
        } else {
            RATIO_MARGIN
        };
        let n = self.points as f64;
        let widen = if n > k { (n / (n - k)).sqrt() } else { 1.0 };
        floor.max(2.0 * self.spread * widen)
    }

    /// The fitted scales, in words, for a skipped layout's reason.
    fn describe(&self) -> String {
        let x = |v: f64| v / 1000.0;
        match self.scales {
            Scales::One => format!("one ratio, × {:.2} of the assumed speeds", x(self.a)),
            Scales::GpuAndLinks => format!(
                "compute × {:.2}, communication × {:.2} of the assumed speeds",
                x(self.a),
                x(self.b)
            ),
            Scales::OverheadApart => format!(
                "compute and communication × {:.2}, per-micro-batch overhead × {:.2} of the \
                 assumed",
                x(self.a),
                x(self.c)
            ),
            Scales::Three => format!(
                "compute × {:.2}, communication × {:.2}, per-micro-batch overhead × {:.2} of the \
                 assumed",
                x(self.a),
                x(self.b),
                x(self.c)
            ),
        }
    }
}

/// The least-squares scales of `points` (relative errors: each row over its measurement) for
/// the terms `s` scales apart, as [compute, communication, overhead]; None when the points do not
/// determine them: fewer points than scales + 1 (k scales on k points fit exactly and say
/// nothing of the form's own error), terms the points cannot tell apart (the normal matrix
/// near singular, or a scale's standard error over [`SCALE_ERROR`]: layouts whose shares of a
/// term barely differ, such as the same micro batches for the overhead), or a scale that is not
/// physical (a compute scale ≤ 0, another < 0).
fn scales(points: &[(StepPrior, f64)], s: Scales) -> Option<[f64; 3]> {
    let groups = s.groups();
    let k = groups.len();
    if points.len() < k + 1 {
        return None;
    }
    // The normal equations, k × k, with the identity beside them and the right-hand side last.
    let mut n = [[0.0_f64; 7]; 3];
    let rows: Vec<Vec<f64>> = points
        .iter()
        .map(|(p, ms)| {
            let t = p.terms();
            groups
                .iter()
                .map(|g| g.iter().map(|&i| t[i]).sum::<f64>() / ms)
                .collect()
        })
        .collect();
    for x in &rows {
        for i in 0..k {
            for j in 0..k {
                n[i][j] += x[i] * x[j];
            }
            n[i][2 * k] += x[i];
        }
    }
    for i in 0..k {
        n[i][k + i] = 1.0;
    }
    let diagonal: f64 = (0..k).map(|i| n[i][i]).product();
    let (v, inverse, det) = solve(&mut n, k)?;
    if det <= 1e-9 * diagonal.max(1e-300) {
        return None;
    }
    let residual = (rows
        .iter()
        .map(|x| (x.iter().zip(&v).map(|(a, b)| a * b).sum::<f64>() - 1.0).powi(2))
        .sum::<f64>()
        / rows.len() as f64)
        .sqrt();
    // Each scale's standard error: σ √((XᵀX)⁻¹)ⱼⱼ, with σ the residual (widened for the k
    // scales fitted) or the form's error, the larger.
    let np = rows.len() as f64;
    let sigma = FORM_ERROR.max(residual * (np / (np - k as f64)).sqrt());
    if (0..k).any(|j| sigma * inverse[j].max(0.0).sqrt() > SCALE_ERROR * v[j].abs()) {
        return None;
    }
    let mut out = [0.0; 3];
    for (g, x) in groups.iter().zip(v) {
        for &i in *g {
            out[i] = x;
        }
    }
    (out[0] > 0.0 && out[1] >= 0.0 && out[2] >= 0.0).then_some(out)
}

/// Gauss–Jordan elimination with partial pivoting of the k × k system in `n` (the identity in
/// columns k..2k, the right-hand side in column 2k): the solution, the inverse's diagonal and
/// the matrix's determinant (up to sign); None when singular.
fn solve(n: &mut [[f64; 7]; 3], k: usize) -> Option<(Vec<f64>, Vec<f64>, f64)> {
    let mut det = 1.0;
    for c in 0..k {
        let pivot = (c..k).max_by(|&a, &b| n[a][c].abs().total_cmp(&n[b][c].abs()))?;
        n.swap(c, pivot);
        let d = n[c][c];
        if d == 0.0 {
            return None;
        }
        det *= d;
        let row = n[c];
        for (r, other) in n.iter_mut().enumerate().take(k) {
            if r != c {
                let f = other[c] / d;
                for (x, y) in other.iter_mut().zip(row).take(2 * k + 1).skip(c) {
                    *x -= f * y;
                }
            }
        }
    }
    let solution = (0..k).map(|i| n[i][2 * k] / n[i][i]).collect();
    let inverse = (0..k).map(|i| n[i][k + i] / n[i][i]).collect();
    Some((solution, inverse, det.abs()))
}

/// The links' scale a finished layout study measured (`points`: each measured layout's prior
/// and step, on nodes of `gpus_per_node` GPUs), for later studies on the same node; None
/// unless its own layouts set the links' scale apart from the compute's.
pub fn measured_links(
    points: &[(StepPrior, f64)],
    gpus_per_node: u64,
) -> Option<crate::domain::study::LinkScale> {
    let f = Fit::of(points)?;
    f.links_apart().then_some(crate::domain::study::LinkScale {
        comm_ms_per_s: f.b,
        gpus_per_node,
        points: f.points,
    })
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
    let own = Fit::of(&points)?;
    match &s.cfg.carried_links {
        Some(c) if !own.links_apart() => {
            Fit::with_links(&points, c.scale.comm_ms_per_s).or(Some(own))
        }
        _ => Some(own),
    }
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
            None => p.total(),
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
    let mut how = f.describe();
    if let (true, Some(c)) = (f.carried, &s.cfg.carried_links) {
        how.push_str(&format!(
            ", the communication's carried from study {} (fitted there on {} layouts)",
            c.from, c.scale.points
        ));
    }
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
        q(c, m, 0.0)
    }

    fn q(c: f64, m: f64, o: f64) -> StepPrior {
        StepPrior {
            compute_s: c,
            comm_s: m,
            overhead_s: o,
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
        assert_eq!(f.scales, Scales::GpuAndLinks);
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
        assert_eq!(one.scales, Scales::One);
        assert!((one.a - 2000.0).abs() < 1e-9 && one.a == one.b && one.b == one.c);
        assert_eq!(one.margin(), RATIO_MARGIN);
        let same = Fit::of(&[(p(1.0, 0.5), 3000.0), (p(2.0, 1.0), 6000.0)]).unwrap();
        assert_eq!(same.scales, Scales::One, "{same:?}");
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
        assert_eq!(f.scales, Scales::One);
        assert!(f.spread > 0.0 && f.margin() >= RATIO_MARGIN);
    }

    /// Truth: compute 1.5× slower than assumed, links 3×, the per-micro-batch overhead 0.5×.
    fn truth(q: StepPrior) -> f64 {
        1000.0 * (1.5 * q.compute_s + 3.0 * q.comm_s + 0.5 * q.overhead_s)
    }

    #[test]
    fn four_layouts_with_different_overheads_give_three_scales() {
        // Each term large in one layout: the points set every scale closely.
        let layouts = [
            q(1.0, 0.05, 0.05),
            q(0.3, 1.0, 0.1),
            q(0.3, 0.1, 1.0),
            q(0.6, 0.5, 0.5),
        ];
        let pts: Vec<(StepPrior, f64)> = layouts.iter().map(|&x| (x, truth(x))).collect();
        let f = Fit::of(&pts).unwrap();
        assert_eq!(f.scales, Scales::Three, "{f:?}");
        let close = |x: f64, y: f64| (x - y).abs() < 1e-6;
        assert!(
            close(f.a, 1500.0) && close(f.b, 3000.0) && close(f.c, 500.0),
            "{f:?}"
        );
        // k = 3 of n = 4: the margin's floor, the residual being none.
        assert_eq!(f.margin(), FITTED_MARGIN);
        // Three of them cannot fit three scales (k scales need k + 1 points).
        assert!(Fit::of(&pts[..3]).unwrap().scales.count() < 3);
    }

    #[test]
    fn a_scale_the_points_barely_move_is_not_fitted_apart() {
        // Communication 0 to 3 % of the step: at 5 % a layout, three points cannot set the
        // links' scale (here the truth's 3×) within ±25 %; one ratio it is.
        let layouts = [p(1.0, 0.0), p(1.0, 0.02), p(0.9, 0.03)];
        let pts: Vec<(StepPrior, f64)> = layouts.iter().map(|&x| (x, truth(x))).collect();
        assert_eq!(Fit::of(&pts).unwrap().scales, Scales::One);
        // The same layouts with communication a third of the step set it.
        let layouts = [p(1.0, 0.0), p(1.0, 0.5), p(0.8, 0.3), p(0.9, 0.1)];
        let pts: Vec<(StepPrior, f64)> = layouts.iter().map(|&x| (x, truth(x))).collect();
        assert_eq!(Fit::of(&pts).unwrap().scales, Scales::GpuAndLinks);
    }

    #[test]
    fn an_overhead_that_does_not_vary_gets_no_scale_of_its_own() {
        // The same micro batches everywhere: the overhead's share moves by under the spread
        // the fit needs, so the GPU's scale carries it.
        let layouts = [
            q(1.0, 0.0, 0.10),
            q(1.0, 0.5, 0.10),
            q(0.8, 0.3, 0.09),
            q(0.9, 0.1, 0.10),
        ];
        let pts: Vec<(StepPrior, f64)> = layouts.iter().map(|&x| (x, truth(x))).collect();
        let f = Fit::of(&pts).unwrap();
        assert_eq!(f.scales, Scales::GpuAndLinks, "{f:?}");
        assert_eq!(f.a, f.c);
    }

    #[test]
    fn without_links_the_overhead_is_fitted_apart() {
        // One GPU: no communication, micro batches varied (as the H200 grids).
        let layouts = [q(1.0, 0.0, 2.0), q(0.95, 0.0, 1.0), q(0.9, 0.0, 0.5)];
        let pts: Vec<(StepPrior, f64)> = layouts.iter().map(|&x| (x, truth(x))).collect();
        let f = Fit::of(&pts).unwrap();
        assert_eq!(f.scales, Scales::OverheadApart, "{f:?}");
        assert!(
            (f.a - 1500.0).abs() < 1e-6 && (f.c - 500.0).abs() < 1e-6,
            "{f:?}"
        );
    }

    #[test]
    fn a_carried_link_scale_predicts_other_layouts_from_one_measurement() {
        // Truth: compute 1.5× slower than assumed, links 3×, no overhead.
        let truth = |q: StepPrior| 1000.0 * (1.5 * q.compute_s + 3.0 * q.comm_s);
        let one = [(p(1.0, 0.2), truth(p(1.0, 0.2)))];
        let own = Fit::of(&one).unwrap();
        assert!(!own.links_apart());
        let f = Fit::with_links(&one, 3000.0).unwrap();
        assert!(f.carried && f.links_apart());
        assert!((f.a - 1500.0).abs() < 1e-6 && f.b == 3000.0, "{f:?}");
        let other = p(0.5, 0.8);
        assert!((f.predict_ms(&other) - truth(other)).abs() < 1e-6);
        // One ratio would put the comm-heavy layout at 1.75 s per predicted second.
        assert!((own.predict_ms(&other) - 1750.0 * 1.3).abs() < 1e-6);
        assert_eq!(f.margin(), CARRIED_MARGIN);
        // A measurement no longer than its carried communication: these links are not its.
        assert!(Fit::with_links(&[(p(1.0, 1.0), 2000.0)], 3000.0).is_none());
    }

    #[test]
    fn a_study_keeps_its_link_scale_only_when_it_set_it_apart() {
        let truth = |q: StepPrior| 1000.0 * (1.5 * q.compute_s + 3.0 * q.comm_s);
        let pts: Vec<(StepPrior, f64)> = [p(1.0, 0.0), p(1.0, 0.5), p(0.8, 0.3), p(0.6, 0.9)]
            .iter()
            .map(|&q| (q, truth(q)))
            .collect();
        let kept = measured_links(&pts, 8).unwrap();
        assert!((kept.comm_ms_per_s - 3000.0).abs() < 1e-6, "{kept:?}");
        assert_eq!((kept.gpus_per_node, kept.points), (8, 4));
        assert!(measured_links(&pts[..1], 8).is_none());
    }
}
