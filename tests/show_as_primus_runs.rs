//! `show` gives the values Primus runs: its merges' `"null"` → None, Megatron-LM's own defaults
//! for what no file of the chain sets, and Primus' `build_args` patches. The trees are small
//! ones written here, modeled on Primus' (a MiniMax-like model preset that names its base
//! under `bases:`, which Primus does not read, so `language_model.yaml` is not in its chain).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value as J;
use std::path::{Path, PathBuf};

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

/// The bundled example plus a model preset outside `language_model.yaml`'s chain and an
/// experiment on it, its `overrides` extended by `extra`.
fn tree(extra: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    primus_tune::util::bundled::extract(dir.path()).unwrap();
    write(
        dir.path(),
        "primus/configs/models/megatron/hybrid_4L.yaml",
        "bases:\n  - language_model.yaml\n\ntokenizer_type: HuggingFaceTokenizer\n\
         num_layers: 4\nhidden_size: 256\nffn_hidden_size: 1024\nnum_attention_heads: 4\n\
         seq_length: 1024\nmax_position_embeddings: 1024\n",
    );
    let exp = write(
        dir.path(),
        "experiments/hybrid_4L-pretrain.yaml",
        &format!(
            "work_group: amd\nuser_name: root\nexp_name: hybrid\nworkspace: ./output\n\
             modules:\n  pre_trainer:\n    framework: megatron\n    config: pre_trainer.yaml\n\
             \x20   model: hybrid_4L.yaml\n    overrides:\n\
             \x20     train_data_path: ${{PRIMUS_TOKENIZED_DATA_PATH:null}}\n\
             \x20     tensor_model_parallel_size: ${{PRIMUS_TP:1}}\n{extra}"
        ),
    );
    (dir, exp)
}

/// `show EXP --json ARGS...` in an empty environment, as rows by name.
fn show(exp: &Path, args: &[&str]) -> serde_json::Map<String, J> {
    let data = tempfile::tempdir().unwrap();
    let out = common::cli(data.path())
        .env_remove("PRIMUS_TOKENIZED_DATA_PATH")
        .env_remove("PRIMUS_TP")
        .arg("show")
        .arg(exp)
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<J> = serde_json::from_slice(&out.stdout).unwrap();
    rows.into_iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r))
        .collect()
}

#[test]
fn a_null_string_primus_merges_is_shown_as_none() {
    let (_d, exp) = tree("");
    let rows = show(&exp, &["--flag", "train_data_path"]);
    let row = &rows["train_data_path"];
    assert_eq!(row["value"], J::Null, "{row}");
    assert_eq!(row["template"], "${PRIMUS_TOKENIZED_DATA_PATH:null}");
}

#[test]
fn flags_no_file_sets_take_megatron_defaults_not_another_presets() {
    let (_d, exp) = tree("");
    let rows = show(&exp, &["--all"]);
    // language_model.yaml says `sequence_parallel: true`, `num_query_groups: null`; this chain
    // does not include it, so Megatron-LM's defaults apply.
    let sp = &rows["sequence_parallel"];
    assert_eq!(sp["value"], false, "{sp}");
    assert_eq!(sp["source"]["kind"], "default");
    assert!(
        sp["source"]["text"]
            .as_str()
            .unwrap()
            .contains("Megatron-LM default"),
        "{sp}"
    );
    assert_eq!(rows["num_query_groups"]["value"], 1);
    // Keys only language_model.yaml has, which Megatron-LM no longer knows: nothing is passed.
    for gone in [
        "async_tensor_model_parallel_allreduce",
        "virtual_pipeline_model_parallel_size",
        "moe_use_legacy_grouped_gemm",
    ] {
        assert!(!rows.contains_key(gone), "{gone} is shown: {}", rows[gone]);
    }
    // `bases:` is no `extends`: Primus keeps it as a parameter like any other key.
    assert_eq!(
        rows["bases"]["value"],
        serde_json::json!(["language_model.yaml"])
    );
}

#[test]
fn at_tp8_sequence_parallel_stays_off_when_no_file_sets_it() {
    let (_d, exp) = tree("");
    let rows = show(&exp, &["--all", "--env", "PRIMUS_TP=8"]);
    assert_eq!(rows["tensor_model_parallel_size"]["value"], 8);
    assert_eq!(rows["sequence_parallel"]["value"], false);
}

#[test]
fn asking_for_a_key_megatron_no_longer_has_says_it_is_not_set() {
    let (_d, exp) = tree("");
    let data = tempfile::tempdir().unwrap();
    let out = common::cli(data.path())
        .arg("show")
        .arg(&exp)
        .args(["--flag", "async_tensor_model_parallel_allreduce"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not set: no file of this chain sets it"),
        "{text}"
    );
}

#[test]
fn values_primus_patches_are_shown_as_it_runs_them_with_the_patch_as_source() {
    // The bundled MoE example: mock data, TP 1, sequence_parallel true in its presets.
    let dir = tempfile::tempdir().unwrap();
    primus_tune::util::bundled::extract(dir.path()).unwrap();
    let exp = dir
        .path()
        .join(primus_tune::util::bundled::DEFAULT_EXPERIMENT);
    let rows = show(&exp, &["--all"]);
    let sp = &rows["sequence_parallel"];
    assert_eq!(sp["value"], false, "{sp}");
    assert_eq!(sp["source"]["kind"], "patch");
    assert_eq!(
        sp["source"]["file"],
        "primus/backends/megatron/patches/args/sequence_parallel_tp1_patches.py"
    );
    assert_eq!(sp["patch"]["id"], "megatron.args.sequence_parallel_tp1");
    assert_eq!(
        sp["overridden"].as_array().unwrap().last().unwrap()["value"],
        true
    );
    let tok = &rows["tokenizer_type"];
    assert_eq!(tok["value"], "NullTokenizer", "{tok}");
    assert_eq!(tok["patch"]["id"], "megatron.args.mock_data");
    assert_eq!(rows["vocab_size"]["value"], 131072);
    // At TP 2 the file's value is what runs.
    let rows = show(&exp, &["--all", "--set", "tensor_model_parallel_size=2"]);
    assert_eq!(rows["sequence_parallel"]["value"], true);
    assert_eq!(rows["sequence_parallel"]["source"]["kind"], "file");
    // The text view names the patch and why.
    let data = tempfile::tempdir().unwrap();
    let out = common::cli(data.path())
        .arg("show")
        .arg(&exp)
        .args(["--flag", "sequence_parallel"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sequence_parallel = false"), "{text}");
    assert!(
        text.contains("patched: megatron.args.sequence_parallel_tp1")
            && text.contains("tensor_model_parallel_size is 1"),
        "{text}"
    );
}
