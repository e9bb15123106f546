//! Render tests of the TUI's screens on ratatui's `TestBackend`, with fixed data and no colour:
//! each screen is snapshotted (insta, `src/tui/snapshots/`) at 80×24 and at 160×48, and a few
//! properties are asserted outright (what must stay visible, no colour under `NO_COLOR`).
//!
//! Regenerate the snapshots with `INSTA_UPDATE=always cargo test -q --lib render_tests`, then
//! read every changed `.snap` file before committing it.
#![allow(clippy::unwrap_used)]

use crate::app::views::config as load;
use crate::config::LoadOptions;
use crate::config::env::Env;
use crate::domain::job::Job;
use crate::domain::trial::{Failure, FailureClass};
use crate::run::process::Stream;
use crate::run::trial::TrialEvent;
use crate::store::{TrialRow, TrialStatus};
use crate::tui::app::{self, App, Msg};
use crate::tui::screens::Tab;
use crate::tui::theme::{Palette, Theme};
use crate::tui::{screens, widgets};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use primus_tune::testkit::{self, T0_MS, gpu_info, iteration, snapshot, summary};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use ratatui::text::Span;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const EXPERIMENT: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";
/// Fixed start of the telemetry history (Unix ms).
const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

// ---------------------------------------------------------------------------------------------
// Fixed data
// ---------------------------------------------------------------------------------------------

fn key(code: KeyCode) -> Msg {
    Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn press(app: &mut App, codes: &[KeyCode]) {
    for c in codes {
        app::update(app, key(*c));
    }
}

fn type_text(app: &mut App, s: &str) {
    for c in s.chars() {
        app::update(app, key(KeyCode::Char(c)));
    }
}

/// The app with the bundled example loaded (empty environment: the output does not depend on
/// the machine), on the Checklist screen, no overlay.
fn loaded_app() -> App {
    let mut app = App::new(
        vec!["proxy-cpu".into(), "proxy-torch".into()],
        "proxy-cpu",
        false,
    );
    let opts = LoadOptions {
        env: Env::default(),
        ..Default::default()
    };
    let (view, plan) =
        load::build(&session_at(Path::new(EXPERIMENT), opts), &[]).expect("example loads");
    assert!(plan.is_none());
    app::update(&mut app, Msg::Loaded(Ok((Box::new(view), None))));
    app
}

/// A running trial: 30 iterations, its summary, and a log tail that ends in a traceback.
fn feed_trial(app: &mut App) {
    app::update(
        app,
        Msg::Trial(TrialEvent::Started {
            trial_id: 7,
            argv: vec![
                "bash".into(),
                "examples/run_pretrain.sh".into(),
                "--train_iters".into(),
                "50".into(),
            ],
            trial_dir: PathBuf::from("presets/examples/experiments/.primus-tune/trials/0007"),
            basis: crate::domain::evidence::Basis::Measured {
                profile: "primus".into(),
                gpu: Some("AMD Instinct MI300X".into()),
            },
        }),
    );
    for i in 1..=30 {
        app::update(
            app,
            Msg::Trial(TrialEvent::Iteration {
                it: iteration(i),
                summary: Box::new(summary(i)),
            }),
        );
    }
    let log = [
        (
            Stream::Stdout,
            " [2025-06-15 16:10:27] iteration       28/      50 | elapsed time per iteration (ms): 1213.5/1212.9 | throughput per GPU (TFLOP/s/GPU): 134.3",
        ),
        (
            Stream::Stdout,
            " [2025-06-15 16:10:28] iteration       29/      50 | elapsed time per iteration (ms): 1210.0/1212.8 | throughput per GPU (TFLOP/s/GPU): 134.7",
        ),
        (
            Stream::Stdout,
            " [2025-06-15 16:10:29] iteration       30/      50 | elapsed time per iteration (ms): 1213.5/1212.8 | throughput per GPU (TFLOP/s/GPU): 134.3",
        ),
        (
            Stream::Stderr,
            "[rank3]: W0615 16:10:29 torch/distributed: slow collective (1.2 s)",
        ),
        (Stream::Stderr, "Traceback (most recent call last):"),
        (
            Stream::Stderr,
            "  File \"primus/train.py\", line 88, in <module>",
        ),
        (
            Stream::Stderr,
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB",
        ),
    ];
    for (s, l) in log {
        app::update(
            app,
            Msg::Trial(TrialEvent::Line {
                stream: s,
                line: l.to_string(),
            }),
        );
    }
}

fn feed_telemetry(app: &mut App, samples: u64) {
    app::update(
        app,
        Msg::TelemetryReady {
            gpus: (0..8).map(gpu_info).collect(),
            backend: "amdgpu-sysfs".into(),
            note: None,
        },
    );
    for k in 0..samples {
        app::update(app, Msg::Telemetry(Box::new(snapshot(k, 8))));
    }
}

fn trial_row(id: i64, status: TrialStatus, overrides: Vec<(&str, Value)>) -> TrialRow {
    testkit::trial_row(id, status, overrides, Path::new(EXPERIMENT))
}

/// Five stored trials: the baseline, three variants (one faster), and one that ran out of
/// memory.
fn trial_rows() -> Vec<TrialRow> {
    let base = trial_row(1, TrialStatus::Completed, vec![]);
    let mut mbs2 = trial_row(
        2,
        TrialStatus::Completed,
        vec![("micro_batch_size", json!(2))],
    );
    mbs2.median_step_ms = Some(1301.2);
    mbs2.ci95_ms = Some(3.1);
    mbs2.tokens_per_s_per_gpu = Some(100_731.0);
    mbs2.tflops_per_gpu = Some(125.2);
    mbs2.peak_mem_gib = Some(98.3);
    let mut turbo = trial_row(
        3,
        TrialStatus::Completed,
        vec![
            ("enable_primus_turbo", json!(true)),
            ("use_turbo_grouped_gemm", json!(true)),
        ],
    );
    turbo.median_step_ms = Some(1104.8);
    turbo.ci95_ms = Some(2.4);
    turbo.tokens_per_s_per_gpu = Some(118_645.0);
    turbo.tflops_per_gpu = Some(147.5);
    turbo.peak_mem_gib = Some(139.9);
    let mut oom = trial_row(4, TrialStatus::Failed, vec![("micro_batch_size", json!(8))]);
    oom.failure = Some(Failure {
        class: FailureClass::Oom,
        line: Some("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB".into()),
    });
    oom.exit_code = Some(1);
    oom.iterations_seen = 0;
    oom.iterations_stored = 0;
    oom.wall_s = Some(38.2);
    oom.median_step_ms = None;
    oom.ci95_ms = None;
    oom.tokens_per_s_per_gpu = None;
    oom.tflops_per_gpu = None;
    oom.peak_mem_gib = None;
    // Why the runner ended it, as the stored summary keeps it.
    if let Some(s) = oom.summary.as_mut() {
        s["stop_reason"] = json!("failure");
    }
    let mut stopped = trial_row(
        5,
        TrialStatus::Stopped,
        vec![("recompute_granularity", json!("full"))],
    );
    stopped.iterations_seen = 9;
    stopped.iterations_stored = 9;
    stopped.wall_s = Some(20.5);
    stopped.median_step_ms = Some(1388.0);
    stopped.ci95_ms = Some(40.2);
    stopped.tokens_per_s_per_gpu = Some(94_426.0);
    stopped.tflops_per_gpu = Some(117.4);
    stopped.peak_mem_gib = Some(61.0);
    vec![base, mbs2, turbo, oom, stopped]
}

// ---------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------

fn draw(app: &mut App, w: u16, h: u16, palette: Palette) -> Buffer {
    let theme = Theme::new(palette);
    let mut terminal = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    terminal
        .draw(|f| widgets::draw(f, app, &theme))
        .expect("draws");
    terminal.backend().buffer().clone()
}

/// The buffer as text: one line per row, trailing spaces trimmed (the cells a wide symbol
/// covers are skipped, as a terminal shows them).
fn text(buf: &Buffer) -> String {
    let w = buf.area.width as usize;
    let mut out = String::new();
    for row in buf.content.chunks(w) {
        let mut line = String::new();
        let mut skip = 0usize;
        for cell in row {
            if skip == 0 {
                line.push_str(cell.symbol());
            }
            skip = Span::raw(cell.symbol()).width().max(skip).saturating_sub(1);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub(super) fn screen(app: &mut App, w: u16, h: u16) -> String {
    text(&draw(app, w, h, Palette::None))
}

/// Snapshot `app` at both sizes as `<name>_<w>x<h>`.
fn snap_both(name: &str, mut app: impl FnMut() -> App) {
    for (w, h) in SIZES {
        let mut a = app();
        let s = screen(&mut a, w, h);
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), s);
    }
}

// ---------------------------------------------------------------------------------------------
// The states each snapshot shows
// ---------------------------------------------------------------------------------------------

fn checklist_app() -> App {
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Down]);
    assert_eq!(app.screens.checklist.selected, 1);
    app
}

