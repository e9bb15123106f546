use super::*;
use std::ffi::OsStr;

const FILE: &str = "/home/u/.config/primus-tune/config.toml";

fn read(text: &str) -> Result<Defaults, DefaultsError> {
    parse(text, Path::new(FILE))
}

fn err(text: &str) -> DefaultsError {
    read(text).expect_err("an error")
}

const GOOD: &str = r#"# my defaults
profile = "primus"
gpus = 8
backend = "amdgpu-sysfs"
workspace = "/scratch/tuning"

[ui]
color = "never"
mouse = false

[keys]
quit = "x"
start_trial = ["r", "Enter"]

[slurm]
partition = "mi300x"
nodes = 2
sbatch_args = ["--exclusive"]
"#;

#[test]
fn a_good_file_gives_every_value_with_its_place() {
    let d = read(GOOD).unwrap();
    let p = d.profile.as_ref().unwrap();
    assert_eq!(p.value, "primus");
    assert_eq!((p.at.line, p.at.column), (2, 11));
    assert_eq!(p.at.to_string(), format!("{FILE}:2:11"));
    assert_eq!(d.gpus(), Some(8));
    assert_eq!(d.backend.as_ref().unwrap().value, "amdgpu-sysfs");
    assert_eq!(
        d.workspace.as_ref().unwrap().value,
        PathBuf::from("/scratch/tuning")
    );
    assert_eq!(d.color.as_ref().unwrap().value, ColorChoice::Never);
    assert_eq!(d.mouse.as_ref().map(|m| m.value), Some(false));
    assert_eq!(d.keys.len(), 2);
    assert_eq!(d.keys[0].action, "quit");
    assert_eq!((d.keys[0].at.line, d.keys[0].at.column), (12, 1));
    let keys: Vec<&str> = d.keys[1].keys.iter().map(|k| k.value.as_str()).collect();
    assert_eq!(keys, ["r", "Enter"]);
    assert_eq!(
        (d.keys[1].keys[1].at.line, d.keys[1].keys[1].at.column),
        (13, 21)
    );
    assert_eq!(d.slurm.partition.as_deref(), Some("mi300x"));
    assert_eq!(d.slurm.nodes, Some(2));
    assert_eq!(d.slurm.sbatch_args, ["--exclusive"]);
    assert_eq!(d.slurm_entries.len(), 3);
    assert_eq!(d.file.as_deref(), Some(Path::new(FILE)));
}

#[test]
fn dotted_and_inline_tables_read_as_the_headers_do() {
    let d = read("ui.color = \"always\"\nslurm = { nodes = 4 }\n").unwrap();
    assert_eq!(d.color.unwrap().value, ColorChoice::Always);
    assert_eq!(d.slurm.nodes, Some(4));
}

#[test]
fn an_unknown_key_is_an_error_at_its_place_with_did_you_mean() {
    let e = err("gpus = 8\nprofil = \"primus\"\n");
    assert_eq!(e.at, Some((2, 1)));
    assert!(e.message.contains("unknown key `profil`"), "{e}");
    assert!(e.message.contains("did you mean `profile`?"), "{e}");
    assert!(e.to_string().starts_with(&format!("{FILE}:2:1: ")), "{e}");
    let e = err("[ui]\n  colour = \"never\"\n");
    assert_eq!(e.at, Some((2, 3)));
    assert!(e.message.contains("in [ui]; did you mean `color`?"), "{e}");
    let e = err("[slurm]\nnode = 2\n");
    assert_eq!(e.at, Some((2, 1)));
    assert!(e.message.contains("did you mean `nodes`?"), "{e}");
    // Nothing near: the known keys are listed.
    let e = err("zzzzzz = 1\n");
    assert!(!e.message.contains("did you mean"), "{e}");
    assert!(e.message.contains("profile, gpus, backend"), "{e}");
}

