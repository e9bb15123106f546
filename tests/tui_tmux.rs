//! The TUI in a real terminal: the debug binary runs inside a detached tmux session (80×24,
//! `NO_COLOR`), keys go in with `send-keys`, the screen comes back with `capture-pane -p`. Every
//! step waits for the text it expects (polling, never a fixed sleep), and every screen waited for
//! is kept under `target/tmp/tui_tmux/<test>/` for a look after a failure.
//!
//! Without `tmux` on the PATH the tests say so and pass (CI installs it: `.ci/run`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_primus-tune");
const EXPERIMENT: &str = "examples/experiments/moe_16B-BF16-pretrain.yaml";
const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(50);
/// Variables of the developer's shell that would change what the TUI shows.
const SCRUB: &[&str] = &[
    "PRIMUS_ROOT",
    "PRIMUS_HIPBLASLT_TUNING",
    "PRIMUS_HIPBLASLT_TUNING_STAGE",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "COLORTERM",
    "TMUX",
    "TMUX_PANE",
];

fn have_tmux() -> bool {
    match Command::new("tmux").arg("-V").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            eprintln!("skipped: tmux is not installed (CI installs it; apt-get install tmux)");
            false
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// `'...'` for sh.
fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// A private tmux server (its own socket) running the TUI on a private copy of the bundled
/// example tree. Dropping it kills the server, on success and on failure alike.
struct Tui {
    socket: String,
    tmp: tempfile::TempDir,
    config: PathBuf,
    pid_file: PathBuf,
    screens_dir: PathBuf,
    screens: usize,
    last: String,
}

impl Tui {
    fn start(test: &str) -> Tui {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "primus-tune-{test}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let tmp = tempfile::tempdir().unwrap();
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("presets/examples"),
            &tmp.path().join("examples"),
        );
        let config = tmp.path().join(EXPERIMENT);
        let pid_file = tmp.path().join("tui.pid");
        // The TUI's data (log, tour marker) and the user's launch profiles: private.
        let xdg = tmp.path().join("xdg");
        // The launcher leaves its pid behind and becomes the TUI (exec keeps the pid).
        let launcher = tmp.path().join("launch.sh");
        std::fs::write(
            &launcher,
            format!(
                "unset {unset}\n\
                 export NO_COLOR=1 TERM=xterm-256color XDG_DATA_HOME={xdg} \
                 XDG_CONFIG_HOME={xdg_config}\n\
                 echo $$ > {pid}\n\
                 exec {bin} {config} --no-tour\n",
                unset = SCRUB.join(" "),
                xdg = sh_quote(&xdg),
                xdg_config = sh_quote(&tmp.path().join("config")),
                pid = sh_quote(&pid_file),
                bin = sh_quote(Path::new(BIN)),
                config = sh_quote(&config),
            ),
        )
        .unwrap();
        // After the TUI: its exit status, the tty's mode (raw mode left on shows as RAW), and a
        // pause so the pane stays to be read.
        let command = format!(
            "sh {}; echo EXITED $?; if stty -a | grep -q -- -icanon; then echo TTY RAW; \
             else echo TTY COOKED; fi; sleep 60",
            sh_quote(&launcher)
        );
        let screens_dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("tui_tmux")
            .join(test);
        let _ = std::fs::remove_dir_all(&screens_dir);
        let _ = std::fs::create_dir_all(&screens_dir);
        let tui = Tui {
            socket,
            tmp,
            config,
            pid_file,
            screens_dir,
            screens: 0,
            last: String::new(),
        };
        let cwd = tui.tmp.path().to_path_buf();
        tui.tmux_ok(&[
            "new-session",
            "-d",
            "-s",
            "tui",
            "-x",
            "80",
            "-y",
            "24",
            "-c",
            cwd.to_str().unwrap(),
            &command,
        ]);
        tui
    }

    fn tmux(&self, args: &[&str]) -> Output {
        let mut c = Command::new("tmux");
        // -u: UTF-8 whatever the locale; -f /dev/null: not the developer's tmux.conf.
        c.args(["-u", "-f", "/dev/null", "-L", &self.socket])
            .args(args);
        for v in SCRUB {
            c.env_remove(v);
        }
        c.output().expect("tmux runs")
    }

    fn tmux_ok(&self, args: &[&str]) -> String {
        let o = self.tmux(args);
        assert!(
            o.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn capture(&mut self) -> String {
        self.last = self.tmux_ok(&["capture-pane", "-p", "-t", "tui"]);
        self.last.clone()
    }

    /// Poll the screen every 50 ms until `ok` holds (20 s at most); keep that screen as
    /// `NN-label.txt`; panic with the last screen when it never does.
    fn wait_for(&mut self, label: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.capture();
            if ok(&screen) {
                self.screens += 1;
                let name = format!("{:02}-{label}.txt", self.screens);
                // Best effort: another run of the same test may be clearing the folder.
                let _ = std::fs::create_dir_all(&self.screens_dir);
                let _ = std::fs::write(self.screens_dir.join(name), &screen);
                return screen;
            }
            if start.elapsed() > WAIT {
                panic!(
                    "waited {WAIT:?} for: {label}\n--- last screen ---\n{screen}--- end ---\n\
                     (screens so far in {})",
                    self.screens_dir.display()
                );
            }
            std::thread::sleep(POLL);
        }
    }

    fn wait_text(&mut self, text: &str) -> String {
        let t = text.to_string();
        self.wait_for(&slug(text), move |s| s.contains(&t))
    }

    /// Keys by tmux name (`Down`, `Enter`, `BSpace`, ...) or single characters.
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "tui"];
        args.extend_from_slice(keys);
        self.tmux_ok(&args);
    }

    /// Text typed literally.
    fn type_text(&self, text: &str) {
        self.tmux_ok(&["send-keys", "-t", "tui", "-l", text]);
    }

    fn display(&self, format: &str) -> String {
        self.tmux_ok(&["display-message", "-p", "-t", "tui", format])
            .trim()
            .to_string()
    }

    fn pid(&self) -> i32 {
        let text = std::fs::read_to_string(&self.pid_file).expect("the launcher wrote its pid");
        text.trim().parse().expect("a pid")
    }

    /// After the TUI ended: its exit status, and the terminal as a shell expects it — the normal
    /// screen back, cursor shown, cooked mode, output starting at column 0, nothing of the TUI
    /// left on the screen.
    fn assert_exited_and_restored(&mut self) -> i32 {
        let screen = self.wait_for("exited", |s| s.contains("TTY "));
        let status_line = screen
            .lines()
            .find(|l| l.contains("EXITED "))
            .unwrap_or_else(|| panic!("no exit status on the screen:\n{screen}"));
        assert!(
            status_line.starts_with("EXITED "),
            "the shell's output does not start at column 0 (output processing left off?): \
             {status_line:?}\n{screen}"
        );
        let code: i32 = status_line["EXITED ".len()..].trim().parse().unwrap();
        assert!(
            screen.lines().any(|l| l == "TTY COOKED"),
            "the tty was left in raw mode (or the line is not at column 0):\n{screen}"
        );
        assert_eq!(
            self.display("#{alternate_on}"),
            "0",
            "the alternate screen is still on:\n{screen}"
        );
        assert_eq!(
            self.display("#{cursor_flag}"),
            "1",
            "the cursor is still hidden"
        );
        for tui_text in ["Quick checklist", "primus-tune  1 Checklist", "Flags"] {
            assert!(
                !screen.contains(tui_text),
                "the TUI's screen is still showing ({tui_text:?}):\n{screen}"
            );
        }
        code
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "tmux session {}: last screen\n{}\nscreens kept in {}",
                self.socket,
                self.last,
                self.screens_dir.display()
            );
        }
        // The socket file outlives kill-server: remove it too.
        let socket = self.tmux(&["display-message", "-p", "#{socket_path}"]);
        let _ = self.tmux(&["kill-server"]);
        let path = String::from_utf8_lossy(&socket.stdout).trim().to_string();
        if socket.status.success() && path.contains(&self.socket) {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The right-hand pane of the checklist (the selected step), at 80 columns.
fn right_pane(screen: &str) -> String {
    screen
        .lines()
        .map(|l| l.chars().skip(37).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn tmux_walks_checklist_edits_a_flag_and_saves() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start("walk");
    let original = std::fs::read_to_string(&tui.config).unwrap();
    let (edited_line, old_value) = original
        .lines()
        .enumerate()
        .find_map(|(i, l)| {
            l.trim_start()
                .strip_prefix("micro_batch_size:")
                .map(|v| (i, v.trim().to_string()))
        })
        .expect("the example sets micro_batch_size");
    assert_ne!(
        old_value, "2",
        "the example must not already have the new value"
    );

    // The checklist, step 1 selected and shown on the right.
    let first = tui.wait_text("Quick checklist");
    assert!(first.contains("1. GEMMs (HipBLASLt tuning)"), "{first}");
    assert!(
        right_pane(&first).contains("GEMMs (HipBLASLt tuning) — "),
        "step 1 is not shown on the right:\n{first}"
    );

    // Down twice: step 3 on the right.
    tui.keys(&["Down", "Down"]);
    let third = tui.wait_for("step-3", |s| right_pane(s).contains("Precision — "));
    assert!(
        !right_pane(&third).contains("GEMMs (HipBLASLt tuning) — "),
        "{third}"
    );

    // Enter: the step's flags.
    tui.keys(&["Enter"]);
    let flags = tui.wait_text("Flags · Precision");
    assert!(flags.contains("bf16"), "{flags}");

    // Search.
    tui.keys(&["/"]);
    tui.type_text("micro_batch_size");
    tui.wait_text("Search: micro_batch_size");
    tui.keys(&["Enter"]);
    let found = tui.wait_text("Flags · /micro_batch_size");
    assert!(
        found
            .lines()
            .any(|l| l.contains(" micro_batch_size ") && l.contains(&format!(" {old_value} "))),
        "the search did not find the flag with its value {old_value}:\n{found}"
    );

    // The editor: clear the value, type 2, keep it as an unsaved edit.
    tui.keys(&["Enter"]);
    tui.wait_text(&format!("micro_batch_size = {old_value}▏"));
    let backspaces = vec!["BSpace"; old_value.chars().count() + 2];
    tui.keys(&backspaces);
    tui.wait_text("micro_batch_size = ▏");
    tui.type_text("2");
    tui.wait_text("micro_batch_size = 2▏");
    tui.keys(&["Enter"]);
    let pending = tui.wait_for("pending-row", |s| {
        s.lines().any(|l| {
            // `│* micro_batch_size   2   <file:line>│`: marked pending, the new value.
            let cells: Vec<&str> = l.trim_matches('│').split_whitespace().collect();
            cells.len() >= 3 && cells[..3] == ["*", "micro_batch_size", "2"]
        })
    });
    assert!(pending.contains("1 unsaved"), "{pending}");
    assert_eq!(
        std::fs::read_to_string(&tui.config).unwrap(),
        original,
        "an unsaved edit touched the file"
    );

    // s: the diff, then y writes.
    tui.keys(&["s"]);
    let diff = tui.wait_text("Save these changes?");
    assert!(
        diff.contains(&format!("-      micro_batch_size: {old_value}")),
        "{diff}"
    );
    assert!(diff.contains("+      micro_batch_size: 2"), "{diff}");
    tui.keys(&["y"]);
    let saved = tui.wait_text("saved 1 change(s)");
    assert!(!saved.contains("unsaved"), "{saved}");

    // q: the shell gets its terminal back.
    tui.keys(&["q"]);
    let code = tui.assert_exited_and_restored();
    assert_eq!(code, 0);

    // The file: that one value changed, every other line byte for byte as it was.
    let now = std::fs::read_to_string(&tui.config).unwrap();
    let (before, after): (Vec<&str>, Vec<&str>) =
        (original.lines().collect(), now.lines().collect());
    assert_eq!(before.len(), after.len(), "line count changed:\n{now}");
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        if i == edited_line {
            assert_eq!(
                *a,
                b.replace(
                    &format!("micro_batch_size: {old_value}"),
                    "micro_batch_size: 2"
                ),
                "line {}",
                i + 1
            );
        } else {
            assert_eq!(a, b, "line {} changed", i + 1);
        }
    }
    assert_eq!(now.ends_with('\n'), original.ends_with('\n'));
    assert!(now.contains("\n      micro_batch_size: 2\n"), "{now}");
    assert!(original.contains('#') && now.matches('#').count() == original.matches('#').count());
    let bak = PathBuf::from(format!("{}.bak", tui.config.display()));
    assert_eq!(
        std::fs::read_to_string(&bak).expect("a .bak beside the experiment"),
        original
    );
}

#[test]
fn tmux_sigterm_restores_the_terminal() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start("sigterm");
    let original = std::fs::read_to_string(&tui.config).unwrap();
    tui.wait_text("Quick checklist");
    // Somewhere other than the first screen, with an editor open.
    tui.keys(&["2"]);
    tui.wait_text("┌ Flags ");
    tui.keys(&["/"]);
    tui.type_text("micro_batch_size");
    tui.keys(&["Enter", "Enter"]);
    tui.wait_for("editor", |s| {
        s.contains("micro_batch_size = ") && s.contains('▏')
    });

    let pid = tui.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM sent");
    let code = tui.assert_exited_and_restored();
    // 0: it caught the signal and left in order (143 would mean the default action killed it,
    // and then the checks above would have failed already).
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&tui.config).unwrap(), original);
    assert!(!PathBuf::from(format!("{}.bak", tui.config.display())).exists());
}
