//! The TUI with the defaults file and the state file: the profile remembered for the experiment
//! comes back at start (a vanished one is passed over with a notice), choosing another one
//! remembers it, and `[keys]` rebinds the dispatch, the footer and the `?` help alike.

use super::app::{App, Effect, Msg, update};
use super::keymap::{self, Keymap};
use super::{TuiOptions, start_app};
use crate::app::defaults::{ColorChoice, Defaults, parse};
use crate::app::{Session, state};
use crate::run::profile::{self, Profile};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::{Path, PathBuf};

const EXAMPLE: &str = "presets/examples/experiments/moe_16B-BF16-pretrain.yaml";

fn defaults(text: &str) -> Defaults {
    parse(text, Path::new("/c/config.toml")).unwrap()
}

/// The TUI's options for the bundled example with these defaults and this state file.
fn options(d: Defaults, state_file: Option<PathBuf>, flag: Option<&str>) -> TuiOptions {
    let mut session = Session::new(
        EXAMPLE.into(),
        Default::default(),
        crate::store::Workspace::at(
            "/nonexistent/primus-tune-test-workspace".into(),
            crate::store::WorkspaceOrigin::Chosen,
        ),
    );
    let keymap = Keymap::with_overrides(&d.keys).unwrap();
    session.defaults = std::sync::Arc::new(d);
    TuiOptions {
        session,
        telemetry_backend: "host".into(),
        roots: Default::default(),
        tour: false,
        mouse: true,
        color: ColorChoice::Never,
        keymap,
        profile: flag.map(str::to_string),
        state_file,
    }
}

/// The built-in profiles (the user's folder left out, so the test sees the same everywhere).
fn builtin() -> Vec<Profile> {
    ["proxy-cpu", "proxy-torch", "primus", "megatron"]
        .iter()
        .map(|n| profile::find(n, None).unwrap())
        .collect()
}

fn press(app: &mut App, code: KeyCode) -> Vec<Effect> {
    update(app, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

#[test]
fn the_profile_remembered_for_the_experiment_comes_back() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("state.toml");
    state::remember_profile(&file, Path::new(EXAMPLE), "proxy-torch").unwrap();
    // The defaults file says primus; the remembered choice wins over it ...
    let opts = options(defaults("profile = \"primus\"\n"), Some(file.clone()), None);
    let mut app = start_app(&opts, &builtin()).unwrap();
    assert_eq!(app.profile_name(), Some("proxy-torch"));
    assert_eq!(app.status, None);
    // ... and --profile over both.
    let flagged = options(Defaults::default(), Some(file.clone()), Some("megatron"));
    assert_eq!(
        start_app(&flagged, &builtin()).unwrap().profile_name(),
        Some("megatron")
    );
    // Choosing another one on the Run screen remembers it (the next start picks it) and reads
    // the config again with its `env:`.
    press(&mut app, KeyCode::Char('3'));
    let fx = press(&mut app, KeyCode::Right);
    let chosen = app.profile_name().unwrap().to_string();
    assert_ne!(chosen, "proxy-torch");
    assert_eq!(
        fx,
        [
            Effect::RememberProfile(chosen.clone()),
            Effect::Load(Vec::new())
        ]
    );
    state::remember_profile(&file, Path::new(EXAMPLE), &chosen).unwrap();
    let again = start_app(&opts, &builtin()).unwrap();
    assert_eq!(again.profile_name(), Some(chosen.as_str()));
}

#[test]
fn a_remembered_profile_that_is_gone_is_passed_over_with_a_notice() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("state.toml");
    state::remember_profile(&file, Path::new(EXAMPLE), "my-old-profile").unwrap();
    let opts = options(defaults("profile = \"primus\"\n"), Some(file), None);
    let app = start_app(&opts, &builtin()).unwrap();
    assert_eq!(app.profile_name(), Some("primus"));
    let (_, said) = app.status.clone().expect("a notice");
    assert!(said.contains("`my-old-profile`"), "{said}");
    assert!(said.contains("config.toml:1:11"), "{said}");
    // Without a state file: the defaults file's profile; an unknown --profile is an error.
    let opts = options(defaults("profile = \"primus\"\n"), None, None);
    assert_eq!(
        start_app(&opts, &builtin()).unwrap().profile_name(),
        Some("primus")
    );
    let opts = options(Defaults::default(), None, Some("nope"));
    assert!(start_app(&opts, &builtin()).is_err());
}

