//! One trial as a use case: a [`TrialRequest`] (what the user asked for) becomes a
//! [`PreparedTrial`] through one `prepare` — one set of defaults, the trial's world (its GPU
//! count), the lint gate at that world, the tuned-GEMM environment — and runs with its events
//! sent to the frontend.

use super::events::{AppEvent, Events};
use super::{AppError, Session};
use crate::config::Experiment;
use crate::config::catalog::Catalog;
use crate::config::diag::Severity;
use crate::config::env::Env;
use crate::config::overrides::Override;
use crate::config::resolve::LoadOptions;
use crate::domain::trial::TrialResult;
use crate::megatron::{World, WorldSource};
use crate::run::profile::{self, Profile};
use crate::run::trial::{self, TrialEvent, TrialOptions};
use crate::store::Store;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Cancels a running use case when it turns true (Ctrl-C, `x`, the frontend going away).
pub type Cancel = watch::Receiver<bool>;

/// What the user asks of one trial. `Default` holds the one set of defaults both frontends use.
#[derive(Debug, Clone)]
pub struct TrialRequest {
    /// The launch profile (default: the defaults file's `profile`, else
    /// [`profile::DEFAULT_PROFILE`]).
    pub profile: Option<String>,
    /// This trial's overrides on top of the experiment, Primus-typed.
    pub overrides: Vec<Override>,
    /// Extra environment of this trial (besides the session's `--env`).
    pub env: Vec<(String, String)>,
    /// The iteration budget (`train_iters`).
    pub max_iters: Option<u64>,
    pub max_seconds: Option<f64>,
    pub ci_target: f64,
    pub hang_seconds: f64,
    pub first_iteration_seconds: f64,
    /// Between SIGINT, SIGTERM and SIGKILL when stopping.
    pub grace: Duration,
    /// After a failure line with no iteration since: how long the workload may take to exit
    /// by itself before it is stopped (at least two median steps once iterations flow).
    pub failure_grace: Duration,
    /// GPUs (world size) of the trial; None: the session's `--gpus`, else [`world`]'s defaults.
    pub gpus: Option<u64>,
    /// Launch even when lint finds errors.
    pub force: bool,
    /// Train with the tuned GEMMs of HipBLASLt stage 2 (stage 3's environment).
    pub gemm_tuned: bool,
    /// Run it as a Slurm job (see [`super::slurm`]).
    pub slurm: super::slurm::SlurmRequest,
}

/// Iterations of a trial when the request names none.
pub const DEFAULT_ITERS: u64 = 50;

impl Default for TrialRequest {
    fn default() -> Self {
        TrialRequest {
            profile: None,
            overrides: Vec::new(),
            env: Vec::new(),
            max_iters: None,
            max_seconds: None,
            ci_target: 0.01,
            hang_seconds: 120.0,
            first_iteration_seconds: 600.0,
            grace: Duration::from_secs(10),
            failure_grace: Duration::from_secs(5),
            gpus: None,
            force: false,
            gemm_tuned: false,
            slurm: super::slurm::SlurmRequest::default(),
        }
    }
}

/// A trial ready to launch.
#[derive(Debug, Clone)]
pub struct PreparedTrial {
    /// The experiment as on disk (the trial's overrides are in `options`).
    pub exp: Experiment,
    pub options: TrialOptions,
}

/// The profile a request names (or the default), from the built-in and the user's.
/// Unsaved edits as a trial's overrides, the way `run --set KEY=VALUE` takes them (an edit of
/// an environment variable goes into the trial's environment instead): the file is not changed.
pub fn with_edits(
    mut req: TrialRequest,
    edits: &[super::views::config::PendingEdit],
) -> Result<TrialRequest, AppError> {
    let catalog = Catalog::builtin();
    for e in edits {
        if catalog.env_vars().any(|f| f.name == e.key) {
            req.env.retain(|(k, _)| k != &e.key);
            req.env.push((e.key.clone(), e.text.clone()));
        } else {
            let o = super::session::overrides(&[format!("{}={}", e.key, e.text)])?;
            req.overrides.retain(|x| x.key != e.key);
            req.overrides.extend(o);
        }
    }
    Ok(req)
}

pub fn find_profile(name: Option<&str>) -> Result<Profile, AppError> {
    Ok(profile::find(
        name.unwrap_or(profile::DEFAULT_PROFILE),
        profile::user_dir().as_deref(),
    )?)
}

