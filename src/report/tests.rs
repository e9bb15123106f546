use super::build::predicted_ms;
use super::markdown::cell;
use super::*;
use crate::telemetry::GpuSample;
use serde_json::json;

fn cand(id: usize, mbs: i64, verdict: &str, step: Option<f64>) -> CandidateRecord {
    CandidateRecord {
        id,
        baseline: false,
        overrides: [("micro_batch_size".to_string(), json!(mbs))]
            .into_iter()
            .collect(),
        verdict: verdict.parse().unwrap(),
        why: format!("{verdict} because"),
        n: if step.is_some() { 12 } else { 0 },
        step_ms: step,
        ci_low_ms: step.map(|m| m - 1.0),
        ci_high_ms: step.map(|m| m + 2.0),
        peak_memory_bytes: step.map(|m| (m as u64) << 30),
        peak_memory_source: None,
        predicted_bytes: Some((mbs as f64 + 10.0) * GIB),
    }
}

fn record() -> StudyRecord {
    StudyRecord {
        space: "mbs".into(),
        config: "/x/exp.yaml".into(),
        profile: "proxy-cpu".into(),
        gpus: 8,
        capacity_bytes: Some(192.0 * GIB),
        candidates: vec![
            cand(0, 1, "slower", Some(120.0)),
            cand(1, 2, "winner", Some(100.0)),
            cand(2, 4, "oom", None),
        ],
        pick: Some(1),
        gpu_seconds: 90.0,
        trials: 3,
        log: vec!["rung 1".into(), "pick: #1".into()],
        memory_error: Some(0.05),
        basis: Some(crate::domain::evidence::Basis::Proxy {
            profile: "proxy-cpu".into(),
        }),
        unmodeled: Vec::new(),
        baseline: None,
        conclusion: None,
        per_samples: None,
        statistic: crate::domain::study::StepStatistic::TrimmedMean,
        knobs: Vec::new(),
        link_scale: None,
    }
}

fn trial(id: i64, mbs: i64, iters: u64, tokens: Option<f64>) -> TrialRow {
    serde_json::from_value(json!({
        "id": id, "study_id": 1, "status": "completed", "created_at": "t", "updated_at": "t",
        "config_path": "/x/exp.yaml", "config_hash": "h",
        "overrides": [{"key": "micro_batch_size", "value": mbs},
                      {"key": "train_iters", "value": iters}],
        "argv": [], "env": [], "trial_dir": "/x/t", "iterations_seen": iters,
        "iterations_stored": iters, "tokens_per_s_per_gpu": tokens,
    }))
    .unwrap()
}

fn space(yaml: &str) -> Space {
    Space::parse(yaml, "test").unwrap()
}

fn snap(ts_ms: u64, gpus: &[(f64, f64, u64)]) -> Snapshot {
    Snapshot {
        ts_ms,
        gpus: gpus
            .iter()
            .enumerate()
            .map(|(i, &(util, power, vram))| GpuSample {
                gpu: i as u32,
                util_pct: Some(util),
                power_w: Some(power),
                vram_used_bytes: Some(vram << 30),
                ..GpuSample::default()
            })
            .collect(),
        ..Snapshot::default()
    }
}

fn mbs_space() -> Space {
    space("name: mbs\ndescription: d\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2, 4]\n")
}

/// The study measured on a GPU profile: its peaks are the config's.
fn gpu_record() -> StudyRecord {
    let mut rec = record();
    rec.profile = "megatron".into();
    rec.basis = Some(Basis::Measured {
        profile: "megatron".into(),
        gpu: Some("AMD Instinct MI300X".into()),
    });
    rec
}

fn report_of(trials: &[TrialRow], samples: &BTreeMap<i64, Vec<Snapshot>>) -> Report {
    let rec = gpu_record();
    let sp = mbs_space();
    build(&Inputs {
        name: "s1",
        record: &rec,
        space: Some(&sp),
        trials,
        samples,
        module: "pre_trainer",
        // As the app layer decides for a study measured on a GPU.
        memory: crate::domain::study::MemoryCheck::Compared {
            mean_error: 0.05,
            candidates: 1,
        },
    })
}

