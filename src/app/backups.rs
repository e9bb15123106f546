//! The versions a save replaced, as use cases: list those of the session's experiment, and
//! restore one — through the same safe save as an edit (under the folder's lock, refused when
//! the file changed since it was read, the version it replaces kept in turn).

use super::{AppError, Session};
use crate::config::backups::{self, Version};
use crate::config::doc::{SaveOptions, YamlDoc};
use std::path::PathBuf;

/// One kept version, as the list shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Backup {
    /// `1` the newest, `2` the one before ...; `original` the file before its first save.
    pub id: String,
    /// When the save that replaced it ran (RFC 3339, UTC); None for the original.
    pub saved_at: Option<String>,
    pub path: PathBuf,
    pub bytes: u64,
    /// Lines that differ from the file now (added plus removed).
    pub lines_changed: usize,
}

/// The text of `path` when it is a regular UTF-8 file, else "": a shared workspace may hold
/// anything under a version's name, and a FIFO there would block the listing.
fn regular_text(path: &std::path::Path) -> String {
    crate::util::input::read_text(path, u64::MAX).unwrap_or_default()
}

/// The kept versions of the session's experiment, newest first.
pub fn list(session: &Session) -> Result<Vec<Backup>, AppError> {
    let file = &session.experiment;
    let now = match crate::util::input::kind_of(file) {
        Ok(Some(kind)) => {
            return Err(AppError::Failed(format!(
                "{}: not a regular file: {kind}",
                crate::util::paths::display_path(file)
            )));
        }
        // A file gone since its last save still has its versions listed.
        _ => regular_text(file),
    };
    let versions = backups::list(&session.backups_of(file));
    let mut n = 0;
    Ok(versions
        .into_iter()
        .map(|v| {
            let text = regular_text(v.path());
            let (id, saved_at) = match &v {
                Version::Saved { saved_ms, .. } => {
                    n += 1;
                    (n.to_string(), Some(rfc3339(*saved_ms)))
                }
                Version::Original { .. } => ("original".to_string(), None),
            };
            Backup {
                id,
                saved_at,
                bytes: text.len() as u64,
                lines_changed: changed_lines(&now, &text),
                path: v.path().to_path_buf(),
            }
        })
        .collect())
}

fn rfc3339(ms: u64) -> String {
    crate::store::rfc3339_utc(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))
}

fn changed_lines(a: &str, b: &str) -> usize {
    similar::TextDiff::from_lines(a, b)
        .iter_all_changes()
        .filter(|c| c.tag() != similar::ChangeTag::Equal)
        .count()
}

/// What restoring a version does: the diff from the file now to it, and whether it was
/// written.
#[derive(Debug, Clone, PartialEq)]
pub struct Restore {
    pub id: String,
    pub diff: String,
    pub written: bool,
    /// Where the version it replaced is kept (when written).
    pub kept: Option<PathBuf>,
}

/// Restores version `id` (`1` the newest, ..., `original`) of the session's experiment when
/// `write`, else shows what it would change.
pub fn restore(session: &Session, id: &str, write: bool) -> Result<Restore, AppError> {
    let all = list(session)?;
    let Some(b) = all.iter().find(|b| b.id == id) else {
        let ids: Vec<&str> = all.iter().map(|b| b.id.as_str()).collect();
        return Err(AppError::Usage(if ids.is_empty() {
            format!("{} has no kept version yet", session.display())
        } else {
            format!(
                "no kept version `{id}` of {} (there are: {})",
                session.display(),
                ids.join(", ")
            )
        }));
    };
    let text = crate::util::input::read_text(&b.path, u64::MAX).map_err(|e| {
        AppError::Failed(format!(
            "{}: {e}",
            crate::util::paths::display_path(&b.path)
        ))
    })?;
    let mut doc = YamlDoc::open(&session.experiment)?;
    doc.set_text(text);
    let diff = doc.diff();
    let kept = if write && !diff.is_empty() {
        doc.save(SaveOptions {
            backups: Some(session.backups_of(&session.experiment)),
        })?
    } else {
        None
    };
    Ok(Restore {
        id: id.to_string(),
        written: write && !diff.is_empty(),
        diff,
        kept,
    })
}
