//! TorchTitan's parallel layouts: the same [`Layout`] written as TorchTitan's keys. FSDP's shard
//! degree is what the world leaves (`data_parallel_shard_degree: -1`) after the config's
//! replicate degree × TP × PP × CP; TorchTitan has no interleaving knob of Megatron's kind (its
//! looped schedules are `pipeline_parallel_schedule`, kept as written), and its TP always
//! splits the norms' sequence (sequence parallelism).
//!
//! The training problem stays the config's: the global batch is written out (a `-1` resolves to
//! the local batch × the data-parallel size, which a layout changes), and a layout's micro batch
//! is the local batch without PP (torchtitan accumulates gradients over `global / (local × DP)`
//! steps) or the pipeline microbatch with PP, where the local batch is the global one over DP
//! (`local / microbatch` microbatches per schedule).

use super::Layout;
use crate::domain::study::Overrides;
use crate::megatron::titan::Titan;
use serde_json::json;

/// The keys a TorchTitan layout sets ([`Frame::overrides`]; the expert ones only for MoE).
pub const FLAGS: &[&str] = &[
    "parallelism.context_parallel_degree",
    "parallelism.data_parallel_shard_degree",
    "parallelism.expert_parallel_degree",
    "parallelism.expert_tensor_parallel_degree",
    "parallelism.pipeline_parallel_degree",
    "parallelism.pipeline_parallel_microbatch_size",
    "parallelism.tensor_parallel_degree",
    "training.global_batch_size",
    "training.local_batch_size",
];

/// The lint rules a TorchTitan layout can break (torchtitan's start-up asserts and the
/// heads' split).
pub const RULES: &[&str] = &[
    "titan-expert-tensor-parallel",
    "titan-global-batch",
    "titan-heads-tensor-parallel",
    "titan-pipeline-microbatch",
    "titan-seq-divisor",
    "titan-world-expert-parallel",
    "titan-world-parallel",
];

/// What a TorchTitan config fixes for all its layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The global batch every layout trains with (the config's, or its `-1` resolved).
    pub global: u64,
    pub moe: bool,
    /// The config ties expert TP to TP (`expert_tensor_parallel_degree` = TP > 1): a layout
    /// keeps them tied, else ETP is 1 (torchtitan accepts only those two).
    pub etp_tied: bool,
}

impl Frame {
    /// The frame of a config on `world` GPUs (None: no global batch to hold, as neither a
    /// positive global batch nor a local batch that tiles the world is given).
    pub fn of(t: &Titan, world: u64) -> Option<Frame> {
        let global = t
            .global_batch
            .or_else(|| Some(t.local_batch? * t.data_parallel(world)?))?;
        Some(Frame {
            global,
            moe: t.flavor.and_then(|f| f.moe).is_some(),
            etp_tied: t.tp > 1 && t.etp == t.tp,
        })
    }

    /// The keys that set `l` on `world` GPUs.
    pub fn overrides(&self, l: &Layout, world: u64) -> Overrides {
        let mut o = Overrides::new();
        let mut put = |k: &str, v: serde_json::Value| {
            o.insert(k.to_string(), v);
        };
        put("parallelism.tensor_parallel_degree", json!(l.tp));
        put("parallelism.pipeline_parallel_degree", json!(l.pp));
        put("parallelism.context_parallel_degree", json!(l.cp));
        put("parallelism.data_parallel_shard_degree", json!(-1));
        if self.moe {
            put("parallelism.expert_parallel_degree", json!(l.ep));
            let etp = if self.etp_tied { l.tp } else { 1 };
            put("parallelism.expert_tensor_parallel_degree", json!(etp));
        }
        put("training.global_batch_size", json!(self.global));
        put(PP_MICRO, json!(l.micro));
        // With PP, one schedule runs the whole global batch of a rank; a DP that does not
        // divide it keeps the micro batch as the local one, which the lint then refuses
        // (`titan-global-batch`).
        let local = match l.dp(world) {
            Some(dp) if l.pp > 1 && self.global.is_multiple_of(dp) => self.global / dp,
            _ => l.micro,
        };
        put(LOCAL, json!(local));
        o
    }

