//! The trial supervisor: `primus-tune __supervise --parent PID --grace-ms N -- ARGV...`, the
//! process a trial is launched through (the same binary, so a copied binary carries it).
//!
//! It makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever sessions or process
//! groups the workload creates (torchrun starts its workers in new sessions; a daemon calls
//! `setsid` and double-forks), every descendant stays in its process tree, where the runner
//! finds, measures and stops it. It starts the workload with default signal dispositions and an
//! empty mask, reaps every orphan, and ends the tree:
//!
//! - when the workload's main process exits, any descendant left is stopped (SIGTERM, the
//!   grace, SIGKILL) before the supervisor exits with the workload's own status (the same code,
//!   or the same signal);
//! - when primus-tune dies by any signal, SIGKILL included, the supervisor is reparented; it
//!   notices within [`POLL`] and stops the whole tree the same way;
//! - a SIGINT, SIGTERM, SIGHUP or SIGQUIT sent to the supervisor itself is passed on to every
//!   descendant (the runner signals the descendants directly and never the supervisor).
//!
//! The parent's death is detected by polling `getppid()` rather than by `PR_SET_PDEATHSIG`,
//! whose signal follows the *thread* that forked: primus-tune launches from a thread pool whose
//! threads may end while the process lives on.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The hidden subcommand that runs the supervisor.
pub const SUBCOMMAND: &str = "__supervise";

/// How often the supervisor reaps, checks its parent and relays signals.
pub const POLL: Duration = Duration::from_millis(25);

/// After SIGKILL, how long to wait for the tree to disappear (a process in uninterruptible
/// sleep dies when its I/O returns).
const KILL_WAIT: Duration = Duration::from_secs(10);

/// How a trial's workload is wrapped: this binary and the grace between SIGTERM and SIGKILL
/// when the supervisor itself has to stop the tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Supervisor {
    pub exe: PathBuf,
    pub grace: Duration,
}

impl Supervisor {
    /// The supervisor's argv around `argv`, for the runner `parent`.
    pub fn wrap(&self, parent: u32, argv: &[String]) -> Vec<String> {
        let mut out = vec![
            self.exe.display().to_string(),
            SUBCOMMAND.into(),
            "--parent".into(),
            parent.to_string(),
            "--grace-ms".into(),
            self.grace.as_millis().to_string(),
            "--".into(),
        ];
        out.extend(argv.iter().cloned());
        out
    }
}

static MAIN_BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Called by the `primus-tune` binary's `main`: this executable can supervise (a test harness
/// linking the library cannot: it does not know the subcommand).
pub fn mark_main_binary() {
    if let Ok(exe) = std::env::current_exe() {
        let _ = MAIN_BINARY.set(exe);
    }
}

/// The binary to supervise trials with: `explicit` (a frontend's `self_exe`), else this
/// executable when it is primus-tune. None in a test harness without one: the trial then runs
/// unsupervised (its process group only), and says so.
pub fn supervisor_exe(explicit: Option<&Path>) -> Option<PathBuf> {
    explicit
        .map(Path::to_path_buf)
        .or_else(|| MAIN_BINARY.get().cloned())
}

/// The parsed command line of the supervisor.
#[derive(Debug, PartialEq)]
struct Args {
    parent: i32,
    grace: Duration,
    argv: Vec<OsString>,
}

fn parse(args: &[OsString]) -> Result<Args, String> {
    let mut parent = None;
    let mut grace = Duration::from_secs(10);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--parent") => {
                parent = it.next().and_then(|v| v.to_str()?.parse::<i32>().ok());
                if parent.is_none() {
                    return Err("--parent needs a pid".into());
                }
            }
            Some("--grace-ms") => {
                let ms = it
                    .next()
                    .and_then(|v| v.to_str()?.parse::<u64>().ok())
                    .ok_or("--grace-ms needs milliseconds")?;
                grace = Duration::from_millis(ms);
            }
            Some("--") => break,
            _ => return Err(format!("unexpected argument {a:?}")),
        }
    }
    let argv: Vec<OsString> = it.cloned().collect();
    if argv.is_empty() {
        return Err("no command after --".into());
    }
    Ok(Args {
        parent: parent.ok_or("--parent is required")?,
        grace,
        argv,
    })
}

/// The last stop signal sent to the supervisor itself (0: none), set by its handler.
static RELAY: AtomicI32 = AtomicI32::new(0);

extern "C" fn remember(sig: libc::c_int) {
    RELAY.store(sig, Ordering::Relaxed);
}

/// Exit status for a supervisor that could not start (the shells' "cannot execute").
const CANNOT_START: i32 = 127;

/// Run the supervisor with the arguments after the subcommand; returns its exit status. What
/// goes wrong is said through `say` (the frontend writes it to stderr, which is the trial's).
pub fn run(args: &[OsString], say: &mut dyn FnMut(String)) -> i32 {
    match parse(args) {
        Ok(a) => supervise(&a, say),
        Err(e) => {
            say(format!("primus-tune {SUBCOMMAND}: {e}"));
            USAGE
        }
    }
}

