//! The links a layout study measured ([`LinkScale`]), carried to the next layout study of the
//! workspace on the same machine: until a study's own layouts tell compute from communication,
//! its search scales the prior's communication by what the earlier study measured instead of
//! by the one ratio its first layout gives both.

use crate::domain::evidence::Basis;
use crate::domain::study::{CarriedLinks, StudyRecord};
use crate::store::Store;

/// Where a study ran: what must match for its links to be this study's.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    pub profile: &'a str,
    /// The GPU model measured on.
    pub gpu: &'a str,
    /// The trials' world.
    pub gpus: u64,
    pub gpus_per_node: u64,
}

/// The link scale of the workspace's latest finished layout study measured on the same GPU
/// model with the same profile, world and node size (the groups then cross the same links),
/// other than the study named `except` (the one being run or resumed). A study on a CPU
/// stand-in, or one that swept what its profile does not model, measured no links.
pub fn carried(store: &Store, node: Node<'_>, except: &str) -> Option<CarriedLinks> {
    let rows = store.list_studies().unwrap_or_default();
    rows.iter().rev().find_map(|row| {
        if row.name == except {
            return None;
        }
        let rec: StudyRecord = serde_json::from_str(row.notes.as_deref()?).ok()?;
        let scale = rec.link_scale?;
        let on_gpu = matches!(
            &rec.basis,
            Some(Basis::Measured { gpu: Some(g), .. }) if g == node.gpu
        );
        let same = on_gpu
            && rec.profile == node.profile
            && rec.gpus == node.gpus
            && scale.gpus_per_node == node.gpus_per_node
            && rec.unmodeled.is_empty();
        same.then(|| CarriedLinks {
            scale,
            from: row.name.clone(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::study::LinkScale;
    use serde_json::json;
    use std::path::Path;

    fn stored(store: &Store, name: &str, gpu: &str, gpus: u64, scale: Option<f64>) {
        let mut rec = json!({
            "space": "parallel-layout", "config": "/x/exp.yaml", "profile": "megatron",
            "gpus": gpus, "candidates": [], "gpu_seconds": 100.0, "trials": 4, "log": [],
            "basis": {"kind": "measured", "profile": "megatron", "gpu": gpu},
        });
        if let Some(b) = scale {
            rec["link_scale"] = json!({"comm_ms_per_s": b, "gpus_per_node": 8, "points": 4});
        }
        let id = store
            .create_study(name, Path::new("/x/exp.yaml"), "sweep")
            .unwrap();
        store.set_study_notes(id, Some(&rec.to_string())).unwrap();
    }

    #[test]
    fn the_latest_study_on_the_same_node_is_carried() {
        let store = Store::open_in_memory().unwrap();
        let node = Node {
            profile: "megatron",
            gpu: "H200",
            gpus: 8,
            gpus_per_node: 8,
        };
        assert!(carried(&store, node, "now").is_none());
        stored(&store, "first", "H200", 8, Some(2000.0));
        stored(&store, "second", "H200", 8, Some(2500.0));
        stored(&store, "other-gpu", "MI300X", 8, Some(9000.0));
        stored(&store, "other-world", "H200", 16, Some(9000.0));
        stored(&store, "no-fit", "H200", 8, None);
        let c = carried(&store, node, "now").unwrap();
        assert_eq!(c.from, "second");
        assert_eq!(
            c.scale,
            LinkScale {
                comm_ms_per_s: 2500.0,
                gpus_per_node: 8,
                points: 4
            }
        );
        // The study being resumed does not carry into itself.
        assert_eq!(carried(&store, node, "second").unwrap().from, "first");
        let wider = Node {
            gpus_per_node: 4,
            ..node
        };
        assert!(carried(&store, wider, "now").is_none());
    }
}
