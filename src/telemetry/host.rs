//! Host telemetry from procfs: CPU and RAM of the machine (`/proc/stat`, `/proc/meminfo`), and
//! the resident memory and CPU use of one process tree (the trial's: its root, every
//! descendant wherever its session or group, and the root's process group). Reading procfs directly
//! keeps the root injectable for tests and avoids a dependency for three files.

pub use crate::domain::telemetry::{GroupUsage, HostSample};
use crate::util::procfs::ProcFile;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub struct Host {
    procfs: PathBuf,
    /// /proc/stat and /proc/meminfo, kept open (None when missing: the figure is then absent).
    stat: Option<ProcFile>,
    meminfo: Option<ProcFile>,
    /// Previous (busy, total) jiffies of the whole machine.
    prev_cpu: Option<(u64, u64)>,
    page_size: u64,
    ticks_per_s: f64,
    /// Previous CPU ticks per pid of the watched tree, and when they were read.
    prev: Option<(Instant, HashMap<u32, u64>)>,
}

impl Host {
    pub fn new(procfs_root: &Path) -> Host {
        let mut h = Host {
            procfs: procfs_root.to_path_buf(),
            stat: ProcFile::open(&procfs_root.join("stat")).ok(),
            meminfo: ProcFile::open(&procfs_root.join("meminfo")).ok(),
            prev_cpu: None,
            page_size: sysconf(libc::_SC_PAGESIZE).unwrap_or(4096),
            ticks_per_s: sysconf(libc::_SC_CLK_TCK).unwrap_or(100) as f64,
            prev: None,
        };
        h.prev_cpu = h.cpu_jiffies();
        h
    }

    /// (busy, total) jiffies from the `cpu` line of /proc/stat.
    fn cpu_jiffies(&mut self) -> Option<(u64, u64)> {
        let text = self.stat.as_mut()?.read().ok()?;
        let line = text.lines().find(|l| l.starts_with("cpu "))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        Some((total.saturating_sub(idle), total))
    }

    fn cpu_pct(&mut self) -> Option<f64> {
        let now = self.cpu_jiffies()?;
        let prev = self.prev_cpu.replace(now)?;
        let dt = now.1.checked_sub(prev.1).filter(|d| *d > 0)?;
        Some(100.0 * now.0.saturating_sub(prev.0) as f64 / dt as f64)
    }

    /// (used, total) bytes from /proc/meminfo: used = MemTotal − MemAvailable.
    fn ram(&mut self) -> Option<(u64, u64)> {
        let text = self.meminfo.as_mut()?.read().ok()?;
        let kib = |key: &str| -> Option<u64> {
            text.lines()
                .find(|l| l.starts_with(key))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
                .map(|k| k * 1024)
        };
        let total = kib("MemTotal:")?;
        let avail = kib("MemAvailable:")?;
        Some((total.saturating_sub(avail), total))
    }

    /// CPU and RAM of the machine, and the tree's usage when `root` is given.
    pub fn sample(&mut self, root: Option<i32>) -> HostSample {
        let ram = self.ram();
        HostSample {
            cpu_pct: self.cpu_pct(),
            ram_used_bytes: ram.map(|r| r.0),
            ram_total_bytes: ram.map(|r| r.1),
            group: root.map(|g| self.tree(g)),
        }
    }

    /// Every process of the tree `root` leads ([`crate::util::procfs::family`]), with RSS and
    /// CPU since the last call.
    pub fn tree(&mut self, root: i32) -> GroupUsage {
        let now = Instant::now();
        let mut ticks = HashMap::new();
        let mut usage = GroupUsage {
            root,
            ..GroupUsage::default()
        };
        for (pid, st) in crate::util::procfs::family(&self.procfs, root) {
            usage.processes += 1;
            usage.pids.push(pid);
            usage.rss_bytes += st.rss_pages * self.page_size;
            ticks.insert(pid, st.utime + st.stime);
        }
        if let Some((t0, prev)) = &self.prev {
            let dt = now.duration_since(*t0).as_secs_f64();
            if dt > 0.0 {
                let d: u64 = ticks
                    .iter()
                    .map(|(pid, t)| t.saturating_sub(prev.get(pid).copied().unwrap_or(*t)))
                    .sum();
                usage.cpu_pct = Some(100.0 * d as f64 / self.ticks_per_s / dt);
            }
        }
        self.prev = Some((now, ticks));
        usage.pids.sort_unstable();
        usage
    }
}

#[allow(unsafe_code)]
fn sysconf(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf has no preconditions; a negative result means "unsupported".
    let v = unsafe { libc::sysconf(name) };
    (v > 0).then_some(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_usage_of_a_real_process_tree_across_sessions() {
        use std::os::unix::process::CommandExt;
        // One grandchild moves to a session of its own, as torchrun's workers do.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & setsid sleep 5 & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut h = Host::new(Path::new("/proc"));
        let u = h.tree(child.id() as i32);
        assert_eq!(u.processes, 3, "{u:?}");
        assert!(u.rss_bytes > 0);
        let s = h.sample(Some(child.id() as i32));
        assert!(s.ram_total_bytes.unwrap() > 0);
        assert!(s.group.unwrap().cpu_pct.is_some());
        for pid in u.pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = child.wait();
    }
}