fn flags_app() -> App {
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Char('2')]);
    assert_eq!(app.tab, Tab::Flags);
    app
}

/// The Flags screen with `micro_batch_size` found by search and an out-of-range value typed.
fn flags_editor_app() -> App {
    let mut app = flags_app();
    press(&mut app, &[KeyCode::Char('/')]);
    type_text(&mut app, "micro_batch");
    press(&mut app, &[KeyCode::Enter, KeyCode::Enter]);
    let e = app.screens.flags.editor.as_ref().expect("editor open");
    assert_eq!(e.key, "micro_batch_size");
    assert_eq!(e.text, "4");
    press(&mut app, &[KeyCode::Backspace]);
    type_text(&mut app, "0");
    app
}

fn run_app() -> App {
    let mut app = loaded_app();
    feed_telemetry(&mut app, 100);
    feed_trial(&mut app);
    press(&mut app, &[KeyCode::Char('3')]);
    assert_eq!(app.tab, Tab::Run);
    app
}

/// A Slurm job of two nodes, 8 GPUs each, in `state` (submitted at T0).
fn slurm_job(state: &str) -> Job {
    let running = state != "PENDING";
    Job {
        scheduler: "slurm".into(),
        id: "12".into(),
        conf: None,
        nodes: 2,
        gpus_per_node: Some(8),
        state: state.into(),
        reason: (!running).then(|| "Resources".to_string()),
        submitted_ms: T0_MS,
        started_ms: running.then_some(T0_MS + 2_100),
        ended_ms: None,
        node_list: if running {
            vec!["gpu-a01".into(), "gpu-a02".into()]
        } else {
            Vec::new()
        },
    }
}

/// Trial 7 started as Slurm job 12, still in the queue; this machine's telemetry flows.
fn slurm_pending_app() -> App {
    let mut app = loaded_app();
    feed_telemetry(&mut app, 100);
    app::update(
        &mut app,
        Msg::Trial(TrialEvent::Started {
            trial_id: 7,
            argv: vec!["sbatch".into(), "job.sh".into()],
            trial_dir: PathBuf::from("presets/examples/experiments/.primus-tune/trials/0007"),
            basis: crate::domain::evidence::Basis::Measured {
                profile: "primus".into(),
                gpu: Some("AMD Instinct MI300X".into()),
            },
        }),
    );
    app::update(
        &mut app,
        Msg::Trial(TrialEvent::Job(Box::new(slurm_job("PENDING")))),
    );
    press(&mut app, &[KeyCode::Char('3')]);
    assert_eq!(app.tab, Tab::Run);
    app
}

/// Trial 7 running as Slurm job 12 on two nodes, each sending its telemetry (the second
/// node's GPUs hotter and busier, its host CPU higher).
fn slurm_running_app() -> App {
    let mut app = loaded_app();
    feed_telemetry(&mut app, 100);
    feed_trial(&mut app);
    app::update(
        &mut app,
        Msg::Trial(TrialEvent::Job(Box::new(slurm_job("RUNNING")))),
    );
    for (i, node) in ["gpu-a01", "gpu-a02"].into_iter().enumerate() {
        for k in 0..4 {
            let mut s = snapshot(k + 10 * i as u64, 8);
            s.node = Some(node.into());
            for g in &mut s.gpus {
                for t in g.temp_c.values_mut() {
                    *t += 6.0 * i as f64;
                }
                g.util_pct = g.util_pct.map(|u| u - 9.0 * i as f64);
                g.vram_used_bytes = g.vram_used_bytes.map(|b| b + (i as u64) * (3 << 30));
                g.power_w = g.power_w.map(|w| w + 25.0 * i as f64);
            }
            s.host.cpu_pct = Some(31.0 + 17.0 * i as f64);
            app::update(&mut app, Msg::Trial(TrialEvent::Telemetry(Box::new(s))));
        }
    }
    press(&mut app, &[KeyCode::Char('3')]);
    app
}

fn trials_app() -> App {
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Char('4')]);
    let rows = trial_rows()
        .into_iter()
        .map(crate::app::views::trials::summary_of_overrides)
        .collect();
    app::update(&mut app, Msg::Trials(Ok(rows)));
    assert_eq!(app.tab, Tab::Trials);
    app
}

/// The failed (out-of-memory) trial in detail: rows are listed newest first, so it is second.
fn trials_detail_app() -> App {
    let mut app = trials_app();
    press(&mut app, &[KeyCode::Down, KeyCode::Enter]);
    assert_eq!(app.screens.trials.selected().map(|t| t.id), Some(4));
    assert!(app.screens.trials.detail);
    app
}

/// The stored trial `id` of [`trial_rows`].
fn stored_trial(id: i64) -> crate::store::TrialRow {
    trial_rows()
        .into_iter()
        .find(|t| t.id == id)
        .expect("a trial")
}

