//! Real mounts for the tests of hostile file systems (read-only, full): made with `mount`,
//! always undone by a guard's Drop, even when the test fails. Where this process may not
//! mount (not root, no CAP_SYS_ADMIN, a container without it), the constructor says why and
//! the test prints that it is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mount, unmounted when dropped.
pub struct Mount {
    target: PathBuf,
}

fn run(args: &[&str], what: &str) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{what}: cannot run `{}`: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: `{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Mount {
    /// `src` seen read-only at `target` (a bind mount remounted `ro`: under root, file
    /// permission bits would not stop a write).
    pub fn read_only_bind(src: &Path, target: &Path) -> Result<Mount, String> {
        std::fs::create_dir_all(target).map_err(|e| e.to_string())?;
        let (s, t) = (src.to_str().unwrap_or(""), target.to_str().unwrap_or(""));
        run(&["mount", "--bind", s, t], "bind mount")?;
        let m = Mount {
            target: target.to_path_buf(),
        };
        run(&["mount", "-o", "remount,ro,bind", t], "read-only remount")?;
        match std::fs::write(target.join(".probe"), "x") {
            Err(e) if e.raw_os_error() == Some(libc::EROFS) => Ok(m),
            other => Err(format!(
                "the read-only mount still takes writes ({other:?})"
            )),
        }
    }

    /// A tmpfs of `size` (`2m`) at `target`.
    pub fn tmpfs(target: &Path, size: &str) -> Result<Mount, String> {
        std::fs::create_dir_all(target).map_err(|e| e.to_string())?;
        let opt = format!("size={size}");
        run(
            &[
                "mount",
                "-t",
                "tmpfs",
                "-o",
                &opt,
                "tmpfs",
                target.to_str().unwrap_or(""),
            ],
            "tmpfs mount",
        )?;
        Ok(Mount {
            target: target.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.target
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let t = self.target.to_str().unwrap_or("");
        // A process of the test still inside keeps it busy: detach it then (lazy unmount).
        if run(&["umount", t], "unmount").is_err() {
            let _ = run(&["umount", "-l", t], "lazy unmount");
        }
    }
}
