//! A finished sweep as stored in its study (the notes column, JSON): every candidate with its
//! verdict, the reason in words, the evidence and the memory model's prediction.

use super::search::{SearchResult, Verdict};
use super::space::Space;
use super::types::Candidate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

fn gib(b: f64) -> f64 {
    b / (1u64 << 30) as f64
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
    /// Mean relative error of the calibrated memory model on the measured candidates.
    pub memory_error: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateRecord {
    pub id: usize,
    pub overrides: BTreeMap<String, serde_json::Value>,
    /// `winner`, `tie`, `slower`, `oom`, `ruled-out`, `predicted-oom`, `predicted-slower`,
    /// `illegal`, `failed`, `not-run`.
    pub verdict: String,
    /// Why, in words (slower by X ± Y %, OOM, ruled out by candidate N, ...).
    pub why: String,
    pub n: usize,
    pub median_ms: Option<f64>,
    pub ci_low_ms: Option<f64>,
    pub ci_high_ms: Option<f64>,
    pub peak_memory_bytes: Option<u64>,
    /// The memory model's calibrated prediction.
    pub predicted_bytes: Option<f64>,
}

fn verdict_text(v: &Verdict) -> (String, String) {
    match v {
        Verdict::Winner => (
            "winner".into(),
            "fastest (ties broken by cost order)".into(),
        ),
        Verdict::Tie { with } => (
            "tie".into(),
            format!("within the noise of candidate {with}, which is cheaper or faster"),
        ),
        Verdict::Slower { pct, ci_pct } => (
            "slower".into(),
            format!("slower by {pct:.1} ± {ci_pct:.1} %"),
        ),
        Verdict::Oom => ("oom".into(), "ran out of GPU memory".into()),
        Verdict::RuledOut { by, reason } => (
            "ruled-out".into(),
            format!("not run: needs more memory than candidate {by}, which ran out ({reason})"),
        ),
        Verdict::PredictedOom { reason } => ("predicted-oom".into(), format!("not run: {reason}")),
        Verdict::PredictedSlower { reason } => {
            ("predicted-slower".into(), format!("not run: {reason}"))
        }
        Verdict::Failed(why) => ("failed".into(), why.clone()),
        Verdict::NotRun => ("not-run".into(), "the budget ended first".into()),
    }
}

#[allow(clippy::too_many_arguments)]
pub fn record(
    space: &Space,
    config: &std::path::Path,
    profile: &str,
    gpus: u64,
    capacity: Option<f64>,
    cands: &[Candidate],
    legal: &[Result<(), String>],
    predicted: &BTreeMap<usize, f64>,
    r: &SearchResult,
) -> StudyRecord {
    let verdicts: BTreeMap<usize, &Verdict> = r.verdicts.iter().map(|(i, v)| (*i, v)).collect();
    let candidates: Vec<CandidateRecord> = cands
        .iter()
        .zip(legal)
        .map(|(c, l)| {
            let (verdict, why) = match (l, verdicts.get(&c.id)) {
                (Err(e), _) => ("illegal".to_string(), e.clone()),
                (Ok(()), Some(v)) => verdict_text(v),
                (Ok(()), None) => ("not-run".into(), "not reached".into()),
            };
            let ev = r.evidence.get(&c.id);
            CandidateRecord {
                id: c.id,
                overrides: c.overrides.clone(),
                verdict,
                why,
                n: ev.map_or(0, |e| e.n),
                median_ms: ev.and_then(|e| e.median_ms),
                ci_low_ms: ev.and_then(|e| e.ci_low_ms),
                ci_high_ms: ev.and_then(|e| e.ci_high_ms),
                peak_memory_bytes: ev.and_then(|e| e.peak_memory_bytes),
                predicted_bytes: predicted.get(&c.id).copied(),
            }
        })
        .collect();
    let memory_error = mean_relative_error(
        candidates
            .iter()
            .filter_map(|c| Some((c.predicted_bytes?, c.peak_memory_bytes? as f64))),
    )
    .map(|(e, _)| e);
    StudyRecord {
        space: space.name.clone(),
        config: config.display().to_string(),
        profile: profile.to_string(),
        gpus,
        capacity_bytes: capacity,
        candidates,
        pick: r.pick,
        gpu_seconds: r.gpu_seconds,
        trials: r.trials,
        log: r.log.clone(),
        memory_error,
    }
}

/// Mean relative error of predictions against measurements, and how many pairs it used. Only
/// finite pairs with a positive measurement count (an OOM trial may report a peak of 0); a
/// prediction at or below 0 counts, as the bad calibration it shows.
pub fn mean_relative_error(pairs: impl Iterator<Item = (f64, f64)>) -> Option<(f64, usize)> {
    let ok: Vec<(f64, f64)> = pairs
        .filter(|(p, m)| m.is_finite() && *m > 0.0 && p.is_finite())
        .collect();
    (!ok.is_empty()).then(|| {
        let e: f64 = ok.iter().map(|(p, m)| ((p - m) / m).abs()).sum();
        (e / ok.len() as f64, ok.len())
    })
}

/// `k=v k=v` of a candidate, short.
pub fn settings(o: &BTreeMap<String, serde_json::Value>) -> String {
    o.iter()
        .map(|(k, v)| {
            format!(
                "{k}={}",
                if v.is_null() {
                    "null".into()
                } else {
                    v.to_string().trim_matches('"').to_string()
                }
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn print_record(name: &str, r: &StudyRecord) {
    println!(
        "study {name}: {} trial(s), {:.1} GPU-minutes",
        r.trials,
        r.gpu_seconds / 60.0
    );
    match r.pick.and_then(|p| r.candidates.iter().find(|c| c.id == p)) {
        Some(c) => println!(
            "pick: {} — median {:.1} ms (95 % CI {:.1}–{:.1}, n {})",
            settings(&c.overrides),
            c.median_ms.unwrap_or(f64::NAN),
            c.ci_low_ms.unwrap_or(f64::NAN),
            c.ci_high_ms.unwrap_or(f64::NAN),
            c.n
        ),
        None => println!("no candidate produced a measurement"),
    }
    println!(
        "{:>3}  {:<13} {:>9} {:>17} {:>4} {:>9} {:>9}  settings / why",
        "id", "verdict", "median ms", "95% CI ms", "n", "peak GiB", "pred GiB"
    );
    for c in &r.candidates {
        let ci = match (c.ci_low_ms, c.ci_high_ms) {
            (Some(l), Some(h)) => format!("{l:.1}–{h:.1}"),
            _ => "-".into(),
        };
        println!(
            "{:>3}  {:<13} {:>9} {:>17} {:>4} {:>9} {:>9}  {} · {}",
            c.id,
            c.verdict,
            c.median_ms.map_or("-".into(), |m| format!("{m:.1}")),
            ci,
            c.n,
            c.peak_memory_bytes
                .map_or("-".into(), |b| format!("{:.2}", gib(b as f64))),
            c.predicted_bytes
                .map_or("-".into(), |b| format!("{:.2}", gib(b))),
            settings(&c.overrides),
            c.why
        );
    }
    if let Some(e) = r.memory_error {
        println!(
            "memory model vs measured: mean error {:.1} % over the measured candidates",
            100.0 * e
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_error_skips_oom_peaks_of_zero() {
        let pairs = [(110.0, 100.0), (90.0, 100.0), (50.0, 0.0), (f64::NAN, 10.0)];
        let (e, n) = mean_relative_error(pairs.into_iter()).unwrap();
        assert_eq!(n, 2);
        assert!((e - 0.1).abs() < 1e-12, "{e}");
        assert_eq!(mean_relative_error([(1.0, 0.0)].into_iter()), None);
    }
}
