//! The sampler: one thread that reads the GPU backend (blocking calls) at a fixed interval and the
//! per-process scan at a slower one, and hands snapshots to whoever listens through a bounded
//! channel (a slow listener loses samples; the sampler never blocks on it).

use super::host::Host;
use super::types::{Backend, GpuInfo, GpuSample};
use crate::domain::telemetry::HostSample;
pub use crate::domain::telemetry::{GpuSummary, Snapshot};
use crate::domain::trial::TelemetrySpan;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

#[derive(Debug, Clone, Copy)]
pub struct SamplerConfig {
    pub interval: Duration,
    pub process_interval: Duration,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            interval: Duration::from_millis(500),
            process_interval: Duration::from_secs(2),
        }
    }
}

/// A running sampler thread. Dropping it stops the thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    group: Arc<AtomicI32>,
    thread: Option<std::thread::JoinHandle<()>>,
    pub gpus: Vec<GpuInfo>,
    pub backend: Option<&'static str>,
}

/// Reads one snapshot at a time: the GPU backend every call, and the process scan, the host figures
/// and the watched group's usage at the slower process interval (they walk procfs: whole-machine
/// files and every pid), repeating the last host reading in between. Used by the sampler thread
/// and, without a thread, by `monitor`.
pub struct Collector {
    backend: Option<Box<dyn Backend>>,
    host: Host,
    process_interval: Duration,
    next_procs: Instant,
    last_host: HostSample,
    last_pgid: i32,
}

impl Collector {
    pub fn new(backend: Option<Box<dyn Backend>>, host: Host, cfg: &SamplerConfig) -> Collector {
        Collector {
            backend,
            host,
            process_interval: cfg.process_interval,
            next_procs: Instant::now(),
            last_host: HostSample::default(),
            last_pgid: 0,
        }
    }

    pub fn gpus(&self) -> Vec<GpuInfo> {
        self.backend
            .as_ref()
            .map(|b| b.gpus().to_vec())
            .unwrap_or_default()
    }

    pub fn backend_name(&self) -> Option<&'static str> {
        self.backend.as_ref().map(|b| b.name())
    }

    /// One snapshot; `pgid` > 0 is the process group to watch (a newly watched group is read at
    /// once).
    pub fn collect(&mut self, pgid: i32) -> Snapshot {
        let t0 = Instant::now();
        let gpus = self
            .backend
            .as_mut()
            .and_then(|b| b.sample().ok())
            .unwrap_or_default();
        let processes = if t0 >= self.next_procs || pgid != self.last_pgid {
            self.next_procs = t0 + self.process_interval;
            self.last_pgid = pgid;
            self.last_host = self.host.sample((pgid > 0).then_some(pgid));
            self.backend.as_mut().and_then(|b| b.processes().ok())
        } else {
            None
        };
        Snapshot {
            ts_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            node: None,
            gpus,
            processes,
            host: self.last_host.clone(),
            cost_us: t0.elapsed().as_micros() as u64,
        }
    }
}

/// Fixed-rate ticks that never pile up: a late tick moves the schedule instead of bursting.
pub struct Ticker {
    interval: Duration,
    next: Instant,
}

impl Ticker {
    pub fn new(interval: Duration) -> Ticker {
        Ticker {
            interval,
            next: Instant::now(),
        }
    }

    /// Advance to the next tick; the time until it (zero when late).
    pub fn advance(&mut self) -> Duration {
        self.next += self.interval;
        let now = Instant::now();
        if self.next < now {
            self.next = now;
        }
        self.next - now
    }

    pub fn next(&self) -> Instant {
        self.next
    }
}

