//! What the workspace's earlier trials say about launching this experiment with this profile:
//! how long a launch takes before it measures (start-up and warm-up), and how much a
//! candidate's median step time moves from one launch to the next. The search uses both
//! ([`crate::tune::search::SearchConfig::launch_s_prior`] and `launch_cv`).

use super::runner::outcome_of;
use crate::store::{Store, TrialFilter, TrialRow, TrialStatus};
use std::collections::BTreeMap;
use std::path::Path;

/// Launch figures from stored trials.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaunchHistory {
    /// Median seconds before the first steady sample, and over how many trials.
    pub launch_s: Option<(f64, usize)>,
    /// Launch-to-launch variation of the median step time (relative standard deviation, the
    /// within-trial error of each median taken out), and over how many repeated launches
    /// (trials beyond the first of each candidate).
    pub launch_cv: Option<(f64, usize)>,
}

/// The completed trials of `exp` run with `profile` (the same shape on another profile
/// starts differently).
fn trials(store: &Store, exp: &Path, profile: &str) -> Vec<TrialRow> {
    store
        .list_trials(&TrialFilter::all().status(TrialStatus::Completed))
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.failure.is_none() && t.config_path == exp)
        .filter(|t| t.profile.as_deref() == Some(profile))
        .collect()
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Reads the workspace's history for `exp` with `profile` (`gpus` only scales GPU-seconds,
/// which this does not use).
pub fn launch_history(store: &Store, exp: &Path, profile: &str, gpus: u64) -> LaunchHistory {
    let rows = trials(store, exp, profile);
    let launches: Vec<f64> = rows
        .iter()
        .filter_map(|t| outcome_of(store, t, gpus).launch_s)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .collect();
    let n_launch = launches.len();
    // Repeated launches of one candidate: the same overrides, the same config.
    let mut groups: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for t in &rows {
        let (Some(m), Some(ci)) = (t.median_step_ms, t.ci95_ms) else {
            continue;
        };
        if m > 0.0 {
            let key = format!("{}|{:?}", t.config_hash, t.overrides);
            groups.entry(key).or_default().push((m.ln(), ci / 1.96 / m));
        }
    }
    let (mut ss, mut df, mut within) = (0.0, 0usize, 0.0);
    for g in groups.values().filter(|g| g.len() >= 2) {
        let mean = g.iter().map(|x| x.0).sum::<f64>() / g.len() as f64;
        ss += g.iter().map(|x| (x.0 - mean).powi(2)).sum::<f64>();
        within += g.iter().map(|x| x.1 * x.1).sum::<f64>() * (g.len() - 1) as f64 / g.len() as f64;
        df += g.len() - 1;
    }
    LaunchHistory {
        launch_s: median(launches).map(|m| (m, n_launch)),
        launch_cv: (df > 0).then(|| (((ss - within) / df as f64).max(0.0).sqrt(), df)),
    }
}
