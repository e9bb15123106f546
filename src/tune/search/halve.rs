//! After rung 1: with one launch per candidate (start-up dominates), one long launch for those
//! tied with the leader on a short trial and one tie-break launch; otherwise successive halving,
//! each rung `growth` times longer for the better 1/`growth` still tied with the leader.

use super::{Flow, Runner, Search, Stat, State};

/// Candidates measured on a short trial before start-up was known to dominate, and still tied
/// with the leader, get one long launch.
pub(super) fn long_launches(s: &mut Search<'_>, runner: &mut dyn Runner, f: &mut Flow) {
    let (cfg, max_iters) = (s.cfg, f.max_iters);
    let (mut exhausted, mut contenders) = (f.exhausted, std::mem::take(&mut f.contenders));
    if s.one_launch
        && !exhausted
        && let Some(d) = s.decide(&contenders)
        && d.tied.len() > 1
    {
        let thin: Vec<usize> = d.tied.iter().map(|t| t.0).filter(|&i| !s.long[i]).collect();
        if !thin.is_empty() {
            let len = s.screen_iters(cfg.first_iters.clamp(1, max_iters));
            s.log.push(format!(
                "tied with the leader on a short trial: one long launch ({len} iterations) for {}",
                thin.iter()
                    .map(|&i| format!("#{}", s.cands[i].id))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            let since = s.gpu_seconds;
            for &i in &thin {
                s.long[i] = true;
            }
            if !s.trials(runner, &thin, len).1 {
                exhausted = true;
            }
            s.note_spent("long launches", since);
            contenders.retain(|&i| s.state[i] == State::Measured);
        }
    }
    f.exhausted = exhausted;
    f.contenders = contenders;
}

/// A tie the single launches leave unresolved: one more launch for the less certain of the
/// leader and its likeliest challenger.
pub(super) fn tie_break(s: &mut Search<'_>, runner: &mut dyn Runner, f: &mut Flow) {
    let (cfg, max_iters) = (s.cfg, f.max_iters);
    let (mut exhausted, mut contenders) = (f.exhausted, std::mem::take(&mut f.contenders));
    // A tie the single launches leave unresolved: one more launch, for whichever of the leader
    // and its likeliest challenger is the less certain (the launch that narrows their
    // difference the most), when the challenger may be faster by more than the tolerance.
    if s.one_launch
        && !exhausted
        && let Some(p_min) = cfg.tie_break_p
        && let Some(d) = s.decide(&contenders)
        && !d.resolved
        && let Some((rival, rs, p)) = s.challenger(&d)
        && p >= p_min
    {
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
        let since = s.gpu_seconds;
        if !s.trials(runner, &[again], len).1 {
            exhausted = true;
        }
        s.note_spent("tie-break", since);
        contenders.retain(|&i| s.state[i] == State::Measured);
    }
    f.exhausted = exhausted;
    f.contenders = contenders;
}

/// Successive halving until one candidate is separated, the tie is resolved, the trials are as
/// long as they may be, or the budget ends.
pub(super) fn rungs(s: &mut Search<'_>, runner: &mut dyn Runner, f: &mut Flow) {
    let (growth, max_iters, mut iters) = (f.growth, f.max_iters, f.iters);
    let (mut exhausted, mut contenders) = (f.exhausted, std::mem::take(&mut f.contenders));
    let mut rung = 1;
    while !exhausted && !s.one_launch {
        let Some(d) = s.decide(&contenders) else {
            break;
        };
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
            break;
        }
        if d.resolved {
            s.log.push(format!(
                "tie resolved: {} is at most {:.2} % slower than any of the {} tied candidates",
                s.label(d.pick),
                d.pick_loss * 100.0,
                d.tied.len()
            ));
            break;
        }
        // The next rung's length: `growth` times longer, capped at `max_iters`; a capped rung
        // that would not at least double the length is not worth its start-up.
        let next_iters = iters.saturating_mul(growth).min(max_iters);
        if next_iters < iters.saturating_mul(2) {
            s.log.push(format!(
                "longest trials ({iters} iterations) done; {} candidates still tied",
                d.tied.len()
            ));
            break;
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
        iters = next_iters;
        rung += 1;
        s.log.push(format!(
            "rung {rung}: {iters} iterations for {}{}",
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
        let since = s.gpu_seconds;
        // Only the trialled candidate's state changes (nothing is pending after rung 1), so the
        // list can be filtered before any trial.
        let run: Vec<usize> = next
            .iter()
            .copied()
            .filter(|&i| s.state[i] == State::Measured)
            .collect();
        if !s.trials(runner, &run, iters).1 {
            exhausted = true;
        }
        s.note_spent(&format!("rung {rung}"), since);
        contenders = next
            .into_iter()
            .filter(|&i| s.state[i] == State::Measured)
            .collect();
    }
    f.iters = iters;
    f.exhausted = exhausted;
    f.contenders = contenders;
}
