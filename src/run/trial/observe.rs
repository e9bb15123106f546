//! What a running trial has seen so far: its log lines through the parser and the failure
//! detector (iterations, memory reports, failure lines), its telemetry snapshots, and the
//! writes not stored yet. The trial's loop feeds it; the stop policy and the summary read it.

use crate::domain::trial::{Iteration, LogEvent, MemoryReport, RunShape, Summary};
use crate::run::failure::FailureDetector;
use crate::run::launch::batch::unix_ms;
use crate::run::logparse::LogParser;
use crate::run::steady::SteadyConfig;
use crate::store::Store;
use crate::telemetry::sampler::Snapshot;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// When the running trial may try its next batch of writes: at once, or after a miss (the
/// database was held by another process) a few seconds later.
#[derive(Default)]
struct Flush {
    not_before: Option<Instant>,
}

impl Flush {
    /// How long to leave the database alone after a write it refused.
    const BACKOFF: Duration = Duration::from_secs(5);

    fn due(&self) -> bool {
        self.not_before.is_none_or(|t| Instant::now() >= t)
    }

    fn done<T>(&mut self, r: Result<T, crate::store::StoreError>) {
        self.not_before = r.is_err().then(|| Instant::now() + Self::BACKOFF);
    }
}

/// A trial's observations.
pub struct Observed {
    pub parser: LogParser,
    pub detector: FailureDetector,
    pub iters: Vec<Iteration>,
    pub memory: Vec<MemoryReport>,
    /// When each iteration's line arrived (Unix ms), parallel to `iters`: the steady span the
    /// telemetry summary covers.
    pub iter_ms: Vec<u64>,
    /// When the first iteration was parsed (monotonic, and Unix ms as the snapshots are
    /// stamped): the start-up ends there.
    pub first_iteration: Option<(Instant, u64)>,
    /// When a failure line came with no iteration after it.
    pub failed_at: Option<Instant>,
    /// Median steady step (ms) so far: the hang threshold scales with it.
    pub median_ms: f64,
    pub snaps: Vec<Snapshot>,
    /// Processes the sampler saw in the trial's tree.
    pub pids: BTreeSet<u32>,
    /// What is not stored yet: written in batches while the trial runs, with no wait for a
    /// database another process holds (a miss waits for the next batch), and all at the end.
    pub pending_iters: Vec<Iteration>,
    pub pending_memory: Vec<MemoryReport>,
    pub pending_snaps: Vec<Snapshot>,
    flush: Flush,
    shape: Option<RunShape>,
}

/// What a log line brought.
pub struct LineSeen {
    /// A new iteration, with the steady figures so far.
    pub iteration: Option<(Iteration, Summary)>,
}

impl Observed {
    pub fn new(shape: Option<RunShape>) -> Observed {
        Observed {
            parser: LogParser::with_shape(shape),
            detector: FailureDetector::new(),
            iters: Vec::new(),
            memory: Vec::new(),
            iter_ms: Vec::new(),
            first_iteration: None,
            failed_at: None,
            median_ms: 0.0,
            snaps: Vec::new(),
            pids: BTreeSet::new(),
            pending_iters: Vec::new(),
            pending_memory: Vec::new(),
            pending_snaps: Vec::new(),
            flush: Flush::default(),
            shape,
        }
    }

