//! One launch plan per request: the profile, the environment the launch sets (with where each
//! variable came from), the placement (world, nodes, GPUs per node, each with its source), the
//! basis of its figures (a GPU measurement, or a CPU stand-in's), and the launcher (this node,
//! or a batch scheduler) — decided once, and read by the lint gate, sweep legality, the cost
//! of trials, the TUI's question, the views and the engine.

use super::env::LaunchEnv;
use super::placement::{self, Asked, JobAsk, Placement};
use super::view::LaunchWhere;
use crate::app::{AppError, Defaults};
use crate::config::LoadOptions;
use crate::config::env::Env;
use crate::domain::evidence::Basis;
use crate::megatron::World;
use crate::run::capabilities::LaunchKind;
use crate::run::launch::Launcher;
use crate::run::profile::{KnownPlaceholders, Profile};
use crate::run::trial::TelemetrySetup;
use std::path::Path;

/// What every plan of a session starts from.
pub struct PlanBase<'a> {
    /// The session's load options: the inherited environment with `--env`, the Primus root.
    pub load: &'a LoadOptions,
    /// `--env` pairs.
    pub env: &'a [(String, String)],
    /// `--gpus` of the session.
    pub gpus: Option<u64>,
    pub defaults: &'a Defaults,
    /// The GPUs found on this node, once looked up (only when nothing else says).
    pub detected: &'a super::placement::Detected,
    /// The session's telemetry (trials sample it as their basis allows).
    pub telemetry: Option<&'a TelemetrySetup>,
}

impl PlanBase<'_> {
    /// The GPUs found on this node by the session's telemetry backend (looked up once).
    pub fn gpus_here(&self) -> Option<World> {
        *self
            .detected
            .get_or_init(|| super::placement::gpus_found(self.telemetry, &self.load.env))
    }
}

/// What one launch asks for, beyond the session.
#[derive(Debug, Clone, Default)]
pub struct PlanAsk<'a> {
    /// The trial's own environment (the request's, the tuned GEMMs'), over `--env`.
    pub env: Vec<(String, String)>,
    /// The request's `--gpus`, over the session's.
    pub gpus: Option<u64>,
    /// A batch job's launch and shape (None: on this node).
    pub job: Option<(crate::run::launch::batch::BatchLaunch, JobAsk)>,
    /// The experiment's Primus root (the launch's `{primus_root}`).
    pub primus_root: Option<&'a Path>,
}

/// Where, how and on what a launch runs.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    pub profile: Profile,
    /// The environment the launch sets, with where each variable came from (before the
    /// trial's own placeholders are known).
    pub env: LaunchEnv,
    pub placement: Placement,
    /// What its figures are evidence of (a measured basis names the GPU once telemetry sees
    /// it).
    pub basis: Basis,
    pub launcher: Launcher,
    /// The trials' telemetry as the basis allows: a CPU stand-in samples the host only (the
    /// GPUs of this node are not its evidence).
    pub telemetry: Option<TelemetrySetup>,
    /// Said at the start of its trials.
    pub notes: Vec<String>,
    /// The defaults file has Slurm settings this plan does not use (it launches here).
    pub slurm_settings_unused: bool,
}

impl LaunchPlan {
    /// The plan of `profile` with `ask` on top of `base`.
    pub fn new(
        base: &PlanBase<'_>,
        profile: Profile,
        ask: PlanAsk<'_>,
    ) -> Result<LaunchPlan, AppError> {
        let mut flags: Vec<(String, String)> = base.env.to_vec();
        flags.extend(ask.env.iter().cloned());
        let known = KnownPlaceholders {
            primus_root: ask
                .primus_root
                .map(Path::to_path_buf)
                .or_else(|| base.load.primus_root.clone()),
            ..Default::default()
        };
        let env = LaunchEnv::of(&base.load.env, &flags, &profile, &known);
        let one_process = profile.capabilities.launch == LaunchKind::OneProcess;
        let placement = placement::place_world(&Asked {
            gpus: ask.gpus.or(base.gpus),
            job: ask.job.as_ref().map(|(_, a)| *a),
            env: &env,
            configured: base.defaults.gpus(),
            one_process,
            detected: &|| base.gpus_here(),
        })?;
        let stand_in = profile.capabilities.stand_in;
        let basis = if stand_in {
            Basis::Proxy {
                profile: profile.name.clone(),
            }
        } else {
            Basis::Measured {
                profile: profile.name.clone(),
                gpu: None,
            }
        };
        let telemetry = base.telemetry.map(|t| {
            let mut t = t.clone();
            if stand_in {
                t.backend = "host".into();
            }
            t
        });
        let mut notes: Vec<String> = placement.unknown_note().into_iter().collect();
        if stand_in && base.telemetry.is_some() {
            notes.push(format!(
                "{} is a CPU stand-in: this node's GPUs are not sampled (they are not its \
                 evidence); its telemetry is the host's",
                profile.name
            ));
        }
        let launcher = match ask.job {
            Some((b, _)) => Launcher::Batch(Box::new(b)),
            None => Launcher::Local,
        };
        let slurm_settings_unused = launcher.batch().is_none() && !base.defaults.slurm.is_empty();
        if slurm_settings_unused {
            notes.push(
                "the defaults file has [slurm] settings, which apply with --slurm: this trial \
                 runs on this node"
                    .into(),
            );
        }
        Ok(LaunchPlan {
            profile,
            env,
            placement,
            basis,
            launcher,
            telemetry,
            notes,
            slurm_settings_unused,
        })
    }

