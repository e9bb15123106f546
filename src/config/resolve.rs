//! Resolving an experiment exactly as Primus does: per file env substitution then `extends`;
//! module preset, model preset keys added only where the module lacks them, experiment
//! `overrides`, command-line overrides, then (Megatron) the `build_args` patches that change
//! arguments from the config alone (see `patches`).

use super::env::{self, Env};
use super::error::ConfigError;
use super::null_string;
use super::overrides::Override;
use super::tree::{Item, Layer, Leaf, Origin, RawScalar, Tree};
use super::yaml::{self, Node, NodeKind, Pos};
use crate::domain::value::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Keys of a `modules.<name>` entry that are not copied onto the module's parameters.
const MODULE_RESERVED: &[&str] = &["name", "framework", "config", "model", "overrides"];
/// Top-level keys every experiment must have.
pub const REQUIRED_META: &[&str] = &["work_group", "user_name", "exp_name", "workspace"];

/// What a resolution needs besides the experiment path, and what the resolved config is
/// evaluated for.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--primus-root`; else `PRIMUS_ROOT`... see [`find_primus_root`].
    pub primus_root: Option<PathBuf>,
    pub env: Env,
    /// Command-line overrides (`--set key=value`), applied to every module.
    pub overrides: Vec<Override>,
    /// File contents to use instead of what is on disk (an edit being checked before saving).
    pub texts: HashMap<PathBuf, String>,
    /// The world size the config is linted for, with its source (None: unknown, the world
    /// rules are skipped). Resolution ignores it; a session sets it once.
    pub world: Option<crate::megatron::World>,
}

/// A value from the model preset that Primus drops because the module preset defines the key.
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    pub key: String,
    pub model_value: Value,
    pub model_origin: Origin,
    pub kept_value: Value,
    pub kept_origin: Origin,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Module {
    pub name: String,
    pub framework: String,
    pub preset_file: PathBuf,
    pub model_file: Option<PathBuf>,
    /// The effective parameters after every layer.
    pub params: Tree,
    pub dropped: Vec<Dropped>,
    /// Dotted keys the module and model presets define (before overrides): the keys Primus knows.
    pub preset_keys: BTreeSet<String>,
    /// Values Primus' `build_args` patches changed (their leaves are of layer `Patch`).
    pub patched: Vec<super::patches::Patched>,
}

impl Module {
    pub fn get(&self, key: &str) -> Option<&Leaf> {
        self.params.leaf(key)
    }

    pub fn value(&self, key: &str) -> Option<&Value> {
        self.get(key).map(|l| &l.value)
    }

    /// Every effective parameter, by dotted key (without where each came from).
    pub fn values(&self) -> std::collections::BTreeMap<String, Value> {
        self.params
            .leaves()
            .into_iter()
            .map(|(k, l)| (k, l.value.clone()))
            .collect()
    }

    pub fn is_megatron(&self) -> bool {
        self.framework == "megatron"
    }

    pub fn is_torchtitan(&self) -> bool {
        self.framework == "torchtitan"
    }
}

/// A key written twice in one mapping of a file the experiment reads (PyYAML keeps the last).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DuplicateKey {
    pub file: PathBuf,
    /// The key with its mapping's path, the ignored occurrence and the one that wins.
    pub key: yaml::DuplicateKey,
}

#[derive(Debug, Clone)]
pub struct Experiment {
    pub path: PathBuf,
    pub primus_root: PathBuf,
    /// The experiment file itself, after its own `extends` (env substituted).
    pub file: Tree,
    pub modules: Vec<Module>,
    /// Every file read, in order (for watching and for messages).
    pub files: Vec<PathBuf>,
    /// Keys written twice in one mapping, in every file read (each once).
    pub duplicates: Vec<DuplicateKey>,
    /// The experiment file's text as this resolution read it, by its length and digest.
    pub text_digest: (usize, u64),
}

