//! The flag catalog (`presets/flags.yaml`): every flag and environment variable the tuning
//! guide's checklist touches, with type, default, allowed values, help and doc reference.

use super::yaml;
use crate::domain::value::Value;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;

/// The catalog shipped in the binary.
pub const FLAGS_YAML: &str = include_str!("../../presets/flags.yaml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// HipBLASLt GEMM tuning.
    Gemms,
    /// Primus-Turbo kernels.
    Kernels,
    Precision,
    Memory,
    /// Communication overlap.
    Comm,
    Moe,
    /// Run shape: batch, sequence, parallelism, model size, logging of the run.
    Run,
}

impl Step {
    pub const CHECKLIST: [Step; 6] = [
        Step::Gemms,
        Step::Kernels,
        Step::Precision,
        Step::Memory,
        Step::Comm,
        Step::Moe,
    ];
    pub const ALL: [Step; 7] = [
        Step::Gemms,
        Step::Kernels,
        Step::Precision,
        Step::Memory,
        Step::Comm,
        Step::Moe,
        Step::Run,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Step::Gemms => "GEMMs (HipBLASLt tuning)",
            Step::Kernels => "Kernels (Primus-Turbo)",
            Step::Precision => "Precision",
            Step::Memory => "Memory",
            Step::Comm => "Communication overlap",
            Step::Moe => "MoE",
            Step::Run => "Run shape and parallelism",
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Step::Gemms => "gemms",
            Step::Kernels => "kernels",
            Step::Precision => "precision",
            Step::Memory => "memory",
            Step::Comm => "comm",
            Step::Moe => "moe",
            Step::Run => "run",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A key of the module parameters (Megatron flat, TorchTitan dotted).
    Flag,
    /// An environment variable.
    Env,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    Megatron,
    Torchtitan,
}

impl Backend {
    pub fn from_framework(f: &str) -> Option<Backend> {
        match f {
            "megatron" => Some(Backend::Megatron),
            "torchtitan" => Some(Backend::Torchtitan),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlagType {
    Bool,
    Int,
    Float,
    String,
    Enum,
    /// A list, e.g. `[1, 2]`.
    List,
    /// A list of ints or a comma-separated string of ints (`recompute_layer_ids`).
    IntList,
    Path,
}

impl FlagType {
    pub fn label(self) -> &'static str {
        match self {
            FlagType::Bool => "bool",
            FlagType::Int => "int",
            FlagType::Float => "float",
            FlagType::String => "string",
            FlagType::Enum => "enum",
            FlagType::List => "list",
            FlagType::IntList => "int list",
            FlagType::Path => "path",
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Flag {
    pub name: String,
    #[serde(default = "default_kind")]
    pub kind: Kind,
    pub backends: Vec<Backend>,
    pub step: Step,
    #[serde(rename = "type")]
    pub ty: FlagType,
    /// Default as the presets (or, for env vars, the launcher) set it; `null` = None.
    #[serde(default)]
    pub default: serde_json::Value,
    /// Where the default comes from (`primus_turbo.yaml`, `Megatron-LM`, `prepare_experiment.sh`).
    #[serde(default)]
    pub default_from: Option<String>,
    #[serde(default)]
    pub nullable: bool,
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    /// Allowed values of an enum (strings as written in YAML).
    #[serde(default)]
    pub values: Vec<String>,
    pub help: String,
    /// Where to read more (seed guide section, preset file, patch notes).
    pub doc: String,
    /// Set for flags Primus removed: what to use instead.
    #[serde(default)]
    pub removed: Option<String>,
}

fn default_kind() -> Kind {
    Kind::Flag
}

impl Flag {
    pub fn default_value(&self) -> Value {
        json_to_value(&self.default)
    }

    pub fn applies_to(&self, backend: Option<Backend>) -> bool {
        match backend {
            Some(b) => self.backends.contains(&b),
            None => true,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    pub flags: Vec<Flag>,
}

static BUILTIN: LazyLock<Catalog> = LazyLock::new(|| {
    Catalog::parse(FLAGS_YAML).unwrap_or_else(|e| panic!("presets/flags.yaml is invalid: {e}"))
});

impl Catalog {
    /// The catalog compiled into the binary (checked by a test, so this cannot fail at run time).
    pub fn builtin() -> &'static Catalog {
        &BUILTIN
    }

    pub fn parse(text: &str) -> Result<Catalog, String> {
        let node = yaml::parse(text)
            .map_err(|e| e.to_string())?
            .ok_or("empty catalog")?;
        let cat: Catalog =
            serde_json::from_value(node.typed().to_json()).map_err(|e| e.to_string())?;
        cat.check()?;
        Ok(cat)
    }

    fn check(&self) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        for f in &self.flags {
            if !seen.insert((f.name.as_str(), f.kind)) {
                return Err(format!("flag `{}` is listed twice", f.name));
            }
            if f.ty == FlagType::Enum && f.values.is_empty() {
                return Err(format!("enum flag `{}` has no values", f.name));
            }
            if f.backends.is_empty() {
                return Err(format!("flag `{}` names no backend", f.name));
            }
        }
        Ok(())
    }

    pub fn flag(&self, name: &str) -> Option<&Flag> {
        self.flags
            .iter()
            .find(|f| f.name == name && f.kind == Kind::Flag)
    }

    pub fn env_var(&self, name: &str) -> Option<&Flag> {
        self.flags
            .iter()
            .find(|f| f.name == name && f.kind == Kind::Env)
    }

    /// Flags (not env vars) for a backend, in catalog order.
    pub fn flags_for(&self, backend: Option<Backend>) -> impl Iterator<Item = &Flag> {
        self.flags
            .iter()
            .filter(move |f| f.kind == Kind::Flag && f.applies_to(backend))
    }

    pub fn env_vars(&self) -> impl Iterator<Item = &Flag> {
        self.flags.iter().filter(|f| f.kind == Kind::Env)
    }

    /// The module's resolved keys that no flag of `backend` describes, with their leaves: what
    /// Primus passes on as it is (`show --all`'s "Other keys", the Flags screen's `other key`).
    pub fn other_keys<'m>(
        &self,
        module: &'m super::resolve::Module,
        backend: Option<Backend>,
    ) -> Vec<(String, &'m super::tree::Leaf)> {
        module
            .params
            .leaves()
            .into_iter()
            .filter(|(k, _)| self.flag(k).is_none_or(|f| !f.applies_to(backend)))
            .collect()
    }
}

pub use crate::domain::value::from_json as json_to_value;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalog_parses_and_covers_the_guide() {
        let c = Catalog::parse(FLAGS_YAML).expect("flags.yaml parses");
        for name in [
            "enable_primus_turbo",
            "use_turbo_attention",
            "use_turbo_grouped_gemm",
            "use_turbo_deepep",
            "turbo_deepep_num_cu",
            "turbo_sync_free_moe_stage",
            "use_turbo_gemm",
            "moe_router_dtype",
            "moe_shared_expert_overlap",
            "fp8_recipe",
            "use_precision_aware_optimizer",
            "recompute_granularity",
            "recompute_layer_ids",
            "overlap_grad_reduce",
            "overlap_param_gather",
            "optimizer_cpu_offload",
            "use_distributed_optimizer",
            "overlap_moe_expert_parallel_comm",
            "use_turbo_grouped_mlp",
            "use_turbo_parallel_linear",
            "primus_turbo.enable_primus_turbo",
            "activation_checkpoint.mode",
        ] {
            assert!(c.flag(name).is_some(), "catalog lacks flag {name}");
        }
        for name in [
            "PRIMUS_HIPBLASLT_TUNING",
            "PRIMUS_HIPBLASLT_TUNING_STAGE",
            "HIPBLASLT_TUNING_OVERRIDE_FILE",
            "TE_HIPBLASLT_TUNING_ALGO_COUNT",
            "TE_HIPBLASLT_TUNING_RUN_COUNT",
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "PRIMUS_DETERMINISTIC",
        ] {
            assert!(c.env_var(name).is_some(), "catalog lacks env var {name}");
        }
        assert!(c.flag("use_turbo_grouped_mlp").unwrap().removed.is_some());
    }

    #[test]
    fn bad_catalogs_are_refused() {
        assert!(Catalog::parse("flags:\n  - name: x\n").is_err());
        let dup = "flags:\n  - {name: a, backends: [megatron], step: run, type: int, help: h, doc: d}\n  - {name: a, backends: [megatron], step: run, type: int, help: h, doc: d}\n";
        assert!(Catalog::parse(dup).unwrap_err().contains("twice"));
    }
}
