//! Where a trial runs and on how many ranks — the one place the project works out a world. A
//! [`Placement`] comes from what was asked ([`Asked`]: `--gpus`, a batch job's nodes and GPUs
//! per node, the launcher's variables as the launch sets them, the defaults file, a
//! one-process profile, the GPUs found here), in that order, and says where each figure came
//! from. The lint gate, sweep legality, the cost of trials, the TUI's question, the views and
//! the engine all read it.

use super::env::{EnvSource, LaunchEnv};
use crate::app::AppError;
use crate::megatron::{Origin, World, WorldSource, parse_count};

/// Ranks a GPU launch starts when nothing says how many (no `--gpus`, launcher variables or
/// detected GPU): one 8-GPU node, the launchers' own default. Only the launch uses it; lint
/// checks no world rule against it.
pub const FALLBACK_GPUS: u64 = 8;

/// A batch job's shape as asked, each figure with where it was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobAsk {
    pub nodes: (u32, Origin),
    pub gpus_per_node: Option<(u32, Origin)>,
}

/// What a placement is worked out from.
pub struct Asked<'a> {
    /// `--gpus` (the request's, else the session's): the world size.
    pub gpus: Option<u64>,
    /// A batch job's nodes and GPUs per node (None: on this node).
    pub job: Option<JobAsk>,
    /// The environment as the launch sets it, with where each variable came from.
    pub env: &'a LaunchEnv,
    /// `gpus` of the defaults file.
    pub configured: Option<u64>,
    /// The profile runs one process whatever the parallel sizes (the proxies).
    pub one_process: bool,
    /// The GPUs found on this node (asked only when nothing else says).
    pub detected: &'a dyn Fn() -> Option<World>,
}

/// Where a trial runs, on how many ranks, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The world (ranks) with its source; None: unknown (the launch starts [`FALLBACK_GPUS`]
    /// and lint checks no world rule).
    pub world: Option<World>,
    /// Nodes the trial spans.
    pub nodes: u64,
    /// Ranks (or, for a one-process profile, processes) on each node.
    pub per_node: u64,
    /// It runs as a batch job.
    pub job: bool,
}

impl Placement {
    /// Ranks the launch starts: the world, else [`FALLBACK_GPUS`] on each of its nodes (the
    /// launchers' own default: a job's nodes each start a node's worth).
    pub fn ranks(&self) -> u64 {
        self.world
            .map_or(FALLBACK_GPUS * self.nodes.max(1), |w| w.gpus)
    }

    /// What the launch says when the world is unknown.
    pub fn unknown_note(&self) -> Option<String> {
        if self.world.is_some() {
            return None;
        }
        Some(if self.job {
            format!(
                "the GPUs per node of the job are unknown (no --gpus-per-node, GPUS_PER_NODE or \
                 --gpus): its launcher starts {FALLBACK_GPUS} ranks on each of its {}, {} in all; \
                 pass --gpus-per-node G to choose",
                crate::util::text::count(self.nodes as usize, "node", "nodes"),
                self.ranks()
            )
        } else {
            unknown_size_note(self.ranks())
        })
    }
}

/// What a launch at an unknown world does (the CLI's note on a trial and the TUI's question
/// before one say it in these words): `ranks` is what it starts.
pub fn unknown_size_note(ranks: u64) -> String {
    format!(
        "the world size is unknown (no --gpus, no GPUS_PER_NODE × NNODES, no GPU detected here): \
         launching {ranks} ranks, one 8-GPU node; pass --gpus N to choose"
    )
}

