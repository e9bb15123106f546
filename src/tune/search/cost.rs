//! What a launch costs, and how long a trial should run for it.
//!
//! A trial of `k` iterations costs its launch (start-up and the warm-up iterations: paid again
//! by every fresh process) plus `k` steady iterations. Where the launch is cheap, short trials
//! and re-launched rungs (successive halving) buy information cheaply. Where it dominates —
//! upstream Megatron-LM on one H200 took 25–54 s to its first iteration against 0.4–0.7 s per
//! iteration; Primus jobs on 8+ GPUs start in minutes — every re-launch pays the start-up again
//! for a few seconds of measurement. Then one launch per candidate that runs long enough to
//! decide gives far more information per GPU-second: its iterations cost little next to the
//! launch it has already paid for.
//!
//! The launch's cost is measured: the study's own trials (the time before their first steady
//! sample), else what the workspace's earlier trials of this profile and shape took (a prior,
//! [`super::SearchConfig::launch_s_prior`]). With neither, the first trial is short, as in the
//! halving, and measures it.

use crate::util::stats::median;

/// Where the launch-cost figure comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LaunchSource {
    /// The study's own trials: the median over `n` of them.
    Study { n: usize },
    /// Earlier trials kept in the workspace (before this study measured any).
    History,
}

/// The cost model of a launch, in wall seconds of the job.
#[derive(Debug, Clone, Default)]
pub struct LaunchCost {
    prior_s: Option<f64>,
    /// Seconds before the first steady sample, per measured trial of this study.
    launch_s: Vec<f64>,
    /// Median steady step time of each measured trial, seconds.
    step_s: Vec<f64>,
}

impl LaunchCost {
    pub fn new(prior_s: Option<f64>) -> Self {
        LaunchCost {
            prior_s: prior_s.filter(|s| s.is_finite() && *s >= 0.0),
            ..Self::default()
        }
    }

    /// A trial measured: its launch seconds (when it reported them) and what one of its
    /// iterations cost, ms of wall time (its median steady step as run, not scaled to another
    /// amount of work).
    pub fn observe(&mut self, launch_s: Option<f64>, iter_ms: Option<f64>) {
        if let Some(l) = launch_s.filter(|l| l.is_finite() && *l >= 0.0) {
            self.launch_s.push(l);
        }
        if let Some(m) = iter_ms.filter(|m| m.is_finite() && *m > 0.0) {
            self.step_s.push(m / 1000.0);
        }
    }

    /// Seconds one launch costs before it measures, and where the figure comes from.
    pub fn launch(&self) -> Option<(f64, LaunchSource)> {
        match median(&self.launch_s) {
            Some(m) => Some((
                m,
                LaunchSource::Study {
                    n: self.launch_s.len(),
                },
            )),
            None => self.prior_s.map(|p| (p, LaunchSource::History)),
        }
    }

    /// The typical steady step time of this study so far, seconds.
    pub fn step(&self) -> Option<f64> {
        median(&self.step_s)
    }

    /// Whether the launch dominates: it costs at least `ratio` times the steady iterations of a
    /// short (first-rung) trial of `short_iters`. Unknown (nothing measured, no prior) is not.
    /// With a prior but no step time yet, a launch of `prior_floor_s` or more dominates (a
    /// minute of start-up outweighs any short trial of a training job).
    pub fn dominates(&self, short_iters: u64, ratio: f64) -> bool {
        let Some((launch, _)) = self.launch() else {
            return false;
        };
        match self.step() {
            Some(step) => launch >= ratio * short_iters as f64 * step,
            None => launch >= PRIOR_FLOOR_S,
        }
    }

    /// The length of a trial launched once, iterations: enough that its iterations cost about
    /// `share` of the launch (so the launch still dominates its cost), at least `min_iters`
    /// (enough samples to decide on one launch), at most `max_iters`; `short_iters` while
    /// nothing is known. (The runner's early stop ends a steady trial sooner.)
    pub fn long_iters(&self, min_iters: u64, max_iters: u64, share: f64) -> u64 {
        let max_iters = max_iters.max(min_iters);
        match (self.launch(), self.step()) {
            (Some((launch, _)), Some(step)) if step > 0.0 => {
                let k = (share * launch / step).ceil();
                let k = if k.is_finite() { k as u64 } else { max_iters };
                (k + crate::tune::replay::WARMUP_ITERS as u64)
                    .clamp(min_iters.min(max_iters), max_iters)
            }
            _ => max_iters,
        }
    }
}

/// With only a prior from history (no step time measured yet), a launch of this many seconds or
/// more is taken to dominate.
pub const PRIOR_FLOOR_S: f64 = 20.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_study_measures_the_launch_and_history_stands_in_until_then() {
        let mut c = LaunchCost::new(Some(40.0));
        assert_eq!(c.launch(), Some((40.0, LaunchSource::History)));
        assert!(
            c.dominates(6, 1.0),
            "40 s of start-up dominates with no step known"
        );
        c.observe(Some(30.0), Some(500.0));
        c.observe(Some(34.0), Some(400.0));
        assert_eq!(c.launch(), Some((32.0, LaunchSource::Study { n: 2 })));
        assert!((c.step().unwrap() - 0.45).abs() < 1e-9);
        // 32 s against 6 × 0.45 s: the launch dominates; a long trial costs ~half of it.
        assert!(c.dominates(6, 1.0));
        assert_eq!(c.long_iters(6, 60, 0.5), 36 + 2);
        assert_eq!(c.long_iters(6, 30, 0.5), 30);
        assert_eq!(c.long_iters(18, 30, 0.01), 18, "at least the minimum");
    }

    #[test]
    fn a_cheap_launch_does_not_dominate_and_unknown_is_not_dominant() {
        let mut c = LaunchCost::new(None);
        assert!(!c.dominates(6, 1.0));
        assert_eq!(c.long_iters(6, 40, 0.5), 40);
        c.observe(Some(1.0), Some(300.0));
        assert!(!c.dominates(6, 1.0), "1 s against 1.8 s of iterations");
        assert_eq!(c.long_iters(6, 40, 0.5), 6);
        assert_eq!(c.long_iters(18, 40, 0.5), 18);
        assert!(!LaunchCost::new(Some(5.0)).dominates(6, 1.0));
    }
}
