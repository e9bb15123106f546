//! The TorchTitan spaces: where they apply, their candidates' overrides, their memory order.

use super::*;
use crate::config::env::Env;

fn opts() -> LoadOptions {
    LoadOptions {
        env: Env::default(),
        ..LoadOptions::default()
    }
}

const TITAN: &str = "presets/examples/experiments/llama3.1_8B-torchtitan-pretrain.yaml";
const DENSE: &str = "presets/examples/experiments/llama3_8B-BF16-pretrain.yaml";
const MOE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";

fn load(path: &str) -> Experiment {
    Experiment::load(Path::new(path), &opts()).unwrap()
}

#[test]
fn each_backend_gets_its_own_spaces_and_the_others_say_why_not() {
    let titan = load(TITAN);
    for s in builtin() {
        let why = s.not_applicable(&titan);
        if s.name.starts_with("titan-") {
            assert_eq!(why, None, "{}", s.name);
        } else {
            let why = why.unwrap_or_else(|| panic!("{} applies to TorchTitan", s.name));
            assert!(
                why.contains("Megatron") && why.contains("framework: torchtitan"),
                "{why}"
            );
        }
    }
    for path in [DENSE, MOE] {
        let exp = load(path);
        for name in ["titan-memory-fit", "titan-float8"] {
            let why = find(name, None).unwrap().not_applicable(&exp).unwrap();
            assert!(
                why.contains("TorchTitan") && why.contains("framework: megatron"),
                "{why}"
            );
        }
    }
}

#[test]
fn an_unknown_requirement_is_refused() {
    let text = "name: x\ndescription: y\nrequires: titan\nknobs:\n  - flag: a\n    values: [1]\n";
    let e = Space::parse(text, "s.yaml").unwrap_err().to_string();
    assert!(e.contains("titan") && e.contains("torchtitan"), "{e}");
}

#[test]
fn titan_memory_fit_candidates_resolve_as_set_overrides() {
    let exp = load(TITAN);
    let s = find("titan-memory-fit", None).unwrap();
    assert_eq!(s.candidates().len(), 4 * 3);
    // The example runs local batch 4 without checkpointing: grid candidate (2, 0).
    let c = s.candidates_with_baseline(&exp);
    assert_eq!(c.len(), 12);
    assert_eq!(c[0].ranks, vec![2, 0]);
    assert_eq!(c[0].overrides["training.local_batch_size"], 4);
    // Every candidate is legal and resolves to its values, where `--set` puts them.
    let legal = legality(&exp, &opts(), &c, &[]);
    assert!(legal.iter().all(Result::is_ok), "{legal:?}");
    for cand in &c {
        let mut o = opts();
        o.overrides = as_overrides(&cand.overrides);
        let e = Experiment::load(&exp.path, &o).unwrap();
        let m = e.main_module();
        for (k, v) in &cand.overrides {
            let got = m.get(k).unwrap_or_else(|| panic!("{k} unresolved"));
            assert_eq!(&got.value.to_json(), v, "{k}");
            assert_eq!(
                got.origin.layer,
                crate::config::tree::Layer::CommandLine,
                "{k}"
            );
        }
    }
}

#[test]
fn titan_float8_candidates_set_the_converter_list() {
    let exp = load(TITAN);
    let s = find("titan-float8", None).unwrap();
    let c = s.candidates_with_baseline(&exp);
    assert_eq!(
        c.len(),
        3,
        "the example's converters are [primus_turbo]: candidate 0"
    );
    assert_eq!(c[0].ranks, vec![0]);
    let mut o = opts();
    o.overrides = as_overrides(&c[1].overrides);
    let e = Experiment::load(&exp.path, &o).unwrap();
    let p = crate::megatron::titan::Titan::from_values(&e.main_module().values()).unwrap();
    assert!(p.float8);
    assert_eq!(
        e.main_module()
            .value("quantize.linear.float8.recipe_name")
            .and_then(|v| v.as_str()),
        Some("tensorwise")
    );
}

/// The memory model must agree with the space's declared trends (batch up: more; checkpointing
/// further along: less), or OOM dominance pruning would be wrong.
#[test]
fn titan_memory_fit_trends_hold_in_the_memory_model() {
    let exp = load(TITAN);
    let s = find("titan-memory-fit", None).unwrap();
    let mb = |c: &Candidate| {
        let mut o = opts();
        o.overrides = as_overrides(&c.overrides);
        let e = Experiment::load(&exp.path, &o).unwrap();
        crate::tune::memory::estimate(&e.main_module().values(), 8)
            .unwrap()
            .total_bytes
    };
    let cands = s.candidates();
    let m: Vec<f64> = cands.iter().map(mb).collect();
    for (i, a) in cands.iter().enumerate() {
        for (j, b) in cands.iter().enumerate() {
            let (ba, bb) = (a.ranks[0], b.ranks[0]);
            let (ca, cb) = (a.ranks[1], b.ranks[1]);
            if (ba < bb && ca == cb) || (ba == bb && ca > cb) {
                assert!(
                    m[i] < m[j],
                    "{:?} {} !< {:?} {}",
                    a.overrides,
                    m[i],
                    b.overrides,
                    m[j]
                );
            }
        }
    }
}
