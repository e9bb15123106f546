//! Resolution of the real Primus tree copied under `../shared/fixtures/primus` (8 experiments and
//! their presets, byte-identical copies of AMD-AGI/Primus at fd1eeab).
//!
//! Every expected line and column below was counted by hand in the fixture files (1-based; the
//! column is that of the value's first character, the opening quote for quoted scalars).
//! Each test skips (with a message on stderr) when the fixture folder is absent.

use primus_tune::config::catalog::Catalog;
use primus_tune::config::diag::Severity;
use primus_tune::config::doc::YamlDoc;
use primus_tune::config::lint::lint;
use primus_tune::config::overrides::parse_assignment;
use primus_tune::config::tree::Shadow;
use primus_tune::config::yaml::{self, Node, NodeKind, Style};
use primus_tune::config::{Env, Experiment, Layer, Leaf, LoadOptions, Module, Origin, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Fixture access
// ---------------------------------------------------------------------------------------------

/// The fixture root (canonical), or `None` after explaining on stderr why the test is skipped.
fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/primus");
    if !p.join("primus/configs").is_dir() {
        eprintln!(
            "skipping: the shared Primus fixture tree {} is absent",
            p.display()
        );
        return None;
    }
    Some(p.canonicalize().expect("canonical fixture root"))
}

macro_rules! root_or_skip {
    () => {
        match fixtures() {
            Some(root) => root,
            None => return,
        }
    };
}

