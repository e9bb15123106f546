//! `recommend --study … --apply` end to end with real processes: a `memory-fit` sweep of a test
//! workload (Megatron iteration lines, its step time set by the recomputation it is given)
//! whose pick is "no recomputation" — three flags set to null — then the command the sweep
//! prints, with `--apply`, and `lint` of the file it wrote.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, cmd};

/// Step time 100 ms without recomputation, 110 ms with selective, 120 ms with full recomputation
/// of blocks and 130 ms of every layer (±1 ms). Out of memory where the memory model puts a
/// candidate above ~171 GiB (so that what the sweep rules out by dominance would indeed not
/// fit): micro batch 8, and micro batch 2 or 4 unless every layer is recomputed.
const WORKLOAD: &str = r#"r="$1/resolved.json"
mbs=$(grep -o '"micro_batch_size": *[0-9]*' "$r" | grep -o '[0-9]*$')
uniform=0
if grep -q '"recompute_method": *"uniform"' "$r"; then uniform=1; fi
oom=0
if [ "$mbs" -ge 8 ]; then oom=1; fi
if [ "$mbs" -ge 2 ] && [ $uniform = 0 ]; then oom=1; fi
if [ $oom = 1 ]; then echo "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB" >&2; exit 1; fi
base=100
if grep -q '"recompute_granularity": *"selective"' "$r"; then base=110; fi
if grep -q '"recompute_granularity": *"full"' "$r"; then base=$((120 + 10 * uniform)); fi
i=1
while [ $i -le 200 ]; do
  ms=$((base + (i % 2) * 2 - 1))
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' $i 200 $i $ms
  i=$((i + 1))
  sleep 0.01
done
"#;

/// The dense example at micro batch 1 with full recomputation of every layer.
fn setup() -> Setup {
    let s = common::setup("recompute-workload", WORKLOAD, "unused");
    common::set_micro_batch(&s, 1);
    let text = std::fs::read_to_string(&s.exp).unwrap();
    let full = "recompute_granularity: full\n      recompute_method: uniform\n      \
                recompute_num_layers: 1";
    assert!(text.contains("recompute_granularity: null"), "{text}");
    std::fs::write(
        &s.exp,
        text.replace("recompute_granularity: null", full)
            .replace("global_batch_size: 128", "global_batch_size: 8"),
    )
    .unwrap();
    s
}

fn run(s: &Setup, args: &[String]) -> (i32, String, String) {
    let out = cmd(s).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The sweep's pick turns recomputation off (three nulls); the `recommend --study` line the
/// sweep prints, with `--apply`, writes exactly that, and lint finds nothing wrong with it.
#[test]
fn a_memory_fit_pick_of_no_recomputation_is_applied_and_lints_clean() {
    let s = setup();
    let exp = s.exp.display().to_string();
    let args: Vec<String> = [
        "sweep",
        &exp,
        "--space",
        "memory-fit",
        "--profile",
        "recompute-workload",
        "--gpus",
        "1",
        "--first-iters",
        "12",
        "--max-iters",
        "36",
        "--name",
        "fit",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let (code, out, err) = run(&s, &args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains(
            "pick: micro_batch_size=1 recompute_granularity=null recompute_method=null \
             recompute_num_layers=null"
        ),
        "{out}"
    );
    let next = out
        .lines()
        .find_map(|l| l.strip_prefix("next: primus-tune "))
        .unwrap_or_else(|| panic!("{out}"));
    let mut apply: Vec<String> = next
        .split_whitespace()
        .filter(|a| *a != "[--apply]")
        .map(str::to_string)
        .collect();
    assert_eq!(apply[..4], ["recommend", &exp, "--study", "fit"], "{next}");
    apply.push("--apply".into());
    let (code, out, err) = run(&s, &apply);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!out.contains("withheld"), "{out}");
    let text = std::fs::read_to_string(&s.exp).unwrap();
    for flag in [
        "recompute_granularity",
        "recompute_method",
        "recompute_num_layers",
    ] {
        assert!(text.contains(&format!("{flag}: null")), "{flag}: {text}");
    }
    assert!(out.contains("wrote 3 values to"), "{out}");
    let (code, out, err) = run(
        &s,
        &["lint".into(), exp.clone(), "--gpus".into(), "1".into()],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("0 errors, 0 warnings"), "{out}");
}

/// A private copy of the bundled MoE example and a workspace beside it.
struct Moe {
    dir: tempfile::TempDir,
    exp: std::path::PathBuf,
    ws: std::path::PathBuf,
}

fn moe() -> Moe {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ex");
    primus_tune::util::bundled::extract(&root).unwrap();
    Moe {
        exp: root.join("experiments/moe_16B-BF16-pretrain.yaml"),
        ws: dir.path().join("ws"),
        dir,
    }
}

impl Moe {
    /// The binary on this experiment and workspace, `args` after the command word.
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let (cmd, rest) = args.split_first().unwrap();
        let out = common::cli(&self.dir.path().join("data"))
            .arg(cmd)
            .arg(&self.exp)
            .arg("--workspace")
            .arg(&self.ws)
            .args(rest)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A finished study `name` of this experiment whose pick (candidate 1) is `pick`, the
    /// current settings being candidate 0.
    fn study(&self, name: &str, current: serde_json::Value, pick: serde_json::Value) {
        std::fs::create_dir_all(&self.ws).unwrap();
        let store = primus_tune::store::Store::open(&self.ws.join("trials.db")).unwrap();
        let cand = |id: usize, o: &serde_json::Value, ms: f64| {
            serde_json::json!({
                "id": id, "baseline": id == 0, "overrides": o,
                "verdict": if id == 1 { "winner" } else { "slower" },
                "why": "", "n": 8, "step_ms": ms, "ci_low_ms": ms - 1.0, "ci_high_ms": ms + 1.0,
            })
        };
        let rec = serde_json::json!({
            "space": "test", "config": self.exp, "profile": "primus", "gpus": 8,
            "candidates": [cand(0, &current, 110.0), cand(1, &pick, 100.0)],
            "pick": 1, "baseline": 0, "conclusion": {"kind": "change", "pick": 1},
            "gpu_seconds": 100.0, "trials": 2, "log": [],
        });
        let id = store.create_study(name, &self.exp, "sweep").unwrap();
        store.set_study_notes(id, Some(&rec.to_string())).unwrap();
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.exp).unwrap()
    }
}

