//! TorchTitan's model flavors: the dimensions behind `model.name` + `model.flavor`.
//!
//! Primus' TorchTitan model presets (`primus/configs/models/torchtitan/*.yaml`) name a model and a
//! flavor only (`model: {name: llama3, flavor: 8B}`); the sizes live in torchtitan's model
//! registries, copied here:
//! - `torchtitan/models/llama3/__init__.py` (`llama3_configs`): the FFN width is
//!   `compute_ffn_hidden_dim(dim, multiple_of, ffn_dim_multiplier)` = ⌈multiplier · ⌊2/3 · 4·dim⌋ /
//!   multiple_of⌉ · multiple_of (8B: 14336, as Megatron's Llama 3 8B); the vocabulary is
//!   `TransformerModelArgs.vocab_size` = 128256; untied output layer;
//! - `torchtitan/models/qwen3/__init__.py` (`qwen3_configs`): head_dim 128, vocabulary 151936,
//!   tied embeddings for 0.6B, 1.7B and 4B;
//! - `torchtitan/models/deepseek_v3/__init__.py` (`deepseekv3_configs`): multi-latent attention
//!   (listed here as `n_heads` heads of `v_head_dim` 128), the first `n_dense_layers` layers dense,
//!   the others MoE with `num_shared_experts` shared experts of the expert width.
//!
//! Every block is a pre-norm (RMSNorm) decoder layer with a SwiGLU MLP (`w2(silu(w1·x) ⊙ w3·x)`).

/// Mixture of experts of a flavor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeFlavor {
    pub experts: u64,
    pub topk: u64,
    /// Width of one routed expert.
    pub ffn: u64,
    /// Total width of the shared experts (0: none).
    pub shared_ffn: u64,
    /// The first layers are dense.
    pub dense_layers: u64,
}

/// One model flavor's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flavor {
    pub model: &'static str,
    pub flavor: &'static str,
    pub dim: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    /// The dense MLP width.
    pub ffn: u64,
    pub vocab: u64,
    /// Output layer tied to the token embedding.
    pub tied: bool,
    pub moe: Option<MoeFlavor>,
    /// Multi-latent attention (DeepSeek), listed as standard attention.
    pub mla: bool,
    /// RMSNorm on each head's query and key (Qwen3: `qk_norm`, torchtitan
    /// `models/qwen3/model/args.py`).
    pub qk_norm: bool,
}

/// torchtitan's `compute_ffn_hidden_dim`.
pub const fn llama_ffn(dim: u64, multiple_of: u64, multiplier_pct: u64) -> u64 {
    let hidden = 2 * (4 * dim) / 3;
    let hidden = hidden * multiplier_pct / 100;
    hidden.div_ceil(multiple_of) * multiple_of
}

const fn llama3(flavor: &'static str, dim: u64, layers: u64, heads: u64, ffn: u64) -> Flavor {
    Flavor {
        model: "llama3",
        flavor,
        dim,
        layers,
        heads,
        kv_heads: 8,
        head_dim: dim / heads,
        ffn,
        vocab: 128_256,
        tied: false,
        moe: None,
        mla: false,
        qk_norm: false,
    }
}

const fn qwen3(flavor: &'static str, dim: u64, layers: u64, heads: u64, ffn: u64) -> Flavor {
    Flavor {
        model: "qwen3",
        flavor,
        dim,
        layers,
        heads,
        kv_heads: 8,
        head_dim: 128,
        ffn,
        vocab: 151_936,
        tied: dim <= 2560,
        moe: None,
        mla: false,
        qk_norm: true,
    }
}

const fn qwen3_moe(flavor: &'static str, dim: u64, layers: u64, heads: u64, ffn: u64) -> Flavor {
    let mut f = qwen3(flavor, dim, layers, heads, ffn);
    f.kv_heads = 4;
    f.tied = false;
    f.moe = Some(MoeFlavor {
        experts: 128,
        topk: 8,
        ffn,
        shared_ffn: 0,
        dense_layers: 0,
    });
    f
}

