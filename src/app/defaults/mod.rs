//! The defaults file, `config.toml`: what a user sets once instead of on every command (the
//! launch profile, the GPUs, the telemetry backend, the workspace, colour, the mouse, the TUI's
//! keys, Slurm options), and the one place that decides every such setting: a command-line flag
//! wins over an environment variable, which wins over the defaults file, which wins over the
//! built-in value. Both frontends resolve through here, and `primus-tune defaults` shows the
//! outcome with where each value came from.
//!
//! The file is `$PRIMUS_TUNE_CONFIG`, else `$XDG_CONFIG_HOME/primus-tune/config.toml`, else
//! `~/.config/primus-tune/config.toml`; none is fine. An unknown key, a value of the wrong type
//! or a TOML syntax error is an error naming `file:line:column` (with "did you mean" for a
//! mistyped key), as ruff and lazygit treat their configuration.

mod file;
mod parse;
#[cfg(test)]
mod tests;

use super::AppError;
pub use super::error::DefaultsError;
use crate::run::profile::DEFAULT_PROFILE;
use crate::util::paths::display_path;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

pub use file::{ColorChoice, Defaults, KeyOverride, Location, Setting};
pub use parse::parse;

/// The variable that names the defaults file.
pub const CONFIG_ENV: &str = "PRIMUS_TUNE_CONFIG";
/// Set (to anything), the TUI leaves the mouse to the terminal, as `--no-mouse` does.
pub const NO_MOUSE_ENV: &str = "PRIMUS_TUNE_NO_MOUSE";
/// Set and not empty, no colour anywhere (<https://no-color.org>).
pub const NO_COLOR_ENV: &str = "NO_COLOR";
/// The workspace of every command that names none (a flag still wins).
pub const WORKSPACE_ENV: &str = "PRIMUS_TUNE_WORKSPACE";

/// The defaults file: `$PRIMUS_TUNE_CONFIG`, else `$XDG_CONFIG_HOME/primus-tune/config.toml`,
/// else `~/.config/primus-tune/config.toml` (None without any of these variables).
pub fn defaults_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(CONFIG_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    Some(crate::util::paths::xdg_dir("XDG_CONFIG_HOME", ".config")?.join("config.toml"))
}

impl Defaults {
    /// The defaults file ([`defaults_path`]); none there is no error.
    pub fn load() -> Result<Defaults, DefaultsError> {
        match defaults_path() {
            Some(p) => Defaults::load_from(&p),
            None => Ok(Defaults::default()),
        }
    }

