//! Acknowledging a rule: the user decides not to follow one for this experiment and says why.
//! Stored in the workspace; the checklist then shows it as acknowledged (not as to do) and
//! `recommend` lists it apart instead of proposing it.

use super::{AppError, Session};
use crate::config::catalog::Catalog;
use crate::domain::advice::{self, Ack};
use std::path::PathBuf;

/// The key acknowledgements are stored under: the experiment's canonical path.
fn key(session: &Session) -> PathBuf {
    session
        .experiment
        .canonicalize()
        .unwrap_or_else(|_| session.experiment.clone())
}

/// The experiment's acknowledgements (none when nothing was stored yet).
pub fn acks(session: &Session) -> Vec<Ack> {
    session
        .existing_store()
        .ok()
        .flatten()
        .map(|s| acks_in(session, &s))
        .unwrap_or_default()
}

/// The experiment's acknowledgements in an open store.
pub fn acks_in(session: &Session, store: &crate::store::Store) -> Vec<Ack> {
    store.acknowledgements(&key(session)).unwrap_or_default()
}

/// The rule ids `--ack` takes for this experiment: the checklist's and `recommend`'s rules,
/// and the codes of lint's findings on it now.
pub fn known_rules(session: &Session) -> Vec<String> {
    let mut ids: Vec<String> = advice::RULES.iter().map(|r| r.id.to_string()).collect();
    if let Ok(exp) = session.load() {
        for d in crate::config::lint::lint(
            &exp,
            &session.load.env,
            session.load.world.as_ref(),
            Catalog::builtin(),
        ) {
            if !ids.iter().any(|i| i == d.code) {
                ids.push(d.code.to_string());
            }
        }
    }
    ids
}

/// Acknowledges `rule` with `reason` (replacing an earlier reason).
pub fn acknowledge(session: &Session, rule: &str, reason: &str) -> Result<Ack, AppError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(AppError::Usage(format!(
            "acknowledging `{rule}` needs a reason (--reason \"...\"): it is what a later reader of the checklist sees"
        )));
    }
    let known = known_rules(session);
    if !known.iter().any(|k| k == rule) {
        return Err(AppError::Usage(format!(
            "unknown rule `{rule}` (the rules: {}){}",
            known.join(", "),
            crate::util::suggest::did_you_mean(rule, &known)
        )));
    }
    Ok(session.store()?.acknowledge(&key(session), rule, reason)?)
}

/// Withdraws the acknowledgement of `rule`; false when there was none.
pub fn withdraw(session: &Session, rule: &str) -> Result<bool, AppError> {
    match session.existing_store()? {
        Some(s) => Ok(s.withdraw_ack(&key(session), rule)?),
        None => Ok(false),
    }
}
