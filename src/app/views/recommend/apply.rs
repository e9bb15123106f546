//! What applying the advice writes: with a study, its pick (and the companions lint brings with
//! it) and nothing else — the rules are a separate request, `recommend --apply` without one;
//! without a study, the rules. A study whose pick cannot be written says why.

use super::RecommendView;
use crate::tune::recommend::bundle::as_yaml;
use crate::tune::recommend::{Recommendation, STUDY};

/// Why applying a study writes nothing: no pick, its profile models none of its flags, or
/// every value of it is withheld (each with its reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NothingToApply(pub String);

impl RecommendView {
    /// The recommendations applying writes (config values and launch variables): the study's
    /// pick when the view is of a study, else the rules.
    pub fn to_apply(&self) -> Result<Vec<&Recommendation>, NothingToApply> {
        let Some((name, record)) = &self.evidence else {
            return Ok(self.recs.iter().collect());
        };
        let pick: Vec<&Recommendation> = self.recs.iter().filter(|r| r.rule == STUDY).collect();
        if !pick.is_empty() {
            return Ok(pick);
        }
        let withheld: Vec<String> = self
            .withheld
            .iter()
            .filter(|w| w.rec.rule == STUDY)
            .map(|w| format!("{}: {}", w.rec.flag, w.why))
            .collect();
        let why = if record.pick().is_none() {
            format!("study `{name}` has no pick")
        } else if !withheld.is_empty() {
            format!(
                "the pick of study `{name}` is withheld: {}",
                withheld.join("; ")
            )
        } else {
            let flags: Vec<&str> = self.ignored.iter().map(|(f, _)| f.as_str()).collect();
            format!(
                "the pick of study `{name}` sets only flags its profile {} does not model ({}): \
                 its verdicts are noise",
                record.profile,
                flags.join(", ")
            )
        };
        Err(NothingToApply(why))
    }
}

/// A study's pick as the edits applying it makes, and the flags it leaves out because its
/// profile does not model them: `recommend --study NAME --apply` as the TUI's `a` on a study
/// applies it (as unsaved edits), with the same filters — lint's companions, what an
/// acknowledgement holds back, what lint refuses.
#[derive(Debug, Clone, PartialEq)]
pub struct PickEdits {
    /// (flag, YAML text) as the editor takes them.
    pub edits: Vec<(String, String)>,
    pub unmodeled: Vec<String>,
}

pub fn pick_edits(
    session: &crate::app::Session,
    study: &str,
) -> Result<PickEdits, crate::app::AppError> {
    let req = super::RecommendRequest {
        study: Some(study.to_string()),
        ..super::RecommendRequest::default()
    };
    let view = super::recommend(session, &req)?;
    let recs = view
        .to_apply()
        .map_err(|e| crate::app::AppError::Failed(e.0))?;
    Ok(PickEdits {
        edits: recs
            .iter()
            .filter(|r| !r.env)
            .map(|r| (r.flag.clone(), as_yaml(&r.value)))
            .collect(),
        unmodeled: view.ignored.iter().map(|(f, _)| f.clone()).collect(),
    })
}
