//! The two frontends side by side. For every behaviour they used to disagree on, the CLI (the
//! real binary, as a user runs it) and the TUI (its key map, update and effects, which perform
//! through the app layer exactly as the event loop does) are driven on the same experiment and
//! must agree:
//!
//! 1. a config with lint errors is refused by both (`run` without `--force`, `r` in the TUI);
//! 2. a GEMM stage with a profile that never calls hipBLASLt is refused by both, with one text;
//! 3. the stored stage-3 comparison is seen by `checklist`, `recommend` and the TUI's checklist;
//! 4. the resume command a stopped sweep prints works as shown, from both;
//! 5. a sweep's trials sample the telemetry backend the frontend was given;
//! 6. without a CONFIG both use the same experiment and the same workspace;
//! 7. (the key map: `keymap.rs`'s tests check the `?` overlay against dispatch screen by screen.)
//! 8. the config both show resolves with the launch profile's `env:` (`--profile`, the Run
//!    screen's profile), and says where each variable came from.
//!
//! Beside them, the runner the event loop uses: the TUI's own save is no change on disk.
//!
//! The binary is the one `cargo test` builds beside the test executables; a test run that did
//! not build it (`cargo test --lib` alone) skips these tests and says so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::app::{App, Effect, Msg, Overlay, update};
use super::effects::Runner;
use super::screens::Tab;
use crate::app::{Session, SessionOptions};
use crate::domain::trial::{FailureClass, TrialStatus};
use crate::run::trial::TelemetrySetup;
use crate::store::{NewTrial, Store, TrialEnd, TrialFilter};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The `primus-tune` binary of this build, when it was built.
fn bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("primus-tune");
    if p.is_file() {
        Some(p)
    } else {
        // Straight to stderr, past the test harness's capture: a skip must be seen.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {} is not built (plain `cargo test` builds it)",
            p.display()
        );
        None
    }
}

/// A private copy of the bundled example whose MoE experiment is shrunk so the CPU proxy runs
/// a trial in a fraction of a second; its own data folder, config folder and workspace.
struct Fixture {
    dir: tempfile::TempDir,
    exp: PathBuf,
    ws: PathBuf,
    data: PathBuf,
    bin: PathBuf,
}

const TINY: &[(&str, &str)] = &[
    ("micro_batch_size: 4", "micro_batch_size: 2"),
    ("global_batch_size: 256", "global_batch_size: 8"),
    ("${PRIMUS_SEQ_LENGTH:4096}", "256"),
    ("${PRIMUS_MAX_POSITION_EMBEDDINGS:4096}", "256"),
];

const TINY_MODEL: &str = "      num_layers: 2
      hidden_size: 256
      ffn_hidden_size: 512
      num_attention_heads: 4
      kv_channels: 64
      num_experts: 8
      moe_router_topk: 2
      moe_ffn_hidden_size: 128
      moe_shared_expert_intermediate_size: 128
      moe_layer_freq: 1
";

fn fixture(edits: &[(&str, &str)]) -> Option<Fixture> {
    let bin = bin()?;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ex");
    crate::util::bundled::extract(&root).unwrap();
    let exp = root.join(crate::util::bundled::DEFAULT_EXPERIMENT);
    let mut text = std::fs::read_to_string(&exp).unwrap();
    for (a, b) in TINY.iter().chain(edits) {
        assert!(text.contains(a), "the example has `{a}`");
        text = text.replace(a, b);
    }
    text.push_str(TINY_MODEL);
    std::fs::write(&exp, text).unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    Some(Fixture {
        ws: dir.path().join("ws"),
        data: dir.path().join("data"),
        exp,
        bin,
        dir,
    })
}

impl Fixture {
    /// The binary with this fixture's folders and no launcher variables.
    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("XDG_DATA_HOME", &self.data)
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("PRIMUS_TUNE_WORKSPACE", &self.ws)
            .env_remove("PRIMUS_ROOT")
            .env_remove("GPUS_PER_NODE")
            .env_remove("PRIMUS_HIPBLASLT_TUNING")
            .env_remove("PRIMUS_HIPBLASLT_TUNING_STAGE");
        c
    }

    fn cli(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    fn exp(&self) -> &str {
        self.exp.to_str().unwrap()
    }

    /// The session the TUI opens for this fixture (`primus-tune CONFIG --workspace WS`); the
    /// CPU proxy is this build's binary (the tests run in another executable).
    fn session(&self, telemetry: Option<TelemetrySetup>) -> Session {
        self.session_with(telemetry, &[])
    }

    /// [`Fixture::session`] with `--env` pairs.
    fn session_with(&self, telemetry: Option<TelemetrySetup>, env: &[&str]) -> Session {
        let mut s = Session::open(SessionOptions {
            env: env.iter().map(|e| e.to_string()).collect(),
            config: Some(self.exp.clone()),
            workspace: Some(self.ws.clone()),
            data_home: Some(self.data.clone()),
            telemetry,
            defaults: Some(crate::app::Defaults::default()),
            ..SessionOptions::default()
        })
        .unwrap();
        s.self_exe = Some(self.bin.clone());
        s
    }
}

