//! Every code lint can report: with the advice's rule ids ([`crate::domain::advice::RULES`])
//! they are the one id space that `recommend --ack`, `primus-tune.toml` and the
//! `# primus-tune: ignore[...]` comments name. A test below holds this list to the codes the
//! lint sources emit.

/// A file the loader cannot read (reported by the app's lint, at the place the loader names).
pub const LOAD_ERROR: &str = "load-error";
/// A suppression (in `primus-tune.toml` or a comment) names an id that is neither a lint code
/// nor an advice rule.
pub const UNKNOWN_RULE: &str = "unknown-rule";
/// `primus-tune.toml` cannot be read: its TOML, or a key or value that is not what it takes.
pub const BAD_IGNORE_FILE: &str = "bad-ignore-file";

/// The lint codes, sorted.
pub const CODES: &[&str] = &[
    "async-tp-without-tp",
    BAD_IGNORE_FILE,
    "bf16-fp16-exclusive",
    "bool-written-as-int",
    "ce-fusion-deterministic",
    "context-parallel-seq-length",
    "cpu-offload-needs-precision-aware",
    "cpu-offload-with-pp",
    "cuda-max-connections",
    "deepep-num-cu-ep16",
    "deepep-pad-to-capacity",
    "deepep-router-dtype",
    "deepep-shared-expert-overlap",
    "duplicate-key",
    "env-read-by-launcher",
    "ep-overlap-prereq",
    "experts-expert-parallel",
    "ffn-tensor-parallel",
    "first-last-bf16-delayed",
    "float-read-as-string",
    "fp4-param-needs-fp4",
    "fp8-fp4-exclusive",
    "fp8-param-gather-needs-dist-opt",
    "fsdp2-dist-opt",
    "global-batch-divisibility",
    "grouped-gemm-without-padding-prereq",
    "heads-tensor-parallel",
    "hipblaslt-stage-deterministic",
    "hipblaslt-stage-invalid",
    "hipblaslt-stage-without-master",
    "hipblaslt-stage3-missing-file",
    "int-out-of-range",
    "invalid-value",
    LOAD_ERROR,
    "model-value-dropped",
    "moe-ffn-expert-tensor-parallel",
    "moe-layer-freq",
    "moe-tp-sequence-parallel",
    "null-value",
    "out-of-range",
    "overlap-param-gather-needs-dist-opt",
    "overlap-param-gather-needs-grad-reduce",
    "overlap-param-gather-with-step",
    "pipeline-layers",
    "pipeline-layout-stages",
    "query-groups-tensor-parallel",
    "recompute-full-method",
    "recompute-full-num-layers",
    "recompute-layer-ids-format",
    "recompute-layer-ids-prereq",
    "recompute-layer-ids-range",
    "recompute-num-layers-range",
    "recompute-selective-args",
    "recompute-without-granularity",
    "removed-flag",
    "sequence-parallel-seq-length",
    "sequence-parallel-tp1",
    "size-range",
    "sync-free-needs-grouped-gemm",
    "sync-free-overrides-flag",
    "sync-free-requires-turbo",
    "sync-free-stage-range",
    "titan-expert-tensor-parallel",
    "titan-global-batch",
    "titan-heads-tensor-parallel",
    "titan-pipeline-microbatch",
    "titan-seq-divisor",
    "titan-world-expert-parallel",
    "titan-world-parallel",
    "turbo-flag-without-master",
    "turbo-gemm-fp4-recipe",
    "turbo-gemm-fp8-recipe",
    "turbo-gemm-tp",
    "turbo-grouped-gemm-legacy",
    "unknown-key",
    UNKNOWN_RULE,
    "unlisted-key",
    "vpp-args-exclusive",
    "vpp-layers",
    "vpp-microbatches",
    "vpp-pipeline-size",
    "vpp-size-ignored",
    "world-expert-parallel",
    "world-model-parallel",
    "wrong-type",
    "yaml11-bool",
    "yaml11-octal",
];

/// Whether `id` is a lint code.
pub fn is_code(id: &str) -> bool {
    CODES.contains(&id)
}

/// Every id a decision may name: the advice's rules, then the lint codes not already among
/// them.
pub fn known_ids() -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = crate::domain::advice::RULES.iter().map(|r| r.id).collect();
    for c in CODES {
        if !ids.contains(c) {
            ids.push(c);
        }
    }
    ids
}

/// Whether `id` names an advice rule or a lint code.
pub fn is_known(id: &str) -> bool {
    is_code(id) || crate::domain::advice::find(id).is_some()
}

/// Why `id` is not an id, with both lists and the nearest id ("did you mean").
pub fn unknown(id: &str) -> String {
    let rules: Vec<&str> = crate::domain::advice::RULES.iter().map(|r| r.id).collect();
    format!(
        "unknown rule `{id}` (advice rules: {}; lint codes: {}){}",
        rules.join(", "),
        CODES.join(", "),
        crate::util::suggest::did_you_mean(id, &known_ids())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lint sources, as compiled.
    const SOURCES: &[(&str, &str)] = &[
        ("env_rules.rs", include_str!("env_rules.rs")),
        ("layout.rs", include_str!("layout.rs")),
        ("megatron.rs", include_str!("megatron.rs")),
        ("mod.rs", include_str!("mod.rs")),
        ("sizes.rs", include_str!("sizes.rs")),
        ("titan_layout.rs", include_str!("titan_layout.rs")),
        ("titan_world.rs", include_str!("titan_world.rs")),
        ("torchtitan.rs", include_str!("torchtitan.rs")),
        ("types.rs", include_str!("types.rs")),
        ("world.rs", include_str!("world.rs")),
    ];

    /// Every kebab-case literal with a hyphen in the lint sources is a code they emit (no other
    /// such literal appears there): each one is listed, and each listed one is emitted.
    #[test]
    fn the_list_is_every_code_lint_emits() {
        let re = regex::Regex::new(r#""([a-z0-9]+(?:-[a-z0-9]+)+)""#).unwrap();
        let mut found: Vec<&str> = SOURCES
            .iter()
            .flat_map(|(_, text)| re.captures_iter(text).map(|c| c.get(1).unwrap().as_str()))
            .collect();
        found.extend([LOAD_ERROR, UNKNOWN_RULE, BAD_IGNORE_FILE]);
        found.sort_unstable();
        found.dedup();
        let missing: Vec<&&str> = found.iter().filter(|c| !is_code(c)).collect();
        assert!(missing.is_empty(), "not in CODES: {missing:?}");
        let stale: Vec<&&str> = CODES.iter().filter(|c| !found.contains(c)).collect();
        assert!(stale.is_empty(), "listed, never emitted: {stale:?}");
        let mut sorted = CODES.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, CODES);
    }

    #[test]
    fn one_id_space_for_advice_rules_and_lint_codes() {
        assert!(is_known("bool-written-as-int") && is_known("primus-turbo"));
        assert!(!is_known("bool-writen-as-int"));
        let e = unknown("bool-writen-as-int");
        assert!(e.contains("advice rules: primus-turbo, "), "{e}");
        assert!(e.contains("lint codes: async-tp-without-tp, "), "{e}");
        assert!(e.contains("did you mean `bool-written-as-int`?"), "{e}");
        assert!(unknown("primus-trubo").contains("did you mean `primus-turbo`?"));
    }
}