/// Every launch profile (built-in and the user's); the default alone when they cannot be read.
pub fn profiles() -> Vec<Profile> {
    profile::all(profile::user_dir().as_deref()).unwrap_or_else(|_| {
        profile::find(profile::DEFAULT_PROFILE, None)
            .map(|p| vec![p])
            .unwrap_or_default()
    })
}

/// The world a trial of `profile` runs on: the request's GPUs, else the session's `--gpus`,
/// else the launcher's variables (`GPUS_PER_NODE` × `NNODES` as the launch sets them: the
/// profile's `env:` over the inherited ones, the trial's `env` (`--env` ...) over both), else
/// the defaults file's `gpus`, else the one process of a one-process profile (the proxies),
/// else the GPUs detected on this node; None when nothing says (the launch then starts
/// [`trial::FALLBACK_GPUS`] ranks and lint checks no world rule). A profile variable written
/// with a placeholder (`GPUS_PER_NODE: "{gpus_per_node}"`) follows the world, so it does not
/// set it.
pub fn world(
    session: &Session,
    gpus: Option<u64>,
    profile: &Profile,
    env: &[(String, String)],
) -> Option<World> {
    let of = |pick: fn(&WorldSource) -> bool| session.load.world.filter(|w| pick(&w.source));
    let requested = gpus.or_else(|| of(|s| *s == WorldSource::Flag).map(|w| w.gpus));
    let detected = of(|s| matches!(s, WorldSource::Detected { .. }));
    let configured = session.defaults.gpus();
    let launch_env = profile.config_env(
        &session.load.env,
        env,
        &profile::KnownPlaceholders::default(),
    );
    let w = trial::trial_world(
        requested,
        &launch_env,
        configured,
        &profile.capabilities,
        detected,
    )?;
    Some(if sets_world(profile, &launch_env, env) {
        w.by_profile()
    } else {
        w
    })
}

/// Refuses a GPU launch whose launcher variables of the world (`GPUS_PER_NODE`, `NNODES`), as
/// the launch would set them (`--env` over the profile's `env:` over the inherited
/// environment), are not a count: the launcher would fail on one, and the trial's world (its
/// lint, its GPU-seconds) would be taken from elsewhere without a word. A one-process profile
/// (the proxies) reads neither.
pub fn refuse_world_vars(
    session: &Session,
    profile: &Profile,
    env: &[(String, String)],
) -> Result<(), AppError> {
    if profile.capabilities.launch == crate::run::capabilities::LaunchKind::OneProcess {
        return Ok(());
    }
    let launch_env = profile.config_env(
        &session.load.env,
        env,
        &profile::KnownPlaceholders::default(),
    );
    for key in ["GPUS_PER_NODE", "NNODES"] {
        let Some(value) = launch_env.get(key) else {
            continue;
        };
        if crate::megatron::parse_count(value).is_some() {
            continue;
        }
        let from = if env.iter().any(|(k, _)| k == key) {
            "--env".to_string()
        } else if profile.env.get(key).is_some_and(|v| v == value) {
            format!("the env: of profile {}", profile.name)
        } else {
            "the environment primus-tune runs in".to_string()
        };
        let what = if key == "NNODES" {
            "nodes"
        } else {
            "GPUs per node"
        };
        return Err(AppError::Failed(format!(
            "{key}={value:?} ({from}) is not a count of {what} (a whole number, 1 or more): the \
             launcher would fail on it, and the trial's world could not be known; set it to a \
             count, or unset it"
        )));
    }
    Ok(())
}

/// Whether `profile`'s `env:` set a launcher variable of the world in `launch_env` (one that
/// reached it: not a placeholder left out, not one `over` (`--env` ...) sets again).
fn sets_world(profile: &Profile, launch_env: &Env, over: &[(String, String)]) -> bool {
    ["GPUS_PER_NODE", "NNODES"].iter().any(|k| {
        profile.env.contains_key(*k)
            && launch_env.get(k).is_some()
            && !over.iter().any(|(o, _)| o == k)
    })
}

/// The trial's config: the experiment with the request's overrides.
fn with_overrides(
    load: &LoadOptions,
    exp: &Experiment,
    overrides: &[Override],
) -> Result<Experiment, AppError> {
    let mut with = load.clone();
    with.overrides = overrides.to_vec();
    Ok(Experiment::load(&exp.path, &with)?)
}

