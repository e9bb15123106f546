//! A trial as data: what the log parser reads from a training log, how a trial ended and why it
//! failed, its steady-state figures and its status. No I/O here; the run engine fills these, the
//! store keeps them, the frontends show them. Units are in the field names.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// One training iteration as a log line reports it. Fields a format does not print are `None`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Iteration {
    pub iteration: u64,
    /// `train_iters` from `iteration N/M`.
    pub train_iters: Option<u64>,
    /// Elapsed time of this iteration (Megatron: the instantaneous value before `/AVG`;
    /// TorchTitan prints none, a trial derives it from `tps`: [`Iteration::timed_by_tokens`]).
    pub elapsed_ms: Option<f64>,
    /// Primus' running average after `/` (`X/AVG`).
    pub elapsed_avg_ms: Option<f64>,
    /// `throughput per GPU` or `compute per GPU (TFLOP/s/GPU)`, or TorchTitan `tflops`.
    pub tflops_per_gpu: Option<f64>,
    pub tflops_avg_per_gpu: Option<f64>,
    /// Primus `tokens per GPU` / `tokens/s/GPU inst`, or TorchTitan `tps`.
    pub tokens_per_s_per_gpu: Option<f64>,
    /// Primus' average (`/AVG` or harmonic mean).
    pub tokens_avg_per_s_per_gpu: Option<f64>,
    /// `lm loss` (Megatron) or `loss` (TorchTitan).
    pub loss: Option<f64>,
    pub learning_rate: Option<f64>,
    pub global_batch_size: Option<u64>,
    pub grad_norm: Option<f64>,
    pub skipped_iterations: Option<u64>,
    pub nan_iterations: Option<u64>,
    /// Device memory in use on the printing rank: Primus `hip mem usage` used (GiB; Primus
    /// prints "GB" but divides by 1024³), or TorchTitan's peak reserved `memory: X GiB`.
    pub mem_used_gib: Option<f64>,
    pub mem_total_gib: Option<f64>,
    /// Percent of device memory in use (`usage_ratio` or TorchTitan's `(Y%)`).
    pub mem_used_pct: Option<f64>,
    /// Primus `rocm mem usage` used and total (GiB).
    pub rocm_mem_used_gib: Option<f64>,
    pub rocm_mem_total_gib: Option<f64>,
    /// Primus `rank-R rocm max mem usage`: the max over all ranks, and that rank.
    pub rocm_max_mem_used_gib: Option<f64>,
    pub rocm_max_mem_rank: Option<u32>,
    /// Old Primus `mem usages: 0.xx` (a fraction of device memory, not GB).
    pub mem_usage_fraction: Option<f64>,
    /// TorchTitan `mfu: X%`.
    pub mfu_pct: Option<f64>,
    /// Wall-clock timestamp printed in the line, as written.
    pub timestamp: Option<String>,
}

/// Megatron's `report_memory` line: `[Rank R] (after N iterations) memory (MB) | allocated: ...`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MemoryReport {
    pub rank: u32,
    pub after_iterations: u64,
    pub allocated_mb: f64,
    pub max_allocated_mb: f64,
    pub reserved_mb: f64,
    pub max_reserved_mb: f64,
}

/// Megatron's `Theoretical memory footprints: weight and optimizer=... MB, activation=... MB, total=... MB`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TheoreticalMemory {
    pub weight_and_optimizer_mb: f64,
    pub activation_mb: Option<f64>,
    pub total_mb: Option<f64>,
}

/// What one log line carries for the run engine.
// An event lives only between the parser and its consumer; boxing the large variant would cost an
// allocation per iteration for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LogEvent {
    Iteration(Iteration),
    Memory(MemoryReport),
    Theoretical(TheoreticalMemory),
}

