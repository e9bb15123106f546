//! The types the tuner's parts share.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One candidate: flag (or env var) → value, as overrides on top of the experiment.
pub type Overrides = BTreeMap<String, serde_json::Value>;

/// How a knob's value moves peak memory, in the order its values are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryTrend {
    /// Later values use more memory (micro batch size, sync-free stage).
    Increasing,
    /// Later values use less memory (more recomputed layers).
    Decreasing,
    /// No known order.
    None,
}

/// A knob of a space: its candidate values in cost order (cheapest first: when two values tie
/// within the noise, the earlier one wins) and how they move memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knob {
    pub flag: String,
    pub values: Vec<serde_json::Value>,
    #[serde(default = "no_trend")]
    pub memory: MemoryTrend,
}

fn no_trend() -> MemoryTrend {
    MemoryTrend::None
}

/// A candidate of a space: its overrides and, per knob, the index of its value (cost rank).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    pub id: usize,
    pub overrides: Overrides,
    /// Per knob (in the space's order), the index of the chosen value.
    pub ranks: Vec<usize>,
}

/// What one trial of a candidate measured.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Outcome {
    /// Steady-state step times, ms (after warm-up), in order.
    pub step_ms: Vec<f64>,
    pub oom: bool,
    /// Failed for another reason (crash, hang, illegal at start-up).
    pub failed: Option<String>,
    pub peak_memory_bytes: Option<u64>,
    /// GPU-seconds the trial cost (wall time × GPUs).
    pub gpu_seconds: f64,
}
