//! Update tests: key sequences applied to the state give the expected state and effects, with
//! no terminal. The config view is built by the real config engine from the bundled example.

use super::app::{App, Effect, Msg, Overlay, update};
use super::screens::{self, Tab, run::LiveTrial, trials::SortKey};
use crate::app::Session;
use crate::app::views::config::{self as load, PendingEdit, PlanView};
use crate::config::LoadOptions;
use crate::config::env::Env;
use crate::domain::trial::TrialResult;
use crate::store::{TrialRow, TrialStatus};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::{Path, PathBuf};

const EXAMPLE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";

fn opts() -> LoadOptions {
    LoadOptions {
        env: Env::default(),
        ..LoadOptions::default()
    }
}

/// The bundled example with an empty environment and a workspace that does not exist.
fn session() -> Session {
    Session::new(
        EXAMPLE.into(),
        opts(),
        crate::store::Workspace::at(
            "/nonexistent/primus-tune-test-workspace".into(),
            crate::store::WorkspaceOrigin::Chosen,
        ),
    )
}

fn session_of(path: &Path) -> Session {
    Session {
        experiment: path.to_path_buf(),
        ..session()
    }
}

fn loaded_app() -> App {
    let mut app = App::new(
        vec!["proxy-cpu".into(), "proxy-torch".into()],
        "proxy-cpu",
        false,
    );
    let (view, plan) = load::build(&session(), &[]).unwrap();
    let fx = update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
    assert!(fx.is_empty());
    app
}

fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
    update(app, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn keys(app: &mut App, text: &str) -> Vec<Effect> {
    let mut fx = Vec::new();
    for c in text.chars() {
        fx.extend(key(app, KeyCode::Char(c)));
    }
    fx
}

/// Search for a flag by name on the Flags screen and leave it selected.
fn select_flag(app: &mut App, name: &str) {
    key(app, KeyCode::Char('2'));
    key(app, KeyCode::Char('/'));
    keys(app, name);
    key(app, KeyCode::Enter);
    let rows = screens::flags::visible(app);
    let i = rows
        .iter()
        .position(|r| r.name == name)
        .expect("flag listed");
    app.screens.flags.selected = i;
}

/// Feed the effects' Load back through the real engine, as the loop does.
fn run_load(app: &mut App, fx: &[Effect]) {
    for f in fx {
        if let Effect::Load(p) = f {
            let r = load::build(&session(), p).map(|(v, plan)| (Box::new(v), plan));
            update(app, Msg::Loaded(r));
        }
    }
}

#[test]
fn enter_on_a_boolean_toggles_it_as_an_unsaved_edit() {
    let mut app = loaded_app();
    select_flag(&mut app, "use_turbo_attention");
    let before = screens::flags::visible(&app)[app.screens.flags.selected]
        .value
        .clone();
    assert_eq!(before, "true");
    let fx = key(&mut app, KeyCode::Enter);
    let want = vec![PendingEdit {
        key: "use_turbo_attention".into(),
        text: "false".into(),
    }];
    assert_eq!(fx, vec![Effect::Load(want.clone())]);
    assert_eq!(app.pending, want);
    // The engine's view of the edit: the value, the mark and a diff of the file.
    run_load(&mut app, &fx);
    let row = screens::flags::visible(&app)
        .into_iter()
        .find(|r| r.name == "use_turbo_attention")
        .cloned()
        .unwrap();
    assert_eq!(row.value, "false");
    assert!(row.pending);
    let plan = app.plan.as_ref().expect("planned");
    assert!(
        plan.diff.contains("-      use_turbo_attention: true"),
        "{}",
        plan.diff
    );
    assert!(
        plan.diff.contains("+      use_turbo_attention: false"),
        "{}",
        plan.diff
    );
    assert!(!plan.refused);
}

#[test]
fn the_editor_checks_the_value_as_it_is_typed() {
    let mut app = loaded_app();
    select_flag(&mut app, "micro_batch_size");
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "an editor opens");
    let current = app.screens.flags.editor.as_ref().unwrap().text.clone();
    for _ in 0..current.len() {
        key(&mut app, KeyCode::Backspace);
    }
    keys(&mut app, "x");
    let e = app.screens.flags.editor.as_ref().unwrap();
    assert!(
        e.error.as_deref().unwrap().contains("micro_batch_size"),
        "{e:?}"
    );
    // Enter does not keep a wrong value.
    assert!(key(&mut app, KeyCode::Enter).is_empty());
    assert!(app.screens.flags.editor.is_some());
    assert!(app.pending.is_empty());
    key(&mut app, KeyCode::Backspace);
    keys(&mut app, "3");
    assert_eq!(app.screens.flags.editor.as_ref().unwrap().error, None);
    let fx = key(&mut app, KeyCode::Enter);
    assert_eq!(
        fx,
        vec![Effect::Load(vec![PendingEdit {
            key: "micro_batch_size".into(),
            text: "3".into()
        }])]
    );
    assert!(app.screens.flags.editor.is_none());
}

#[test]
fn escape_leaves_the_editor_without_an_edit() {
    let mut app = loaded_app();
    select_flag(&mut app, "micro_batch_size");
    key(&mut app, KeyCode::Enter);
    keys(&mut app, "9");
    assert!(key(&mut app, KeyCode::Esc).is_empty());
    assert!(app.screens.flags.editor.is_none());
    assert!(app.pending.is_empty());
}

