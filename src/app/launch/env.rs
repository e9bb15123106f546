//! The environment a session's views resolve with, and where each variable of it comes from.
//!
//! A launch profile's `env:` reaches the job it launches (say `PRIMUS_PP: "2"`, or the
//! `CUDA_DEVICE_MAX_CONNECTIONS: "1"` the Primus and Megatron profiles set). A view of the
//! experiment (`show`, `checklist`, the TUI's Flags and Checklist screens) that resolved with
//! the session's environment alone would show another config than the one that job trains.
//! [`Session::launched_by`](crate::app::session::Session::launched_by) gives the session the launch's environment (inherited < the
//! profile's `env` < `--env`, as [`crate::run::profile::Profile::config_env`] orders it), and
//! [`Session::env_source`](crate::app::session::Session::env_source) says where a variable's value came from.

use crate::config::env::Env;
use crate::run::profile::{KnownPlaceholders, Profile};
use std::collections::BTreeMap;

/// The environment a launch sets — the inherited one, the profile's `env:` over it, the
/// trial's own (`--env`, the request's) over both — and where each variable came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    pub env: Env,
    flags: Vec<(String, String)>,
    /// The profile's name and the variables its `env:` set that reached `env`.
    profile: Option<(String, Vec<String>)>,
}

impl LaunchEnv {
    /// `inherited`, with a profile's variables (as written, no placeholders) and `flags` over
    /// it.
    pub fn new(
        inherited: Env,
        flags: Vec<(String, String)>,
        profile: Option<(String, BTreeMap<String, String>)>,
    ) -> LaunchEnv {
        let mut env = inherited;
        let profile = profile.map(|(name, vars)| {
            for (k, v) in &vars {
                env.set(k, v);
            }
            (name, vars.into_keys().collect())
        });
        for (k, v) in &flags {
            env.set(k, v);
        }
        LaunchEnv {
            env,
            flags,
            profile,
        }
    }

    /// As `profile` launches: its `env:` over `base` (a variable whose value needs what only a
    /// trial knows is left out, see [`Profile::config_env`]), `flags` over that.
    pub fn of(
        base: &Env,
        flags: &[(String, String)],
        profile: &Profile,
        known: &KnownPlaceholders,
    ) -> LaunchEnv {
        let env = profile.config_env(base, flags, known);
        let sets = profile
            .filled_env(base, known)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        LaunchEnv {
            env,
            flags: flags.to_vec(),
            profile: Some((profile.name.clone(), sets)),
        }
    }

    /// Where variable `name` of the launch comes from.
    pub fn source(&self, name: &str) -> EnvSource {
        if self.env.get(name).is_none() {
            EnvSource::Unset
        } else if self.flags.iter().any(|(k, _)| k == name) {
            EnvSource::Flag
        } else if let Some((p, _)) = self
            .profile
            .as_ref()
            .filter(|(_, sets)| sets.iter().any(|k| k == name))
        {
            EnvSource::Profile(p.clone())
        } else {
            EnvSource::Inherited
        }
    }

    /// The variables the profile's `env:` set in the launch (not those `--env` sets again).
    pub fn profile_sets(&self) -> Vec<String> {
        self.profile
            .as_ref()
            .map(|(_, sets)| {
                sets.iter()
                    .filter(|k| !self.flags.iter().any(|(f, _)| f == *k))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The trial's own variables (`--env`, the request's, the tuned GEMMs').
    pub fn flags(&self) -> &[(String, String)] {
        &self.flags
    }
}

/// Where a variable of the view's environment comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvSource {
    /// `--env KEY=VALUE` (or the TUI's launch environment edits).
    Flag,
    /// The launch profile's `env:`.
    Profile(String),
    /// The environment primus-tune was started in.
    Inherited,
    /// Not set: the default applies.
    Unset,
}

impl EnvSource {
    /// As the screens say it: `--env`, `profile NAME`, `environment`, `default`.
    pub fn text(&self) -> String {
        match self {
            EnvSource::Flag => "--env".to_string(),
            EnvSource::Profile(p) => format!("profile {p}"),
            EnvSource::Inherited => "environment".to_string(),
            EnvSource::Unset => "default".to_string(),
        }
    }

    /// For JSON: `--env`, `profile`, `environment`, `unset`.
    pub fn key(&self) -> &'static str {
        match self {
            EnvSource::Flag => "--env",
            EnvSource::Profile(_) => "profile",
            EnvSource::Inherited => "environment",
            EnvSource::Unset => "unset",
        }
    }
}

/// A variable a config value was written with (`${NAME:default}`), its value in the view's
/// environment and where that came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvRef {
    pub name: String,
    pub value: Option<String>,
    pub default: Option<String>,
    pub source: EnvSource,
}

impl EnvRef {
    /// `PRIMUS_PP=2 (profile pp2)`, `PRIMUS_PP unset (default 1)`.
    pub fn describe(&self) -> String {
        match &self.value {
            Some(v) => format!("{}={v} ({})", self.name, self.source.text()),
            None => match &self.default {
                Some(d) => format!("{} unset (default {d})", self.name),
                None => format!("{} unset", self.name),
            },
        }
    }
}

