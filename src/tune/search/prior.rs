//! What is known before anything is measured, from how training works.
//!
//! **Recomputation adds work.** Activation recomputation re-runs forward passes in the backward
//! pass to keep fewer activations: it trades time for memory, never the other way. The tuning
//! guide (`performance-tuning-guide.md` §4, "`full` recomputes more; max memory savings") and
//! Korthikanti et al. 2022 (selective recompute costs a few % of the step, full about a third).
//! So of two candidates that agree on every other flag, the one that recomputes more is not
//! faster — and once the lighter one is known to fit (it ran), the heavier one is not worth a
//! launch. While the lighter one has not run, the heavier one waits: it runs only if the lighter
//! one does not fit.
//!
//! How much a candidate recomputes, compared only between candidates equal in every other flag:
//! * the granularity: none (or unset) < `selective` < `full` (Megatron's
//!   `recompute_granularity`, TorchTitan's `activation_checkpoint.mode`); a bare
//!   `recompute_num_layers` above 0 counts as `full`;
//! * at the same granularity, more `recompute_num_layers` is more work, except with
//!   `recompute_method: uniform`, where the count only sets the chunk size (every layer is
//!   recomputed either way), so two uniform settings are not compared;
//! * TorchTitan's op-level selective checkpointing (`selective_ac_option: op`) and `full` are
//!   not compared: op-level checkpointing recomputes less but decides op by op, which in eager
//!   mode cost more than it saved on the H200 (upstream TorchTitan v0.2.2, Qwen3 1.7B, local
//!   batch 1: 387 ms a step against 197 ms with `full`; from local batch 8 on it was faster,
//!   docs/validation/h200-2026-12-03-titan/). Both are still heavier than `none`.
//!
//! **A larger batch is not slower without a pipeline** ([`batch`]): of two candidates that
//! agree on every other flag and run in one pipeline stage, the one with the smaller micro (or
//! local) batch is not faster. The two rules combine: a candidate with a smaller batch and more
//! recomputation than one that fits is not faster than it either.

use crate::domain::study::{Candidate, Overrides};
use serde_json::Value;

pub mod batch;
pub mod layout;

/// Flags whose values set how much is recomputed.
const RECOMPUTE_KEYS: [&str; 6] = [
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
    "recompute_layer_ids",
    "activation_checkpoint.mode",
    "activation_checkpoint.selective_ac_option",
];

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.trim().to_ascii_lowercase()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// A flag's value as a number: a JSON number, or a string holding one.
fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn layers(o: &Overrides) -> f64 {
    match o.get("recompute_num_layers") {
        Some(v @ (Value::Number(_) | Value::String(_))) => number(Some(v)).unwrap_or(0.0),
        _ => match o.get("recompute_layer_ids") {
            Some(Value::Array(a)) => a.len() as f64,
            _ => 0.0,
        },
    }
}

/// A candidate's recompute settings (its values of the flags that set how much is recomputed),
/// as a key: candidates with the same key keep the same part of their activations, so the
/// memory model errs alike on them.
fn recompute_settings(o: &Overrides) -> Vec<Option<String>> {
    RECOMPUTE_KEYS.iter().map(|k| text(o.get(*k))).collect()
}

/// Whether a candidate's linears run in float8 (Megatron's `fp8` set; a TorchTitan converter
/// list naming float8): another path through memory than bf16 (torchao's float8 linears keep no
/// bf16 weight copy, and on the H200 their peaks fell further than that accounts for,
/// docs/validation/h200-2026-12-04-float8/), so the memory model errs differently on them.
fn float8_linears(o: &Overrides) -> bool {
    let fp8 = text(o.get("fp8"))
        .is_some_and(|s| !matches!(s.as_str(), "" | "none" | "null" | "false" | "~"));
    let converts = match o.get("model.converters") {
        Some(Value::Array(a)) => a
            .iter()
            .any(|c| c.as_str().is_some_and(|c| c.contains("float8"))),
        Some(Value::String(s)) => s.contains("float8"),
        _ => false,
    };
    fp8 || converts
}