#[test]
fn enums_cycle_through_their_values() {
    let mut app = loaded_app();
    let row = screens::flags::visible(&app)
        .into_iter()
        .find(|r| r.choices.len() >= 2 && !r.env_var)
        .cloned()
        .expect("an enum flag");
    select_flag(&mut app, &row.name);
    key(&mut app, KeyCode::Enter);
    let start = app.screens.flags.editor.as_ref().unwrap().text.clone();
    key(&mut app, KeyCode::Right);
    let next = app.screens.flags.editor.as_ref().unwrap().text.clone();
    assert!(row.choices.contains(&next), "{next} in {:?}", row.choices);
    assert_ne!(next, start);
    key(&mut app, KeyCode::Left);
    let back = app.screens.flags.editor.as_ref().unwrap().text.clone();
    if row.choices.contains(&start) {
        assert_eq!(back, start);
    }
}

#[test]
fn undo_removes_the_last_edit() {
    let mut app = loaded_app();
    select_flag(&mut app, "use_turbo_attention");
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.pending.len(), 1);
    let fx = key(&mut app, KeyCode::Char('u'));
    assert_eq!(fx, vec![Effect::Load(vec![])]);
    assert!(app.pending.is_empty());
    assert!(app.plan.is_none());
}

#[test]
fn save_shows_the_diff_then_writes_on_yes() {
    let mut app = loaded_app();
    select_flag(&mut app, "use_turbo_attention");
    let fx = key(&mut app, KeyCode::Enter);
    run_load(&mut app, &fx);
    assert!(key(&mut app, KeyCode::Char('s')).is_empty());
    assert_eq!(
        app.overlay,
        Some(Overlay::Diff {
            save: true,
            scroll: 0
        })
    );
    let fx = key(&mut app, KeyCode::Char('y'));
    assert_eq!(fx, vec![Effect::Save(app.pending.clone())]);
    assert_eq!(app.overlay, None);
    let fx = update(&mut app, Msg::Saved(Ok("saved 1 change(s)".into())));
    assert_eq!(fx, vec![Effect::Load(vec![])]);
    assert!(app.pending.is_empty());
}

#[test]
fn a_refused_plan_is_not_saved() {
    let mut app = loaded_app();
    app.pending.push(PendingEdit {
        key: "micro_batch_size".into(),
        text: "3".into(),
    });
    app.plan = Some(PlanView {
        refused: true,
        ..PlanView::default()
    });
    app.tab = Tab::Flags;
    key(&mut app, KeyCode::Char('s'));
    let fx = key(&mut app, KeyCode::Char('y'));
    assert!(fx.is_empty());
    assert!(app.status.as_ref().unwrap().1.contains("not saved"));
}

#[test]
fn n_cancels_the_save() {
    let mut app = loaded_app();
    select_flag(&mut app, "use_turbo_attention");
    key(&mut app, KeyCode::Enter);
    key(&mut app, KeyCode::Char('s'));
    assert!(key(&mut app, KeyCode::Char('n')).is_empty());
    assert_eq!(app.overlay, None);
    assert_eq!(app.pending.len(), 1, "the edit stays unsaved");
}

#[test]
fn quit_asks_while_a_trial_runs_and_waits_for_it_to_stop() {
    let mut app = loaded_app();
    assert_eq!(key(&mut app, KeyCode::Char('q')), vec![Effect::Quit]);
    let mut app = loaded_app();
    app.screens.run.trial = Some(LiveTrial::default());
    assert!(key(&mut app, KeyCode::Char('q')).is_empty());
    assert_eq!(app.overlay, Some(Overlay::ConfirmQuit));
    assert!(key(&mut app, KeyCode::Char('n')).is_empty());
    assert_eq!(app.overlay, None);
    key(&mut app, KeyCode::Char('q'));
    assert_eq!(key(&mut app, KeyCode::Char('y')), vec![Effect::StopTrial]);
    assert!(app.quitting);
    let done = TrialResult {
        trial_id: Some(1),
        status: crate::domain::trial::TrialStatus::Stopped,
        failure: None,
        stop_reason: crate::domain::trial::StopReason::User,
        exit_code: None,
        exit_signal: None,
        wall_s: 1.0,
        trial_dir: None,
        job: None,
        summary: Default::default(),
    };
    let fx = update(&mut app, Msg::TrialDone(Ok(Box::new(done))));
    assert_eq!(fx, vec![Effect::LoadTrials, Effect::Quit]);
}

#[test]
fn ctrl_c_twice_and_sigterm_stop_the_trial_without_asking() {
    let mut app = loaded_app();
    app.screens.run.trial = Some(LiveTrial::default());
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert!(update(&mut app, Msg::Key(ctrl_c)).is_empty());
    assert_eq!(update(&mut app, Msg::Key(ctrl_c)), vec![Effect::StopTrial]);
    let mut app = loaded_app();
    app.screens.run.trial = Some(LiveTrial::default());
    assert_eq!(update(&mut app, Msg::Terminate), vec![Effect::StopTrial]);
    let mut app = loaded_app();
    assert_eq!(update(&mut app, Msg::Terminate), vec![Effect::Quit]);
}