/// The session's load options with the environment the trial's workload resolves its config
/// with: the profile's `env` and the trial's own over the session's
/// ([`crate::run::trial::config_env`]). A trial's lint, its `resolved.json` and a sweep's view
/// of each candidate see what the job will see.
pub fn job_load(session: &Session, exp: &Experiment, options: &TrialOptions) -> LoadOptions {
    let mut load = session.load.clone();
    load.env = crate::run::trial::config_env(&session.load.env, &exp.primus_root, options);
    load
}

/// `load` with the environment `profile`'s launch sets before a trial exists: its `env:` over
/// `load`'s, `session_env` (the `--env` pairs) over that, with the Primus root and the world
/// size `load` has ([`Profile::config_env`]); and the world its `GPUS_PER_NODE` × `NNODES`
/// give, unless `--gpus` says. What `lint --profile`, `recommend --profile`, `show --profile`,
/// `checklist --profile` and the TUI's views resolve with.
pub fn with_profile_env(
    load: &LoadOptions,
    session_env: &[(String, String)],
    profile: &Profile,
) -> LoadOptions {
    let known = profile::KnownPlaceholders {
        primus_root: load.primus_root.clone(),
        gpus: load.world.map(|w| w.gpus),
        ..Default::default()
    };
    let mut out = load.clone();
    out.env = profile.config_env(&load.env, session_env, &known);
    // The launcher's variables the profile sets are the world its trials run on, unless
    // `--gpus` names it.
    if out.world.is_none_or(|w| w.source != WorldSource::Flag) {
        let by_profile = sets_world(profile, &out.env, session_env);
        out.world = World::from_env(|k| out.env.get(k))
            .map(|w| if by_profile { w.by_profile() } else { w })
            .or(out.world);
    }
    out
}

/// Lint the trial's config (`view`, see `with_overrides`) at the trial's world and refuse it
/// when it has errors that would stop Primus at start-up, unless forced.
pub fn lint_gate(
    env: &Env,
    view: &Experiment,
    world: Option<&World>,
    force: bool,
) -> Result<(), AppError> {
    let errors: Vec<_> = crate::config::lint::lint(view, env, world, Catalog::builtin())
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    if errors.is_empty() || force {
        return Ok(());
    }
    Err(AppError::LintGate {
        path: crate::util::paths::display_path(&view.path),
        errors,
    })
}

/// The environment that makes trials train with the tuned GEMMs.
pub fn tuned_env(session: &Session, exp: &Experiment) -> Result<Vec<(String, String)>, AppError> {
    Ok(crate::gemm::tuned_env_for(
        &exp.primus_root,
        &exp.path,
        &session.load.env,
    )?)
}

/// The engine's options for a request: one set of defaults for every frontend.
pub fn options(
    session: &Session,
    exp: &Experiment,
    req: &TrialRequest,
) -> Result<TrialOptions, AppError> {
    let profile = find_profile(Some(
        &session.defaults.profile(req.profile.as_deref()).value,
    ))?;
    let mut env = session.env.clone();
    env.extend(req.env.iter().cloned());
    if req.gemm_tuned {
        env.extend(tuned_env(session, exp)?);
    }
    refuse_settings(
        &profile,
        req.overrides.iter().map(|o| o.key.as_str()),
        session,
    )?;
    refuse_world_vars(session, &profile, &env)?;
    let slurm = super::slurm::launch(&req.slurm, &profile)?;
    // On Slurm the world is the job's: nodes × GPUs per node (one process per node for a
    // one-process profile), unless --gpus names it.
    let job_world = slurm.as_ref().and_then(|s| {
        let per_node = match s.spec.gpus_per_node {
            Some(g) => u64::from(g),
            None if profile.capabilities.launch
                == crate::run::capabilities::LaunchKind::OneProcess =>
            {
                1
            }
            None => return None,
        };
        Some(u64::from(s.spec.nodes.max(1)) * per_node)
    });
    let w = world(session, req.gpus.or(job_world), &profile, &env);
    let gpus = trial::launch_gpus(w.as_ref());
    let world_note = w.is_none().then(|| super::launch_env::unknown_world(gpus));
    Ok(TrialOptions {
        world_note,
        trains: profile.capabilities.trains,
        slurm,
        profile,
        overrides: req.overrides.clone(),
        env,
        max_iters: req.max_iters.unwrap_or(DEFAULT_ITERS).max(1),
        max_seconds: req.max_seconds,
        ci_target: req.ci_target,
        race: None,
        hang_seconds: req.hang_seconds,
        first_iteration_seconds: req.first_iteration_seconds,
        grace: req.grace,
        failure_grace: req.failure_grace,
        gpus,
        study_id: None,
        trials_dir: session.workspace.trials_dir.clone(),
        self_exe: session.self_exe.clone(),
        telemetry: session.telemetry.clone(),
    })
}

