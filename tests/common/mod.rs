//! What the sweep-based end-to-end tests share: a private copy of the bundled example, a user
//! profile running the test's own shell workload, a one-knob micro-batch space, and the binary
//! with that configuration.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

pub struct Setup {
    pub dir: tempfile::TempDir,
    pub exp: PathBuf,
    pub space: PathBuf,
    pub config_home: PathBuf,
}

/// The dense example copied to a temp dir, profile `profile` running `workload` with sh (its
/// `$1` is the trial folder), and a space `space` of `micro_batch_size` 1, 2, 4, 8.
pub fn setup(profile: &str, workload: &str, space: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ex");
    primus_tune::util::bundled::extract(&root).unwrap();
    let exp = root.join("experiments/llama3_8B-BF16-pretrain.yaml");
    let config_home = dir.path().join("config");
    let profiles = config_home.join("primus-tune/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join(format!("{profile}.yaml")),
        format!(
            "name: {profile}\nargv: [sh, -c, {}, workload, \"{{trial_dir}}\"]\n",
            serde_json::to_string(workload).unwrap()
        ),
    )
    .unwrap();
    let space_file = dir.path().join(format!("{space}.yaml"));
    std::fs::write(
        &space_file,
        format!(
            "name: {space}\ndescription: micro batch only\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2, 4, 8]\n    memory: increasing\n"
        ),
    )
    .unwrap();
    Setup {
        dir,
        exp,
        space: space_file,
        config_home,
    }
}

/// The binary with the test's profiles and no launcher variables.
pub fn cmd(s: &Setup) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_primus-tune"));
    c.env("XDG_CONFIG_HOME", &s.config_home)
        .env_remove("PRIMUS_ROOT")
        .env_remove("GPUS_PER_NODE");
    c
}
