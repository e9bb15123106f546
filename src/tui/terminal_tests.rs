//! Update tests of the terminal conventions (issue 18): `q` and Esc in every overlay, Tab in
//! the tour, the status line following a running trial.

use super::app::{App, Effect, Msg, Overlay, TOUR, update};
use super::screens::Tab;
use crate::app::Session;
use crate::app::views::config::{self as load, PendingEdit};
use crate::config::LoadOptions;
use crate::config::env::Env;
use crate::domain::trial::{Iteration, Summary};
use crate::run::trial::TrialEvent;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const EXAMPLE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";

fn session() -> Session {
    Session::new(
        EXAMPLE.into(),
        LoadOptions {
            env: Env::default(),
            ..LoadOptions::default()
        },
        crate::store::Workspace::at(
            "/nonexistent/primus-tune-test-workspace".into(),
            crate::store::WorkspaceOrigin::Chosen,
        ),
    )
}

/// The example loaded, with the first-start tour open.
pub(super) fn app_with_tour() -> App {
    let mut app = App::new(
        vec!["proxy-cpu".into(), "proxy-torch".into()],
        "proxy-cpu",
        true,
    );
    let (view, plan) = load::build(&session(), &[]).expect("the example loads");
    update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
    app
}

pub(super) fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
    update(app, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

#[test]
fn q_quits_from_the_first_start_tour() {
    let mut app = app_with_tour();
    assert_eq!(app.overlay, Some(Overlay::Tour(0)));
    assert_eq!(key(&mut app, KeyCode::Char('q')), [Effect::Quit]);
}

#[test]
fn q_asks_first_from_an_overlay_when_edits_are_unsaved_and_q_again_quits() {
    let mut app = app_with_tour();
    app.pending.push(PendingEdit {
        key: "micro_batch_size".into(),
        text: "2".into(),
    });
    app.overlay = Some(Overlay::Help { scroll: 0 });
    assert!(key(&mut app, KeyCode::Char('q')).is_empty());
    assert_eq!(app.overlay, Some(Overlay::ConfirmQuit));
    assert_eq!(key(&mut app, KeyCode::Char('q')), [Effect::Quit]);
}

#[test]
fn q_quits_from_the_diff_and_the_help() {
    for overlay in [
        Overlay::Help { scroll: 0 },
        Overlay::Diff {
            save: false,
            scroll: 0,
        },
    ] {
        let mut app = app_with_tour();
        app.overlay = Some(overlay.clone());
        assert_eq!(
            key(&mut app, KeyCode::Char('q')),
            [Effect::Quit],
            "{overlay:?}"
        );
    }
}

#[test]
fn esc_closes_every_overlay_without_quitting() {
    for overlay in [
        Overlay::Tour(2),
        Overlay::Help { scroll: 0 },
        Overlay::Diff {
            save: true,
            scroll: 0,
        },
        Overlay::ConfirmQuit,
    ] {
        let mut app = app_with_tour();
        app.overlay = Some(overlay.clone());
        assert!(key(&mut app, KeyCode::Esc).is_empty(), "{overlay:?}");
        assert_eq!(app.overlay, None, "{overlay:?}");
    }
}

#[test]
fn the_typed_reason_takes_q_as_a_letter() {
    let mut app = app_with_tour();
    app.overlay = Some(Overlay::Acknowledge {
        rule: "some-rule",
        text: "a to-do".into(),
        reason: String::new(),
    });
    assert!(key(&mut app, KeyCode::Char('q')).is_empty());
    assert!(matches!(
        &app.overlay,
        Some(Overlay::Acknowledge { reason, .. }) if reason == "q"
    ));
}

#[test]
fn tab_pages_through_the_tour_and_it_has_a_sweep_page() {
    let mut app = app_with_tour();
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.overlay, Some(Overlay::Tour(1)));
    key(&mut app, KeyCode::BackTab);
    assert_eq!(app.overlay, Some(Overlay::Tour(0)));
    assert_eq!(
        app.tab,
        Tab::Checklist,
        "Tab in the tour does not switch screens"
    );
    let sweep = TOUR
        .iter()
        .find(|(title, _)| title.contains("Sweep"))
        .expect("a tour page for the Sweep screen");
    assert!(sweep.1.contains("Enter"), "{}", sweep.1);
}

