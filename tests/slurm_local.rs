//! The local two-node Slurm cluster the Slurm tests run on (scripts/slurm-local.sh), and
//! primus-tune's Slurm layer on it (`run::launch::slurm`): a batch script it renders runs one task per
//! node, a job's state is followed from pending (with its reason) through running to its end,
//! and a cancelled job leaves `squeue` and no process behind. Skipped, saying why, where the
//! cluster cannot run (not root, Slurm not installable).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use primus_tune::run::launch::scheduler::{JobEnd, JobSpec, JobState, Scheduler};
use primus_tune::run::launch::slurm::{self, Slurm};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-local.sh")
}

/// A running local cluster; stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Started on a port base of its own (`slot` keeps concurrent tests apart), or None when it
    /// cannot run here (said on stderr).
    fn start(slot: u32) -> Option<Cluster> {
        let uid = Command::new("id").arg("-u").output().unwrap();
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            eprintln!("skipped: the local Slurm cluster needs root (SlurmUser=root)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = 17_800 + (std::process::id() % 100) * 12 + slot * 3;
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(dir.path().join("slurm"))
            .env("PT_SLURM_PORT", port.to_string())
            .output()
            .unwrap();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("apt-get install") || err.contains("not installed") {
                eprintln!("skipped: Slurm cannot be installed here: {err}");
                return None;
            }
            panic!("the cluster did not start: {err}");
        }
        Some(Cluster { dir })
    }

    fn folder(&self) -> PathBuf {
        self.dir.path().join("slurm")
    }

    fn conf(&self) -> PathBuf {
        self.folder().join("slurm.conf")
    }

    /// Processes whose command line names this cluster's folder.
    fn left(&self) -> Vec<String> {
        let out = Command::new("pgrep")
            .args(["-af", &self.folder().display().to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn stop(&self) {
        let ok = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.folder())
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.folder())
            .status();
    }
}