fn yaml_files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files_under(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// Every experiment YAML under `examples/{megatron,torchtitan}/configs/**`.
fn experiments(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for fw in ["megatron", "torchtitan"] {
        yaml_files_under(&root.join("examples").join(fw).join("configs"), &mut out);
    }
    out
}

fn empty_env() -> LoadOptions {
    LoadOptions {
        env: Env::empty(),
        ..Default::default()
    }
}

fn load(path: &Path, opts: &LoadOptions) -> Experiment {
    Experiment::load(path, opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn canon(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

fn pre_trainer(exp: &Experiment) -> &Module {
    exp.module("pre_trainer").expect("module pre_trainer")
}

/// The leaf as the files set it (before Primus' `build_args` patches, which these provenance
/// checks are not about).
fn leaf<'m>(m: &'m Module, key: &str) -> &'m Leaf {
    m.written(key)
        .unwrap_or_else(|| panic!("resolved module has no leaf `{key}`"))
}

/// Where a definition is expected to be.
struct At {
    file: PathBuf,
    line: u32,
    column: u32,
    via: Vec<PathBuf>,
    layer: Layer,
}

fn check_origin(what: &str, o: &Origin, at: &At) {
    assert_eq!(
        canon(&o.file),
        canon(&at.file),
        "{what}: file (origin {o:?})"
    );
    assert_eq!(
        (o.line, o.column),
        (at.line, at.column),
        "{what}: line/column in {}",
        at.file.display()
    );
    let via: Vec<PathBuf> = o.via.iter().map(|p| canon(p)).collect();
    let want: Vec<PathBuf> = at.via.iter().map(|p| canon(p)).collect();
    assert_eq!(via, want, "{what}: via chain");
    assert_eq!(o.layer, at.layer, "{what}: layer");
}

fn check_shadow(what: &str, s: &Shadow, value: Value, at: &At) {
    assert_eq!(s.value, value, "{what}: shadowed value");
    check_origin(what, &s.origin, at);
}

/// Paths of the fixture tree used by the spot checks.
struct Tree {
    root: PathBuf,
}

impl Tree {
    fn megatron_module(&self, name: &str) -> PathBuf {
        self.root.join("primus/configs/modules/megatron").join(name)
    }
    fn megatron_model(&self, name: &str) -> PathBuf {
        self.root.join("primus/configs/models/megatron").join(name)
    }
    fn titan_module(&self, name: &str) -> PathBuf {
        self.root
            .join("primus/configs/modules/torchtitan")
            .join(name)
    }
    fn titan_model(&self, name: &str) -> PathBuf {
        self.root
            .join("primus/configs/models/torchtitan")
            .join(name)
    }
    fn example(&self, rel: &str) -> PathBuf {
        self.root.join("examples").join(rel)
    }
}

const V2_LITE: &str = "megatron/configs/MI300X/deepseek_v2_lite-BF16-pretrain.yaml";
const V3_MI355: &str = "megatron/configs/MI355X/deepseek_v3-BF16-pretrain.yaml";
const TITAN_V3: &str = "torchtitan/configs/MI300X/deepseek_v3_16b-FP8-pretrain.yaml";

// ---------------------------------------------------------------------------------------------
// Every experiment resolves and lints clean
// ---------------------------------------------------------------------------------------------

/// AMD's Megatron examples on the world they were written for (one 8-GPU node; DeepSeek-V3's
/// PP 16 × EP 8 layout on 16 such nodes) pass Megatron's world-size rules; on one node the
/// DeepSeek-V3 layout does not fit, and lint says so with the world's source.
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_megatron_examples_fit_the_world_they_were_written_for() {
    use primus_tune::megatron::World;
    let root = root_or_skip!();
    let world_codes = [
        "world-model-parallel",
        "world-expert-parallel",
        "global-batch-divisibility",
    ];
    let mut checked = 0;
    for path in experiments(&root) {
        if !path.starts_with(root.join("examples/megatron")) {
            continue;
        }
        let exp = load(&path, &empty_env());
        let name = path.display();
        let v3 = path.ends_with("MI355X/deepseek_v3-BF16-pretrain.yaml");
        let env = if v3 {
            Env::empty().with("GPUS_PER_NODE", "8").with("NNODES", "16")
        } else {
            Env::empty().with("GPUS_PER_NODE", "8")
        };
        let world = World::from_env(|k| env.get(k));
        let errors: Vec<_> = lint(&exp, &Env::empty(), world.as_ref(), Catalog::builtin())
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .collect();
        assert!(errors.is_empty(), "{name} on {world:?}: {errors:#?}");
        if v3 {
            let one_node = World::flag(8);
            let codes: Vec<&str> = lint(&exp, &Env::empty(), one_node.as_ref(), Catalog::builtin())
                .into_iter()
                .map(|d| d.code)
                .filter(|c| world_codes.contains(c))
                .collect();
            assert_eq!(
                codes,
                ["world-model-parallel", "world-expert-parallel"],
                "{name}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 6, "the Megatron examples were found ({checked})");
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_every_experiment_resolves_without_lint_errors() {
    let root = root_or_skip!();
    let exps = experiments(&root);
    assert!(
        exps.len() >= 8,
        "expected the 8 fixture experiments, found {exps:?}"
    );
    let modules_dir = root.join("primus/configs/modules");
    let models_dir = root.join("primus/configs/models");
    for path in &exps {
        let exp = load(path, &empty_env());
        let name = path.display();
        assert_eq!(canon(&exp.primus_root), root, "{name}: primus root");
        assert_eq!(
            exp.files.first().map(|p| canon(p)),
            Some(canon(path)),
            "{name}: the experiment is read first"
        );
        let errors: Vec<_> = lint(&exp, &Env::empty(), None, Catalog::builtin())
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .collect();
        assert!(errors.is_empty(), "{name}: lint errors {errors:#?}");

        for key in ["work_group", "user_name", "exp_name", "workspace"] {
            assert!(
                matches!(exp.meta(key), Some(Value::Str(s)) if !s.is_empty()),
                "{name}: meta `{key}` = {:?}",
                exp.meta(key)
            );
        }
        assert_eq!(exp.meta("work_group"), Some(&Value::Str("amd".into())));
        assert_eq!(exp.meta("user_name"), Some(&Value::Str("root".into())));

        let m = exp.main_module();
        assert_eq!(m.name, "pre_trainer", "{name}");
        let fw = if path.starts_with(root.join("examples/megatron")) {
            "megatron"
        } else {
            "torchtitan"
        };
        assert_eq!(m.framework, fw, "{name}: framework");
        assert_eq!(
            canon(&m.preset_file),
            canon(
                &root
                    .join("primus/configs/modules")
                    .join(fw)
                    .join("pre_trainer.yaml")
            ),
            "{name}: module preset"
        );
        let model_file = m.model_file.as_ref().expect("a model preset");
        assert!(
            canon(model_file).starts_with(models_dir.join(fw)),
            "{name}: model preset {}",
            model_file.display()
        );
        // At this Primus commit the module and model chains of these experiments are disjoint.
        assert!(m.dropped.is_empty(), "{name}: dropped {:?}", m.dropped);

        // Every definition (and every shadowed one) names a file that was read, a real line,
        // and the layer matching where the file lies.
        let read: Vec<PathBuf> = exp.files.iter().map(|p| canon(p)).collect();
        let texts: HashMap<PathBuf, String> = read
            .iter()
            .map(|p| (p.clone(), std::fs::read_to_string(p).expect("readable")))
            .collect();
        let leaves = m.params.leaves();
        assert!(leaves.len() > 50, "{name}: only {} leaves", leaves.len());
        // A value a Primus patch set comes from Primus' code, not from a file read.
        let leaves: Vec<(String, &Leaf)> = leaves
            .into_iter()
            .filter_map(|(k, l)| match l.origin.layer {
                Layer::Patch => m.written(&k).map(|w| (k, w)),
                _ => Some((k, l)),
            })
            .collect();
        for (key, l) in &leaves {
            let mut origins: Vec<&Origin> = vec![&l.origin];
            origins.extend(l.shadowed.iter().map(|s| &s.origin));
            for o in origins {
                let f = canon(&o.file);
                assert!(read.contains(&f), "{name}: `{key}` from unread {f:?}");
                let lines = texts[&f].lines().count() as u32;
                assert!(
                    o.line >= 1 && o.line <= lines && o.column >= 1,
                    "{name}: `{key}` at {}:{}:{} ({lines} lines)",
                    f.display(),
                    o.line,
                    o.column
                );
                let want = if f == canon(path) {
                    Layer::Experiment
                } else if f.starts_with(&modules_dir) {
                    Layer::ModulePreset
                } else if f.starts_with(&models_dir) {
                    Layer::ModelPreset
                } else {
                    panic!("{name}: `{key}` from {f:?}")
                };
                assert_eq!(o.layer, want, "{name}: layer of `{key}` from {f:?}");
                for v in &o.via {
                    assert!(read.contains(&canon(v)), "{name}: `{key}` via unread {v:?}");
                }
            }
            // The newest definition wins: shadowed entries never come from a higher layer.
            for s in &l.shadowed {
                assert!(
                    s.origin.layer <= l.origin.layer,
                    "{name}: `{key}` shadows a higher layer"
                );
            }
        }
        // Every experiment override is what the module ends up with (no CLI overrides here).
        // Primus' overrides merge turns the string "null" into None (these experiments write
        // it only where the presets hold the section).
        for (key, ov) in overrides_of(&exp) {
            let got = leaf(m, &key);
            let want = match ov.value {
                Value::Str(s) if s == "null" => Value::Null,
                v => v,
            };
            assert_eq!(got.value, want, "{name}: override `{key}`");
            assert_eq!(got.origin, ov.origin, "{name}: override `{key}` origin");
        }
    }
}

/// The experiment's `modules.pre_trainer.overrides` leaves with their dotted keys.
fn overrides_of(exp: &Experiment) -> Vec<(String, Leaf)> {
    match exp.file.get("modules.pre_trainer.overrides") {
        Some(primus_tune::config::Item::Map(t)) => t
            .leaves()
            .into_iter()
            .map(|(k, l)| (k, l.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Spot checks: MI300X deepseek_v2_lite (Megatron)
// ---------------------------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_deepseek_v2_lite_values_and_provenance() {
    let root = root_or_skip!();
    let t = Tree { root };
    let exp_path = t.example(V2_LITE);
    let exp = load(&exp_path, &empty_env());
    let m = pre_trainer(&exp);
    assert_eq!(
        canon(m.model_file.as_ref().expect("model")),
        canon(&t.megatron_model("deepseek_v2_lite.yaml"))
    );
    let pre = t.megatron_module("pre_trainer.yaml");
    let base = t.megatron_module("trainer_base.yaml");
    let lite = t.megatron_model("deepseek_v2_lite.yaml");
    let v2base = t.megatron_model("deepseek_v2_base.yaml");
    let llama = t.megatron_model("llama_base.yaml");
    let lm = t.megatron_model("language_model.yaml");

    // `turbo_deepep_num_cu: 64` (experiment line 83) over primus_turbo.yaml:59 (32), which
    // came in through pre_trainer.yaml -> trainer_base.yaml.
    let l = leaf(m, "turbo_deepep_num_cu");
    assert_eq!(l.value, Value::Int(64));
    assert_eq!(l.template, None);
    let at_exp = |line, column| At {
        file: exp_path.clone(),
        line,
        column,
        via: vec![],
        layer: Layer::Experiment,
    };
    check_origin("turbo_deepep_num_cu", &l.origin, &at_exp(83, 28));
    assert_eq!(l.shadowed.len(), 1, "{:?}", l.shadowed);
    check_shadow(
        "turbo_deepep_num_cu shadow",
        &l.shadowed[0],
        Value::Int(32),
        &At {
            file: t.megatron_module("primus_turbo.yaml"),
            line: 59,
            column: 22,
            via: vec![pre.clone(), base.clone()],
            layer: Layer::ModulePreset,
        },
    );
    assert_eq!(
        l.shadowed[0].origin.describe(),
        "primus_turbo.yaml:59 via pre_trainer.yaml → trainer_base.yaml"
    );

    // `moe_shared_expert_overlap: false` (line 79) over the model chain: language_model.yaml:108
    // (false) then deepseek_v2_base.yaml:47 (true).
    let l = leaf(m, "moe_shared_expert_overlap");
    assert_eq!(l.value, Value::Bool(false));
    check_origin("moe_shared_expert_overlap", &l.origin, &at_exp(79, 34));
    assert_eq!(l.shadowed.len(), 2, "{:?}", l.shadowed);
    check_shadow(
        "moe_shared_expert_overlap shadow 0",
        &l.shadowed[0],
        Value::Bool(false),
        &At {
            file: lm.clone(),
            line: 108,
            column: 28,
            via: vec![lite.clone(), v2base.clone(), llama.clone()],
            layer: Layer::ModelPreset,
        },
    );
    check_shadow(
        "moe_shared_expert_overlap shadow 1",
        &l.shadowed[1],
        Value::Bool(true),
        &At {
            file: v2base.clone(),
            line: 47,
            column: 28,
            via: vec![lite.clone()],
            layer: Layer::ModelPreset,
        },
    );

    // `seq_length: ${PRIMUS_SEQ_LENGTH:4096}` (line 27) over trainer_base.yaml:287 (4096) and
    // pre_trainer.yaml:8 (1024).
    let l = leaf(m, "seq_length");
    assert_eq!(l.value, Value::Int(4096));
    assert_eq!(l.template.as_deref(), Some("${PRIMUS_SEQ_LENGTH:4096}"));
    check_origin("seq_length", &l.origin, &at_exp(27, 19));
    assert_eq!(l.shadowed.len(), 2, "{:?}", l.shadowed);
    check_shadow(
        "seq_length shadow 0",
        &l.shadowed[0],
        Value::Int(4096),
        &At {
            file: base.clone(),
            line: 287,
            column: 13,
            via: vec![pre.clone()],
            layer: Layer::ModulePreset,
        },
    );
    check_shadow(
        "seq_length shadow 1",
        &l.shadowed[1],
        Value::Int(1024),
        &At {
            file: pre.clone(),
            line: 8,
            column: 13,
            via: vec![],
            layer: Layer::ModulePreset,
        },
    );

    // `${PRIMUS_TOKENIZED_DATA_PATH:null}` substitutes to the *string* "null" (line 51), which
    // Primus' overrides merge turns into None (`set_value_by_key`), over trainer_base.yaml:265
    // (`train_data_path: null`, None).
    let l = leaf(m, "train_data_path");
    assert_eq!(l.value, Value::Null);
    assert_eq!(
        l.template.as_deref(),
        Some("${PRIMUS_TOKENIZED_DATA_PATH:null}")
    );
    check_origin("train_data_path", &l.origin, &at_exp(51, 24));
    assert_eq!(l.shadowed.len(), 1, "{:?}", l.shadowed);
    check_shadow(
        "train_data_path shadow",
        &l.shadowed[0],
        Value::Null,
        &At {
            file: base.clone(),
            line: 265,
            column: 18,
            via: vec![pre.clone()],
            layer: Layer::ModulePreset,
        },
    );
    // A plain `null` without `${}` stays None (line 52).
    let l = leaf(m, "valid_data_path");
    assert_eq!(l.value, Value::Null);
    assert_eq!(l.template, None);
    check_origin("valid_data_path", &l.origin, &at_exp(52, 24));

    // `use_distributed_optimizer: true` from pre_trainer.yaml:32 over trainer_base.yaml:183.
    let l = leaf(m, "use_distributed_optimizer");
    assert_eq!(l.value, Value::Bool(true));
    check_origin(
        "use_distributed_optimizer",
        &l.origin,
        &At {
            file: pre.clone(),
            line: 32,
            column: 28,
            via: vec![],
            layer: Layer::ModulePreset,
        },
    );
    assert_eq!(l.shadowed.len(), 1, "{:?}", l.shadowed);
    check_shadow(
        "use_distributed_optimizer shadow",
        &l.shadowed[0],
        Value::Bool(false),
        &At {
            file: base.clone(),
            line: 183,
            column: 28,
            via: vec![pre.clone()],
            layer: Layer::ModulePreset,
        },
    );

    // Megatron model presets have no `model` key: Primus sets it to the file name the
    // experiment asked for (line 12, `${PRIMUS_MODEL:deepseek_v2_lite}.yaml`).
    let l = leaf(m, "model");
    assert_eq!(l.value, Value::Str("deepseek_v2_lite.yaml".into()));
    assert_eq!(
        l.template.as_deref(),
        Some("${PRIMUS_MODEL:deepseek_v2_lite}.yaml")
    );
    check_origin("model", &l.origin, &at_exp(12, 12));
    assert!(l.shadowed.is_empty());

    // Model chain values.
    let l = leaf(m, "num_layers");
    assert_eq!(l.value, Value::Int(27));
    check_origin(
        "num_layers",
        &l.origin,
        &At {
            file: lite.clone(),
            line: 11,
            column: 13,
            via: vec![],
            layer: Layer::ModelPreset,
        },
    );
    assert_eq!(l.shadowed.len(), 1, "{:?}", l.shadowed);
    check_shadow(
        "num_layers shadow",
        &l.shadowed[0],
        Value::Int(24),
        &At {
            file: lm.clone(),
            line: 12,
            column: 13,
            via: vec![lite.clone(), v2base.clone(), llama.clone()],
            layer: Layer::ModelPreset,
        },
    );
    let l = leaf(m, "hidden_size");
    assert_eq!(l.value, Value::Int(2048));
    check_origin(
        "hidden_size",
        &l.origin,
        &At {
            file: lite.clone(),
            line: 12,
            column: 14,
            via: vec![],
            layer: Layer::ModelPreset,
        },
    );
    check_shadow(
        "hidden_size shadow",
        &l.shadowed[0],
        Value::Int(1024),
        &At {
            file: lm.clone(),
            line: 15,
            column: 14,
            via: vec![lite.clone(), v2base.clone(), llama.clone()],
            layer: Layer::ModelPreset,
        },
    );
    // `normalization: RMSNorm` (llama_base.yaml:19) over `"LayerNorm"` (language_model.yaml:90).
    let l = leaf(m, "normalization");
    assert_eq!(l.value, Value::Str("RMSNorm".into()));
    check_origin(
        "normalization",
        &l.origin,
        &At {
            file: llama.clone(),
            line: 19,
            column: 16,
            via: vec![lite.clone(), v2base.clone()],
            layer: Layer::ModelPreset,
        },
    );
    assert_eq!(
        l.origin.describe(),
        "llama_base.yaml:19 via deepseek_v2_lite.yaml → deepseek_v2_base.yaml"
    );
    assert_eq!(l.shadowed.len(), 1, "{:?}", l.shadowed);
    check_shadow(
        "normalization shadow",
        &l.shadowed[0],
        Value::Str("LayerNorm".into()),
        &At {
            file: lm.clone(),
            line: 90,
            column: 16,
            via: vec![lite.clone(), v2base.clone(), llama.clone()],
            layer: Layer::ModelPreset,
        },
    );
    // A key only language_model.yaml defines: `model_type: gpt # gpt or mamba` (line 11).
    let l = leaf(m, "model_type");
    assert_eq!(l.value, Value::Str("gpt".into()));
    check_origin(
        "model_type",
        &l.origin,
        &At {
            file: lm.clone(),
            line: 11,
            column: 13,
            via: vec![lite.clone(), v2base.clone(), llama.clone()],
            layer: Layer::ModelPreset,
        },
    );
    assert!(l.shadowed.is_empty());
    // Quoted string in the model preset: `moe_layer_freq: "([0]*1+[1]*26)"` (line 23) over
    // the int 1 of deepseek_v2_base.yaml:14 and language_model.yaml:106.
    let l = leaf(m, "moe_layer_freq");
    assert_eq!(l.value, Value::Str("([0]*1+[1]*26)".into()));
    check_origin(
        "moe_layer_freq",
        &l.origin,
        &At {
            file: lite.clone(),
            line: 23,
            column: 17,
            via: vec![],
            layer: Layer::ModelPreset,
        },
    );
    assert_eq!(
        l.shadowed.iter().map(|s| &s.value).collect::<Vec<_>>(),
        vec![&Value::Int(1), &Value::Int(1)]
    );

    // `expert_model_parallel_size: ${PRIMUS_EP:8}` (line 44) over three model-chain values.
    let l = leaf(m, "expert_model_parallel_size");
    assert_eq!(l.value, Value::Int(8));
    check_origin("expert_model_parallel_size", &l.origin, &at_exp(44, 35));
    let shadows: Vec<(Value, PathBuf, u32)> = l
        .shadowed
        .iter()
        .map(|s| (s.value.clone(), canon(&s.origin.file), s.origin.line))
        .collect();
    assert_eq!(
        shadows,
        vec![
            (Value::Int(1), canon(&lm), 167),
            (Value::Int(1), canon(&v2base), 42),
            (Value::Int(8), canon(&lite), 30),
        ]
    );

    // Plain experiment values (lines 25, 29, 39) and one from module_base.yaml, reached through
    // trainer_base.yaml's `../module_base.yaml`, overridden by the experiment (line 16).
    let l = leaf(m, "micro_batch_size");
    assert_eq!(l.value, Value::Int(4));
    check_origin("micro_batch_size", &l.origin, &at_exp(25, 25));
    assert_eq!(leaf(m, "lr").value, Value::Float(1.0e-5));
    check_origin("lr", &leaf(m, "lr").origin, &at_exp(29, 11));
    assert_eq!(leaf(m, "norm_epsilon").value, Value::Float(1.0e-6));
    check_origin(
        "norm_epsilon",
        &leaf(m, "norm_epsilon").origin,
        &at_exp(39, 21),
    );
    let l = leaf(m, "stderr_sink_level");
    assert_eq!(l.value, Value::Str("DEBUG".into()));
    check_origin("stderr_sink_level", &l.origin, &at_exp(16, 26));
    check_shadow(
        "stderr_sink_level shadow",
        &l.shadowed[0],
        Value::Str("INFO".into()),
        &At {
            file: t.root.join("primus/configs/modules/module_base.yaml"),
            line: 5,
            column: 20,
            via: vec![pre.clone(), base.clone()],
            layer: Layer::ModulePreset,
        },
    );
    // `wandb_project: "Primus_DeepSeek_Pretrain"` (line 15): the column is the quote's.
    let l = leaf(m, "wandb_project");
    assert_eq!(l.value, Value::Str("Primus_DeepSeek_Pretrain".into()));
    check_origin("wandb_project", &l.origin, &at_exp(15, 22));
    // `trainable: true` (trainer_base.yaml:9) over module_base.yaml:1 (`trainable: false`).
    let l = leaf(m, "trainable");
    assert_eq!(l.value, Value::Bool(true));
    check_origin(
        "trainable",
        &l.origin,
        &At {
            file: base.clone(),
            line: 9,
            column: 12,
            via: vec![pre.clone()],
            layer: Layer::ModulePreset,
        },
    );
    check_shadow(
        "trainable shadow",
        &l.shadowed[0],
        Value::Bool(false),
        &At {
            file: t.root.join("primus/configs/modules/module_base.yaml"),
            line: 1,
            column: 12,
            via: vec![pre.clone(), base.clone()],
            layer: Layer::ModulePreset,
        },
    );

    // Top-level meta values come from `${VAR:default}`.
    assert_eq!(
        exp.meta("exp_name"),
        Some(&Value::Str("deepseek_v2_lite-pretrain".into()))
    );
    assert_eq!(exp.meta("workspace"), Some(&Value::Str("./output".into())));
    let l = exp.file.leaf("exp_name").expect("exp_name");
    check_origin("exp_name", &l.origin, &at_exp(3, 11));
    assert_eq!(
        l.template.as_deref(),
        Some("${PRIMUS_EXP_NAME:deepseek_v2_lite-pretrain}")
    );
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_deepseek_v2_lite_environment_changes_values() {
    let root = root_or_skip!();
    let t = Tree { root };
    let exp_path = t.example(V2_LITE);
    let opts = LoadOptions {
        env: Env::empty()
            .with("PRIMUS_SEQ_LENGTH", "2048")
            .with(
                "PRIMUS_TOKENIZED_DATA_PATH",
                "/data/bookcorpus_text_sentence",
            )
            .with("PRIMUS_TP", "2")
            .with("PRIMUS_EXP_NAME", "true"),
        ..Default::default()
    };
    let exp = load(&exp_path, &opts);
    let m = pre_trainer(&exp);
    let l = leaf(m, "seq_length");
    assert_eq!(l.value, Value::Int(2048));
    assert_eq!(l.template.as_deref(), Some("${PRIMUS_SEQ_LENGTH:4096}"));
    assert_eq!((l.origin.line, l.origin.column), (27, 19));
    assert_eq!(
        leaf(m, "train_data_path").value,
        Value::Str("/data/bookcorpus_text_sentence".into())
    );
    assert_eq!(leaf(m, "tensor_model_parallel_size").value, Value::Int(2));
    // Unset variables keep their defaults.
    assert_eq!(leaf(m, "pipeline_model_parallel_size").value, Value::Int(1));
    assert_eq!(leaf(m, "max_position_embeddings").value, Value::Int(4096));
    // `_try_scalar` turns a substituted "true" into a bool, even for a name.
    assert_eq!(exp.meta("exp_name"), Some(&Value::Bool(true)));

    // PRIMUS_MODEL switches the model preset (`model: ${PRIMUS_MODEL:deepseek_v2_lite}.yaml`).
    let opts = LoadOptions {
        env: Env::empty().with("PRIMUS_MODEL", "deepseek_v3"),
        ..Default::default()
    };
    let exp = load(&exp_path, &opts);
    let m = pre_trainer(&exp);
    assert_eq!(
        canon(m.model_file.as_ref().expect("model")),
        canon(&t.megatron_model("deepseek_v3.yaml"))
    );
    assert_eq!(
        leaf(m, "model").value,
        Value::Str("deepseek_v3.yaml".into())
    );
    let l = leaf(m, "num_layers");
    assert_eq!(l.value, Value::Int(61));
    assert_eq!(
        canon(&l.origin.file),
        canon(&t.megatron_model("deepseek_v3.yaml"))
    );
    assert_eq!((l.origin.line, l.origin.column), (11, 13));
}

// ---------------------------------------------------------------------------------------------
// Spot checks: MI355X deepseek_v3 (Megatron)
// ---------------------------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_deepseek_v3_mi355x_values_and_provenance() {
    let root = root_or_skip!();
    let t = Tree { root };
    let exp_path = t.example(V3_MI355);
    let exp = load(&exp_path, &empty_env());
    let m = pre_trainer(&exp);
    let at_exp = |line, column| At {
        file: exp_path.clone(),
        line,
        column,
        via: vec![],
        layer: Layer::Experiment,
    };

    // `recompute_layer_ids: "0,3,4,..."` (line 74) is a string, not a list or a number.
    let l = leaf(m, "recompute_layer_ids");
    assert_eq!(
        l.value,
        Value::Str("0,3,4,7,8,11,12,15,19,23,31,32,35,36,39,40,43,44,47,48,51".into())
    );
    check_origin("recompute_layer_ids", &l.origin, &at_exp(74, 28));

    // `pipeline_model_parallel_size: ${PRIMUS_PP:16}` (line 45).
    let l = leaf(m, "pipeline_model_parallel_size");
    assert_eq!(l.value, Value::Int(16));
    assert_eq!(l.template.as_deref(), Some("${PRIMUS_PP:16}"));
    check_origin("pipeline_model_parallel_size", &l.origin, &at_exp(45, 37));
    let opts = LoadOptions {
        env: Env::empty().with("PRIMUS_PP", "8"),
        ..Default::default()
    };
    let exp8 = load(&exp_path, &opts);
    assert_eq!(
        pre_trainer(&exp8).value("pipeline_model_parallel_size"),
        Some(&Value::Int(8))
    );

    // The long quoted layout (line 46) and the `micro_batch_size: 2` (line 27).
    let l = leaf(m, "pipeline_model_parallel_layout");
    assert!(
        matches!(&l.value, Value::Str(s) if s.starts_with("Et*1|t*1|t*2") && s.ends_with("t*1,L"))
    );
    check_origin("pipeline_model_parallel_layout", &l.origin, &at_exp(46, 39));
    check_origin(
        "micro_batch_size",
        &leaf(m, "micro_batch_size").origin,
        &at_exp(27, 25),
    );
    assert_eq!(leaf(m, "micro_batch_size").value, Value::Int(2));
    assert_eq!(leaf(m, "turbo_deepep_num_cu").value, Value::Int(80));
    check_origin(
        "turbo_deepep_num_cu",
        &leaf(m, "turbo_deepep_num_cu").origin,
        &at_exp(101, 28),
    );
    assert_eq!(leaf(m, "turbo_sync_free_moe_stage").value, Value::Int(1));

    // Model preset `${PRIMUS_MODEL:deepseek_v3}.yaml` (line 14) → deepseek_v3.yaml.
    let l = leaf(m, "model");
    assert_eq!(l.value, Value::Str("deepseek_v3.yaml".into()));
    check_origin("model", &l.origin, &at_exp(14, 12));
    let l = leaf(m, "num_layers");
    assert_eq!(l.value, Value::Int(61));
    check_origin(
        "num_layers",
        &l.origin,
        &At {
            file: t.megatron_model("deepseek_v3.yaml"),
            line: 11,
            column: 13,
            via: vec![],
            layer: Layer::ModelPreset,
        },
    );
    // `mtp_num_layers: 1` (deepseek_v3.yaml:23) over `null` (deepseek_v3_base.yaml:14).
    let l = leaf(m, "mtp_num_layers");
    assert_eq!(l.value, Value::Int(1));
    assert_eq!((l.origin.line, l.origin.column), (23, 17));
    let last = l.shadowed.last().expect("shadowed");
    assert_eq!(last.value, Value::Null);
    assert_eq!(
        canon(&last.origin.file),
        canon(&t.megatron_model("deepseek_v3_base.yaml"))
    );
    assert_eq!(last.origin.line, 14);
    assert_eq!(
        last.origin.via.iter().map(|p| canon(p)).collect::<Vec<_>>(),
        vec![canon(&t.megatron_model("deepseek_v3.yaml"))]
    );
}

// ---------------------------------------------------------------------------------------------
// Spot checks: TorchTitan deepseek_v3_16b FP8
// ---------------------------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_torchtitan_deepseek_v3_16b_nested_keys() {
    let root = root_or_skip!();
    let t = Tree { root };
    let exp_path = t.example(TITAN_V3);
    let exp = load(&exp_path, &empty_env());
    let m = pre_trainer(&exp);
    assert!(m.is_torchtitan());
    let pre = t.titan_module("pre_trainer.yaml");
    let at_exp = |line, column| At {
        file: exp_path.clone(),
        line,
        column,
        via: vec![],
        layer: Layer::Experiment,
    };
    let at_pre = |line, column| At {
        file: pre.clone(),
        line,
        column,
        via: vec![],
        layer: Layer::ModulePreset,
    };

    // The file starts with a blank line: `training:` is at line 40, its keys below.
    let l = leaf(m, "training.local_batch_size");
    assert_eq!(l.value, Value::Int(8));
    check_origin("training.local_batch_size", &l.origin, &at_exp(41, 27));
    assert_eq!(l.shadowed.len(), 1);
    check_shadow(
        "training.local_batch_size shadow",
        &l.shadowed[0],
        Value::Int(8),
        &at_pre(44, 21),
    );
    let l = leaf(m, "primus_turbo.use_turbo_grouped_mm");
    assert_eq!(l.value, Value::Bool(true));
    check_origin(
        "primus_turbo.use_turbo_grouped_mm",
        &l.origin,
        &at_exp(82, 31),
    );
    check_shadow(
        "primus_turbo.use_turbo_grouped_mm shadow",
        &l.shadowed[0],
        Value::Bool(false),
        &at_pre(162, 25),
    );
    let l = leaf(m, "parallelism.expert_parallel_degree");
    assert_eq!(l.value, Value::Int(8));
    check_origin(
        "parallelism.expert_parallel_degree",
        &l.origin,
        &at_exp(58, 33),
    );
    check_shadow(
        "parallelism.expert_parallel_degree shadow",
        &l.shadowed[0],
        Value::Int(1),
        &at_pre(64, 27),
    );
    let l = leaf(m, "parallelism.data_parallel_shard_degree");
    assert_eq!(l.value, Value::Int(-1));
    check_origin(
        "parallelism.data_parallel_shard_degree",
        &l.origin,
        &at_exp(52, 37),
    );
    // `lr: 2.2e-4` has no dot-before-exponent problem (has a '.'), `eps: 1.0e-8`.
    assert_eq!(leaf(m, "optimizer.lr").value, Value::Float(2.2e-4));
    check_origin(
        "optimizer.lr",
        &leaf(m, "optimizer.lr").origin,
        &at_exp(31, 13),
    );
    assert_eq!(leaf(m, "optimizer.eps").value, Value::Float(1.0e-8));
    // A flow list (line 75) replaces the preset's list whole.
    let l = leaf(m, "compile.components");
    assert_eq!(
        l.value,
        Value::List(vec![Value::Str("model".into()), Value::Str("loss".into())])
    );
    check_origin("compile.components", &l.origin, &at_exp(75, 21));

    // `model.name` from the TorchTitan model preset (which has its own `model:` section, so
    // no file-name string is inserted).
    let model = t.titan_model("deepseek_v3_16b-fp8.yaml");
    assert_eq!(canon(m.model_file.as_ref().expect("model")), canon(&model));
    let at_model = |line, column| At {
        file: model.clone(),
        line,
        column,
        via: vec![],
        layer: Layer::ModelPreset,
    };
    let l = leaf(m, "model.name");
    assert_eq!(l.value, Value::Str("deepseek_v3".into()));
    check_origin("model.name", &l.origin, &at_model(8, 9));
    assert!(l.shadowed.is_empty());
    assert_eq!(leaf(m, "model.flavor").value, Value::Str("16B".into()));
    check_origin(
        "model.flavor",
        &leaf(m, "model.flavor").origin,
        &at_model(9, 11),
    );
    let l = leaf(m, "model.converters");
    assert_eq!(
        l.value,
        Value::List(vec![
            Value::Str("primus_turbo".into()),
            Value::Str("quantize.linear.float8".into())
        ])
    );
    check_origin("model.converters", &l.origin, &at_model(12, 5));
    assert_eq!(
        leaf(m, "job.description").value,
        Value::Str("DeepSeek-V3 16B model training".into())
    );
    check_origin(
        "job.description",
        &leaf(m, "job.description").origin,
        &at_model(3, 16),
    );
    // Module-base keys reach TorchTitan modules too (`../module_base.yaml`).
    let l = leaf(m, "file_sink_level");
    assert_eq!(l.value, Value::Str("DEBUG".into()));
    check_origin(
        "file_sink_level",
        &l.origin,
        &At {
            file: t.root.join("primus/configs/modules/module_base.yaml"),
            line: 4,
            column: 18,
            via: vec![pre.clone()],
            layer: Layer::ModulePreset,
        },
    );
    // The meta `workspace: ./output` is plain text, no template.
    let w = exp.file.leaf("workspace").expect("workspace");
    assert_eq!(w.value, Value::Str("./output".into()));
    assert_eq!(w.template, None);
    assert_eq!((w.origin.line, w.origin.column), (5, 12));
}

// ---------------------------------------------------------------------------------------------
// Command-line overrides
// ---------------------------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_cli_override_wins_and_shadows_the_experiment() {
    let root = root_or_skip!();
    let t = Tree { root };
    let exp_path = t.example(V2_LITE);
    let o = parse_assignment("micro_batch_size=8").expect("override");
    let opts = LoadOptions {
        env: Env::empty(),
        overrides: vec![o],
        ..Default::default()
    };
    let exp = load(&exp_path, &opts);
    let m = pre_trainer(&exp);
    let l = leaf(m, "micro_batch_size");
    assert_eq!(l.value, Value::Int(8));
    assert_eq!(l.origin.layer, Layer::CommandLine);
    assert_eq!(l.origin.describe(), "command line");
    assert_eq!(l.shadowed.len(), 2, "{:?}", l.shadowed);
    check_shadow(
        "micro_batch_size shadow 0",
        &l.shadowed[0],
        Value::Int(2),
        &At {
            file: t.megatron_module("trainer_base.yaml"),
            line: 17,
            column: 19,
            via: vec![t.megatron_module("pre_trainer.yaml")],
            layer: Layer::ModulePreset,
        },
    );
    check_shadow(
        "micro_batch_size shadow 1",
        &l.shadowed[1],
        Value::Int(4),
        &At {
            file: exp_path.clone(),
            line: 25,
            column: 25,
            via: vec![],
            layer: Layer::Experiment,
        },
    );
    // Everything else is as without the override.
    let plain = load(&exp_path, &empty_env());
    let before = pre_trainer(&plain).params.leaves();
    let after = m.params.leaves();
    assert_eq!(before.len(), after.len());
    for ((kb, lb), (ka, la)) in before.iter().zip(&after) {
        assert_eq!(kb, ka);
        if kb != "micro_batch_size" {
            assert_eq!(lb, la, "`{kb}` changed by an unrelated override");
        }
    }

    // A nested TorchTitan override and a new key.
    let opts = LoadOptions {
        env: Env::empty(),
        overrides: vec![
            parse_assignment("training.steps=7").expect("override"),
            parse_assignment("brand_new_key=1.5").expect("override"),
        ],
        ..Default::default()
    };
    let exp = load(&t.example(TITAN_V3), &opts);
    let m = pre_trainer(&exp);
    let l = leaf(m, "training.steps");
    assert_eq!(l.value, Value::Int(7));
    assert_eq!(l.origin.layer, Layer::CommandLine);
    let last = l.shadowed.last().expect("shadowed");
    assert_eq!(last.value, Value::Int(15));
    assert_eq!((last.origin.line, last.origin.column), (44, 16));
    assert_eq!(leaf(m, "training.seq_len").value, Value::Int(4096));
    let l = leaf(m, "brand_new_key");
    assert_eq!(l.value, Value::Float(1.5));
    assert!(l.shadowed.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Editing: byte-identical round trips and one-line edits
// ---------------------------------------------------------------------------------------------

/// Every scalar leaf of a parsed document: key path, its source span.
fn scalar_paths(node: &Node, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Node)>) {
    if let NodeKind::Map(entries) = &node.kind {
        for (k, v) in entries {
            let Some(key) = k.key_string() else { continue };
            prefix.push(key);
            match &v.kind {
                NodeKind::Map(_) => scalar_paths(v, prefix, out),
                _ => out.push((prefix.clone(), v.clone())),
            }
            prefix.pop();
        }
    }
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_yaml_doc_round_trips_every_fixture_byte_for_byte() {
    let root = root_or_skip!();
    let mut files = Vec::new();
    yaml_files_under(&root, &mut files);
    assert!(files.len() >= 30, "found {} YAML files", files.len());
    let mut rewritten = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let doc = YamlDoc::from_text(path, text.clone());
        assert_eq!(doc.text(), text, "{}", path.display());
        assert!(!doc.is_modified());
        assert!(
            doc.diff()
                .lines()
                .all(|l| !l.starts_with('+') && !l.starts_with('-'))
        );

        // Re-writing each scalar with its own source text changes nothing.
        let node = yaml::parse(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .expect("a document");
        let mut leaves = Vec::new();
        scalar_paths(&node, &mut Vec::new(), &mut leaves);
        // Keys repeated in one mapping cannot be addressed one by one.
        let mut seen = std::collections::HashSet::new();
        for (keys, v) in &leaves {
            if !seen.insert(keys.clone()) {
                continue;
            }
            let NodeKind::Scalar(s) = &v.kind else {
                continue;
            };
            if matches!(s.style, Style::Literal | Style::Folded) || v.start.offset == v.end.offset {
                continue;
            }
            let own = &text[v.start.offset..v.end.offset];
            let mut doc = YamlDoc::from_text(path, text.clone());
            let segs: Vec<&str> = keys.iter().map(String::as_str).collect();
            let edit = doc
                .set_literal(&segs, own)
                .unwrap_or_else(|e| panic!("{}: {keys:?}: {e}", path.display()));
            assert_eq!(edit.line, v.start.line, "{}: {keys:?}", path.display());
            assert_eq!(
                doc.text(),
                text,
                "{}: rewriting {keys:?} with `{own}` changed the text",
                path.display()
            );
            rewritten += 1;
        }
    }
    assert!(rewritten > 500, "only {rewritten} scalars rewritten");
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_editing_micro_batch_size_changes_one_line_and_one_value() {
    let root = root_or_skip!();
    let mut edited = 0;
    for path in experiments(&root) {
        let name = path.display();
        let text = std::fs::read_to_string(&path).expect("readable");
        let key = ["modules", "pre_trainer", "overrides", "micro_batch_size"];
        let mut doc = YamlDoc::from_text(&path, text.clone());
        if doc.node(&key).is_none() {
            continue;
        }
        let edit = doc.set_literal(&key, "3").expect("set micro_batch_size");
        assert_eq!(edit.kind, primus_tune::config::doc::EditKind::Replaced);
        let old: Vec<&str> = text.split('\n').collect();
        let new: Vec<&str> = doc.text().split('\n').collect();
        assert_eq!(old.len(), new.len(), "{name}: line count changed");
        let changed: Vec<usize> = (0..old.len()).filter(|&i| old[i] != new[i]).collect();
        assert_eq!(changed.len(), 1, "{name}: changed lines {changed:?}");
        assert_eq!(changed[0] + 1, edit.line as usize, "{name}: reported line");
        assert!(
            new[changed[0]].trim_end().ends_with("micro_batch_size: 3"),
            "{name}: `{}`",
            new[changed[0]]
        );

        let before = load(&path, &empty_env());
        let mut opts = empty_env();
        opts.texts.insert(
            std::path::absolute(&path).expect("absolute"),
            doc.text().to_string(),
        );
        let after = load(&path, &opts);
        let (mb, ma) = (pre_trainer(&before), pre_trainer(&after));
        let l = leaf(ma, "micro_batch_size");
        assert_eq!(l.value, Value::Int(3), "{name}");
        assert_eq!(l.origin.layer, Layer::Experiment);
        assert_eq!(l.origin.line, edit.line, "{name}");
        assert_eq!(
            l.shadowed,
            leaf(mb, "micro_batch_size").shadowed,
            "{name}: what micro_batch_size shadows"
        );
        let lb = mb.params.leaves();
        let la = ma.params.leaves();
        assert_eq!(
            lb.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            la.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            "{name}: key set/order"
        );
        for ((k, b), (_, a)) in lb.iter().zip(&la) {
            if k != "micro_batch_size" {
                assert_eq!(b, a, "{name}: `{k}` changed");
            }
        }
        // Nothing in the disk file changed.
        assert_eq!(std::fs::read_to_string(&path).expect("readable"), text);
        edited += 1;
    }
    // Every Megatron fixture experiment sets micro_batch_size.
    assert!(
        edited >= 6,
        "only {edited} experiments had micro_batch_size"
    );
}
