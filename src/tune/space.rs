//! Knob spaces (data: `presets/spaces/*.yaml`, and the user's in
//! `~/.config/primus-tune/spaces/`), their candidates, and legality. Legality is the lint engine's
//! verdict on the experiment with the candidate's overrides applied as Primus applies command-line
//! overrides: a candidate is illegal when it brings a lint error the base config does not have.

use crate::config::catalog::json_to_value;
use crate::config::diag::{Diagnostic, Severity};
use crate::config::overrides::Override;
use crate::config::{Experiment, LoadOptions, lint};
use crate::domain::study::{Candidate, Knob, Overrides};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

mod layouts;
pub use layouts::LAYOUT_SPACE;

/// A named set of knobs to sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Space {
    pub name: String,
    pub description: String,
    /// What the config must have for the space to mean anything: `megatron`, `moe` or `deepep`
    /// (a Megatron config, with an MoE model, with Primus-Turbo DeepEP), or `torchtitan`.
    #[serde(default)]
    pub requires: Option<String>,
    pub knobs: Vec<Knob>,
    /// The ranks of the experiment's own settings, when the space knows them better than a
    /// comparison of values can: a TorchTitan layout writes out the global batch a `-1`
    /// resolves to, so its current layout is not the config's values word for word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Vec<usize>>,
}

/// A space that cannot be read or found; the message names the file or the name.
#[derive(Debug, thiserror::Error)]
pub enum SpaceError {
    #[error("{source_name}: {message}")]
    Invalid {
        source_name: String,
        message: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no space `{name}` (known: {}){}",
        known.join(", "),
        crate::util::suggest::did_you_mean(name, known)
    )]
    NotFound { name: String, known: Vec<String> },
}

const BUILTIN: [&str; 6] = [
    include_str!("../../presets/spaces/deepep-cu.yaml"),
    include_str!("../../presets/spaces/sync-free-stage.yaml"),
    include_str!("../../presets/spaces/memory-fit.yaml"),
    include_str!("../../presets/spaces/precision.yaml"),
    include_str!("../../presets/spaces/titan-memory-fit.yaml"),
    include_str!("../../presets/spaces/titan-float8.yaml"),
];

/// What a space may require (see [`Space::requires`]).
const REQUIRES: [&str; 4] = ["megatron", "moe", "deepep", "torchtitan"];

impl Space {
    pub fn parse(text: &str, source: &str) -> Result<Space, SpaceError> {
        let invalid = |message: String| SpaceError::Invalid {
            source_name: source.to_string(),
            message,
        };
        let node = crate::config::yaml::parse(text)
            .map_err(|e| invalid(e.to_string()))?
            .ok_or_else(|| invalid("empty file".into()))?;
        let s: Space =
            serde_json::from_value(node.typed().to_json()).map_err(|e| invalid(e.to_string()))?;
        if let Some(r) = s.requires.as_deref()
            && !REQUIRES.contains(&r)
        {
            return Err(invalid(format!(
                "unknown `requires: {r}` (one of {})",
                REQUIRES.join(", ")
            )));
        }
        if s.knobs.is_empty() || s.knobs.iter().any(|k| k.values.is_empty()) {
            return Err(invalid("every space needs knobs with values".into()));
        }
        for k in &s.knobs {
            if k.flag.starts_with('@') && k.values.iter().any(|v| !v.is_object()) {
                return Err(invalid(format!(
                    "the values of `{}` must be maps of flag: value (a name starting with @ sets several flags)",
                    k.flag
                )));
            }
        }
        Ok(s)
    }

