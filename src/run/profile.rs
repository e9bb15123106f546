//! Launch profiles: how a trial starts. A profile is data (`presets/profiles/*.yaml`, plus the
//! user's own in `~/.config/primus-tune/profiles/`) holding an argv template; this module turns it
//! into the exact argv and environment of one trial. Nothing goes through a shell: each template
//! element becomes one argument (or, for `{overrides}`, `{model_args}` and `{env_args}`, several).

use super::capabilities::Capabilities;
use crate::config::catalog::json_to_value;
use crate::config::overrides::Override;
use crate::config::value::{Value, yaml_float};
use crate::config::yaml;
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
        "megatron",
        include_str!("../../presets/profiles/megatron.yaml"),
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
    /// Where the profile came from (set on load).
    #[serde(skip)]
    pub source: String,
    /// The file declared `capabilities:` (set on load; a profile of yours that replaces a
    /// built-in and declares none keeps the built-in's).
    #[serde(skip)]
    pub declares_capabilities: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("profile `{name}` not found; available: {}", available.join(", "))]
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
    /// The environment the launch sees (for `{env:NAME}`).
    pub process_env: crate::config::env::Env,
}

/// Megatron arguments `{model_args}` passes from the resolved config (the run's shape).
pub const MODEL_ARGS: &[&str] = &[
    "num_layers",
    "hidden_size",
    "ffn_hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "group_query_attention",
    "seq_length",
    "max_position_embeddings",
    "micro_batch_size",
    "global_batch_size",
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "expert_model_parallel_size",
    "num_experts",
    "moe_router_topk",
    "moe_ffn_hidden_size",
    "recompute_granularity",
    "recompute_method",
    "recompute_num_layers",
    "bf16",
    "lr",
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

    /// The argv and working directory of one trial.
    pub fn expand(&self, cx: &TrialContext) -> Result<(Vec<String>, PathBuf), ProfileError> {
        let err = |message: String| ProfileError::Expand {
            profile: self.name.clone(),
            message,
        };
        let mut argv = Vec::new();
        for t in &self.argv {
            match t.as_str() {
                "{overrides}" => argv.extend(render_overrides(
                    cx.overrides.iter().map(|o| (o.key.as_str(), &o.value)),
                    self.overrides,
                )),
                "{model_args}" => argv.extend(render_overrides(
                    MODEL_ARGS
                        .iter()
                        .filter_map(|k| cx.params.get(*k).map(|v| (*k, v)))
                        .filter(|(_, v)| !v.is_null()),
                    self.overrides,
                )),
                "{env_args}" => {
                    for (k, v) in &cx.env {
                        argv.push("--env".into());
                        argv.push(format!("{k}={v}"));
                    }
                }
                _ => argv.push(substitute(t, cx).map_err(err)?),
            }
        }
        let workdir = match &self.workdir {
            Some(w) => PathBuf::from(substitute(w, cx).map_err(err)?),
            None => cx.trial_dir.clone(),
        };
        Ok((argv, workdir))
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

const PLACEHOLDERS: &[&str] = &[
    "self",
    "primus_root",
    "config",
    "resolved",
    "trial_dir",
    "iters",
    "gpus",
    "assets",
    "python",
];
const WHOLE_ARG: &[&str] = &["{overrides}", "{model_args}", "{env_args}"];

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
        let name = &rest[i + 1..i + j];
        let path = |p: &Path| p.display().to_string();
        let v = match name {
            "self" => path(&cx.exe),
            "primus_root" => path(&cx.primus_root),
            "config" => path(&cx.config),
            "resolved" => path(&cx.resolved),
            "trial_dir" => path(&cx.trial_dir),
            "iters" => cx.iters.to_string(),
            "gpus" => cx.gpus.to_string(),
            "assets" => path(&cx.assets),
            "python" => cx.python.clone(),
            n if n.starts_with("env:") => {
                let var = &n[4..];
                cx.process_env.get(var).map(str::to_string).ok_or_else(|| {
                    format!("`{{{n}}}` needs the environment variable {var}, which is not set")
                })?
            }
            other => return Err(format!("unknown placeholder `{{{other}}}`")),
        };
        out.push_str(&v);
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `--key value` pairs for overrides.
pub fn render_overrides<'a>(
    items: impl Iterator<Item = (&'a str, &'a Value)>,
    style: OverrideStyle,
) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in items {
        match style {
            OverrideStyle::Primus => {
                out.push(format!("--{key}"));
                out.push(primus_cli_value(value));
            }
            OverrideStyle::Megatron => {
                let flag = format!("--{}", key.replace('_', "-"));
                match value {
                    Value::Bool(true) => out.push(flag),
                    Value::Bool(false) | Value::Null => {}
                    Value::List(items) => {
                        out.push(flag);
                        out.extend(items.iter().map(|v| v.to_string()));
                    }
                    other => {
                        out.push(flag);
                        out.push(plain_value(other));
                    }
                }
            }
        }
    }
    out
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
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|d| d.join("primus-tune/profiles"))
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

/// Read back a `{resolved}` file into values.
pub fn read_resolved(j: &serde_json::Value) -> BTreeMap<String, Value> {
    match j {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), json_to_value(v)))
            .collect(),
        _ => BTreeMap::new(),
    }
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
    fn builtin_profiles_parse() {
        let all = all(None).unwrap();
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["proxy-cpu", "proxy-torch", "primus", "megatron"]
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

    #[test]
    fn megatron_style_and_model_args() {
        let p = find("megatron", None).unwrap();
        let (argv, _) = p.expand(&cx()).unwrap();
        assert!(argv.starts_with(&[
            "torchrun".into(),
            "--nproc_per_node".into(),
            "8".into(),
            "/m/pretrain_gpt.py".into()
        ]));
        let joined = argv.join(" ");
        assert!(joined.contains("--micro-batch-size 4"));
        assert!(joined.contains("--use-turbo-deepep"));
        let mut c = cx();
        c.process_env = crate::config::env::Env::empty();
        assert!(
            p.expand(&c)
                .unwrap_err()
                .to_string()
                .contains("MEGATRON_PATH")
        );
        let rendered = render_overrides(
            MODEL_ARGS
                .iter()
                .filter_map(|k| c.params.get(*k).map(|v| (*k, v)))
                .filter(|(_, v)| !v.is_null()),
            OverrideStyle::Megatron,
        );
        assert_eq!(rendered, vec!["--num-layers", "4", "--bf16"]);
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
}
