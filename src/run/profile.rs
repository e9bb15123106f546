//! Launch profiles: how a trial starts. A profile is data (`presets/profiles/*.yaml`, plus the
//! user's own in `~/.config/primus-tune/profiles/`) holding an argv template; this module turns it
//! into the exact argv and environment of one trial. Nothing goes through a shell: each template
//! element becomes one argument (or, for `{overrides}`, `{model_args}` and `{env_args}`, several).

use super::capabilities::Capabilities;
use crate::config::overrides::Override;
use crate::config::yaml;
use crate::domain::value::{Value, yaml_float};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The profiles shipped in the binary.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "proxy-cpu",
        include_str!("../../presets/profiles/proxy-cpu.yaml"),
    ),
    (
        "proxy-torch",
        include_str!("../../presets/profiles/proxy-torch.yaml"),
    ),
    ("primus", include_str!("../../presets/profiles/primus.yaml")),
    (
        "primus-slurm",
        include_str!("../../presets/profiles/primus-slurm.yaml"),
    ),
    (
        "megatron",
        include_str!("../../presets/profiles/megatron.yaml"),
    ),
    (
        "megatron-local",
        include_str!("../../presets/profiles/megatron-local.yaml"),
    ),
];

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "proxy-cpu";

/// How overrides are written on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OverrideStyle {
    /// `--micro_batch_size 4`, values typed back by Primus' CLI rules (`True`, `None`, `1.0e-05`).
    #[default]
    Primus,
    /// `--micro-batch-size 4`; booleans as bare `--flag` when true (left out when false).
    Megatron,
    /// Upstream TorchTitan's command line (tyro, with TorchTitan's list rule):
    /// `--training.local_batch_size 4`; booleans as `--compile.enable` / `--compile.no-enable`;
    /// a list of strings as one comma-separated word (`--model.converters a,b`), other lists as
    /// one word each; null (unset) left out, so the job's TOML decides. An empty list or a map
    /// has no form there and is refused before launch.
    Torchtitan,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub argv: Vec<String>,
    #[serde(default)]
    pub overrides: OverrideStyle,
    /// Working directory template (default: the trial folder).
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// What the profile's workload can do (how it launches, logs, uses hipBLASLt, models knobs).
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Slurm: the job's default settings, and whether the command submits the job itself.
    #[serde(default)]
    pub slurm: Option<ProfileSlurm>,
    /// Where the profile came from (set on load).
    #[serde(skip)]
    pub source: String,
    /// The file declared `capabilities:` (set on load; a profile of yours that replaces a
    /// built-in and declares none keeps the built-in's).
    #[serde(skip)]
    pub declares_capabilities: bool,
}

/// A profile's `slurm:` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct ProfileSlurm {
    /// The command submits the job itself (Primus' `primus-cli slurm sbatch ...`): it runs on
    /// this node, names its job (`Submitted batch job N`), and primus-tune follows that job.
    /// `{slurm_args}` renders the job's sbatch options for it.
    #[serde(default)]
    pub submits: bool,
    /// Every trial of the profile is a Slurm job, as with `--slurm`: primus-tune submits it
    /// and starts the command once on every node (`srun --ntasks-per-node=1`), with `NNODES`,
    /// `NODE_RANK`, `MASTER_ADDR`, `MASTER_PORT` and `GPUS_PER_NODE` set.
    #[serde(default)]
    pub job: bool,
    /// Defaults of the job (`nodes`, `gpus_per_node`, `partition`, `account`, `time`,
    /// `sbatch_args`); the command line wins over them.
    #[serde(flatten)]
    pub settings: super::launch::slurm::SlurmSettings,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "profile `{name}` not found (available: {}){}",
        available.join(", "),
        crate::util::suggest::did_you_mean(name, available)
    )]
    NotFound {
        name: String,
        available: Vec<String>,
    },
    #[error("profile {source_name}: {message}")]
    Invalid {
        source_name: String,
        message: String,
    },
    #[error("profile `{profile}`: {message}")]
    Expand { profile: String, message: String },
}

/// Everything a template can refer to, for one trial.
#[derive(Debug, Clone)]
pub struct TrialContext {
    /// This executable (`{self}`).
    pub exe: PathBuf,
    pub primus_root: PathBuf,
    /// The trial's effective config (`{config}`).
    pub config: PathBuf,
    /// The trial's resolved parameters as JSON (`{resolved}`).
    pub resolved: PathBuf,
    pub trial_dir: PathBuf,
    pub iters: u64,
    pub gpus: u64,
    /// The folder with shipped assets (`{assets}`).
    pub assets: PathBuf,
    pub python: String,
    /// The trial's overrides (`{overrides}`).
    pub overrides: Vec<Override>,
    /// The resolved parameters, for `{model_args}`.
    pub params: BTreeMap<String, Value>,
    /// Explicit environment of the trial (`{env_args}` renders it as `--env K=V`).
    pub env: Vec<(String, String)>,
    /// GPUs of each node (`{gpus_per_node}`: `gpus` on one node).
    pub gpus_per_node: u64,
    /// The sbatch options of a Slurm trial (`{slurm_args}`, whole argument).
    pub slurm_args: Vec<String>,
    /// The environment the launch sees (for `{env:NAME}`).
    pub process_env: crate::config::env::Env,
}

