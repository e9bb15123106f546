//! The search's first rung: every candidate still in, lowest memory first while a candidate adds
//! to what the additive model can tell apart, then the most promising by its prediction; one
//! predicted slower than the leader beyond the margin is not run.

use super::step::{Ask, Seen, Step};
use super::{
    Additive, Flow, PRIOR_AFTER, Phase, Search, State, Verdict, cost_cmp, effects, first_batch,
    memory_level, prior,
};

/// Rung 1; once it is over nothing is pending (what was not run is `NotRun`).
#[derive(Default)]
pub(super) struct First {
    /// The candidates in launch order and the additive model, set on entry.
    order: Vec<usize>,
    model: Option<Additive>,
    /// Once no pending candidate adds to the design's rank, none will (the measured rows only
    /// grow), so the rank is not checked again.
    saturated: bool,
    exhausted: bool,
}

impl Step for First {
    fn step(&mut self, s: &mut Search<'_>, f: &mut Flow, seen: Option<Seen>) -> Option<Ask> {
        match seen {
            None => {
                self.order = order(s);
                let model = Additive::new(s.cands, s.knobs.len());
                note(s, self.order.len(), &model, f.iters);
                self.model = Some(model);
            }
            Some(seen) if !seen.complete => self.exhausted = true,
            Some(_) => {}
        }
        let next = if self.exhausted {
            None
        } else {
            self.next(s, f.iters)
        };
        if next.is_none() {
            finish(s, f, self.exhausted);
        }
        next
    }
}

/// The pending candidates, lowest memory first (then lowest prediction, then cost order), the
/// current settings first of all.
fn order(s: &mut Search<'_>) -> Vec<usize> {
    let (knobs, cands) = (s.knobs, s.cands);
    let n = cands.len();
    let predicted = s.predicted.clone();
    // 2. First rung, lowest memory first.
    let mut order: Vec<usize> = (0..n).filter(|&i| s.state[i] == State::Pending).collect();
    order.sort_by(|&a, &b| {
        memory_level(knobs, &cands[a])
            .cmp(&memory_level(knobs, &cands[b]))
            .then_with(|| {
                let (pa, pb) = (predicted[a], predicted[b]);
                pa.unwrap_or(0.0).total_cmp(&pb.unwrap_or(0.0))
            })
            .then_with(|| cost_cmp(&cands[a], &cands[b]))
    });
    // The current settings are measured first: every verdict is held against them.
    if let Some(b) = s.baseline {
        order.retain(|&i| i != b);
        order.insert(0, b);
        s.log.push(format!(
            "baseline: {} holds the current settings; it is measured first and kept unless a \
             candidate is faster beyond the noise",
            s.label(b)
        ));
    }
    order
}