/// Why a trial failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// GPU out of memory (HIP/CUDA/torch.OutOfMemoryError/hipErrorOutOfMemory).
    Oom,
    /// Killed by the kernel's OOM killer (SIGKILL / exit 137 with an oom-kill message or no other cause).
    HostOom,
    /// NCCL/RCCL error or timeout, collective watchdog.
    Nccl,
    /// No new iteration for too long.
    Hang,
    /// A Python traceback (the last exception line is the cause).
    Traceback,
    /// An assertion or ValueError from argument/config validation.
    ConfigAssertion,
    /// The process exited non-zero with none of the above recognised.
    NonZeroExit,
    /// Stopped by the user (Ctrl-C, `q`).
    KilledByUser,
    /// The trial hit --max-seconds before finishing its measurement.
    Timeout,
    /// Nothing started: its launch could not be built or spawned (a missing runner, an unset
    /// variable its profile needs, an unwritable trial folder).
    NotLaunched,
    /// The scheduler ended the job at its time limit (Slurm's `TIMEOUT`, or its `DEADLINE`).
    #[serde(alias = "slurm-timeout")]
    JobTimeLimit,
    /// The job was cancelled in the scheduler by someone other than primus-tune (`scancel`, an
    /// administrator).
    #[serde(alias = "slurm-cancelled")]
    JobCancelled,
    /// A node of the job failed or did not boot (`NODE_FAIL`, `BOOT_FAIL`), or the scheduler
    /// requeued the job off a failed node.
    NodeFail,
    /// The scheduler preempted the job for another.
    #[serde(alias = "slurm-preempted")]
    Preempted,
    /// The scheduler lost the job: none of its commands knows it any more.
    #[serde(alias = "slurm-lost")]
    JobLost,
    /// The scheduler says the job can never start as asked (more nodes than the partition
    /// has, a constraint no node meets, a limit the request exceeds, a down partition).
    Unschedulable,
    /// The job waited in the queue longer than `--max-pending-seconds`.
    PendingLimit,
}

impl FailureClass {
    /// Every class, in declaration order.
    pub const ALL: [FailureClass; 17] = [
        FailureClass::Oom,
        FailureClass::HostOom,
        FailureClass::Nccl,
        FailureClass::Hang,
        FailureClass::Traceback,
        FailureClass::ConfigAssertion,
        FailureClass::NonZeroExit,
        FailureClass::KilledByUser,
        FailureClass::Timeout,
        FailureClass::NotLaunched,
        FailureClass::JobTimeLimit,
        FailureClass::JobCancelled,
        FailureClass::NodeFail,
        FailureClass::Preempted,
        FailureClass::JobLost,
        FailureClass::Unschedulable,
        FailureClass::PendingLimit,
    ];

    /// The class's name as stored, printed in the status column and in JSON (`host-oom`).
    pub fn name(self) -> String {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(s)) => s,
            _ => format!("{self:?}"),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            FailureClass::Oom => "out of GPU memory",
            FailureClass::HostOom => "killed by the host OOM killer",
            FailureClass::Nccl => "NCCL/RCCL error",
            FailureClass::Hang => "hang (no new iteration)",
            FailureClass::Traceback => "Python exception",
            FailureClass::ConfigAssertion => "config rejected at start-up",
            FailureClass::NonZeroExit => "non-zero exit",
            FailureClass::KilledByUser => "stopped by the user",
            FailureClass::Timeout => "time limit reached",
            FailureClass::NotLaunched => "could not be launched",
            FailureClass::JobTimeLimit => "killed at its job's time limit",
            FailureClass::JobCancelled => "its job was cancelled by someone else",
            FailureClass::NodeFail => "a node of the job failed",
            FailureClass::Preempted => "preempted by the scheduler",
            FailureClass::JobLost => "the scheduler lost its job",
            FailureClass::Unschedulable => "the scheduler says its job can never start",
            FailureClass::PendingLimit => "queued longer than --max-pending-seconds",
        }
    }
}

/// A failure with the first log line that shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub class: FailureClass,
    /// The offending log line (ANSI stripped), when one was seen.
    pub line: Option<String>,
}

