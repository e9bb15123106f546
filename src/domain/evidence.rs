//! What produced a figure: a measurement on a GPU with a profile, a CPU stand-in, a rule with
//! its source, or a model's prediction. Carried from where a figure is made to where it is
//! shown, so that nothing is presented as what it is not.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Basis {
    /// Measured by a profile that runs the workload on a GPU (named when telemetry saw it).
    Measured {
        profile: String,
        gpu: Option<String>,
    },
    /// Measured on a stand-in (the CPU proxy): it shows how the knobs it models move the step,
    /// not GPU evidence.
    Proxy { profile: String },
    /// A rule, with where it comes from (JSON: `source: {"kind": "reference", "text"}`; a
    /// plain string, as stored before, is read too).
    Rule {
        #[serde(
            serialize_with = "crate::domain::source::serialize_reference",
            deserialize_with = "crate::domain::source::deserialize_reference"
        )]
        source: String,
    },
    /// Predicted by a model, never run.
    Predicted { model: String },
}

impl Basis {
    /// Real GPU evidence.
    pub fn is_gpu_evidence(&self) -> bool {
        matches!(self, Basis::Measured { .. })
    }

    /// A measured basis names the GPU its telemetry saw, when it named none; any other basis
    /// is as it is.
    pub fn seen_on(&self, gpu: Option<&str>) -> Basis {
        match self {
            Basis::Measured { profile, gpu: None } => Basis::Measured {
                profile: profile.clone(),
                gpu: gpu.map(str::to_string),
            },
            b => b.clone(),
        }
    }

    /// Whether its figures are a CPU stand-in's.
    pub fn is_proxy(&self) -> bool {
        matches!(self, Basis::Proxy { .. })
    }

    /// What a cost in its trials' time is counted in: GPU-seconds for a GPU measurement, host
    /// CPU-seconds for a stand-in.
    pub fn cost_unit(&self) -> &'static str {
        if self.is_proxy() { "CPU" } else { "GPU" }
    }

    /// The one-word kind (`measured`, `proxy`, `rule`, `predicted`).
    pub fn kind(&self) -> &'static str {
        match self {
            Basis::Measured { .. } => "measured",
            Basis::Proxy { .. } => "proxy",
            Basis::Rule { .. } => "rule",
            Basis::Predicted { .. } => "predicted",
        }
    }
}

impl fmt::Display for Basis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Basis::Measured {
                profile,
                gpu: Some(g),
            } => write!(f, "measured on {g} with {profile}"),
            Basis::Measured { profile, gpu: None } => {
                write!(f, "measured with {profile} (GPU not identified)")
            }
            Basis::Proxy { profile } => {
                write!(f, "proxy ({profile}: a CPU stand-in, not GPU evidence)")
            }
            Basis::Rule { source } => write!(f, "rule ({source})"),
            Basis::Predicted { model } => write!(f, "predicted ({model})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_basis_says_what_it_is() {
        let m = Basis::Measured {
            profile: "primus".into(),
            gpu: Some("AMD Instinct MI300X".into()),
        };
        assert_eq!(m.to_string(), "measured on AMD Instinct MI300X with primus");
        assert!(m.is_gpu_evidence());
        let p = Basis::Proxy {
            profile: "proxy-cpu".into(),
        };
        assert!(p.to_string().contains("not GPU evidence") && !p.is_gpu_evidence());
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["kind"], "proxy");
        assert_eq!(serde_json::from_value::<Basis>(v).unwrap(), p);
    }
}
