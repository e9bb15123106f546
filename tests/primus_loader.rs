//! The differential test against Primus' own config loader: `primus-tune show EXP --json --all`
//! (in an empty environment) against the answers Primus gave for the same experiment
//! (docs/validation/primus-loader.py: `load_primus_config` → `get_module_config`, then for
//! Megatron `MegatronArgBuilder` at Primus' pinned Megatron-LM and the `build_args` patches),
//! key by key.
//!
//! The answers are data in tests/fixtures/primus_loader/: `bundled.json` (the bundled example,
//! always run), `amd.json` (a sample of Primus' own experiments at fd1eeabb: run for those found
//! in `$PRIMUS_CHECKOUT`, else in ../shared/fixtures/primus; the rest are reported as skipped).
//! `PRIMUS_LOADER_ANSWERS=FILE` names one more answers file for the ignored test
//! (docs/validation/primus-loader.sh --all judges every experiment of Primus' examples so).
//!
//! A key is compared where either side has it: the tool's rows, Primus' params. The value
//! Primus runs is the patched one when a `build_args` patch changed it, else the builder's
//! (an enum argument converted), else the param, else Megatron's default. A difference is
//! either in one of the classes of [`EXPECTED`], each with its reason, or wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Map, Value as J};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One judged experiment, as the answers file holds it.
struct Answer<'a> {
    framework: &'a str,
    params: &'a Map<String, J>,
    coerced: Option<&'a Map<String, J>>,
    patched: Option<&'a Map<String, J>>,
    defaults: &'a Map<String, J>,
}

/// One key of one experiment: what the tool shows and what Primus runs.
struct Case<'a> {
    key: &'a str,
    framework: &'a str,
    /// The tool's row (None: not shown).
    shown: Option<&'a J>,
    /// Primus' value before the `build_args` patches (None: Primus has no such key).
    before: Option<&'a J>,
    /// What Primus runs (None: Primus has no such key).
    runs: Option<&'a J>,
    patched: bool,
}

/// A class of differences the comparison expects, with its reason.
struct Class {
    name: &'static str,
    reason: &'static str,
    applies: fn(&Case) -> bool,
}

/// A patch changed it and the tool shows the value the files set (what Primus holds before the
/// patch), for one of `keys`.
fn before_patch(c: &Case, keys: &[&str]) -> bool {
    c.patched
        && keys.contains(&c.key)
        && matches!((c.shown, c.before), (Some(s), Some(b)) if same(s, b))
}

/// Every difference the comparison accepts, in one list.
const EXPECTED: &[Class] = &[
    Class {
        name: "output folder",
        reason: "the checkpoint_path, tensorboard_path and wandb_config patches build these under \
                 the experiment's output folder (workspace/work_group/user_name/exp_name) of the \
                 run; the tool shows the configured value",
        applies: |c| before_patch(c, &["save", "tensorboard_dir", "wandb_save_dir"]),
    },
    Class {
        name: "W&B names",
        reason: "with W&B on, the wandb_config patch fills unset W&B names from work_group, \
                 user_name and exp_name at run time; the tool shows the configured value",
        applies: |c| before_patch(c, &["wandb_project", "wandb_exp_name"]),
    },
    Class {
        name: "same setting, another form",
        reason: "the moe_layer_freq patch evaluates a pattern string (\"([0]*1+[1]*59)\") into \
                 the list Megatron's argparse would make; data_path_split splits a \
                 space-separated data path into a list; the tool shows the value as written",
        applies: |c| {
            before_patch(
                c,
                &[
                    "moe_layer_freq",
                    "data_path",
                    "train_data_path",
                    "valid_data_path",
                    "test_data_path",
                ],
            )
        },
    },
    Class {
        name: "model-specific patch",
        reason: "kimi_k3_flops sets moe_latent_size for the Kimi K3 presets at run time",
        applies: |c| before_patch(c, &["moe_latent_size"]),
    },
    Class {
        name: "module attribute",
        reason: "trainer_class is an attribute of the module, beside its params: Primus' runtime \
                 picks the trainer class with it and hands it to no backend; the tool lists it \
                 with the module's keys",
        applies: |c| c.key == "trainer_class" && c.runs.is_none() && c.shown.is_some(),
    },
    Class {
        name: "run-time injection",
        reason: "MegatronArgBuilder sets world_size, rank and local_rank from the torchrun \
                 environment of each process",
        applies: |c| matches!(c.key, "world_size" | "rank" | "local_rank"),
    },
];

