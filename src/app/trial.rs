//! One trial as a use case: a [`TrialRequest`] (what the user asked for) becomes a
//! [`PreparedTrial`] through one `prepare` — one set of defaults, the trial's world (its GPU
//! count), the lint gate at that world, the tuned-GEMM environment — and runs with its events
//! sent to the frontend.

use super::events::{AppEvent, Events};
use super::launch::{LaunchPlan, PlanAsk};
use super::{AppError, Session};
use crate::config::Experiment;
use crate::config::catalog::Catalog;
use crate::config::diag::Severity;
use crate::config::env::Env;
use crate::config::overrides::Override;
use crate::config::resolve::LoadOptions;
use crate::domain::trial::TrialResult;
use crate::megatron::World;
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
    /// After the budget's last iteration: how long the workload may take to end by itself.
    pub end_grace: Duration,
    /// GPUs (world size) of the trial; None: the session's `--gpus`, else the world's defaults.
    pub gpus: Option<u64>,
    /// Launch even when lint finds errors.
    pub force: bool,
    /// Train with the tuned GEMMs of HipBLASLt stage 2 (stage 3's environment).
    pub gemm_tuned: bool,
    /// Run it as a Slurm job (see [`super::launch::slurm`]).
    pub slurm: super::launch::slurm::SlurmRequest,
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
            end_grace: Duration::from_secs(60),
            gpus: None,
            force: false,
            gemm_tuned: false,
            slurm: super::launch::slurm::SlurmRequest::default(),
        }
    }
}

/// A trial ready to launch.
#[derive(Debug, Clone)]
pub struct PreparedTrial {
    /// The experiment as on disk (the trial's overrides are in `options`).
    pub exp: Experiment,
    pub options: TrialOptions,
    /// Where, how and on what it runs.
    pub plan: LaunchPlan,
}

