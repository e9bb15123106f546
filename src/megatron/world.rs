//! The world size a config is checked for: how many ranks a launch starts, and where that number
//! came from. Megatron's start-up asserts about parallel sizes and batch sizes depend on it, so
//! lint only applies them when the world is known — it is never guessed.
//!
//! Launcher variables are read through a lookup (`|k| env.get(k)`), so this typed view stays
//! free of the config loader.

use std::fmt;

/// GPUs a node is taken to hold when nothing says: every AMD Instinct platform and NVIDIA HGX
/// board holds 8.
pub const ASSUMED_GPUS_PER_NODE: u64 = 8;

/// Where a world size came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorldSource {
    /// `--gpus N`.
    Flag,
    /// The launcher's variables: `GPUS_PER_NODE` × `NNODES` (NNODES 1 when unset); `profile`:
    /// the launch profile's `env:` set them.
    Environment {
        gpus_per_node: u64,
        nodes: u64,
        profile: bool,
    },
    /// The launch profile runs one process whatever the parallel sizes (the proxies): the
    /// trial's world is that process. It builds no parallel groups, so Megatron's group-size
    /// asserts cannot stop it; the batch rule still holds for its data-parallel size.
    Profile,
    /// `gpus = N` in the defaults file (`config.toml`).
    Defaults,
    /// A batch job's nodes × GPUs per node (Slurm's `--nodes` × `--gpus-per-node`), each
    /// from where it was set; `groups`: the launch starts a rank per GPU (false: one process
    /// per node, the proxies).
    Job {
        nodes: u64,
        gpus_per_node: u64,
        nodes_from: Origin,
        gpus_from: Origin,
        groups: bool,
    },
    /// The GPUs a telemetry backend found on this node (× `NNODES` when set).
    Detected {
        backend: &'static str,
        per_node: u64,
        nodes: u64,
        /// The visible-devices variable that limited the count (`CUDA_VISIBLE_DEVICES`, ...).
        visible: Option<&'static str>,
    },
}

/// Where a figure of a job's placement was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The command line (`--nodes`, `--gpus-per-node`, `--gpus`).
    Flag,
    /// The launch profile (its `slurm:` section, or its `env:`).
    Profile,
    /// The defaults file (`[slurm]`, `gpus`).
    DefaultsFile,
    /// The environment primus-tune runs in (`GPUS_PER_NODE`).
    Environment,
    /// One process per node (a one-process profile), or one node when nothing says.
    BuiltIn,
}

impl Origin {
    pub fn text(self) -> &'static str {
        match self {
            Origin::Flag => "the command line",
            Origin::Profile => "the launch profile",
            Origin::DefaultsFile => "the defaults file",
            Origin::Environment => "the environment",
            Origin::BuiltIn => "built-in",
        }
    }
}

/// The variables that hide GPUs from a launch on this node.
const VISIBLE: [&str; 3] = [
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
];

/// A world size with its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct World {
    /// Ranks (one per GPU), at least 1.
    pub gpus: u64,
    pub source: WorldSource,
}

/// A whole number ≥ 1 from a launcher variable.
fn count<'e>(var: impl Fn(&str) -> Option<&'e str>, key: &str) -> Option<u64> {
    parse_count(var(key)?)
}

/// A launcher variable's value as a count (`GPUS_PER_NODE`, `NNODES`): a whole number ≥ 1,
/// spaces around it allowed.
pub fn parse_count(value: &str) -> Option<u64> {
    value.trim().parse::<u64>().ok().filter(|n| *n >= 1)
}

impl World {
    /// `--gpus N` (None for 0).
    pub fn flag(gpus: u64) -> Option<World> {
        (gpus >= 1).then_some(World {
            gpus,
            source: WorldSource::Flag,
        })
    }

