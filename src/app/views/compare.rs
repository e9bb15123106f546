//! Two trials side by side: the flags whose values they ran differ in (both values), and step
//! time, throughput and memory with the change, its 95 % interval and a verdict.

use crate::domain::trial::Iteration;
use crate::run::trial::trial_params;
use crate::store::TrialRow;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A stored value as the user reads it (`-` for null).
pub fn show_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A flag two configurations set differently.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub flag: String,
    pub a: serde_json::Value,
    pub b: serde_json::Value,
}

/// Equal as configuration values: numbers by value (`4` = `4.0`), the rest exactly.
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The flags `a` and `b` give different values (a flag one lacks reads `null`).
pub fn differences(
    a: &BTreeMap<String, serde_json::Value>,
    b: &BTreeMap<String, serde_json::Value>,
) -> Vec<Difference> {
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let get = |m: &BTreeMap<String, serde_json::Value>, k: &str| {
        m.get(k).cloned().unwrap_or(serde_json::Value::Null)
    };
    keys.into_iter()
        .map(|k| Difference {
            flag: k.clone(),
            a: get(a, k),
            b: get(b, k),
        })
        .filter(|d| !same(&d.a, &d.b))
        .collect()
}

/// What trials `a` and `b` ran differently: by their stored parameters, else (trials stored
/// before those were kept) by their overrides, a flag one did not override reading `null`.
pub fn trial_differences(a: &TrialRow, b: &TrialRow) -> Vec<Difference> {
    match (trial_params(a), trial_params(b)) {
        (Some(pa), Some(pb)) => differences(&pa, &pb),
        _ => differences(
            &crate::run::trial::trial_settings(a),
            &crate::run::trial::trial_settings(b),
        ),
    }
}

/// One figure of both trials: `b` against `a`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub a: f64,
    pub b: f64,
    /// (b − a) / a, %.
    pub change_pct: f64,
    /// Half-width of the change's 95 % interval, % of `a` (the two medians' half-widths added;
    /// absent for figures without an interval).
    pub ci95_pct: Option<f64>,
}

impl Change {
    fn of(a: Option<f64>, b: Option<f64>, ci: Option<(f64, f64)>) -> Option<Change> {
        let (a, b) = (a?, b?);
        (a.is_finite() && b.is_finite() && a != 0.0).then(|| Change {
            a,
            b,
            change_pct: (b - a) / a * 100.0,
            ci95_pct: ci.map(|(x, y)| (x + y) / a * 100.0),
        })
    }
}

/// Trial `b`'s step time against `a`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CompareVerdict {
    /// `b` steps faster beyond the interval.
    Faster,
    /// `b` steps slower beyond the interval.
    Slower,
    /// The change lies within its 95 % interval.
    NoSignificantDifference,
    /// The change lies beyond the two trials' own intervals but within the variation between
    /// launches of the same settings: two launches of one config differ that much.
    SameWithinLaunchNoise,
    /// One of them has no measured step time.
    NotMeasured,
}

impl CompareVerdict {
    pub fn text(self) -> &'static str {
        match self {
            CompareVerdict::Faster => "faster",
            CompareVerdict::Slower => "slower",
            CompareVerdict::NoSignificantDifference => "no significant difference",
            CompareVerdict::SameWithinLaunchNoise => "same within launch-to-launch noise",
            CompareVerdict::NotMeasured => "not measured",
        }
    }
}