/// Waits up to `limit` for the job's state to satisfy `want`; the states seen.
fn follow(
    sl: &Slurm,
    job: &str,
    limit: Duration,
    want: impl Fn(&JobState) -> bool,
) -> Vec<JobState> {
    let end = Instant::now() + limit;
    let mut seen: Vec<JobState> = Vec::new();
    loop {
        let s = sl.state(job).unwrap();
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if want(&s) || Instant::now() > end {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_two_node_cluster_starts_runs_a_task_per_node_and_stops_clean() {
    let Some(c) = Cluster::start(0) else { return };
    let run = Command::new("timeout")
        .args([
            "60",
            "srun",
            "-N2",
            "-n2",
            "bash",
            "-c",
            "echo $SLURM_PROCID $SLURMD_NODENAME",
        ])
        .env("SLURM_CONF", c.conf())
        .output()
        .unwrap();
    let mut lines: Vec<String> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    c.stop();
    assert_eq!(
        lines,
        ["0 n1", "1 n2"],
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(c.left().is_empty(), "left running: {:?}", c.left());
}

#[test]
fn a_rendered_job_runs_per_node_waits_pending_and_is_cancelled_clean() {
    let Some(c) = Cluster::start(1) else { return };
    let sl = Slurm {
        conf: Some(c.conf()),
    };
    let work = c.dir.path().join("trial");
    std::fs::create_dir_all(&work).unwrap();
    let spec = |name: &str| JobSpec {
        nodes: 2,
        job_name: name.into(),
        ..JobSpec::default()
    };
    let submit = |name: &str, argv: &[&str]| {
        let dir = work.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let text = slurm::batch_script(
            &spec(name),
            &argv.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            &[
                ("PT_MARK".into(), format!("{name} $x")),
                ("PRIMUS_TUNE_TRIAL_DIR".into(), dir.display().to_string()),
            ],
            &dir,
            &dir,
        );
        let path = dir.join("job.sbatch");
        std::fs::write(&path, text).unwrap();
        sl.submit_script(&path).unwrap()
    };
    let a = submit(
        "a",
        &[
            "bash",
            "-c",
            "echo \"$SLURM_PROCID $SLURMD_NODENAME $PT_MARK\"; sleep 4",
        ],
    );
    let b = submit("b", &["sleep", "100.0417"]);
    let seen_a = follow(&sl, &a, Duration::from_secs(60), |s| s.is_over());
    assert!(seen_a.contains(&JobState::Running), "{seen_a:?}");
    assert_eq!(seen_a.last(), Some(&JobState::Completed), "{seen_a:?}");
    // One log per node, named by the node's index in the job; the distributed variables set.
    let node = |n: u32| std::fs::read_to_string(slurm::node_log(&work.join("a"), n)).unwrap();
    assert_eq!(node(0).trim(), "0 n1 a $x");
    assert_eq!(node(1).trim(), "1 n2 a $x");
    // b waited for a's nodes: it was pending with a reason, then ran.
    let seen_b = follow(&sl, &b, Duration::from_secs(60), |s| {
        *s == JobState::Running
    });
    assert!(
        seen_b
            .iter()
            .any(|s| matches!(s, JobState::Pending { reason } if !reason.is_empty()))
            || seen_b.first() == Some(&JobState::Running),
        "{seen_b:?}"
    );
    assert!(
        sl.cancel(&b, Duration::from_secs(30)).unwrap(),
        "still in squeue"
    );
    assert_eq!(sl.state(&b).unwrap(), JobState::Ended(JobEnd::Cancelled));
    // The job left squeue; its step's processes end within Slurm's KillWait (5 s here).
    let end = Instant::now() + Duration::from_secs(15);
    let left = loop {
        let p = Command::new("pgrep")
            .args(["-f", "sleep 100.0417"])
            .output()
            .unwrap();
        if p.stdout.is_empty() || Instant::now() > end {
            break p.stdout;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(left.is_empty(), "a job step outlived the cancel by 15 s");
    c.stop();
}

// ---------------------------------------------------------------------------------------------
// Trials and sweeps on the cluster, through the primus-tune binary (`--slurm`).

const BIN: &str = env!("CARGO_BIN_EXE_primus-tune");

/// A workspace beside the cluster, and primus-tune commands that use both.
struct Ws {
    dir: tempfile::TempDir,
    conf: PathBuf,
    exp: PathBuf,
}

/// A small dense model, so the CPU proxy of a debug build steps in tens of milliseconds.
const SMALL: &[&str] = &[
    "--set",
    "micro_batch_size=1",
    "--set",
    "global_batch_size=8",
    "--set",
    "num_layers=2",
    "--set",
    "seq_length=512",
    "--set",
    "max_position_embeddings=512",
    "--set",
    "hidden_size=1024",
    "--set",
    "ffn_hidden_size=2048",
    "--set",
    "num_attention_heads=4",
    "--set",
    "num_query_groups=2",
];

impl Ws {
    /// A space file of two micro batches (1, 2) in the test's folder: its path.
    fn two_micro_batches(&self) -> String {
        let space = self.dir.path().join("two.yaml");
        std::fs::write(
            &space,
            "name: two\ndescription: two micro batches\nknobs:\n  - flag: micro_batch_size\n    \
             values: [1, 2]\n    memory: increasing\n",
        )
        .unwrap();
        space.display().to_string()
    }

    fn new(c: &Cluster) -> Ws {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ex");
        primus_tune::util::bundled::extract(&root).unwrap();
        Ws {
            exp: root.join("experiments/llama3_8B-BF16-pretrain.yaml"),
            dir,
            conf: c.conf(),
        }
    }

    /// primus-tune `args` on the small model (`run`, `sweep`) or as given.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        if matches!(args.first(), Some(&"run") | Some(&"sweep")) {
            cmd.arg(&self.exp).args(SMALL);
        }
        cmd.arg("--workspace")
            .arg(self.dir.path())
            .env("SLURM_CONF", &self.conf)
            .env("NO_COLOR", "1")
            .env("PRIMUS_TUNE_CONFIG", self.dir.path().join("no-config.toml"))
            .current_dir(self.dir.path());
        cmd
    }

    fn trial(&self, id: i64) -> serde_json::Value {
        let out = self
            .cmd(&["trials", "show", &id.to_string(), "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn sl(&self) -> Slurm {
        Slurm {
            conf: Some(self.conf.clone()),
        }
    }

    /// Job ids `squeue` lists.
    fn queue(&self) -> Vec<String> {
        let out = Command::new("squeue")
            .args(["-h", "-o", "%i"])
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// JSON events a `--json` command printed.
fn events(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Processes whose command line contains `s`.
fn procs(s: &str) -> Vec<String> {
    let out = Command::new("pgrep").args(["-af", s]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("pgrep"))
        .map(str::to_string)
        .collect()
}

/// Waits up to `limit` for `f` to hold.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    f()
}

#[test]
fn a_proxy_trial_on_two_nodes_is_followed_to_its_end_with_telemetry_from_each_node() {
    let Some(c) = Cluster::start(2) else { return };
    let ws = Ws::new(&c);
    let out = ws
        .cmd(&[
            "run",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--nodes",
            "2",
            "--max-iters",
            "20",
            // All 20 iterations, so the job completes on its own (a steady step would stop the
            // trial and cancel it), and a poll quick enough to see it running: the proxy's 20
            // iterations can end within one poll of a second.
            "--ci-target",
            "0",
            "--slurm-poll",
            "0.2",
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let ev = events(&out.stdout);
    // The job's states as they came: submitted, running on both nodes, completed.
    let states: Vec<&str> = ev
        .iter()
        .filter(|e| e["event"] == "job")
        .filter_map(|e| e["state"].as_str())
        .collect();
    assert_eq!(states.first(), Some(&"SUBMITTED"), "{states:?}");
    assert!(states.contains(&"RUNNING"), "{states:?}");
    assert_eq!(states.last(), Some(&"COMPLETED"), "{states:?}");
    // One proxy per node, each named by its rank and node; the last rank's log (node 1 of
    // the job) is the trial's: its iterations are the stored ones.
    let dir = ws.dir.path().join("trials/1");
    let node = |n: u32| std::fs::read_to_string(slurm::node_log(&dir, n)).unwrap();
    assert!(
        node(0).contains("Slurm rank 0 of 2, node 0 (n1)"),
        "{}",
        node(0)
    );
    assert!(
        node(1).contains("Slurm rank 1 of 2, node 1 (n2)"),
        "{}",
        node(1)
    );
    let t = ws.trial(1);
    assert_eq!(t["status"], "completed", "{t}");
    let job = &t["job"];
    assert_eq!(job["scheduler"], "slurm");
    assert_eq!(job["state"], "COMPLETED");
    assert_eq!(job["node_list"], serde_json::json!(["n1", "n2"]));
    assert!(t["iterations_stored"].as_u64().unwrap() >= 10, "{t}");
    let s = &t["summary"];
    assert!(s["median_step_ms"].as_f64().unwrap() > 0.0);
    assert!(s["pending_s"].as_f64().is_some(), "{s}");
    let nodes = s["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(names, ["n1", "n2"]);
    for n in nodes {
        assert!(n["iterations"].as_u64().unwrap() >= 10, "{n}");
        assert!(n["samples"].as_u64().unwrap() >= 1, "{n}");
    }
    // The slowest node is flagged when one stands above the other; equal medians (the two
    // proxies often step alike) flag none.
    let medians: Vec<f64> = nodes
        .iter()
        .map(|n| n["median_step_ms"].as_f64().unwrap())
        .collect();
    let flagged = nodes.iter().filter(|n| n["slowest"] == true).count();
    let expected = usize::from(medians[0] != medians[1]);
    assert_eq!(flagged, expected, "{nodes:?}");
    // The store holds telemetry samples of both nodes.
    let store =
        primus_tune::store::Store::open(&ws.dir.path().join(primus_tune::store::WORKSPACE_DB))
            .unwrap();
    let mut seen: Vec<String> = store
        .samples(1)
        .unwrap()
        .into_iter()
        .filter_map(|s| s.node)
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen, ["n1", "n2"]);
    assert!(ws.queue().is_empty());
    c.stop();
}

#[test]
fn a_trial_stopped_mid_run_cancels_its_job_and_leaves_nothing_running() {
    let Some(c) = Cluster::start(3) else { return };
    let ws = Ws::new(&c);
    let mut child = ws
        .cmd(&[
            "run",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--nodes",
            "2",
            "--max-iters",
            "100000",
            "--ci-target",
            "0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let dir = ws.dir.path().join("trials/1");
    let log = slurm::node_log(&dir, 1);
    assert!(
        wait_for(Duration::from_secs(60), || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.matches("iteration").count() >= 3)),
        "the job never ran"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    assert!(ws.queue().is_empty(), "still queued: {:?}", ws.queue());
    let resolved = dir.join("resolved.json").display().to_string();
    assert!(
        wait_for(Duration::from_secs(15), || procs(&resolved).is_empty()),
        "left running: {:?}",
        procs(&resolved)
    );
    let t = ws.trial(1);
    assert_eq!(t["status"], "stopped", "{t}\n{err}");
    assert_eq!(t["failure"]["class"], "killed-by-user", "{t}");
    assert_eq!(t["job"]["state"], "CANCELLED", "{t}");
    c.stop();
}

#[test]
fn a_job_killed_at_its_time_limit_fails_as_slurm_timeout() {
    let Some(c) = Cluster::start(4) else { return };
    let ws = Ws::new(&c);
    let out = ws
        .cmd(&[
            "run",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--time",
            "1",
            "--max-iters",
            "100000",
            "--ci-target",
            "0",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let t = ws.trial(1);
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["failure"]["class"], "job-time-limit", "{t}\n{err}");
    assert_eq!(t["job"]["state"], "TIMEOUT", "{t}");
    // It measured until Slurm ended it: the figures are kept, labelled by the failure.
    assert!(t["iterations_stored"].as_u64().unwrap() > 0);
    assert!(ws.queue().is_empty());
    c.stop();
}

#[test]
fn a_trial_waits_pending_with_slurms_reason_then_runs() {
    let Some(c) = Cluster::start(5) else { return };
    let ws = Ws::new(&c);
    // Both nodes held by another job.
    let hold = Command::new("sbatch")
        .args(["--parsable", "-N2", "--wrap", "sleep 8", "-o", "/dev/null"])
        .env("SLURM_CONF", &ws.conf)
        .output()
        .unwrap();
    assert!(hold.status.success());
    let held = String::from_utf8_lossy(&hold.stdout).trim().to_string();
    assert!(wait_for(Duration::from_secs(30), || {
        ws.sl().state(&held).unwrap() == JobState::Running
    }));
    let out = ws
        .cmd(&[
            "run",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--max-iters",
            "12",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = events(&out.stdout);
    let pending: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| e["event"] == "job" && e["state"] == "PENDING")
        .collect();
    assert!(
        pending
            .iter()
            .any(|e| e["reason"].as_str().is_some_and(|r| !r.is_empty())),
        "no pending state with a reason: {ev:?}"
    );
    let t = ws.trial(1);
    assert_eq!(t["status"], "completed");
    // The queue wait is its own figure, not start-up or wall time.
    let pend = t["summary"]["pending_s"].as_f64().unwrap();
    assert!(pend >= 2.0, "pending {pend} s");
    assert!(t["wall_s"].as_f64().unwrap() < pend + 60.0);
    assert!(t["summary"]["startup_s"].as_f64().unwrap() < pend);
    c.stop();
}

#[test]
fn a_sweep_runs_two_candidates_as_concurrent_jobs_and_resume_reattaches_to_a_running_job() {
    let Some(c) = Cluster::start(6) else { return };
    let ws = Ws::new(&c);
    let space = ws.two_micro_batches();
    let sweep = |iters: &'static str, extra: &[&str]| {
        let mut a = vec![
            "sweep",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--first-iters",
            iters,
            "--max-iters",
            iters,
            "--allow-unmodeled",
        ];
        a.extend_from_slice(extra);
        ws.cmd(&a)
    };
    let out = sweep(
        "60",
        &["--space", &space, "--name", "par", "--parallel", "2"],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Both first trials ran as jobs at the same time.
    let (a, b) = (ws.trial(1), ws.trial(2));
    let span = |t: &serde_json::Value| {
        (
            t["job"]["started_ms"].as_u64().unwrap(),
            t["job"]["ended_ms"].as_u64().unwrap(),
        )
    };
    let ((a0, a1), (b0, b1)) = (span(&a), span(&b));
    assert!(
        a0 < b1 && b0 < a1,
        "not concurrent: {a0}-{a1} and {b0}-{b1}\n{err}"
    );
    assert_ne!(a["job"]["id"], b["job"]["id"]);

    // A sweep whose runner dies mid-trial: its job runs on; the resume follows that job.
    let mut child = sweep(
        "2000",
        &["--space", &space, "--name", "res", "--max-trials", "1"],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    // The trial whose job runs: the folder whose last rank has printed iterations.
    let running = |ws: &Ws| -> Option<String> {
        std::fs::read_dir(ws.dir.path().join("trials"))
            .ok()?
            .flatten()
            .find(|d| {
                !["1", "2", "3", "4"].iter().any(|n| d.file_name() == *n)
                    && std::fs::read_to_string(slurm::node_log(&d.path(), 0))
                        .is_ok_and(|t| t.matches("iteration").count() >= 3)
            })
            .map(|d| d.file_name().to_string_lossy().into_owned())
    };
    let before: std::collections::BTreeSet<String> =
        std::fs::read_dir(ws.dir.path().join("trials"))
            .unwrap()
            .flatten()
            .map(|d| d.file_name().to_string_lossy().into_owned())
            .collect();
    let mut trial = None;
    assert!(
        wait_for(Duration::from_secs(60), || {
            trial = running(&ws).filter(|t| !before.contains(t));
            trial.is_some() && ws.queue().len() == 1
        }),
        "the trial's job never ran"
    );
    let trial: i64 = trial.unwrap().parse().unwrap();
    let job = ws.queue()[0].clone();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        ws.queue(),
        std::slice::from_ref(&job),
        "the job should outlive its runner"
    );
    assert_eq!(ws.trial(trial)["status"], "running");
    // Another budget is refused (exit 4, a conflict), naming the study's own; nothing is
    // submitted beside the job.
    let out = sweep("60", &["--resume", "res", "--max-trials", "1"])
        .output()
        .unwrap();
    let refused = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{refused}");
    assert!(
        refused.contains("--first-iters 2000 --max-iters 2000"),
        "{refused}"
    );
    assert_eq!(ws.queue(), std::slice::from_ref(&job), "no duplicate job");
    // Without the budget, the resume reuses the study's and follows the running job.
    let out = ws
        .cmd(&[
            "sweep",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--allow-unmodeled",
            "--resume",
            "res",
            "--max-trials",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let ev = events(&out.stdout);
    // The same trial, following the same job: nothing submitted again.
    let started: Vec<i64> = ev
        .iter()
        .filter(|e| e["event"] == "trial-started")
        .filter_map(|e| e["trial_id"].as_i64())
        .collect();
    assert_eq!(started, [trial], "{ev:?}\n{err}");
    let ids: Vec<String> = ev
        .iter()
        .filter(|e| e["event"] == "job")
        .map(|e| e["id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!ids.is_empty() && ids.iter().all(|i| *i == job), "{ids:?}");
    let t = ws.trial(trial);
    assert_ne!(t["status"], "running", "{t}");
    assert_eq!(t["job"]["id"], job.as_str());
    assert!(ws.queue().is_empty());
    c.stop();
}

#[test]
fn a_profile_whose_command_submits_the_job_itself_is_followed_like_a_rendered_one() {
    let Some(c) = Cluster::start(7) else { return };
    let ws = Ws::new(&c);
    // As primus-slurm does with primus-cli: the command runs sbatch with the job's options,
    // and primus-tune follows the job sbatch names.
    let profiles = ws.dir.path().join("config/primus-tune/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("self-submit.yaml"),
        "name: self-submit\nargv: [sbatch, \"{slurm_args}\", --wrap, \
         \"srun {self} proxy --resolved {resolved} --iters 15\"]\n\
         slurm:\n  submits: true\ncapabilities:\n  launch: one-process\n",
    )
    .unwrap();
    let out = ws
        .cmd(&[
            "run",
            "--profile",
            "self-submit",
            "--max-iters",
            "15",
            "--json",
        ])
        .env("XDG_CONFIG_HOME", ws.dir.path().join("config"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let t = ws.trial(1);
    assert_eq!(t["status"], "completed", "{t}\n{err}");
    assert_eq!(t["job"]["state"], "COMPLETED", "{t}");
    assert!(t["iterations_stored"].as_u64().unwrap() >= 10, "{t}");
    assert!(ws.queue().is_empty());
    c.stop();
}

// ---------------------------------------------------------------------------------------------
// Slurm as sites run it: node failures, the job's own rendezvous, jobs that never start.

/// The pids of processes whose environment says they belong to job `job` on node `node` of the
/// cluster `conf` describes (Slurm's task and monitor steps there: every cluster numbers its
/// jobs from 1, and other tests run theirs at the same time), and their `slurmstepd` parents.
fn job_processes_on(conf: &Path, job: &str, node: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let env = String::from_utf8_lossy(&env);
        let vars: Vec<&str> = env.split('\0').collect();
        if vars.contains(&format!("SLURMD_NODENAME={node}").as_str())
            && vars.contains(&format!("SLURM_JOB_ID={job}").as_str())
            && vars.contains(&format!("SLURM_CONF={}", conf.display()).as_str())
        {
            out.push(pid);
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if let Some(pp) = ppid
                && std::fs::read_to_string(format!("/proc/{pp}/cmdline"))
                    .is_ok_and(|c| c.starts_with("slurmstepd"))
            {
                out.push(pp);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Node `node` of the cluster dies: its slurmd, and the job's steps and tasks there, are
/// killed at once (on one machine, killing slurmd alone would leave its steps running).
fn kill_node(c: &Cluster, node: &str, job: &str) {
    let pid: i32 = std::fs::read_to_string(c.folder().join(format!("pids/slurmd-{node}.pid")))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut victims = vec![pid];
    let steps = job_processes_on(&c.conf(), job, node);
    assert!(!steps.is_empty(), "no process of job {job} found on {node}");
    victims.extend(steps);
    for v in victims {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(v),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A two-node trial whose second node dies mid-run: Slurm's NODE_FAIL (with the default
/// `--no-requeue`), or its requeue (`--requeue`), ends the trial as `node-fail` naming the
/// node, its job leaves the queue, and nothing of it is left running.
fn node_failure(slot: u32, requeue: bool) {
    let Some(c) = Cluster::start(slot) else {
        return;
    };
    let ws = Ws::new(&c);
    let mut args = vec![
        "run",
        "--profile",
        "proxy-cpu",
        "--slurm",
        "--nodes",
        "2",
        "--max-iters",
        "100000",
        "--ci-target",
        "0",
        "--hang-seconds",
        "600",
        "--json",
    ];
    if requeue {
        args.push("--requeue");
    }
    let child = ws
        .cmd(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let dir = ws.dir.path().join("trials/1");
    let log = slurm::node_log(&dir, 1);
    assert!(
        wait_for(Duration::from_secs(60), || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.matches("iteration").count() >= 3)),
        "the job never ran"
    );
    let job = ws.queue()[0].clone();
    let killed = Instant::now();
    kill_node(&c, "n2", &job);
    let out = child.wait_with_output().unwrap();
    let took = killed.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    // Slurm notices after SlurmdTimeout (30 s here), requeues or fails it; the trial ends then.
    assert!(took < Duration::from_secs(150), "{took:?}\n{err}");
    let t = ws.trial(1);
    assert_eq!(t["status"], "failed", "{t}\n{err}");
    assert_eq!(t["failure"]["class"], "node-fail", "{t}\n{err}");
    let line = t["failure"]["line"].as_str().unwrap_or_default();
    assert!(line.contains("n2"), "the failed node is named: {line}");
    if requeue {
        assert!(line.contains("requeued"), "{line}");
    } else {
        assert_eq!(t["job"]["state"], "NODE_FAIL", "{t}");
    }
    assert!(
        wait_for(Duration::from_secs(30), || ws.queue().is_empty()),
        "still queued: {:?}",
        ws.queue()
    );
    let resolved = dir.join("resolved.json").display().to_string();
    assert!(
        wait_for(Duration::from_secs(20), || procs(&resolved).is_empty()),
        "left running: {:?}",
        procs(&resolved)
    );
    c.stop();
}

#[test]
fn a_node_failure_ends_the_trial_as_node_fail_naming_the_node() {
    node_failure(8, false);
}

#[test]
fn a_requeue_after_a_node_failure_ends_the_trial_and_cancels_the_job() {
    node_failure(9, true);
}

/// What each node's workload sees of the rendezvous: a profile that prints it, then runs the
/// proxy.
const RENDEZVOUS_PROFILE: &str = "name: rendezvous\nargv: [bash, -c, \
    'echo \"MP=$MASTER_PORT MA=$MASTER_ADDR\"; exec \"$0\" proxy --resolved \"$1\" --iters \"$2\"', \
    \"{self}\", \"{resolved}\", \"{iters}\"]\ncapabilities:\n  launch: one-process\n  stand_in: true\n  scaled_shape: true\n";

#[test]
fn each_job_gets_its_own_rendezvous_unless_the_trial_sets_one() {
    let Some(c) = Cluster::start(10) else { return };
    let ws = Ws::new(&c);
    let profiles = ws.dir.path().join("config/primus-tune/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(profiles.join("rendezvous.yaml"), RENDEZVOUS_PROFILE).unwrap();
    let run = |extra: &[&str]| {
        let mut a = vec![
            "run",
            "--profile",
            "rendezvous",
            "--slurm",
            "--nodes",
            "2",
            "--max-iters",
            "6",
        ];
        a.extend_from_slice(extra);
        let out = ws
            .cmd(&a)
            // What sbatch would export from the submitting shell.
            .env("MASTER_PORT", "1234")
            .env("MASTER_ADDR", "submitting-host")
            .env("XDG_CONFIG_HOME", ws.dir.path().join("config"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let seen = |trial: u32, node: u32| {
        let text = std::fs::read_to_string(slurm::node_log(
            &ws.dir.path().join(format!("trials/{trial}")),
            node,
        ))
        .unwrap();
        text.lines()
            .find(|l| l.starts_with("MP="))
            .unwrap_or_else(|| panic!("no rendezvous line: {text}"))
            .to_string()
    };
    run(&[]);
    let job: u64 = ws.trial(1)["job"]["id"].as_str().unwrap().parse().unwrap();
    let own = format!("MP={} MA=n1", 20000 + job % 20000);
    assert_eq!(seen(1, 0), own);
    assert_eq!(seen(1, 1), own, "every node meets at the first");
    // Another job, another port.
    run(&[]);
    let job2: u64 = ws.trial(2)["job"]["id"].as_str().unwrap().parse().unwrap();
    assert_ne!(seen(2, 0), own);
    assert_eq!(seen(2, 0), format!("MP={} MA=n1", 20000 + job2 % 20000));
    // The trial's own --env wins.
    run(&["--env", "MASTER_PORT=29555"]);
    assert_eq!(seen(3, 1), "MP=29555 MA=n1");
    c.stop();
}

#[test]
fn a_job_that_can_never_start_fails_at_once_and_a_long_wait_at_its_limit() {
    let Some(c) = Cluster::start(11) else { return };
    let ws = Ws::new(&c);
    // Four nodes of a two-node partition (the global batch of 8 splits over their 4 proxy
    // processes): Slurm accepts the job and keeps it pending for ever (`PartitionConfig` here;
    // `PartitionNodeLimit` where partition limits are enforced).
    let started = Instant::now();
    let out = ws
        .cmd(&[
            "run",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--nodes",
            "4",
            "--max-iters",
            "6",
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let t = ws.trial(1);
    assert_eq!(t["failure"]["class"], "unschedulable", "{t}\n{err}");
    let line = t["failure"]["line"].as_str().unwrap_or_default();
    assert!(
        line.contains("PartitionConfig") || line.contains("PartitionNodeLimit"),
        "{line}"
    );
    assert!(t["job"]["started_ms"].is_null(), "{t}");
    // The JSON stream stays one object per line, the last one the result.
    let ev = events(&out.stdout);
    assert_eq!(ev.last().unwrap()["event"], "trial-ended", "{ev:?}");
    assert!(ws.queue().is_empty(), "{:?}", ws.queue());

    // Both nodes held by another job: the trial waits, up to --max-pending-seconds.
    let hold = Command::new("sbatch")
        .args(["--parsable", "-N2", "--wrap", "sleep 60", "-o", "/dev/null"])
        .env("SLURM_CONF", &ws.conf)
        .output()
        .unwrap();
    let held = String::from_utf8_lossy(&hold.stdout).trim().to_string();
    assert!(wait_for(Duration::from_secs(30), || {
        ws.sl().state(&held).unwrap() == JobState::Running
    }));
    let started = Instant::now();
    let out = ws
        .cmd(&[
            "run",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--max-iters",
            "6",
            "--max-pending-seconds",
            "4",
        ])
        .output()
        .unwrap();
    let err = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let t = ws.trial(2);
    assert_eq!(t["failure"]["class"], "pending-limit", "{t}\n{err}");
    assert!(err.contains("never started"), "{err}");
    assert!(!err.contains("before the job started"), "{err}");
    assert_eq!(
        ws.queue(),
        std::slice::from_ref(&held),
        "only the holder is left"
    );
    let _ = Command::new("scancel")
        .arg(&held)
        .env("SLURM_CONF", &ws.conf)
        .status();
    c.stop();
}

/// A resume that does not follow a study's running job (here: it may launch nothing) cancels
/// it and says so: a job is followed or ended, never left beside the study's new trials.
#[test]
fn a_resume_that_does_not_follow_a_running_job_cancels_it() {
    let Some(c) = Cluster::start(12) else { return };
    let ws = Ws::new(&c);
    let space = ws.two_micro_batches();
    let mut child = ws
        .cmd(&[
            "sweep",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--allow-unmodeled",
            "--first-iters",
            "2000",
            "--max-iters",
            "2000",
            "--space",
            &space,
            "--name",
            "left",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let log = slurm::node_log(&ws.dir.path().join("trials/1"), 0);
    assert!(
        wait_for(Duration::from_secs(60), || std::fs::read_to_string(&log)
            .is_ok_and(|t| t.matches("iteration").count() >= 3)),
        "the trial's job never ran"
    );
    let job = ws.queue()[0].clone();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    assert_eq!(
        ws.queue(),
        std::slice::from_ref(&job),
        "the job outlives its runner"
    );
    let out = ws
        .cmd(&[
            "sweep",
            "--profile",
            "proxy-cpu",
            "--slurm",
            "--resume",
            "left",
            "--max-trials",
            "0",
            "--json",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("was not followed again; cancelled"), "{text}");
    assert!(
        wait_for(Duration::from_secs(30), || ws.queue().is_empty()),
        "{:?}",
        ws.queue()
    );
    let t = ws.trial(1);
    assert_eq!(t["status"], "interrupted", "{t}");
    assert_ne!(t["job"]["state"], "RUNNING", "{t}");
    c.stop();
}

/// `primus-slurm` on two nodes starts Primus' Slurm entry on each of them (not once, as
/// `primus-cli slurm sbatch` does), with the per-node ranks the launch plan chose. Primus'
/// runner is not in this repository: a stand-in entry keeps its contract (NODE_RANK from
/// Slurm, GPUS_PER_NODE defaulting to 8, `-- direct ... -- train pretrain --config C
/// --train_iters N`) and prints what each node was given and Megatron's iteration lines.
/// docs/validation/slurm-primus-entry-2026-12-04.md runs the real runner the same way.
#[test]
fn primus_slurm_starts_primus_on_every_node_with_the_plan_s_ranks() {
    let Some(c) = Cluster::start(13) else { return };
    let ws = Ws::new(&c);
    let root = ws.dir.path().join("ex");
    std::fs::create_dir_all(root.join("runner")).unwrap();
    let entry = root.join("runner/primus-cli-slurm-entry.sh");
    std::fs::write(
        &entry,
        r#"#!/bin/sh
NODE_RANK=${SLURM_NODEID:-0}
n=$(printf '%s\n' "$@" | grep -A1 -x -- --train_iters | tail -1)
echo "entry node_rank=$NODE_RANK nnodes=${SLURM_NNODES:-1} gpus_per_node=${GPUS_PER_NODE:-8} args: $*"
i=1
while [ "$i" -le "$n" ]; do
  printf ' [2026-12-04 23:59:59.000000] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' "$i" "$n" "$i" "$((100 + 10 * (i % 2)))"
  i=$((i + 1))
done
"#,
    )
    .unwrap();
    std::fs::set_permissions(&entry, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = ws
        .cmd(&[
            "run",
            "--profile",
            "primus-slurm",
            "--nodes",
            "2",
            "--gpus",
            "2",
            "--max-iters",
            "6",
            "--no-telemetry",
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let t = ws.trial(1);
    assert_eq!(t["status"], "completed", "{t}\n{err}");
    let dir = PathBuf::from(t["trial_dir"].as_str().unwrap());
    let mut ranks = Vec::new();
    for n in 0..2 {
        let log = std::fs::read_to_string(dir.join(format!("node-{n}.log"))).unwrap();
        let line = log
            .lines()
            .find(|l| l.starts_with("entry "))
            .unwrap_or_else(|| panic!("{log}"));
        assert!(line.contains("nnodes=2 gpus_per_node=1 "), "{line}");
        assert!(
            line.contains("args: -- direct -- train pretrain --config "),
            "{line}"
        );
        ranks.push(line.split_whitespace().nth(1).unwrap().to_string());
        assert_eq!(log.matches("] iteration ").count(), 6, "{log}");
    }
    ranks.sort();
    assert_eq!(ranks, ["node_rank=0", "node_rank=1"]);
    assert!(ws.queue().is_empty());
    c.stop();
}
