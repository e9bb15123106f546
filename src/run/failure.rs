//! Why a trial failed, from its log lines and how its process ended.
//!
//! [`FailureDetector`] watches every line (ANSI colours, torchrun `[defaultN]:` / `[rankN]:`
//! tags and loguru headers are looked through) and remembers the first line of each cause:
//!
//! | cause | lines |
//! |---|---|
//! | GPU OOM | `HIP out of memory`, `CUDA out of memory`, `…OutOfMemoryError`, `hipErrorOutOfMemory`, `HIP error: out of memory`, `*BLAS_STATUS_ALLOC_FAILED`, `out of memory` in an NCCL/RCCL/DeepEP message |
//! | host OOM | a bare `Killed` (shell), `PID Killed cmd` (job control), kernel `Out of memory: Killed process` / `oom-kill`, Slurm `oom_kill event`, torchrun `exitcode: -9` / `Signals.SIGKILL` |
//! | NCCL | `NCCL error` / `RCCL error`, `nccl*Error` result names, the ProcessGroupNCCL watchdog messages, `DistBackendError`, `DeepEP error`/`timeout` |
//! | config | a Python traceback ending in `AssertionError` / `ValueError` that began before the first iteration |
//! | traceback | any other Python traceback; the cause line is its last exception line |
//!
//! Python tracebacks are followed per output stream (the torchrun tag), so interleaved ranks do
//! not mix. A chained traceback is reported by its final exception when that is a new failure
//! (`During handling of the above exception …`), and by the cause a wrapper was raised from
//! (`The above exception was the direct cause …`: Primus' `RuntimeError: Training execution
//! failed: …` around the `ModuleNotFoundError` that stopped it). The line kept is the message
//! as the user reads it, without colours, rank tags or the logger's header. Interrupt noise (`KeyboardInterrupt`, `SystemExit`, torchrun's
//! `SignalException`) and torchrun's `ChildFailedError` wrapper are not causes. Argument dumps
//! (`  name ...... value`) never match.
//!
//! [`FailureDetector::finish`] combines that with [`ExitInfo`]: priority
//! Oom > HostOom > Nccl > ConfigAssertion > Traceback > NonZeroExit; causes seen after the last
//! iteration line are preferred over earlier (survived) ones.

use super::logparse::{iteration_number, strip_ansi};
use crate::domain::trial::{ExitInfo, Failure, FailureClass};
use regex::Regex;
use std::sync::LazyLock;

/// Line-borne causes, in priority order (index = priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Oom = 0,
    HostOom = 1,
    Nccl = 2,
    Config = 3,
    Traceback = 4,
}

const CAUSES: [Cause; 5] = [
    Cause::Oom,
    Cause::HostOom,
    Cause::Nccl,
    Cause::Config,
    Cause::Traceback,
];

impl Cause {
    fn class(self) -> FailureClass {
        match self {
            Cause::Oom => FailureClass::Oom,
            Cause::HostOom => FailureClass::HostOom,
            Cause::Nccl => FailureClass::Nccl,
            Cause::Config => FailureClass::ConfigAssertion,
            Cause::Traceback => FailureClass::Traceback,
        }
    }
}

/// The first line seen of each cause.
#[derive(Debug, Clone, Default)]
struct Slots([Option<String>; 5]);

impl Slots {
    fn record(&mut self, cause: Cause, line: &str) {
        let slot = &mut self.0[cause as usize];
        if slot.is_none() {
            *slot = Some(line.to_string());
        }
    }

    /// The highest-priority cause recorded, with its first line.
    fn best(&self) -> Option<Failure> {
        CAUSES.iter().find_map(|&c| {
            self.0[c as usize].as_ref().map(|line| Failure {
                class: c.class(),
                line: Some(line.clone()),
            })
        })
    }
}

/// What an exception type means for classification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExcKind {
    /// Interrupts and launcher wrappers: not a cause.
    Noise,
    /// `AssertionError` / `ValueError`.
    Validation,
    Other,
}

/// How a chained traceback links to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// `The above exception was the direct cause of the following exception:` (`raise X from
    /// e`): the later one wraps the earlier, which is the cause (Primus' `RuntimeError:
    /// Training execution failed: …` around a `ModuleNotFoundError`).
    Cause,
    /// `During handling of the above exception, another exception occurred:`: the later one
    /// is a new failure.
    During,
}

/// An exception line (without the log's prefixes) and its kind.
type Exception = (String, ExcKind);

#[derive(Debug, Clone)]
enum TbState {
    Idle,
    /// Inside a traceback (header seen, no exception line yet); `root`: the exception a
    /// wrapper in this traceback was raised from.
    Open {
        header: String,
        iters_at_start: u64,
        root: Option<Exception>,
    },
    /// The exception line was seen (`exception`: the one that stands for the chain so far); a
    /// chained traceback may still follow, linked by `link`.
    Ended {
        exception: Exception,
        iters_at_start: u64,
        link: Option<Link>,
    },
}

/// Traceback state of one output stream (lines with the same torchrun tag).
#[derive(Debug, Clone)]
struct Stream {
    tag: String,
    state: TbState,
}

/// Watches a trial's log lines for failure causes; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct FailureDetector {
    /// Iteration lines seen (Megatron/Primus or TorchTitan).
    iterations: u64,
    /// [`mark_stop`](Self::mark_stop) was called: later lines are shutdown noise.
    stopped: bool,
    /// First line of each cause over the whole log.
    first: Slots,
    /// First line of each cause since the last iteration line.
    recent: Slots,
    /// First crash-looking line (segfault, GPU memory access fault, torchrun child failure):
    /// the line given with `NonZeroExit`.
    crash: Option<String>,
    streams: Vec<Stream>,
}

