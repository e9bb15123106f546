//! `lint` as a CI job runs it: a folder of experiments (the bundled examples, which sit beside
//! the Primus presets they extend), GitHub annotations, SARIF 2.1.0 for code scanning, and one
//! exit status per case (clean, warnings with --strict, errors, usage, missing input).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

mod common;

/// The binary run from the repository root (paths in the output are relative to it, as in a
/// checkout), with nothing of the user's (`common::cli`): the world size comes from `--gpus`.
fn bin() -> Command {
    let mut c = common::cli(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("lint-ci-data"));
    c.current_dir(ROOT);
    c
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn lint(args: &[&str]) -> Out {
    out_of(bin().arg("lint").args(args).output().unwrap())
}

fn out_of(out: std::process::Output) -> Out {
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// The SARIF 2.1.0 shape code scanning needs, checked field by field; returns the results.
fn check_sarif(v: &Value) -> Vec<Value> {
    assert_eq!(v["version"], "2.1.0", "{v}");
    assert!(
        v["$schema"].as_str().unwrap().contains("sarif-2.1.0"),
        "{v}"
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    let driver = &runs[0]["tool"]["driver"];
    assert_eq!(driver["name"], "primus-tune");
    let rules: Vec<&str> = driver["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let results = runs[0]["results"].as_array().unwrap().clone();
    for r in &results {
        let id = r["ruleId"].as_str().unwrap();
        assert!(rules.contains(&id), "{id} not in {rules:?}");
        assert_eq!(rules[r["ruleIndex"].as_u64().unwrap() as usize], id);
        assert!(
            ["error", "warning", "note"].contains(&r["level"].as_str().unwrap()),
            "{r}"
        );
        assert!(!r["message"]["text"].as_str().unwrap().is_empty());
        for l in r["locations"].as_array().unwrap() {
            let p = &l["physicalLocation"];
            let uri = p["artifactLocation"]["uri"].as_str().unwrap();
            assert!(!uri.starts_with('/') && !uri.contains('\\'), "{uri}");
            // Code scanning needs a start line; a column only where one is known.
            let region = &p["region"];
            assert!(region["startLine"].as_u64().unwrap() >= 1, "{r}");
            if let Some(c) = region.get("startColumn") {
                assert!(c.as_u64().unwrap() >= 1, "{r}");
            }
        }
    }
    results
}

#[test]
fn the_bundled_examples_in_github_and_sarif_formats() {
    // Everything bundled: presets/ holds the examples' experiments and the Primus presets they
    // extend (not experiments: no top-level `modules:`), profiles and spaces.
    let clean = lint(&["presets", "--gpus", "8", "--format", "github"]);
    assert_eq!(clean.code, 0, "{}{}", clean.stdout, clean.stderr);
    assert!(!clean.stdout.contains("::"), "{}", clean.stdout);
    assert!(
        clean
            .stdout
            .contains("3 files, 0 errors, 0 warnings, 0 infos; world size 8 (--gpus)"),
        "{}",
        clean.stdout
    );
    let v = json(&lint(&["presets", "--gpus", "8", "--format", "sarif"]).stdout);
    assert!(check_sarif(&v).is_empty(), "{v}");

    // On 4 GPUs the MoE example's EP 8 does not fit: one error, at the value.
    let bad = lint(&["presets", "--gpus", "4", "--format", "github", "--strict"]);
    assert_eq!(bad.code, 2, "{}{}", bad.stdout, bad.stderr);
    let lines: Vec<&str> = bad.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", bad.stdout);
    assert!(
        lines[0].starts_with(
            "::error file=presets/examples/experiments/moe_16B-BF16-pretrain.yaml,line=62,col="
        ) && lines[0].contains(",title=world-expert-parallel::world size 4 (--gpus)")
            && lines[0].contains("%0Ahint: "),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("3 files, 1 error, 0 warnings, 0 infos"),
        "{}",
        lines[1]
    );
    let out = lint(&["presets", "--gpus", "4", "--format", "sarif"]);
    assert_eq!(out.code, 2);
    let results = check_sarif(&json(&out.stdout));
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["ruleId"], "world-expert-parallel");
    assert_eq!(results[0]["level"], "error");
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"],
        "presets/examples/experiments/moe_16B-BF16-pretrain.yaml"
    );
    assert_eq!(loc["region"]["startLine"], 62);
}

#[test]
fn a_finding_about_the_whole_file_is_annotated_at_the_file() {
    // CUDA_DEVICE_MAX_CONNECTIONS unset with TP 2 and overlap: an info about the launch
    // environment, with no line of its own. It belongs to the experiment linted.
    let args = [
        "lint",
        "presets/examples/experiments/llama3_8B-BF16-pretrain.yaml",
        "--gpus",
        "8",
        "--set",
        "tensor_model_parallel_size=2",
        "--set",
        "overlap_grad_reduce=true",
        "--format",
    ];
    let run = |format: &str| {
        out_of(
            bin()
                .args(args)
                .arg(format)
                .env_remove("CUDA_DEVICE_MAX_CONNECTIONS")
                .output()
                .unwrap(),
        )
    };
    let g = run("github");
    assert_eq!(g.code, 0, "{}{}", g.stdout, g.stderr);
    assert!(
        g.stdout.starts_with(
            "::notice file=presets/examples/experiments/llama3_8B-BF16-pretrain.yaml,title=cuda-max-connections::"
        ),
        "{}",
        g.stdout
    );
    let results = check_sarif(&json(&run("sarif").stdout));
    assert_eq!(results.len(), 1, "{results:?}");
    let loc = &results[0]["locations"][0]["physicalLocation"];
    assert_eq!(
        loc["artifactLocation"]["uri"],
        "presets/examples/experiments/llama3_8B-BF16-pretrain.yaml"
    );
    assert_eq!(loc["region"]["startLine"], 1);
    let t = run("text");
    assert!(
        t.stdout.starts_with(
            "presets/examples/experiments/llama3_8B-BF16-pretrain.yaml: info[cuda-max-connections]"
        ),
        "{}",
        t.stdout
    );
}

/// A copy of the bundled examples with a warning-only, an erroneous and a broken experiment.
fn fleet() -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    primus_tune::util::bundled::extract(d.path()).unwrap();
    let exps = d.path().join("experiments");
    let base = std::fs::read_to_string(exps.join("moe_16B-BF16-pretrain.yaml")).unwrap();
    let more = exps.join("more");
    std::fs::create_dir_all(&more).unwrap();
    std::fs::write(
        more.join("warn.yaml"),
        base.replace(
            "train_iters: 50",
            "train_iters: 50\n      micro_batch_sise: 3",
        ),
    )
    .unwrap();
    std::fs::write(
        more.join("bad.yml"),
        base.replace("moe_router_dtype: fp32", "moe_router_dtype: fp64"),
    )
    .unwrap();
    std::fs::write(
        more.join("broken.yaml"),
        "work_group: a\nmodules:\n  pre_trainer: [unclosed\n",
    )
    .unwrap();
    std::fs::write(more.join("notes.yaml"), "not: an experiment\n").unwrap();
    (d, exps)
}

#[test]
fn exit_status_per_case() {
    let (_d, exps) = fleet();
    let more = exps.join("more");
    let p = |x: &Path| x.to_str().unwrap().to_string();
    let clean = p(&exps.join("llama3_8B-BF16-pretrain.yaml"));
    let warn = p(&more.join("warn.yaml"));

    // Clean: 0, also with --strict.
    assert_eq!(lint(&[&clean, "--gpus", "8", "--strict"]).code, 0);
    // Warnings: 0, and 1 with --strict, in every format.
    assert_eq!(lint(&[&warn, "--gpus", "8"]).code, 0);
    for f in ["text", "json", "github", "sarif"] {
        let o = lint(&[&warn, "--gpus", "8", "--strict", "--format", f]);
        assert_eq!(o.code, 1, "{f}: {}{}", o.stdout, o.stderr);
    }
    let w = lint(&[&warn, "--gpus", "8", "--format", "github"]);
    assert!(
        w.stdout.contains(",title=unknown-key::") && w.stdout.starts_with("::warning file="),
        "{}",
        w.stdout
    );

    // Errors: 2. The folder holds 6 experiments (notes.yaml is no experiment); the broken one
    // is a load-error finding where the parser stopped (the end of the file), and the others are still linted.
    let all = lint(&[&p(&exps), "--gpus", "8"]);
    assert_eq!(all.code, 2, "{}{}", all.stdout, all.stderr);
    assert!(
        all.stdout
            .contains("6 files, 2 errors, 1 warning, 0 infos; world size 8 (--gpus)"),
        "{}",
        all.stdout
    );
    assert!(
        all.stdout
            .contains("broken.yaml:4:1: error[load-error]: YAML error"),
        "{}",
        all.stdout
    );
    assert!(all.stdout.contains("error[load-error]"), "{}", all.stdout);
    assert!(all.stdout.contains("error[deepep-router-dtype]"));
    assert!(!all.stdout.contains("notes.yaml"));
    let v = json(&lint(&[&p(&exps), "--gpus", "8", "--json"]).stdout);
    assert_eq!(v["files"].as_array().unwrap().len(), 6, "{v}");
    assert_eq!(
        (v["errors"].clone(), v["warnings"].clone()),
        (2.into(), 1.into())
    );
    let v = json(&lint(&[&p(&exps), "--gpus", "8", "--format", "sarif"]).stdout);
    let results = check_sarif(&v);
    let levels: Vec<&str> = results
        .iter()
        .map(|r| r["level"].as_str().unwrap())
        .collect();
    assert_eq!(levels.iter().filter(|l| **l == "error").count(), 2, "{v}");
    let broken = results
        .iter()
        .find(|r| r["ruleId"] == "load-error")
        .unwrap();
    assert_eq!(
        broken["locations"][0]["physicalLocation"]["region"]["startLine"],
        4
    );

    // Usage: 64, clap's own errors too.
    let o = lint(&[&clean, "--format", "xml"]);
    assert_eq!(o.code, 64, "{}", o.stderr);
    assert!(o.stderr.contains("xml"), "{}", o.stderr);
    assert_eq!(lint(&[&clean, "--json", "--format", "github"]).code, 64);
    assert_eq!(lint(&[&clean, "--gpus", "0"]).code, 64);
    assert_eq!(lint(&[&clean, "--set", "no-equals-sign"]).code, 64);

    // No input: 66 for a missing path and for a folder without experiments, and with a JSON
    // format the error is JSON on stdout too.
    let o = lint(&[&p(&exps.join("nope.yaml"))]);
    assert_eq!(o.code, 66);
    assert!(o.stderr.contains("nope.yaml: no such file"), "{}", o.stderr);
    let presets = p(&exps.parent().unwrap().join("primus"));
    let o = lint(&[&presets, "--format", "sarif"]);
    assert_eq!(o.code, 66, "{}", o.stderr);
    assert!(
        o.stderr.contains("no experiment in this folder"),
        "{}",
        o.stderr
    );
    let v = json(&o.stdout);
    assert_eq!(v["error"]["kind"], "no-input", "{v}");
    assert_eq!(v["error"]["exit_code"], 66);
    // One missing input among good ones is still no input: nothing is linted half-way.
    assert_eq!(lint(&[&clean, &p(&more.join("gone"))]).code, 66);
}

/// `--profile NAME` lints the experiment as that profile's trials see it: with the variables
/// its `env:` sets, under `--env`. A profile that sets `PRIMUS_PP: "2"` makes the example's
/// `${PRIMUS_PP:1}` two stages, which one GPU cannot hold; an unknown profile is a usage error.
#[test]
fn a_profile_s_environment_is_linted_with_profile() {
    let d = tempfile::tempdir().unwrap();
    primus_tune::util::bundled::extract(d.path()).unwrap();
    let exp = d.path().join("experiments/llama3_8B-BF16-pretrain.yaml");
    let profiles = d.path().join("config/primus-tune/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("pp2.yaml"),
        "name: pp2\nargv: [x]\nenv:\n  PRIMUS_PP: \"2\"\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        out_of(
            bin()
                .env("XDG_CONFIG_HOME", d.path().join("config"))
                .env_remove("PRIMUS_PP")
                .arg("lint")
                .arg(&exp)
                .args(["--gpus", "1"])
                .args(extra)
                .output()
                .unwrap(),
        )
    };
    assert_eq!(run(&[]).code, 0);
    let o = run(&["--profile", "pp2"]);
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("error[world-model-parallel]") && o.stdout.contains("1 × 2 × 1"),
        "{}",
        o.stdout
    );
    let o = run(&["--profile", "pp2", "--env", "PRIMUS_PP=1"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let o = run(&["--profile", "nope"]);
    assert_eq!(o.code, 64, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("profile `nope` not found"),
        "{}",
        o.stderr
    );
}