/// Settings `{model_args}` passes from the resolved config: the run's shape, batch, precision,
/// parallelism, recompute, learning rate and iteration budget. The megatron override style
/// renders each with upstream Megatron-LM's own option ([`super::megatron_args`]).
pub const MODEL_ARGS: &[&str] = &[
    // Shape.
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "group_query_attention",
    "num_query_groups",
    "kv_channels",
    "seq_length",
    "max_position_embeddings",
    "vocab_size",
    "swiglu",
    "normalization",
    "position_embedding_type",
    "add_bias_linear",
    "untie_embeddings_and_output_weights",
    "num_experts",
    "moe_router_topk",
    "moe_ffn_hidden_size",
    "moe_shared_expert_intermediate_size",
    "moe_layer_freq",
    // Batch and budget.
    "micro_batch_size",
    "global_batch_size",
    "train_iters",
    "lr",
    // Precision.
    "bf16",
    "fp16",
    "fp8",
    // Parallelism.
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "num_layers_per_virtual_pipeline_stage",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
    "sequence_parallel",
    "use_distributed_optimizer",
    // Recompute.
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
];

impl Profile {
    pub fn parse(text: &str, source: &str) -> Result<Profile, ProfileError> {
        let invalid = |message: String| ProfileError::Invalid {
            source_name: source.to_string(),
            message,
        };
        let node = yaml::parse(text)
            .map_err(|e| invalid(e.to_string()))?
            .ok_or_else(|| invalid("empty file".into()))?;
        let json = node.typed().to_json();
        let declares_capabilities = json.get("capabilities").is_some();
        let mut p: Profile = serde_json::from_value(json).map_err(|e| invalid(e.to_string()))?;
        p.declares_capabilities = declares_capabilities;
        if p.argv.is_empty() {
            return Err(invalid("`argv` is empty".into()));
        }
        for t in p.argv.iter().chain(p.workdir.iter()).chain(p.env.values()) {
            check_placeholders(t).map_err(invalid)?;
        }
        p.source = source.to_string();
        Ok(p)
    }

    /// The argv and working directory of one trial. `{model_args}` (the resolved run) and
    /// `{overrides}` (the trial's overrides) are merged: each setting is rendered once, where the
    /// first of them stands, an override replacing the resolved value; a flag of the template
    /// that they render too is left out with its value, so every flag appears once.
    pub fn expand(&self, cx: &TrialContext) -> Result<(Vec<String>, PathBuf), ProfileError> {
        let err = |message: String| ProfileError::Expand {
            profile: self.name.clone(),
            message,
        };
        let generated = self.generated(cx).map_err(err)?;
        let flags: std::collections::BTreeSet<&str> = generated
            .iter()
            .filter(|a| a.starts_with("--"))
            .map(String::as_str)
            .collect();
        let mut argv = Vec::new();
        let mut placed = false;
        // A template flag the generated arguments set too is dropped with its values.
        let mut dropping = false;
        for t in &self.argv {
            match t.as_str() {
                "{overrides}" | "{model_args}" => {
                    dropping = false;
                    if !placed {
                        argv.extend(generated.iter().cloned());
                        placed = true;
                    }
                }
                "{slurm_args}" => {
                    dropping = false;
                    argv.extend(cx.slurm_args.iter().cloned());
                }
                "{env_args}" => {
                    dropping = false;
                    for (k, v) in &cx.env {
                        argv.push("--env".into());
                        argv.push(format!("{k}={v}"));
                    }
                }
                _ => {
                    let arg = substitute(t, cx).map_err(err)?;
                    if arg.starts_with("--") {
                        let flag = arg.split('=').next().unwrap_or(&arg);
                        dropping = flags.contains(flag);
                    } else if dropping && is_option(&arg) {
                        dropping = false;
                    }
                    if !dropping {
                        argv.push(arg);
                    }
                }
            }
        }
        let workdir = match &self.workdir {
            Some(w) => PathBuf::from(substitute(w, cx).map_err(err)?),
            None => cx.trial_dir.clone(),
        };
        Ok((argv, workdir))
    }

