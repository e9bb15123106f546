//! Every message whole at 80×24 (issue 41): an error in a box with all of its text (Enter or
//! Esc closes it, the box it covered comes back) and in the message log (`L`) the loop writes
//! to `tui.log`; a long note names the log on the status line; the save box sums the edits up
//! as `key: old → new` and scrolls to its last line with the question always in view.
#![allow(clippy::unwrap_used)]

use super::app::{App, Level, Msg, Overlay, update};
use super::render_tests::screen;
use crate::app::AppError;
use crate::app::views::config as load;
use crate::config::diag::{Diagnostic, Severity};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const EXAMPLE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";

fn session() -> crate::app::Session {
    crate::app::Session::new(
        EXAMPLE.into(),
        crate::config::LoadOptions {
            env: Default::default(),
            ..Default::default()
        },
        crate::store::Workspace::at(
            "/nonexistent/primus-tune-test-workspace".into(),
            crate::store::WorkspaceOrigin::Chosen,
        ),
    )
}

fn loaded_app() -> App {
    let mut app = App::new(vec!["proxy-cpu".into()], "proxy-cpu", false);
    let (view, plan) = load::build(&session(), &[]).unwrap();
    update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
    app
}

fn key(app: &mut App, code: KeyCode) {
    update(app, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// The lint gate's refusal of a trial, as a long experiment path makes it.
fn refused() -> AppError {
    AppError::LintGate {
        path: "/home/someone/work/Primus/examples/megatron/configs/MI300X/grok1-BF16-pretrain.yaml"
            .into(),
        errors: vec![Diagnostic::new(
            Severity::Error,
            "batch-divisible",
            "`global_batch_size: 100` is not divisible by micro_batch_size × data-parallel size \
             (5 × 16 = 80)",
        )],
    }
}

/// The text inside the box titled `title` on `screen`, its rows joined by spaces.
fn box_text(screen: &str, title: &str) -> String {
    let lines: Vec<Vec<char>> = screen.lines().map(|l| l.chars().collect()).collect();
    let head = format!("┌ {title} ");
    let (top, from) = lines
        .iter()
        .enumerate()
        .find_map(|(y, l)| {
            let s: String = l.iter().collect();
            s.find(&head).map(|b| (y, s[..b].chars().count()))
        })
        .unwrap_or_else(|| panic!("no box {title}:\n{screen}"));
    let to = (from + 1..lines[top].len())
        .find(|&x| lines[top][x] == '┐')
        .unwrap();
    let mut out = Vec::new();
    for l in &lines[top + 1..] {
        if l[from] == '└' {
            break;
        }
        out.push(
            l[from + 1..to]
                .iter()
                .collect::<String>()
                .trim()
                .to_string(),
        );
    }
    out.join(" ")
}

/// `text` is in the box titled `title` whole: every character, in order (wrapped anywhere).
fn shown_whole(screen: &str, title: &str, text: &str) -> bool {
    let bare = |t: &str| t.split_whitespace().collect::<String>();
    bare(&box_text(screen, title)).contains(&bare(text))
}

#[test]
fn an_error_is_shown_whole_in_a_box_and_kept_for_the_log() {
    let mut app = loaded_app();
    app.tab = super::screens::Tab::Run;
    update(&mut app, Msg::TrialDone(Err(refused())));
    let said = format!("the trial could not run: {}", refused());
    assert!(said.contains("has 1 lint error that"), "{said}");
    assert!(
        matches!(&app.overlay, Some(Overlay::Error { errors, .. }) if errors == std::slice::from_ref(&said))
    );
    let s = screen(&mut app, 80, 24);
    assert!(shown_whole(&s, "Error", &said), "{s}");
    assert!(s.contains("Enter or Esc closes · L all messages"), "{s}");
    // The loop writes it to tui.log.
    assert_eq!(app.unlogged, [(Level::Error, said.clone())]);
    // Esc closes it; the message log has it whole.
    key(&mut app, KeyCode::Esc);
    assert_eq!(app.overlay, None);
    key(&mut app, KeyCode::Char('L'));
    assert!(matches!(app.overlay, Some(Overlay::Messages { .. })));
    let s = screen(&mut app, 80, 24);
    assert!(
        shown_whole(&s, "Messages", &format!("error: {said}")),
        "{s}"
    );
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.overlay, None);
}

#[test]
fn an_error_over_a_box_gives_it_back_and_errors_gather() {
    let mut app = loaded_app();
    app.overlay = Some(Overlay::Acknowledge {
        rule: "overlap-param-gather",
        text: "turn the overlap on".into(),
        reason: String::new(),
    });
    // No reason typed: said in a box over the question.
    key(&mut app, KeyCode::Enter);
    let Some(Overlay::Error { errors, under, .. }) = &app.overlay else {
        panic!("{:?}", app.overlay)
    };
    assert!(errors[0].contains("needs a reason"));
    assert!(matches!(
        under.as_deref(),
        Some(Overlay::Acknowledge { .. })
    ));
    // A second error joins the box, both whole.
    update(&mut app, Msg::Saved(Err(refused())));
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("2 errors"), "{s}");
    assert!(shown_whole(&s, "2 errors", &refused().to_string()), "{s}");
    key(&mut app, KeyCode::Enter);
    assert!(matches!(app.overlay, Some(Overlay::Acknowledge { .. })));
}