impl Experiment {
    /// Resolve an experiment file.
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<Experiment, ConfigError> {
        let path = absolute(path);
        let root = find_primus_root(&path, opts.primus_root.as_deref(), &opts.env)?;
        let mut loader = Loader {
            env: &opts.env,
            texts: &opts.texts,
            files: Vec::new(),
            first_text: None,
            duplicates: Vec::new(),
            seen_duplicates: Default::default(),
            resolved: HashMap::new(),
        };
        let file = loader.load_file(&path, Layer::Experiment, &mut Vec::new())?;
        for key in REQUIRED_META {
            if !file.entries.contains_key(*key) {
                return Err(ConfigError::MissingKey {
                    path: path.clone(),
                    key: (*key).to_string(),
                });
            }
        }
        let Some(modules_item) = file.entries.get("modules") else {
            return Err(ConfigError::MissingKey {
                path: path.clone(),
                key: "modules".into(),
            });
        };
        let Item::Map(modules_tree) = modules_item else {
            return Err(invalid(
                modules_item.origin(),
                "`modules` must be a mapping",
            ));
        };
        let mut modules = Vec::new();
        for (name, item) in &modules_tree.entries {
            if !name.contains("trainer") {
                return Err(invalid(
                    item.origin(),
                    &format!(
                        "unsupported module `{name}` (Primus accepts only modules whose name contains \"trainer\", e.g. pre_trainer)"
                    ),
                ));
            }
            let Item::Map(spec) = item else {
                return Err(invalid(
                    item.origin(),
                    &format!("module `{name}` must be a mapping"),
                ));
            };
            modules.push(loader.load_module(&root, name, spec, &opts.overrides)?);
        }
        if modules.is_empty() {
            return Err(invalid(
                &modules_tree.origin,
                "`modules` is empty: add e.g. `pre_trainer:` with framework, config and model",
            ));
        }
        Ok(Experiment {
            path,
            primus_root: root,
            file,
            modules,
            files: loader.files,
            duplicates: loader.duplicates,
            text_digest: loader.first_text.unwrap_or_default(),
        })
    }

    /// Whether `text` is the experiment file this was resolved from (then resolving it again
    /// gives this same experiment). A 64-bit digest and the length: a save checks the file
    /// against what it was planned on anyway.
    pub fn read_from(&self, text: &str) -> bool {
        self.text_digest == digest(text)
    }

    /// The module `train pretrain` runs (`pre_trainer`, or `post_trainer` when alone), else the first.
    pub fn main_module(&self) -> &Module {
        self.module("pre_trainer")
            .or_else(|| self.module("post_trainer"))
            .unwrap_or(&self.modules[0])
    }

    pub fn module(&self, name: &str) -> Option<&Module> {
        self.modules.iter().find(|m| m.name == name)
    }

    /// A top-level experiment value (`exp_name`, `workspace`, ...).
    pub fn meta(&self, key: &str) -> Option<&Value> {
        self.file.leaf(key).map(|l| &l.value)
    }

    /// The experiment's `env:` section (name → leaf), applied by Primus to `os.environ`.
    pub fn env_section(&self) -> Vec<(String, &Leaf)> {
        match self.file.entries.get("env") {
            Some(Item::Map(t)) => t.leaves(),
            _ => Vec::new(),
        }
    }
}

/// Find the Primus root: `explicit` (`--primus-root`) first; else the nearest folder above the
/// experiment that holds `primus/configs/`; else `PRIMUS_ROOT`.
pub fn find_primus_root(
    experiment: &Path,
    explicit: Option<&Path>,
    env: &Env,
) -> Result<PathBuf, ConfigError> {
    let check = |p: &Path| -> Result<PathBuf, ConfigError> {
        let p = absolute(p);
        if p.join("primus/configs/modules").is_dir() {
            Ok(p)
        } else {
            Err(ConfigError::BadPrimusRoot { path: p })
        }
    };
    if let Some(p) = explicit {
        return check(p);
    }
    let mut dir = experiment.parent();
    while let Some(d) = dir {
        if d.join("primus/configs").is_dir() {
            return Ok(d.to_path_buf());
        }
        dir = d.parent();
    }
    if let Some(p) = env.get("PRIMUS_ROOT").filter(|s| !s.is_empty()) {
        return check(Path::new(p));
    }
    Err(ConfigError::NoPrimusRoot {
        path: experiment.to_path_buf(),
    })
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn invalid(origin: &Origin, message: &str) -> ConfigError {
    ConfigError::Invalid {
        path: origin.file.to_path_buf(),
        line: origin.line,
        col: origin.column,
        message: message.to_string(),
    }
}

/// Read an experiment or a file it extends ([`crate::util::input::read_text`]): regular files
/// only, size-capped, UTF-8 (a bad byte is reported at its line and column).
pub fn read_input(path: &Path, env: &Env) -> Result<String, ConfigError> {
    use crate::util::input::{CAP_ENV, InputError, cap_bytes, read_text};
    let cap = env
        .get(CAP_ENV)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or_else(cap_bytes, |m| m.saturating_mul(1 << 20));
    read_text(path, cap).map_err(|e| match e {
        InputError::Io(source) => ConfigError::Io {
            path: path.to_path_buf(),
            source,
        },
        InputError::NotUtf8 { line, col, .. } => ConfigError::Invalid {
            path: path.to_path_buf(),
            line,
            col,
            message: format!("{e}; Primus reads UTF-8"),
        },
        other => ConfigError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(other.to_string()),
        },
    })
}

