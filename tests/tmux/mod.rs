//! The tmux harness of `tui_tmux.rs`: a private tmux server running the debug binary.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_primus-tune");
/// In `Tui::start_with`'s arguments: the example experiment's private copy.
pub const CONFIG: &str = "{config}";
pub const EXPERIMENT: &str = "examples/experiments/moe_16B-BF16-pretrain.yaml";
/// How long a screen state may take to appear: generous, as a loaded machine running the whole
/// suite (many TUIs, builds) can stall a debug binary for seconds; a passing step returns as
/// soon as the state shows.
const WAIT: Duration = Duration::from_secs(60);
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
    "PRIMUS_TUNE_CONFIG",
    "PRIMUS_TUNE_NO_MOUSE",
];

pub fn have_tmux() -> bool {
    match Command::new("tmux").arg("-V").output() {
        Ok(o) if o.status.success() => true,
        _ => {
            eprintln!("skipped: tmux is not installed (CI installs it; apt-get install tmux)");
            false
        }
    }
}

pub fn copy_dir(from: &Path, to: &Path) {
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
pub fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// A private tmux server (its own socket) running the TUI on a private copy of the bundled
/// example tree. Dropping it kills the server, on success and on failure alike.
pub struct Tui {
    socket: String,
    pub tmp: tempfile::TempDir,
    pub config: PathBuf,
    pid_file: PathBuf,
    screens_dir: PathBuf,
    screens: usize,
    last: String,
}

impl Tui {
    /// The TUI on the example experiment, without the tour, at 80×24.
    pub fn start(test: &str) -> Tui {
        Tui::start_with(test, &[CONFIG, "--no-tour"], (80, 24))
    }

    /// The binary with these arguments (`CONFIG` stands for the example experiment's copy; the
    /// others are passed as they are, quoted) in a pane of `size` columns × rows.
    pub fn start_with(test: &str, args: &[&str], size: (u16, u16)) -> Tui {
        Tui::start_inner(test, args, size, false)
    }

    /// An interactive bash (prompt `PROMPT$ `, job control on) in the pane instead: the test
    /// types `tui.launch_line()` to start the TUI as a user would.
    pub fn start_shell(test: &str) -> Tui {
        Tui::start_inner(test, &[CONFIG, "--no-tour"], (80, 24), true)
    }

    /// [`Tui::start_shell`] whose launch line passes these arguments (the test prepares the
    /// files the TUI reads, such as a launch profile, before typing it).
    pub fn start_shell_with(test: &str, args: &[&str]) -> Tui {
        Tui::start_inner(test, args, (80, 24), true)
    }

    /// What starts the TUI from `start_shell`'s prompt.
    pub fn launch_line(&self) -> String {
        format!("sh {}", sh_quote(&self.tmp.path().join("launch.sh")))
    }

    fn start_inner(test: &str, args: &[&str], size: (u16, u16), shell: bool) -> Tui {
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
        // The TUI's data (log, tour marker, remembered profiles) and the user's launch
        // profiles and defaults file: private.
        let xdg = tmp.path().join("xdg");
        // The launcher leaves its pid behind and becomes the TUI (exec keeps the pid).
        let launcher = tmp.path().join("launch.sh");
        std::fs::write(
            &launcher,
            format!(
                "unset {unset}\n\
                 export NO_COLOR=1 TERM=xterm-256color XDG_DATA_HOME={xdg} \
                 XDG_CONFIG_HOME={xdg_config} XDG_STATE_HOME={xdg}\n\
                 echo $$ > {pid}\n\
                 exec {bin} {args}\n",
                unset = SCRUB.join(" "),
                xdg = sh_quote(&xdg),
                xdg_config = sh_quote(&tmp.path().join("config")),
                pid = sh_quote(&pid_file),
                bin = sh_quote(Path::new(BIN)),
                args = args
                    .iter()
                    .map(|a| if *a == CONFIG {
                        sh_quote(&config)
                    } else {
                        sh_quote(Path::new(a))
                    })
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        )
        .unwrap();
        // After the TUI: its exit status, the tty's mode (raw mode left on shows as RAW), and a
        // pause so the pane stays to be read.
        let command = if shell {
            "env PS1='PROMPT$ ' bash --norc --noprofile -i".to_string()
        } else {
            format!(
                "sh {}; echo EXITED $?; if stty -a | grep -q -- -icanon; then echo TTY RAW; \
                 else echo TTY COOKED; fi; sleep 60",
                sh_quote(&launcher)
            )
        };
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
            &size.0.to_string(),
            "-y",
            &size.1.to_string(),
            "-c",
            cwd.to_str().unwrap(),
            &command,
        ]);
        tui
    }

    pub fn tmux(&self, args: &[&str]) -> Output {
        let mut c = Command::new("tmux");
        // -u: UTF-8 whatever the locale; -f /dev/null: not the developer's tmux.conf.
        c.args(["-u", "-f", "/dev/null", "-L", &self.socket])
            .args(args);
        for v in SCRUB {
            c.env_remove(v);
        }
        c.output().expect("tmux runs")
    }

    pub fn tmux_ok(&self, args: &[&str]) -> String {
        let o = self.tmux(args);
        assert!(
            o.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn capture(&mut self) -> String {
        self.last = self.tmux_ok(&["capture-pane", "-p", "-t", "tui"]);
        self.last.clone()
    }

    /// Poll the screen every 50 ms until `ok` holds (60 s at most); keep that screen as
    /// `NN-label.txt`; panic with the last screen when it never does.
    pub fn wait_for(&mut self, label: &str, ok: impl Fn(&str) -> bool) -> String {
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

    pub fn wait_text(&mut self, text: &str) -> String {
        let t = text.to_string();
        self.wait_for(&slug(text), move |s| s.contains(&t))
    }

    /// Keys by tmux name (`Down`, `Enter`, `BSpace`, ...) or single characters.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "tui"];
        args.extend_from_slice(keys);
        self.tmux_ok(&args);
    }

    /// Text typed literally.
    pub fn type_text(&self, text: &str) {
        self.tmux_ok(&["send-keys", "-t", "tui", "-l", text]);
    }

    pub fn display(&self, format: &str) -> String {
        self.tmux_ok(&["display-message", "-p", "-t", "tui", format])
            .trim()
            .to_string()
    }

    pub fn pid(&self) -> i32 {
        let text = std::fs::read_to_string(&self.pid_file).expect("the launcher wrote its pid");
        text.trim().parse().expect("a pid")
    }

    /// After the TUI ended: its exit status, and the terminal as a shell expects it — the normal
    /// screen back, cursor shown, cooked mode, output starting at column 0, nothing of the TUI
    /// left on the screen.
    pub fn assert_exited_and_restored(&mut self) -> i32 {
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

pub fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The text inside the box titled `title` on `screen` (its top border `┌ title `), its rows
/// joined by spaces; None when no such box shows.
pub fn box_text(screen: &str, title: &str) -> Option<String> {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let head = format!("┌ {title} ");
    let (top, from) = lines.iter().enumerate().find_map(|(y, l)| {
        let s: String = l.iter().collect();
        s.find(&head).map(|b| (y, s[..b].chars().count()))
    })?;
    let to = (from + 1..lines[top].len()).find(|&x| lines[top][x] == '┐')?;
    let mut rows = Vec::new();
    for l in &lines[top + 1..] {
        if l.get(from) == Some(&'└') || l.len() < to {
            break;
        }
        rows.push(
            l[from + 1..to]
                .iter()
                .collect::<String>()
                .trim()
                .to_string(),
        );
    }
    Some(rows.join(" "))
}

/// `text` with no whitespace: compares a message with one wrapped anywhere.
pub fn bare(text: &str) -> String {
    text.split_whitespace().collect()
}

/// The right-hand pane of the checklist (the selected step), at 80 columns.
pub fn right_pane(screen: &str) -> String {
    screen
        .lines()
        .map(|l| l.chars().skip(37).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Copies a tree, recreating symlinks as symlinks (the recorded sysfs trees are made of them).
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let to = dst.join(entry.file_name());
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &to).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}