#[test]
fn notes_go_to_the_log_a_trials_progress_does_not() {
    let mut app = loaded_app();
    update(
        &mut app,
        Msg::Note("report of s1: 5 files in reports/s1".into()),
    );
    super::screens::run::say_trial(&mut app, "trial 3 running · it 12/50".into());
    assert_eq!(
        app.messages,
        [(
            Level::Info,
            "report of s1: 5 files in reports/s1".to_string()
        )]
    );
    // A note too long for the status line says where it is whole.
    let long = format!(
        "sweep s1 stopped; `primus-tune sweep --resume s1 --config {}` continues it",
        "/a".repeat(30)
    );
    update(&mut app, Msg::Note(long.clone()));
    let s = screen(&mut app, 80, 24);
    let status = s.lines().last().unwrap();
    assert!(status.ends_with("… (L shows it whole)"), "{status}");
    assert_eq!(app.messages.last(), Some(&(Level::Info, long)));
}

/// Edits to six flags of the example, planned by the real engine: a diff taller than 80×24.
fn app_saving() -> App {
    let mut app = loaded_app();
    let edits = [
        ("log_avg_skip_iterations", "3"),
        ("train_iters", "77"),
        ("micro_batch_size", "2"),
        ("lr_warmup_iters", "5"),
        ("save_interval", "10000"),
        ("use_turbo_attention", "false"),
        ("turbo_deepep_num_cu", "32"),
    ];
    app.pending = edits
        .iter()
        .map(|(k, v)| load::PendingEdit {
            key: k.to_string(),
            text: v.to_string(),
        })
        .collect();
    let (view, plan) = load::build(&session(), &app.pending).unwrap();
    update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
    app.tab = super::screens::Tab::Flags;
    key(&mut app, KeyCode::Char('s'));
    assert!(matches!(
        app.overlay,
        Some(Overlay::Diff { save: true, .. })
    ));
    app
}

