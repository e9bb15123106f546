//! Megatron-LM's own argument defaults at Primus' pinned Megatron-LM: what
//! `MegatronArgBuilder` (primus/backends/megatron/argument_builder.py) fills in for every
//! Megatron argument no Primus param sets. The table (presets/megatron-defaults.tsv) is dumped
//! from Megatron's parser by docs/validation/primus-loader.sh; enum members are written by name.
//!
//! A key no file of a module's chain sets is therefore either a Megatron argument, with this
//! default, or nothing at all: Primus passes no value for it (a model chain that does not
//! extend `language_model.yaml` has none of that file's keys).

use super::catalog::json_to_value;
use super::resolve::Module;
use crate::domain::value::Value;
use std::collections::BTreeMap;
use std::sync::LazyLock;

const TABLE: &str = include_str!("../../presets/megatron-defaults.tsv");

/// The Megatron-LM commit the table was read from (Primus fd1eeabb's `third_party/Megatron-LM`).
pub const PIN: &str = "d3528a21";

static DEFAULTS: LazyLock<BTreeMap<String, Value>> = LazyLock::new(|| parse(TABLE));

fn parse(text: &str) -> BTreeMap<String, Value> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (dest, json) = l.split_once('\t')?;
            let v: serde_json::Value = serde_json::from_str(json).ok()?;
            Some((dest.to_string(), json_to_value(&v)))
        })
        .collect()
}

/// Megatron-LM's default for argument `dest` (None: not a Megatron argument at the pin).
pub fn get(dest: &str) -> Option<&'static Value> {
    DEFAULTS.get(dest)
}

/// What a key that no file of the module's chain sets amounts to where Primus runs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unset {
    /// A Megatron argument: Megatron-LM's default at the pin.
    Megatron(&'static Value),
    /// Nothing: not a Megatron argument (or not a Megatron module), so Primus passes no value.
    Absent,
}

impl Unset {
    pub fn value(self) -> Option<&'static Value> {
        match self {
            Unset::Megatron(v) => Some(v),
            Unset::Absent => None,
        }
    }

    /// Where the value comes from, for people.
    pub fn describe(self) -> String {
        match self {
            Unset::Megatron(_) => format!("Megatron-LM default ({PIN}; no file sets it)"),
            Unset::Absent => format!(
                "not set: no file of this chain sets it and Megatron-LM {PIN} has no such argument"
            ),
        }
    }
}

/// `key` as Primus runs `module` when no file sets it.
pub fn unset(module: &Module, key: &str) -> Unset {
    match get(key) {
        Some(v) if module.is_megatron() => Unset::Megatron(v),
        _ => Unset::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_megatron_defaults_at_the_pin() {
        assert!(DEFAULTS.len() > 600, "{}", DEFAULTS.len());
        assert_eq!(get("sequence_parallel"), Some(&Value::Bool(false)));
        assert_eq!(get("num_query_groups"), Some(&Value::Int(1)));
        assert_eq!(get("tensor_model_parallel_size"), Some(&Value::Int(1)));
        assert_eq!(get("attention_backend"), Some(&Value::Str("auto".into())));
        assert_eq!(get("iterations_to_skip"), Some(&Value::List(Vec::new())));
        // Keys of Primus' language_model.yaml that Megatron-LM no longer has.
        for gone in [
            "async_tensor_model_parallel_allreduce",
            "virtual_pipeline_model_parallel_size",
            "moe_use_legacy_grouped_gemm",
        ] {
            assert_eq!(get(gone), None, "{gone}");
        }
    }
}