#[test]
fn a_trial_runs_unsaved_edits_as_its_overrides() {
    let mut app = loaded_app();
    select_flag(&mut app, "use_turbo_attention");
    key(&mut app, KeyCode::Enter);
    let edits = app.pending.clone();
    assert_eq!(edits.len(), 1);
    // The file stays as it is: the edit goes with the trial as an override.
    assert_eq!(
        key(&mut app, KeyCode::Char('r')),
        vec![Effect::StartTrial {
            profile: "proxy-cpu".into(),
            edits: edits.clone(),
        }]
    );
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .1
            .contains("unsaved edit as its overrides")
    );
    assert_eq!(app.pending, edits, "the edits stay unsaved");
    app.screens.run.trial = None;
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('u'));
    key(&mut app, KeyCode::Char('3'));
    key(&mut app, KeyCode::Right);
    assert_eq!(
        key(&mut app, KeyCode::Char('r')),
        vec![Effect::StartTrial {
            profile: "proxy-torch".into(),
            edits: vec![],
        }]
    );
    assert!(app.trial_running());
    // A second start while one runs does nothing.
    assert!(key(&mut app, KeyCode::Char('r')).is_empty());
    assert_eq!(key(&mut app, KeyCode::Char('x')), vec![Effect::StopTrial]);
}

#[test]
fn enter_on_a_step_lists_its_flags_only() {
    let mut app = loaded_app();
    key(&mut app, KeyCode::Down);
    let step = app.config.as_ref().unwrap().checklist.steps[1].step;
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.tab, Tab::Flags);
    assert_eq!(app.screens.flags.step, Some(step));
    let rows = screens::flags::visible(&app);
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r.step == Some(step)));
    key(&mut app, KeyCode::Char('a'));
    assert!(screens::flags::visible(&app).len() > rows_len(&app, step));
}

fn rows_len(app: &App, step: crate::config::catalog::Step) -> usize {
    app.config.as_ref().unwrap().flags_of(step).count()
}

#[test]
fn tabs_cycle_and_the_trials_screen_asks_for_trials() {
    let mut app = loaded_app();
    assert_eq!(app.tab, Tab::Checklist);
    key(&mut app, KeyCode::Tab);
    assert_eq!(app.tab, Tab::Flags);
    key(&mut app, KeyCode::BackTab);
    // Back from the first screen wraps to the last: the studies, read fresh.
    assert_eq!(key(&mut app, KeyCode::BackTab), vec![Effect::LoadStudies]);
    assert_eq!(app.tab, Tab::Studies);
    key(&mut app, KeyCode::BackTab);
    assert_eq!(app.tab, Tab::Sweep);
    key(&mut app, KeyCode::BackTab);
    assert_eq!(app.tab, Tab::Trials);
    assert_eq!(key(&mut app, KeyCode::Char('4')), vec![Effect::LoadTrials]);
}

#[test]
fn outside_changes_reload_or_wait_for_the_user() {
    let mut app = loaded_app();
    assert_eq!(
        update(&mut app, Msg::DiskChanged),
        vec![Effect::Load(vec![])]
    );
    select_flag(&mut app, "use_turbo_attention");
    key(&mut app, KeyCode::Enter);
    assert!(update(&mut app, Msg::DiskChanged).is_empty());
    assert!(app.disk_changed);
    // The change is said in a box, whole; Esc closes it.
    assert!(matches!(&app.overlay, Some(Overlay::Error { errors, .. })
        if errors[0].starts_with("the experiment changed on disk")));
    key(&mut app, KeyCode::Esc);
    // Saving over an outside change is refused; R reloads and drops the edits.
    assert!(key(&mut app, KeyCode::Char('s')).is_empty());
    assert!(matches!(app.overlay, Some(Overlay::Error { .. })));
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.overlay, None);
    assert_eq!(
        key(&mut app, KeyCode::Char('R')),
        vec![Effect::Load(vec![])]
    );
    assert!(app.pending.is_empty());
    assert!(!app.disk_changed);
}

fn trial_row(id: i64, overrides: &[(&str, serde_json::Value)], step: f64) -> TrialRow {
    TrialRow {
        job: None,
        id,
        study_id: None,
        status: TrialStatus::Completed,
        created_at: "2026-11-30T00:00:00Z".into(),
        started_at: None,
        finished_at: None,
        updated_at: "2026-11-30T00:00:00Z".into(),
        config_path: PathBuf::from(EXAMPLE),
        config_hash: "h".into(),
        overrides: overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        profile: Some("proxy-cpu".into()),
        argv: vec![],
        env: vec![],
        trial_dir: PathBuf::from("t"),
        runner_pid: None,
        runner: None,
        heartbeat_at: None,
        failure: None,
        exit_code: Some(0),
        exit_signal: None,
        iterations_seen: 10,
        iterations_stored: 10,
        wall_s: Some(1.0),
        summary: None,
        median_step_ms: Some(step),
        ci95_ms: Some(1.0),
        tokens_per_s_per_gpu: Some(1000.0 / step),
        tflops_per_gpu: Some(10_000.0 / step),
        peak_mem_gib: Some(step / 10.0),
        resolved: None,
    }
}

