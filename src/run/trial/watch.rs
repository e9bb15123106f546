//! When a running trial stops: a pure policy over what has been seen so far (iterations, the
//! clock), so every rule is testable without a process. The loop in `mod.rs` feeds it and acts
//! on its answers.

use crate::domain::trial::{ExitInfo, FailureClass, Iteration, RunShape, StopReason};
use crate::run::steady::{self, SteadyConfig};
use std::time::{Duration, Instant};

/// Longest wait after a GPU out-of-memory line before the workload is stopped.
pub const FATAL_WAIT: Duration = Duration::from_secs(2);

/// A job (no iterations) has no first-iteration limit: a day when no deadline is set, so the
/// timer stays representable.
const JOB_WAIT: Duration = Duration::from_secs(86_400);

/// The stop rules of one trial.
#[derive(Debug, Clone)]
pub struct StopPolicy {
    pub steady: SteadyConfig,
    pub max_iters: u64,
    /// The workload prints iterations (false: a job that ends by exiting).
    pub trains: bool,
    /// Stop once the steady samples are above the sweep's bar ([`steady::Race`]).
    pub race: Option<steady::Race>,
    /// The trial's configured global batch (for the race's scaling).
    pub global_batch: Option<f64>,
    /// Hang threshold before the first iteration.
    pub first_iteration: Duration,
    /// Hang threshold once iterations flow: max(3 × median step, this).
    pub hang: Duration,
    /// The wall-clock budget's end.
    pub deadline: Option<Instant>,
    /// After a failure line with no iteration since, how long the workload may take to exit
    /// by itself before it is stopped.
    pub failure_grace: Duration,
    /// The workload's own iteration count is the budget: it ends by itself after the last
    /// iteration, and is let do so (its clean-up, its exit status) for [`Self::end_grace`].
    pub ends_itself: bool,
    /// How long after the budget's last iteration it may take to end by itself.
    pub end_grace: Duration,
}

/// Why the runner stops a trial, and whether what it measured is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stop {
    pub reason: StopReason,
    /// The steady-state measurement is complete (the trial may still count as completed).
    pub complete: bool,
}

impl Stop {
    pub fn user() -> Stop {
        Stop {
            reason: StopReason::User,
            complete: false,
        }
    }

    /// A failure ends it (a failure line and no iteration after it within the grace, or its
    /// job's own failure); classified by the failure.
    pub fn failure() -> Stop {
        Stop {
            reason: StopReason::Failure,
            complete: false,
        }
    }

    /// Records the stop in the exit information [`super::finish`] classifies.
    pub fn record(self, exit: &mut ExitInfo) {
        match self.reason {
            StopReason::CiTarget | StopReason::MaxIters | StopReason::SlowerThanLeader => {
                exit.stopped_complete = true
            }
            StopReason::MaxSeconds => {
                exit.stopped_complete = self.complete;
                exit.timeout = !self.complete;
            }
            StopReason::Hang => exit.hang = true,
            StopReason::User => exit.stopped_by_user = true,
            // Classified by its failure line, as an exit would be.
            StopReason::Exited | StopReason::Failure => {}
        }
    }
}

impl StopPolicy {
    /// The last iteration of the budget has come.
    pub fn budget_reached(&self, iters: &[Iteration]) -> bool {
        iters.last().is_some_and(|i| i.iteration >= self.max_iters)
    }

    /// After a new iteration: stop once the measurement is done (CI target or budget). At the
    /// budget, a workload that ends by itself there is not stopped: [`Self::on_clock`] stops it
    /// only when it has not ended after the end grace.
    pub fn after_iteration(&self, iters: &[Iteration]) -> Option<Stop> {
        if self.budget_reached(iters) {
            if self.ends_itself {
                return None;
            }
            return Some(Stop {
                reason: StopReason::MaxIters,
                complete: true,
            });
        }
        if steady::should_stop(iters, &self.steady) {
            return Some(Stop {
                reason: StopReason::CiTarget,
                complete: true,
            });
        }
        self.race
            .is_some_and(|r| r.lost(iters, self.steady.min_warmup, self.global_batch))
            .then_some(Stop {
                reason: StopReason::SlowerThanLeader,
                complete: true,
            })
    }

