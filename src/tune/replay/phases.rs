//! Where a replayed study's GPU-seconds went: by what each launch was for ([`Phase`]), and how
//! the candidates each phase launched ended. It shows what any better prediction could save:
//! the promising launches of candidates that ended slower than the pick.

use crate::tune::search::{Phase, SearchResult, Verdict};
use serde::Serialize;
use std::collections::BTreeMap;

/// The launches of one phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PhaseCost {
    pub launches: usize,
    pub gpu_seconds: f64,
    /// Launches that ran out of memory (counted in `launches` and `gpu_seconds`).
    pub oom_launches: usize,
    /// GPU-seconds of the launches whose candidate ended as the pick or tied with it.
    pub contenders_gpu_seconds: f64,
    /// GPU-seconds of the launches whose candidate ended measurably slower than the pick.
    pub slower_gpu_seconds: f64,
}

/// A study's launches by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Phases {
    pub design: PhaseCost,
    pub promising: PhaseCost,
    pub follow_up: PhaseCost,
}

impl Phases {
    pub fn of(res: &SearchResult) -> Phases {
        let verdict: BTreeMap<usize, &Verdict> =
            res.verdicts.iter().map(|(i, v)| (*i, v)).collect();
        let mut p = Phases::default();
        for l in &res.launches {
            let c = match l.phase {
                Phase::Design => &mut p.design,
                Phase::Promising => &mut p.promising,
                Phase::FollowUp => &mut p.follow_up,
            };
            c.launches += 1;
            c.gpu_seconds += l.gpu_seconds;
            c.oom_launches += usize::from(l.oom);
            match verdict.get(&l.candidate) {
                Some(Verdict::Winner | Verdict::BestSoFar | Verdict::Tie { .. }) => {
                    c.contenders_gpu_seconds += l.gpu_seconds;
                }
                Some(Verdict::Slower { .. }) => c.slower_gpu_seconds += l.gpu_seconds,
                _ => {}
            }
        }
        p
    }

    /// Summed over studies.
    pub fn add(&mut self, o: &Phases) {
        for (a, b) in [
            (&mut self.design, &o.design),
            (&mut self.promising, &o.promising),
            (&mut self.follow_up, &o.follow_up),
        ] {
            a.launches += b.launches;
            a.gpu_seconds += b.gpu_seconds;
            a.oom_launches += b.oom_launches;
            a.contenders_gpu_seconds += b.contenders_gpu_seconds;
            a.slower_gpu_seconds += b.slower_gpu_seconds;
        }
    }

    /// The GPU-seconds left if no promising launch had gone to a candidate that ended
    /// measurably slower than the pick or ran out of memory: what a perfect prediction after
    /// the design would spend, with the same design and follow-up.
    pub fn perfect_prediction_gpu_seconds(&self) -> f64 {
        self.design.gpu_seconds + self.promising.contenders_gpu_seconds + self.follow_up.gpu_seconds
    }
}