    /// The defaults file at `path` (nothing set when it does not exist).
    pub fn load_from(path: &Path) -> Result<Defaults, DefaultsError> {
        match std::fs::read_to_string(path) {
            Ok(text) => parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Defaults::default()),
            Err(e) => Err(DefaultsError {
                file: path.to_path_buf(),
                at: None,
                message: e.to_string(),
            }),
        }
    }

    /// The launch profile: `--profile`, else the file's `profile`, else `proxy-cpu`.
    pub fn profile(&self, flag: Option<&str>) -> Resolved<String> {
        pick(
            flag.map(|f| (f.to_string(), Origin::Flag("--profile"))),
            None,
            self.profile.as_ref(),
            DEFAULT_PROFILE.to_string(),
        )
    }

    /// The telemetry backend: `--backend`, else the file's `backend`, else `auto`.
    pub fn backend(&self, flag: Option<&str>) -> Resolved<String> {
        pick(
            flag.map(|f| (f.to_string(), Origin::Flag("--backend"))),
            None,
            self.backend.as_ref(),
            "auto".to_string(),
        )
    }

    /// The workspace folder: `--workspace`, else `$PRIMUS_TUNE_WORKSPACE` (`env`), else the
    /// file's `workspace`; None: the experiment's own (beside it, or keyed by its path).
    pub fn workspace(&self, flag: Option<&Path>, env: Option<&OsStr>) -> Option<Resolved<PathBuf>> {
        let env = env
            .filter(|v| !v.is_empty())
            .map(|v| (PathBuf::from(v), Origin::Env(WORKSPACE_ENV.into())));
        let flag = flag.map(|f| (f.to_path_buf(), Origin::Flag("--workspace")));
        match (flag.or(env), &self.workspace) {
            (Some((value, origin)), _) => Some(Resolved { value, origin }),
            (None, Some(s)) => Some(Resolved::file(s)),
            (None, None) => None,
        }
    }

    /// Colour: `NO_COLOR` (set and not empty) means never; else the file's `[ui] color`, else
    /// `auto` (colour on a terminal).
    pub fn color(&self, no_color: Option<&OsStr>) -> Resolved<ColorChoice> {
        let env = no_color
            .filter(|v| !v.is_empty())
            .map(|_| (ColorChoice::Never, Origin::Env(NO_COLOR_ENV.into())));
        pick(None, env, self.color.as_ref(), ColorChoice::Auto)
    }

    /// Mouse capture in the TUI: off with `--no-mouse`, else off with `$PRIMUS_TUNE_NO_MOUSE`
    /// set, else the file's `[ui] mouse`, else on.
    pub fn mouse(&self, no_mouse_flag: bool, env: Option<&OsStr>) -> Resolved<bool> {
        let flag = no_mouse_flag.then_some((false, Origin::Flag("--no-mouse")));
        let env = env.map(|_| (false, Origin::Env(NO_MOUSE_ENV.into())));
        pick(flag, env, self.mouse.as_ref(), true)
    }

    /// The file's `gpus` (the session's world resolves it between the launcher's variables and
    /// detection: [`crate::app::launch::placement::place_world`]).
    pub fn gpus(&self) -> Option<u64> {
        self.gpus.as_ref().map(|s| s.value)
    }

    /// The profile the TUI starts with: `--profile` (an unknown one is an error), else the one
    /// remembered for this experiment, else the file's `profile`, else `proxy-cpu` — a
    /// remembered or configured profile that is not among `available` is passed over with a
    /// notice. `remembered` is the profile and the state file it was read from.
    pub fn startup_profile(
        &self,
        flag: Option<&str>,
        remembered: Option<(&str, &Path)>,
        available: &[String],
    ) -> Result<StartupProfile, AppError> {
        let exists = |p: &str| available.iter().any(|a| a == p);
        if let Some(f) = flag {
            if !exists(f) {
                return Err(AppError::Usage(unknown_profile(f, available)));
            }
            return Ok(StartupProfile {
                profile: self.profile(Some(f)),
                notices: Vec::new(),
            });
        }
        let mut notices = Vec::new();
        if let Some((p, state)) = remembered {
            if exists(p) {
                return Ok(StartupProfile {
                    profile: Resolved {
                        value: p.to_string(),
                        origin: Origin::State(state.to_path_buf()),
                    },
                    notices,
                });
            }
            notices.push(format!(
                "the profile remembered for this experiment, `{p}`, no longer exists"
            ));
        }
        let from_file = self.profile(None);
        if exists(&from_file.value) || from_file.origin == Origin::BuiltIn {
            return Ok(StartupProfile {
                profile: from_file,
                notices,
            });
        }
        notices.push(format!(
            "profile `{}` ({}) is not a launch profile",
            from_file.value,
            from_file.origin.text()
        ));
        Ok(StartupProfile {
            profile: Resolved {
                value: DEFAULT_PROFILE.to_string(),
                origin: Origin::BuiltIn,
            },
            notices,
        })
    }
}

/// The usage error for a profile name that is none of `available`.
pub fn unknown_profile(name: &str, available: &[String]) -> String {
    let names: Vec<&str> = available.iter().map(String::as_str).collect();
    let near = crate::util::suggest::closest(name, &names)
        .map(|n| format!("did you mean `{n}`? "))
        .unwrap_or_default();
    format!(
        "no launch profile `{name}`; {near}(profiles: {})",
        names.join(", ")
    )
}

/// The TUI's first profile and what to tell about the ones passed over.
#[derive(Debug, Clone, PartialEq)]
pub struct StartupProfile {
    pub profile: Resolved<String>,
    pub notices: Vec<String>,
}

/// Where an effective setting came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// A command-line flag.
    Flag(&'static str),
    /// An environment variable (or the launcher's, as `GPUS_PER_NODE × NNODES = 8 × 1`).
    Env(String),
    /// The defaults file.
    File(Location),
    /// Remembered by the TUI in its state file.
    State(PathBuf),
    /// primus-tune's own default.
    BuiltIn,
}