/// `recommend --study X --apply` writes the study's pick and nothing else: the rules it lists
/// (the sync-free stage on MI300X) are applied only when asked for, by `--apply` without a
/// study.
#[test]
fn applying_a_study_writes_its_pick_and_not_the_rules() {
    let m = moe();
    m.study(
        "deepep",
        serde_json::json!({"turbo_deepep_num_cu": 64}),
        serde_json::json!({"turbo_deepep_num_cu": 80}),
    );
    let (code, out, err) = m.run(&["recommend", "--gpu", "MI300X", "--study", "deepep"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("turbo_sync_free_moe_stage: 0 → 2"), "{out}");
    let before = m.text();
    let (code, out, err) = m.run(&[
        "recommend",
        "--gpu",
        "MI300X",
        "--study",
        "deepep",
        "--apply",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("wrote 1 value to"), "{out}");
    assert!(out.contains("not applied with --study"), "{out}");
    let after = m.text();
    let changed: Vec<(&str, &str)> = before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed,
        vec![(
            "      turbo_deepep_num_cu: 64",
            "      turbo_deepep_num_cu: 80"
        )]
    );
    // The rules, when asked for.
    let (code, out, err) = m.run(&["recommend", "--gpu", "MI300X", "--apply"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(m.text().contains("turbo_sync_free_moe_stage: 2"), "{out}");
}

/// A study whose pick cannot be written says why and fails (exit 2), instead of writing nothing
/// with success: here lint refuses the pick (sync-free stage 7: Primus knows 0 to 3).
#[test]
fn applying_a_study_whose_pick_is_withheld_fails_with_the_reason() {
    let m = moe();
    m.study(
        "bad",
        serde_json::json!({"turbo_sync_free_moe_stage": 0}),
        serde_json::json!({"turbo_sync_free_moe_stage": 7}),
    );
    let before = m.text();
    let (code, out, err) = m.run(&["recommend", "--study", "bad", "--apply"]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("the pick of study `bad` is withheld") && err.contains("nothing was written"),
        "{err}"
    );
    assert_eq!(m.text(), before);
}

/// The JSON of `recommend … --json` (exit 0 asserted).
fn json_of(out: (i32, String, String)) -> serde_json::Value {
    assert_eq!(out.0, 0, "{}\n{}", out.1, out.2);
    serde_json::from_str(&out.1).unwrap_or_else(|e| panic!("{e}: {}", out.1))
}

/// Every flag a `recommend --json` would set (recommendations and their companions).
fn flags_set(v: &serde_json::Value) -> Vec<String> {
    v["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["flag"].as_str().unwrap().to_string())
        .collect()
}

/// `--ack turbo-grouped-gemm` holds for every route to `use_turbo_grouped_gemm`: the
/// sync-free stage 2 that MI300X calls for needs it, so that bundle is held back whole (with
/// the acknowledgement's reason), and `--apply` writes neither.
#[test]
fn an_acknowledged_flag_is_not_set_by_another_rule_s_bundle() {
    let m = moe();
    std::fs::write(
        &m.exp,
        m.text().replace(
            "use_turbo_grouped_gemm: true",
            "use_turbo_grouped_gemm: false",
        ),
    )
    .unwrap();
    let before = json_of(m.run(&["recommend", "--gpu", "MI300X", "--json"]));
    let flags = flags_set(&before);
    assert!(
        flags.contains(&"use_turbo_grouped_gemm".to_string())
            && flags.contains(&"turbo_sync_free_moe_stage".to_string()),
        "{before}"
    );
    let (code, out, err) = m.run(&[
        "recommend",
        "--ack",
        "turbo-grouped-gemm",
        "--reason",
        "hangs with our experts",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v = json_of(m.run(&["recommend", "--gpu", "MI300X", "--json"]));
    let flags = flags_set(&v);
    assert!(
        !flags.contains(&"use_turbo_grouped_gemm".to_string()),
        "{v}"
    );
    assert!(
        !flags.contains(&"turbo_sync_free_moe_stage".to_string()),
        "{v}"
    );
    let held: Vec<&serde_json::Value> = v["withheld"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["rule"] == "sync-free-moe")
        .collect();
    assert!(!held.is_empty(), "{v}");
    for w in held {
        let why = w["why"].as_str().unwrap();
        assert!(
            why.contains("`use_turbo_grouped_gemm` → true")
                && why.contains("`turbo-grouped-gemm` is acknowledged: hangs with our experts"),
            "{why}"
        );
    }
    let text = m.text();
    let (code, out, err) = m.run(&["recommend", "--gpu", "MI300X", "--apply"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let after = m.text();
    assert!(after.contains("use_turbo_grouped_gemm: false"), "{out}");
    assert!(after.contains("turbo_sync_free_moe_stage: 0"), "{out}");
    assert!(out.contains("withheld sync-free-moe"), "{out}");
    // What it did write is what no acknowledgement governs.
    assert_eq!(text.lines().count(), after.lines().count());
}

/// AMD's Mixtral 8x7B FP8 example (Primus-Turbo off) on MI300X: with `primus-turbo`
/// acknowledged, nothing recommended sets `enable_primus_turbo` — not the sync-free stage's
/// companion (stage > 0 needs Primus-Turbo), not a Turbo kernel's — each bundle that needs it
/// is held back with the reason, and `--apply` leaves the switch off.
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_acknowledging_primus_turbo_holds_back_every_bundle_that_needs_it() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/primus");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("primus");
    copy_tree(&src, &root);
    let m = Moe {
        exp: root.join("examples/megatron/configs/MI300X/mixtral_8x7B_v0.1-FP8-pretrain.yaml"),
        ws: dir.path().join("ws"),
        dir,
    };
    let flags = flags_set(&json_of(m.run(&["recommend", "--gpu", "MI300X", "--json"])));
    assert!(
        flags.contains(&"enable_primus_turbo".to_string()),
        "{flags:?}"
    );
    let (code, out, err) = m.run(&[
        "recommend",
        "--ack",
        "primus-turbo",
        "--reason",
        "no primus_turbo wheel for our ROCm",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v = json_of(m.run(&["recommend", "--gpu", "MI300X", "--json"]));
    assert!(
        !flags_set(&v).contains(&"enable_primus_turbo".to_string()),
        "{v}"
    );
    let held: Vec<&str> = v["withheld"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| {
            w["why"]
                .as_str()
                .unwrap()
                .contains("`primus-turbo` is acknowledged: no primus_turbo wheel")
        })
        .map(|w| w["rule"].as_str().unwrap())
        .collect();
    assert!(held.contains(&"sync-free-moe"), "{v}");
    assert!(held.contains(&"turbo-attention"), "{v}");
    let (code, out, err) = m.run(&["recommend", "--gpu", "MI300X", "--apply"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(!m.text().contains("enable_primus_turbo: true"), "{out}");
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}