#[test]
fn trials_sort_mark_compare_and_apply() {
    use serde_json::json;
    let mut app = loaded_app();
    let rows = vec![
        trial_row(1, &[("train_iters", json!(50))], 300.0),
        trial_row(
            2,
            &[("train_iters", json!(50)), ("micro_batch_size", json!(2))],
            200.0,
        ),
        trial_row(
            3,
            &[("train_iters", json!(50)), ("micro_batch_size", json!(4))],
            250.0,
        ),
    ];
    let rows = rows
        .into_iter()
        .map(crate::app::views::trials::summary_of_overrides)
        .collect();
    update(&mut app, Msg::Trials(Ok(rows)));
    key(&mut app, KeyCode::Char('4'));
    let ids = |app: &App| {
        app.screens
            .trials
            .sorted()
            .iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&app), vec![3, 2, 1], "newest first");
    key(&mut app, KeyCode::Char('s')); // status
    key(&mut app, KeyCode::Char('s')); // median step, fastest first
    assert_eq!(app.screens.trials.sort, SortKey::Step);
    assert_eq!(ids(&app), vec![2, 3, 1]);
    key(&mut app, KeyCode::Char('S'));
    assert_eq!(ids(&app), vec![1, 3, 2]);
    // Trial 1 ran the config as it is (train_iters is the runner's budget): nothing to apply.
    app.screens.trials.selected = 0;
    assert!(key(&mut app, KeyCode::Char('a')).is_empty());
    assert!(app.pending.is_empty());
    // Compare: mark 1, select 2.
    key(&mut app, KeyCode::Char(' '));
    assert_eq!(app.screens.trials.marked, Some(1));
    key(&mut app, KeyCode::End);
    assert_eq!(
        key(&mut app, KeyCode::Char('c')),
        vec![Effect::LoadComparison { a: 1, b: 2 }]
    );
    assert!(app.screens.trials.compare);
    let a = app.screens.trials.rows[0].row.clone();
    let b = app.screens.trials.rows[1].row.clone();
    let c = crate::app::views::compare::compare(
        &a,
        &b,
        &[],
        &[],
        crate::app::views::compare::LaunchNoise::of(None),
    );
    assert_eq!(c.differences.len(), 1);
    assert_eq!(c.differences[0].flag, "micro_batch_size");
    assert_eq!(c.differences[0].b, serde_json::json!(2));
    update(&mut app, Msg::Comparison(Ok(Box::new(c))));
    assert!(app.screens.trials.comparison.is_some());
    // A comparison of another pair (the selection moved meanwhile) is not shown.
    key(&mut app, KeyCode::Up);
    assert!(!app.screens.trials.compare && app.screens.trials.comparison.is_none());
    key(&mut app, KeyCode::End);
    // Apply trial 2: its own settings become unsaved edits, not the runner's keys.
    let fx = key(&mut app, KeyCode::Char('a'));
    let want = vec![PendingEdit {
        key: "micro_batch_size".into(),
        text: "2".into(),
    }];
    assert_eq!(fx, vec![Effect::Load(want.clone())]);
    assert_eq!(app.pending, want);
    assert_eq!(app.tab, Tab::Flags);
}

#[test]
fn live_trial_events_fill_the_run_state() {
    use crate::run::process::Stream;
    use crate::run::trial::TrialEvent;
    let mut app = loaded_app();
    key(&mut app, KeyCode::Char('r'));
    update(
        &mut app,
        Msg::Trial(TrialEvent::Started {
            trial_id: 7,
            argv: vec!["x".into()],
            trial_dir: PathBuf::from("d"),
            basis: crate::domain::evidence::Basis::Measured {
                profile: "primus".into(),
                gpu: Some("AMD Instinct MI300X".into()),
            },
        }),
    );
    for i in 0..(super::app::LOG_LINES + 5) {
        update(
            &mut app,
            Msg::Trial(TrialEvent::Line {
                stream: Stream::Stdout,
                line: format!("line {i}"),
            }),
        );
    }
    let t = app.screens.run.trial.as_ref().unwrap();
    assert_eq!(t.id, Some(7));
    assert_eq!(
        t.log.len(),
        super::app::LOG_LINES,
        "the log tail is bounded"
    );
    assert_eq!(t.log.front().unwrap().1, "line 5");
    assert!(app.trial_running());
}

#[test]
fn load_build_shows_refused_edits_with_the_reason() {
    let pending = vec![PendingEdit {
        key: "micro_batch_size".into(),
        text: "-4".into(),
    }];
    let (_, plan) = load::build(&session(), &pending).unwrap();
    let plan = plan.unwrap();
    assert!(plan.refused);
    assert!(
        plan.diagnostics
            .iter()
            .any(|d| d.flag.as_deref() == Some("micro_batch_size")),
        "{:?}",
        plan.diagnostics
    );
}

#[test]
fn check_value_types_by_the_catalog() {
    assert!(crate::app::edit::check_value("micro_batch_size", "4").is_ok());
    assert!(crate::app::edit::check_value("micro_batch_size", "four").is_err());
    assert!(crate::app::edit::check_value("use_turbo_attention", "maybe").is_err());
    assert!(crate::app::edit::check_value("use_turbo_attention", "false").is_ok());
}

#[test]
fn load_save_writes_the_edit_and_keeps_everything_else() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("examples");
    crate::util::bundled::extract(&root).unwrap();
    let path = root.join("experiments/moe_16B-BF16-pretrain.yaml");
    let before = std::fs::read_to_string(&path).unwrap();
    let pending = vec![PendingEdit {
        key: "use_turbo_attention".into(),
        text: "false".into(),
    }];
    let msg = crate::app::edit::save(&session_of(&path), &pending).unwrap();
    assert!(msg.contains("saved 1 change"), "{msg}");
    let after = std::fs::read_to_string(&path).unwrap();
    let changed: Vec<(&str, &str)> = before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(
        changed,
        vec![(
            "      use_turbo_attention: true",
            "      use_turbo_attention: false"
        )]
    );
    assert_eq!(before.lines().count(), after.lines().count());
    // A refused edit writes nothing.
    let bad = vec![PendingEdit {
        key: "micro_batch_size".into(),
        text: "-4".into(),
    }];
    assert!(crate::app::edit::save(&session_of(&path), &bad).is_err());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), after);
}

