//! A session: the experiment a frontend works on, how it is loaded (Primus root, `--env`,
//! `--set`) and the world size it is checked for, the telemetry the trials sample, and the
//! workspace its trials and studies live in. Every command and the TUI build one the same way,
//! so they read and write the same data.

use super::AppError;
use super::defaults::Defaults;
use crate::config::env::Env;
use crate::config::overrides::{Override, parse_assignment};
use crate::config::{ConfigError, Experiment, LoadOptions};
use crate::megatron::World;
use crate::run::trial::TelemetrySetup;
use crate::store::{Store, Workspace};
use std::path::{Path, PathBuf};

/// The variable that names the workspace folder (as `--workspace` does).
pub use super::defaults::WORKSPACE_ENV;
pub use super::launch::placement::{Detected, gpus_found};

/// What a frontend was given.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// The experiment YAML; `None`: the bundled example (its editable copy in the data folder).
    pub config: Option<PathBuf>,
    pub primus_root: Option<PathBuf>,
    /// `--env KEY=VALUE` pairs, unchecked.
    pub env: Vec<String>,
    /// `--set KEY=VALUE` overrides of the view (commands that run trials take theirs in the
    /// request instead).
    pub overrides: Vec<String>,
    /// `--workspace DIR` (else `PRIMUS_TUNE_WORKSPACE`, else the default).
    pub workspace: Option<PathBuf>,
    /// `--gpus N`: the world size (else `GPUS_PER_NODE` × `NNODES`, else `gpus` of the
    /// defaults file, else the GPUs detected on this node, else unknown: the placement's).
    pub gpus: Option<u64>,
    /// `--db FILE`: this database (its folder is the workspace).
    pub db: Option<PathBuf>,
    /// Without a CONFIG, use `./.primus-tune/` when it holds a database (the commands that only
    /// read trials: `trials`, `studies`, `report`).
    pub workspace_here: bool,
    /// Telemetry of the trials; `None`: none.
    pub telemetry: Option<TelemetrySetup>,
    /// The data folder (the bundled example's copy, the keyed workspaces) instead of
    /// `$XDG_DATA_HOME` (`~/.local/share`).
    pub data_home: Option<PathBuf>,
    /// The defaults file as read; None: read it ([`Defaults::load`]).
    pub defaults: Option<Defaults>,
}

/// An experiment and where its data lives.
#[derive(Debug, Clone)]
pub struct Session {
    /// The experiment file (as given, or the bundled example's copy).
    pub experiment: PathBuf,
    /// Primus root, the launch environment (process + `--env`), the view's `--set` overrides,
    /// and the world size the experiment is linted for (`load.world`: the views' placement,
    /// [`super::launch::placement`]).
    pub load: LoadOptions,
    /// The `--env` pairs, which trials also get in their environment.
    pub env: Vec<(String, String)>,
    pub workspace: Workspace,
    pub telemetry: Option<TelemetrySetup>,
    /// The workspace was found in the current folder without a CONFIG: its listings cover every
    /// experiment stored there.
    pub all_experiments: bool,
    /// The primus-tune binary a profile's `{self}` runs (the CPU proxy); None: this executable.
    /// A program that embeds the library names the binary here.
    pub self_exe: Option<PathBuf>,
    /// The GPU model this machine reports, looked up once (a backend's start-up, NVML's
    /// included, is not repeated for every view the session builds).
    pub local_gpu: LocalGpu,
    /// Trials whose runner is gone were marked interrupted (once per session, on first use of
    /// the store).
    pub reaped: std::sync::Arc<std::sync::OnceLock<()>>,
    /// The defaults file (the profile, GPUs, workspace ... when no flag says).
    pub defaults: std::sync::Arc<Defaults>,
    /// The launch profile whose environment the views resolve with ([`Session::launched_by`]);
    /// None: the session's own (the process's and `--env`).
    pub view_profile: Option<super::launch::ViewProfile>,
    /// `--gpus` as given (a launch plan's world, unless its request names its own).
    pub gpus: Option<u64>,
    /// The GPUs found on this node, looked up once when a placement needs them.
    pub detected: std::sync::Arc<std::sync::OnceLock<Option<World>>>,
}