fn iteration(i: u64) -> TrialEvent {
    TrialEvent::Iteration {
        it: Iteration {
            iteration: i,
            train_iters: Some(50),
            elapsed_ms: Some(1210.0),
            ..Default::default()
        },
        summary: Box::new(Summary {
            n: i.saturating_sub(3) as usize,
            median_step_ms: Some(1210.0),
            tokens_per_s_per_gpu: Some(17518.0),
            ..Default::default()
        }),
    }
}

fn status(app: &App) -> String {
    app.status.clone().map(|s| s.1).unwrap_or_default()
}

#[test]
fn the_status_line_follows_the_running_trial() {
    let mut app = app_with_tour();
    app.overlay = None;
    key(&mut app, KeyCode::Char('3'));
    let fx = key(&mut app, KeyCode::Char('r'));
    assert!(matches!(fx[..], [Effect::StartTrial { .. }]), "{fx:?}");
    assert!(
        status(&app).starts_with("starting a trial"),
        "{}",
        status(&app)
    );
    update(
        &mut app,
        Msg::Trial(TrialEvent::Started {
            trial_id: 12,
            argv: vec!["proxy".into()],
            trial_dir: "/tmp/t12".into(),
            basis: crate::domain::evidence::Basis::Measured {
                profile: "primus".into(),
                gpu: Some("AMD Instinct MI300X".into()),
            },
        }),
    );
    assert!(
        status(&app).contains("trial 12 started"),
        "{}",
        status(&app)
    );
    for i in 1..=29 {
        update(&mut app, Msg::Trial(iteration(i)));
    }
    let s = status(&app);
    assert!(s.contains("it 29/50"), "{s}");
    assert!(s.contains("17518 tok/s/GPU"), "{s}");
    // it fits the 80 columns of the status line, the stop key included
    assert!(s.chars().count() <= 79 && s.ends_with("x stops it"), "{s}");
    assert!(!s.contains("starting"), "{s}");
    // A key takes the status line back for the key hints; later iterations leave it so.
    key(&mut app, KeyCode::Char('m'));
    update(&mut app, Msg::Trial(iteration(30)));
    assert_eq!(app.status, None);
}

/// A CPU stand-in's trial: its throughput is its process's, and the status line and the Run
/// screen say so.
#[test]
fn a_stand_in_s_throughput_is_per_process() {
    let mut app = app_with_tour();
    app.overlay = None;
    key(&mut app, KeyCode::Char('3'));
    key(&mut app, KeyCode::Char('r'));
    update(
        &mut app,
        Msg::Trial(TrialEvent::Started {
            trial_id: 12,
            argv: vec!["proxy".into()],
            trial_dir: "/tmp/t12".into(),
            basis: crate::domain::evidence::Basis::Proxy {
                profile: "proxy-cpu".into(),
            },
        }),
    );
    for i in 1..=29 {
        update(&mut app, Msg::Trial(iteration(i)));
    }
    let s = status(&app);
    assert!(s.contains("17518 tok/s/proc"), "{s}");
    assert!(s.chars().count() <= 79 && s.ends_with("x stops it"), "{s}");
    let screen = crate::tui::render_tests::screen(&mut app, 120, 40);
    assert!(
        screen.contains("per process (CPU stand-in) 17518 tok/s"),
        "{screen}"
    );
    assert!(!screen.contains("per GPU 17518"), "{screen}");
}

/// The example loaded on a GPU profile (`primus`) and a CPU stand-in (`proxy-cpu`), eight GPUs
/// seen by the telemetry.
fn gpu_app(profile: &str) -> App {
    let mut app = App::new(vec!["proxy-cpu".into(), "primus".into()], profile, false);
    let (view, plan) = load::build(&session(), &[]).expect("the example loads");
    update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
    let gpus = (0..8)
        .map(|i| crate::telemetry::GpuInfo {
            index: i,
            name: "AMD Instinct MI300X".into(),
            ..Default::default()
        })
        .collect();
    update(
        &mut app,
        Msg::TelemetryReady {
            gpus,
            backend: "amdgpu-sysfs".into(),
            note: None,
        },
    );
    app
}

