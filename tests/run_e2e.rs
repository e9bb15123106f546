//! Trials end to end with real processes: the CPU proxy, and test workloads (shell scripts that
//! print Megatron lines) that run out of memory, hang, crash or ignore SIGINT. After every trial
//! no process of its group may survive, and the database keeps every trial.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Setup {
    dir: tempfile::TempDir,
    root: PathBuf,
    exp: PathBuf,
    config_home: PathBuf,
    /// The workspace (`PRIMUS_TUNE_WORKSPACE`): `trials.db` and `trials/<id>/`.
    ws: PathBuf,
}

/// A copy of the bundled example and a config folder for test profiles.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ex");
    primus_tune::util::bundled::extract(&root).unwrap();
    let exp = root.join("experiments/llama3_8B-BF16-pretrain.yaml");
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(config_home.join("primus-tune/profiles")).unwrap();
    Setup {
        ws: dir.path().join("ws"),
        dir,
        root,
        exp,
        config_home,
    }
}

/// A test profile running `script` with sh (the script is the test's own, not user input).
fn profile(s: &Setup, name: &str, script: &str) {
    let text = format!(
        "name: {name}\nargv: [sh, -c, {}, workload, \"{{trial_dir}}\"]\n",
        serde_json::to_string(script).unwrap()
    );
    std::fs::write(
        s.config_home
            .join(format!("primus-tune/profiles/{name}.yaml")),
        text,
    )
    .unwrap();
}

/// Shell code printing Megatron iteration line $i with a step time of $ms.
const ITER_FN: &str = r#"it() {{ printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' "$1" 50 "$1" "$2"; }}
echo $$ > "$1/workload.pid"
"#;

/// `run` of the bundled TorchTitan example (Llama 3.1 8B) with `args`.
fn run_titan(s: &Setup, args: &[&str]) -> std::process::Output {
    bin(s)
        .arg("run")
        .arg(
            s.root
                .join("experiments/llama3.1_8B-torchtitan-pretrain.yaml"),
        )
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

fn bin(s: &Setup) -> Command {
    Command::from_std(plain(s, assert_cmd::cargo::cargo_bin("primus-tune")))
}

/// `program` as a plain process with the setup's folders (for tests that signal or wrap it).
fn plain(s: &Setup, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut c = std::process::Command::new(program);
    c.env("XDG_CONFIG_HOME", &s.config_home)
        .env("XDG_DATA_HOME", s.dir.path().join("data"))
        .env("PRIMUS_TUNE_WORKSPACE", &s.ws)
        .env_remove("PRIMUS_ROOT")
        .env_remove("GPUS_PER_NODE");
    c
}

/// The last of the JSON Lines `run --json` printed: the `trial-ended` event with the result.
fn result_line(stdout: &[u8], stderr: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    let last = text.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
    let v: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {text} stderr {}",
            String::from_utf8_lossy(stderr)
        )
    });
    assert_eq!(v["event"], "trial-ended", "{v}");
    v
}

fn run_json(s: &Setup, profile: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let out = bin(s)
        .arg("run")
        .arg(&s.exp)
        .args([
            "--profile",
            profile,
            "--json",
            "--no-telemetry",
            "--grace-seconds",
            "0.3",
        ])
        .args(extra)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let v = result_line(&out.stdout, &out.stderr);
    (out.status.code().unwrap_or(-1), v)
}

/// `run --json` with `args`, its telemetry sampled from the recorded MI300X sysfs and procfs
/// trees every `interval_ms`; the `trial-ended` event.
fn run_on_recorded_mi300x(s: &Setup, interval_ms: u32, args: &[&str]) -> serde_json::Value {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/mi300x_spx_nps1");
    let out = bin(s)
        .arg("run")
        .arg(&s.exp)
        .args(["--json", "--backend", "amdgpu-sysfs", "--interval"])
        .arg(interval_ms.to_string())
        .args(args)
        .arg("--sysfs-root")
        .arg(tree.join("sys"))
        .arg("--procfs-root")
        .arg(tree.join("proc"))
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    result_line(&out.stdout, &out.stderr)
}

