//! A study as data: the knobs of a space and their candidates, what one trial of a candidate
//! measured, and the record a finished search stores (every candidate's verdict and evidence,
//! the pick).

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
    /// It moves memory, in no order the space knows (a parallel layout: TP, PP, VPP, CP and EP
    /// each shard some terms and add others). An out-of-memory candidate rules out only
    /// candidates with its value of such a knob: the memory model's forecast errs more between
    /// layouts than within one.
    Varies,
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
    /// Per knob (in the space's order), the index of the chosen value; empty for a baseline
    /// whose values lie outside the space.
    pub ranks: Vec<usize>,
    /// The experiment's current settings (candidate 0 of a sweep): always measured, never
    /// pruned on a prediction, and kept on a tie.
    #[serde(default)]
    pub baseline: bool,
}

/// What a finished (or cut short) search concludes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Conclusion {
    /// Candidate `pick` is the recommendation: faster than the current settings beyond the
    /// noise, or the current settings were not measured (no baseline, or it failed).
    Change { pick: usize },
    /// Keep the current settings (candidate `baseline`): they are the fastest, or no candidate
    /// is faster beyond the noise (`fastest` names the fastest measured median).
    KeepCurrent { baseline: usize, fastest: usize },
    /// Cut short (budget, trial limit, stop) before the decision rule was met: no winner.
    Incomplete {
        best_so_far: Option<usize>,
        why: String,
    },
    /// No candidate produced a measurement.
    #[default]
    NothingMeasured,
}

impl Conclusion {
    /// A few words, for titles (`winner #3`, `keep current`, `incomplete: best so far #2`).
    pub fn short(&self) -> String {
        match self {
            Conclusion::Change { pick } => format!("winner #{pick}"),
            Conclusion::KeepCurrent { .. } => "keep current".into(),
            Conclusion::Incomplete {
                best_so_far: Some(b),
                ..
            } => format!("incomplete: best so far #{b}"),
            Conclusion::Incomplete { .. } => "incomplete".into(),
            Conclusion::NothingMeasured => "nothing measured".into(),
        }
    }
}

impl std::fmt::Display for Conclusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Conclusion::Change { pick } => write!(f, "winner: candidate {pick}"),
            Conclusion::KeepCurrent { baseline, fastest } if baseline == fastest => {
                write!(
                    f,
                    "keep current: the current settings (candidate {baseline}) are the fastest"
                )
            }
            Conclusion::KeepCurrent { baseline, fastest } => write!(
                f,
                "no significant winner: keep current (candidate {fastest} is within the noise of the current settings, candidate {baseline})"
            ),
            Conclusion::Incomplete {
                best_so_far: Some(b),
                why,
            } => write!(
                f,
                "incomplete ({why}): best so far candidate {b}, no winner"
            ),
            Conclusion::Incomplete {
                best_so_far: None,
                why,
            } => write!(f, "incomplete ({why}): nothing measured yet"),
            Conclusion::NothingMeasured => write!(f, "no candidate was measured"),
        }
    }
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
    /// What the peak measures.
    #[serde(default)]
    pub peak_memory_kind: Option<crate::domain::trial::MemorySource>,
    /// GPU-seconds the trial cost (wall time × GPUs).
    pub gpu_seconds: f64,
    /// Wall seconds of the trial before its first steady sample: launch to the first iteration
    /// (start-up) plus the warm-up iterations. What every fresh launch pays again; `None` when
    /// the trial did not measure it (it never reached an iteration, or an older record).
    #[serde(default)]
    pub launch_s: Option<f64>,
    /// Median wall time of a steady iteration as the trial ran it, ms: what an iteration
    /// costs. `step_ms` may be scaled to another amount of work (a sweep compares step times per
    /// the current settings' global batch); `None`: `step_ms` are as run.
    #[serde(default)]
    pub wall_step_ms: Option<f64>,
    /// The runner stopped the trial because its steady samples were above the job's race bar
    /// ([`crate::run::steady::Race`]).
    #[serde(default)]
    pub raced: bool,
}