/// The profile a request names (or the default), from the built-in and the user's.
/// Unsaved edits as a trial's overrides, the way `run --set KEY=VALUE` takes them (an edit of
/// an environment variable goes into the trial's environment instead): the file is not changed.
pub fn with_edits(
    mut req: TrialRequest,
    edits: &[super::edit::PendingEdit],
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

/// The launch plan of a request: its profile, environment (the session's `--env`, the
/// request's own, the tuned GEMMs'), placement, basis and launcher, decided once.
pub fn plan(
    session: &Session,
    exp: &Experiment,
    req: &TrialRequest,
) -> Result<LaunchPlan, AppError> {
    let profile = find_profile(Some(
        &session.defaults.profile(req.profile.as_deref()).value,
    ))?;
    refuse_settings(
        &profile,
        req.overrides.iter().map(|o| o.key.as_str()),
        session,
    )?;
    let mut env = req.env.clone();
    if req.gemm_tuned {
        env.extend(tuned_env(session, exp)?);
    }
    let job = super::launch::slurm::launch(&req.slurm, &profile, &session.defaults)?;
    LaunchPlan::new(
        &session.plan_base(),
        profile,
        PlanAsk {
            env,
            gpus: req.gpus,
            job,
            primus_root: Some(&exp.primus_root),
        },
    )
}

/// The engine's options for a request under its plan: one set of defaults for every frontend.
pub fn options(session: &Session, plan: &LaunchPlan, req: &TrialRequest) -> TrialOptions {
    TrialOptions {
        trains: plan.profile.capabilities.trains,
        launcher: plan.launcher.clone(),
        profile: plan.profile.clone(),
        overrides: req.overrides.clone(),
        // The session's `--env`, the request's own, the tuned GEMMs'.
        env: plan.env.flags().to_vec(),
        max_iters: req.max_iters.unwrap_or(DEFAULT_ITERS).max(1),
        max_seconds: req.max_seconds,
        ci_target: req.ci_target,
        race: None,
        hang_seconds: req.hang_seconds,
        first_iteration_seconds: req.first_iteration_seconds,
        grace: req.grace,
        failure_grace: req.failure_grace,
        end_grace: req.end_grace,
        gpus: plan.placement.ranks(),
        gpus_per_node: plan.placement.per_node,
        world: plan.placement.world.map(|w| w.gpus),
        basis: plan.basis.clone(),
        notes: plan.notes.clone(),
        study_id: None,
        trials_dir: session.workspace.trials_dir.clone(),
        self_exe: session.self_exe.clone(),
        telemetry: plan.telemetry.clone(),
    }
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

/// Load, plan, lint at the plan's world and set up one trial.
pub fn prepare(session: &Session, req: &TrialRequest) -> Result<PreparedTrial, AppError> {
    let exp = session.load_plain()?;
    let plan = plan(session, &exp, req)?;
    let options = options(session, &plan, req);
    let load = plan.job_load(&session.load);
    let view = with_overrides(&load, &exp, &req.overrides)?;
    lint_gate(&load.env, &view, load.world.as_ref(), req.force)?;
    if plan.profile.capabilities.scaled_shape {
        proxy_fits(&view, options.gpus)?;
    }
    Ok(PreparedTrial { exp, options, plan })
}

/// The built-in CPU proxy sizes itself from the config: a shape that needs more host memory
/// than is available is refused before launch, with the sizes to change (it would otherwise
/// abort on its allocation).
fn proxy_fits(view: &Experiment, gpus: u64) -> Result<(), AppError> {
    let resolved = crate::run::profile::resolved_json(&view.main_module().values(), gpus);
    let shape = crate::proxy::ProxyShape::from_resolved(&resolved);
    match crate::proxy::too_big(&shape, crate::proxy::host_available_bytes()) {
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
    use crate::megatron::WorldSource;
    use std::path::Path;

    /// A session on a private copy of the bundled example; its telemetry reads the recorded
    /// node `node` (`sys/`, `proc/`).
    fn session(node: &Path, gpus: Option<u64>) -> (tempfile::TempDir, Session) {
        let dir = tempfile::tempdir().unwrap();
        let s = crate::app::test_session::on_recorded_node(dir.path(), node, gpus);
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
        let w = s.load.world.as_ref().copied().unwrap();
        assert_eq!(w.gpus, 8);
        assert_eq!(
            w.to_string(),
            "world size 8 (8 GPUs detected on this node by amdgpu-sysfs)"
        );
        let (_d, s) = session(&mi300x_node(), Some(2));
        assert_eq!(s.load.world.as_ref().unwrap().source, WorldSource::Flag);
        // No GPU here: unknown, never 8.
        let empty = tempfile::tempdir().unwrap();
        let (_d, s) = session(empty.path(), None);
        assert_eq!(s.load.world.as_ref(), None);
    }

    /// The world of a trial's plan, for `profile` (YAML) with `req`.
    fn planned(s: &Session, profile: &str, req: TrialRequest) -> Result<LaunchPlan, AppError> {
        let exp = s.load_plain().unwrap();
        let p = Profile::parse(profile, "p.yaml").unwrap();
        let job = super::super::launch::slurm::launch(&req.slurm, &p, &s.defaults)?;
        LaunchPlan::new(
            &s.plan_base(),
            p,
            PlanAsk {
                env: req.env.clone(),
                gpus: req.gpus,
                job,
                primus_root: Some(&exp.primus_root),
            },
        )
    }

    #[test]
    fn a_trial_lints_at_the_placement_of_its_plan() {
        if launcher_set(&["GPUS_PER_NODE", "NNODES"]) {
            return;
        }
        let profile = |env: &str, one_process: bool| {
            let caps = if one_process {
                "capabilities:\n  launch: one-process\n"
            } else {
                ""
            };
            format!("name: p\nargv: [x]\nenv:\n  X: \"1\"\n{env}{caps}")
        };
        let placed = |s: &Session, p: &str, gpus: Option<u64>, env: &[(&str, &str)]| {
            let req = TrialRequest {
                gpus,
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..TrialRequest::default()
            };
            planned(s, p, req).unwrap().placement.world
        };
        let proxy = profile("", true);
        let gpu = profile("", false);
        let (_d, s) = session(&mi300x_node(), None);
        assert_eq!(placed(&s, &proxy, None, &[]), Some(World::one_process()));
        assert_eq!(placed(&s, &gpu, None, &[]).unwrap().gpus, 8);
        // The launcher's variables a profile sets are its trials' world; the trial's own
        // environment (`--env`) over them; one that follows the world does not set it.
        let four = profile("  GPUS_PER_NODE: \"4\"\n", false);
        let w = placed(&s, &four, None, &[]).unwrap();
        assert_eq!(
            w.to_string(),
            "world size 4 (GPUS_PER_NODE × NNODES = 4 × 1, from the launch profile's env:)"
        );
        let w = placed(&s, &four, None, &[("GPUS_PER_NODE", "2")]).unwrap();
        assert_eq!(
            w.to_string(),
            "world size 2 (GPUS_PER_NODE × NNODES = 2 × 1)"
        );
        let follows = profile("  GPUS_PER_NODE: \"{gpus_per_node}\"\n", false);
        assert_eq!(placed(&s, &follows, None, &[]).unwrap().gpus, 8);
        // So do the views as that profile launches the experiment.
        let p4 = Profile::parse(&four, "p.yaml").unwrap();
        assert_eq!(s.launched_by(&p4).load.world.as_ref().unwrap().gpus, 4);
        // The session's --gpus is the trials' too; a request's own count wins.
        let (_d, s) = session(&mi300x_node(), Some(4));
        assert_eq!(placed(&s, &proxy, None, &[]).unwrap().gpus, 4);
        assert_eq!(placed(&s, &gpu, Some(2), &[]).unwrap().gpus, 2);
        let (_d, s2) = session(&mi300x_node(), Some(2));
        assert_eq!(placed(&s2, &four, None, &[]).unwrap().gpus, 2);
        assert_eq!(s2.launched_by(&p4).load.world.as_ref().unwrap().gpus, 2);
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

    /// A Slurm trial is linted at its job's world (nodes × GPUs per node), not at the world of
    /// the node that submits it: 100 is not a multiple of micro batch 5 × DP 16.
    #[test]
    fn a_slurm_trial_is_linted_at_its_job_s_placement() {
        if launcher_set(&["GPUS_PER_NODE", "NNODES"]) {
            return;
        }
        let (_d, s) = session(&mi300x_node(), None);
        let slurm = super::super::launch::slurm::SlurmRequest {
            enabled: true,
            settings: super::super::launch::slurm::SlurmSettings {
                nodes: Some(2),
                gpus_per_node: Some(8),
                ..Default::default()
            },
            ..Default::default()
        };
        let req = TrialRequest {
            profile: Some("megatron".into()),
            overrides: super::super::session::overrides(&[
                "micro_batch_size=5".into(),
                "global_batch_size=100".into(),
                "expert_model_parallel_size=1".into(),
            ])
            .unwrap(),
            slurm,
            ..TrialRequest::default()
        };
        match prepare(&s, &req) {
            Err(AppError::LintGate { errors, .. }) => {
                let batch = errors
                    .iter()
                    .find(|d| d.code == "global-batch-divisibility");
                assert!(
                    batch.is_some_and(|d| d.message.contains("5 × 16 = 80")),
                    "{errors:#?}"
                );
            }
            other => panic!("{other:?}"),
        }
        // At 8 GPUs (one node) 100 is not a multiple of 40 either; at 2 nodes × 5 GPUs it is.
        let mut ok = req.clone();
        ok.slurm.settings.gpus_per_node = Some(5);
        ok.overrides = super::super::session::overrides(&[
            "micro_batch_size=5".into(),
            "global_batch_size=100".into(),
            "expert_model_parallel_size=1".into(),
        ])
        .unwrap();
        let p = prepare(&s, &ok);
        assert!(!matches!(p, Err(AppError::LintGate { .. })), "{p:?}");
        assert_eq!(p.unwrap().options.gpus, 10);
    }

    /// A launcher variable of the world that is not a count refuses a GPU launch, naming where
    /// it came from; one that follows the world, a count, or a one-process profile pass.
    #[test]
    fn a_world_variable_that_is_not_a_count_refuses_the_launch() {
        if launcher_set(&["GPUS_PER_NODE", "NNODES"]) {
            return;
        }
        let profile = |env: &str, caps: &str| format!("name: g\nargv: [x]\nenv:\n{env}{caps}");
        let (_d, s) = session(&mi300x_node(), None);
        let env = |kv: &[(&str, &str)]| TrialRequest {
            env: kv
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..TrialRequest::default()
        };
        let refused = |p: &str, req: TrialRequest| match planned(&s, p, req) {
            Err(AppError::Failed(m)) => m,
            other => panic!("{other:?}"),
        };
        let eight = profile("  GPUS_PER_NODE: \"eight\"\n", "");
        let m = refused(&eight, env(&[]));
        assert!(
            m.starts_with(
                "GPUS_PER_NODE=\"eight\" (the env: of profile g) is not a count of GPUs per node"
            ),
            "{m}"
        );
        let m = refused(&profile("  X: \"1\"\n", ""), env(&[("NNODES", "0")]));
        assert!(
            m.starts_with("NNODES=\"0\" (--env) is not a count of nodes"),
            "{m}"
        );
        // --env mends the profile's value; a placeholder follows the world; a count passes
        assert!(planned(&s, &eight, env(&[("GPUS_PER_NODE", "2")])).is_ok());
        let follows = profile("  GPUS_PER_NODE: \"{gpus_per_node}\"\n", "");
        assert!(planned(&s, &follows, env(&[])).is_ok());
        assert!(planned(&s, &profile("  GPUS_PER_NODE: \" 4 \"\n", ""), env(&[])).is_ok());
        // the proxies read neither
        let proxy = profile(
            "  GPUS_PER_NODE: \"eight\"\n",
            "capabilities:\n  launch: one-process\n",
        );
        assert!(planned(&s, &proxy, env(&[])).is_ok());
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