/// The launcher variables of the world, as the launch sets them; a value that is not a count
/// is refused (the launcher would fail on it, and the world could not be known).
fn launcher_vars(env: &LaunchEnv, one_process: bool) -> Result<Option<World>, AppError> {
    if !one_process {
        for key in ["GPUS_PER_NODE", "NNODES"] {
            let Some(value) = env.env.get(key) else {
                continue;
            };
            if parse_count(value).is_some() {
                continue;
            }
            let from = match env.source(key) {
                EnvSource::Flag => "--env".to_string(),
                EnvSource::Profile(p) => format!("the env: of profile {p}"),
                _ => "the environment primus-tune runs in".to_string(),
            };
            let what = if key == "NNODES" {
                "nodes"
            } else {
                "GPUs per node"
            };
            return Err(AppError::Failed(format!(
                "{key}={value:?} ({from}) is not a count of {what} (a whole number, 1 or more): \
                 the launcher would fail on it, and the trial's world could not be known; set it \
                 to a count, or unset it"
            )));
        }
    }
    let by_profile = ["GPUS_PER_NODE", "NNODES"]
        .iter()
        .any(|k| matches!(env.source(k), EnvSource::Profile(_)));
    Ok(World::from_env(|k| env.env.get(k)).map(|w| if by_profile { w.by_profile() } else { w }))
}

/// The placement of a launch on this node: `--gpus`, else the launcher's variables
/// (`GPUS_PER_NODE` × `NNODES`), else the defaults file's `gpus`, else the one process of a
/// one-process profile, else the GPUs found here; unknown when nothing says.
fn on_this_node(a: &Asked<'_>) -> Result<Placement, AppError> {
    let world = match a.gpus.and_then(World::flag) {
        Some(w) => Some(w),
        None => launcher_vars(a.env, a.one_process)?
            .or_else(|| a.configured.and_then(World::configured))
            .or_else(|| a.one_process.then(World::one_process))
            .or_else(a.detected),
    };
    let nodes = world.map_or(1, |w| w.nodes());
    Ok(Placement {
        world,
        nodes,
        per_node: world.map_or(FALLBACK_GPUS, |w| (w.gpus / nodes).max(1)),
        job: false,
    })
}

/// The placement of a batch job: its nodes × GPUs per node, the GPUs per node from
/// `--gpus-per-node` (or the profile's or the defaults file's), else `GPUS_PER_NODE` as the
/// launch sets it, else `--gpus` (or the defaults file's `gpus`) over the nodes, else one
/// process per node for a one-process profile; unknown when nothing says (never the GPUs of
/// the node that submits it).
fn as_job(a: &Asked<'_>, job: JobAsk) -> Result<Placement, AppError> {
    let nodes = u64::from(job.nodes.0.max(1));
    let env_per_node = match launcher_vars(a.env, a.one_process)? {
        Some(World {
            source: WorldSource::Environment { gpus_per_node, .. },
            ..
        }) => Some(gpus_per_node),
        _ => None,
    };
    let total = |gpus: u64, what: &str, from: Origin| -> Result<(u64, Origin), AppError> {
        if gpus.is_multiple_of(nodes) && gpus >= nodes {
            Ok((gpus / nodes, from))
        } else {
            Err(AppError::Usage(format!(
                "{what} {gpus} is not a whole number of GPUs on each of the job's {} (--nodes \
                 from {}): give --gpus-per-node instead",
                crate::util::text::count(nodes as usize, "node", "nodes"),
                job.nodes.1.text()
            )))
        }
    };
    let per_node: Option<(u64, Origin)> = match (job.gpus_per_node, a.gpus) {
        (Some((g, from)), Some(world)) if u64::from(g) * nodes != world => {
            return Err(AppError::Usage(format!(
                "--gpus {world} does not match the job's {} × {} per node = {} (GPUs per node \
                 from {}): give one of them",
                crate::util::text::count(nodes as usize, "node", "nodes"),
                crate::util::text::count(g as usize, "GPU", "GPUs"),
                nodes * u64::from(g),
                from.text()
            )));
        }
        (Some((g, from)), _) => Some((u64::from(g), from)),
        (None, Some(world)) => Some(total(world, "--gpus", Origin::Flag)?),
        (None, None) => match env_per_node {
            Some(g) => Some((g, env_origin(a.env))),
            None if a.one_process => Some((1, Origin::BuiltIn)),
            None => a
                .configured
                .map(|g| total(g, "`gpus` of the defaults file", Origin::DefaultsFile))
                .transpose()?,
        },
    };
    let world =
        per_node.and_then(|(g, from)| World::job(nodes, g, (job.nodes.1, from), !a.one_process));
    Ok(Placement {
        world,
        nodes,
        per_node: per_node.map_or(FALLBACK_GPUS, |(g, _)| g),
        job: true,
    })
}

