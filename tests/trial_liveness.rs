//! A trial that runs must not be taken for interrupted by a process that cannot see its
//! runner: `trials` run in another PID namespace (what another node sharing the workspace is
//! to this one) while a trial runs here sees it `running`, judged by the heartbeat its runner
//! writes, and the trial goes on to complete.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, cmd};
use primus_tune::store::{Store, TrialFilter, TrialRow, TrialStatus};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Nothing for 12 s (a start-up), then three iterations.
const WORKLOAD: &str = r#"sleep 12
for i in 1 2 3; do
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): 100.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' $i 3 $i
done
"#;

/// The binary run as `unshare --pid --fork --mount-proc` runs it: in a PID namespace of its own
/// with its own `/proc`, where no process of this test is visible. Err: why that cannot be done
/// here.
fn in_other_pid_namespace(s: &Setup) -> Result<Command, String> {
    let probe = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .output()
        .map_err(|e| format!("`unshare` cannot be run: {e}"))?;
    if !probe.status.success() {
        return Err(format!(
            "`unshare --pid --fork --mount-proc` is not permitted here: {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_primus-tune"))
        .env("XDG_CONFIG_HOME", &s.config_home)
        .env_remove("PRIMUS_TUNE_CONFIG")
        .env("XDG_DATA_HOME", s.dir.path().join("data"))
        .env("PRIMUS_TUNE_WORKSPACE", &s.ws)
        .env_remove("PRIMUS_ROOT")
        .env_remove("GPUS_PER_NODE");
    Ok(c)
}

fn the_trial(s: &Setup) -> Option<TrialRow> {
    let db = s.ws.join("trials.db");
    if !db.exists() {
        return None;
    }
    let store = Store::open(&db).ok()?;
    store.list_trials(&TrialFilter::all()).ok()?.pop()
}

/// Polls until `ok` holds of the trial, for up to `limit`.
fn wait_for(s: &Setup, limit: Duration, ok: impl Fn(&TrialRow) -> bool) -> Option<TrialRow> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(t) = the_trial(s).filter(&ok) {
            return Some(t);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

#[test]
fn a_reader_in_another_pid_namespace_sees_a_live_trial_running() {
    let s = common::setup("slow-start", WORKLOAD, "mbs");
    let mut other = match in_other_pid_namespace(&s) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let run = cmd(&s)
        .args(["run", s.exp.to_str().unwrap(), "--profile", "slow-start"])
        .args(["--max-iters", "3", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = wait_for(&s, Duration::from_secs(30), |t| {
        t.status == TrialStatus::Running
    })
    .expect("the trial is stored as running");
    let runner = t.runner.clone().expect("its runner's identity is stored");
    assert_eq!(runner.pid, run.id());
    // The reader's `/proc` does not show the runner's pid: only the heartbeat can tell.
    let out = other.args(["trials", "--json"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let listed = v
        .as_array()
        .and_then(|a| a.iter().find(|x| x["id"] == t.id))
        .unwrap_or_else(|| panic!("trial {} listed: {text}", t.id));
    assert_eq!(listed["status"], "running", "{listed}");
    // The runner writes its heartbeat while it waits for the first iteration.
    let beat = wait_for(&s, Duration::from_secs(11), |r| {
        r.heartbeat_at.as_deref() > Some(r.created_at.as_str())
    });
    assert!(beat.is_some(), "no heartbeat after the trial's creation");
    let out = run.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let end = the_trial(&s).unwrap();
    assert_eq!(end.status, TrialStatus::Completed, "{end:?}");
}