/// The error line a failed command printed (without `error: `).
fn error_of(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    err.lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or_else(|| panic!("no error line in: {err}"))
        .to_string()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The TUI without a terminal: keys go through the key map and `update`, effects through the
/// same runner the event loop uses, messages come back from its workers.
struct Driver {
    app: App,
    runner: Runner,
    rx: mpsc::Receiver<Msg>,
    load_rx: mpsc::Receiver<(u64, Msg)>,
    rt: tokio::runtime::Runtime,
}

impl Driver {
    fn new(session: Session) -> Driver {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (tx, rx) = mpsc::channel(1024);
        let (load_tx, load_rx) = mpsc::channel(16);
        let mut app = App::new(Vec::new(), crate::run::profile::DEFAULT_PROFILE, false);
        app.set_profiles(&crate::app::trial::profiles());
        let mut d = Driver {
            app,
            runner: Runner {
                session,
                tx,
                load_tx,
                load_gen: 0,
                loaded_gen: 0,
                saving: false,
                trial: None,
                sweep: None,
                state_file: None,
                remember: Default::default(),
            },
            rx,
            load_rx,
            rt,
        };
        d.perform(vec![Effect::Load(Vec::new()), Effect::LoadTrials]);
        assert!(d.until(|a| a.config.is_some(), 30), "the config view loads");
        d
    }

    fn profile(&mut self, name: &str) {
        self.app.profile = self.app.profiles.iter().position(|p| p == name).unwrap();
    }

    fn perform(&mut self, fx: Vec<Effect>) {
        let _rt = self.rt.enter();
        for f in fx {
            self.runner.perform(f, &self.app);
        }
    }

    fn key(&mut self, code: KeyCode) {
        let fx = update(
            &mut self.app,
            Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)),
        );
        self.perform(fx);
    }

    fn msg(&mut self, msg: Msg) {
        self.runner.ended(&msg);
        let fx = update(&mut self.app, msg);
        self.perform(fx);
    }

    /// Feeds the workers' messages through `update` until `done` holds (false on timeout).
    fn until(&mut self, done: impl Fn(&App) -> bool, secs: u64) -> bool {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            if done(&self.app) {
                return true;
            }
            let (rx, load_rx) = (&mut self.rx, &mut self.load_rx);
            let msg = self.rt.block_on(async {
                tokio::select! {
                    Some(m) = rx.recv() => Some((None, m)),
                    Some((g, m)) = load_rx.recv() => Some((Some(g), m)),
                    () = tokio::time::sleep(Duration::from_millis(100)) => None,
                }
            });
            match msg {
                // As the event loop: a stale config view is dropped.
                Some((Some(g), m)) if self.runner.loaded(g) => self.msg(m),
                Some((None, m)) => self.msg(m),
                _ => {}
            }
        }
        done(&self.app)
    }

    /// On the Sweep screen with the CPU proxy: sweeps `space`, stops it (`x`) once its first
    /// trial has ended, and waits for the sweep to end.
    fn sweep_one_trial(&mut self, space: &str) {
        self.profile("proxy-cpu");
        self.key(KeyCode::Char('5'));
        let spaces = &self.app.config.as_ref().unwrap().spaces;
        self.app.screens.sweep.selected = spaces.iter().position(|s| s.name == space).unwrap();
        self.key(KeyCode::Char('r'));
        // A space the CPU stand-in cannot rank runs as a labelled demo, once asked.
        if matches!(
            self.app.overlay,
            Some(crate::tui::app::Overlay::ConfirmLaunch(_))
        ) {
            self.key(KeyCode::Char('y'));
        }
        let first = |a: &App| {
            a.screens
                .sweep
                .log
                .iter()
                .any(|l| l.starts_with("  trial "))
        };
        assert!(self.until(first, 60), "{:?}", self.app.screens.sweep.log);
        self.key(KeyCode::Char('x'));
        assert!(
            self.until(|a| !a.screens.sweep.running, 60),
            "the sweep stops"
        );
    }

    /// Waits for the Run screen's trial to end; its result (the error text when it could not
    /// run).
    fn trial_result(&mut self) -> Result<crate::domain::trial::TrialResult, String> {
        let ended = |a: &App| {
            let t = a.screens.run.trial.as_ref();
            t.is_some_and(|t| t.result.is_some())
        };
        assert!(self.until(ended, 30), "the TUI's trial ends");
        let t = self.app.screens.run.trial.as_ref().unwrap();
        t.result.clone().unwrap()
    }

    fn status(&self) -> String {
        self.app.status.clone().map(|s| s.1).unwrap_or_default()
    }
}

fn trials_in(ws: &Path) -> Vec<crate::store::TrialRow> {
    let db = ws.join("trials.db");
    if !db.is_file() {
        return Vec::new();
    }
    Store::open(&db)
        .unwrap()
        .list_trials(&TrialFilter::all())
        .unwrap()
}

#[test]
fn lint_errors_stop_a_launch_from_both_frontends() {
    let Some(f) = fixture(&[(
        "turbo_sync_free_moe_stage: 0",
        "turbo_sync_free_moe_stage: 5",
    )]) else {
        return;
    };
    let out = f.cli(&["run", f.exp(), "--profile", "proxy-cpu", "--no-telemetry"]);
    assert_eq!(out.status.code(), Some(2));
    let cli_error = error_of(&out);
    assert!(cli_error.contains("has 2 lint errors that"), "{cli_error}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sync-free-stage-range"),
        "the errors are listed"
    );

    let mut d = Driver::new(f.session(None));
    d.key(KeyCode::Char('3'));
    d.key(KeyCode::Char('r'));
    let result = d.trial_result();
    assert_eq!(result.unwrap_err(), cli_error, "the same refusal");
    assert!(d.status().contains(&cli_error), "{}", d.status());
    assert!(trials_in(&f.ws).is_empty(), "nothing was launched");
    // With the gate passed on purpose the CLI launches (the TUI has no such key).
    let out = f.cli(&[
        "run",
        f.exp(),
        "--profile",
        "proxy-cpu",
        "--no-telemetry",
        "--force",
        "--max-iters",
        "4",
    ]);
    assert_ne!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_gemm_stage_without_hipblaslt_is_refused_with_one_text() {
    let Some(f) = fixture(&[]) else { return };
    let out = f.cli(&["gemm-tune", "stage", "1", f.exp(), "--profile", "proxy-cpu"]);
    assert_eq!(out.status.code(), Some(2));
    let cli_error = error_of(&out);
    assert!(cli_error.contains("never calls"), "{cli_error}");

    let mut d = Driver::new(f.session(None));
    d.profile("proxy-cpu");
    assert_eq!(d.app.tab, Tab::Checklist);
    d.app.screens.checklist.selected = 0; // the GEMM step
    d.key(KeyCode::Char('n'));
    assert_eq!(d.status(), cli_error, "refused up front");
    assert_eq!(d.app.tab, Tab::Checklist, "no trial was started");
    // The effect itself refuses too (the stage plan is the one place that decides).
    d.perform(vec![Effect::StartGemmStage {
        stage: 1,
        profile: "proxy-cpu".into(),
    }]);
    let r = d.trial_result();
    assert_eq!(r.unwrap_err(), cli_error);
    assert!(trials_in(&f.ws).is_empty());
}

