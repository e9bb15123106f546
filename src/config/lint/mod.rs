//! Validation of a resolved experiment: the rules Primus and Megatron enforce (or silently
//! apply), Megatron's world-size asserts for a known world, catalog types and ranges, unknown
//! keys, and YAML 1.1 typing surprises.

pub mod codes;
mod env_rules;
mod layout;
mod megatron;
mod sizes;
mod titan_layout;
mod titan_world;
mod torchtitan;
mod types;
mod world;

pub use types::closest as closest_key;

use super::catalog::{Backend, Catalog};
use super::diag::{Diagnostic, Location, Severity};
use super::env::Env;
use super::resolve::{Experiment, Module};
use super::tree::{Item, Layer, Leaf, Origin};
use crate::domain::value::Value;
use crate::megatron::World;

/// Environment variables read by the launcher (shell hooks) before Primus' Python runtime applies
/// the experiment's `env:` section — setting them there has no effect on what the hooks do.
pub const LAUNCHER_ENV: &[&str] = &[
    "PRIMUS_HIPBLASLT_TUNING",
    "PRIMUS_HIPBLASLT_TUNING_STAGE",
    "PRIMUS_DETERMINISTIC",
    "PRIMUS_MODEL",
    "NNODES",
    "NODE_RANK",
    "GPUS_PER_NODE",
    "MASTER_ADDR",
    "MASTER_PORT",
];

/// Lint every module of an experiment. `env` is the environment the job will be launched with
/// (the process environment plus `--env` overrides); `world` the world size it runs on, when
/// known (None: Megatron's world-size rules are skipped, never checked against a guess).
pub fn lint(
    exp: &Experiment,
    env: &Env,
    world: Option<&World>,
    catalog: &Catalog,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for module in &exp.modules {
        let cx = Ctx::new(exp, module, env, world.copied(), catalog);
        types::check(&cx, &mut out);
        match cx.backend {
            Some(Backend::Megatron) => {
                sizes::check(&cx, &mut out);
                megatron::check(&cx, &mut out);
                world::check(&cx, &mut out);
                layout::check(&cx, &mut out);
            }
            Some(Backend::Torchtitan) => {
                torchtitan::check(&cx, &mut out);
                titan_world::check(&cx, &mut out);
                titan_layout::check(&cx, &mut out);
            }
            None => {}
        }
        env_rules::check(&cx, &mut out);
    }
    env_rules::check_env_section(exp, &mut out);
    duplicate_keys(exp, &mut out);
    dedup_and_sort(&mut out);
    out
}

/// Keys written twice in one mapping of any file the experiment reads: Primus loads YAML with
/// PyYAML's SafeLoader, which keeps the later value without a word, so the earlier one is dead.
fn duplicate_keys(exp: &Experiment, out: &mut Vec<Diagnostic>) {
    for d in &exp.duplicates {
        let name = super::tree::file_name(&d.file);
        let at = |p: super::yaml::Pos| format!("{name}:{}:{}", p.line, p.col);
        let (ignored, wins) = (d.key.ignored, d.key.wins);
        // A module's override is about the flag; anything else is named by its path.
        let flag = exp
            .modules
            .iter()
            .find_map(|m| {
                d.key
                    .path
                    .strip_prefix(&format!("modules.{}.overrides.", m.name))
            })
            .filter(|_| d.file == exp.path)
            .unwrap_or(&d.key.path);
        out.push(
            Diagnostic::new(
                Severity::Warning,
                "duplicate-key",
                format!(
                    "`{}` is written twice in one mapping, at {} and at {}; the later one wins (PyYAML keeps the last), so {} has no effect{}",
                    d.key.path,
                    at(ignored),
                    at(wins),
                    at(ignored),
                    if d.key.dropped > 1 {
                        format!(" — the {} settings under it are dropped", d.key.dropped)
                    } else {
                        String::new()
                    }
                ),
            )
            .at(Some(Location {
                file: d.file.clone(),
                line: ignored.line,
                column: ignored.col,
            }))
            .flag(flag)
            .hint(format!(
                "delete one of the two; Primus uses the value at {}",
                at(wins)
            )),
        );
    }
}

/// Drops repeated findings (the first kept) and orders them by severity, then place. Each
/// finding is hashed once and compared only with those of its hash: cloning every finding into
/// a set and the file paths into each comparison cost a third of a lint of 150,000 findings.
fn dedup_and_sort(out: &mut Vec<Diagnostic>) {
    use std::hash::BuildHasher;
    let state = std::collections::hash_map::RandomState::new();
    let mut by_hash: std::collections::HashMap<u64, Vec<usize>> = Default::default();
    let mut kept: Vec<Diagnostic> = Vec::with_capacity(out.len());
    for d in out.drain(..) {
        let same = by_hash.entry(state.hash_one(&d)).or_default();
        if same.iter().any(|&i| kept[i] == d) {
            continue;
        }
        same.push(kept.len());
        kept.push(d);
    }
    fn place(d: &Diagnostic) -> Option<(&std::path::Path, u32, u32)> {
        d.location
            .as_ref()
            .map(|l| (l.file.as_path(), l.line, l.column))
    }
    kept.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| place(a).cmp(&place(b)))
    });
    *out = kept;
}

