//! A typed view of a module's Megatron parameters: parallelism, batch, model shape, which layers
//! are MoE, recompute. One reading of each rule Megatron applies at start-up (the FFN width when
//! it is not set, `moe_layer_freq`'s forms, ETP following TP, sequence parallelism off at TP 1),
//! used by the memory model, the CPU proxy, lint and the knob spaces, so they cannot disagree.
//!
//! Built from resolved values (`Module::values()` or a trial's `resolved.json` read back); reads
//! never fail: a missing or unreadable size is `None`, a parallel size is at least 1.
//!
//! [`titan`] is the same view for TorchTitan's dotted keys (its model named by a flavor, see
//! [`flavors`]), with the Megatron parameters that describe the same model and run.
//!
//! [`World`] is the world size a config is checked for, with where it came from (`--gpus`, the
//! launcher's variables, a one-process profile, the GPUs detected on this node).

pub mod flavors;
mod layers;
pub mod titan;
mod training;
mod world;

pub use layers::{LayerFreqError, parse_layer_freq};
pub use training::{DecayStyle, Training};
pub use world::{ASSUMED_GPUS_PER_NODE, Origin, World, WorldSource, parse_count};

use crate::domain::value::Value;
use std::collections::BTreeMap;

/// The parallel layout of one model replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallelism {
    /// Tensor, pipeline, context and expert parallel sizes (each ≥ 1).
    pub tp: u64,
    pub pp: u64,
    pub cp: u64,
    pub ep: u64,
    /// Expert tensor parallel size: Megatron's default is TP.
    pub etp: u64,
    /// Virtual pipeline stages per rank when interleaving (None: not interleaved).
    pub vpp: Option<u64>,
    /// Sequence parallelism as training runs it (Megatron turns it off at TP 1).
    pub sequence_parallel: bool,
}

impl Parallelism {
    /// GPUs one model replica spans: TP × PP × CP.
    pub fn model_size(&self) -> u64 {
        self.tp * self.pp * self.cp
    }

    /// The data-parallel size on `world` GPUs, when the world divides by TP × PP × CP.
    pub fn data_parallel(&self, world: u64) -> Option<u64> {
        let m = self.model_size();
        (world >= m && world.is_multiple_of(m)).then(|| world / m)
    }

    /// GPUs one expert-parallel layout spans: ETP × EP × PP (Megatron's
    /// `expert_tensor_model_pipeline_parallel_size`).
    pub fn expert_model_size(&self) -> u64 {
        self.etp * self.ep * self.pp
    }

    /// The expert data-parallel size on `world` GPUs: world / (ETP × EP × PP).
    #[cfg(any(test, feature = "testkit"))]
    pub fn expert_data_parallel(&self, world: u64) -> Option<u64> {
        let m = self.expert_model_size();
        (world >= m && world.is_multiple_of(m)).then(|| world / m)
    }
}

/// Micro and global batch sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub micro: Option<u64>,
    pub global: Option<u64>,
}

impl Batch {
    /// Micro batches per iteration on one data-parallel rank (gradient accumulation steps).
    pub fn accumulation_steps(&self, data_parallel: u64) -> Option<u64> {
        let per = self.micro? * data_parallel.max(1);
        let g = self.global?;
        (per > 0 && g.is_multiple_of(per)).then(|| g / per)
    }
}

/// The transformer's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub layers: Option<u64>,
    pub hidden: Option<u64>,
    pub heads: Option<u64>,
    /// Per-head width: `kv_channels`, else hidden / heads.
    pub kv_channels: Option<u64>,
    /// Key/value heads: `num_query_groups` with group-query attention, else the heads.
    pub query_groups: Option<u64>,
    /// The MLP width: `ffn_hidden_size`, else Megatron's default ([`default_ffn`]).
    pub ffn: Option<u64>,
    pub seq: Option<u64>,
    pub swiglu: bool,
}

/// Megatron's `ffn_hidden_size` when the config leaves it unset: 4·h, or with SwiGLU
/// `int(4·h·2/3 / 64) · 64` (`megatron/training/arguments.py`).
pub fn default_ffn(hidden: u64, swiglu: bool) -> u64 {
    if swiglu {
        (8 * hidden / 3) / 64 * 64
    } else {
        4 * hidden
    }
}

/// Tokenizers whose vocabulary presets leave to Megatron (it reads the tokenizer at start-up).
const TOKENIZER_VOCAB: &[(&str, u64)] = &[
    ("llama-3", 128_256),
    ("llama-2", 32_000),
    ("deepseek-v2", 102_400),
    ("deepseek-v3", 129_280),
    ("mixtral", 32_000),
];

