//! Paths as a user reads them.

use std::path::Path;

/// A path as the user would like to read it: relative to the current folder when below it.
/// The folder is read once: nothing in the process changes it (no `set_current_dir`), and a
/// lint of 75,000 findings asked the kernel for it 225,000 times.
pub fn display_path(p: &Path) -> String {
    static CWD: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let cwd = CWD.get_or_init(|| std::env::current_dir().unwrap_or_default());
    p.strip_prefix(cwd).unwrap_or(p).display().to_string()
}

/// The project's folder under an XDG base directory: `$VAR/primus-tune`, else
/// `~/<home_rel>/primus-tune` (an empty variable counts as unset, as the XDG spec says); None
/// without either.
pub fn xdg_dir(var: &str, home_rel: &str) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    std::env::var_os(var)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(home_rel)))
        .map(|b| b.join("primus-tune"))
}

/// Why `path` cannot be opened as an input, in words: a symbolic link loop (ELOOP) or a link
/// to nothing is named as such — "no such file" would send the user looking for a file that
/// is there. `missing` is the words for a path that does not exist at all.
pub fn unopenable_why(path: &Path, missing: &str) -> String {
    match std::fs::metadata(path) {
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            "a symbolic link loop (ELOOP): following its links comes back to itself".into()
        }
        Err(_) if std::fs::symlink_metadata(path).is_ok() => match std::fs::read_link(path) {
            Ok(to) => format!("a symbolic link to {}, which does not exist", to.display()),
            Err(_) => missing.into(),
        },
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => missing.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_loop_and_a_dangling_link_are_named_as_such() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.yaml"), d.path().join("b.yaml"));
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert!(unopenable_why(&a, "no such file").contains("symbolic link loop (ELOOP)"));
        let dangling = d.path().join("c.yaml");
        std::os::unix::fs::symlink(d.path().join("gone.yaml"), &dangling).unwrap();
        assert!(unopenable_why(&dangling, "x").contains("gone.yaml, which does not exist"));
        assert_eq!(
            unopenable_why(&d.path().join("none"), "no such file"),
            "no such file"
        );
    }
}
