//! Replacing an experiment file safely: the same for the CLI's `set --write`, `recommend
//! --apply` and the TUI's save. A save takes an advisory lock on the file's folder (`flock` on
//! the directory itself: no lock file is left beside the user's files), checks under it that
//! the file is still what the edit started from, and renames a fully written temp file over it,
//! so two concurrent saves never lose an update: the second sees the first's change and fails
//! with "changed on disk". A symlinked experiment is edited through the link: the file it points
//! to is replaced in its own folder and the link stays. Temp files a killed save left behind are
//! removed by the next save in that folder.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The prefix and suffix of a save's temp file.
const TMP_PREFIX: &str = ".primus-tune-";
const TMP_SUFFIX: &str = ".tmp";

/// How long a save waits for another save in the same folder.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// An exclusive advisory lock on a folder, released when dropped.
pub struct DirLock {
    _dir: File,
}

/// Lock `dir` for a save, waiting up to `LOCK_WAIT` (30 s) for another save to finish.
pub fn lock_dir(dir: &Path) -> std::io::Result<DirLock> {
    let f = File::open(dir)?;
    let start = Instant::now();
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(DirLock { _dir: f }),
            Err(std::fs::TryLockError::WouldBlock) if start.elapsed() < LOCK_WAIT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(std::io::Error::other(format!(
                    "another save in {} has held its lock for {} s",
                    dir.display(),
                    LOCK_WAIT.as_secs()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// The file a save replaces: `path` with every symbolic link resolved (a loop is an error).
pub fn target_of(path: &Path) -> std::io::Result<PathBuf> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        std::fs::canonicalize(path)
    } else {
        Ok(path.to_path_buf())
    }
}

/// The folder a file is replaced in.
pub fn folder_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Remove the temp files saves in `dir` left behind when they were killed (call with the lock
/// held: no save of this tool is writing one then). Returns how many.
pub fn clean_stale(dir: &Path, _lock: &DirLock) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with(TMP_PREFIX)
                && name.ends_with(TMP_SUFFIX)
                && e.file_type().is_ok_and(|t| t.is_file())
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

/// Replace `path` with `content`: a temp file in the same folder, written and synced, given
/// `perms`, renamed over `path`, and the folder synced. The temp file is removed on every error.
pub fn replace(
    path: &Path,
    content: &[u8],
    perms: Option<std::fs::Permissions>,
    _lock: &DirLock,
) -> std::io::Result<()> {
    let dir = folder_of(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(TMP_PREFIX)
        .suffix(TMP_SUFFIX)
        .tempfile_in(dir)?;
    tmp.write_all(content)?;
    tmp.as_file().sync_all()?;
    if let Some(p) = perms {
        tmp.as_file().set_permissions(p)?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_excludes_a_second_holder_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let a = lock_dir(dir.path()).unwrap();
        let f = File::open(dir.path()).unwrap();
        assert!(matches!(
            f.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(a);
        assert!(f.try_lock().is_ok());
    }

    #[test]
    fn stale_temp_files_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".primus-tune-abc.tmp"), "x").unwrap();
        std::fs::write(dir.path().join("exp.yaml"), "a: 1\n").unwrap();
        std::fs::write(dir.path().join("other.tmp"), "keep").unwrap();
        let lock = lock_dir(dir.path()).unwrap();
        assert_eq!(clean_stale(dir.path(), &lock), 1);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["exp.yaml", "other.tmp"]);
    }

    #[test]
    fn a_symlink_is_resolved_and_a_loop_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.yaml");
        std::fs::write(&real, "a: 1\n").unwrap();
        let link = dir.path().join("link.yaml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(
            target_of(&link).unwrap(),
            std::fs::canonicalize(&real).unwrap()
        );
        assert_eq!(target_of(&real).unwrap(), real);
        let (x, y) = (dir.path().join("x"), dir.path().join("y"));
        std::os::unix::fs::symlink(&y, &x).unwrap();
        std::os::unix::fs::symlink(&x, &y).unwrap();
        let e = target_of(&x).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
    }
}