    /// A line of the trial's output: failure lines, iterations and memory reports, the writes
    /// due. The last iteration it brought, if any, with the figures so far.
    pub fn line(
        &mut self,
        line: &str,
        cfg: &SteadyConfig,
        store: &Store,
        trial_id: i64,
    ) -> LineSeen {
        self.detector.feed(line);
        if self.failed_at.is_none() && self.detector.failure_pending() {
            self.failed_at = Some(Instant::now());
        }
        let mut seen = LineSeen { iteration: None };
        for ev in self.parser.feed(line) {
            match ev {
                LogEvent::Iteration(it) => {
                    let now = Instant::now();
                    self.failed_at = None; // survived: training goes on
                    let ms = unix_ms();
                    self.first_iteration.get_or_insert((now, ms));
                    self.iter_ms.push(ms);
                    self.iters.push(it.clone());
                    self.pending_iters.push(it.clone());
                    if self.pending_iters.len() >= 8 && self.flush.due() {
                        let r = store.with_patience(Duration::ZERO, || {
                            store.add_iterations(trial_id, &self.pending_iters)
                        });
                        if r.is_ok() {
                            self.pending_iters.clear();
                        }
                        self.flush.done(r);
                    }
                    let summary = Summary::from_parts(&self.iters, &self.memory, self.shape, cfg);
                    self.median_ms = summary
                        .median_step_ms
                        .or(it.elapsed_ms)
                        .unwrap_or(self.median_ms);
                    seen.iteration = Some((it, summary));
                }
                LogEvent::Memory(m) => {
                    self.pending_memory.push(m.clone());
                    if self.flush.due() {
                        let r = store.with_patience(Duration::ZERO, || {
                            self.pending_memory
                                .iter()
                                .try_for_each(|m| store.add_memory_report(trial_id, m).map(|_| ()))
                        });
                        if r.is_ok() {
                            self.pending_memory.clear();
                        }
                        self.flush.done(r);
                    }
                    self.memory.push(m);
                }
                LogEvent::Theoretical(_) => {}
            }
        }
        seen
    }

    /// A line read after the trial was stopped (what the pipes and files still held): its
    /// failure lines and iterations count, nothing is stored until the end.
    pub fn late_line(&mut self, line: &str) {
        self.detector.feed(line);
        for ev in self.parser.feed(line) {
            if let LogEvent::Iteration(it) = ev {
                self.iter_ms.push(unix_ms());
                self.iters.push(it.clone());
                self.pending_iters.push(it);
            }
        }
    }

    /// A telemetry snapshot: kept, its trial processes noted, the writes due.
    pub fn snapshot(&mut self, snap: &Snapshot, store: &Store, trial_id: i64) {
        if let Some(g) = &snap.host.group {
            self.pids.extend(g.pids.iter().copied());
        }
        self.snaps.push(snap.clone());
        self.pending_snaps.push(snap.clone());
        if self.pending_snaps.len() >= 10 && self.flush.due() {
            let r = store.with_patience(Duration::ZERO, || {
                store.add_samples(trial_id, &self.pending_snaps)
            });
            if r.is_ok() {
                self.pending_snaps.clear();
            }
            self.flush.done(r);
        }
    }

    /// The Unix-ms span of the steady iterations: from the end of the last warm-up iteration
    /// (the first steady one starts there) to the end of the last. None without steady
    /// iterations.
    pub fn steady_span(&self, warmup: usize, n: usize) -> Option<(u64, u64)> {
        steady_span(&self.iter_ms, warmup, n)
    }

    /// First to last iteration (Unix ms).
    pub fn training_span(&self) -> Option<(u64, u64)> {
        self.iter_ms
            .first()
            .zip(self.iter_ms.last())
            .map(|(a, b)| (*a, *b))
    }
}

/// The Unix-ms span of the steady iterations: `arrived` holds when each iteration's line
/// arrived.
fn steady_span(arrived: &[u64], warmup: usize, n: usize) -> Option<(u64, u64)> {
    if n == 0 || arrived.is_empty() {
        return None;
    }
    let from = match warmup {
        0 => arrived[0],
        w => *arrived.get(w - 1)?,
    };
    Some((from, *arrived.last()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_steady_span_starts_where_the_last_warm_up_iteration_ended() {
        let arrived = [100, 200, 300, 400, 500];
        assert_eq!(super::steady_span(&arrived, 2, 3), Some((200, 500)));
        assert_eq!(super::steady_span(&arrived, 0, 5), Some((100, 500)));
        assert_eq!(super::steady_span(&arrived, 5, 0), None);
        assert_eq!(super::steady_span(&[], 0, 0), None);
    }
}