#[test]
fn quit_asks_before_dropping_unsaved_edits() {
    let mut app = loaded_app();
    select_flag(&mut app, "use_turbo_attention");
    key(&mut app, KeyCode::Enter);
    assert!(key(&mut app, KeyCode::Char('q')).is_empty());
    assert_eq!(app.overlay, Some(Overlay::ConfirmQuit));
    assert_eq!(key(&mut app, KeyCode::Char('y')), vec![Effect::Quit]);
}

#[test]
fn keeping_the_current_value_is_not_an_edit() {
    let mut app = loaded_app();
    select_flag(&mut app, "micro_batch_size");
    key(&mut app, KeyCode::Enter);
    assert!(key(&mut app, KeyCode::Enter).is_empty());
    assert!(app.pending.is_empty());
    assert!(app.status.as_ref().unwrap().1.contains("unchanged"));
}

#[test]
fn a_message_lasts_until_the_next_key() {
    let mut app = loaded_app();
    key(&mut app, KeyCode::Char('2'));
    key(&mut app, KeyCode::Char('u')); // nothing to undo: says so
    assert!(app.status.is_some());
    key(&mut app, KeyCode::Down);
    assert!(app.status.is_none(), "the key hints come back");
}

#[test]
fn sweep_screen_starts_only_applicable_spaces_and_applies_the_pick() {
    use crate::domain::study::{CandidateRecord, StudyRecord};
    let mut app = loaded_app();
    key(&mut app, KeyCode::Char('5'));
    assert_eq!(app.tab, Tab::Sweep);
    let spaces = app.config.as_ref().unwrap().spaces.clone();
    let names: Vec<&str> = spaces.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"deepep-cu") && names.contains(&"memory-fit"),
        "{names:?}"
    );
    // The MoE example: every built-in space applies.
    let i = names.iter().position(|n| *n == "sync-free-stage").unwrap();
    app.screens.sweep.selected = i;
    // Enter shows the space's details; `r` asks first: the CPU stand-in does not model the
    // sync-free stage, so only a labelled demo can run; `y` starts it.
    assert!(key(&mut app, KeyCode::Enter).is_empty());
    assert!(key(&mut app, KeyCode::Char('r')).is_empty());
    let asked = match &app.overlay {
        Some(Overlay::ConfirmLaunch(l)) => l.lines.join(" "),
        other => panic!("{other:?}"),
    };
    assert!(
        asked.contains("does not model turbo_sync_free_moe_stage"),
        "{asked}"
    );
    assert_eq!(
        key(&mut app, KeyCode::Char('y')),
        vec![Effect::StartSweep {
            space: "sync-free-stage".into(),
            profile: "proxy-cpu".into(),
            demo: true,
        }]
    );
    assert!(app.screens.sweep.running && app.busy());
    assert!(
        key(&mut app, KeyCode::Char('r')).is_empty(),
        "one at a time"
    );
    update(&mut app, Msg::SweepLine("candidate 0 ...".into()));
    assert_eq!(app.screens.sweep.log.len(), 1);
    // Quitting while it runs stops it first.
    key(&mut app, KeyCode::Char('q'));
    assert_eq!(key(&mut app, KeyCode::Char('y')), vec![Effect::StopSweep]);
    let cand = |id: usize, stage: i64, verdict: &str| CandidateRecord {
        id,
        baseline: false,
        overrides: [(
            "turbo_sync_free_moe_stage".to_string(),
            serde_json::json!(stage),
        )]
        .into_iter()
        .collect(),
        verdict: verdict.parse().unwrap(),
        why: String::new(),
        n: 10,
        step_ms: Some(100.0),
        ci_low_ms: Some(99.0),
        ci_high_ms: Some(101.0),
        peak_memory_bytes: None,
        peak_memory_source: None,
        predicted_bytes: None,
    };
    let rec = StudyRecord {
        space: "sync-free-stage".into(),
        config: EXAMPLE.into(),
        profile: "proxy-cpu".into(),
        gpus: 1,
        capacity_bytes: None,
        candidates: vec![cand(0, 0, "slower"), cand(1, 1, "winner")],
        pick: Some(1),
        gpu_seconds: 10.0,
        trials: 2,
        log: vec![],
        memory_error: None,
        basis: None,
        unmodeled: Vec::new(),
        baseline: None,
        conclusion: None,
        per_samples: None,
        knobs: Vec::new(),
        link_scale: None,
        statistic: crate::domain::study::StepStatistic::TrimmedMean,
    };
    let fx = update(
        &mut app,
        Msg::SweepDone(Ok(("sf1".into(), Some(Box::new(rec)), String::new()))),
    );
    assert_eq!(
        fx,
        vec![Effect::LoadTrials, Effect::LoadStudies, Effect::Quit],
        "then it leaves"
    );
    assert!(!app.screens.sweep.running);
    let mut app2 = loaded_app();
    app2.screens.sweep.result = app.screens.sweep.result.clone();
    app2.tab = Tab::Sweep;
    // `a` asks the app what applying the pick writes (as `recommend --study --apply`), then
    // makes it unsaved edits; what the app refuses is said, and nothing is edited.
    let fx = key(&mut app2, KeyCode::Char('a'));
    assert_eq!(fx, vec![Effect::PlanPick("sf1".into())]);
    let refused = crate::app::AppError::Failed("the pick of study `sf1` is withheld".into());
    assert!(update(&mut app2, Msg::PickPlanned("sf1".into(), Err(refused))).is_empty());
    assert!(app2.pending.is_empty());
    assert!(app2.status.as_ref().unwrap().1.contains("is withheld"));
    let planned = crate::app::views::recommend::apply::PickEdits {
        edits: vec![("turbo_sync_free_moe_stage".into(), "1".into())],
        unmodeled: Vec::new(),
    };
    let fx = update(&mut app2, Msg::PickPlanned("sf1".into(), Ok(planned)));
    let want = vec![PendingEdit {
        key: "turbo_sync_free_moe_stage".into(),
        text: "1".into(),
    }];
    assert_eq!(fx, vec![Effect::Load(want.clone())]);
    assert_eq!(app2.pending, want);
}