struct Loader<'a> {
    env: &'a Env,
    texts: &'a HashMap<PathBuf, String>,
    files: Vec<PathBuf>,
    /// The experiment file's text (the first read), as [`Experiment::text_digest`].
    first_text: Option<(usize, u64)>,
    duplicates: Vec<DuplicateKey>,
    /// `duplicates`, for finding one at once: a preset several chains extend is read once,
    /// but one file may hold thousands of duplicate keys.
    seen_duplicates: std::collections::HashSet<DuplicateKey>,
    /// Every file an `extends` brought in, resolved, by canonical path and layer: a preset
    /// that several chains extend (a diamond) is read and merged once, not once per path to
    /// it (32 files each extending the next two were 2^32 reads). A file reached by two
    /// spellings of its path keeps the first one in its origins.
    resolved: HashMap<(PathBuf, Layer), Tree>,
}

impl Loader<'_> {
    fn read(&mut self, path: &Path) -> Result<String, ConfigError> {
        self.files.push(path.to_path_buf());
        let text = match self.texts.get(path) {
            Some(t) => t.clone(),
            None => read_input(path, self.env)?,
        };
        self.first_text.get_or_insert_with(|| digest(&text));
        Ok(text)
    }

    /// `parse_yaml`: read, substitute env, apply `extends` (relative to the file, later wins,
    /// the file's own keys win).
    fn load_file(
        &mut self,
        path: &Path,
        layer: Layer,
        stack: &mut Vec<PathBuf>,
    ) -> Result<Tree, ConfigError> {
        let text = self.read(path)?;
        let node = yaml::parse(&text)
            .map_err(|e| ConfigError::Yaml {
                path: path.to_path_buf(),
                line: e.line,
                col: e.col,
                message: e.message,
            })?
            .ok_or_else(|| ConfigError::Empty {
                path: path.to_path_buf(),
            })?;
        for key in yaml::duplicate_keys(&node) {
            let d = DuplicateKey {
                file: path.to_path_buf(),
                key,
            };
            // The experiment and its presets are separate reads that may share a file.
            if self.seen_duplicates.insert(d.clone()) {
                self.duplicates.push(d);
            }
        }
        let file: Arc<Path> = Arc::from(path);
        let NodeKind::Map(entries) = &node.kind else {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: node.start.line,
                col: node.start.col,
                message: "the top level must be a mapping of keys to values".into(),
            });
        };
        let mut own = self.tree_from_map(entries, node.start, &file, layer)?;
        let Some(ext) = own.entries.shift_remove("extends") else {
            return Ok(own);
        };
        let targets = extends_targets(&ext, node.get("extends"), path)?;
        stack.push(canonical(path));
        let mut merged = Tree::new(own.origin.clone());
        for (target, pos) in targets {
            let dir = path.parent().unwrap_or(Path::new("."));
            let resolved = dir.join(&target);
            match crate::util::input::kind_of(&resolved) {
                Ok(None) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(ConfigError::MissingExtends {
                        path: path.to_path_buf(),
                        line: pos.line,
                        col: pos.col,
                        target,
                        resolved,
                    });
                }
                // A directory, a device, a FIFO or a symbolic link loop: said as it is.
                other => {
                    let what = match other {
                        Ok(Some(kind)) => format!("is {kind}, not a file"),
                        Err(e) => format!("cannot be read: {e}"),
                        Ok(None) => unreachable!(),
                    };
                    return Err(ConfigError::Invalid {
                        path: path.to_path_buf(),
                        line: pos.line,
                        col: pos.col,
                        message: format!(
                            "extends target `{target}` ({}) {what}",
                            resolved.display()
                        ),
                    });
                }
            }
            let canon = canonical(&resolved);
            if let Some(i) = stack.iter().position(|p| *p == canon) {
                let mut chain = stack[i..].to_vec();
                chain.push(canon);
                return Err(ConfigError::ExtendsCycle {
                    path: path.to_path_buf(),
                    line: pos.line,
                    col: pos.col,
                    chain,
                });
            }
            let mut sub = match self.resolved.get(&(canon.clone(), layer)) {
                // Resolved without a cycle before, so none passes through it now either.
                Some(done) => done.clone(),
                None => {
                    let sub = self.load_file(&resolved, layer, stack)?;
                    self.resolved.insert((canon, layer), sub.clone());
                    sub
                }
            };
            sub.prepend_via(&file);
            merged.merge(sub);
        }
        stack.pop();
        own.entries.shift_remove("extends");
        merged.origin = own.origin.clone();
        merged.merge(own);
        Ok(merged)
    }

    fn tree_from_map(
        &self,
        entries: &[(Node, Node)],
        at: Pos,
        file: &Arc<Path>,
        layer: Layer,
    ) -> Result<Tree, ConfigError> {
        let mut items = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let Some(key) = k.key_string() else {
                return Err(ConfigError::Invalid {
                    path: file.to_path_buf(),
                    line: k.start.line,
                    col: k.start.col,
                    message: "a mapping key must be a scalar".into(),
                });
            };
            let item = match &v.kind {
                NodeKind::Map(inner) => Item::Map(self.tree_from_map(inner, k.start, file, layer)?),
                NodeKind::Scalar(s) => {
                    // An empty value (`key:`) has no text of its own: point at the key.
                    let at = if s.text.is_empty() && s.style == yaml::Style::Plain {
                        k.start
                    } else {
                        v.start
                    };
                    let typed = v.typed();
                    let (value, template) = match &typed {
                        Value::Str(text) => match self.substitute(text, file, v.start)? {
                            Some(val) => (val, Some(text.clone())),
                            None => (typed, None),
                        },
                        _ => (typed, None),
                    };
                    Item::Leaf(Leaf {
                        value,
                        origin: origin(file, at, layer),
                        raw: Some(RawScalar {
                            text: s.text.clone(),
                            style: s.style,
                        }),
                        template,
                        shadowed: Vec::new(),
                    })
                }
                NodeKind::Seq(_) => Item::Leaf(Leaf {
                    value: self.substitute_value(v.typed(), file, v.start)?,
                    origin: origin(file, v.start, layer),
                    raw: None,
                    template: None,
                    shadowed: Vec::new(),
                }),
            };
            items.push((key, item));
        }
        Ok(last_wins(Tree::new(origin(file, at, layer)), items))
    }

    fn substitute(&self, s: &str, file: &Arc<Path>, at: Pos) -> Result<Option<Value>, ConfigError> {
        env::substitute(s, self.env).map_err(|m| ConfigError::EnvRequired {
            path: file.to_path_buf(),
            line: at.line,
            col: at.col,
            var: m.0,
        })
    }

    fn substitute_value(&self, v: Value, file: &Arc<Path>, at: Pos) -> Result<Value, ConfigError> {
        Ok(match v {
            Value::Str(s) => self.substitute(&s, file, at)?.unwrap_or(Value::Str(s)),
            Value::List(items) => Value::List(
                items
                    .into_iter()
                    .map(|i| self.substitute_value(i, file, at))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Map(m) => Value::Map(
                m.into_iter()
                    .map(|(k, v)| Ok((k, self.substitute_value(v, file, at)?)))
                    .collect::<Result<_, ConfigError>>()?,
            ),
            other => other,
        })
    }

    fn load_module(
        &mut self,
        root: &Path,
        name: &str,
        spec: &Tree,
        cli: &[Override],
    ) -> Result<Module, ConfigError> {
        let framework_leaf = required_str(spec, "framework", name)?;
        let framework = framework_leaf.1.to_string();
        let (config_origin, config_name) = required_str(spec, "config", name)?;
        let preset_file = preset_path(root, "modules", &framework, config_name, config_origin)?;
        let mut params = self.load_file(&preset_file, Layer::ModulePreset, &mut Vec::new())?;
        // Module-level attributes (trainer_class, ...) join where the module preset lacks them,
        // before the model preset is merged (so they win over it, as in Primus).
        for (key, item) in &spec.entries {
            if !MODULE_RESERVED.contains(&key.as_str()) && !params.entries.contains_key(key) {
                params.entries.insert(key.clone(), item.clone());
            }
        }

        let mut model_file = None;
        let mut dropped = Vec::new();
        // Sections the model preset adds: its merge assigns them whole (see null_string).
        let mut model_sections = Vec::new();
        if let Some(Item::Leaf(model_leaf)) = spec.entries.get("model")
            && !model_leaf.value.is_null()
        {
            let Value::Str(model_name) = &model_leaf.value else {
                return Err(invalid(
                    &model_leaf.origin,
                    "`model` must name a model preset file",
                ));
            };
            let mf = preset_path(root, "models", &framework, model_name, &model_leaf.origin)?;
            let mut model = self.load_file(&mf, Layer::ModelPreset, &mut Vec::new())?;
            if !model.entries.contains_key("model") {
                model.entries.insert(
                    "model".into(),
                    Item::Leaf(Leaf {
                        value: Value::Str(model_name.clone()),
                        origin: model_leaf.origin.clone(),
                        raw: model_leaf.raw.clone(),
                        template: model_leaf.template.clone(),
                        shadowed: Vec::new(),
                    }),
                );
            }
            // merge_namespace(module, model, allow_override=False, excepts=["name"])
            for (key, item) in model.entries {
                if key == "name" {
                    continue;
                }
                match params.entries.get(&key) {
                    None if matches!(item, Item::Map(_)) => {
                        model_sections.push(key.clone());
                        params.entries.insert(key, item);
                    }
                    Some(kept) => dropped.push(Dropped {
                        key,
                        model_value: item.value(),
                        model_origin: item.origin().clone(),
                        kept_value: kept.value(),
                        kept_origin: kept.origin().clone(),
                    }),
                    None => {
                        params.entries.insert(key, item);
                    }
                }
            }
            model_file = Some(mf);
        }

        null_string::merged_into(&mut params, &model_sections);
        let preset_keys = params.leaves().into_iter().map(|(k, _)| k).collect();
        match spec.entries.get("overrides") {
            Some(Item::Map(ov)) => {
                let mut ov = ov.clone();
                null_string::merged_into(&mut params, &[]);
                null_string::overrides(&mut ov, &params);
                params.merge(ov);
            }
            Some(Item::Leaf(l)) if l.value.is_null() => {}
            Some(Item::Leaf(l)) => {
                return Err(invalid(
                    &l.origin,
                    &format!("`modules.{name}.overrides` must be a mapping of keys to values"),
                ));
            }
            None => {}
        }
        for o in cli {
            params.merge(Tree::singleton(
                &o.key,
                o.value.clone(),
                Origin::command_line(),
            ));
        }
        let mut module = Module {
            name: name.to_string(),
            framework,
            preset_file,
            model_file,
            params,
            dropped,
            preset_keys,
            patched: Vec::new(),
        };
        super::patches::apply(&mut module);
        Ok(module)
    }
}

