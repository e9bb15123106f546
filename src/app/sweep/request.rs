//! What a sweep is asked to do, and the defaults both frontends use (a leaf of the sweep: the
//! use case and its study opening read it).

use crate::app::trial::TrialRequest;

/// What to sweep and how. `Default` holds the one set of defaults both frontends use.
#[derive(Debug, Clone)]
pub struct SweepRequest {
    /// A new study of this space (a name or a YAML file), or `resume` one.
    pub space: Option<String>,
    pub name: Option<String>,
    pub resume: Option<String>,
    /// Profile, GPUs, extra environment, `--set` values for every trial, tuned GEMMs. A resumed
    /// study keeps the profile of its trials unless one is named.
    pub trial: TrialRequest,
    /// Iterations of the first, shortest trials and of the longest (None: a resumed study's
    /// own, else [`FIRST_ITERS`], [`MAX_ITERS`]).
    pub first_iters: Option<u64>,
    pub max_iters: Option<u64>,
    pub budget_minutes: Option<f64>,
    pub max_trials: Option<usize>,
    pub capacity_gib: Option<f64>,
    pub headroom: f64,
    /// Sweep knobs the profile does not model (a demo); the study records which.
    pub allow_unmodeled: bool,
    /// Start from the knob effects of the workspace's earlier studies of the profile
    /// ([`knob_effects`](super::effects::knob_effects)); false: learn them from this sweep's trials alone.
    pub carried_effects: bool,
    /// Skip a smaller micro/local batch once a larger one with the same other settings fits,
    /// where the configs run in one pipeline stage ([`crate::tune::search::prior::batch`]); false: measure
    /// every batch.
    pub batch_rule: bool,
    /// Trials run at once: concurrent Slurm jobs (on this node, trials share the GPUs, so 1).
    pub parallel: usize,
}

impl Default for SweepRequest {
    fn default() -> Self {
        SweepRequest {
            space: None,
            name: None,
            resume: None,
            trial: TrialRequest::default(),
            first_iters: None,
            max_iters: None,
            budget_minutes: None,
            max_trials: None,
            capacity_gib: None,
            headroom: 0.1,
            allow_unmodeled: false,
            carried_effects: true,
            batch_rule: true,
            parallel: 1,
        }
    }
}

/// Iterations of a new study's first, shortest trials.
pub const FIRST_ITERS: u64 = 12;
/// Iterations of a new study's longest trials.
pub const MAX_ITERS: u64 = 60;