/// How the trial's process ended, as the runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExitInfo {
    /// Exit status when the process exited normally.
    pub code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// The runner stopped it because the measurement was complete (early stop or max iters).
    pub stopped_complete: bool,
    /// The runner stopped it because the user asked.
    pub stopped_by_user: bool,
    /// The runner stopped it because no iteration arrived in time.
    pub hang: bool,
    /// The runner stopped it at --max-seconds.
    pub timeout: bool,
}

/// Steady-state statistics of step times (after warm-up removal).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SteadyStats {
    /// Iterations used (after warm-up).
    pub n: usize,
    /// Iterations dropped as warm-up (counted from the first parsed one).
    pub warmup: usize,
    pub median_step_ms: f64,
    pub mean_step_ms: f64,
    /// 10 % trimmed mean.
    pub trimmed_mean_step_ms: f64,
    /// Half-width of the 95 % confidence interval of the median step time.
    pub ci95_ms: f64,
    pub ci95_low_ms: f64,
    pub ci95_high_ms: f64,
    /// Coefficient of variation of the steady step times (0.02 = 2 %).
    pub cv: f64,
    pub min_step_ms: f64,
    pub max_step_ms: f64,
    /// Steps longer than 1.5 × the median.
    pub outliers: usize,
    /// CV < 10 % and min/max within 25 % of the mean (pyperf's checks).
    pub stable: bool,
    /// Tokens per second per GPU over the steady window (harmonic mean of per-step rates).
    pub tokens_per_s_per_gpu: Option<f64>,
    /// Median TFLOP/s per GPU over the steady window.
    pub tflops_per_gpu: Option<f64>,
}

/// What turns a step time into tokens per second per GPU when the log does not print it:
/// `seq_length × global_batch_size / step_s / world_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunShape {
    pub seq_length: u64,
    pub global_batch_size: u64,
    pub world_size: u64,
}

impl RunShape {
    /// The tokens one GPU's share of a step holds: `seq_length × global_batch_size / world_size`.
    pub fn tokens_per_gpu_step(&self) -> f64 {
        self.seq_length as f64 * self.global_batch_size as f64 / self.world_size.max(1) as f64
    }
}

impl Iteration {
    /// The step time a TorchTitan line implies. TorchTitan prints no step time: its `tps` is the
    /// tokens of the steps since its previous line over their wall time, per GPU (its
    /// `MetricsProcessor`: tokens of the rank's batches / (Δt × TP × PP × CP)), so a step took
    /// `tokens per GPU step / tps` (averaged over the logging interval). An iteration that
    /// printed its own time, or one without `tps` or a shape, is left as it is.
    pub fn timed_by_tokens(mut self, shape: Option<RunShape>) -> Self {
        if self.elapsed_ms.is_none()
            && let (Some(tps), Some(sh)) = (self.tokens_per_s_per_gpu, shape)
            && tps.is_finite()
            && tps > 0.0
            && sh.tokens_per_gpu_step() > 0.0
        {
            self.elapsed_ms = Some(sh.tokens_per_gpu_step() / tps * 1e3);
        }
        self
    }
}

/// Where a trial stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrialStatus {
    /// Launched and not finished yet (or its runner died and nobody has noticed yet).
    Running,
    /// The measurement finished (including when the runner stopped the process on purpose
    /// after enough iterations).
    Completed,
    /// The training process failed; the trial's `failure` says how.
    Failed,
    /// Stopped before the measurement was complete (by the user, or at a time limit).
    Stopped,
    /// The primus-tune process that ran it went away while it was running.
    Interrupted,
}

impl TrialStatus {
    pub const ALL: [TrialStatus; 5] = [
        TrialStatus::Running,
        TrialStatus::Completed,
        TrialStatus::Failed,
        TrialStatus::Stopped,
        TrialStatus::Interrupted,
    ];

    /// The name stored in the `status` column (and used by serde).
    pub fn as_str(self) -> &'static str {
        match self {
            TrialStatus::Running => "running",
            TrialStatus::Completed => "completed",
            TrialStatus::Failed => "failed",
            TrialStatus::Stopped => "stopped",
            TrialStatus::Interrupted => "interrupted",
        }
    }

    /// Every status but `running`.
    pub fn is_finished(self) -> bool {
        self != TrialStatus::Running
    }
}