#[test]
fn a_key_override_rebinds_dispatch_footer_and_help() {
    let opts = options(
        defaults("[keys]\nquit = \"Q\"\nstart_trial = [\"o\", \"F2\"]\n"),
        None,
        None,
    );
    let mut app = start_app(&opts, &builtin()).unwrap();
    // `q` no longer quits; `Q` does.
    assert!(press(&mut app, KeyCode::Char('q')).is_empty());
    assert_eq!(press(&mut app, KeyCode::Char('Q')), [Effect::Quit]);
    let footer = keymap::footer(&app, 200);
    assert!(footer.contains("Q quit"), "{footer}");
    assert!(!footer.contains("q quit"), "{footer}");
    let help = super::help::help(&app.keymap, app.tab);
    let everywhere = &help.iter().find(|s| s.0 == "everywhere").unwrap().1;
    assert!(
        everywhere
            .iter()
            .any(|(k, w)| k.starts_with('Q') && w.starts_with("quit")),
        "{everywhere:?}"
    );
    let run = &help.iter().find(|s| s.0 == "Run").unwrap().1;
    assert!(
        run.contains(&("o F2".to_string(), "start a trial")),
        "{run:?}"
    );
    // On the Run screen `r` no longer starts a trial, `o` does (a CPU profile: no question).
    let mut app = App::new(vec!["proxy-cpu".into()], "proxy-cpu", false);
    app.keymap = opts.keymap.clone();
    press(&mut app, KeyCode::Char('3'));
    assert!(press(&mut app, KeyCode::Char('r')).is_empty());
    let fx = press(&mut app, KeyCode::Char('o'));
    assert!(
        matches!(fx.as_slice(), [Effect::StartTrial { .. }]),
        "{fx:?}"
    );
    // The tour names the keys in force.
    let mut app = start_app(&opts, &builtin()).unwrap();
    press(&mut app, KeyCode::Char('t'));
    let shown = super::render_tests::screen(&mut app, 80, 24);
    assert!(shown.contains("Q quits"), "{shown}");
    assert!(
        shown.contains("Q quit") && !shown.contains("q quit"),
        "{shown}"
    );
    // The quit question takes the new key as its answer too.
    let mut app = App::new(vec!["proxy-cpu".into()], "proxy-cpu", false);
    app.keymap = opts.keymap.clone();
    app.overlay = Some(super::app::Overlay::ConfirmQuit);
    assert_eq!(press(&mut app, KeyCode::Char('Q')), [Effect::Quit]);
}

#[test]
fn the_documented_example_is_a_valid_defaults_file_and_names_every_action() {
    // docs/defaults.md documents the defaults file: its first ```toml block is the example.
    let doc = include_str!("../../docs/defaults.md");
    let start = doc.find("```toml\n").expect("a toml example") + "```toml\n".len();
    let text = &doc[start..start + doc[start..].find("```").unwrap()];
    let d = defaults(text);
    assert_eq!(d.profile.as_ref().map(|p| p.value.as_str()), Some("primus"));
    assert!(!d.keys.is_empty() && !d.slurm.is_empty());
    Keymap::with_overrides(&d.keys).unwrap();
    for (name, _) in super::rebind::actions() {
        assert!(
            doc.contains(&format!("`{name}`")),
            "docs/defaults.md names `{name}`"
        );
    }
}

/// A key rebound to a longer name stays in the footer at 80 columns (the hints close up), and
/// the help lists it.
#[test]
fn a_rebound_key_keeps_its_place_in_the_footer_and_the_help() {
    let opts = options(defaults("[keys]\nopen_editor = \"Ctrl-e\"\n"), None, None);
    let mut app = start_app(&opts, &builtin()).unwrap();
    press(&mut app, KeyCode::Char('2'));
    let shown = super::render_tests::screen(&mut app, 80, 24);
    let footer = shown.lines().last().unwrap();
    assert!(footer.contains("^E $EDITOR"), "{footer}");
    assert!(
        footer.contains("s save") && footer.ends_with("q quit"),
        "{footer}"
    );
    let help = super::help::help(&app.keymap, app.tab);
    assert!(
        help[0]
            .1
            .contains(&("Ctrl-E".to_string(), "the file in $EDITOR")),
        "{help:?}"
    );
}
