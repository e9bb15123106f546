//! What the job runs on, for the advice: Primus or upstream Megatron-LM, an AMD or an NVIDIA
//! GPU. Primus-Turbo, sync-free MoE, DeepEP and the HipBLASLt tuning hook are Primus on AMD
//! (ROCm); for anything else that advice does not apply and is said so instead of given.

use super::Recommendation;
use crate::domain::advice;
pub use crate::domain::advice::{Framework, Target};
use serde::Serialize;

/// A rule the advice leaves out for this job, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotApplicable {
    pub rule: String,
    /// The flags it would have set.
    pub flags: Vec<String>,
    pub why: String,
}

/// Splits off the Primus-on-AMD recommendations the target has no use for, one entry per rule.
pub fn split(
    recs: Vec<Recommendation>,
    target: &Target,
) -> (Vec<Recommendation>, Vec<NotApplicable>) {
    let Some(why) = target.excludes_primus_amd() else {
        return (recs, Vec::new());
    };
    let mut kept = Vec::new();
    let mut out: Vec<NotApplicable> = Vec::new();
    for r in recs {
        if !advice::is_primus_amd(&r.rule) {
            kept.push(r);
            continue;
        }
        match out.iter_mut().find(|n| n.rule == r.rule) {
            Some(n) => n.flags.push(r.flag),
            None => out.push(NotApplicable {
                rule: r.rule,
                flags: vec![r.flag],
                why: why.to_string(),
            }),
        }
    }
    (kept, out)
}