/// Same JSON value: numbers of one kind (int or float; floats to 12 significant digits, as the
/// tool prints them), lists and maps item by item.
fn same(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Number(x), J::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            (None, None) => {
                let (f, g) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                f == g || ((f - g) / f.abs().max(g.abs())).abs() < 1e-11
            }
            _ => false,
        },
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The tool's rows: key → value.
fn show(exp: &Path) -> Result<BTreeMap<String, J>, String> {
    let data = tempfile::tempdir().unwrap();
    let mut cmd = common::cli(data.path());
    // An empty environment, as the judge ran: every ${VAR:default} takes its default.
    let keep = [
        "PATH",
        "HOME",
        "XDG_DATA_HOME",
        "PRIMUS_TUNE_CONFIG",
        "TMPDIR",
    ];
    for (k, _) in std::env::vars_os() {
        if !keep.iter().any(|x| k == *x) {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .args(["show", "--json", "--all"])
        .arg(exp)
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let rows: Vec<J> = serde_json::from_slice(&out.stdout).expect("show --json prints an array");
    Ok(rows
        .into_iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r["value"].clone()))
        .collect())
}

/// The comparison's tally for one answers file.
#[derive(Default)]
struct Tally {
    experiments: usize,
    skipped: Vec<String>,
    compared: usize,
    agree: usize,
    /// Experiments Primus and the tool both refuse.
    refused: usize,
    classes: BTreeMap<&'static str, usize>,
    wrong: Vec<String>,
}

impl Tally {
    fn case(&mut self, exp: &str, c: &Case) {
        self.compared += 1;
        if matches!((c.shown, c.runs), (Some(s), Some(r)) if same(s, r)) {
            self.agree += 1;
            return;
        }
        if let Some(class) = EXPECTED.iter().find(|k| (k.applies)(c)) {
            *self.classes.entry(class.name).or_default() += 1;
            return;
        }
        let say = |v: Option<&J>| v.map_or("(no such key)".to_string(), J::to_string);
        self.wrong.push(format!(
            "{exp}: {} ({}): primus-tune {}, Primus {}",
            c.key,
            c.framework,
            say(c.shown),
            say(c.runs)
        ));
    }

    fn experiment(&mut self, exp: &str, a: &Answer, rows: &BTreeMap<String, J>) {
        self.experiments += 1;
        let megatron = a.framework == "megatron";
        let mut keys: Vec<&str> = rows.keys().map(String::as_str).collect();
        keys.extend(a.params.keys().map(String::as_str));
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let before = a
                .params
                .get(key)
                .or_else(|| megatron.then(|| a.defaults.get(key)).flatten());
            let before = a.coerced.and_then(|c| c.get(key)).or(before);
            let patch = a.patched.and_then(|p| p.get(key));
            let runs = match patch {
                Some(p) => Some(&p["after"]),
                None => before,
            };
            self.case(
                exp,
                &Case {
                    key,
                    framework: a.framework,
                    shown: rows.get(key),
                    before,
                    runs,
                    patched: patch.is_some(),
                },
            );
        }
    }
}

/// Where an answers file's experiments lie: the repository for the bundled example, else a
/// Primus tree ($PRIMUS_CHECKOUT, then ../shared/fixtures/primus).
fn roots(answers: &J) -> Vec<PathBuf> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    if answers["primus"]["configs_root"].is_string() {
        return vec![repo];
    }
    let mut roots = Vec::new();
    if let Some(p) = std::env::var_os("PRIMUS_CHECKOUT").filter(|p| !p.is_empty()) {
        roots.push(PathBuf::from(p));
    }
    roots.push(repo.join("../shared/fixtures/primus"));
    roots
}

