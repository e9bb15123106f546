//! Primus' `build_args` patches that change Megatron's arguments from the config alone
//! (primus/backends/megatron/patches/args/ at fd1eeabb). PrimusRuntime runs them on the
//! arguments MegatronArgBuilder built, before Megatron sees them, so a resolved Megatron module
//! holds their result: the value Primus runs, its source the patch (file and line in Primus'
//! tree), the configured value kept in the leaf's history and in [`Patched::was`].
//!
//! Patches that build values from the run's surroundings (the output folder, W&B names with
//! W&B on, the logging level) or rewrite a value's form (data paths split into lists,
//! `moe_layer_freq` evaluated) are not modelled: the configured value is the setting.

use super::megatron_defaults;
use super::resolve::Module;
use super::tree::{Layer, Leaf, Origin, Tree};
use crate::domain::value::Value;
use std::path::Path;
use std::sync::Arc;

/// One of Primus' patches, as its registration names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patch {
    pub id: &'static str,
    /// The file in Primus' tree.
    pub file: &'static str,
}

pub const SEQUENCE_PARALLEL_TP1: Patch = Patch {
    id: "megatron.args.sequence_parallel_tp1",
    file: "primus/backends/megatron/patches/args/sequence_parallel_tp1_patches.py",
};
pub const MOCK_DATA: Patch = Patch {
    id: "megatron.args.mock_data",
    file: "primus/backends/megatron/patches/args/mock_data_patches.py",
};
pub const WANDB_CONFIG: Patch = Patch {
    id: "megatron.args.wandb_config",
    file: "primus/backends/megatron/patches/args/wandb_config_patches.py",
};
pub const ITERATIONS_TO_SKIP: Patch = Patch {
    id: "megatron.args.iterations_to_skip_default",
    file: "primus/backends/megatron/patches/args/iterations_to_skip_default_patches.py",
};

/// A value a patch changed.
#[derive(Debug, Clone, PartialEq)]
pub struct Patched {
    pub key: String,
    pub patch: Patch,
    /// Why it applies (`tensor_model_parallel_size is 1`).
    pub because: &'static str,
    /// The leaf as configured (None: no file set it; Megatron's default was replaced).
    pub was: Option<Leaf>,
}

/// The value Megatron's arguments hold before the patches: the param, else Megatron's default.
fn arg(m: &Module, key: &str) -> Option<Value> {
    m.value(key)
        .or_else(|| megatron_defaults::get(key))
        .cloned()
}

/// Python's `v == 1` (so `True` and `1.0` count).
fn equals_one(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Int(1) | Value::Bool(true)))
        || matches!(v, Some(Value::Float(f)) if *f == 1.0)
}

/// What the modelled patches set, in Primus' order: (key, value, patch, line, why).
fn changes(m: &Module) -> Vec<(&'static str, Value, Patch, u32, &'static str)> {
    let mut out = Vec::new();
    // `if tp_size == 1: args.sequence_parallel = False`
    if equals_one(arg(m, "tensor_model_parallel_size").as_ref()) {
        out.push((
            "sequence_parallel",
            Value::Bool(false),
            SEQUENCE_PARALLEL_TP1,
            36,
            "tensor_model_parallel_size is 1",
        ));
    }
    // `if mock_data:` (the Primus param) the data paths go, the tokenizer is NullTokenizer and
    // an unset vocab_size becomes 131072.
    if m.value("mock_data").is_some_and(Value::truthy) {
        let why = "mock_data is on";
        for (key, line) in [
            ("data_path", 34),
            ("train_data_path", 35),
            ("valid_data_path", 36),
            ("test_data_path", 37),
        ] {
            out.push((key, Value::Null, MOCK_DATA, line, why));
        }
        out.push((
            "tokenizer_type",
            Value::Str("NullTokenizer".into()),
            MOCK_DATA,
            38,
            why,
        ));
        if arg(m, "vocab_size").is_none_or(|v| v.is_null()) {
            out.push(("vocab_size", Value::Int(131_072), MOCK_DATA, 42, why));
        }
    }
    // With `disable_wandb` (the Primus param) a set wandb_project is cleared; without it the
    // patch fills the W&B names and folder from the run's output folder (not modelled).
    if m.value("disable_wandb").is_some_and(Value::truthy)
        && arg(m, "wandb_project").is_some_and(|v| !v.is_null())
    {
        out.push((
            "wandb_project",
            Value::Null,
            WANDB_CONFIG,
            64,
            "disable_wandb is on",
        ));
    }
    // `if getattr(args, "iterations_to_skip", None) is None: args.iterations_to_skip = []`
    if arg(m, "iterations_to_skip").is_none_or(|v| v.is_null()) {
        out.push((
            "iterations_to_skip",
            Value::List(Vec::new()),
            ITERATIONS_TO_SKIP,
            29,
            "it is None",
        ));
    }
    out
}