/// The GPU model this machine's telemetry reports and the backend that said so: looked up on
/// first use, then kept (clones of a session share it).
pub type LocalGpu = std::sync::Arc<
    std::sync::OnceLock<Option<(&'static crate::telemetry::hardware::GpuModel, String)>>,
>;

/// `KEY=VALUE` pairs of `--env`, checked.
pub fn env_pairs(items: &[String]) -> Result<Vec<(String, String)>, AppError> {
    items
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(AppError::Usage(format!(
                "--env `{kv}` is not of the form KEY=VALUE"
            ))),
        })
        .collect()
}

/// `--set` assignments, typed as Primus types `--key value`.
pub fn overrides(items: &[String]) -> Result<Vec<Override>, AppError> {
    items
        .iter()
        .map(|s| {
            parse_assignment(s).map_err(|message| {
                AppError::from(ConfigError::BadOverride {
                    text: s.clone(),
                    message,
                })
            })
        })
        .collect()
}

/// `primus-tune defaults`: every setting as a command without flags would see it, the
/// environment read through `var`, the GPUs placed as such a launch places them (no GPU
/// detection: the listing says what the settings say).
pub fn effective_defaults(
    d: &Defaults,
    var: impl Fn(&str) -> Option<String>,
) -> Vec<super::defaults::Entry> {
    let mut launcher = Env::empty();
    for k in ["GPUS_PER_NODE", "NNODES"] {
        if let Some(v) = var(k) {
            launcher.set(k, &v);
        }
    }
    let launcher = super::launch::LaunchEnv::new(launcher, Vec::new(), None);
    let world = super::launch::placement::plain_world(&launcher, None, d.gpus(), &|| None);
    d.effective(var, world)
}

/// The options' defaults file: as given, else read.
fn defaults_of(o: &SessionOptions) -> Result<Defaults, AppError> {
    match &o.defaults {
        Some(d) => Ok(d.clone()),
        None => Ok(Defaults::load()?),
    }
}

/// How the options load an experiment (Primus root, the launch environment with `--env`, the
/// `--set` overrides, the world size as a launch without a profile would place it), and the
/// `--env` pairs themselves.
pub fn load_options(o: &SessionOptions) -> Result<(LoadOptions, Vec<(String, String)>), AppError> {
    let defaults = defaults_of(o)?;
    let (load, env, _) = load_options_with(o, &defaults)?;
    Ok((load, env))
}

/// [`load_options`] with the defaults file read already, and the GPUs found here if a
/// placement asked for them.
fn load_options_with(
    o: &SessionOptions,
    defaults: &Defaults,
) -> Result<(LoadOptions, EnvPairs, Detected), AppError> {
    let env = env_pairs(&o.env)?;
    let mut process = Env::from_process();
    for (k, v) in &env {
        process.set(k, v);
    }
    let detected = Detected::default();
    let found = || *detected.get_or_init(|| gpus_found(o.telemetry.as_ref(), &process));
    let launch_env = super::launch::LaunchEnv::new(process.clone(), env.clone(), None);
    let world = super::launch::placement::plain_world(&launch_env, o.gpus, defaults.gpus(), &found);
    let load = LoadOptions {
        primus_root: o.primus_root.clone(),
        env: process,
        overrides: overrides(&o.overrides)?,
        texts: Default::default(),
        world,
    };
    Ok((load, env, detected))
}

/// `--env` pairs.
type EnvPairs = Vec<(String, String)>;