fn launch_lines(app: &App) -> Vec<String> {
    match &app.overlay {
        Some(Overlay::ConfirmLaunch(l)) => l.lines.clone(),
        other => panic!("no launch question: {other:?}"),
    }
}

#[test]
fn a_trial_on_a_gpu_profile_asks_first_and_y_starts_it() {
    let mut app = gpu_app("primus");
    key(&mut app, KeyCode::Char('3'));
    assert!(key(&mut app, KeyCode::Char('r')).is_empty());
    let lines = launch_lines(&app).join("\n");
    assert!(lines.contains("Budget: up to 50 iterations"), "{lines}");
    assert!(
        lines.contains("GPUs: all 8 of this node, 8 × AMD Instinct MI300X"),
        "{lines}"
    );
    assert!(!app.trial_running(), "nothing started before the answer");
    // n: not now.
    assert!(key(&mut app, KeyCode::Char('n')).is_empty());
    assert_eq!(app.overlay, None);
    key(&mut app, KeyCode::Char('r'));
    let fx = key(&mut app, KeyCode::Char('y'));
    assert!(
        matches!(&fx[..], [Effect::StartTrial { profile, .. }] if profile == "primus"),
        "{fx:?}"
    );
    assert!(app.trial_running());
}

/// The question names the world the trial launches at, as the chosen profile's launch sets
/// it: its `GPUS_PER_NODE`, or unknown (then 8 ranks, said so), or the Slurm job's nodes.
#[test]
fn the_question_before_a_launch_names_the_world_the_profile_launches_at() {
    let ask = |profile_yaml: &str| {
        let p = crate::run::profile::Profile::parse(profile_yaml, "primus.yaml").unwrap();
        let mut app = gpu_app("primus");
        let (view, plan) = load::build(&session().launched_by(&p), &[]).unwrap();
        update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
        key(&mut app, KeyCode::Char('3'));
        key(&mut app, KeyCode::Char('r'));
        launch_lines(&app).join("\n")
    };
    let lines = ask("name: primus\nargv: [x]\nenv:\n  GPUS_PER_NODE: \"2\"\n");
    assert!(
        lines.contains(
            "Launches on this node at world size 2 (GPUS_PER_NODE × NNODES = 2 × 1, from the \
             launch profile's env:)."
        ),
        "{lines}"
    );
    assert!(lines.contains("GPUs: all 8 of this node"), "{lines}");
    let lines = ask("name: primus\nargv: [x]\n");
    assert!(
        lines.contains("Launches on this node; the world size is unknown")
            && lines.contains("launching 8 ranks"),
        "{lines}"
    );
    let lines =
        ask("name: primus\nargv: [x]\nslurm:\n  submits: true\n  nodes: 2\n  gpus_per_node: 4\n");
    assert!(
        lines.contains(
            "Submits a Slurm job at world size 8 (the job's nodes × GPUs per node = 2 × 4"
        ),
        "{lines}"
    );
    // A view read for another profile says nothing of the launch (it may be about to change).
    let mut app = gpu_app("primus");
    let other =
        crate::run::profile::Profile::parse("name: proxy-cpu\nargv: [x]\n", "p.yaml").unwrap();
    let (view, plan) = load::build(&session().launched_by(&other), &[]).unwrap();
    update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
    key(&mut app, KeyCode::Char('3'));
    key(&mut app, KeyCode::Char('r'));
    assert!(!launch_lines(&app).join("\n").contains("Launches"));
}

#[test]
fn a_cpu_stand_in_starts_at_once() {
    let mut app = gpu_app("proxy-cpu");
    key(&mut app, KeyCode::Char('3'));
    let fx = key(&mut app, KeyCode::Char('r'));
    assert!(matches!(&fx[..], [Effect::StartTrial { .. }]), "{fx:?}");
    assert_eq!(app.overlay, None);
}

