//! Trial processes: spawned with an argv vector (never a shell) in their own process group,
//! through the trial supervisor ([`super::supervise`]) when this binary can run it, so the trial
//! owns its whole process tree whatever sessions or groups the workload creates. stdout and
//! stderr are streamed line by line; a stop signals every process of the tree (SIGINT, then
//! SIGTERM, then SIGKILL), and checks it gone. A guard kills the tree if the runner unwinds.
//! Where cgroup v2 allows, the whole trial also runs in a cgroup of its own
//! ([`super::cgroup`]), which nothing it starts can leave.

use super::cgroup::TrialCgroup;
use super::supervise::Supervisor;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Which stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Launch {
    pub argv: Vec<String>,
    /// Added to (and overriding) the inherited environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub stdout_log: PathBuf,
    pub stderr_log: PathBuf,
    /// Launch through this supervisor (None: the workload is the direct child, and only its
    /// descendants that stay in reach are the trial's).
    pub supervisor: Option<Supervisor>,
}

/// A running trial process.
pub struct Running {
    pub child: tokio::process::Child,
    /// The direct child: the supervisor, or the workload itself. It leads the process group.
    pub root: i32,
    /// Whether `root` is the supervisor (which is never signalled: it ends the tree and exits
    /// by itself once the workload is gone).
    pub supervised: bool,
    pub guard: TreeGuard,
    /// The trial's own cgroup, when one could be made: everything in it is killed when it is
    /// dropped (after `guard`, which it backs up).
    pub cgroup: Option<TrialCgroup>,
}

impl Running {
    /// The trial's live processes other than the supervisor.
    pub fn workload(&self) -> Vec<u32> {
        workload_pids(self.root, self.supervised)
    }

    /// Whether any process of the trial is still alive (zombies aside).
    pub fn alive(&self) -> bool {
        !self.workload().is_empty()
    }
}

fn workload_pids(root: i32, supervised: bool) -> Vec<u32> {
    crate::util::procfs::family(Path::new("/proc"), root)
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|p| !(supervised && *p as i32 == root))
        .collect()
}

/// Kills the trial's whole tree with SIGKILL when dropped while still armed — the last line of
/// defence when the runner panics or returns early.
#[derive(Debug)]
pub struct TreeGuard {
    root: i32,
    armed: bool,
}