/// Per candidate, the class of its recompute settings and its linears' precision (float8 or
/// not): equal numbers for equal settings (numbered in order of first appearance).
pub fn settings_classes(cands: &[Candidate]) -> Vec<usize> {
    let mut seen: Vec<(Vec<Option<String>>, bool)> = Vec::new();
    cands
        .iter()
        .map(|c| {
            let key = (
                recompute_settings(&c.overrides),
                float8_linears(&c.overrides),
            );
            seen.iter().position(|k| *k == key).unwrap_or_else(|| {
                seen.push(key);
                seen.len() - 1
            })
        })
        .collect()
}

/// (granularity rank, layers, uniform method) of a candidate's recompute settings; `None` when a
/// granularity is not one this prior knows.
fn work(o: &Overrides) -> Option<(u8, f64, bool)> {
    let g =
        text(o.get("recompute_granularity")).or_else(|| text(o.get("activation_checkpoint.mode")));
    let n = layers(o);
    let rank = match g.as_deref() {
        None | Some("none") | Some("") | Some("null") | Some("~") => u8::from(n > 0.0) * 2,
        Some("selective") => 1,
        Some("full") => 2,
        Some(_) => return None,
    };
    let uniform = text(o.get("recompute_method")).as_deref() == Some("uniform");
    Some((rank, if rank == 0 { 0.0 } else { n }, uniform))
}

/// The flags other than the recompute settings.
#[cfg(any(test, feature = "testkit"))]
fn rest(o: &Overrides) -> Vec<(&String, &Value)> {
    o.iter()
        .filter(|(k, _)| !RECOMPUTE_KEYS.contains(&k.as_str()))
        .collect()
}

/// Whether `a` recomputes more than `b` while agreeing with it on every other flag (so `a` is
/// not faster than `b`).
#[cfg(any(test, feature = "testkit"))]
pub fn recomputes_more(a: &Overrides, b: &Overrides) -> bool {
    rest(a) == rest(b) && more_work(a, b)
}

/// Whether `a`'s recompute settings are more work than `b`'s (the other flags aside).
fn more_work(a: &Overrides, b: &Overrides) -> bool {
    let (Some((ga, na, ua)), Some((gb, nb, ub))) = (work(a), work(b)) else {
        return false;
    };
    if ga != gb {
        // op-level selective against full: measured either way round (module docs)
        if ga.min(gb) == 1 && (titan_op_level(a) || titan_op_level(b)) {
            return false;
        }
        return ga > gb;
    }
    ga > 0 && !(ua || ub) && na > nb
}

/// TorchTitan's op-level selective checkpointing (the option `op`; TorchTitan's default option
/// is a layer frequency).
fn titan_op_level(o: &Overrides) -> bool {
    text(o.get("activation_checkpoint.mode")).as_deref() == Some("selective")
        && text(o.get("activation_checkpoint.selective_ac_option")).as_deref() == Some("op")
}

/// Why the rules put one candidate no faster than another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Because {
    /// The same settings with more recomputation.
    Recompute,
    /// The same settings with a smaller batch, in one pipeline stage.
    Batch,
    /// A smaller batch and more recomputation.
    Both,
}

/// Whether the rules put `a` no faster than `b`, and by which. `one_stage` says whether a
/// candidate is known to run in one pipeline stage (the batch rule needs both to).
fn not_faster(
    a: &Candidate,
    b: &Candidate,
    one_stage: &dyn Fn(&Candidate) -> bool,
) -> Option<Because> {
    let (oa, ob) = (&a.overrides, &b.overrides);
    if batch::others(oa) != batch::others(ob) {
        return None;
    }
    let smaller = match (batch::size(oa), batch::size(ob)) {
        (x, y) if x == y => false,
        (Some(x), Some(y)) if x < y && one_stage(a) && one_stage(b) => true,
        _ => return None,
    };
    let heavier = if recompute_settings(oa) == recompute_settings(ob) {
        false
    } else if more_work(oa, ob) {
        true
    } else {
        return None;
    };
    match (smaller, heavier) {
        (true, true) => Some(Because::Both),
        (true, false) => Some(Because::Batch),
        (false, true) => Some(Because::Recompute),
        (false, false) => None,
    }
}

