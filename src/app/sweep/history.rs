//! What the workspace's earlier trials say about launching this experiment with this profile:
//! how long a launch takes before it measures (start-up and warm-up), and how much a
//! candidate's median step time moves from one launch to the next. The search uses both
//! ([`crate::tune::search::SearchConfig::launch_s_prior`] and `launch_cv`).

use super::runner::launch_s;
pub use crate::domain::study::LaunchHistory;
use crate::store::{Store, TrialFilter, TrialRow, TrialStatus};
use crate::util::stats::median;
use std::collections::BTreeMap;
use std::path::Path;

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

/// Reads the workspace's history for `exp` with `profile`.
pub fn launch_history(store: &Store, exp: &Path, profile: &str) -> LaunchHistory {
    let rows = trials(store, exp, profile);
    let launches: Vec<f64> = rows
        .iter()
        .filter_map(|t| launch_s(t, &store.iterations(t.id).unwrap_or_default()))
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
            // One candidate: what it ran, apart from the trial's length (a screen and its
            // confirmation differ in `train_iters`, so in the config hash too).
            let key = match crate::run::trial::trial_params(t) {
                Some(params) => format!("{params:?}"),
                None => format!("{:?}", crate::run::trial::trial_settings(t)),
            };
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
        launch_s: median(&launches).map(|m| (m, n_launch)),
        launch_cv: (df > 0).then(|| (((ss - within) / df as f64).max(0.0).sqrt(), df)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::trial::Iteration;
    use crate::store::{NewTrial, TrialEnd};
    use serde_json::json;

    /// A completed trial of `exp` with `profile`: start-up `startup_s`, two 2 s warm-up
    /// iterations, then steady ones of `ms` (median `ms`, CI ±`ci`).
    fn trial(store: &Store, exp: &Path, profile: &str, mbs: u64, startup_s: f64, ms: f64, ci: f64) {
        let overrides = vec![("micro_batch_size".into(), json!(mbs))];
        trial_with(store, exp, profile, overrides, startup_s, ms, ci);
    }

    /// [`trial`] with these overrides (and a config hash of its own for each).
    fn trial_with(
        store: &Store,
        exp: &Path,
        profile: &str,
        overrides: Vec<(String, serde_json::Value)>,
        startup_s: f64,
        ms: f64,
        ci: f64,
    ) {
        let id = store
            .insert_trial(&NewTrial {
                config_path: exp.to_path_buf(),
                config_hash: format!("{overrides:?}"),
                overrides,
                profile: Some(profile.into()),
                ..NewTrial::default()
            })
            .unwrap();
        let iters: Vec<Iteration> = (0..10)
            .map(|i| Iteration {
                iteration: i + 1,
                elapsed_ms: Some(if i < 2 { 2000.0 } else { ms }),
                ..Default::default()
            })
            .collect();
        store.add_iterations(id, &iters).unwrap();
        let mut end = TrialEnd::new(TrialStatus::Completed, startup_s + 4.0 + 8.0 * ms / 1000.0);
        end.median_step_ms = Some(ms);
        end.ci95_ms = Some(ci);
        end.summary = Some(json!({"warmup": 2, "startup_s": startup_s}));
        store.finish_trial(id, &end).unwrap();
    }

    #[test]
    fn launch_cost_and_launch_variation_come_from_this_experiment_and_profile() {
        let store = Store::open_in_memory().unwrap();
        let exp = Path::new("/x/exp.yaml");
        assert_eq!(
            launch_history(&store, exp, "megatron"),
            LaunchHistory::default()
        );
        trial(&store, exp, "megatron", 1, 30.0, 500.0, 0.0);
        trial(&store, exp, "megatron", 1, 40.0, 520.0, 0.0);
        trial(&store, exp, "megatron", 2, 50.0, 400.0, 0.0);
        // Another profile and another experiment do not count.
        trial(&store, exp, "proxy-cpu", 1, 0.5, 300.0, 0.0);
        trial(
            &store,
            Path::new("/x/other.yaml"),
            "megatron",
            1,
            90.0,
            900.0,
            0.0,
        );
        let h = launch_history(&store, exp, "megatron");
        // Start-up plus the two 2 s warm-up iterations: 34, 44, 54 s.
        let (l, n) = h.launch_s.unwrap();
        assert!((l - 44.0).abs() < 1e-9 && n == 3, "{h:?}");
        // Micro batch 1 launched twice: ln(520/500) apart, one degree of freedom.
        let (cv, df) = h.launch_cv.unwrap();
        let d = (520.0f64 / 500.0).ln();
        assert_eq!(df, 1);
        assert!((cv - (d * d / 2.0).sqrt()).abs() < 1e-9, "{cv}");
        // The within-trial error of each median is taken out (never below 0).
        let store = Store::open_in_memory().unwrap();
        trial(&store, exp, "megatron", 1, 30.0, 500.0, 50.0);
        trial(&store, exp, "megatron", 1, 30.0, 501.0, 50.0);
        assert_eq!(
            launch_history(&store, exp, "megatron").launch_cv,
            Some((0.0, 1))
        );
    }

    #[test]
    fn a_screen_and_its_confirmation_are_repeated_launches_of_one_candidate() {
        // On the H200 (docs/validation/h200-2026-12-02-history, hist-c) micro batch 8 ran a
        // 12-iteration screen and an 18-iteration confirmation: their train_iters, and so their
        // config hashes, differ, and they were not counted as one candidate launched twice.
        let store = Store::open_in_memory().unwrap();
        let exp = Path::new("/x/exp.yaml");
        for (iters, ms) in [(12, 944.0), (18, 939.6)] {
            let overrides = vec![
                ("micro_batch_size".into(), json!(8)),
                ("train_iters".into(), json!(iters)),
            ];
            trial_with(&store, exp, "megatron", overrides, 30.0, ms, 0.0);
        }
        // TorchTitan's budget is its steps.
        for (steps, ms) in [(12, 500.0), (30, 505.0)] {
            let overrides = vec![
                ("training.local_batch_size".into(), json!(2)),
                ("training.steps".into(), json!(steps)),
            ];
            trial_with(&store, exp, "megatron", overrides, 30.0, ms, 0.0);
        }
        let (cv, df) = launch_history(&store, exp, "megatron").launch_cv.unwrap();
        assert_eq!(df, 2);
        let (a, b) = ((944.0f64 / 939.6).ln(), (505.0f64 / 500.0).ln());
        assert!((cv - ((a * a + b * b) / 4.0).sqrt()).abs() < 1e-9, "{cv}");
    }

    #[test]
    fn the_history_says_what_it_is_and_what_is_assumed() {
        let h = LaunchHistory {
            launch_s: Some((34.84, 5)),
            launch_cv: Some((0.0042, 2)),
        };
        assert_eq!(
            h.to_string(),
            "launch history: 34.8 s to the first steady sample (median of 5 earlier trials of \
             this experiment and profile); launch-to-launch variation 0.42 % over 2 repeated \
             launches"
        );
        let h = LaunchHistory {
            launch_s: Some((34.84, 5)),
            launch_cv: None,
        };
        assert!(
            h.to_string().ends_with("not measured yet (1 % assumed)"),
            "{h}"
        );
        assert_eq!(
            serde_json::to_value(&h).unwrap(),
            serde_json::json!({"launch_s": {"seconds": 34.84, "trials": 5}, "launch_cv": null})
        );
    }
}
