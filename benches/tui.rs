//! Benchmark: the TUI's frame render time and its start-up.
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `cargo bench --bench tui` prints, per screen, the median and p95 time to draw one 200×60 frame
//! (ratatui `TestBackend`) with 8 GPUs × 10 minutes of telemetry at 2 Hz (1200 snapshots each)
//! and 1000 stored trials; then the time from start to the first frame with the experiment
//! loaded, and the peak RSS then, of the release binary run in tmux (skipped without tmux).

// The TUI is the binary's own module (the library cannot name a frontend): the benchmark
// compiles it from its source, with the library's modules at its root as the binary has them.
#[allow(dead_code, unused_imports)]
#[path = "../src/tui/mod.rs"]
mod tui;
#[allow(unused_imports)]
use primus_tune::{
    app, checklist, config, domain, gemm, megatron, report, run, store, telemetry, tune, util,
};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use primus_tune::app::views::config as load;
use primus_tune::config::LoadOptions;
use primus_tune::config::env::Env;
use primus_tune::domain::trial::Summary;
use primus_tune::domain::trial::{Failure, FailureClass, Iteration};
use primus_tune::run::process::Stream;
use primus_tune::run::trial::TrialEvent;
use primus_tune::store::{TrialRow, TrialStatus};
use primus_tune::telemetry::GpuInfo;
use primus_tune::testkit;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tui::app::{self as screen, App, HISTORY, Msg};
use tui::theme::{Palette, Theme};
use tui::widgets;

const W: u16 = 200;
const H: u16 = 60;
const FRAMES: usize = 200;
const GPUS: u32 = 8;
const TRIALS: i64 = 1000;
const STARTS: usize = 10;

fn experiment() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("presets/examples/experiments/moe_16B-BF16-pretrain.yaml")
}