/// A candidate's verdict at the end of a search, as stored and shown (`winner`, `tie`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    /// The pick: fastest, ties broken by cost order.
    Winner,
    /// Within the noise of a cheaper or faster candidate.
    Tie,
    /// Measured, and slower than the winner beyond the noise.
    Slower,
    /// Ran out of GPU memory.
    Oom,
    /// Not run: needs more memory than a candidate that ran out.
    RuledOut,
    /// Not run: the memory model predicts it does not fit.
    PredictedOom,
    /// Not run: the additive model predicts it slower than the leader.
    PredictedSlower,
    /// Breaks a rule of Primus or Megatron for this experiment.
    Illegal,
    /// Crashed, hung or was refused at start-up.
    Failed,
    /// The budget ended, or the search never reached it.
    NotRun,
    /// The fastest of a search cut short before its decision rule was met (not a winner).
    BestSoFar,
}

impl VerdictKind {
    /// The stored name (`ruled-out`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Winner => "winner",
            VerdictKind::Tie => "tie",
            VerdictKind::Slower => "slower",
            VerdictKind::Oom => "oom",
            VerdictKind::RuledOut => "ruled-out",
            VerdictKind::PredictedOom => "predicted-oom",
            VerdictKind::PredictedSlower => "predicted-slower",
            VerdictKind::Illegal => "illegal",
            VerdictKind::Failed => "failed",
            VerdictKind::NotRun => "not-run",
            VerdictKind::BestSoFar => "best-so-far",
        }
    }

    /// The name in a table cell of 13 columns (the TUI's ranking at 80 columns): the stored
    /// name, but `pred-slower` for `predicted-slower`.
    pub fn short(self) -> &'static str {
        match self {
            VerdictKind::PredictedSlower => "pred-slower",
            v => v.as_str(),
        }
    }

    /// Measured on a real run (as opposed to predicted, ruled out or never run).
    pub fn measured(self) -> bool {
        matches!(
            self,
            VerdictKind::Winner | VerdictKind::Tie | VerdictKind::Slower | VerdictKind::BestSoFar
        )
    }
}

impl std::str::FromStr for VerdictKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        serde_json::from_value(serde_json::Value::String(s.to_string()))
            .map_err(|_| format!("unknown verdict `{s}`"))
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// The statistic a study's step times are: what its search ranked candidates by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepStatistic {
    /// The median of the steady steps, with its order-statistic 95 % CI (studies recorded
    /// before the trimmed mean).
    #[default]
    Median,
    /// The 20 % trimmed mean of the steady steps, with Yuen's 95 % CI
    /// ([`crate::util::stats::trimmed_mean_ci95`]).
    TrimmedMean,
}

impl StepStatistic {
    /// In words: `median`, `20 % trimmed mean`.
    pub fn name(self) -> &'static str {
        match self {
            StepStatistic::Median => "median",
            StepStatistic::TrimmedMean => "20 % trimmed mean",
        }
    }

    /// For a narrow column header: `median`, `trim mean`.
    pub fn short(self) -> &'static str {
        match self {
            StepStatistic::Median => "median",
            StepStatistic::TrimmedMean => "trim mean",
        }
    }
}

