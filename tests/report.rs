//! `report` end to end: a real study from `sweep` (a shell workload printing Megatron lines with
//! tokens/s and memory, its step time set by the micro batch size, out of memory at 8), then the
//! Markdown report and its PNG and SVG charts; the winner's telemetry chart once samples are
//! stored; the error cases.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, cmd};

use std::path::Path;
use std::process::Output;

/// Step time 120 ms at micro batch 1, 100 ms at 2, 95 ms at 4 (±1 ms of noise); tokens/s from
/// the step time; peak memory 20 + 12 × micro batch GB; out of memory at 8.
const WORKLOAD: &str = r#"mbs=$(grep -o '"micro_batch_size": *[0-9]*' "$1/resolved.json" | grep -o '[0-9]*$')
if [ "$mbs" -ge 8 ]; then echo "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB" >&2; exit 1; fi
case $mbs in 1) base=120;; 2) base=100;; *) base=95;; esac
mem=$((20 + 12 * mbs))
i=1
while [ $i -le 200 ]; do
  ms=$((base + (i % 2) * 2 - 1))
  tps=$((16384000 / ms))
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | tokens per GPU (tokens/s/GPU): %s.0/%s.0 | learning rate: 1.000000E-04 | global batch size:   128 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 | hip mem usage/free/total/usage_ratio: %s.00GiB/10.00GiB/80.00GiB/50.00%%\n' $i 200 $i $ms $tps $tps $mem
  i=$((i + 1))
  sleep 0.01
done
"#;

fn setup() -> Setup {
    common::setup("report-workload", WORKLOAD, "mbs-report")
}

