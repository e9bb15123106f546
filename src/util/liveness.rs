//! Whether a process recorded in the shared workspace (a study's runner holding its lease, a
//! trial's runner) still runs, judged from any process that reads the record: on the holder's
//! own host and boot, in its PID namespace, by its pid and start time (a reused pid is another
//! process); elsewhere (another node sharing the workspace, a container with its own PID
//! namespace), by the age of the heartbeat the holder writes every [`HEARTBEAT_EVERY`] — older
//! than [`STALE_AFTER`], it is gone. As Optuna's RDB storage does for trials (`heartbeat_interval`,
//! `grace_period`), and as git's lock files do not (they never expire), since a crashed node
//! must not hold a study for ever.

use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

/// How often a holder writes its heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

/// A heartbeat older than this is a holder that is gone. Twelve beats: a write may wait up to
/// the store's 15 s busy timeout for another process's lock, and an NFS server may stall for
/// tens of seconds, without a live holder being taken for dead; a crashed node frees its
/// studies within a minute. Hosts' clocks must agree to well within this (NTP does).
pub const STALE_AFTER: Duration = Duration::from_secs(60);

/// A process as another one can recognise it later: where it runs and which process it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    /// The host name (`uname -n`).
    pub host: String,
    /// `/proc/sys/kernel/random/boot_id`: a new one at every boot of the host.
    pub boot_id: String,
    /// The inode of its PID namespace (`/proc/self/ns/pid`): pids mean something only inside
    /// one namespace. None when it cannot be read.
    pub pid_ns: Option<u64>,
    pub pid: u32,
    /// When it started, in clock ticks after boot (`/proc/<pid>/stat`): with the pid, which
    /// process it is (a later process reusing the pid starts later).
    pub start_ticks: Option<u64>,
}

impl ProcessIdentity {
    /// This process.
    pub fn current() -> ProcessIdentity {
        let pid = std::process::id();
        ProcessIdentity {
            host: host_name(),
            boot_id: boot_id(),
            pid_ns: pid_namespace(),
            pid,
            start_ticks: start_ticks(pid),
        }
    }

    /// Whether pids of `self` and of this process are in one PID namespace of one boot of one
    /// host: only then does this process's `/proc` say anything about `self.pid`.
    fn shares_pids_with(&self, here: &ProcessIdentity) -> bool {
        self.host == here.host
            && self.boot_id == here.boot_id
            && self.pid_ns.is_some()
            && self.pid_ns == here.pid_ns
    }

    /// `pid 41 on n1`, as messages name it.
    pub fn describe(&self) -> String {
        format!("pid {} on {}", self.pid, self.host)
    }
}

/// What the record says of its process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    /// Provably gone, and why.
    Gone(String),
}

/// Whether `rec`'s process still runs, as this process can tell. `since`: when the record was
/// made (the holder ran then); `heartbeat`: its last heartbeat (None: none yet, `since` counts).
pub fn judge(
    rec: &ProcessIdentity,
    since: SystemTime,
    heartbeat: Option<SystemTime>,
    now: SystemTime,
) -> Liveness {
    judge_from(&ProcessIdentity::current(), rec, since, heartbeat, now)
}

