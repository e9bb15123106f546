//! The CLI as a user runs it: real process, real files, exit codes and output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

mod common;

/// The binary with nothing of the user's (`common::cli`), its data in the tests' own folder.
fn bin() -> Command {
    common::cli(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-data"))
}

/// A private copy of the bundled example tree.
fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    primus_tune::util::bundled::extract(dir.path()).unwrap();
    let exp = dir
        .path()
        .join(primus_tune::util::bundled::DEFAULT_EXPERIMENT);
    (dir, exp)
}

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

/// The versions of `exp` its saves kept (`backups --json`), newest first.
fn kept_versions(exp: &Path) -> Vec<serde_json::Value> {
    let out = bin()
        .args(["backups", exp.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout).as_array().cloned().unwrap_or_default()
}

/// The names of the files in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn json(out: &[u8]) -> serde_json::Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

/// `recommend EXP --json ARGS --workspace WS`, parsed.
fn recommend_json(exp: &Path, ws: &Path, args: &[&str]) -> serde_json::Value {
    let out = bin()
        .args(["recommend", exp.to_str().unwrap(), "--json"])
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .output()
        .unwrap();
    json(&out.stdout)
}

#[test]
fn no_arguments_prints_the_checklist_of_the_bundled_example() {
    bin()
        .assert()
        .success()
        .stdout(predicate::str::contains("Quick checklist"))
        .stdout(predicate::str::contains("1. GEMMs (HipBLASLt tuning)"))
        .stdout(predicate::str::contains("6. MoE — needs attention"))
        .stdout(predicate::str::contains("sync-free MoE is off"));
}

#[test]
fn checklist_json_has_six_steps_with_status() {
    let (_d, exp) = tree();
    let out = bin()
        .args(["checklist", "--json"])
        .arg(&exp)
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6);
    assert_eq!(steps[0]["step"], "gemms");
    assert_eq!(steps[0]["status"], "needs-attention");
    assert_eq!(steps[3]["status"], "not-measured");
}

#[test]
fn checklist_sees_hipblaslt_files_on_disk() {
    let (d, exp) = tree();
    write(
        d.path(),
        "output/tune_hipblaslt/moe_16B-BF16-pretrain/gemm_tune/tune_hipblas_gemm_results.txt",
        "Git Version: abc\n    transA,transB,batch_count,m,n,k,a_type,b_type,c_type,d_type,compute_type,hipblaslt-Gflops,us,solution_index,gcnArchName,CUs\n    T,N,1,64,32,16,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,1,1,7,gfx942:sramecc+:xnack-,304\n",
    );
    let out = bin()
        .args(["checklist", "--json"])
        .arg(&exp)
        .args([
            "--env",
            "PRIMUS_HIPBLASLT_TUNING=1",
            "--env",
            "PRIMUS_HIPBLASLT_TUNING_STAGE=3",
        ])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!(v["steps"][0]["status"], "done", "{}", v["steps"][0]);
}

#[test]
fn lint_exit_codes() {
    let (d, exp) = tree();
    bin().arg("lint").arg(&exp).assert().code(0);
    // A warning only: 0 normally, 1 with --strict.
    let text = std::fs::read_to_string(&exp).unwrap().replace(
        "train_iters: 50",
        "train_iters: 50\n      micro_batch_sise: 3",
    );
    let warn = write(d.path(), "experiments/warn.yaml", &text);
    bin().arg("lint").arg(&warn).assert().code(0);
    bin()
        .args(["lint", "--strict"])
        .arg(&warn)
        .assert()
        .code(1)
        .stdout(predicate::str::contains("did you mean `micro_batch_size`?"));
    // An error: 2, with the file and line of the value.
    let text = std::fs::read_to_string(&exp)
        .unwrap()
        .replace("moe_router_dtype: fp32", "moe_router_dtype: fp64");
    let bad = write(d.path(), "experiments/bad.yaml", &text);
    let line = text.lines().position(|l| l.contains("fp64")).unwrap() + 1;
    let out = bin().args(["lint", "--json"]).arg(&bad).assert().code(2);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["errors"], 1);
    let d0 = &v["diagnostics"][0];
    assert_eq!(d0["code"], "deepep-router-dtype");
    assert_eq!(d0["line"], line);
    assert!(d0["file"].as_str().unwrap().ends_with("bad.yaml"));
    assert!(d0["hint"].as_str().unwrap().contains("fp32"));
}

#[test]
fn lint_checks_the_world_size_it_is_given() {
    let (_d, exp) = tree();
    let text = std::fs::read_to_string(&exp).unwrap();
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    // The bundled MoE example spreads 64 experts over 8 GPUs (EP 8); 256 = 4 × DP 8 × 8.
    bin()
        .args(["lint", "--gpus", "8"])
        .arg(&exp)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("world size 8 (--gpus)"));
    // On 4 GPUs EP 8 does not fit: exit 2, at the EP value, naming the world and its source.
    let out = bin()
        .args(["lint", "--json", "--gpus", "4"])
        .arg(&exp)
        .assert()
        .code(2);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["world"]["gpus"], 4);
    assert_eq!(v["world"]["source"]["kind"], "flag");
    assert_eq!(v["world"]["source"]["text"], "--gpus");
    let ep = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "world-expert-parallel")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(ep["severity"], "error");
    assert_eq!(ep["line"], line_of("expert_model_parallel_size:"));
    assert!(
        ep["message"]
            .as_str()
            .unwrap()
            .contains("world size 4 (--gpus)"),
        "{ep}"
    );
    // From the launcher's variables: 24 GPUs hold EP 8, but 256 samples do not split into
    // micro batches of 4 on 24 data-parallel ranks.
    let out = bin()
        .args(["lint", "--env", "GPUS_PER_NODE=8", "--env", "NNODES=3"])
        .arg(&exp)
        .assert()
        .code(2);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    let want = format!(
        "{}:{}:",
        exp.file_name().unwrap().to_string_lossy(),
        line_of("global_batch_size:")
    );
    let batch = stdout
        .lines()
        .find(|l| l.contains("global-batch-divisibility"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(batch.contains(&want), "{batch}");
    assert!(
        batch.contains("world size 24 (GPUS_PER_NODE × NNODES = 8 × 3)"),
        "{batch}"
    );
    assert!(!stdout.contains("world-expert-parallel"), "{stdout}");
    // --gpus wins over the launcher's variables.
    bin()
        .args(["lint", "--gpus", "8"])
        .env("GPUS_PER_NODE", "3")
        .arg(&exp)
        .assert()
        .code(0);
    // Zero GPUs is not a world.
    bin()
        .args(["lint", "--gpus", "0"])
        .arg(&exp)
        .assert()
        .code(64)
        .stderr(predicate::str::contains("--gpus"));
    // Nothing given: the GPUs this machine has, else unknown (and no world rule runs).
    let out = bin().args(["lint", "--json"]).arg(&exp).assert();
    let v = json(&out.get_output().stdout);
    if v["world"].is_null() {
        let codes: Vec<&str> = v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|d| d["code"].as_str())
            .collect();
        assert!(!codes.iter().any(|c| c.starts_with("world-")), "{codes:?}");
    } else {
        assert_eq!(v["world"]["source"]["kind"], "detected", "{v}");
    }
}