    /// The flags its knobs set (a group knob `@name` sets the flags of its value maps).
    pub fn flags(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for k in &self.knobs {
            if k.flag.starts_with('@') {
                for v in &k.values {
                    if let Some(m) = v.as_object() {
                        out.extend(m.keys().cloned());
                    }
                }
            } else {
                out.push(k.flag.clone());
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The flags of the knobs that move memory (what a space that fits memory ranks by).
    pub fn memory_flags(&self) -> Vec<String> {
        let moving = Space {
            knobs: self
                .knobs
                .iter()
                .filter(|k| k.memory != crate::domain::study::MemoryTrend::None)
                .cloned()
                .collect(),
            ..self.clone()
        };
        moving.flags()
    }

    /// Every combination of knob values, in cost order (the first knob varies slowest).
    pub fn candidates(&self) -> Vec<Candidate> {
        grid(&self.knobs)
    }

    /// The experiment's current value of every flag the knobs set (`null` when unset).
    pub fn current(&self, exp: &Experiment) -> Overrides {
        let m = exp.main_module();
        self.flags()
            .into_iter()
            .map(|f| {
                let v = m.value(&f).map_or(serde_json::Value::Null, |v| v.to_json());
                (f, v)
            })
            .collect()
    }

    /// A sweep's candidates: candidate 0 holds the experiment's current settings (the grid's
    /// candidate at [`Space::baseline`] or equal to them, or, when they lie outside the space, the current values with no
    /// rank), then the rest of the grid in cost order, ids 1, 2, ...
    pub fn candidates_with_baseline(&self, exp: &Experiment) -> Vec<Candidate> {
        let current = self.current(exp);
        let mut grid = self.candidates();
        let same = |c: &Candidate| {
            c.overrides
                .iter()
                .all(|(k, v)| current.get(k).is_some_and(|x| json_eq(x, v)))
        };
        let known = |c: &Candidate| self.baseline.as_ref().is_some_and(|r| *r == c.ranks);
        let found = match self.baseline {
            Some(_) => grid.iter().position(known),
            None => grid.iter().position(same),
        };
        let baseline = match found {
            Some(i) => grid.remove(i),
            None => Candidate {
                id: 0,
                overrides: current,
                ranks: Vec::new(),
                baseline: true,
            },
        };
        std::iter::once(Candidate {
            baseline: true,
            ..baseline
        })
        .chain(grid)
        .enumerate()
        .map(|(id, c)| Candidate { id, ..c })
        .collect()
    }

    /// Why the space does not apply to this experiment, if it does not. A space that needs
    /// Megatron (`megatron`, `moe`, `deepep`: Megatron flags) does not apply to another backend,
    /// nor a `torchtitan` space to a Megatron config.
    pub fn not_applicable(&self, exp: &Experiment) -> Option<String> {
        let m = exp.main_module();
        let int = |k: &str| m.value(k).and_then(|v| v.as_i64()).unwrap_or(0);
        let on = |k: &str| m.value(k).is_some_and(|v| v.truthy());
        let moe = crate::megatron::Params::from_values(&m.values()).is_moe();
        let backend = format!(
            "this experiment's module `{}` uses `framework: {}`",
            m.name, m.framework
        );
        match self.requires.as_deref() {
            Some("megatron" | "moe" | "deepep") if !m.is_megatron() => Some(format!(
                "`{}` sets Megatron flags and is for Megatron configs; {backend}",
                self.name
            )),
            Some("torchtitan") if !m.is_torchtitan() => Some(format!(
                "`{}` sets TorchTitan keys and is for TorchTitan configs; {backend}",
                self.name
            )),
            Some("moe") if !moe => {
                Some(format!("`{}` needs an MoE model (num_experts)", self.name))
            }
            Some("deepep")
                if !moe || !(on("use_turbo_deepep") || int("turbo_sync_free_moe_stage") >= 2) =>
            {
                Some(format!(
                    "`{}` needs Primus-Turbo DeepEP (use_turbo_deepep: true or turbo_sync_free_moe_stage >= 2) on an MoE model",
                    self.name
                ))
            }
            _ => None,
        }
    }
}

/// The built-in spaces.
pub fn builtin() -> Vec<Space> {
    BUILTIN
        .iter()
        .filter_map(|t| Space::parse(t, "presets/spaces").ok())
        .collect()
}

/// `~/.config/primus-tune/spaces` (or `$XDG_CONFIG_HOME/primus-tune/spaces`).
pub fn user_dir() -> Option<PathBuf> {
    Some(crate::util::paths::xdg_dir("XDG_CONFIG_HOME", ".config")?.join("spaces"))
}

/// Built-in spaces and the user's (a user space with a built-in name replaces it).
pub fn all(user: Option<&Path>) -> Result<Vec<Space>, SpaceError> {
    let mut out = builtin();
    if let Some(dir) = user
        && let Ok(rd) = std::fs::read_dir(dir)
    {
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        for p in files {
            let text = std::fs::read_to_string(&p).map_err(|source| SpaceError::Io {
                path: p.display().to_string(),
                source,
            })?;
            let s = Space::parse(&text, &p.display().to_string())?;
            out.retain(|b| b.name != s.name);
            out.push(s);
        }
    }
    Ok(out)
}

/// A space by name, or from a YAML file path.
pub fn find(name: &str, user: Option<&Path>) -> Result<Space, SpaceError> {
    let p = Path::new(name);
    if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
        let text = std::fs::read_to_string(p).map_err(|source| SpaceError::Io {
            path: name.to_string(),
            source,
        })?;
        return Space::parse(&text, name);
    }
    let spaces = all(user)?;
    let mut known: Vec<String> = spaces.iter().map(|s| s.name.clone()).collect();
    known.push(LAYOUT_SPACE.to_string());
    spaces
        .into_iter()
        .find(|s| s.name == name)
        .or_else(|| (name == LAYOUT_SPACE).then(layouts::template))
        .ok_or_else(|| SpaceError::NotFound {
            name: name.to_string(),
            known,
        })
}

/// Equal as configuration values: numbers by value (`4` = `4.0`), the rest exactly.
fn json_eq(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The candidate's overrides as Primus command-line overrides.
pub fn as_overrides(o: &Overrides) -> Vec<Override> {
    o.iter()
        .map(|(k, v)| Override {
            key: k.clone(),
            value: json_to_value(v),
            text: format!("{k}={v}"),
        })
        .collect()
}

/// Why a candidate may not run: the lint errors it brings that the experiment does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Illegal(pub String);

/// Legality of each candidate: Ok, or the new lint errors it brings (in words), linted at
/// `opts.world` (the trials' world; unknown: the world rules are skipped); an error with a code
/// in `always` counts even when the experiment has it too ([`judge`]).
pub fn legality(
    exp: &Experiment,
    opts: &LoadOptions,
    cands: &[Candidate],
    always: &[&str],
) -> Vec<Result<(), Illegal>> {
    judge(exp, opts, cands, always)
        .into_iter()
        .map(|j| match j {
            Ok(_) => Ok(()),
            Err(found) => Err(Illegal(
                found
                    .into_iter()
                    .map(|d| d.message)
                    .collect::<Vec<_>>()
                    .join("; "),
            )),
        })
        .collect()
}

/// Each candidate judged by the lint as [`legality`] judges it, with what both sides need:
/// the experiment with its overrides when it is legal, else the errors that make it illegal
/// (a file that does not load: one `load-error`). A code in `always` makes a candidate illegal
/// even when the base config has it too (a layout's own rules: the base may break them at
/// this world, and every layout that does is as illegal).
pub fn judge(
    exp: &Experiment,
    opts: &LoadOptions,
    cands: &[Candidate],
    always: &[&str],
) -> Vec<Result<Experiment, Vec<Diagnostic>>> {
    let catalog = crate::config::catalog::Catalog::builtin();
    let base: HashSet<(&str, Option<String>)> =
        lint::lint(exp, &opts.env, opts.world.as_ref(), catalog)
            .into_iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| (d.code, d.flag))
            .collect();
    cands
        .iter()
        .map(|c| {
            let mut with = opts.clone();
            with.overrides.extend(as_overrides(&c.overrides));
            let e = Experiment::load(&exp.path, &with).map_err(|e| {
                vec![Diagnostic::new(
                    Severity::Error,
                    crate::config::lint::codes::LOAD_ERROR,
                    e.to_string(),
                )]
            })?;
            let new: Vec<Diagnostic> = lint::lint(&e, &opts.env, opts.world.as_ref(), catalog)
                .into_iter()
                .filter(|d| d.severity == Severity::Error)
                .filter(|d| always.contains(&d.code) || !base.contains(&(d.code, d.flag.clone())))
                .collect();
            if new.is_empty() { Ok(e) } else { Err(new) }
        })
        .collect()
}

/// Every combination of `knobs`' values, in cost order (the first knob varies slowest), id =
/// position. A group knob (`@name`, values are maps) sets each flag of its map.
pub fn grid(knobs: &[Knob]) -> Vec<Candidate> {
    let mut ranks: Vec<Vec<usize>> = vec![Vec::new()];
    for k in knobs {
        ranks = ranks
            .into_iter()
            .flat_map(|r| {
                (0..k.values.len()).map(move |i| {
                    let mut r = r.clone();
                    r.push(i);
                    r
                })
            })
            .collect();
    }
    ranks
        .into_iter()
        .enumerate()
        .map(|(id, ranks)| Candidate {
            id,
            overrides: overrides(knobs, &ranks),
            ranks,
            baseline: false,
        })
        .collect()
}

fn overrides(knobs: &[Knob], ranks: &[usize]) -> Overrides {
    let mut out = Overrides::new();
    for (k, &i) in knobs.iter().zip(ranks) {
        let v = &k.values[i];
        match (k.flag.starts_with('@'), v.as_object()) {
            (true, Some(map)) => {
                for (f, x) in map {
                    out.insert(f.clone(), x.clone());
                }
            }
            _ => {
                out.insert(k.flag.clone(), v.clone());
            }
        }
    }
    out
}

/// The inverse of a candidate's overrides: per knob, the index of the value they set (a group
/// knob's value when every flag of its map is set to it); `None` when a knob's value is not
/// among its values (a baseline outside the space).
pub fn ranks_of(knobs: &[Knob], o: &Overrides) -> Option<Vec<usize>> {
    knobs
        .iter()
        .map(|k| {
            k.values
                .iter()
                .position(|v| match (k.flag.starts_with('@'), v.as_object()) {
                    (true, Some(map)) => map
                        .iter()
                        .all(|(f, x)| json_eq(o.get(f).unwrap_or(&serde_json::Value::Null), x)),
                    _ => o.get(&k.flag).is_some_and(|x| json_eq(x, v)),
                })
        })
        .collect()
}

#[cfg(test)]
mod titan_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::env::Env;

    fn opts() -> LoadOptions {
        LoadOptions {
            env: Env::default(),
            ..LoadOptions::default()
        }
    }

    const MOE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";
    const DENSE: &str = "presets/examples/experiments/llama3_8B-BF16-pretrain.yaml";

    #[test]
    fn ranks_of_inverts_the_candidates_overrides() {
        use crate::domain::study::MemoryTrend;
        let knobs = vec![
            Knob {
                flag: "micro_batch_size".into(),
                values: vec![serde_json::json!(1), serde_json::json!(2)],
                memory: MemoryTrend::Increasing,
            },
            Knob {
                flag: "@recompute".into(),
                values: vec![
                    serde_json::json!({"recompute_granularity": null}),
                    serde_json::json!({"recompute_granularity": "full", "recompute_num_layers": 1}),
                ],
                memory: MemoryTrend::Decreasing,
            },
        ];
        for c in grid(&knobs) {
            assert_eq!(
                ranks_of(&knobs, &c.overrides),
                Some(c.ranks.clone()),
                "{c:?}"
            );
        }
        // 2.0 is the value 2; micro batch 3 is none of the knob's values.
        let mut o = grid(&knobs)[3].overrides.clone();
        o.insert("micro_batch_size".into(), serde_json::json!(2.0));
        assert_eq!(ranks_of(&knobs, &o), Some(vec![1, 1]));
        o.insert("micro_batch_size".into(), serde_json::json!(3));
        assert_eq!(ranks_of(&knobs, &o), None);
    }

    #[test]
    fn builtin_spaces_parse() {
        let names: Vec<String> = builtin().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "deepep-cu",
                "sync-free-stage",
                "memory-fit",
                "precision",
                "titan-memory-fit",
                "titan-float8"
            ]
        );
    }

    #[test]
    fn candidates_are_the_product_in_cost_order_with_maps_flattened() {
        let s = find("memory-fit", None).unwrap();
        let c = s.candidates();
        assert_eq!(c.len(), 4 * 5);
        assert_eq!(c[0].ranks, vec![0, 0]);
        assert_eq!(c[1].ranks, vec![0, 1]);
        assert_eq!(c[5].ranks, vec![1, 0]);
        assert_eq!(c[2].overrides["recompute_granularity"], "full");
        assert_eq!(c[2].overrides["recompute_method"], "block");
        assert_eq!(c[2].overrides["recompute_num_layers"], 2);
        assert_eq!(c[4].overrides["recompute_method"], "uniform");
        assert_eq!(c[2].overrides["micro_batch_size"], 1);
        assert!(c[0].overrides["recompute_granularity"].is_null());
    }

    #[test]
    fn candidate_0_holds_the_current_settings_inside_or_outside_the_space() {
        let s = find("memory-fit", None).unwrap();
        // The example runs micro batch 2 without recompute: grid candidate (1, 0).
        let dense = Experiment::load(Path::new(DENSE), &opts()).unwrap();
        let c = s.candidates_with_baseline(&dense);
        assert_eq!(c.len(), 20);
        assert!(c[0].baseline && c[0].id == 0);
        assert_eq!(c[0].ranks, vec![1, 0]);
        assert_eq!(c[0].overrides["micro_batch_size"], 2);
        assert!(c[1..].iter().all(|x| !x.baseline && x.ranks != vec![1, 0]));
        assert_eq!(
            c.iter().map(|x| x.id).collect::<Vec<_>>(),
            (0..20).collect::<Vec<_>>()
        );
        // Micro batch 12 lies outside the space: an extra candidate 0 with the current values.
        let mut o = opts();
        o.overrides = as_overrides(
            &[("micro_batch_size".to_string(), serde_json::json!(12))]
                .into_iter()
                .collect(),
        );
        let twelve = Experiment::load(Path::new(DENSE), &o).unwrap();
        let c = s.candidates_with_baseline(&twelve);
        assert_eq!(c.len(), 21);
        assert!(c[0].baseline && c[0].ranks.is_empty());
        assert_eq!(c[0].overrides["micro_batch_size"], 12);
        assert!(c[0].overrides["recompute_granularity"].is_null());
        assert_eq!(c[0].overrides.len(), 4, "{:?}", c[0].overrides);
        assert_eq!(c[1].overrides, s.candidates()[0].overrides);
    }

    #[test]
    fn bad_space_files_are_refused_with_the_reason() {
        let e = Space::parse("name: x\ndescription: y\nknobs: []\n", "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("s.yaml"), "{e}");
        let e = Space::parse(
            "name: x\ndescription: y\nknobs:\n  - flag: '@r'\n    values: [1]\n",
            "s.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("maps"), "{e}");
        let e = Space::parse("name: x\ndescription: y\nknob: []\n", "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field"), "{e}");
        assert!(
            find("no-such-space", None)
                .unwrap_err()
                .to_string()
                .contains("deepep-cu")
        );
    }

    #[test]
    fn spaces_say_when_they_do_not_apply() {
        let dense = Experiment::load(Path::new(DENSE), &opts()).unwrap();
        let moe = Experiment::load(Path::new(MOE), &opts()).unwrap();
        let sf = find("sync-free-stage", None).unwrap();
        assert!(sf.not_applicable(&dense).unwrap().contains("MoE"));
        assert_eq!(sf.not_applicable(&moe), None);
        assert_eq!(
            find("memory-fit", None).unwrap().not_applicable(&dense),
            None
        );
    }

    #[test]
    fn deepep_cu_above_32_is_illegal_with_ep_16() {
        let mut o = opts();
        o.overrides = as_overrides(
            &[
                (
                    "expert_model_parallel_size".to_string(),
                    serde_json::json!(16),
                ),
                ("use_turbo_deepep".to_string(), serde_json::json!(true)),
                (
                    "moe_shared_expert_overlap".to_string(),
                    serde_json::json!(false),
                ),
                ("moe_router_dtype".to_string(), serde_json::json!("fp32")),
                ("turbo_deepep_num_cu".to_string(), serde_json::json!(32)),
            ]
            .into_iter()
            .collect(),
        );
        let exp = Experiment::load(Path::new(MOE), &o).unwrap();
        let s = find("deepep-cu", None).unwrap();
        let cands = s.candidates();
        let legal = legality(&exp, &o, &cands, &[]);
        let ok: Vec<i64> = cands
            .iter()
            .zip(&legal)
            .filter(|(_, l)| l.is_ok())
            .map(|(c, _)| c.overrides["turbo_deepep_num_cu"].as_i64().unwrap())
            .collect();
        assert_eq!(ok, vec![16, 24, 32]);
        let why = legal[3].as_ref().unwrap_err().to_string();
        assert!(why.contains("32"), "{why}");
    }

    #[test]
    fn recompute_layers_beyond_the_stage_are_illegal() {
        let exp = Experiment::load(Path::new(DENSE), &opts()).unwrap();
        let layers = exp
            .main_module()
            .value("num_layers")
            .and_then(|v| v.as_i64())
            .unwrap();
        let s = find("memory-fit", None).unwrap();
        let cands = s.candidates();
        let legal = legality(&exp, &opts(), &cands, &[]);
        for (c, l) in cands.iter().zip(&legal) {
            let n = c.overrides["recompute_num_layers"].as_i64().unwrap_or(0);
            assert_eq!(l.is_ok(), n <= layers, "{:?}: {l:?}", c.overrides);
        }
    }
}

#[cfg(test)]
mod memory_order {
    use super::*;
    use crate::config::env::Env;
    use crate::domain::value::Value;
    use std::collections::BTreeMap;

    /// The memory-fit space lists recompute from least to most recomputation; the memory model
    /// must agree (never more memory further along), or OOM dominance pruning would be wrong.
    #[test]
    fn memory_fit_recompute_order_is_decreasing_in_the_model() {
        let opts = LoadOptions {
            env: Env::default(),
            ..LoadOptions::default()
        };
        let exp = Experiment::load(
            Path::new("presets/examples/experiments/llama3_8B-BF16-pretrain.yaml"),
            &opts,
        )
        .unwrap();
        let base: BTreeMap<String, Value> = exp.main_module().values();
        let s = find("memory-fit", None).unwrap();
        let recompute = &s.knobs[1];
        let mut last = f64::INFINITY;
        for v in &recompute.values {
            let mut p = base.clone();
            for (k, x) in v.as_object().unwrap() {
                p.insert(k.clone(), json_to_value(x));
            }
            let m = crate::tune::memory::estimate(&p, 8).unwrap().total_bytes;
            assert!(m <= last + 1.0, "{v}: {m} after {last}");
            last = m;
        }
    }
}