#[test]
fn enter_on_sweep_shows_details_and_a_sweep_on_gpus_asks_with_its_budget() {
    let mut app = gpu_app("primus");
    key(&mut app, KeyCode::Char('5'));
    let ok = app
        .config
        .as_ref()
        .and_then(|c| c.spaces.iter().position(|s| s.not_applicable.is_none()))
        .expect("a space that applies to the example");
    app.screens.sweep.selected = ok;
    assert!(
        key(&mut app, KeyCode::Enter).is_empty(),
        "Enter starts nothing"
    );
    assert!(app.screens.sweep.detail);
    assert_eq!(app.overlay, None);
    assert!(key(&mut app, KeyCode::Char('r')).is_empty());
    let lines = launch_lines(&app).join("\n");
    assert!(
        lines.contains(" candidates before the legality check"),
        "{lines}"
    );
    assert!(
        lines.contains("Budget: a trial of 12 iterations per candidate"),
        "{lines}"
    );
    assert!(lines.contains("GPUs: all 8"), "{lines}");
    let fx = key(&mut app, KeyCode::Char('y'));
    assert!(matches!(&fx[..], [Effect::StartSweep { .. }]), "{fx:?}");
    assert!(app.screens.sweep.running);
}

#[test]
fn the_launch_question_shows_whole_at_80x24() {
    let mut app = gpu_app("primus");
    key(&mut app, KeyCode::Char('3'));
    key(&mut app, KeyCode::Char('r'));
    let theme = crate::tui::theme::Theme::new(crate::tui::theme::Palette::None);
    let mut term =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).expect("a terminal");
    term.draw(|f| crate::tui::widgets::draw(f, &mut app, &theme))
        .expect("drawn");
    let buf = term.backend().buffer();
    let text: Vec<String> = (0..24)
        .map(|y| (0..80).map(|x| buf[(x, y)].symbol().to_string()).collect())
        .collect();
    let screen = text.join("\n");
    for want in [
        "Start a trial on GPUs?",
        "8 × AMD Instinct MI300X",
        "y start · n not now",
    ] {
        assert!(screen.contains(want), "{want}:\n{screen}");
    }
}

fn draw_at(app: &mut App, w: u16, h: u16) {
    let theme = crate::tui::theme::Theme::new(crate::tui::theme::Palette::None);
    let mut term =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).expect("a terminal");
    term.draw(|f| crate::tui::widgets::draw(f, app, &theme))
        .expect("drawn");
}

fn mouse(
    app: &mut App,
    kind: crossterm::event::MouseEventKind,
    column: u16,
    row: u16,
) -> Vec<Effect> {
    update(
        app,
        Msg::Mouse(crossterm::event::MouseEvent {
            kind,
            column,
            row,
            modifiers: KeyModifiers::NONE,
        }),
    )
}

#[test]
fn clicks_switch_tabs_and_select_rows_and_the_wheel_moves() {
    use crossterm::event::{MouseButton, MouseEventKind};
    let mut app = app_with_tour();
    app.overlay = None;
    draw_at(&mut app, 80, 24);
    let (from, _, _) = *app
        .hits
        .tabs
        .iter()
        .find(|t| t.2 == Tab::Flags)
        .expect("the Flags tab was drawn");
    mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        from + 2,
        0,
    );
    assert_eq!(app.tab, Tab::Flags);
    draw_at(&mut app, 80, 24);
    let rows = app.hits.rows.expect("the flag rows were drawn");
    assert_eq!(rows.tab, Tab::Flags);
    // The fourth row shown.
    mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        10,
        rows.y + 3,
    );
    assert_eq!(app.screens.flags.selected, rows.offset + 3);
    mouse(&mut app, MouseEventKind::ScrollDown, 10, rows.y);
    assert_eq!(app.screens.flags.selected, rows.offset + 4);
    mouse(&mut app, MouseEventKind::ScrollUp, 10, rows.y);
    assert_eq!(app.screens.flags.selected, rows.offset + 3);
    // A click on the file line hits nothing; an open overlay takes keys only.
    mouse(&mut app, MouseEventKind::Down(MouseButton::Left), 10, 1);
    assert_eq!(app.screens.flags.selected, rows.offset + 3);
    app.overlay = Some(Overlay::Help { scroll: 0 });
    mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        from + 2,
        0,
    );
    assert_eq!(app.overlay, Some(Overlay::Help { scroll: 0 }));
}