/// Trial 1 (the baseline) marked and compared with trial 3 (Turbo).
pub(super) fn trials_compare_app() -> App {
    let mut app = trials_app();
    press(&mut app, &[KeyCode::End, KeyCode::Char(' ')]);
    press(&mut app, &[KeyCode::Up, KeyCode::Up, KeyCode::Char('c')]);
    assert_eq!(app.screens.trials.marked, Some(1));
    assert_eq!(app.screens.trials.selected().map(|t| t.id), Some(3));
    assert!(app.screens.trials.compare);
    let row = stored_trial;
    // Step times of both trials for the overlaid curves.
    let iters = |base: f64| -> Vec<crate::domain::trial::Iteration> {
        (1..=20)
            .map(|i| crate::domain::trial::Iteration {
                iteration: i,
                elapsed_ms: Some(base + if i < 3 { 400.0 } else { (i % 3) as f64 * 4.0 }),
                ..Default::default()
            })
            .collect()
    };
    let c = crate::app::views::compare::compare(
        &row(1),
        &row(3),
        &iters(1210.0),
        &iters(1050.0),
        crate::app::views::compare::LaunchNoise::of(None),
    );
    app::update(&mut app, Msg::Comparison(Ok(Box::new(c))));
    assert!(app.screens.trials.comparison.is_some());
    app
}

fn help_app() -> App {
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Char('?')]);
    app
}

fn tour_app(page: usize) -> App {
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Char('t')]);
    for _ in 0..page {
        press(&mut app, &[KeyCode::Enter]);
    }
    app
}

// ---------------------------------------------------------------------------------------------
// Snapshots
// ---------------------------------------------------------------------------------------------

#[test]
fn checklist_screen() {
    snap_both("checklist", checklist_app);
}

/// The GEMM step after stages 1 and 2: a copy of the example under the target folder (so its
/// path shows relative, the same on every machine) with 12 shapes dumped 40 times each and all
/// 12 tuned, and the primus profile chosen, so `n` offers stage 3.
fn gemm_stages_app() -> App {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp/tui-gemm");
    let _ = std::fs::remove_dir_all(&root);
    crate::util::bundled::extract(&root).expect("example copied");
    let tune = root.join("output/tune_hipblaslt/moe_16B-BF16-pretrain");
    std::fs::create_dir_all(tune.join("gemm_shape")).expect("folder");
    std::fs::create_dir_all(tune.join("gemm_tune")).expect("folder");
    let mut dump = String::new();
    let mut result = String::from("Git Version: de5c1aebb6-dirty\n");
    for rep in 0..40 {
        for i in 0..12u64 {
            let m = 1024 * (i + 1);
            dump.push_str(&format!("hipblaslt-bench --api_method c -m {m} -n 4096 -k 2048 --transA T --transB N --batch_count 1 --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r --compute_type f32_r\n"));
            if rep == 0 {
                result.push_str("    transA,transB,batch_count,m,n,k,a_type,b_type,c_type,d_type,compute_type,hipblaslt-Gflops,us,solution_index,gcnArchName,CUs\n");
                result.push_str(&format!("    T,N,1,{m},4096,2048,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,600000,100,{},gfx942:sramecc+:xnack-,304\n", 1000 + i));
            }
        }
    }
    std::fs::write(
        tune.join("gemm_shape/dump_hipblaslt_gemm_shape_0.txt"),
        dump,
    )
    .expect("dump");
    std::fs::write(tune.join("gemm_tune/tune_hipblas_gemm_results.txt"), result).expect("result");
    let cwd = std::env::current_dir().expect("cwd");
    let exp = root.join("experiments/moe_16B-BF16-pretrain.yaml");
    let exp = exp.strip_prefix(&cwd).unwrap_or(&exp).to_path_buf();
    let mut app = App::new(vec!["proxy-cpu".into(), "primus".into()], "primus", false);
    let opts = LoadOptions {
        env: Env::default(),
        ..Default::default()
    };
    let (view, _) = load::build(&session_at(exp, opts), &[]).expect("example loads");
    app::update(&mut app, Msg::Loaded(Ok((Box::new(view), None))));
    app
}

#[test]
fn checklist_gemm_stages() {
    snap_both("checklist_gemm", gemm_stages_app);
    let mut app = gemm_stages_app();
    let text = screen(&mut app, 80, 24);
    assert!(text.contains("[x] 2 tuned: 12 GEMMs"), "{text}");
    assert!(text.contains("n runs stage 3 with primus"), "{text}");
}

#[test]
fn flags_screen() {
    snap_both("flags", flags_app);
}

#[test]
fn flags_screen_with_invalid_edit() {
    snap_both("flags_edit_invalid", flags_editor_app);
}

#[test]
fn run_screen() {
    snap_both("run", run_app);
}

#[test]
fn run_screen_slurm_pending() {
    snap_both("run_slurm_pending", slurm_pending_app);
}

#[test]
fn run_screen_slurm_running() {
    snap_both("run_slurm_running", slurm_running_app);
}

/// At 80×24 a Slurm trial says its job's state, and its nodes replace this machine's GPUs.
#[test]
fn run_80x24_shows_the_slurm_job_and_its_nodes() {
    let s = screen(&mut slurm_pending_app(), 80, 24);
    assert!(
        s.contains("trial 7 Slurm job 12 pending (Resources)"),
        "{s}"
    );
    assert!(s.contains("its nodes report once it runs"), "{s}");
    assert!(!s.contains("MI300X"), "{s}");
    let s = screen(&mut slurm_running_app(), 80, 24);
    assert!(
        s.contains("trial 7 Slurm job 12 running on gpu-a01,gpu-a02"),
        "{s}"
    );
    for n in ["│gpu-a01 ", "│gpu-a02 "] {
        assert!(s.lines().any(|l| l.starts_with(n)), "{n}: {s}");
    }
    assert!(!s.contains("of 2 shown"), "{s}");
}

/// A job on many nodes names those that fit and counts the rest.
#[test]
fn a_job_on_many_nodes_names_those_that_fit() {
    let mut j = slurm_job("RUNNING");
    j.node_list = (1..=16).map(|i| format!("gpu-a{i:02}")).collect();
    let s = screens::run::job_state(&j, 60);
    assert_eq!(
        s,
        "Slurm job 12 running on gpu-a01,gpu-a02,gpu-a03,gpu-a04,+12"
    );
    assert!(s.chars().count() <= 60);
    j.state = "TIMEOUT".into();
    assert_eq!(screens::run::job_state(&j, 60), "Slurm job 12 timeout");
}

/// Once the trial ends, its summary's per-node step times and flags join the table, and the
/// head says the job's last state.
#[test]
fn a_finished_slurm_trial_flags_its_slowest_node() {
    let mut app = slurm_running_app();
    let mut done = slurm_job("COMPLETED");
    done.ended_ms = Some(T0_MS + 90_000);
    app::update(&mut app, Msg::Trial(TrialEvent::Job(Box::new(done))));
    let node = |name: &str, step: f64, slowest: bool, hottest: bool| {
        crate::domain::telemetry::NodeSummary {
            node: name.into(),
            samples: 4,
            median_step_ms: Some(step),
            iterations: 30,
            slowest,
            hottest,
            ..Default::default()
        }
    };
    let mut sum = summary(30);
    sum.pending_s = Some(2.1);
    sum.nodes = vec![
        node("gpu-a01", 1212.5, false, false),
        node("gpu-a02", 1251.0, true, true),
    ];
    let result = crate::domain::trial::TrialResult {
        trial_id: Some(7),
        status: TrialStatus::Completed,
        failure: None,
        stop_reason: crate::domain::trial::StopReason::MaxIters,
        exit_code: Some(0),
        exit_signal: None,
        wall_s: 80.0,
        trial_dir: None,
        job: None,
        summary: sum,
    };
    app::update(&mut app, Msg::TrialDone(Ok(Box::new(result))));
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("trial 7 completed · Slurm job 12 completed"),
        "{s}"
    );
    let row = s.lines().find(|l| l.starts_with("│gpu-a02 ")).unwrap();
    assert!(
        row.contains("1251.0") && row.contains("slowest hottest"),
        "{s}"
    );
    let row = s.lines().find(|l| l.starts_with("│gpu-a01 ")).unwrap();
    assert!(row.contains("1212.5") && !row.contains("slowest"), "{s}");
}

