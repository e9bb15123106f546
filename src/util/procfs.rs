//! `/proc/<pid>/stat`, read by the host sampler (a trial's process group) and by the run engine
//! (is any member of a trial's group still alive?).

use std::path::Path;

/// The fields of `/proc/<pid>/stat` this project uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// `R`, `S`, `D`, `Z` (zombie), `X` (dead), ...
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    /// CPU time in clock ticks.
    pub utime: u64,
    pub stime: u64,
    pub rss_pages: u64,
    /// When the process started, in clock ticks after boot.
    pub starttime: u64,
}

impl ProcStat {
    /// A process that has exited and only waits to be reaped.
    pub fn is_gone(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

pub fn read_stat(path: &Path) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// Parse a stat line; the command name in parentheses may hold spaces and parentheses.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = text.get(text.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state(0) ppid(1) pgrp(2) ... utime(11) stime(12) ... rss(21).
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        utime: f.get(11)?.parse().ok()?,
        stime: f.get(12)?.parse().ok()?,
        rss_pages: f.get(21)?.parse().ok()?,
        starttime: f.get(19)?.parse().ok()?,
    })
}

/// Clock ticks per second of `/proc` times (`USER_HZ`: 100 on every Linux the kernel ABI
/// supports for user space).
const USER_HZ: u64 = 100;

/// When process `pid` started (wall clock, to the second the boot time is known), None when it
/// does not exist or has exited.
pub fn start_time(pid: u32) -> Option<std::time::SystemTime> {
    let st = read_stat(Path::new(&format!("/proc/{pid}/stat")))?;
    if st.is_gone() {
        return None;
    }
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let ms = btime * 1000 + st.starttime * 1000 / USER_HZ;
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

/// A procfs file kept open and re-read from offset 0 on each call: one `pread` instead of
/// open, stat, two reads and close (what a sampler reads every few seconds, e.g. /proc/stat).
/// procfs fills the whole buffer when the file fits, so a short read is the end of the file.
pub struct ProcFile {
    file: std::fs::File,
    buf: Vec<u8>,
}

impl ProcFile {
    pub fn open(path: &Path) -> std::io::Result<ProcFile> {
        Ok(ProcFile {
            file: std::fs::File::open(path)?,
            buf: vec![0; 16 * 1024],
        })
    }

    /// The whole file as it is now (invalid UTF-8 is replaced).
    pub fn read(&mut self) -> std::io::Result<std::borrow::Cow<'_, str>> {
        use std::os::unix::fs::FileExt;
        let mut len = 0;
        loop {
            let n = self.file.read_at(&mut self.buf[len..], len as u64)?;
            len += n;
            if n == 0 || len < self.buf.len() {
                break;
            }
            // A full buffer: the file may be longer; grow and read on.
            self.buf.resize(self.buf.len() * 2, 0);
        }
        Ok(String::from_utf8_lossy(&self.buf[..len]))
    }
}

