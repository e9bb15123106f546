//! Recommendations. Without measurements they are rules — the Primus performance-tuning guide,
//! Primus' patch notes and validation code, and the lint engine's fixes — each labelled `rule`
//! with its source and its rule id. Measured recommendations come from a study (`measured`, or
//! `proxy` for a CPU stand-in's, with evidence).
//!
//! What reaches the user passes three filters: rules the user acknowledged are set apart
//! ([`crate::domain::advice::Ack`]) with every bundle that would set a flag they govern
//! ([`held`]), Primus-on-AMD advice is "does not apply" for upstream
//! Megatron-LM or an NVIDIA GPU ([`target`]), and the whole set is linted with the companion
//! changes it needs; what lint would still refuse is withheld with the reason ([`bundle`]).

pub mod bundle;
pub mod held;
mod rules;
pub mod target;

pub use bundle::Withheld;
#[cfg(any(test, feature = "testkit"))]
pub use bundle::{Checked, lint_clean};
#[cfg(any(test, feature = "testkit"))]
pub use held::governed;
pub use held::hold_back;
pub use rules::rules;
pub use target::{Framework, NotApplicable, Target};

use crate::telemetry::hardware::GpuModel;
use serde::Serialize;
use serde_json::Value as Json;

/// The rule id of a study's pick (every flag of it, and the companions lint brings with it).
pub const STUDY: &str = "study";

/// What a recommendation rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// A rule of the guide, Primus or Megatron, with its source.
    Rule,
    /// A study's pick, measured on a GPU.
    Measured,
    /// A study's pick on a CPU stand-in: how the knob moves the step, not GPU evidence.
    Proxy,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    pub flag: String,
    /// The recommended value.
    pub value: Json,
    /// The effective value now (`null` when unset).
    pub current: Json,
    pub basis: Basis,
    pub reason: String,
    /// Where the rule or the evidence comes from (JSON: `{"kind": "reference", "text"}`).
    #[serde(serialize_with = "crate::config::source::serialize_reference")]
    pub source: String,
    /// An environment variable of the launch (not written into the YAML by `--apply`).
    pub env: bool,
    /// The rule it follows ([`crate::domain::advice::RULES`], a lint code, or `study` for a
    /// study's pick): what `--ack` names.
    pub rule: String,
    /// The recommendation this one comes with because lint requires it (its flag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub companion_of: Option<String>,
}

