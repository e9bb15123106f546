//! Acknowledging a rule: the user decides not to follow one (an advice rule or a lint code: one
//! id space) for this experiment and says why. It is written where CI and the team see it, as
//! ruff's per-file ignores are: `primus-tune.toml` in the user's tree (the nearest one up from
//! the experiment, else a new one beside it), edited in place under a lock. The checklist then
//! shows it as acknowledged, `recommend` holds back what it governs, and `lint` no longer
//! reports the code. Acknowledgements earlier versions stored in the workspace still count.

use super::{AppError, Session};
use crate::config::diag::{Diagnostic, Severity};
use crate::config::lint::codes;
use crate::config::suppress::edit::{self, EditError};
use crate::config::suppress::{Decisions, Suppressed};
use crate::domain::advice::Ack;
use std::path::PathBuf;

/// The key the workspace stored acknowledgements under: the experiment's canonical path.
fn key(session: &Session) -> PathBuf {
    session
        .experiment
        .canonicalize()
        .unwrap_or_else(|_| session.experiment.clone())
}

/// The decisions in the user's tree for the session's experiment; a `primus-tune.toml` that
/// cannot be read is an error naming its `file:line:column` (what it says cannot be honoured).
pub fn decisions(session: &Session) -> Result<Decisions, AppError> {
    let d = Decisions::load(&session.experiment);
    if let Some(bad) = d.problems.iter().find(|p| p.severity == Severity::Error) {
        let at = bad.location.as_ref().map_or(String::new(), |l| {
            format!("{}: ", crate::config::suppress::place(l))
        });
        return Err(AppError::Failed(format!("{at}{}", bad.message)));
    }
    Ok(d)
}

/// The experiment's acknowledgements: the tree's (`primus-tune.toml`, comments), then those the
/// workspace holds from earlier versions (none when nothing was stored).
pub fn acks_in(
    session: &Session,
    store: Option<&crate::store::Store>,
) -> Result<Vec<Ack>, AppError> {
    let mut acks = decisions(session)?.acks();
    for a in store
        .and_then(|s| s.acknowledgements(&key(session)).ok())
        .unwrap_or_default()
    {
        if !acks.iter().any(|x| x.rule == a.rule) {
            acks.push(a);
        }
    }
    Ok(acks)
}

/// Lint's findings split into those in force and those the user's decisions suppress.
pub fn split(
    session: &Session,
    diags: Vec<Diagnostic>,
) -> Result<(Vec<Diagnostic>, Vec<Suppressed>), AppError> {
    Ok(decisions(session)?.split(diags))
}

fn edit_error(e: EditError) -> AppError {
    match e {
        EditError::Io { path, source } => AppError::CantCreate {
            why: format!("cannot write {}: {source}", path.display()),
            path,
        },
        EditError::Refused(why) => AppError::Failed(why),
    }
}

/// Acknowledges `rule` with `reason` for the experiment (replacing an earlier reason), in its
/// `primus-tune.toml`.
pub fn acknowledge(session: &Session, rule: &str, reason: &str) -> Result<Ack, AppError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(AppError::Usage(format!(
            "acknowledging `{rule}` needs a reason (--reason \"...\"): it is what a later reader of the checklist sees"
        )));
    }
    if !codes::is_known(rule) {
        return Err(AppError::Usage(codes::unknown(rule)));
    }
    let (toml, pattern) = edit::place_for(&session.experiment)?;
    let at = edit::record(&toml, &pattern, rule, reason).map_err(edit_error)?;
    Ok(Ack {
        rule: rule.to_string(),
        reason: reason.to_string(),
        at: None,
        from: crate::config::suppress::place(&at),
    })
}

/// What withdrawing an acknowledgement did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Withdrawn {
    pub rule: String,
    /// Something was withdrawn (from `primus-tune.toml` or the workspace).
    pub withdrawn: bool,
    /// Decisions that still acknowledge it and this edit does not touch (`[ignore]`, a glob, a
    /// comment): edit them by hand.
    pub still: Vec<Ack>,
}

/// Withdraws the acknowledgement of `rule` for the experiment: its entry in `primus-tune.toml`
/// and the workspace's record of an earlier version.
pub fn withdraw(session: &Session, rule: &str) -> Result<Withdrawn, AppError> {
    let (toml, pattern) = edit::place_for(&session.experiment)?;
    let mut withdrawn = edit::withdraw(&toml, &pattern, rule).map_err(edit_error)?;
    if let Some(s) = session.existing_store()? {
        withdrawn |= s.withdraw_ack(&key(session), rule)?;
    }
    let still = decisions(session)?
        .acks()
        .into_iter()
        .filter(|a| a.rule == rule)
        .collect();
    Ok(Withdrawn {
        rule: rule.to_string(),
        withdrawn,
        still,
    })
}