#[test]
fn trials_screen() {
    snap_both("trials", trials_app);
}

#[test]
fn trials_detail_screen() {
    snap_both("trials_detail", trials_detail_app);
}

#[test]
fn trials_compare_screen() {
    snap_both("trials_compare", trials_compare_app);
}

/// Trials of different global batches are compared per the first one's samples, and the step
/// row says so and which statistic it is.
#[test]
fn a_comparison_of_different_global_batches_says_per_how_many_samples() {
    let mut app = trials_compare_app();
    let row = stored_trial;
    let iters = |global: u64| -> Vec<crate::domain::trial::Iteration> {
        (1..=20)
            .map(|i| crate::domain::trial::Iteration {
                iteration: i,
                elapsed_ms: Some(100.0),
                global_batch_size: Some(global),
                ..Default::default()
            })
            .collect()
    };
    let c = crate::app::views::compare::compare(
        &row(1),
        &row(3),
        &iters(8),
        &iters(1),
        crate::app::views::compare::LaunchNoise::of(None),
    );
    app::update(&mut app, Msg::Comparison(Ok(Box::new(c))));
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("median ms/8 samples"), "{s}");
}

#[test]
fn help_overlay() {
    snap_both("help", help_app);
}

/// `a` on a step with an open to-do asks for the reason in a box.
fn acknowledge_app() -> App {
    let mut app = loaded_app();
    let step = app
        .config
        .as_ref()
        .unwrap()
        .checklist
        .steps
        .iter()
        .position(|s| s.open_todo().is_some())
        .expect("a to-do");
    app.screens.checklist.selected = step;
    press(&mut app, &[KeyCode::Char('a')]);
    type_text(&mut app, "slower on our fabric");
    assert!(matches!(
        app.overlay,
        Some(app::Overlay::Acknowledge { .. })
    ));
    app
}

#[test]
fn acknowledge_overlay() {
    snap_both("acknowledge", acknowledge_app);
}

/// An acknowledged to-do is shown as such, and no longer makes its step need attention: the
/// view built from a workspace holding the acknowledgement.
#[test]
fn checklist_with_an_acknowledged_to_do() {
    // A copy of the example: the acknowledgement is written into the experiment's tree.
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().join("examples");
    crate::util::bundled::extract(&root).unwrap();
    let exp = root
        .join("experiments")
        .join(Path::new(EXPERIMENT).file_name().unwrap());
    let session = crate::app::Session::new(
        exp,
        LoadOptions::default(),
        crate::store::Workspace::at(ws.path().into(), crate::store::WorkspaceOrigin::Chosen),
    );
    crate::app::ack::acknowledge(&session, "hipblaslt-tuning", "slower on our fabric").unwrap();
    let (view, _) = load::build(&session, &[]).unwrap();
    let mut app = App::new(vec!["proxy-cpu".into()], "proxy-cpu", false);
    app::update(&mut app, Msg::Loaded(Ok((Box::new(view), None))));
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("ack GEMMs"), "{s}");
    assert!(
        s.contains("[a] 1. GEMMs") && s.contains("— acknowledged"),
        "{s}"
    );
    insta::assert_snapshot!("checklist_acknowledged_80x24", s);
}

#[test]
fn tour_overlay() {
    snap_both("tour", || tour_app(0));
    // Every page at the small size: the box is sized from the text, so check each one.
    for page in 1..app::TOUR.len() {
        let s = screen(&mut tour_app(page), 80, 24);
        insta::assert_snapshot!(format!("tour_page{}_80x24", page + 1), s);
    }
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// On 80×24 the Flags screen shows the selected flag's name and the `file:line` it comes from.
#[test]
fn flags_80x24_shows_name_and_source_of_selected_flag() {
    let mut app = flags_app();
    let file = Path::new(EXPERIMENT)
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    let (i, row) = screens::flags::visible(&app)
        .iter()
        .enumerate()
        .find(|(_, r)| r.name == "micro_batch_size")
        .map(|(i, r)| (i, (*r).clone()))
        .expect("micro_batch_size is listed");
    assert!(
        row.source.starts_with(&format!("{file}:")),
        "set in the experiment: {}",
        row.source
    );
    app.screens.flags.selected = i;
    let s = screen(&mut app, 80, 24);
    let line = s
        .lines()
        .find(|l| l.contains(" micro_batch_size "))
        .unwrap_or_else(|| panic!("the selected flag is on screen:\n{s}"));
    assert!(
        line.contains(&row.source),
        "its source `{}` is shown whole:\n{s}",
        row.source
    );
    // The detail box below names it too.
    assert!(s.matches("micro_batch_size").count() >= 2, "{s}");
}

/// The example loaded as profile `name`, whose `env:` is `env` (YAML lines), launches it, on the
/// Flags screen.
fn flags_as(name: &str, env: &str) -> App {
    let text = format!("name: {name}\nargv: [x]\nenv:\n{env}");
    let profile = crate::run::profile::Profile::parse(&text, "p.yaml").unwrap();
    let opts = LoadOptions {
        env: Env::default(),
        ..Default::default()
    };
    let session = session_at(Path::new(EXPERIMENT), opts).launched_by(&profile);
    let (view, _) = load::build(&session, &[]).expect("example loads");
    let mut app = App::new(vec![name.into()], name, false);
    app::update(&mut app, Msg::Loaded(Ok((Box::new(view), None))));
    press(&mut app, &[KeyCode::Char('2')]);
    app
}

/// Resolved as a launch profile launches the experiment, the Flags screen says so in its title,
/// and at 80×24 the selected flag's detail names the variable and the profile that set it.
#[test]
fn flags_80x24_say_which_profile_s_environment_set_a_value() {
    let mut app = flags_as("pp2", "  PRIMUS_PP: \"2\"\n");
    press(&mut app, &[KeyCode::Char('/')]);
    type_text(&mut app, "pipeline_model_par");
    press(&mut app, &[KeyCode::Enter]);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("env of pp2"), "{s}");
    let row = screens::flags::visible(&app)[app.screens.flags.selected].clone();
    assert_eq!(
        (row.name.as_str(), row.value.as_str()),
        ("pipeline_model_parallel_size", "2")
    );
    assert!(s.contains("PRIMUS_PP=2 (profile pp2)"), "{s}");
    // A profile whose env: sets nothing the screen shows is not named.
    let mut app = flags_as("quiet", "  PYTHONUNBUFFERED: \"1\"\n");
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("┌ Flags ─") && !s.contains("env of"), "{s}");
}