/// What the rules know about the machine and the job.
#[derive(Debug, Clone, Default)]
pub struct Context<'a> {
    pub gpu: Option<&'a GpuModel>,
    /// The world size the job runs on (lint's world rules; None: unknown).
    pub world: Option<crate::megatron::World>,
    /// Rules the user acknowledged: not recommended, and nothing that follows from them.
    pub acked: Vec<String>,
    /// Lint findings the user suppressed (`primus-tune.toml`, a comment): no fix is advised
    /// for them.
    pub quiet: Vec<crate::config::diag::Diagnostic>,
    /// Lint's findings on the experiment as it stands, less those in `quiet`, when the caller
    /// has them (None: the rules lint it themselves).
    pub found: Option<&'a [crate::config::diag::Diagnostic]>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::env::Env;
    use crate::config::overrides::Override;
    use crate::config::{Experiment, LoadOptions};
    use crate::domain::value::Value;
    use serde_json::json;
    use std::path::Path;

    const MOE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";

    fn rules_here(exp: &Experiment, ctx: &Context) -> Vec<Recommendation> {
        let st = crate::gemm::status::of_experiment(exp, &Env::default(), None, None);
        rules(exp, &Env::default(), ctx, &st)
    }

    /// Load options with `--set`-style overrides.
    pub(super) fn opts(sets: &[(&str, Value)]) -> LoadOptions {
        LoadOptions {
            overrides: sets
                .iter()
                .map(|(k, v)| Override::new(*k, v.clone()))
                .collect(),
            ..LoadOptions::default()
        }
    }

    fn load(sets: &[(&str, Value)]) -> Experiment {
        Experiment::load(Path::new(MOE), &opts(sets)).unwrap()
    }

    fn find<'a>(r: &'a [Recommendation], flag: &str) -> Option<&'a Recommendation> {
        r.iter().find(|x| x.flag == flag)
    }

    fn gpu(name: &str) -> &'static GpuModel {
        crate::telemetry::hardware::lookup(name).unwrap()
    }

    #[test]
    fn ep16_with_too_many_cus_gets_32_from_the_lint_fix() {
        let exp = load(&[
            ("expert_model_parallel_size", Value::Int(16)),
            ("use_turbo_deepep", Value::Bool(true)),
            ("moe_router_dtype", Value::Str("fp32".into())),
            ("moe_shared_expert_overlap", Value::Bool(false)),
            ("turbo_deepep_num_cu", Value::Int(80)),
        ]);
        let r = rules_here(&exp, &Context::default());
        let cu = find(&r, "turbo_deepep_num_cu").expect("a CU recommendation");
        assert_eq!(cu.value, json!(32));
        assert_eq!(cu.current, json!(80));
        assert_eq!(cu.basis, Basis::Rule);
        assert!(cu.source.contains("deepep-num-cu-ep16"), "{}", cu.source);
    }

    #[test]
    fn ep8_gets_64_cus_when_deepep_is_on() {
        let exp = load(&[
            ("expert_model_parallel_size", Value::Int(8)),
            ("use_turbo_deepep", Value::Bool(true)),
            ("moe_router_dtype", Value::Str("bf16".into())),
            ("turbo_deepep_num_cu", Value::Int(32)),
        ]);
        let r = rules_here(&exp, &Context::default());
        assert_eq!(find(&r, "turbo_deepep_num_cu").unwrap().value, json!(64));
        // And the DeepEP prerequisites it breaks are fixed too.
        assert_eq!(find(&r, "moe_router_dtype").unwrap().value, json!("fp32"));
    }

    #[test]
    fn the_sync_free_stage_follows_the_gpu() {
        let exp = load(&[
            ("turbo_sync_free_moe_stage", Value::Int(0)),
            ("use_turbo_grouped_gemm", Value::Bool(false)),
        ]);
        let mi300 = Context {
            gpu: Some(gpu("AMD Instinct MI300X")),
            ..Context::default()
        };
        let r = rules_here(&exp, &mi300);
        assert_eq!(
            find(&r, "turbo_sync_free_moe_stage").unwrap().value,
            json!(2)
        );
        assert_eq!(
            find(&r, "use_turbo_grouped_gemm").unwrap().value,
            json!(true)
        );
        let mi355 = Context {
            gpu: Some(gpu("AMD Instinct MI355X")),
            ..Context::default()
        };
        let r = rules_here(&exp, &mi355);
        assert_eq!(
            find(&r, "turbo_sync_free_moe_stage").unwrap().value,
            json!(1)
        );
        let r = rules_here(&exp, &Context::default());
        assert!(
            find(&r, "turbo_sync_free_moe_stage").is_none(),
            "unknown GPU: no rule"
        );
    }

    #[test]
    fn hipblaslt_tuning_is_recommended_until_done() {
        let exp = load(&[]);
        let r = rules_here(&exp, &Context::default());
        let t = find(&r, "PRIMUS_HIPBLASLT_TUNING_STAGE").unwrap();
        assert!(t.env);
        assert_eq!(t.value, json!("1"));
    }

    #[test]
    fn nothing_is_recommended_that_is_already_set() {
        let exp = load(&[]);
        let r = rules_here(&exp, &Context::default());
        for x in &r {
            assert_ne!(x.value, x.current, "{x:?}");
        }
    }
}

#[cfg(test)]
mod advice_tests {
    //! The filters: lint-clean bundles with companions, withheld advice, the target.
    use super::tests::opts;
    use super::*;
    use crate::config::catalog::Catalog;
    use crate::config::env::Env;
    use crate::config::overrides::Override;
    use crate::config::{Experiment, LoadOptions};
    use crate::domain::value::Value;
    use serde_json::Value as Json;
    use serde_json::json;
    use std::path::Path;

    const MOE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";

    fn advise(o: &LoadOptions, ctx: &Context) -> (Experiment, Vec<Recommendation>) {
        let exp = Experiment::load(Path::new(MOE), o).unwrap();
        let st = crate::gemm::status::of_experiment(&exp, &Env::default(), None, None);
        let r = rules(&exp, &Env::default(), ctx, &st);
        (exp, r)
    }

