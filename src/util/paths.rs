//! Paths as a user reads them.

use std::path::Path;

/// A path as the user would like to read it: relative to the current folder when below it.
pub fn display_path(p: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    p.strip_prefix(&cwd).unwrap_or(p).display().to_string()
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
