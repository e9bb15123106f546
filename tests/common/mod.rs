//! What the sweep-based end-to-end tests share: a private copy of the bundled example, a user
//! profile running the test's own shell workload, a one-knob micro-batch space, and the binary
//! with that configuration.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod mount;

use std::path::PathBuf;
use std::process::Command;

/// Megatron's iteration line `$1` with step time `$2` ms (braces doubled: the profile
/// expands `{name}`).
pub const ITER: &str = r#"it() {{ printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' "$1" 100000 "$1" "$2"; }}"#;

pub struct Setup {
    pub dir: tempfile::TempDir,
    pub exp: PathBuf,
    pub space: PathBuf,
    pub config_home: PathBuf,
    /// The workspace the binary uses (`PRIMUS_TUNE_WORKSPACE`): `trials.db`, `trials/<id>/`.
    pub ws: PathBuf,
}

/// The dense example copied to a temp dir, profile `profile` running `workload` with sh (its
/// `$1` is the trial folder), and a space `space` of `micro_batch_size` 1, 2, 4, 8.
pub fn setup(profile: &str, workload: &str, space: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ex");
    primus_tune::util::bundled::extract(&root).unwrap();
    let exp = root.join("experiments/llama3_8B-BF16-pretrain.yaml");
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(config_home.join("primus-tune/profiles")).unwrap();
    write_profile(&config_home, profile, workload, "");
    let space_file = dir.path().join(format!("{space}.yaml"));
    std::fs::write(
        &space_file,
        format!(
            "name: {space}\ndescription: micro batch only\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2, 4, 8]\n    memory: increasing\n"
        ),
    )
    .unwrap();
    Setup {
        ws: dir.path().join("ws"),
        dir,
        exp,
        space: space_file,
        config_home,
    }
}

/// Writes user profile `name` under `config_home`: `workload` run with sh (its `$1` is the
/// trial folder), then `extra` (more YAML, such as an `env:` section).
pub fn write_profile(config_home: &std::path::Path, name: &str, workload: &str, extra: &str) {
    std::fs::write(
        config_home.join(format!("primus-tune/profiles/{name}.yaml")),
        format!(
            "name: {name}\nargv: [sh, -c, {}, workload, \"{{trial_dir}}\"]\n{extra}",
            serde_json::to_string(workload).unwrap()
        ),
    )
    .unwrap();
}

/// Writes the experiment's `micro_batch_size` (its current setting, a sweep's candidate 0).
pub fn set_micro_batch(s: &Setup, mbs: u32) {
    let text = std::fs::read_to_string(&s.exp).unwrap();
    let mut found = false;
    let out: Vec<String> = text
        .lines()
        .map(|l| match l.split_once("micro_batch_size:") {
            Some((indent, _)) if indent.trim().is_empty() => {
                found = true;
                format!("{indent}micro_batch_size: {mbs}")
            }
            _ => l.to_string(),
        })
        .collect();
    assert!(found, "{text}");
    std::fs::write(&s.exp, out.join("\n") + "\n").unwrap();
}

/// The binary with nothing of the user's: its own data folder `data` (the workspaces and the
/// bundled example's copy go there, never into ~/.local/share), no defaults file (a path that
/// does not exist), and no workspace, Primus or launcher variables (the world size comes from
/// `--gpus`, else the GPUs this machine has).
pub fn cli(data: &std::path::Path) -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("primus-tune").expect("binary");
    c.env("XDG_DATA_HOME", data)
        .env("PRIMUS_TUNE_CONFIG", data.join("no-defaults.toml"))
        .env_remove("PRIMUS_TUNE_WORKSPACE")
        .env_remove("PRIMUS_ROOT")
        .env_remove("PRIMUS_HIPBLASLT_TUNING")
        .env_remove("PRIMUS_HIPBLASLT_TUNING_STAGE")
        .env_remove("CUDA_DEVICE_MAX_CONNECTIONS")
        .env_remove("GPUS_PER_NODE")
        .env_remove("NNODES");
    c
}

/// The binary with the test's profiles, its own workspace and data folder, and no launcher
/// variables.
pub fn cmd(s: &Setup) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_primus-tune"));
    c.env("XDG_CONFIG_HOME", &s.config_home)
        .env_remove("PRIMUS_TUNE_CONFIG")
        .env("XDG_DATA_HOME", s.dir.path().join("data"))
        .env("PRIMUS_TUNE_WORKSPACE", &s.ws)
        .env_remove("PRIMUS_ROOT")
        .env_remove("GPUS_PER_NODE");
    c
}

/// The JSON Lines a `--json` command printed: every line is one JSON object with an `event`
/// tag; the last one is the result.
pub fn json_lines(out: &std::process::Output) -> Vec<serde_json::Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!(
                    "{e}: not one JSON object per line: {l}\nstderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
        })
        .collect();
    for v in &lines {
        assert!(v["event"].is_string(), "an event tag in every line: {v}");
    }
    assert!(
        !lines.is_empty(),
        "no JSON printed; stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines
}

/// The one JSON document a command that succeeded printed (its stderr shown when it failed).
pub fn json_ok(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: not one JSON document: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The result of a `--json` command: its last JSON line.
pub fn last_json(out: &std::process::Output) -> serde_json::Value {
    json_lines(out).pop().unwrap_or_default()
}

/// The live processes of a trial, found by the folder every process of it inherits in
/// `PRIMUS_TUNE_TRIAL_DIR` (whatever session, group or parent it moved to).
pub fn trial_processes(trial_dir: &std::path::Path) -> Vec<u32> {
    primus_tune::util::procfs::with_env(
        std::path::Path::new("/proc"),
        primus_tune::run::trial::materialise::TRIAL_DIR_ENV,
        &trial_dir.display().to_string(),
    )
}

/// Waits up to `limit` for a trial's last process to end; the ones left.
pub fn trial_processes_after(trial_dir: &std::path::Path, limit: std::time::Duration) -> Vec<u32> {
    let end = std::time::Instant::now() + limit;
    loop {
        let left = trial_processes(trial_dir);
        if left.is_empty() || std::time::Instant::now() >= end {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A trial result (`run --json`'s last line) that failed with `class`, whose first offending
/// line contains `line`.
pub fn assert_failed_with(v: &serde_json::Value, class: &str, line: &str) {
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["failure"]["class"], class, "{v}");
    assert!(
        v["failure"]["line"]
            .as_str()
            .is_some_and(|l| l.contains(line)),
        "{v}"
    );
}