/// What a study stores (in its notes) once the search has ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StudyRecord {
    pub space: String,
    pub config: String,
    pub profile: String,
    pub gpus: u64,
    pub capacity_bytes: Option<f64>,
    pub candidates: Vec<CandidateRecord>,
    pub pick: Option<usize>,
    pub gpu_seconds: f64,
    pub trials: usize,
    pub log: Vec<String>,
    /// Mean relative error of the calibrated memory model on the measured candidates; None
    /// when not compared (a proxy's peaks are its stand-in's) or nothing to compare.
    pub memory_error: Option<f64>,
    /// What produced its measurements (a GPU and a profile, or a CPU stand-in); absent in
    /// studies recorded before it was stored.
    #[serde(default)]
    pub basis: Option<crate::domain::evidence::Basis>,
    /// Knobs it swept that its profile does not model (`--allow-unmodeled`): their verdicts are
    /// noise, not evidence.
    #[serde(default)]
    pub unmodeled: Vec<String>,
    /// The candidate holding the experiment's current settings (absent in older studies).
    #[serde(default)]
    pub baseline: Option<usize>,
    /// What the search concluded (absent in older studies: their `pick` is the winner).
    #[serde(default)]
    pub conclusion: Option<Conclusion>,
    /// Set when the candidates' global batches differ (TorchTitan's `training.local_batch_size`
    /// with `global_batch_size: -1`): every step time is scaled to this many samples, the
    /// current settings' global batch. Absent: one global batch for all (or an older study).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_samples: Option<u64>,
    /// What its step times are (absent in older studies: the median).
    #[serde(default)]
    pub statistic: StepStatistic,
    /// The space's knobs (absent in older studies): what its candidates' values are, in the
    /// space's order, for the knob effects later sweeps carry from it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub knobs: Vec<Knob>,
    /// What a layout study measured of the links ([`LinkScale`]), for later layout studies on
    /// the same machine (absent: not a layout study, or its layouts could not tell compute
    /// from communication).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_scale: Option<LinkScale>,
}

/// The links as a layout study measured them: the scale its fit put on the layout prior's
/// communication (measured ≈ a · compute + b · communication; this is b, milliseconds measured
/// per second the assumed link speeds predict), on which node. Compute's scale is not kept: it
/// is the model's (its kernels' efficiency), where the links are the machine's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinkScale {
    pub comm_ms_per_s: f64,
    /// GPUs a node held (which groups crossed nodes).
    pub gpus_per_node: u64,
    /// Measured layouts the fit stood on.
    pub points: usize,
}

/// A link scale carried into a layout study from an earlier one of the workspace.
#[derive(Debug, Clone, PartialEq)]
pub struct CarriedLinks {
    pub scale: LinkScale,
    /// The study it was measured in.
    pub from: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateRecord {
    pub id: usize,
    /// The experiment's current settings.
    #[serde(default)]
    pub baseline: bool,
    pub overrides: BTreeMap<String, serde_json::Value>,
    pub verdict: VerdictKind,
    /// Why, in words (slower by X ± Y %, OOM, ruled out by candidate N, ...).
    pub why: String,
    pub n: usize,
    /// The step time, ms, by the study's [`StepStatistic`] (stored as `median_ms` by older
    /// studies, which were medians).
    #[serde(alias = "median_ms")]
    pub step_ms: Option<f64>,
    pub ci_low_ms: Option<f64>,
    pub ci_high_ms: Option<f64>,
    pub peak_memory_bytes: Option<u64>,
    /// What the peak measures (absent in older studies).
    #[serde(default)]
    pub peak_memory_source: Option<crate::domain::trial::MemorySource>,
    /// The memory model's calibrated prediction.
    pub predicted_bytes: Option<f64>,
}

/// The memory model's forecasts against a study's measured peaks: made only where the peaks are
/// the config's own, measured on a GPU (`app::views::studies::memory_check` decides).
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryCheck {
    /// Mean relative error |forecast − peak| / peak over `candidates` measured candidates.
    Compared { mean_error: f64, candidates: usize },
    /// Not made, and why (a proxy's peaks are its stand-in's).
    NotCompared { why: String },
    /// No measured candidate has both a forecast and a peak.
    Nothing,
}

impl MemoryCheck {
    /// The mean relative error, when compared.
    pub fn mean_error(&self) -> Option<f64> {
        match self {
            MemoryCheck::Compared { mean_error, .. } => Some(*mean_error),
            _ => None,
        }
    }
}

impl std::fmt::Display for MemoryCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryCheck::Compared {
                mean_error,
                candidates,
            } => write!(
                f,
                "mean error {:.1} % against the measured peaks ({candidates} candidate{})",
                100.0 * mean_error,
                if *candidates == 1 { "" } else { "s" }
            ),
            MemoryCheck::NotCompared { why } => write!(f, "not compared: {why}"),
            MemoryCheck::Nothing => {
                f.write_str("no candidate with both a prediction and a measured peak")
            }
        }
    }
}