#[test]
fn a_space_that_does_not_apply_is_refused_with_its_reason() {
    let mut app = App::new(vec!["proxy-cpu".into()], "proxy-cpu", false);
    let dense = "presets/examples/experiments/llama3_8B-BF16-pretrain.yaml";
    let (view, _) = load::build(&session_of(Path::new(dense)), &[]).unwrap();
    update(&mut app, Msg::Loaded(Ok((Box::new(view), None))));
    key(&mut app, KeyCode::Char('5'));
    let i = app
        .config
        .as_ref()
        .unwrap()
        .spaces
        .iter()
        .position(|s| s.name == "sync-free-stage")
        .unwrap();
    app.screens.sweep.selected = i;
    assert!(key(&mut app, KeyCode::Char('r')).is_empty());
    assert!(app.status.as_ref().unwrap().1.contains("MoE"));
}

#[test]
fn n_on_the_gemm_step_runs_the_next_stage_with_a_real_profile() {
    let mut app = App::new(
        vec!["proxy-cpu".into(), "primus".into()],
        "proxy-cpu",
        false,
    );
    let (view, plan) = load::build(&session(), &[]).unwrap();
    update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
    let g = app
        .config
        .as_ref()
        .unwrap()
        .gemm
        .clone()
        .expect("megatron: stages shown");
    let next = g.next.expect("a next stage");
    // The proxies never call hipBLASLt: refused, with the way out.
    assert!(key(&mut app, KeyCode::Char('n')).is_empty());
    assert!(!app.trial_running());
    let (_, msg) = app.status.clone().unwrap();
    assert!(msg.contains("primus or megatron profile"), "{msg}");
    key(&mut app, KeyCode::Esc);
    // Not on the GEMM step: `n` does nothing.
    key(&mut app, KeyCode::Down);
    app.profile = 1;
    assert!(key(&mut app, KeyCode::Char('n')).is_empty());
    key(&mut app, KeyCode::Up);
    // A GPU profile: asked first, `y` starts it.
    assert!(key(&mut app, KeyCode::Char('n')).is_empty());
    assert!(matches!(app.overlay, Some(Overlay::ConfirmLaunch(_))));
    assert_eq!(
        key(&mut app, KeyCode::Char('y')),
        vec![Effect::StartGemmStage {
            stage: next,
            profile: "primus".into()
        }]
    );
    assert!(app.trial_running());
    assert_eq!(app.tab, Tab::Run);
    // Its end reloads the config (the stage's files changed) and says what it produced.
    let fx = update(
        &mut app,
        Msg::GemmDone(Ok((
            Box::new(TrialResult {
                trial_id: Some(2),
                status: crate::domain::trial::TrialStatus::Completed,
                failure: None,
                stop_reason: crate::domain::trial::StopReason::MaxIters,
                exit_code: Some(0),
                exit_signal: None,
                wall_s: 1.0,
                trial_dir: None,
                job: None,
                summary: Default::default(),
            }),
            "GEMM stage 1: 12 unique shapes dumped".into(),
        ))),
    );
    assert!(fx.contains(&Effect::LoadTrials));
    assert!(fx.contains(&Effect::Load(Vec::new())));
    assert_eq!(
        app.status.as_ref().unwrap().1,
        "GEMM stage 1: 12 unique shapes dumped"
    );
}

#[test]
fn u_on_the_gemm_step_turns_tuned_gemms_on_once_stage_2_has_run() {
    let mut app = loaded_app();
    // No result file yet: refused, with the way there.
    assert!(key(&mut app, KeyCode::Char('u')).is_empty());
    assert!(!app.gemm_tuned);
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .1
            .contains("stage 2 writes them")
    );
    // With a result file: on, then off again.
    let g = app.config.as_mut().unwrap().gemm.as_mut().unwrap();
    g.results = Some(crate::gemm::status::ResultState {
        path: PathBuf::from("r.txt"),
        git_version: "abc".into(),
        entries: 3,
        archs: vec![],
        covered: None,
        modified: None,
    });
    assert!(key(&mut app, KeyCode::Char('u')).is_empty());
    assert!(app.gemm_tuned);
    key(&mut app, KeyCode::Char('u'));
    assert!(!app.gemm_tuned);
    // Only on the GEMM step.
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char('u'));
    assert!(!app.gemm_tuned);
}