    /// The plan a view shows for `profile`: a trial started now with no options of its own
    /// (on Slurm when the profile submits its own job). A placement that cannot be worked out
    /// (a launcher variable that is not a count) leaves the world unknown.
    pub fn for_view(base: &PlanBase<'_>, profile: &Profile) -> LaunchPlan {
        let job = super::slurm::launch(&Default::default(), profile, base.defaults)
            .ok()
            .flatten();
        let ask = PlanAsk {
            job: job.clone(),
            ..PlanAsk::default()
        };
        LaunchPlan::new(base, profile.clone(), ask).unwrap_or_else(|_| {
            // What a view can still show: the environment, at an unknown world.
            let env = LaunchEnv::of(
                &base.load.env,
                base.env,
                profile,
                &KnownPlaceholders::default(),
            );
            LaunchPlan {
                profile: profile.clone(),
                env,
                placement: Placement {
                    world: None,
                    nodes: 1,
                    per_node: placement::FALLBACK_GPUS,
                    job: job.is_some(),
                },
                basis: Basis::Measured {
                    profile: profile.name.clone(),
                    gpu: None,
                },
                launcher: job.map_or(Launcher::Local, |(b, _)| Launcher::Batch(Box::new(b))),
                telemetry: None,
                notes: Vec::new(),
                slurm_settings_unused: false,
            }
        })
    }

    /// The environment the job resolves its config with: the launch's, with the placeholders
    /// of the world filled (`{gpus}`, `{gpus_per_node}`, `{primus_root}`).
    pub fn config_env(&self, load: &LoadOptions) -> Env {
        let known = KnownPlaceholders {
            primus_root: load.primus_root.clone(),
            gpus: Some(self.placement.ranks()),
            gpus_per_node: Some(self.placement.per_node),
        };
        self.profile.config_env(&load.env, self.env.flags(), &known)
    }

    /// `load` as the job sees it: its environment and its world.
    pub fn job_load(&self, load: &LoadOptions) -> LoadOptions {
        let mut out = load.clone();
        out.env = self.config_env(load);
        out.world = self.placement.world;
        out
    }

    /// Where its trials run, as a question before a launch says it.
    pub fn launch_where(&self) -> LaunchWhere {
        LaunchWhere {
            placement: self.placement,
            scheduler: self.launcher.batch().map(|b| b.scheduler.name()),
            slurm_settings_unused: self.slurm_settings_unused,
        }
    }

    /// What one second of a trial costs, and in what: GPU-seconds for the ranks of a GPU
    /// launch, CPU-seconds for a stand-in's processes (one per node).
    pub fn cost_per_second(&self) -> (f64, &'static str) {
        match &self.basis {
            Basis::Proxy { .. } => (self.placement.nodes as f64, "CPU"),
            _ => (self.placement.ranks() as f64, "GPU"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Session;

    fn session(dir: &Path, gpus: Option<u64>) -> Session {
        let node =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/mi300x_spx_nps1");
        crate::app::test_session::on_recorded_node(dir, &node, gpus)
    }

    fn launcher_set() -> bool {
        let set = ["GPUS_PER_NODE", "NNODES"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if set {
            eprintln!("skipped: GPUS_PER_NODE or NNODES set in this environment");
        }
        set
    }

    /// A CPU stand-in's plan says so: its basis is a proxy's, its telemetry the host's, its
    /// cost CPU-seconds; a GPU launch's is measured, on the GPUs found here.
    #[test]
    fn the_basis_decides_the_telemetry_and_the_cost() {
        if launcher_set() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let s = session(d.path(), None);
        let proxy = crate::app::trial::find_profile(Some("proxy-cpu")).unwrap();
        let p = LaunchPlan::new(&s.plan_base(), proxy, PlanAsk::default()).unwrap();
        assert!(p.basis.is_proxy());
        assert_eq!(p.telemetry.as_ref().unwrap().backend, "host");
        assert_eq!(p.cost_per_second(), (1.0, "CPU"));
        assert!(
            p.notes.iter().any(|n| n.contains("not sampled")),
            "{:?}",
            p.notes
        );
        let gpu = crate::app::trial::find_profile(Some("megatron")).unwrap();
        let p = LaunchPlan::new(&s.plan_base(), gpu, PlanAsk::default()).unwrap();
        assert!(!p.basis.is_proxy());
        assert_eq!(p.telemetry.as_ref().unwrap().backend, "amdgpu-sysfs");
        assert_eq!(p.cost_per_second(), (8.0, "GPU"));
        assert_eq!(p.placement.ranks(), 8);
    }
}
