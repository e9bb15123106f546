//! How the CLI fails, per kind (docs/ci.md, "Exit status"): a name that is not one of a fixed
//! set is a usage error (64) with "did you mean"; a trial or study that does not exist is no input
//! (66); an output that cannot be created is EX_CANTCREAT (73).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::Path;

mod common;

/// The binary with its own data and config folders (no user profiles or defaults).
fn bin(home: &Path) -> Command {
    let mut c = common::cli(&home.join("data"));
    c.env("XDG_CONFIG_HOME", home.join("config"));
    c
}

fn json(out: &[u8]) -> serde_json::Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

#[test]
fn mistyped_nested_commands_are_suggested() {
    let d = tempfile::tempdir().unwrap();
    for (args, want) in [
        (&["trials", "shw", "3"][..], "did you mean `trials show`?"),
        (
            &["studies", "shwo", "x"][..],
            "did you mean `studies show`?",
        ),
        (
            &["gemm-tune", "stauts"][..],
            "did you mean `gemm-tune status`?",
        ),
    ] {
        bin(d.path())
            .args(args)
            .assert()
            .code(64)
            .stderr(predicate::str::contains(want));
    }
}

#[test]
fn names_of_fixed_sets_are_usage_errors_with_did_you_mean() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    drop(primus_tune::store::Store::open(&ws.join("trials.db")).unwrap());
    let ws = ws.to_str().unwrap();
    for (args, want) in [
        (
            &["sweep", "--space", "memory-fti"][..],
            "did you mean `memory-fit`?",
        ),
        (
            &["run", "--profile", "proxy-cpi", "--workspace", ws][..],
            "did you mean `proxy-cpu`?",
        ),
        (
            &["recommend", "--profile", "primsu"][..],
            "did you mean `primus`?",
        ),
        (&["lint", "--format", "sarf"][..], "'sarif'"),
        (
            &["trials", "--status", "complted", "--workspace", ws][..],
            "did you mean `completed`?",
        ),
        (
            &["gpus", "--backend", "amd-smy"][..],
            "did you mean `amd-smi`?",
        ),
        // Checked as it is parsed: no trial is launched that would sample nothing.
        (&["run", "--backend", "nvm"][..], "did you mean `nvml`?"),
        (
            &["recommend", "--gpu", "mi300"][..],
            "did you mean `MI300X`?",
        ),
    ] {
        bin(d.path())
            .args(args)
            .assert()
            .code(64)
            .stderr(predicate::str::contains(want));
    }
    let out = bin(d.path())
        .args(["sweep", "--space", "memory-fti", "--json"])
        .assert()
        .code(64);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["error"]["kind"], "usage", "{v}");
}

#[test]
fn an_unknown_trial_study_or_space_file_is_no_input() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    drop(primus_tune::store::Store::open(&ws.join("trials.db")).unwrap());
    let ws = ws.to_str().unwrap();
    for args in [
        &["trials", "show", "999", "--workspace", ws][..],
        &["trials", "compare", "998", "999", "--workspace", ws][..],
        &["studies", "show", "nope", "--workspace", ws][..],
        &["recommend", "--study", "nope", "--workspace", ws][..],
        // A space file that does not exist.
        &[
            "sweep",
            "--space",
            "/nonexistent/space.yaml",
            "--workspace",
            ws,
        ][..],
    ] {
        let out = bin(d.path()).args(args).arg("--json").assert().code(66);
        let v = json(&out.get_output().stdout);
        assert_eq!(v["error"]["kind"], "no-input", "{args:?}: {v}");
    }
}

#[test]
fn an_output_that_cannot_be_created_is_73() {
    let d = tempfile::tempdir().unwrap();
    // A file where a folder should be: nothing can be created below it.
    let blocker = d.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let below = blocker.join("sub");
    let out = bin(d.path())
        .args(["man", "--out"])
        .arg(&below)
        .assert()
        .code(73)
        .stderr(predicate::str::contains("cannot write the manual pages"));
    assert!(out.get_output().stdout.is_empty());
    bin(d.path())
        .args([
            "monitor",
            "--backend",
            "host",
            "--duration",
            "0.2",
            "--snapshots-dir",
        ])
        .arg(&below)
        .assert()
        .code(73)
        .stderr(predicate::str::contains("cannot create"));
    let out = bin(d.path())
        .args(["run", "--json", "--workspace"])
        .arg(&below)
        .assert()
        .code(73)
        .stderr(predicate::str::contains("cannot create the folder"));
    let v = json(&out.get_output().stdout);
    assert_eq!(v["error"]["kind"], "cant-create", "{v}");
    assert_eq!(v["error"]["exit_code"], 73, "{v}");
    // A folder named as the database file: SQLite's "unable to open" said nothing of why.
    bin(d.path())
        .args(["run", "--max-iters", "3", "--db"])
        .arg(d.path())
        .assert()
        .code(73)
        .stderr(predicate::str::contains(
            "is a folder, not a database file (name a file, such as",
        ));
    // A read command names the folder too, rather than "no trial database yet".
    for cmd in ["trials", "studies"] {
        bin(d.path())
            .args([cmd, "--db"])
            .arg(d.path())
            .assert()
            .code(73)
            .stderr(predicate::str::contains("is a folder, not a database file"));
    }
}

/// A symbolic link loop given as the experiment is named a loop (ELOOP) with its path, by
/// `show` and `lint` alike — not "no such file", which sends the user looking for a file that
/// is there.
#[test]
fn a_symlink_loop_is_named_a_loop_not_a_missing_file() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a.yaml"), d.path().join("b.yaml"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    for args in [&["show"][..], &["lint"], &["lint", "--json"]] {
        let out = bin(d.path()).args(args).arg(&a).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(66), "{args:?}: {text}");
        assert!(
            text.contains("symbolic link loop (ELOOP)"),
            "{args:?}: {text}"
        );
        assert!(text.contains("a.yaml"), "{args:?}: {text}");
        assert!(!text.contains("no such file"), "{args:?}: {text}");
    }
}