    /// [`Frame::overrides`] without the keys the micro batch sets ([`micro_values`]): the
    /// pipeline microbatch, and the local batch unless PP makes it the layout's.
    pub fn structural(&self, l: &Layout, world: u64) -> Overrides {
        let mut o = self.overrides(l, world);
        o.remove(PP_MICRO);
        if l.pp == 1 {
            o.remove(LOCAL);
        }
        o
    }
}

/// The keys that carry a TorchTitan layout's micro batch: the local batch without PP, the
/// pipeline microbatch with it.
const LOCAL: &str = "training.local_batch_size";
const PP_MICRO: &str = "parallelism.pipeline_parallel_microbatch_size";

/// The keys a micro batch of `m` sets, whichever of them the layout's PP reads.
pub fn micro_values(m: u64) -> serde_json::Value {
    json!({ LOCAL: m, PP_MICRO: m })
}

/// The layout a TorchTitan config runs with.
pub fn layout_of(t: &Titan) -> Layout {
    Layout {
        tp: t.tp,
        pp: t.pp,
        vpp: None,
        cp: t.cp,
        ep: t.ep,
        sp: t.tp > 1,
        micro: t.micro_batch().unwrap_or(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::overrides::values_of;

    fn titan(kv: &str) -> Titan {
        Titan::from_values(&values_of(kv)).unwrap()
    }

    const LLAMA: &str = "model.name=llama3 model.flavor=8B training.seq_len=8192 \
        training.local_batch_size=2 training.global_batch_size=-1 \
        parallelism.data_parallel_shard_degree=-1";

    #[test]
    fn the_global_batch_a_minus_one_resolves_to_is_held() {
        let t = titan(LLAMA);
        let f = Frame::of(&t, 8).unwrap();
        assert_eq!(f.global, 16, "local 2 × DP 8");
        assert!(!f.moe);
        let l = Layout {
            tp: 2,
            micro: 4,
            ..layout_of(&t)
        };
        let o = f.overrides(&l, 8);
        assert_eq!(o["training.global_batch_size"], json!(16));
        assert_eq!(
            o["training.local_batch_size"],
            json!(4),
            "no PP: local = micro"
        );
        assert_eq!(o["parallelism.data_parallel_shard_degree"], json!(-1));
        assert!(!o.contains_key("parallelism.expert_parallel_degree"));
        assert!(o.keys().all(|k| FLAGS.contains(&k.as_str())));
    }

    #[test]
    fn with_pp_the_local_batch_is_the_ranks_share_of_the_global_one() {
        let t = titan(LLAMA);
        let f = Frame::of(&t, 8).unwrap();
        let l = Layout {
            pp: 2,
            micro: 2,
            ..layout_of(&t)
        };
        let o = f.overrides(&l, 8);
        // DP = 8 / 2 = 4: a local batch of 16 / 4 = 4 in microbatches of 2.
        assert_eq!(o["training.local_batch_size"], json!(4));
        assert_eq!(o["parallelism.pipeline_parallel_microbatch_size"], json!(2));
        assert_eq!(Frame::of(&titan("model.name=llama3"), 8), None);
    }

    #[test]
    fn moe_keeps_etp_tied_to_tp_when_the_config_ties_them() {
        let moe = "model.name=deepseek_v3 model.flavor=16B training.local_batch_size=4 \
                   parallelism.tensor_parallel_degree=2 parallelism.expert_tensor_parallel_degree=2";
        let t = titan(moe);
        let f = Frame::of(&t, 8).unwrap();
        assert!(f.moe && f.etp_tied);
        let l = Layout {
            tp: 4,
            ep: 2,
            ..layout_of(&t)
        };
        let o = f.overrides(&l, 8);
        assert_eq!(o["parallelism.expert_tensor_parallel_degree"], json!(4));
        assert_eq!(o["parallelism.expert_parallel_degree"], json!(2));
    }
}