/// No process of the trial is alive (zombies aside): none carries its folder in its
/// environment (`PRIMUS_TUNE_TRIAL_DIR`), wherever it moved, and its process group is empty.
fn group_gone(trial_dir: &Path) -> bool {
    let pid: i32 = std::fs::read_to_string(trial_dir.join("workload.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    common::trial_processes(trial_dir).is_empty() && !primus_tune::run::process::tree_alive(pid)
}

fn trial_dir(v: &serde_json::Value) -> PathBuf {
    PathBuf::from(v["trial_dir"].as_str().unwrap())
}

#[test]
fn proxy_cpu_trial_completes_and_is_stored() {
    let s = setup();
    let (code, v) = run_json(
        &s,
        "proxy-cpu",
        &[
            "--set",
            "num_layers=2",
            "--set",
            "hidden_size=512",
            "--set",
            "ffn_hidden_size=1024",
            "--set",
            "num_attention_heads=8",
            "--set",
            "seq_length=512",
            "--set",
            "max_position_embeddings=512",
            "--set",
            "global_batch_size=16",
            "--max-iters",
            "12",
            // No early stop: the proxy's steps are steady enough to stop before 12.
            "--ci-target",
            "0",
        ],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["iterations"], 12);
    assert!(v["median_step_ms"].as_f64().unwrap() > 0.0);
    assert!(v["ci95_ms"].as_f64().is_some());
    let dir = trial_dir(&v);
    for f in [
        "config.yaml",
        "resolved.json",
        "argv.json",
        "env.json",
        "stdout.log",
        "stderr.log",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    // The effective config keeps the experiment's comments and carries the overrides.
    let cfg = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(cfg.contains("# Llama 3 8B"));
    assert!(cfg.contains("num_layers: 2"));
    // The user's experiment is untouched.
    let original = primus_tune::util::bundled::FILES
        .iter()
        .find(|(p, _)| *p == "experiments/llama3_8B-BF16-pretrain.yaml")
        .unwrap()
        .1;
    assert_eq!(std::fs::read_to_string(&s.exp).unwrap(), original);
    // Stored: listed, with its iterations.
    let out = bin(&s)
        .args(["trials", "--json", "--config"])
        .arg(&s.exp)
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["status"], "completed");
    assert_eq!(rows[0]["iterations_stored"], 12);
    let _ = s.root;
}

/// A TorchTitan experiment runs on the CPU proxy sized from its model flavor (Llama 3.1 8B:
/// hidden 4096 / 32), its local batch and sequence, and stops at the trial's budget
/// (`training.steps`).
#[test]
fn proxy_cpu_runs_a_torchtitan_experiment_at_its_models_size() {
    let s = setup();
    let out = run_titan(
        &s,
        &[
            "--profile",
            "proxy-cpu",
            "--json",
            "--no-telemetry",
            "--set",
            "training.local_batch_size=1",
            "--max-iters",
            "4",
            "--ci-target",
            "0",
        ],
    );
    let v = result_line(&out.stdout, &out.stderr);
    assert_eq!(v["status"], "completed", "{v}");
    let dir = trial_dir(&v);
    let log = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
    let shape = log
        .lines()
        .find(|l| l.contains("proxy-cpu: hidden"))
        .unwrap();
    assert!(
        shape.contains("hidden 128,") && shape.contains("seq 128,") && shape.contains("vocab 501,"),
        "{shape}"
    );
    assert!(shape.contains("micro batch 1 x"), "{shape}");
    let resolved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("resolved.json")).unwrap()).unwrap();
    assert_eq!(resolved["model.flavor"], "8B");
    assert_eq!(
        resolved["hidden_size"], 4096,
        "the Megatron names beside TorchTitan's"
    );
    assert_eq!(resolved["training.steps"], 4, "the trial's budget");
}

/// TorchTitan prints no step time, only tokens per second per GPU (`tps`): the trial takes
/// the step time from it and the run's shape (the lines are upstream TorchTitan v0.2.2's, as
/// the H200 printed them: docs/validation/h200-2026-12-03-titan/). Before, such a trial ended
/// as "failed: without a measurable iteration" although it trained.
#[test]
fn a_torchtitan_trial_is_timed_by_its_tokens_per_second() {
    let s = setup();
    // local batch 2 × sequence 2048 on 1 GPU = 4096 tokens a step; tps 16,384 → 250 ms, the
    // first two steps slower (warm-up)
    profile(
        &s,
        "titan-log",
        r#"echo $$ > "$1/workload.pid"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
  case $i in 1) tps=621 ;; 2) tps=3,980 ;; *) tps=16,384 ;; esac
  printf '[titan] 2026-12-03 17:21:35,191 - root - INFO - \033[31mstep: %2d  \033[32mloss: 11.96873  \033[38;2;180;60;0mgrad_norm: 78.8726  \033[38;2;54;234;195mmemory: 32.93GiB(23.55%%)  \033[34mtps: %s  \033[36mtflops: 139.43  \033[35mmfu: 14.10%%\033[39m\n' $i $tps
done"#,
    );
    let out = run_titan(
        &s,
        &[
            "--profile",
            "titan-log",
            "--json",
            "--no-telemetry",
            "--gpus",
            "1",
            "--set",
            "training.local_batch_size=2",
            "--set",
            "training.seq_len=2048",
            "--max-iters",
            "12",
            "--ci-target",
            "0",
            "--grace-seconds",
            "0.3",
        ],
    );
    let v = result_line(&out.stdout, &out.stderr);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["median_step_ms"], 250.0, "{v}");
    assert_eq!(v["warmup"], 2, "{v}");
    assert_eq!(v["peak_mem_gib"], 32.93, "{v}");
    // the offline parser does the same with the shape given
    let log = trial_dir(&v).join("stdout.log");
    let out = bin(&s)
        .arg("parse-log")
        .arg(&log)
        .args(["--json", "--seq-length", "2048", "--global-batch-size", "2"])
        .output()
        .unwrap();
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(p["summary"]["median_step_ms"], 250.0, "{p}");
    let first = p["iterations"][0]["elapsed_ms"].as_f64().unwrap();
    assert!((first - 4096.0 / 621.0 * 1000.0).abs() < 1e-6, "{p}");
}