/// The report of `rec` with no trials or samples.
fn record_report(rec: &StudyRecord, memory: crate::domain::study::MemoryCheck) -> Report {
    let sp = mbs_space();
    build(&Inputs {
        name: "s1",
        record: rec,
        space: Some(&sp),
        trials: &[],
        samples: &BTreeMap::new(),
        module: "pre_trainer",
        memory,
    })
}

#[test]
fn a_proxy_study_draws_no_forecast_beside_its_peaks() {
    let rec = record();
    assert!(rec.candidates.iter().any(|c| c.predicted_bytes.is_some()));
    let memory = crate::domain::study::MemoryCheck::NotCompared {
        why: "proxy-cpu is a CPU stand-in".into(),
    };
    let r = record_report(&rec, memory);
    assert!(r.rows.iter().all(|x| x.predicted_gib.is_none()));
    let md = r.markdown();
    assert!(
        md.contains("| Memory model | not compared: proxy-cpu is a CPU stand-in |"),
        "{md}"
    );
}

/// A CPU stand-in's winner: this node's GPUs were not its evidence, so no GPU telemetry is
/// drawn or tabled, the report says why, and its cost is CPU time.
#[test]
fn a_stand_in_s_report_shows_no_gpu_telemetry_and_counts_cpu_time() {
    let rec = record();
    let sp = mbs_space();
    let trials = vec![trial(2, 2, 12, Some(1150.0))];
    let samples: BTreeMap<i64, Vec<Snapshot>> = [(2, vec![snap(10_000, &[(87.0, 612.0, 40)])])]
        .into_iter()
        .collect();
    let r = build(&Inputs {
        name: "s1",
        record: &rec,
        space: Some(&sp),
        trials: &trials,
        samples: &samples,
        module: "pre_trainer",
        memory: crate::domain::study::MemoryCheck::NotCompared {
            why: "proxy-cpu is a CPU stand-in".into(),
        },
    });
    assert!(r.telemetry.is_empty());
    let why: Vec<String> = r
        .charts()
        .into_iter()
        .filter_map(|c| c.err().map(|(_, why)| why))
        .collect();
    assert!(why.iter().any(|w| w.contains("CPU stand-in")), "{why:?}");
    let md = r.markdown();
    assert!(md.contains("| CPU time | 1.5 CPU-minutes |"), "{md}");
    assert!(!md.contains("GPU-minutes"), "{md}");
}