impl TreeGuard {
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if self.armed {
            for pid in workload_pids(self.root, false) {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
            let _ = killpg(Pid::from_raw(self.root), Signal::SIGKILL);
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {}: {source}", path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("empty command line")]
    Empty,
}

/// Start the process in a new process group (through the supervisor when the launch has one);
/// its lines arrive on the returned channel (and are written to the log files) until both
/// streams close.
#[allow(unsafe_code)] // pre_exec: signal defaults in the child
pub fn spawn(launch: &Launch) -> Result<(Running, mpsc::Receiver<(Stream, String)>), SpawnError> {
    let (program, _) = launch.argv.split_first().ok_or(SpawnError::Empty)?;
    let argv = match &launch.supervisor {
        Some(sup) => {
            // The supervisor starts the workload; a program that cannot start is still an error
            // of this launch (nothing was launched), not a failed trial.
            findable(program, launch).map_err(|source| SpawnError::Spawn {
                program: program.clone(),
                source,
            })?;
            sup.wrap(std::process::id(), &launch.argv)
        }
        None => launch.argv.clone(),
    };
    let (program, args) = argv.split_first().ok_or(SpawnError::Empty)?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(&launch.cwd)
        .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // The workload starts with every signal at its default action and none blocked, whatever
    // primus-tune inherited (`nohup` and background jobs ignore SIGHUP/SIGINT): a shell
    // launcher that inherited "ignore" would not stop on Ctrl-C or on the trial's stop.
    // The child moves itself into the trial's cgroup before exec, so even a process it forks
    // at once is in it.
    let cgroup = TrialCgroup::create().ok();
    let procs = cgroup.as_ref().map(TrialCgroup::procs_file);
    // SAFETY: between fork and exec only async-signal-safe calls are made (signal,
    // sigemptyset, sigprocmask; open, write, close).
    unsafe {
        cmd.pre_exec(move || {
            default_signals();
            if let Some(p) = &procs {
                super::cgroup::enter(p);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| SpawnError::Spawn {
        program: program.clone(),
        source,
    })?;
    let pid = child.id().unwrap_or(0) as i32;
    // A child that could not move in (a cgroup it may not write) runs without one.
    let cgroup = cgroup.filter(|c| c.pids().contains(&(pid as u32)));
    let (tx, rx) = mpsc::channel(1024);
    let open = |p: &PathBuf| {
        std::fs::File::create(p).map_err(|source| SpawnError::Log {
            path: p.clone(),
            source,
        })
    };
    let out_log = open(&launch.stdout_log)?;
    let err_log = open(&launch.stderr_log)?;
    if let Some(out) = child.stdout.take() {
        tokio::spawn(pump(out, Stream::Stdout, out_log, tx.clone()));
    }
    if let Some(err) = child.stderr.take() {
        tokio::spawn(pump(err, Stream::Stderr, err_log, tx));
    }
    Ok((
        Running {
            child,
            root: pid,
            supervised: launch.supervisor.is_some(),
            guard: TreeGuard {
                root: pid,
                armed: true,
            },
            cgroup,
        },
        rx,
    ))
}

/// Whether `program` can be executed as `execvp` would find it: a path (relative to the launch's
/// folder) or a name on the launch's `PATH`.
fn findable(program: &str, launch: &Launch) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = launch.cwd.join(program);
        return match std::fs::metadata(&p) {
            Err(e) => Err(e),
            Ok(_) if runnable(&p) => Ok(()),
            Ok(_) => Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied)),
        };
    }
    let path = launch
        .env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| std::ffi::OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    if std::env::split_paths(&path).any(|d| runnable(&launch.cwd.join(d).join(program))) {
        Ok(())
    } else {
        Err(std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

/// Resets every catchable signal to its default action and empties the signal mask (run in the
/// child between fork and exec: async-signal-safe calls only).
#[allow(unsafe_code)]
pub(crate) fn default_signals() {
    for sig in 1..32 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            // SAFETY: signal(2) with SIG_DFL is async-signal-safe; errors (invalid numbers) are
            // of no consequence here.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
    // SAFETY: a zeroed sigset_t initialised by sigemptyset; sigprocmask is async-signal-safe.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Copy a stream to its log file and send each line (text after the last `\r` of a line, so
/// progress bars yield their final state). The log file gets every byte; a line sent on is cut at
/// [`crate::util::lines::MAX_LINE`] bytes, so an endless line costs no memory.
async fn pump(
    stream: impl AsyncRead + Unpin,
    which: Stream,
    log: std::fs::File,
    tx: mpsc::Sender<(Stream, String)>,
) {
    let mut log = tokio::fs::File::from_std(log);
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    let max = crate::util::lines::MAX_LINE;
    let mut eof = false;
    while !eof {
        buf.clear();
        let mut any = false;
        loop {
            let avail = match reader.fill_buf().await {
                Ok(a) if !a.is_empty() => a,
                _ => {
                    eof = true;
                    break;
                }
            };
            any = true;
            let (len, done) = match avail.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (avail.len(), false),
            };
            let chunk = &avail[..len];
            let _ = log.write_all(chunk).await;
            let keep = chunk.len().min(max.saturating_sub(buf.len()));
            buf.extend_from_slice(&chunk[..keep]);
            reader.consume(len);
            if done {
                break;
            }
        }
        if !any {
            break;
        }
        let text = String::from_utf8_lossy(&buf);
        let line = text.trim_end_matches(['\n', '\r']);
        let line = line.rsplit('\r').next().unwrap_or(line).to_string();
        // The runner may be gone; keep draining so the child never blocks on a full pipe.
        let _ = tx.send((which, line)).await;
    }
    let _ = log.flush().await;
}

/// Whether any process of the tree `root` leads is still alive (zombies aside): `root`, its
/// descendants, the members of its process group.
#[cfg(any(test, feature = "testkit"))]
pub fn tree_alive(root: i32) -> bool {
    !workload_pids(root, false).is_empty()
}

/// Stop the whole trial: SIGINT, wait `grace`; SIGTERM, wait `grace`; SIGKILL — each sent to
/// every process of the tree (not the supervisor), wherever its session or group. Returns the
/// signal that finally ended it (None if it was already gone). A supervisor is then left a
/// moment to exit by itself, and killed if it does not.
pub async fn stop_tree(running: &mut Running, grace: Duration) -> Option<Signal> {
    let mut last = None;
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGKILL] {
        let targets = running.workload();
        if targets.is_empty() {
            break;
        }
        for pid in targets {
            let _ = kill(Pid::from_raw(pid as i32), sig);
        }
        last = Some(sig);
        let wait = if sig == Signal::SIGKILL {
            Duration::from_secs(10)
        } else {
            grace
        };
        let deadline = tokio::time::Instant::now() + wait;
        // The direct child must be reaped for the tree to disappear.
        while tokio::time::Instant::now() < deadline {
            let _ = running.child.try_wait();
            let left = running.workload();
            if left.is_empty() {
                break;
            }
            if sig == Signal::SIGKILL {
                // Children forked between the walk and the signal.
                for pid in left {
                    let _ = kill(Pid::from_raw(pid as i32), sig);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    if running.supervised {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while matches!(running.child.try_wait(), Ok(None)) && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if matches!(running.child.try_wait(), Ok(None)) {
            let _ = running.child.start_kill();
        }
    }
    let _ = running.child.try_wait();
    last
}

/// Kill (SIGKILL) every process that still carries the trial's identity `key=value` in its
/// environment after the trial ended: one that left the tree (an unsupervised launch, a nested
/// subreaper). A process may fork while /proc is read, so the scan is repeated until one finds
/// none. Returns how many there were.
pub fn kill_strays(key: &str, value: &str) -> usize {
    let mut killed = std::collections::BTreeSet::new();
    let end = std::time::Instant::now() + STRAY_SWEEP;
    loop {
        let strays = crate::util::procfs::with_env(Path::new("/proc"), key, value);
        if strays.is_empty() || std::time::Instant::now() >= end {
            return killed.len();
        }
        for pid in strays {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            killed.insert(pid);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The longest the stray sweep repeats (a fork loop outpacing it is not followed for ever).
const STRAY_SWEEP: Duration = Duration::from_secs(5);

/// Resolves on the first SIGINT, SIGTERM, SIGHUP (the terminal went away) or SIGQUIT (Ctrl-\,
/// whose default action, a core dump, would leave the trial's last iterations unstored): what
/// stops a trial or a sweep. Never resolves when the handlers cannot be installed.
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup), Ok(mut quit)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::quit()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
        _ = quit.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(dir: &std::path::Path, script: &str) -> Launch {
        Launch {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![("PT_TEST".into(), "yes".into())],
            cwd: dir.to_path_buf(),
            stdout_log: dir.join("stdout.log"),
            stderr_log: dir.join("stderr.log"),
            // The supervised launch is tested with the binary, in tests/supervise.rs.
            supervisor: None,
        }
    }

    #[tokio::test]
    async fn lines_are_streamed_and_logged() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, mut rx) = spawn(&launch(
            dir.path(),
            "echo one; echo \"$PT_TEST\" >&2; printf 'p1\\rp2\\n'",
        ))
        .unwrap();
        let mut got = Vec::new();
        while let Some(l) = rx.recv().await {
            got.push(l);
        }
        let status = r.child.wait().await.unwrap();
        r.guard.disarm();
        assert!(status.success());
        assert!(got.contains(&(Stream::Stdout, "one".into())));
        assert!(got.contains(&(Stream::Stderr, "yes".into())));
        assert!(got.contains(&(Stream::Stdout, "p2".into())));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("stderr.log")).unwrap(),
            "yes\n"
        );
    }

    #[tokio::test]
    async fn an_endless_line_is_cut_for_the_parser_and_kept_whole_in_the_log() {
        let dir = tempfile::tempdir().unwrap();
        // 3 MiB without a newline, then a normal line.
        let (mut r, mut rx) = spawn(&launch(
            dir.path(),
            "head -c 3145728 /dev/zero | tr '\\0' x; echo; echo after",
        ))
        .unwrap();
        let mut got = Vec::new();
        while let Some((_, l)) = rx.recv().await {
            got.push(l);
        }
        r.child.wait().await.unwrap();
        r.guard.disarm();
        assert_eq!(
            got.len(),
            2,
            "{:?}",
            got.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(got[0].len(), crate::util::lines::MAX_LINE);
        assert_eq!(got[1], "after");
        let logged = std::fs::metadata(dir.path().join("stdout.log"))
            .unwrap()
            .len();
        assert_eq!(logged, 3 * (1 << 20) + 1 + 6);
    }

    #[tokio::test]
    async fn stop_escalates_to_sigkill_and_leaves_no_tree_member() {
        let dir = tempfile::tempdir().unwrap();
        // The shell and a grandchild both ignore SIGINT and SIGTERM.
        let (mut r, _rx) = spawn(&launch(
            dir.path(),
            "trap '' INT TERM; (trap '' INT TERM; sleep 30) & echo started; wait",
        ))
        .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(r.alive());
        assert!(r.workload().len() >= 2, "{:?}", r.workload());
        let sig = stop_tree(&mut r, Duration::from_millis(200)).await;
        assert_eq!(sig, Some(Signal::SIGKILL));
        assert!(!tree_alive(r.root));
    }

    #[tokio::test]
    async fn sigint_is_enough_for_a_well_behaved_process() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, _rx) = spawn(&launch(dir.path(), "sleep 30")).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sig = stop_tree(&mut r, Duration::from_secs(2)).await;
        assert_eq!(sig, Some(Signal::SIGINT));
        assert!(!tree_alive(r.root));
    }

    #[tokio::test]
    async fn the_guard_kills_the_tree_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let (r, _rx) = spawn(&launch(dir.path(), "trap '' INT TERM; sleep 30")).unwrap();
        let root = r.root;
        drop(r.guard);
        let mut child = r.child;
        let _ = child.wait().await;
        // The group's other member (sleep) is reaped by init, which on a loaded machine takes a
        // moment after the SIGKILL.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while tree_alive(root) && std::time::Instant::now() < end {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(!tree_alive(root));
    }

    #[test]
    fn the_stray_sweep_outlasts_a_process_that_forks_while_it_scans() {
        let token = format!("strays-{}", std::process::id());
        // Outside any tree of ours: orphans in sessions of their own, forking without pause.
        std::process::Command::new("sh")
            .args(["-c", "setsid sh -c 'while :; do (sleep 300 &); done' &"])
            .env("PT_STRAY_TEST", &token)
            .status()
            .unwrap();
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while crate::util::procfs::with_env(Path::new("/proc"), "PT_STRAY_TEST", &token).len() < 5 {
            assert!(
                std::time::Instant::now() < end,
                "the fork loop never started"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(kill_strays("PT_STRAY_TEST", &token) >= 2);
        let left = crate::util::procfs::with_env(Path::new("/proc"), "PT_STRAY_TEST", &token);
        for pid in &left {
            let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
        }
        assert!(left.is_empty(), "left after the sweep: {left:?}");
    }

    #[test]
    fn spawn_errors_name_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let e = rt.block_on(async {
            let mut l = launch(dir.path(), "");
            l.argv = vec!["/nonexistent/prog".into()];
            spawn(&l).err().unwrap()
        });
        assert!(e.to_string().contains("/nonexistent/prog"));
    }
}
