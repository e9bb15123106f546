//! An acknowledgement holds for every route to what it governs. Acknowledging a rule is a
//! decision about the flags its advice sets (`turbo-grouped-gemm`: `use_turbo_grouped_gemm`;
//! a lint code: the flag of its one-value fix), so no other advice may set them either: not a
//! prerequisite another rule brings (the sync-free stage's grouped GEMM), not a companion lint
//! asks for (`enable_primus_turbo` with a Turbo kernel), not a study's pick. A bundle that would
//! — the recommendations of one rule with their companions, or a study's whole pick — is held
//! back whole, with the acknowledgement's reason: half of it is not what was advised.

use super::bundle::{Withheld, as_text};
use super::{Recommendation, rules::fixes};
use crate::domain::advice::{self, Ack};

/// The flags (or launch variables) a rule id governs: an advice rule's own, or the flag a lint
/// code's fix sets; none for an id that sets nothing.
pub fn governed(id: &str) -> Vec<&'static str> {
    match advice::find(id) {
        Some(r) => r.flags.to_vec(),
        None => fixes(id).into_iter().map(|f| f.flag).collect(),
    }
}

/// What is left of `recs` once every bundle that changes a flag an acknowledgement governs is
/// held back, the held-back recommendations with why, and the rules (bundles) held back.
pub fn hold_back(
    recs: Vec<Recommendation>,
    acks: &[Ack],
) -> (Vec<Recommendation>, Vec<Withheld>, Vec<String>) {
    let mut why: Vec<(String, String)> = Vec::new();
    for r in &recs {
        // A value already set is not a change: nothing is written for it.
        if r.value == r.current || why.iter().any(|(rule, _)| *rule == r.rule) {
            continue;
        }
        let Some(a) = acks
            .iter()
            .find(|a| a.rule != r.rule && governed(&a.rule).contains(&r.flag.as_str()))
        else {
            continue;
        };
        why.push((
            r.rule.clone(),
            format!(
                "it needs `{}` → {}, and `{}` is acknowledged: {}",
                r.flag,
                as_text(&r.value),
                a.rule,
                a.reason
            ),
        ));
    }
    let (gone, kept): (Vec<_>, Vec<_>) = recs
        .into_iter()
        .partition(|r| why.iter().any(|(rule, _)| *rule == r.rule));
    let withheld = gone
        .into_iter()
        .map(|rec| {
            let why = why
                .iter()
                .find(|(rule, _)| *rule == rec.rule)
                .map(|(_, w)| format!("held back: {w}"))
                .unwrap_or_default();
            Withheld { rec, why }
        })
        .collect();
    (
        kept,
        withheld,
        why.into_iter().map(|(rule, _)| rule).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::recommend::Basis;
    use serde_json::json;

    fn rec(rule: &str, flag: &str, value: serde_json::Value) -> Recommendation {
        Recommendation {
            flag: flag.into(),
            value,
            current: json!(false),
            basis: Basis::Rule,
            reason: "test".into(),
            source: "test".into(),
            env: false,
            rule: rule.into(),
            companion_of: None,
        }
    }

    fn ack(rule: &str) -> Ack {
        Ack {
            rule: rule.into(),
            reason: "crashes on our ROCm".into(),
            at: None,
            from: "primus-tune.toml:2:1".into(),
        }
    }

    #[test]
    fn a_bundle_that_sets_an_acknowledged_flag_is_held_back_whole() {
        let recs = vec![
            rec("sync-free-moe", "turbo_sync_free_moe_stage", json!(2)),
            rec("sync-free-moe", "use_turbo_grouped_gemm", json!(true)),
            rec("overlap-grad-reduce", "overlap_grad_reduce", json!(true)),
        ];
        let (kept, held, rules) = hold_back(recs, &[ack("turbo-grouped-gemm")]);
        assert_eq!(rules, vec!["sync-free-moe".to_string()]);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].flag, "overlap_grad_reduce");
        assert_eq!(held.len(), 2);
        assert!(
            held[1].why.contains("`use_turbo_grouped_gemm` → true")
                && held[1].why.contains("`turbo-grouped-gemm` is acknowledged")
                && held[1].why.contains("crashes on our ROCm"),
            "{}",
            held[1].why
        );
        // A lint code governs the flag its fix sets.
        assert_eq!(
            governed("turbo-grouped-gemm-legacy"),
            ["moe_use_legacy_grouped_gemm"]
        );
        assert_eq!(governed("primus-turbo"), ["enable_primus_turbo"]);
    }

    #[test]
    fn a_value_already_set_is_no_change_and_not_held_back() {
        let mut r = rec("study", "use_turbo_grouped_gemm", json!(true));
        r.current = json!(true);
        let (kept, held, _) = hold_back(vec![r], &[ack("turbo-grouped-gemm")]);
        assert_eq!((kept.len(), held.len()), (1, 0));
    }
}
