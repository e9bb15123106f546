//! Editing the experiment: the unsaved edits of the interactive editor planned and written with
//! the same checks as `primus-tune set` (types, ranges, cross-flag rules), atomically with a
//! backup, and a typed value checked while the user types it.

use super::{AppError, Session};
use crate::config::catalog::Catalog;
use crate::config::diag::Severity;
use crate::config::doc::SaveOptions;
use crate::config::edit::{self, SetError, SetRequest};

/// One unsaved edit: the flag and the text the user typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEdit {
    pub key: String,
    pub text: String,
}

/// The unsaved edits as the config engine's set requests.
pub(crate) fn requests(pending: &[PendingEdit]) -> Vec<SetRequest> {
    pending
        .iter()
        .map(|p| SetRequest {
            key: p.key.clone(),
            text: p.text.clone(),
        })
        .collect()
}

/// A planning error of the config engine as an application error.
pub(crate) fn set_error(e: SetError) -> AppError {
    match e {
        SetError::Edit(e) => AppError::from(e),
        SetError::Usage(m) => AppError::Usage(m),
        SetError::Config(e) => AppError::Config(e),
    }
}

/// What is wrong with a value being typed, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidValue(pub String);

/// Check one typed value the way `set` types it (catalog type, enum, range); the message names
/// what is wrong. Pure: used while the user types.
pub fn check_value(key: &str, text: &str) -> Result<(), InvalidValue> {
    check(key, text).map_err(InvalidValue)
}

fn check(key: &str, text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("type a value (null for none)".into());
    }
    let catalog = Catalog::builtin();
    let flag = catalog.flag(key);
    let v = edit::interpret(key, text, flag, None).map_err(|d| d.message)?;
    if let Some(f) = flag {
        if !f.values.is_empty() && !v.is_null() {
            let s = v.to_string();
            if !f.values.contains(&s) {
                return Err(format!("`{key}` is one of {}", f.values.join(", ")));
            }
        }
        if let Some(x) = v.as_f64()
            && (f.min.is_some_and(|m| x < m) || f.max.is_some_and(|m| x > m))
        {
            return Err(match (f.min, f.max) {
                (Some(lo), Some(hi)) => format!("`{key}` must be between {lo} and {hi}"),
                (Some(lo), None) => format!("`{key}` must be at least {lo}"),
                (None, Some(hi)) => format!("`{key}` must be at most {hi}"),
                (None, None) => unreachable!("checked above"),
            });
        }
    }
    Ok(())
}

/// Plan and write the edits (atomic write; the replaced version kept in the workspace). Ok:
/// what was saved, in words.
pub fn save(session: &Session, pending: &[PendingEdit]) -> Result<String, AppError> {
    let exp = session.load()?;
    let mut plan = edit::plan(
        &exp,
        &session.load,
        &requests(pending),
        None,
        false,
        Catalog::builtin(),
    )
    .map_err(set_error)?;
    if plan.refused {
        let why: Vec<String> = plan
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        return Err(AppError::Usage(format!("not saved: {}", why.join("; "))));
    }
    plan.doc.save(SaveOptions {
        backups: Some(session.backups_of(&exp.path)),
    })?;
    Ok(format!(
        "saved {} to {}",
        crate::util::text::count(plan.changes.len(), "change", "changes"),
        session.display()
    ))
}