#[test]
fn show_json_gives_value_source_and_step() {
    let (_d, exp) = tree();
    let out = bin()
        .args([
            "show",
            "--json",
            "--flag",
            "turbo_deepep_num_cu",
            "--flag",
            "bf16",
        ])
        .arg(&exp)
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    let cu = &v[0];
    assert_eq!(cu["name"], "turbo_deepep_num_cu");
    assert_eq!(cu["value"], 64);
    assert_eq!(cu["step"], "moe");
    assert_eq!(cu["layer"], "experiment");
    let text = std::fs::read_to_string(&exp).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("turbo_deepep_num_cu: 64"))
        .unwrap()
        + 1;
    assert_eq!(cu["source"]["line"], line);
    assert!(
        cu["source"]["file"]
            .as_str()
            .unwrap()
            .ends_with("moe_16B-BF16-pretrain.yaml")
    );
    assert_eq!(cu["overridden"][0]["value"], 32);
    let bf16 = &v[1];
    assert_eq!(bf16["layer"], "module-preset");
    assert!(!bf16["via"].as_array().unwrap().is_empty());
}

#[test]
fn show_respects_command_line_overrides_and_env() {
    let (_d, exp) = tree();
    let out = bin()
        .args([
            "show",
            "--json",
            "--flag",
            "micro_batch_size",
            "--flag",
            "expert_model_parallel_size",
        ])
        .arg(&exp)
        .args(["--set", "micro_batch_size=8", "--env", "PRIMUS_EP=4"])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!(v[0]["value"], 8);
    assert_eq!(v[0]["layer"], "command-line");
    assert_eq!(v[1]["value"], 4);
    assert_eq!(v[1]["template"], "${PRIMUS_EP:8}");
}

#[test]
fn show_and_checklist_resolve_as_a_profile_launches_with_profile() {
    let (d, exp) = tree();
    let config = d.path().join("config");
    write(
        &config,
        "primus-tune/profiles/pp2.yaml",
        "name: pp2\nargv: [x]\nenv:\n  PRIMUS_PP: \"2\"\n  CUDA_DEVICE_MAX_CONNECTIONS: \"1\"\n",
    );
    let show = |extra: &[&str]| {
        let out = bin()
            .env("XDG_CONFIG_HOME", &config)
            .env_remove("PRIMUS_PP")
            .args(["show", "--json", "--flag", "pipeline_model_parallel_size"])
            .arg(&exp)
            .args(extra)
            .assert()
            .success();
        json(&out.get_output().stdout)[0].clone()
    };
    // Without a profile: the written default; the variable is unset.
    let v = show(&[]);
    assert_eq!(v["value"], 1);
    assert_eq!(v["env"][0]["from"], "unset");
    // As the profile launches it: its env, said as such.
    let v = show(&["--profile", "pp2"]);
    assert_eq!(v["value"], 2);
    assert_eq!(v["env"][0]["name"], "PRIMUS_PP");
    assert_eq!(v["env"][0]["from"], "profile");
    assert_eq!(v["env"][0]["profile"], "pp2");
    // --env over the profile's, as at launch.
    let v = show(&["--profile", "pp2", "--env", "PRIMUS_PP=4"]);
    assert_eq!(
        (v["value"].clone(), v["env"][0]["from"].clone()),
        (4.into(), "--env".into())
    );
    // The text says where the value came from.
    bin()
        .env("XDG_CONFIG_HOME", &config)
        .env_remove("PRIMUS_PP")
        .args([
            "show",
            "--flag",
            "pipeline_model_parallel_size",
            "--profile",
            "pp2",
        ])
        .arg(&exp)
        .assert()
        .success()
        .stdout(predicate::str::contains("as profile pp2 launches it"))
        .stdout(predicate::str::contains("PRIMUS_PP=2 (profile pp2)"));
    // The checklist sees the variable the profile sets for TP/PP overlap.
    let checklist = |extra: &[&str]| {
        let out = bin()
            .env("XDG_CONFIG_HOME", &config)
            .env_remove("PRIMUS_PP")
            .args(["checklist", "--json"])
            .arg(&exp)
            .args(extra)
            .assert()
            .success();
        json(&out.get_output().stdout).to_string()
    };
    assert!(
        checklist(&["--env", "PRIMUS_PP=2"])
            .contains("TP/PP overlap needs CUDA_DEVICE_MAX_CONNECTIONS=1")
    );
    let with = checklist(&["--profile", "pp2"]);
    assert!(with.contains("\"CUDA_DEVICE_MAX_CONNECTIONS=1\""), "{with}");
    assert!(!with.contains("TP/PP overlap needs"), "{with}");
    // An unknown profile is a usage error that names the ones there are.
    for sub in ["show", "checklist"] {
        bin()
            .env("XDG_CONFIG_HOME", &config)
            .arg(sub)
            .arg(&exp)
            .args(["--profile", "nope"])
            .assert()
            .code(64)
            .stderr(predicate::str::contains("profile `nope` not found"))
            .stderr(predicate::str::contains("pp2"));
    }
}

#[test]
fn show_unknown_flag_suggests() {
    let (_d, exp) = tree();
    bin()
        .args(["show", "--flag", "micro_batch_sise"])
        .arg(&exp)
        .assert()
        .code(64)
        .stderr(predicate::str::contains("did you mean `micro_batch_size`?"));
}

