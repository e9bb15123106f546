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
    report_with(s, study, out, &[])
}

/// `report` with extra arguments (chart options).
fn report_with(s: &Setup, study: &str, out: &Path, extra: &[&str]) -> Output {
    let mut c = cmd(s);
    c.args([
        "report",
        study,
        "--out",
        out.to_str().unwrap(),
        "--config",
        s.exp.to_str().unwrap(),
    ]);
    c.args(extra).output().unwrap()
}

/// A PNG's width and height, from its header.
fn png_dims(p: &Path) -> (u32, u32) {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(b.starts_with(b"\x89PNG\r\n\x1a\n"), "{}", p.display());
    let be = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    (be(16), be(20))
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
            "20 % trimmed mean with 95 % CI",
            "not measured",
        ],
    );
    // The candidate at 8 has no step time: its column says why.
    let t = read(&out_dir.join("throughput.svg"));
    assert!(
        [
            "ran out of memory",
            "not run: predicted OOM",
            "not run: ruled out"
        ]
        .iter()
        .any(|w| t.contains(w)),
        "no verdict for the unmeasured candidate"
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
    // Every step-time figure names the statistic the sweep ranked by.
    for says in [
        "step time (20 % trimmed mean)",
        "| step, 20 % trimmed mean (ms/batch) |",
        "the 95 % confidence interval of the step time (20 % trimmed mean) carried over to",
    ] {
        assert!(md.contains(says), "lacks `{says}`:\n{md}");
    }
    assert!(!md.contains("median"), "{md}");
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
    let tokens: f64 = cells[8]
        .replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("{pick_row}"));
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
    assert!(
        md.contains("![Throughput against peak memory](throughput-vs-memory.svg)"),
        "{md}"
    );
    assert_svg(
        &out_dir.join("throughput-vs-memory.svg"),
        &[
            "Throughput against peak memory",
            "Pareto front: no other candidate is both faster and smaller",
            &format!("micro_batch_size={mbs} · "),
        ],
    );

    // `--size` and `--dpi`: the PNGs are the size × DPI / 96 (kept where they can be looked at).
    let big = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("report-charts")
        .join("sweep");
    let _ = std::fs::remove_dir_all(&big);
    let out = report_with(&s, "mbs-r", &big, &["--size", "1200x800", "--dpi", "192"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for stem in ["throughput", "memory", "throughput-vs-memory"] {
        assert_eq!(
            png_dims(&big.join(format!("{stem}.png"))),
            (2400, 1600),
            "{stem}"
        );
        assert!(read(&big.join(format!("{stem}.svg"))).contains("viewBox=\"0 0 1200 800\""));
    }
    let out = report_with(&s, "mbs-r", &big, &["--size", "1200"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("WIDTHxHEIGHT"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

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
        md.contains("| 2 GPUs") || md.contains("from 2 GPUs"),
        "{md}"
    );
}

#[test]
fn report_errors_say_their_kind_in_the_exit_status() {
    let s = setup();
    let out_dir = s.dir.path().join("r");
    // No database yet, or no such study: no input (66); a study without a result: an error
    // (2); an output folder that cannot be made: cannot create (73).
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
    assert_eq!(out.status.code(), Some(66));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no study `nope`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The study named as `recommend` names it: `report CONFIG --study NAME` (the one
    // argument is then the experiment); two studies named is a usage error.
    let mut c = cmd(&s);
    let out = c
        .args([
            "report",
            s.exp.to_str().unwrap(),
            "--study",
            "nope",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(66));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no study `nope`"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = report_with(&s, "unfinished", &out_dir, &["--study", "other"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("two studies named"),
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
    assert_eq!(out.status.code(), Some(73));
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

/// Chart studies with every kind of candidate, built as the store would hold them.
mod charts {
    use primus_tune::domain::evidence::Basis;
    use primus_tune::domain::study::{CandidateRecord, StudyRecord};
    use primus_tune::report::charts::{Chart, ChartOptions, pareto};
    use primus_tune::report::{Inputs, Report, build};
    use primus_tune::store::TrialRow;
    use primus_tune::telemetry::sampler::Snapshot;
    use primus_tune::tune::space::Space;
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    const GIB: f64 = (1u64 << 30) as f64;

    /// Where the charts are written, to be looked at: `<target>/tmp/report-charts/<case>`.
    fn out_dir(case: &str) -> PathBuf {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("report-charts")
            .join(case);
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[allow(clippy::too_many_arguments)]
    fn cand(
        id: usize,
        overrides: BTreeMap<String, serde_json::Value>,
        verdict: &str,
        why: &str,
        step: Option<f64>,
        peak: Option<u64>,
        predicted: Option<f64>,
    ) -> CandidateRecord {
        CandidateRecord {
            id,
            baseline: false,
            overrides,
            verdict: verdict.parse().unwrap(),
            why: why.into(),
            n: if step.is_some() { 40 } else { 0 },
            step_ms: step,
            ci_low_ms: step.map(|m| m * 0.985),
            ci_high_ms: step.map(|m| m * 1.02),
            peak_memory_bytes: peak,
            peak_memory_source: None,
            predicted_bytes: predicted,
        }
    }

    fn record(
        space: &str,
        cands: Vec<CandidateRecord>,
        pick: usize,
        basis: Basis,
        capacity_gib: f64,
    ) -> StudyRecord {
        StudyRecord {
            space: space.into(),
            config: "/x/llama3_8B-pretrain.yaml".into(),
            profile: "local-8gpu".into(),
            gpus: 8,
            capacity_bytes: Some(capacity_gib * GIB),
            candidates: cands,
            pick: Some(pick),
            gpu_seconds: 1800.0,
            trials: 6,
            log: vec!["rung 1".into()],
            memory_error: None,
            basis: Some(basis),
            unmodeled: Vec::new(),
            baseline: None,
            conclusion: None,
            per_samples: None,
            statistic: primus_tune::domain::study::StepStatistic::TrimmedMean,
            knobs: Vec::new(),
            link_scale: None,
        }
    }

    fn trial(id: i64, mbs: i64, tokens: f64) -> TrialRow {
        serde_json::from_value(json!({
            "id": id, "study_id": 1, "status": "completed", "created_at": "t", "updated_at": "t",
            "config_path": "/x/exp.yaml", "config_hash": "h",
            "overrides": [{"key": "micro_batch_size", "value": mbs},
                          {"key": "train_iters", "value": 50}],
            "argv": [], "env": [], "trial_dir": "/x/t", "iterations_seen": 50,
            "iterations_stored": 50, "tokens_per_s_per_gpu": tokens,
        }))
        .unwrap()
    }

    /// Llama 3 8B on 8 MI300X-class GPUs, micro batch 1–32: tokens/s, the pick at 2, a tie, a
    /// candidate predicted slower (with its predicted step time), an OOM without a peak and a
    /// predicted OOM; telemetry of the pick.
    fn gpu_study() -> Report {
        let sp = Space::parse(
            "name: mbs\ndescription: d\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2, 4, 8, 16, 32]\n",
            "test",
        )
        .unwrap();
        let o = |mbs: i64| {
            [("micro_batch_size".to_string(), json!(mbs))]
                .into_iter()
                .collect()
        };
        let g = |x: f64| Some((x * GIB) as u64);
        let cands = vec![
            cand(
                0,
                o(1),
                "slower",
                "slower by 18 %",
                Some(2950.0),
                g(38.2),
                Some(39.0 * GIB),
            ),
            cand(
                1,
                o(2),
                "winner",
                "fastest",
                Some(2480.0),
                g(61.7),
                Some(60.1 * GIB),
            ),
            cand(
                2,
                o(4),
                "tie",
                "within 1 %",
                Some(2505.0),
                g(104.3),
                Some(101.0 * GIB),
            ),
            cand(
                3,
                o(8),
                "predicted-slower",
                "not run: predicted 2790.0 ms, 12.5 % slower than #1 (predicted 2480.0 ms, measured 2480.0 ms) by the additive model",
                None,
                None,
                Some(150.0 * GIB),
            ),
            cand(
                4,
                o(16),
                "oom",
                "HIP out of memory",
                None,
                Some(0),
                Some(181.0 * GIB),
            ),
            cand(
                5,
                o(32),
                "predicted-oom",
                "predicted 352 GiB",
                None,
                None,
                Some(352.0 * GIB),
            ),
        ];
        let rec = record(
            "mbs",
            cands,
            1,
            Basis::Measured {
                profile: "local-8gpu".into(),
                gpu: Some("AMD Instinct MI300X".into()),
            },
            192.0,
        );
        let tokens = |ms: f64| 8.0 * 8192.0 / (ms / 1000.0) / 8.0;
        let trials = vec![
            trial(1, 1, tokens(2950.0)),
            trial(2, 2, tokens(2480.0)),
            trial(3, 4, tokens(2505.0)),
        ];
        let samples: BTreeMap<i64, Vec<Snapshot>> = [(
            2,
            (0..60u64)
                .map(|k| Snapshot {
                    ts_ms: 1_000 * k,
                    gpus: (0..8)
                        .map(|gpu| primus_tune::telemetry::GpuSample {
                            gpu,
                            util_pct: Some(if k < 8 { 5.0 } else { 97.0 }),
                            power_w: Some(if k < 8 { 150.0 } else { 690.0 + gpu as f64 }),
                            vram_used_bytes: Some(((if k < 8 { 2 } else { 61 }) as u64) << 30),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
        )]
        .into_iter()
        .collect();
        build(&Inputs {
            name: "llama3-8b-mbs-2026-11-29T22:59",
            record: &rec,
            space: Some(&sp),
            trials: &trials,
            samples: &samples,
            module: "pre_trainer",
            memory: primus_tune::domain::study::MemoryCheck::Nothing,
        })
    }

    /// The CPU proxy over micro batch × recompute: step times, peaks of 14–41 MiB against a
    /// 192 GiB GPU, ten candidates (down the side), every verdict without a measurement.
    fn proxy_study() -> Report {
        let sp = Space::parse(
            "name: mr\ndescription: d\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2, 4, 8, 16]\n  - flag: \"@recompute\"\n    values:\n      - {recompute_granularity: null, recompute_num_layers: null}\n      - {recompute_granularity: full, recompute_num_layers: 2}\n",
            "test",
        )
        .unwrap();
        let m = |x: u64| Some(x << 20);
        let p = |x: f64| Some(x * 1024.0 * 1024.0);
        // (verdict, why, step ms, peak bytes, predicted bytes) per candidate.
        type Spec = (
            &'static str,
            &'static str,
            Option<f64>,
            Option<u64>,
            Option<f64>,
        );
        let spec: [Spec; 10] = [
            ("slower", "slower by 30 %", Some(52.0), m(27), p(26.0)),
            ("slower", "slower by 50 %", Some(60.0), m(14), p(15.0)),
            ("winner", "fastest", Some(40.0), m(41), p(40.0)),
            ("slower", "slower by 12 %", Some(45.0), m(25), p(24.0)),
            ("failed", "exit status 1", None, None, p(80.0)),
            (
                "predicted-slower",
                "not run: recomputation adds work: #3 fits",
                None,
                None,
                p(45.0),
            ),
            ("oom", "out of memory", None, m(39), p(160.0)),
            ("ruled-out", "ruled out by #6 (OOM)", None, None, p(90.0)),
            ("predicted-oom", "predicted 300 MiB", None, None, p(300.0)),
            ("not-run", "budget spent", None, None, p(180.0)),
        ];
        let cands = sp
            .candidates()
            .into_iter()
            .zip(spec)
            .map(|(c, (v, why, med, peak, pred))| cand(c.id, c.overrides, v, why, med, peak, pred))
            .collect();
        let rec = record(
            "mr",
            cands,
            2,
            Basis::Proxy {
                profile: "proxy-cpu".into(),
            },
            192.0,
        );
        build(&Inputs {
            name: "proxy-mbs-recompute",
            record: &rec,
            space: Some(&sp),
            trials: &[],
            samples: &BTreeMap::new(),
            module: "pre_trainer",
            memory: primus_tune::domain::study::MemoryCheck::NotCompared {
                why: "proxy-cpu is a CPU stand-in".into(),
            },
        })
    }

    /// Every chart kind of both studies, written where they can be looked at; the labels the
    /// issue found wrong, checked in the SVGs.
    #[test]
    fn every_chart_kind_renders_from_realistic_studies() {
        let gpu = gpu_study();
        let dir = out_dir("gpu");
        let written = gpu.write(&dir).unwrap();
        let files: Vec<String> = written
            .iter()
            .filter_map(|w| match w {
                primus_tune::report::Written::File(p) => {
                    Some(p.file_name()?.to_string_lossy().into_owned())
                }
                _ => None,
            })
            .collect();
        for stem in ["throughput", "memory", "throughput-vs-memory", "telemetry"] {
            assert!(files.contains(&format!("{stem}.png")), "{files:?}");
            assert_eq!(super::png_dims(&dir.join(format!("{stem}.png"))).0, 1600);
        }
        assert_eq!(super::png_dims(&dir.join("memory.png")), (1600, 1000));
        let svg = |d: &Path, stem: &str| super::read(&d.join(format!("{stem}.svg")));
        let t = svg(&dir, "throughput");
        for want in [
            "Throughput per candidate",
            "study llama3-8b-mbs-2026-11-29T22:59 · local-8gpu on AMD Instinct MI300X",
            "prediction, not measured",
            "not run: predicted OOM",
            "ran out of memory",
            // 8 × 8192 tokens / 2.48 s / 8 GPUs, one separator convention.
            "3,303",
            "≈2,936 predicted",
        ] {
            assert!(t.contains(want), "throughput.svg lacks `{want}`");
        }
        assert!(!t.contains("measured vs predicted"));
        let m = svg(&dir, "memory");
        for want in [
            "Peak GPU memory per candidate: measured and predicted",
            "predicted by the memory model",
            "GPU capacity (192.0 GiB)",
            "out of memory, no peak reported",
            "not run: predicted slower",
            "\n61.7\n</text>",
            "\n352.0\n</text>",
        ] {
            assert!(m.contains(want), "memory.svg lacks `{want}`");
        }
        let p = svg(&dir, "throughput-vs-memory");
        for want in [
            "Throughput against peak memory",
            "Pareto front: no other candidate is both faster and smaller",
            "micro_batch_size=2 · 3,303 · 61.7 GiB",
            "3 candidates without a step time and a peak not shown",
            "GPU capacity (192.0 GiB)",
        ] {
            assert!(p.contains(want), "throughput-vs-memory.svg lacks `{want}`");
        }
        let front: Vec<usize> = pareto::front_rows(&gpu)
            .into_iter()
            .map(|i| gpu.rows[i].id)
            .collect();
        assert_eq!(front, [0, 1], "#2 is slower and bigger than #1");
        let md = gpu.markdown();
        assert!(
            md.contains("![Throughput against peak memory](throughput-vs-memory.svg)"),
            "{md}"
        );
        assert!(md.contains("is ringed and joined: #0, #1."), "{md}");

        let proxy = proxy_study();
        assert!(proxy.horizontal);
        let dir = out_dir("proxy");
        proxy.write(&dir).unwrap();
        let m = svg(&dir, "memory");
        for want in [
            "peak memory per GPU (MiB)",
            "\n14.0\n</text>",
            "\n41.0\n</text>",
            "GPU capacity 192.0 GiB: far above these peaks, not drawn",
            "not run: ruled out",
        ] {
            assert!(m.contains(want), "proxy memory.svg lacks `{want}`");
        }
        assert!(!m.contains("\n0.0\n</text>"), "a 14 MiB peak labelled 0.0");
        let t = svg(&dir, "throughput");
        assert!(t.contains("Step time per candidate"));
        assert!(t.contains("not run: predicted slower") && t.contains("\nfailed\n</text>"));
        assert!(
            !t.contains("prediction, not measured"),
            "no predicted step time to draw"
        );
        let front: Vec<usize> = pareto::front_rows(&proxy)
            .into_iter()
            .map(|i| proxy.rows[i].id)
            .collect();
        assert_eq!(front, [1, 3, 2]);
        let p = svg(&dir, "throughput-vs-memory");
        assert!(p.contains("#3 2, full/2 · 45.0 ms · 25.0 MiB"), "{p}");
        assert!(p.contains("GPU capacity 192.0 GiB: right of the axis"));

        // Size and DPI: the PNG is the size × DPI / 96, the SVG the size.
        let dir = out_dir("gpu-2x");
        let opts = ChartOptions {
            size: Some((1200, 800)),
            dpi: 192,
        };
        primus_tune::report::charts::render(&gpu, Chart::Pareto, &dir, &opts).unwrap();
        assert_eq!(
            super::png_dims(&dir.join("throughput-vs-memory.png")),
            (2400, 1600)
        );
        assert!(svg(&dir, "throughput-vs-memory").contains("viewBox=\"0 0 1200 800\""));
        eprintln!(
            "charts in {}",
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .join("report-charts")
                .display()
        );
    }
}