#[test]
fn ctrl_z_suspends_from_anywhere() {
    let mut app = app_with_tour();
    let fx = update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL)),
    );
    assert_eq!(fx, [Effect::Suspend]);
}

#[test]
fn e_opens_the_experiment_at_the_selected_flags_line() {
    let mut app = app_with_tour();
    app.overlay = None;
    key(&mut app, KeyCode::Char('2'));
    let rows = super::screens::flags::visible(&app);
    let (i, line) = rows
        .iter()
        .enumerate()
        .find_map(|(i, r)| r.experiment_line.map(|l| (i, l)))
        .expect("a flag set in the experiment");
    let default_row = rows
        .iter()
        .position(|r| r.source == "default")
        .expect("a flag left at its default");
    let path = app.config.as_ref().expect("loaded").path.clone();
    // The line is the one of the experiment that sets it.
    let text = std::fs::read_to_string(&path).expect("the example");
    let name = rows[i].name.clone();
    let at = text
        .lines()
        .nth(line as usize - 1)
        .expect("the line exists");
    assert!(at.trim_start().starts_with(&format!("{name}:")), "{at}");
    app.screens.flags.selected = i;
    assert_eq!(
        key(&mut app, KeyCode::Char('e')),
        [Effect::OpenEditor {
            path: path.clone(),
            line
        }]
    );
    app.screens.flags.selected = default_row;
    assert_eq!(
        key(&mut app, KeyCode::Char('e')),
        [Effect::OpenEditor { path, line: 1 }]
    );
    assert!(
        status(&app).contains("not set in the experiment"),
        "{}",
        status(&app)
    );
}

/// At the minimum size every screen draws (no notice, the tabs and the key hints visible).
#[test]
fn every_screen_draws_at_the_minimum_size() {
    let (w, h) = crate::tui::widgets::MIN_SIZE;
    for tab in Tab::ALL {
        let mut app = app_with_tour();
        app.overlay = None;
        app.tab = tab;
        let theme = crate::tui::theme::Theme::new(crate::tui::theme::Palette::None);
        let mut term =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).expect("a terminal");
        term.draw(|f| crate::tui::widgets::draw(f, &mut app, &theme))
            .expect("drawn");
        let buf = term.backend().buffer();
        let line =
            |y: u16| -> String { (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect() };
        assert!(line(0).contains("1 Checklist"), "{tab:?}: {}", line(0));
        assert!(
            line(h - 1).contains("q quit") || line(h - 1).contains("keys"),
            "{tab:?}: {}",
            line(h - 1)
        );
        let all: String = (0..h).map(line).collect();
        assert!(!all.contains("too small"), "{tab:?}");
    }
}

#[test]
fn a_click_selects_a_space_on_the_sweep_screen_and_starts_nothing() {
    use crossterm::event::{MouseButton, MouseEventKind};
    let mut app = gpu_app("proxy-cpu");
    key(&mut app, KeyCode::Char('5'));
    draw_at(&mut app, 80, 24);
    let rows = app.hits.rows.expect("the spaces were drawn");
    assert_eq!(rows.tab, Tab::Sweep);
    assert!(rows.height >= 3, "{rows:?}");
    let fx = mouse(
        &mut app,
        MouseEventKind::Down(MouseButton::Left),
        5,
        rows.y + 2,
    );
    assert!(fx.is_empty());
    assert_eq!(app.screens.sweep.selected, rows.offset + 2);
    assert!(!app.screens.sweep.running);
}
