//! Signals to primus-tune itself, not to its workload: a pause of the runner (SIGSTOP and
//! SIGCONT: Ctrl-Z and `fg`, a frozen cgroup) is not the workload's silence, and SIGQUIT stops
//! the trial as SIGINT and SIGTERM do, with every iteration it printed stored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{ITER, Setup, cmd};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A workload that prints an iteration (100 ms steps) every 50 ms for ever, and says when it
/// reached iteration 10.
fn steady() -> String {
    format!(
        "{ITER}
i=1
while :; do
  it $i 100.0
  if [ $i = 10 ]; then touch \"$1/at10\"; fi
  i=$((i+1)); sleep 0.05
done
"
    )
}

/// primus-tune running the steady workload, in a process group of its own (a signal to it
/// reaches neither the supervisor nor the workload), once that reached iteration 10.
fn start(s: &Setup, extra: &[&str]) -> Child {
    let mut c = cmd(s);
    c.arg("run")
        .arg(&s.exp)
        .args(["--profile", "steady", "--json", "--no-telemetry"])
        .args([
            "--grace-seconds",
            "1",
            "--ci-target",
            "0",
            "--end-grace-seconds",
            "0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    let mut child = c.spawn().unwrap();
    let at10 = s.ws.join("trials/1/at10");
    let t = Instant::now();
    while !at10.is_file() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("primus-tune ended ({status}) before the workload was up");
        }
        assert!(t.elapsed() < Duration::from_secs(60), "no iteration 10");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn a_runner_stopped_for_longer_than_the_hang_limit_does_not_call_the_workload_hung() {
    let s = common::setup("steady", &steady(), "unused");
    // 300 iterations take 15 s; the runner is stopped for 20 s of them (the workload prints on
    // until the pipe is full), four times the hang limit.
    let child = start(&s, &["--hang-seconds", "5", "--max-iters", "300"]);
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    std::thread::sleep(Duration::from_secs(20));
    kill(pid, Signal::SIGCONT).unwrap();
    let out = child.wait_with_output().unwrap();
    let v = common::last_json(&out);
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["stop_reason"], "max-iters", "{v}");
}

#[test]
fn sigquit_stops_the_trial_with_every_printed_iteration_stored() {
    let s = common::setup("steady", &steady(), "unused");
    let child = start(&s, &["--max-iters", "100000"]);
    // Past a batch of stored iterations, mid-way through the next.
    std::thread::sleep(Duration::from_millis(130));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGQUIT).unwrap();
    let out = child.wait_with_output().unwrap();
    let v = common::last_json(&out);
    assert_eq!(v["status"], "stopped", "{v}");
    assert_eq!(v["stop_reason"], "user", "{v}");
    let log = std::fs::read_to_string(s.ws.join("trials/1/stdout.log")).unwrap();
    let printed = log.lines().filter(|l| l.contains(" iteration ")).count();
    let shown = cmd(&s)
        .args(["trials", "show", "1", "--json"])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let stored = shown["iterations"].as_array().map_or(0, Vec::len);
    assert!(printed > 10, "{printed} iterations printed");
    assert_eq!(
        stored, printed,
        "stored {stored} of {printed} printed iterations"
    );
}
