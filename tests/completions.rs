//! `primus-tune completions SHELL` in the real shells: bash (its completion function called as
//! readline calls it), zsh (interactive, in a tmux pane, Tab pressed) and fish (`complete -C`,
//! what its Tab shows) complete subcommands, a subcommand's options (a nested, hyphenated one
//! too) and an option's values. The shells come from scripts/shells.sh (apt-get when missing,
//! as .ci/run does for tmux); a test skips, saying why, where they cannot be had.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_primus-tune");

/// (typed line, a word its completion must offer): what each shell is asked.
const CASES: &[(&str, &str)] = &[
    ("primus-tune sw", "sweep"),
    ("primus-tune lint --fo", "--format"),
    (
        "primus-tune gemm-tune stage --override-f",
        "--override-file",
    ),
    ("primus-tune lint --format j", "json"),
    // A command that takes an experiment file and has commands of its own.
    ("primus-tune trials sh", "show"),
    ("primus-tune trials show --cs", "--csv"),
];

/// bash, zsh and fish are installed (installing them when missing), else why not.
fn shells() -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/shells.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

macro_rules! need_shells {
    () => {
        if let Err(why) = shells() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// The script for `shell`, written into `dir` as `name`.
fn script(shell: &str, dir: &Path, name: &str) -> PathBuf {
    let out = Command::new(BIN)
        .args(["completions", shell])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let path = dir.join(name);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// What bash offers for `line`: the function `complete -p primus-tune` names, called with the
/// words as readline splits them.
const BASH_DRIVER: &str = r#"
source "$1" || exit 9
spec=$(complete -p primus-tune) || exit 8
fn=${spec#*-F }; fn=${fn%% *}
COMP_LINE=$2; COMP_POINT=${#2}
read -ra COMP_WORDS <<< "$2"
[[ $2 == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
"$fn" primus-tune "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
"#;

#[test]
fn bash_completes_commands_options_and_values() {
    need_shells!();
    let d = tempfile::tempdir().unwrap();
    let s = script("bash", d.path(), "primus-tune.bash");
    for (line, want) in CASES {
        let out = Command::new("bash")
            .args(["--norc", "--noprofile", "-c", BASH_DRIVER, "driver"])
            .arg(&s)
            .arg(line)
            .output()
            .unwrap();
        let offered = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{line}: {out:?}");
        assert!(
            offered.lines().any(|w| w == *want),
            "bash offers for `{line}<Tab>`: {offered:?} (want {want})"
        );
    }
}

#[test]
fn fish_completes_commands_options_and_values() {
    need_shells!();
    let d = tempfile::tempdir().unwrap();
    let s = script("fish", d.path(), "primus-tune.fish");
    for (line, want) in CASES {
        let out = Command::new("fish")
            .arg("--no-config")
            .arg("-c")
            .arg(format!(
                "source {}; complete -C {}",
                quote(&s),
                quote_str(line)
            ))
            .env("HOME", d.path())
            .env("XDG_DATA_HOME", d.path().join("data"))
            .env("XDG_CONFIG_HOME", d.path().join("config"))
            .output()
            .unwrap();
        let offered = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{line}: {out:?}");
        assert!(
            offered.lines().any(|l| l.split('\t').next() == Some(*want)),
            "fish offers for `{line}<Tab>`: {offered:?} (want {want})"
        );
    }
}

#[test]
fn zsh_completes_commands_options_values_and_files() {
    need_shells!();
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: zsh's completion is driven in tmux, which is not installed");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let funcs = d.path().join("zfunc");
    script("zsh", &funcs, "_primus-tune");
    let bin_dir = Path::new(BIN).parent().unwrap();
    std::fs::write(
        d.path().join(".zshrc"),
        format!(
            "fpath=({} $fpath)\nautoload -U compinit && compinit -u -d {}\nPS1='READY> '\n",
            quote(&funcs),
            quote(&d.path().join("zcompdump"))
        ),
    )
    .unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir.display());
    let pane = Pane::start(d.path(), &path);
    pane.wait(|s| s.contains("READY>"), "the prompt");
    // The experiment file where a command may stand too (the pane runs in the checkout).
    let files = [
        ("primus-tune prese", "presets/"),
        ("primus-tune trials prese", "presets/"),
    ];
    for (line, want) in CASES.iter().chain(&files) {
        pane.keys(&["-l", line]);
        pane.keys(&["Tab"]);
        let screen = pane.wait(
            |s| {
                s.split_whitespace()
                    .any(|w| w.trim_end_matches('=') == *want)
            },
            &format!("`{line}<Tab>` offering {want}"),
        );
        assert!(screen.contains("READY>"), "{screen}");
        // A fresh line for the next case: a new prompt, then the screen cleared (a key that
        // arrives while the completion is still running may be taken by it: sent again).
        let new_prompt = |s: &str| s.trim_end().lines().last() == Some("READY>");
        pane.wait_pressing(new_prompt, "C-c", "a new prompt");
        pane.wait_pressing(|s| s.trim() == "READY>", "C-l", "a clear prompt");
    }
}

/// A private tmux server running an interactive zsh; killed when dropped.
struct Pane {
    socket: String,
}

impl Pane {
    fn start(home: &Path, path: &str) -> Pane {
        let socket = format!("pt-completions-{}", std::process::id());
        let pane = Pane { socket };
        let cmd = format!(
            "env -i HOME={h} ZDOTDIR={h} PATH={p} TERM=xterm-256color zsh -i",
            h = quote(home),
            p = quote_str(path)
        );
        let cwd = env!("CARGO_MANIFEST_DIR");
        pane.tmux(&[
            "new-session",
            "-d",
            "-x",
            "200",
            "-y",
            "40",
            "-c",
            cwd,
            &cmd,
        ]);
        pane
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-u", "-f", "/dev/null", "-L", &self.socket])
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Presses `key` until `ok` holds, once a second (30 s at most).
    fn wait_pressing(&self, ok: impl Fn(&str) -> bool, key: &str, what: &str) -> String {
        let start = Instant::now();
        loop {
            self.keys(&[key]);
            let pressed = Instant::now();
            while pressed.elapsed() < Duration::from_secs(1) {
                let screen = self.tmux(&["capture-pane", "-p", "-t", "0"]);
                if ok(&screen) {
                    return screen;
                }
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "waited for {what}; the pane:\n{screen}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The pane's text once `ok` holds (30 s at most).
    fn wait(&self, ok: impl Fn(&str) -> bool, what: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.tmux(&["capture-pane", "-p", "-t", "0"]);
            if ok(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "waited for {what}; the pane:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

fn quote(p: &Path) -> String {
    quote_str(&p.display().to_string())
}

/// `'...'` for sh, zsh and fish alike (no `'` or `\` in what is quoted here).
fn quote_str(s: &str) -> String {
    assert!(!s.contains('\'') && !s.contains('\\'), "{s}");
    format!("'{s}'")
}