/// Exit status for a command line the supervisor does not understand (EX_USAGE).
const USAGE: i32 = 64;

#[allow(unsafe_code)]
fn supervise(args: &Args, say: &mut dyn FnMut(String)) -> i32 {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes an integer flag; no memory is passed.
    let subreaper = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0;
    if !subreaper {
        say(format!(
            "primus-tune supervisor: cannot become a child subreaper ({}); descendants that \
             leave the process group may outlive the trial",
            std::io::Error::last_os_error()
        ));
    }
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: `remember` only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, remember as *const () as libc::sighandler_t);
        }
    }
    // The runner may have died between fork and here: then start nothing.
    if parent_gone(args.parent) {
        return CANNOT_START;
    }
    let me = std::process::id() as i32;
    let main = {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(&args.argv[0]);
        cmd.args(&args.argv[1..]);
        // SAFETY: between fork and exec only async-signal-safe calls (signal, sigprocmask).
        unsafe {
            cmd.pre_exec(|| {
                super::process::default_signals();
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(c) => c.id() as i32,
            Err(e) => {
                say(format!(
                    "primus-tune supervisor: cannot start `{}`: {e}",
                    args.argv[0].to_string_lossy()
                ));
                return CANNOT_START;
            }
        }
    };
    let mut status: Option<Ended> = None;
    loop {
        reap(main, &mut status);
        let relay = RELAY.swap(0, Ordering::Relaxed);
        if relay != 0 {
            signal_all(me, relay);
        }
        if parent_gone(args.parent) {
            end_tree(me, args.grace, main, &mut status);
            return CANNOT_START;
        }
        if let Some(st) = status {
            if descendants(me).is_empty() {
                return mirror(st);
            }
            end_tree(me, args.grace, main, &mut status);
            return mirror(st);
        }
        std::thread::sleep(POLL);
    }
}

/// The runner that started this supervisor is gone (this process was reparented).
fn parent_gone(parent: i32) -> bool {
    nix::unistd::getppid().as_raw() != parent
}

/// How the workload's main process ended.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ended {
    Code(i32),
    Signal(i32),
}

/// Reap every exited child (orphans included); record how the workload's main process ended.
fn reap(main: i32, status: &mut Option<Ended>) {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == main => {
                *status = Some(Ended::Code(code));
            }
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid.as_raw() == main => {
                *status = Some(Ended::Signal(sig as i32));
            }
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Live descendants of the supervisor `me` (itself excluded).
fn descendants(me: i32) -> Vec<u32> {
    crate::util::procfs::family(Path::new("/proc"), me)
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|p| *p as i32 != me)
        .collect()
}

fn signal_all(me: i32, sig: i32) -> usize {
    let pids = descendants(me);
    if let Ok(sig) = nix::sys::signal::Signal::try_from(sig) {
        for p in &pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p as i32), sig);
        }
    }
    pids.len()
}

/// Stop every descendant: SIGTERM, up to `grace` for them to exit, then SIGKILL until none is
/// left (reaping all the while).
fn end_tree(me: i32, grace: Duration, main: i32, status: &mut Option<Ended>) {
    for (sig, wait) in [(libc::SIGTERM, grace), (libc::SIGKILL, KILL_WAIT)] {
        if signal_all(me, sig) == 0 {
            return;
        }
        let end = Instant::now() + wait;
        while Instant::now() < end {
            reap(main, status);
            if descendants(me).is_empty() {
                return;
            }
            if sig == libc::SIGKILL {
                // Children forked between the walk and the signal.
                signal_all(me, libc::SIGKILL);
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Exit as the workload did: its exit code, or death by its signal (without a core dump).
#[allow(unsafe_code)]
fn mirror(status: Ended) -> i32 {
    match status {
        Ended::Code(c) => c,
        Ended::Signal(sig) => {
            // SAFETY: plain libc calls on this process: no core file, default action, unblocked.
            unsafe {
                let none = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &none);
                libc::signal(sig, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::raise(sig);
            }
            128 + sig
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn arguments_round_trip_through_wrap() {
        let s = Supervisor {
            exe: "/bin/pt".into(),
            grace: Duration::from_millis(1500),
        };
        let argv = s.wrap(42, &["torchrun".into(), "--nproc".into(), "--".into()]);
        assert_eq!(argv[..2], ["/bin/pt".to_string(), SUBCOMMAND.to_string()]);
        let parsed = parse(&os(&argv
            .iter()
            .skip(2)
            .map(String::as_str)
            .collect::<Vec<_>>()))
        .unwrap();
        assert_eq!(
            parsed,
            Args {
                parent: 42,
                grace: Duration::from_millis(1500),
                argv: os(&["torchrun", "--nproc", "--"]),
            }
        );
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(parse(&os(&["--parent", "1"])).is_err());
        assert!(parse(&os(&["--parent", "x", "--", "a"])).is_err());
        assert!(parse(&os(&["--", "a"])).is_err());
        assert!(parse(&os(&["--grace-ms", "-1", "--parent", "1", "--", "a"])).is_err());
    }
}