    /// Settings among `keys` this profile cannot pass to its workload: with the megatron
    /// override style, those upstream Megatron-LM has no argument for (Primus-only settings).
    /// Checked before launch, so such a trial or sweep is refused instead of failing in
    /// Megatron's argparse after start-up.
    pub fn refused_settings<'a>(
        &self,
        keys: impl Iterator<Item = &'a str>,
        env: &crate::config::env::Env,
    ) -> Result<Vec<String>, String> {
        if self.overrides != OverrideStyle::Megatron
            || !self.argv.iter().any(|t| t == "{overrides}")
        {
            return Ok(Vec::new());
        }
        let table = super::megatron_args::MegatronArgs::for_env(env)?;
        let mut out: Vec<String> = keys
            .filter(|k| !table.knows(k))
            .map(str::to_string)
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The arguments `{model_args}` and `{overrides}` stand for, merged (see [`Profile::expand`]).
    fn generated(&self, cx: &TrialContext) -> Result<Vec<String>, String> {
        let has = |p: &str| self.argv.iter().any(|t| t == p);
        let mut items: Vec<(&str, &Value)> = Vec::new();
        if has("{model_args}") {
            // MoE settings only for a model with experts (presets give dense models defaults).
            let moe = cx.params.get("num_experts").is_some_and(|v| !v.is_null());
            items.extend(
                MODEL_ARGS
                    .iter()
                    .filter(|k| moe || !k.starts_with("moe_"))
                    .filter_map(|k| cx.params.get(*k).map(|v| (*k, v)))
                    .filter(|(_, v)| !v.is_null()),
            );
        }
        if has("{overrides}") {
            for o in &cx.overrides {
                match items.iter_mut().find(|(k, _)| *k == o.key) {
                    Some(slot) => slot.1 = &o.value,
                    None => items.push((o.key.as_str(), &o.value)),
                }
            }
        }
        match self.overrides {
            OverrideStyle::Primus => Ok(primus_overrides(items.into_iter())),
            OverrideStyle::Torchtitan => {
                let mut out = Vec::new();
                for (k, v) in items {
                    out.extend(torchtitan_words(k, v)?);
                }
                Ok(out)
            }
            OverrideStyle::Megatron => {
                let table = super::megatron_args::MegatronArgs::for_env(&cx.process_env)?;
                let mut out = Vec::new();
                for (k, v) in items {
                    out.extend(table.render(k, v)?);
                }
                Ok(out)
            }
        }
    }

    /// The environment the workload resolves its config with (Primus' `${VAR:default}`), as
    /// the launch sets it: `base` (the process's environment and `--env`), the profile's `env`
    /// over it, and the trial's explicit environment (`--env` again, the request's own, the
    /// tuned GEMMs') over that. A profile variable whose value names a trial's own placeholder
    /// (`{trial_dir}`, `{config}`, `{resolved}`, `{iters}`, `{self}`, `{assets}`, or one
    /// `known` lacks), or an `{env:NAME}` that is not set, cannot be known before the trial:
    /// it is left as `base` has it (the launch fills it, or refuses with the reason).
    pub fn config_env(
        &self,
        base: &crate::config::env::Env,
        on_top: &[(String, String)],
        known: &KnownPlaceholders,
    ) -> crate::config::env::Env {
        let mut env = base.clone();
        for (k, v) in self.filled_env(base, known) {
            env.set(&k, &v);
        }
        for (k, v) in on_top {
            env.set(k, v);
        }
        env
    }

    /// The variables of the profile's `env:` that can be known before a trial, their
    /// placeholders filled from `known` and `base` (see [`Profile::config_env`]).
    pub fn filled_env(
        &self,
        base: &crate::config::env::Env,
        known: &KnownPlaceholders,
    ) -> Vec<(String, String)> {
        let unknown = String::new;
        self.env
            .iter()
            .filter_map(|(k, v)| {
                substitute_with(v, |n| match n {
                    "primus_root" => known
                        .primus_root
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .ok_or_else(unknown),
                    "gpus" => known.gpus.map(|g| g.to_string()).ok_or_else(unknown),
                    "gpus_per_node" => known
                        .gpus_per_node
                        .map(|g| g.to_string())
                        .ok_or_else(unknown),
                    "python" => Ok(PYTHON.into()),
                    n => env_placeholder(n, base),
                })
                .ok()
                .map(|v| (k.clone(), v))
            })
            .collect()
    }

    /// The profile's environment with placeholders filled.
    pub fn expand_env(&self, cx: &TrialContext) -> Result<Vec<(String, String)>, ProfileError> {
        self.env
            .iter()
            .map(|(k, v)| {
                substitute(v, cx)
                    .map(|v| (k.clone(), v))
                    .map_err(|message| ProfileError::Expand {
                        profile: self.name.clone(),
                        message,
                    })
            })
            .collect()
    }
}

/// The placeholders known before a trial exists ([`Profile::config_env`]; `None`: not known
/// where the environment is wanted, so a variable that names it is left out).
#[derive(Debug, Clone, Default)]
pub struct KnownPlaceholders {
    pub primus_root: Option<PathBuf>,
    pub gpus: Option<u64>,
    pub gpus_per_node: Option<u64>,
}