    /// How long without a new iteration is a hang.
    pub fn hang_after(&self, seen_iteration: bool, median_ms: f64) -> Duration {
        match (seen_iteration, self.trains) {
            (false, false) => JOB_WAIT,
            (false, true) => self.first_iteration,
            (true, _) => {
                Duration::from_secs_f64((3.0 * median_ms / 1000.0).max(0.0)).max(self.hang)
            }
        }
    }

    /// When the loop must wake to look at the clock (`failed_at`: when a failure line of
    /// `class` came with no iteration since; `ending`: when the budget's last iteration came to
    /// a workload that ends by itself — no hang clock runs then, the end grace does).
    pub fn wake_at(
        &self,
        last_progress: Instant,
        seen_iteration: bool,
        median_ms: f64,
        failed_at: Option<Instant>,
        class: Option<FailureClass>,
        ending: Option<Instant>,
    ) -> Instant {
        let hang_at = match ending {
            Some(e) => e + self.end_grace,
            None => last_progress + self.hang_after(seen_iteration, median_ms),
        };
        let at = self.deadline.map_or(hang_at, |d| d.min(hang_at));
        failed_at.map_or(at, |f| at.min(f + self.failure_wait(median_ms, class)))
    }

    /// How long after a failure line of `class` the workload may take: the grace, or two
    /// median steps when the steps are longer (a slow step is not yet an ended training) —
    /// but for a GPU out-of-memory, which no training step survives, at most [`FATAL_WAIT`]:
    /// long enough for the other ranks' lines, short of their slow teardown.
    pub fn failure_wait(&self, median_ms: f64, class: Option<FailureClass>) -> Duration {
        if class == Some(FailureClass::Oom) {
            return self.failure_grace.min(FATAL_WAIT);
        }
        self.failure_grace
            .max(Duration::from_secs_f64((2.0 * median_ms / 1000.0).max(0.0)))
    }

    /// A failure line `failed_at` (of `class`) with no iteration since: stop once the wait has
    /// passed.
    pub fn after_failure(
        &self,
        now: Instant,
        failed_at: Option<Instant>,
        median_ms: f64,
        class: Option<FailureClass>,
    ) -> Option<Stop> {
        failed_at
            .is_some_and(|f| now >= f + self.failure_wait(median_ms, class))
            .then_some(Stop::failure())
    }