impl fmt::Display for TrialStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// An unknown status name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown trial status `{0}` (expected running, completed, failed, stopped or interrupted)")]
pub struct ParseStatusError(pub String);

impl FromStr for TrialStatus {
    type Err = ParseStatusError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TrialStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| ParseStatusError(s.to_owned()))
    }
}

/// What a peak-memory figure measures. Two kinds are never compared or mixed in one column
/// unmarked: the framework's allocator counts only its own tensors and cache; device memory in
/// use counts everything on the GPU, other processes included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemorySource {
    /// The framework's allocator: PyTorch's max reserved (Megatron's `report_memory`).
    Allocator,
    /// The GPU memory held by the trial's own processes (telemetry's per-process scan).
    Processes,
    /// Device memory in use (the log's `rocm mem usage`/`hip mem usage`, or telemetry): includes
    /// other processes and the runtime's context.
    Device,
}

impl MemorySource {
    /// A short tag for table cells (`alloc`, `procs`, `device`).
    pub fn tag(self) -> &'static str {
        match self {
            MemorySource::Allocator => "alloc",
            MemorySource::Processes => "procs",
            MemorySource::Device => "device",
        }
    }

    /// The kind behind a stored source text (summaries stored before the kind was kept).
    pub fn from_source_text(text: &str) -> MemorySource {
        if text.contains("reserved") {
            MemorySource::Allocator
        } else if text.contains("trial processes") {
            MemorySource::Processes
        } else {
            MemorySource::Device
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            MemorySource::Allocator => "allocator reserved (the framework's own memory)",
            MemorySource::Processes => "the trial's processes' GPU memory (telemetry)",
            MemorySource::Device => "device memory in use (includes other processes)",
        }
    }
}

/// The part of a trial its GPU figures summarise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelemetrySpan {
    /// The steady iterations (after warm-up) the median step is measured on.
    Steady,
    /// From the first iteration to the last (the steady span held too few samples).
    Training,
}

impl TelemetrySpan {
    pub fn label(self) -> &'static str {
        match self {
            TelemetrySpan::Steady => "over the steady iterations",
            TelemetrySpan::Training => "from the first iteration to the last",
        }
    }
}

/// What `run --json` and `parse-log --json` print as `summary`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Iterations parsed (after de-duplication).
    pub iterations: u64,
    /// Steady-state samples used (after warm-up).
    pub n: usize,
    pub warmup: usize,
    pub median_step_ms: Option<f64>,
    /// Half-width of the 95 % CI of the median step time.
    pub ci95_ms: Option<f64>,
    pub ci95_low_ms: Option<f64>,
    pub ci95_high_ms: Option<f64>,
    pub cv: Option<f64>,
    pub stable: Option<bool>,
    pub tokens_per_s_per_gpu: Option<f64>,
    pub tflops_per_gpu: Option<f64>,
    /// Peak device memory seen (GiB) and where the figure comes from.
    pub peak_mem_gib: Option<f64>,
    pub peak_mem_source: Option<String>,
    /// What the peak measures (absent in summaries stored before it was kept).
    #[serde(default)]
    pub peak_mem_kind: Option<MemorySource>,
    /// Launch → first iteration, seconds (start-up: loading, compiling, building the model).
    /// The telemetry figures leave it out.
    #[serde(default)]
    pub startup_s: Option<f64>,
    /// What the telemetry figures cover: the steady iterations the step time is measured on
    /// (`steady`), first to last iteration (`training`: too few samples in the steady span), or
    /// the whole trial (None: no iteration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry_span: Option<TelemetrySpan>,
    /// Last loss printed.
    pub last_loss: Option<f64>,
    /// Telemetry per GPU over `telemetry_span` (empty when not sampled).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub telemetry: Vec<super::telemetry::GpuSummary>,
    /// A batch trial: seconds its job waited in the queue before it started, or until it ended
    /// when it never started (not GPU time; `startup_s` and the wall time count from the job's
    /// start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_s: Option<f64>,
    /// The world the trial launched at (ranks), when it was known rather than the launcher's
    /// fallback (absent in older trials): what its per-GPU figures, its peak above all, hold for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<u64>,
    /// A trial across nodes: figures per node, the slowest and the hottest flagged (empty on
    /// one node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<super::telemetry::NodeSummary>,
    /// What its figures are evidence of: measured on which GPU with which profile, or a CPU
    /// stand-in's (absent in trials stored before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<super::evidence::Basis>,
}

