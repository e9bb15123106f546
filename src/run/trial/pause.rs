//! Time the runner itself was not running: SIGSTOP and SIGCONT (Ctrl-Z then `fg`), a frozen
//! cgroup, a suspended virtual machine. No clock tells: CLOCK_MONOTONIC advances while a process
//! is stopped, and CLOCK_BOOTTIME differs from it only across a suspend of the whole system. So
//! the trial's loop runs at least every [`TICK`], and a much longer gap between two of its runs
//! is a pause. The workload may well have printed all along (its lines waited in the pipe): the
//! pause is not its silence, and the stop rules' clocks move on by it.

use std::time::{Duration, Instant};

/// The trial loop's longest sleep: it runs at least this often.
pub const TICK: Duration = Duration::from_millis(250);

/// How much longer than [`TICK`] a gap must be to count as a pause: more than a loaded machine
/// delays a wake-up. A slow step of the loop itself (a store write that waited) may count too;
/// that only gives the workload more time before it is called hung.
const SLACK: Duration = Duration::from_secs(1);

/// When the trial loop last ran.
#[derive(Debug, Clone, Copy)]
pub struct Pauses {
    last_run: Instant,
}

impl Pauses {
    pub fn new(now: Instant) -> Pauses {
        Pauses { last_run: now }
    }

    /// The loop runs at `now`: how long the runner was stopped since it last ran, if it was.
    /// The gap less one tick: the loop may have slept that long by itself.
    pub fn check(&mut self, now: Instant) -> Option<Duration> {
        let gap = now.saturating_duration_since(self.last_run);
        self.last_run = now;
        (gap > TICK + SLACK).then(|| gap - TICK)
    }
}

/// The start of a silence (the last progress, a failure line, the budget's last iteration)
/// moved on by `pause`, never past `now`: a line read just after the pause restarted it
/// already.
pub fn moved(at: Instant, pause: Duration, now: Instant) -> Instant {
    (at + pause).min(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_much_longer_than_a_tick_is_a_pause_of_the_gap_less_a_tick() {
        let t0 = Instant::now();
        let mut p = Pauses::new(t0);
        assert_eq!(p.check(t0 + TICK), None);
        // A late wake-up on a loaded machine is not a pause.
        let t1 = t0 + TICK + TICK + SLACK;
        assert_eq!(p.check(t1), None);
        let t2 = t1 + Duration::from_secs(20);
        assert_eq!(p.check(t2), Some(Duration::from_secs(20) - TICK));
        // Measured from the last run: the next one is on time.
        assert_eq!(p.check(t2 + TICK), None);
    }

    #[test]
    fn a_silence_moves_on_by_the_pause_but_never_past_now() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(30);
        assert_eq!(
            moved(t0, Duration::from_secs(20), now),
            t0 + Duration::from_secs(20)
        );
        assert_eq!(moved(now, Duration::from_secs(20), now), now);
    }
}