    /// The launcher's variables: `GPUS_PER_NODE` × `NNODES` (NNODES 1 when unset); None
    /// without a readable `GPUS_PER_NODE`.
    pub fn from_env<'e>(var: impl Fn(&str) -> Option<&'e str>) -> Option<World> {
        let gpus_per_node = count(&var, "GPUS_PER_NODE")?;
        let nodes = count(&var, "NNODES").unwrap_or(1);
        Some(World {
            gpus: gpus_per_node * nodes,
            source: WorldSource::Environment {
                gpus_per_node,
                nodes,
                profile: false,
            },
        })
    }

    /// This world, its launcher's variables marked as set by the launch profile's `env:`.
    pub fn by_profile(self) -> World {
        match self.source {
            WorldSource::Environment {
                gpus_per_node,
                nodes,
                ..
            } => World {
                source: WorldSource::Environment {
                    gpus_per_node,
                    nodes,
                    profile: true,
                },
                ..self
            },
            _ => self,
        }
    }

    /// The one process of a one-process profile.
    pub fn one_process() -> World {
        World {
            gpus: 1,
            source: WorldSource::Profile,
        }
    }

    /// `found` GPUs found by `backend` on this node — fewer when a visible-devices variable
    /// lists fewer (the launch sees only those) — times `NNODES` when set (None for 0).
    pub fn detected<'e>(
        backend: &'static str,
        found: u64,
        var: impl Fn(&str) -> Option<&'e str>,
    ) -> Option<World> {
        let nodes = count(&var, "NNODES").unwrap_or(1);
        let mut per_node = found;
        let mut visible = None;
        for name in VISIBLE {
            if let Some(list) = var(name) {
                let n = list.split(',').filter(|x| !x.trim().is_empty()).count() as u64;
                if n < per_node {
                    per_node = n;
                    visible = Some(name);
                }
            }
        }
        (per_node >= 1).then_some(World {
            gpus: per_node * nodes,
            source: WorldSource::Detected {
                backend,
                per_node,
                nodes,
                visible,
            },
        })
    }

    /// `gpus = N` of the defaults file (None for 0).
    pub fn configured(gpus: u64) -> Option<World> {
        (gpus >= 1).then_some(World {
            gpus,
            source: WorldSource::Defaults,
        })
    }

    /// A batch job's world: `nodes` × `gpus_per_node` (None for 0).
    pub fn job(
        nodes: u64,
        gpus_per_node: u64,
        from: (Origin, Origin),
        groups: bool,
    ) -> Option<World> {
        (nodes >= 1 && gpus_per_node >= 1).then_some(World {
            gpus: nodes * gpus_per_node,
            source: WorldSource::Job {
                nodes,
                gpus_per_node,
                nodes_from: from.0,
                gpus_from: from.1,
                groups,
            },
        })
    }

    /// Whether the launch starts one rank per GPU, so that Megatron builds its parallel groups
    /// over this world (false for a one-process profile).
    pub fn builds_groups(&self) -> bool {
        match self.source {
            WorldSource::Profile => false,
            WorldSource::Job { groups, .. } => groups,
            _ => true,
        }
    }

    /// GPUs a node holds, when the world's source says (the launcher's `GPUS_PER_NODE`, a
    /// job's `--gpus-per-node`, the GPUs detected here); None for a bare count (`--gpus`, the
    /// defaults file) or one process.
    pub fn gpus_per_node(&self) -> Option<u64> {
        match self.source {
            WorldSource::Environment { gpus_per_node, .. }
            | WorldSource::Job { gpus_per_node, .. } => Some(gpus_per_node),
            WorldSource::Detected { per_node, .. } => Some(per_node),
            _ => None,
        }
    }

    /// GPUs a node holds and whether that is assumed: the world's source ([`Self::gpus_per_node`]),
    /// else [`ASSUMED_GPUS_PER_NODE`].
    pub fn node(&self) -> (u64, bool) {
        match self.gpus_per_node() {
            Some(n) => (n, false),
            None => (ASSUMED_GPUS_PER_NODE, true),
        }
    }

    /// Nodes the world spans (1 when its source names none).
    pub fn nodes(&self) -> u64 {
        match self.source {
            WorldSource::Environment { nodes, .. }
            | WorldSource::Job { nodes, .. }
            | WorldSource::Detected { nodes, .. } => nodes.max(1),
            _ => 1,
        }
    }

    /// Where the number came from, in words: `--gpus`, `GPUS_PER_NODE × NNODES = 8 × 2`, ...
    pub fn source_text(&self) -> String {
        match self.source {
            WorldSource::Flag => "--gpus".into(),
            WorldSource::Environment {
                gpus_per_node,
                nodes,
                profile,
            } => format!(
                "GPUS_PER_NODE × NNODES = {gpus_per_node} × {nodes}{}",
                if profile {
                    ", from the launch profile's env:"
                } else {
                    ""
                }
            ),
            WorldSource::Profile => "the launch profile runs one process".into(),
            WorldSource::Job {
                nodes,
                gpus_per_node,
                nodes_from,
                gpus_from,
                groups,
            } => {
                let per = if groups { "GPUs" } else { "processes" };
                format!(
                    "the job's nodes × {per} per node = {nodes} × {gpus_per_node}: nodes from \
                     {}, {per} per node from {}",
                    nodes_from.text(),
                    gpus_from.text()
                )
            }
            WorldSource::Defaults => "`gpus` of the defaults file".into(),
            WorldSource::Detected {
                backend,
                per_node,
                nodes,
                visible,
            } => {
                let gpus = if per_node == 1 { "GPU" } else { "GPUs" };
                let seen = match visible {
                    Some(v) => format!(" ({v} shows {per_node})"),
                    None => String::new(),
                };
                if nodes > 1 {
                    format!(
                        "{per_node} {gpus} detected on this node by {backend}{seen} × NNODES {nodes}"
                    )
                } else {
                    format!("{per_node} {gpus} detected on this node by {backend}{seen}")
                }
            }
        }
    }

    /// A stable name of the source for JSON: `flag`, `environment`, `profile`, `detected`.
    pub fn source_name(&self) -> &'static str {
        match self.source {
            WorldSource::Flag => "flag",
            WorldSource::Environment { .. } => "environment",
            WorldSource::Profile => "profile",
            WorldSource::Defaults => "defaults-file",
            WorldSource::Job { .. } => "job",
            WorldSource::Detected { .. } => "detected",
        }
    }
}

