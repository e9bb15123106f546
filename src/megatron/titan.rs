//! A typed view of a TorchTitan module's parameters (dotted keys: `model.name`,
//! `training.local_batch_size`, `parallelism.data_parallel_shard_degree`, ...), and the same
//! model and run written as Megatron parameters ([`megatron_view`]), so that the CPU proxy sizes
//! a TorchTitan job by the rules it sizes a Megatron job with.
//!
//! Key meanings (torchtitan `torchtitan/config/job_config.py`, Primus' preset
//! `primus/configs/modules/torchtitan/pre_trainer.yaml`):
//! - `training.local_batch_size`: samples per data-parallel rank and step; `training.global_batch_size`
//!   -1 means local × data-parallel size (no gradient accumulation); with pipeline parallelism the
//!   local batch is split into microbatches of `parallelism.pipeline_parallel_microbatch_size`;
//! - `parallelism.data_parallel_shard_degree` -1: every GPU left after replicate × CP × TP × PP
//!   (FSDP shards parameters, gradients and optimizer state over it);
//! - `activation_checkpoint.mode` none / selective / full; `selective_ac_option` `op` (op-level
//!   selective checkpointing) or a layer frequency N (every N-th block fully checkpointed:
//!   `torchtitan/distributed/activation_checkpoint.py`, `_apply_layer_sac`);
//! - float8: a `model.converters` entry naming float8 (`quantize.linear.float8` in Primus' FP8
//!   presets, `float8` upstream).

use super::flavors::{self, Flavor};
use crate::domain::value::Value;
use std::collections::BTreeMap;

/// Activation checkpointing (`activation_checkpoint.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checkpointing {
    None,
    /// Selective, op level (`selective_ac_option: op`).
    Ops,
    /// Selective, layer level: every n-th block (1-based) fully checkpointed.
    EveryNth(u64),
    /// Every block fully checkpointed.
    Full,
    /// A mode or option torchtitan refuses.
    Unknown(String),
}

/// The typed view of a TorchTitan module's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Titan {
    /// `model.name` and `model.flavor` as written.
    pub name: String,
    pub flavor_name: String,
    /// The flavor's dimensions, when this tool knows it.
    pub flavor: Option<Flavor>,
    pub seq: Option<u64>,
    pub local_batch: Option<u64>,
    /// `training.global_batch_size` when positive.
    pub global_batch: Option<u64>,
    pub dp_replicate: u64,
    /// `parallelism.data_parallel_shard_degree` when positive (None: -1, all that is left).
    pub dp_shard: Option<u64>,
    pub tp: u64,
    pub pp: u64,
    pub cp: u64,
    pub ep: u64,
    pub etp: u64,
    pub pp_microbatch: u64,
    pub checkpointing: Checkpointing,
    pub float8: bool,
    /// With float8: the output projection is converted too (no `quantize.linear.float8.
    /// filter_fqns` entry names it; TorchTitan skips a linear whose name contains an entry).
    pub float8_output: bool,
    /// With float8: Primus-Turbo's float8 linears instead of torchao's (the `primus_turbo`
    /// converter with `enable_primus_turbo` and `use_turbo_float8_linear`).
    pub turbo_float8: bool,
    /// `training.mixed_precision_param` is bfloat16 (the default).
    pub bf16: bool,
    /// `compile.enable` with `model` among `compile.components`.
    pub compiled: bool,
    /// `compile.enable` with `loss` among `compile.components`.
    pub compiled_loss: bool,
    /// `training.enable_cpu_offload` (FSDP's CPU offload policy).
    pub cpu_offload: bool,
}

/// Whether resolved values are a TorchTitan module's (its model is named by `model.name`).
pub fn is_torchtitan(p: &BTreeMap<String, Value>) -> bool {
    ["model.name", "model.flavor", "training.local_batch_size"]
        .iter()
        .any(|k| p.get(*k).is_some_and(|v| !v.is_null()))
}

