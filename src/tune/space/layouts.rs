//! The parallel-layout space ([`LAYOUT_SPACE`]): its knobs depend on the world and the model,
//! so [`super::find`] gives a template whose knobs name the layout's flags with no values yet
//! ([`Space::is_unfilled`]: no candidates, the flags a profile must model), and a sweep fills
//! it ([`Space::of_layouts`]) once its trials' world is known.

use super::Space;
use crate::domain::study::{Knob, MemoryTrend};
use crate::tune::layout::{self, Bounds, Layout};
use serde_json::{Value, json};

/// The name of the parallel-layout space.
pub const LAYOUT_SPACE: &str = "parallel-layout";

const DESCRIPTION: &str = "Parallel layouts on the trials' world: TP within a node, PP, VPP, CP, \
                           EP (MoE) and micro batch, ordered and pruned by the layout prior";

/// How a layout flag moves memory: the micro batch up, the others in no order the space knows.
fn trend(flag: &str) -> MemoryTrend {
    if flag == "micro_batch_size" {
        MemoryTrend::Increasing
    } else {
        MemoryTrend::Varies
    }
}

/// The space before a sweep fills it: a knob per layout flag, without values.
pub(super) fn template() -> Space {
    Space {
        name: LAYOUT_SPACE.to_string(),
        description: DESCRIPTION.to_string(),
        requires: Some("megatron".to_string()),
        knobs: layout::FLAGS
            .iter()
            .map(|f| Knob {
                flag: f.to_string(),
                values: Vec::new(),
                memory: trend(f),
            })
            .collect(),
    }
}

impl Space {
    /// A space made for a world and a model ([`LAYOUT_SPACE`]), not made yet: a knob without
    /// values.
    pub fn is_unfilled(&self) -> bool {
        self.knobs.iter().any(|k| k.values.is_empty())
    }

    /// The sweep space of the layouts in `b`: a group knob `@layout` whose values set TP, PP,
    /// VPP, CP, EP (MoE) and sequence parallelism, in the order [`layout::space`] lists them
    /// (the current layout first), and the micro batch.
    pub fn of_layouts(b: &Bounds, current: &Layout, moe: bool) -> Space {
        let mut structural: Vec<Layout> = Vec::new();
        for l in layout::space(b, current) {
            let s = Layout { micro: 1, ..l };
            if !structural.contains(&s) {
                structural.push(s);
            }
        }
        let values = structural
            .iter()
            .map(|l| {
                let mut o = l.overrides(moe);
                o.remove("micro_batch_size");
                Value::Object(o.into_iter().collect())
            })
            .collect();
        let micro: Vec<String> = b.micro.iter().map(u64::to_string).collect();
        Space {
            name: LAYOUT_SPACE.to_string(),
            description: format!(
                "Parallel layouts on {} GPUs ({} a node): {} layouts × micro batch {}",
                b.world,
                b.gpus_per_node,
                structural.len(),
                micro.join(", ")
            ),
            requires: Some("megatron".to_string()),
            knobs: vec![
                Knob {
                    flag: "@layout".to_string(),
                    values,
                    memory: MemoryTrend::Varies,
                },
                Knob {
                    flag: "micro_batch_size".to_string(),
                    values: b.micro.iter().map(|m| json!(m)).collect(),
                    memory: trend("micro_batch_size"),
                },
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::value::Value as V;
    use crate::megatron::Params;
    use crate::tune::layout::bounds;
    use std::collections::BTreeMap;

    fn params(kv: &[(&str, i64)]) -> Params {
        let p: BTreeMap<String, V> = kv
            .iter()
            .map(|(k, v)| (k.to_string(), V::Int(*v)))
            .collect();
        Params::from_values(&p)
    }

    #[test]
    fn the_template_names_the_flags_and_has_no_candidates() {
        let t = template();
        assert!(t.is_unfilled());
        assert!(t.candidates().is_empty());
        let flags = t.flags();
        assert_eq!(flags, layout::FLAGS);
        // What moves memory is every layout flag: a stand-in's peaks cannot rank any of them.
        assert_eq!(t.memory_flags(), flags);
    }

    #[test]
    fn the_sweep_space_is_the_structural_layouts_times_the_micro_batch() {
        let p = params(&[
            ("num_layers", 32),
            ("seq_length", 4096),
            ("micro_batch_size", 2),
        ]);
        let b = bounds(&p, false, 8, 8);
        let s = Space::of_layouts(&b, &Layout::of(&p), false);
        assert_eq!(s.knobs[0].values.len(), 10 + 2 * 6);
        assert_eq!(
            s.knobs[1].values,
            vec![json!(1), json!(2), json!(4), json!(8)]
        );
        // The current layout is the first value: TP 1, PP 1, no interleaving.
        let first = &s.knobs[0].values[0];
        assert_eq!(first["tensor_model_parallel_size"], json!(1));
        assert_eq!(first["num_virtual_stages_per_pipeline_rank"], Value::Null);
        assert!(first.get("micro_batch_size").is_none());
        assert_eq!(s.candidates().len(), (10 + 2 * 6) * 4);
    }
}