/// Where keyed workspaces go: `<data dir>/primus-tune/workspaces`.
pub fn workspaces_dir(data_home: Option<&Path>) -> PathBuf {
    crate::util::bundled::data_dir_in(data_home, "workspaces")
}

impl Session {
    /// A session from its parts, with no `--env` pairs and no telemetry (programs that embed the
    /// library, tests).
    pub fn new(experiment: PathBuf, load: LoadOptions, workspace: Workspace) -> Session {
        Session {
            experiment,
            load,
            env: Vec::new(),
            workspace,
            telemetry: None,
            all_experiments: false,
            self_exe: None,
            local_gpu: LocalGpu::default(),
            reaped: Default::default(),
            defaults: Default::default(),
            view_profile: None,
            gpus: None,
            detected: Default::default(),
        }
    }

    pub fn open(o: SessionOptions) -> Result<Session, AppError> {
        let experiment = match &o.config {
            Some(p) if !p.exists() => {
                return Err(AppError::NoInput {
                    path: p.clone(),
                    why: crate::util::paths::unopenable_why(p, "no such file"),
                });
            }
            Some(p) => p.clone(),
            None => crate::util::bundled::editable_default_experiment_in(o.data_home.as_deref())?,
        };
        let defaults = defaults_of(&o)?;
        let (load, env, detected) = load_options_with(&o, &defaults)?;
        let chosen = defaults
            .workspace(
                o.workspace.as_deref(),
                std::env::var_os(WORKSPACE_ENV).as_deref(),
            )
            .map(|r| r.value);
        let here = PathBuf::from(crate::store::WORKSPACE_BESIDE);
        let use_here = o.config.is_none() && o.workspace_here && here.join("trials.db").is_file();
        // A reading command given a workspace (`--workspace`, the variable or the defaults
        // file) or a database and no experiment reads all of it, not the bundled example's.
        let whole = o.config.is_none()
            && (use_here || o.db.is_some() || (o.workspace_here && chosen.is_some()));
        let workspace = match (&o.db, chosen) {
            (Some(db), _) => Workspace::of_db(db.clone()),
            (None, Some(dir)) => Workspace::at(dir, crate::store::WorkspaceOrigin::Chosen),
            (None, None) if use_here => Workspace::at(here, crate::store::WorkspaceOrigin::Beside),
            (None, None) => {
                Workspace::resolve(&experiment, None, &workspaces_dir(o.data_home.as_deref()))
            }
        };
        Ok(Session {
            experiment,
            load,
            env,
            all_experiments: whole,
            workspace,
            telemetry: o.telemetry,
            self_exe: None,
            local_gpu: LocalGpu::default(),
            reaped: Default::default(),
            defaults: std::sync::Arc::new(defaults),
            view_profile: None,
            gpus: o.gpus,
            detected,
        })
    }