/// Where `GPUS_PER_NODE` of the launch came from.
fn env_origin(env: &LaunchEnv) -> Origin {
    match env.source("GPUS_PER_NODE") {
        EnvSource::Flag => Origin::Flag,
        EnvSource::Profile(_) => Origin::Profile,
        _ => Origin::Environment,
    }
}

/// Where and on how many ranks a launch runs: the one computation of a world.
pub fn place_world(a: &Asked<'_>) -> Result<Placement, AppError> {
    match a.job {
        Some(job) => as_job(a, job),
        None => on_this_node(a),
    }
}

/// The world a launch without a profile or a job places: `--gpus`, else the launcher's
/// variables, else the defaults file's `gpus`, else what `detected` finds (None when nothing
/// says, or a variable is not a count). What a session's views and `primus-tune defaults` show.
pub fn plain_world(
    env: &LaunchEnv,
    gpus: Option<u64>,
    configured: Option<u64>,
    detected: &dyn Fn() -> Option<World>,
) -> Option<World> {
    place_world(&Asked {
        gpus,
        job: None,
        env,
        configured,
        one_process: false,
        detected,
    })
    .ok()
    .and_then(|p| p.world)
}

/// The GPUs a telemetry backend finds on this node — the trials' backend and roots, else `auto`
/// on this machine — as a world (× `NNODES` when set). None when no GPU is found.
pub fn gpus_found(
    telemetry: Option<&crate::run::trial::TelemetrySetup>,
    env: &crate::config::env::Env,
) -> Option<World> {
    let t = telemetry.cloned().unwrap_or_default();
    let (backend, _) = crate::telemetry::select::open(&t.backend, &t.roots).ok()?;
    let b = backend?;
    World::detected(b.name(), b.gpus().len() as u64, |k| env.get(k))
}

