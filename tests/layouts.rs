//! `primus-tune layouts` as a user runs it: the bundled examples and AMD's MoE examples (EP 8,
//! a pipeline its config places itself), every illegal layout with the lint rules it breaks,
//! every legal one with its forecast and prediction.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;

fn bin() -> Command {
    common::cli(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("layouts-data"))
}

fn bundled(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    primus_tune::util::bundled::extract(dir.path()).unwrap();
    let exp = dir.path().join("experiments").join(name);
    (dir, exp)
}

/// `layouts --json` of `exp` with the arguments, as parsed JSON.
fn layouts(exp: &Path, args: &[&str]) -> Value {
    common::json_ok(
        &bin()
            .arg("layouts")
            .arg(exp)
            .args(args)
            .arg("--json")
            .output()
            .unwrap(),
    )
}

fn labels(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["label"].as_str().unwrap().to_string())
        .collect()
}

/// The labels of the legal layouts marked as the experiment's own.
fn current_labels(v: &Value) -> Vec<String> {
    v["legal"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["current"] == true)
        .map(|l| l["label"].as_str().unwrap().to_string())
        .collect()
}

/// The lint codes every illegal layout names.
fn rule_ids(v: &Value) -> Vec<String> {
    let mut ids: Vec<String> = v["illegal"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["rules"].as_array().unwrap().iter())
        .map(|r| r[0].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

#[test]
fn a_dense_llama_on_8_gpus_has_every_tiling_layout_judged() {
    let (_d, exp) = bundled("llama3_8B-BF16-pretrain.yaml");
    let v = layouts(&exp, &["--gpus", "8", "--gpu", "MI300X"]);
    let (legal, illegal) = (labels(&v, "legal"), labels(&v, "illegal"));
    // Sequence 8192: CP joins. TP × PP × CP dividing 8: 20 triples, 10 of them with PP > 1
    // (VPP none, 2, 4); micro batch 1, 2, 4, 8.
    assert_eq!(v["bounds"]["cp"], serde_json::json!([1, 2, 4, 8]));
    assert_eq!(legal.len() + illegal.len(), (20 + 2 * 10) * 4);
    // Every illegal one says why, with lint's own rule ids.
    for l in v["illegal"].as_array().unwrap() {
        let rules = l["rules"].as_array().unwrap();
        assert!(!rules.is_empty(), "{l}");
        for r in rules {
            let id = r[0].as_str().unwrap();
            assert!(
                primus_tune::config::lint::codes::is_code(id),
                "{id} is not a lint code"
            );
        }
    }
    // The experiment's own layout is legal and marked.
    let current: Vec<&Value> = v["legal"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["current"] == true)
        .collect();
    assert_eq!(current.len(), 1);
    assert_eq!(current[0]["relative"], 1.0);
    // Each legal one has a memory forecast and a predicted step on a known GPU.
    for l in v["legal"].as_array().unwrap() {
        assert!(l["memory_bytes"].as_f64().unwrap() > 1e9, "{l}");
        assert!(l["predicted"]["step_s"].as_f64().unwrap() > 0.0, "{l}");
    }
    assert!(v["basis"].as_str().unwrap().starts_with("prediction"));
    // `--gpus` says nothing of nodes: 8 GPUs a node is assumed, and said; given, it bounds TP.
    let notes = v["bounds"]["notes"].to_string();
    assert!(notes.contains("8 GPUs a node assumed"), "{notes}");
    let four = layouts(
        &exp,
        &["--gpus", "8", "--gpu", "MI300X", "--gpus-per-node", "4"],
    );
    assert_eq!(four["bounds"]["tp"], serde_json::json!([1, 2, 4]));
    assert!(!four["bounds"]["notes"].to_string().contains("assumed"));
}

#[test]
fn the_bundled_moe_adds_expert_parallel_layouts_and_names_each_rule() {
    let (_d, exp) = bundled("moe_16B-BF16-pretrain.yaml");
    let v = layouts(&exp, &["--gpus", "8", "--gpu", "MI300X"]);
    assert_eq!(v["bounds"]["ep"], serde_json::json!([1, 2, 4, 8]));
    let legal = labels(&v, "legal");
    assert!(legal.iter().any(|l| l.contains("EP8")), "{legal:?}");
    let ids = rule_ids(&v);
    // 27 layers do not split over 2, 4 or 8 stages.
    assert!(ids.contains(&"pipeline-layers".to_string()), "{ids:?}");
    // A PP 2 layout is out for its layers, not for anything else.
    let pp2 = v["illegal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["label"] == "TP1 PP2 CP1 EP1 MBS1")
        .unwrap();
    assert_eq!(pp2["rules"][0][0], "pipeline-layers");
}

#[test]
fn without_a_gpu_model_there_is_no_prediction_and_the_text_says_so() {
    let (_d, exp) = bundled("llama3_8B-BF16-pretrain.yaml");
    let v = layouts(&exp, &["--gpus", "8"]);
    // The bundled example's path names no GPU; a GPU detected here would give one.
    if v["gpu"].is_null() {
        assert!(v["legal"][0]["predicted"].is_null());
    } else {
        eprintln!(
            "skipping the no-GPU half: this machine reports a GPU ({})",
            v["gpu"][0]
        );
    }
    let out = bin()
        .arg("layouts")
        .arg(&exp)
        .args(["--gpus", "8", "--gpu", "MI300X"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Legal: "), "{text}");
    assert!(text.contains("no layout here was measured"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("* TP")), "{text}");
}

#[test]
fn without_a_world_layouts_say_what_to_give() {
    let (_d, exp) = bundled("llama3_8B-BF16-pretrain.yaml");
    let out = bin().arg("layouts").arg(&exp).output().unwrap();
    // On a machine with GPUs the detected ones are the world; without, a usage error.
    if !out.status.success() {
        assert_eq!(out.status.code(), Some(64), "EX_USAGE");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--gpus N"), "{err}");
    } else {
        eprintln!("skipping: this machine's GPUs give the world");
    }
}

/// An example of AMD's in ../shared, under `examples/<backend>/configs` (skipped with a message
/// when absent).
fn amd_example(backend: &str, rel: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/primus/examples")
        .join(backend)
        .join("configs")
        .join(rel);
    if !p.is_file() {
        eprintln!("skipping: {} is absent", p.display());
        return None;
    }
    Some(p)
}

/// AMD's Megatron examples.
fn amd(rel: &str) -> Option<PathBuf> {
    amd_example("megatron", rel)
}

#[test]
fn amd_s_mixtral_keeps_its_ep8_layout_legal_and_rules_out_what_megatron_refuses() {
    let Some(exp) = amd("MI300X/mixtral_8x7B_v0.1-FP8-pretrain.yaml") else {
        return;
    };
    let v = layouts(&exp, &["--gpus", "8"]);
    assert_eq!(current_labels(&v), ["TP1 PP1 CP1 EP8 MBS2"]);
    // The GPU comes from the path (configs/MI300X/...).
    assert_eq!(v["gpu"][0], "MI300X");
    let ids = rule_ids(&v);
    for id in ["global-batch-divisibility", "world-expert-parallel"] {
        assert!(ids.contains(&id.to_string()), "{id}: {ids:?}");
    }
}

#[test]
fn amd_s_deepseek_v3_keeps_the_pipeline_its_layout_places() {
    let Some(exp) = amd("MI355X/deepseek_v3-BF16-pretrain.yaml") else {
        return;
    };
    let v = layouts(&exp, &["--gpus", "128"]);
    assert_eq!(v["bounds"]["pp"], serde_json::json!([16]));
    let notes = v["bounds"]["notes"].to_string();
    assert!(notes.contains("PP fixed at 16"), "{notes}");
    assert_eq!(current_labels(&v), ["TP1 PP16 CP1 EP8 MBS2"]);
    // EP beyond what 128 / (ETP × PP) allows is out, by the expert-parallel world rule.
    let ep16 = v["illegal"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["label"] == "TP1 PP16 CP1 EP16 MBS2")
        .unwrap();
    let ids: Vec<&str> = ep16["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"world-expert-parallel"), "{ids:?}");
}

/// AMD's TorchTitan examples.
fn amd_titan(rel: &str) -> Option<PathBuf> {
    amd_example("torchtitan", rel)
}

#[test]
fn amd_s_torchtitan_llama_gets_fsdp_layouts_that_hold_its_global_batch() {
    let Some(exp) = amd_titan("MI300X/llama3.1_8B-BF16-pretrain.yaml") else {
        return;
    };
    let v = layouts(&exp, &["--gpus", "8"]);
    assert_eq!(v["backend"], "torchtitan");
    assert_eq!(v["bounds"]["vpp"], serde_json::json!([null]));
    let notes = v["bounds"]["notes"].to_string();
    assert!(
        notes.contains("global batch at 32"),
        "local 4 × DP 8: {notes}"
    );
    let legal = labels(&v, "legal");
    assert!(
        legal.contains(&"TP1 PP1 CP1 EP1 MBS4".to_string()),
        "{legal:?}"
    );
    assert!(
        legal.contains(&"TP2 PP2 CP2 EP1 SP MBS1".to_string()),
        "{legal:?}"
    );
    // A local batch of 8 on DP 8 is 64 samples a step, over the global batch of 32.
    let illegal = labels(&v, "illegal");
    assert_eq!(illegal, vec!["TP1 PP1 CP1 EP1 MBS8".to_string()]);
    assert_eq!(rule_ids(&v), vec!["titan-global-batch".to_string()]);
    assert!(
        v["legal"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["memory_bytes"].is_number())
    );
}

#[test]
fn amd_s_torchtitan_deepseek_rules_out_expert_meshes_torchtitan_cannot_build() {
    let Some(exp) = amd_titan("MI300X/deepseek_v3_16b-FP8-pretrain.yaml") else {
        return;
    };
    let v = layouts(&exp, &["--gpus", "8"]);
    assert_eq!(current_labels(&v), ["TP1 PP1 CP1 EP8 MBS8"]);
    // PP 2 leaves dp_shard × CP × TP = 4, which EP 8 does not divide.
    let illegal = labels(&v, "illegal");
    assert!(
        illegal.contains(&"TP1 PP2 CP1 EP8 MBS1".to_string()),
        "{illegal:?}"
    );
    assert_eq!(
        rule_ids(&v),
        vec!["titan-world-expert-parallel".to_string()]
    );
}
