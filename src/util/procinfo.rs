//! What a process monitor shows of a process besides its GPU memory: the user it runs as, its
//! command line, and the trial it belongs to (`PRIMUS_TUNE_TRIAL_ID` in the environment it was
//! started with, which every process of a trial inherits). Read from a procfs root, so a
//! recorded tree works as `/proc` does; what cannot be read (another user's environment, a
//! vanished pid) is left empty, never an error.

use std::collections::HashMap;
use std::path::Path;

/// A process as a monitor lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcInfo {
    /// The user name, else the numeric uid, else empty.
    pub user: String,
    /// The command line (arguments joined by spaces), else the command name.
    pub command: String,
    /// The id of the trial it belongs to.
    pub trial: Option<String>,
}

/// User names by uid, from a passwd file.
#[derive(Debug, Clone, Default)]
pub struct Users(HashMap<u32, String>);

impl Users {
    /// Reads `path` (`/etc/passwd`); an unreadable file gives no names (uids are shown).
    pub fn load(path: &Path) -> Users {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        Users(
            text.lines()
                .filter_map(|l| {
                    let mut f = l.split(':');
                    let name = f.next()?;
                    let uid = f.nth(1)?.parse().ok()?;
                    Some((uid, name.to_string()))
                })
                .collect(),
        )
    }

    pub fn name(&self, uid: u32) -> String {
        self.0.get(&uid).cloned().unwrap_or_else(|| uid.to_string())
    }
}

/// The real uid of `<procfs>/<pid>/status`.
fn uid(dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(dir.join("status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The value of `key` in the environment the process was started with.
pub fn env_value(procfs: &Path, pid: u32, key: &str) -> Option<String> {
    let env = std::fs::read(procfs.join(pid.to_string()).join("environ")).ok()?;
    let prefix = format!("{key}=");
    env.split(|b| *b == 0).find_map(|kv| {
        kv.strip_prefix(prefix.as_bytes())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    })
}

/// User, command line and trial of `pid`.
pub fn info(procfs: &Path, pid: u32, users: &Users, trial_key: &str) -> ProcInfo {
    let dir = procfs.join(pid.to_string());
    let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let command = if args.is_empty() {
        std::fs::read_to_string(dir.join("comm"))
            .map(|c| c.trim().to_string())
            .unwrap_or_default()
    } else {
        args.join(" ")
    };
    ProcInfo {
        user: uid(&dir).map(|u| users.name(u)).unwrap_or_default(),
        command,
        trial: env_value(procfs, pid, trial_key).filter(|v| !v.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_command_and_trial_come_from_the_procfs_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("proc/42");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join("status"),
            "Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\n",
        )
        .unwrap();
        std::fs::write(p.join("cmdline"), b"python3\0pretrain.py\0--lr\0").unwrap();
        std::fs::write(p.join("comm"), "python3\n").unwrap();
        std::fs::write(p.join("environ"), b"A=1\0PRIMUS_TUNE_TRIAL_ID=7\0").unwrap();
        let passwd = dir.path().join("passwd");
        std::fs::write(
            &passwd,
            "root:x:0:0::/root:/bin/sh\nann:x:1000:1000::/home/ann:/bin/sh\n",
        )
        .unwrap();
        let users = Users::load(&passwd);
        let got = info(&dir.path().join("proc"), 42, &users, "PRIMUS_TUNE_TRIAL_ID");
        assert_eq!(
            got,
            ProcInfo {
                user: "ann".into(),
                command: "python3 pretrain.py --lr".into(),
                trial: Some("7".into()),
            }
        );
        // Only the name left (kernel threads, unreadable cmdline), an unknown uid, no trial.
        std::fs::write(p.join("cmdline"), b"").unwrap();
        std::fs::write(p.join("environ"), b"A=1\0").unwrap();
        let got = info(
            &dir.path().join("proc"),
            42,
            &Users::default(),
            "PRIMUS_TUNE_TRIAL_ID",
        );
        assert_eq!(
            (got.user.as_str(), got.command.as_str()),
            ("1000", "python3")
        );
        assert_eq!(got.trial, None);
        // A pid that is gone: all empty.
        let gone = info(&dir.path().join("proc"), 9, &users, "PRIMUS_TUNE_TRIAL_ID");
        assert_eq!(gone, ProcInfo::default());
    }
}