fn whole(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Int(i) => Some(*i),
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Some(*f as i64),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

impl Titan {
    /// The view, when the values are a TorchTitan module's ([`is_torchtitan`]).
    pub fn from_values(p: &BTreeMap<String, Value>) -> Option<Titan> {
        if !is_torchtitan(p) {
            return None;
        }
        let get = |k: &str| p.get(k).filter(|v| !v.is_null());
        let positive = |k: &str| whole(get(k)).filter(|n| *n >= 1).map(|n| n as u64);
        let size = |k: &str| positive(k).unwrap_or(1);
        let text = |k: &str| get(k).map(|v| v.as_str().map_or(v.to_string(), str::to_string));
        let on = |k: &str| get(k).is_some_and(Value::truthy);
        let name = text("model.name").unwrap_or_default();
        let flavor_name = text("model.flavor").unwrap_or_default();
        let option = text("activation_checkpoint.selective_ac_option").unwrap_or("2".into());
        let checkpointing = match text("activation_checkpoint.mode").as_deref() {
            None | Some("none") => Checkpointing::None,
            Some("full") => Checkpointing::Full,
            Some("selective") if option == "op" => Checkpointing::Ops,
            Some("selective") => match option.trim().parse::<u64>() {
                Ok(0) => Checkpointing::Full,
                Ok(n) => Checkpointing::EveryNth(n),
                Err(_) => Checkpointing::Unknown(format!("selective_ac_option {option}")),
            },
            Some(other) => Checkpointing::Unknown(other.to_string()),
        };
        let converters = get("model.converters").map(super::list_items);
        let float8 = converters
            .as_ref()
            .is_some_and(|c| c.iter().any(|x| x.contains("float8")));
        let filtered = get("quantize.linear.float8.filter_fqns")
            .map(super::list_items)
            .unwrap_or_default();
        let float8_output = float8
            && !filtered
                .iter()
                .any(|f| !f.is_empty() && "output".contains(f.as_str()));
        let turbo_float8 = float8
            && converters
                .as_ref()
                .is_some_and(|c| c.iter().any(|x| x == "primus_turbo"))
            && on("primus_turbo.enable_primus_turbo")
            && on("primus_turbo.use_turbo_float8_linear");
        let components = get("compile.components").map(super::list_items);
        let compiles = |part: &str| {
            on("compile.enable")
                && components
                    .as_ref()
                    .is_none_or(|c| c.iter().any(|x| x == part))
        };
        Some(Titan {
            flavor: flavors::find(&name, &flavor_name),
            name,
            flavor_name,
            seq: positive("training.seq_len"),
            local_batch: positive("training.local_batch_size"),
            global_batch: positive("training.global_batch_size"),
            dp_replicate: size("parallelism.data_parallel_replicate_degree"),
            dp_shard: positive("parallelism.data_parallel_shard_degree"),
            tp: size("parallelism.tensor_parallel_degree"),
            pp: size("parallelism.pipeline_parallel_degree"),
            cp: size("parallelism.context_parallel_degree"),
            ep: size("parallelism.expert_parallel_degree"),
            etp: size("parallelism.expert_tensor_parallel_degree"),
            pp_microbatch: size("parallelism.pipeline_parallel_microbatch_size"),
            checkpointing,
            float8,
            float8_output,
            turbo_float8,
            bf16: text("training.mixed_precision_param").is_none_or(|t| t == "bfloat16"),
            compiled: compiles("model"),
            compiled_loss: compiles("loss"),
            cpu_offload: on("training.enable_cpu_offload"),
        })
    }

    /// `model/flavor`, for messages.
    pub fn model_label(&self) -> String {
        format!("{}/{}", self.name, self.flavor_name)
    }

    /// GPUs outside the FSDP shard dimension: replicate × CP × TP × PP.
    pub fn non_shard_size(&self) -> u64 {
        self.dp_replicate * self.cp * self.tp * self.pp
    }

    /// Whether FSDP wraps the model on `world` GPUs (torchtitan's `ParallelDims.fsdp_enabled`:
    /// a shard degree above 1, or context parallelism). Without it, mixed precision is
    /// `torch.autocast` (single device and DDP), or off with TP or PP.
    pub fn fsdp(&self, world: u64) -> bool {
        self.cp > 1 || self.shard_degree(world).is_some_and(|s| s > 1)
    }

    /// The FSDP shard degree on `world` GPUs (-1 resolved), when the world divides.
    pub fn shard_degree(&self, world: u64) -> Option<u64> {
        let rest = self.non_shard_size();
        match self.dp_shard {
            Some(s) => (s * rest == world || world == 0).then_some(s),
            None => (world >= rest && world.is_multiple_of(rest)).then(|| world / rest),
        }
    }

    /// The data-parallel size (replicate × shard) on `world` GPUs.
    pub fn data_parallel(&self, world: u64) -> Option<u64> {
        Some(self.dp_replicate * self.shard_degree(world)?)
    }

    /// The microbatch one forward pass runs: the local batch, or with pipeline parallelism the
    /// pipeline microbatch.
    pub fn micro_batch(&self) -> Option<u64> {
        if self.pp > 1 {
            Some(self.pp_microbatch)
        } else {
            self.local_batch
        }
    }

    /// Layers of the first pipeline stage.
    pub fn stage_layers(&self) -> Option<u64> {
        Some(self.flavor?.layers.div_ceil(self.pp).max(1))
    }
}

/// The Megatron parameters describing the same model and run as a TorchTitan module's values
/// (None when the values are not TorchTitan's). The model's keys come from its flavor (absent
/// when the flavor is unknown); `world` (or `_world_size` in the values) resolves a global batch
/// of -1 under pipeline parallelism. Recompute: selective op-level → `selective`; every n-th
/// block → `full`/`block` over stage layers / n blocks; full → `full`/`uniform`/1.
pub fn megatron_view(
    p: &BTreeMap<String, Value>,
    world: Option<u64>,
) -> Option<BTreeMap<String, Value>> {
    let t = Titan::from_values(p)?;
    let mut m: BTreeMap<String, Value> = BTreeMap::new();
    let int = |x: u64| Value::Int(x as i64);
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    if let Some(f) = t.flavor {
        put("hidden_size", int(f.dim));
        put("num_layers", int(f.layers));
        put("num_attention_heads", int(f.heads));
        put("group_query_attention", Value::Bool(f.kv_heads != f.heads));
        put("num_query_groups", int(f.kv_heads));
        put("kv_channels", int(f.head_dim));
        put("ffn_hidden_size", int(f.ffn));
        put("swiglu", Value::Bool(true));
        put("normalization", Value::Str("RMSNorm".into()));
        put("position_embedding_type", Value::Str("rope".into()));
        put("padded_vocab_size", int(f.vocab));
        put("untie_embeddings_and_output_weights", Value::Bool(!f.tied));
        put("multi_latent_attention", Value::Bool(f.mla));
        if let Some(moe) = f.moe {
            put("num_experts", int(moe.experts));
            put("moe_router_topk", int(moe.topk));
            put("moe_ffn_hidden_size", int(moe.ffn));
            put("moe_shared_expert_intermediate_size", int(moe.shared_ffn));
            let dense = moe.dense_layers.min(f.layers);
            let freq = format!("([0]*{dense}+[1]*{})", f.layers - dense);
            put("moe_layer_freq", Value::Str(freq));
        }
    }
    if let Some(s) = t.seq {
        put("seq_length", int(s));
    }
    if let Some(b) = t.micro_batch() {
        put("micro_batch_size", int(b));
    }
    let world = world.or_else(|| whole(p.get("_world_size")).map(|w| w.max(0) as u64));
    let global = t.global_batch.or_else(|| {
        let dp = t.data_parallel(world.filter(|w| *w > 0)?)?;
        Some(t.local_batch? * dp)
    });
    if let Some(g) = global {
        put("global_batch_size", int(g));
    }
    put("tensor_model_parallel_size", int(t.tp));
    put("pipeline_model_parallel_size", int(t.pp));
    put("context_parallel_size", int(t.cp));
    put("expert_model_parallel_size", int(t.ep));
    put("expert_tensor_parallel_size", int(t.etp));
    put("sequence_parallel", Value::Bool(t.tp > 1));
    let text = |s: &str| Value::Str(s.to_string());
    match &t.checkpointing {
        Checkpointing::None | Checkpointing::Unknown(_) => {}
        Checkpointing::Ops => put("recompute_granularity", text("selective")),
        Checkpointing::Full => {
            put("recompute_granularity", text("full"));
            put("recompute_method", text("uniform"));
            put("recompute_num_layers", int(1));
        }
        Checkpointing::EveryNth(n) => {
            let stage = t.stage_layers().unwrap_or(1);
            put("recompute_granularity", text("full"));
            put("recompute_method", text("block"));
            put("recompute_num_layers", int((stage / n).max(1)));
        }
    }
    put("bf16", Value::Bool(t.bf16));
    // The run's schedule and optimizer, for a proxy that trains.
    let copy = [
        ("training.steps", "train_iters"),
        ("optimizer.lr", "lr"),
        ("optimizer.weight_decay", "weight_decay"),
        ("optimizer.beta1", "adam_beta1"),
        ("optimizer.beta2", "adam_beta2"),
        ("optimizer.eps", "adam_eps"),
        ("training.max_norm", "clip_grad"),
        ("lr_scheduler.warmup_steps", "lr_warmup_iters"),
        ("lr_scheduler.decay_type", "lr_decay_style"),
        ("debug.seed", "seed"),
    ];
    for (from, to) in copy {
        if let Some(v) = p.get(from).filter(|v| !v.is_null()) {
            put(to, v.clone());
        }
    }
    let lr = p.get("optimizer.lr").and_then(Value::as_f64);
    let floor = p.get("lr_scheduler.min_lr_factor").and_then(Value::as_f64);
    if let (Some(lr), Some(f)) = (lr, floor) {
        put("min_lr", Value::Float(lr * f));
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::overrides::values_of as values;

    const LLAMA: &str = "model.name=llama3 model.flavor=8B training.seq_len=8192 \
        training.local_batch_size=4 training.global_batch_size=-1 \
        parallelism.data_parallel_shard_degree=-1 activation_checkpoint.mode=none";

    #[test]
    fn llama3_8b_reads_as_megatrons_llama3_8b() {
        let m = megatron_view(&values(LLAMA), Some(8)).unwrap();
        let get = |k: &str| m.get(k).and_then(Value::as_i64);
        assert_eq!(get("hidden_size"), Some(4096));
        assert_eq!(get("ffn_hidden_size"), Some(14336));
        assert_eq!(get("num_query_groups"), Some(8));
        assert_eq!(get("padded_vocab_size"), Some(128256));
        assert_eq!(get("micro_batch_size"), Some(4));
        assert_eq!(get("global_batch_size"), Some(32), "4 × DP 8");
        assert_eq!(get("seq_length"), Some(8192));
        assert!(!m.contains_key("recompute_granularity"));
        assert!(megatron_view(&values("hidden_size=4"), None).is_none());
    }

    #[test]
    fn checkpointing_modes_and_the_shard_degree() {
        let t = |kv: &str| Titan::from_values(&values(&format!("{LLAMA} {kv}"))).unwrap();
        assert_eq!(t("").checkpointing, Checkpointing::None);
        let op =
            "activation_checkpoint.mode=selective activation_checkpoint.selective_ac_option=op";
        assert_eq!(t(op).checkpointing, Checkpointing::Ops);
        // The preset's default option "2": every second block.
        let every2 = t("activation_checkpoint.mode=selective");
        assert_eq!(every2.checkpointing, Checkpointing::EveryNth(2));
        let m = megatron_view(
            &values(&format!("{LLAMA} activation_checkpoint.mode=selective")),
            None,
        )
        .unwrap();
        assert_eq!(m["recompute_num_layers"], Value::Int(16));
        assert_eq!(
            t("activation_checkpoint.mode=full").checkpointing,
            Checkpointing::Full
        );
        assert!(matches!(
            t("activation_checkpoint.mode=some").checkpointing,
            Checkpointing::Unknown(_)
        ));
        let tp2 = t("parallelism.tensor_parallel_degree=2");
        assert_eq!(tp2.shard_degree(8), Some(4));
        assert_eq!(tp2.shard_degree(6), Some(3));
        assert_eq!(tp2.shard_degree(3), None);
        let fixed = t("parallelism.data_parallel_shard_degree=4");
        assert_eq!(
            (fixed.shard_degree(4), fixed.shard_degree(8)),
            (Some(4), None)
        );
        assert!(t("model.converters=['primus_turbo','quantize.linear.float8']").float8);
        assert!(!t("model.converters=['primus_turbo']").float8);
    }
}