impl StudyRecord {
    /// What its trials' time is counted in: `GPU` (seconds × ranks) or `CPU` (a CPU
    /// stand-in's seconds × processes).
    pub fn cost_unit(&self) -> &'static str {
        self.basis
            .as_ref()
            .map_or("GPU", crate::domain::evidence::Basis::cost_unit)
    }

    /// What produced the measurements, in words (older studies: the profile alone).
    pub fn basis_text(&self) -> String {
        match &self.basis {
            Some(b) => b.to_string(),
            None => format!(
                "measured with {} (recorded before bases were stored)",
                self.profile
            ),
        }
    }

    /// What a step time is per: `per global batch`, or, when the candidates' global batches
    /// differ, `per N sample(s) (the current settings' global batch)`.
    pub fn batch_unit(&self) -> String {
        match self.per_samples {
            None => "per global batch".into(),
            Some(n) => format!(
                "per {} (the current settings' global batch)",
                crate::util::text::count(n as usize, "sample", "samples")
            ),
        }
    }

    /// The step-time unit in a few characters (a narrow table's footer): `ms/batch`, or
    /// `ms/N samples` when the candidates' global batches differ.
    pub fn unit_short(&self) -> String {
        match self.per_samples {
            None => "ms/batch".into(),
            Some(n) => format!("ms/{n} samples"),
        }
    }

    /// What a step time is: the statistic, and per what (the current settings' global batch
    /// when the candidates' global batches differ, each scaled to it).
    pub fn unit_text(&self) -> String {
        let what = format!(
            "step times: the {} of each candidate's steady steps",
            self.statistic.name()
        );
        match self.per_samples {
            None => format!("{what}, ms per global batch"),
            Some(n) => format!(
                "{what}, ms per {}, the current settings' global batch (the candidates' \
                 global batches differ; each is scaled to it)",
                crate::util::text::count(n as usize, "sample", "samples")
            ),
        }
    }

    /// The conclusion in words (an older study: its pick).
    pub fn conclusion_text(&self) -> String {
        match (&self.conclusion, self.pick) {
            (Some(c), _) => c.to_string(),
            (None, Some(p)) => format!("winner: candidate {p}"),
            (None, None) => "no pick".into(),
        }
    }

    /// The conclusion in a few words (an older study: its pick).
    pub fn conclusion_short(&self) -> String {
        match (&self.conclusion, self.pick) {
            (Some(c), _) => c.short(),
            (None, Some(p)) => format!("winner #{p}"),
            (None, None) => "no pick".into(),
        }
    }

    /// Whether the study decided (a winner, or keep current); an incomplete one did not.
    pub fn decided(&self) -> bool {
        self.pick.is_some()
    }

    /// The candidate the study picked, when it picked one.
    pub fn pick(&self) -> Option<&CandidateRecord> {
        self.pick
            .and_then(|p| self.candidates.iter().find(|c| c.id == p))
    }
}