#[test]
fn a_single_knob_study_reads_by_its_values() {
    let trials = vec![
        trial(1, 1, 12, Some(1000.0)),
        trial(2, 2, 12, Some(1150.0)),
        trial(3, 2, 36, Some(1200.0)),
        trial(4, 4, 12, None),
    ];
    let samples: BTreeMap<i64, Vec<Snapshot>> = [(
        3,
        vec![
            snap(10_000, &[(90.0, 500.0, 40), (70.0, 300.0, 42)]),
            snap(10_500, &[(100.0, 600.0, 41), (80.0, 400.0, 43)]),
            // A host-only sample: skipped.
            Snapshot {
                ts_ms: 11_000,
                ..Snapshot::default()
            },
        ],
    )]
    .into_iter()
    .collect();
    let r = report_of(&trials, &samples);
    let labels: Vec<&str> = r.rows.iter().map(|x| x.label.as_str()).collect();
    assert_eq!(labels, ["1", "2", "4"]);
    assert_eq!(r.category_axis, "micro_batch_size");
    assert!(!r.horizontal);
    assert_eq!(r.winner, Some(1));
    assert_eq!(r.rows[1].trials, vec![2, 3]);
    // Tokens/s of the longest trial; every measured candidate has it.
    assert_eq!(r.rows[1].tokens_per_s, Some(1200.0));
    assert_eq!(r.metric, Metric::TokensPerS);
    let (v, lo, hi) = r.rows[1].throughput(Metric::TokensPerS).unwrap();
    assert_eq!(v, 1200.0);
    assert!(
        (lo - 1200.0 * 100.0 / 102.0).abs() < 1e-9 && (hi - 1200.0 * 100.0 / 99.0).abs() < 1e-9
    );
    assert_eq!(r.capacity_gib, Some(192.0));
    // Only trial 3 (of the winner) has samples: mean utilisation, mean power, fullest VRAM.
    assert_eq!(r.telemetry.len(), 1);
    assert_eq!(r.telemetry_gpus, 2);
    let t = &r.telemetry[0];
    assert_eq!((t.trial_id, t.iters), (3, Some(36)));
    assert_eq!(t.points.len(), 2);
    assert_eq!(t.points[1].t_s, 0.5);
    assert_eq!(t.points[0].util_pct, Some(80.0));
    assert_eq!(t.points[0].power_w, Some(400.0));
    assert_eq!(t.points[1].vram_gib, Some(43.0));
    assert_eq!(t.label(), "trial 3 (36 iterations)");
    let ranked: Vec<usize> = r.ranked().iter().map(|x| x.id).collect();
    assert_eq!(ranked, [1, 0, 2]);
    assert_eq!(
        r.snippet().unwrap(),
        "modules:\n  pre_trainer:\n    overrides:\n      micro_batch_size: 2\n"
    );
    let md = r.markdown();
    assert!(
        md.contains(
            "| 1 | 1 | **micro_batch_size=2** | winner | 100.0 | 99.0–102.0 | 12 | 1,200 |"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "| 3 | 2 | micro_batch_size=4 | oom | – | – | 0 | – | – | 14.00 | oom because |"
        ),
        "{md}"
    );
    assert!(
        md.contains("![Telemetry of the winner](telemetry.svg)"),
        "{md}"
    );
    assert!(
        md.contains("| trial 3 (36 iterations) | 2 | 0.5 | 85.0 | 450 | 43.00 |"),
        "{md}"
    );
    assert!(
        md.contains("| Memory model | mean error 5.0 % against the measured peaks (1 candidate) |"),
        "{md}"
    );
    assert!(md.contains("1. rung 1\n2. pick: #1\n"), "{md}");
    assert!(r.charts().iter().all(Result::is_ok));
}

#[test]
fn without_tokens_or_telemetry_it_says_so() {
    let trials = vec![trial(1, 1, 12, Some(1000.0)), trial(2, 2, 12, None)];
    let r = report_of(&trials, &BTreeMap::new());
    assert_eq!(r.metric, Metric::StepMs);
    assert!(r.telemetry.is_empty());
    let skipped: Vec<String> = r
        .charts()
        .into_iter()
        .filter_map(|c| c.err().map(|(c, why)| format!("{}: {why}", c.stem())))
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(
        skipped[0].starts_with("telemetry: no GPU telemetry"),
        "{skipped:?}"
    );
    assert!(
        r.markdown()
            .contains("No chart: no GPU telemetry was stored")
    );
}

#[test]
fn several_knobs_and_flag_groups_get_short_labels() {
    let sp = space(
        "name: mf\ndescription: d\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2]\n  - flag: \"@recompute\"\n    values:\n      - {recompute_granularity: null, recompute_num_layers: null}\n      - {recompute_granularity: full, recompute_num_layers: 2}\n",
    );
    let mut rec = record();
    rec.candidates = sp
        .candidates()
        .into_iter()
        .map(|c| CandidateRecord {
            overrides: c.overrides,
            ..cand(c.id, 1, "slower", Some(100.0 + c.id as f64))
        })
        .collect();
    rec.pick = Some(0);
    let r = build(&Inputs {
        name: "mf",
        record: &rec,
        space: Some(&sp),
        trials: &[],
        samples: &BTreeMap::new(),
        module: "pre_trainer",
        memory: crate::domain::study::MemoryCheck::Nothing,
    });
    let labels: Vec<&str> = r.rows.iter().map(|x| x.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "#0 micro_batch_size=1, recompute=none",
            "#1 micro_batch_size=1, recompute=full/2",
            "#2 micro_batch_size=2, recompute=none",
            "#3 micro_batch_size=2, recompute=full/2",
        ]
    );
    assert_eq!(r.category_axis, "candidate");
    assert!(r.horizontal, "long labels go down the side");
    assert_eq!(
        r.knobs[1],
        "`@recompute`: {recompute_granularity=none, recompute_num_layers=none} · {recompute_granularity=full, recompute_num_layers=2}"
    );
    assert_eq!(
        r.snippet().unwrap(),
        "modules:\n  pre_trainer:\n    overrides:\n      micro_batch_size: 1\n      recompute_granularity: null\n      recompute_num_layers: null\n"
    );
    // Without the space: the settings.
    let r = build(&Inputs {
        name: "mf",
        record: &rec,
        space: None,
        trials: &[],
        samples: &BTreeMap::new(),
        module: "pre_trainer",
        memory: crate::domain::study::MemoryCheck::Nothing,
    });
    assert_eq!(
        r.rows[1].label,
        "#1 micro_batch_size=1 recompute_granularity=full recompute_num_layers=2"
    );
}

