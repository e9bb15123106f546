//! The hostile corpus and how the binary is run on it: every command that reads a file, given
//! each input, must finish and either answer or refuse naming the cause.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod corpus;
pub mod measured;

use corpus::{Input, Kind};
use std::ffi::OsString;
use std::path::Path;

/// One command on one input.
pub struct Case {
    pub name: String,
    pub args: Vec<OsString>,
}

/// Every command that reads `input`, as it would be given it. `root` is the Primus root (a
/// device has no folder above it that holds one).
pub fn cases(input: &Input, root: &Path) -> Vec<Case> {
    let p = input.path.as_os_str();
    let r = root.as_os_str();
    let mut list: Vec<Vec<&std::ffi::OsStr>> = Vec::new();
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    if input.kind != Kind::Log {
        for cmd in ["show", "lint", "checklist", "recommend", "backups"] {
            list.push(vec![os(cmd), os("--primus-root"), r, p]);
        }
        list.push(vec![
            os("gemm-tune"),
            os("status"),
            os("--primus-root"),
            r,
            p,
        ]);
        list.push(vec![
            os("set"),
            os("--primus-root"),
            r,
            p,
            os("train_iters=7"),
        ]);
    }
    if input.kind != Kind::Config {
        list.push(vec![os("parse-log"), p]);
        list.push(vec![os("parse-log"), os("--json"), p]);
        list.push(vec![os("gemm-tune"), os("shapes"), os("--dump"), p]);
        list.push(vec![os("gemm-tune"), os("results"), p]);
        list.push(vec![os("bench-replay"), p]);
        list.push(vec![
            os("proxy"),
            os("--resolved"),
            p,
            os("--iters"),
            os("1"),
        ]);
    }
    list.into_iter()
        .map(|args| {
            let words: Vec<String> = args[..args.len().min(2)]
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .filter(|a| !a.starts_with("--primus") && !a.contains('/'))
                .collect();
            Case {
                name: format!("{} {}", words.join(" "), input.name),
                args: args.into_iter().map(OsString::from).collect(),
            }
        })
        .collect()
}

/// The binary with nothing of the user's: its own data, config and workspace folders under
/// `home`.
pub fn command(home: &Path, args: &[OsString]) -> std::process::Command {
    command_of(Path::new(env!("CARGO_BIN_EXE_primus-tune")), home, args)
}

/// [`command`] with another build of the binary (the figures compare two).
pub fn command_of(bin: &Path, home: &Path, args: &[OsString]) -> std::process::Command {
    let mut c = std::process::Command::new(bin);
    c.args(args)
        .current_dir(home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("PRIMUS_TUNE_CONFIG", home.join("no-defaults.toml"))
        .env("PRIMUS_TUNE_WORKSPACE", home.join("ws"))
        .env_remove("PRIMUS_ROOT")
        .env_remove("PRIMUS_TUNE_MAX_YAML_MIB")
        .env_remove("GPUS_PER_NODE");
    c
}