/// Why the runner ended a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The 95 % CI of the median step reached its target: the measurement is done.
    CiTarget,
    /// The iteration budget was reached.
    MaxIters,
    /// Its steady samples put it above the sweep's bar (its leader) with 95 % confidence: the
    /// measurement is done for the search ([`crate::run::steady::Race`]).
    SlowerThanLeader,
    /// The workload exited by itself.
    Exited,
    /// The wall-clock budget ended.
    MaxSeconds,
    /// No new iteration for too long.
    Hang,
    /// The user (or a signal, or the frontend going away) asked it to stop.
    User,
    /// A failure line (out of memory, NCCL, a traceback) and no iteration after it within the
    /// grace: the workload was stopped instead of waiting for it to exit.
    Failure,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::CiTarget => "ci-target",
            StopReason::MaxIters => "max-iters",
            StopReason::SlowerThanLeader => "slower-than-leader",
            StopReason::Exited => "exited",
            StopReason::MaxSeconds => "max-seconds",
            StopReason::Hang => "hang",
            StopReason::User => "user",
            StopReason::Failure => "failure",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The result of one trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    pub trial_id: Option<i64>,
    /// `completed`, `failed` or `stopped`.
    pub status: TrialStatus,
    pub failure: Option<Failure>,
    /// Why the runner ended it.
    pub stop_reason: StopReason,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub wall_s: f64,
    pub trial_dir: Option<String>,
    /// Its batch job, when it ran as one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<super::job::Job>,
    #[serde(flatten)]
    pub summary: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_time_follows_from_tokens_per_second_and_the_shape() {
        let titan = |tps: Option<f64>| Iteration {
            iteration: 3,
            tokens_per_s_per_gpu: tps,
            ..Iteration::default()
        };
        // one H200, Qwen3 1.7B, local batch 1 × 2048: `tps: 14,133` → 144.9 ms (the log's
        // timestamps put that step 146 ms after the one before)
        let one = RunShape {
            seq_length: 2048,
            global_batch_size: 1,
            world_size: 1,
        };
        let ms = titan(Some(14_133.0)).timed_by_tokens(Some(one)).elapsed_ms;
        assert!((ms.unwrap() - 2048.0 / 14_133.0 * 1e3).abs() < 1e-9);
        // 8 GPUs, global batch 64 × 8192: each GPU's share is 65,536 tokens
        let eight = RunShape {
            seq_length: 8192,
            global_batch_size: 64,
            world_size: 8,
        };
        let ms = titan(Some(6_553.6)).timed_by_tokens(Some(eight)).elapsed_ms;
        assert!((ms.unwrap() - 10_000.0).abs() < 1e-6);
        // a printed time wins; no shape, no tps, or a zero rate: nothing made up
        let printed = Iteration {
            elapsed_ms: Some(99.0),
            ..titan(Some(14_133.0))
        };
        assert_eq!(printed.timed_by_tokens(Some(one)).elapsed_ms, Some(99.0));
        assert_eq!(titan(Some(14_133.0)).timed_by_tokens(None).elapsed_ms, None);
        assert_eq!(titan(None).timed_by_tokens(Some(one)).elapsed_ms, None);
        assert_eq!(titan(Some(0.0)).timed_by_tokens(Some(one)).elapsed_ms, None);
    }
}
