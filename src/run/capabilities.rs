//! What a launch profile can do, declared in its YAML (`capabilities:`), so that the engines ask
//! the profile instead of its name: how many processes it starts, the log level its iteration
//! lines need, whether it trains, how it uses hipBLASLt, which knobs its measurements model.
//!
//! A profile that declares nothing is a real training launch on GPUs: one rank per GPU, it
//! trains, calls hipBLASLt directly and models every knob.

use serde::{Deserialize, Serialize};

/// How a profile's workload occupies the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaunchKind {
    /// One rank per GPU: the world size is the GPU count (`--gpus`, `GPUS_PER_NODE` × `NNODES`,
    /// the GPUs detected on this node, else the launch starts 8 with the world unknown).
    #[default]
    Gpus,
    /// A single process on this machine whatever the world size (the proxies; its world is that
    /// one process unless `--gpus` or the launcher's variables name the world it stands in for).
    OneProcess,
}

/// How a profile's workload calls hipBLASLt, which decides the HipBLASLt tuning stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hipblaslt {
    /// Never calls it (a CPU proxy): GEMM tuning stages do not apply.
    None,
    /// Calls it; stage 2 runs Primus' offline tuning script directly.
    #[default]
    Direct,
    /// Primus' launcher with its `PRIMUS_HIPBLASLT_TUNING_STAGE` hook: stage 2 goes through it.
    PrimusHook,
}

/// The knobs whose effect a profile's measurements show.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Models {
    /// `all`: a real training run shows every knob.
    #[default]
    All,
    /// Only these flags (a proxy models the shape, the batch, recompute, MoE routing, ...).
    Only(Vec<String>),
}

impl Models {
    pub fn covers(&self, flag: &str) -> bool {
        match self {
            Models::All => true,
            Models::Only(flags) => flags.iter().any(|f| f == flag),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Capabilities {
    /// How many processes it starts.
    pub launch: LaunchKind,
    /// The workload trains and prints iterations (false: a job that completes by exiting 0).
    pub trains: bool,
    /// The console level its iteration lines are logged at: the trial sets the config's
    /// `stderr_sink_level` to it when the config has another (Primus logs them at DEBUG).
    pub log_level: Option<String>,
    pub hipblaslt: Hipblaslt,
    /// It runs the built-in proxy's scaled-down shape: tokens per second count what ran.
    pub scaled_shape: bool,
    /// A CPU stand-in: its figures show how the knobs it models move the step, not GPU evidence.
    pub stand_in: bool,
    /// `all` or the list of flags its measurements model.
    #[serde(with = "models_serde")]
    pub models: Models,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            launch: LaunchKind::Gpus,
            trains: true,
            log_level: None,
            hipblaslt: Hipblaslt::Direct,
            scaled_shape: false,
            stand_in: false,
            models: Models::All,
        }
    }
}

impl Capabilities {
    /// The flags of `flags` its measurements do not model.
    pub fn unmodeled<'a>(&self, flags: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut out: Vec<String> = flags
            .into_iter()
            .filter(|f| !self.models.covers(f))
            .map(str::to_string)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The workload calls hipBLASLt, so the GEMM tuning stages apply to it.
    pub fn calls_hipblaslt(&self) -> bool {
        self.hipblaslt != Hipblaslt::None
    }
}

/// `models: all` or `models: [flag, ...]`.
mod models_serde {
    use super::Models;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize, Serialize)]
    #[serde(untagged)]
    enum Raw {
        Word(String),
        List(Vec<String>),
    }

    pub fn serialize<S: Serializer>(m: &Models, s: S) -> Result<S::Ok, S::Error> {
        match m {
            Models::All => Raw::Word("all".into()),
            Models::Only(v) => Raw::List(v.clone()),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Models, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Word(w) if w == "all" => Ok(Models::All),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "`models` is `all` or a list of flags, not `{w}`"
            ))),
            Raw::List(v) => Ok(Models::Only(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_a_real_gpu_launch() {
        let c: Capabilities = serde_json::from_str("{}").unwrap();
        assert_eq!(c, Capabilities::default());
        assert!(c.trains && c.calls_hipblaslt() && c.models.covers("turbo_deepep_num_cu"));
    }

    #[test]
    fn declared_fields_parse_and_unknown_ones_are_refused() {
        let c: Capabilities = serde_json::from_str(
            r#"{"launch": "one-process", "hipblaslt": "none", "models": ["micro_batch_size"]}"#,
        )
        .unwrap();
        assert_eq!(c.launch, LaunchKind::OneProcess);
        assert!(!c.calls_hipblaslt());
        assert!(c.models.covers("micro_batch_size") && !c.models.covers("fp8"));
        assert!(serde_json::from_str::<Capabilities>(r#"{"gpu": true}"#).is_err());
        assert!(serde_json::from_str::<Capabilities>(r#"{"models": "some"}"#).is_err());
    }
}
