//! `primus-tune bench-replay`: the search replayed against recorded studies, as a user runs it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::{Value, json};
use std::path::PathBuf;

fn bin() -> Command {
    Command::cargo_bin("primus-tune").expect("binary")
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay")
        .join(name)
}

fn json_out(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// The grid's cost, computed from the table here (independently of the crate): every
/// candidate 50 iterations (the 2 recorded warm-up iterations, then the steady ones, wrapping),
/// an OOM start-up plus one iteration (the median first iteration of those that ran).
fn grid_cost(table: &Value) -> f64 {
    let rows = table["candidates"].as_array().unwrap();
    let mut firsts: Vec<f64> = rows
        .iter()
        .filter(|r| !r["oom"].as_bool().unwrap_or(false))
        .map(|r| r["per_iter_ms"][0].as_f64().unwrap())
        .collect();
    firsts.sort_by(f64::total_cmp);
    let oom_iter = firsts[firsts.len() / 2];
    rows.iter()
        .map(|r| {
            let startup = r["startup_s"].as_f64().unwrap_or(0.0);
            let it: Vec<f64> = r["per_iter_ms"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            if r["oom"].as_bool().unwrap_or(false) {
                return startup + it.first().copied().unwrap_or(oom_iter) / 1000.0;
            }
            let steady = &it[2..];
            let ms: f64 = it[0] + it[1] + (0..48).map(|k| steady[k % steady.len()]).sum::<f64>();
            startup + ms / 1000.0
        })
        .sum()
}

#[test]
fn oom_prunes_the_dominating_candidate_and_the_best_is_found() {
    let path = fixture("oom-dominance.json");
    let out = bin()
        .args(["bench-replay", "--json"])
        .arg(&path)
        .assert()
        .success();
    let v = json_out(&out.get_output().stdout);
    let best = json!({"micro_batch_size": 4, "recompute_num_layers": 0});
    assert_eq!(v["pick"], best, "{v:#}");
    assert_eq!(v["best"], best);
    assert_eq!(v["grid_pick"], best);
    assert_eq!(v["gap_pct"].as_f64(), Some(0.0));
    // Micro batch 8 without recompute OOMs and rules out 16 without recompute, which is never
    // launched; 16 with recompute is not dominated, runs and OOMs. The grid runs all ten.
    assert_eq!(v["ruled_out"], 1);
    assert_eq!(v["oom_trials"], 2);
    assert_eq!(v["grid_trials"], 10);
    // A launch costs 12 s here against ~1 s of iterations: start-up dominates, so each
    // candidate gets one launch (no rungs, no confirmation: a replay has no launch-to-launch
    // variation), and more recomputation at a micro batch that fits without is not launched.
    assert_eq!(v["trials"], 6, "{v:#}");
    let table: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let grid = v["grid_gpu_seconds"].as_f64().unwrap();
    assert!(
        close(grid, grid_cost(&table), 1e-6),
        "{grid} vs {}",
        grid_cost(&table)
    );
    let spent = v["gpu_seconds"].as_f64().unwrap();
    assert!(spent > 0.0 && spent < grid, "{spent} vs {grid}");
    assert!(close(v["ratio"].as_f64().unwrap(), spent / grid, 1e-9));
    assert!(v["study"].as_str().unwrap().ends_with("oom-dominance.json"));
}

#[test]
fn a_tie_goes_to_the_cheaper_cu_count() {
    let path = fixture("tie.json");
    let out = bin()
        .args(["bench-replay", "--json", "--verbose"])
        .arg(&path)
        .assert()
        .success();
    let v = json_out(&out.get_output().stdout);
    // 24 and 32 CUs are equally fast within the noise (32 by 1 ms of 1200): the fewer CUs win.
    assert_eq!(v["pick"], json!({"turbo_deepep_num_cu": 24}), "{v:#}");
    assert_eq!(v["best"], json!({"turbo_deepep_num_cu": 32}));
    assert_eq!(v["grid_pick"], json!({"turbo_deepep_num_cu": 32}));
    // 1201 against 1200 ms (× the same noise, recorded to 0.1 ms).
    assert!(
        close(v["gap_pct"].as_f64().unwrap(), 100.0 / 1200.0, 0.001),
        "{v:#}"
    );
    assert_eq!(v["grid_gap_pct"].as_f64(), Some(0.0));
    let table: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(close(
        v["grid_gpu_seconds"].as_f64().unwrap(),
        grid_cost(&table),
        1e-6
    ));
    let log: Vec<&str> = v["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        log.iter().any(|l| l.contains("cheaper in cost order")),
        "{log:?}"
    );
}

#[test]
fn several_studies_give_a_summary() {
    let out = bin()
        .args(["bench-replay", "--json", "--synthetic", "2"])
        .arg(fixture("oom-dominance.json"))
        .arg(fixture("tie.json"))
        .assert()
        .success();
    let v = json_out(&out.get_output().stdout);
    let studies = v["studies"].as_array().unwrap();
    assert_eq!(studies.len(), 4);
    assert!(
        studies[2]["study"]
            .as_str()
            .unwrap()
            .starts_with("synthetic-1")
    );
    for s in studies {
        for key in ["pick", "gpu_seconds", "best", "gap_pct", "grid_gpu_seconds"] {
            assert!(!s[key].is_null(), "{key} in {s:#}");
        }
    }
    assert_eq!(v["summary"]["studies"], 4);
    assert_eq!(v["summary"]["within_gap"], 4, "{v:#}");

    bin()
        .args(["bench-replay"])
        .arg(fixture("oom-dominance.json"))
        .arg(fixture("tie.json"))
        .assert()
        .success()
        .stdout(predicate::str::contains("search"))
        .stdout(predicate::str::contains("grid"))
        .stdout(predicate::str::contains("2 within 1 %"))
        .stdout(predicate::str::contains(
            "of 2 studies within 1 % of the best",
        ));
}

#[test]
fn bad_input_is_an_error_naming_the_file_and_a_missing_one_no_input() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken-study.json");
    std::fs::write(&bad, "{\"candidates\": [\n  {\"overrides\": {}, }\n]}\n").unwrap();
    let out = bin()
        .args(["bench-replay", "--json"])
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("broken-study.json"))
        .stderr(predicate::str::contains("line 2 column"));
    // With --json the error is JSON on stdout too, and nothing else is.
    let v = json_out(&out.get_output().stdout);
    assert_eq!(v["error"]["kind"], "failed");
    assert_eq!(v["error"]["exit_code"], 2);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("broken-study.json"),
        "{v}"
    );

    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"capacity_bytes": 1, "candidates": []}"#).unwrap();
    bin()
        .args(["bench-replay"])
        .arg(&empty)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("empty.json: no candidates"));

    bin()
        .args(["bench-replay"])
        .arg(dir.path().join("missing.json"))
        .assert()
        .code(66)
        .stderr(predicate::str::contains("missing.json"));

    bin()
        .args(["bench-replay"])
        .assert()
        .code(64)
        .stderr(predicate::str::contains(
            "needs a TABLE.json, --synthetic N or --synthetic-layouts N",
        ));
}