    /// At a wake-up: stop at the deadline (complete when enough steady samples exist), at the
    /// end of the end grace (`ending`: the budget's last iteration came; the measurement is
    /// complete) or for a hang; `None` when it was an early wake.
    pub fn on_clock(
        &self,
        now: Instant,
        last_progress: Instant,
        iters: &[Iteration],
        shape: Option<RunShape>,
        median_ms: f64,
        ending: Option<Instant>,
    ) -> Option<Stop> {
        if self.deadline.is_some_and(|d| now >= d) {
            let enough = steady::stats(iters, shape, &self.steady)
                .is_some_and(|s| s.n >= self.steady.min_samples);
            return Some(Stop {
                reason: StopReason::MaxSeconds,
                complete: enough,
            });
        }
        if let Some(e) = ending {
            return (now >= e + self.end_grace).then_some(Stop {
                reason: StopReason::MaxIters,
                complete: true,
            });
        }
        let hang_at = last_progress + self.hang_after(!iters.is_empty(), median_ms);
        (now >= hang_at).then_some(Stop {
            reason: StopReason::Hang,
            complete: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(deadline: Option<Instant>, trains: bool) -> StopPolicy {
        StopPolicy {
            steady: SteadyConfig {
                ci_target: 0.01,
                max_iters: Some(50),
                ..SteadyConfig::default()
            },
            max_iters: 50,
            trains,
            race: None,
            global_batch: None,
            first_iteration: Duration::from_secs(600),
            hang: Duration::from_secs(120),
            deadline,
            failure_grace: Duration::from_secs(5),
            ends_itself: false,
            end_grace: Duration::from_secs(60),
        }
    }

    fn it(i: u64, ms: f64) -> Iteration {
        Iteration {
            iteration: i,
            elapsed_ms: Some(ms),
            ..Iteration::default()
        }
    }

    #[test]
    fn steady_iterations_stop_at_the_ci_target_and_the_budget_stops_the_rest() {
        let p = policy(None, true);
        let flat: Vec<Iteration> = (1..=30).map(|i| it(i, 100.0)).collect();
        assert_eq!(
            p.after_iteration(&flat),
            Some(Stop {
                reason: StopReason::CiTarget,
                complete: true
            })
        );
        assert_eq!(p.after_iteration(&flat[..3]), None, "still warming up");
        let noisy: Vec<Iteration> = (1..=50)
            .map(|i| it(i, if i % 2 == 0 { 50.0 } else { 150.0 }))
            .collect();
        assert_eq!(
            p.after_iteration(&noisy).map(|s| s.reason),
            Some(StopReason::MaxIters)
        );
    }

    #[test]
    fn a_trial_above_its_race_bar_stops_as_slower_than_the_leader() {
        let mut p = policy(None, true);
        p.race = Some(steady::Race {
            above_ms: 100.0,
            min_samples: 6,
            per_samples: Some(16.0),
        });
        // 200 ms ± 10 %: far from the 1 % CI target, and clearly above 100 ms.
        let noisy: Vec<Iteration> = (1..=12)
            .map(|i| it(i, if i % 2 == 0 { 180.0 } else { 220.0 }))
            .collect();
        assert_eq!(p.after_iteration(&noisy[..7]), None, "5 steady samples");
        assert_eq!(
            p.after_iteration(&noisy[..12]),
            Some(Stop {
                reason: StopReason::SlowerThanLeader,
                complete: true
            })
        );
        // Configured for 32 samples a step, the same steps are 100 ms per 16: no stop.
        p.global_batch = Some(32.0);
        assert_eq!(p.after_iteration(&noisy[..12]), None);
        // The CI target comes first when both hold.
        p.global_batch = None;
        let flat: Vec<Iteration> = (1..=12).map(|i| it(i, 300.0)).collect();
        assert_eq!(
            p.after_iteration(&flat).map(|s| s.reason),
            Some(StopReason::CiTarget)
        );
        let mut e = ExitInfo::default();
        p.after_iteration(&noisy).unwrap().record(&mut e);
        assert!(e.stopped_complete, "a lost race is a complete measurement");
    }

    #[test]
    fn a_workload_that_ends_at_the_budget_is_let_end_by_itself() {
        let mut p = policy(None, true);
        let all: Vec<Iteration> = (1..=50)
            .map(|i| it(i, if i % 2 == 0 { 50.0 } else { 150.0 }))
            .collect();
        // Its own train_iters is the budget: no stop at the last iteration.
        p.ends_itself = true;
        assert!(p.budget_reached(&all));
        assert_eq!(p.after_iteration(&all), None);
        // The loop wakes at the end of the grace, not at a hang limit; before it, nothing.
        let t0 = Instant::now();
        let ending = Some(t0);
        assert_eq!(
            p.wake_at(t0, true, 100.0, None, None, ending),
            t0 + Duration::from_secs(60)
        );
        let later = t0 + Duration::from_secs(59);
        assert_eq!(p.on_clock(later, t0, &all, None, 100.0, ending), None);
        // Not ended by then: stopped, the measurement complete.
        let s = p
            .on_clock(t0 + Duration::from_secs(60), t0, &all, None, 100.0, ending)
            .unwrap();
        assert_eq!((s.reason, s.complete), (StopReason::MaxIters, true));
        // An early stop (the CI target) is at once whatever the budget.
        let flat: Vec<Iteration> = (1..=30).map(|i| it(i, 100.0)).collect();
        assert_eq!(
            p.after_iteration(&flat).map(|s| s.reason),
            Some(StopReason::CiTarget)
        );
        // A workload run past the budget (a train_iters of the user's) is stopped at it.
        p.ends_itself = false;
        assert_eq!(
            p.after_iteration(&all).map(|s| s.reason),
            Some(StopReason::MaxIters)
        );
    }

    #[test]
    fn hang_limits_scale_with_the_step_and_jobs_wait() {
        let p = policy(None, true);
        assert_eq!(p.hang_after(false, 0.0), Duration::from_secs(600));
        assert_eq!(p.hang_after(true, 100.0), Duration::from_secs(120));
        assert_eq!(p.hang_after(true, 100_000.0), Duration::from_secs(300));
        assert_eq!(policy(None, false).hang_after(false, 0.0), JOB_WAIT);
    }

    #[test]
    fn the_clock_stops_at_the_deadline_or_a_hang() {
        let t0 = Instant::now();
        let p = policy(Some(t0 + Duration::from_secs(10)), true);
        assert_eq!(
            p.wake_at(t0, false, 0.0, None, None, None),
            t0 + Duration::from_secs(10)
        );
        assert_eq!(
            p.on_clock(t0 + Duration::from_secs(5), t0, &[], None, 0.0, None),
            None
        );
        let s = p
            .on_clock(t0 + Duration::from_secs(10), t0, &[], None, 0.0, None)
            .unwrap();
        assert_eq!((s.reason, s.complete), (StopReason::MaxSeconds, false));
        let p = policy(None, true);
        let s = p
            .on_clock(t0 + Duration::from_secs(601), t0, &[], None, 0.0, None)
            .unwrap();
        assert_eq!(s.reason, StopReason::Hang);
    }

    #[test]
    fn stops_are_recorded_for_the_classification() {
        let mut e = ExitInfo::default();
        Stop {
            reason: StopReason::MaxSeconds,
            complete: false,
        }
        .record(&mut e);
        assert!(e.timeout && !e.stopped_complete);
        let mut e = ExitInfo::default();
        Stop::user().record(&mut e);
        assert!(e.stopped_by_user);
    }

    #[test]
    fn a_failure_line_ends_the_trial_after_the_grace_or_two_slow_steps() {
        let p = policy(None, true);
        let t0 = Instant::now();
        let tb = Some(FailureClass::Traceback);
        assert_eq!(p.after_failure(t0, None, 0.0, tb), None);
        assert_eq!(
            p.after_failure(t0 + Duration::from_secs(4), Some(t0), 100.0, tb),
            None
        );
        let stop = p
            .after_failure(t0 + Duration::from_secs(5), Some(t0), 100.0, tb)
            .unwrap();
        assert_eq!(stop.reason, StopReason::Failure);
        assert!(!stop.complete);
        // 8 s steps: a slow step is not an ended training; two of them are waited for.
        assert_eq!(
            p.after_failure(t0 + Duration::from_secs(10), Some(t0), 8000.0, tb),
            None
        );
        assert!(
            p.after_failure(t0 + Duration::from_secs(16), Some(t0), 8000.0, tb)
                .is_some()
        );
        // The loop wakes for it.
        assert_eq!(
            p.wake_at(t0, true, 100.0, Some(t0), tb, None),
            t0 + Duration::from_secs(5)
        );
        // A GPU out of memory ends the training whatever the step: 2 s, for the other ranks'
        // lines, then it is stopped.
        let oom = Some(FailureClass::Oom);
        assert!(
            p.after_failure(t0 + Duration::from_secs(2), Some(t0), 8000.0, oom)
                .is_some()
        );
        assert_eq!(
            p.wake_at(t0, true, 8000.0, Some(t0), oom, None),
            t0 + FATAL_WAIT
        );
    }
}
