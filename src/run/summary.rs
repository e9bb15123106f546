//! The figures of a trial (or a log parsed offline): steady-state step statistics plus peak memory.

use super::steady::{self, SteadyConfig};
use crate::domain::trial::{Iteration, MemoryReport, MemorySource, RunShape, SteadyStats, Summary};

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
        let (peak, source, kind) = peak_memory(iters, memory);
        Summary {
            iterations: iters.len() as u64,
            n: s.as_ref().map_or(0, |s| s.n),
            warmup: s.as_ref().map_or(0, |s| s.warmup),
            median_step_ms: s.as_ref().map(|s| s.median_step_ms),
            // One sample has no interval and no spread.
            ci95_ms: s.as_ref().filter(|s| s.n >= 2).map(|s| s.ci95_ms),
            ci95_low_ms: s.as_ref().filter(|s| s.n >= 2).map(|s| s.ci95_low_ms),
            ci95_high_ms: s.as_ref().filter(|s| s.n >= 2).map(|s| s.ci95_high_ms),
            cv: s.as_ref().filter(|s| s.n >= 2).map(|s| s.cv),
            stable: s.as_ref().map(|s| s.stable),
            tokens_per_s_per_gpu: s.as_ref().and_then(|s| s.tokens_per_s_per_gpu),
            tflops_per_gpu: s.as_ref().and_then(|s| s.tflops_per_gpu),
            peak_mem_gib: peak,
            peak_mem_source: source,
            peak_mem_kind: kind,
            startup_s: None,
            telemetry_span: None,
            last_loss: iters.iter().rev().find_map(|i| i.loss),
            telemetry: Vec::new(),
            pending_s: None,
            nodes: Vec::new(),
            world: None,
            basis: None,
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
                self.peak_mem_kind = Some(MemorySource::Processes);
            } else if let Some(b) = device {
                self.peak_mem_gib = Some(gib(b));
                self.peak_mem_source = Some("telemetry: device memory in use".into());
                self.peak_mem_kind = Some(MemorySource::Device);
            }
        }
        self.telemetry = telemetry;
        self
    }
}

/// The peak memory the log reports, with what it measures: the allocator's max reserved
/// (Megatron's `report_memory`) when the log has it — the framework's own memory, which the
/// memory model predicts — else the highest device-level figure (Primus' max over ranks
/// `rank-R rocm max mem`, `rocm`/`hip mem usage`, TorchTitan's peak). The two kinds are never
/// compared with each other.
pub fn peak_memory(
    iters: &[Iteration],
    memory: &[MemoryReport],
) -> (Option<f64>, Option<String>, Option<MemorySource>) {
    let mut device: Option<(f64, &str)> = None;
    let mut consider = |v: Option<f64>, what: &'static str| {
        if let Some(v) = v
            && v.is_finite()
            && device.as_ref().is_none_or(|(b, _)| v > *b)
        {
            device = Some((v, what));
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
    let reserved = memory
        .iter()
        .map(|m| m.max_reserved_mb / 1024.0)
        .filter(|v| v.is_finite())
        .reduce(f64::max);
    match (reserved, device) {
        (Some(v), _) => (
            Some(v),
            Some("max reserved (report_memory)".into()),
            Some(MemorySource::Allocator),
        ),
        (None, Some((v, what))) => (Some(v), Some(what.into()), Some(MemorySource::Device)),
        (None, None) => (None, None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trial stopped with one steady sample has a step time, but no interval, no spread,
    /// and is not stable.
    #[test]
    fn one_steady_sample_has_no_interval_and_is_not_stable() {
        let steps = [900.0, 400.0, 100.0];
        let iters: Vec<Iteration> = steps
            .iter()
            .enumerate()
            .map(|(i, &ms)| Iteration {
                iteration: i as u64 + 1,
                elapsed_ms: Some(ms),
                ..Iteration::default()
            })
            .collect();
        let cfg = crate::run::steady::SteadyConfig {
            min_warmup: 2,
            ..Default::default()
        };
        let s = Summary::from_parts(&iters, &[], None, &cfg);
        assert_eq!((s.n, s.median_step_ms), (1, Some(100.0)), "{s:?}");
        assert_eq!(
            (s.ci95_ms, s.cv, s.stable),
            (None, None, Some(false)),
            "{s:?}"
        );
    }

    #[test]
    fn the_allocators_peak_is_preferred_and_kinds_are_never_mixed() {
        let it = |rocm: f64| Iteration {
            iteration: 1,
            rocm_mem_used_gib: Some(rocm),
            ..Iteration::default()
        };
        let report = |mb: f64| MemoryReport {
            max_reserved_mb: mb,
            ..MemoryReport::default()
        };
        // Device use (other processes included) is larger, but the allocator's figure wins.
        let (v, src, kind) = peak_memory(&[it(70.0)], &[report(61.0 * 1024.0)]);
        assert_eq!(v, Some(61.0));
        assert_eq!(kind, Some(MemorySource::Allocator));
        assert_eq!(src.as_deref(), Some("max reserved (report_memory)"));
        // Without it, the device figure, said to be one.
        let (v, _, kind) = peak_memory(&[it(70.0), it(72.0)], &[]);
        assert_eq!((v, kind), (Some(72.0), Some(MemorySource::Device)));
        assert_eq!(peak_memory(&[], &[]), (None, None, None));
        assert_eq!(
            MemorySource::from_source_text("telemetry: trial processes' GPU memory"),
            MemorySource::Processes
        );
    }
}