impl Sampler {
    /// Start sampling. `backend` is None when no GPU backend works (host only).
    pub fn start(
        backend: Option<Box<dyn Backend>>,
        host: Host,
        cfg: SamplerConfig,
    ) -> (Sampler, mpsc::Receiver<Snapshot>) {
        let (tx, rx) = mpsc::channel(256);
        let stop = Arc::new(AtomicBool::new(false));
        let group = Arc::new(AtomicI32::new(0));
        let mut collector = Collector::new(backend, host, &cfg);
        let gpus = collector.gpus();
        let name = collector.backend_name();
        let (stop2, group2) = (stop.clone(), group.clone());
        let thread = std::thread::Builder::new()
            .name("telemetry".into())
            .spawn(move || {
                let mut ticker = Ticker::new(cfg.interval);
                while !stop2.load(Ordering::Relaxed) {
                    let snap = collector.collect(group2.load(Ordering::Relaxed));
                    match tx.try_send(snap) {
                        Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => {}
                        Err(mpsc::error::TrySendError::Closed(_)) => break,
                    }
                    ticker.advance();
                    // Sleep until the next sample; `halt` unparks the thread to stop it at once.
                    while !stop2.load(Ordering::Relaxed) {
                        let now = Instant::now();
                        if now >= ticker.next() {
                            break;
                        }
                        std::thread::park_timeout(ticker.next() - now);
                    }
                }
            })
            .ok();
        (
            Sampler {
                stop,
                group,
                thread,
                gpus,
                backend: name,
            },
            rx,
        )
    }

    /// Watch this process tree's RSS and CPU (the running trial, by its root pid), or none
    /// with 0.
    pub fn watch_tree(&self, root: i32) {
        self.group.store(root, Ordering::Relaxed);
    }

    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Bounded per-GPU history for live views.
#[derive(Debug, Clone)]
pub struct History {
    cap: usize,
    pub per_gpu: BTreeMap<u32, VecDeque<(u64, GpuSample)>>,
    pub host: VecDeque<(u64, HostSample)>,
}

impl History {
    pub fn new(cap: usize) -> History {
        History {
            cap: cap.max(1),
            per_gpu: BTreeMap::new(),
            host: VecDeque::new(),
        }
    }

    pub fn push(&mut self, s: &Snapshot) {
        for g in &s.gpus {
            let q = self.per_gpu.entry(g.gpu).or_default();
            if q.len() == self.cap {
                q.pop_front();
            }
            q.push_back((s.ts_ms, g.clone()));
        }
        if self.host.len() == self.cap {
            self.host.pop_front();
        }
        self.host.push_back((s.ts_ms, s.host.clone()));
    }