fn origin(file: &Arc<Path>, at: Pos, layer: Layer) -> Origin {
    Origin {
        file: file.clone(),
        line: at.line,
        column: at.col,
        via: Vec::new(),
        layer,
    }
}

/// `tree` with `items` entered in order where a duplicate key keeps its last value, placed
/// where that last one is written (as removing the earlier entry and inserting the later one
/// would, without shifting the map once per duplicate: 300,000 of them took minutes).
fn last_wins(mut tree: Tree, items: Vec<(String, Item)>) -> Tree {
    tree.entries
        .extend(crate::util::dedup::last_of_each(items, |(k, _)| k.clone()));
    tree
}

fn digest(text: &str) -> (usize, u64) {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    (text.len(), h.finish())
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

fn required_str<'t>(
    spec: &'t Tree,
    key: &str,
    module: &str,
) -> Result<(&'t Origin, &'t str), ConfigError> {
    match spec.entries.get(key) {
        Some(Item::Leaf(Leaf {
            value: Value::Str(s),
            origin,
            ..
        })) if !s.is_empty() => Ok((origin, s)),
        Some(item) => Err(invalid(
            item.origin(),
            &format!("`modules.{module}.{key}` must be a non-empty string"),
        )),
        None => Err(invalid(
            &spec.origin,
            &format!("module `{module}` has no `{key}` (needs framework, config and model)"),
        )),
    }
}

