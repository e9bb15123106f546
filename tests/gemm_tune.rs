//! `gemm-tune` end to end with real processes. The workload is a test double of Primus with
//! hipBLASLt (a shell script, the process boundary): with `HIPBLASLT_LOG_MASK=32` it appends
//! `hipblaslt-bench` lines to `HIPBLASLT_LOG_FILE` as hipBLASLt does, and its steps are faster
//! when `HIPBLASLT_TUNING_OVERRIDE_FILE` names a file. Stage 2 runs a test double of Primus'
//! offline tuning script (given as `--python`) that writes a result file in hipBLASLt's format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, cmd};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Records the GEMM variables it sees, dumps shapes in stage 1, prints Megatron iteration
/// lines: 110 ms untuned, 100 ms with an override file (±1 ms of alternating noise).
const WORKLOAD: &str = r#"env | grep -E '^(PRIMUS_|HIPBLASLT_|TE_HIPBLASLT|GPUS_PER_NODE)' | sort > "$1/gemm-env.txt"
iters=$(grep -o '"train_iters": *[0-9]*' "$1/resolved.json" | grep -o '[0-9]*$')
if [ "$HIPBLASLT_LOG_MASK" = 32 ] && [ -n "$HIPBLASLT_LOG_FILE" ]; then
  for r in 1 2 3; do
    echo "hipblaslt-bench --api_method c -m 4096 -n 8192 -k 4096 --lda 4096 --ldb 4096 --ldc 4096 --ldd 4096  --stride_a 0 --stride_b 0 --stride_c 0 --stride_d 0  --alpha 1.000000 --beta 0.000000 --transA T --transB N --batch_count 1  --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r --scale_type f32_r --bias_type f32_r   --compute_type f32_r --algo_method index --solution_index 1234" >> "$HIPBLASLT_LOG_FILE"
    echo "hipblaslt-bench --api_method c -m 1024 -n 8192 -k 4096 --lda 4096 --ldb 4096 --ldc 1024 --ldd 1024  --stride_a 0 --stride_b 0 --stride_c 0 --stride_d 0  --alpha 1.000000 --beta 0.000000 --transA N --transB N --batch_count 1  --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r --scale_type f32_r --bias_type f32_r   --compute_type f32_r --algo_method index --solution_index 77" >> "$HIPBLASLT_LOG_FILE"
  done
fi
base=110
if [ -n "$HIPBLASLT_TUNING_OVERRIDE_FILE" ] && [ -f "$HIPBLASLT_TUNING_OVERRIDE_FILE" ]; then base=100; fi
i=1
while [ $i -le "$iters" ]; do
  ms=$((base + (i % 2) * 2 - 1))
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' $i "$iters" $i $ms
  i=$((i + 1))
done
"#;

/// A test double of `offline_tune_gemm.py` run as `<python> <script> --dump-shape-path-or-file
/// D --tune-result-path F --num-devices N`: records its arguments and writes one result entry
/// per shape the workload dumps, in hipBLASLt's result-file format.
const OFFLINE_TUNE: &str = r#"#!/bin/sh
shift
echo "$@" > "$(dirname "$0")/offline-args.txt"
out=""
while [ $# -gt 0 ]; do
  case "$1" in --tune-result-path) out="$2"; shift ;; esac
  shift
done
echo "Total 2 shapes need to be tuned."
h="    transA,transB,grouped_gemm,batch_count,m,n,k,alpha,lda,stride_a,beta,ldb,stride_b,ldc,stride_c,ldd,stride_d,a_type,b_type,c_type,d_type,compute_type,scaleA,scaleB,scaleC,scaleD,amaxD,swizzle_a,swizzle_b,activation_type,bias_vector,bias_type,aux_type,rotating_buffer,flush,use_gpu_timer,hipblaslt-Gflops,hipblaslt-GB/s,us,solution_index,gcnArchName,CUs"
{
  echo "Git Version: abc1234"
  echo "$h"
  echo "    T,N,0,1,4096,8192,4096,1,4096,0,0,4096,0,4096,0,4096,0,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,0,0,0,0,0,0,0,none,0,f32_r,bf16_r,512,1,0,655000,800.5,419.6,30001,gfx942:sramecc+:xnack-,304"
  echo "$h"
  echo "    N,N,0,1,1024,8192,4096,1,1024,0,0,4096,0,1024,0,1024,0,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,0,0,0,0,0,0,0,none,0,f32_r,bf16_r,512,1,0,520000,700.1,132.1,30002,gfx942:sramecc+:xnack-,304"
} > "$out"
echo "Tune cases Nums: 2. Elapsed Time: 0.01 s"
"#;

