//! What the workspace's earlier studies measured about the knobs: the priors a sweep's search
//! starts from ([`crate::tune::search::SearchConfig::effects`]).

use crate::domain::study::StudyRecord;
use crate::store::Store;
use crate::tune::replay::learn_study;
use crate::tune::search::effects::Effects;

/// The knob effects of the workspace's finished studies run with `profile` (the same knobs on
/// another profile, a CPU stand-in say, measure something else), other than the study named
/// `except` (the one being run or resumed). A study that swept knobs its profile does not
/// model measured noise, and teaches nothing.
pub fn knob_effects(store: &Store, profile: &str, except: &str) -> Effects {
    let mut effects = Effects::default();
    for row in store.list_studies().unwrap_or_default() {
        if row.name == except {
            continue;
        }
        let Some(rec) = row
            .notes
            .as_deref()
            .and_then(|n| serde_json::from_str::<StudyRecord>(n).ok())
        else {
            continue;
        };
        if rec.profile != profile || !rec.unmodeled.is_empty() {
            continue;
        }
        learn_study(&mut effects, &rec);
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::study::{Candidate, Knob, MemoryTrend};
    use serde_json::json;
    use std::path::Path;

    /// A finished study of micro batch 1, 2, 4 × two CU counts with `profile`: micro batch
    /// 1 → 2 is `d` (log), 2 → 4 another `d`, and each candidate wobbles by ±0.2 %.
    fn stored(store: &Store, name: &str, profile: &str, d: f64, unmodeled: &[&str]) {
        let mut cands = Vec::new();
        for (i, mbs) in [1u64, 2, 4].iter().enumerate() {
            for (j, cu) in [16u64, 32].iter().enumerate() {
                let wobble = [0.002, -0.002, 0.0][(i + j) % 3];
                let ms = 1000.0 * (d * i as f64 + 0.01 * j as f64 + wobble).exp();
                cands.push(json!({
                    "id": cands.len(),
                    "overrides": {"micro_batch_size": mbs, "turbo_deepep_num_cu": cu},
                    "verdict": "slower", "why": "", "n": 8, "step_ms": ms,
                }));
            }
        }
        // An OOM with a step time it never had would teach nothing: it is left out.
        cands.push(json!({
            "id": cands.len(),
            "overrides": {"micro_batch_size": 8, "turbo_deepep_num_cu": 16},
            "verdict": "oom", "why": "", "n": 0, "step_ms": 1.0,
        }));
        let rec = json!({
            "space": "moe", "config": "/x/exp.yaml", "profile": profile, "gpus": 1,
            "candidates": cands, "gpu_seconds": 100.0, "trials": 7, "log": [],
            "unmodeled": unmodeled,
        });
        let id = store
            .create_study(name, Path::new("/x/exp.yaml"), "sweep")
            .unwrap();
        store.set_study_notes(id, Some(&rec.to_string())).unwrap();
    }

    fn mbs_knob() -> Knob {
        Knob {
            flag: "micro_batch_size".into(),
            values: vec![json!(1), json!(2), json!(4), json!(8)],
            memory: MemoryTrend::Increasing,
        }
    }

    #[test]
    fn a_sweep_learns_from_the_finished_studies_of_its_profile_only() {
        let store = Store::open_in_memory().unwrap();
        for (i, d) in [-0.05, -0.07, -0.06].iter().enumerate() {
            stored(&store, &format!("s{i}"), "megatron", *d, &[]);
        }
        // Other profiles, studies of unmodelled knobs and the study itself do not count.
        stored(&store, "proxy", "proxy-cpu", 0.5, &[]);
        stored(&store, "demo", "megatron", 0.5, &["turbo_deepep_num_cu"]);
        stored(&store, "this", "megatron", 0.5, &[]);
        // A study without a record (never finished) is skipped.
        store
            .create_study("running", Path::new("/x/exp.yaml"), "sweep")
            .unwrap();
        let e = knob_effects(&store, "megatron", "this");
        assert_eq!(e.studies(), 3);
        let (m, _) = e.pair(&mbs_knob(), 0, 1).expect("micro batch 1 → 2");
        assert!((m + 0.06).abs() < 0.003, "{m}");
        // The OOM at micro batch 8 gave no step time: 4 → 8 has no prior.
        assert!(e.pair(&mbs_knob(), 2, 3).is_none());
        // Its priors reach the search: a space over micro batch 2 and 4 gets one.
        let cands: Vec<Candidate> = [1usize, 2]
            .iter()
            .enumerate()
            .map(|(id, &r)| Candidate {
                id,
                overrides: Default::default(),
                ranks: vec![r],
                baseline: false,
            })
            .collect();
        assert_eq!(e.pairs(&[mbs_knob()], &cands).len(), 1);
        assert_eq!(knob_effects(&store, "proxy-cpu", "").studies(), 1);
    }

    #[test]
    fn a_group_knob_is_learned_as_the_space_stored_it() {
        // Recompute none → selective → full as one `@recompute` knob: +4 %, then +10 %.
        let recompute = Knob {
            flag: "@recompute".into(),
            values: vec![
                json!({"recompute_granularity": null, "recompute_num_layers": null}),
                json!({"recompute_granularity": "selective", "recompute_num_layers": null}),
                json!({"recompute_granularity": "full", "recompute_num_layers": 1}),
            ],
            memory: MemoryTrend::Decreasing,
        };
        let mbs = Knob {
            flag: "micro_batch_size".into(),
            values: vec![json!(1), json!(2)],
            memory: MemoryTrend::Increasing,
        };
        let knobs = [mbs, recompute];
        let store = Store::open_in_memory().unwrap();
        for i in 0..3 {
            let mut cands = Vec::new();
            for (m, mbs) in [1u64, 2].iter().enumerate() {
                for (r, (g, n, f)) in [
                    (json!(null), json!(null), 0.0),
                    (json!("selective"), json!(null), 0.04),
                    (json!("full"), json!(1), 0.14),
                ]
                .into_iter()
                .enumerate()
                {
                    let wobble = [0.002, -0.002][(m + r + i) % 2];
                    cands.push(json!({
                        "id": cands.len(),
                        "overrides": {"micro_batch_size": mbs, "recompute_granularity": g,
                                      "recompute_num_layers": n},
                        "verdict": "slower", "why": "", "n": 8,
                        "step_ms": 500.0 * (f - 0.05 * m as f64 + wobble).exp(),
                    }));
                }
            }
            let rec = json!({
                "space": "mbs-recompute", "config": "/x/exp.yaml", "profile": "megatron",
                "gpus": 1, "candidates": cands, "gpu_seconds": 10.0, "trials": 6, "log": [],
                "knobs": knobs,
            });
            let id = store
                .create_study(&format!("s{i}"), Path::new("/x/exp.yaml"), "sweep")
                .unwrap();
            store.set_study_notes(id, Some(&rec.to_string())).unwrap();
        }
        let e = knob_effects(&store, "megatron", "");
        let (sel, _) = e.pair(&knobs[1], 0, 1).expect("none → selective");
        let (full, _) = e.pair(&knobs[1], 1, 2).expect("selective → full");
        assert!(
            (sel - 0.04).abs() < 0.005 && (full - 0.10).abs() < 0.005,
            "{sel} {full}"
        );
        let (m, _) = e.pair(&knobs[0], 0, 1).unwrap();
        assert!((m + 0.05).abs() < 0.005, "{m}");
    }
}