/// [`settings`] for a narrow column: the space's knobs first, in its order (a group knob's keys
/// together), then any other key; a dotted key (TorchTitan's `training.local_batch_size`) by
/// its last part where no other key of `o` ends the same, so that at 80 columns the values
/// that tell candidates apart are not cut off behind a long section name.
pub fn settings_compact(o: &BTreeMap<String, serde_json::Value>, knobs: &[Knob]) -> String {
    // The knobs' keys in the space's order (a group knob's from its values), then the rest.
    let group = |k: &Knob| -> Vec<String> {
        k.values
            .iter()
            .filter_map(serde_json::Value::as_object)
            .flat_map(|m| m.keys().cloned())
            .collect()
    };
    let mut keys: Vec<&str> = Vec::new();
    let ordered = knobs
        .iter()
        .flat_map(|k| std::iter::once(k.flag.clone()).chain(group(k)))
        .collect::<Vec<_>>();
    for k in ordered
        .iter()
        .map(String::as_str)
        .chain(o.keys().map(String::as_str))
    {
        if o.contains_key(k) && !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.iter()
        .map(|k| {
            let label = short_key(k, o.keys().map(String::as_str));
            format!("{label}={}", value_text(&o[*k]))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A setting's value as `settings` writes it: strings bare, null as `null`.
fn value_text(v: &serde_json::Value) -> String {
    if v.is_null() {
        "null".into()
    } else {
        v.to_string().trim_matches('"').to_string()
    }
}

/// A dotted key by its last part (`training.local_batch_size` → `local_batch_size`) when no key
/// of `all` other than itself ends the same; else the key whole.
pub fn short_key<'a>(key: &'a str, all: impl Iterator<Item = &'a str>) -> &'a str {
    let last = |k: &'a str| k.rsplit('.').next().unwrap_or(k);
    if all.filter(|j| *j != key && last(j) == last(key)).count() == 0 {
        last(key)
    } else {
        key
    }
}

/// `k=v k=v` of a candidate, short.
pub fn settings(o: &BTreeMap<String, serde_json::Value>) -> String {
    o.iter()
        .map(|(k, v)| format!("{k}={}", value_text(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Launch figures from stored trials: how long a launch takes to measure, and how much a
/// candidate's median step moves from launch to launch (`app`'s sweep history computes it,
/// its events report it).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct LaunchHistory {
    /// Median seconds before the first steady sample, and over how many trials (JSON:
    /// `{"seconds", "trials"}`).
    #[serde(serialize_with = "as_launch")]
    pub launch_s: Option<(f64, usize)>,
    /// Launch-to-launch variation of the median step time (relative standard deviation, the
    /// within-trial error of each median taken out), and over how many repeated launches
    /// (trials beyond the first of each candidate).
    /// (JSON: `{"cv", "repeats"}`, the CV a fraction as here.)
    #[serde(serialize_with = "as_cv")]
    pub launch_cv: Option<(f64, usize)>,
}

fn as_launch<S: serde::Serializer>(v: &Option<(f64, usize)>, s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    v.map(|(seconds, trials)| serde_json::json!({"seconds": seconds, "trials": trials}))
        .serialize(s)
}

fn as_cv<S: serde::Serializer>(v: &Option<(f64, usize)>, s: S) -> Result<S::Ok, S::Error> {
    use serde::Serialize;
    v.map(|(cv, repeats)| serde_json::json!({"cv": cv, "repeats": repeats}))
        .serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_settings_lead_with_the_spaces_knobs_by_their_short_names() {
        let knobs: Vec<Knob> = serde_json::from_value(serde_json::json!([
            {"flag": "training.local_batch_size", "values": [2, 4]},
            {"flag": "@activation_checkpoint", "values": [
                {"activation_checkpoint.mode": "none"},
                {"activation_checkpoint.mode": "selective",
                 "activation_checkpoint.selective_ac_option": "op"}]}
        ]))
        .unwrap();
        let o: BTreeMap<String, serde_json::Value> = serde_json::from_value(serde_json::json!({
            "activation_checkpoint.mode": "selective",
            "activation_checkpoint.selective_ac_option": "op",
            "training.local_batch_size": 8,
            "model.name": "qwen3", "job.name": "x"
        }))
        .unwrap();
        assert_eq!(
            settings_compact(&o, &knobs),
            "local_batch_size=8 mode=selective selective_ac_option=op job.name=x model.name=qwen3"
        );
        // a last part two keys share keeps both whole
        let both = ["a.mode", "b.mode", "training.steps"];
        assert_eq!(short_key("a.mode", both.into_iter()), "a.mode");
        assert_eq!(short_key("training.steps", both.into_iter()), "steps");
        assert_eq!(
            short_key("micro_batch_size", both.into_iter()),
            "micro_batch_size"
        );
        // no knobs (an older study): sorted, flat keys as they are
        let flat: BTreeMap<String, serde_json::Value> = serde_json::from_value(
            serde_json::json!({"micro_batch_size": 4, "recompute_granularity": null}),
        )
        .unwrap();
        assert_eq!(settings_compact(&flat, &[]), settings(&flat));
    }

    #[test]
    fn verdicts_read_back_and_pad_in_tables() {
        for v in ["winner", "tie", "ruled-out", "predicted-slower", "not-run"] {
            assert_eq!(v.parse::<VerdictKind>().unwrap().as_str(), v);
        }
        assert!("best".parse::<VerdictKind>().is_err());
        // every name fits the TUI ranking's 13 columns, a prediction still says so
        for v in [
            "winner",
            "tie",
            "slower",
            "oom",
            "ruled-out",
            "predicted-oom",
            "predicted-slower",
            "illegal",
            "failed",
            "not-run",
            "best-so-far",
        ] {
            let short = v.parse::<VerdictKind>().unwrap().short();
            assert!(short.chars().count() <= 13, "{short}");
            assert_eq!(v.starts_with("pred"), short.starts_with("pred"), "{v}");
        }
        assert_eq!(VerdictKind::PredictedSlower.short(), "pred-slower");
        assert_eq!(format!("{:<8}|", VerdictKind::Tie), "tie     |");
        assert_eq!(
            format!("{:<11}|", crate::domain::trial::TrialStatus::Failed),
            "failed     |"
        );
    }

    #[test]
    fn a_study_says_what_its_step_times_are_and_per_what() {
        // An older study (no `per_samples`, no `statistic`, step times stored as `median_ms`)
        // reads back as medians per global batch.
        let j = serde_json::json!({
            "space": "s", "config": "x.yaml", "profile": "p", "gpus": 1,
            "capacity_bytes": null, "pick": null, "gpu_seconds": 0.0,
            "trials": 0, "log": [], "memory_error": null,
            "candidates": [{"id": 0, "overrides": {}, "verdict": "winner", "why": "", "n": 12,
                "median_ms": 101.5, "ci_low_ms": 100.0, "ci_high_ms": 103.0,
                "peak_memory_bytes": null, "predicted_bytes": null}]
        });
        let mut r: StudyRecord = serde_json::from_value(j).unwrap();
        assert_eq!(r.statistic, StepStatistic::Median);
        assert_eq!(r.candidates[0].step_ms, Some(101.5));
        assert_eq!(r.batch_unit(), "per global batch");
        assert_eq!(r.unit_short(), "ms/batch");
        assert_eq!(
            r.unit_text(),
            "step times: the median of each candidate's steady steps, ms per global batch"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert!(v.get("per_samples").is_none());
        assert_eq!(v["statistic"], "median");
        assert_eq!(v["candidates"][0]["step_ms"], 101.5);
        r.per_samples = Some(8);
        r.statistic = StepStatistic::TrimmedMean;
        assert_eq!(
            r.batch_unit(),
            "per 8 samples (the current settings' global batch)"
        );
        assert_eq!(r.unit_short(), "ms/8 samples");
        assert!(r.unit_text().starts_with(
            "step times: the 20 % trimmed mean of each candidate's steady steps, ms per 8 \
             samples"
        ));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["per_samples"], 8);
        assert_eq!(v["statistic"], "trimmed-mean");
    }
}