/// The vocabulary of a `tokenizer_model` this table knows (by a name it contains, any case),
/// before Megatron's padding.
pub fn tokenizer_vocab(tokenizer_model: &str) -> Option<u64> {
    let name = tokenizer_model.to_lowercase();
    TOKENIZER_VOCAB
        .iter()
        .find(|(k, _)| name.contains(k))
        .map(|(_, v)| *v)
}

/// Where a vocabulary size came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VocabSource {
    /// `padded_vocab_size`: Megatron's padding already applied.
    Padded,
    /// `vocab_size`, before padding.
    Config,
    /// Read from the `tokenizer_model` name ([`tokenizer_vocab`]), before padding.
    Tokenizer(String),
}

/// The vocabulary, and what Megatron pads it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocab {
    pub size: u64,
    pub source: VocabSource,
    /// `make_vocab_size_divisible_by` (Megatron's default 128).
    pub divisible_by: u64,
}

impl Vocab {
    /// The size Megatron runs with at tensor parallel size `tp`: as given when already padded,
    /// else rounded up to a multiple of `make_vocab_size_divisible_by` × TP.
    pub fn padded(&self, tp: u64) -> u64 {
        if self.source == VocabSource::Padded {
            return self.size;
        }
        let m = self.divisible_by.max(1) * tp.max(1);
        self.size.div_ceil(m) * m
    }
}

/// Mixture of experts, when `num_experts` ≥ 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Moe {
    pub experts: u64,
    /// `moe_router_topk` (Megatron's default 2).
    pub topk: u64,
    /// `moe_ffn_hidden_size`, else the dense FFN width.
    pub ffn: Option<u64>,
    /// `moe_shared_expert_intermediate_size` (0: no shared expert).
    pub shared_ffn: u64,
    /// `moe_layer_freq` as written (None: every layer is MoE).
    pub layer_freq: Option<Value>,
    /// The local experts run as one grouped GEMM (`moe_grouped_gemm`, Megatron's default off;
    /// or Primus Turbo's `use_turbo_grouped_gemm`, which needs `enable_primus_turbo`), not one
    /// expert MLP after another (Megatron's `SequentialMLP`).
    pub grouped_gemm: bool,
}

impl Moe {
    /// Which of `layers` layers are MoE layers ([`parse_layer_freq`]).
    pub fn layer_pattern(&self, layers: u64) -> Result<Vec<bool>, LayerFreqError> {
        parse_layer_freq(self.layer_freq.as_ref(), layers)
    }
}

/// FP8 training: the transformer layers' linears run their GEMMs in FP8.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fp8 {
    /// `fp8` as written (Megatron's `--fp8-format`, whose `dest` is `fp8`: `e4m3` or `hybrid`).
    pub format: String,
    /// Layers kept in bf16 with `first_last_layers_bf16`: `num_layers_at_start_in_bf16` +
    /// `num_layers_at_end_in_bf16` (Megatron's defaults 1 and 1); none without it.
    pub bf16_layers: u64,
}

/// How activations are recomputed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recompute {
    None,
    /// Selective: the recomputed modules (`core_attn` when `recompute_modules` is unset).
    Selective(Vec<String>),
    /// Full: `recompute_method` and `recompute_num_layers`, or Primus' `recompute_layer_ids`.
    Full {
        method: Option<String>,
        num_layers: Option<u64>,
        layer_ids: Option<Vec<String>>,
    },
    /// A granularity Megatron does not know.
    Unknown(String),
}

/// The typed view of one module's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub parallelism: Parallelism,
    pub batch: Batch,
    pub shape: Shape,
    /// `padded_vocab_size`, else `vocab_size`, else the tokenizer's; None when none is known.
    pub vocab: Option<Vocab>,
    pub moe: Option<Moe>,
    pub recompute: Recompute,
    /// FP8 training, when `fp8` is set (None: the GEMMs run in bf16 or fp16).
    pub fp8: Option<Fp8>,
    /// The schedule, the optimizer's settings and the seed.
    pub training: Training,
}

/// A value as a number (ints, floats and numeric strings).
fn number(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Int(i) => Some(*i as f64),
        Value::Float(f) => Some(*f),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A switch: true, a non-zero number, or the text `true`/`1` (any case).
fn switch(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Str(s)) => matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "1"),
        Some(v) => v.truthy(),
        None => false,
    }
}