#[test]
fn zero_peaks_and_negative_predictions_are_not_taken_at_face_value() {
    let mut rec = gpu_record();
    rec.candidates[2].peak_memory_bytes = Some(0);
    rec.candidates[0].predicted_bytes = Some(-5.0 * GIB);
    // What the app layer gives a study measured on a GPU (its test checks the figure).
    let memory = crate::domain::study::MemoryCheck::Compared {
        mean_error: 0.5,
        candidates: 2,
    };
    let r = record_report(&rec, memory);
    assert_eq!(r.rows[2].peak_gib, None, "an OOM trial's 0 is no peak");
    assert_eq!(r.rows[0].predicted_gib, Some(-5.0));
    let md = r.markdown();
    assert!(
        md.contains("(2 candidates); 1 prediction at or below 0 GiB (the calibration is off) |"),
        "{md}"
    );
    let mut svg = String::new();
    {
        use plotters::prelude::*;
        charts::register_font().unwrap();
        let root =
            SVGBackend::with_string(&mut svg, charts::Chart::Memory.size(&r)).into_drawing_area();
        charts::draw(&root, &r, charts::Chart::Memory).unwrap();
        root.present().unwrap();
    }
    assert!(svg.contains("-5.0 (invalid)"));
    assert!(svg.contains("out of memory, no peak reported"));
}

/// A trial across two nodes gets a row per node, the slowest flagged; one on a single node
/// (or on this machine) gets none, and without such trials there is no section.
#[test]
fn a_trial_across_nodes_gets_a_per_node_table() {
    use crate::domain::telemetry::GpuSummary;
    let node = |name: &str, step: f64, temp: f64, slowest: bool, hottest: bool| NodeSummary {
        node: name.into(),
        samples: 20,
        gpus: vec![
            GpuSummary {
                gpu: 0,
                samples: 20,
                util_mean_pct: Some(90.0),
                vram_peak_bytes: Some(140 << 30),
                temp_max_c: [("junction".to_string(), temp)].into_iter().collect(),
                ..GpuSummary::default()
            },
            GpuSummary {
                gpu: 1,
                samples: 20,
                util_mean_pct: Some(80.0),
                vram_peak_bytes: Some(141 << 30),
                ..GpuSummary::default()
            },
        ],
        cpu_mean_pct: Some(35.2),
        temp_max_c: Some(temp),
        median_step_ms: Some(step),
        iterations: 40,
        slowest,
        hottest,
    };
    let mut across = trial(2, 2, 12, None);
    across.summary = Some(json!({
        "nodes": [node("gpu-a1", 1210.0, 80.0, false, true), node("gpu-a2", 1250.5, 70.0, true, false)],
    }));
    let mut one = trial(3, 2, 36, None);
    one.summary = Some(json!({ "nodes": [node("gpu-b1", 1200.0, 70.0, false, false)] }));
    let plain = trial(1, 1, 12, None);
    let r = report_of(&[plain.clone(), across, one], &BTreeMap::new());
    assert_eq!(r.nodes.len(), 1);
    assert_eq!(r.nodes[0].0, 2);
    let md = r.markdown();
    assert!(md.contains("## Per node\n"), "{md}");
    assert!(
        md.contains("| 2 | gpu-a1 | 1210.0 | 40 | 35 | 85 | 141.00 | 80 | hottest |"),
        "{md}"
    );
    assert!(
        md.contains("| 2 | gpu-a2 | 1250.5 | 40 | 35 | 85 | 141.00 | 70 | slowest |"),
        "{md}"
    );
    assert!(!md.contains("gpu-b1"), "{md}");
    // The section sits between the evidence and the charts.
    let at = |h: &str| md.find(h).unwrap();
    assert!(at("## Evidence") < at("## Per node") && at("## Per node") < at("## Charts"));
    let md = report_of(&[plain], &BTreeMap::new()).markdown();
    assert!(!md.contains("## Per node"), "{md}");
}