/// The list holds the catalog's flags; a search also finds the resolved keys outside the
/// catalog (as `show --all` lists them), after the catalog's, and one can be edited as the type
/// of its value. A step opened from the checklist keeps to the catalog.
#[test]
fn a_search_finds_keys_outside_the_catalog() {
    let mut app = flags_app();
    assert!(
        screens::flags::visible(&app)
            .iter()
            .all(|r| r.step.is_some()),
        "without a search only catalog flags are listed"
    );
    press(&mut app, &[KeyCode::Char('/')]);
    type_text(&mut app, "adam_beta");
    press(&mut app, &[KeyCode::Enter]);
    let names: Vec<(&str, bool)> = screens::flags::visible(&app)
        .iter()
        .map(|r| (r.name.as_str(), r.step.is_none()))
        .collect();
    assert_eq!(names, [("adam_beta1", true), ("adam_beta2", true)]);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("adam_beta1"), "{s}");
    assert!(s.contains("Flags · /adam_beta · 2 matches"), "{s}");
    assert!(s.contains("not in the catalog · float · from"), "{s}");
    let s = screen(&mut app, 160, 48);
    assert!(s.contains("other key"), "{s}");
    // Catalog flags come first when a search finds both kinds.
    press(&mut app, &[KeyCode::Char('/')]);
    for _ in 0.."adam_beta".len() {
        press(&mut app, &[KeyCode::Backspace]);
    }
    type_text(&mut app, "recompute");
    press(&mut app, &[KeyCode::Enter]);
    let steps: Vec<bool> = screens::flags::visible(&app)
        .iter()
        .map(|r| r.step.is_none())
        .collect();
    assert!(steps.contains(&false), "{steps:?}");
    assert!(
        steps.windows(2).all(|w| w[0] <= w[1]),
        "catalog first: {steps:?}"
    );
    // Edited as a float, from its value.
    press(&mut app, &[KeyCode::Char('/')]);
    for _ in 0.."recompute".len() {
        press(&mut app, &[KeyCode::Backspace]);
    }
    type_text(&mut app, "adam_beta2");
    press(&mut app, &[KeyCode::Enter, KeyCode::Enter]);
    let e = app.screens.flags.editor.as_ref().expect("editor open");
    assert_eq!(
        (e.key.as_str(), e.ty),
        ("adam_beta2", crate::config::catalog::FlagType::Float)
    );
    press(&mut app, &[KeyCode::Esc]);
    // A step from the checklist: its catalog flags only, whatever the search.
    app.screens.flags.step = Some(crate::config::catalog::Step::Memory);
    assert!(
        screens::flags::visible(&app)
            .iter()
            .all(|r| r.step.is_some())
    );
}

/// With the editor open on a bad value, the error is on screen at 80×24.
#[test]
fn flags_editor_error_is_visible_at_80x24() {
    let mut app = flags_editor_app();
    let err = app
        .screens
        .flags
        .editor
        .as_ref()
        .and_then(|e| e.error.clone())
        .expect("0 is out of range for micro_batch_size");
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("micro_batch_size = 0"), "{s}");
    assert!(s.contains(&err), "error `{err}` shown:\n{s}");
}

/// `NO_COLOR`: no cell of any screen has a foreground or background colour.
#[test]
fn no_color_sets_no_colour_on_any_screen() {
    let apps: [fn() -> App; 11] = [
        checklist_app,
        flags_app,
        flags_editor_app,
        run_app,
        slurm_pending_app,
        slurm_running_app,
        trials_app,
        trials_detail_app,
        trials_compare_app,
        help_app,
        || tour_app(0),
    ];
    for make in apps {
        for (w, h) in SIZES {
            let buf = draw(&mut make(), w, h, Palette::None);
            for (i, c) in buf.content.iter().enumerate() {
                assert!(
                    c.fg == Color::Reset && c.bg == Color::Reset,
                    "cell {i} `{}` has colour {:?}/{:?}",
                    c.symbol(),
                    c.fg,
                    c.bg
                );
            }
        }
    }
    // And the colour palettes do colour something (the check above is not vacuous).
    let buf = draw(&mut run_app(), 160, 48, Palette::Indexed);
    assert!(buf.content.iter().any(|c| c.fg != Color::Reset));
}

/// At 160×48 the Run screen lists all 8 GPUs, each with its figures.
#[test]
fn run_160x48_shows_every_gpu() {
    let s = screen(&mut run_app(), 160, 48);
    for g in 0..8 {
        let row = s
            .lines()
            .find(|l| l.starts_with(&format!("│{g} MI300X ")))
            .unwrap_or_else(|| panic!("GPU {g} has a row:\n{s}"));
        assert!(
            row.contains('%') && row.contains("MHz") && row.contains("GiB"),
            "{row}"
        );
    }
    assert!(s.contains("[power]"), "GPU 5's throttle is shown:\n{s}");
    assert!(s.contains("Traceback (most recent call last):"), "{s}");
    assert!(s.contains("trial 7"), "{s}");
}

/// Each tour page shows its whole text and its key hint at 80×24 (the box is sized from the
/// text, so a page whose words wrap badly must not lose its last line).
#[test]
fn tour_pages_fit_at_80x24() {
    for (page, (title, _)) in app::TOUR.iter().enumerate() {
        let s = screen(&mut tour_app(page), 80, 24);
        assert!(s.contains(title), "page {page} title:\n{s}");
        let hint = format!("{}/{} · Enter next", page + 1, app::TOUR.len());
        assert!(s.contains(&hint), "page {page} hint `{hint}`:\n{s}");
    }
}

/// The Trials screen at 80×24 shows every trial and the failed one's class.
#[test]
fn trials_80x24_lists_every_trial() {
    let s = screen(&mut trials_app(), 80, 24);
    for id in 1..=5 {
        assert!(
            s.lines().any(|l| l.starts_with(&format!("│  {id}    "))),
            "trial {id} listed:\n{s}"
        );
    }
    assert!(s.contains("oom"), "{s}");
}

/// The file line keeps the experiment's file name at 80×24 (the path gives way from its start),
/// and the checklist's legend and the help box are whole.
#[test]
fn frame_lines_and_boxes_are_whole() {
    let s = screen(&mut checklist_app(), 80, 24);
    let file_line = s.lines().nth(1).expect("file line");
    assert!(
        file_line.contains("moe_16B-BF16-pretrain.yaml ·") && file_line.contains("lint clean"),
        "{file_line}"
    );
    assert!(s.contains("[x] done   [!] to do   [-] n/a"), "{s}");
    assert!(s.contains("[?] unmeasured   [a] acknowledged"), "{s}");
    // The help: the shown screen's keys and everywhere's first, each row whole; the rest
    // scrolls into view, to the last screen's last row.
    for (w, h) in [(160, 48), (80, 24)] {
        let mut app = help_app();
        let s = screen(&mut app, w, h);
        assert!(
            s.contains("F5") && s.contains("Esc closes") && s.contains("the step's flags"),
            "{w}x{h}:\n{s}"
        );
        assert!(s.contains("reload from disk"), "{w}x{h}:\n{s}");
        assert!(
            s.contains("PgUp PgDn Home End"),
            "it scrolls, {w}x{h}:\n{s}"
        );
        press(&mut app, &[KeyCode::End]);
        let s = screen(&mut app, w, h);
        assert!(
            s.contains("every experiment's, or this one's"),
            "{w}x{h} not wrapped:\n{s}"
        );
    }
}

