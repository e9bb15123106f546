//! The measured recommendations of a finished study: its pick, flag by flag, with the evidence,
//! and the flags its profile does not model (not recommended from it).

use crate::app::{AppError, Session};
use crate::domain::study::{StudyRecord, settings};
use crate::tune::recommend::{Basis, Recommendation, STUDY};

/// What a study's pick recommends, flag by flag with its evidence, and the flags it cannot
/// recommend (its profile does not model them).
pub(super) type FromStudy = (StudyRecord, Vec<Recommendation>, Vec<(String, String)>);

/// Measured recommendations: the study's pick, flag by flag, with its evidence.
pub(super) fn from_study(session: &Session, name: &str) -> Result<FromStudy, AppError> {
    let rec = crate::app::views::studies::finished_record(session, name)?;
    let Some(pick) = rec.pick() else {
        return Ok((rec, Vec::new(), Vec::new()));
    };
    let basis = match &rec.basis {
        Some(b) if !b.is_gpu_evidence() => Basis::Proxy,
        _ => Basis::Measured,
    };
    let ignored: Vec<(String, String)> = rec
        .unmodeled
        .iter()
        .map(|f| {
            (
                f.clone(),
                format!(
                    "{} does not model it: its verdict in `{name}` is noise",
                    rec.profile
                ),
            )
        })
        .collect();
    let lost: Vec<String> = rec
        .candidates
        .iter()
        .filter(|c| c.id != pick.id)
        .map(|c| format!("{}: {}", settings(&c.overrides), c.why))
        .collect();
    let exp = session.load()?;
    let m = exp.main_module();
    let out = pick
        .overrides
        .iter()
        .filter(|(flag, _)| !rec.unmodeled.contains(flag))
        .map(|(flag, value)| {
            let current = m.value(flag).map_or(serde_json::Value::Null, |v| v.to_json());
            let verdict = match (&rec.conclusion, pick.baseline) {
                (_, true) => format!(
                    "keep current: no candidate of {} in study `{name}` is faster beyond the noise",
                    rec.candidates.len()
                ),
                (Some(_), false) => format!(
                    "faster than the current settings beyond the noise, of {} candidates in study `{name}`",
                    rec.candidates.len()
                ),
                (None, false) => format!(
                    "fastest of {} candidates in study `{name}`",
                    rec.candidates.len()
                ),
            };
            let mut reason = format!(
                "{verdict}: {} {:.1} ms {} (95 % CI {:.1}–{:.1}, n {}){}",
                rec.statistic.name(),
                pick.step_ms.unwrap_or(f64::NAN),
                rec.batch_unit(),
                pick.ci_low_ms.unwrap_or(f64::NAN),
                pick.ci_high_ms.unwrap_or(f64::NAN),
                pick.n,
                pick.peak_memory_bytes.map_or(String::new(), |b| format!(
                    ", peak {:.2} GiB",
                    b as f64 / (1u64 << 30) as f64
                )),
            );
            if current == *value {
                reason.push_str(" (already set)");
            }
            reason.push_str(&format!("; the others: {}", lost.join("; ")));
            Recommendation {
                flag: flag.clone(),
                value: value.clone(),
                current,
                basis,
                reason,
                source: format!("study {name} ({} trials, {})", rec.trials, rec.basis_text()),
                env: false,
                rule: STUDY.to_string(),
                companion_of: None,
            }
        })
        .collect();
    Ok((rec.clone(), out, ignored))
}