fn key(app: &mut App, code: KeyCode) {
    screen::update(app, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// A stored trial of the shared fixtures, with its own micro batch, step time and outcome (every
/// tenth ran out of memory).
fn trial_row(id: i64) -> TrialRow {
    let failed = id % 10 == 0;
    let step = 1100.0 + (id * 37 % 300) as f64;
    let status = if failed {
        TrialStatus::Failed
    } else {
        TrialStatus::Completed
    };
    let overrides = vec![
        ("micro_batch_size", json!(1 + id % 8)),
        ("use_turbo_grouped_gemm", json!(id % 2 == 0)),
    ];
    let mut row = testkit::trial_row(id, status, overrides, &experiment());
    row.failure = failed.then(|| Failure {
        class: FailureClass::Oom,
        line: Some("torch.OutOfMemoryError: HIP out of memory".into()),
    });
    row.exit_code = Some(i32::from(failed));
    row.median_step_ms = (!failed).then_some(step);
    row.tokens_per_s_per_gpu = (!failed).then_some(131_072_000.0 / step);
    row.tflops_per_gpu = (!failed).then_some(163_000.0 / step);
    row.peak_mem_gib = (!failed).then_some(140.0);
    row
}

/// A listed trial: what it ran differently from the experiment (its overrides here).
fn trial_summary(id: i64) -> primus_tune::app::views::trials::TrialSummary {
    use primus_tune::app::views::compare::Difference;
    let row = trial_row(id);
    let differences = row
        .overrides
        .iter()
        .filter(|(k, _)| k != "train_iters")
        .map(|(k, v)| Difference {
            flag: k.clone(),
            a: serde_json::Value::Null,
            b: v.clone(),
        })
        .collect();
    primus_tune::app::views::trials::TrialSummary {
        basis: primus_tune::domain::evidence::Basis::Measured {
            profile: "primus".into(),
            gpu: Some("AMD Instinct MI300X".into()),
        },
        row,
        this_experiment: true,
        differences: Some(differences),
    }
}

/// The app with the example loaded, a trial of 50 iterations and a full log, 8 GPUs × 1200
/// telemetry snapshots, and 1000 trials.
fn full_app() -> App {
    let mut app = App::new(
        vec!["proxy-cpu".into(), "proxy-torch".into()],
        "proxy-cpu",
        false,
    );
    let opts = LoadOptions {
        env: Env::default(),
        ..Default::default()
    };
    let (cv, _) = load::build(&session_at(experiment(), opts), &[]).expect("example loads");
    screen::update(&mut app, Msg::Loaded(Ok((Box::new(cv), None))));
    screen::update(
        &mut app,
        Msg::TelemetryReady {
            gpus: (0..GPUS)
                .map(|i| GpuInfo {
                    index: i,
                    backend: "amdgpu-sysfs".into(),
                    name: "AMD Instinct MI300X".into(),
                    vram_total_bytes: Some(192 << 30),
                    ..Default::default()
                })
                .collect(),
            backend: "amdgpu-sysfs".into(),
            note: None,
        },
    );
    for k in 0..HISTORY as u64 {
        screen::update(
            &mut app,
            Msg::Telemetry(Box::new(testkit::snapshot(k, GPUS))),
        );
    }
    screen::update(
        &mut app,
        Msg::Trial(TrialEvent::Started {
            trial_id: 1001,
            argv: vec!["bash".into()],
            trial_dir: PathBuf::from("trials/1001"),
            basis: primus_tune::domain::evidence::Basis::Measured {
                profile: "primus".into(),
                gpu: Some("AMD Instinct MI300X".into()),
            },
        }),
    );
    for i in 1..=50u64 {
        let step = 1200.0 + (i % 7) as f64;
        screen::update(
            &mut app,
            Msg::Trial(TrialEvent::Iteration {
                it: Iteration {
                    iteration: i,
                    train_iters: Some(50),
                    elapsed_ms: Some(step),
                    tflops_per_gpu: Some(163_000.0 / step),
                    loss: Some(11.0 - 0.05 * i as f64),
                    ..Default::default()
                },
                summary: Box::new(Summary {
                    iterations: i,
                    n: i as usize,
                    median_step_ms: Some(1203.0),
                    ci95_ms: Some(1.5),
                    tflops_per_gpu: Some(135.5),
                    tokens_per_s_per_gpu: Some(108_900.0),
                    last_loss: Some(8.5),
                    peak_mem_gib: Some(140.0),
                    ..Default::default()
                }),
            }),
        );
    }
    for i in 0..screen::LOG_LINES {
        screen::update(
            &mut app,
            Msg::Trial(TrialEvent::Line {
                stream: Stream::Stdout,
                line: format!(
                    " iteration {i:>8}/50 | elapsed time per iteration (ms): 1203.0/1203.0"
                ),
            }),
        );
    }
    screen::update(
        &mut app,
        Msg::Trials(Ok((1..=TRIALS).map(trial_summary).collect())),
    );
    app
}

fn frames(label: &str, app: &mut App) {
    let theme = Theme::new(Palette::TrueColor);
    let mut term = Terminal::new(TestBackend::new(W, H)).expect("test terminal");
    for _ in 0..FRAMES / 10 {
        term.draw(|f| widgets::draw(f, app, &theme)).expect("draws");
    }
    let mut times: Vec<Duration> = (0..FRAMES)
        .map(|_| {
            let t = Instant::now();
            term.draw(|f| widgets::draw(f, app, &theme)).expect("draws");
            t.elapsed()
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    let p95 = times[times.len() * 95 / 100];
    println!(
        "  {label:<36} n={FRAMES:<4} median {:>8.3} ms   p95 {:>8.3} ms",
        median.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3
    );
}

fn bench_frames() {
    println!(
        "frame render time at {W}×{H}, {GPUS} GPUs × {HISTORY} snapshots, {TRIALS} trials, \
         true colour"
    );
    let mut app = full_app();
    frames("Checklist", &mut app);
    key(&mut app, KeyCode::Char('2'));
    frames("Flags", &mut app);
    key(&mut app, KeyCode::Char('3'));
    frames("Run", &mut app);
    key(&mut app, KeyCode::Char('4'));
    frames("Trials (1000 rows)", &mut app);
    key(&mut app, KeyCode::Enter);
    frames("Trials + detail", &mut app);
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char(' '));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char('c'));
    frames("Trials + compare", &mut app);
    key(&mut app, KeyCode::Char('?'));
    frames("Help overlay (over Trials)", &mut app);
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('5'));
    screen::update(
        &mut app,
        Msg::SweepDone(Ok((
            "memfit-1".into(),
            Some(Box::new(study_record())),
            String::new(),
        ))),
    );
    frames("Sweep (20 ranked candidates)", &mut app);
    key(&mut app, KeyCode::Char('6'));
    screen::update(
        &mut app,
        Msg::Studies(Ok((0..200).map(study_summary).collect())),
    );
    frames("Studies (200 studies)", &mut app);
    // The update side: one telemetry snapshot into a full history.
    let mut k = HISTORY as u64;
    let mut times: Vec<Duration> = (0..2000)
        .map(|_| {
            let s = Box::new(testkit::snapshot(k, GPUS));
            k += 1;
            let t = Instant::now();
            screen::update(&mut app, Msg::Telemetry(s));
            t.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "  {:<36} n={:<4} median {:>8.3} ms   p95 {:>8.3} ms",
        "update(Msg::Telemetry), full history",
        times.len(),
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() * 95 / 100].as_secs_f64() * 1e3
    );
}

/// A finished memory-fit study: 20 candidates with every kind of verdict.
fn study_record() -> primus_tune::domain::study::StudyRecord {
    use primus_tune::domain::study::{CandidateRecord, StudyRecord};
    let verdicts = [
        "winner",
        "tie",
        "slower",
        "oom",
        "ruled-out",
        "predicted-slower",
        "not-run",
    ];
    let candidates = (0..20)
        .map(|i| CandidateRecord {
            id: i,
            baseline: i == 0,
            overrides: [
                (
                    "micro_batch_size".to_string(),
                    serde_json::json!(1 << (i % 4)),
                ),
                (
                    "recompute_granularity".to_string(),
                    serde_json::json!("full"),
                ),
            ]
            .into_iter()
            .collect(),
            verdict: verdicts[i % verdicts.len()].parse().expect("a verdict"),
            why: "slower by 3.1 ± 0.8 %".into(),
            n: 24,
            step_ms: Some(400.0 + i as f64),
            ci_low_ms: Some(398.0 + i as f64),
            ci_high_ms: Some(402.0 + i as f64),
            peak_memory_bytes: Some(40 << 30),
            peak_memory_source: None,
            predicted_bytes: Some(41.0 * (1u64 << 30) as f64),
        })
        .collect();
    StudyRecord {
        space: "memory-fit".into(),
        config: "x.yaml".into(),
        profile: "proxy-torch".into(),
        gpus: 8,
        capacity_bytes: Some(192.0 * (1u64 << 30) as f64),
        candidates,
        pick: Some(0),
        gpu_seconds: 1800.0,
        trials: 31,
        log: Vec::new(),
        memory_error: Some(0.04),
        basis: None,
        unmodeled: Vec::new(),
        baseline: Some(0),
        conclusion: None,
        per_samples: None,
        statistic: primus_tune::domain::study::StepStatistic::TrimmedMean,
        knobs: Vec::new(),
        link_scale: None,
    }
}

fn study_summary(i: usize) -> primus_tune::app::views::studies::StudySummary {
    use primus_tune::app::views::studies::{StudyStatus, StudySummary};
    StudySummary {
        id: i as i64,
        name: format!("memory-fit-2026120{}T1{i:05}", i % 10),
        space: "memory-fit".into(),
        experiment: "x.yaml".into(),
        status: if i.is_multiple_of(3) {
            StudyStatus::Unfinished
        } else {
            StudyStatus::Finished
        },
        trials: 12,
        gpu_seconds: 600.0 + i as f64,
        cost_unit: "GPU",
        pick: Some(
            [("micro_batch_size".to_string(), serde_json::json!(2))]
                .into_iter()
                .collect(),
        ),
        started: "2026-12-01T10:04:05.120Z".into(),
        profile: Some("primus".into()),
        basis: None,
        unmodeled: Vec::new(),
    }
}

fn binary() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_primus-tune"));
    if built.is_file() {
        built
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/primus-tune")
    }
}