/// The selected row is marked without colour (reverse video) under `NO_COLOR`.
#[test]
fn selection_is_reverse_video_without_colour() {
    use ratatui::style::Modifier;
    let mut app = flags_app();
    let name = screens::flags::visible(&app)[0].name.clone();
    let buf = draw(&mut app, 80, 24, Palette::None);
    let w = buf.area.width as usize;
    let row = buf
        .content
        .chunks(w)
        .position(|r| {
            r.iter()
                .map(|c| c.symbol())
                .collect::<String>()
                .contains(&name)
        })
        .expect("selected flag on screen");
    let cells = &buf.content[row * w..(row + 1) * w];
    assert!(
        cells[1..w - 1]
            .iter()
            .all(|c| c.modifier.contains(Modifier::REVERSED)),
        "row {row} reversed"
    );
}

/// At 80×24 the Run screen says how many GPUs its rows leave out.
#[test]
fn run_80x24_says_which_gpus_are_hidden() {
    let s = screen(&mut run_app(), 80, 24);
    let shown = (0..8)
        .filter(|g| s.lines().any(|l| l.starts_with(&format!("│{g} MI300X "))))
        .count();
    assert!(shown >= 1, "{s}");
    if shown < 8 {
        assert!(s.contains(&format!("{shown} of 8 shown")), "{s}");
    }
}

/// Rendering is a pure function of the state: the same app draws the same text twice.
#[test]
fn drawing_is_deterministic() {
    let mut app = run_app();
    let a = screen(&mut app, 160, 48);
    let b = screen(&mut app, 160, 48);
    assert_eq!(a, b);
    assert_eq!(a, screen(&mut run_app(), 160, 48));
}

/// The Sweep screen with a finished study: the spaces on one side, the ranked candidates.
fn sweep_app() -> App {
    sweep_app_with(|_| {})
}

/// [`sweep_app`] with the study changed by `tweak` before it is shown.
fn sweep_app_with(tweak: impl FnOnce(&mut crate::domain::study::StudyRecord)) -> App {
    use crate::domain::study::{CandidateRecord, StudyRecord};
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Char('5')]);
    let cand = |id: usize, mbs: i64, verdict: &str, why: &str, step: Option<f64>| CandidateRecord {
        id,
        baseline: id == 0,
        overrides: [("micro_batch_size".to_string(), serde_json::json!(mbs))]
            .into_iter()
            .collect(),
        verdict: verdict.parse().expect("a verdict name"),
        why: why.into(),
        n: if step.is_some() { 24 } else { 0 },
        step_ms: step,
        ci_low_ms: step.map(|m| m - 2.0),
        ci_high_ms: step.map(|m| m + 2.0),
        peak_memory_bytes: step.map(|_| 40 << 30),
        peak_memory_source: None,
        predicted_bytes: None,
    };
    let rec = StudyRecord {
        space: "memory-fit".into(),
        config: "x.yaml".into(),
        profile: "proxy-torch".into(),
        gpus: 1,
        capacity_bytes: Some(140.0 * (1u64 << 30) as f64),
        candidates: vec![
            cand(0, 1, "slower", "slower by 6.0 ± 1.1 %", Some(424.0)),
            cand(
                1,
                2,
                "winner",
                "faster than the current settings beyond the noise",
                Some(400.0),
            ),
            cand(2, 4, "oom", "ran out of GPU memory", None),
            cand(
                3,
                8,
                "ruled-out",
                "not run: needs more memory than candidate 2",
                None,
            ),
        ],
        pick: Some(1),
        gpu_seconds: 180.0,
        trials: 5,
        log: vec![],
        memory_error: None,
        basis: Some(crate::domain::evidence::Basis::Measured {
            profile: "proxy-torch".into(),
            gpu: Some("NVIDIA H200".into()),
        }),
        unmodeled: Vec::new(),
        baseline: Some(0),
        conclusion: Some(crate::domain::study::Conclusion::Change { pick: 1 }),
        per_samples: None,
        knobs: Vec::new(),
        link_scale: None,
        statistic: crate::domain::study::StepStatistic::TrimmedMean,
    };
    let mut rec = rec;
    tweak(&mut rec);
    app::update(
        &mut app,
        Msg::SweepDone(Ok(("memfit-1".into(), Some(Box::new(rec)), String::new()))),
    );
    assert_eq!(app.tab, Tab::Sweep);
    app
}

/// At 80 columns the ranked table's footer says, whole, what produced the figures and what they
/// are: the longest basis (a proxy's) with the statistic and the unit.
#[test]
fn the_ranked_tables_footer_names_basis_statistic_and_unit_at_80_columns() {
    let mut app = sweep_app_with(|r| {
        r.basis = Some(crate::domain::evidence::Basis::Proxy {
            profile: "proxy-cpu".into(),
        });
        r.per_samples = Some(8);
    });
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("proxy (proxy-cpu: a CPU stand-in, not GPU evidence) · trim mean ms/8 samples"),
        "{s}"
    );
    let mut app = sweep_app_with(|r| r.statistic = crate::domain::study::StepStatistic::Median);
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("measured on NVIDIA H200 with proxy-torch · median ms/batch"),
        "{s}"
    );
}

#[test]
fn sweep_snapshots() {
    snap_both("sweep", sweep_app);
    let s = screen(&mut sweep_app(), 80, 24);
    assert!(s.contains("winner") && s.contains("ruled-out"), "{s}");
    assert!(s.contains("deepep-cu"), "{s}");
}

/// The layout space's details (Enter on it): the legal layouts with their forecasts and
/// predictions, the illegal ones counted by the rule that rules them out.
fn layouts_app() -> App {
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Char('5')]);
    let n = app.config.as_ref().unwrap().spaces.len();
    press(&mut app, &vec![KeyCode::Down; n - 1]);
    let fx = app::update(&mut app, key(KeyCode::Enter));
    assert_eq!(fx, vec![crate::tui::app::Effect::LoadLayouts]);
    let opts = LoadOptions {
        env: Env::default(),
        world: crate::megatron::World::flag(8),
        ..Default::default()
    };
    let req = crate::app::views::layouts::LayoutsRequest {
        gpu: Some("MI300X".into()),
        gpus_per_node: None,
    };
    let view = crate::app::views::layouts::layouts(&session_at(Path::new(EXPERIMENT), opts), &req)
        .expect("layouts of the example");
    app::update(&mut app, Msg::Layouts(Ok(Box::new(view))));
    app
}

