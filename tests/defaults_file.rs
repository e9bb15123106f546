//! The defaults file (`config.toml`, here named by `PRIMUS_TUNE_CONFIG`) with the real binary: a
//! bad file stops every command with status 2 and its file:line:column (as JSON with
//! `--json`), its `profile`, `gpus` and `workspace` take effect where no flag or variable says
//! otherwise, and `primus-tune defaults` shows each value with where it came from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Setup {
    dir: tempfile::TempDir,
    exp: PathBuf,
    config: PathBuf,
}

/// A copy of the bundled example, a config folder with a quick test profile, and the path of
/// the defaults file (written by each test).
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ex");
    primus_tune::util::bundled::extract(&root).unwrap();
    let exp = root.join("experiments/llama3_8B-BF16-pretrain.yaml");
    let profiles = dir.path().join("xdg-config/primus-tune/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    // Three Megatron iteration lines and a clean exit.
    let script = r#"for i in 1 2 3; do printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): 100.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' "$i" 3 "$i"; done"#;
    std::fs::write(
        profiles.join("quick.yaml"),
        format!(
            "name: quick\nargv: [sh, -c, {}, workload]\n",
            serde_json::to_string(script).unwrap()
        ),
    )
    .unwrap();
    Setup {
        config: dir.path().join("defaults/config.toml"),
        exp,
        dir,
    }
}

impl Setup {
    fn write(&self, text: &str) {
        std::fs::create_dir_all(self.config.parent().unwrap()).unwrap();
        std::fs::write(&self.config, text).unwrap();
    }

    /// The binary with this defaults file, its own folders, and no variable that would win
    /// over the file.
    fn bin(&self) -> Command {
        let mut c = Command::cargo_bin("primus-tune").unwrap();
        c.env("PRIMUS_TUNE_CONFIG", &self.config)
            .env("XDG_CONFIG_HOME", self.dir.path().join("xdg-config"))
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env_remove("PRIMUS_TUNE_WORKSPACE")
            .env_remove("PRIMUS_TUNE_NO_MOUSE")
            .env_remove("NO_COLOR")
            .env_remove("PRIMUS_ROOT")
            .env_remove("GPUS_PER_NODE")
            .env_remove("NNODES");
        c
    }
}

fn json(out: &[u8]) -> serde_json::Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

/// The setting `key` of `defaults --json`.
fn setting<'v>(v: &'v serde_json::Value, key: &str) -> &'v serde_json::Value {
    v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("no {key} in {v}"))
}

#[test]
fn a_malformed_defaults_file_exits_2_naming_file_line_and_column() {
    let s = setup();
    s.write("gpus = 8\n[ui]\ncolour = \"never\"\n");
    let at = format!("{}:3:1", s.config.display());
    for args in [
        vec!["defaults"],
        vec!["lint", s.exp.to_str().unwrap()],
        vec!["gpus"],
    ] {
        let out = s.bin().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(&at), "{args:?}: {err}");
        assert!(err.contains("did you mean `color`?"), "{args:?}: {err}");
    }
    // With --json the error is JSON on stdout too.
    let out = s.bin().args(["defaults", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v = json(&out.stdout);
    assert_eq!(v["error"]["kind"], "failed", "{v}");
    assert_eq!(v["error"]["exit_code"], 2, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains(&at), "{v}");
    // A wrong type, a TOML syntax error and a bad [keys] entry are the same kind of error.
    for (text, line) in [
        ("profile = \"quick\"\ngpus = \"eight\"\n", 2),
        ("gpus = 8\nprofile = \n", 2),
        ("[keys]\nquit = \"/\"\n", 2),
    ] {
        s.write(text);
        let out = s.bin().args(["defaults"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        let at = format!("{}:{line}:", s.config.display());
        assert!(err.contains(&at), "{text}: {err}");
    }
}

#[test]
fn defaults_shows_each_value_and_where_it_came_from() {
    let s = setup();
    s.write("profile = \"quick\"\ngpus = 3\n[ui]\nmouse = false\n[keys]\nquit = \"Q\"\n");
    let out = s.bin().args(["defaults", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out.stdout);
    assert_eq!(v["file_exists"], true);
    let profile = setting(&v, "profile");
    assert_eq!(profile["value"], "quick");
    assert_eq!(profile["source"]["kind"], "file");
    assert_eq!(profile["source"]["line"], 1);
    assert_eq!(profile["source"]["column"], 11);
    assert_eq!(setting(&v, "gpus")["value"], 3);
    assert_eq!(setting(&v, "backend")["source"]["kind"], "default");
    assert_eq!(setting(&v, "ui.mouse")["value"], false);
    assert_eq!(setting(&v, "keys.quit")["value"], "Q");
    // The environment wins over the file.
    let out = s
        .bin()
        .args(["defaults", "--json"])
        .env("GPUS_PER_NODE", "2")
        .env("PRIMUS_TUNE_NO_MOUSE", "1")
        .output()
        .unwrap();
    let v = json(&out.stdout);
    assert_eq!(setting(&v, "gpus")["value"], 2);
    assert_eq!(setting(&v, "gpus")["source"]["kind"], "environment");
    assert_eq!(
        setting(&v, "ui.mouse")["source"]["text"],
        "PRIMUS_TUNE_NO_MOUSE"
    );
    // The text form: one line per setting with its place.
    let out = s.bin().arg("defaults").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("profile "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("quick"), "{line}");
    assert!(line.contains("config.toml:1:11"), "{line}");
}

#[test]
fn gpus_in_the_file_is_the_world_unless_a_flag_or_the_launcher_says_otherwise() {
    let s = setup();
    s.write("gpus = 4\n");
    let world = |extra: &[&str], env: Option<(&str, &str)>| {
        let mut c = s.bin();
        c.args(["lint", "--json"]).arg(&s.exp).args(extra);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let v = json(&out.stdout);
        (
            v["world"]["gpus"].clone(),
            v["world"]["source"]["kind"].clone(),
        )
    };
    assert_eq!(world(&[], None), (4.into(), "defaults-file".into()));
    assert_eq!(world(&["--gpus", "16"], None).0, 16);
    assert_eq!(world(&[], Some(("GPUS_PER_NODE", "2"))).0, 2);
}

#[test]
fn the_files_profile_and_workspace_are_what_a_run_uses() {
    let s = setup();
    // A relative workspace is taken from the defaults file's folder.
    s.write("profile = \"quick\"\nworkspace = \"ws\"\n");
    let out = s
        .bin()
        .arg("run")
        .arg(&s.exp)
        .args(["--json", "--no-telemetry", "--max-iters", "3"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let ws = s.config.parent().unwrap().join("ws");
    assert!(
        ws.join("trials.db").is_file(),
        "the file's workspace is used"
    );
    let out = s
        .bin()
        .args(["trials", "--json"])
        .arg(&s.exp)
        .output()
        .unwrap();
    let rows = json(&out.stdout);
    assert_eq!(rows[0]["profile"], "quick", "{rows}");
    // --profile wins over the file: an unknown one is refused, not replaced by the file's.
    let out = s
        .bin()
        .arg("run")
        .arg(&s.exp)
        .args(["--json", "--no-telemetry", "--profile", "no-such-profile"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no-such-profile")
            || String::from_utf8_lossy(&out.stderr).contains("no-such-profile")
    );
    assert!(Path::new(&ws).is_dir());
}