    fn errors(o: &LoadOptions, recs: &[Recommendation]) -> Vec<&'static str> {
        let mut with = o.clone();
        for r in recs.iter().filter(|r| !r.env) {
            with.overrides.push(Override::new(
                r.flag.clone(),
                crate::config::catalog::json_to_value(&r.value),
            ));
        }
        let exp = Experiment::load(Path::new(MOE), &with).unwrap();
        crate::config::lint::lint(&exp, &with.env, None, Catalog::builtin())
            .into_iter()
            .filter(|d| d.severity == crate::config::diag::Severity::Error)
            .map(|d| d.code)
            .collect()
    }

    #[test]
    fn the_turbo_grouped_gemm_comes_with_the_legacy_switch_off() {
        let o = opts(&[
            ("use_turbo_grouped_gemm", Value::Bool(false)),
            ("moe_use_legacy_grouped_gemm", Value::Bool(true)),
        ]);
        let (exp, recs) = advise(&o, &Context::default());
        assert!(recs.iter().any(|r| r.flag == "use_turbo_grouped_gemm"));
        // Alone, the advice is refused by its own lint.
        assert!(errors(&o, &recs).contains(&"turbo-grouped-gemm-legacy"));
        let checked = lint_clean(&exp, &o, Catalog::builtin(), recs);
        let legacy = checked
            .recs
            .iter()
            .find(|r| r.flag == "moe_use_legacy_grouped_gemm")
            .expect("the companion");
        assert_eq!(legacy.value, json!(false));
        assert_eq!(
            legacy.companion_of.as_deref(),
            Some("use_turbo_grouped_gemm")
        );
        assert_eq!(legacy.rule, crate::domain::advice::TURBO_GROUPED_GEMM);
        assert!(checked.withheld.is_empty(), "{:?}", checked.withheld);
        assert_eq!(errors(&o, &checked.recs), Vec::<&str>::new());
    }

    #[test]
    fn advice_lint_refuses_without_a_fix_is_withheld_with_the_reason() {
        let o = opts(&[("fp16", Value::Bool(true)), ("bf16", Value::Bool(false))]);
        let exp = Experiment::load(Path::new(MOE), &o).unwrap();
        let bf16 = Recommendation {
            flag: "bf16".into(),
            value: json!(true),
            current: json!(false),
            basis: Basis::Rule,
            reason: "test".into(),
            source: "test".into(),
            env: false,
            rule: "mixed-precision".into(),
            companion_of: None,
        };
        let keep = Recommendation {
            flag: "CUDA_DEVICE_MAX_CONNECTIONS".into(),
            value: json!("1"),
            env: true,
            rule: "cuda-max-connections".into(),
            ..bf16.clone()
        };
        let checked = lint_clean(&exp, &o, Catalog::builtin(), vec![keep.clone(), bf16]);
        assert_eq!(checked.recs, vec![keep]);
        assert_eq!(checked.withheld.len(), 1);
        let w = &checked.withheld[0];
        assert_eq!(w.rec.flag, "bf16");
        assert!(w.why.contains("bf16-fp16-exclusive"), "{}", w.why);
    }

    /// A pick of "no recomputation" sets three flags to null; lint must see null, not the
    /// string "null" that Primus' command-line typing would make of the text.
    #[test]
    fn a_pick_of_nulls_passes_lint_as_nulls() {
        let o = opts(&[
            ("recompute_granularity", Value::Str("full".into())),
            ("recompute_method", Value::Str("uniform".into())),
            ("recompute_num_layers", Value::Int(1)),
        ]);
        let exp = Experiment::load(Path::new(MOE), &o).unwrap();
        let pick = |flag: &str, current: Json| Recommendation {
            flag: flag.into(),
            value: Json::Null,
            current,
            basis: Basis::Measured,
            reason: "test".into(),
            source: "study s".into(),
            env: false,
            rule: "study".into(),
            companion_of: None,
        };
        let recs = vec![
            pick("recompute_granularity", json!("full")),
            pick("recompute_method", json!("uniform")),
            pick("recompute_num_layers", json!(1)),
        ];
        let checked = lint_clean(&exp, &o, Catalog::builtin(), recs.clone());
        assert!(checked.withheld.is_empty(), "{:?}", checked.withheld);
        assert_eq!(checked.recs, recs);
        // And what `--apply` hands `set`: YAML null, while a string that reads as null is quoted.
        assert_eq!(bundle::as_yaml(&Json::Null), "null");
        assert_eq!(bundle::as_yaml(&json!("null")), "\"null\"");
        assert_eq!(bundle::as_yaml(&json!("selective")), "selective");
    }

    #[test]
    fn errors_the_experiment_already_has_are_not_the_advices_doing() {
        // Already refused: Turbo grouped GEMM with the legacy switch on. The lint fix for it is
        // advice of its own; nothing else is withheld because of it.
        let o = opts(&[("moe_use_legacy_grouped_gemm", Value::Bool(true))]);
        let (exp, recs) = advise(&o, &Context::default());
        let checked = lint_clean(&exp, &o, Catalog::builtin(), recs);
        assert!(checked.withheld.is_empty(), "{:?}", checked.withheld);
        let fix = checked
            .recs
            .iter()
            .find(|r| r.flag == "moe_use_legacy_grouped_gemm")
            .unwrap();
        assert_eq!(fix.rule, "turbo-grouped-gemm-legacy");
    }

    #[test]
    fn primus_amd_advice_does_not_apply_to_nvidia_or_upstream_megatron() {
        let o = opts(&[
            ("enable_primus_turbo", Value::Bool(false)),
            ("tensor_model_parallel_size", Value::Int(2)),
        ]);
        let (_, recs) = advise(&o, &Context::default());
        assert!(recs.iter().any(|r| r.flag == "enable_primus_turbo"));
        assert!(
            recs.iter()
                .any(|r| r.flag == "PRIMUS_HIPBLASLT_TUNING_STAGE")
        );
        let amd = Target {
            framework: Framework::Primus,
            vendor: Some("amd"),
        };
        let (kept, na) = target::split(recs.clone(), &amd);
        assert_eq!(kept.len(), recs.len());
        assert!(na.is_empty());
        for t in [
            Target {
                framework: Framework::Primus,
                vendor: Some("nvidia"),
            },
            Target {
                framework: Framework::UpstreamMegatron,
                vendor: Some("amd"),
            },
        ] {
            let (kept, na) = target::split(recs.clone(), &t);
            assert!(
                kept.iter()
                    .all(|r| !r.flag.contains("turbo") && !r.flag.contains("HIPBLASLT")),
                "{kept:?}"
            );
            // What is not Primus-on-AMD stays: one connection with TP > 1.
            assert!(kept.iter().any(|r| r.flag == "CUDA_DEVICE_MAX_CONNECTIONS"));
            let flags: Vec<&str> = na
                .iter()
                .flat_map(|n| n.flags.iter().map(String::as_str))
                .collect();
            assert!(flags.contains(&"enable_primus_turbo"), "{flags:?}");
            let rules: Vec<&str> = na.iter().map(|n| n.rule.as_str()).collect();
            assert!(rules.contains(&"hipblaslt-tuning"), "{rules:?}");
            assert!(na.iter().all(|n| !n.why.is_empty()));
        }
    }

    #[test]
    fn an_acknowledged_rule_is_not_advised_nor_what_follows_from_it() {
        let o = opts(&[
            ("turbo_sync_free_moe_stage", Value::Int(0)),
            ("use_turbo_deepep", Value::Bool(false)),
            ("turbo_deepep_num_cu", Value::Int(32)),
        ]);
        let mi300 = crate::telemetry::hardware::lookup("MI300X").unwrap();
        let ctx = Context {
            gpu: Some(mi300),
            ..Context::default()
        };
        let (_, recs) = advise(&o, &ctx);
        assert!(recs.iter().any(|r| r.flag == "turbo_sync_free_moe_stage"));
        assert!(recs.iter().any(|r| r.flag == "turbo_deepep_num_cu"));
        let acked = Context {
            acked: vec!["sync-free-moe".into()],
            ..ctx
        };
        let (_, recs) = advise(&o, &acked);
        assert!(!recs.iter().any(|r| r.rule == "sync-free-moe"));
        // DeepEP's CU count only mattered through the stage that turns DeepEP on.
        assert!(!recs.iter().any(|r| r.flag == "turbo_deepep_num_cu"));
    }

    #[test]
    fn the_layout_rules_advise_sequence_parallelism_and_interleaving() {
        let o = opts(&[
            ("tensor_model_parallel_size", Value::Int(2)),
            ("sequence_parallel", Value::Bool(false)),
            ("expert_model_parallel_size", Value::Int(1)),
            ("num_layers", Value::Int(28)),
            ("pipeline_model_parallel_size", Value::Int(2)),
            ("global_batch_size", Value::Int(8)),
            ("micro_batch_size", Value::Int(1)),
        ]);
        let world = crate::megatron::World::flag(8).unwrap();
        let ctx = Context {
            world: Some(world),
            ..Context::default()
        };
        let (_, recs) = advise(&o, &ctx);
        let rec = |flag: &str| recs.iter().find(|r| r.flag == flag);
        let sp = rec("sequence_parallel").expect("sequence parallelism");
        // The example is an MoE model, where Megatron refuses TP without sequence parallelism
        // at the first step: the lint's fix comes first, with its code as the rule.
        assert_eq!(
            (sp.value.clone(), sp.rule.as_str()),
            (json!(true), "moe-tp-sequence-parallel")
        );
        // TP 2 × PP 2 on 8 GPUs: DP 2, 4 micro batches a step; the bubble is 1/4.
        let v = rec("num_virtual_stages_per_pipeline_rank").expect("interleaving");
        assert_eq!(v.value, json!(2));
        assert!(v.reason.contains("25 %"), "{}", v.reason);
        // Without the world the micro batches a step are unknown: no interleaving advice.
        let (_, recs) = advise(&o, &Context::default());
        assert!(
            !recs
                .iter()
                .any(|r| r.flag == "num_virtual_stages_per_pipeline_rank")
        );
    }
}