#[test]
fn layouts_snapshots() {
    snap_both("layouts", layouts_app);
    let s = screen(&mut layouts_app(), 80, 24);
    assert!(s.contains("parallel-layout (per world)"), "{s}");
    assert!(s.contains("Layouts on 8 GPUs"), "{s}");
    assert!(s.contains("TP1 PP1 CP1 EP1 MBS4"), "{s}");
    let wide = screen(&mut layouts_app(), 160, 48);
    assert!(
        wide.lines()
            .any(|l| l.contains("││*") && l.contains("TP1 PP1 CP1 EP8 MBS4")),
        "the experiment's own layout is marked:\n{wide}"
    );
    assert!(wide.contains("pipeline-layers 288"), "{wide}");
}

/// A reload of the experiment (a save, a change on disk) drops the layouts worked out for the
/// file as it was, and works them out again while they are on screen.
#[test]
fn a_reload_works_the_shown_layouts_out_again() {
    let mut app = layouts_app();
    assert!(app.screens.sweep.layouts.is_some());
    let reload = || {
        let opts = LoadOptions {
            env: Env::default(),
            ..Default::default()
        };
        let (view, _) = load::build(&session_at(Path::new(EXPERIMENT), opts), &[]).unwrap();
        Msg::Loaded(Ok((Box::new(view), None)))
    };
    let fx = app::update(&mut app, reload());
    assert_eq!(fx, vec![crate::tui::app::Effect::LoadLayouts]);
    assert!(app.screens.sweep.layouts.is_none());
    // Not on screen (back to the last result): dropped, not worked out.
    app.screens.sweep.layouts = Some(Err("worked out before".into()));
    press(&mut app, &[KeyCode::Enter]);
    assert!(!app.screens.sweep.detail);
    assert!(app::update(&mut app, reload()).is_empty());
    assert!(app.screens.sweep.layouts.is_none());
}

/// A running sweep's log at 80×24: a line wider than the pane (the launch history) is wrapped
/// and read whole, and the newest line stays in view.
#[test]
fn a_running_sweeps_long_log_lines_wrap_and_the_newest_stays_in_view() {
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Char('5')]);
    crate::tui::screens::sweep::running(&mut app);
    let long = "launch history: 32.3 s to the first steady sample (median of 5 earlier trials \
                of this experiment and profile); launch-to-launch variation 0.12 % over 2 \
                repeated launches";
    app::update(&mut app, Msg::SweepLine(long.to_string()));
    for i in 0..30 {
        app::update(&mut app, Msg::SweepLine(format!("trial {i} done")));
        if i == 3 {
            app::update(&mut app, Msg::SweepLine(long.to_string()));
        }
    }
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("trial 29 done"),
        "the newest line is shown:\n{s}"
    );
    assert!(
        !s.lines().any(|l| l.contains("…│")),
        "no log line is cut at the pane's edge:\n{s}"
    );
    // Few enough lines after it: the second long line is in view, every word of it.
    let mut app2 = loaded_app();
    press(&mut app2, &[KeyCode::Char('5')]);
    crate::tui::screens::sweep::running(&mut app2);
    app::update(&mut app2, Msg::SweepLine(long.to_string()));
    app::update(&mut app2, Msg::SweepLine("trial 1 done".to_string()));
    let s = screen(&mut app2, 80, 24);
    let text: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains("repeated launches") && text.contains("launch-to-launch"),
        "{s}"
    );
    assert!(s.contains("trial 1 done"), "{s}");
    // A message of several lines (the sweep's opening) shows each on its own row.
    app::update(
        &mut app2,
        Msg::SweepLine("study s-1: space memory-fit\nevidence: proxy".to_string()),
    );
    let s = screen(&mut app2, 80, 24);
    assert!(s.lines().any(|l| l.starts_with("│evidence: proxy")), "{s}");
}

/// The Studies screen with three studies: finished with a pick, unfinished, running.
fn studies_app() -> App {
    use crate::app::views::studies::{StudyStatus, StudySummary};
    let mut app = loaded_app();
    press(&mut app, &[KeyCode::Char('6')]);
    let study =
        |name: &str, space: &str, status, trials, gpu_s: f64, pick: Option<i64>| StudySummary {
            id: 1,
            name: name.into(),
            space: space.into(),
            experiment: "x.yaml".into(),
            status,
            trials,
            gpu_seconds: gpu_s,
            pick: pick.map(|v| {
                [("micro_batch_size".to_string(), serde_json::json!(v))]
                    .into_iter()
                    .collect()
            }),
            started: "2026-12-01T10:04:05.120Z".into(),
            profile: Some("proxy-torch".into()),
            basis: None,
            cost_unit: "GPU",
            unmodeled: Vec::new(),
        };
    app::update(
        &mut app,
        Msg::Studies(Ok(vec![
            study(
                "memfit-1",
                "memory-fit",
                StudyStatus::Finished,
                5,
                180.0,
                Some(2),
            ),
            study(
                "sf-20261201T1004",
                "sync-free-stage",
                StudyStatus::Unfinished,
                2,
                42.0,
                None,
            ),
            study("deepep-a", "deepep-cu", StudyStatus::Running, 1, 9.5, None),
        ])),
    );
    app
}

/// The finished study opened: its candidates ranked with their verdicts.
fn studies_open_app() -> App {
    let mut app = studies_app();
    let rec = sweep_app().screens.sweep.result.expect("a record").1;
    let summary = app.screens.studies.rows[0].clone();
    app::update(
        &mut app,
        Msg::Study(Ok(Box::new(crate::app::views::studies::StudyDetail {
            summary,
            record: Some(rec),
        }))),
    );
    app
}

/// The finished study's decision log (`l`), as the search wrote it.
fn studies_log_app() -> App {
    let mut app = studies_open_app();
    if let Some(rec) = app
        .screens
        .studies
        .open
        .as_mut()
        .and_then(|d| d.record.as_mut())
    {
        rec.log = vec![
            "launch cost before this study: 31.8 s to the first steady sample (earlier trials in \
             the workspace)"
                .into(),
            "baseline: #0 (micro_batch_size=1) holds the current settings; it is measured first \
             and kept unless a candidate is faster beyond the noise"
                .into(),
            "start-up dominates: a launch costs 31.8 s before it measures (from earlier trials in \
             the workspace) against 0.45 s per iteration; each candidate now gets one launch of \
             up to 30 iterations (the early stop ends a steady one sooner) and no re-launched \
             rungs"
                .into(),
            "#2 (micro_batch_size=4): out of memory".into(),
            "#2 OOM rules out #3 (they dominate it in memory; never run)".into(),
            "#0 (micro_batch_size=1): stopped after 6 steady samples of the 30 iterations asked: \
             424.0 ms [422.0, 426.0] is above the bar 406.0 ms (the leader's upper bound + the \
             tolerance) with 95 % confidence"
                .into(),
            "no confirmation launch: launch-to-launch variation cannot explain the pick's lead"
                .into(),
            "pick: #1 (micro_batch_size=2) 400.0 ms [398.0, 402.0]".into(),
        ];
    }
    press(&mut app, &[KeyCode::Char('l')]);
    app
}