/// The interpreter `{python}` names.
pub const PYTHON: &str = "python3";

const PLACEHOLDERS: &[&str] = &[
    "self",
    "primus_root",
    "config",
    "resolved",
    "trial_dir",
    "iters",
    "gpus",
    "gpus_per_node",
    "assets",
    "python",
];
const WHOLE_ARG: &[&str] = &["{overrides}", "{model_args}", "{env_args}", "{slurm_args}"];

fn check_placeholders(t: &str) -> Result<(), String> {
    if WHOLE_ARG.contains(&t) {
        return Ok(());
    }
    let unescaped = t.replace("{{", "").replace("}}", "");
    let mut rest = unescaped.as_str();
    while let Some(i) = rest.find('{') {
        let Some(j) = rest[i..].find('}') else {
            return Err(format!(
                "unclosed `{{` in `{t}` (write `{{{{` for a literal brace)"
            ));
        };
        let name = &rest[i + 1..i + j];
        if !(PLACEHOLDERS.contains(&name) || name.starts_with("env:")) {
            return Err(format!(
                "unknown placeholder `{{{name}}}` in `{t}` (known: {}, env:NAME, and as whole arguments {})",
                PLACEHOLDERS.join(", "),
                WHOLE_ARG.join(", ")
            ));
        }
        rest = &rest[i + j + 1..];
    }
    Ok(())
}

fn substitute(t: &str, cx: &TrialContext) -> Result<String, String> {
    substitute_with(t, |name| {
        let path = |p: &Path| p.display().to_string();
        Ok(match name {
            "self" => path(&cx.exe),
            "primus_root" => path(&cx.primus_root),
            "config" => path(&cx.config),
            "resolved" => path(&cx.resolved),
            "trial_dir" => path(&cx.trial_dir),
            "iters" => cx.iters.to_string(),
            "gpus" => cx.gpus.to_string(),
            "gpus_per_node" => cx.gpus_per_node.to_string(),
            "assets" => path(&cx.assets),
            "python" => cx.python.clone(),
            n => return env_placeholder(n, &cx.process_env),
        })
    })
}

/// `{env:NAME}` from `env`; any other name is unknown.
fn env_placeholder(n: &str, env: &crate::config::env::Env) -> Result<String, String> {
    match n.strip_prefix("env:") {
        Some(var) => env.get(var).map(str::to_string).ok_or_else(|| {
            format!("`{{{n}}}` needs the environment variable {var}, which is not set")
        }),
        None => Err(format!("unknown placeholder `{{{n}}}`")),
    }
}

/// Fills every `{name}` of `t` with `value(name)`; `{{` and `}}` stand for literal braces.
fn substitute_with(
    t: &str,
    value: impl Fn(&str) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = t;
    while let Some(i) = rest.find(['{', '}']) {
        // `{{` and `}}` stand for literal braces.
        if rest[i..].starts_with("{{") || rest[i..].starts_with("}}") {
            out.push_str(&rest[..=i]);
            rest = &rest[i + 2..];
            continue;
        }
        if rest[i..].starts_with('}') {
            out.push_str(&rest[..=i]);
            rest = &rest[i + 1..];
            continue;
        }
        out.push_str(&rest[..i]);
        let j = rest[i..]
            .find('}')
            .ok_or_else(|| format!("unclosed `{{` in `{t}`"))?;
        out.push_str(&value(&rest[i + 1..i + j])?);
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether a command-line word is an option (`-x`, `--x`) rather than a value (`-1`, `-0.5`).
fn is_option(arg: &str) -> bool {
    arg.starts_with('-') && arg.parse::<f64>().is_err()
}

/// One setting on upstream TorchTitan's command line (see [`OverrideStyle::Torchtitan`]).
fn torchtitan_words(key: &str, value: &Value) -> Result<Vec<String>, String> {
    let flag = format!("--{key}");
    Ok(match value {
        Value::Bool(true) => vec![flag],
        // tyro's negative flag: `no-` before the last component (`--compile.no-enable`).
        Value::Bool(false) => vec![match key.rsplit_once('.') {
            Some((head, last)) => format!("--{head}.no-{last}"),
            None => format!("--no-{key}"),
        }],
        // Unset: left out, so the job's TOML decides (as the megatron style leaves it out).
        Value::Null => Vec::new(),
        Value::List(items) if items.is_empty() => {
            return Err(format!(
                "`{key}`: TorchTitan's command line has no form for an empty list (a list option \
                 takes one comma-separated word); set it in the job's TOML instead"
            ));
        }
        Value::List(items) if items.iter().all(|v| matches!(v, Value::Str(_))) => {
            let words: Vec<String> = items.iter().map(plain_value).collect();
            if let Some(w) = words.iter().find(|w| w.contains(',') || w.is_empty()) {
                return Err(format!(
                    "`{key}`: the item `{w}` cannot be passed on TorchTitan's command line \
                     (its list options split one word at commas)"
                ));
            }
            vec![flag, words.join(",")]
        }
        Value::List(items) => std::iter::once(flag)
            .chain(items.iter().map(plain_value))
            .collect(),
        Value::Map(_) => {
            return Err(format!(
                "`{key}`: TorchTitan's command line has no form for a map; set its keys one by one \
                 (`{key}.name=value`)"
            ));
        }
        other => vec![flag, plain_value(other)],
    })
}

/// `--key value` pairs for overrides, typed back by Primus' CLI rules.
fn primus_overrides<'a>(items: impl Iterator<Item = (&'a str, &'a Value)>) -> Vec<String> {
    items
        .flat_map(|(key, value)| [format!("--{key}"), primus_cli_value(value)])
        .collect()
}

/// A value written so that Primus' CLI coercion reads back the same value.
pub fn primus_cli_value(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => yaml_float(*f),
        Value::Str(s) => s.clone(),
        Value::List(_) | Value::Map(_) => python_literal(v),
    }
}