/// The workload as a user profile named `primus`, which replaces the built-in one (Primus
/// itself is absent here).
fn setup() -> Setup {
    common::setup("primus", WORKLOAD, "unused")
}

fn exp_dir(s: &Setup) -> PathBuf {
    s.exp.parent().unwrap().parent().unwrap().to_path_buf()
}

fn tune_root(s: &Setup) -> PathBuf {
    exp_dir(s).join("output/tune_hipblaslt/llama3_8B-BF16-pretrain")
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A stage's result: the last of its JSON Lines (`stage-ended`).
fn stage_json(out: &std::process::Output) -> Value {
    let v = common::last_json(out);
    assert_eq!(v["event"], "stage-ended", "{v}");
    v
}

fn status(s: &Setup, extra: &[&str]) -> Value {
    let out = cmd(s)
        .args(["gemm-tune", "status", "--no-probe", "--json"])
        .arg(&s.exp)
        .args(extra)
        .output()
        .unwrap();
    json_of(&out)
}

/// `KEY=VALUE` lines the workload recorded in a trial's folder.
fn env_of(trial_dir: &str) -> Vec<String> {
    std::fs::read_to_string(Path::new(trial_dir).join("gemm-env.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn stage(s: &Setup, n: &str, extra: &[&str]) -> (std::process::Output, Value) {
    let out = cmd(s)
        .args(["gemm-tune", "stage", n])
        .arg(&s.exp)
        .args(["--json", "--no-telemetry", "--gpus", "2"])
        .env_remove("PRIMUS_HIPBLASLT_TUNING")
        .env_remove("PRIMUS_HIPBLASLT_TUNING_STAGE")
        .env_remove("HIPBLASLT_TUNING_OVERRIDE_FILE")
        .env_remove("HIPBLASLT_LOG_FILE")
        .env_remove("PRIMUS_MODEL")
        .env_remove("PRIMUS_DETERMINISTIC")
        .args(extra)
        .output()
        .unwrap();
    let v = stage_json(&out);
    (out, v)
}

#[test]
fn three_stages_from_nothing_to_a_measured_comparison() {
    let s = setup();
    let st = status(&s, &[]);
    assert_eq!(st["done"], 0);
    assert_eq!(st["next"], 1);

    // Stage 2 and 3 refuse to run before their inputs exist, naming what is missing.
    let out = cmd(&s)
        .args(["gemm-tune", "stage", "2"])
        .arg(&s.exp)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gemm_shape") && err.contains("run stage 1 first"),
        "{err}"
    );

    // Stage 1: a short trial with the hook's environment.
    let (out, v) = stage(&s, "1", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["unique_shapes"], 2);
    assert_eq!(v["gemm_lines"], 6);
    let t = &v["trials"][0];
    assert_eq!(t["status"], "completed");
    assert_eq!(t["iterations"], 10, "stage 1 runs 10 iterations");
    let env = env_of(t["trial_dir"].as_str().unwrap());
    let dump = tune_root(&s).join("gemm_shape/dump_hipblaslt_gemm_shape_0.txt");
    for want in [
        "PRIMUS_HIPBLASLT_TUNING=1".to_string(),
        "PRIMUS_HIPBLASLT_TUNING_STAGE=1".to_string(),
        "PRIMUS_MODEL=llama3_8B-BF16-pretrain".to_string(),
        "HIPBLASLT_LOG_MASK=32".to_string(),
        format!("HIPBLASLT_LOG_FILE={}", dump.display()),
        "HIPBLASLT_TUNING_OVERRIDE_FILE=".to_string(),
    ] {
        assert!(env.contains(&want), "{want} not in {env:?}");
    }
    let st = status(&s, &[]);
    assert_eq!(st["done"], 1);
    assert_eq!(st["next"], 2);
    assert_eq!(st["dumps"]["unique_shapes"], 2);

    // Stage 2 outside primus-cli: Primus' offline tuning script with the tuning folders.
    let script_dir = exp_dir(&s).join("examples/offline_tune");
    std::fs::create_dir_all(&script_dir).unwrap();
    let script = script_dir.join("offline_tune_gemm.py");
    std::fs::write(
        &script,
        "# the real script is Python; the test runs its double\n",
    )
    .unwrap();
    let python = s.dir.path().join("python-double.sh");
    std::fs::write(&python, OFFLINE_TUNE).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let megatron_like = s.config_home.join("primus-tune/profiles/other.yaml");
    std::fs::write(&megatron_like, "name: other\nargv: [sh, -c, 'exit 9']\n").unwrap();
    let (out, v) = stage(
        &s,
        "2",
        &["--profile", "other", "--python", python.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["entries"], 2);
    assert_eq!(v["git_version"], "abc1234");
    let args = std::fs::read_to_string(s.dir.path().join("offline-args.txt")).unwrap();
    let result = tune_root(&s).join("gemm_tune/tune_hipblas_gemm_results.txt");
    assert_eq!(
        args.trim(),
        format!(
            "--dump-shape-path-or-file {} --tune-result-path {} --num-devices 2",
            tune_root(&s).join("gemm_shape").display(),
            result.display()
        )
    );
    let st = status(&s, &[]);
    assert_eq!(st["done"], 2);
    assert_eq!(st["next"], 3);
    assert_eq!(st["results"]["covered"], 2, "{st}");

    // Stage 3: an untuned baseline, then the tuned trial, compared.
    let (out, v) = stage(&s, "3", &["--max-iters", "30"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let base = env_of(v["trials"][0]["trial_dir"].as_str().unwrap());
    let tuned = env_of(v["trials"][1]["trial_dir"].as_str().unwrap());
    assert!(
        base.contains(&"PRIMUS_HIPBLASLT_TUNING=0".to_string()),
        "{base:?}"
    );
    assert!(
        base.contains(&"HIPBLASLT_TUNING_OVERRIDE_FILE=".to_string()),
        "{base:?}"
    );
    assert!(
        tuned.contains(&"PRIMUS_HIPBLASLT_TUNING_STAGE=3".to_string()),
        "{tuned:?}"
    );
    assert!(
        tuned.contains(&format!(
            "HIPBLASLT_TUNING_OVERRIDE_FILE={}",
            result.display()
        )),
        "{tuned:?}"
    );
    let c = &v["comparison"];
    let change = c["change"].as_f64().unwrap();
    assert!((change - (100.0 / 110.0 - 1.0)).abs() < 0.01, "{c}");
    assert!(c["change_ci"].as_f64().unwrap() < 0.05);
    let st = status(&s, &[]);
    assert_eq!(st["done"], 3);
    assert_eq!(st["next"], Value::Null);
    assert_eq!(st["comparison"]["tuned_trial"], v["trials"][1]["trial_id"]);

    // Later trials use the tuned file when asked.
    let out = cmd(&s)
        .args([
            "run",
            "--profile",
            "primus",
            "--json",
            "--no-telemetry",
            "--gemm-tuned",
        ])
        .arg(&s.exp)
        .args(["--max-iters", "12"])
        .env_remove("HIPBLASLT_TUNING_OVERRIDE_FILE")
        .output()
        .unwrap();
    let r = common::last_json(&out);
    assert_eq!(r["event"], "trial-ended");
    let env = env_of(r["trial_dir"].as_str().unwrap());
    assert!(
        env.contains(&format!(
            "HIPBLASLT_TUNING_OVERRIDE_FILE={}",
            result.display()
        )),
        "{env:?}"
    );
}

#[test]
fn status_names_the_traps() {
    let s = setup();
    let root = tune_root(&s);
    std::fs::create_dir_all(root.join("gemm_tune")).unwrap();
    // A result file written by another hipBLASLt build, for another GPU.
    std::fs::write(
        root.join("gemm_tune/tune_hipblas_gemm_results.txt"),
        "Git Version: 1111111\n    transA,transB,batch_count,m,n,k,a_type,b_type,c_type,d_type,compute_type,hipblaslt-Gflops,us,solution_index,gcnArchName,CUs\n    T,N,1,64,64,64,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,10,1.0,5,gfx950:sramecc+:xnack-,256\n",
    )
    .unwrap();
    // A hipblaslt-bench double that reports a different build on an MI300X.
    let bin = s.dir.path().join("rocm/bin");
    std::fs::create_dir_all(&bin).unwrap();
    let bench = bin.join("hipblaslt-bench");
    std::fs::write(
        &bench,
        "#!/bin/sh\necho 'hipBLASLt version: 100500'\necho 'hipBLASLt git version: 2222222'\necho 'Device ID 0 : AMD Instinct MI300X gfx942:sramecc+:xnack-'\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bench, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = cmd(&s)
        .args(["gemm-tune", "status", "--json"])
        .arg(&s.exp)
        .env("ROCM_PATH", s.dir.path().join("rocm"))
        .args([
            "--env",
            "PRIMUS_HIPBLASLT_TUNING_STAGE=3",
            "--env",
            "PRIMUS_DETERMINISTIC=1",
            "--env",
            "HIPBLASLT_TUNING_OVERRIDE_FILE=/nonexistent/tuned.txt",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an error-level note exits 2 (errors), as lint errors do"
    );
    let v = json_of(&out);
    assert_eq!(v["installed"]["git_version"], "2222222");
    let notes: Vec<String> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            format!(
                "{}: {}",
                n["level"].as_str().unwrap(),
                n["text"].as_str().unwrap()
            )
        })
        .collect();
    let has = |level: &str, text: &str| {
        notes
            .iter()
            .any(|n| n.starts_with(level) && n.contains(text))
    };
    assert!(has("warning", "PRIMUS_DETERMINISTIC=1"), "{notes:?}");
    assert!(
        has("warning", "PRIMUS_HIPBLASLT_TUNING is not 1"),
        "{notes:?}"
    );
    assert!(
        has("error", "/nonexistent/tuned.txt does not exist"),
        "{notes:?}"
    );
    // The override file is missing, so nothing is checked against the build: no version note
    // then. Without the override the experiment's file is checked.
    assert!(
        !notes.iter().any(|n| n.contains("written by hipBLASLt")),
        "{notes:?}"
    );
    let out = cmd(&s)
        .args(["gemm-tune", "status", "--json"])
        .arg(&s.exp)
        .env("ROCM_PATH", s.dir.path().join("rocm"))
        .env_remove("HIPBLASLT_TUNING_OVERRIDE_FILE")
        .output()
        .unwrap();
    let v = json_of(&out);
    let text = v["notes"].to_string();
    assert!(
        text.contains("written by hipBLASLt 1111111 but 2222222 is installed"),
        "{text}"
    );
    assert!(text.contains("tuned on gfx950"), "{text}");
    assert!(text.contains("this GPU is gfx942"), "{text}");
}

#[test]
fn results_and_shapes_reject_bad_input_with_the_line() {
    let s = setup();
    let bad = s.dir.path().join("truncated.txt");
    std::fs::write(
        &bad,
        "Git Version: abc\n    transA,transB,batch_count,m,n,k,a_type,b_type,c_type,d_type,compute_type,hipblaslt-Gflops,us,solution_index,gcnArchName,CUs\n",
    )
    .unwrap();
    let out = cmd(&s)
        .args(["gemm-tune", "results"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("truncated.txt:2"), "{err}");

    let dump = s.dir.path().join("dump.txt");
    std::fs::write(
        &dump,
        "some other log line\nhipblaslt-bench -m 8 -n 8 -k x --transA N --transB N --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r --compute_type f32_r\n",
    )
    .unwrap();
    let out = cmd(&s)
        .args(["gemm-tune", "shapes", "--dump"])
        .arg(&dump)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("dump.txt:2"), "{err}");
}

#[test]
fn shapes_json_counts_duplicates() {
    let s = setup();
    let dump = s.dir.path().join("dump.txt");
    let line = |m: u32| {
        format!(
            "hipblaslt-bench --api_method c -m {m} -n 256 -k 512 --transA T --transB N --batch_count 1  --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r --compute_type f32_r --algo_method index --solution_index 9\n"
        )
    };
    std::fs::write(&dump, format!("{}{}{}", line(128), line(64), line(128))).unwrap();
    let out = cmd(&s)
        .args(["gemm-tune", "shapes", "--json", "--dump"])
        .arg(&dump)
        .output()
        .unwrap();
    let v = json_of(&out);
    let shapes = v["shapes"].as_array().unwrap();
    assert_eq!(shapes.len(), 2);
    assert_eq!(shapes[0]["m"], 128);
    assert_eq!(shapes[0]["count"], 2);
    assert_eq!(shapes[1]["m"], 64);
    assert_eq!(shapes[1]["count"], 1);
    for k in [
        "n",
        "k",
        "trans_a",
        "trans_b",
        "a_type",
        "b_type",
        "batch_count",
    ] {
        assert!(shapes[0].get(k).is_some(), "{k} missing");
    }
}
