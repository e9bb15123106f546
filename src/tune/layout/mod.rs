//! Parallel layouts of a Megatron job: TP × PP × VPP × CP × EP × sequence parallelism × micro
//! batch on a given world; data parallelism is what the world leaves. [`space`] lists the
//! candidates a world and a model allow to be tried (each still judged by the lint before
//! anything launches); [`cost`] is the prior that predicts a layout's step from its compute, its
//! communication and its pipeline bubble.

pub mod cost;
pub mod frame;
pub mod titan;

use crate::domain::study::Overrides;
use crate::megatron::Params;
use serde::Serialize;
use serde_json::{Value, json};

/// One parallel layout: the sizes Megatron's `initialize_model_parallel` builds groups of, and
/// the micro batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Layout {
    pub tp: u64,
    pub pp: u64,
    /// Virtual pipeline stages per rank (None: the plain 1F1B schedule).
    pub vpp: Option<u64>,
    pub cp: u64,
    pub ep: u64,
    /// Sequence parallelism (Megatron runs it only with TP > 1).
    pub sp: bool,
    pub micro: u64,
}

impl Layout {
    /// The layout a config runs with, as Megatron derives it ([`Params`]).
    pub fn of(p: &Params) -> Layout {
        let par = &p.parallelism;
        Layout {
            tp: par.tp,
            pp: par.pp,
            vpp: par.vpp,
            cp: par.cp,
            ep: par.ep,
            sp: par.sequence_parallel,
            micro: p.batch.micro.unwrap_or(1),
        }
    }

    /// GPUs one model replica spans: TP × PP × CP.
    pub fn model_size(&self) -> u64 {
        self.tp * self.pp * self.cp
    }

    /// The data-parallel size on `world` GPUs (None: the replica does not tile the world).
    pub fn dp(&self, world: u64) -> Option<u64> {
        let m = self.model_size();
        (world >= m && world.is_multiple_of(m)).then(|| world / m)
    }

    /// The flags that set this layout, as a sweep candidate's overrides. The interleaving is
    /// set by `num_virtual_stages_per_pipeline_rank` alone (Megatron asserts that at most one
    /// of the two ways is set).
    pub fn overrides(&self, moe: bool) -> Overrides {
        let mut o = Overrides::new();
        o.insert("tensor_model_parallel_size".into(), json!(self.tp));
        o.insert("pipeline_model_parallel_size".into(), json!(self.pp));
        o.insert(
            "num_virtual_stages_per_pipeline_rank".into(),
            self.vpp.map_or(Value::Null, |v| json!(v)),
        );
        o.insert("num_layers_per_virtual_pipeline_stage".into(), Value::Null);
        o.insert("context_parallel_size".into(), json!(self.cp));
        if moe {
            o.insert("expert_model_parallel_size".into(), json!(self.ep));
        }
        o.insert("sequence_parallel".into(), json!(self.sp));
        o.insert("micro_batch_size".into(), json!(self.micro));
        o
    }

    /// `TP2 PP2 VPP2 CP1 EP1 SP MBS2`: the layout in one line.
    pub fn label(&self) -> String {
        let mut s = format!("TP{} PP{}", self.tp, self.pp);
        if let Some(v) = self.vpp {
            s.push_str(&format!(" VPP{v}"));
        }
        s.push_str(&format!(" CP{} EP{}", self.cp, self.ep));
        if self.sp {
            s.push_str(" SP");
        }
        s.push_str(&format!(" MBS{}", self.micro));
        s
    }
}

/// The flags a layout sets ([`Layout::overrides`]).
pub const FLAGS: &[&str] = &[
    "context_parallel_size",
    "expert_model_parallel_size",
    "micro_batch_size",
    "num_layers_per_virtual_pipeline_stage",
    "num_virtual_stages_per_pipeline_rank",
    "pipeline_model_parallel_size",
    "sequence_parallel",
    "tensor_model_parallel_size",
];

/// The lint rules a layout itself can break (Megatron's asserts on parallel sizes against the
/// world, the model and the batch): a layout that breaks one is illegal even when the
/// experiment's own layout breaks it too.
pub const RULES: &[&str] = &[
    "context-parallel-seq-length",
    "experts-expert-parallel",
    "ffn-tensor-parallel",
    "global-batch-divisibility",
    "heads-tensor-parallel",
    "moe-ffn-expert-tensor-parallel",
    "moe-tp-sequence-parallel",
    "pipeline-layers",
    "pipeline-layout-stages",
    "query-groups-tensor-parallel",
    "sequence-parallel-seq-length",
    "vpp-args-exclusive",
    "vpp-layers",
    "vpp-microbatches",
    "vpp-pipeline-size",
    "world-expert-parallel",
    "world-model-parallel",
];

