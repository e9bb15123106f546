//! One runner per study, end to end with real processes sharing one workspace: a resume while
//! the study runs, and two resumes at once, are refused but for one, naming the holder (exit
//! 75); a lease left by a runner that is gone (a dead pid, a stale heartbeat of another host)
//! is taken over, one of another host whose heartbeat is fresh is not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, cmd};
use primus_tune::store::{LeaseTake, Store};
use primus_tune::util::liveness::ProcessIdentity;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

/// Step time 120 ms at micro batch 1, 100 ms at 2; out of memory at 4 and above.
const WORKLOAD: &str = r#"mbs=$(grep -o '"micro_batch_size": *[0-9]*' "$1/resolved.json" | grep -o '[0-9]*$')
if [ "$mbs" -ge 4 ]; then echo "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB" >&2; exit 1; fi
base=$((140 - 20 * mbs))
i=1
while [ $i -le 200 ]; do
  ms=$((base + (i % 2) * 2 - 1))
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' $i 200 $i $ms
  i=$((i + 1))
  sleep 0.02
done
"#;

fn setup() -> Setup {
    let s = common::setup("lease-workload", WORKLOAD, "mbs");
    common::set_micro_batch(&s, 1);
    s
}

fn sweep(s: &Setup, extra: &[&str]) -> std::process::Command {
    let mut c = cmd(s);
    c.args([
        "sweep",
        s.exp.to_str().unwrap(),
        "--profile",
        "lease-workload",
    ])
    .args([
        "--first-iters",
        "12",
        "--max-iters",
        "24",
        "--no-batch-rule",
    ])
    .args(extra);
    c
}

/// Starts a sweep and reads its stderr until its first trial is stored (it holds the lease).
fn start_until_first_trial(
    s: &Setup,
    extra: &[&str],
) -> (Child, BufReader<std::process::ChildStderr>) {
    let mut child = sweep(s, extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    read_until_first_trial(&mut err);
    (child, err)
}

fn read_until_first_trial(err: &mut BufReader<std::process::ChildStderr>) {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "sweep ended early:\n{seen}"
        );
        seen.push_str(&line);
        if line.trim_start().starts_with("trial ") && line.contains(':') {
            return;
        }
    }
}

/// SIGTERM, as Ctrl-C: the sweep stops and gives its lease up.
fn stop(mut child: Child, err: BufReader<std::process::ChildStderr>) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let rest: Vec<String> = err.lines().map(Result::unwrap).collect();
    assert_eq!(child.wait().unwrap().code(), Some(3), "{rest:?}");
}

fn store(s: &Setup) -> Store {
    Store::open(&s.ws.join("trials.db")).unwrap()
}

fn study_id(s: &Setup, name: &str) -> i64 {
    store(s).study_by_name(name).unwrap().unwrap().id
}

/// Trials of the workspace that ran at the same time as another: (id, id) pairs. One runner
/// runs one trial at a time (`--parallel 1`), so two runners of one study are what overlaps.
fn overlapping(s: &Setup) -> Vec<(i64, i64)> {
    let mut spans: Vec<(String, String, i64)> = store(s)
        .list_trials(&primus_tune::store::TrialFilter::all())
        .unwrap()
        .into_iter()
        .map(|t| (t.started_at.unwrap(), t.finished_at.unwrap(), t.id))
        .collect();
    spans.sort();
    spans
        .windows(2)
        .filter(|w| w[1].0 < w[0].1)
        .map(|w| (w[0].2, w[1].2))
        .collect()
}

#[test]
fn a_study_runs_in_one_runner_at_a_time() {
    let s = setup();
    let space = s.space.to_str().unwrap();
    // 1. A resume while the study still runs is refused, naming the runner.
    let (first, err) = start_until_first_trial(&s, &["--space", space, "--name", "st"]);
    let out = sweep(&s, &["--resume", "st"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{text}");
    let host = nix::unistd::gethostname().unwrap();
    let holder = format!("pid {} on {}", first.id(), host.to_string_lossy());
    assert!(
        text.contains("study `st` is being run by")
            && text.contains(&holder)
            && text.contains("last heartbeat"),
        "{text}"
    );
    stop(first, err);
    assert_eq!(
        store(&s).lease(study_id(&s, "st")).unwrap(),
        None,
        "released"
    );

    // 2. Two resumes at once: exactly one runs, the other is refused naming it.
    let spawn = || {
        sweep(&s, &["--resume", "st", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (pa, pb) = (a.id(), b.id());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let mut codes = [a.status.code(), b.status.code()];
    codes.sort();
    assert_eq!(
        codes,
        [Some(0), Some(75)],
        "{}\n{}",
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr)
    );
    let (refused, winner) = if a.status.code() == Some(75) {
        (&a, pb)
    } else {
        (&b, pa)
    };
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(text.contains(&format!("pid {winner} on ")), "{text}");
    // The refusal is JSON on stdout too, of its own kind.
    let v: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&refused.stdout)
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(v["error"]["kind"], "busy", "{v}");
    // The refused one launched nothing: no two trials ran at once.
    assert_eq!(overlapping(&s), vec![], "trials of two runners at once");
    assert!(
        !String::from_utf8_lossy(&refused.stdout).contains("launching"),
        "the refused runner launched a trial"
    );
    assert_eq!(store(&s).lease(study_id(&s, "st")).unwrap(), None);
}

/// A dead process of this host, as a lease records its holder.
fn dead_runner() -> ProcessIdentity {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    ProcessIdentity {
        pid,
        ..ProcessIdentity::current()
    }
}

#[test]
fn a_lease_is_taken_over_only_from_a_runner_that_is_gone() {
    let s = setup();
    let space = s.space.to_str().unwrap();
    let (first, err) = start_until_first_trial(&s, &["--space", space, "--name", "old"]);
    stop(first, err);
    let id = study_id(&s, "old");
    let db = s.ws.join("trials.db");
    // A runner of another host whose heartbeat is fresh holds it: refused.
    let elsewhere = ProcessIdentity {
        host: "another-node".into(),
        pid: 4242,
        ..ProcessIdentity::current()
    };
    let took = store(&s).take_lease(id, &elsewhere, |_| None).unwrap();
    assert_eq!(took, LeaseTake::Taken { replaced: None });
    let out = sweep(&s, &["--resume", "old"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{text}");
    assert!(text.contains("pid 4242 on another-node"), "{text}");
    // Its heartbeat two minutes old: stale, taken over.
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute(
        "UPDATE study_leases SET heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-120 seconds')",
        [],
    )
    .unwrap();
    let (second, err) = start_until_first_trial(&s, &["--resume", "old"]);
    stop(second, err);
    // A runner of this host that died without giving it up (killed): taken over at once.
    let dead = dead_runner();
    store(&s).take_lease(id, &dead, |_| None).unwrap();
    let out = sweep(&s, &["--resume", "old"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let errs = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{errs}");
    let said = format!("{text}{errs}");
    assert!(
        said.contains(&format!(
            "took the study's lease over from pid {} on",
            dead.pid
        )) && said.contains("no longer runs"),
        "{said}"
    );
    assert_eq!(store(&s).lease(id).unwrap(), None, "released at its end");
}