const fn deepseek_v3(
    flavor: &'static str,
    dim: u64,
    layers: u64,
    heads: u64,
    ffn: u64,
    vocab: u64,
    moe: MoeFlavor,
) -> Flavor {
    Flavor {
        model: "deepseek_v3",
        flavor,
        dim,
        layers,
        heads,
        kv_heads: heads,
        head_dim: 128,
        ffn,
        vocab,
        tied: false,
        moe: Some(moe),
        mla: true,
        qk_norm: false,
    }
}

/// Every flavor this tool knows.
pub const FLAVORS: &[Flavor] = &[
    Flavor {
        vocab: 2048,
        kv_heads: 16,
        ..llama3("debugmodel", 256, 6, 16, llama_ffn(256, 256, 100))
    },
    llama3("8B", 4096, 32, 32, llama_ffn(4096, 1024, 130)),
    llama3("70B", 8192, 80, 64, llama_ffn(8192, 4096, 130)),
    llama3("405B", 16384, 126, 128, llama_ffn(16384, 4096, 120)),
    qwen3("0.6B", 1024, 28, 16, 3072),
    qwen3("1.7B", 2048, 28, 16, 6144),
    qwen3("4B", 2560, 36, 32, 9728),
    qwen3("8B", 4096, 36, 32, 12288),
    qwen3("14B", 5120, 40, 40, 17408),
    qwen3("32B", 5120, 64, 64, 25600),
    qwen3_moe("30B-A3B", 2048, 48, 32, 768),
    Flavor {
        heads: 64,
        ..qwen3_moe("235B-A22B", 4096, 94, 64, 1536)
    },
    deepseek_v3(
        "16B",
        2048,
        27,
        16,
        10944,
        102_400,
        MoeFlavor {
            experts: 64,
            topk: 6,
            ffn: 1408,
            shared_ffn: 2 * 1408,
            dense_layers: 1,
        },
    ),
    deepseek_v3(
        "236B",
        5120,
        60,
        128,
        12288,
        102_400,
        MoeFlavor {
            experts: 160,
            topk: 6,
            ffn: 1536,
            shared_ffn: 2 * 1536,
            dense_layers: 1,
        },
    ),
    deepseek_v3(
        "671B",
        7168,
        61,
        128,
        18432,
        129_280,
        MoeFlavor {
            experts: 256,
            topk: 8,
            ffn: 2048,
            shared_ffn: 2048,
            dense_layers: 3,
        },
    ),
];

/// The flavor of `model.name` / `model.flavor` (names compared without case).
pub fn find(model: &str, flavor: &str) -> Option<Flavor> {
    FLAVORS
        .iter()
        .find(|f| f.model.eq_ignore_ascii_case(model) && f.flavor.eq_ignore_ascii_case(flavor))
        .copied()
}

/// `model/flavor` of every known flavor, for messages.
pub fn known() -> Vec<String> {
    FLAVORS
        .iter()
        .map(|f| format!("{}/{}", f.model, f.flavor))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ffn_widths_follow_torchtitan() {
        // 8B: ⌊2/3·16384⌋ = 10922, ×1.3 = 14198, up to a multiple of 1024: 14336
        assert_eq!(find("llama3", "8B").unwrap().ffn, 14336);
        assert_eq!(find("llama3", "70B").unwrap().ffn, 28672);
        assert_eq!(find("llama3", "405B").unwrap().ffn, 53248);
        assert_eq!(find("llama3", "debugmodel").unwrap().ffn, 768);
        let q = find("QWEN3", "8b").unwrap();
        assert_eq!(
            (q.dim, q.layers, q.head_dim, q.tied),
            (4096, 36, 128, false)
        );
        assert!(find("qwen3", "0.6B").unwrap().tied);
        assert_eq!(find("qwen3", "235B-A22B").unwrap().heads, 64);
        assert!(find("llama4", "17Bx16E").is_none());
        assert!(known().contains(&"deepseek_v3/16B".to_string()));
    }
}