/// What bounds the space a world and a model give, and why (printed with the layouts).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bounds {
    pub world: u64,
    pub gpus_per_node: u64,
    pub tp: Vec<u64>,
    pub pp: Vec<u64>,
    pub vpp: Vec<Option<u64>>,
    pub cp: Vec<u64>,
    pub ep: Vec<u64>,
    pub micro: Vec<u64>,
    /// How each dimension was bounded, in words.
    pub notes: Vec<String>,
}

/// Whether a config places its pipeline stages itself (`pipeline_model_parallel_layout`, an
/// uneven first or last stage): then its PP and VPP are not the space's to change.
pub fn places_own_stages(
    values: &std::collections::BTreeMap<String, crate::domain::value::Value>,
) -> bool {
    [
        "pipeline_model_parallel_layout",
        "decoder_first_pipeline_num_layers",
        "decoder_last_pipeline_num_layers",
    ]
    .iter()
    .any(|k| values.get(*k).is_some_and(|v| !v.is_null()))
}

/// A config's typed parameters, the bounds of its layout space on `world` GPUs
/// (`gpus_per_node` a node) and its own layout.
pub fn of_config(
    values: &std::collections::BTreeMap<String, crate::domain::value::Value>,
    world: u64,
    gpus_per_node: u64,
) -> (Params, Bounds, Layout) {
    let p = Params::from_values(values);
    let b = bounds(&p, places_own_stages(values), world, gpus_per_node);
    let current = Layout::of(&p);
    (p, b, current)
}

/// Powers of two from 1 up to `max`.
fn powers(max: u64) -> Vec<u64> {
    std::iter::successors(Some(1u64), |x| x.checked_mul(2))
        .take_while(|x| *x <= max.max(1))
        .collect()
}

/// The sequences from which CP pays: below this, CP only splits attention that is already
/// cheap (Megatron's docs on context parallelism target long-context training).
pub const CP_FROM_SEQ: u64 = 8192;

/// The values each dimension takes for a model on `world` GPUs, `gpus_per_node` a node.
///
/// * TP: powers of two within one node (Megatron's docs and the tuning guide: TP all-reduces
///   every layer and wants the intra-node links);
/// * PP: powers of two up to the layers and the world, unless the config fixes its stages
///   (`pipeline_model_parallel_layout`, uneven first or last stage): then its own;
/// * VPP: none, 2 and 4 (with PP > 1);
/// * CP: 1, and powers of two within a node from a sequence of [`CP_FROM_SEQ`];
/// * EP (MoE): powers of two up to the experts and the world;
/// * micro batch: 1, 2, 4, 8 and the config's own.
pub fn bounds(p: &Params, fixed_stages: bool, world: u64, gpus_per_node: u64) -> Bounds {
    let node = gpus_per_node.clamp(1, world.max(1));
    let mut notes = vec![format!(
        "TP within a node: up to {node} (TP all-reduces every layer; Megatron's docs keep it \
         on the intra-node links)"
    )];
    let layers = p.shape.layers.unwrap_or(1);
    let (pp, vpp) = if fixed_stages {
        notes.push(format!(
            "PP fixed at {} and VPP at {}: the config places its stages itself \
             (pipeline_model_parallel_layout or an uneven first/last stage)",
            p.parallelism.pp,
            p.parallelism.vpp.map_or("none".into(), |v| v.to_string())
        ));
        (vec![p.parallelism.pp], vec![p.parallelism.vpp])
    } else {
        let pp = powers(layers.min(world));
        // Interleaving splits a pipeline: none without one.
        let vpp = if pp.len() > 1 {
            vec![None, Some(2), Some(4)]
        } else {
            vec![None]
        };
        (pp, vpp)
    };
    let seq = p.shape.seq.unwrap_or(0);
    let cp = if seq >= CP_FROM_SEQ {
        powers(node)
    } else {
        notes.push(format!(
            "CP 1: the sequence ({seq}) is under {CP_FROM_SEQ}, where context parallelism pays"
        ));
        vec![1]
    };
    let ep = match &p.moe {
        Some(m) => powers(m.experts.min(world)),
        None => vec![1],
    };
    let mut micro = vec![1, 2, 4, 8];
    if let Some(m) = p.batch.micro
        && !micro.contains(&m)
    {
        micro.push(m);
        micro.sort_unstable();
    }
    Bounds {
        world,
        gpus_per_node: node,
        tp: powers(node),
        pp,
        vpp,
        cp,
        ep,
        micro,
        notes,
    }
}

