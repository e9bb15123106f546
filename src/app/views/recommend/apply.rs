//! What applying the advice writes: with a study, its pick (and the companions lint brings with
//! it) and nothing else — the rules are a separate request, `recommend --apply` without one;
//! without a study, the rules. A study whose pick cannot be written says why.

use super::RecommendView;
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
