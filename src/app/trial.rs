//! One trial as a use case: a [`TrialRequest`] (what the user asked for) becomes a
//! [`PreparedTrial`] through one `prepare` — one set of defaults, the lint gate, the tuned-GEMM
//! environment, the profile's GPU count — and runs with its events sent to the frontend.

use super::events::{AppEvent, Events};
use super::{AppError, Session};
use crate::config::Experiment;
use crate::config::catalog::Catalog;
use crate::config::diag::Severity;
use crate::config::overrides::Override;
use crate::domain::trial::TrialResult;
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
    /// The launch profile (default: [`profile::DEFAULT_PROFILE`]).
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
    pub gpus: Option<u64>,
    /// Launch even when lint finds errors.
    pub force: bool,
    /// Train with the tuned GEMMs of HipBLASLt stage 2 (stage 3's environment).
    pub gemm_tuned: bool,
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
            gpus: None,
            force: false,
            gemm_tuned: false,
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

/// Lint the trial's config (the experiment with the request's overrides) and refuse it when it
/// has errors that would stop Primus at start-up, unless forced.
pub fn lint_gate(
    session: &Session,
    exp: &Experiment,
    overrides: &[Override],
    force: bool,
) -> Result<(), AppError> {
    let mut with = session.load.clone();
    with.overrides = overrides.to_vec();
    let view = Experiment::load(&exp.path, &with)?;
    let errors: Vec<_> = crate::config::lint::lint(&view, &session.load.env, Catalog::builtin())
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    if errors.is_empty() || force {
        return Ok(());
    }
    Err(AppError::LintGate {
        path: crate::util::paths::display_path(&exp.path),
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
    let profile = find_profile(req.profile.as_deref())?;
    let mut env = session.env.clone();
    env.extend(req.env.iter().cloned());
    if req.gemm_tuned {
        env.extend(tuned_env(session, exp)?);
    }
    let gpus = req
        .gpus
        .unwrap_or_else(|| trial::default_gpus(&session.load.env, &profile.capabilities));
    Ok(TrialOptions {
        trains: profile.capabilities.trains,
        profile,
        overrides: req.overrides.clone(),
        env,
        max_iters: req.max_iters.unwrap_or(DEFAULT_ITERS).max(1),
        max_seconds: req.max_seconds,
        ci_target: req.ci_target,
        hang_seconds: req.hang_seconds,
        first_iteration_seconds: req.first_iteration_seconds,
        grace: req.grace,
        gpus,
        study_id: None,
        trials_dir: session.workspace.trials_dir.clone(),
        self_exe: session.self_exe.clone(),
        telemetry: session.telemetry.clone(),
    })
}

/// Load, lint and set up one trial.
pub fn prepare(session: &Session, req: &TrialRequest) -> Result<PreparedTrial, AppError> {
    let exp = session.load_plain()?;
    lint_gate(session, &exp, &req.overrides, req.force)?;
    let options = options(session, &exp, req)?;
    Ok(PreparedTrial { exp, options })
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
