//! A config's layout space, whichever backend it trains with: the typed parameters the memory
//! model and the prior read (a TorchTitan config as the same model in Megatron's terms,
//! [`crate::megatron::titan::megatron_view`]), the bounds on a world, the config's own layout,
//! and how a layout is written back as the backend's keys ([`Frame`]).

use super::titan;
use super::{Bounds, Layout};
use crate::domain::study::{Knob, MemoryTrend, Overrides};
use crate::domain::value::Value;
use crate::megatron::Params;
use crate::megatron::titan::Titan;
use serde_json::json;
use std::collections::BTreeMap;

/// How a layout is written as a backend's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    Megatron { moe: bool },
    Titan(titan::Frame),
}

impl Frame {
    /// The keys that set `l` on `world` GPUs.
    pub fn overrides(&self, l: &Layout, world: u64) -> Overrides {
        match self {
            Frame::Megatron { moe } => l.overrides(*moe),
            Frame::Titan(f) => f.overrides(l, world),
        }
    }

    /// The backend a space of these layouts requires ([`crate::tune::space::Space::requires`]).
    pub fn backend(&self) -> &'static str {
        match self {
            Frame::Megatron { .. } => "megatron",
            Frame::Titan(_) => "torchtitan",
        }
    }

    /// The lint rules a layout of this backend can break: a candidate that breaks one is out
    /// even when the experiment's own layout breaks it too.
    pub fn rules(&self) -> &'static [&'static str] {
        match self {
            Frame::Megatron { .. } => super::RULES,
            Frame::Titan(_) => titan::RULES,
        }
    }

    /// The keys that set `l`'s structure on `world` GPUs, without those its micro batch sets
    /// ([`Frame::micro_knob`]'s).
    pub fn structural(&self, l: &Layout, world: u64) -> Overrides {
        match self {
            Frame::Megatron { moe } => {
                let mut o = l.overrides(*moe);
                o.remove(MICRO);
                o
            }
            Frame::Titan(f) => f.structural(l, world),
        }
    }

    /// The knob that varies a layout's micro batch over `micros`: Megatron's
    /// `micro_batch_size`; TorchTitan's local batch and pipeline microbatch together
    /// (`@micro`: which one counts depends on PP, and with PP the layout sets the local batch
    /// itself).
    pub fn micro_knob(&self, micros: &[u64]) -> Knob {
        let (flag, values) = match self {
            Frame::Megatron { .. } => (MICRO, micros.iter().map(|m| json!(m)).collect()),
            Frame::Titan(_) => (
                "@micro",
                micros.iter().map(|m| titan::micro_values(*m)).collect(),
            ),
        };
        Knob {
            flag: flag.to_string(),
            values,
            memory: MemoryTrend::Increasing,
        }
    }

    /// Whether the micro-batch knob varies before the layout: a later knob's keys win, and a
    /// TorchTitan layout with PP sets the local batch the micro knob also sets.
    pub fn micro_first(&self) -> bool {
        matches!(self, Frame::Titan(_))
    }
}

/// Megatron's micro-batch flag.
const MICRO: &str = "micro_batch_size";

/// A config's layout space on a world (its typed parameters are [`params_of`]'s).
#[derive(Debug, Clone)]
pub struct Framed {
    pub bounds: Bounds,
    pub current: Layout,
    pub frame: Frame,
}

/// The typed parameters of resolved values of either backend on `world` GPUs.
pub fn params_of(values: &BTreeMap<String, Value>, world: u64) -> Params {
    match crate::megatron::titan::megatron_view(values, Some(world)) {
        Some(view) => Params::from_values(&view),
        None => Params::from_values(values),
    }
}

/// The layout space of resolved values on `world` GPUs, `gpus_per_node` a node; a TorchTitan
/// config without a global batch to hold is refused with the reason.
pub fn of_config(
    values: &BTreeMap<String, Value>,
    world: u64,
    gpus_per_node: u64,
) -> Result<Framed, String> {
    let Some(t) = Titan::from_values(values) else {
        let (params, bounds, current) = super::of_config(values, world, gpus_per_node);
        let moe = params.moe.is_some();
        return Ok(Framed {
            bounds,
            current,
            frame: Frame::Megatron { moe },
        });
    };
    let frame = titan::Frame::of(&t, world).ok_or_else(|| {
        format!(
            "a TorchTitan layout holds the global batch: give training.global_batch_size, or a \
             training.local_batch_size whose degrees tile {world} GPUs"
        )
    })?;
    let params = params_of(values, world);
    let mut bounds = super::bounds(&params, false, world, gpus_per_node);
    bounds.vpp = vec![None];
    bounds.notes.push(
        "VPP none: TorchTitan loops stages by parallelism.pipeline_parallel_schedule, which \
         every layout keeps as written"
            .into(),
    );
    bounds.notes.push(format!(
        "MBS is the local batch without PP and the pipeline microbatch with PP; every layout \
         holds the global batch at {} (training.global_batch_size written out)",
        frame.global
    ));
    if t.flavor.is_none() {
        bounds.notes.push(format!(
            "PP 1: the layers of {} are not known here",
            t.model_label()
        ));
    }
    Ok(Framed {
        bounds,
        current: titan::layout_of(&t),
        frame: Frame::Titan(frame),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::overrides::values_of as values;

    #[test]
    fn a_torchtitan_llama_has_its_layers_and_no_interleaving() {
        let v = values(
            "model.name=llama3 model.flavor=8B training.seq_len=8192 \
             training.local_batch_size=2 parallelism.data_parallel_shard_degree=-1",
        );
        let f = of_config(&v, 8, 8).unwrap();
        assert_eq!(f.bounds.pp, vec![1, 2, 4, 8], "32 layers");
        assert_eq!(f.bounds.vpp, vec![None]);
        assert_eq!(f.bounds.cp, vec![1, 2, 4, 8], "a sequence of 8192");
        assert_eq!(f.current.micro, 2);
        assert_eq!(f.frame.backend(), "torchtitan");
        assert!(f.frame.micro_first());
        assert_eq!(f.frame.micro_knob(&[1, 2]).flag, "@micro");
        assert_eq!(params_of(&v, 8).shape.layers, Some(32));
        let no_batch = values("model.name=llama3 model.flavor=8B");
        assert!(
            of_config(&no_batch, 8, 8)
                .unwrap_err()
                .contains("global batch")
        );
    }

    #[test]
    fn a_megatron_config_keeps_its_own_frame() {
        let v = values("num_layers=16 micro_batch_size=2 num_experts=8");
        let f = of_config(&v, 8, 8).unwrap();
        assert_eq!(f.frame, Frame::Megatron { moe: true });
        assert!(!f.frame.micro_first());
        assert_eq!(f.frame.micro_knob(&[1, 2]).flag, "micro_batch_size");
        assert_eq!(f.current.micro, 2);
    }
}