/// Stage 1 and 2 files on disk, and a finished stage-3 comparison in the workspace.
fn stage3_done(f: &Fixture) {
    let primus = f.exp.parent().unwrap().parent().unwrap();
    let tune = primus.join("output/tune_hipblaslt/moe_16B-BF16-pretrain");
    std::fs::create_dir_all(tune.join("gemm_shape")).unwrap();
    std::fs::create_dir_all(tune.join("gemm_tune")).unwrap();
    std::fs::write(
        tune.join("gemm_shape/dump_hipblaslt_gemm_shape_0.txt"),
        "hipblaslt-bench --api_method c -m 64 -n 32 -k 16 --lda 64 --ldb 16 --ldc 64 --ldd 64 --stride_a 0 --stride_b 0 --stride_c 0 --stride_d 0 --alpha 1.000000 --beta 0.000000 --transA T --transB N --batch_count 1 --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r --scale_type f32_r --bias_type f32_r --compute_type f32_r --algo_method index --solution_index 7\n",
    )
    .unwrap();
    std::fs::write(
        tune.join("gemm_tune/tune_hipblas_gemm_results.txt"),
        "Git Version: abc\n    transA,transB,batch_count,m,n,k,a_type,b_type,c_type,d_type,compute_type,hipblaslt-Gflops,us,solution_index,gcnArchName,CUs\n    T,N,1,64,32,16,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,1,1,7,gfx942:sramecc+:xnack-,304\n",
    )
    .unwrap();
    let store = Store::open(&f.ws.join("trials.db")).unwrap();
    let study = store
        .create_study("gemm-stage3", &f.exp, &crate::gemm::runner::study_kind(3))
        .unwrap();
    let mut ids = Vec::new();
    for ms in [110.0, 100.0] {
        let id = store
            .insert_trial(&NewTrial {
                config_path: f.exp.clone(),
                config_hash: "h".into(),
                study_id: Some(study),
                ..NewTrial::default()
            })
            .unwrap();
        let mut end = TrialEnd::new(TrialStatus::Completed, 5.0);
        end.median_step_ms = Some(ms);
        end.ci95_ms = Some(0.5);
        store.finish_trial(id, &end).unwrap();
        ids.push(id);
    }
    let notes = serde_json::json!({"baseline": ids[0], "tuned": ids[1]});
    store
        .set_study_notes(study, Some(&notes.to_string()))
        .unwrap();
}

#[test]
fn the_stored_stage3_comparison_is_seen_by_checklist_recommend_and_the_tui() {
    let Some(f) = fixture(&[]) else { return };
    stage3_done(&f);
    let status = json(&f.cli(&["gemm-tune", "status", "--no-probe", "--json", f.exp()]));
    assert_eq!(status["done"], 3, "{status}");
    assert_eq!(status["next"], serde_json::Value::Null);
    let list = json(&f.cli(&["checklist", "--json", f.exp()]));
    let cli_step = &list["steps"][0];
    assert_eq!(cli_step["step"], "gemms");
    let actions = cli_step["actions"].to_string();
    assert!(!actions.contains("stage 3"), "{actions}");
    let recs = json(&f.cli(&["recommend", "--json", f.exp(), "--gpu", "MI300X"]));
    assert!(
        !recs.to_string().contains("PRIMUS_HIPBLASLT_TUNING_STAGE"),
        "{recs}"
    );

    let d = Driver::new(f.session(None));
    let c = d.app.config.as_ref().unwrap();
    let tui_step = &c.checklist.steps[0];
    assert_eq!(
        serde_json::to_value(tui_step.status).unwrap(),
        cli_step["status"]
    );
    assert_eq!(
        serde_json::to_value(&tui_step.actions).unwrap(),
        cli_step["actions"]
    );
    assert_eq!(c.gemm.as_ref().unwrap().next, None);
    assert!(c.gemm.as_ref().unwrap().comparison.is_some());
}

