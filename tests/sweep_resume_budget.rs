//! A study keeps its budget, end to end: the resume command a stopped sweep prints writes every
//! budget flag out and works as printed; a resume with another iteration budget is refused
//! naming the study's (exit 4), launching nothing; one without budget flags goes on with the
//! study's iterations and cost cap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, cmd};
use primus_tune::store::{Store, TrialFilter};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Step time 120 ms at micro batch 1, 100 ms at 2; out of memory at 4 and above.
const WORKLOAD: &str = r#"mbs=$(grep -o '"micro_batch_size": *[0-9]*' "$1/resolved.json" | grep -o '[0-9]*$')
if [ "$mbs" -ge 4 ]; then echo "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB" >&2; exit 1; fi
base=$((140 - 20 * mbs))
i=1
while [ $i -le 200 ]; do
  ms=$((base + (i % 2) * 2 - 1))
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' $i 200 $i $ms
  i=$((i + 1))
  sleep 0.01
done
"#;

/// (micro batch, train_iters, status) of every stored trial.
fn trials(s: &Setup) -> Vec<(i64, i64, String)> {
    let store = Store::open(&s.ws.join("trials.db")).unwrap();
    store
        .list_trials(&TrialFilter::all())
        .unwrap()
        .into_iter()
        .map(|t| {
            let get = |k: &str| {
                t.overrides
                    .iter()
                    .find(|(x, _)| x == k)
                    .and_then(|(_, v)| v.as_i64())
                    .unwrap_or(-1)
            };
            let status = t.status.as_str().to_string();
            (get("micro_batch_size"), get("train_iters"), status)
        })
        .collect()
}

/// A sweep of study `b` with its own budget, stopped (SIGTERM) once its first trial is stored:
/// the "Continue with:" command it printed.
fn stopped_sweep(s: &Setup) -> String {
    let mut child = cmd(s)
        .args([
            "sweep",
            s.exp.to_str().unwrap(),
            "--profile",
            "budget-workload",
        ])
        .args(["--space", s.space.to_str().unwrap(), "--name", "b"])
        .args(["--first-iters", "10", "--max-iters", "20"])
        .args(["--budget-minutes", "100", "--no-batch-rule"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "ended early:\n{seen}"
        );
        seen.push_str(&line);
        if line.trim_start().starts_with("trial 1:") {
            break;
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let rest: String = err.lines().map(|l| l.unwrap() + "\n").collect();
    assert_eq!(child.wait().unwrap().code(), Some(3), "{seen}{rest}");
    rest.lines()
        .find_map(|l| l.split("Continue with: ").nth(1))
        .unwrap_or_else(|| panic!("no resume command in:\n{rest}"))
        .to_string()
}

#[test]
fn a_resume_keeps_the_study_s_budget() {
    let s = common::setup("budget-workload", WORKLOAD, "mbs");
    common::set_micro_batch(&s, 1);
    let line = stopped_sweep(&s);
    assert!(
        line.contains("--first-iters 10 --max-iters 20 --budget-minutes 100"),
        "{line}"
    );
    let before = trials(&s);
    assert_eq!(before[0], (1, 10, "completed".into()), "{before:?}");

    // Another budget: refused, naming the study's, and nothing is launched.
    let out = cmd(&s)
        .args(["sweep", s.exp.to_str().unwrap(), "--resume", "b"])
        .args(["--max-iters", "40", "--json"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{text}");
    assert!(
        text.contains(
            "study `b` (id 1) was started with --first-iters 10 --max-iters 20; resume it \
             without budget flags or with the same ones"
        ),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(v["error"]["kind"], "conflict", "{v}");
    assert_eq!(trials(&s), before, "a refused resume launches nothing");

    // The printed command, as printed (the shell's words; nothing of the test's but its
    // environment): it goes on with the study's budget and reuses what finished.
    let words: Vec<String> = line
        .split_whitespace()
        .map(|w| w.trim_matches('\'').to_string())
        .collect();
    assert_eq!(words[..2], ["primus-tune", "sweep"], "{line}");
    let out = cmd(&s).args(&words[1..]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("finished trial"), "{said}");
    let after = trials(&s);
    // The study's rungs (10, up to 20) and the search's confirmation length (12), never the
    // defaults' longest (60).
    assert!(
        after.iter().all(|t| [10, 12, 20].contains(&t.1)),
        "every trial of the study's lengths: {after:?}"
    );

    // Without any budget flag: the study's budget, its finished trials reused, and the cost
    // cap stays the study's. (The search may still launch a trial: what earlier trials of the
    // workspace say a launch costs now includes this study's own.)
    let out = cmd(&s)
        .args(["sweep", s.exp.to_str().unwrap(), "--resume", "b"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let finished = after.iter().filter(|t| t.2 != "stopped").count();
    let reused = format!("(resumed: {finished} finished trials reused");
    assert!(said.contains(&reused), "{said}");
    let again = trials(&s);
    assert!(
        again.iter().all(|t| [10, 12, 20].contains(&t.1)),
        "every trial of the study's lengths: {again:?}"
    );
    let store = Store::open(&s.ws.join("trials.db")).unwrap();
    let launch = store.study_by_name("b").unwrap().unwrap().launch.unwrap();
    assert_eq!(launch["caps"]["budget_minutes"], 100.0, "{launch}");
    assert_eq!(launch["max_iters"], 20, "{launch}");
}