/// One start in tmux: `(first_frame_ms, rss_kb)`, or why it failed.
fn one_start(bin: &Path, run: usize, tmp: &Path) -> Result<(f64, u64), String> {
    let report = tmp.join(format!("first-frame-{run}.json"));
    let socket = format!("primus-tune-bench-{}", std::process::id());
    let session = format!("start{run}");
    let cmd = format!(
        "env {}={} XDG_DATA_HOME={} {} {} --no-tour",
        tui::FIRST_FRAME_ENV,
        report.display(),
        tmp.join("data").display(),
        bin.display(),
        experiment().display()
    );
    let ok = Command::new("tmux")
        .args(["-L", &socket, "new-session", "-d", "-s", &session])
        .args(["-x", &W.to_string(), "-y", &H.to_string(), &cmd])
        .status()
        .map_err(|e| e.to_string())?
        .success();
    if !ok {
        return Err("tmux new-session failed".into());
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let result = loop {
        if let Ok(text) = std::fs::read_to_string(&report)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
        {
            break Ok((
                v["first_frame_ms"].as_f64().unwrap_or(f64::NAN),
                v["rss_kb"].as_u64().unwrap_or(0),
            ));
        }
        if Instant::now() > deadline {
            break Err(format!("no report in {} after 20 s", report.display()));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // The program quits after writing the report; the server goes with its last session. Stop
    // this bench's own server in case it did not.
    std::thread::sleep(Duration::from_millis(50));
    let _ = Command::new("tmux")
        .args(["-L", &socket, "kill-server"])
        .stderr(std::process::Stdio::null())
        .status();
    result
}

fn bench_start() {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("start-up: skipped (tmux is not installed; it needs a real terminal)");
        return;
    }
    let bin = binary();
    if !bin.is_file() {
        println!("start-up: skipped ({} is absent)", bin.display());
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    println!(
        "start-up in tmux ({W}×{H}): {} {} --no-tour",
        bin.display(),
        experiment().display()
    );
    let mut ms = Vec::new();
    let mut rss = Vec::new();
    // One start first, not counted (page cache).
    if let Err(e) = one_start(&bin, 0, tmp.path()) {
        println!("start-up: skipped ({e})");
        return;
    }
    for run in 1..=STARTS {
        match one_start(&bin, run, tmp.path()) {
            Ok((m, r)) => {
                ms.push(m);
                rss.push(r);
            }
            Err(e) => println!("  run {run}: {e}"),
        }
    }
    if ms.is_empty() {
        return;
    }
    ms.sort_by(f64::total_cmp);
    rss.sort();
    println!(
        "  start to first frame (config loaded)  n={:<4} median {:>8.1} ms   min {:>6.1}   max {:>6.1}",
        ms.len(),
        ms[ms.len() / 2],
        ms[0],
        ms[ms.len() - 1]
    );
    println!(
        "  peak RSS at the first frame (VmHWM)   n={:<4} median {:>8.1} MiB  min {:>6.1}   max {:>6.1}",
        rss.len(),
        rss[rss.len() / 2] as f64 / 1024.0,
        rss[0] as f64 / 1024.0,
        rss[rss.len() - 1] as f64 / 1024.0
    );
}

fn main() {
    bench_frames();
    bench_start();
}

/// A session on `experiment` with `opts` and a workspace that does not exist (nothing stored).
fn session_at(
    experiment: impl Into<std::path::PathBuf>,
    opts: LoadOptions,
) -> primus_tune::app::Session {
    primus_tune::app::Session::new(
        experiment.into(),
        opts,
        primus_tune::store::Workspace::at(
            "/nonexistent/primus-tune-test-workspace".into(),
            primus_tune::store::WorkspaceOrigin::Chosen,
        ),
    )
}