#[test]
fn candidates_predicted_slower_are_skipped_and_said_so() {
    let run = |extra: &[&str]| {
        let out = bin()
            .args(["bench-replay", "--json", "--verbose", "--synthetic", "5"])
            .args(extra)
            .assert()
            .success();
        json_out(&out.get_output().stdout)
    };
    let v = run(&[]);
    // synthetic-5: 48 candidates, four knobs.
    let s = &v["studies"][4];
    assert!(s["study"].as_str().unwrap().starts_with("synthetic-5 (48"));
    let skipped: Vec<&Value> = s["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p[1]["verdict"] == "predicted-slower")
        .collect();
    assert!(!skipped.is_empty(), "{s:#}");
    assert_eq!(s["predicted_slower"], skipped.len());
    let log: Vec<&str> = s["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    for p in &skipped {
        let id = p[0].as_u64().unwrap();
        // On the additive model's prediction, or by the recompute rule: said which.
        let reason = p[1]["detail"]["reason"].as_str().unwrap();
        assert!(
            reason.contains("by the additive model")
                || (reason.contains("recomputation adds work")
                    && reason.contains("not a measurement")),
            "{p}"
        );
        assert!(
            log.iter()
                .any(|l| l.starts_with(&format!("#{id} "))
                    && l.contains("predicted slower, not run")),
            "{log:?}"
        );
    }
    assert!(s["gap_pct"].as_f64().unwrap() <= 1.0, "{s:#}");
    // Without the predictions every candidate that fits gets a first trial: more GPU-seconds.
    let all = run(&["--no-prune"]);
    let a = &all["studies"][4];
    assert_eq!(a["predicted_slower"], 0);
    assert!(a["gpu_seconds"].as_f64().unwrap() > s["gpu_seconds"].as_f64().unwrap());
    // Another seed draws other studies of the same sizes.
    let other = run(&["--seed", "7"]);
    let o = &other["studies"][4];
    assert!(o["study"].as_str().unwrap().starts_with("synthetic-5 (48"));
    assert_ne!(o["grid_gpu_seconds"], s["grid_gpu_seconds"]);
    assert_eq!(
        v["summary"]["studies"].as_u64(),
        other["summary"]["studies"].as_u64()
    );
}

/// `bench-replay --json` on one fixture table.
fn replay_json(name: &str) -> Value {
    let out = bin()
        .args(["bench-replay", "--json"])
        .arg(fixture(name))
        .assert()
        .success();
    json_out(&out.get_output().stdout)
}

/// `bench-replay --json --pipeline-stages N` on one fixture table.
fn replay_json_as(name: &str, stages: u64) -> Value {
    let out = bin()
        .args(["bench-replay", "--json", "--pipeline-stages"])
        .arg(stages.to_string())
        .arg(fixture(name))
        .assert()
        .success();
    json_out(&out.get_output().stdout)
}

#[test]
fn every_real_table_is_won_within_1pct_for_at_most_40pct_of_its_grid() {
    // The tables recorded on the H200 (docs/validation/), each on one GPU, so in one pipeline
    // stage (the tables say so): the proxy, the memory-fit proxy grid, upstream Megatron-LM's
    // 12-layer GPT grid and 8-expert top-2 MoE grid, upstream TorchTitan's Qwen3 1.7B local
    // batch × activation checkpointing grid, and the grids recorded after the search and the
    // model were settled: Megatron-LM with 4 query groups at sequence 4096, TorchTitan's Qwen3
    // 4B at sequence 4096, and the two float8 grids (compiled TorchTitan with torchao). In one
    // stage the batch rule applies (a smaller batch is not faster): a candidate waits for its
    // larger-batch siblings and is not launched once one fits. (trials, OOM launches) as
    // replayed: the proxy's table has no forecasts; on the Qwen3 4B grid local batch 8 with
    // full checkpointing was forecast to fit. On the GQA grid micro batch 8 and 16 without
    // recompute, put 36 % and 165 % beyond the GPU, hold nothing back and go last: micro batch
    // 4 without recompute and 16 with selective recompute run, and their peaks rule both out.
    for (name, max_ratio, trials, oom_trials) in [
        ("h200-proxy-torch.json", 0.31, 3, 1),
        ("h200-memory-fit.json", 0.08, 2, 0),
        ("h200-megatron-gpt.json", 0.05, 2, 0),
        ("h200-megatron-moe.json", 0.05, 2, 0),
        ("h200-torchtitan-qwen3.json", 0.10, 3, 0),
        ("h200-megatron-gqa.json", 0.05, 2, 0),
        ("h200-torchtitan-qwen3-4b.json", 0.26, 4, 1),
        ("h200-torchtitan-qwen3-4b-float8.json", 0.23, 3, 0),
        ("h200-torchtitan-qwen3-1.7b-float8.json", 0.30, 2, 0),
    ] {
        let v = replay_json(name);
        assert!(v["gap_pct"].as_f64().unwrap() <= 1.0, "{name}: {v:#}");
        assert!(v["ratio"].as_f64().unwrap() <= max_ratio, "{name}: {v:#}"); // the goal: 0.40
        assert_eq!(v["trials"], trials, "{name}: {v:#}");
        assert_eq!(v["oom_trials"], oom_trials, "{name}: {v:#}");
        if let Some(e) = v["memory_forecast_error_pct"].as_object() {
            assert!(e["p90"].as_f64().unwrap() <= 10.0, "{name}: {v:#}");
        }
    }
    // On the GPT grid, micro batch 32 without recompute (out of memory on the H200; the
    // uncalibrated model put it 25 % beyond the GPU) holds nothing back and is ruled out once
    // two peaks calibrate the model; on the MoE grid the same setting fits (97 % of the
    // memory) and is the best, so it runs first.
    let v = replay_json("h200-megatron-gpt.json");
    assert_eq!(v["ruled_out"], 1, "{v:#}");
    let v = replay_json("h200-megatron-moe.json");
    assert_eq!(v["pick"]["micro_batch_size"], 32, "{v:#}");
}

#[test]
fn the_memory_forecasts_are_within_10pct_where_every_batch_is_measured() {
    // With one stage the search launches 2–4 candidates a grid and forecasts 0–1 after two
    // peaks. Replayed as pipelined jobs (the batch rule off: every batch is measured, as on a
    // job with a pipeline), it forecasts more, and the forecasts' error is the issue's goal:
    // within 10 % on 90 % of them. On the GPT grid, micro batch 32 without recompute (an OOM
    // on the H200) is not launched once two peaks calibrate the model; on the TorchTitan grid,
    // local batch 16 without checkpointing and all of local batch 32 ran out of memory on the
    // H200: none is launched. On the held-out GQA grid, micro batch 8 and 16 without recompute
    // ran out of memory: neither is launched. On the held-out Qwen3 4B grid, local batch 4
    // without checkpointing and all of local batch 8 ran out of memory: three are ruled out;
    // local batch 8 with full checkpointing, forecast within its error of the H200's 139.8 GiB
    // after calibration (131.9 GiB in the live sweep at 5a0d95e), is launched (it needed 18.55
    // GiB more with 121.5 in use).
    for (name, ruled_out, oom_trials, forecasts) in [
        ("h200-megatron-gpt.json", 1, 0, 3),
        ("h200-megatron-moe.json", 0, 0, 3),
        ("h200-torchtitan-qwen3.json", 4, 0, 3),
        ("h200-megatron-gqa.json", 2, 0, 3),
        ("h200-torchtitan-qwen3-4b.json", 3, 1, 2),
        ("h200-torchtitan-qwen3-4b-float8.json", 0, 0, 4),
        ("h200-torchtitan-qwen3-1.7b-float8.json", 0, 0, 4),
    ] {
        let v = replay_json_as(name, 2);
        assert!(v["gap_pct"].as_f64().unwrap() <= 1.0, "{name}: {v:#}");
        assert_eq!(v["oom_trials"], oom_trials, "{name}: {v:#}");
        assert_eq!(v["ruled_out"], ruled_out, "{name}: {v:#}");
        let e = &v["memory_forecast_error_pct"];
        assert!(e["n"].as_u64().unwrap() >= forecasts, "{name}: {v:#}");
        assert!(e["p90"].as_f64().unwrap() <= 10.0, "{name}: {v:#}");
    }
    // Pipelined, the float8 grids are not won for 40 %: float8's gain grows with the batch
    // (-3 % at local batch 1 to -18 % at 4 on the 4B grid), so the additive model's residual is
    // ~5 % and it prunes at most one candidate (8 of 9 and 6 of 6 run).
    assert!(
        replay_json_as("h200-torchtitan-qwen3-4b-float8.json", 2)["ratio"]
            .as_f64()
            .unwrap()
            > 0.6
    );
}

#[test]
fn the_float8_tables_forecast_float8_below_bf16() {
    for name in [
        "h200-torchtitan-qwen3-4b-float8.json",
        "h200-torchtitan-qwen3-1.7b-float8.json",
    ] {
        // The uncalibrated model puts float8 below bf16 at every local batch.
        let t: Value =
            serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap();
        let rows = t["candidates"].as_array().unwrap();
        for c in rows
            .iter()
            .filter(|c| c["overrides"]["model.converters"].is_array())
        {
            let lbs = &c["overrides"]["training.local_batch_size"];
            let bf16 = rows
                .iter()
                .find(|b| {
                    &b["overrides"]["training.local_batch_size"] == lbs
                        && b["overrides"]["model.converters"].is_null()
                })
                .unwrap();
            let (f8, b) = (&c["predicted_bytes"], &bf16["predicted_bytes"]);
            assert!(f8.as_f64() < b.as_f64(), "{name}: local batch {lbs}");
        }
    }
}
