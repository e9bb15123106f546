//! Knob effects carried from earlier studies: what the additive model measured about each pair
//! of neighbouring knob values in the workspace's earlier studies, as a prior for a new one
//! (empirical Bayes, as transfer-learning tuners warm-start from earlier tasks).
//!
//! Each finished study adds, per pair of neighbouring values of a knob that its measured
//! candidates determine, the fitted log step-time difference, and its fit's residual. A new
//! study's additive model then takes, for each pair of its neighbouring knob values that at
//! least [`MIN_STUDIES`] earlier studies measured, a prior `N(mean, sd²)` on that difference:
//! the studies' mean, and their spread (so effects that differ from study to study give a wide
//! prior that prunes little), widened for the few studies it comes from (Student's t). A
//! prediction that leans on a prior is a prediction: a candidate skipped on it is
//! `predicted-slower`, never measured.

use std::collections::BTreeMap;

use super::additive::Additive;
use crate::domain::study::{Candidate, Knob};
use crate::util::stats::t975;

/// Earlier studies that must have measured a pair before it gets a prior.
pub const MIN_STUDIES: usize = 3;

/// A difference whose standard error is above this many residual σ (leverage above 4) is not
/// determined by the study's measured candidates, and is not learned.
const MAX_LEVERAGE: f64 = 4.0;

/// The least spread a prior may claim (0.5 %): no two studies share an effect more closely.
const MIN_SD: f64 = 0.005;

/// What earlier studies measured (see the module's documentation).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Effects {
    /// Per (flag, value, value) in canonical order (the two values' JSON text, ascending): the
    /// log step-time difference from the first to the second, one per study that measured it.
    diffs: BTreeMap<(String, String, String), Vec<f64>>,
    /// Per study with residual degrees of freedom: (residual sum of squares, degrees of freedom).
    resid: Vec<(f64, f64)>,
    /// Studies learned from.
    studies: usize,
}

/// A prior on one contrast of a study's additive model.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorRow {
    /// The contrast `b[value b] − b[value a]` over the model's columns.
    pub x: Vec<f64>,
    /// Its prior mean and standard deviation (log step time).
    pub mean: f64,
    pub sd: f64,
}

/// The canonical key of values `a` and `b` of a knob, and the sign that turns a difference
/// from `a` to `b` into one in the key's order.
fn key(k: &Knob, a: usize, b: usize) -> Option<((String, String, String), f64)> {
    let (va, vb) = (k.values.get(a)?.to_string(), k.values.get(b)?.to_string());
    Some(if va <= vb {
        ((k.flag.clone(), va, vb), 1.0)
    } else {
        ((k.flag.clone(), vb, va), -1.0)
    })
}

/// Per knob, the value indices its candidates use, in the knob's order: its neighbouring pairs.
fn used(knobs: &[Knob], cands: &[Candidate], k: usize) -> Vec<usize> {
    let mut r: Vec<usize> = cands
        .iter()
        .filter(|c| c.ranks.len() == knobs.len())
        .map(|c| c.ranks[k])
        .collect();
    r.sort_unstable();
    r.dedup();
    r
}

impl Effects {
    /// Learns from one finished study: its knobs and candidates, and the measured ones as
    /// (index into `cands`, step ms).
    pub fn learn(&mut self, knobs: &[Knob], cands: &[Candidate], measured: &[(usize, f64)]) {
        let model = Additive::new(cands, knobs.len());
        let rows: Vec<(Vec<f64>, f64)> = measured
            .iter()
            .filter(|(_, ms)| ms.is_finite() && *ms > 0.0)
            .filter_map(|&(i, ms)| Some((model.x(cands.get(i)?)?, ms.ln())))
            .collect();
        let Some(fit) = model.fit(&rows) else {
            return;
        };
        self.studies += 1;
        if fit.df >= 1 {
            self.resid
                .push((fit.s * fit.s * fit.df as f64, fit.df as f64));
        }
        for (k, knob) in knobs.iter().enumerate() {
            for w in used(knobs, cands, k).windows(2) {
                let c = model.contrast(k, w[0], w[1]);
                if fit.leverage(&c) > MAX_LEVERAGE {
                    continue;
                }
                if let Some((key, sign)) = key(knob, w[0], w[1]) {
                    self.diffs
                        .entry(key)
                        .or_default()
                        .push(sign * fit.predict(&c));
                }
            }
        }
    }

    /// Studies learned from.
    pub fn studies(&self) -> usize {
        self.studies
    }

    /// `N earlier studies` (`1 earlier study`), as the log says it.
    pub fn earlier(&self) -> String {
        match self.studies {
            1 => "1 earlier study".to_string(),
            n => format!("{n} earlier studies"),
        }
    }

