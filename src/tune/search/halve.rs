//! After rung 1: with one launch per candidate (start-up dominates), one long launch for those
//! tied with the leader on a short trial and one tie-break launch; otherwise successive halving,
//! each rung `growth` times longer for the better 1/`growth` still tied with the leader.

use super::step::{Ask, Seen, Step, settle};
use super::{Flow, Search, Stat, State};

/// Candidates measured on a short trial before start-up was known to dominate, and still tied
/// with the leader, get one long launch.
#[derive(Default)]
pub(super) struct LongLaunches {
    since: f64,
}

impl Step for LongLaunches {
    fn step(&mut self, s: &mut Search<'_>, f: &mut Flow, seen: Option<Seen>) -> Option<Ask> {
        if let Some(seen) = seen {
            settle(s, f, &seen, "long launches", self.since);
            return None;
        }
        let (cfg, max_iters) = (s.cfg, f.max_iters);
        if !s.one_launch || f.exhausted {
            return None;
        }
        let d = s.decide(&f.contenders)?;
        if d.tied.len() <= 1 {
            return None;
        }
        let thin: Vec<usize> = d.tied.iter().map(|t| t.0).filter(|&i| !s.long[i]).collect();
        if thin.is_empty() {
            return None;
        }
        let len = s.screen_iters(cfg.first_iters.clamp(1, max_iters));
        s.log.push(format!(
            "tied with the leader on a short trial: one long launch ({len} iterations) for {}",
            thin.iter()
                .map(|&i| format!("#{}", s.cands[i].id))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        self.since = s.gpu_seconds;
        for &i in &thin {
            s.long[i] = true;
        }
        Some(Ask::Each {
            list: thin,
            iters: len,
        })
    }
}

/// A tie the single launches leave unresolved: one more launch for the less certain of the
/// leader and its likeliest challenger.
#[derive(Default)]
pub(super) struct TieBreak {
    since: f64,
}

impl Step for TieBreak {
    fn step(&mut self, s: &mut Search<'_>, f: &mut Flow, seen: Option<Seen>) -> Option<Ask> {
        if let Some(seen) = seen {
            settle(s, f, &seen, "tie-break", self.since);
            return None;
        }
        let (cfg, max_iters) = (s.cfg, f.max_iters);
        // One more launch, for whichever of the leader and its likeliest challenger is the less
        // certain (the launch that narrows their difference the most), when the challenger may
        // be faster by more than the tolerance.
        if !s.one_launch || f.exhausted {
            return None;
        }
        let p_min = cfg.tie_break_p?;
        let d = s.decide(&f.contenders)?;
        if d.resolved {
            return None;
        }
        let (rival, rs, p) = s.challenger(&d)?;
        if p < p_min {
            return None;
        }
        let relative = |x: &Stat| x.half() / x.value;
        let again = if relative(&rs) > relative(&d.sorted[0].1) {
            rival
        } else {
            d.leader
        };
        let len = s.screen_iters(cfg.first_iters.clamp(1, max_iters));
        s.log.push(format!(
            "tie unresolved: {} may be faster than the leader {} by more than the tolerance \
             (probability {p:.2}); one more launch ({len} iterations) for #{}, the less certain",
            s.label(rival),
            s.label(d.leader),
            s.cands[again].id
        ));
        self.since = s.gpu_seconds;
        Some(Ask::Each {
            list: vec![again],
            iters: len,
        })
    }
}

/// Successive halving until one candidate is separated, the tie is resolved, the trials are as
/// long as they may be, or the budget ends.
#[derive(Default)]
pub(super) struct Rungs {
    /// The rungs so far (rung 1 included once a later one starts), and of the rung launched
    /// last, when its cost started and the candidates it keeps.
    rung: usize,
    since: f64,
    next: Vec<usize>,
}

impl Step for Rungs {
    fn step(&mut self, s: &mut Search<'_>, f: &mut Flow, seen: Option<Seen>) -> Option<Ask> {
        match seen {
            None => self.rung = 1,
            Some(seen) => {
                f.exhausted |= !seen.complete;
                s.note_spent(&format!("rung {}", self.rung), self.since);
                f.contenders = std::mem::take(&mut self.next)
                    .into_iter()
                    .filter(|&i| s.state[i] == State::Measured)
                    .collect();
            }
        }
        if f.exhausted || s.one_launch {
            return None;
        }
        self.next_rung(s, f)
    }
}

impl Rungs {
    /// The next rung's launches, or None when the halving is over.
    fn next_rung(&mut self, s: &mut Search<'_>, f: &mut Flow) -> Option<Ask> {
        let (growth, max_iters, iters) = (f.growth, f.max_iters, f.iters);
        let d = s.decide(&f.contenders)?;
        let ls = d.sorted[0].1;
        if d.tied.len() == 1 {
            let next = d.sorted.get(1).map_or(String::new(), |&(j, js)| {
                format!("; next {} {}", s.label(j), Search::fmt_stat(&js))
            });
            s.log.push(format!(
                "separated: {} {}{next}",
                s.label(d.leader),
                Search::fmt_stat(&ls)
            ));
            return None;
        }
        if d.resolved {
            s.log.push(format!(
                "tie resolved: {} is at most {:.2} % slower than any of the {} tied candidates",
                s.label(d.pick),
                d.pick_loss * 100.0,
                d.tied.len()
            ));
            return None;
        }
        // The next rung's length: `growth` times longer, capped at `max_iters`; a capped rung
        // that would not at least double the length is not worth its start-up.
        let next_iters = iters.saturating_mul(growth).min(max_iters);
        if next_iters < iters.saturating_mul(2) {
            s.log.push(format!(
                "longest trials ({iters} iterations) done; {} candidates still tied",
                d.tied.len()
            ));
            return None;
        }
        // The better 1/growth (by step time) among those still tied with the leader; at least two.
        let keep = d
            .sorted
            .len()
            .div_ceil(usize::try_from(growth).unwrap_or(usize::MAX))
            .max(2);
        let top: Vec<usize> = d.sorted.iter().take(keep).map(|t| t.0).collect();
        let mut next: Vec<usize> = d
            .tied
            .iter()
            .map(|t| t.0)
            .filter(|i| top.contains(i))
            .collect();
        if next.len() < 2
            && let Some(t) = d.tied.iter().find(|t| !next.contains(&t.0))
        {
            next.push(t.0);
        }
        // The current settings stay in contention while they are tied with the leader.
        if let Some(b) = s.baseline
            && d.tied.iter().any(|t| t.0 == b)
            && !next.contains(&b)
        {
            next.push(b);
        }
        let dropped: Vec<String> = d
            .sorted
            .iter()
            .filter(|t| !next.contains(&t.0))
            .map(|t| format!("#{}", s.cands[t.0].id))
            .collect();
        let iters = next_iters;
        f.iters = iters;
        self.rung += 1;
        s.log.push(format!(
            "rung {}: {iters} iterations for {}{}",
            self.rung,
            next.iter()
                .map(|&i| format!("#{}", s.cands[i].id))
                .collect::<Vec<_>>()
                .join(", "),
            if dropped.is_empty() {
                String::new()
            } else {
                format!(" (out of contention: {})", dropped.join(", "))
            }
        ));
        self.since = s.gpu_seconds;
        // Only the trialled candidate's state changes (nothing is pending after rung 1), so the
        // list can be filtered before any trial.
        let run: Vec<usize> = next
            .iter()
            .copied()
            .filter(|&i| s.state[i] == State::Measured)
            .collect();
        self.next = next;
        Some(Ask::Each { list: run, iters })
    }
}
