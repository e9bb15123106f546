//! A finished sweep as stored in its study (the notes column, JSON): every candidate with its
//! verdict, the reason in words, the evidence and the memory model's prediction.

use super::search::{SearchResult, Verdict};
use super::space::Space;
use crate::domain::evidence::Basis;
use crate::domain::study::{
    Candidate, CandidateRecord, Conclusion, MemoryCheck, StudyRecord, VerdictKind, settings,
};
use std::collections::BTreeMap;

/// Candidate `id` in words: `candidate 6 (micro_batch_size=4)`, or the current settings.
fn named(cands: &[Candidate], id: usize) -> String {
    match cands.iter().find(|c| c.id == id) {
        Some(c) if c.baseline => format!("candidate {id} (the current settings)"),
        Some(c) => format!("candidate {id} ({})", settings(&c.overrides)),
        None => format!("candidate {id}"),
    }
}

fn verdict_text(
    v: &Verdict,
    c: &Candidate,
    cands: &[Candidate],
    conclusion: &Conclusion,
) -> (VerdictKind, String) {
    match v {
        Verdict::Winner => match conclusion {
            Conclusion::KeepCurrent { fastest, .. } if *fastest != c.id => (
                VerdictKind::Winner,
                format!(
                    "the current settings: no significant winner, keep current ({} is within their noise)",
                    named(cands, *fastest)
                ),
            ),
            Conclusion::KeepCurrent { .. } => (
                VerdictKind::Winner,
                "the current settings are the fastest: keep current".into(),
            ),
            _ => (
                VerdictKind::Winner,
                "faster than the current settings beyond the noise (ties broken by cost order)"
                    .into(),
            ),
        },
        Verdict::BestSoFar => (
            VerdictKind::BestSoFar,
            "the fastest so far; the sweep was cut short before it could decide (no winner)".into(),
        ),
        Verdict::Tie { with } => (
            VerdictKind::Tie,
            format!("within the noise of {}", named(cands, *with)),
        ),
        Verdict::Slower { pct, ci_pct } => (
            VerdictKind::Slower,
            format!("slower by {pct:.1} ± {ci_pct:.1} %"),
        ),
        Verdict::Oom => (VerdictKind::Oom, "ran out of GPU memory".into()),
        Verdict::RuledOut { by, .. } => (
            VerdictKind::RuledOut,
            format!(
                "not run: needs at least the memory of {}, which ran out of memory",
                named(cands, *by)
            ),
        ),
        Verdict::PredictedOom { reason } => {
            (VerdictKind::PredictedOom, format!("not run: {reason}"))
        }
        Verdict::PredictedSlower { reason } => {
            (VerdictKind::PredictedSlower, format!("not run: {reason}"))
        }
        Verdict::Failed(why) => (VerdictKind::Failed, why.clone()),
        Verdict::NotRun => (VerdictKind::NotRun, "the budget ended first".into()),
    }
}

/// What a study ran on: its experiment, launch profile, world and the GPU memory its forecasts
/// were judged against (none where no model judged them).
#[derive(Debug, Clone, Copy)]
pub struct RanOn<'a> {
    pub config: &'a std::path::Path,
    pub profile: &'a str,
    pub gpus: u64,
    pub capacity: Option<f64>,
}

/// The study's record: each candidate with its legality, verdict, evidence and forecast.
pub fn record(
    space: &Space,
    on: RanOn<'_>,
    cands: &[Candidate],
    legal: &[Result<(), super::space::Illegal>],
    r: &SearchResult,
) -> StudyRecord {
    let RanOn {
        config,
        profile,
        gpus,
        capacity,
    } = on;
    let predicted = &r.predicted_bytes;
    let verdicts: BTreeMap<usize, &Verdict> = r.verdicts.iter().map(|(i, v)| (*i, v)).collect();
    let candidates: Vec<CandidateRecord> = cands
        .iter()
        .zip(legal)
        .map(|(c, l)| {
            let (verdict, why) = match (l, verdicts.get(&c.id)) {
                (Err(e), _) => (VerdictKind::Illegal, e.to_string()),
                (Ok(()), Some(v)) => verdict_text(v, c, cands, &r.conclusion),
                (Ok(()), None) => (VerdictKind::NotRun, "not reached".into()),
            };
            let ev = r.evidence.get(&c.id);
            // A measurement its race cut short says so: its figure is from fewer samples.
            let why = match ev.map_or(0, |e| e.raced) {
                0 => why,
                _ => format!(
                    "{why}; its launch stopped early, above the leader with 95 % confidence \
                     (racing)"
                ),
            };
            CandidateRecord {
                id: c.id,
                baseline: c.baseline,
                overrides: c.overrides.clone(),
                verdict,
                why,
                n: ev.map_or(0, |e| e.n),
                step_ms: ev.and_then(|e| e.step_ms),
                ci_low_ms: ev.and_then(|e| e.ci_low_ms),
                ci_high_ms: ev.and_then(|e| e.ci_high_ms),
                peak_memory_bytes: ev.and_then(|e| e.peak_memory_bytes),
                peak_memory_source: ev.and_then(|e| e.peak_memory_kind),
                predicted_bytes: predicted.get(&c.id).copied(),
            }
        })
        .collect();
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
        // The sweep sets it once the basis is known ([`memory_check`]).
        memory_error: None,
        basis: None,
        unmodeled: Vec::new(),
        baseline: r.baseline,
        conclusion: Some(r.conclusion.clone()),
        // The sweep sets it when its trials' global batches differ (`TrialRunner`).
        per_samples: None,
        statistic: super::search::STATISTIC,
        knobs: space.knobs.clone(),
        link_scale: None,
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

/// Whether and how the memory model's forecasts compare with the study's measured peaks: only
/// for peaks measured on a GPU profile (a proxy's peak is its CPU stand-in's, not the config's
/// on a GPU); over the candidates that ran to a measurement (a failed, OOM or rejected trial's
/// peak is whatever it reached before it ended). Nothing to say without a pair of forecast and
/// peak. What `sweep` prints and stores, and the report shows.
pub fn memory_check(rec: &StudyRecord) -> MemoryCheck {
    let pairs = rec
        .candidates
        .iter()
        .filter(|c| c.verdict.measured())
        .filter_map(|c| Some((c.predicted_bytes?, c.peak_memory_bytes? as f64)));
    let Some((mean_error, candidates)) = mean_relative_error(pairs) else {
        return MemoryCheck::Nothing;
    };
    match &rec.basis {
        Some(Basis::Proxy { profile }) => MemoryCheck::NotCompared {
            why: format!(
                "{profile} is a CPU stand-in: its peak is the stand-in's, not the config's on a GPU"
            ),
        },
        _ => MemoryCheck::Compared {
            mean_error,
            candidates,
        },
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