/// Per candidate, the candidates the rules say it is not faster than, and why (indices into
/// `cands`): the same other flags with less recomputation, or (in one pipeline stage) a larger
/// batch, or both. The baseline (the current settings) is measured whatever a rule says, so it
/// has none; as the faster one it counts like any other.
pub fn faster_siblings(
    cands: &[Candidate],
    one_stage: &dyn Fn(&Candidate) -> bool,
) -> Vec<Vec<(usize, Because)>> {
    cands
        .iter()
        .map(|a| {
            if a.baseline {
                return Vec::new();
            }
            cands
                .iter()
                .enumerate()
                .filter_map(|(j, b)| not_faster(a, b, one_stage).map(|why| (j, why)))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Overrides from a JSON object (also the batch rule's tests').
    pub(super) fn o(v: Value) -> Overrides {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn candidates_with_the_same_recompute_settings_share_a_class() {
        let c = |id: usize, v: Value| Candidate {
            id,
            overrides: o(v),
            ranks: vec![],
            baseline: false,
        };
        let cands = [
            c(
                0,
                json!({"micro_batch_size": 1, "recompute_granularity": null}),
            ),
            c(
                1,
                json!({"micro_batch_size": 1, "recompute_granularity": "full",
                        "recompute_method": "uniform", "recompute_num_layers": 1}),
            ),
            c(
                2,
                json!({"micro_batch_size": 2, "recompute_granularity": null}),
            ),
            c(
                3,
                json!({"micro_batch_size": 2, "recompute_granularity": "full",
                        "recompute_method": "uniform", "recompute_num_layers": 1}),
            ),
            c(
                4,
                json!({"micro_batch_size": 2, "recompute_granularity": "full",
                        "recompute_method": "uniform", "recompute_num_layers": 2}),
            ),
        ];
        assert_eq!(settings_classes(&cands), vec![0, 1, 0, 1, 2]);
        // float8 linears are a class of their own, whatever the recipe or format (Megatron's
        // fp8 with no recompute shares TorchTitan's: classes are compared within one study)
        let f8 = |id, lbs, conv: Value, recipe: Value| {
            c(
                id,
                json!({"training.local_batch_size": lbs, "model.converters": conv,
                        "quantize.linear.float8.recipe_name": recipe}),
            )
        };
        let f = json!(["quantize.linear.float8"]);
        let cands = vec![
            f8(0, 1, Value::Null, Value::Null),
            f8(1, 1, f.clone(), json!("tensorwise")),
            f8(2, 2, f.clone(), json!("rowwise")),
            f8(3, 2, json!(["primus_turbo"]), Value::Null),
            c(4, json!({"micro_batch_size": 1, "fp8": "hybrid"})),
            c(5, json!({"micro_batch_size": 2, "fp8": null})),
        ];
        assert_eq!(settings_classes(&cands), vec![0, 1, 1, 0, 1, 0]);
    }

    #[test]
    fn more_recompute_at_the_same_other_settings_is_more_work() {
        let none = o(json!({"micro_batch_size": 4, "recompute_granularity": null}));
        let sel = o(json!({"micro_batch_size": 4, "recompute_granularity": "selective"}));
        let full = o(
            json!({"micro_batch_size": 4, "recompute_granularity": "full",
                             "recompute_method": "uniform", "recompute_num_layers": 1}),
        );
        assert!(recomputes_more(&sel, &none));
        assert!(recomputes_more(&full, &sel));
        assert!(recomputes_more(&full, &none));
        assert!(!recomputes_more(&none, &full));
        assert!(!recomputes_more(&none, &none));
        // Another micro batch: not comparable (a larger batch may fit only with recompute).
        let full8 = o(
            json!({"micro_batch_size": 8, "recompute_granularity": "full",
                              "recompute_method": "uniform", "recompute_num_layers": 1}),
        );
        assert!(!recomputes_more(&full8, &none));
        // Bare layer counts (block-like): more layers, more work.
        let l2 = o(json!({"micro_batch_size": 2, "recompute_num_layers": 2}));
        let l4 = o(json!({"micro_batch_size": 2, "recompute_num_layers": 4}));
        let l0 = o(json!({"micro_batch_size": 2, "recompute_num_layers": 0}));
        assert!(recomputes_more(&l4, &l2) && recomputes_more(&l2, &l0));
        // Uniform chunks recompute every layer: the count is not more work.
        let u1 = o(
            json!({"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}),
        );
        let u2 = o(
            json!({"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 2}),
        );
        assert!(!recomputes_more(&u2, &u1) && !recomputes_more(&u1, &u2));
        // TorchTitan's activation checkpointing.
        let t_none =
            o(json!({"training.local_batch_size": 2, "activation_checkpoint.mode": "none"}));
        let t_full =
            o(json!({"training.local_batch_size": 2, "activation_checkpoint.mode": "full"}));
        assert!(recomputes_more(&t_full, &t_none));
        // op-level selective: heavier than none, not compared with full (slower than full at
        // small batches on the H200); selective every 2nd block is lighter than full
        let t_op = o(
            json!({"training.local_batch_size": 2, "activation_checkpoint.mode": "selective",
            "activation_checkpoint.selective_ac_option": "op"}),
        );
        assert!(recomputes_more(&t_op, &t_none));
        assert!(!recomputes_more(&t_full, &t_op) && !recomputes_more(&t_op, &t_full));
        let t_2 = o(
            json!({"training.local_batch_size": 2, "activation_checkpoint.mode": "selective",
            "activation_checkpoint.selective_ac_option": "2"}),
        );
        assert!(recomputes_more(&t_full, &t_2));
        // An unknown granularity compares with nothing.
        let odd = o(json!({"micro_batch_size": 4, "recompute_granularity": "partial"}));
        assert!(!recomputes_more(&odd, &none) && !recomputes_more(&none, &odd));
    }

    #[test]
    fn siblings_leave_out_the_baseline_and_other_flags() {
        let c = |id, v: Value, baseline| Candidate {
            id,
            overrides: o(v),
            ranks: vec![],
            baseline,
        };
        let cands = vec![
            c(
                0,
                json!({"micro_batch_size": 1, "recompute_num_layers": 0}),
                false,
            ),
            c(
                1,
                json!({"micro_batch_size": 1, "recompute_num_layers": 2}),
                false,
            ),
            c(
                2,
                json!({"micro_batch_size": 2, "recompute_num_layers": 2}),
                false,
            ),
            c(
                3,
                json!({"micro_batch_size": 1, "recompute_num_layers": 4}),
                true,
            ),
        ];
        // Stages unknown: the recompute rule alone.
        let unknown = |_: &Candidate| false;
        let l = faster_siblings(&cands, &unknown);
        assert_eq!(
            l,
            vec![vec![], vec![(0, Because::Recompute)], vec![], vec![]]
        );
        // The current settings as the faster one count.
        let cands = vec![
            c(
                0,
                json!({"micro_batch_size": 1, "recompute_num_layers": 0}),
                true,
            ),
            c(
                1,
                json!({"micro_batch_size": 1, "recompute_num_layers": 2}),
                false,
            ),
        ];
        assert_eq!(
            faster_siblings(&cands, &unknown),
            vec![vec![], vec![(0, Because::Recompute)]]
        );
    }

    #[test]
    fn in_one_stage_a_smaller_batch_is_not_faster_than_a_larger_one() {
        let c = |id, v: Value| Candidate {
            id,
            overrides: o(v),
            ranks: vec![],
            baseline: false,
        };
        let cands = vec![
            c(
                0,
                json!({"micro_batch_size": 4, "recompute_granularity": null, "fp8": null}),
            ),
            c(
                1,
                json!({"micro_batch_size": 8, "recompute_granularity": null, "fp8": null}),
            ),
            c(
                2,
                json!({"micro_batch_size": 4, "recompute_granularity": "full", "fp8": null}),
            ),
            c(
                3,
                json!({"micro_batch_size": 8, "recompute_granularity": "full", "fp8": null}),
            ),
            c(
                4,
                json!({"micro_batch_size": 4, "recompute_granularity": null, "fp8": "e4m3"}),
            ),
        ];
        let one = |_: &Candidate| true;
        let l = faster_siblings(&cands, &one);
        assert_eq!(l[0], vec![(1, Because::Batch)]);
        assert!(l[1].is_empty());
        // A smaller batch and more recomputation: not faster than either lighter or larger one;
        // a larger batch with more recomputation is not compared (it may fit only so).
        assert_eq!(
            l[2],
            vec![
                (0, Because::Recompute),
                (1, Because::Both),
                (3, Because::Batch)
            ]
        );
        assert_eq!(l[3], vec![(1, Because::Recompute)]);
        // Another precision is another setting.
        assert!(l[4].is_empty());
        // Not known to run in one stage (a pipeline's bubble grows with the micro batch): the
        // recompute rule alone.
        let piped = |c: &Candidate| c.id != 1;
        let l = faster_siblings(&cands, &piped);
        assert!(l[0].is_empty());
        assert_eq!(l[2], vec![(0, Because::Recompute), (3, Because::Batch)]);
        // TorchTitan's local batch.
        let t = |id, lbs, mode: &str| {
            c(
                id,
                json!({"training.local_batch_size": lbs, "activation_checkpoint.mode": mode}),
            )
        };
        let cands = vec![t(0, 2, "none"), t(1, 4, "none"), t(2, 2, "full")];
        let l = faster_siblings(&cands, &one);
        assert_eq!(l[0], vec![(1, Because::Batch)]);
        assert_eq!(l[2], vec![(0, Because::Recompute), (1, Because::Both)]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// The rules' "not faster than" is irreflexive, antisymmetric and acyclic on any set of
        /// candidates (each step makes the batch larger or the recomputation less, the other
        /// no worse), so waiting for a faster sibling never cycles: a cycle would leave its
        /// candidates waiting for ever (never run). The baseline waits for nothing.
        #[test]
        fn not_faster_never_cycles(
            picks in proptest::collection::vec(
                (0usize..4, 0usize..7, 0usize..3, 0usize..2, proptest::bool::ANY), 1..24),
        ) {
            let recompute = [
                json!({}),
                json!({"recompute_granularity": "selective"}),
                json!({"recompute_granularity": "full", "recompute_num_layers": 2}),
                json!({"recompute_granularity": "full", "recompute_num_layers": 4}),
                json!({"recompute_granularity": "full", "recompute_method": "uniform", "recompute_num_layers": 1}),
                json!({"activation_checkpoint.mode": "selective", "activation_checkpoint.selective_ac_option": "op"}),
                json!({"activation_checkpoint.mode": "full"}),
            ];
            let cands: Vec<Candidate> = picks
                .iter()
                .enumerate()
                .map(|(id, &(b, r, fp8, key, baseline))| {
                    let mut v = recompute[r].clone();
                    let k = if key == 0 { "micro_batch_size" } else { "training.local_batch_size" };
                    v[k] = json!(1u64 << b);
                    v["fp8"] = [Value::Null, json!("e4m3"), json!("hybrid")][fp8].clone();
                    Candidate { id, overrides: o(v), ranks: vec![], baseline }
                })
                .collect();
            let one = |c: &Candidate| !c.id.is_multiple_of(3);
            let n = cands.len();
            let rel = |a: usize, b: usize| {
                !cands[a].baseline && not_faster(&cands[a], &cands[b], &one).is_some()
            };
            for a in 0..n {
                proptest::prop_assert!(!rel(a, a));
                for b in 0..n {
                    proptest::prop_assert!(!(rel(a, b) && rel(b, a)), "#{a} and #{b}");
                }
            }
            // Acyclic: candidates that wait for no one left can always be taken away.
            let mut left: Vec<usize> = (0..n).collect();
            while !left.is_empty() {
                let free: Vec<usize> = left
                    .iter()
                    .copied()
                    .filter(|&a| !left.iter().any(|&b| rel(a, b)))
                    .collect();
                proptest::prop_assert!(!free.is_empty(), "a cycle among {left:?}");
                left.retain(|a| !free.contains(a));
            }
            // And the siblings list is that relation.
            let l = faster_siblings(&cands, &one);
            for (a, sibs) in l.iter().enumerate() {
                let listed: Vec<usize> = sibs.iter().map(|x| x.0).collect();
                let want: Vec<usize> = (0..n).filter(|&b| rel(a, b)).collect();
                proptest::prop_assert_eq!(listed, want);
            }
        }
    }
}