/// Two trials compared (`b` against `a`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: i64,
    pub b: i64,
    /// The experiment files they ran (the same file for most comparisons).
    pub experiments: [String; 2],
    /// What each trial's figures are evidence of.
    pub bases: [crate::domain::evidence::Basis; 2],
    pub differences: Vec<Difference>,
    pub median_step_ms: Option<Change>,
    pub tokens_per_s_per_gpu: Option<Change>,
    pub tflops_per_gpu: Option<Change>,
    /// Peak memory, only when both figures measure the same thing (see `peak_mem_kinds`).
    pub peak_mem_gib: Option<Change>,
    /// What each trial's peak memory measures; figures of different kinds are not compared.
    pub peak_mem_kinds: [Option<crate::domain::trial::MemorySource>; 2],
    pub verdict: CompareVerdict,
    /// The launch-to-launch variation the verdict allows for: half-width of its 95 % interval
    /// on the change, %, and where the variation comes from.
    pub launch_noise: LaunchNoise,
    /// Set when the trials ran different global batches (a TorchTitan local batch size, say):
    /// trial `a`'s global batch, samples a step, to which `b`'s step time (and its interval)
    /// is scaled before the change and the verdict, so both are timed on the same work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_samples: Option<u64>,
    /// Trial `b`'s global batch when it differs from `a`'s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub b_samples: Option<u64>,
    /// Each trial's step times by iteration, ms (for the overlaid curves).
    #[serde(skip)]
    pub steps: [Vec<(u64, f64)>; 2],
}

/// How much the median step of one config varies from launch to launch (a fresh process lands
/// on other clocks, placements, allocator states): what two launches of the same settings may
/// differ by, beyond each one's own interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LaunchNoise {
    /// Relative standard deviation of a launch's median step (0.01 = 1 %).
    pub cv: f64,
    /// Repeated launches the workspace measured it on (0: not measured, [`ASSUMED_CV`]).
    pub repeats: usize,
}

/// The launch-to-launch variation assumed before the workspace measured one (the search's
/// assumption too).
pub const ASSUMED_CV: f64 = 0.01;

impl LaunchNoise {
    /// The workspace's measured variation, else [`ASSUMED_CV`].
    pub fn of(measured: Option<(f64, usize)>) -> LaunchNoise {
        match measured {
            Some((cv, repeats)) if cv.is_finite() && cv >= 0.0 => LaunchNoise { cv, repeats },
            _ => LaunchNoise {
                cv: ASSUMED_CV,
                repeats: 0,
            },
        }
    }

    /// Half-width of the 95 % interval it puts on the change between two launches, % (the
    /// difference of two launches varies √2 times one).
    pub fn ci95_pct(&self) -> f64 {
        1.96 * std::f64::consts::SQRT_2 * self.cv * 100.0
    }

    /// Where the variation comes from, in words.
    pub fn text(&self) -> String {
        match self.repeats {
            0 => format!(
                "±{:.1} % between launches (assumed: the workspace has no repeated launch yet)",
                self.ci95_pct()
            ),
            n => format!(
                "±{:.1} % between launches (measured over {} in this workspace)",
                self.ci95_pct(),
                crate::util::text::count(n, "repeated launch", "repeated launches")
            ),
        }
    }
}

/// The backend a stored trial ran, by the keys of what it ran (TorchTitan's are dotted
/// sections, Megatron-LM's flat); None when nothing tells.
pub fn backend_of(t: &TrialRow) -> Option<&'static str> {
    let keys: Vec<String> = match trial_params(t) {
        Some(p) => p.into_keys().collect(),
        None => t.overrides.iter().map(|(k, _)| k.clone()).collect(),
    };
    if keys
        .iter()
        .any(|k| k == "training.steps" || k.starts_with("training."))
    {
        Some("TorchTitan")
    } else if keys
        .iter()
        .any(|k| k == "train_iters" || k == "micro_batch_size")
    {
        Some("Megatron-LM")
    } else {
        None
    }
}

