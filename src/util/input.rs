//! Reading an input file the user names (an experiment, a file it `extends`): only a regular
//! file is read — a directory, a FIFO (which would block), a device (`/dev/zero` would grow
//! memory without end) or a socket is refused at once, saying what it is — its size is capped,
//! and text that is not UTF-8 is reported at the line and column of the first bad byte.

use std::path::Path;

/// The default cap on an input's size, in MiB ([`CAP_ENV`] changes it).
pub const DEFAULT_CAP_MIB: u64 = 16;

/// The environment variable that sets the cap, in MiB.
pub const CAP_ENV: &str = "PRIMUS_TUNE_MAX_YAML_MIB";

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not a regular file: what it is instead.
    #[error("not a regular file: {0}")]
    NotRegular(&'static str),
    #[error(
        "{size} bytes, over the {cap_mib} MiB cap on input files (--max-yaml-mib N or {CAP_ENV} lifts it)"
    )]
    TooLarge { size: u64, cap_mib: u64 },
    #[error("not UTF-8 text (byte 0x{byte:02x})")]
    NotUtf8 { line: u32, col: u32, byte: u8 },
}

/// As an I/O error, for readers whose errors carry one: the I/O error itself, else the
/// refusal as `InvalidData` with its message ("not a regular file: a FIFO", ...).
impl From<InputError> for std::io::Error {
    fn from(e: InputError) -> Self {
        match e {
            InputError::Io(e) => e,
            other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
        }
    }
}

/// The cap in bytes: [`CAP_ENV`] MiB when set to a number, else [`DEFAULT_CAP_MIB`].
pub fn cap_bytes() -> u64 {
    std::env::var(CAP_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_CAP_MIB)
        .saturating_mul(1 << 20)
}

/// What `path` is when it is not a regular file (following symbolic links), None when it is
/// one. A missing path or a symbolic link loop is the I/O error itself.
pub fn kind_of(path: &Path) -> Result<Option<&'static str>, std::io::Error> {
    use std::os::unix::fs::FileTypeExt;
    let t = std::fs::metadata(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::new(e.kind(), "a symbolic link loop")
            } else {
                e
            }
        })?
        .file_type();
    Ok(if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a file")
    })
}

/// Open `path` for reading when it is a regular file: a FIFO would block the open or the
/// read, a device such as `/dev/zero` would never end, so they are refused before opening. For
/// inputs read as a stream (logs, GEMM dumps), whose size is not capped.
pub fn open_regular(path: &Path) -> Result<std::fs::File, InputError> {
    if let Some(kind) = kind_of(path)? {
        return Err(InputError::NotRegular(kind));
    }
    Ok(std::fs::File::open(path)?)
}

/// Read `path` as UTF-8 text, refusing anything but a regular file of at most `cap` bytes.
pub fn read_text(path: &Path, cap: u64) -> Result<String, InputError> {
    use std::io::Read;
    let f = open_regular(path)?;
    let size = f.metadata()?.len();
    if size > cap {
        return Err(InputError::TooLarge {
            size,
            cap_mib: cap >> 20,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // Read one byte past the cap: a file that grew meanwhile is caught too.
    f.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(InputError::TooLarge {
            size: bytes.len() as u64,
            cap_mib: cap >> 20,
        });
    }
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let before = &bytes[..good];
        let line = before.iter().filter(|b| **b == b'\n').count() as u32 + 1;
        let line_start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let col = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count() as u32
            + 1;
        InputError::NotUtf8 {
            line,
            col,
            byte: bytes[good],
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_text(dir.path(), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let e = read_text(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        // Refused at once, not blocked waiting for a writer.
        let e = read_text(&fifo, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let (x, y) = (dir.path().join("x"), dir.path().join("y"));
        std::os::unix::fs::symlink(&y, &x).unwrap();
        std::os::unix::fs::symlink(&x, &y).unwrap();
        let e = read_text(&x, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("symbolic link loop"), "{e}");
        let missing = read_text(&dir.path().join("none"), 1 << 20).unwrap_err();
        assert!(
            matches!(missing, InputError::Io(ref e) if e.kind() == std::io::ErrorKind::NotFound)
        );
    }

    #[test]
    fn size_cap_and_utf8_position() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.yaml");
        std::fs::write(&p, b"a: 1\nb\xc3\xa9: \xff\n").unwrap();
        match read_text(&p, 1 << 20).unwrap_err() {
            InputError::NotUtf8 { line, col, byte } => assert_eq!((line, col, byte), (2, 5, 0xff)),
            e => panic!("{e}"),
        }
        std::fs::write(&p, "x".repeat(2000)).unwrap();
        let e = read_text(&p, 1000).unwrap_err();
        assert!(matches!(e, InputError::TooLarge { size: 2000, .. }), "{e}");
        assert_eq!(read_text(&p, 2000).unwrap().len(), 2000);
    }
}
