//! A trial's own cgroup (v2): a leaf under primus-tune's own cgroup, which the supervisor and
//! so every process of the trial start in. A process can leave a process group, a session, its
//! parent's tree (when the supervisor is gone: a workload that runs `kill -9 0`) and even its
//! environment (`env -i`), but not its cgroup: killing everything in it at the end is the last
//! word on "no process a trial started outlives it". Where there is no cgroup v2 hierarchy, or
//! primus-tune may not create a cgroup under its own (a user's session that systemd did not
//! delegate), trials run without one and the supervisor and the environment sweep do the work.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the processes of a killed cgroup may take to be gone (one in uninterruptible sleep
/// dies when its I/O returns).
const KILL_WAIT: Duration = Duration::from_secs(10);

/// A trial's cgroup, removed (everything in it killed first) when dropped.
#[derive(Debug)]
pub struct TrialCgroup {
    dir: PathBuf,
    /// `cgroup.procs`, ready for the child between fork and exec (no allocation there).
    procs: CString,
}

/// The cgroup v2 folder primus-tune itself runs in, or why there is none.
pub fn own_dir() -> Result<PathBuf, String> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(|e| e.to_string())?;
    let own = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
    let (root, mountpoint) = v2_mount(&mounts).ok_or("no cgroup v2 hierarchy is mounted")?;
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("this process is in no cgroup v2")?;
    // A cgroup namespace or a bind mount shows a subtree: the path is below the mount's root.
    let rel = path
        .strip_prefix(root.as_str())
        .ok_or_else(|| format!("its cgroup {path} is outside the mounted {root}"))?;
    Ok(mountpoint.join(rel.trim_start_matches('/')))
}

/// The root and mount point of the cgroup v2 hierarchy in a `/proc/self/mountinfo` text.
fn v2_mount(mountinfo: &str) -> Option<(String, PathBuf)> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split(' ').next()? != "cgroup2" {
            return None;
        }
        let f: Vec<&str> = left.split(' ').collect();
        Some((unescape(f.get(3)?), PathBuf::from(unescape(f.get(4)?))))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

impl TrialCgroup {
    /// A new, empty cgroup under primus-tune's own; None (with why) when there can be none.
    pub fn create() -> Result<TrialCgroup, String> {
        static N: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "primus-tune-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let parent = own_dir()?;
        prune(&parent);
        let dir = parent.join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let procs = CString::new(
            dir.join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .map_err(|e| e.to_string())?;
        Ok(TrialCgroup { dir, procs })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its `cgroup.procs`, for [`enter`].
    pub fn procs_file(&self) -> CString {
        self.procs.clone()
    }

    /// Its live processes (zombies aside).
    pub fn pids(&self) -> Vec<u32> {
        let text = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.trim().parse::<u32>().ok())
            .filter(|p| {
                crate::util::procfs::read_stat(&Path::new("/proc").join(p.to_string()).join("stat"))
                    .is_some_and(|st| !st.is_gone())
            })
            .collect()
    }

    /// Kills everything in it (SIGKILL: what is left at the end of a trial had its grace
    /// already) and waits for it to be empty; how many processes there were. `cgroup.kill`
    /// (Linux 5.14) kills atomically, a process forking meanwhile included; before it, each
    /// listed process is killed until none is listed.
    pub fn kill_all(&self) -> usize {
        let found = self.pids();
        if found.is_empty() {
            return 0;
        }
        let atomic = std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok();
        let end = Instant::now() + KILL_WAIT;
        loop {
            let left = self.pids();
            if left.is_empty() || Instant::now() >= end {
                break;
            }
            if !atomic {
                for p in left {
                    let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        found.len()
    }
}

/// Removes the empty cgroups that runners no longer alive left in `parent` (one killed by
/// SIGKILL never dropped its trial's; its supervisor emptied it). A cgroup still in use, or of
/// a live runner, is left alone: `rmdir` refuses a populated one.
fn prune(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("primus-tune-")
            .and_then(|r| r.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs`; run in the child
/// between fork and exec, so it makes only async-signal-safe calls (open, write, close).
/// Whether it moved.
#[allow(unsafe_code)]
pub fn enter(procs: &CStr) -> bool {
    // SAFETY: a NUL-terminated path prepared before the fork; a one-byte buffer.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, b"0".as_ptr().cast(), 1) == 1;
        libc::close(fd);
        ok
    }
}

impl Drop for TrialCgroup {
    fn drop(&mut self) {
        self.kill_all();
        // An exiting process keeps the cgroup busy for a moment.
        let end = Instant::now() + Duration::from_secs(2);
        while std::fs::remove_dir(&self.dir).is_err() && self.dir.exists() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_hierarchy_is_found_among_v1_ones_and_escapes_are_undone() {
        let mounts = "\
35 25 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
        assert_eq!(
            v2_mount(mounts),
            Some(("/".into(), PathBuf::from("/sys/fs/cgroup/unified")))
        );
        let bind = "50 1 0:38 /user.slice /mnt/my\\040cg rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            v2_mount(bind),
            Some(("/user.slice".into(), PathBuf::from("/mnt/my cg")))
        );
        assert_eq!(v2_mount(&mounts[..mounts.find("41").unwrap()]), None);
    }

    #[test]
    fn everything_in_the_cgroup_is_killed_and_the_cgroup_removed() {
        let cg = match TrialCgroup::create() {
            Ok(c) => c,
            Err(why) => {
                eprintln!("skipped: no trial cgroup here: {why}");
                return;
            }
        };
        let procs = cg.dir().join("cgroup.procs");
        // A shell that moves itself in, then starts a process in a session of its own.
        let mut sh = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo 0 > '{}'; setsid sleep 300 & wait",
                procs.display()
            ))
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(10);
        while cg.pids().len() < 2 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(cg.pids().len(), 2, "{:?}", cg.pids());
        assert_eq!(cg.kill_all(), 2);
        assert!(cg.pids().is_empty());
        let _ = sh.wait();
        let dir = cg.dir().to_path_buf();
        drop(cg);
        assert!(!dir.exists());
        // A dead runner's empty cgroup goes when the next trial's is made.
        let stale = dir.with_file_name(format!("primus-tune-{}-0", i32::MAX));
        std::fs::create_dir(&stale).unwrap();
        drop(TrialCgroup::create().unwrap());
        assert!(!stale.exists());
    }
}
