//! What each launch of a search was for and what it cost: the replay's breakdown of where the
//! GPU-seconds went.

use serde::Serialize;

/// Why a launch was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The first rung while the additive model is not determined: a candidate that adds to
    /// what the model can tell apart (lowest memory first). With `parallel` > 1, a batch chosen
    /// while the design was still open.
    Design,
    /// The first rung once the model is determined: the most promising candidate by its
    /// prediction, not ruled out by it.
    Promising,
    /// After the first rung: halving rungs, long launches of candidates first measured on a
    /// short trial, the tie-break, confirmation in a fresh process.
    FollowUp,
}

/// One launch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchRecord {
    /// The candidate's id.
    pub candidate: usize,
    pub phase: Phase,
    pub gpu_seconds: f64,
    /// It ran out of memory.
    pub oom: bool,
}