/// A value as a non-negative whole number (ints, whole floats and numeric strings).
fn whole(v: Option<&Value>) -> Option<u64> {
    let x = match v? {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Str(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 9.0e15).then_some(x as u64)
}

/// A list given as a YAML list or a comma-separated string (`"0,3,4"`), item by item.
pub fn list_items(v: &Value) -> Vec<String> {
    match v {
        Value::List(xs) => xs.iter().flat_map(list_items).collect(),
        Value::Str(s) => s.split(',').map(|x| x.trim().to_string()).collect(),
        Value::Int(i) => vec![i.to_string()],
        _ => Vec::new(),
    }
}

impl Params {
    /// The parameters of integer values only (the unit tests' short way to write a model).
    #[cfg(test)]
    pub(crate) fn of_ints(kv: &[(&str, i64)]) -> Params {
        let p: BTreeMap<String, Value> = kv
            .iter()
            .map(|(k, v)| (k.to_string(), Value::Int(*v)))
            .collect();
        Params::from_values(&p)
    }

    pub fn from_values(p: &BTreeMap<String, Value>) -> Params {
        let get = |k: &str| p.get(k).filter(|v| !v.is_null());
        let size = |k: &str| whole(get(k)).filter(|n| *n >= 1).unwrap_or(1);
        let positive = |k: &str| whole(get(k)).filter(|n| *n >= 1);
        let on = |k: &str| switch(get(k));
        let text = |k: &str| get(k).and_then(Value::as_str).map(str::to_string);

        let tp = size("tensor_model_parallel_size");
        let pp = size("pipeline_model_parallel_size");
        let layers = positive("num_layers");
        // `validate_args` derives the interleaving from `num_virtual_stages_per_pipeline_rank`,
        // else from `num_layers_per_virtual_pipeline_stage` (the layers, plus one for each of
        // the embedding and the loss when counted in the split, per stage over it); it sets a
        // written `virtual_pipeline_model_parallel_size` to None otherwise, and a size of 1 too.
        let vpp = positive("num_virtual_stages_per_pipeline_rank")
            .or_else(|| {
                let per = positive("num_layers_per_virtual_pipeline_stage")?;
                let counted = layers?
                    + u64::from(on("account_for_embedding_in_pipeline_split"))
                    + u64::from(on("account_for_loss_in_pipeline_split"));
                Some(counted / pp / per)
            })
            .filter(|v| *v > 1);
        let parallelism = Parallelism {
            tp,
            pp,
            cp: size("context_parallel_size"),
            ep: size("expert_model_parallel_size"),
            etp: positive("expert_tensor_parallel_size").unwrap_or(tp),
            vpp,
            sequence_parallel: on("sequence_parallel") && tp > 1,
        };
        let hidden = positive("hidden_size");
        let heads = positive("num_attention_heads");
        let swiglu = on("swiglu");
        let shape = Shape {
            layers,
            hidden,
            heads,
            kv_channels: positive("kv_channels").or_else(|| Some(hidden? / heads?)),
            // Megatron reads `num_query_groups` (default 1) only with group-query attention.
            query_groups: if on("group_query_attention") {
                Some(positive("num_query_groups").unwrap_or(1))
            } else {
                heads
            },
            ffn: positive("ffn_hidden_size").or_else(|| Some(default_ffn(hidden?, swiglu))),
            seq: positive("seq_length"),
            swiglu,
        };
        let vocab = Self::vocab_of(&get);
        let moe = positive("num_experts").map(|experts| Moe {
            experts,
            topk: positive("moe_router_topk").unwrap_or(2),
            ffn: positive("moe_ffn_hidden_size").or(shape.ffn),
            shared_ffn: whole(get("moe_shared_expert_intermediate_size")).unwrap_or(0),
            layer_freq: get("moe_layer_freq").cloned(),
            grouped_gemm: on("moe_grouped_gemm")
                || (on("enable_primus_turbo") && on("use_turbo_grouped_gemm")),
        });
        let list = |k: &str| get(k).map(list_items);
        let recompute = match text("recompute_granularity").as_deref() {
            None => Recompute::None,
            Some("selective") => {
                Recompute::Selective(list("recompute_modules").unwrap_or(vec!["core_attn".into()]))
            }
            Some("full") => Recompute::Full {
                method: text("recompute_method"),
                num_layers: whole(get("recompute_num_layers")),
                layer_ids: list("recompute_layer_ids"),
            },
            Some(other) => Recompute::Unknown(other.to_string()),
        };
        // Megatron reads `args.fp8` (unset: None); Primus passes only the keys Megatron's
        // parser knows, so an `fp8_format` key (the flag's name, not its `dest`) does nothing.
        let fp8 = text("fp8")
            .filter(|f| !matches!(f.trim().to_ascii_lowercase().as_str(), "" | "none" | "null"))
            .map(|format| Fp8 {
                format,
                bf16_layers: if on("first_last_layers_bf16") {
                    whole(get("num_layers_at_start_in_bf16")).unwrap_or(1)
                        + whole(get("num_layers_at_end_in_bf16")).unwrap_or(1)
                } else {
                    0
                },
            });
        Params {
            parallelism,
            batch: Batch {
                micro: positive("micro_batch_size"),
                global: positive("global_batch_size"),
            },
            shape,
            vocab,
            moe,
            recompute,
            fp8,
            training: Training::from_values(&get),
        }
    }

    fn vocab_of<'a>(get: &impl Fn(&str) -> Option<&'a Value>) -> Option<Vocab> {
        let positive = |k: &str| whole(get(k)).filter(|n| *n >= 1);
        let (size, source) = if let Some(v) = positive("padded_vocab_size") {
            (v, VocabSource::Padded)
        } else if let Some(v) = positive("vocab_size") {
            (v, VocabSource::Config)
        } else {
            let tok = get("tokenizer_model").and_then(Value::as_str)?;
            (
                tokenizer_vocab(tok)?,
                VocabSource::Tokenizer(tok.to_string()),
            )
        };
        Some(Vocab {
            size,
            source,
            divisible_by: positive("make_vocab_size_divisible_by").unwrap_or(128),
        })
    }

    /// Layers on one pipeline stage (at least 1), when the layer count is known.
    pub fn layers_per_stage(&self) -> Option<u64> {
        Some((self.shape.layers? / self.parallelism.pp).max(1))
    }

    pub fn is_moe(&self) -> bool {
        self.moe.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::overrides::parse_assignment;

    fn params(kv: &str) -> Params {
        let m: BTreeMap<String, Value> = kv
            .split_whitespace()
            .map(|a| {
                let o = parse_assignment(a).unwrap();
                (o.key, o.value)
            })
            .collect();
        Params::from_values(&m)
    }

    #[test]
    fn ffn_default_follows_megatron_with_and_without_swiglu() {
        assert_eq!(params("hidden_size=4096").shape.ffn, Some(16384));
        // int(4·4096·2/3 / 64)·64 = 10880 (Llama-7B's 11008 is set explicitly)
        assert_eq!(
            params("hidden_size=4096 swiglu=true").shape.ffn,
            Some(10880)
        );
        assert_eq!(
            params("hidden_size=4096 swiglu=true ffn_hidden_size=14336")
                .shape
                .ffn,
            Some(14336)
        );
        assert_eq!(params("num_layers=2").shape.ffn, None);
    }

    #[test]
    fn parallel_sizes_default_to_one_and_etp_follows_tp() {
        let p = params("tensor_model_parallel_size=4 sequence_parallel=true");
        assert_eq!(p.parallelism.etp, 4);
        assert!(p.parallelism.sequence_parallel);
        assert_eq!(p.parallelism.data_parallel(16), Some(4));
        assert_eq!(p.parallelism.data_parallel(6), None);
        let p = params("sequence_parallel=true");
        assert!(!p.parallelism.sequence_parallel, "SP is off at TP 1");
        assert_eq!(p.parallelism.model_size(), 1);
    }

    #[test]
    fn moe_layer_pattern_and_accumulation() {
        let p = params(
            "num_layers=4 num_experts=8 moe_layer_freq=2 micro_batch_size=2 global_batch_size=32",
        );
        let moe = p.moe.clone().unwrap();
        assert_eq!(
            moe.layer_pattern(4).unwrap(),
            vec![true, false, true, false]
        );
        assert_eq!(moe.topk, 2);
        assert!(
            !moe.grouped_gemm,
            "Megatron's default: one expert after another"
        );
        let grouped = |kv: &str| params(&format!("num_experts=8 {kv}")).moe.unwrap();
        assert!(grouped("moe_grouped_gemm=true").grouped_gemm);
        assert!(!grouped("use_turbo_grouped_gemm=true").grouped_gemm);
        assert!(grouped("use_turbo_grouped_gemm=true enable_primus_turbo=true").grouped_gemm);
        assert_eq!(p.batch.accumulation_steps(4), Some(4));
        assert!(params("num_layers=4").moe.is_none());
    }

    #[test]
    fn recompute_forms() {
        assert_eq!(params("").recompute, Recompute::None);
        assert_eq!(
            params("recompute_granularity=selective").recompute,
            Recompute::Selective(vec!["core_attn".into()])
        );
        assert_eq!(
            params("recompute_granularity=full recompute_method=block recompute_num_layers=2")
                .recompute,
            Recompute::Full {
                method: Some("block".into()),
                num_layers: Some(2),
                layer_ids: None
            }
        );
    }

    #[test]
    fn fp8_is_megatron_s_fp8_key_with_the_layers_kept_in_bf16() {
        assert_eq!(params("").fp8, None);
        assert_eq!(
            params("fp8=None").fp8,
            None,
            "Primus' CLI typing: None is null"
        );
        let f = params("fp8=hybrid").fp8.unwrap();
        assert_eq!((f.format.as_str(), f.bf16_layers), ("hybrid", 0));
        let f = params("fp8=e4m3 first_last_layers_bf16=true num_layers_at_end_in_bf16=2")
            .fp8
            .unwrap();
        assert_eq!(
            f.bf16_layers, 3,
            "1 at the start (Megatron's default) and 2 at the end"
        );
        assert_eq!(
            params("fp8_format=e4m3").fp8,
            None,
            "not a key Megatron reads"
        );
    }

    #[test]
    fn query_groups_follow_megatron_only_with_gqa() {
        assert_eq!(
            params("num_attention_heads=32 num_query_groups=8")
                .shape
                .query_groups,
            Some(32),
            "without group_query_attention Megatron ignores num_query_groups"
        );
        let gqa = "num_attention_heads=32 group_query_attention=true";
        assert_eq!(
            params(gqa).shape.query_groups,
            Some(1),
            "Megatron's default"
        );
        let gqa8 = format!("{gqa} num_query_groups=8");
        assert_eq!(params(&gqa8).shape.query_groups, Some(8));
        assert!(
            !params("swiglu=false").shape.swiglu,
            "the text false is off"
        );
    }

    #[test]
    fn vocab_pads_as_megatron_unless_already_padded() {
        let v = params("vocab_size=50257").vocab.unwrap();
        assert_eq!((v.size, v.source.clone()), (50257, VocabSource::Config));
        assert_eq!(v.padded(1), 50304);
        assert_eq!(v.padded(8), 51200);
        let v = params("padded_vocab_size=50257 vocab_size=3")
            .vocab
            .unwrap();
        assert_eq!(v.padded(8), 50257);
        let v = params("tokenizer_model=meta-llama/Llama-3.1-8B")
            .vocab
            .unwrap();
        assert_eq!(
            v.source,
            VocabSource::Tokenizer("meta-llama/Llama-3.1-8B".into())
        );
        assert_eq!(v.padded(1), 128_256);
        assert!(params("hidden_size=8").vocab.is_none());
    }

    #[test]
    fn training_takes_megatron_defaults() {
        let t = params("").training;
        assert_eq!(t.decay_style, DecayStyle::Linear);
        assert_eq!((t.adam_beta1, t.adam_beta2, t.adam_eps), (0.9, 0.999, 1e-8));
        assert_eq!((t.weight_decay, t.clip_grad, t.init_std), (0.01, 1.0, 0.02));
        assert_eq!((t.seed, t.grad_accum_fusion, t.lr), (1234, true, None));
        let t = params("lr_decay_style=cosine lr=3e-4 gradient_accumulation_fusion=false seed=7")
            .training;
        assert_eq!(t.decay_style, DecayStyle::Cosine);
        assert_eq!((t.lr, t.seed, t.grad_accum_fusion), (Some(3e-4), 7, false));
    }

    #[test]
    fn the_interleaving_is_derived_as_validate_args_derives_it() {
        let vpp = |kv: &[(&str, i64)]| {
            let p: BTreeMap<String, Value> = kv
                .iter()
                .map(|(k, v)| (k.to_string(), Value::Int(*v)))
                .collect();
            Params::from_values(&p).parallelism.vpp
        };
        let pp4 = [("num_layers", 32), ("pipeline_model_parallel_size", 4)];
        assert_eq!(
            vpp(&[pp4[0], pp4[1], ("num_virtual_stages_per_pipeline_rank", 4)]),
            Some(4)
        );
        assert_eq!(
            vpp(&[pp4[0], pp4[1], ("num_layers_per_virtual_pipeline_stage", 2)]),
            Some(4)
        );
        // One virtual stage is no interleaving; the internal size as written is ignored.
        assert_eq!(
            vpp(&[pp4[0], pp4[1], ("num_layers_per_virtual_pipeline_stage", 8)]),
            None
        );
        assert_eq!(
            vpp(&[pp4[0], pp4[1], ("virtual_pipeline_model_parallel_size", 2)]),
            None
        );
    }
}