/// Apply the modelled patches to a Megatron module: a changed value becomes a leaf of layer
/// [`Layer::Patch`] (the configured one goes to its history) and is listed in `patched`.
pub fn apply(m: &mut Module) {
    if !m.is_megatron() {
        return;
    }
    for (key, value, patch, line, because) in changes(m) {
        let before = arg(m, key);
        // Python's `==` after the patch, and the type too (`0` set to `False` is a change).
        if before.as_ref() == Some(&value) {
            continue;
        }
        let origin = Origin {
            file: Arc::from(Path::new(patch.file)),
            line,
            column: 0,
            via: Vec::new(),
            layer: Layer::Patch,
        };
        let was = m.get(key).cloned();
        m.params.merge(Tree::singleton(key, value, origin));
        m.patched.push(Patched {
            key: key.to_string(),
            patch,
            because,
            was,
        });
    }
}

impl Module {
    /// The leaf as the files (and command line) set it, before Primus' patches: what type
    /// checks and edits are about.
    pub fn written(&self, key: &str) -> Option<&Leaf> {
        match self.patched.iter().find(|p| p.key == key) {
            Some(p) => p.was.as_ref(),
            None => self.get(key),
        }
    }

    /// The value of `key` (a mapping too) as the files set it, before Primus' patches.
    pub fn written_value(&self, key: &str) -> Option<Value> {
        match self.patch_of(key) {
            Some(p) => p.was.as_ref().map(|l| l.value.clone()),
            None => self.params.get(key).map(super::tree::Item::value),
        }
    }

    /// Every parameter as the files set it, before Primus' patches.
    pub fn written_values(&self) -> std::collections::BTreeMap<String, Value> {
        let mut values = self.values();
        for p in &self.patched {
            match &p.was {
                Some(l) => values.insert(p.key.clone(), l.value.clone()),
                None => values.remove(&p.key),
            };
        }
        values
    }