impl FailureDetector {
    pub fn new() -> Self {
        Self::default()
    }

    /// Iteration lines seen so far.
    pub fn iterations(&self) -> u64 {
        self.iterations
    }

    /// Looks at one log line (a trailing newline and `\r` overwrites are handled).
    pub fn feed(&mut self, line: &str) {
        if self.stopped {
            return;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        let line = match line.rfind('\r') {
            Some(p) => &line[p + 1..],
            None => line,
        };
        let clean = strip_ansi(line);
        let clean: &str = &clean;
        let (tag, rest) = split_tags(clean);
        let body = strip_loguru_header(rest);

        self.traceback_step(tag, body);

        if iteration_number(body).is_some() {
            self.on_iteration();
            return;
        }
        if is_arg_dump(body) {
            return;
        }
        // The line as the user reads it: without colours, the launcher's rank tags and the
        // logger's time/rank/level/file header.
        let shown = body.trim_end();
        if let Some(cause) = line_cause(body) {
            self.record(cause, shown);
        } else if self.crash.is_none() && CRASH.is_match(body) {
            self.crash = Some(shown.to_string());
        }
    }

    /// Whether a failure was seen since the last iteration line (what would classify the trial
    /// if it ended now), tracebacks still open included. Cheap: asked after every line.
    pub fn failure_pending(&self) -> bool {
        !self.stopped
            && (self.recent.0.iter().any(Option::is_some)
                || self.streams.iter().any(|s| match &s.state {
                    TbState::Idle => false,
                    TbState::Open { .. } => true,
                    TbState::Ended { exception, .. } => exception.1 != ExcKind::Noise,
                }))
    }

    /// The class of the failure lines since the last iteration, when there are any.
    pub fn pending_class(&self) -> Option<FailureClass> {
        if !self.failure_pending() {
            return None;
        }
        self.slots_with_pending().1.best().map(|f| f.class)
    }

    /// The runner is about to stop the process (user request, hang, time limit, measurement
    /// complete): lines fed from now on are shutdown noise and no longer count.
    pub fn mark_stop(&mut self) {
        self.commit_ended();
        for s in &mut self.streams {
            if matches!(s.state, TbState::Open { .. }) {
                s.state = TbState::Idle;
            }
        }
        self.stopped = true;
    }

    /// The failure, if the trial failed. `iterations_seen` is the runner's own count of
    /// iteration events (the detector also counts the iteration lines it was fed).
    ///
    /// * Stopped by the runner as complete: no failure, whatever the shutdown printed.
    /// * Stopped by the user, or for a hang or the time limit: a failure line seen before the
    ///   stop wins; otherwise `KilledByUser` / `Timeout` / `Hang`.
    /// * Exit 0: only a cause printed after the last iteration line counts (a crash hidden by a
    ///   `| tee` pipeline); a cause followed by more iterations was survived.
    /// * Any other exit: the line-borne cause (preferring those after the last iteration), else
    ///   `HostOom` for SIGKILL / status 137, else `NonZeroExit` with the first crash-looking line.
    pub fn finish(&self, exit: &ExitInfo, iterations_seen: u64) -> Option<Failure> {
        if exit.stopped_complete {
            return None;
        }
        let (first, recent) = self.slots_with_pending();
        let from_lines = recent.best().or_else(|| first.best());
        if exit.stopped_by_user || exit.timeout || exit.hang {
            let class = if exit.stopped_by_user {
                FailureClass::KilledByUser
            } else if exit.timeout {
                FailureClass::Timeout
            } else {
                FailureClass::Hang
            };
            return from_lines.or(Some(Failure { class, line: None }));
        }
        match (exit.code, exit.signal) {
            (Some(0), None) => {
                if self.iterations > 0 {
                    recent.best()
                } else if iterations_seen > 0 {
                    // The iteration lines were not fed here: the failures cannot be placed
                    // relative to them, so trust the clean exit.
                    None
                } else {
                    first.best()
                }
            }
            (None, None) => from_lines,
            (code, signal) => from_lines.or_else(|| {
                if signal == Some(libc::SIGKILL) || code == Some(137) {
                    Some(Failure {
                        class: FailureClass::HostOom,
                        line: None,
                    })
                } else {
                    Some(Failure {
                        class: FailureClass::NonZeroExit,
                        line: self.crash.clone(),
                    })
                }
            }),
        }
    }

    fn record(&mut self, cause: Cause, line: &str) {
        self.first.record(cause, line);
        self.recent.record(cause, line);
    }

    fn on_iteration(&mut self) {
        self.commit_ended();
        self.iterations += 1;
        self.recent = Slots::default();
    }

    /// Records every finished traceback (no chain can follow once something else happened).
    fn commit_ended(&mut self) {
        let mut done = Vec::new();
        for s in &mut self.streams {
            if let TbState::Ended { .. } = s.state {
                let state = std::mem::replace(&mut s.state, TbState::Idle);
                if let Some(c) = state_cause(&state) {
                    done.push(c);
                }
            }
        }
        for (cause, line) in done {
            self.record(cause, &line);
        }
    }

    /// Copies of the slots with the tracebacks still in progress counted.
    fn slots_with_pending(&self) -> (Slots, Slots) {
        let mut first = self.first.clone();
        let mut recent = self.recent.clone();
        for s in &self.streams {
            if let Some((cause, line)) = state_cause(&s.state) {
                first.record(cause, &line);
                recent.record(cause, &line);
            }
        }
        (first, recent)
    }

    /// Advances the traceback state machine of the line's stream.
    fn traceback_step(&mut self, tag: &str, body: &str) {
        let idx = match self.streams.iter().position(|s| s.tag == tag) {
            Some(i) => i,
            None => {
                let trimmed = body.trim_end();
                if !trimmed.ends_with(TB_HEADER) {
                    return; // nothing to follow on a stream never seen
                }
                self.streams.push(Stream {
                    tag: tag.to_string(),
                    state: TbState::Idle,
                });
                self.streams.len() - 1
            }
        };
        let iterations = self.iterations;
        let state = std::mem::replace(&mut self.streams[idx].state, TbState::Idle);
        let (next, commit) = step(state, body, iterations);
        self.streams[idx].state = next;
        if let Some((cause, line)) = commit {
            self.record(cause, &line);
        }
    }
}

/// One line of a stream's traceback state machine: the next state, and the cause of a
/// traceback that ended with it.
fn step(state: TbState, body: &str, iterations: u64) -> (TbState, Option<(Cause, String)>) {
    let shown = body.trim_end();
    let is_header = shown.ends_with(TB_HEADER);
    let open = |iters_at_start, root| TbState::Open {
        header: shown.to_string(),
        iters_at_start,
        root,
    };
    match state {
        TbState::Idle if is_header => (open(iterations, None), None),
        TbState::Idle => (TbState::Idle, None),
        TbState::Open {
            iters_at_start,
            root,
            ..
        } if is_header => (open(iters_at_start, root), None),
        TbState::Open {
            header,
            iters_at_start,
            root,
        } => match exception_kind(body) {
            Some(kind) => {
                // A wrapper raised from a cause stands for it, unless the cause was an
                // interrupt (then the wrapper is what failed).
                let exception = match root {
                    Some(r) if r.1 != ExcKind::Noise => r,
                    _ => (shown.to_string(), kind),
                };
                let ended = TbState::Ended {
                    exception,
                    iters_at_start,
                    link: None,
                };
                (ended, None)
            }
            None => {
                let same = TbState::Open {
                    header,
                    iters_at_start,
                    root,
                };
                (same, None)
            }
        },
        TbState::Ended {
            exception,
            iters_at_start,
            link,
        } => {
            if shown.trim().is_empty() || chain_link(body).is_some() {
                let link = chain_link(body).or(link);
                let same = TbState::Ended {
                    exception,
                    iters_at_start,
                    link,
                };
                return (same, None);
            }
            match link {
                // The chain goes on: a wrapper's cause is carried to its end; a new failure
                // during handling replaces what came before.
                Some(l) if is_header => {
                    let root = (l == Link::Cause).then_some(exception);
                    (open(iters_at_start, root), None)
                }
                _ => {
                    let commit = state_cause(&TbState::Ended {
                        exception,
                        iters_at_start,
                        link,
                    });
                    let next = if is_header {
                        open(iterations, None)
                    } else {
                        TbState::Idle
                    };
                    (next, commit)
                }
            }
        }
    }
}

const TB_HEADER: &str = "Traceback (most recent call last):";

/// The cause a traceback state stands for, with its line.
fn state_cause(state: &TbState) -> Option<(Cause, String)> {
    match state {
        TbState::Idle => None,
        // Cut off before its exception line (the process died mid-print).
        TbState::Open { header, .. } => Some((Cause::Traceback, header.clone())),
        TbState::Ended {
            exception: (line, kind),
            iters_at_start,
            ..
        } => match kind {
            ExcKind::Noise => None,
            ExcKind::Validation if *iters_at_start == 0 => Some((Cause::Config, line.clone())),
            _ => Some((Cause::Traceback, line.clone())),
        },
    }
}

/// The link a chained-traceback marker line names.
fn chain_link(body: &str) -> Option<Link> {
    match body.trim() {
        "During handling of the above exception, another exception occurred:" => Some(Link::During),
        "The above exception was the direct cause of the following exception:" => Some(Link::Cause),
        _ => None,
    }
}

/// The kind of exception when `body` is a traceback's exception line (`pkg.SomeError: msg`
/// or a bare `KeyboardInterrupt`, at column 0).
fn exception_kind(body: &str) -> Option<ExcKind> {
    let t = body.trim_end();
    if t.is_empty() || t.starts_with(char::is_whitespace) {
        return None;
    }
    let name = match t.find(':') {
        Some(p) => {
            if !matches!(t.as_bytes().get(p + 1), None | Some(b' ')) {
                return None;
            }
            &t[..p]
        }
        None => t,
    };
    let first = name.bytes().next()?;
    if !(first.is_ascii_alphabetic() || first == b'_')
        || !name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
    {
        return None;
    }
    let last = name.rsplit('.').next()?;
    if !last.starts_with(|c: char| c.is_ascii_uppercase())
        || !["Error", "Exception", "Interrupt", "Exit", "Failure"]
            .iter()
            .any(|s| last.ends_with(s))
    {
        return None;
    }
    Some(match last {
        "KeyboardInterrupt" | "SystemExit" | "SignalException" | "ChildFailedError" => {
            ExcKind::Noise
        }
        "AssertionError" | "ValueError" => ExcKind::Validation,
        _ => ExcKind::Other,
    })
}

/// Splits the per-line stream tags torchrun and PyTorch add (`[default3]:`, `[rank3]:`, and
/// Slurm's `srun --label` `3: `) from the rest.
fn split_tags(s: &str) -> (&str, &str) {
    let b = s.as_bytes();
    let mut pos = 0;
    // `srun -l`: digits, colon, space, only at the very start.
    let d = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if d > 0 && b.get(d) == Some(&b':') && b.get(d + 1) == Some(&b' ') {
        pos = d + 2;
    }
    loop {
        let rest = &s[pos..];
        let Some(after) = rest
            .strip_prefix("[default")
            .or_else(|| rest.strip_prefix("[rank"))
        else {
            break;
        };
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || !after[digits..].starts_with("]:") {
            break;
        }
        pos += (rest.len() - after.len()) + digits + 2;
        if s.as_bytes().get(pos) == Some(&b' ') {
            pos += 1;
        }
    }
    (&s[..pos], &s[pos..])
}

/// The message of a loguru line (`[time][rank-R/W][LEVEL]   [---file.py:N] : message`);
/// other lines unchanged.
fn strip_loguru_header(s: &str) -> &str {
    if !s.starts_with('[') {
        return s;
    }
    let mut end = s.len().min(400);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let window = &s[..end];
    match window.find("] : ") {
        Some(p) if window[..p].contains("][") => &s[p + 4..],
        _ => s,
    }
}

/// A Megatron argument dump line (`  name ........ value`) or a Primus flag table line
/// (`name.......value`).
fn is_arg_dump(body: &str) -> bool {
    let t = body.trim_start();
    let name = t
        .bytes()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-')
        .count();
    if name == 0 {
        return false;
    }
    let after = &t[name..];
    if let Some(dots) = after.strip_prefix(" .") {
        return dots.trim_start_matches('.').starts_with(' ');
    }
    after.starts_with("...")
}

static OOM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"HIP out of memory|CUDA out of memory|OutOfMemoryError|hipErrorOutOfMemory",
        r"|cudaErrorMemoryAllocation|(?:HIP|CUDA) error: out of memory",
        r"|(?:CU|HIP)BLAS_STATUS_ALLOC_FAILED",
        r"|(?i:(?:nccl|rccl|deep_?ep).*out of memory|out of memory.*(?:nccl|rccl|deep_?ep))",
    ))
    .expect("static regex")
});