#[test]
fn set_dry_run_writes_nothing_and_write_keeps_comments() {
    let (_d, exp) = tree();
    let before = std::fs::read_to_string(&exp).unwrap();
    bin()
        .arg("set")
        .arg(&exp)
        .args([
            "turbo_deepep_num_cu=80",
            "recompute_granularity=full",
            "recompute_method=uniform",
            "recompute_num_layers=1",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("+      turbo_deepep_num_cu: 80"))
        .stdout(predicate::str::contains("dry run"));
    assert_eq!(std::fs::read_to_string(&exp).unwrap(), before);

    let folder = names_in(exp.parent().unwrap());
    bin()
        .arg("set")
        .arg(&exp)
        .args(["turbo_deepep_num_cu=80", "--write"])
        .assert()
        .success()
        .stdout(predicate::str::contains("the version it replaced is kept"));
    let after = std::fs::read_to_string(&exp).unwrap();
    // The version it replaced (and the original) are kept in the workspace, not beside it.
    assert_eq!(
        names_in(exp.parent().unwrap()),
        folder,
        "nothing new beside the file"
    );
    let kept = kept_versions(&exp);
    let ids: Vec<&str> = kept.iter().map(|v| v["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["1", "original"], "{kept:?}");
    for v in &kept {
        assert_eq!(
            std::fs::read_to_string(v["path"].as_str().unwrap()).unwrap(),
            before
        );
    }
    let changed: Vec<(&str, &str)> = before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed,
        vec![(
            "      turbo_deepep_num_cu: 64",
            "      turbo_deepep_num_cu: 80"
        )]
    );
    assert_eq!(before.lines().count(), after.lines().count());
}

#[test]
fn set_json_and_no_backup() {
    let (_d, exp) = tree();
    let out = bin()
        .arg("set")
        .arg(&exp)
        .args([
            "lr=3e-5",
            "use_turbo_rms_norm=true",
            "--write",
            "--no-backup",
            "--json",
        ])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!(v["written"], true);
    assert_eq!(v["changes"][0]["written_as"], "3.0e-05");
    assert_eq!(v["changes"][1]["action"], "added");
    // `old_source` has the one shape of `source` (as `show --json` gives it); null: unset.
    let src = &v["changes"][0]["old_source"];
    assert_eq!(src["kind"], "file", "{src}");
    assert!(src["text"].as_str().unwrap().contains(".yaml:"), "{src}");
    assert!(src["line"].as_u64().unwrap() > 0, "{src}");
    // Added to the experiment, the old value from a preset.
    let src = &v["changes"][1]["old_source"];
    assert_eq!(src["layer"], "module-preset", "{src}");
    assert!(kept_versions(&exp).is_empty(), "--no-backup keeps nothing");
    let text = std::fs::read_to_string(&exp).unwrap();
    assert!(text.contains("      lr: 3.0e-05\n"));
    assert!(text.contains("      use_turbo_rms_norm: true\n"));
}

#[test]
fn set_refusals_write_nothing() {
    let (_d, exp) = tree();
    let before = std::fs::read_to_string(&exp).unwrap();
    for args in [
        vec!["micro_batch_size=abc"],
        vec!["turbo_sync_free_moe_stage=7"],
        vec!["use_turbo_grouped_mlp=true"],
        vec!["moe_router_dtype=fp64"],
        vec!["micro_batch_sise=2"],
        vec!["fp8_recipe=delay"],
    ] {
        bin()
            .arg("set")
            .arg(&exp)
            .args(&args)
            .arg("--write")
            .assert()
            .code(2)
            .stderr(predicate::str::contains("nothing was written"));
        assert_eq!(std::fs::read_to_string(&exp).unwrap(), before, "{args:?}");
    }
    // --force writes a cross-flag error, but never a type error.
    bin()
        .arg("set")
        .arg(&exp)
        .args(["moe_router_dtype=fp64", "--write", "--force"])
        .assert()
        .success();
    assert!(
        std::fs::read_to_string(&exp)
            .unwrap()
            .contains("moe_router_dtype: fp64")
    );
}

#[test]
fn set_keeps_env_variable_and_changes_its_default() {
    let (_d, exp) = tree();
    bin()
        .arg("set")
        .arg(&exp)
        .args(["expert_model_parallel_size=4", "--write", "--no-backup"])
        .env_remove("PRIMUS_EP")
        .assert()
        .success();
    let text = std::fs::read_to_string(&exp).unwrap();
    assert!(
        text.contains("expert_model_parallel_size: ${PRIMUS_EP:4}"),
        "{text}"
    );
}

#[test]
fn set_refuses_when_file_changed_meanwhile_is_covered_by_library_test() {
    // The conflict check lives in YamlDoc::save (unit-tested there); here: a missing file.
    bin()
        .args(["set", "/nonexistent/exp.yaml", "a=1"])
        .assert()
        .code(66)
        .stderr(predicate::str::contains("/nonexistent/exp.yaml"));
}

#[test]
fn bad_input_gives_one_clear_message_and_exit_2() {
    let (d, exp) = tree();
    let exp_text = std::fs::read_to_string(&exp).unwrap();
    let cases: Vec<(PathBuf, &str)> = vec![
        (d.path().join("experiments/missing.yaml"), "no such file"),
        (
            write(d.path(), "experiments/notyaml.yaml", "a: [1, 2\nb: }\n"),
            "notyaml.yaml:",
        ),
        (
            write(d.path(), "experiments/empty.yaml", "# nothing\n"),
            "empty",
        ),
        (
            write(d.path(), "experiments/list.yaml", "- a\n- b\n"),
            "top level must be a mapping",
        ),
        (
            write(
                d.path(),
                "experiments/ext.yaml",
                &format!("extends: [nothere.yaml]\n{exp_text}"),
            ),
            "ext.yaml:1:",
        ),
        (
            write(
                d.path(),
                "experiments/envreq.yaml",
                &exp_text.replace("${PRIMUS_TEAM:amd}", "${PT_REQUIRED_TEAM}"),
            ),
            "PT_REQUIRED_TEAM",
        ),
        (
            write(
                d.path(),
                "experiments/mod.yaml",
                &exp_text.replace("config: pre_trainer.yaml", "config: nope.yaml"),
            ),
            "module preset `nope.yaml` not found",
        ),
        (
            write(
                d.path(),
                "experiments/modname.yaml",
                &exp_text.replace("  pre_trainer:", "  evaluator:"),
            ),
            "unsupported module `evaluator`",
        ),
        (
            write(
                d.path(),
                "experiments/meta.yaml",
                &exp_text.replace("exp_name:", "exp_nam:"),
            ),
            "required key `exp_name`",
        ),
    ];
    for (path, needle) in cases {
        // A missing file is "no input" (66); a file that is wrong is an error (2). Lint reports
        // it as a `load-error` finding on stdout (a broken file among many hides no other's
        // findings); the other commands stop with the message on stderr.
        let code = if path.exists() { 2 } else { 66 };
        for sub in ["lint", "show", "checklist"] {
            let out = bin()
                .env_remove("PT_REQUIRED_TEAM")
                .arg(sub)
                .arg(&path)
                .assert()
                .code(code)
                .stderr(predicate::str::contains("panicked").not());
            let out = out.get_output();
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            if sub == "lint" && code == 2 {
                assert!(stdout.contains(needle), "{sub} {path:?}: {stdout}");
                assert!(stdout.contains("error[load-error]"), "{stdout}");
                assert!(stdout.contains("1 file, 1 error, 0 warnings"), "{stdout}");
            } else {
                assert!(stderr.contains(needle), "{sub} {path:?}: {stderr}");
            }
        }
    }
}

#[test]
fn extends_cycles_are_reported_with_the_chain() {
    let (d, exp) = tree();
    let exp_text = std::fs::read_to_string(&exp).unwrap();
    write(d.path(), "experiments/a.yaml", "extends: b.yaml\nx: 1\n");
    write(d.path(), "experiments/b.yaml", "extends: [a.yaml]\ny: 2\n");
    let top = write(
        d.path(),
        "experiments/top.yaml",
        &format!("extends: a.yaml\n{exp_text}"),
    );
    bin()
        .arg("lint")
        .arg(&top)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("cycle in `extends`"))
        .stdout(predicate::str::contains("b.yaml:1:"));
    bin()
        .arg("show")
        .arg(&top)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cycle in `extends`"));
}

#[test]
fn no_primus_root_is_explained() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "exp.yaml", "work_group: a\n");
    bin()
        .arg("lint")
        .arg(&p)
        .assert()
        .code(2)
        .stdout(predicate::str::contains("--primus-root"));
    bin()
        .arg("show")
        .arg(&p)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--primus-root"));
    // An explicit root that is not one.
    bin()
        .arg("lint")
        .arg(&p)
        .args(["--primus-root", dir.path().to_str().unwrap()])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("not a Primus root"));
}

#[test]
fn primus_root_from_option_and_environment() {
    let (d, exp) = tree();
    let elsewhere = tempfile::tempdir().unwrap();
    let moved = elsewhere.path().join("exp.yaml");
    std::fs::copy(&exp, &moved).unwrap();
    bin()
        .arg("lint")
        .arg(&moved)
        .args(["--primus-root", d.path().to_str().unwrap()])
        .assert()
        .code(0);
    bin()
        .arg("lint")
        .arg(&moved)
        .env("PRIMUS_ROOT", d.path())
        .assert()
        .code(0);
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_show_all_on_torchtitan_keeps_keys_the_catalog_files_under_megatron() {
    let exp = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/primus/examples/torchtitan/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml");
    if !exp.is_file() {
        eprintln!("skipped: {} is absent", exp.display());
        return;
    }
    let out = bin()
        .args(["show", "--all", "--json"])
        .arg(&exp)
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"stderr_sink_level"), "{names:?}");
    assert!(names.contains(&"training.local_batch_size"));
}

