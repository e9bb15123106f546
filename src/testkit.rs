//! Fixture builders the integration tests, the benchmarks and the TUI's own tests share (the
//! `testkit` feature): fixed, deterministic telemetry, iterations, summaries and stored trial
//! rows, so a snapshot test and a benchmark draw the same data.

use crate::domain::trial::{Iteration, MemorySource, Summary, TelemetrySpan};
use crate::store::{TrialRow, TrialStatus};
use crate::telemetry::host::HostSample;
use crate::telemetry::sampler::Snapshot;
use crate::telemetry::{GpuInfo, GpuSample};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// The first sample's time (ms since the epoch): 2025-06-15.
pub const T0_MS: u64 = 1_750_000_000_000;

pub fn iteration(i: u64) -> Iteration {
    // A warm-up of two slow steps, then a steady step time with a small fixed wobble.
    let wobble = [0.0, 3.5, -2.0, 1.5, -4.0, 2.5, -1.0][(i % 7) as usize];
    let step = match i {
        1 => 4120.0,
        2 => 1630.0,
        _ => 1212.0 + wobble,
    };
    let tflops = 1_000_000.0 / step * 0.163;
    Iteration {
        iteration: i,
        train_iters: Some(50),
        elapsed_ms: Some(step),
        elapsed_avg_ms: Some(step),
        tflops_per_gpu: Some(tflops),
        tokens_per_s_per_gpu: Some(256.0 * 4096.0 / 8.0 / (step / 1000.0)),
        loss: Some(11.2 - 0.12 * i as f64),
        learning_rate: Some(1.0e-5),
        global_batch_size: Some(256),
        mem_used_gib: Some(141.5),
        mem_total_gib: Some(191.98),
        timestamp: Some(format!("2025-06-15 16:{:02}:{:02}", 10 + i / 60, i % 60)),
        ..Default::default()
    }
}

pub fn summary(iters: u64) -> Summary {
    Summary {
        pending_s: None,
        nodes: Vec::new(),
        world: None,
        basis: None,
        iterations: iters,
        n: iters.saturating_sub(2) as usize,
        warmup: 2,
        median_step_ms: Some(1212.5),
        ci95_ms: Some(1.9),
        ci95_low_ms: Some(1210.6),
        ci95_high_ms: Some(1214.4),
        cv: Some(0.0021),
        stable: Some(true),
        tokens_per_s_per_gpu: Some(108_104.0),
        tflops_per_gpu: Some(134.4),
        peak_mem_gib: Some(141.5),
        peak_mem_source: Some("hip mem usage".into()),
        peak_mem_kind: Some(MemorySource::Device),
        startup_s: Some(31.4),
        telemetry_span: Some(TelemetrySpan::Steady),
        last_loss: Some(7.6),
        telemetry: Vec::new(),
    }
}

pub fn gpu_info(i: u32) -> GpuInfo {
    GpuInfo {
        index: i,
        backend: "amdgpu-sysfs".into(),
        name: "AMD Instinct MI300X".into(),
        bus_id: Some(format!("0000:{:02x}:00.0", 0x0c + 0x10 * i)),
        vram_total_bytes: Some(192 << 30),
        compute_units: Some(304),
        power_cap_w: Some(750.0),
        ..Default::default()
    }
}

/// Sample `k` (2 Hz) of GPU `g`: fixed, different per GPU, with GPU 5 throttling.
pub fn gpu_sample(g: u32, k: u64) -> GpuSample {
    let util = ((k * 7 + u64::from(g) * 13) % 40 + 60) as f64;
    let mut temp = BTreeMap::new();
    temp.insert("edge".to_string(), 48.0 + f64::from(g));
    temp.insert("junction".to_string(), 71.0 + f64::from(g) + (k % 5) as f64);
    GpuSample {
        gpu: g,
        util_pct: Some(util),
        mem_util_pct: Some(util / 2.0),
        vram_used_bytes: Some((140 << 30) + u64::from(g) * (1 << 28)),
        vram_total_bytes: Some(192 << 30),
        power_w: Some(520.0 + f64::from(g) * 11.0 + (k % 9) as f64),
        power_kind: None,
        temp_c: temp,
        sclk_mhz: Some(2100.0 - f64::from(g) * 10.0),
        mclk_mhz: Some(1300.0),
        throttle: (g == 5).then(|| vec!["power".to_string()]),
    }
}

pub fn snapshot(k: u64, gpus: u32) -> Snapshot {
    Snapshot {
        node: None,
        ts_ms: T0_MS + k * 500,
        gpus: (0..gpus).map(|g| gpu_sample(g, k)).collect(),
        processes: None,
        host: HostSample {
            cpu_pct: Some(35.0 + (k % 4) as f64),
            ram_used_bytes: Some(412 << 30),
            ram_total_bytes: Some(1511 << 30),
            group: None,
        },
        cost_us: 900,
    }
}

pub fn trial_row(
    id: i64,
    status: TrialStatus,
    overrides: Vec<(&str, Value)>,
    experiment: &Path,
) -> TrialRow {
    // Trials 7 minutes apart from 14:10 (the hour wraps for long lists: a benchmark lists 1000).
    let minute = 10 + 7 * id;
    let hour = (14 + minute / 60) % 24;
    let mut all: Vec<(String, Value)> = vec![
        ("train_iters".into(), json!(50)),
        ("stderr_sink_level".into(), json!("DEBUG")),
    ];
    all.extend(overrides.into_iter().map(|(k, v)| (k.to_string(), v)));
    let dir = experiment
        .parent()
        .unwrap_or(Path::new(""))
        .join(format!(".primus-tune/trials/{id:04}"));
    TrialRow {
        job: None,
        id,
        study_id: None,
        status,
        created_at: format!("2025-06-15T{:02}:{:02}:00Z", hour, minute % 60),
        started_at: Some(format!("2025-06-15T{:02}:{:02}:02Z", hour, minute % 60)),
        finished_at: Some(format!("2025-06-15T{:02}:{:02}:40Z", hour, minute % 60 + 3)),
        updated_at: format!("2025-06-15T{:02}:{:02}:40Z", hour, minute % 60 + 3),
        config_path: experiment.to_path_buf(),
        config_hash: format!("9f3c{id:04}"),
        overrides: all,
        profile: Some(
            if id % 2 == 0 {
                "proxy-torch"
            } else {
                "proxy-cpu"
            }
            .into(),
        ),
        argv: vec![
            "bash".into(),
            "examples/run_pretrain.sh".into(),
            "--train_iters".into(),
            "50".into(),
        ],
        env: vec![("PRIMUS_TP".into(), "1".into())],
        trial_dir: dir,
        runner_pid: None,
        runner: None,
        heartbeat_at: None,
        failure: None,
        exit_code: Some(0),
        exit_signal: None,
        iterations_seen: 50,
        iterations_stored: 50,
        wall_s: Some(71.4),
        summary: Some(json!({
            "peak_mem_kind": if id % 2 == 0 { "device" } else { "allocator" },
            "startup_s": 31.5,
        })),
        median_step_ms: Some(1212.5),
        ci95_ms: Some(1.9),
        tokens_per_s_per_gpu: Some(108_104.0),
        tflops_per_gpu: Some(134.4),
        peak_mem_gib: Some(141.5),
        resolved: None,
    }
}