    /// The prior on the difference from value `a` to value `b` of knob `k`: (mean, sd), once
    /// [`MIN_STUDIES`] studies measured it. The sd is the studies' spread, widened for the mean
    /// being estimated from them (× √(1 + 1/n)) and for the spread itself (Student's t on n − 1
    /// degrees of freedom over the normal's 1.96).
    pub fn pair(&self, k: &Knob, a: usize, b: usize) -> Option<(f64, f64)> {
        let (key, sign) = key(k, a, b)?;
        let d = self.diffs.get(&key)?;
        if d.len() < MIN_STUDIES {
            return None;
        }
        let n = d.len() as f64;
        let mean = d.iter().sum::<f64>() / n;
        let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let widen = t975(d.len() - 1) / 1.96;
        Some((
            sign * mean,
            widen * (var * (1.0 + 1.0 / n)).sqrt().max(MIN_SD),
        ))
    }

    /// The residual σ of the earlier studies' fits, pooled (Σ RSS / Σ df), once
    /// [`MIN_STUDIES`] had residual degrees of freedom: what a candidate departs from the
    /// additive model by.
    pub fn sigma(&self) -> Option<f64> {
        if self.resid.len() < MIN_STUDIES {
            return None;
        }
        let (rss, df) = self
            .resid
            .iter()
            .fold((0.0, 0.0), |a, r| (a.0 + r.0, a.1 + r.1));
        (df > 0.0).then(|| (rss / df).sqrt())
    }

    /// The priors for a study: one per pair of neighbouring values of its knobs (among its
    /// candidates) that earlier studies measured.
    pub fn pairs(&self, knobs: &[Knob], cands: &[Candidate]) -> Vec<Pair> {
        let mut out = Vec::new();
        for (k, knob) in knobs.iter().enumerate() {
            for w in used(knobs, cands, k).windows(2) {
                if let Some((mean, sd)) = self.pair(knob, w[0], w[1]) {
                    out.push(Pair {
                        knob: k,
                        a: w[0],
                        b: w[1],
                        mean,
                        sd,
                    });
                }
            }
        }
        out
    }

    /// [`Effects::pairs`] as rows of the study's additive model.
    pub fn rows(&self, knobs: &[Knob], cands: &[Candidate], model: &Additive) -> Vec<PriorRow> {
        self.pairs(knobs, cands)
            .into_iter()
            .map(|p| PriorRow {
                x: model.contrast(p.knob, p.a, p.b),
                mean: p.mean,
                sd: p.sd,
            })
            .collect()
    }
}

/// A prior on the difference from value `a` to value `b` (indices) of knob `knob`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub knob: usize,
    pub a: usize,
    pub b: usize,
    /// Log step time.
    pub mean: f64,
    pub sd: f64,
}

impl Pair {
    /// `flag a→b +x.x % ± y.y %`.
    pub fn describe(&self, knobs: &[Knob]) -> String {
        let k = &knobs[self.knob];
        format!(
            "{} {}→{} {:+.1} % ± {:.1} %",
            k.flag,
            k.values[self.a],
            k.values[self.b],
            (self.mean.exp() - 1.0) * 100.0,
            self.sd * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::study::MemoryTrend;
    use serde_json::json;

    fn knob(flag: &str, values: &[i64]) -> Knob {
        Knob {
            flag: flag.into(),
            values: values.iter().map(|v| json!(v)).collect(),
            memory: MemoryTrend::None,
        }
    }

    /// A 2-knob grid over `a` × `b` (value indices), id = position.
    fn grid(a: &[usize], b: &[usize]) -> Vec<Candidate> {
        let mut out = Vec::new();
        for &i in a {
            for &j in b {
                out.push(Candidate {
                    id: out.len(),
                    overrides: Default::default(),
                    ranks: vec![i, j],
                    baseline: false,
                });
            }
        }
        out
    }

    /// A study whose step is `100 × exp(effect a + effect b + wobble)`: the wobble, of size
    /// `w`, is an interaction the additive model cannot fit and that leaves its effects exact
    /// (orthogonal to both knobs on a 3 × 2 grid).
    fn study(e: &mut Effects, knobs: &[Knob], cands: &[Candidate], ea: &[f64], eb: &[f64], w: f64) {
        let measured: Vec<(usize, f64)> = cands
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let sign = if c.ranks[1] % 2 == 0 { 1.0 } else { -1.0 };
                let wobble = w * [1.0, -2.0, 1.0][c.ranks[0] % 3] * sign;
                (i, 100.0 * (ea[c.ranks[0]] + eb[c.ranks[1]] + wobble).exp())
            })
            .collect();
        e.learn(knobs, cands, &measured);
    }

