//! The versions a save replaced, kept out of the user's tree: one folder per edited file
//! (`<root>/<file name>-<hash of its path>/`, `root` being the workspace's `backups/`), holding
//! the file's path (`source`), its pristine original (`original`, written by the first save and
//! never again) and the last [`KEEP`] versions it replaced (`<unix ms>`), each written whole and
//! renamed into place. A Primus checkout under git shows nothing new after a save.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Versions kept per file besides its original.
pub const KEEP: usize = 20;

const SOURCE: &str = "source";
const ORIGINAL: &str = "original";

/// The folder of `file`'s versions under `root`.
pub fn folder(root: &Path, file: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let text = abs.display().to_string();
    // FNV-1a: stable across builds, and enough to tell two files of one name apart.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let name = abs
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    root.join(format!("{name}-{h:016x}"))
}

/// `content` written whole to a temp file in `dir`, renamed to `name`.
fn write_whole(dir: &Path, name: &str, content: &[u8]) -> std::io::Result<PathBuf> {
    let mut tmp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    tmp.write_all(content)?;
    tmp.as_file().sync_all()?;
    let path = dir.join(name);
    tmp.persist(&path).map_err(|e| e.error)?;
    Ok(path)
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Keeps `previous`, the content a save of `file` replaces, in `dir` (call with the file's
/// folder locked, before replacing it): the original once, then a version named by the time;
/// the oldest versions beyond [`KEEP`] are removed. Returns the version's path.
pub fn keep(dir: &Path, file: &Path, previous: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    if !dir.join(SOURCE).exists() {
        let abs = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        write_whole(dir, SOURCE, abs.display().to_string().as_bytes())?;
    }
    if !dir.join(ORIGINAL).exists() {
        write_whole(dir, ORIGINAL, previous)?;
    }
    // A name no earlier version has (two saves in one millisecond).
    let mut ms = now_ms();
    while dir.join(ms.to_string()).exists() {
        ms += 1;
    }
    let kept = write_whole(dir, &ms.to_string(), previous)?;
    for old in list(dir).into_iter().skip(KEEP) {
        if let Version::Saved { path, .. } = old {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(kept)
}

/// One kept version of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// A version a save replaced, at `saved_ms` (Unix ms).
    Saved { path: PathBuf, saved_ms: u64 },
    /// The file as it was before its first save.
    Original { path: PathBuf },
}

impl Version {
    pub fn path(&self) -> &Path {
        match self {
            Version::Saved { path, .. } | Version::Original { path } => path,
        }
    }
}

/// The versions kept in `dir`, newest first (the original, when kept, last).
pub fn list(dir: &Path) -> Vec<Version> {
    let mut saved: Vec<Version> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let ms = e.file_name().to_str()?.parse::<u64>().ok()?;
            Some(Version::Saved {
                path: e.path(),
                saved_ms: ms,
            })
        })
        .collect();
    saved.sort_by_key(|v| match v {
        Version::Saved { saved_ms, .. } => std::cmp::Reverse(*saved_ms),
        Version::Original { .. } => std::cmp::Reverse(0),
    });
    let original = dir.join(ORIGINAL);
    if original.is_file() {
        saved.push(Version::Original { path: original });
    }
    saved
}

/// The file a folder keeps versions of, as recorded by its first backup.
#[cfg(any(test, feature = "testkit"))]
pub fn source_of(dir: &Path) -> Option<PathBuf> {
    // Only a regular file: the workspace may be shared, and a FIFO there would block.
    crate::util::input::read_text(&dir.join(SOURCE), 1 << 20)
        .ok()
        .map(|s| PathBuf::from(s.trim_end()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_kept_out_of_the_file_s_folder_newest_first_the_original_once() {
        let tree = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let file = tree.path().join("exp.yaml");
        std::fs::write(&file, "v0").unwrap();
        let dir = folder(ws.path(), &file);
        assert!(dir.starts_with(ws.path()));
        for i in 0..(KEEP + 3) {
            keep(&dir, &file, format!("v{i}").as_bytes()).unwrap();
        }
        let versions = list(&dir);
        assert_eq!(versions.len(), KEEP + 1, "{versions:?}");
        let read = |v: &Version| std::fs::read_to_string(v.path()).unwrap();
        assert_eq!(
            read(&versions[0]),
            format!("v{}", KEEP + 2),
            "the newest first"
        );
        assert!(matches!(versions.last(), Some(Version::Original { .. })));
        assert_eq!(read(versions.last().unwrap()), "v0", "the original, once");
        assert_eq!(source_of(&dir), Some(std::fs::canonicalize(&file).unwrap()));
        // Nothing beside the file.
        let beside: Vec<_> = std::fs::read_dir(tree.path()).unwrap().flatten().collect();
        assert_eq!(beside.len(), 1);
        // Another file of the same name elsewhere has its own folder.
        let other = tempfile::tempdir().unwrap();
        let twin = other.path().join("exp.yaml");
        std::fs::write(&twin, "x").unwrap();
        assert_ne!(folder(ws.path(), &twin), dir);
    }
}