/// Refuse settings the profile cannot pass to its workload (a Primus-only setting for upstream
/// Megatron-LM), before anything launches.
pub fn refuse_settings<'a>(
    profile: &crate::run::profile::Profile,
    keys: impl Iterator<Item = &'a str>,
    session: &Session,
) -> Result<(), AppError> {
    let refused = profile
        .refused_settings(keys, &session.load.env)
        .map_err(AppError::Usage)?;
    if refused.is_empty() {
        return Ok(());
    }
    Err(AppError::Failed(format!(
        "profile `{}` runs upstream Megatron-LM, which has no argument for {}: a Primus-only \
         setting cannot be passed to it (run it with the primus profile, or leave it out)",
        profile.name,
        refused
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// Load, lint at the trial's world and set up one trial.
pub fn prepare(session: &Session, req: &TrialRequest) -> Result<PreparedTrial, AppError> {
    let exp = session.load_plain()?;
    let options = options(session, &exp, req)?;
    let w = world(session, req.gpus, &options.profile, &options.env);
    let load = job_load(session, &exp, &options);
    let view = with_overrides(&load, &exp, &req.overrides)?;
    lint_gate(&load.env, &view, w.as_ref(), req.force)?;
    if options.profile.capabilities.scaled_shape {
        proxy_fits(&view, options.gpus)?;
    }
    Ok(PreparedTrial { exp, options })
}

/// The built-in CPU proxy sizes itself from the config: a shape that needs more host memory
/// than is available is refused before launch, with the sizes to change (it would otherwise
/// abort on its allocation).
fn proxy_fits(view: &Experiment, gpus: u64) -> Result<(), AppError> {
    let resolved = crate::run::profile::resolved_json(&view.main_module().values(), gpus);
    let shape = crate::run::proxy::ProxyShape::from_resolved(&resolved);
    match crate::run::proxy::too_big(&shape, crate::run::proxy::host_available_bytes()) {
        Some(why) => Err(AppError::Failed(format!(
            "{}: {why}",
            crate::util::paths::display_path(&view.path)
        ))),
        None => Ok(()),
    }
}

/// Runs `work` with the trial events it produces forwarded to `events` as they come.
pub(crate) async fn forwarding<T, F, Fut>(events: &Events, work: F) -> T
where
    F: FnOnce(mpsc::Sender<TrialEvent>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let (tx, mut rx) = mpsc::channel::<TrialEvent>(256);
    let out = events.clone();
    let forward = async move {
        while let Some(ev) = rx.recv().await {
            // A frontend that went away stops listening; the trial goes on to its end.
            let _ = out.send(AppEvent::Trial(ev)).await;
        }
    };
    let (r, ()) = tokio::join!(work(tx), forward);
    r
}

/// Runs a prepared trial to its end; its events, and its end, go to `events`.
pub async fn run(
    session: &Session,
    p: &PreparedTrial,
    store: &Store,
    events: &Events,
    cancel: Cancel,
) -> Result<TrialResult, AppError> {
    let r = forwarding(events, |tx| {
        trial::run_trial(&p.exp, &session.load, store, &p.options, tx, cancel)
    })
    .await?;
    let _ = events.send(AppEvent::trial_ended(r.clone())).await;
    Ok(r)
}

/// [`run`] on a runtime of the calling thread (which must not be inside one), with the store
/// of the session's workspace.
pub fn run_blocking(
    session: &Session,
    p: &PreparedTrial,
    events: &Events,
    cancel: Cancel,
) -> Result<TrialResult, AppError> {
    let store = session.store()?;
    runtime()?.block_on(run(session, p, &store, events, cancel))
}

/// A runtime for one use case on the calling thread.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, AppError> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::SessionOptions;
    use crate::run::trial::TelemetrySetup;
    use crate::telemetry::select::Roots;
    use std::path::Path;

    /// A session on a private copy of the bundled example; its telemetry reads the recorded
    /// node `node` (`sys/`, `proc/`).
    fn session(node: &Path, gpus: Option<u64>) -> (tempfile::TempDir, Session) {
        let dir = tempfile::tempdir().unwrap();
        crate::util::bundled::extract(dir.path()).unwrap();
        let s = Session::open(SessionOptions {
            config: Some(dir.path().join(crate::util::bundled::DEFAULT_EXPERIMENT)),
            workspace: Some(dir.path().join("ws")),
            gpus,
            telemetry: Some(TelemetrySetup {
                backend: "amdgpu-sysfs".into(),
                roots: Roots {
                    sysfs: node.join("sys"),
                    procfs: node.join("proc"),
                },
                ..TelemetrySetup::default()
            }),
            ..SessionOptions::default()
        })
        .unwrap();
        (dir, s)
    }

    /// Whether one of `vars` is set in this process (the session reads them, so a test about
    /// the others cannot run): says so on stderr as a skip.
    fn launcher_set(vars: &[&str]) -> bool {
        let set: Vec<&&str> = vars
            .iter()
            .filter(|v| std::env::var_os(v).is_some())
            .collect();
        if !set.is_empty() {
            eprintln!("skipped: {set:?} set in this environment");
        }
        !set.is_empty()
    }

    fn mi300x_node() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs/mi300x_spx_nps1")
    }

    #[test]
    fn the_session_world_comes_from_gpus_else_the_gpus_found_here() {
        if launcher_set(&["GPUS_PER_NODE"]) {
            return; // the launcher's variables come first; this test is about the others
        }
        let (_d, s) = session(&mi300x_node(), None);
        let w = s.world().copied().unwrap();
        assert_eq!(w.gpus, 8);
        assert_eq!(
            w.to_string(),
            "world size 8 (8 GPUs detected on this node by amdgpu-sysfs)"
        );
        let (_d, s) = session(&mi300x_node(), Some(2));
        assert_eq!(s.world().unwrap().source, WorldSource::Flag);
        // No GPU here: unknown, never 8.
        let empty = tempfile::tempdir().unwrap();
        let (_d, s) = session(empty.path(), None);
        assert_eq!(s.world(), None);
    }

    #[test]
    fn a_trial_lints_at_its_own_world() {
        if launcher_set(&["GPUS_PER_NODE", "NNODES"]) {
            return;
        }
        let profile = |env: &str, one_process: bool| {
            let caps = if one_process {
                "capabilities:\n  launch: one-process\n"
            } else {
                ""
            };
            let text = format!("name: p\nargv: [x]\nenv:\n  X: \"1\"\n{env}{caps}");
            Profile::parse(&text, "p.yaml").unwrap()
        };
        let proxy = profile("", true);
        let gpu = profile("", false);
        let (_d, s) = session(&mi300x_node(), None);
        assert_eq!(world(&s, None, &proxy, &[]), Some(World::one_process()));
        assert_eq!(world(&s, None, &gpu, &[]).unwrap().gpus, 8);
        // The launcher's variables a profile sets are its trials' world; the trial's own
        // environment (`--env`) over them; one that follows the world does not set it.
        let four = profile("  GPUS_PER_NODE: \"4\"\n", false);
        let w = world(&s, None, &four, &[]).unwrap();
        assert_eq!(
            (w.gpus, w.source),
            (
                4,
                WorldSource::Environment {
                    gpus_per_node: 4,
                    nodes: 1,
                    profile: true
                }
            )
        );
        assert_eq!(
            w.to_string(),
            "world size 4 (GPUS_PER_NODE × NNODES = 4 × 1, from the launch profile's env:)"
        );
        let env2 = [("GPUS_PER_NODE".to_string(), "2".to_string())];
        let w = world(&s, None, &four, &env2).unwrap();
        assert_eq!(
            w.to_string(),
            "world size 2 (GPUS_PER_NODE × NNODES = 2 × 1)"
        );
        let follows = profile("  GPUS_PER_NODE: \"{gpus_per_node}\"\n", false);
        assert_eq!(world(&s, None, &follows, &[]).unwrap().gpus, 8);
        // So do the views as that profile launches the experiment.
        let viewed = with_profile_env(&s.load, &s.env, &four);
        assert_eq!(viewed.world.unwrap().gpus, 4);
        assert_eq!(s.launched_by(&four).world().unwrap().gpus, 4);
        // The session's --gpus is the trials' too; a request's own count wins.
        let (_d, s) = session(&mi300x_node(), Some(4));
        assert_eq!(world(&s, None, &proxy, &[]).unwrap().gpus, 4);
        assert_eq!(world(&s, Some(2), &gpu, &[]).unwrap().gpus, 2);
        let (_d, s2) = session(&mi300x_node(), Some(2));
        assert_eq!(world(&s2, None, &four, &[]).unwrap().gpus, 2);
        assert_eq!(
            with_profile_env(&s2.load, &s2.env, &four)
                .world
                .unwrap()
                .gpus,
            2
        );
        // The bundled MoE example (EP 8, 256 = micro 4 × DP 8 × 8) passes the gate on its 8
        // GPUs and as a one-process proxy, and is refused on 4 GPUs.
        let exp = s.load_plain().unwrap();
        let gate = |w: Option<World>| lint_gate(&s.load.env, &exp, w.as_ref(), false);
        assert!(gate(World::flag(8)).is_ok());
        assert!(gate(Some(World::one_process())).is_ok());
        match gate(World::flag(4)) {
            Err(AppError::LintGate { errors, .. }) => {
                assert!(
                    errors.iter().any(|d| d.code == "world-expert-parallel"),
                    "{errors:#?}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(lint_gate(&s.load.env, &exp, World::flag(4).as_ref(), true).is_ok());
    }

    /// A launcher variable of the world that is not a count refuses a GPU launch, naming where
    /// it came from; one that follows the world, a count, or a one-process profile pass.
    #[test]
    fn a_world_variable_that_is_not_a_count_refuses_the_launch() {
        if launcher_set(&["GPUS_PER_NODE", "NNODES"]) {
            return;
        }
        let profile = |env: &str, caps: &str| {
            Profile::parse(&format!("name: g\nargv: [x]\nenv:\n{env}{caps}"), "g.yaml").unwrap()
        };
        let (_d, s) = session(&mi300x_node(), None);
        let refused = |p: &Profile, env: &[(String, String)]| match refuse_world_vars(&s, p, env) {
            Err(AppError::Failed(m)) => m,
            other => panic!("{other:?}"),
        };
        let eight = profile("  GPUS_PER_NODE: \"eight\"\n", "");
        let m = refused(&eight, &[]);
        assert!(
            m.starts_with(
                "GPUS_PER_NODE=\"eight\" (the env: of profile g) is not a count of GPUs per node"
            ),
            "{m}"
        );
        let zero = [("NNODES".to_string(), "0".to_string())];
        let m = refused(&profile("  X: \"1\"\n", ""), &zero);
        assert!(
            m.starts_with("NNODES=\"0\" (--env) is not a count of nodes"),
            "{m}"
        );
        // --env mends the profile's value; a placeholder follows the world; a count passes
        let two = [("GPUS_PER_NODE".to_string(), "2".to_string())];
        assert!(refuse_world_vars(&s, &eight, &two).is_ok());
        let follows = profile("  GPUS_PER_NODE: \"{gpus_per_node}\"\n", "");
        assert!(refuse_world_vars(&s, &follows, &[]).is_ok());
        assert!(refuse_world_vars(&s, &profile("  GPUS_PER_NODE: \" 4 \"\n", ""), &[]).is_ok());
        // the proxies read neither
        let proxy = profile(
            "  GPUS_PER_NODE: \"eight\"\n",
            "capabilities:\n  launch: one-process\n",
        );
        assert!(refuse_world_vars(&s, &proxy, &[]).is_ok());
    }

    /// The trial's own environment (a pending edit of an environment variable, `--env`) is
    /// the one it is linted with: `PRIMUS_PP=2` makes the MoE example's `${PRIMUS_PP:1}` two
    /// stages, which its 27 layers do not divide.
    #[test]
    fn a_trial_is_linted_with_its_own_environment() {
        if launcher_set(&["GPUS_PER_NODE", "PRIMUS_PP"]) {
            return;
        }
        let (_d, s) = session(&mi300x_node(), None);
        let req = TrialRequest {
            env: vec![("PRIMUS_PP".into(), "2".into())],
            ..TrialRequest::default()
        };
        match prepare(&s, &req) {
            Err(AppError::LintGate { errors, .. }) => {
                assert!(
                    errors.iter().any(|d| d.code == "pipeline-layers"),
                    "{errors:#?}"
                );
            }
            other => panic!("{other:?}"),
        }
        let plain = prepare(&s, &TrialRequest::default());
        assert!(
            !matches!(plain, Err(AppError::LintGate { .. })),
            "{plain:?}"
        );
    }
}
