//! `sweep` end to end with real processes: a test workload (a shell script printing Megatron
//! lines, its step time set by the micro batch size it is given, out of memory at 4) swept over
//! a user space; Ctrl-C-style interruption and `--resume`; `recommend --study`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, cmd};

use std::io::{BufRead, BufReader};
use std::process::Stdio;

/// Step time 120 ms at micro batch 1, 100 ms at 2 (±1 ms of alternating noise); out of memory
/// at 4 and above.
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

/// The experiment runs micro batch 1 (120 ms): the sweep's candidate 0, which 2 beats.
fn setup() -> Setup {
    let s = common::setup("mbs-workload", WORKLOAD, "mbs");
    common::set_micro_batch(&s, 1);
    s
}

fn sweep_args<'a>(s: &'a Setup, extra: &[&'a str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "sweep".into(),
        s.exp.display().to_string(),
        "--profile".into(),
        "mbs-workload".into(),
        "--first-iters".into(),
        "12".into(),
        "--max-iters".into(),
        "36".into(),
        // A command-line override reaches every trial (and resume still matches them).
        "--set".into(),
        "seq_length=2048".into(),
    ];
    v.extend(extra.iter().map(|x| x.to_string()));
    v
}

/// `studies show STUDY --log` of the setup's experiment: its standard output (exit 0 asserted).
fn studies_show_log(s: &Setup, study: &str) -> String {
    let out = cmd(s)
        .args(["studies", "show", study, "--log", "--config"])
        .arg(&s.exp)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    text
}

/// `sweep … --space SPACE --name NAME --json` of the setup: its JSON lines (exit 0 asserted).
fn sweep_json(s: &Setup, name: &str) -> Vec<serde_json::Value> {
    let space = s.space.to_str().unwrap();
    let out = cmd(s)
        .args(sweep_args(s, &["--space", space, "--name", name, "--json"]))
        .output()
        .unwrap();
    let lines = common::json_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    lines
}

/// The decision-log lines a `--json` sweep emitted, in order.
fn decided(lines: &[serde_json::Value]) -> Vec<&str> {
    lines
        .iter()
        .filter(|l| l["event"] == "decided")
        .filter_map(|l| l["line"].as_str())
        .collect()
}

/// (micro batch, train_iters, status) of every stored trial.
fn trials(s: &Setup) -> Vec<(i64, i64, String)> {
    let db = s.ws.join("trials.db");
    let store = primus_tune::store::Store::open(&db).unwrap();
    store
        .list_trials(&primus_tune::store::TrialFilter::all())
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
            (
                get("micro_batch_size"),
                get("train_iters"),
                t.status.as_str().to_string(),
            )
        })
        .collect()
}