static HOST_OOM: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^\s*Killed\s*$|\d\s+Killed(?:\s|$)",
        r"|Out of memory: Kill|oom-kill|invoked oom-killer|oom_kill event",
        r"|exitcode\s*:\s*-9\b|Signals\.SIGKILL|Signal 9 \(SIGKILL\)",
    ))
    .expect("static regex")
});

static NCCL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i:\b[nr]ccl error\b)",
        r"|nccl(?:InternalError|UnhandledCudaError|SystemError|InvalidUsage|RemoteError|InvalidArgument)",
        r"|Watchdog caught collective operation timeout|Timeout at NCCL work",
        r"|[Ww]atchdog thread terminated with exception",
        r"|Some NCCL operations have failed or timed out|NCCL communicator was aborted",
        r"|DistBackendError|watchdog got stuck|DeepEP (?:error|timeout)",
    ))
    .expect("static regex")
});

static CRASH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"Segmentation fault|Memory access fault by GPU|core dumped",
        r"|terminate called after throwing|illegal memory access|Fatal Python error",
        r"|HSA_STATUS_ERROR|failed \(exitcode: -?\d+\)|Signal \d+ \(SIG[A-Z]+\) received",
    ))
    .expect("static regex")
});

fn line_cause(body: &str) -> Option<Cause> {
    if OOM.is_match(body) {
        Some(Cause::Oom)
    } else if HOST_OOM.is_match(body) {
        Some(Cause::HostOom)
    } else if NCCL.is_match(body) {
        Some(Cause::Nccl)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn exit_code(code: i32) -> ExitInfo {
        ExitInfo {
            code: Some(code),
            ..ExitInfo::default()
        }
    }

    fn exit_signal(sig: i32) -> ExitInfo {
        ExitInfo {
            signal: Some(sig),
            ..ExitInfo::default()
        }
    }

    fn detect(lines: &[&str]) -> FailureDetector {
        let mut d = FailureDetector::new();
        for l in lines {
            d.feed(l);
        }
        d
    }

    fn classify(lines: &[&str], exit: ExitInfo) -> Option<Failure> {
        detect(lines).finish(&exit, 0)
    }

    fn class_and_line(lines: &[&str], exit: ExitInfo) -> (FailureClass, Option<String>) {
        let f = classify(lines, exit).expect("a failure");
        (f.class, f.line)
    }

    const ITER: &str = " [2026-11-29 23:00:16.397649] iteration        3/      30 | consumed samples:           48 | elapsed time per iteration (ms): 176.8 | throughput per GPU (TFLOP/s/GPU): 101.8 | lm loss: 9.870974E+00 |";

    fn iter_line(n: u64) -> String {
        ITER.replacen("       3/", &format!("{n:8}/"), 1)
    }

    #[test]
    fn clean_exit_without_failure_lines() {
        let lines = [
            "  error_injection_rate ............................ 0",
            "  error_injection_type ............................ transient_error",
            "  check_for_nan_in_loss_and_grad .................. True",
            ITER,
            "[rank0]:[W1129 23:00:23.566915899 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit, which can leak resources.",
        ];
        assert_eq!(classify(&lines, exit_code(0)), None);
        assert_eq!(classify(&[], exit_code(0)), None);
        assert_eq!(classify(&[], ExitInfo::default()), None);
    }

    /// A line as the failure shows it: no colours, rank tags or logger header.
    fn shown(line: &str) -> String {
        let c = strip_ansi(line);
        let (_, rest) = split_tags(&c);
        strip_loguru_header(rest).trim_end().to_string()
    }

    #[test]
    fn the_failure_line_is_the_message_without_the_log_s_prefixes() {
        let line = "[rank3]: \x1b[31m[20260822 10:11:12][rank-3/8][ERROR]    [---trainer.py:12] : HIP out of memory\x1b[0m";
        assert_eq!(shown(line), "HIP out of memory");
        assert_eq!(
            class_and_line(&[line], exit_code(1)).1.as_deref(),
            Some("HIP out of memory")
        );
    }

    #[test]
    fn oom_messages() {
        for line in [
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 191.98 GiB of which 1.02 GiB is free.",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
            "[rank3]: torch.OutOfMemoryError: CUDA out of memory.",
            "RuntimeError: HIP error: out of memory",
            "RuntimeError: CUDA error: out of memory",
            "hipErrorOutOfMemory returned from hipMalloc",
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "host-7:1234:1234 [3] NCCL WARN Cuda failure 'out of memory'",
            "RCCL: failed to allocate buffer: out of memory",
            "DeepEP buffer allocation failed: out of memory",
            "\x1b[31m[20260822 10:11:12][rank-3/8][ERROR]    [---trainer.py:12] : HIP out of memory\x1b[0m",
        ] {
            let (class, got) = class_and_line(&[line], exit_code(1));
            assert_eq!(class, FailureClass::Oom, "{line:?}");
            assert_eq!(got.as_deref(), Some(&*shown(line)), "{line:?}");
        }
    }

    #[test]
    fn oom_negatives() {
        for line in [
            "[20260822 10:11:12][rank-0/8][DEBUG]    [----args.py:12] : enable_out_of_memory_retry=True",
            "  empty_unused_memory_level ....................... 0",
            "  oom_retry_on_out_of_memory ...................... out of memory NCCL",
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "NCCL INFO Using network Socket",
            "RCCL version 2.20.5+hip6.2",
        ] {
            assert_eq!(classify(&[line], exit_code(0)), None, "{line:?}");
            assert_ne!(
                classify(&[line], exit_code(1)).map(|f| f.class),
                Some(FailureClass::Oom),
                "{line:?}"
            );
        }
    }

    #[test]
    fn oom_sequence_reports_the_first_oom_line() {
        // The shape of a real Megatron OOM: a WARNING, a list repr of the traceback, the
        // `[rank0]:` traceback, then torchrun's own traceback with ChildFailedError.
        let first = "WARNING:megatron.core.utils:CUDA out of memory. Tried to allocate 12.00 GiB.";
        let lines = [
            "training ...",
            first,
            "['Traceback (most recent call last):\\n', '  File \"pretrain_gpt.py\", line 361, in forward_step\\n', 'torch.OutOfMemoryError: CUDA out of memory.\\n']",
            "[rank0]: Traceback (most recent call last):",
            "[rank0]:   File \"/workspace/Megatron-LM/pretrain_gpt.py\", line 536, in <module>",
            "[rank0]:     pretrain(",
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB.",
            "[rank0]:[W1129 23:03:25.596105422 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit",
            "E1129 23:03:29.270000 1802 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 1) local_rank: 0 (pid: 1823) of binary: /opt/torch/.venv/bin/python3",
            "Traceback (most recent call last):",
            "  File \"<frozen runpy>\", line 198, in _run_module_as_main",
            "    raise ChildFailedError(",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
        ];
        let (class, line) = class_and_line(&lines, exit_code(1));
        assert_eq!(class, FailureClass::Oom);
        assert_eq!(line.as_deref(), Some(first));
    }

    #[test]
    fn host_oom_by_exit_status() {
        let lines = [ITER, "some output"];
        assert_eq!(
            class_and_line(&lines, exit_signal(libc::SIGKILL)),
            (FailureClass::HostOom, None)
        );
        assert_eq!(
            class_and_line(&lines, exit_code(137)),
            (FailureClass::HostOom, None)
        );
    }

    #[test]
    fn host_oom_lines() {
        for line in [
            "Killed",
            "./run.sh: line 12: 48213 Killed                  torchrun --nproc_per_node 8 pretrain_gpt.py",
            "[12345.678] Out of memory: Killed process 4242 (python3) total-vm:123456kB",
            "[12345.678] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0",
            "slurmstepd: error: Detected 1 oom_kill event in StepId=123.0. Some of the step tasks have been OOM Killed.",
            "E1129 23:03:29.270000 1802 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -9) local_rank: 0 (pid: 1823) of binary: python3",
            "  exitcode  : -9 (pid: 1823)",
        ] {
            let (class, got) = class_and_line(&[line], exit_code(1));
            assert_eq!(class, FailureClass::HostOom, "{line:?}");
            assert_eq!(got.as_deref(), Some(line));
        }
        for line in [
            "Killed process group cleanly",
            "  exitcode  : -90 (pid: 1)",
            "worker Killed by",
        ] {
            assert_ne!(
                classify(&[line], exit_code(1)).map(|f| f.class),
                Some(FailureClass::HostOom),
                "{line:?}"
            );
        }
    }

    #[test]
    fn nccl_messages() {
        for line in [
            "[rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
            "RuntimeError: NCCL Error 1: unhandled cuda error",
            "ncclInternalError: Internal check failed.",
            "Last error: ncclUnhandledCudaError: Call to CUDA function failed.",
            "[rank3]:[E1129 10:00:00.000 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.",
            "[PG ID 0 PG GUID 0(default_pg) Rank 3] Timeout at NCCL work: 12, last enqueued NCCL work: 12, last completed NCCL work: 11.",
            "[rank0]:[E1129 ProcessGroupNCCL.cpp:1423] [PG 0 Rank 0] Process group watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error",
            "[Rank 0] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
            "[rank2]:[E1129 ProcessGroupNCCL.cpp:1450] [PG ID 0 PG GUID 0 Rank 2] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.",
            "RCCL error: invalid usage",
            "DeepEP error: timeout (dispatch CPU)",
        ] {
            let (class, got) = class_and_line(&[line], exit_code(1));
            assert_eq!(class, FailureClass::Nccl, "{line:?}");
            assert_eq!(got.as_deref(), Some(&*shown(line)));
        }
        for line in [
            "[rank0]:[W1129 23:00:23.566915899 ProcessGroupNCCL.cpp:1575] Warning: WARNING: destroy_process_group() was not called before program exit",
            "  TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
            "NCCL INFO ncclCommInitRank comm 0x1234 rank 0 nranks 8 - Init COMPLETE",
            "  nccl_error_injection ............................ False",
        ] {
            assert_eq!(classify(&[line], exit_code(0)), None, "{line:?}");
            assert_eq!(
                class_and_line(&[line], exit_code(1)),
                (FailureClass::NonZeroExit, None),
                "{line:?}"
            );
        }
    }

    #[test]
    fn priorities_between_line_causes() {
        let oom = "torch.OutOfMemoryError: HIP out of memory.";
        let killed = "Killed";
        let nccl = "RuntimeError: NCCL error: unhandled system error";
        // Oom > HostOom > Nccl, whatever the order of the lines.
        assert_eq!(
            class_and_line(&[nccl, killed, oom], exit_signal(9)).0,
            FailureClass::Oom
        );
        assert_eq!(
            class_and_line(&[nccl, killed], exit_code(1)),
            (FailureClass::HostOom, Some(killed.into()))
        );
        // A GPU OOM wins over a SIGKILL exit.
        assert_eq!(
            class_and_line(&[oom], exit_signal(9)),
            (FailureClass::Oom, Some(oom.into()))
        );
        // A NCCL line beats the bare SIGKILL exit (another cause was seen).
        assert_eq!(
            class_and_line(&[nccl], exit_signal(9)).0,
            FailureClass::Nccl
        );
        // Nccl > ConfigAssertion > Traceback.
        let tb = [
            "Traceback (most recent call last):",
            "  File \"x.py\", line 1, in <module>",
            "AssertionError: DeepEP only supports float32 probs",
        ];
        let mut lines = tb.to_vec();
        lines.push(nccl);
        assert_eq!(class_and_line(&lines, exit_code(1)).0, FailureClass::Nccl);
    }

    #[test]
    fn config_assertion_before_the_first_iteration() {
        let lines = [
            "[rank0]: Traceback (most recent call last):",
            "[rank1]: Traceback (most recent call last):",
            "[rank0]:   File \"/workspace/Primus/primus/modules/trainer/megatron/utils.py\", line 88, in validate_args_on_rocm",
            "[rank1]:   File \"/workspace/Primus/primus/modules/trainer/megatron/utils.py\", line 88, in validate_args_on_rocm",
            "[rank0]:     assert args.moe_router_dtype == \"fp32\", \"DeepEP only supports float32 probs\"",
            "[rank0]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            "[rank0]: AssertionError: DeepEP only supports float32 probs",
            "[rank1]: AssertionError: DeepEP only supports float32 probs",
            "E1129 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 1) local_rank: 0 (pid: 1823) of binary: python3",
        ];
        let (class, line) = class_and_line(&lines, exit_code(1));
        assert_eq!(class, FailureClass::ConfigAssertion);
        assert_eq!(
            line.as_deref(),
            Some("AssertionError: DeepEP only supports float32 probs")
        );
        let value = [
            "[default0]:Traceback (most recent call last):",
            "[default0]:  File \"pretrain.py\", line 3, in <module>",
            "[default0]:ValueError: num_layers (61) must be divisible by pipeline_model_parallel_size (4)",
        ];
        assert_eq!(
            class_and_line(&value, exit_code(1)).0,
            FailureClass::ConfigAssertion
        );
    }

    #[test]
    fn assertion_after_iterations_is_a_traceback() {
        let it = iter_line(1);
        let lines = [
            it.as_str(),
            "Traceback (most recent call last):",
            "  File \"train.py\", line 9, in step",
            "AssertionError: loss is nan",
        ];
        let (class, line) = class_and_line(&lines, exit_code(1));
        assert_eq!(class, FailureClass::Traceback);
        assert_eq!(line.as_deref(), Some("AssertionError: loss is nan"));
    }

    #[test]
    fn traceback_cause_is_the_last_exception_line() {
        let lines = [
            "Traceback (most recent call last):",
            "  File \"a.py\", line 1, in <module>",
            "KeyError: 'hidden_size'",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            "  File \"a.py\", line 3, in <module>",
            "RuntimeError: could not build the model",
            "next output",
        ];
        assert_eq!(
            class_and_line(&lines, exit_code(1)),
            (
                FailureClass::Traceback,
                Some("RuntimeError: could not build the model".into())
            )
        );
        // The same, still pending when the log ends.
        assert_eq!(
            class_and_line(&lines[..9], exit_code(1)).1.as_deref(),
            Some("RuntimeError: could not build the model")
        );
    }

    /// Primus wraps what stopped it (`raise RuntimeError(f"Training execution failed: {e}")
    /// from e`): the cause is the exception it was raised from, shown without the rank tag.
    #[test]
    fn a_wrapper_raised_from_a_cause_is_reported_by_the_cause() {
        let lines = [
            "[rank0]: Traceback (most recent call last):",
            "[rank0]:   File \"/p/primus/core/runtime/train_runtime.py\", line 105, in run_train_module",
            "[rank0]:     import causal_conv1d",
            "[rank0]: ModuleNotFoundError: No module named 'causal_conv1d'",
            "[rank0]: ",
            "[rank0]: The above exception was the direct cause of the following exception:",
            "[rank0]: ",
            "[rank0]: Traceback (most recent call last):",
            "[rank0]:   File \"/p/primus/cli/main.py\", line 210, in main",
            "[rank0]: RuntimeError: Training execution failed: No module named 'causal_conv1d'",
            "E1204 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: 1)",
        ];
        assert_eq!(
            class_and_line(&lines, exit_code(1)),
            (
                FailureClass::Traceback,
                Some("ModuleNotFoundError: No module named 'causal_conv1d'".into())
            )
        );
        // Still pending when the log ends: the same.
        assert_eq!(
            class_and_line(&lines[..10], exit_code(1)).1.as_deref(),
            Some("ModuleNotFoundError: No module named 'causal_conv1d'")
        );
        // A wrapper of an interrupt is what failed.
        let interrupted = [
            "Traceback (most recent call last):",
            "KeyboardInterrupt",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            "RuntimeError: cleanup failed",
        ];
        assert_eq!(
            class_and_line(&interrupted, exit_code(1)).1.as_deref(),
            Some("RuntimeError: cleanup failed")
        );
    }

    #[test]
    fn loguru_traceback_with_raw_continuation_lines() {
        let lines = [
            "[20260822 10:11:12][rank-0/8][ERROR]    [----trainer.py:77] : An error has been caught in function 'run'",
            "[20260822 10:11:12][rank-0/8][ERROR]    [----trainer.py:77] : Traceback (most recent call last):",
            "  File \"/workspace/Primus/primus/cli/main.py\", line 10, in run",
            "    train()",
            "RuntimeError: expected scalar type BFloat16 but found Float",
        ];
        let d = detect(&lines);
        let f = d.finish(&exit_code(1), 0).unwrap();
        assert_eq!(f.class, FailureClass::Traceback);
        assert_eq!(
            f.line.as_deref(),
            Some("RuntimeError: expected scalar type BFloat16 but found Float")
        );
    }

    #[test]
    fn cut_off_traceback_reports_its_header() {
        let lines = [
            "[rank0]: Traceback (most recent call last):",
            "[rank0]:   File \"a.py\"",
        ];
        assert_eq!(
            class_and_line(&lines, exit_code(1)),
            (
                FailureClass::Traceback,
                Some("Traceback (most recent call last):".into())
            )
        );
    }

    #[test]
    fn interrupts_and_launcher_wrappers_are_not_causes() {
        let lines = [
            "Traceback (most recent call last):",
            "  File \"train.py\", line 1, in <module>",
            "KeyboardInterrupt",
            "Traceback (most recent call last):",
            "torch.distributed.elastic.multiprocessing.api.SignalException: Process 17 got signal: 2",
        ];
        assert_eq!(
            class_and_line(&lines, exit_code(130)),
            (FailureClass::NonZeroExit, None)
        );
    }

    #[test]
    fn non_zero_exit_with_and_without_crash_line() {
        assert_eq!(
            class_and_line(&[ITER, "bye"], exit_code(1)),
            (FailureClass::NonZeroExit, None)
        );
        let fault = "Memory access fault by GPU node-2 (Agent handle: 0x5555) on address 0x7f00. Reason: Page not present or supervisor privilege.";
        assert_eq!(
            class_and_line(&[ITER, fault, "Aborted (core dumped)"], exit_signal(6)),
            (FailureClass::NonZeroExit, Some(fault.into()))
        );
        assert_eq!(
            class_and_line(&[], exit_signal(libc::SIGTERM)),
            (FailureClass::NonZeroExit, None)
        );
    }

    #[test]
    fn runner_decisions() {
        let user = ExitInfo {
            signal: Some(libc::SIGINT),
            stopped_by_user: true,
            ..ExitInfo::default()
        };
        assert_eq!(
            class_and_line(&[ITER], user),
            (FailureClass::KilledByUser, None)
        );
        // An earlier failure line wins over the user's stop.
        let oom = "torch.OutOfMemoryError: HIP out of memory.";
        assert_eq!(class_and_line(&[ITER, oom], user).0, FailureClass::Oom);
        // Shutdown noise after mark_stop does not count.
        let mut d = detect(&[ITER]);
        d.mark_stop();
        for l in [
            "Traceback (most recent call last):",
            "RuntimeError: interrupted",
            "[rank0]:[E1129 ProcessGroupNCCL.cpp:1423] Process group watchdog thread terminated with exception: NCCL communicator was aborted",
        ] {
            d.feed(l);
        }
        assert_eq!(
            d.finish(&user, 1),
            Some(Failure {
                class: FailureClass::KilledByUser,
                line: None
            })
        );
        let hang = ExitInfo {
            signal: Some(9),
            hang: true,
            ..ExitInfo::default()
        };
        assert_eq!(class_and_line(&[ITER], hang), (FailureClass::Hang, None));
        let nccl = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7)";
        assert_eq!(class_and_line(&[ITER, nccl], hang).0, FailureClass::Nccl);
        let timeout = ExitInfo {
            signal: Some(15),
            timeout: true,
            ..ExitInfo::default()
        };
        assert_eq!(
            class_and_line(&[ITER], timeout),
            (FailureClass::Timeout, None)
        );
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
            let done = ExitInfo {
                signal: Some(sig),
                stopped_complete: true,
                ..ExitInfo::default()
            };
            let noisy = [
                ITER,
                "Traceback (most recent call last):",
                "RuntimeError: boom",
                "Killed",
            ];
            assert_eq!(classify(&noisy, done), None);
        }
    }

    #[test]
    fn clean_exit_only_counts_causes_after_the_last_iteration() {
        let (i1, i2) = (iter_line(1), iter_line(2));
        let tb = [
            "Traceback (most recent call last):",
            "  File \"x.py\", line 1, in f",
            "RuntimeError: boom",
        ];
        // Survived: more iterations followed.
        let mut survived = vec![i1.as_str()];
        survived.extend(tb);
        survived.push(i2.as_str());
        assert_eq!(classify(&survived, exit_code(0)), None);
        // A crash whose exit status a `| tee` pipeline hid.
        let mut hidden = vec![i1.as_str()];
        hidden.extend(tb);
        assert_eq!(
            class_and_line(&hidden, exit_code(0)),
            (FailureClass::Traceback, Some("RuntimeError: boom".into()))
        );
        // The runner counted iterations the detector never saw: trust exit 0.
        assert_eq!(detect(&tb).finish(&exit_code(0), 5), None);
        // No iteration at all: a failure line counts.
        assert_eq!(class_and_line(&tb, exit_code(0)).0, FailureClass::Traceback);
        // On a failing exit the cause after the last iteration beats an earlier, survived one.
        let mut later = vec!["WARNING: CUDA out of memory, retrying", i1.as_str()];
        later.extend(tb);
        assert_eq!(
            class_and_line(&later, exit_code(1)).0,
            FailureClass::Traceback
        );
    }

    #[test]
    fn detector_counts_iterations() {
        let titan = "[20260822 10:11:12][rank-0/8][INFO]     step: 10  loss:  3.2451  memory: 45.67GiB(48.00%)  tps: 6,759";
        let d = detect(&[ITER, "noise", titan, "validate step: 10  loss: 3.1"]);
        assert_eq!(d.iterations(), 2);
    }

    #[test]
    fn helpers() {
        assert_eq!(
            split_tags("[default0]:[rank0]: x"),
            ("[default0]:[rank0]: ", "x")
        );
        assert_eq!(split_tags("3: [rank3]:y"), ("3: [rank3]:", "y"));
        assert_eq!(split_tags("[rank-0/8] z"), ("", "[rank-0/8] z"));
        assert_eq!(
            strip_loguru_header("[20260822 10:11:12][rank-0/8][INFO]     [--a.py:1] :   body"),
            "  body"
        );
        assert_eq!(strip_loguru_header("[x] : y"), "[x] : y");
        assert!(is_arg_dump(
            "  error_injection_rate ............................ 0"
        ));
        assert!(is_arg_dump(
            "  inference_dynamic_batching_unified_memory_level . 0"
        ));
        assert!(is_arg_dump(
            "moe_use_fused_router_with_aux_score.............True"
        ));
        assert!(!is_arg_dump("RuntimeError: NCCL error"));
        assert!(!is_arg_dump(
            "    model-and-optimizer-setup ......................: (137.00, 137.00)"
        ));
        assert_eq!(
            exception_kind("torch.OutOfMemoryError: x"),
            Some(ExcKind::Other)
        );
        assert_eq!(exception_kind("AssertionError"), Some(ExcKind::Validation));
        assert_eq!(exception_kind("KeyboardInterrupt"), Some(ExcKind::Noise));
        assert_eq!(exception_kind("  File \"x\""), None);
        assert_eq!(exception_kind("WARNING: not an exception"), None);
        assert_eq!(exception_kind("INFO:megatron:Error"), None);
        assert_eq!(
            exception_kind("During handling of the above exception"),
            None
        );
    }

    proptest! {
        #[test]
        fn never_panics(lines in proptest::collection::vec(".*", 0..20), code in proptest::option::of(any::<i32>()), sig in proptest::option::of(0i32..40), flags in 0u8..16) {
            let mut d = FailureDetector::new();
            for (i, l) in lines.iter().enumerate() {
                d.feed(l);
                if i == 10 { d.mark_stop(); }
            }
            let exit = ExitInfo {
                code,
                signal: sig,
                stopped_complete: flags & 1 != 0,
                stopped_by_user: flags & 2 != 0,
                hang: flags & 4 != 0,
                timeout: flags & 8 != 0,
            };
            let _ = d.finish(&exit, 0);
        }

        #[test]
        fn never_panics_on_traceback_shaped_noise(
            parts in proptest::collection::vec(prop_oneof![
                Just("Traceback (most recent call last):".to_string()),
                Just("[rank1]: Traceback (most recent call last):".to_string()),
                Just("During handling of the above exception, another exception occurred:".to_string()),
                Just("".to_string()),
                Just("ValueError: x".to_string()),
                Just("[rank1]: AssertionError: y".to_string()),
                Just("  File \"a\"".to_string()),
                Just(ITER.to_string()),
                "[a-zA-Z:\\[\\] ]{0,30}",
            ], 0..40)
        ) {
            let d = detect(&parts.iter().map(String::as_str).collect::<Vec<_>>());
            let _ = d.finish(&exit_code(1), 0);
            let _ = d.finish(&exit_code(0), 0);
        }
    }
}