/// A trial that ran the config as it is, with a profile that runs the real job and a peak in
/// its summary, makes the checklist's memory step done: the CLI and the TUI read the same
/// trial and say the same.
#[test]
fn both_frontends_read_the_checklist_s_memory_from_the_same_trial() {
    let Some(f) = fixture(&[]) else { return };
    let exp = f.session(None).load().unwrap();
    let store = Store::open(&f.ws.join("trials.db")).unwrap();
    let id = store
        .insert_trial(&NewTrial {
            config_path: f.exp.clone(),
            config_hash: "h".into(),
            profile: Some("megatron".into()),
            resolved: Some(
                serde_json::to_value(crate::app::views::trials::params_of(&exp)).unwrap(),
            ),
            ..NewTrial::default()
        })
        .unwrap();
    let mut end = TrialEnd::new(TrialStatus::Completed, 5.0);
    end.peak_mem_gib = Some(60.0);
    end.summary = Some(serde_json::json!({"peak_mem_gib": 60.0, "peak_mem_kind": "allocator"}));
    store.finish_trial(id, &end).unwrap();

    let list = json(&f.cli(&["checklist", "--json", f.exp()]));
    let cli_step = list["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "memory")
        .unwrap()
        .clone();
    assert_eq!(cli_step["status"], "done", "{cli_step}");
    let said =
        format!("measured: it fits: trial {id} ran these settings with megatron, peak 60.0 GiB");
    assert!(
        cli_step["findings"].to_string().contains(&said),
        "{cli_step}"
    );

    let d = Driver::new(f.session(None));
    let c = d.app.config.as_ref().unwrap();
    let tui_step = c
        .checklist
        .steps
        .iter()
        .find(|s| s.step == crate::config::catalog::Step::Memory)
        .unwrap();
    assert_eq!(
        serde_json::to_value(tui_step.status).unwrap(),
        cli_step["status"]
    );
    assert_eq!(
        serde_json::to_value(&tui_step.findings).unwrap(),
        cli_step["findings"]
    );
}

/// `primus-tune sweep ... --resume STUDY ...` split into words (the hint quotes with '...').
fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for ch in cmd.chars() {
        match ch {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// Runs a resume command as printed (without PRIMUS_TUNE_WORKSPACE: the command must say it).
fn run_hint(f: &Fixture, hint: &str) -> Output {
    let w = words(hint);
    assert_eq!(
        w[..2],
        ["primus-tune".to_string(), "sweep".to_string()],
        "{hint}"
    );
    f.cmd()
        .env_remove("PRIMUS_TUNE_WORKSPACE")
        .args(&w[1..])
        .output()
        .unwrap()
}

fn finished(f: &Fixture, study: &str, ws: &Path) -> bool {
    let s = Session::open(SessionOptions {
        config: Some(f.exp.clone()),
        workspace: Some(ws.to_path_buf()),
        data_home: Some(f.data.clone()),
        ..SessionOptions::default()
    })
    .unwrap();
    crate::app::views::studies::detail(&s, study)
        .unwrap()
        .record
        .is_some()
}

/// The study's candidate 0 is the experiment's current settings (micro batch 2, no recompute),
/// and the study's first trial ran them.
fn baseline_ran_first(f: &Fixture, study: &str, ws: &Path) {
    let s = Session::open(SessionOptions {
        config: Some(f.exp.clone()),
        workspace: Some(ws.to_path_buf()),
        data_home: Some(f.data.clone()),
        ..SessionOptions::default()
    })
    .unwrap();
    let d = crate::app::views::studies::detail(&s, study).unwrap();
    let rec = d.record.unwrap();
    let c0 = &rec.candidates[0];
    assert!(c0.baseline && c0.id == 0, "{study}: {:?}", rec.candidates);
    assert_eq!(c0.overrides["micro_batch_size"], 2);
    assert_eq!(rec.baseline, Some(0));
    let store = s.require_store().unwrap();
    let first = store
        .list_trials(&TrialFilter::all().study(d.summary.id))
        .unwrap()
        .into_iter()
        .min_by_key(|t| t.id)
        .unwrap();
    assert_eq!(
        crate::run::trial::trial_settings(&first).get("micro_batch_size"),
        Some(&serde_json::json!(2)),
        "{study}: first trial {:?}",
        first.overrides
    );
}

#[test]
fn a_stopped_sweep_resumes_with_the_command_either_frontend_prints() {
    let Some(f) = fixture(&[]) else { return };
    // The CLI: SIGTERM after the first trial, then the printed command.
    let ws_cli = f.dir.path().join("ws-cli");
    let mut child = f
        .cmd()
        .args([
            "sweep",
            f.exp(),
            "--space",
            "memory-fit",
            "--profile",
            "proxy-cpu",
            "--allow-unmodeled",
        ])
        .args(["--name", "cli-study", "--no-telemetry", "--workspace"])
        .arg(&ws_cli)
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
        if line.starts_with("  trial ") {
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
    assert_eq!(child.wait().unwrap().code(), Some(3), "{seen}{rest}");
    let hint = rest
        .lines()
        .find_map(|l| l.split("Continue with: ").nth(1))
        .unwrap_or_else(|| panic!("no resume command in:\n{rest}"));
    let out = run_hint(&f, hint);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{hint}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(finished(&f, "cli-study", &ws_cli));
    baseline_ran_first(&f, "cli-study", &ws_cli);

    // The TUI: stop it after its first trial, then the command on its status line.
    let mut d = Driver::new(f.session(None));
    d.sweep_one_trial("memory-fit");
    let status = d.status();
    let hint = status
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command in: {status}"));
    let study = words(hint)[4].clone();
    assert!(!finished(&f, &study, &f.ws), "stopped before its end");
    let out = run_hint(&f, hint);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{hint}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(finished(&f, &study, &f.ws));
    baseline_ran_first(&f, &study, &f.ws);
}

/// The MI300X-shaped sysfs tree of the repository's fixtures.
fn sysfs_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/mi300x_spx_nps1")
}

/// GPUs the trial's stored telemetry summary covers.
fn gpus_sampled(t: &crate::store::TrialRow) -> usize {
    t.summary
        .as_ref()
        .and_then(|s| s["telemetry"].as_array())
        .map_or(0, Vec::len)
}

/// Host samples the trial stored (snapshots with no GPU), and all it stored.
fn host_samples(ws: &Path, t: &crate::store::TrialRow) -> (usize, usize) {
    let all = Store::open(&ws.join("trials.db"))
        .unwrap()
        .samples(t.id)
        .unwrap();
    (all.iter().filter(|s| s.gpus.is_empty()).count(), all.len())
}

/// Both frontends give a sweep's trials the telemetry their plan allows: a CPU stand-in's
/// trials sample the host, never the GPUs of the backend the frontend was given (they are not
/// its evidence); a GPU profile's plan keeps the backend (`launch::plan` tests it).
#[test]
fn sweeps_sample_the_telemetry_backend_the_frontend_was_given() {
    let Some(f) = fixture(&[]) else { return };
    let tree = sysfs_fixture();
    let (sys, proc) = (tree.join("sys"), tree.join("proc"));
    let out = f.cli(&[
        "sweep",
        f.exp(),
        "--space",
        "memory-fit",
        "--profile",
        "proxy-cpu",
        "--allow-unmodeled",
        "--max-trials",
        "1",
        "--backend",
        "amdgpu-sysfs",
        "--sysfs-root",
        sys.to_str().unwrap(),
        "--procfs-root",
        proc.to_str().unwrap(),
        "--interval",
        "20",
    ]);
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli = trials_in(&f.ws);
    assert!(!cli.is_empty());
    assert_eq!(
        gpus_sampled(&cli[0]),
        0,
        "the CLI's stand-in sampled no GPU"
    );
    let (host, all) = host_samples(&f.ws, &cli[0]);
    assert!(
        host > 0 && host == all,
        "host samples only: {host} of {all}"
    );

    let ws2 = f.dir.path().join("ws-tui");
    let telemetry = TelemetrySetup {
        backend: "amdgpu-sysfs".into(),
        roots: crate::telemetry::select::Roots {
            sysfs: sys,
            procfs: proc,
        },
        config: crate::telemetry::sampler::SamplerConfig {
            interval: Duration::from_millis(20),
            process_interval: Duration::from_millis(2000),
        },
    };
    let mut session = f.session(Some(telemetry));
    session.workspace =
        crate::store::Workspace::at(ws2.clone(), crate::store::WorkspaceOrigin::Chosen);
    let mut d = Driver::new(session);
    d.sweep_one_trial("memory-fit");
    let tui = trials_in(&ws2);
    let first = tui
        .iter()
        .find(|t| t.status == TrialStatus::Completed)
        .unwrap_or_else(|| {
            panic!(
                "a completed trial: {:?} {:?}",
                tui.iter()
                    .map(|t| (t.status, t.failure.clone()))
                    .collect::<Vec<_>>(),
                d.app.screens.sweep.log
            )
        });
    assert_eq!(gpus_sampled(first), 0, "the TUI's stand-in sampled no GPU");
    let (host, all) = host_samples(&ws2, first);
    assert!(
        host > 0 && host == all,
        "host samples only: {host} of {all}"
    );
}

#[test]
fn without_a_config_both_frontends_use_one_experiment_and_one_workspace() {
    let Some(f) = fixture(&[]) else { return };
    let tiny: Vec<String> = TINY_MODEL
        .lines()
        .map(|l| format!("--set={}", l.trim().replacen(": ", "=", 1)))
        .chain([
            "--set=micro_batch_size=2".into(),
            "--set=global_batch_size=8".into(),
        ])
        .chain([
            "--set=seq_length=256".into(),
            "--set=max_position_embeddings=256".into(),
        ])
        .collect();
    let out = f
        .cmd()
        .env_remove("PRIMUS_TUNE_WORKSPACE")
        .args([
            "run",
            "--profile",
            "proxy-cpu",
            "--no-telemetry",
            "--json",
            "--max-iters",
            "6",
        ])
        .args(&tiny)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let id = last["trial_id"].as_i64().unwrap();

    // What `primus-tune` without CONFIG opens on a terminal.
    let session = crate::cli::tui_session(
        &crate::cli::LoadArgs::default(),
        None,
        Some(f.data.clone()),
        Some(crate::app::Defaults::default()),
    )
    .unwrap();
    assert!(
        session.experiment.starts_with(&f.data),
        "{}",
        session.experiment.display()
    );
    let store = session
        .existing_store()
        .unwrap()
        .expect("the CLI's workspace");
    let t = store.trial(id).unwrap().expect("the CLI's trial");
    assert_eq!(t.config_path, session.experiment);
    assert_eq!(t.failure.map(|x| x.class), None::<FailureClass>);
    // The TUI's Trials screen lists it; the CLI without CONFIG lists it too.
    let mut d = Driver::new(session);
    d.key(KeyCode::Char('4'));
    assert!(d.until(|a| a.screens.trials.rows.iter().any(|r| r.id == id), 20));
    let out = f
        .cmd()
        .env_remove("PRIMUS_TUNE_WORKSPACE")
        .args(["trials", "--json"])
        .current_dir(f.dir.path())
        .output()
        .unwrap();
    let rows = json(&out);
    assert!(
        rows.as_array().unwrap().iter().any(|r| r["id"] == id),
        "{rows}"
    );
}

#[test]
fn a_space_the_profile_does_not_model_is_refused_by_both_with_the_way_out() {
    let Some(f) = fixture(&[]) else { return };
    let out = f.cli(&[
        "sweep",
        f.exp(),
        "--space",
        "deepep-cu",
        "--profile",
        "proxy-cpu",
        "--no-telemetry",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let cli_error = error_of(&out);
    assert!(
        cli_error.contains("turbo_deepep_num_cu") && cli_error.contains("--allow-unmodeled"),
        "{cli_error}"
    );
    assert!(trials_in(&f.ws).is_empty(), "nothing ran");

    let mut d = Driver::new(f.session(None));
    d.profile("proxy-cpu");
    d.key(KeyCode::Char('5'));
    let spaces = &d.app.config.as_ref().unwrap().spaces;
    d.app.screens.sweep.selected = spaces.iter().position(|s| s.name == "deepep-cu").unwrap();
    // The TUI asks before it starts: the same knobs, the same way out (a labelled demo); `n`
    // runs nothing.
    d.key(KeyCode::Char('r'));
    let asked = match &d.app.overlay {
        Some(crate::tui::app::Overlay::ConfirmLaunch(l)) => l.lines.join(" "),
        other => panic!("{other:?}"),
    };
    assert!(
        asked.contains("does not model turbo_deepep_num_cu") && asked.contains("demo"),
        "{asked}"
    );
    d.key(KeyCode::Char('n'));
    assert!(!d.app.screens.sweep.running);
    assert!(trials_in(&f.ws).is_empty());

    // As a demo it runs, and says so: the record, the text, and no measured advice from it.
    let out = f.cli(&[
        "sweep",
        f.exp(),
        "--space",
        "deepep-cu",
        "--profile",
        "proxy-cpu",
        "--no-telemetry",
        "--allow-unmodeled",
        "--max-trials",
        "2",
        "--name",
        "demo",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("evidence: proxy (proxy-cpu: a CPU stand-in, not GPU evidence)"),
        "{text}"
    );
    assert!(
        text.contains("not modelled by proxy-cpu: turbo_deepep_num_cu"),
        "{text}"
    );
    assert!(text.contains("conclusion: incomplete"), "{text}");
    let recs = json(&f.cli(&[
        "recommend",
        f.exp(),
        "--study",
        "demo",
        "--json",
        "--gpu",
        "MI300X",
    ]));
    let from_study: Vec<&serde_json::Value> = recs["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["flag"] == "turbo_deepep_num_cu" && r["basis"] != "rule")
        .collect();
    assert!(
        from_study.is_empty(),
        "not from the proxy's noise: {from_study:?}"
    );
}

/// The Run screen runs unsaved edits as the trial's overrides, as `run --set` does (the file
/// stays as it is); `a` on that trial restores exactly what it ran differently; the CLI's
/// compare of a `run --set` trial and the TUI's names the same difference.
#[test]
fn unsaved_edits_run_as_overrides_and_apply_restores_the_difference() {
    let Some(f) = fixture(&[]) else { return };
    let before = std::fs::read_to_string(&f.exp).unwrap();
    let mut d = Driver::new(f.session(None));
    d.profile("proxy-cpu");
    d.app.pending = vec![crate::app::views::config::PendingEdit {
        key: "micro_batch_size".into(),
        text: "1".into(),
    }];
    d.key(KeyCode::Char('3'));
    d.key(KeyCode::Char('r'));
    let r = d.trial_result().expect("the trial runs");
    let id = r.trial_id.expect("stored");
    assert_eq!(
        std::fs::read_to_string(&f.exp).unwrap(),
        before,
        "file unchanged"
    );
    let t = trials_in(&f.ws).into_iter().find(|t| t.id == id).unwrap();
    assert_eq!(
        crate::run::trial::trial_settings(&t).get("micro_batch_size"),
        Some(&serde_json::json!(1)),
        "{:?}",
        t.overrides
    );
    // The same difference from the CLI: a trial of the file as it is, compared with the TUI's.
    let out = f.cli(&[
        "run",
        f.exp(),
        "--profile",
        "proxy-cpu",
        "--no-telemetry",
        "--max-iters",
        "6",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plain = trials_in(&f.ws).into_iter().map(|t| t.id).max().unwrap();
    let c = json(&f.cli(&[
        "trials",
        "compare",
        &plain.to_string(),
        &id.to_string(),
        "--json",
        "--config",
        f.exp(),
    ]));
    assert_eq!(
        c["differences"],
        serde_json::json!([{"flag": "micro_batch_size", "a": 2, "b": 1}])
    );
    // Apply: the edits were dropped; `a` on the TUI's trial brings back exactly micro batch 1.
    d.app.pending.clear();
    d.key(KeyCode::Char('4'));
    assert!(d.until(|a| a.screens.trials.rows.iter().any(|r| r.id == plain), 20));
    let pos = d
        .app
        .screens
        .trials
        .sorted()
        .iter()
        .position(|t| t.id == id)
        .unwrap();
    d.app.screens.trials.selected = pos;
    d.key(KeyCode::Char('a'));
    assert_eq!(
        d.app.pending,
        vec![crate::app::views::config::PendingEdit {
            key: "micro_batch_size".into(),
            text: "1".into(),
        }]
    );
}

/// A to-do acknowledged in the TUI (`a` on the Checklist, the reason typed, Enter) is what the
/// CLI's checklist and recommend see, and one acknowledged with `recommend --ack` is what the
/// TUI shows after a reload: one store, one use case.
#[test]
fn an_acknowledgement_made_in_either_frontend_is_seen_by_the_other() {
    use crate::checklist::FindingKind;
    let Some(f) = fixture(&[]) else { return };
    let mut d = Driver::new(f.session(None));
    let steps = &d.app.config.as_ref().unwrap().checklist.steps;
    let step = steps
        .iter()
        .position(|s| s.open_todo().is_some())
        .expect("the example has a to-do");
    let rule = steps[step].open_todo().unwrap().rule.unwrap();
    d.app.screens.checklist.selected = step;
    d.key(KeyCode::Char('a'));
    // Enter with no reason keeps asking: a box says why over the question, Esc closes it.
    d.key(KeyCode::Enter);
    assert!(
        matches!(
            &d.app.overlay,
            Some(super::app::Overlay::Error { under: Some(_), .. })
        ),
        "a reason is required"
    );
    d.key(KeyCode::Esc);
    assert!(d.app.overlay.is_some(), "still asking");
    for ch in "not on this cluster".chars() {
        d.key(KeyCode::Char(ch));
    }
    d.key(KeyCode::Enter);
    let acked = move |a: &App| {
        a.config.as_ref().unwrap().checklist.steps[step]
            .findings
            .iter()
            .any(|x| x.kind == FindingKind::Acknowledged && x.rule == Some(rule))
    };
    assert!(
        d.until(acked, 30),
        "the TUI's checklist shows it acknowledged"
    );

    let list = json(&f.cli(&["checklist", "--json", f.exp()]));
    let found = list["steps"][step]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rule"] == rule)
        .cloned()
        .unwrap();
    assert_eq!(found["kind"], "acknowledged", "{found}");
    assert!(
        found["text"]
            .as_str()
            .unwrap()
            .contains("not on this cluster")
    );
    let rec = json(&f.cli(&["recommend", "--json", f.exp(), "--gpu", "MI300X"]));
    assert_eq!(rec["acknowledged"][0]["rule"], rule, "{rec}");

    // The other way: acknowledged by the CLI, seen by the TUI after a reload.
    let out = f.cli(&["recommend", f.exp(), "--unack", rule]);
    assert!(out.status.success());
    d.key(KeyCode::Char('R'));
    assert!(
        d.until(move |a| !acked(a), 30),
        "withdrawn in the CLI, a to-do again in the TUI"
    );
}

/// The TUI's own save makes the file newer than the view until the reload that follows lands;
/// the event loop checks the file's stamp every second only while the runner is settled, so
/// that window is never taken for someone else's change ("the experiment changed on disk;
/// reloaded" replaced "saved 1 change to ..." under load).
#[test]
fn the_tuis_own_save_is_not_a_change_on_disk() {
    use crate::app::views::config::{PendingEdit, stamp};
    let Some(f) = fixture(&[]) else { return };
    let mut d = Driver::new(f.session(None));
    assert!(d.runner.settled(), "the first view has landed");
    d.app.pending = vec![PendingEdit {
        key: "micro_batch_size".into(),
        text: "1".into(),
    }];
    d.perform(vec![Effect::Save(d.app.pending.clone())]);
    assert!(!d.runner.settled(), "a save under way");
    // Saved: the reload is asked for and has not landed; the file is newer than the view.
    assert!(d.until(|a| a.pending.is_empty(), 30), "{}", d.status());
    assert!(d.status().contains("saved 1 change to"), "{}", d.status());
    assert!(
        !d.runner.settled(),
        "between the save and its reload the stamp check is off"
    );
    // The reload lands: settled, the view's stamp is the file's.
    assert!(
        d.until(
            |a| a.config.as_ref().and_then(|c| c.stamp) == stamp(&f.exp),
            30
        ),
        "the reload lands"
    );
    assert!(d.runner.settled());
    assert!(d.status().contains("saved 1 change to"), "{}", d.status());
}

#[test]
fn both_frontends_show_the_config_as_the_launch_profile_sets_its_environment() {
    let Some(f) = fixture(&[]) else { return };
    if ["CUDA_DEVICE_MAX_CONNECTIONS", "PRIMUS_TP"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
    {
        eprintln!(
            "skipped: CUDA_DEVICE_MAX_CONNECTIONS or PRIMUS_TP is set in the test's environment"
        );
        return;
    }
    const NEEDS: &str = "TP/PP overlap needs CUDA_DEVICE_MAX_CONNECTIONS=1";
    const SET: &str = "CUDA_DEVICE_MAX_CONNECTIONS=1";
    // The CLI: `--profile primus` (whose env: sets CUDA_DEVICE_MAX_CONNECTIONS=1).
    let cli = |extra: &[&str]| {
        let mut args = vec!["checklist", f.exp(), "--env", "PRIMUS_TP=2", "--json"];
        args.extend(extra);
        json(&f.cli(&args)).to_string()
    };
    assert!(cli(&[]).contains(NEEDS));
    let with = cli(&["--profile", "primus"]);
    assert!(
        with.contains(&format!("\"{SET}\"")) && !with.contains(NEEDS),
        "{with}"
    );
    let shown = json(&f.cli(&[
        "show",
        f.exp(),
        "--env",
        "PRIMUS_TP=2",
        "--profile",
        "primus",
        "--json",
        "--flag",
        "tensor_model_parallel_size",
    ]));
    assert_eq!(shown[0]["env"][0]["from"], "--env");

    // The TUI: proxy-cpu (no env:) first, then primus chosen on the Run screen.
    let mut d = Driver::new(f.session_with(None, &["PRIMUS_TP=2"]));
    let texts = |a: &App| -> Vec<String> {
        a.config.as_ref().map_or_else(Vec::new, |c| {
            c.checklist
                .steps
                .iter()
                .flat_map(|s| s.findings.iter().map(|f| f.text.clone()))
                .collect()
        })
    };
    assert!(
        texts(&d.app).iter().any(|t| t.starts_with(NEEDS)),
        "{:?}",
        texts(&d.app)
    );
    d.key(KeyCode::Char('3'));
    while d.app.profile_name() != Some("primus") {
        d.key(KeyCode::Right);
    }
    let as_primus = |a: &App| {
        a.config
            .as_ref()
            .and_then(|c| c.profile.as_ref())
            .is_some_and(|p| p.name == "primus")
    };
    assert!(
        d.until(as_primus, 30),
        "the config is read again as primus launches it"
    );
    assert!(
        texts(&d.app).iter().any(|t| t == SET),
        "{:?}",
        texts(&d.app)
    );
    let row = |name: &str| {
        let c = d.app.config.as_ref().unwrap();
        c.flags.iter().find(|r| r.name == name).cloned().unwrap()
    };
    let cdmc = row("CUDA_DEVICE_MAX_CONNECTIONS");
    assert_eq!(
        (cdmc.value.as_str(), cdmc.source.as_str()),
        ("1", "profile primus")
    );
    let tp = row("tensor_model_parallel_size");
    assert_eq!(tp.value, "2");
    assert!(
        tp.source.ends_with("· PRIMUS_TP=2 (--env)"),
        "{}",
        tp.source
    );
}

/// A finished sweep `name` of the fixture's experiment whose pick (candidate 1, faster beyond
/// the noise) is `pick`, the current settings being candidate 0.
fn finished_study(f: &Fixture, name: &str, current: serde_json::Value, pick: serde_json::Value) {
    let store = Store::open(&f.ws.join("trials.db")).unwrap();
    let cand = |id: usize, o: &serde_json::Value, ms: f64| {
        serde_json::json!({
            "id": id, "baseline": id == 0, "overrides": o,
            "verdict": if id == 1 { "winner" } else { "slower" },
            "why": "", "n": 8, "step_ms": ms, "ci_low_ms": ms - 1.0, "ci_high_ms": ms + 1.0,
        })
    };
    let rec = serde_json::json!({
        "space": "test", "config": f.exp, "profile": "primus", "gpus": 8,
        "candidates": [cand(0, &current, 110.0), cand(1, &pick, 100.0)],
        "pick": 1, "baseline": 0, "conclusion": {"kind": "change", "pick": 1},
        "gpu_seconds": 100.0, "trials": 2, "log": [],
    });
    let id = store.create_study(name, &f.exp, "sweep").unwrap();
    store.set_study_notes(id, Some(&rec.to_string())).unwrap();
}

/// Once `turbo-grouped-gemm` is acknowledged, nothing either frontend applies sets
/// `use_turbo_grouped_gemm`: not the sync-free rule that needs it (`recommend --apply`), not
/// the companion lint asks for with a sync-free study's pick (`recommend --study --apply`, the
/// TUI's `a` on the study) — that pick is held back whole, with the reason, by both. A pick
/// that needs nothing acknowledged is applied by both alike.
#[test]
fn an_acknowledged_flag_is_applied_by_neither_frontend() {
    let Some(f) = fixture(&[(
        "use_turbo_grouped_gemm: true",
        "use_turbo_grouped_gemm: false",
    )]) else {
        return;
    };
    let governed = crate::tune::recommend::governed("turbo-grouped-gemm");
    let out = f.cli(&[
        "recommend",
        f.exp(),
        "--ack",
        "turbo-grouped-gemm",
        "--reason",
        "slower on our ROCm",
    ]);
    assert!(out.status.success(), "{}", error_of(&out));
    finished_study(
        &f,
        "sf",
        serde_json::json!({"turbo_sync_free_moe_stage": 0}),
        serde_json::json!({"turbo_sync_free_moe_stage": 2}),
    );
    finished_study(
        &f,
        "cu",
        serde_json::json!({"turbo_deepep_num_cu": 64}),
        serde_json::json!({"turbo_deepep_num_cu": 80}),
    );
    let before = std::fs::read_to_string(&f.exp).unwrap();

    // The TUI: `a` on each study of the Studies screen.
    let mut d = Driver::new(f.session(None));
    d.key(KeyCode::Char('6'));
    assert!(d.until(|a| a.screens.studies.rows.len() == 2, 30));
    let at = |d: &Driver, name: &str| {
        let rows = &d.app.screens.studies.rows;
        rows.iter().position(|s| s.name == name).unwrap()
    };
    d.app.screens.studies.selected = at(&d, "sf");
    d.key(KeyCode::Char('a'));
    assert!(
        d.until(
            |a| a
                .status
                .as_ref()
                .is_some_and(|s| s.1.starts_with("nothing applied")),
            30
        ),
        "{}",
        d.status()
    );
    let said = d.status();
    assert!(
        said.contains("use_turbo_grouped_gemm") && said.contains("slower on our ROCm"),
        "{said}"
    );
    assert!(d.app.pending.is_empty(), "{:?}", d.app.pending);
    // The refusal is shown whole in a box; Esc closes it.
    assert!(
        matches!(d.app.overlay, Some(Overlay::Error { .. })),
        "{:?}",
        d.app.overlay
    );
    d.key(KeyCode::Esc);
    d.key(KeyCode::Char('6'));
    d.app.screens.studies.selected = at(&d, "cu");
    d.key(KeyCode::Char('a'));
    assert!(d.until(|a| !a.pending.is_empty(), 30), "{}", d.status());
    let tui: Vec<(String, String)> = d
        .app
        .pending
        .iter()
        .map(|p| (p.key.clone(), p.text.clone()))
        .collect();
    assert_eq!(tui, [("turbo_deepep_num_cu".to_string(), "80".to_string())]);

    // The CLI: the rules, then each study; only the second writes, and the same value.
    let out = f.cli(&["recommend", f.exp(), "--gpu", "MI300X", "--apply"]);
    assert!(out.status.success(), "{}", error_of(&out));
    let out = f.cli(&["recommend", f.exp(), "--study", "sf", "--apply"]);
    assert_eq!(out.status.code(), Some(2));
    let err = error_of(&out);
    assert!(
        err.contains("use_turbo_grouped_gemm") && err.contains("slower on our ROCm"),
        "{err}"
    );
    let after = std::fs::read_to_string(&f.exp).unwrap();
    for flag in &governed {
        assert!(after.contains(&format!("{flag}: false")), "{after}");
    }
    assert!(after.contains("turbo_sync_free_moe_stage: 0"), "{after}");
    let out = f.cli(&["recommend", f.exp(), "--study", "cu", "--apply"]);
    assert!(out.status.success(), "{}", error_of(&out));
    let after_cu = std::fs::read_to_string(&f.exp).unwrap();
    let changed: Vec<(&str, &str)> = after
        .lines()
        .zip(after_cu.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed,
        [(
            "      turbo_deepep_num_cu: 64",
            "      turbo_deepep_num_cu: 80"
        )]
    );
    assert_ne!(before, after_cu);
}