#[test]
fn the_save_box_sums_up_the_edits_and_scrolls_to_its_last_line() {
    let mut app = app_saving();
    let plan = app.plan.clone().unwrap();
    assert!(!plan.refused, "{:?}", plan.diagnostics);
    let last = plan.diff.lines().last().unwrap().trim_end().to_string();
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("micro_batch_size: 4 → 2"), "{s}");
    assert!(s.contains("train_iters: 50 → 77"), "{s}");
    assert!(s.contains("y writes the file"), "{s}");
    let save = "Save these changes?";
    assert!(
        !shown_whole(&s, save, &last),
        "the diff is taller than the box:\n{s}"
    );
    // Down scrolls a line, End to the last; the question stays in view.
    key(&mut app, KeyCode::Down);
    assert!(matches!(app.overlay, Some(Overlay::Diff { scroll: 1, .. })));
    key(&mut app, KeyCode::End);
    let s = screen(&mut app, 80, 24);
    assert!(shown_whole(&s, save, &last), "{s}");
    assert!(s.contains("y writes the file"), "{s}");
    assert!(!s.contains("micro_batch_size: 4 → 2"), "{s}");
    // Up from the end moves back from the last row there is, not from past it.
    key(&mut app, KeyCode::Up);
    let s = screen(&mut app, 80, 24);
    assert!(!shown_whole(&s, save, &last), "{s}");
    // y still answers.
    key(&mut app, KeyCode::End);
    let fx = update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE)),
    );
    assert_eq!(fx, [super::app::Effect::Save(app.pending.clone())]);
}

/// An edit's plan comes back from a worker: until it has, the save box shows no older diff
/// and `y` writes nothing (a save asks about exactly what it writes).
#[test]
fn the_save_box_waits_for_the_plan_of_the_latest_edits() {
    let mut app = app_saving();
    key(&mut app, KeyCode::Char('n'));
    assert!(app.overlay.is_none());
    // u undoes the last edit: a new plan is asked for.
    let fx = update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::NONE)),
    );
    assert!(
        matches!(fx.as_slice(), [super::app::Effect::Load(_)]),
        "{fx:?}"
    );
    key(&mut app, KeyCode::Char('s'));
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("checking the edits…"), "{s}");
    assert!(
        !s.contains("turbo_deepep_num_cu"),
        "the old plan is not shown:\n{s}"
    );
    let fx = update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE)),
    );
    assert!(fx.is_empty(), "{fx:?}");
    assert!(matches!(
        app.overlay,
        Some(Overlay::Diff { save: true, .. })
    ));
    // The plan of the six edits left lands: the box asks about it.
    let (view, plan) = load::build(&session(), &app.pending).unwrap();
    update(&mut app, Msg::Loaded(Ok((Box::new(view), plan))));
    let s = screen(&mut app, 80, 24);
    assert!(s.contains("use_turbo_attention: true → false"), "{s}");
    assert!(!s.contains("turbo_deepep_num_cu"), "{s}");
    let fx = update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE)),
    );
    assert_eq!(fx, [super::app::Effect::Save(app.pending.clone())]);
}

#[test]
fn the_lint_counts_agree_with_their_noun() {
    let mut app = loaded_app();
    let one = |n: usize| {
        (0..n)
            .map(|_| Diagnostic::new(Severity::Error, "x", "broken"))
            .collect::<Vec<_>>()
    };
    for (n, said) in [(1, "1 error"), (2, "2 errors")] {
        app.config.as_mut().unwrap().diagnostics = one(n);
        let s = screen(&mut app, 80, 24);
        let file_line = s.lines().nth(1).unwrap();
        assert!(file_line.contains(said), "{file_line}");
        assert!(
            !file_line.contains("(s)") && !file_line.contains("1 errors"),
            "{file_line}"
        );
    }
}

#[test]
fn the_wheel_scrolls_a_box() {
    use crossterm::event::{MouseEvent, MouseEventKind};
    let mut app = app_saving();
    let wheel = |kind| {
        Msg::Mouse(MouseEvent {
            kind,
            column: 10,
            row: 10,
            modifiers: KeyModifiers::NONE,
        })
    };
    update(&mut app, wheel(MouseEventKind::ScrollDown));
    update(&mut app, wheel(MouseEventKind::ScrollDown));
    assert!(matches!(app.overlay, Some(Overlay::Diff { scroll: 2, .. })));
    update(&mut app, wheel(MouseEventKind::ScrollUp));
    assert!(matches!(app.overlay, Some(Overlay::Diff { scroll: 1, .. })));
}
