//! The search's first phase: candidates the calibrated memory model predicts out of memory
//! are ruled out before any trial.

use super::{GIB, Search, State, Verdict};

/// Rules out each candidate (the current settings excepted) whose calibrated prediction is over
/// the usable memory; with an uncalibrated model, none (the log says so).
pub(super) fn predicted_oom(s: &mut Search<'_>) {
    let (cfg, cands) = (s.cfg, s.cands);
    let n = cands.len();
    // 1. Predicted OOM (with an uncalibrated model, only once this study calibrates it).
    let predicted = s.predicted.clone();
    if !cfg.predictions_calibrated && cfg.capacity_bytes.is_some() {
        s.log.push(
            "memory model not calibrated yet: no candidate is pruned on its prediction until a \
             trial of this study measures a peak"
                .to_string(),
        );
    }
    for i in (0..n).filter(|&i| cfg.predictions_calibrated && !cands[i].baseline) {
        if let (Some(cap), Some(p)) = (cfg.capacity_bytes, predicted[i]) {
            let usable = cap * (1.0 - cfg.headroom.clamp(0.0, 1.0));
            if p > usable {
                let reason = format!(
                    "predicted peak {:.1} GiB > {:.1} GiB usable ({:.0} % of {:.1} GiB)",
                    p / GIB,
                    usable / GIB,
                    (1.0 - cfg.headroom.clamp(0.0, 1.0)) * 100.0,
                    cap / GIB
                );
                s.log
                    .push(format!("{}: predicted OOM: {reason}", s.label(i)));
                s.at_launch[i] = Some(p);
                s.state[i] = State::Out(Verdict::PredictedOom { reason });
            }
        }
    }
}
