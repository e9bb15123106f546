//! Paths as a user reads them.

use std::path::Path;

/// A path as the user would like to read it: relative to the current folder when below it.
pub fn display_path(p: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    p.strip_prefix(&cwd).unwrap_or(p).display().to_string()
}