#[test]
fn a_wrong_type_or_value_is_an_error_at_the_value() {
    let e = err("gpus = \"8\"\n");
    assert_eq!(e.at, Some((1, 8)));
    assert!(
        e.message
            .contains("`gpus` must be a whole number of at least 1, not a string"),
        "{e}"
    );
    let e = err("\ngpus = 0\n");
    assert_eq!(e.at, Some((2, 8)));
    assert!(e.message.contains("not 0"), "{e}");
    let e = err("[ui]\nmouse = \"no\"\n");
    assert_eq!(e.at, Some((2, 9)));
    assert!(e.message.contains("true or false, not a string"), "{e}");
    let e = err("backend = \"nvm\"\n");
    assert!(e.message.contains("did you mean `nvml`?"), "{e}");
    let e = err("[ui]\ncolor = \"sometimes\"\n");
    assert!(e.message.contains("(auto, always, never)"), "{e}");
    let e = err("ui = 3\n");
    assert!(
        e.message.contains("must be a table ([ui]), not an integer"),
        "{e}"
    );
    let e = err("[keys]\nquit = 1\n");
    assert_eq!(e.at, Some((2, 8)));
    let e = err("[keys]\nquit = []\n");
    assert!(e.message.contains("lists no key"), "{e}");
    let e = err("[slurm]\nnodes = \n");
    assert_eq!(e.at.map(|a| a.0), Some(2), "{e}");
    let e = err("[slurm]\nsbatch_args = [1]\n");
    assert!(e.message.contains("list of strings"), "{e}");
}

#[test]
fn a_syntax_error_names_its_line_and_column() {
    let e = err("profile = \"primus\"\ngpus = = 8\n");
    assert_eq!(e.at.map(|a| a.0), Some(2), "{e}");
    assert!(e.to_string().starts_with(&format!("{FILE}:2:")), "{e}");
}

#[test]
fn a_missing_file_sets_nothing_and_an_unreadable_one_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("config.toml");
    assert_eq!(Defaults::load_from(&p).unwrap(), Defaults::default());
    std::fs::create_dir(&p).unwrap();
    let e = Defaults::load_from(&p).unwrap_err();
    assert_eq!(e.at, None);
}

#[test]
fn the_workspace_expands_home_and_takes_relative_paths_from_the_file() {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let d = read("workspace = \"~/tuning\"\n").unwrap();
    if let Some(h) = home {
        assert_eq!(d.workspace.unwrap().value, h.join("tuning"));
    }
    let d = read("workspace = \"ws\"\n").unwrap();
    assert_eq!(
        d.workspace.unwrap().value,
        PathBuf::from("/home/u/.config/primus-tune/ws")
    );
}

#[test]
fn a_flag_wins_over_the_environment_over_the_file_over_the_built_in() {
    let d = read(GOOD).unwrap();
    let none = Defaults::default();
    // profile: flag > file > built-in
    assert_eq!(d.profile(Some("megatron")).value, "megatron");
    assert_eq!(
        d.profile(Some("megatron")).origin,
        Origin::Flag("--profile")
    );
    let p = d.profile(None);
    assert_eq!(p.value, "primus");
    assert!(matches!(p.origin, Origin::File(ref l) if l.line == 2));
    assert_eq!(none.profile(None).value, DEFAULT_PROFILE);
    assert_eq!(none.profile(None).origin, Origin::BuiltIn);
    // backend
    assert_eq!(d.backend(Some("host")).value, "host");
    assert_eq!(d.backend(None).value, "amdgpu-sysfs");
    assert_eq!(none.backend(None).value, "auto");
    // workspace: flag > PRIMUS_TUNE_WORKSPACE > file > the experiment's own
    let env = Some(OsStr::new("/env/ws"));
    let w = d.workspace(Some(Path::new("/flag/ws")), env).unwrap();
    assert_eq!(w.value, PathBuf::from("/flag/ws"));
    let w = d.workspace(None, env).unwrap();
    assert_eq!(
        (w.value, w.origin),
        (
            PathBuf::from("/env/ws"),
            Origin::Env("PRIMUS_TUNE_WORKSPACE".into())
        )
    );
    let w = d.workspace(None, Some(OsStr::new(""))).unwrap();
    assert_eq!(w.value, PathBuf::from("/scratch/tuning"));
    assert_eq!(none.workspace(None, None), None);
    // colour: NO_COLOR means never whatever the file says; else the file; else auto
    let always = read("[ui]\ncolor = \"always\"\n").unwrap();
    let c = always.color(Some(OsStr::new("1")));
    assert_eq!(
        (c.value, c.origin),
        (ColorChoice::Never, Origin::Env("NO_COLOR".into()))
    );
    assert_eq!(
        always.color(Some(OsStr::new(""))).value,
        ColorChoice::Always
    );
    assert_eq!(always.color(None).value, ColorChoice::Always);
    assert_eq!(none.color(None).value, ColorChoice::Auto);
    // mouse: --no-mouse > PRIMUS_TUNE_NO_MOUSE > file > on
    let on = read("[ui]\nmouse = true\n").unwrap();
    assert_eq!(on.mouse(true, None).origin, Origin::Flag("--no-mouse"));
    assert!(!on.mouse(false, Some(OsStr::new("1"))).value);
    assert!(on.mouse(false, None).value);
    assert!(!d.mouse(false, None).value);
    assert!(none.mouse(false, None).value);
    // gpus: --gpus > GPUS_PER_NODE × NNODES > file > detected
    let placed = |flag: Option<u64>, env: &[(&str, &str)]| {
        let env = env
            .iter()
            .fold(crate::config::env::Env::empty(), |e, (k, v)| e.with(k, v));
        let env = crate::app::launch::LaunchEnv::new(env, Vec::new(), None);
        crate::app::launch::placement::place_world(&crate::app::launch::placement::Asked {
            gpus: flag,
            job: None,
            env: &env,
            configured: d.gpus(),
            one_process: false,
            detected: &|| None,
        })
        .unwrap()
        .world
        .map(|w| w.gpus)
    };
    assert_eq!(placed(Some(2), &[("GPUS_PER_NODE", "4")]), Some(2));
    assert_eq!(placed(None, &[("GPUS_PER_NODE", "4")]), Some(4));
    assert_eq!(placed(None, &[]), Some(8));
}