/// A value's source with the variables that set it (those set; an unset one leaves the
/// written default): `moe.yaml:61 · PRIMUS_PP=2 (profile pp2)`.
pub fn source_with(source: String, refs: &[EnvRef]) -> String {
    let set: Vec<String> = refs
        .iter()
        .filter(|e| e.value.is_some())
        .map(EnvRef::describe)
        .collect();
    if set.is_empty() {
        source
    } else {
        format!("{source} · {}", set.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Session;
    use crate::app::launch::placement::Placement;
    use crate::app::launch::view::LaunchWhere;
    use crate::config::LoadOptions;
    use crate::config::env::Env;
    use crate::store::Workspace;

    fn session(env: Env, flags: &[(&str, &str)]) -> Session {
        let d = std::env::temp_dir();
        let mut s = Session::new(
            d.join("x.yaml"),
            LoadOptions {
                env,
                ..Default::default()
            },
            Workspace::of_db(d.join("none.db")),
        );
        s.env = flags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        s
    }

    fn profile(env: &[(&str, &str)]) -> Profile {
        let mut text = "name: pp2\nargv: [x]\nenv:\n".to_string();
        for (k, v) in env {
            text.push_str(&format!("  {k}: \"{v}\"\n"));
        }
        Profile::parse(&text, "pp2.yaml").unwrap()
    }

    /// The question before a launch names where it runs: this node (saying when the defaults
    /// file's Slurm settings stay unused) or the job's world.
    #[test]
    fn a_launch_says_where_it_runs() {
        use crate::megatron::{Origin, World};
        let here = Placement {
            world: World::flag(8),
            nodes: 1,
            per_node: 8,
            job: false,
        };
        let w = LaunchWhere {
            placement: here,
            scheduler: None,
            slurm_settings_unused: false,
        };
        assert_eq!(
            w.describe(),
            "Launches on this node at world size 8 (--gpus)."
        );
        let unused = LaunchWhere {
            slurm_settings_unused: true,
            ..w
        };
        assert!(
            unused
                .describe()
                .contains("[slurm] settings apply to `run --slurm`")
        );
        let job = LaunchWhere {
            placement: Placement {
                world: World::job(2, 8, (Origin::Flag, Origin::DefaultsFile), true),
                nodes: 2,
                per_node: 8,
                job: true,
            },
            scheduler: Some("slurm"),
            slurm_settings_unused: false,
        };
        assert_eq!(
            job.describe(),
            "Submits a Slurm job at world size 16 (the job's nodes × GPUs per node = 2 × 8: \
             nodes from the command line, GPUs per node from the defaults file)."
        );
    }

    #[test]
    fn each_variable_says_whether_the_flag_the_profile_or_the_environment_set_it() {
        let inherited = Env::empty()
            .with("PRIMUS_PP", "4")
            .with("PRIMUS_TP", "8")
            .with("HOME", "/h");
        // `--env PRIMUS_TP=2` is in the session's environment already, as the session sets it.
        let s = session(inherited.with("PRIMUS_TP", "2"), &[("PRIMUS_TP", "2")]);
        assert_eq!(s.env_source("PRIMUS_PP"), EnvSource::Inherited);
        let p = profile(&[
            ("PRIMUS_PP", "2"),
            ("PRIMUS_TP", "1"),
            ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),
            ("OUT", "{trial_dir}/x"),
        ]);
        let v = s.launched_by(&p);
        assert_eq!(v.load.env.get("PRIMUS_PP"), Some("2"));
        assert_eq!(v.env_source("PRIMUS_PP"), EnvSource::Profile("pp2".into()));
        assert_eq!(
            v.env_source("CUDA_DEVICE_MAX_CONNECTIONS").text(),
            "profile pp2"
        );
        // `--env` wins over the profile, as at launch.
        assert_eq!(v.load.env.get("PRIMUS_TP"), Some("2"));
        assert_eq!(v.env_source("PRIMUS_TP"), EnvSource::Flag);
        assert_eq!(v.env_source("HOME"), EnvSource::Inherited);
        // A value only a trial can know is not in the view, nor claimed by the profile.
        assert_eq!(v.env_source("OUT"), EnvSource::Unset);
        assert_eq!(
            v.view_profile.as_ref().unwrap().sets,
            ["CUDA_DEVICE_MAX_CONNECTIONS", "PRIMUS_PP"]
        );
        // The session itself is unchanged.
        assert_eq!(s.load.env.get("PRIMUS_PP"), Some("4"));
        assert!(s.view_profile.is_none());

        let refs = v.env_refs("${PRIMUS_PP:1}-${NOPE:3}-${BARE}");
        let said: Vec<String> = refs.iter().map(EnvRef::describe).collect();
        assert_eq!(
            said,
            [
                "PRIMUS_PP=2 (profile pp2)",
                "NOPE unset (default 3)",
                "BARE unset"
            ]
        );
    }
}