fn compare(file: &Path) -> Tally {
    let text = std::fs::read_to_string(file).unwrap();
    let answers: J = serde_json::from_str(&text).unwrap();
    let defaults = answers["megatron_defaults"].as_object().unwrap();
    let roots = roots(&answers);
    let mut tally = Tally::default();
    for (exp, judged) in answers["experiments"].as_object().unwrap() {
        let Some(path) = roots.iter().map(|r| r.join(exp)).find(|p| p.is_file()) else {
            tally.skipped.push(exp.clone());
            continue;
        };
        let shown = show(&path);
        if let Some(err) = judged["error"].as_str() {
            tally.experiments += 1;
            match shown {
                Err(_) => tally.refused += 1,
                Ok(_) => tally.wrong.push(format!(
                    "{exp}: Primus refuses it ({err}), primus-tune shows it"
                )),
            }
            continue;
        }
        let rows = match shown {
            Ok(rows) => rows,
            Err(e) => {
                tally
                    .wrong
                    .push(format!("{exp}: primus-tune refuses what Primus loads: {e}"));
                continue;
            }
        };
        let answer = Answer {
            framework: judged["framework"].as_str().unwrap(),
            params: judged["params"].as_object().unwrap(),
            coerced: judged["coerced"].as_object(),
            patched: judged["patched"].as_object(),
            defaults,
        };
        tally.experiment(exp, &answer, &rows);
    }
    tally
}

fn report(name: &str, t: &Tally) {
    eprintln!(
        "{name}: {} experiments ({} refused by both), {} values compared, {} agree, {} wrong",
        t.experiments,
        t.refused,
        t.compared,
        t.agree,
        t.wrong.len()
    );
    for class in EXPECTED {
        if let Some(n) = t.classes.get(class.name) {
            eprintln!("  {n} {}: {}", class.name, class.reason);
        }
    }
    if !t.skipped.is_empty() {
        eprintln!(
            "  skipped: {} experiments of {name} are not in $PRIMUS_CHECKOUT or \
             ../shared/fixtures/primus (a Primus checkout at fd1eeabb runs them: \
             docs/validation/primus-loader.sh)",
            t.skipped.len()
        );
    }
    let mut by_key: BTreeMap<&str, usize> = BTreeMap::new();
    for w in &t.wrong {
        let key = w
            .split(": ")
            .nth(1)
            .and_then(|k| k.split(' ').next())
            .unwrap_or(w);
        *by_key.entry(key).or_default() += 1;
    }
    for (key, n) in &by_key {
        eprintln!("  wrong: {key} in {n} experiments");
    }
    let all = std::env::var_os("PRIMUS_LOADER_ALL_WRONG").is_some();
    for w in t.wrong.iter().take(if all { usize::MAX } else { 60 }) {
        eprintln!("  WRONG {w}");
    }
}

/// Compares one answers file and fails on any wrong value.
fn judge(file: &Path) -> Tally {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let tally = compare(file);
    report(&name, &tally);
    assert!(
        tally.wrong.is_empty(),
        "{name}: {} values primus-tune resolves differently from Primus (listed above)",
        tally.wrong.len()
    );
    tally
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/primus_loader")
        .join(name)
}

#[test]
fn the_bundled_example_resolves_as_primus_loader_does() {
    let t = judge(&fixture("bundled.json"));
    assert_eq!(t.experiments, 3, "every bundled experiment was compared");
}

/// Primus' own experiments: those of the sample found in $PRIMUS_CHECKOUT, else in
/// ../shared/fixtures/primus (8 of them).
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built), \
              or PRIMUS_CHECKOUT and --include-ignored"
)]
fn shared_primus_experiments_resolve_as_primus_loader_does() {
    let t = judge(&fixture("amd.json"));
    if t.experiments == 0 {
        eprintln!(
            "skipped: no experiment of amd.json in $PRIMUS_CHECKOUT or ../shared/fixtures/primus"
        );
    }
}

/// Every experiment of Primus' examples: the answers docs/validation/primus-loader.sh --all
/// writes, named by PRIMUS_LOADER_ANSWERS (and the checkout by PRIMUS_CHECKOUT).
#[test]
#[ignore = "needs PRIMUS_LOADER_ANSWERS and PRIMUS_CHECKOUT (docs/validation/primus-loader.sh --all)"]
fn every_answer_given_resolves_as_primus_loader_does() {
    let Some(file) = std::env::var_os("PRIMUS_LOADER_ANSWERS").filter(|p| !p.is_empty()) else {
        eprintln!("skipped: PRIMUS_LOADER_ANSWERS is unset");
        return;
    };
    let t = judge(Path::new(&file));
    assert!(
        t.skipped.is_empty(),
        "experiments not found: {:?}",
        t.skipped
    );
}