/// `extends:` entries (a string or a list of strings) with their positions.
fn extends_targets(
    item: &Item,
    node: Option<&Node>,
    path: &Path,
) -> Result<Vec<(String, Pos)>, ConfigError> {
    let bad = |o: &Origin| invalid(o, "`extends` must be a file name or a list of file names");
    let Item::Leaf(leaf) = item else {
        return Err(bad(item.origin()));
    };
    let positions: Vec<Pos> = match node.map(|n| &n.kind) {
        Some(NodeKind::Seq(items)) => items.iter().map(|n| n.start).collect(),
        _ => vec![Pos {
            line: leaf.origin.line,
            col: leaf.origin.column,
            offset: 0,
        }],
    };
    let fallback = positions.first().copied().unwrap_or_default();
    match &leaf.value {
        Value::Str(s) => Ok(vec![(s.clone(), fallback)]),
        Value::List(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Str(s) => Ok((s.clone(), positions.get(i).copied().unwrap_or(fallback))),
                _ => Err(bad(&leaf.origin)),
            })
            .collect(),
        Value::Null => Ok(Vec::new()),
        _ => Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            line: leaf.origin.line,
            col: leaf.origin.column,
            message: "`extends` must be a file name or a list of file names".into(),
        }),
    }
}

/// `primus/configs/<kind>/<framework>/<name>[.yaml]`, refusing paths that escape that folder.
fn preset_path(
    root: &Path,
    kind: &'static str,
    framework: &str,
    name: &str,
    at: &Origin,
) -> Result<PathBuf, ConfigError> {
    let dir = root.join("primus/configs").join(kind).join(framework);
    let mut candidate = dir.join(name);
    if !candidate.is_file() && Path::new(name).extension().is_none() {
        candidate = dir.join(format!("{name}.yaml"));
    }
    let label = if kind == "modules" { "module" } else { "model" };
    if !candidate.is_file() {
        let mut available: Vec<String> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
                    .collect()
            })
            .unwrap_or_default();
        available.sort();
        return Err(ConfigError::PresetNotFound {
            path: at.file.to_path_buf(),
            line: at.line,
            col: at.column,
            kind: label,
            name: name.to_string(),
            dir,
            available,
        });
    }
    if !canonical(&candidate).starts_with(canonical(&dir)) {
        return Err(invalid(
            at,
            &format!("{label} preset `{name}` points outside {}", dir.display()),
        ));
    }
    Ok(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::overrides::parse_assignment;

    fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A tree exercising every merge layer.
    fn tree(dir: &Path) -> PathBuf {
        write(dir, "primus/configs/modules/base.yaml", "a: 0\nz: base\n");
        write(
            dir,
            "primus/configs/modules/megatron/one.yaml",
            "a: 1\nb: 1\nl: [1, 2]\nd: {x: 1, y: 1}\n",
        );
        write(
            dir,
            "primus/configs/modules/megatron/two.yaml",
            "a: 2\nd:\n  y: 2\nl: [9]\n",
        );
        write(
            dir,
            "primus/configs/modules/megatron/pre.yaml",
            "extends:\n  - ../base.yaml\n  - one.yaml\n  - two.yaml\nb: 3\nshared: module\n",
        );
        write(
            dir,
            "primus/configs/models/megatron/m.yaml",
            "shared: model\nname: ignored\nonly_model: ${M_ENV:5}\n",
        );
        write(
            dir,
            "exp/e.yaml",
            "work_group: g\nuser_name: u\nexp_name: ${EXP:e1}\nworkspace: w\nmodules:\n  pre_trainer:\n    framework: megatron\n    config: pre.yaml\n    model: m.yaml\n    trainer_class: X\n    overrides:\n      d:\n        x: 7\n      o: 1\n",
        )
    }

    #[test]
    fn merge_order_matches_primus() {
        let dir = tempfile::tempdir().unwrap();
        let p = tree(dir.path());
        let exp = Experiment::load(&p, &LoadOptions::default()).unwrap();
        let m = exp.main_module();
        let v = |k: &str| m.value(k).cloned().unwrap_or(Value::Null);
        // extends: later entries win, the file's own keys win over all of them.
        assert_eq!(v("a"), Value::Int(2));
        assert_eq!(v("b"), Value::Int(3));
        assert_eq!(v("z"), Value::Str("base".into()));
        // dicts merge deep, lists are replaced whole.
        assert_eq!(v("d.y"), Value::Int(2));
        assert_eq!(v("l"), Value::List(vec![Value::Int(9)]));
        // overrides win, deep.
        assert_eq!(v("d.x"), Value::Int(7));
        assert_eq!(v("o"), Value::Int(1));
        // Model keys only where the module lacks them; `name` is never copied.
        assert_eq!(v("shared"), Value::Str("module".into()));
        assert_eq!(v("only_model"), Value::Int(5));
        assert_eq!(v("name"), Value::Null);
        assert_eq!(m.dropped.len(), 1);
        assert_eq!(m.dropped[0].key, "shared");
        assert_eq!(m.dropped[0].model_value, Value::Str("model".into()));
        // The model file name becomes `model` when the model preset has none.
        assert_eq!(v("model"), Value::Str("m.yaml".into()));
        // Module-level extra attributes are copied.
        assert_eq!(v("trainer_class"), Value::Str("X".into()));
        // Provenance: file, line, chain, layer, history.
        let a = m.get("a").unwrap();
        assert!(a.origin.file.ends_with("two.yaml"));
        assert_eq!((a.origin.line, a.origin.column), (1, 4));
        assert_eq!(a.origin.via.len(), 1);
        assert!(a.origin.via[0].ends_with("pre.yaml"));
        let hist: Vec<i64> = a.shadowed.iter().filter_map(|s| s.value.as_i64()).collect();
        assert_eq!(hist, vec![0, 1]);
        assert_eq!(
            m.get("only_model").unwrap().origin.layer,
            Layer::ModelPreset
        );
        assert_eq!(m.get("o").unwrap().origin.layer, Layer::Experiment);
        assert_eq!(exp.meta("exp_name"), Some(&Value::Str("e1".into())));
    }

    /// Primus' merges turn the string "null" into None (`set_value_by_key`), except inside
    /// lists and inside a mapping the overrides introduce; the command line keeps it.
    #[test]
    fn null_strings_become_none_as_primus_merges_them() {
        let dir = tempfile::tempdir().unwrap();
        let p = tree(dir.path());
        write(
            dir.path(),
            "primus/configs/models/megatron/m.yaml",
            "data: ${DATA_PATH:null}\nquoted: \"null\"\nsec:\n  inner: \"null\"\n",
        );
        let text = std::fs::read_to_string(&p).unwrap();
        let text = text.replace(
            "      o: 1\n",
            "      o: \"null\"\n      l: [\"null\", 1]\n      d:\n        z: \"null\"\n      fresh:\n        y: \"null\"\n",
        );
        std::fs::write(&p, text).unwrap();
        let opts = LoadOptions {
            overrides: vec![parse_assignment("cli=null").unwrap()],
            ..Default::default()
        };
        let exp = Experiment::load(&p, &opts).unwrap();
        let m = exp.main_module();
        let v = |k: &str| m.value(k).cloned().unwrap();
        let null = || Value::Str("null".into());
        assert_eq!(
            v("data"),
            Value::Null,
            "${{VAR:null}} substitutes to \"null\": None"
        );
        assert_eq!(v("quoted"), Value::Null);
        assert_eq!(
            v("sec.inner"),
            Value::Null,
            "the overrides merge reaches model sections"
        );
        assert_eq!(v("o"), Value::Null);
        assert_eq!(
            v("d.z"),
            Value::Null,
            "a section the presets hold is merged key by key"
        );
        assert_eq!(
            v("l"),
            Value::List(vec![null(), Value::Int(1)]),
            "lists stay as written"
        );
        assert_eq!(
            v("fresh.y"),
            null(),
            "a section the overrides introduce stays as written"
        );
        assert_eq!(
            v("cli"),
            null(),
            "command-line overrides are not merged that way"
        );
        // Without overrides the model preset's sections are assigned whole: kept.
        let plain = std::fs::read_to_string(&p).unwrap();
        let cut = plain.find("    overrides:").unwrap();
        std::fs::write(&p, &plain[..cut]).unwrap();
        let exp = Experiment::load(&p, &LoadOptions::default()).unwrap();
        let m = exp.main_module();
        assert_eq!(m.value("sec.inner"), Some(&null()));
        assert_eq!(m.value("data"), Some(&Value::Null));
    }

    #[test]
    fn a_module_attribute_wins_over_the_model_preset() {
        let dir = tempfile::tempdir().unwrap();
        let p = tree(dir.path());
        write(
            dir.path(),
            "primus/configs/models/megatron/m.yaml",
            "trainer_class: FromModel\n",
        );
        let exp = Experiment::load(&p, &LoadOptions::default()).unwrap();
        let m = exp.main_module();
        assert_eq!(m.value("trainer_class"), Some(&Value::Str("X".into())));
        assert_eq!(m.dropped.len(), 1);
        assert_eq!(m.dropped[0].key, "trainer_class");
    }

    /// `set` plans on the experiment it was given only when the file still holds the text it
    /// was resolved from; a text given in place of the file's counts as what was read.
    #[test]
    fn an_experiment_knows_the_text_it_was_resolved_from() {
        let dir = tempfile::tempdir().unwrap();
        let p = tree(dir.path());
        let text = std::fs::read_to_string(&p).unwrap();
        let exp = Experiment::load(&p, &LoadOptions::default()).unwrap();
        assert!(exp.read_from(&text));
        assert!(!exp.read_from(&format!("{text}# a comment\n")));
        let edited = text.replace("o: 1", "o: 2");
        assert_ne!(edited, text);
        let mut opts = LoadOptions::default();
        opts.texts.insert(exp.path.clone(), edited.clone());
        let given = Experiment::load(&p, &opts).unwrap();
        assert!(given.read_from(&edited) && !given.read_from(&text));
    }

    #[test]
    fn cli_overrides_win_and_env_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = tree(dir.path());
        let opts = LoadOptions {
            env: Env::empty().with("M_ENV", "2.5").with("EXP", "true"),
            overrides: vec![
                parse_assignment("d.x=8").unwrap(),
                parse_assignment("--b=None").unwrap(),
            ],
            ..Default::default()
        };
        let exp = Experiment::load(&p, &opts).unwrap();
        let m = exp.main_module();
        assert_eq!(m.value("d.x"), Some(&Value::Int(8)));
        assert_eq!(m.value("b"), Some(&Value::Null));
        assert_eq!(m.get("b").unwrap().origin.layer, Layer::CommandLine);
        assert_eq!(m.value("only_model"), Some(&Value::Float(2.5)));
        assert_eq!(exp.meta("exp_name"), Some(&Value::Bool(true)));
    }

    #[test]
    fn preset_lookup_refuses_escapes_and_lists_what_exists() {
        let dir = tempfile::tempdir().unwrap();
        let p = tree(dir.path());
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.replace("config: pre.yaml", "config: ../base.yaml")).unwrap();
        let e = Experiment::load(&p, &LoadOptions::default()).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        std::fs::write(&p, text.replace("config: pre.yaml", "config: pree")).unwrap();
        let e = Experiment::load(&p, &LoadOptions::default()).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("e.yaml:8:13") && s.contains("available: one.yaml, pre.yaml, two.yaml"),
            "{s}"
        );
        // `.yaml` may be left off, as Primus allows.
        std::fs::write(&p, text.replace("config: pre.yaml", "config: pre")).unwrap();
        assert!(Experiment::load(&p, &LoadOptions::default()).is_ok());
    }
}