/// Compares two stored trials (their iterations give the step-time curves), allowing for the
/// launch-to-launch variation `noise`.
pub fn compare(
    a: &TrialRow,
    b: &TrialRow,
    iters_a: &[Iteration],
    iters_b: &[Iteration],
    noise: LaunchNoise,
) -> Comparison {
    // Samples a step: what the log says it processed, else what the trial was configured with.
    let batch = |t: &TrialRow, rows: &[Iteration]| {
        rows.iter()
            .rev()
            .find_map(|r| r.global_batch_size)
            .map(|g| g as f64)
            .or_else(|| crate::run::trial::trial_global_batch(t))
            .filter(|g| *g > 0.0)
    };
    let scale = match (batch(a, iters_a), batch(b, iters_b)) {
        (Some(ga), Some(gb)) if (ga - gb).abs() > 1e-9 => Some((ga, gb)),
        _ => None,
    };
    let k = scale.map_or(1.0, |(ga, gb)| ga / gb);
    let median_step_ms = Change::of(
        a.median_step_ms,
        b.median_step_ms.map(|m| m * k),
        a.ci95_ms.zip(b.ci95_ms.map(|c| c * k)),
    );
    let verdict = match &median_step_ms {
        None => CompareVerdict::NotMeasured,
        Some(c) => match c.ci95_pct {
            Some(ci) if c.change_pct.abs() <= ci => CompareVerdict::NoSignificantDifference,
            None => CompareVerdict::NoSignificantDifference,
            // Two launches differ by their own noise plus what varies between launches.
            Some(ci) if c.change_pct.abs() <= ci.hypot(noise.ci95_pct()) => {
                CompareVerdict::SameWithinLaunchNoise
            }
            Some(_) if c.change_pct < 0.0 => CompareVerdict::Faster,
            Some(_) => CompareVerdict::Slower,
        },
    };
    let curve = |rows: &[Iteration]| {
        rows.iter()
            .filter_map(|r| Some((r.iteration, r.elapsed_ms?)))
            .collect()
    };
    Comparison {
        a: a.id,
        b: b.id,
        experiments: [a, b].map(|t| crate::util::paths::display_path(&t.config_path)),
        bases: [a, b].map(super::basis::basis_of),
        differences: trial_differences(a, b),
        median_step_ms,
        tokens_per_s_per_gpu: Change::of(a.tokens_per_s_per_gpu, b.tokens_per_s_per_gpu, None),
        tflops_per_gpu: Change::of(a.tflops_per_gpu, b.tflops_per_gpu, None),
        peak_mem_gib: if a.peak_mem_kind() == b.peak_mem_kind() {
            Change::of(a.peak_mem_gib, b.peak_mem_gib, None)
        } else {
            None
        },
        peak_mem_kinds: [a.peak_mem_kind(), b.peak_mem_kind()],
        verdict,
        launch_noise: noise,
        per_samples: scale.map(|(ga, _)| ga.round() as u64),
        b_samples: scale.map(|(_, gb)| gb.round() as u64),
        steps: [curve(iters_a), curve(iters_b)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(v: serde_json::Value) -> BTreeMap<String, serde_json::Value> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn differences_compare_values_not_spellings() {
        let a = params(json!({"micro_batch_size": 4, "lr": 1e-4, "fp8": null, "x": "a"}));
        let b = params(json!({"micro_batch_size": 4.0, "lr": 1e-4, "x": "b", "y": true}));
        let d = differences(&a, &b);
        let flags: Vec<&str> = d.iter().map(|x| x.flag.as_str()).collect();
        assert_eq!(flags, ["x", "y"], "{d:?}");
        assert_eq!(d[1].a, serde_json::Value::Null);
    }

    fn row(median: f64, ci: f64) -> TrialRow {
        let mut t: TrialRow = serde_json::from_value(json!({
            "id": 1, "study_id": null, "status": "completed", "created_at": "t",
            "started_at": null, "finished_at": null, "updated_at": "t",
            "config_path": "x.yaml", "config_hash": "h", "overrides": [],
            "profile": null, "argv": [], "env": [], "trial_dir": "/nonexistent",
            "runner_pid": null, "failure": null, "exit_code": null, "exit_signal": null,
            "iterations_seen": 0, "iterations_stored": 0, "wall_s": null, "summary": null,
            "median_step_ms": null, "ci95_ms": null, "tokens_per_s_per_gpu": null,
            "tflops_per_gpu": null, "peak_mem_gib": null
        }))
        .unwrap();
        t.median_step_ms = Some(median);
        t.ci95_ms = Some(ci);
        t
    }

    #[test]
    fn trials_of_different_global_batches_are_compared_on_the_same_work() {
        // A TorchTitan local batch 1 against 8: 11 ms a step for 1 sample is 88 ms for 8, so
        // it is slower, not 82 % faster.
        let logged = |g: u64| -> Vec<Iteration> {
            (1..=4)
                .map(|i| Iteration {
                    iteration: i,
                    global_batch_size: Some(g),
                    ..Iteration::default()
                })
                .collect()
        };
        let c = compare(
            &row(60.0, 1.0),
            &row(11.0, 0.2),
            &logged(8),
            &logged(1),
            LaunchNoise::of(None),
        );
        assert_eq!((c.per_samples, c.b_samples), (Some(8), Some(1)));
        let m = c.median_step_ms.unwrap();
        assert!(
            (m.b - 88.0).abs() < 1e-9 && (m.change_pct - 46.666).abs() < 0.01,
            "{m:?}"
        );
        assert!((m.ci95_pct.unwrap() - (1.0 + 1.6) / 60.0 * 100.0).abs() < 1e-9);
        assert_eq!(c.verdict, CompareVerdict::Slower);
        // The same batch, or one not known: the step times as they are.
        let c = compare(
            &row(60.0, 1.0),
            &row(11.0, 0.2),
            &logged(8),
            &logged(8),
            LaunchNoise::of(None),
        );
        assert_eq!((c.per_samples, c.median_step_ms.unwrap().b), (None, 11.0));
        let c = compare(
            &row(60.0, 1.0),
            &row(11.0, 0.2),
            &[],
            &logged(1),
            LaunchNoise::of(None),
        );
        assert_eq!(c.verdict, CompareVerdict::Faster);
    }

    #[test]
    fn a_change_inside_its_interval_is_no_significant_difference() {
        // 10.2 % slower with a ±10.8 % interval: a tie, not slower.
        let c = compare(
            &row(100.0, 5.4),
            &row(110.2, 5.4),
            &[],
            &[],
            LaunchNoise::of(None),
        );
        assert_eq!(c.verdict, CompareVerdict::NoSignificantDifference);
        let m = c.median_step_ms.unwrap();
        assert!((m.change_pct - 10.2).abs() < 1e-9 && (m.ci95_pct.unwrap() - 10.8).abs() < 1e-9);
        assert_eq!(
            compare(
                &row(100.0, 1.0),
                &row(110.0, 1.0),
                &[],
                &[],
                LaunchNoise::of(None)
            )
            .verdict,
            CompareVerdict::Slower
        );
        assert_eq!(
            compare(
                &row(100.0, 1.0),
                &row(90.0, 1.0),
                &[],
                &[],
                LaunchNoise::of(None)
            )
            .verdict,
            CompareVerdict::Faster
        );
        let mut none = row(100.0, 1.0);
        none.median_step_ms = None;
        assert_eq!(
            compare(&none, &row(90.0, 1.0), &[], &[], LaunchNoise::of(None)).verdict,
            CompareVerdict::NotMeasured
        );
    }

    /// Two launches of identical settings, 0.5 % apart with ±0.2 % of their own: within what
    /// launches vary by (1 % assumed), "same within launch-to-launch noise", not "slower"; with
    /// a workspace that measured launches to vary by 0.1 %, slower.
    #[test]
    fn launches_of_one_config_are_the_same_within_launch_to_launch_noise() {
        let (a, b) = (row(100.0, 0.1), row(100.5, 0.1));
        let c = compare(&a, &b, &[], &[], LaunchNoise::of(None));
        assert_eq!(c.verdict, CompareVerdict::SameWithinLaunchNoise);
        assert!(
            c.launch_noise.text().contains("assumed"),
            "{}",
            c.launch_noise.text()
        );
        let quiet = LaunchNoise::of(Some((0.001, 6)));
        let c = compare(&a, &b, &[], &[], quiet);
        assert_eq!(c.verdict, CompareVerdict::Slower);
        assert!(quiet.text().contains("measured over 6"), "{}", quiet.text());
    }

    #[test]
    fn a_trial_s_backend_comes_from_what_it_ran() {
        let mut t = row(1.0, 0.1);
        t.overrides = vec![("training.steps".into(), json!(10))];
        assert_eq!(backend_of(&t), Some("TorchTitan"));
        t.overrides = vec![("train_iters".into(), json!(10))];
        assert_eq!(backend_of(&t), Some("Megatron-LM"));
        t.overrides = vec![];
        assert_eq!(backend_of(&t), None);
    }
}
