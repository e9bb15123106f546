//! The figures of a trial (or a log parsed offline): steady-state step statistics plus peak memory.

use super::steady::{self, SteadyConfig};
use crate::domain::trial::{Iteration, MemoryReport, RunShape, SteadyStats, Summary};

impl Summary {
    pub fn from_parts(
        iters: &[Iteration],
        memory: &[MemoryReport],
        shape: Option<RunShape>,
        cfg: &SteadyConfig,
    ) -> Summary {
        // The batch a line reports is the batch that ran (a proxy may run fewer micro batches
        // than the config asks): derive tokens from it when the log prints it.
        let shape = shape.map(|mut sh| {
            if let Some(g) = iters.iter().rev().find_map(|i| i.global_batch_size) {
                sh.global_batch_size = g;
            }
            sh
        });
        let s: Option<SteadyStats> = steady::stats(iters, shape, cfg);
        let (peak, source) = peak_memory(iters, memory);
        Summary {
            iterations: iters.len() as u64,
            n: s.as_ref().map_or(0, |s| s.n),
            warmup: s.as_ref().map_or(0, |s| s.warmup),
            median_step_ms: s.as_ref().map(|s| s.median_step_ms),
            ci95_ms: s.as_ref().map(|s| s.ci95_ms),
            ci95_low_ms: s.as_ref().map(|s| s.ci95_low_ms),
            ci95_high_ms: s.as_ref().map(|s| s.ci95_high_ms),
            cv: s.as_ref().map(|s| s.cv),
            stable: s.as_ref().map(|s| s.stable),
            tokens_per_s_per_gpu: s.as_ref().and_then(|s| s.tokens_per_s_per_gpu),
            tflops_per_gpu: s.as_ref().and_then(|s| s.tflops_per_gpu),
            peak_mem_gib: peak,
            peak_mem_source: source,
            last_loss: iters.iter().rev().find_map(|i| i.loss),
            telemetry: Vec::new(),
        }
    }
}

impl Summary {
    /// Fill peak memory from telemetry when the log reported none: the most GPU memory the
    /// trial's own processes held, else the device's peak use during the trial.
    pub fn with_telemetry(mut self, telemetry: Vec<crate::telemetry::sampler::GpuSummary>) -> Self {
        if self.peak_mem_gib.is_none() {
            let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
            let trial = telemetry
                .iter()
                .filter_map(|g| g.trial_vram_peak_bytes)
                .max();
            let device = telemetry.iter().filter_map(|g| g.vram_peak_bytes).max();
            if let Some(b) = trial {
                self.peak_mem_gib = Some(gib(b));
                self.peak_mem_source = Some("telemetry: trial processes' GPU memory".into());
            } else if let Some(b) = device {
                self.peak_mem_gib = Some(gib(b));
                self.peak_mem_source = Some("telemetry: device memory in use".into());
            }
        }
        self.telemetry = telemetry;
        self
    }
}

/// The highest memory figure the log reports: Primus' max over ranks (`rank-R rocm max mem`),
/// device-wide use (`hip mem usage`, TorchTitan's peak reserved), Megatron's `max reserved`.
pub fn peak_memory(iters: &[Iteration], memory: &[MemoryReport]) -> (Option<f64>, Option<String>) {
    let mut best: Option<(f64, String)> = None;
    let mut consider = |v: Option<f64>, what: &str| {
        if let Some(v) = v
            && v.is_finite()
            && best.as_ref().is_none_or(|(b, _)| v > *b)
        {
            best = Some((v, what.to_string()));
        }
    };
    for i in iters {
        consider(i.rocm_max_mem_used_gib, "rocm max mem usage over ranks");
        consider(i.rocm_mem_used_gib, "rocm mem usage");
        consider(i.mem_used_gib, "device memory in use (log)");
        if let (Some(f), Some(t)) = (i.mem_usage_fraction, i.mem_total_gib) {
            consider(Some(f * t), "mem usages fraction × total");
        }
    }
    for m in memory {
        consider(
            Some(m.max_reserved_mb / 1024.0),
            "max reserved (report_memory)",
        );
    }
    match best {
        Some((v, s)) => (Some(v), Some(s)),
        None => (None, None),
    }
}