/// What a rule sees: one module, the launch environment (with the experiment's `env:` section
/// applied where the Python runtime reads it), the world size when known, the catalog.
pub(crate) struct Ctx<'a> {
    pub exp: &'a Experiment,
    pub module: &'a Module,
    pub env: Env,
    /// The launch environment before the experiment's `env:` section (what shell hooks see).
    pub launch_env: &'a Env,
    /// The world size the job runs on, with its source (None: unknown).
    pub world: Option<World>,
    pub catalog: &'a Catalog,
    pub backend: Option<Backend>,
    /// The module's Megatron parameters, typed (parallelism, shape, MoE layers, recompute).
    pub params: crate::megatron::Params,
    /// The module's TorchTitan view (degrees, batch sizes), when it is a TorchTitan module.
    pub titan: Option<crate::megatron::titan::Titan>,
}

impl<'a> Ctx<'a> {
    fn new(
        exp: &'a Experiment,
        module: &'a Module,
        env: &'a Env,
        world: Option<World>,
        catalog: &'a Catalog,
    ) -> Self {
        let mut runtime_env = env.clone();
        for (k, leaf) in exp.env_section() {
            runtime_env.set(&k, &leaf.value.to_string());
        }
        let values = module.values();
        Ctx {
            exp,
            module,
            env: runtime_env,
            launch_env: env,
            world,
            catalog,
            backend: Backend::from_framework(&module.framework),
            params: crate::megatron::Params::from_values(&values),
            titan: crate::megatron::titan::Titan::from_values(&values),
        }
    }

    pub fn leaf(&self, key: &str) -> Option<&'a Leaf> {
        self.module.get(key)
    }

    pub fn value(&self, key: &str) -> Value {
        self.leaf(key)
            .map(|l| l.value.clone())
            .unwrap_or(Value::Null)
    }

    /// Python truthiness of a flag (missing = false).
    pub fn on(&self, key: &str) -> bool {
        self.leaf(key).is_some_and(|l| l.value.truthy())
    }

    pub fn int(&self, key: &str) -> Option<i64> {
        match self.leaf(key)?.value {
            Value::Int(i) => Some(i),
            Value::Float(f) if f.fract() == 0.0 => Some(f as i64),
            _ => None,
        }
    }

    /// An int with a default for a missing/null key (parallel sizes default to 1).
    pub fn int_or(&self, key: &str, default: i64) -> i64 {
        self.int(key).unwrap_or(default)
    }

    pub fn str(&self, key: &str) -> Option<&'a str> {
        self.leaf(key)?.value.as_str()
    }

    /// Where the offending value is written; for a missing key, where it should go: the
    /// module's `overrides:` in the experiment file.
    pub fn at(&self, key: &str) -> Option<Location> {
        // A value a Primus patch set is pointed at where the files wrote it.
        match self.module.written(key) {
            Some(l) if l.origin.layer != Layer::CommandLine => Some(loc(&l.origin)),
            _ => self.overrides_location(),
        }
    }

    pub fn overrides_location(&self) -> Option<Location> {
        let path = format!("modules.{}.overrides", self.module.name);
        let origin = match self.exp.file.get(&path) {
            Some(Item::Map(t)) => Some(&t.origin),
            Some(Item::Leaf(l)) => Some(&l.origin),
            None => self
                .exp
                .file
                .get(&format!("modules.{}", self.module.name))
                .map(Item::origin),
        };
        origin.map(loc)
    }

    /// A diagnostic about `key`, located at its value.
    pub fn diag(
        &self,
        severity: Severity,
        code: &'static str,
        key: &str,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::new(severity, code, message)
            .at(self.at(key))
            .flag(key)
    }

    /// `key: value (file:line)` for messages.
    pub fn show(&self, key: &str) -> String {
        match self.leaf(key) {
            Some(l) => format!("`{key}: {}` ({})", l.value, l.origin.describe()),
            None => format!("`{key}` (not set)"),
        }
    }

    pub fn is_megatron(&self) -> bool {
        self.backend == Some(Backend::Megatron)
    }
}

pub(crate) fn loc(o: &Origin) -> Location {
    Location {
        file: o.file.to_path_buf(),
        line: o.line,
        column: o.column,
    }
}

#[cfg(test)]
mod tests;