#[test]
fn recommend_json_fixes_the_deepep_cu_for_ep16_as_a_rule() {
    let (_d, exp) = tree();
    let out = bin()
        .args([
            "recommend",
            exp.to_str().unwrap(),
            "--json",
            "--gpu",
            "MI300X",
        ])
        .args(["--set", "expert_model_parallel_size=16"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out.stdout);
    let list = v["recommendations"].as_array().unwrap();
    let cu = list
        .iter()
        .find(|r| r["flag"] == "turbo_deepep_num_cu")
        .expect("a CU recommendation");
    assert_eq!(cu["value"], 32);
    assert_eq!(cu["current"], 64);
    assert_eq!(cu["basis"], "rule");
    assert!(cu["reason"].as_str().unwrap().contains("32"));
    let stage = list
        .iter()
        .find(|r| r["flag"] == "turbo_sync_free_moe_stage")
        .expect("MI300X: a sync-free stage");
    assert_eq!(stage["value"], 2);
    for r in list {
        for k in ["flag", "value", "current", "basis", "reason", "rule"] {
            assert!(r.get(k).is_some(), "{k} missing in {r}");
        }
    }
}

#[test]
fn recommend_apply_writes_config_values_only_and_keeps_comments() {
    let (_d, exp) = tree();
    let before = std::fs::read_to_string(&exp).unwrap();
    let out = bin()
        .args([
            "recommend",
            exp.to_str().unwrap(),
            "--apply",
            "--gpu",
            "MI355X",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("turbo_sync_free_moe_stage"), "{text}");
    assert!(
        text.contains("for the launch environment: export "),
        "{text}"
    );
    assert!(text.contains(" PRIMUS_HIPBLASLT_TUNING=1"), "{text}");
    let after = std::fs::read_to_string(&exp).unwrap();
    assert!(after.contains("turbo_sync_free_moe_stage: 1"), "{after}");
    assert!(
        !after.contains("PRIMUS_HIPBLASLT_TUNING"),
        "env vars are not written"
    );
    let changed = before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .count();
    assert_eq!(changed, 1, "only the stage line changes");
    assert_eq!(before.lines().count(), after.lines().count());
    assert!(!kept_versions(&exp).is_empty());
    // Applying again has nothing left to write for the stage.
    let again = bin()
        .args([
            "recommend",
            exp.to_str().unwrap(),
            "--json",
            "--gpu",
            "MI355X",
        ])
        .output()
        .unwrap();
    let v = json(&again.stdout);
    assert!(
        !v["recommendations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["flag"] == "turbo_sync_free_moe_stage")
    );
}

#[test]
fn recommend_unknown_gpu_is_a_usage_error() {
    let (_d, exp) = tree();
    bin()
        .args(["recommend", exp.to_str().unwrap(), "--gpu", "RTX9999"])
        .assert()
        .code(64)
        .stderr(predicate::str::contains("unknown GPU"));
}

#[test]
fn studies_and_trials_of_a_fresh_experiment_are_none_and_a_named_one_is_no_input() {
    let (d, exp) = tree();
    let ws = d.path().join("ws");
    let out = bin()
        .args(["studies", "--json", "--workspace"])
        .arg(&ws)
        .arg(&exp)
        .assert()
        .success();
    assert_eq!(json(&out.get_output().stdout), serde_json::json!([]));
    bin()
        .args(["studies", "--workspace"])
        .arg(&ws)
        .arg(&exp)
        .assert()
        .success()
        .stdout(predicate::str::contains("no studies"));
    bin()
        .args(["studies", "show", "nope", "--workspace"])
        .arg(&ws)
        .arg("--config")
        .arg(&exp)
        .assert()
        .code(66)
        .stderr(predicate::str::contains("no trial database"));
    // `trials` lists the same way: nothing is an empty list (0) in every format, and says how
    // to run one; a trial named is no input (66), with the command to run.
    let trials = |args: &[&str]| {
        let out = bin()
            .arg("trials")
            .args(args)
            .arg("--workspace")
            .arg(&ws)
            .arg("--config")
            .arg(&exp)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, _) = trials(&[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.starts_with("(no trials of ") && stdout.contains("run one with: primus-tune run "),
        "{stdout}"
    );
    assert_eq!(trials(&["--json"]).1.trim(), "[]");
    let (code, csv, _) = trials(&["--csv"]);
    assert_eq!((code, csv.lines().count()), (Some(0), 1), "{csv}");
    assert!(csv.starts_with("id,"), "{csv}");
    let (code, _, err) = trials(&["show", "1"]);
    assert_eq!(code, Some(66), "{err}");
    assert!(
        err.contains("no trial database yet (run a trial first: primus-tune run ")
            && !err.contains("CONFIG"),
        "{err}"
    );
}

/// `recommend --apply` writes only what its own lint accepts: the Turbo grouped GEMM comes with
/// `moe_use_legacy_grouped_gemm: false`, and lint of the result is clean.
#[test]
fn recommend_apply_brings_the_companions_lint_needs() {
    let (d, exp) = tree();
    let ws = d.path().join("ws");
    let text = std::fs::read_to_string(&exp).unwrap().replace(
        "use_turbo_grouped_gemm: true",
        "use_turbo_grouped_gemm: false\n      moe_use_legacy_grouped_gemm: true",
    );
    std::fs::write(&exp, text).unwrap();
    bin()
        .args(["lint", exp.to_str().unwrap()])
        .assert()
        .success();
    let v = recommend_json(&exp, &ws, &["--gpu", "MI300X"]);
    let recs = v["recommendations"].as_array().unwrap();
    let legacy = recs
        .iter()
        .find(|r| r["flag"] == "moe_use_legacy_grouped_gemm")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(legacy["value"], false);
    assert_eq!(legacy["companion_of"], "use_turbo_grouped_gemm");
    assert_eq!(v["withheld"], serde_json::json!([]));
    let apply = || {
        bin()
            .args([
                "recommend",
                exp.to_str().unwrap(),
                "--gpu",
                "MI300X",
                "--apply",
            ])
            .arg("--workspace")
            .arg(&ws)
            .assert()
            .success()
    };
    apply();
    let after = std::fs::read_to_string(&exp).unwrap();
    assert!(after.contains("use_turbo_grouped_gemm: true"), "{after}");
    assert!(
        after.contains("moe_use_legacy_grouped_gemm: false"),
        "{after}"
    );
    bin()
        .args(["lint", exp.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains("1 file, 0 errors"));
    // Applied again: every value is already set, so nothing is written and no backup made.
    let before = kept_versions(&exp).len();
    apply().stdout(predicate::str::contains("no config value to write"));
    assert_eq!(kept_versions(&exp).len(), before);
    assert_eq!(std::fs::read_to_string(&exp).unwrap(), after);
}

/// Primus-Turbo, DeepEP and hipBLASLt advice is for Primus on AMD: on an NVIDIA GPU or with a
/// profile that runs upstream Megatron-LM it is listed as not applying, never advised.
#[test]
fn recommend_says_primus_amd_advice_does_not_apply_elsewhere() {
    let (d, exp) = tree();
    let ws = d.path().join("ws");
    for args in [
        vec!["--gpu", "H200"],
        vec!["--gpu", "MI300X", "--profile", "megatron"],
    ] {
        let args = [&["--set", "enable_primus_turbo=false"], args.as_slice()].concat();
        let v = recommend_json(&exp, &ws, &args);
        let recs = v["recommendations"].as_array().unwrap();
        assert!(
            !recs.iter().any(|r| {
                let f = r["flag"].as_str().unwrap();
                f.contains("turbo") || f.contains("HIPBLASLT")
            }),
            "{args:?}: {v}"
        );
        let na = v["not_applicable"].to_string();
        assert!(na.contains("enable_primus_turbo"), "{args:?}: {na}");
        assert!(
            na.contains("PRIMUS_HIPBLASLT_TUNING_STAGE"),
            "{args:?}: {na}"
        );
    }
    let text = bin()
        .args(["recommend", exp.to_str().unwrap(), "--gpu", "H200"])
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("target: Primus on NVIDIA"), "{text}");
    assert!(text.contains("does not apply: hipblaslt-tuning"), "{text}");
}

/// A rule acknowledged with a reason is written to primus-tune.toml: the checklist shows it as
/// acknowledged (not to do), recommend holds it back and says so; --unack withdraws it.
#[test]
fn an_acknowledged_rule_leaves_the_checklist_and_the_advice() {
    let (d, exp) = tree();
    let ws = d.path().join("ws");
    let run = |args: &[&str]| {
        bin()
            .args(args)
            .arg(exp.to_str().unwrap())
            .arg("--workspace")
            .arg(&ws)
            .args(["--set", "overlap_param_gather=false"])
            .output()
            .unwrap()
    };
    let todo = |v: &serde_json::Value| {
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["findings"].as_array().unwrap().clone())
            .find(|f| f["rule"] == "overlap-param-gather")
            .unwrap_or_else(|| panic!("{v}"))
    };
    let before = json(&run(&["checklist", "--json"]).stdout);
    assert_eq!(todo(&before)["kind"], "todo");

    // A reason is required; an unknown rule is refused with the list.
    let out = run(&[
        "recommend",
        "--ack",
        "overlap-param-gather",
        "--reason",
        "  ",
    ]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a reason"));
    let out = run(&["recommend", "--ack", "no-such-rule", "--reason", "x"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("overlap-param-gather"));

    let out = run(&[
        "recommend",
        "--ack",
        "overlap-param-gather",
        "--reason",
        "measured 3 % slower on our fabric",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = json(&run(&["checklist", "--json"]).stdout);
    let f = todo(&after);
    assert_eq!(f["kind"], "acknowledged");
    assert!(f["text"].as_str().unwrap().contains("measured 3 % slower"));
    let text = String::from_utf8_lossy(&run(&["checklist"]).stdout).to_string();
    assert!(text.contains("[ack]"), "{text}");
    let rec = json(&run(&["recommend", "--json", "--gpu", "MI300X"]).stdout);
    assert_eq!(rec["acknowledged"][0]["rule"], "overlap-param-gather");
    assert_eq!(
        rec["acknowledged"][0]["reason"],
        "measured 3 % slower on our fabric"
    );

    let out = run(&["recommend", "--unack", "overlap-param-gather"]);
    assert!(out.status.success());
    assert_eq!(
        todo(&json(&run(&["checklist", "--json"]).stdout))["kind"],
        "todo"
    );
}

/// `set` checks the edit against the world it is given: a global batch that does not split over
/// 8 data-parallel ranks is refused (exit 2, nothing written), the same one on 2 GPUs is not.
#[test]
fn set_checks_the_batch_against_the_world_given_with_gpus() {
    let (_d, exp) = tree();
    let before = std::fs::read_to_string(&exp).unwrap();
    // Micro batch 4 in the example: 40 is no multiple of 4 × 8 = 32, but one of 4 × 2 = 8.
    bin()
        .args([
            "set",
            exp.to_str().unwrap(),
            "global_batch_size=40",
            "--gpus",
            "8",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("global-batch-divisibility"));
    assert_eq!(std::fs::read_to_string(&exp).unwrap(), before);
    bin()
        .args([
            "set",
            exp.to_str().unwrap(),
            "global_batch_size=40",
            "--gpus",
            "2",
        ])
        .assert()
        .success();
}

/// With `--profile`, what its launch sets counts: the megatron profile exports
/// `CUDA_DEVICE_MAX_CONNECTIONS=1`, so recommend does not ask for it; without, it does.
#[test]
fn recommend_counts_the_variables_the_profile_launches_with() {
    let (d, exp) = tree();
    let ws = d.path().join("ws");
    let env_recs = |extra: &[&str]| -> Vec<String> {
        let args = [
            &["--gpu", "H200", "--set", "tensor_model_parallel_size=2"],
            extra,
        ]
        .concat();
        recommend_json(&exp, &ws, &args)["recommendations"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["env"] == true)
            .map(|r| r["flag"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(env_recs(&[]).contains(&"CUDA_DEVICE_MAX_CONNECTIONS".to_string()));
    assert!(
        !env_recs(&["--profile", "megatron"]).contains(&"CUDA_DEVICE_MAX_CONNECTIONS".to_string())
    );
}

/// Inputs that are not a regular UTF-8 file are refused at once, saying what they are: a FIFO
/// (no writer: reading would block), a device, bytes that are not UTF-8 (at their line and
/// column), a directory named by `extends`.
#[test]
fn inputs_that_are_not_regular_utf8_files_are_refused_at_once() {
    let (d, _exp) = tree();
    let fifo = d.path().join("experiments/fifo.yaml");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let root = d.path().to_str().unwrap().to_string();
    let lint = |p: &Path| {
        let out = bin()
            .args(["lint", "--primus-root", &root])
            .arg(p)
            .timeout(std::time::Duration::from_secs(20))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        // A file that cannot be loaded is a finding on stdout.
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(stdout.contains("error[load-error]"), "{stdout}");
        stdout
    };
    assert!(lint(&fifo).contains("not a regular file: a FIFO"));
    let out = bin()
        .arg("parse-log")
        .arg(&fifo)
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a FIFO"));
    // A 3 MiB line is cut at 1 MiB and counted; the lines around it still parse.
    let log = d.path().join("long.log");
    let it = |i: u32| {
        format!(
            " [2026-11-29 22:59:27.865632] iteration {i:>8}/      50 | consumed samples: {:>12} | elapsed time per iteration (ms): 100.0 | global batch size:    16 |\n",
            16 * i
        )
    };
    std::fs::write(&log, format!("{}{}\n{}", it(1), "y".repeat(3 << 20), it(2))).unwrap();
    let out = bin()
        .args(["parse-log", "--json"])
        .arg(&log)
        .output()
        .unwrap();
    let v = json(&out.stdout);
    assert_eq!(v["iterations"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["overlong_lines"]["lines"], 1);
    assert_eq!(
        v["overlong_lines"]["bytes_skipped"],
        (3 << 20) + 1 - (1 << 20)
    );
    assert!(lint(Path::new("/dev/zero")).contains("a character device"));
    let bad = d.path().join("experiments/latin1.yaml");
    std::fs::write(&bad, b"work_group: x\nuser_name: Jos\xe9\n").unwrap();
    let err = lint(&bad);
    assert!(
        err.contains("latin1.yaml:2:15: error[load-error]: not UTF-8 text (byte 0xe9)"),
        "{err}"
    );
    // Over the size cap: refused, naming the way to lift it; lifted, it loads.
    let big = d.path().join("experiments/big.yaml");
    let mut text = std::fs::read_to_string(
        d.path()
            .join(primus_tune::util::bundled::DEFAULT_EXPERIMENT),
    )
    .unwrap();
    text.push_str(
        &"# padding padding padding padding padding padding padding padding\n".repeat(20_000),
    );
    std::fs::write(&big, text).unwrap();
    let capped = bin()
        .args(["lint", "--max-yaml-mib", "1"])
        .arg(&big)
        .output()
        .unwrap();
    assert_eq!(capped.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&capped.stdout).contains("--max-yaml-mib"));
    let lifted = bin()
        .args(["lint", "--max-yaml-mib", "2"])
        .arg(&big)
        .output()
        .unwrap();
    assert!(
        matches!(lifted.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&lifted.stderr)
    );
    std::fs::create_dir_all(d.path().join("experiments/base")).unwrap();
    let ext = write(
        d.path(),
        "experiments/ext.yaml",
        "extends: [base]\nwork_group: x\n",
    );
    assert!(lint(&ext).contains("extends target `base`") && lint(&ext).contains("is a directory"));
}

/// A config value holding an escape sequence is shown escaped: it cannot retitle or recolour
/// the terminal that prints it.
#[test]
fn control_characters_in_values_are_printed_as_escapes() {
    let (_d, exp) = tree();
    let text = std::fs::read_to_string(&exp).unwrap().replace(
        "train_iters: 50",
        "train_iters: 50\n      evil_key: \"\\e]0;pwned\\a\\e[31mred\"",
    );
    std::fs::write(&exp, text).unwrap();
    let out = bin()
        .args(["show", "--flag", "evil_key"])
        .arg(&exp)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "{shown:?}"
    );
    assert!(
        shown.contains("evil_key = \\x1b]0;pwned\\x07\\x1b[31mred"),
        "{shown}"
    );
}

/// `lr=nan` reads back as the NaN it is (no "reads back as .nan instead of .nan"); an integer
/// beyond 64 bits is named as such, from the command line and from the file.
#[test]
fn nan_and_huge_integers_get_the_right_words() {
    let (_d, exp) = tree();
    let out = bin()
        .args(["set"])
        .arg(&exp)
        .arg("lr=nan")
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{all}");
    assert!(!all.contains("instead of"), "{all}");
    let huge = "123456789012345678901234567890";
    let out = bin()
        .args(["set"])
        .arg(&exp)
        .arg(format!("train_iters={huge}"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("int-out-of-range") && err.contains("beyond the 64-bit range"),
        "{err}"
    );
    let text = std::fs::read_to_string(&exp)
        .unwrap()
        .replace("train_iters: 50", &format!("train_iters: {huge}"));
    std::fs::write(&exp, text).unwrap();
    let out = bin().arg("lint").arg(&exp).output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&format!("error[int-out-of-range]: `train_iters: {huge}`")),
        "{shown}"
    );
}

/// `set` writes exactly the value Primus would parse from `--key value`, or refuses it: a
/// comment-looking text, spaces, `yes` and `0x10` stay the strings they are; a line break and
/// YAML node syntax are refused with nothing written.
#[test]
fn set_writes_the_value_asked_for_or_refuses_it() {
    let (_d, exp) = tree();
    for (i, (text, want)) in [
        ("abc # note", serde_json::json!("abc # note")),
        (" lead ", serde_json::json!(" lead ")),
        ("yes", serde_json::json!("yes")),
        ("0x10", serde_json::json!("0x10")),
        ("1.5", serde_json::json!(1.5)),
        ("[1, 2]", serde_json::json!([1, 2])),
        ("None", serde_json::json!(null)),
        ("x\u{85}y", serde_json::Value::Null),
        ("a\nkey: v", serde_json::Value::Null),
        ("&anchor", serde_json::Value::Null),
    ]
    .into_iter()
    .enumerate()
    {
        let key = format!("pt_set_{i}");
        let before = std::fs::read_to_string(&exp).unwrap();
        let out = bin()
            .args(["set", "--write", "--no-backup"])
            .arg(&exp)
            .arg(format!("{key}={text}"))
            .output()
            .unwrap();
        if want.is_null() && text != "None" {
            assert!(!out.status.success(), "{text:?} was written");
            assert_eq!(std::fs::read_to_string(&exp).unwrap(), before, "{text:?}");
            continue;
        }
        assert!(
            out.status.success(),
            "{text:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = bin()
            .args(["show", "--json", "--flag", &key])
            .arg(&exp)
            .output()
            .unwrap();
        let v = json(&shown.stdout);
        assert_eq!(v[0]["value"], want, "{text:?}");
    }
}

/// A key no catalog types whose preset value is a list (TorchTitan's `compile.components`) takes
/// `[model]` as the list it reads as in YAML, not as the string Primus' command line would make
/// of a bare name in brackets; and the summary line shows values as they are written (a string
/// that reads like another type is quoted).
#[test]
fn set_writes_a_list_for_a_list_valued_key_and_shows_values_as_written() {
    let (d, _) = tree();
    let exp = d
        .path()
        .join("experiments/llama3.1_8B-torchtitan-pretrain.yaml");
    let out = bin()
        .args(["set", "--write", "--no-backup"])
        .arg(&exp)
        .args(["compile.components=[model]", "job.description=[draft]"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("+        components: [model]\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("compile.components: [model, loss] (pre_trainer.yaml:67) → [model] (added"),
        "{stdout}"
    );
    assert!(stdout.contains("→ \"[draft]\" (added"), "{stdout}");
    let shown = bin()
        .args([
            "show",
            "--json",
            "--flag",
            "compile.components",
            "--flag",
            "job.description",
        ])
        .arg(&exp)
        .output()
        .unwrap();
    let v = json(&shown.stdout);
    assert_eq!(v[0]["value"], serde_json::json!(["model"]), "{v}");
    assert_eq!(v[1]["value"], serde_json::json!("[draft]"), "{v}");
}

/// Completions load in bash (syntax, then `complete -p`); zsh and fish are generated; the man
/// page is roff naming the commands.
#[test]
fn completions_load_in_bash_and_the_man_page_is_roff() {
    let d = tempfile::tempdir().unwrap();
    let out = bin().args(["completions", "bash"]).assert().success();
    let script = d.path().join("primus-tune.bash");
    std::fs::write(&script, &out.get_output().stdout).unwrap();
    let sh = |args: &[&str]| {
        std::process::Command::new("bash")
            .args(args)
            .output()
            .unwrap()
    };
    let syntax = sh(&["-n", script.to_str().unwrap()]);
    assert!(syntax.status.success(), "{syntax:?}");
    let loaded = sh(&[
        "-c",
        &format!("source '{}' && complete -p primus-tune", script.display()),
    ]);
    assert!(loaded.status.success(), "{loaded:?}");
    assert!(String::from_utf8_lossy(&loaded.stdout).contains("primus-tune"));
    for shell in ["zsh", "fish"] {
        let out = bin().args(["completions", shell]).assert().success();
        assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("sweep"));
    }
    bin().args(["completions", "tcsh"]).assert().code(64);
    let man = bin().arg("man").assert().success();
    let text = String::from_utf8_lossy(&man.get_output().stdout).into_owned();
    assert!(text.contains(".TH primus-tune 1"), "{text}");
    assert!(text.contains("lint"), "{text}");
    let pages = d.path().join("man");
    bin().args(["man", "--out"]).arg(&pages).assert().success();
    assert!(pages.join("primus-tune-lint.1").is_file());
}

/// A mistyped command is a usage error with a suggestion, never a CONFIG named `lnt`.
#[test]
fn mistyped_commands_are_usage_errors_with_a_suggestion() {
    let (_d, exp) = tree();
    bin()
        .arg("sweeep")
        .assert()
        .code(64)
        .stderr(predicate::str::contains("did you mean `sweep`?"));
    let out = bin()
        .args(["lnt", exp.to_str().unwrap(), "--json"])
        .assert()
        .code(64)
        .stderr(predicate::str::contains("did you mean `lint`?"));
    let v = json(&out.get_output().stdout);
    assert_eq!(v["error"]["kind"], "usage", "{v}");
    // Clap's own usage errors are 64 too, and JSON with --json.
    let out = bin()
        .args(["show", "--no-such-option", "--json"])
        .assert()
        .code(64);
    assert_eq!(json(&out.get_output().stdout)["error"]["exit_code"], 64);
    // --help is no error.
    bin().arg("--help").assert().success().stdout(
        predicate::str::contains("64 usage error").and(predicate::str::contains("66 no input")),
    );
}

/// `trials` and `report` take CONFIG positionally, as the other commands do (the same as
/// `--config`); `trials --status` takes every word the status column prints.
#[test]
fn trials_and_report_take_config_positionally_and_status_words() {
    let (d, exp) = tree();
    let ws = d.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    // Named positionally, a missing experiment is named back (it is read as the CONFIG).
    bin()
        .args(["trials", "/nonexistent/exp.yaml"])
        .assert()
        .code(66)
        .stderr(predicate::str::contains("/nonexistent/exp.yaml"));
    bin()
        .args(["report", "s", "/nonexistent/exp.yaml", "--out"])
        .arg(d.path().join("r"))
        .assert()
        .code(66)
        .stderr(predicate::str::contains("/nonexistent/exp.yaml"));
    bin()
        .args(["trials", "--config"])
        .arg(&exp)
        .arg(&exp)
        .assert()
        .code(64);
    // A database with no trials: every printed word filters (to nothing), others are refused.
    drop(primus_tune::store::Store::open(&ws.join("trials.db")).unwrap());
    for word in [
        "completed",
        "interrupted",
        "oom",
        "host-oom",
        "job-lost",
        "slurm-lost",
    ] {
        let out = bin()
            .arg("trials")
            .arg(&exp)
            .args([
                "--workspace",
                ws.to_str().unwrap(),
                "--json",
                "--status",
                word,
            ])
            .assert()
            .success();
        assert_eq!(
            json(&out.get_output().stdout),
            serde_json::json!([]),
            "{word}"
        );
    }
    bin()
        .arg("trials")
        .arg(&exp)
        .args(["--workspace", ws.to_str().unwrap(), "--status", "crashed"])
        .assert()
        .code(64)
        .stderr(predicate::str::contains("non-zero-exit"));
}

/// A GPU backend asked for by name that finds no GPU fails (status 2, the reason on stderr, and
/// JSON with --json); an unknown backend is a usage error.
#[test]
fn gpus_with_a_named_backend_and_no_gpu_fails() {
    let empty = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "gpus",
            "--backend",
            "amdgpu-sysfs",
            "--json",
            "--sysfs-root",
        ])
        .arg(empty.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--backend amdgpu-sysfs: no GPU"));
    assert_eq!(json(&out.get_output().stdout)["error"]["kind"], "failed");
    // No AMD SMI library under this ROCm path (on a machine without ROCm installed: there,
    // the library could be found in its default place).
    if !Path::new("/opt/rocm").exists() {
        bin()
            .args(["gpus", "--backend", "amd-smi"])
            .env("ROCM_PATH", empty.path())
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--backend amd-smi: no GPU"));
    }
    bin().args(["gpus", "--backend", "host"]).assert().success();
    bin()
        .args(["gpus", "--backend", "quantum"])
        .assert()
        .code(64);
}

/// `source` is an object with `kind` and `text` in every JSON output: show, checklist (a
/// flag's origin, or the default), lint (the world size's), recommend (a rule's reference).
#[test]
fn source_has_one_json_shape_everywhere() {
    let (_d, exp) = tree();
    let e = exp.to_str().unwrap();
    let mut sources = Vec::new();
    let show = json(
        &bin()
            .args(["show", e, "--json", "--set", "micro_batch_size=8"])
            .output()
            .unwrap()
            .stdout,
    );
    for row in show.as_array().unwrap() {
        sources.push(("show", row["source"].clone()));
    }
    let kinds: Vec<&str> = sources
        .iter()
        .filter_map(|(_, s)| s["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"file") && kinds.contains(&"command-line"),
        "{kinds:?}"
    );
    let checklist = json(
        &bin()
            .args(["checklist", e, "--json"])
            .output()
            .unwrap()
            .stdout,
    );
    let steps = checklist["steps"]
        .as_array()
        .or(checklist.as_array())
        .unwrap()
        .clone();
    for step in &steps {
        for f in step["flags"].as_array().unwrap() {
            sources.push(("checklist", f["source"].clone()));
        }
    }
    let lint = json(
        &bin()
            .args(["lint", e, "--json", "--gpus", "8"])
            .output()
            .unwrap()
            .stdout,
    );
    sources.push(("lint", lint["world"]["source"].clone()));
    let rec = json(
        &bin()
            .args(["recommend", e, "--json", "--gpu", "MI300X"])
            .output()
            .unwrap()
            .stdout,
    );
    for r in rec["recommendations"].as_array().unwrap() {
        sources.push(("recommend", r["source"].clone()));
        if r["basis"]["kind"] == "rule" {
            sources.push(("recommend basis", r["basis"]["source"].clone()));
        }
    }
    assert!(sources.iter().any(|(w, _)| *w == "checklist"));
    assert!(sources.iter().any(|(w, _)| *w == "recommend"));
    for (what, s) in &sources {
        assert!(
            s.is_object() && s["kind"].is_string() && s["text"].is_string(),
            "{what}: {s}"
        );
    }
}

/// An empty `XDG_DATA_HOME` counts as unset (the XDG spec): the bundled example goes under
/// `~/.local/share/primus-tune`, not into a `primus-tune` folder of the current one.
#[test]
fn an_empty_xdg_data_home_is_unset() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    common::cli(&data)
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", "")
        .current_dir(cwd.path())
        .arg("lint")
        .assert()
        .success();
    let share = home.path().join(".local/share/primus-tune");
    let examples = std::fs::read_dir(&share)
        .unwrap_or_else(|e| panic!("{}: {e}", share.display()))
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("examples-"));
    assert!(examples, "nothing extracted under {}", share.display());
    assert!(
        !cwd.path().join("primus-tune").exists(),
        "written into the current folder"
    );
}

/// A Slurm trial is placed at its job's nodes × GPUs per node, never at the node that submits
/// it: its lint gate and a sweep's legality are judged at that world, before anything is
/// submitted (so no cluster is needed to see it).
#[test]
fn a_slurm_trial_and_sweep_are_checked_at_the_job_s_world() {
    let (dir, exp) = tree();
    let ws = dir.path().join("ws");
    let slurm = [
        "--slurm",
        "--nodes",
        "2",
        "--gpus-per-node",
        "8",
        "--profile",
        "megatron",
    ];
    let out = bin()
        .args(["run", exp.to_str().unwrap()])
        .args(slurm)
        .args([
            "--set",
            "micro_batch_size=5",
            "--set",
            "global_batch_size=100",
        ])
        .arg("--workspace")
        .arg(&ws)
        .env("SLURM_CONF", dir.path().join("no-cluster.conf"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("5 × 16 = 80"), "{err}");
    assert!(
        err.contains("the job's nodes × GPUs per node = 2 × 8"),
        "{err}"
    );
    // --gpus that disagrees with the job's shape is a usage error.
    let out = bin()
        .args(["run", exp.to_str().unwrap()])
        .args(slurm)
        .args(["--gpus", "8", "--workspace"])
        .arg(&ws)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--gpus 8 does not match"));
    // A sweep's candidates are legal or not at world 16: micro batch 8 × DP 16 = 128 does not
    // divide the global batch of 64.
    let space = write(
        dir.path(),
        "mbs.yaml",
        "name: mbs\ndescription: mbs\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2, 4, 8]\n    memory: increasing\n",
    );
    let out = bin()
        .args(["sweep", exp.to_str().unwrap()])
        .args(slurm)
        .args(["--space", space.to_str().unwrap()])
        .args([
            "--set",
            "global_batch_size=64",
            "--max-trials",
            "0",
            "--json",
        ])
        .arg("--workspace")
        .arg(&ws)
        .output()
        .unwrap();
    let first: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(first["event"], "sweep-started", "{first}");
    assert_eq!(
        (first["gpus"].as_u64(), first["legal"].as_u64()),
        (Some(16), Some(3)),
        "{first}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("8 × 16 = 128"), "{text}");
}

/// A CPU stand-in's sweep of a space that ranks what fits in memory is refused (its peaks are
/// the host's), with the way out; with `--json` the error is one JSON object on one line, so a
/// streaming command's output stays one object per line.
#[test]
fn a_stand_in_s_memory_fit_sweep_is_refused_and_its_json_error_is_one_line() {
    let (dir, exp) = tree();
    let out = bin()
        .args([
            "sweep",
            exp.to_str().unwrap(),
            "--space",
            "memory-fit",
            "--json",
        ])
        .args(["--profile", "proxy-cpu", "--workspace"])
        .arg(dir.path().join("ws"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("does not model micro_batch_size")
            && err.contains("a CPU stand-in's peak is the host's")
            && err.contains("--allow-unmodeled"),
        "{err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["error"]["exit_code"], 2, "{v}");
    // Refused before anything was stored: no study left behind.
    let out = bin()
        .args(["studies", "--json", "--workspace"])
        .arg(dir.path().join("ws"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("memory-fit"), "{text}");
}

/// In a git checkout of a Primus tree, a save leaves only the edited file changed: its kept
/// versions live in the workspace, and `backups --restore` brings one back (keeping the one it
/// replaces in turn).
#[test]
fn a_save_in_a_git_checkout_changes_only_the_edited_file_and_can_be_restored() {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: git is not installed");
        return;
    }
    let (dir, exp) = tree();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "primus"]);
    let before = std::fs::read_to_string(&exp).unwrap();
    bin()
        .current_dir(dir.path())
        .args([
            "set",
            exp.to_str().unwrap(),
            "turbo_deepep_num_cu=80",
            "--write",
        ])
        .assert()
        .success();
    let rel = exp.strip_prefix(dir.path()).unwrap().display().to_string();
    assert_eq!(git(&["status", "--porcelain"]), format!(" M {rel}\n"));
    // Restore the version the save replaced: a dry run first, then --write.
    bin()
        .args(["backups", exp.to_str().unwrap(), "--restore", "1"])
        .assert()
        .success()
        .stdout(predicate::str::contains("-      turbo_deepep_num_cu: 80"))
        .stdout(predicate::str::contains("dry run"));
    bin()
        .args([
            "backups",
            exp.to_str().unwrap(),
            "--restore",
            "1",
            "--write",
        ])
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&exp).unwrap(), before);
    assert_eq!(git(&["status", "--porcelain"]), "");
    // The version the restore replaced is kept too: 80 is one step back.
    let kept = kept_versions(&exp);
    let newest = std::fs::read_to_string(kept[0]["path"].as_str().unwrap()).unwrap();
    assert!(newest.contains("turbo_deepep_num_cu: 80"), "{newest}");
    bin()
        .args(["backups", exp.to_str().unwrap(), "--restore", "9"])
        .assert()
        .code(64)
        .stderr(predicate::str::contains("no kept version `9`"));
}

/// Trials of two backends are not compared (a TorchTitan trial's values are not a Megatron-LM
/// experiment's), nor applied across.
#[test]
fn trials_of_two_backends_are_not_compared() {
    let (dir, exp) = tree();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let store = primus_tune::store::Store::open(&ws.join("trials.db")).unwrap();
    let mut ids = Vec::new();
    for key in ["train_iters", "training.steps"] {
        let id = store
            .insert_trial(&primus_tune::store::NewTrial {
                config_path: exp.clone(),
                config_hash: key.into(),
                overrides: vec![(key.to_string(), serde_json::json!(10))],
                trial_dir: ws.join(key),
                ..Default::default()
            })
            .unwrap();
        let mut end =
            primus_tune::store::TrialEnd::new(primus_tune::store::TrialStatus::Completed, 1.0);
        end.median_step_ms = Some(100.0);
        store.finish_trial(id, &end).unwrap();
        ids.push(id.to_string());
    }
    drop(store);
    bin()
        .args(["trials", "compare", &ids[0], &ids[1], "--config"])
        .arg(&exp)
        .arg("--workspace")
        .arg(&ws)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("ran Megatron-LM and trial"))
        .stderr(predicate::str::contains("not comparable"));
}

/// The help says what the commands do: where a default comes from (the defaults file's `gpus`
/// and `profile`, which tests/defaults_file.rs shows taking effect), where backups go, what a
/// stand-in's budget counts.
#[test]
fn help_texts_match_what_the_commands_do() {
    let help = |args: &[&str]| {
        let out = bin().args(args).arg("--help").output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for cmd in ["lint", "run", "sweep", "set", "show", "checklist"] {
        let h = help(&[cmd]);
        assert!(h.contains("`gpus` of the defaults file"), "{cmd}: {h}");
    }
    for cmd in ["run", "sweep"] {
        let h = help(&[cmd]);
        assert!(
            h.contains("`profile` of the defaults file, else proxy-cpu"),
            "{cmd}: {h}"
        );
    }
    let sweep = help(&["sweep"]);
    assert!(
        sweep.contains("CPU time") && sweep.contains("keeps the cap it started with"),
        "{sweep}"
    );
    let recommend = help(&["recommend"]);
    assert!(
        !recommend.contains(".bak") && !recommend.contains(".orig"),
        "{recommend}"
    );
    assert!(recommend.contains("primus-tune backups"), "{recommend}");
    let set = help(&["set"]);
    assert!(set.contains("primus-tune backups"), "{set}");
}
