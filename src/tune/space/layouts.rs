//! The parallel-layout space ([`LAYOUT_SPACE`]): its knobs depend on the world and the model,
//! so [`super::find`] gives a template whose knobs name the layout's flags with no values yet
//! ([`Space::is_unfilled`]: no candidates, the flags a profile must model), and a sweep fills
//! it ([`Space::of_layouts`]) once its trials' world is known.

use super::Space;
use crate::domain::study::{Knob, MemoryTrend};
use crate::tune::layout::frame::Frame;
use crate::tune::layout::{self, Bounds, Layout, titan};
use serde_json::Value;

/// The name of the parallel-layout space.
pub const LAYOUT_SPACE: &str = "parallel-layout";

const DESCRIPTION: &str = "Parallel layouts on the trials' world: TP within a node, PP, VPP, CP, \
                           EP (MoE) and micro batch, ordered and pruned by the layout prior \
                           (Megatron-LM and TorchTitan)";

/// How a layout flag moves memory: the micro batch up, the others in no order the space knows.
fn trend(flag: &str) -> MemoryTrend {
    if flag == "micro_batch_size" {
        MemoryTrend::Increasing
    } else {
        MemoryTrend::Varies
    }
}

/// The space before a sweep fills it: a knob per layout flag of either backend, without
/// values.
pub(super) fn template() -> Space {
    let mut flags: Vec<&str> = layout::FLAGS.iter().chain(titan::FLAGS).copied().collect();
    flags.sort_unstable();
    Space {
        name: LAYOUT_SPACE.to_string(),
        description: DESCRIPTION.to_string(),
        requires: None,
        knobs: flags
            .iter()
            .map(|f| Knob {
                flag: f.to_string(),
                values: Vec::new(),
                memory: trend(f),
            })
            .collect(),
        baseline: None,
    }
}

impl Space {
    /// A space made for a world and a model ([`LAYOUT_SPACE`]), not made yet: a knob without
    /// values.
    pub fn is_unfilled(&self) -> bool {
        self.knobs.iter().any(|k| k.values.is_empty())
    }

    /// The sweep space of the layouts in `b` on its world, written as `frame` writes them: a
    /// group knob `@layout` whose values set TP, PP, VPP, CP, EP (MoE) and sequence
    /// parallelism, in the order [`layout::space`] lists them (the current layout first), and
    /// the micro batch. Megatron's micro batch is one flag, varied after the layout; a
    /// TorchTitan one is a group knob `@micro` varied first, because with PP the layout sets
    /// the local batch itself (a later knob's keys win).
    pub fn of_layouts(b: &Bounds, current: &Layout, frame: &Frame) -> Space {
        let mut structural: Vec<Layout> = Vec::new();
        for l in layout::space(b, current) {
            let s = Layout { micro: 1, ..l };
            if !structural.contains(&s) {
                structural.push(s);
            }
        }
        let values = structural
            .iter()
            .map(|l| Value::Object(frame.structural(l, b.world).into_iter().collect()))
            .collect();
        let layouts = Knob {
            flag: "@layout".to_string(),
            values,
            memory: MemoryTrend::Varies,
        };
        let micro = frame.micro_knob(&b.micro);
        // A micro batch first: the experiment's own settings are the grid's where the current
        // micro batch meets the current layout (listed first), which values cannot show when
        // the layout writes a `-1` out.
        let (knobs, baseline) = if frame.micro_first() {
            let at = b.micro.iter().position(|m| *m == current.micro);
            (vec![micro, layouts], at.map(|i| vec![i, 0]))
        } else {
            (vec![layouts, micro], None)
        };
        let labels: Vec<String> = b.micro.iter().map(u64::to_string).collect();
        Space {
            name: LAYOUT_SPACE.to_string(),
            description: format!(
                "Parallel layouts on {} GPUs ({} a node): {} layouts × micro batch {}",
                b.world,
                b.gpus_per_node,
                structural.len(),
                labels.join(", ")
            ),
            requires: Some(frame.backend().to_string()),
            knobs,
            baseline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::overrides::values_of;
    use crate::megatron::Params;
    use crate::tune::layout::bounds;
    use serde_json::json;

    #[test]
    fn the_template_names_the_flags_and_has_no_candidates() {
        let t = template();
        assert!(t.is_unfilled());
        assert!(t.candidates().is_empty());
        let flags = t.flags();
        assert!(
            layout::FLAGS
                .iter()
                .chain(titan::FLAGS)
                .all(|f| flags.contains(&f.to_string()))
        );
        assert_eq!(flags.len(), layout::FLAGS.len() + titan::FLAGS.len());
        // What moves memory is every layout flag: a stand-in's peaks cannot rank any of them.
        assert_eq!(t.memory_flags(), flags);
    }

    #[test]
    fn the_sweep_space_is_the_structural_layouts_times_the_micro_batch() {
        let p = Params::of_ints(&[
            ("num_layers", 32),
            ("seq_length", 4096),
            ("micro_batch_size", 2),
        ]);
        let b = bounds(&p, false, 8, 8);
        let s = Space::of_layouts(&b, &Layout::of(&p), &Frame::Megatron { moe: false });
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

    #[test]
    fn a_torchtitan_space_varies_the_micro_batch_first_and_knows_its_baseline() {
        let v = values_of(
            "model.name=llama3 model.flavor=8B training.seq_len=4096 \
             training.local_batch_size=2 parallelism.data_parallel_shard_degree=-1",
        );
        let f = crate::tune::layout::frame::of_config(&v, 8, 8).unwrap();
        let s = Space::of_layouts(&f.bounds, &f.current, &f.frame);
        assert_eq!(s.requires.as_deref(), Some("torchtitan"));
        assert_eq!(s.knobs[0].flag, "@micro");
        assert_eq!(s.knobs[1].flag, "@layout");
        // The config's micro batch 2 is the second of 1, 2, 4, 8; its layout the first.
        assert_eq!(s.baseline, Some(vec![1, 0]));
        let cands = s.candidates();
        let at = |micro: usize, pp: u64| {
            cands
                .iter()
                .find(|c| {
                    c.ranks[0] == micro
                        && c.overrides["parallelism.pipeline_parallel_degree"] == json!(pp)
                        && c.overrides["parallelism.tensor_parallel_degree"] == json!(1)
                })
                .unwrap()
                .overrides
                .clone()
        };
        // Without PP the micro batch is the local batch; with PP 2 (DP 4) the local batch is
        // the global 16 over DP, in microbatches of the micro batch.
        let flat = at(2, 1);
        assert_eq!(flat["training.local_batch_size"], json!(4));
        assert_eq!(flat["training.global_batch_size"], json!(16));
        let piped = at(2, 2);
        assert_eq!(piped["training.local_batch_size"], json!(4));
        assert_eq!(
            piped["parallelism.pipeline_parallel_microbatch_size"],
            json!(4)
        );
        let piped1 = at(0, 2);
        assert_eq!(piped1["training.local_batch_size"], json!(4));
        assert_eq!(
            piped1["parallelism.pipeline_parallel_microbatch_size"],
            json!(1)
        );
    }
}