/// [`judge`] as seen from `here`.
pub fn judge_from(
    here: &ProcessIdentity,
    rec: &ProcessIdentity,
    since: SystemTime,
    heartbeat: Option<SystemTime>,
    now: SystemTime,
) -> Liveness {
    if rec.shares_pids_with(here) {
        return match start_ticks(rec.pid) {
            None => Liveness::Gone(format!("{} no longer runs", rec.describe())),
            Some(t) if rec.start_ticks.is_some_and(|r| r != t) => Liveness::Gone(format!(
                "{} ended (the pid now belongs to a later process)",
                rec.describe()
            )),
            Some(_) => Liveness::Alive,
        };
    }
    // The same host booted again after the record was made: nothing of before runs. (Only
    // when the record predates this boot: two machines that share a host name differ in boot
    // id too, and the other one's record is judged by its heartbeat.)
    if rec.host == here.host
        && rec.boot_id != here.boot_id
        && boot_time().is_some_and(|booted| since < booted)
    {
        return Liveness::Gone(format!("{} rebooted since", rec.host));
    }
    let last = heartbeat.unwrap_or(since);
    let age = now.duration_since(last).unwrap_or_default();
    if age > STALE_AFTER {
        Liveness::Gone(format!(
            "the last heartbeat of {} is {} s old, over the {} s limit",
            rec.describe(),
            age.as_secs(),
            STALE_AFTER.as_secs()
        ))
    } else {
        Liveness::Alive
    }
}

fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// `pid:[4026531836]` → 4026531836.
fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let text = link.to_str()?;
    text.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// When `pid` started (ticks after boot); None when it does not run (or only waits to be
/// reaped).
fn start_ticks(pid: u32) -> Option<u64> {
    let st = super::procfs::read_stat(std::path::Path::new(&format!("/proc/{pid}/stat")))?;
    (!st.is_gone()).then_some(st.starttime)
}

/// When this host booted (`btime` of `/proc/stat`).
fn boot_time() -> Option<SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(l: Liveness) -> String {
        match l {
            Liveness::Gone(why) => why,
            Liveness::Alive => panic!("judged alive"),
        }
    }

    #[test]
    fn on_this_host_the_pid_and_its_start_time_decide() {
        let here = ProcessIdentity::current();
        let now = SystemTime::now();
        let old = now - Duration::from_secs(3600);
        // This process, its heartbeat an hour old: it runs, whatever its heartbeat says.
        assert_eq!(
            judge_from(&here, &here, old, Some(old), now),
            Liveness::Alive
        );
        // A process that ended.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let dead = ProcessIdentity {
            pid,
            ..here.clone()
        };
        let why = gone(judge_from(&here, &dead, now, Some(now), now));
        assert!(why.contains(&format!("pid {pid} on")), "{why}");
        // This pid, but a process started earlier than it: the pid was reused.
        let reused = ProcessIdentity {
            start_ticks: here.start_ticks.map(|t| t.saturating_sub(1)),
            ..here.clone()
        };
        let why = gone(judge_from(&here, &reused, now, Some(now), now));
        assert!(why.contains("later process"), "{why}");
    }

    #[test]
    fn elsewhere_the_heartbeat_s_age_decides() {
        let here = ProcessIdentity::current();
        let now = SystemTime::now();
        // Another host, or this host's pid in another PID namespace: the pid means nothing here.
        for other in [
            ProcessIdentity {
                host: format!("{}-other", here.host),
                pid: 1,
                ..here.clone()
            },
            ProcessIdentity {
                pid_ns: here.pid_ns.map(|n| n + 1),
                pid: u32::MAX,
                ..here.clone()
            },
        ] {
            let fresh = now - Duration::from_secs(10);
            assert_eq!(
                judge_from(&here, &other, fresh, Some(fresh), now),
                Liveness::Alive
            );
            let stale = now - STALE_AFTER - Duration::from_secs(1);
            let why = gone(judge_from(&here, &other, stale, Some(stale), now));
            assert!(why.contains("s old, over the 60 s limit"), "{why}");
        }
        // This host under another boot id, recorded before this boot: it rebooted since.
        let before = ProcessIdentity {
            boot_id: "another-boot".into(),
            ..here.clone()
        };
        let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1);
        let why = gone(judge_from(&here, &before, long_ago, Some(now), now));
        assert!(why.contains("rebooted"), "{why}");
        // ... recorded after this boot: another machine of that name, judged by its heartbeat.
        assert_eq!(
            judge_from(&here, &before, now, Some(now), now),
            Liveness::Alive
        );
    }
}