/// The rung's plan in the log: its length, the model's size, the batch rule and the carried
/// knob effects.
fn note(s: &mut Search<'_>, candidates: usize, model: &Additive, iters: u64) {
    let (cfg, knobs, cands) = (s.cfg, s.knobs, s.cands);
    s.log.push(format!(
        "rung 1: {} iterations for each of up to {} candidates: lowest memory first until the \
         additive model over knob values ({} parameters) is determined, then the most promising \
         by its prediction; one predicted slower than the leader beyond the margin is not run",
        iters,
        candidates,
        model.p()
    ));
    if !cfg.layout_prior.is_empty() {
        s.log.push(format!(
            "layout prior: {} layouts have a predicted step (compute at an assumed efficiency, \
             traffic at assumed link speeds, the 1F1B bubble); after the current settings the \
             layout predicted fastest runs first, and one predicted slower than the best \
             measured step beyond the margin ({:.0} % on one ratio, {:.0} % once compute and \
             communication are fitted apart on the measured layouts) is not run",
            cfg.layout_prior.len(),
            prior::layout::RATIO_MARGIN * 100.0,
            prior::layout::FITTED_MARGIN * 100.0
        ));
        if let Some(c) = &cfg.carried_links {
            s.log.push(format!(
                "layout prior: the links' scale is carried from study {} (communication × {:.2} \
                 of the assumed speeds, fitted there on {} layouts) until this study's layouts \
                 set it apart; meanwhile the margin is at least {:.0} %",
                c.from,
                c.scale.comm_ms_per_s / 1000.0,
                c.scale.points,
                prior::layout::CARRIED_MARGIN * 100.0
            ));
        }
    }
    if cfg.priors
        && knobs
            .iter()
            .any(|k| prior::batch::BATCH_KEYS.contains(&k.flag.as_str()))
    {
        let pairs = s
            .faster
            .iter()
            .flatten()
            .filter(|(_, why)| *why != prior::Because::Recompute)
            .count();
        s.log.push(if pairs > 0 {
            format!(
                "batch rule: the configs run in one pipeline stage, where a larger batch is not \
                 slower; a candidate waits for its larger-batch siblings and is not launched once \
                 one of them fits ({pairs} such pairs; a prediction, not a measurement)"
            )
        } else {
            "batch rule off: no two candidates are known to run in one pipeline stage (the \
             configs have more stages, where fewer micro batches widen the pipeline's bubble, \
             or the sweep measures every batch: --no-batch-rule); every batch is measured"
                .to_string()
        });
    }
    if let Some(e) = &cfg.effects {
        let priors = s.prior_rows(model);
        s.log.push(if priors.is_empty() {
            format!(
                "knob effects of {}: none yet for this space's values (a pair of neighbouring \
                 values needs {} studies that measured it)",
                e.earlier(),
                effects::MIN_STUDIES
            )
        } else {
            let sigma = match e.sigma() {
                Some(v) => format!("residual σ {:.1} % from those studies", v * 100.0),
                None => "residual σ: this study's measurement noise, as those studies left no \
                         residual"
                    .to_string(),
            };
            format!(
                "knob effects of {}: priors on {} of the model's {} knob-value differences \
                 ({}); once {PRIOR_AFTER} candidates are measured the model leans on them, and \
                 its predictions may skip candidates ({sigma}; a skipped candidate is predicted \
                 slower, not measured)",
                e.earlier(),
                priors.len(),
                model.p() - 1,
                e.pairs(knobs, cands)
                    .iter()
                    .map(|p| p.describe(knobs))
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        });
    }
}

/// The candidates still pending, in `order`, after what the latest peaks and priors rule out;
/// those that would likely run out of memory last (the current settings excepted: they run
/// first whatever a forecast says): the others' peaks may rule them out first.
fn pending(s: &mut Search<'_>, order: &[usize]) -> Vec<usize> {
    // Every measured peak recalibrates the memory model for the candidates still to run.
    s.prune_recalibrated();
    s.prune_by_prior();
    prior::layout::prune(s);
    let cal = s.calibration();
    let likely_oom: Vec<bool> = (0..s.cands.len()).map(|i| s.likely_oom(&cal, i)).collect();
    let (mut pending, last): (Vec<usize>, Vec<usize>) = order
        .iter()
        .copied()
        .filter(|&i| s.state[i] == State::Pending && !s.deferred(i, &likely_oom))
        .partition(|&i| s.baseline == Some(i) || !likely_oom[i]);
    pending.extend(last);
    pending
}

impl First {
    /// The next launch of rung 1, or None when none is pending or the budget ends.
    fn next(&mut self, s: &mut Search<'_>, iters: u64) -> Option<Ask> {
        let model = self.model.as_ref()?;
        let cands = s.cands;
        let par = s.parallel();
        let pending = pending(s, &self.order);
        if pending.is_empty() {
            return None;
        }
        if par > 1 {
            let batch = first_batch(s, model, &pending, &mut self.saturated, par)?;
            s.phase = if self.saturated {
                Phase::Promising
            } else {
                Phase::Design
            };
            // The batch is chosen before the budget is checked, as a single trial is.
            let k = s.room(batch.len());
            if k == 0 {
                self.exhausted = true;
                return None;
            }
            let batch = &batch[..k];
            let cal = s.calibration();
            for &i in batch {
                s.at_launch[i] = s.calibrated(&cal, i);
                s.points_at_launch[i] = Some(cal.points);
            }
            if batch.len() > 1 {
                s.log.push(format!(
                    "batch: {} at once",
                    batch
                        .iter()
                        .map(|&i| format!("#{}", s.cands[i].id))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let len = s.screen_iters(iters);
            for &i in batch {
                s.long[i] |= len > iters;
            }
            return Some(Ask::Batch {
                list: batch.to_vec(),
                iters: len,
            });
        }
        // A layout sweep: the layout its prior (fitted so far) predicts fastest.
        if let Some(next) = prior::layout::next(s, &pending) {
            s.phase = Phase::Promising;
            return Some(launch(s, next, iters));
        }
        // Lowest memory first, while a candidate adds to what the model can tell apart.
        let widens = if self.saturated {
            None
        } else {
            let rows = s.design_rows(model);
            let rank = model.rank(&rows);
            let w = pending.iter().copied().find(|&i| {
                model.x(&cands[i]).is_none_or(|x| {
                    let mut r = rows.clone();
                    r.push(x);
                    model.rank(&r) > rank
                })
            });
            self.saturated = w.is_none();
            w
        };
        s.phase = if widens.is_some() {
            Phase::Design
        } else {
            Phase::Promising
        };
        let next = match widens {
            Some(i) => i,
            None => {
                let preds = s.prune_predicted(model);
                let pending: Vec<usize> = pending
                    .into_iter()
                    .filter(|&i| s.state[i] == State::Pending)
                    .collect();
                let &first = pending.first()?;
                // The most promising: the lowest predicted step time. (Not held to memory order:
                // finding a fast candidate early sets the bar the predictions are held to; an
                // OOM still rules out every pending candidate that dominates it.)
                s.promising(model, preds).first().map_or(first, |t| t.0)
            }
        };
        Some(launch(s, next, iters))
    }
}

/// Rung 1's launch of candidate `next`: the memory forecast it is held to, its length.
fn launch(s: &mut Search<'_>, next: usize, iters: u64) -> Ask {
    let cal = s.calibration();
    s.at_launch[next] = s.calibrated(&cal, next);
    s.points_at_launch[next] = Some(cal.points);
    let len = s.screen_iters(iters);
    s.long[next] |= len > iters;
    Ask::One {
        i: next,
        iters: len,
    }
}

/// After rung 1: its cost in the log, and what was not run is `NotRun`.
fn finish(s: &mut Search<'_>, f: &mut Flow, exhausted: bool) {
    s.note_spent("rung 1", 0.0);
    s.note_phases();
    s.phase = Phase::FollowUp;
    for i in 0..s.cands.len() {
        if s.state[i] == State::Pending {
            s.state[i] = State::Out(Verdict::NotRun);
        }
    }
    f.exhausted = exhausted;
}