/// Two studies as `studies` lists them: a finished one with a pick, an unfinished one.
fn two_studies() -> Vec<crate::app::views::studies::StudySummary> {
    use crate::app::views::studies::{StudyStatus, StudySummary};
    let one = |name: &str, status, pick: Option<serde_json::Value>| StudySummary {
        id: 1,
        name: name.into(),
        space: "sync-free-stage".into(),
        experiment: "x.yaml".into(),
        status,
        trials: 5,
        gpu_seconds: 120.0,
        pick: pick.map(|v| {
            [("turbo_sync_free_moe_stage".to_string(), v)]
                .into_iter()
                .collect()
        }),
        started: "2026-12-01T10:00:00.000Z".into(),
        profile: Some("proxy-cpu".into()),
        basis: None,
        cost_unit: "GPU",
        unmodeled: Vec::new(),
    };
    vec![
        one("sf-done", StudyStatus::Finished, Some(serde_json::json!(2))),
        one("sf-half", StudyStatus::Unfinished, None),
    ]
}

#[test]
fn studies_screen_opens_resumes_reports_and_applies() {
    let mut app = loaded_app();
    assert_eq!(key(&mut app, KeyCode::Char('6')), vec![Effect::LoadStudies]);
    assert_eq!(app.tab, Tab::Studies);
    update(&mut app, Msg::Studies(Ok(two_studies())));
    assert_eq!(app.screens.studies.rows.len(), 2);
    // Enter asks for the study in full; the answer opens it, Enter again goes back.
    assert_eq!(
        key(&mut app, KeyCode::Enter),
        vec![Effect::LoadStudy("sf-done".into())]
    );
    let detail = crate::app::views::studies::StudyDetail {
        summary: two_studies().remove(0),
        record: None,
    };
    update(&mut app, Msg::Study(Ok(Box::new(detail))));
    assert!(app.screens.studies.open.is_some());
    assert!(key(&mut app, KeyCode::Enter).is_empty());
    assert!(app.screens.studies.open.is_none());
    // A finished study: its report; it is not resumed.
    assert_eq!(
        key(&mut app, KeyCode::Char('p')),
        vec![Effect::WriteReport("sf-done".into())]
    );
    assert!(key(&mut app, KeyCode::Char('r')).is_empty());
    // An unfinished one: resumed on the Sweep screen; no report yet.
    key(&mut app, KeyCode::Down);
    assert!(key(&mut app, KeyCode::Char('p')).is_empty());
    assert!(app.status.as_ref().unwrap().1.contains("no result yet"));
    assert_eq!(
        key(&mut app, KeyCode::Char('r')),
        vec![Effect::ResumeSweep {
            study: "sf-half".into()
        }]
    );
    assert_eq!(app.tab, Tab::Sweep);
    assert!(app.screens.sweep.running && app.busy());
    // The pick as unsaved edits.
    app.screens.sweep.running = false;
    key(&mut app, KeyCode::Char('6'));
    key(&mut app, KeyCode::Up);
    assert_eq!(
        key(&mut app, KeyCode::Char('a')),
        vec![Effect::PlanPick("sf-done".into())]
    );
    let planned = crate::app::views::recommend::apply::PickEdits {
        edits: vec![("turbo_sync_free_moe_stage".into(), "2".into())],
        unmodeled: Vec::new(),
    };
    let fx = update(&mut app, Msg::PickPlanned("sf-done".into(), Ok(planned)));
    assert_eq!(
        app.pending,
        vec![PendingEdit {
            key: "turbo_sync_free_moe_stage".into(),
            text: "2".into()
        }]
    );
    assert_eq!(fx, vec![Effect::Load(app.pending.clone())]);
    assert_eq!(app.tab, Tab::Flags);
    // A sweep refuses to resume over unsaved edits (it runs the file on disk).
    key(&mut app, KeyCode::Char('6'));
    key(&mut app, KeyCode::Down);
    assert!(key(&mut app, KeyCode::Char('r')).is_empty());
}

/// `l` on the list asks for the study and opens its decision log when it arrives; on an open
/// study it switches between the log and the ranking; a study without a record has no log.
#[test]
fn l_opens_a_studys_decision_log() {
    let mut app = loaded_app();
    key(&mut app, KeyCode::Char('6'));
    update(&mut app, Msg::Studies(Ok(two_studies())));
    assert_eq!(
        key(&mut app, KeyCode::Char('l')),
        vec![Effect::LoadStudy("sf-done".into())]
    );
    let detail = |record| crate::app::views::studies::StudyDetail {
        summary: two_studies().remove(0),
        record,
    };
    let rec: crate::domain::study::StudyRecord = serde_json::from_value(serde_json::json!({
        "space": "sync-free-stage", "config": "x.yaml", "profile": "p", "gpus": 1,
        "capacity_bytes": null, "candidates": [], "pick": null, "gpu_seconds": 1.0,
        "trials": 1, "log": ["a", "b", "c"], "memory_error": null
    }))
    .unwrap();
    update(&mut app, Msg::Study(Ok(Box::new(detail(Some(rec))))));
    assert_eq!(app.screens.studies.log_from, Some(0));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    assert_eq!(
        app.screens.studies.log_from,
        Some(2),
        "the last line at most"
    );
    key(&mut app, KeyCode::Char('l'));
    assert_eq!(app.screens.studies.log_from, None);
    key(&mut app, KeyCode::Char('l'));
    assert_eq!(app.screens.studies.log_from, Some(0));
    // Enter goes back to the list, and Enter then opens the ranking, not the log.
    assert!(key(&mut app, KeyCode::Enter).is_empty());
    assert!(app.screens.studies.open.is_none() && app.screens.studies.log_from.is_none());
    key(&mut app, KeyCode::Enter);
    update(&mut app, Msg::Study(Ok(Box::new(detail(None)))));
    assert_eq!(app.screens.studies.log_from, None);
    assert!(key(&mut app, KeyCode::Char('l')).is_empty());
    assert!(
        app.status
            .as_ref()
            .unwrap()
            .1
            .contains("no decision log yet"),
        "{:?}",
        app.status
    );
}