impl Origin {
    /// A stable name for JSON: `flag`, `environment`, `file`, `state`, `default`.
    pub fn kind(&self) -> &'static str {
        match self {
            Origin::Flag(_) => "flag",
            Origin::Env(_) => "environment",
            Origin::File(_) => "file",
            Origin::State(_) => "state",
            Origin::BuiltIn => "default",
        }
    }

    /// As people read it: `--gpus`, `NO_COLOR`, `config.toml:3:8`, `built-in`.
    pub fn text(&self) -> String {
        match self {
            Origin::Flag(f) => (*f).to_string(),
            Origin::Env(v) => v.clone(),
            Origin::File(l) => l.to_string(),
            Origin::State(p) => format!("remembered in {}", display_path(p)),
            Origin::BuiltIn => "built-in".into(),
        }
    }
}

/// An effective setting and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved<T> {
    pub value: T,
    pub origin: Origin,
}

impl<T: Clone> Resolved<T> {
    fn file(s: &Setting<T>) -> Resolved<T> {
        Resolved {
            value: s.value.clone(),
            origin: Origin::File(s.at.clone()),
        }
    }
}

/// The precedence: a flag, else an environment variable, else the file, else the built-in.
fn pick<T: Clone>(
    flag: Option<(T, Origin)>,
    env: Option<(T, Origin)>,
    file: Option<&Setting<T>>,
    builtin: T,
) -> Resolved<T> {
    match (flag.or(env), file) {
        (Some((value, origin)), _) => Resolved { value, origin },
        (None, Some(s)) => Resolved::file(s),
        (None, None) => Resolved {
            value: builtin,
            origin: Origin::BuiltIn,
        },
    }
}

/// One line of `primus-tune defaults`: a key, its effective value (null: decided per run — the
/// GPUs detected, the experiment's own workspace) and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub value: serde_json::Value,
    pub origin: Origin,
}

impl Defaults {
    /// Every setting as a command without flags would see it, the environment read through
    /// `var` and the GPUs as such a launch places them (`world`, from
    /// [`crate::app::session::effective_defaults`]); then the file's `[keys]` and `[slurm]`
    /// entries.
    pub fn effective(
        &self,
        var: impl Fn(&str) -> Option<String>,
        world: Option<crate::megatron::World>,
    ) -> Vec<Entry> {
        use serde_json::json;
        let entry = |key: &str, value: serde_json::Value, origin: Origin| Entry {
            key: key.into(),
            value,
            origin,
        };
        let os = |k: &str| var(k).map(std::ffi::OsString::from);
        let mut out = Vec::new();
        let p = self.profile(None);
        out.push(entry("profile", json!(p.value), p.origin));
        out.push(match world {
            Some(w) => {
                let origin = match (&w.source, &self.gpus) {
                    (crate::megatron::WorldSource::Defaults, Some(s)) => Origin::File(s.at.clone()),
                    _ => Origin::Env(w.source_text()),
                };
                entry("gpus", json!(w.gpus), origin)
            }
            None => entry("gpus", serde_json::Value::Null, Origin::BuiltIn),
        });
        let b = self.backend(None);
        out.push(entry("backend", json!(b.value), b.origin));
        out.push(match self.workspace(None, os(WORKSPACE_ENV).as_deref()) {
            Some(w) => entry("workspace", json!(w.value.display().to_string()), w.origin),
            None => entry("workspace", serde_json::Value::Null, Origin::BuiltIn),
        });
        let c = self.color(os(NO_COLOR_ENV).as_deref());
        out.push(entry("ui.color", json!(c.value.name()), c.origin));
        let m = self.mouse(false, os(NO_MOUSE_ENV).as_deref());
        out.push(entry("ui.mouse", json!(m.value), m.origin));
        for k in &self.keys {
            let keys: Vec<&str> = k.keys.iter().map(|s| s.value.as_str()).collect();
            let value = match keys.as_slice() {
                [one] => json!(one),
                _ => json!(keys),
            };
            out.push(entry(
                &format!("keys.{}", k.action),
                value,
                Origin::File(k.at.clone()),
            ));
        }
        for (key, value, at) in &self.slurm_entries {
            out.push(entry(
                &format!("slurm.{key}"),
                value.clone(),
                Origin::File(at.clone()),
            ));
        }
        out
    }
}