#[test]
fn sweep_prunes_what_an_oom_rules_out_resumes_and_recommends() {
    let s = setup();
    // 1. Start the sweep and stop it (SIGTERM) once its first trial is stored.
    let mut child = cmd(&s)
        .args(sweep_args(
            &s,
            &[
                "--space",
                s.space.to_str().unwrap(),
                "--name",
                "mbs1",
                "--no-batch-rule",
            ],
        ))
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
            "sweep ended early:\n{seen}"
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
    let mut rest = String::new();
    for line in err.lines() {
        rest.push_str(&line.unwrap());
        rest.push('\n');
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{seen}{rest}");
    assert!(rest.contains("--resume mbs1"), "{rest}");
    assert!(rest.contains("--no-batch-rule"), "{rest}");
    let before = trials(&s);
    assert_eq!(before[0], (1, 12, "completed".into()), "{before:?}");
    // Stopped: no decision log stored yet, and `studies show --log` says so.
    let text = studies_show_log(&s, "mbs1");
    assert!(
        text.contains("--resume mbs1") && text.contains("decision log: none yet"),
        "{text}"
    );

    // 2. Resume: the finished trial is reused, nothing finished runs twice, 8 never runs.
    let out = cmd(&s)
        .args(sweep_args(&s, &["--resume", "mbs1", "--no-batch-rule"]))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let errs = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{errs}");
    assert!(
        text.contains("finished trial reused") || text.contains("finished trials reused"),
        "{text}"
    );
    let after = trials(&s);
    // Exactly the trials an uninterrupted sweep runs (the workload is deterministic): the
    // finished first trial was reused, not run again.
    let fresh = setup();
    let out2 = cmd(&fresh)
        .args(sweep_args(
            &fresh,
            &[
                "--space",
                fresh.space.to_str().unwrap(),
                "--name",
                "mbs2",
                "--no-batch-rule",
            ],
        ))
        .output()
        .unwrap();
    assert_eq!(out2.status.code(), Some(0));
    // (A trial the interruption cut short is stored as stopped, and run again on resume.)
    let mut a: Vec<_> = after.iter().filter(|t| t.2 != "stopped").cloned().collect();
    let mut b = trials(&fresh);
    a.sort();
    b.sort();
    assert_eq!(a, b, "resumed vs uninterrupted");
    assert!(
        after.iter().all(|t| t.0 != 8),
        "8 dominates the OOM at 4: {after:?}"
    );
    assert!(
        after.iter().any(|t| t.0 == 4 && t.2 == "failed"),
        "{after:?}"
    );
    assert!(text.contains("pick: micro_batch_size=2"), "{text}");
    assert!(
        text.contains("conclusion: winner: candidate 1"),
        "micro batch 2 beats the current 1 beyond the noise: {text}"
    );
    let dirs = s.ws.join("trials");
    for d in std::fs::read_dir(&dirs).unwrap() {
        let r = std::fs::read_to_string(d.unwrap().path().join("resolved.json")).unwrap();
        assert!(r.contains("\"seq_length\": 2048"), "{r}");
    }
    assert!(text.contains("ruled-out"), "{text}");

    // The study as `studies` lists it, and in full.
    let out = cmd(&s)
        .args(["studies", s.exp.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mbs1 = list
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "mbs1")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(mbs1["status"], "finished");
    assert_eq!(mbs1["space"], "mbs");
    assert_eq!(mbs1["pick"], serde_json::json!({"micro_batch_size": 2}));
    assert_eq!(mbs1["trials"].as_u64(), Some(after.len() as u64));
    assert!(mbs1["gpu_seconds"].as_f64().unwrap() > 0.0, "{mbs1}");
    let out = cmd(&s)
        .args([
            "studies",
            "show",
            "mbs1",
            "--config",
            s.exp.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("pick: micro_batch_size=2") && text.contains("ruled-out"),
        "{text}"
    );

    // 3. The measured recommendation, and --apply writes it.
    let out = cmd(&s)
        .args([
            "recommend",
            s.exp.to_str().unwrap(),
            "--study",
            "mbs1",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mbs = v["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["flag"] == "micro_batch_size")
        .expect("measured micro batch");
    assert_eq!(mbs["basis"], "measured");
    assert_eq!(mbs["value"], 2);
    assert!(
        mbs["reason"]
            .as_str()
            .unwrap()
            .contains("20 % trimmed mean "),
        "{mbs}"
    );
    let apply = || {
        cmd(&s)
            .args([
                "recommend",
                s.exp.to_str().unwrap(),
                "--study",
                "mbs1",
                "--apply",
            ])
            .output()
            .unwrap()
    };
    let out = apply();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&s.exp).unwrap();
    assert!(text.contains("micro_batch_size: 2"), "{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("wrote 1 value to"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Applied again: the pick is already set, so nothing is written.
    let out = apply();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("every recommended value is already set"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&s.exp).unwrap(), text);
}

/// The current settings are always measured, as candidate 0, also outside the space; they are
/// kept when no candidate beats them beyond the noise.
#[test]
fn sweep_measures_the_current_settings_first_and_keeps_them_when_nothing_beats_them() {
    let s = setup();
    // Micro batch 3 (80 ms) is not in the space (1, 2, 4, 8) and is the fastest that fits.
    common::set_micro_batch(&s, 3);
    let lines = sweep_json(&s, "cur3");
    let rec = &lines.last().unwrap()["record"];
    let c0 = &rec["candidates"][0];
    assert_eq!(c0["id"], 0);
    assert_eq!(c0["baseline"], true);
    assert_eq!(c0["overrides"]["micro_batch_size"], 3);
    assert_eq!(c0["verdict"], "winner", "{rec}");
    assert_eq!(rec["baseline"], 0);
    assert_eq!(rec["conclusion"]["kind"], "keep-current");
    assert_eq!(rec["pick"], 0);
    // Four grid candidates after it, none of them the baseline.
    let cands = rec["candidates"].as_array().unwrap();
    assert_eq!(cands.len(), 5);
    assert!(cands[1..].iter().all(|c| c["baseline"] == false));
    // It ran first.
    assert_eq!(trials(&s)[0], (3, 12, "completed".into()));
    // In one pipeline stage (the test config has none), micro batch 1 and 2 are not faster
    // than the current 3, which fits: never launched, predicted slower by the batch rule.
    for c in &cands[1..3] {
        assert_eq!(c["verdict"], "predicted-slower", "{c}");
        assert!(
            c["why"]
                .as_str()
                .unwrap()
                .contains("a larger batch is not slower in one pipeline stage: #0"),
            "{c}"
        );
    }
    assert!(
        trials(&s).iter().all(|t| t.0 != 1 && t.0 != 2),
        "{:?}",
        trials(&s)
    );
    // recommend says to keep it.
    let out = cmd(&s)
        .args(["recommend", s.exp.to_str().unwrap(), "--study", "cur3"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("conclusion: keep current"), "{text}");
    assert!(text.contains("micro_batch_size: 3 (already set)"), "{text}");
    // The first sweep had no history; the next one starts from what this one's trials
    // measured, and says so.
    let started = lines
        .iter()
        .find(|l| !l["launch_history"].is_null())
        .expect("the started event");
    assert!(started["launch_history"]["launch_s"].is_null(), "{started}");
    let out = cmd(&s)
        .args(sweep_args(
            &s,
            &["--space", s.space.to_str().unwrap(), "--name", "again"],
        ))
        .output()
        .unwrap();
    // The progress lines go to standard error.
    let text = String::from_utf8_lossy(&out.stderr);
    let n = completed_trials_of(&s, "cur3");
    assert!(n >= 1, "{n}");
    let want = format!(
        "(median of {} of this experiment and profile)",
        primus_tune::util::text::count(n, "earlier trial", "earlier trials")
    );
    assert!(text.contains("launch history: "), "{text}");
    assert!(text.contains(&want), "{text}");
    // Each trial's figure is the one the study ranks by, named, in its unit.
    assert!(text.contains("· 20 % trimmed mean "), "{text}");
    assert!(text.contains(" ms/batch · peak "), "{text}");
}

/// A profile that sets `PRIMUS_PP` runs the experiment's `${PRIMUS_PP:1}` as two pipeline
/// stages: the sweep sees the config its trials run (their `resolved.json` too), so the batch
/// rule, which holds in one stage only, is off and micro batch 1 and 2 are measured.
#[test]
fn a_profile_s_environment_is_the_config_the_sweep_sees() {
    let s = setup();
    common::set_micro_batch(&s, 3);
    common::write_profile(
        &s.config_home,
        "mbs-pp2",
        WORKLOAD,
        "env:\n  PRIMUS_PP: \"2\"\n",
    );
    let mut args = sweep_args(&s, &["--space", s.space.to_str().unwrap()]);
    args[3] = "mbs-pp2".into();
    args.extend(["--name".into(), "pp2".into(), "--json".into()]);
    let out = cmd(&s)
        .args(&args)
        .env_remove("PRIMUS_PP")
        .output()
        .unwrap();
    let lines = common::json_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    let log = decided(&lines).join("\n");
    assert!(log.contains("batch rule off"), "{log}");
    let ran: Vec<i64> = trials(&s).iter().map(|t| t.0).collect();
    assert!(ran.contains(&1) && ran.contains(&2), "{ran:?}");
    // Every trial resolved its config with the profile's environment.
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    let all = store
        .list_trials(&primus_tune::store::TrialFilter::all())
        .unwrap();
    assert!(!all.is_empty());
    for t in all {
        let resolved: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(std::path::Path::new(&t.trial_dir).join("resolved.json"))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            resolved["pipeline_model_parallel_size"], 2,
            "trial {}",
            t.id
        );
    }
}

/// Completed trials the study `name` stored.
fn completed_trials_of(s: &Setup, name: &str) -> usize {
    let db = s.ws.join("trials.db");
    let store = primus_tune::store::Store::open(&db).unwrap();
    let id = store.study_by_name(name).unwrap().unwrap().id;
    store
        .list_trials(&primus_tune::store::TrialFilter::all())
        .unwrap()
        .into_iter()
        .filter(|t| {
            t.study_id == Some(id) && t.status == primus_tune::store::TrialStatus::Completed
        })
        .count()
}

/// A sweep its budget cuts short names no winner and exits non-zero.
#[test]
fn a_sweep_cut_short_by_its_budget_names_no_winner() {
    let s = setup();
    let out = cmd(&s)
        .args(sweep_args(
            &s,
            &[
                "--space",
                s.space.to_str().unwrap(),
                "--name",
                "short",
                "--max-trials",
                "2",
            ],
        ))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("conclusion: incomplete"), "{text}");
    assert!(text.contains("best-so-far"), "{text}");
    assert!(!text.contains("pick:"), "{text}");
    let out = cmd(&s)
        .args(["studies", s.exp.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list[0]["status"], "incomplete", "{list}");
    assert!(list[0]["pick"].is_null(), "{list}");
}

#[test]
fn sweep_refuses_a_space_that_does_not_apply() {
    let s = setup();
    let out = cmd(&s)
        .args(sweep_args(&s, &["--space", "sync-free-stage"]))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MoE"));
}

/// A steady 100 ms step whatever the micro batch.
const STEADY: &str = r#"i=1
while [ $i -le 200 ]; do
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): 100.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' $i 200 $i
  i=$((i + 1))
  sleep 0.01
done
"#;

#[test]
fn candidates_megatron_refuses_on_the_sweeps_world_never_launch() {
    let s = common::setup("steady", STEADY, "unused");
    // Global batch 16 on 2 GPUs (DP 2): micro 16 and 32 cannot split it (16 is fine on one
    // rank, 32 on none); 1 and 2 can.
    let space = s.dir.path().join("mbs-world.yaml");
    std::fs::write(
        &space,
        "name: mbs-world\ndescription: micro batch against the world\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2, 16, 32]\n    memory: increasing\n",
    )
    .unwrap();
    let sweep = |gpus: Option<&str>, name: &str| {
        let mut args: Vec<String> = [
            "sweep",
            s.exp.to_str().unwrap(),
            "--profile",
            "steady",
            "--space",
            space.to_str().unwrap(),
            "--name",
            name,
            "--first-iters",
            "12",
            "--max-iters",
            "12",
            "--set",
            "global_batch_size=16",
            "--json",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        if let Some(g) = gpus {
            args.extend(["--gpus".to_string(), g.to_string()]);
        }
        let out = cmd(&s).args(&args).output().unwrap();
        let last = common::last_json(&out);
        assert_eq!(
            last["event"],
            "sweep-ended",
            "{last}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        last["record"]["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["overrides"]["micro_batch_size"].as_i64().unwrap(),
                    c["verdict"].as_str().unwrap().to_string(),
                    c["why"].as_str().unwrap().to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    let launched = |s: &Setup| -> Vec<i64> { trials(s).into_iter().map(|t| t.0).collect() };

    let cands = sweep(Some("2"), "on-two");
    let verdict = |m: i64| cands.iter().find(|c| c.0 == m).unwrap().clone();
    for m in [16, 32] {
        let (_, v, why) = verdict(m);
        assert_eq!(v, "illegal", "micro {m}: {cands:?}");
        assert!(why.contains("global_batch_size: 16"), "{why}");
    }
    assert!(
        verdict(16).2.contains("world size 2 (--gpus)"),
        "{:?}",
        verdict(16)
    );
    assert_ne!(verdict(1).1, "illegal", "{cands:?}");
    assert_ne!(verdict(2).1, "illegal", "{cands:?}");
    let ran = launched(&s);
    assert!(!ran.is_empty(), "the legal candidates ran");
    assert!(
        ran.iter().all(|m| *m == 1 || *m == 2),
        "an illegal candidate was launched: {ran:?}"
    );

    // On one GPU (DP 1) micro 16 splits a global batch of 16; 32 splits it on no world.
    let cands = sweep(Some("1"), "on-one");
    let v = |m: i64| cands.iter().find(|c| c.0 == m).unwrap().1.clone();
    assert_ne!(v(16), "illegal", "{cands:?}");
    assert_eq!(v(32), "illegal", "{cands:?}");
    assert!(
        !launched(&s).contains(&32),
        "micro 32 never launches: {:?}",
        launched(&s)
    );
}

/// A minute-long start-up in miniature (2 s against 100 ms steps), and micro batch 2 three
/// times slower with ±10 % noise: once start-up dominates, its launch stops as soon as its steady
/// samples are above the leader (micro batch 1) with 95 % confidence, long before its 1 % CI
/// target or its length.
const SLOW_START: &str = r#"mbs=$(grep -o '"micro_batch_size": *[0-9]*' "$1/resolved.json" | grep -o '[0-9]*$')
gbs=$(grep -o '"global_batch_size": *[0-9]*' "$1/resolved.json" | grep -o '[0-9]*$')
sleep 2
if [ "$mbs" -ge 4 ]; then echo "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB" >&2; exit 1; fi
i=1
while [ $i -le 200 ]; do
  if [ "$mbs" -eq 1 ]; then ms=$((100 + (i % 2) * 2 - 1)); else ms=$((270 + (i % 2) * 60)); fi
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size: %5d | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' $i 200 $i $ms $gbs
  i=$((i + 1))
  sleep 0.01
done
"#;

#[test]
fn a_launch_clearly_slower_than_the_leader_stops_early() {
    let s = common::setup("slow-start", SLOW_START, "mbs");
    common::set_micro_batch(&s, 1);
    let out = cmd(&s)
        .args([
            "sweep",
            s.exp.to_str().unwrap(),
            "--profile",
            "slow-start",
            "--space",
            s.space.to_str().unwrap(),
            "--name",
            "race",
            "--json",
        ])
        .output()
        .unwrap();
    let lines = common::json_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    // Micro batch 2's launch: asked for a long launch, stopped by its race.
    let at = lines
        .iter()
        .position(|l| l["event"] == "launching" && l["candidate"] == 1)
        .expect("micro batch 2 launched");
    assert_eq!(lines[at]["iters"], 18, "a long launch: {}", lines[at]);
    let ended = lines[at..]
        .iter()
        .find(|l| l["event"] == "trial-ended")
        .expect("its end");
    assert_eq!(ended["stop_reason"], "slower-than-leader", "{ended}");
    assert_eq!(ended["status"], "completed", "{ended}");
    let ran = ended["iterations"].as_u64().unwrap();
    assert!(ran <= 14, "{ran} of 18 iterations");
    // The trial keeps why it stopped.
    let id = ended["trial_id"].as_i64().unwrap().to_string();
    let out = cmd(&s).args(["trials", "show", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!(
            "iterations: {ran} seen, {ran} stored (stop: slower-than-leader)"
        )),
        "{text}"
    );
    let rec = &lines.last().unwrap()["record"];
    let log: Vec<&str> = rec["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    // Stopped at the 6th steady sample; the workload may print an iteration or two more before
    // the stop reaches it, and those are stored (and counted) too.
    let line = log
        .iter()
        .find(|l| l.starts_with("#1 (micro_batch_size=2): stopped after "))
        .unwrap_or_else(|| panic!("{log:?}"));
    let n: usize = line["#1 (micro_batch_size=2): stopped after ".len()..]
        .split(' ')
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or(0);
    assert!((6..=10).contains(&n), "{line}");
    assert!(
        line.contains(" steady samples of the 18 iterations asked: ")
            && line.contains("(the leader's upper bound + the tolerance) with 95 % confidence"),
        "{line}"
    );
    assert_eq!(rec["pick"], 0, "{rec}");
    assert_eq!(rec["candidates"][1]["verdict"], "slower", "{rec}");
    let why = rec["candidates"][1]["why"].as_str().unwrap();
    assert!(
        why.starts_with("slower by ")
            && why.ends_with(
                "; its launch stopped early, above the leader with 95 % confidence (racing)"
            ),
        "{why}"
    );
    assert!(
        !rec["candidates"][0]["why"]
            .as_str()
            .unwrap()
            .contains("racing"),
        "{rec}"
    );
    // The decision log reached the frontend live, line by line: every line once, in order,
    // the race's after the trial it stopped and before the sweep ended.
    assert_eq!(decided(&lines), log, "{lines:?}");
    let race_at = lines
        .iter()
        .position(|l| l["event"] == "decided" && l["line"].as_str() == Some(*line))
        .unwrap();
    let ended_at = at
        + lines[at..]
            .iter()
            .position(|l| l["event"] == "trial-ended")
            .unwrap();
    let sweep_ended = lines
        .iter()
        .position(|l| l["event"] == "sweep-ended")
        .unwrap();
    assert!(ended_at < race_at && race_at < sweep_ended, "{lines:?}");
    // And the study keeps it: `studies show --log`.
    let text = studies_show_log(&s, "race");
    assert!(
        text.contains(&format!("decision log ({} lines):\n", log.len()))
            && text.contains(&format!("\n  {line}\n")),
        "{text}"
    );
}

#[test]
fn a_sweep_starts_from_the_knob_effects_of_the_workspaces_earlier_studies() {
    let s = setup();
    std::fs::create_dir_all(&s.ws).unwrap();
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    // Three finished studies of this profile: micro batch 1 → 2 → 4 each 18–22 % faster.
    for (i, f) in [0.78f64, 0.8, 0.82].iter().enumerate() {
        let cands: Vec<serde_json::Value> = [1, 2, 4]
            .iter()
            .enumerate()
            .map(|(j, mbs)| {
                serde_json::json!({
                    "id": j, "overrides": {"micro_batch_size": mbs}, "verdict": "slower",
                    "why": "", "n": 8, "step_ms": 150.0 * f.powi(j as i32),
                })
            })
            .collect();
        let rec = serde_json::json!({
            "space": "mbs", "config": s.exp, "profile": "mbs-workload", "gpus": 1,
            "candidates": cands, "gpu_seconds": 10.0, "trials": 3, "log": [],
        });
        let id = store
            .create_study(&format!("earlier-{i}"), &s.exp, "sweep")
            .unwrap();
        store.set_study_notes(id, Some(&rec.to_string())).unwrap();
    }
    drop(store);
    let lines = sweep_json(&s, "now");
    let said = decided(&lines);
    let line = said
        .iter()
        .find(|l| l.starts_with("knob effects of 3 earlier studies: "))
        .unwrap_or_else(|| panic!("{said:?}"));
    assert!(
        line.starts_with(
            "knob effects of 3 earlier studies: priors on 2 of the model's 3 knob-value \
             differences (micro_batch_size 1→2 -20.0 % ± "
        ) && line.contains("micro_batch_size 2→4 -20.0 % ± "),
        "{line}"
    );
    // The sweep still measures what it picks: micro batch 2 (100 ms against 120 ms).
    let rec = &lines.last().unwrap()["record"];
    assert_eq!(rec["pick"], 1, "{rec}");
    assert_eq!(rec["candidates"][1]["verdict"], "winner", "{rec}");
    // --no-carried-effects: learned from its own trials alone.
    let space = s.space.to_str().unwrap();
    let out = cmd(&s)
        .args(sweep_args(
            &s,
            &[
                "--space",
                space,
                "--name",
                "alone",
                "--json",
                "--no-carried-effects",
            ],
        ))
        .output()
        .unwrap();
    let lines = common::json_lines(&out);
    assert_eq!(out.status.code(), Some(0), "{lines:?}");
    let alone = decided(&lines);
    assert!(
        !alone.iter().any(|l| l.starts_with("knob effects")),
        "{alone:?}"
    );
}