    /// What every launch plan of this session starts from.
    pub fn plan_base(&self) -> super::launch::PlanBase<'_> {
        super::launch::PlanBase {
            load: &self.load,
            env: &self.env,
            gpus: self.gpus,
            defaults: &self.defaults,
            detected: &self.detected,
            telemetry: self.telemetry.as_ref(),
        }
    }

    /// The GPUs found on this node (looked up once).
    pub fn gpus_here(&self) -> Option<World> {
        self.plan_base().gpus_here()
    }

    /// The experiment as on disk, with the session's `--set` overrides.
    pub fn load(&self) -> Result<Experiment, AppError> {
        Ok(Experiment::load(&self.experiment, &self.load)?)
    }

    /// The experiment as on disk, without the session's `--set` overrides (what trials start
    /// from; they carry their own overrides).
    pub fn load_plain(&self) -> Result<Experiment, AppError> {
        let mut o = self.load.clone();
        o.overrides.clear();
        Ok(Experiment::load(&self.experiment, &o)?)
    }

    /// The store, created on first use.
    pub fn store(&self) -> Result<Store, AppError> {
        let s = self.workspace.open(Some(&self.experiment))?;
        self.reap(&s);
        Ok(s)
    }

    /// The store when something was stored already.
    pub fn existing_store(&self) -> Result<Option<Store>, AppError> {
        let s = self.workspace.open_existing()?;
        if let Some(s) = &s {
            self.reap(s);
        }
        Ok(s)
    }

    /// Once per session: trials whose runner is gone become `interrupted`. A failure here (a
    /// read-only database) leaves them as they are; the listing still works.
    fn reap(&self, store: &Store) {
        if self.reaped.set(()).is_ok()
            && let Err(e) = super::interrupted::reap(store)
        {
            tracing::warn!(error = %e, "could not mark interrupted trials");
        }
    }

    /// The store, or an error saying nothing was stored yet.
    pub fn require_store(&self) -> Result<Store, AppError> {
        self.existing_store()?.ok_or_else(|| AppError::NoDatabase {
            path: self.workspace.db.clone(),
            run: format!(
                "primus-tune run {}",
                crate::util::shell::quote(&self.display())
            ),
        })
    }

    /// Where the versions a save of `file` replaces are kept: the workspace's `backups/`, never
    /// beside the user's file ([`crate::config::backups`]).
    pub fn backups_of(&self, file: &Path) -> PathBuf {
        crate::config::backups::folder(&self.workspace.root.join("backups"), file)
    }

    /// The experiment path as the user reads it.
    pub fn display(&self) -> String {
        crate::util::paths::display_path(&self.experiment)
    }

    pub fn env(&self) -> &Env {
        &self.load.env
    }

    /// This experiment's path (for messages and commands the user may paste).
    pub fn path(&self) -> &Path {
        &self.experiment
    }
}
/// The session as a launch sees it (from [`super::launch`]: its environment and placement).
impl Session {
    /// This session as `profile` launches its experiment: its views resolve with the
    /// environment the launch sets and are linted at its placement ([`super::launch::plan`]), and say
    /// so.
    pub fn launched_by(&self, profile: &crate::run::profile::Profile) -> Session {
        let plan = super::launch::LaunchPlan::for_view(&self.plan_base(), profile);
        let mut load = self.load.clone();
        load.env = plan.config_env(&self.load);
        // A one-process profile (the proxies) runs its one process whatever the config asks:
        // a view of the config keeps the world the config is for.
        if plan.profile.capabilities.launch != crate::run::capabilities::LaunchKind::OneProcess {
            load.world = plan.placement.world;
        }
        let sets = plan.env.profile_sets();
        let sets = sets
            .into_iter()
            .filter(|k| load.env.get(k).is_some())
            .collect();
        Session {
            load,
            view_profile: Some(super::launch::ViewProfile {
                name: profile.name.clone(),
                sets,
                launch: plan.launch_where(),
            }),
            ..self.clone()
        }
    }

    /// Where the view's value of variable `name` comes from.
    pub fn env_source(&self, name: &str) -> super::launch::EnvSource {
        if self.load.env.get(name).is_none() {
            super::launch::EnvSource::Unset
        } else if self.env.iter().any(|(k, _)| k == name) {
            super::launch::EnvSource::Flag
        } else if let Some(p) = self
            .view_profile
            .as_ref()
            .filter(|p| p.sets.iter().any(|k| k == name))
        {
            super::launch::EnvSource::Profile(p.name.clone())
        } else {
            super::launch::EnvSource::Inherited
        }
    }

    /// The variables a value was written with (`template`, such as `${PRIMUS_PP:1}`), as the
    /// view resolved them.
    pub fn env_refs(&self, template: &str) -> Vec<super::launch::EnvRef> {
        crate::config::env::references(template)
            .into_iter()
            .map(|(name, default)| super::launch::EnvRef {
                value: self.load.env.get(&name).map(str::to_string),
                source: self.env_source(&name),
                default,
                name,
            })
            .collect()
    }
}
