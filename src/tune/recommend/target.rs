//! What the job runs on, for the advice: Primus or upstream Megatron-LM, an AMD or an NVIDIA
//! GPU. Primus-Turbo, sync-free MoE, DeepEP and the HipBLASLt tuning hook are Primus on AMD
//! (ROCm); for anything else that advice does not apply and is said so instead of given.

use super::Recommendation;
use crate::domain::advice;
use serde::Serialize;

/// The training code the job launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// Primus (its Megatron or TorchTitan backend): the experiment's own launcher.
    #[default]
    Primus,
    /// Upstream Megatron-LM (a profile whose overrides are Megatron's `--flag-name`s).
    UpstreamMegatron,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Target {
    pub framework: Framework,
    /// `amd` or `nvidia`; None when the GPU is unknown (the advice assumes Primus' AMD).
    pub vendor: Option<&'static str>,
}

impl Target {
    /// Why Primus-on-AMD advice does not apply to this job; None when it does.
    pub fn excludes_primus_amd(&self) -> Option<&'static str> {
        match (self.framework, self.vendor) {
            (Framework::UpstreamMegatron, _) => Some(
                "the job runs upstream Megatron-LM, which has no Primus-Turbo kernels, sync-free MoE, Turbo DeepEP or Primus' HipBLASLt tuning hook",
            ),
            (Framework::Primus, Some("nvidia")) => Some(
                "the GPU is an NVIDIA GPU: Primus-Turbo, Turbo DeepEP and hipBLASLt tuning are for AMD GPUs (ROCm)",
            ),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        let fw = match self.framework {
            Framework::Primus => "Primus",
            Framework::UpstreamMegatron => "upstream Megatron-LM",
        };
        match self.vendor {
            Some(v) => format!("{fw} on {}", v.to_uppercase()),
            None => format!("{fw} (GPU vendor unknown)"),
        }
    }
}

/// A rule the advice leaves out for this job, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotApplicable {
    pub rule: String,
    /// The flags it would have set.
    pub flags: Vec<String>,
    pub why: String,
}

/// Splits off the Primus-on-AMD recommendations the target has no use for, one entry per rule.
pub fn split(
    recs: Vec<Recommendation>,
    target: &Target,
) -> (Vec<Recommendation>, Vec<NotApplicable>) {
    let Some(why) = target.excludes_primus_amd() else {
        return (recs, Vec::new());
    };
    let mut kept = Vec::new();
    let mut out: Vec<NotApplicable> = Vec::new();
    for r in recs {
        if !advice::is_primus_amd(&r.rule) {
            kept.push(r);
            continue;
        }
        match out.iter_mut().find(|n| n.rule == r.rule) {
            Some(n) => n.flags.push(r.flag),
            None => out.push(NotApplicable {
                rule: r.rule,
                flags: vec![r.flag],
                why: why.to_string(),
            }),
        }
    }
    (kept, out)
}
