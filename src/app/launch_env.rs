//! The environment a session's views resolve with, and where each variable of it comes from.
//!
//! A launch profile's `env:` reaches the job it launches (say `PRIMUS_PP: "2"`, or the
//! `CUDA_DEVICE_MAX_CONNECTIONS: "1"` the Primus and Megatron profiles set). A view of the
//! experiment (`show`, `checklist`, the TUI's Flags and Checklist screens) that resolved with
//! the session's environment alone would show another config than the one that job trains.
//! [`Session::launched_by`] gives the session the launch's environment (inherited < the
//! profile's `env` < `--env`, as [`crate::run::profile::Profile::config_env`] orders it), and
//! [`Session::env_source`] says where a variable's value came from.

use super::Session;
use crate::megatron::World;
use crate::run::profile::Profile;

/// The launch profile a session's views resolve with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewProfile {
    pub name: String,
    /// The variables its `env:` sets that reached the view (a value that needs a trial of its
    /// own, such as `{trial_dir}`, does not).
    pub sets: Vec<String>,
    /// Where its trials run, as a trial started now without `--gpus` of its own would
    /// ([`super::trial::world`]): `Local(None)` when nothing says (the launch then starts
    /// [`crate::run::trial::FALLBACK_GPUS`] ranks).
    pub launch: LaunchWorld,
}

/// Where a profile's trials run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchWorld {
    /// On this node, at this world (None: unknown).
    Local(Option<World>),
    /// On the nodes of the Slurm job it submits (`--nodes` × `--gpus-per-node` decide).
    Slurm,
}

impl LaunchWorld {
    /// What a question before a launch says of it.
    pub fn describe(&self) -> String {
        match self {
            LaunchWorld::Local(Some(w)) => format!("Launches at {w}."),
            LaunchWorld::Local(None) => {
                let t = unknown_world(crate::run::trial::FALLBACK_GPUS);
                let mut c = t.chars();
                let first = c.next().map(|f| f.to_uppercase().collect::<String>());
                format!("{}{}.", first.unwrap_or_default(), c.as_str())
            }
            LaunchWorld::Slurm => "Launches on the nodes of the Slurm job it submits.".into(),
        }
    }
}

/// What a launch at an unknown world does (the CLI's note on a trial and the TUI's question
/// before one say it in these words): `ranks` is what it starts.
pub fn unknown_world(ranks: u64) -> String {
    format!(
        "the world size is unknown (no --gpus, no GPUS_PER_NODE × NNODES, no GPU detected here): \
         launching {ranks} ranks, one 8-GPU node; pass --gpus N to choose"
    )
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

impl Session {
    /// This session as `profile` launches its experiment: its views resolve with the
    /// environment the launch sets ([`super::trial::with_profile_env`]), and say so.
    pub fn launched_by(&self, profile: &Profile) -> Session {
        let load = super::trial::with_profile_env(&self.load, &self.env, profile);
        let sets = profile
            .env
            .keys()
            .filter(|k| load.env.get(k).is_some())
            .filter(|k| !self.env.iter().any(|(f, _)| f == *k))
            .cloned()
            .collect();
        let launch = if profile.slurm.as_ref().is_some_and(|s| s.submits) {
            LaunchWorld::Slurm
        } else {
            LaunchWorld::Local(super::trial::world(self, None, profile, &self.env))
        };
        Session {
            load,
            view_profile: Some(ViewProfile {
                name: profile.name.clone(),
                sets,
                launch,
            }),
            ..self.clone()
        }
    }

    /// Where the view's value of variable `name` comes from.
    pub fn env_source(&self, name: &str) -> EnvSource {
        if self.load.env.get(name).is_none() {
            EnvSource::Unset
        } else if self.env.iter().any(|(k, _)| k == name) {
            EnvSource::Flag
        } else if let Some(p) = self
            .view_profile
            .as_ref()
            .filter(|p| p.sets.iter().any(|k| k == name))
        {
            EnvSource::Profile(p.name.clone())
        } else {
            EnvSource::Inherited
        }
    }

    /// The variables a value was written with (`template`, such as `${PRIMUS_PP:1}`), as the
    /// view resolved them.
    pub fn env_refs(&self, template: &str) -> Vec<EnvRef> {
        crate::config::env::references(template)
            .into_iter()
            .map(|(name, default)| EnvRef {
                value: self.load.env.get(&name).map(str::to_string),
                source: self.env_source(&name),
                default,
                name,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