    #[test]
    fn a_pair_gets_a_prior_from_three_studies_with_their_mean_and_widened_spread() {
        let knobs = [knob("micro_batch_size", &[1, 2, 4]), knob("cu", &[16, 32])];
        let cands = grid(&[0, 1, 2], &[0, 1]);
        let mut e = Effects::default();
        for (i, d) in [-0.05, -0.07, -0.06].iter().enumerate() {
            assert!(
                e.pair(&knobs[0], 0, 1).is_none(),
                "no prior after {i} studies"
            );
            study(
                &mut e,
                &knobs,
                &cands,
                &[0.0, *d, 2.0 * d],
                &[0.0, 0.02],
                0.003,
            );
        }
        assert_eq!(e.studies(), 3);
        let (m, sd) = e.pair(&knobs[0], 0, 1).expect("a prior after 3 studies");
        assert!((m + 0.06).abs() < 1e-6, "mean {m}");
        // The spread of −5, −7, −6 % is 1 %; × √(4/3) × t(2)/1.96 ≈ 2.53 %.
        assert!((sd - 0.0253).abs() < 0.0005, "sd {sd}");
        // The other direction is the same prior, negated.
        let (m2, sd2) = e.pair(&knobs[0], 1, 0).unwrap();
        assert!((m2 + m).abs() < 1e-12 && (sd2 - sd).abs() < 1e-12);
        // Values no study had, or not neighbours there: no prior.
        assert!(e.pair(&knobs[0], 0, 2).is_none());
        // The second knob's effect is the same in every study: its spread is the floor, widened.
        let (mc, sdc) = e.pair(&knobs[1], 0, 1).unwrap();
        assert!((mc - 0.02).abs() < 1e-6, "mean {mc}");
        let floor = 0.005 * crate::util::stats::t975(2) / 1.96;
        assert!((sdc - floor).abs() < 1e-6, "sd {sdc}");
        // The residual σ is the wobble's, pooled: RSS 6 × (0.003 × √2)² ... per study over its
        // 2 degrees of freedom (6 candidates, 4 parameters).
        let s = e.sigma().expect("pooled residual");
        let rss: f64 = [1.0f64, 4.0, 1.0, 1.0, 4.0, 1.0]
            .iter()
            .map(|c| c * 0.003 * 0.003)
            .sum();
        assert!((s - (rss / 2.0).sqrt()).abs() < 1e-6, "σ {s}");
    }

    #[test]
    fn a_difference_the_measured_candidates_do_not_determine_is_not_learned() {
        let knobs = [knob("micro_batch_size", &[1, 2, 4]), knob("cu", &[16, 32])];
        let cands = grid(&[0, 1, 2], &[0, 1]);
        let mut e = Effects::default();
        for _ in 0..3 {
            // Only micro batch 1 and 2 measured: 2 → 4 is unknown.
            let measured: Vec<(usize, f64)> = cands
                .iter()
                .enumerate()
                .filter(|(_, c)| c.ranks[0] < 2)
                .map(|(i, c)| (i, 100.0 + 5.0 * c.ranks[0] as f64 + c.ranks[1] as f64))
                .collect();
            e.learn(&knobs, &cands, &measured);
        }
        assert!(e.pair(&knobs[0], 0, 1).is_some());
        assert!(e.pair(&knobs[0], 1, 2).is_none());
    }

    #[test]
    fn the_rows_place_each_prior_on_the_studys_own_columns() {
        let knobs = [knob("micro_batch_size", &[1, 2, 4]), knob("cu", &[16, 32])];
        let mut e = Effects::default();
        let all = grid(&[0, 1, 2], &[0, 1]);
        for _ in 0..3 {
            study(
                &mut e,
                &knobs,
                &all,
                &[0.0, -0.1, -0.15],
                &[0.0, 0.0],
                0.003,
            );
        }
        // A study over micro batch 2 and 4 only: one prior, on its one micro-batch column.
        let cands = grid(&[1, 2], &[0, 1]);
        let model = Additive::new(&cands, 2);
        let rows = e.rows(&knobs, &cands, &model);
        let mbs: Vec<&PriorRow> = rows.iter().filter(|r| r.x[1] != 0.0).collect();
        assert_eq!(mbs.len(), 1);
        assert_eq!(mbs[0].x, vec![0.0, 1.0, 0.0]);
        assert!((mbs[0].mean + 0.05).abs() < 1e-6, "{}", mbs[0].mean);
    }
}