/// Every layout of the bounds whose replica tiles the world (data parallelism is the
/// quotient), the current one first if it is among them. Sequence parallelism is on with
/// TP > 1 (Megatron's docs: it removes the activations TP replicates, for the same
/// communication volume). Whether Megatron accepts each is the lint's to judge.
pub fn space(b: &Bounds, current: &Layout) -> Vec<Layout> {
    let mut out = Vec::new();
    for &tp in &b.tp {
        for &pp in &b.pp {
            for &vpp in &b.vpp {
                if vpp.is_some() && pp == 1 {
                    continue;
                }
                for &cp in &b.cp {
                    for &ep in &b.ep {
                        for &micro in &b.micro {
                            let l = Layout {
                                tp,
                                pp,
                                vpp,
                                cp,
                                ep,
                                sp: tp > 1,
                                micro,
                            };
                            if l.dp(b.world).is_some() {
                                out.push(l);
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(i) = out.iter().position(|l| l == current) {
        out.remove(i);
    }
    out.insert(0, *current);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dense_model_on_one_node_has_the_layouts_that_tile_it() {
        let p = Params::of_ints(&[
            ("num_layers", 32),
            ("seq_length", 4096),
            ("micro_batch_size", 1),
        ]);
        let b = bounds(&p, false, 8, 8);
        assert_eq!(b.tp, vec![1, 2, 4, 8]);
        assert_eq!(b.pp, vec![1, 2, 4, 8]);
        assert_eq!(b.cp, vec![1], "no CP under {CP_FROM_SEQ}");
        let s = space(&b, &Layout::of(&p));
        assert_eq!(s[0], Layout::of(&p));
        // TP × PP dividing 8: 10 pairs; VPP 2 and 4 for the 6 with PP > 1; 4 micro batches.
        assert_eq!(s.len(), (10 + 2 * 6) * 4);
        assert!(s.iter().all(|l| l.dp(8).is_some() && l.sp == (l.tp > 1)));
        assert!(s.iter().all(|l| l.vpp.is_none() || l.pp > 1));
    }

    #[test]
    fn two_nodes_keep_tp_within_a_node_and_moe_adds_ep() {
        let p = Params::of_ints(&[
            ("num_layers", 16),
            ("seq_length", 16384),
            ("num_experts", 8),
        ]);
        let b = bounds(&p, false, 16, 8);
        assert_eq!(b.tp, vec![1, 2, 4, 8]);
        assert_eq!(b.cp, vec![1, 2, 4, 8]);
        assert_eq!(b.ep, vec![1, 2, 4, 8]);
        assert!(space(&b, &Layout::of(&p)).iter().all(|l| l.tp <= 8));
    }

    #[test]
    fn stages_the_config_places_itself_stay() {
        let p = Params::of_ints(&[("num_layers", 16), ("pipeline_model_parallel_size", 4)]);
        let b = bounds(&p, true, 8, 8);
        assert_eq!((b.pp.clone(), b.vpp.clone()), (vec![4], vec![None]));
        assert!(b.notes.iter().any(|n| n.contains("PP fixed at 4")));
    }

    #[test]
    fn the_flags_are_those_a_layout_sets() {
        let l = Layout {
            tp: 2,
            pp: 2,
            vpp: Some(2),
            cp: 2,
            ep: 2,
            sp: true,
            micro: 2,
        };
        let o = l.overrides(true);
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        assert_eq!(keys, FLAGS);
    }

    #[test]
    fn every_layout_rule_is_a_lint_code() {
        for r in RULES {
            assert!(crate::config::lint::codes::is_code(r), "{r}");
        }
    }

    #[test]
    fn overrides_set_one_way_of_interleaving() {
        let l = Layout {
            tp: 2,
            pp: 2,
            vpp: Some(2),
            cp: 1,
            ep: 4,
            sp: true,
            micro: 2,
        };
        let o = l.overrides(true);
        assert_eq!(o["num_virtual_stages_per_pipeline_rank"], json!(2));
        assert_eq!(o["num_layers_per_virtual_pipeline_stage"], Value::Null);
        assert_eq!(o["expert_model_parallel_size"], json!(4));
        assert!(
            !l.overrides(false)
                .contains_key("expert_model_parallel_size")
        );
        assert_eq!(l.label(), "TP2 PP2 VPP2 CP1 EP4 SP MBS2");
    }
}