#[test]
fn a_predicted_step_time_is_read_from_the_reason() {
    assert_eq!(
        predicted_ms("not run: predicted 2790.5 ms, 12.5 % slower than #1 (predicted 2480.0 ms)"),
        Some(2790.5)
    );
    assert_eq!(
        predicted_ms("not run: recomputation adds work: #3 fits"),
        None
    );
    assert_eq!(predicted_ms("predicted 352 GiB"), None);
}

#[test]
fn yaml_scalars_read_back_as_written() {
    assert_eq!(yaml_scalar(&json!("selective")), "selective");
    assert_eq!(yaml_scalar(&json!("true")), "\"true\"");
    assert_eq!(yaml_scalar(&json!("1e-5")), "\"1e-5\"");
    assert_eq!(yaml_scalar(&json!("a b")), "\"a b\"");
    assert_eq!(yaml_scalar(&json!(null)), "null");
    assert_eq!(yaml_scalar(&json!(2.5)), "2.5");
    assert_eq!(cell("a|b"), "a\\|b");
}

/// Every chart draws on the SVG backend (its text as text) and on a bitmap (its text as
/// pixels, from the embedded font).
#[test]
fn charts_draw_with_labels_and_legends() {
    use plotters::prelude::*;
    let trials = vec![trial(1, 1, 12, None), trial(2, 2, 12, None)];
    let samples: BTreeMap<i64, Vec<Snapshot>> = [(
        2,
        vec![
            snap(0, &[(50.0, 300.0, 10)]),
            snap(500, &[(60.0, 310.0, 11)]),
        ],
    )]
    .into_iter()
    .collect();
    let r = report_of(&trials, &samples);
    charts::register_font().unwrap();
    let expect: [(charts::Chart, &[&str]); 4] = [
        (
            charts::Chart::Throughput,
            &[
                "step time, 20 % trimmed mean (ms), lower is better",
                "micro_batch_size",
                "winner (the pick)",
                "ran out of memory",
            ],
        ),
        (
            charts::Chart::Memory,
            &[
                "peak memory per GPU (GiB)",
                "measured peak per GPU",
                "predicted by the memory model",
                "GPU capacity (192.0 GiB)",
            ],
        ),
        (
            charts::Chart::Pareto,
            &[
                "Step time against peak memory",
                "peak memory per GPU (GiB)",
                "micro_batch_size=2 · 100.0 ms · 100.0 GiB",
                "the pick",
            ],
        ),
        (
            charts::Chart::Telemetry,
            &[
                "utilisation (%)",
                "power (W)",
                "VRAM used (GiB)",
                "trial 2 (12 iterations)",
            ],
        ),
    ];
    for (chart, texts) in expect {
        let size = chart.size(&r);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            charts::draw(&root, &r, chart).unwrap();
            root.present().unwrap();
        }
        for t in texts {
            assert!(svg.contains(t), "{}: no `{t}`", chart.stem());
        }
        let mut px = vec![255u8; (size.0 * size.1 * 3) as usize];
        {
            let root = text::Crisp(BitMapBackend::with_buffer(&mut px, size)).into_drawing_area();
            charts::draw(&root, &r, chart).unwrap();
            root.present().unwrap();
        }
        // The title's glyphs: dark pixels in the top band.
        let dark = px[..(size.0 * 36 * 3) as usize]
            .chunks(3)
            .filter(|p| p.iter().all(|c| *c < 100))
            .count();
        assert!(
            dark > 200,
            "{}: {dark} dark pixels in the title band",
            chart.stem()
        );
    }
}
