//! The search as a thin loop over steps. Each phase (rung 1, the long launches, the tie-break,
//! the halving rungs, the confirmation) is a [`Step`]: given what its last request gave, it
//! updates the search's state and says what to run next, or that it is done. Only the driver,
//! [`drive`], talks to the [`Runner`]; a phase never launches anything itself.

use super::{Flow, Runner, Search};

/// What a phase asks the driver to run.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ask {
    /// One trial of candidate `i` ([`Search::trial`]): refused when the budget or a stop
    /// forbids it.
    One { i: usize, iters: u64 },
    /// Trials launched at once ([`Search::batch`]); the phase has checked the room.
    Batch { list: Vec<usize>, iters: u64 },
    /// A trial for each, in order, one at a time or in batches ([`Search::trials`]).
    Each { list: Vec<usize>, iters: u64 },
}

/// What came of an [`Ask`]: the candidates launched, in order, and whether all of it ran (not:
/// the budget or a stop ended it early).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Seen {
    pub launched: Vec<usize>,
    pub complete: bool,
}

/// One phase of the search: `seen` is what its previous [`Ask`] gave (None on entry); the
/// answer is the next request, or None when the phase is over.
pub(super) trait Step {
    fn step(&mut self, s: &mut Search<'_>, f: &mut Flow, seen: Option<Seen>) -> Option<Ask>;
}

/// After a phase's launches: the budget's verdict, what they cost (in the log, under `stage`),
/// and the contenders that are still measured.
pub(super) fn settle(s: &mut Search<'_>, f: &mut Flow, seen: &Seen, stage: &str, since: f64) {
    f.exhausted |= !seen.complete;
    s.note_spent(stage, since);
    f.contenders
        .retain(|&i| s.state[i] == super::State::Measured);
}

/// Runs a phase to its end: each request is launched through the runner and what came of it is
/// handed back.
pub(super) fn drive(
    s: &mut Search<'_>,
    runner: &mut dyn Runner,
    f: &mut Flow,
    phase: &mut dyn Step,
) {
    let mut seen = None;
    while let Some(ask) = phase.step(s, f, seen.take()) {
        seen = Some(s.launch(runner, ask));
    }
}

impl Search<'_> {
    /// Runs what a phase asked.
    fn launch(&mut self, runner: &mut dyn Runner, ask: Ask) -> Seen {
        match ask {
            Ask::One { i, iters } => {
                let complete = self.trial(runner, i, iters);
                Seen {
                    launched: if complete { vec![i] } else { Vec::new() },
                    complete,
                }
            }
            Ask::Batch { list, iters } => {
                self.batch(runner, &list, iters);
                Seen {
                    launched: list,
                    complete: true,
                }
            }
            Ask::Each { list, iters } => {
                let (launched, complete) = self.trials(runner, &list, iters);
                Seen { launched, complete }
            }
        }
    }
}