#[test]
fn early_stop_ends_a_steady_trial_before_max_iters() {
    let s = setup();
    profile(
        &s,
        "steady",
        &format!("{ITER_FN}i=1; while true; do it $i 100.0; i=$((i+1)); sleep 0.02; done"),
    );
    let (code, v) = run_json(&s, "steady", &["--max-iters", "50"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["stop_reason"], "ci-target");
    let n = v["iterations"].as_u64().unwrap();
    assert!((10..50).contains(&n), "{n}");
    assert_eq!(v["median_step_ms"], 100.0);
    assert!(group_gone(&trial_dir(&v)));
}

/// Every float in `v` as the `--json` outputs print it: no noise such as `446.90000000000055`.
fn assert_no_float_noise(v: &serde_json::Value, line: &str) {
    match v {
        serde_json::Value::Number(n) if n.is_f64() => {
            let x = n.as_f64().unwrap();
            let tidy = primus_tune::util::num::tidy(x);
            assert_eq!(x.to_string(), tidy.to_string(), "float noise in {line}");
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| assert_no_float_noise(x, line)),
        serde_json::Value::Object(m) => m.values().for_each(|x| assert_no_float_noise(x, line)),
        _ => {}
    }
}

#[test]
fn json_lines_events_print_floats_without_noise() {
    let s = setup();
    // Step times whose differences and means are float noise unless rounded (11870.8 -
    // 11423.9 = 446.90000000000055).
    profile(
        &s,
        "noisy",
        &format!(
            "{ITER_FN}i=1; for ms in 11870.8 11423.9 12317.7 12231.7 10870.3 11718.1 11856.8 12001.3; do it $i $ms; i=$((i+1)); done"
        ),
    );
    let out = bin(&s)
        .arg("run")
        .arg(&s.exp)
        .args(["--profile", "noisy", "--json", "--no-telemetry"])
        .args(["--max-iters", "8", "--ci-target", "0"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut iterations = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        iterations += usize::from(v["event"] == "iteration");
        assert_no_float_noise(&v, line);
    }
    assert!(iterations >= 4, "{text}");
    // The fields keep their order: the tag first.
    assert!(
        text.lines().all(|l| l.starts_with(r#"{"event":"#)),
        "{text}"
    );
}

#[test]
fn oom_is_classified_with_its_first_line() {
    let s = setup();
    profile(
        &s,
        "oom",
        &format!(
            "{ITER_FN}it 1 900.0; it 2 300.0; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB.' >&2; exit 1"
        ),
    );
    let (code, v) = run_json(&s, "oom", &[]);
    assert_eq!(code, 3, "{v}");
    common::assert_failed_with(&v, "oom", "CUDA out of memory");
    assert!(group_gone(&trial_dir(&v)));
}

#[test]
fn crash_reports_the_last_exception_line() {
    let s = setup();
    profile(
        &s,
        "crash",
        &format!(
            "{ITER_FN}it 1 500.0; printf 'Traceback (most recent call last):\\n  File \"train.py\", line 3, in <module>\\nRuntimeError: boom in the data loader\\n' >&2; exit 1"
        ),
    );
    let (code, v) = run_json(&s, "crash", &[]);
    assert_eq!(code, 3);
    assert_eq!(v["failure"]["class"], "traceback");
    assert_eq!(
        v["failure"]["line"],
        "RuntimeError: boom in the data loader"
    );
}

#[test]
fn a_hang_is_detected_and_the_group_killed() {
    let s = setup();
    // Three iterations, then silence; a child of the workload sleeps too.
    profile(
        &s,
        "hang",
        &format!("{ITER_FN}it 1 100.0; it 2 100.0; it 3 100.0; sleep 60 & wait"),
    );
    let t = Instant::now();
    let (code, v) = run_json(&s, "hang", &["--hang-seconds", "1"]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["failure"]["class"], "hang");
    assert_eq!(v["stop_reason"], "hang");
    assert!(t.elapsed() < Duration::from_secs(30));
    assert!(group_gone(&trial_dir(&v)));
}

#[test]
fn no_first_iteration_is_a_hang_too() {
    let s = setup();
    profile(&s, "silent", &format!("{ITER_FN}sleep 60"));
    let (code, v) = run_json(&s, "silent", &["--first-iteration-seconds", "1"]);
    assert_eq!(code, 3);
    assert_eq!(v["failure"]["class"], "hang");
    assert!(group_gone(&trial_dir(&v)));
}

#[test]
fn a_workload_ignoring_sigint_and_sigterm_is_killed() {
    let s = setup();
    profile(
        &s,
        "stubborn",
        &format!(
            "{ITER_FN}trap '' INT TERM; (trap '' INT TERM; sleep 60) & i=1; while true; do it $i 100.0; i=$((i+1)); sleep 0.02; done"
        ),
    );
    let (code, v) = run_json(&s, "stubborn", &["--max-iters", "50"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["exit_signal"], 9, "{v}");
    assert!(group_gone(&trial_dir(&v)));
}

#[test]
fn max_seconds_without_enough_samples_is_a_timeout() {
    let s = setup();
    profile(&s, "slow", &format!("{ITER_FN}it 1 900.0; sleep 60"));
    let (code, v) = run_json(&s, "slow", &["--max-seconds", "1.5"]);
    assert_eq!(code, 3);
    assert_eq!(v["failure"]["class"], "timeout");
    assert!(group_gone(&trial_dir(&v)));
}

#[test]
fn killing_primus_tune_mid_trial_leaves_no_child_and_keeps_earlier_trials() {
    let s = setup();
    profile(
        &s,
        "quick",
        &format!("{ITER_FN}it 1 100.0; it 2 100.0; it 3 100.0"),
    );
    let (_, first) = run_json(&s, "quick", &[]);
    let first_id = first["trial_id"].as_i64().unwrap();
    profile(
        &s,
        "long",
        &format!(
            "{ITER_FN}(sleep 60) & i=1; while true; do it $i 100.$i; i=$((i+1)); sleep 0.3; done"
        ),
    );
    let exe = assert_cmd::cargo::cargo_bin("primus-tune");
    let child = plain(&s, exe)
        .arg("run")
        .arg(&s.exp)
        .args([
            "--profile",
            "long",
            "--json",
            "--no-telemetry",
            "--grace-seconds",
            "0.3",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the second trial's workload to start, then interrupt primus-tune.
    let trials = s.ws.join("trials");
    let pid_file = trials.join((first_id + 1).to_string()).join("workload.pid");
    let t = Instant::now();
    while !pid_file.is_file() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(800));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v = result_line(&out.stdout, &out.stderr);
    assert_eq!(v["status"], "stopped");
    assert_eq!(v["failure"]["class"], "killed-by-user");
    assert!(group_gone(pid_file.parent().unwrap()));
    // The database opens with the earlier trial intact.
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    let t1 = store.trial(first_id).unwrap().unwrap();
    assert_eq!(t1.status.to_string(), "completed");
    assert_eq!(store.iterations(first_id).unwrap().len(), 3);
    let t2 = store.trial(first_id + 1).unwrap().unwrap();
    assert_eq!(t2.status.to_string(), "stopped");
}

#[test]
fn parse_log_json_has_iterations_summary_and_failure() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("train.log");
    let mut text = String::new();
    for i in 1..=12 {
        text.push_str(&format!(" [2026-11-29 22:59:27.865632] iteration {i:8}/      30 | consumed samples: {:12} | elapsed time per iteration (ms): {} | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n", i * 16, if i <= 2 { 900.0 } else { 180.0 }));
    }
    text.push_str("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n");
    std::fs::write(&log, text).unwrap();
    let out = Command::cargo_bin("primus-tune")
        .unwrap()
        .args(["parse-log", "--json", "--seq-length", "2048"])
        .arg(&log)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["iterations"].as_array().unwrap().len(), 12);
    assert_eq!(v["iterations"][0]["elapsed_ms"], 900.0);
    assert_eq!(v["summary"]["median_step_ms"], 180.0);
    // 2048 × 16 tokens per 0.18 s on one GPU.
    let tps = v["summary"]["tokens_per_s_per_gpu"].as_f64().unwrap();
    assert!((tps - 2048.0 * 16.0 / 0.18).abs() < 1.0, "{tps}");
    assert_eq!(v["failure"]["class"], "oom");
}

/// A launch that cannot start leaves its trial failed with the reason (never `running`, never
/// a non-zero exit): a runner that does not exist, and a profile needing an unset variable.
#[test]
fn a_launch_that_cannot_start_is_stored_as_not_launched_with_the_reason() {
    let s = setup();
    std::fs::write(
        s.config_home.join("primus-tune/profiles/no-runner.yaml"),
        "name: no-runner\nargv: [/nonexistent/primus-runner, \"{config}\"]\n",
    )
    .unwrap();
    std::fs::write(
        s.config_home.join("primus-tune/profiles/needs-var.yaml"),
        "name: needs-var\nargv: [sh, \"{env:PT_TEST_UNSET_MEGATRON_PATH}/pretrain_gpt.py\"]\n",
    )
    .unwrap();
    for (profile, cause) in [
        ("no-runner", "/nonexistent/primus-runner"),
        ("needs-var", "PT_TEST_UNSET_MEGATRON_PATH"),
    ] {
        let out = bin(&s)
            .arg("run")
            .arg(&s.exp)
            .args(["--profile", profile, "--no-telemetry"])
            .env_remove("PT_TEST_UNSET_MEGATRON_PATH")
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{profile}: {err}");
        assert!(err.contains(cause), "{profile}: {err}");
        let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
        let t = store
            .list_trials(&primus_tune::store::TrialFilter::all())
            .unwrap()
            .into_iter()
            .find(|t| t.profile.as_deref() == Some(profile))
            .unwrap_or_else(|| panic!("{profile}: no trial stored"));
        assert_eq!(t.status.as_str(), "failed", "{profile}");
        let f = t.failure.expect("a failure");
        assert_eq!(
            f.class,
            primus_tune::domain::trial::FailureClass::NotLaunched,
            "{profile}"
        );
        let line = f.line.unwrap_or_default();
        assert!(
            line.starts_with("nothing was launched") && line.contains(cause),
            "{profile}: {line}"
        );
        assert_eq!(
            t.exit_code, None,
            "{profile}: nothing ran, so nothing exited"
        );
    }
}

/// A trial's lint sees the environment its launch sets: a profile's `PRIMUS_PP=2` makes the
/// example's `${PRIMUS_PP:1}` two stages, which one GPU cannot hold (refused before launch,
/// exit 2); `--env PRIMUS_PP=1` comes after the profile's, as in the launch, and it runs.
#[test]
fn a_trial_is_linted_with_the_environment_its_profile_sets() {
    let s = setup();
    common::write_profile(
        &s.config_home,
        "pp2",
        "echo $PRIMUS_PP",
        "env:\n  PRIMUS_PP: \"2\"\n",
    );
    let run = |extra: &[&str]| {
        bin(&s)
            .arg("run")
            .arg(&s.exp)
            .args(["--profile", "pp2", "--gpus", "1", "--no-telemetry"])
            .args(extra)
            .env_remove("PRIMUS_PP")
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("TP × PP × CP = 1 × 2 × 1"), "{err}");
    let out = run(&["--env", "PRIMUS_PP=1"]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("lint error"), "{all}");
    assert!(all.contains("without a measurable iteration"), "{all}");
}

/// The launcher's variables a profile's `env:` sets are its trials' world: `GPUS_PER_NODE: "2"`
/// launches two ranks (`{gpus}`), and `--gpus` still names it.
#[test]
fn a_profile_s_gpus_per_node_is_its_trials_world() {
    let s = setup();
    common::write_profile(
        &s.config_home,
        "g2",
        "echo gpus={gpus} per_node={gpus_per_node}",
        "env:\n  GPUS_PER_NODE: \"2\"\n",
    );
    let argv = |extra: &[&str]| {
        let out = bin(&s)
            .arg("run")
            .arg(&s.exp)
            .args(["--profile", "g2", "--no-telemetry", "--json"])
            .args(extra)
            .env_remove("GPUS_PER_NODE")
            .env_remove("NNODES")
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let v = common::last_json(&out);
        let dir = PathBuf::from(v["trial_dir"].as_str().unwrap());
        std::fs::read_to_string(dir.join("argv.json")).unwrap()
    };
    assert!(argv(&[]).contains("gpus=2 per_node=2"), "{}", argv(&[]));
    assert!(argv(&["--gpus", "1"]).contains("gpus=1 per_node=1"));
}

/// The checklist's memory step reads the newest trial that ran the config as it is, on a
/// profile that runs the real job: not measured before one, done once one fits (with its
/// peak and what measured it), a to-do once one runs out of memory. A trial with other
/// settings, or on a CPU stand-in, does not count.
#[test]
fn the_checklist_s_memory_step_reads_the_trial_that_ran_the_config_as_it_is() {
    let s = setup();
    let memory_at = |s: &Setup, gpus: &str| {
        let out = bin(s)
            .args(["checklist", "--json", "--gpus", gpus])
            .arg(&s.exp)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|st| st["step"] == "memory")
            .unwrap()
            .clone()
    };
    let memory = |s: &Setup| memory_at(s, "1");
    let texts = |st: &serde_json::Value| {
        st["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["text"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(memory(&s)["status"], "not-measured");
    let reserved = "echo '[Rank 0] (after 2 iterations) memory (MB) | allocated: 30000.00 | max allocated: 40000.00 | reserved: 51000.00 | max reserved: 52000.00'";
    profile(
        &s,
        "fits",
        &format!(
            "{ITER_FN}it 1 100.0; it 2 100.0\n{reserved}\nfor i in $(seq 3 8); do sleep 0.1; it $i 100.0; done\n"
        ),
    );
    profile(
        &s,
        "oom",
        &format!(
            "{ITER_FN}it 1 900.0; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB.' >&2; exit 1"
        ),
    );
    profile(
        &s,
        "stand-in",
        &format!(
            "{ITER_FN}it 1 100.0; it 2 100.0\n{reserved}\nfor i in $(seq 3 8); do it $i 100.0; done\n"
        ),
    );
    let caps = "capabilities:\n  stand_in: true\n";
    let path = s.config_home.join("primus-tune/profiles/stand-in.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}{caps}")).unwrap();

    // sampled from the recorded MI300X (192 GiB): the step says how much of the GPU it used
    let v = run_on_recorded_mi300x(
        &s,
        50,
        &[
            "--profile",
            "fits",
            "--ci-target",
            "0",
            "--max-iters",
            "8",
            "--gpus",
            "1",
        ],
    );
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["world"], 1, "{v}");
    let st = memory(&s);
    assert_eq!(st["status"], "done", "{st}");
    let t = texts(&st);
    assert!(
        t.contains("measured: it fits: trial 1 ran these settings on 1 GPU with fits, peak 50.8 GiB of 192.0 GiB (26 %) (allocator reserved"),
        "{t}"
    );
    // other settings, or a CPU stand-in's peak, are not this config's
    let (code, v) = run_json(&s, "oom", &["--gpus", "1", "--set", "micro_batch_size=1"]);
    assert_eq!(code, 3, "{v}");
    let (code, v) = run_json(
        &s,
        "stand-in",
        &["--gpus", "1", "--max-iters", "8", "--ci-target", "0"],
    );
    assert_eq!(code, 0, "{v}");
    let t = texts(&memory(&s));
    assert!(t.contains("trial 1 ran these settings"), "{t}");
    // a peak per GPU holds for its world: at two GPUs it is not measured
    let at_two = memory_at(&s, "2");
    assert_eq!(at_two["status"], "not-measured", "{at_two}");
    // the newest that ran it as it is ran out of memory
    let (code, v) = run_json(&s, "oom", &["--gpus", "1"]);
    assert_eq!(code, 3, "{v}");
    let st = memory(&s);
    assert_eq!(st["status"], "needs-attention", "{st}");
    let todo = st["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "todo")
        .unwrap_or_else(|| panic!("{st}"));
    assert_eq!(todo["rule"], "fit-memory");
    assert!(
        todo["text"].as_str().unwrap().starts_with(
            "measured: trial 4 (oom) ran out of GPU memory with these settings on 1 GPU"
        ),
        "{todo}"
    );
}

/// A profile whose `GPUS_PER_NODE` is not a count is refused before anything starts (exit 2),
/// naming the variable and the profile; no trial is stored.
#[test]
fn a_profile_s_world_variable_that_is_not_a_count_is_refused_before_launch() {
    let s = setup();
    common::write_profile(
        &s.config_home,
        "g8",
        "echo launched",
        "env:\n  GPUS_PER_NODE: \"eight\"\n",
    );
    let out = bin(&s)
        .arg("run")
        .arg(&s.exp)
        .args(["--profile", "g8", "--no-telemetry"])
        .env_remove("GPUS_PER_NODE")
        .env_remove("NNODES")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("GPUS_PER_NODE=\"eight\" (the env: of profile g8) is not a count"),
        "{err}"
    );
    let listed = bin(&s)
        .args(["trials", "--json", "--config"])
        .arg(&s.exp)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        !text.contains("\"profile\":\"g8\""),
        "a trial was stored: {text}"
    );
}

/// The start-up (launch → first iteration) is measured and left out of the telemetry summary,
/// which covers the steady iterations: a workload that waits 1.5 s before its first iteration,
/// sampled every 100 ms from the recorded MI300X sysfs tree.
#[test]
fn the_start_up_is_reported_and_left_out_of_the_telemetry_summary() {
    let s = setup();
    profile(
        &s,
        "slow-start",
        &format!("{ITER_FN}sleep 1.5\nfor i in $(seq 1 12); do it $i 100.0; sleep 0.1; done\n"),
    );
    let v = run_on_recorded_mi300x(
        &s,
        100,
        &[
            "--profile",
            "slow-start",
            "--ci-target",
            "0",
            "--max-iters",
            "12",
        ],
    );
    // The result carries its summary's fields at the top level.
    let summary = &v;
    let startup = summary["startup_s"].as_f64().expect("start-up measured");
    assert!((1.4..10.0).contains(&startup), "{summary}");
    let in_summary = summary["telemetry"][0]["samples"]
        .as_u64()
        .expect("GPU 0 sampled");
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    let id = v["trial_id"].as_i64().unwrap();
    let stored = store
        .samples(id)
        .unwrap()
        .iter()
        .filter(|x| !x.gpus.is_empty())
        .count() as u64;
    // About 15 samples of start-up are stored but not summarised.
    assert!(
        stored >= in_summary + 10,
        "stored {stored} snapshots, the summary used {in_summary}"
    );
    // The figures cover the steady iterations (10 × 100 ms after two of warm-up at least).
    assert_eq!(summary["telemetry_span"], "steady", "{summary}");
    assert!(
        in_summary <= 13,
        "{in_summary} samples for about 1 s at 100 ms"
    );
}

/// The `SigIgn` mask of a `/proc/<pid>/status` text.
fn sig_ign(status: &str) -> u64 {
    let line = status
        .lines()
        .find(|l| l.starts_with("SigIgn:"))
        .unwrap_or_else(|| panic!("no SigIgn in {status}"));
    u64::from_str_radix(line["SigIgn:".len()..].trim(), 16).unwrap()
}

/// Started with SIGHUP, SIGINT, SIGQUIT and SIGTERM ignored (as `nohup` or a background job
/// starts it), primus-tune still gives the workload the default actions, so a shell launcher
/// stops on the trial's stop signals.
#[test]
fn the_workload_starts_with_default_signal_actions() {
    let s = setup();
    profile(
        &s,
        "signals",
        &format!(
            "{ITER_FN}grep -E 'SigIgn|SigBlk' /proc/self/status > \"$1/signals.txt\"\nfor i in $(seq 1 4); do it $i 10.0; done\n"
        ),
    );
    const IGNORE: &str = "trap '' HUP INT QUIT TERM; exec \"$0\" \"$@\"";
    // HUP, INT, QUIT, TERM: bits 0, 1, 2 and 14.
    let stop_bits: u64 = 0b111 | 1 << 14;
    // The wrapper does make its program ignore them.
    let probe = std::process::Command::new("sh")
        .args(["-c", IGNORE, "cat", "/proc/self/status"])
        .output()
        .unwrap();
    let inherited = sig_ign(&String::from_utf8_lossy(&probe.stdout));
    assert_eq!(inherited & stop_bits, stop_bits, "{inherited:x}");

    let bin_path = assert_cmd::cargo::cargo_bin("primus-tune");
    let mut c = plain(&s, "sh");
    c.args(["-c", IGNORE])
        .arg(&bin_path)
        .arg("run")
        .arg(&s.exp)
        .args([
            "--profile",
            "signals",
            "--json",
            "--max-iters",
            "4",
            "--ci-target",
            "0",
        ]);
    let out = c.output().unwrap();
    let v = result_line(&out.stdout, &out.stderr);
    let dir = PathBuf::from(v["trial_dir"].as_str().unwrap());
    let text = std::fs::read_to_string(dir.join("signals.txt")).unwrap();
    let ignored = sig_ign(&text);
    assert_eq!(
        ignored & stop_bits,
        0,
        "the workload ignores {ignored:x}: {text}"
    );
    let blocked = text
        .lines()
        .find(|l| l.starts_with("SigBlk:"))
        .map(|l| u64::from_str_radix(l["SigBlk:".len()..].trim(), 16).unwrap());
    assert_eq!(blocked, Some(0), "{text}");
}

/// primus-tune killed with SIGKILL mid-trial cannot end its trial; the next command that opens
/// the workspace marks it `interrupted` (its runner is gone), so no trial stays `running`.
#[test]
fn a_trial_whose_runner_was_killed_shows_interrupted() {
    let s = setup();
    profile(
        &s,
        "endless",
        &format!("{ITER_FN}i=1; while true; do it $i 100.$i; i=$((i+1)); sleep 0.2; done"),
    );
    let exe = assert_cmd::cargo::cargo_bin("primus-tune");
    let mut child = plain(&s, exe)
        .arg("run")
        .arg(&s.exp)
        .args(["--profile", "endless", "--json", "--no-telemetry"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = s.ws.join("trials/1/workload.pid");
    let t = Instant::now();
    while !pid_file.is_file() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(600));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The workload outlives a SIGKILLed runner (its own process group): end it here.
    let pgid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    assert_eq!(
        store.trial(1).unwrap().unwrap().status.to_string(),
        "running"
    );
    drop(store);
    let trials = || -> serde_json::Value {
        let out = bin(&s)
            .args(["trials", "--json", "--config"])
            .arg(&s.exp)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let v = trials();
    assert_eq!(v[0]["status"], "interrupted", "{v}");
    // And a trial whose runner lives is left running: this test process stands in for one.
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    let id = store
        .insert_trial(&primus_tune::store::NewTrial {
            config_path: s.exp.clone(),
            config_hash: "x".into(),
            trial_dir: s.ws.join("trials/x"),
            ..Default::default()
        })
        .unwrap();
    drop(store);
    let v = trials();
    let row = v
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(row["status"], "running", "{row}");
}

/// After an out-of-memory line the workload gets 2 s (the other ranks' lines) to exit by
/// itself, then is stopped at once (the stop escalates a second apart): the trial ends as
/// `oom` with that line within 5 s, not after the tens of seconds a real Megatron takes.
#[test]
fn an_oom_line_ends_the_trial_within_the_failure_grace() {
    let s = setup();
    profile(
        &s,
        "oom-lingers",
        &format!(
            "{ITER_FN}it 1 100.0; it 2 100.0; it 3 100.0\necho 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'\nsleep 60\n"
        ),
    );
    let t = Instant::now();
    let (code, v) = run_json(&s, "oom-lingers", &[]);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(
        took >= Duration::from_secs(2),
        "waited for the other ranks: {took:?}"
    );
    assert_ne!(code, 0);
    common::assert_failed_with(&v, "oom", "OutOfMemoryError");
    assert_eq!(v["stop_reason"], "failure", "{v}");
    assert!(group_gone(Path::new(v["trial_dir"].as_str().unwrap())));
}

/// A failure line the training survives (an iteration follows) does not stop it, even when a
/// later step pauses longer than the grace.
#[test]
fn a_failure_line_followed_by_iterations_is_survived() {
    let s = setup();
    profile(
        &s,
        "survives",
        &format!(
            "{ITER_FN}it 1 100.0\necho 'torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error'\nit 2 100.0; it 3 100.0; sleep 6; it 4 100.0; it 5 100.0\n"
        ),
    );
    let (code, v) = run_json(&s, "survives", &["--max-iters", "5", "--ci-target", "0"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["iterations"], 5, "{v}");
}

/// `--db` naming another database in a workspace that has trials already: the new trial gets a
/// folder of its own (`trials/1-2`) instead of failing on the other's `trials/1`, and no
/// staging folder is left behind.
#[test]
fn a_second_database_beside_a_workspace_does_not_collide_with_its_trial_folders() {
    let s = setup();
    profile(
        &s,
        "quick",
        &format!("{ITER_FN}it 1 100.0; it 2 100.0; it 3 100.0"),
    );
    let (code, first) = run_json(&s, "quick", &[]);
    assert_eq!(code, 0, "{first}");
    let other = s.ws.join("other.db");
    let (code, v) = run_json(&s, "quick", &["--db", other.to_str().unwrap()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["trial_id"], 1);
    let dir = PathBuf::from(v["trial_dir"].as_str().unwrap());
    assert_eq!(dir, s.ws.join("trials/1-2"));
    assert_ne!(first["trial_dir"], v["trial_dir"]);
    assert!(s.ws.join("trials/1/workload.pid").is_file());
    let names: Vec<String> = std::fs::read_dir(s.ws.join("trials"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("new-")), "{names:?}");
}

/// A lint-clean config (sizes within `size-range`) whose CPU-proxy shape needs more host memory
/// than there is is refused before launch (exit 2, the sizes to change), instead of aborting the
/// proxy on its allocation; nothing is stored.
#[test]
fn a_proxy_shape_larger_than_the_host_is_refused_before_launch() {
    let s = setup();
    let out = bin(&s)
        .arg("run")
        .arg(&s.exp)
        .args(["--profile", "proxy-cpu", "--set", "hidden_size=1000000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("GiB of host memory") && err.contains("hidden_size"),
        "{err}"
    );
    assert!(
        !s.ws.join("trials.db").exists() || {
            let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
            store.trial(1).unwrap().is_none()
        }
    );
}

/// Another process holds the database's write lock for 30 s (twice the busy timeout of one
/// attempt) while a trial runs: its writes wait the lock out and the figures are stored.
#[test]
fn a_database_locked_for_30_s_does_not_lose_the_measurement() {
    let s = setup();
    profile(
        &s,
        "quick",
        &format!("{ITER_FN}it 1 100.0; it 2 100.0; it 3 100.0; it 4 100.0; it 5 100.0"),
    );
    let (code, _) = run_json(&s, "quick", &[]);
    assert_eq!(code, 0);
    let db = s.ws.join("trials.db");
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_secs(30));
        conn.execute_batch("COMMIT").unwrap();
    });
    locked_rx.recv().unwrap();
    let t = Instant::now();
    let (code, v) = run_json(&s, "quick", &["--max-iters", "5", "--ci-target", "0"]);
    holder.join().unwrap();
    assert_eq!(code, 0, "{v}");
    assert!(
        t.elapsed() >= Duration::from_secs(25),
        "it waited for the lock"
    );
    assert_eq!(v["status"], "completed", "{v}");
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    let id = v["trial_id"].as_i64().unwrap();
    let row = store.trial(id).unwrap().unwrap();
    assert_eq!(row.status.to_string(), "completed");
    assert_eq!(store.iterations(id).unwrap().len(), 5);
    assert!(row.median_step_ms.is_some());
}

/// The database is held by another process from the middle of a trial until well after its
/// end, longer than primus-tune's patience: the result is kept in the trial's folder, the run
/// still reports it, and the next command that opens the workspace stores it.
#[test]
fn a_database_unavailable_at_the_end_keeps_the_result_for_the_next_access() {
    let s = setup();
    profile(
        &s,
        "paused",
        &format!(
            "{ITER_FN}it 1 100.0; it 2 100.0; it 3 100.0; touch \"$1/ready\"; \
             while [ ! -f \"$1/go\" ]; do sleep 0.05; done; it 4 100.0; it 5 100.0"
        ),
    );
    let exe = assert_cmd::cargo::cargo_bin("primus-tune");
    let child = plain(&s, &exe)
        .arg("run")
        .arg(&s.exp)
        .args([
            "--profile",
            "paused",
            "--json",
            "--no-telemetry",
            "--max-iters",
            "5",
        ])
        .env(primus_tune::store::PATIENCE_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let dir = s.ws.join("trials/1");
    let t = Instant::now();
    while !dir.join("ready").is_file() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the workload never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let db = s.ws.join("trials.db");
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
        locked_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(Duration::from_secs(60));
        conn.execute_batch("COMMIT").unwrap();
    });
    locked_rx.recv().unwrap();
    std::fs::write(dir.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v = result_line(&out.stdout, &out.stderr);
    assert_eq!(out.status.code(), Some(0), "{v} {err}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["iterations"], 5, "{v}");
    let kept = dir.join(primus_tune::run::trial::pending::FILE);
    assert!(kept.is_file(), "{err}");
    assert!(err.contains("the trial database is unavailable"), "{err}");
    // Still locked: the database does not have the result yet.
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    let out = bin(&s)
        .args(["trials", "--all", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == 1)
        .cloned()
        .unwrap();
    assert_eq!(row["status"], "completed", "{row}");
    assert!(!kept.exists(), "imported and removed");
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    assert_eq!(store.iterations(1).unwrap().len(), 5);
    assert!(store.trial(1).unwrap().unwrap().median_step_ms.is_some());
}

/// The runner set `train_iters` to the budget, so the workload ends by itself after the last
/// iteration: its clean-up (a final save, Primus' own exit) runs, and its exit status is kept.
/// One that does not end within the end grace is stopped then, its measurement complete.
#[test]
fn a_workload_that_ends_at_the_budget_ends_by_itself() {
    let s = setup();
    profile(
        &s,
        "cleans-up",
        &format!(
            "{ITER_FN}for i in 1 2 3 4 5; do it $i $((100 + 40 * (i % 2))).0; done\nsleep 1.5\ntouch \"$1/cleaned-up\"\nexit 0\n"
        ),
    );
    let (code, v) = run_json(&s, "cleans-up", &["--max-iters", "5", "--ci-target", "0"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
    assert_eq!(v["stop_reason"], "exited", "{v}");
    assert!(
        trial_dir(&v).join("cleaned-up").is_file(),
        "cut before its clean-up: {v}"
    );

    profile(
        &s,
        "lingers",
        &format!(
            "{ITER_FN}for i in 1 2 3 4 5; do it $i $((100 + 40 * (i % 2))).0; done\nsleep 60\n"
        ),
    );
    let t = Instant::now();
    let (code, v) = run_json(
        &s,
        "lingers",
        &[
            "--max-iters",
            "5",
            "--ci-target",
            "0",
            "--end-grace-seconds",
            "1",
        ],
    );
    let took = t.elapsed();
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["stop_reason"], "max-iters", "{v}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
    assert!(group_gone(&trial_dir(&v)));
}

/// `trials --workspace DIR` (and `studies`) without an experiment reads the whole workspace,
/// not the bundled example's trials.
#[test]
fn a_workspace_named_without_an_experiment_lists_all_of_it() {
    let s = setup();
    profile(
        &s,
        "quick",
        &format!("{ITER_FN}it 1 100.0; it 2 100.0; it 3 100.0"),
    );
    let (code, v) = run_json(&s, "quick", &[]);
    assert_eq!(code, 0, "{v}");
    let out = bin(&s)
        .env_remove("PRIMUS_TUNE_WORKSPACE")
        .args(["trials", "--json", "--workspace"])
        .arg(&s.ws)
        .output()
        .unwrap();
    assert!(out.status.success());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&serde_json::Value> = rows.as_array().unwrap().iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, [&v["trial_id"]], "{rows}");
    let out = bin(&s)
        .env_remove("PRIMUS_TUNE_WORKSPACE")
        .args(["trials", "--workspace"])
        .arg(&s.ws)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("llama3_8B-BF16-pretrain.yaml"),
        "an experiment column: {text}"
    );
}