    /// The patch that set `key`, if one did.
    pub fn patch_of(&self, key: &str) -> Option<&Patched> {
        self.patched.iter().find(|p| p.key == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::catalog::Catalog;
    use crate::config::{Env, Experiment, LoadOptions};

    /// A module preset, a model preset and an experiment whose overrides are `overrides`.
    fn load(overrides: &str, env: &[(&str, &str)]) -> (tempfile::TempDir, Experiment) {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
            p
        };
        write(
            "primus/configs/modules/megatron/pre_trainer.yaml",
            "mock_data: true\ndisable_wandb: true\nwandb_project: proj\niterations_to_skip: null\n\
             tensor_model_parallel_size: ${PRIMUS_TP:1}\n",
        );
        write(
            "primus/configs/models/megatron/m.yaml",
            "sequence_parallel: true\ntokenizer_type: HuggingFaceTokenizer\nvocab_size: null\n",
        );
        let exp = write(
            "e.yaml",
            &format!(
                "work_group: g\nuser_name: u\nexp_name: e\nworkspace: w\nmodules:\n  pre_trainer:\n\
                 \x20   framework: megatron\n    config: pre_trainer.yaml\n    model: m.yaml\n\
                 \x20   overrides:\n      train_iters: 10\n{overrides}"
            ),
        );
        let mut e = Env::empty();
        for (k, v) in env {
            e = e.with(k, v);
        }
        let opts = LoadOptions {
            env: e,
            ..Default::default()
        };
        let exp = Experiment::load(&exp, &opts).unwrap();
        (dir, exp)
    }

    #[test]
    fn the_patches_set_what_primus_runs_and_keep_what_was_written() {
        let (_d, exp) = load("", &[]);
        let m = exp.main_module();
        let v = |k: &str| m.value(k).cloned();
        // TP 1: sequence parallelism forced off; the file's `true` stays in the history.
        assert_eq!(v("sequence_parallel"), Some(Value::Bool(false)));
        let sp = m.get("sequence_parallel").unwrap();
        assert_eq!(sp.origin.layer, Layer::Patch);
        assert_eq!(&*sp.origin.file, Path::new(SEQUENCE_PARALLEL_TP1.file));
        assert_eq!(sp.shadowed.last().unwrap().value, Value::Bool(true));
        assert_eq!(
            m.written("sequence_parallel").unwrap().value,
            Value::Bool(true)
        );
        assert_eq!(
            m.patch_of("sequence_parallel").unwrap().patch,
            SEQUENCE_PARALLEL_TP1
        );
        // mock_data: NullTokenizer, an unset vocab_size becomes 131072.
        assert_eq!(
            v("tokenizer_type"),
            Some(Value::Str("NullTokenizer".into()))
        );
        assert_eq!(v("vocab_size"), Some(Value::Int(131_072)));
        // iterations_to_skip: None → []; disable_wandb clears wandb_project.
        assert_eq!(v("iterations_to_skip"), Some(Value::List(Vec::new())));
        assert_eq!(v("wandb_project"), Some(Value::Null));
        // What lint and the typed view read is what Primus runs; the files' values stay apart.
        let values = m.values();
        assert_eq!(values["sequence_parallel"], Value::Bool(false));
        assert_eq!(m.written_values()["sequence_parallel"], Value::Bool(true));
        assert_eq!(
            m.written_values()["tokenizer_type"],
            Value::Str("HuggingFaceTokenizer".into())
        );
    }

    #[test]
    fn the_patches_apply_only_under_their_conditions() {
        let (_d, exp) = load(
            "      mock_data: false\n      vocab_size: 32000\n      disable_wandb: false\n\
             \x20     iterations_to_skip: [3]\n",
            &[("PRIMUS_TP", "2")],
        );
        let m = exp.main_module();
        assert!(m.patched.is_empty(), "{:?}", m.patched);
        assert_eq!(m.value("sequence_parallel"), Some(&Value::Bool(true)));
        assert_eq!(
            m.value("tokenizer_type"),
            Some(&Value::Str("HuggingFaceTokenizer".into()))
        );
        // mock_data keeps a vocab_size that is set.
        let (_d, exp) = load("      vocab_size: 32000\n", &[("PRIMUS_TP", "2")]);
        assert_eq!(
            exp.main_module().value("vocab_size"),
            Some(&Value::Int(32_000))
        );
    }

    #[test]
    fn lint_checks_what_the_file_wrote_where_it_wrote_it() {
        // `sequence_parallel: 1` at TP 1: Primus runs False, but the file's int is still
        // reported, at the experiment's line, not at the patch.
        let (_d, exp) = load("      sequence_parallel: 1\n", &[]);
        assert_eq!(
            exp.main_module().value("sequence_parallel"),
            Some(&Value::Bool(false))
        );
        let diags = crate::config::lint::lint(&exp, &Env::empty(), None, Catalog::builtin());
        let d = diags
            .iter()
            .find(|d| d.code == "bool-written-as-int")
            .expect("the int is reported");
        let at = d.location.as_ref().unwrap();
        assert!(at.file.ends_with("e.yaml"), "{at:?}");
        assert_eq!(at.line, 12);
    }
}