fn plain_value(v: &Value) -> String {
    match v {
        Value::Float(f) => yaml_float(*f),
        other => other.to_string(),
    }
}

fn python_literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => yaml_float(*f),
        Value::Str(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::List(items) => format!(
            "[{}]",
            items
                .iter()
                .map(python_literal)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("'{k}': {}", python_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The user's profile folder: `$XDG_CONFIG_HOME/primus-tune/profiles` or `~/.config/...`.
pub fn user_dir() -> Option<PathBuf> {
    Some(crate::util::paths::xdg_dir("XDG_CONFIG_HOME", ".config")?.join("profiles"))
}

/// All profiles: built-in ones, then the user's (a user profile with a built-in's name wins).
pub fn all(user: Option<&Path>) -> Result<Vec<Profile>, ProfileError> {
    let mut out: Vec<Profile> = Vec::new();
    for (name, text) in BUILTIN {
        out.push(Profile::parse(text, &format!("built-in {name}"))?);
    }
    if let Some(dir) = user
        && let Ok(rd) = std::fs::read_dir(dir)
    {
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|e| ProfileError::Invalid {
                source_name: f.display().to_string(),
                message: e.to_string(),
            })?;
            let mut p = Profile::parse(&text, &f.display().to_string())?;
            // A copy of a built-in made before profiles declared capabilities keeps working.
            if let Some(builtin) = out.iter().find(|q| q.name == p.name)
                && !p.declares_capabilities
            {
                p.capabilities = builtin.capabilities.clone();
            }
            out.retain(|q| q.name != p.name);
            out.push(p);
        }
    }
    Ok(out)
}

/// Find a profile by name.
pub fn find(name: &str, user: Option<&Path>) -> Result<Profile, ProfileError> {
    let all = all(user)?;
    let names: Vec<String> = all.iter().map(|p| p.name.clone()).collect();
    all.into_iter()
        .find(|p| p.name == name)
        .ok_or(ProfileError::NotFound {
            name: name.to_string(),
            available: names,
        })
}

/// JSON object of resolved parameters for `{resolved}` (values as Python would see them).
pub fn resolved_json(params: &BTreeMap<String, Value>, world_size: u64) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (k, v) in params {
        m.insert(k.clone(), v.to_json());
    }
    m.insert("_world_size".into(), serde_json::Value::from(world_size));
    serde_json::Value::Object(m)
}

/// The `{resolved}` file of a trial: [`resolved_json`], and for a TorchTitan config also the
/// Megatron names of its model and run (`hidden_size`, `num_layers`, `seq_length`,
/// `micro_batch_size`, `recompute_granularity`, ...: [`crate::megatron::titan::megatron_view`]),
/// so a workload sized from Megatron's names (the proxies) reads a TorchTitan job too.
pub fn trial_resolved_json(params: &BTreeMap<String, Value>, world_size: u64) -> serde_json::Value {
    let mut j = resolved_json(params, world_size);
    let world = (world_size > 0).then_some(world_size);
    if let (Some(view), serde_json::Value::Object(m)) =
        (crate::megatron::titan::megatron_view(params, world), &mut j)
    {
        for (k, v) in view {
            m.entry(k).or_insert_with(|| v.to_json());
        }
    }
    j
}

