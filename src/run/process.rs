//! Trial processes: spawned in their own process group with an argv vector (never a shell),
//! stdout and stderr streamed line by line, stopped as a group (SIGINT, then SIGTERM, then
//! SIGKILL), and checked gone afterwards. A guard kills the group if the runner unwinds.

use nix::sys::signal::{Signal, killpg};
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
}

/// A running trial process.
pub struct Running {
    pub child: tokio::process::Child,
    pub pgid: i32,
    pub guard: GroupGuard,
}

/// Kills the process group with SIGKILL when dropped while still armed — the last line of
/// defence when the runner panics or returns early.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: i32,
    armed: bool,
}

impl GroupGuard {
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed && group_alive(self.pgid) {
            let _ = killpg(Pid::from_raw(self.pgid), Signal::SIGKILL);
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

/// Start the process in a new process group; its lines arrive on the returned channel (and are
/// written to the log files) until both streams close.
#[allow(unsafe_code)] // pre_exec: signal defaults in the child
pub fn spawn(launch: &Launch) -> Result<(Running, mpsc::Receiver<(Stream, String)>), SpawnError> {
    let (program, args) = launch.argv.split_first().ok_or(SpawnError::Empty)?;
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
    // SAFETY: between fork and exec only async-signal-safe calls are made (signal,
    // sigemptyset, sigprocmask).
    unsafe {
        cmd.pre_exec(|| {
            default_signals();
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|source| SpawnError::Spawn {
        program: program.clone(),
        source,
    })?;
    let pid = child.id().unwrap_or(0) as i32;
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
            pgid: pid,
            guard: GroupGuard {
                pgid: pid,
                armed: true,
            },
        },
        rx,
    ))
}

/// Resets every catchable signal to its default action and empties the signal mask (run in the
/// child between fork and exec: async-signal-safe calls only).
#[allow(unsafe_code)]
fn default_signals() {
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
/// progress bars yield their final state).
async fn pump(
    stream: impl AsyncRead + Unpin,
    which: Stream,
    log: std::fs::File,
    tx: mpsc::Sender<(Stream, String)>,
) {
    let mut log = tokio::fs::File::from_std(log);
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let _ = log.write_all(&buf).await;
                let text = String::from_utf8_lossy(&buf);
                let line = text.trim_end_matches(['\n', '\r']);
                let line = line.rsplit('\r').next().unwrap_or(line).to_string();
                if tx.send((which, line)).await.is_err() {
                    // The runner is gone; keep draining so the child never blocks on a full pipe.
                    continue;
                }
            }
        }
    }
    let _ = log.flush().await;
}

/// Whether any process of the group is still alive. Zombies do not count: a killed member whose
/// parent already exited waits for PID 1 to reap it, which in a container may take a while.
pub fn group_alive(pgid: i32) -> bool {
    if pgid <= 0 || killpg(Pid::from_raw(pgid), None).is_err() {
        return false;
    }
    let proc_root = Path::new("/proc");
    crate::util::procfs::pids(proc_root).into_iter().any(|pid| {
        crate::util::procfs::read_stat(&proc_root.join(pid.to_string()).join("stat"))
            .is_some_and(|st| st.pgrp == pgid && !st.is_gone())
    })
}

/// Stop the whole group: SIGINT, wait `grace`; SIGTERM, wait `grace`; SIGKILL. Returns the
/// signal that finally ended it (None if it was already gone).
pub async fn stop_group(running: &mut Running, grace: Duration) -> Option<Signal> {
    let pgid = Pid::from_raw(running.pgid);
    let mut last = None;
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGKILL] {
        if !group_alive(running.pgid) {
            break;
        }
        let _ = killpg(pgid, sig);
        last = Some(sig);
        let wait = if sig == Signal::SIGKILL {
            Duration::from_secs(5)
        } else {
            grace
        };
        let deadline = tokio::time::Instant::now() + wait;
        // The leader must be reaped for the group to disappear; other members are checked too.
        while tokio::time::Instant::now() < deadline {
            let _ = running.child.try_wait();
            if !group_alive(running.pgid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let _ = running.child.try_wait();
    last
}

/// Resolves on the first SIGINT, SIGTERM or SIGHUP (the terminal went away): what stops a trial
/// or a sweep. Never resolves when the handlers cannot be installed.
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
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
    async fn stop_escalates_to_sigkill_and_leaves_no_group_member() {
        let dir = tempfile::tempdir().unwrap();
        // The shell and a grandchild both ignore SIGINT and SIGTERM.
        let (mut r, _rx) = spawn(&launch(
            dir.path(),
            "trap '' INT TERM; (trap '' INT TERM; sleep 30) & echo started; wait",
        ))
        .unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(group_alive(r.pgid));
        let sig = stop_group(&mut r, Duration::from_millis(200)).await;
        assert_eq!(sig, Some(Signal::SIGKILL));
        assert!(!group_alive(r.pgid));
    }

    #[tokio::test]
    async fn sigint_is_enough_for_a_well_behaved_process() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, _rx) = spawn(&launch(dir.path(), "sleep 30")).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sig = stop_group(&mut r, Duration::from_secs(2)).await;
        assert_eq!(sig, Some(Signal::SIGINT));
        assert!(!group_alive(r.pgid));
    }

    #[tokio::test]
    async fn the_guard_kills_the_group_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let (r, _rx) = spawn(&launch(dir.path(), "trap '' INT TERM; sleep 30")).unwrap();
        let pgid = r.pgid;
        drop(r.guard);
        let mut child = r.child;
        let _ = child.wait().await;
        // The group's other member (sleep) is reaped by init, which on a loaded machine takes a
        // moment after the SIGKILL.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while group_alive(pgid) && std::time::Instant::now() < end {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(!group_alive(pgid));
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