fn sweep(s: &Setup, name: &str) {
    let out = cmd(s)
        .args([
            "sweep",
            s.exp.to_str().unwrap(),
            "--profile",
            "report-workload",
            "--space",
            s.space.to_str().unwrap(),
            "--name",
            name,
            "--first-iters",
            "12",
            "--max-iters",
            "36",
            "--capacity-gib",
            "192",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn report(s: &Setup, study: &str, out: &Path) -> Output {
    cmd(s)
        .args([
            "report",
            study,
            "--out",
            out.to_str().unwrap(),
            "--config",
            s.exp.to_str().unwrap(),
        ])
        .output()
        .unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn assert_png(p: &Path) {
    let bytes = std::fs::read(p).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        p.display()
    );
    assert!(
        bytes.len() > 5_000,
        "{}: {} bytes",
        p.display(),
        bytes.len()
    );
}

/// An SVG that looks well formed: the root element, closed, with every `<text>` closed.
fn assert_svg(p: &Path, texts: &[&str]) {
    let svg = read(p);
    assert!(
        svg.trim_start().starts_with("<svg"),
        "{}",
        &svg[..200.min(svg.len())]
    );
    assert!(svg.trim_end().ends_with("</svg>"), "{}", p.display());
    assert_eq!(
        svg.matches("<text").count(),
        svg.matches("</text>").count(),
        "{}",
        p.display()
    );
    for t in texts {
        assert!(svg.contains(t), "{} lacks `{t}`", p.display());
    }
}

fn db(s: &Setup) -> primus_tune::store::Store {
    primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap()
}

#[test]
fn report_of_a_real_sweep_with_charts_and_telemetry() {
    let s = setup();
    sweep(&s, "mbs-r");
    let out_dir = s.dir.path().join("report");
    let out = report(&s, "mbs-r", &out_dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // No GPU here: the sweep stored no GPU telemetry, so no telemetry chart, with the reason.
    assert!(stdout.contains("no telemetry chart"), "{stdout}");
    for stem in ["throughput", "memory"] {
        assert_png(&out_dir.join(format!("{stem}.png")));
    }
    assert!(!out_dir.join("telemetry.png").exists());
    assert_svg(
        &out_dir.join("throughput.svg"),
        &[
            "throughput (tokens/s per GPU), higher is better",
            "micro_batch_size",
            "winner (the pick)",
            "median with 95 % CI",
            "not measured",
            "OOM",
        ],
    );
    assert_svg(
        &out_dir.join("memory.svg"),
        &[
            "peak memory per GPU (GiB)",
            "measured peak per GPU",
            "predicted by the memory model",
            "GPU capacity (192.0 GiB)",
        ],
    );

    let md = read(&out_dir.join("report.md"));
    assert!(md.contains("# Sweep report: `mbs-r`"), "{md}");
    assert!(md.contains("| Space | `mbs-report` |"), "{md}");
    assert!(
        md.contains("| Launch profile | `report-workload` |"),
        "{md}"
    );
    assert!(md.contains("192.0 GiB per GPU"), "{md}");
    // The pick and its YAML snippet.
    let record: primus_tune::domain::study::StudyRecord = serde_json::from_str(
        db(&s)
            .study_by_name("mbs-r")
            .unwrap()
            .unwrap()
            .notes
            .as_deref()
            .unwrap(),
    )
    .unwrap();
    let pick = record
        .candidates
        .iter()
        .find(|c| Some(c.id) == record.pick)
        .unwrap();
    let mbs = pick.overrides["micro_batch_size"].as_i64().unwrap();
    assert!(
        md.contains(&format!(
            "**micro_batch_size={mbs}** (candidate {})",
            pick.id
        )),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "```yaml\nmodules:\n  pre_trainer:\n    overrides:\n      micro_batch_size: {mbs}\n```"
        )),
        "{md}"
    );
    // One table row per candidate, with its verdict.
    for c in &record.candidates {
        let row = md
            .lines()
            .find(|l| {
                l.starts_with('|')
                    && l.contains(&format!(
                        "micro_batch_size={}",
                        c.overrides["micro_batch_size"]
                    ))
                    && l.contains(&format!("| {} |", c.verdict))
            })
            .unwrap_or_else(|| panic!("no row for candidate {}:\n{md}", c.id));
        assert!(row.contains(&format!("| {} |", c.id)), "{row}");
    }
    assert!(
        ["| oom |", "| ruled-out |", "| predicted-oom |"]
            .iter()
            .any(|v| md.contains(v)),
        "{md}"
    );
    // Tokens/s came through from the trials (16384000 / ~95 ms).
    let pick_row = md
        .lines()
        .find(|l| l.contains(&format!("**micro_batch_size={mbs}**")) && l.starts_with("| 1 |"))
        .unwrap();
    let cells: Vec<&str> = pick_row.split('|').map(str::trim).collect();
    let tokens: f64 = cells[8].parse().unwrap_or_else(|_| panic!("{pick_row}"));
    assert!((100_000.0..200_000.0).contains(&tokens), "{pick_row}");
    assert!(
        md.contains("![Throughput by candidate](throughput.svg)"),
        "{md}"
    );
    assert!(md.contains("[throughput.png](throughput.png)"), "{md}");
    assert!(
        md.contains("![Peak memory by candidate](memory.svg)"),
        "{md}"
    );
    assert!(md.contains("No chart: no GPU telemetry was stored"), "{md}");
    assert!(md.contains("## Decision log"), "{md}");
    assert!(md.contains(&format!("1. {}", record.log[0])), "{md}");
    assert!(md.contains("| Memory model | mean error"), "{md}");

    // Telemetry of the winner's trials (as a GPU backend would have stored it): the chart.
    let store = db(&s);
    let study = store.study_by_name("mbs-r").unwrap().unwrap();
    let trials = store
        .list_trials(&primus_tune::store::TrialFilter::all().study(study.id))
        .unwrap();
    let mine: Vec<_> = trials
        .iter()
        .filter(|t| primus_tune::report::ran(t, &pick.overrides))
        .collect();
    assert!(!mine.is_empty());
    for t in &mine {
        let snaps: Vec<_> = (0..20u64)
            .map(|k| primus_tune::telemetry::sampler::Snapshot {
                ts_ms: 1_000_000 + 500 * k,
                gpus: (0..2)
                    .map(|g| primus_tune::telemetry::GpuSample {
                        gpu: g,
                        util_pct: Some(if k < 3 { 10.0 } else { 95.0 }),
                        power_w: Some(300.0 + 20.0 * g as f64),
                        vram_used_bytes: Some((40 + k) << 30),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        store.add_samples(t.id, &snaps).unwrap();
    }
    drop(store);
    let out = report(&s, "mbs-r", &out_dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_png(&out_dir.join("telemetry.png"));
    assert_svg(
        &out_dir.join("telemetry.svg"),
        &[
            "utilisation (%)",
            "power (W)",
            "VRAM used (GiB)",
            "time since the first sample of the trial (s)",
            &format!("trial {}", mine[0].id),
            "GPU capacity (192.0 GiB)",
        ],
    );
    let md = read(&out_dir.join("report.md"));
    assert!(
        md.contains("![Telemetry of the winner](telemetry.svg)"),
        "{md}"
    );
    assert!(
        md.contains("| 2 GPUs") || md.contains("from 2 GPU(s)"),
        "{md}"
    );
}

#[test]
fn report_errors_say_their_kind_in_the_exit_status() {
    let s = setup();
    let out_dir = s.dir.path().join("r");
    // No database yet: no input (66); the other failures below are errors (2).
    let out = report(&s, "nope", &out_dir);
    assert_eq!(out.status.code(), Some(66));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no trial database"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An unknown study, and a study without a result.
    let store = db(&s);
    store
        .create_study("unfinished", &s.exp, "mbs-report")
        .unwrap();
    drop(store);
    let out = report(&s, "nope", &out_dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no study `nope`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = report(&s, "unfinished", &out_dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no result yet"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out_dir.exists(), "nothing written on an error");
    // An output folder that cannot be made (a file is in the way).
    let record = serde_json::json!({
        "space": "mbs-report", "config": s.exp.display().to_string(), "profile": "p",
        "gpus": 1, "capacity_bytes": null, "pick": null, "gpu_seconds": 0.0, "trials": 0,
        "log": [], "memory_error": null,
        "candidates": [{"id": 0, "overrides": {"micro_batch_size": 1}, "verdict": "failed",
            "why": "crashed", "n": 0, "median_ms": null, "ci_low_ms": null, "ci_high_ms": null,
            "peak_memory_bytes": null, "predicted_bytes": null}]
    });
    let store = db(&s);
    let id = store.create_study("done", &s.exp, "mbs-report").unwrap();
    store
        .set_study_notes(id, Some(&record.to_string()))
        .unwrap();
    drop(store);
    let blocker = s.dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let out = report(&s, "done", &blocker.join("sub"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot write the report to"), "{err}");
    // The same study into a good folder: a report without charts, saying why.
    let out = report(&s, "done", &out_dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = read(&out_dir.join("report.md"));
    assert!(md.contains("No pick"), "{md}");
    assert!(
        md.contains("No chart: no candidate produced a step time"),
        "{md}"
    );
    assert!(md.contains("| crashed |"), "{md}");
}