#[test]
fn applying_a_trial_of_another_experiment_asks_first() {
    use crate::app::views::trials::{ApplyPlan, summary_of_overrides};
    let mut app = loaded_app();
    let mut other = summary_of_overrides(trial_row(
        9,
        &[("micro_batch_size", serde_json::json!(8))],
        100.0,
    ));
    other.this_experiment = false;
    update(&mut app, Msg::Trials(Ok(vec![other])));
    key(&mut app, KeyCode::Char('4'));
    assert_eq!(
        key(&mut app, KeyCode::Char('a')),
        vec![Effect::PlanApply(9)]
    );
    assert!(app.pending.is_empty());
    let plan = ApplyPlan {
        trial: 9,
        edits: vec![("micro_batch_size".into(), "8".into())],
        other_experiment: Some("other.yaml".into()),
    };
    update(&mut app, Msg::ApplyPlan(Ok(plan.clone())));
    assert_eq!(
        app.overlay,
        Some(Overlay::ConfirmApply(Box::new(plan.clone())))
    );
    assert!(app.pending.is_empty(), "nothing applied before the answer");
    // n keeps the config as it is.
    key(&mut app, KeyCode::Char('n'));
    assert_eq!(app.overlay, None);
    assert!(app.pending.is_empty());
    // y applies.
    update(&mut app, Msg::ApplyPlan(Ok(plan)));
    key(&mut app, KeyCode::Char('y'));
    assert_eq!(
        app.pending,
        vec![PendingEdit {
            key: "micro_batch_size".into(),
            text: "8".into(),
        }]
    );
}

/// `b` on Flags lists the versions saves replaced, Enter shows what restoring the selected one
/// changes, `y` restores it: the effects performed here with the app layer's own use cases
/// (as the loop does), on a private copy with a real save behind it.
#[test]
fn a_kept_version_is_listed_previewed_and_restored() {
    let d = tempfile::tempdir().unwrap();
    crate::util::bundled::extract(d.path()).unwrap();
    let exp = d.path().join(crate::util::bundled::DEFAULT_EXPERIMENT);
    let s = Session::new(
        exp.clone(),
        opts(),
        crate::store::Workspace::at(d.path().join("ws"), crate::store::WorkspaceOrigin::Chosen),
    );
    let original = std::fs::read_to_string(&exp).unwrap();
    let edit = |v: &str| PendingEdit {
        key: "micro_batch_size".into(),
        text: v.into(),
    };
    crate::app::edit::save(&s, &[edit("4")]).unwrap();
    crate::app::edit::save(&s, &[edit("2")]).unwrap();
    let perform = |fx: &Effect| match fx {
        Effect::LoadBackups => Msg::Backups(crate::app::backups::list(&s)),
        Effect::Restore { id, write } => Msg::Restore(crate::app::backups::restore(&s, id, *write)),
        other => panic!("{other:?}"),
    };
    let mut app = loaded_app();
    key(&mut app, KeyCode::Char('2'));
    let fx = key(&mut app, KeyCode::Char('b'));
    assert_eq!(fx, vec![Effect::LoadBackups]);
    update(&mut app, perform(&fx[0]));
    let Some(Overlay::Backups { list, .. }) = &app.overlay else {
        panic!("{:?}", app.overlay)
    };
    let ids: Vec<&str> = list.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["1", "2", "original"]);
    // Down twice: the original; End stays there.
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::End);
    let fx = key(&mut app, KeyCode::Enter);
    assert_eq!(
        fx,
        vec![Effect::Restore {
            id: "original".into(),
            write: false
        }]
    );
    update(&mut app, perform(&fx[0]));
    let Some(Overlay::Restore { diff, .. }) = &app.overlay else {
        panic!("{:?}", app.overlay)
    };
    assert!(diff.contains("micro_batch_size: 2"), "{diff}");
    assert!(
        std::fs::read_to_string(&exp)
            .unwrap()
            .contains("micro_batch_size: 2")
    );
    let fx = key(&mut app, KeyCode::Char('y'));
    assert_eq!(
        fx,
        vec![Effect::Restore {
            id: "original".into(),
            write: true
        }]
    );
    let fx = update(&mut app, perform(&fx[0]));
    assert_eq!(fx, vec![Effect::Load(vec![])]);
    assert_eq!(std::fs::read_to_string(&exp).unwrap(), original);
    let said = &app.status.as_ref().unwrap().1;
    assert!(said.contains("restored version original"), "{said}");
    // The file it replaced is kept in turn; with unsaved edits a restore is refused.
    assert_eq!(crate::app::backups::list(&s).unwrap().len(), 4);
    app.pending.push(edit("8"));
    update(&mut app, perform(&Effect::LoadBackups));
    assert_eq!(key(&mut app, KeyCode::Enter), vec![]);
    assert!(
        matches!(app.overlay, Some(Overlay::Error { .. })),
        "{:?}",
        app.overlay
    );
}