/// Read back a `{resolved}` file into values.
pub fn read_resolved(j: &serde_json::Value) -> BTreeMap<String, Value> {
    crate::domain::value::map_from_json(j)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::overrides::parse_assignment;

    fn cx() -> TrialContext {
        let mut params = BTreeMap::new();
        params.insert("num_layers".into(), Value::Int(4));
        params.insert("bf16".into(), Value::Bool(true));
        params.insert("recompute_granularity".into(), Value::Null);
        TrialContext {
            exe: "/bin/pt".into(),
            primus_root: "/p".into(),
            config: "/t/1/config.yaml".into(),
            resolved: "/t/1/resolved.json".into(),
            trial_dir: "/t/1".into(),
            iters: 30,
            gpus: 8,
            gpus_per_node: 8,
            slurm_args: Vec::new(),
            assets: "/a".into(),
            python: "python3".into(),
            overrides: [
                "micro_batch_size=4",
                "lr=1.0e-5",
                "use_turbo_deepep=true",
                "recompute_layer_ids=[1, 2]",
                "x=a; rm -rf /",
            ]
            .iter()
            .map(|s| parse_assignment(s).unwrap())
            .collect(),
            params,
            env: vec![("PRIMUS_HIPBLASLT_TUNING".into(), "1".into())],
            process_env: crate::config::env::Env::empty().with("MEGATRON_PATH", "/m"),
        }
    }

    #[test]
    fn the_config_sees_the_environment_the_launch_sets() {
        use crate::config::env::Env;
        let p = Profile::parse(
            "name: t\nargv: [x]\nenv:\n  PRIMUS_PP: \"2\"\n  PRIMUS_TP: \"1\"\n  \
             HOME_OF: \"{env:OWNER}/x\"\n  DIR: \"{trial_dir}/cache\"\n  \
             ROOT: \"{primus_root}/a\"\n  WORLD: \"{gpus}\"\n  GONE: \"{env:UNSET_VAR}\"\n",
            "test",
        )
        .unwrap();
        let base = Env::empty()
            .with("PRIMUS_PP", "4")
            .with("OWNER", "me")
            .with("DIR", "kept")
            .with("GONE", "kept too");
        let known = KnownPlaceholders {
            primus_root: Some("/p".into()),
            gpus: None,
            gpus_per_node: None,
        };
        let env = p.config_env(&base, &[("PRIMUS_TP".into(), "8".into())], &known);
        // The profile's value over the inherited one, as the launch sets it; the trial's own
        // (`--env`) over the profile's.
        assert_eq!(env.get("PRIMUS_PP"), Some("2"));
        assert_eq!(env.get("PRIMUS_TP"), Some("8"));
        assert_eq!(env.get("HOME_OF"), Some("me/x"));
        assert_eq!(env.get("ROOT"), Some("/p/a"));
        // Not known before the trial: left as the session has it.
        assert_eq!(env.get("DIR"), Some("kept"));
        assert_eq!(env.get("WORLD"), None);
        assert_eq!(env.get("GONE"), Some("kept too"));
        let known = KnownPlaceholders {
            gpus: Some(8),
            ..known
        };
        assert_eq!(p.config_env(&base, &[], &known).get("WORLD"), Some("8"));
    }

    #[test]
    fn builtin_profiles_parse() {
        let all = all(None).unwrap();
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "proxy-cpu",
                "proxy-torch",
                "primus",
                "primus-slurm",
                "megatron",
                "megatron-local"
            ]
        );
    }

    /// primus-slurm's trials are jobs primus-tune submits, running Primus' Slurm entry on
    /// every node (not `primus-cli slurm sbatch`, whose batch script runs on the first node
    /// only).
    #[test]
    fn primus_slurm_runs_primus_slurm_entry_on_every_node_of_its_job() {
        let p = find("primus-slurm", None).unwrap();
        let slurm = p.slurm.as_ref().unwrap();
        assert!(slurm.job && !slurm.submits, "{slurm:?}");
        let mut c = cx();
        c.overrides.clear();
        let (argv, _) = p.expand(&c).unwrap();
        assert_eq!(
            argv,
            [
                "/p/runner/primus-cli-slurm-entry.sh",
                "--",
                "direct",
                "--env",
                "PRIMUS_HIPBLASLT_TUNING=1",
                "--",
                "train",
                "pretrain",
                "--config",
                "/t/1/config.yaml",
            ]
        );
    }

    #[test]
    fn primus_profile_argv_is_a_vector_with_typed_overrides() {
        let p = find("primus", None).unwrap();
        let (argv, wd) = p.expand(&cx()).unwrap();
        assert_eq!(
            argv,
            vec![
                "/p/runner/primus-cli",
                "direct",
                "--env",
                "PRIMUS_HIPBLASLT_TUNING=1",
                "--",
                "train",
                "pretrain",
                "--config",
                "/t/1/config.yaml",
                "--micro_batch_size",
                "4",
                "--lr",
                "1.0e-05",
                "--use_turbo_deepep",
                "True",
                "--recompute_layer_ids",
                "[1, 2]",
                "--x",
                "a; rm -rf /"
            ]
        );
        assert_eq!(wd, PathBuf::from("/p"));
        // Every value reads back through Primus' own CLI coercion.
        for o in &cx().overrides {
            let text = primus_cli_value(&o.value);
            assert_eq!(crate::config::overrides::coerce(&text), o.value, "{text}");
        }
    }

    /// A trial of the megatron profiles: the resolved run plus the runner's budget and a
    /// micro-batch override.
    fn megatron_cx() -> TrialContext {
        let mut c = cx();
        for (k, v) in [
            ("num_layers", Value::Int(4)),
            ("hidden_size", Value::Int(1024)),
            ("micro_batch_size", Value::Int(2)),
            ("train_iters", Value::Int(30)),
            ("add_bias_linear", Value::Bool(false)),
            ("bf16", Value::Bool(true)),
            ("fp16", Value::Bool(false)),
            ("use_turbo_attention", Value::Bool(true)),
        ] {
            c.params.insert(k.into(), v);
        }
        c.overrides = ["micro_batch_size=4", "train_iters=30"]
            .iter()
            .map(|s| parse_assignment(s).unwrap())
            .collect();
        c
    }

    #[test]
    fn megatron_profiles_render_the_run_with_each_flag_once() {
        for name in ["megatron", "megatron-local"] {
            let p = find(name, None).unwrap();
            let (argv, _) = p.expand(&megatron_cx()).unwrap();
            assert!(argv.starts_with(&[
                "torchrun".into(),
                "--standalone".into(),
                "--nproc_per_node".into(),
                "8".into(),
                "/m/pretrain_gpt.py".into()
            ]));
            let flags: Vec<&String> = argv.iter().filter(|a| a.starts_with("--")).collect();
            let unique: std::collections::BTreeSet<&String> = flags.iter().copied().collect();
            assert_eq!(flags.len(), unique.len(), "a flag repeated: {argv:?}");
            let joined = argv.join(" ");
            // The shape, the override replacing the resolved micro batch, the runner's budget
            // once, upstream's own switch for a Primus dest; no Primus-only setting.
            for want in [
                "--num-layers 4",
                "--hidden-size 1024",
                "--micro-batch-size 4",
                "--train-iters 30 ",
                "--disable-bias-linear",
                "--bf16",
            ] {
                assert!(joined.contains(want), "{want} missing: {joined}");
            }
            assert!(!joined.contains("--micro-batch-size 2"), "{joined}");
            assert!(
                !joined.contains("turbo") && !joined.contains("fp16"),
                "{joined}"
            );
        }
        let local = find("megatron-local", None)
            .unwrap()
            .expand(&megatron_cx())
            .unwrap()
            .0
            .join(" ");
        assert!(local.contains("--transformer-impl local --no-persist-layer-norm"));
    }

    #[test]
    fn megatron_profiles_refuse_a_primus_only_override_and_need_megatron_path() {
        let p = find("megatron", None).unwrap();
        let mut c = megatron_cx();
        c.overrides
            .push(parse_assignment("use_turbo_deepep=true").unwrap());
        let e = p.expand(&c).unwrap_err().to_string();
        assert!(
            e.contains("use_turbo_deepep") && e.contains("upstream"),
            "{e}"
        );
        let mut c = megatron_cx();
        c.process_env = crate::config::env::Env::empty();
        assert!(
            p.expand(&c)
                .unwrap_err()
                .to_string()
                .contains("MEGATRON_PATH")
        );
    }

    #[test]
    fn every_model_arg_is_an_upstream_megatron_argument() {
        let table = super::super::megatron_args::MegatronArgs::shipped();
        for k in MODEL_ARGS {
            assert!(table.knows(k), "{k}");
        }
    }

    #[test]
    fn a_template_flag_the_overrides_set_is_replaced_not_repeated() {
        let p = Profile::parse(
            "name: x\nargv: [run, --micro_batch_size, \"1\", --keep, \"-1\", --flag, \"{overrides}\"]\n",
            "x.yaml",
        )
        .unwrap();
        let mut c = cx();
        c.overrides = vec![parse_assignment("micro_batch_size=4").unwrap()];
        let (argv, _) = p.expand(&c).unwrap();
        assert_eq!(
            argv,
            ["run", "--keep", "-1", "--flag", "--micro_batch_size", "4"]
        );
    }

    #[test]
    fn bad_profiles_are_refused_with_the_reason() {
        let e = Profile::parse("name: x\nargv: [\"{nope}\"]\n", "x.yaml").unwrap_err();
        assert!(
            e.to_string().contains("unknown placeholder `{nope}`"),
            "{e}"
        );
        let e = Profile::parse("name: x\nargv: []\n", "x.yaml").unwrap_err();
        assert!(e.to_string().contains("empty"));
        let e = Profile::parse("name: x\nargv: [a]\nshell: true\n", "x.yaml").unwrap_err();
        assert!(e.to_string().contains("shell"));
        assert!(matches!(
            find("nope", None),
            Err(ProfileError::NotFound { .. })
        ));
    }

    #[test]
    fn doubled_braces_are_literal() {
        let p = Profile::parse(
            "name: x\nargv: [sh, -c, \"f() {{ echo {iters}; }}; f\"]\n",
            "x.yaml",
        )
        .unwrap();
        let (argv, _) = p.expand(&cx()).unwrap();
        assert_eq!(argv[2], "f() { echo 30; }; f");
    }

    #[test]
    fn user_profiles_override_builtins() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("proxy-cpu.yaml"),
            "name: proxy-cpu\nargv: [\"{self}\", custom]\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("site.yaml"),
            "name: site\nargv: [/opt/run.sh, \"{config}\"]\n",
        )
        .unwrap();
        let p = find("proxy-cpu", Some(dir.path())).unwrap();
        assert_eq!(p.argv[1], "custom");
        // It declares no capabilities: it keeps the built-in's (one process, no hipBLASLt).
        assert_eq!(
            p.capabilities,
            find("proxy-cpu", None).unwrap().capabilities
        );
        assert!(!p.capabilities.calls_hipblaslt());
        std::fs::write(
            dir.path().join("primus.yaml"),
            "name: primus\nargv: [run]\ncapabilities: {hipblaslt: direct}\n",
        )
        .unwrap();
        let p = find("primus", Some(dir.path())).unwrap();
        assert_eq!(
            p.capabilities.hipblaslt,
            crate::run::capabilities::Hipblaslt::Direct
        );
        assert_eq!(
            p.capabilities.log_level, None,
            "declared: nothing inherited"
        );
        let (argv, _) = find("site", Some(dir.path()))
            .unwrap()
            .expand(&cx())
            .unwrap();
        assert_eq!(argv, vec!["/opt/run.sh", "/t/1/config.yaml"]);
    }
    #[test]
    fn torchtitan_style_writes_tyro_words() {
        let p = Profile::parse(
            "name: t\nargv: [torchrun, -m, torchtitan.train, \"{overrides}\"]\noverrides: torchtitan\n",
            "t.yaml",
        )
        .unwrap();
        let mut c = cx();
        c.overrides = [
            "training.local_batch_size=4",
            "model.converters=['quantize.linear.float8']",
            "compile.components=['model', 'loss']",
            "compile.enable=true",
            "training.enable_cpu_offload=false",
            "quantize.linear.float8.recipe_name=None",
            "parallelism.pipeline_parallel_split_points=[1, 2]",
            "debug=false",
        ]
        .iter()
        .map(|s| parse_assignment(s).unwrap())
        .collect();
        let (argv, _) = p.expand(&c).unwrap();
        assert_eq!(
            argv[3..],
            [
                "--training.local_batch_size",
                "4",
                "--model.converters",
                "quantize.linear.float8",
                "--compile.components",
                "model,loss",
                "--compile.enable",
                "--training.no-enable_cpu_offload",
                "--parallelism.pipeline_parallel_split_points",
                "1",
                "2",
                "--no-debug",
            ]
        );
        // What TorchTitan's command line cannot say is refused, naming the setting.
        for (bad, why) in [
            ("model.converters=[]", "empty list"),
            ("model.converters=['a,b']", "split one word at commas"),
            ("float8={'recipe_name': 'rowwise'}", "map"),
        ] {
            c.overrides = vec![parse_assignment(bad).unwrap()];
            let e = p.expand(&c).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains(bad.split('=').next().unwrap()), "{e}");
        }
    }
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// TorchTitan's list rule (`args[0].split(",")`) reads back the items of a list of
        /// strings the torchtitan style writes; a list it cannot read back is refused.
        #[test]
        fn torchtitan_lists_read_back_or_are_refused(
            key in "[a-z_]{1,8}(\\.[a-z_]{1,8}){0,2}",
            items in proptest::collection::vec("[ -~]{0,10}", 1..5),
        ) {
            let v = Value::List(items.iter().cloned().map(Value::Str).collect());
            match torchtitan_words(&key, &v) {
                Ok(words) => {
                    proptest::prop_assert_eq!(words.len(), 2);
                    proptest::prop_assert_eq!(&words[0], &format!("--{key}"));
                    let back: Vec<String> = words[1].split(',').map(str::to_string).collect();
                    proptest::prop_assert_eq!(back, items);
                }
                Err(e) => {
                    proptest::prop_assert!(items.iter().any(|i| i.is_empty() || i.contains(',')));
                    proptest::prop_assert!(e.contains(&key), "{}", e);
                }
            }
            // false is tyro's negative flag: the same key with `no-` before its last part
            let off = torchtitan_words(&key, &Value::Bool(false)).unwrap();
            let (head, last) = key.rsplit_once('.').map_or((String::new(), key.as_str()), |(h, l)| (format!("{h}."), l));
            proptest::prop_assert_eq!(off, vec![format!("--{head}no-{last}")]);
        }
    }
}