#[test]
fn the_tui_profile_is_the_flag_then_the_remembered_then_the_file() {
    let d = read("profile = \"primus\"\n").unwrap();
    let all: Vec<String> = ["proxy-cpu", "proxy-torch", "primus"]
        .map(String::from)
        .to_vec();
    let state = Path::new("/s/state.toml");
    let pick = |flag, remembered| d.startup_profile(flag, remembered, &all).unwrap();
    let p = pick(Some("proxy-torch"), Some(("proxy-cpu", state)));
    assert_eq!(p.profile.value, "proxy-torch");
    let p = pick(None, Some(("proxy-cpu", state)));
    assert_eq!(
        (p.profile.value.as_str(), &p.profile.origin),
        ("proxy-cpu", &Origin::State(state.into()))
    );
    assert!(p.notices.is_empty());
    // A remembered profile that is gone: passed over, with a notice.
    let p = pick(None, Some(("gone", state)));
    assert_eq!(p.profile.value, "primus");
    assert!(p.notices[0].contains("`gone`"), "{:?}", p.notices);
    // The file's profile not there either: the built-in one.
    let few = vec!["proxy-cpu".to_string()];
    let p = d.startup_profile(None, None, &few).unwrap();
    assert_eq!(
        (p.profile.value.as_str(), &p.profile.origin),
        ("proxy-cpu", &Origin::BuiltIn)
    );
    assert!(p.notices[0].contains("`primus`"), "{:?}", p.notices);
    // An unknown --profile is a usage error with a suggestion.
    let e = d.startup_profile(Some("primsu"), None, &all).unwrap_err();
    assert!(matches!(e, AppError::Usage(_)), "{e}");
    assert!(e.to_string().contains("did you mean `primus`?"), "{e}");
}

#[test]
fn effective_lists_every_setting_with_its_origin() {
    let d = read(GOOD).unwrap();
    let e = crate::app::session::effective_defaults(&d, |k| match k {
        "NO_COLOR" => Some("1".into()),
        "GPUS_PER_NODE" => Some("4".into()),
        _ => None,
    });
    let get = |k: &str| {
        e.iter()
            .find(|x| x.key == k)
            .unwrap_or_else(|| panic!("{k}"))
    };
    assert_eq!(get("profile").value, "primus");
    assert_eq!(get("gpus").value, 4);
    assert!(matches!(get("gpus").origin, Origin::Env(ref t) if t.contains("GPUS_PER_NODE")));
    assert_eq!(get("ui.color").origin, Origin::Env("NO_COLOR".into()));
    assert_eq!(get("ui.mouse").value, false);
    assert_eq!(
        get("keys.start_trial").value,
        serde_json::json!(["r", "Enter"])
    );
    assert_eq!(get("slurm.partition").value, "mi300x");
    let none = crate::app::session::effective_defaults(&Defaults::default(), |_| None);
    let gpus = none.iter().find(|x| x.key == "gpus").unwrap();
    assert_eq!(
        (&gpus.value, &gpus.origin),
        (&serde_json::Value::Null, &Origin::BuiltIn)
    );
    let d = crate::app::session::effective_defaults(&read("gpus = 3\n").unwrap(), |_| None);
    let gpus = d.iter().find(|x| x.key == "gpus").unwrap();
    assert!(matches!(gpus.origin, Origin::File(ref l) if l.line == 1));
}