/// `world size 8 (GPUS_PER_NODE × NNODES = 8 × 1)`
impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "world size {} ({})", self.gpus, self.source_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Launcher variables for a test.
    fn vars(kv: &[(&'static str, &'static str)]) -> HashMap<&'static str, &'static str> {
        kv.iter().copied().collect()
    }

    #[test]
    fn each_source_says_where_its_number_came_from() {
        let env = vars(&[("GPUS_PER_NODE", "8"), ("NNODES", "2")]);
        let w = World::from_env(|k| env.get(k).copied()).unwrap();
        assert_eq!(w.gpus, 16);
        assert_eq!(
            w.to_string(),
            "world size 16 (GPUS_PER_NODE × NNODES = 8 × 2)"
        );
        let w = World::configured(2).unwrap();
        assert_eq!((w.gpus, w.source), (2, WorldSource::Defaults));
        assert_eq!(w.source_name(), "defaults-file");
        let none = |_: &str| None;
        let w = World::detected("nvml", 1, none).unwrap();
        assert_eq!(
            w.to_string(),
            "world size 1 (1 GPU detected on this node by nvml)"
        );
        assert!(w.builds_groups());
        assert_eq!(World::flag(4).unwrap().source, WorldSource::Flag);
    }

    #[test]
    fn nothing_known_places_no_rank() {
        // Unreadable or zero counts say nothing.
        let env = vars(&[("GPUS_PER_NODE", "eight")]);
        let env = |k: &str| env.get(k).copied();
        assert_eq!(World::from_env(env), None);
        assert_eq!(World::flag(0), None);
        assert_eq!(World::configured(0), None);
        assert_eq!(World::detected("nvml", 0, env), None);
        // NNODES alone is not a world.
        let nodes = vars(&[("NNODES", "4")]);
        assert_eq!(World::from_env(|k| nodes.get(k).copied()), None);
    }

    #[test]
    fn detection_counts_every_node() {
        let env = vars(&[("NNODES", "4")]);
        let w = World::detected("amdgpu-sysfs", 8, |k| env.get(k).copied()).unwrap();
        assert_eq!(w.gpus, 32);
        assert!(
            w.source_text().contains("× NNODES 4"),
            "{}",
            w.source_text()
        );
    }

    #[test]
    fn a_one_process_world_builds_no_groups() {
        let w = World::one_process();
        assert_eq!(w.gpus, 1);
        assert!(!w.builds_groups());
        assert_eq!(w.source_name(), "profile");
    }

    #[test]
    fn visible_devices_limit_what_is_detected() {
        let env = vars(&[
            ("CUDA_VISIBLE_DEVICES", "0,1"),
            ("HIP_VISIBLE_DEVICES", "0,1,2"),
        ]);
        let w = World::detected("nvml", 8, |k| env.get(k).copied()).unwrap();
        assert_eq!(w.gpus, 2);
        assert!(
            w.source_text().contains("CUDA_VISIBLE_DEVICES shows 2"),
            "{w}"
        );
        // More listed than found: what is found.
        let env = vars(&[("ROCR_VISIBLE_DEVICES", "0,1,2,3")]);
        assert_eq!(
            World::detected("amdgpu-sysfs", 2, |k| env.get(k).copied())
                .unwrap()
                .gpus,
            2
        );
        // None visible: no world.
        let env = vars(&[("CUDA_VISIBLE_DEVICES", "")]);
        assert!(World::detected("nvml", 8, |k| env.get(k).copied()).is_none());
    }
}