#[test]
fn a_studys_decision_log_wraps_whole_and_scrolls() {
    snap_both("studies_log", studies_log_app);
    let mut app = studies_log_app();
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("memfit-1: decision log") && s.contains(" line 1 of 8 · "),
        "{s}"
    );
    // Every line is there whole: the rows, joined, hold each log line's words in order.
    let joined: String = s
        .lines()
        .map(|l| l.trim_matches(|c| c == '│' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ");
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let joined = words(&joined);
    for l in &app
        .screens
        .studies
        .open
        .as_ref()
        .unwrap()
        .record
        .as_ref()
        .unwrap()
        .log
    {
        assert!(joined.contains(&words(l)), "{l}\n{s}");
    }
    press(&mut app, &[KeyCode::Down, KeyCode::Down]);
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("line 3 of 8") && !s.contains("launch cost before"),
        "{s}"
    );
    // The footer says what the keys do in the log (its hints two spaces apart when ` · `
    // would not leave room for them all).
    let footer = |s: &str| s.lines().last().unwrap_or_default().replace(" · ", "  ");
    assert!(
        footer(&s).contains("↑↓ scroll  Enter back  l ranking  "),
        "{s}"
    );
    // l again: the ranking (whose footer offers the log); Enter: the list.
    press(&mut app, &[KeyCode::Char('l')]);
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("winner") && !s.contains(": decision log"), "{s}");
    assert!(
        footer(&s).contains("Enter back  l decision log  ") && !footer(&s).contains("↑↓"),
        "{s}"
    );
    press(&mut app, &[KeyCode::Enter]);
    assert!(app.screens.studies.open.is_none());
    let s = screen(&mut app, 80, 24);
    assert!(footer(&s).contains("↑↓ study  Enter ranked  "), "{s}");
}

#[test]
fn the_ranking_shows_the_selected_candidate_whole_at_80x24() {
    let mut app = studies_open_app();
    let s = screen(&mut app, 80, 24);
    // the table cuts the settings and why at 80 columns; the pane below has them whole
    assert!(s.contains("micro_batch_size=8 · not…│"), "{s}");
    assert!(
        s.contains("candidate 1 of 4 · ↑↓")
            && s.contains("#0 slower · the current settings · micro_batch_size=1")
            && s.contains("why: slower by 6.0 ± 1.1 %")
            && s.contains("20 % trimmed mean 424.0 ms/batch, 95 % CI 422.0–426.0, n 24"),
        "{s}"
    );
    press(
        &mut app,
        &[KeyCode::Down, KeyCode::Down, KeyCode::Down, KeyCode::Down],
    );
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("candidate 4 of 4")
            && s.contains("#3 ruled-out · micro_batch_size=8")
            && s.contains("why: not run: needs more memory than candidate 2"),
        "the last candidate, the selection stops there: {s}"
    );
    // nothing measured, so no evidence line is made up
    assert!(!s.contains("ms/batch, 95 % CI"), "{s}");
    // a click on a row selects it (the rows as drawn)
    let rows = app.hits.rows.expect("the ranking's rows were drawn");
    assert_eq!(rows.tab, Tab::Studies);
    crate::tui::mouse::on_mouse(
        &mut app,
        crossterm::event::MouseEvent {
            kind: crossterm::event::MouseEventKind::Down(crossterm::event::MouseButton::Left),
            column: 10,
            row: rows.y + 1,
            modifiers: crossterm::event::KeyModifiers::NONE,
        },
    );
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("candidate 2 of 4") && s.contains("#1 winner · micro_batch_size=2"),
        "{s}"
    );
    // Enter closes it; a study opened again starts at its first candidate
    let detail = app.screens.studies.open.clone().expect("open");
    press(&mut app, &[KeyCode::Enter]);
    assert!(app.screens.studies.open.is_none());
    app::update(&mut app, Msg::Study(Ok(Box::new(detail))));
    let s = screen(&mut app, 80, 24);
    assert!(
        s.contains("candidate 1 of 4") && s.contains("#0 slower"),
        "{s}"
    );
}

#[test]
fn studies_snapshots() {
    snap_both("studies", studies_app);
    snap_both("studies_open", studies_open_app);
    let s = screen(&mut studies_app(), 80, 24);
    assert!(
        s.contains("memfit-1") && s.contains("unfinished") && s.contains("running"),
        "{s}"
    );
    assert!(s.contains("micro_batch_size=2"), "the pick: {s}");
    assert!(
        s.contains("r resume") && s.contains("p report"),
        "the footer: {s}"
    );
    let s = screen(&mut studies_open_app(), 80, 24);
    assert!(s.contains("winner") && s.contains("ruled-out"), "{s}");
}

/// A session on `experiment` with `opts` and a workspace that does not exist (nothing stored).
fn session_at(experiment: impl Into<std::path::PathBuf>, opts: LoadOptions) -> crate::app::Session {
    crate::app::Session::new(
        experiment.into(),
        opts,
        crate::store::Workspace::at(
            "/nonexistent/primus-tune-test-workspace".into(),
            crate::store::WorkspaceOrigin::Chosen,
        ),
    )
}

#[test]
fn control_characters_in_log_lines_never_reach_the_terminal() {
    let mut app = loaded_app();
    feed_trial(&mut app);
    app::update(
        &mut app,
        Msg::Trial(TrialEvent::Line {
            stream: Stream::Stderr,
            line: "evil \x1b]0;pwned\x07\x1b[31mred\u{9b}2J end".into(),
        }),
    );
    app.tab = Tab::Run;
    let buf = draw(&mut app, 160, 48, Palette::None);
    assert!(
        buf.content
            .iter()
            .all(|c| !c.symbol().chars().any(crate::util::text::is_control)),
        "a control character reached a cell"
    );
    let shown = text(&buf);
    assert!(shown.contains("evil"), "{shown}");
}

/// On a narrow terminal the Trials table's columns shrink: a figure that no longer fits is
/// shortened with a unit prefix or marked with `…`, never shown with digits silently missing
/// (`1751800` tok/s as `175180`).
#[test]
fn trials_narrow_figures_are_never_cut_silently() {
    for w in [60u16, 66, 72, 80] {
        let mut app = trials_app();
        for r in &mut app.screens.trials.rows {
            r.row.tokens_per_s_per_gpu = Some(1_751_800.0);
        }
        let s = screen(&mut app, w, 24);
        let rows: Vec<&str> = s.lines().filter(|l| l.starts_with("│  1 ")).collect();
        assert!(!rows.is_empty(), "{w}: trial 1 listed:\n{s}");
        for row in rows {
            let figure = row
                .split_whitespace()
                .find(|c| c.starts_with("17") || c.starts_with("1.7") || c.starts_with("1.8"))
                .unwrap_or_else(|| panic!("{w} columns: no tok/s figure in {row}"));
            assert!(
                ["1751800", "1.75M", "1.8M", "2M"].contains(&figure) || figure.ends_with('…'),
                "{w} columns: {figure:?} in {row}\n{s}"
            );
        }
    }
}
