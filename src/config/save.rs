//! Replacing an experiment file safely: the same for the CLI's `set --write`, `recommend
//! --apply` and the TUI's save. A save takes an advisory lock on the file's folder (`flock` on
//! the directory itself: no lock file is left beside the user's files), checks under it that
//! the file is still what the edit started from, and renames a fully written temp file over it,
//! so two concurrent saves never lose an update: the second sees the first's change and fails
//! with "changed on disk". A symlinked experiment is edited through the link: the file it points
//! to is replaced in its own folder and the link stays. Temp files a killed save left behind are
//! removed by the next save in that folder.
//!
//! # An editor that takes no lock
//!
//! An editor saving the same file meanwhile does not take our lock, so the check and the rename
//! are not atomic against it: a plain rename between them would drop the editor's save while we
//! report "saved". [`replace_checked`] closes that window as far as the kernel allows. It keeps
//! the file's identity as the save read it ([`Seen`]: device, inode, size, modification time
//! in ns), compares it again just before the rename, and renames with `RENAME_EXCHANGE`, which
//! swaps the two names atomically: the file we replaced is not unlinked but lands at the temp
//! file's name, where it is checked — same inode and byte for byte the text the edit started
//! from. If anything else was displaced (an editor renamed its save over the file after our
//! last look), it is swapped back and the save refused, so the editor's file survives intact.
//! After the rename the file is verified to be ours.
//!
//! What remains impossible without the editor's cooperation: an editor that rewrites the file
//! in place (truncate + write, no rename) through a descriptor it opened before our exchange
//! writes into the inode we displaced; bytes it writes after we checked that inode are lost
//! with it (we removed it), and the editor cannot know. Likewise an editor's save that lands
//! after ours simply replaces ours (last writer wins, as between two editors). File systems
//! without `RENAME_EXCHANGE` get the check before a plain rename, which leaves the window of
//! one system call.

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
    let tmp = written_temp(path, content, perms)?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_folder(path);
    Ok(())
}

/// A synced temp file beside `path` holding `content`, with `perms`.
fn written_temp(
    path: &Path,
    content: &[u8],
    perms: Option<std::fs::Permissions>,
) -> std::io::Result<tempfile::NamedTempFile> {
    let mut tmp = tempfile::Builder::new()
        .prefix(TMP_PREFIX)
        .suffix(TMP_SUFFIX)
        .tempfile_in(folder_of(path))?;
    tmp.write_all(content)?;
    tmp.as_file().sync_all()?;
    if let Some(p) = perms {
        tmp.as_file().set_permissions(p)?;
    }
    Ok(tmp)
}

fn sync_folder(path: &Path) {
    if let Ok(d) = File::open(folder_of(path)) {
        let _ = d.sync_all();
    }
}

/// A file as a save saw it: which file (device, inode) and its size and modification time in
/// nanoseconds. Another program's save changes at least one of them (a rename-over gives a new
/// inode; an in-place write a new size or time, unless it lands in the same clock tick with the
/// same size — which is why the displaced text is compared too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl Seen {
    fn of(m: &std::fs::Metadata) -> Seen {
        use std::os::unix::fs::MetadataExt;
        Seen {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }

    fn at(path: &Path) -> std::io::Result<Seen> {
        Ok(Seen::of(&std::fs::symlink_metadata(path)?))
    }
}

/// Read `path` as text, with what it was when read (identity and times from the same open
/// file, so they belong to the text).
pub fn read_seen(path: &Path) -> std::io::Result<(String, Seen)> {
    use std::io::Read;
    let mut f = File::open(path)?;
    let seen = Seen::of(&f.metadata()?);
    let mut text = String::new();
    f.read_to_string(&mut text)?;
    Ok((text, seen))
}

/// Why [`replace_checked`] did not replace the file.
#[derive(Debug)]
pub enum Refused {
    /// Another program changed the file after it was read: nothing of this save is in it, and
    /// the other program's version is.
    Changed,
    Io(std::io::Error),
}

impl From<std::io::Error> for Refused {
    fn from(e: std::io::Error) -> Self {
        Refused::Io(e)
    }
}

/// [`replace`], unless `path` is no longer what was read (`seen`, holding `original`): checked
/// just before the rename, and again on the file the rename displaced (see the module's notes).
pub fn replace_checked(
    path: &Path,
    content: &[u8],
    perms: Option<std::fs::Permissions>,
    _lock: &DirLock,
    (seen, original): (Seen, &[u8]),
) -> Result<(), Refused> {
    let tmp = written_temp(path, content, perms)?;
    let ours = Seen::of(&tmp.as_file().metadata()?);
    if Seen::at(path)? != seen {
        return Err(Refused::Changed);
    }
    let tmp = tmp.into_temp_path();
    match exchange(&tmp, path) {
        Ok(()) => {
            // `tmp` now names the file we replaced: what the save read, or someone's newer save.
            if !holds(&tmp, seen, original) {
                restore(&tmp, path, ours)?;
                return Err(Refused::Changed);
            }
            // Dropping `tmp` removes the displaced original.
        }
        Err(e) if exchange_unsupported(&e) => tmp.persist(path).map_err(|e| e.error)?,
        Err(e) => return Err(e.into()),
    }
    sync_folder(path);
    // Ours must be what the name holds now; a save that landed right after ours replaced it.
    if !Seen::at(path).is_ok_and(|s| (s.dev, s.ino) == (ours.dev, ours.ino)) {
        return Err(Refused::Changed);
    }
    Ok(())
}

/// Whether the file at `p` is still the one read (`seen`) and holds `original` byte for byte.
fn holds(p: &Path, seen: Seen, original: &[u8]) -> bool {
    Seen::at(p).is_ok_and(|s| s == seen) && std::fs::read(p).is_ok_and(|t| t == original)
}

/// Undo an exchange that displaced another program's file: swap it back. If yet another save
/// replaced ours at `path` meanwhile, what came back is not ours but that program's earlier
/// version, and its newer one is now at `path`... unless we swapped it out: then it is renamed
/// back over `path` (the newest save of the other program wins, ours is gone).
fn restore(displaced: &Path, path: &Path, ours: Seen) -> std::io::Result<()> {
    exchange(displaced, path)?;
    let back = Seen::at(displaced)?;
    if (back.dev, back.ino) != (ours.dev, ours.ino) {
        std::fs::rename(displaced, path)?;
    }
    Ok(())
}

/// Atomically swap the names `a` and `b` (`renameat2(RENAME_EXCHANGE)`).
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    renameat2(AT_FDCWD, a, AT_FDCWD, b, RenameFlags::RENAME_EXCHANGE)
        .map_err(|e| std::io::Error::from_raw_os_error(e as i32))
}

/// The file system or kernel cannot exchange names (then a plain rename is the best there is).
fn exchange_unsupported(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
    )
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