    /// `(seconds since the oldest sample, value)` points of one metric of one GPU.
    pub fn series(&self, gpu: u32, metric: impl Fn(&GpuSample) -> Option<f64>) -> Vec<(f64, f64)> {
        let Some(q) = self.per_gpu.get(&gpu) else {
            return Vec::new();
        };
        let t0 = q.front().map_or(0, |(t, _)| *t);
        q.iter()
            .filter_map(|(t, s)| metric(s).map(|v| ((t - t0) as f64 / 1000.0, v)))
            .collect()
    }
}

/// The least number of samples a span needs to be summarised on its own.
const MIN_SPAN_SAMPLES: usize = 4;

/// Summarise a trial's training, not its start-up or teardown: the snapshots taken while the
/// steady iterations ran (`steady`: Unix ms from the end of the last warm-up iteration to the
/// end of the last one), else while it trained (`training`: first to last iteration), so that
/// the start-up (often 25–60 s of a real job, at low utilisation), slow first iterations and the
/// exit do not drag the means of a trial that trained flat out. Without iterations, every
/// snapshot. Returns the span used.
pub fn summarize_training(
    snaps: &[Snapshot],
    pids: &std::collections::BTreeSet<u32>,
    steady: Option<(u64, u64)>,
    training: Option<(u64, u64)>,
) -> (Vec<GpuSummary>, Option<TelemetrySpan>) {
    let within = |(from, to): (u64, u64)| -> Vec<Snapshot> {
        snaps
            .iter()
            .filter(|s| s.ts_ms >= from && s.ts_ms <= to)
            .cloned()
            .collect()
    };
    for (span, kind) in [
        (steady, TelemetrySpan::Steady),
        (training, TelemetrySpan::Training),
    ] {
        if let Some(span) = span {
            let part = within(span);
            if part.len() >= MIN_SPAN_SAMPLES {
                return (summarize(&part, pids), Some(kind));
            }
        }
    }
    (summarize(snaps, pids), None)
}

/// Summarise a trial's snapshots; `pids` are the trial's processes (per-process VRAM).
pub fn summarize(snaps: &[Snapshot], pids: &std::collections::BTreeSet<u32>) -> Vec<GpuSummary> {
    let mut by_gpu: BTreeMap<u32, Vec<&GpuSample>> = BTreeMap::new();
    for s in snaps {
        for g in &s.gpus {
            by_gpu.entry(g.gpu).or_default().push(g);
        }
    }
    let mut trial_vram: BTreeMap<u32, u64> = BTreeMap::new();
    for s in snaps {
        if let Some(ps) = &s.processes {
            let mut per: BTreeMap<u32, u64> = BTreeMap::new();
            for p in ps
                .iter()
                .filter(|p| pids.is_empty() || pids.contains(&p.pid))
            {
                *per.entry(p.gpu).or_default() += p.vram_bytes;
            }
            for (g, v) in per {
                let e = trial_vram.entry(g).or_default();
                *e = (*e).max(v);
            }
        }
    }
    by_gpu
        .into_iter()
        .map(|(gpu, v)| {
            let f = |m: fn(&GpuSample) -> Option<f64>| -> Vec<f64> {
                v.iter().filter_map(|s| m(s)).collect()
            };
            let util = f(|s| s.util_pct);
            let power = f(|s| s.power_w);
            let mut sclk = f(|s| s.sclk_mhz);
            sclk.sort_by(f64::total_cmp);
            let mut temp_max_c: BTreeMap<String, f64> = BTreeMap::new();
            let mut reasons: Vec<String> = Vec::new();
            for s in &v {
                for (k, t) in &s.temp_c {
                    let e = temp_max_c.entry(k.clone()).or_insert(*t);
                    *e = e.max(*t);
                }
                for r in s.throttle.iter().flatten() {
                    if !reasons.contains(r) {
                        reasons.push(r.clone());
                    }
                }
            }
            GpuSummary {
                gpu,
                samples: v.len(),
                util_mean_pct: mean(&util),
                util_max_pct: util.iter().copied().reduce(f64::max),
                vram_peak_bytes: v.iter().filter_map(|s| s.vram_used_bytes).max(),
                vram_total_bytes: v.iter().filter_map(|s| s.vram_total_bytes).max(),
                trial_vram_peak_bytes: trial_vram.get(&gpu).copied(),
                power_mean_w: mean(&power),
                power_max_w: power.iter().copied().reduce(f64::max),
                temp_max_c,
                sclk_min_mhz: sclk.first().copied(),
                sclk_median_mhz: sclk.get(sclk.len() / 2).copied(),
                throttled: !reasons.is_empty(),
                throttle_reasons: reasons,
            }
        })
        .collect()
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::types::{ProcessSample, TelemetryError};

    /// A backend double at the hardware boundary: readings follow a script.
    struct Scripted {
        gpus: Vec<GpuInfo>,
        n: u32,
    }

    impl Backend for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn gpus(&self) -> &[GpuInfo] {
            &self.gpus
        }
        fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
            self.n += 1;
            Ok(vec![GpuSample {
                gpu: 0,
                util_pct: Some(f64::from(self.n * 10)),
                power_w: Some(100.0 + f64::from(self.n)),
                vram_used_bytes: Some(u64::from(self.n) << 30),
                sclk_mhz: Some(2000.0 - f64::from(self.n)),
                throttle: Some(if self.n == 2 {
                    vec!["hw-thermal".into()]
                } else {
                    vec![]
                }),
                ..GpuSample::default()
            }])
        }
        fn processes(&mut self) -> Result<Vec<ProcessSample>, TelemetryError> {
            Ok(vec![ProcessSample {
                pid: 7,
                gpu: 0,
                vram_bytes: u64::from(self.n) << 20,
                name: None,
            }])
        }
    }

    #[test]
    fn sampler_thread_delivers_and_stops() {
        let b = Scripted {
            gpus: vec![GpuInfo::default()],
            n: 0,
        };
        let (s, mut rx) = Sampler::start(
            Some(Box::new(b)),
            Host::new(std::path::Path::new("/proc")),
            SamplerConfig {
                interval: Duration::from_millis(20),
                process_interval: Duration::from_millis(40),
            },
        );
        let mut got = Vec::new();
        while got.len() < 4 {
            if let Some(x) = rx.blocking_recv() {
                got.push(x);
            }
        }
        s.stop();
        assert_eq!(got[0].gpus[0].util_pct, Some(10.0));
        assert!(got.iter().any(|s| s.processes.is_some()));
        assert!(got.iter().any(|s| s.processes.is_none()));
        let sum = summarize(&got[..3], &[7].into_iter().collect());
        assert_eq!(sum[0].util_max_pct, Some(30.0));
        assert_eq!(sum[0].util_mean_pct, Some(20.0));
        assert_eq!(sum[0].vram_peak_bytes, Some(3 << 30));
        assert!(sum[0].throttled);
        assert_eq!(sum[0].sclk_min_mhz, Some(1997.0));
    }

    #[test]
    fn collector_reads_procfs_at_the_slow_rate_and_a_new_group_at_once() {
        let b = Scripted {
            gpus: vec![GpuInfo::default()],
            n: 0,
        };
        let cfg = SamplerConfig {
            interval: Duration::from_millis(1),
            process_interval: Duration::from_secs(3600),
        };
        let mut c = Collector::new(
            Some(Box::new(b)),
            Host::new(std::path::Path::new("/proc")),
            &cfg,
        );
        let first = c.collect(0);
        assert!(first.processes.is_some(), "the first sample scans");
        assert!(first.host.ram_total_bytes.is_some());
        let second = c.collect(0);
        assert!(second.processes.is_none(), "not due for an hour");
        assert_eq!(second.host, first.host, "the host reading is repeated");
        assert_eq!(
            second.gpus[0].util_pct,
            Some(20.0),
            "GPUs are read every time"
        );
        // Watching our own process group: read at once, with this process in it.
        #[allow(unsafe_code)]
        // SAFETY: getpgrp has no preconditions.
        let me = unsafe { libc::getpgrp() };
        let third = c.collect(me);
        assert!(third.processes.is_some());
        let g = third.host.group.expect("group read at once");
        assert!(g.pids.contains(&std::process::id()), "{g:?}");
        assert!(c.collect(me).processes.is_none());
    }

    /// A GPU-memory-per-process double (the hardware boundary): each listed pid holds 1 GiB on
    /// GPU 0.
    struct PerProcess {
        gpus: Vec<GpuInfo>,
        holders: Vec<u32>,
    }

    impl Backend for PerProcess {
        fn name(&self) -> &'static str {
            "per-process-double"
        }
        fn gpus(&self) -> &[GpuInfo] {
            &self.gpus
        }
        fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
            Ok(vec![GpuSample::default()])
        }
        fn processes(&mut self) -> Result<Vec<ProcessSample>, TelemetryError> {
            Ok(self
                .holders
                .iter()
                .map(|&pid| ProcessSample {
                    pid,
                    gpu: 0,
                    vram_bytes: 1 << 30,
                    name: None,
                })
                .collect())
        }
    }

    #[test]
    fn gpu_memory_of_every_process_of_the_tree_is_the_trials_and_no_other() {
        use std::os::unix::process::CommandExt;
        // A worker in a session of its own (as torchrun starts them), one in the group, and a
        // process outside the trial that holds GPU memory too.
        let mut trial = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & setsid sleep 30 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let root = trial.id() as i32;
        let end = std::time::Instant::now() + Duration::from_secs(5);
        let workers = loop {
            let w: Vec<u32> = crate::util::procfs::family(std::path::Path::new("/proc"), root)
                .into_iter()
                .map(|(pid, _)| pid)
                .filter(|p| *p != trial.id())
                .collect();
            if w.len() == 2 || std::time::Instant::now() > end {
                break w;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(workers.len(), 2, "{workers:?}");
        let mut holders = workers.clone();
        holders.push(other.id());
        let mut c = Collector::new(
            Some(Box::new(PerProcess {
                gpus: vec![GpuInfo::default()],
                holders,
            })),
            Host::new(std::path::Path::new("/proc")),
            &SamplerConfig::default(),
        );
        let snap = c.collect(root);
        let pids: std::collections::BTreeSet<u32> = snap
            .host
            .group
            .as_ref()
            .unwrap()
            .pids
            .iter()
            .copied()
            .collect();
        let sum = summarize(&[snap], &pids);
        assert_eq!(sum[0].trial_vram_peak_bytes, Some(2 << 30), "{pids:?}");
        for pid in workers.iter().chain([&trial.id(), &other.id()]) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = trial.wait();
        let _ = other.wait();
    }

    #[test]
    fn ticker_never_bursts_after_a_late_tick() {
        let mut t = Ticker::new(Duration::from_millis(5));
        let start = t.next();
        std::thread::sleep(Duration::from_millis(30));
        // Late by six intervals: the next tick is now, not six ticks in a row.
        assert_eq!(t.advance(), Duration::ZERO);
        let wait = t.advance();
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(5));
        assert!(t.next() >= start + Duration::from_millis(35));
    }

    #[test]
    fn history_is_bounded() {
        let mut h = History::new(3);
        for i in 0..5u64 {
            h.push(&Snapshot {
                ts_ms: i * 500,
                gpus: vec![GpuSample {
                    gpu: 0,
                    util_pct: Some(i as f64),
                    ..GpuSample::default()
                }],
                ..Snapshot::default()
            });
        }
        let s = h.series(0, |g| g.util_pct);
        assert_eq!(s, vec![(0.0, 2.0), (0.5, 3.0), (1.0, 4.0)]);
    }

    #[test]
    fn the_training_summary_leaves_the_start_up_out() {
        // 30 s of start-up at 5 % utilisation, then 10 s of training at 100 %.
        let snaps: Vec<Snapshot> = (0..40u64)
            .map(|i| Snapshot {
                ts_ms: 1_000_000 + i * 1000,
                gpus: vec![GpuSample {
                    gpu: 0,
                    util_pct: Some(if i < 30 { 5.0 } else { 100.0 }),
                    ..GpuSample::default()
                }],
                ..Snapshot::default()
            })
            .collect();
        let pids = std::collections::BTreeSet::new();
        let (whole, span) = summarize_training(&snaps, &pids, None, None);
        assert_eq!(span, None);
        assert!((whole[0].util_mean_pct.unwrap() - 28.75).abs() < 1e-9);
        let (training, span) =
            summarize_training(&snaps, &pids, None, Some((1_030_000, 1_039_000)));
        assert_eq!(span, Some(TelemetrySpan::Training));
        assert_eq!(training[0].samples, 10);
        assert_eq!(training[0].util_mean_pct, Some(100.0));
    }

    #[test]
    fn the_steady_span_leaves_slow_first_iterations_and_the_exit_out() {
        // Start-up at 5 %, two slow warm-up iterations at 40 %, steady at 99 %, exit at 0 %.
        let util = |i: u64| match i {
            0..30 => 5.0,
            30..34 => 40.0,
            34..44 => 99.0,
            _ => 0.0,
        };
        let snaps: Vec<Snapshot> = (0..50u64)
            .map(|i| Snapshot {
                ts_ms: 1_000_000 + i * 1000,
                gpus: vec![GpuSample {
                    gpu: 0,
                    util_pct: Some(util(i)),
                    ..GpuSample::default()
                }],
                ..Snapshot::default()
            })
            .collect();
        let pids = std::collections::BTreeSet::new();
        let steady = Some((1_034_000, 1_043_000));
        let training = Some((1_030_000, 1_043_000));
        let (s, span) = summarize_training(&snaps, &pids, steady, training);
        assert_eq!(span, Some(TelemetrySpan::Steady));
        assert_eq!(s[0].util_mean_pct, Some(99.0));
        // A steady span too short to sample: first to last iteration.
        let (s, span) = summarize_training(&snaps, &pids, Some((1_034_000, 1_035_500)), training);
        assert_eq!(span, Some(TelemetrySpan::Training));
        assert_eq!(s[0].samples, 14);
    }
}