/// The GPUs found on this node, once looked up.
pub type Detected = std::sync::Arc<std::sync::OnceLock<Option<World>>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::env::Env;

    fn env(
        inherited: &[(&str, &str)],
        flags: &[(&str, &str)],
        profile: &[(&str, &str)],
    ) -> LaunchEnv {
        let mut e = Env::empty();
        for (k, v) in inherited {
            e.set(k, v);
        }
        LaunchEnv::new(
            e,
            flags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            Some((
                "p".into(),
                profile
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )),
        )
    }

    fn asked<'a>(e: &'a LaunchEnv, detected: &'a dyn Fn() -> Option<World>) -> Asked<'a> {
        Asked {
            gpus: None,
            job: None,
            env: e,
            configured: None,
            one_process: false,
            detected,
        }
    }

    #[test]
    fn on_this_node_the_flag_wins_then_the_launcher_then_the_file_then_detection() {
        let found = || World::detected("nvml", 1, |_| None);
        let none = env(&[], &[], &[]);
        let w = place_world(&asked(&none, &found)).unwrap();
        assert_eq!((w.ranks(), w.job), (1, false));
        assert!(matches!(
            w.world.unwrap().source,
            WorldSource::Detected { .. }
        ));
        let vars = env(&[("GPUS_PER_NODE", "4"), ("NNODES", "2")], &[], &[]);
        let w = place_world(&asked(&vars, &found)).unwrap();
        assert_eq!((w.ranks(), w.nodes, w.per_node), (8, 2, 4));
        let w = place_world(&Asked {
            gpus: Some(2),
            ..asked(&vars, &found)
        })
        .unwrap();
        assert_eq!(w.world.unwrap().source, WorldSource::Flag);
        let w = place_world(&Asked {
            configured: Some(3),
            ..asked(&none, &found)
        })
        .unwrap();
        assert_eq!(w.world.unwrap().source, WorldSource::Defaults);
        let w = place_world(&Asked {
            one_process: true,
            ..asked(&none, &found)
        })
        .unwrap();
        assert_eq!(w.world, Some(World::one_process()));
        // Nothing known: unknown, and the launch falls back.
        let nothing = || None;
        let w = place_world(&asked(&none, &nothing)).unwrap();
        assert_eq!((w.world, w.ranks()), (None, FALLBACK_GPUS));
        assert!(w.unknown_note().unwrap().contains("launching 8 ranks"));
        // The profile's env: sets the world, and says so; --env over it.
        let by_profile = env(&[], &[], &[("GPUS_PER_NODE", "4")]);
        let w = place_world(&asked(&by_profile, &found))
            .unwrap()
            .world
            .unwrap();
        assert_eq!(
            w.to_string(),
            "world size 4 (GPUS_PER_NODE × NNODES = 4 × 1, from the launch profile's env:)"
        );
        let over = env(&[], &[("GPUS_PER_NODE", "2")], &[("GPUS_PER_NODE", "4")]);
        let w = place_world(&asked(&over, &found)).unwrap().world.unwrap();
        assert_eq!(
            w.to_string(),
            "world size 2 (GPUS_PER_NODE × NNODES = 2 × 1)"
        );
    }

    #[test]
    fn a_launcher_variable_that_is_not_a_count_is_refused_with_its_source() {
        let found = || World::detected("nvml", 1, |_| None);
        let bad = env(&[], &[], &[("GPUS_PER_NODE", "eight")]);
        let e = place_world(&asked(&bad, &found)).unwrap_err().to_string();
        assert!(
            e.contains("GPUS_PER_NODE=\"eight\" (the env: of profile p)"),
            "{e}"
        );
        let zero = env(&[], &[("NNODES", "0")], &[]);
        let e = place_world(&asked(&zero, &found)).unwrap_err().to_string();
        assert!(
            e.contains("NNODES=\"0\" (--env) is not a count of nodes"),
            "{e}"
        );
        // A one-process profile reads neither.
        assert!(
            place_world(&Asked {
                one_process: true,
                ..asked(&bad, &found)
            })
            .is_ok()
        );
    }

    /// A job's world is its nodes × GPUs per node, never the submitting node's GPUs.
    #[test]
    fn a_job_runs_at_its_nodes_times_its_gpus_per_node() {
        let found = || World::detected("nvml", 1, |_| None);
        let none = env(&[], &[], &[]);
        let job = |n: u32, g: Option<u32>| JobAsk {
            nodes: (n, Origin::Flag),
            gpus_per_node: g.map(|g| (g, Origin::Flag)),
        };
        let at = |j: JobAsk, gpus: Option<u64>, one: bool| {
            place_world(&Asked {
                gpus,
                job: Some(j),
                one_process: one,
                ..asked(&none, &found)
            })
        };
        let p = at(job(2, Some(8)), None, false).unwrap();
        let w = p.world.unwrap();
        assert_eq!((w.gpus, p.nodes, p.per_node, p.job), (16, 2, 8, true));
        assert!(w.builds_groups());
        assert_eq!(
            w.to_string(),
            "world size 16 (the job's nodes × GPUs per node = 2 × 8: nodes from the command \
             line, GPUs per node from the command line)"
        );
        // --gpus spreads over the nodes, and must agree with --gpus-per-node.
        assert_eq!(at(job(2, None), Some(16), false).unwrap().per_node, 8);
        assert!(at(job(2, None), Some(3), false).is_err());
        assert!(at(job(2, Some(8)), Some(8), false).is_err());
        assert_eq!(at(job(2, Some(8)), Some(16), false).unwrap().ranks(), 16);
        // A proxy runs one process per node; it builds no parallel groups.
        let w = at(job(2, None), None, true).unwrap().world.unwrap();
        assert_eq!(w.gpus, 2);
        assert!(!w.builds_groups());
        // Nothing says the GPUs per node: unknown, not the GPUs found here; its launcher
        // starts a node's worth on each node, and per-GPU figures divide by all of them.
        let unknown = at(job(2, None), None, false).unwrap();
        assert_eq!((unknown.world, unknown.ranks()), (None, 16));
        assert!(unknown.unknown_note().unwrap().contains("16 in all"));
        // GPUS_PER_NODE as the launch sets it.
        let vars = env(&[], &[], &[("GPUS_PER_NODE", "4")]);
        let p = place_world(&Asked {
            job: Some(job(2, None)),
            ..asked(&vars, &found)
        })
        .unwrap();
        assert_eq!(p.ranks(), 8);
    }
}