/// A `kB` figure of this process from /proc/self/status (`VmHWM`, `VmRSS`, ...).
pub fn status_kb(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find(|l| l.strip_prefix(key).is_some_and(|r| r.starts_with(':')))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Pids listed under a procfs root.
pub fn pids(procfs: &Path) -> Vec<u32> {
    std::fs::read_dir(procfs)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// Every live process of a launched tree, with its stat: `root` itself, every descendant of it
/// (by parent pid, whatever session or group it moved to), and every member of the process group
/// `root` leads (a member whose parent died before the walk). Exited processes waiting to be
/// reaped are left out. One pass over `procfs`.
pub fn family(procfs: &Path, root: i32) -> Vec<(u32, ProcStat)> {
    if root <= 0 {
        return Vec::new();
    }
    let all: Vec<(u32, ProcStat)> = pids(procfs)
        .into_iter()
        .filter_map(|pid| Some((pid, read_stat(&procfs.join(pid.to_string()).join("stat"))?)))
        .collect();
    let mut children: std::collections::HashMap<i32, Vec<usize>> = Default::default();
    for (i, (_, st)) in all.iter().enumerate() {
        children.entry(st.ppid).or_default().push(i);
    }
    let mut member = vec![false; all.len()];
    let mut stack: Vec<i32> = vec![root];
    for (i, (pid, st)) in all.iter().enumerate() {
        if *pid as i32 == root || st.pgrp == root {
            member[i] = true;
            if *pid as i32 != root {
                stack.push(*pid as i32);
            }
        }
    }
    while let Some(parent) = stack.pop() {
        for &i in children.get(&parent).map(Vec::as_slice).unwrap_or(&[]) {
            if !member[i] {
                member[i] = true;
                stack.push(all[i].0 as i32);
            }
        }
    }
    all.into_iter()
        .zip(member)
        .filter(|((_, st), m)| *m && !st.is_gone())
        .map(|(p, _)| p)
        .collect()
}

/// Live processes whose environment holds `key=value` (as they were started: a process that
/// changed its own environment later is still found by what it inherited). Processes of other
/// users, whose environment is unreadable, are never listed.
pub fn with_env(procfs: &Path, key: &str, value: &str) -> Vec<u32> {
    let needle = format!("{key}={value}");
    pids(procfs)
        .into_iter()
        .filter(|pid| {
            let dir = procfs.join(pid.to_string());
            std::fs::read(dir.join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                && read_stat(&dir.join("stat")).is_some_and(|st| !st.is_gone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_file_sees_new_contents_and_grows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "short").unwrap();
        let mut f = ProcFile::open(&p).unwrap();
        assert_eq!(f.read().unwrap(), "short");
        let long = "x".repeat(40_000);
        std::fs::write(&p, &long).unwrap();
        assert_eq!(f.read().unwrap().len(), 40_000);
        std::fs::write(&p, "again").unwrap();
        assert_eq!(f.read().unwrap(), "again");
    }

    #[test]
    fn proc_file_reads_a_real_proc_file_twice() {
        let mut f = ProcFile::open(Path::new("/proc/self/stat")).unwrap();
        let a = parse_stat(&f.read().unwrap()).expect("first read parses");
        let b = parse_stat(&f.read().unwrap()).expect("second read parses");
        assert_eq!(a.pgrp, b.pgrp);
    }

    #[test]
    fn stat_with_spaces_and_parentheses_in_the_name() {
        let s = "4242 (my (weird) proc) Z 1 4242 4242 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 3 0 1234 123456 789 18446744073709551615";
        let st = parse_stat(s).unwrap();
        assert_eq!(st.state, 'Z');
        assert!(st.is_gone());
        assert_eq!(st.pgrp, 4242);
        assert_eq!(st.ppid, 1);
        assert_eq!((st.utime, st.stime), (37, 5));
        assert_eq!(st.rss_pages, 789);
        assert!(parse_stat("12 (x) S 1").is_none());
    }

    fn fake_proc(dir: &Path, pid: u32, ppid: u32, pgrp: u32, state: char) {
        let d = dir.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("stat"),
            format!(
                "{pid} (p) {state} {ppid} {pgrp} {pgrp} 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 1 1 1 0"
            ),
        )
        .unwrap();
    }

    #[test]
    fn family_follows_parents_across_sessions_and_keeps_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fake_proc(p, 1, 0, 1, 'S');
        fake_proc(p, 100, 1, 100, 'S'); // root
        fake_proc(p, 101, 100, 100, 'S'); // child
        fake_proc(p, 102, 101, 102, 'S'); // grandchild in its own session
        fake_proc(p, 103, 102, 102, 'S'); // its child
        fake_proc(p, 104, 1, 100, 'S'); // orphan still in the group, reparented to init
        fake_proc(p, 105, 104, 105, 'S'); // the orphan's child, own group
        fake_proc(p, 106, 101, 100, 'Z'); // exited, not reaped
        fake_proc(p, 200, 1, 200, 'S'); // unrelated
        let mut got: Vec<u32> = family(p, 100).into_iter().map(|(pid, _)| pid).collect();
        got.sort_unstable();
        assert_eq!(got, vec![100, 101, 102, 103, 104, 105]);
        assert!(family(p, 0).is_empty());
        assert!(family(p, 999).is_empty());
    }

    #[test]
    fn with_env_finds_a_process_by_an_inherited_variable() {
        let token = format!("pt-{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .env("PT_PROCFS_TEST", &token)
            .spawn()
            .unwrap();
        // Until the child has exec'd `sleep`, its environment is still the test's (a loaded
        // machine can take a while to get there).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
        let mut found = with_env(Path::new("/proc"), "PT_PROCFS_TEST", &token);
        while found.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            found = with_env(Path::new("/proc"), "PT_PROCFS_TEST", &token);
        }
        assert_eq!(found, vec![child.id()]);
        assert!(with_env(Path::new("/proc"), "PT_PROCFS_TEST", "other").is_empty());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(with_env(Path::new("/proc"), "PT_PROCFS_TEST", &token).is_empty());
    }
}
