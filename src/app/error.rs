//! What a use case can fail with. Each variant keeps the engine's error (which names the file,
//! the line or the cause); the frontends print it and the CLI exits with a status that says which kind it is
//! (`cli::exit`).

use crate::config::diag::Diagnostic;
use crate::util::paths::display_path;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Config(Box<crate::config::ConfigError>),
    #[error(transparent)]
    Edit(Box<crate::config::doc::EditError>),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Profile(#[from] crate::run::profile::ProfileError),
    #[error(transparent)]
    Trial(Box<crate::run::trial::TrialError>),
    #[error(transparent)]
    Stage(#[from] crate::gemm::stage::StageError),
    #[error(transparent)]
    Tuned(#[from] crate::gemm::TunedEnvError),
    #[error(transparent)]
    Space(#[from] crate::tune::space::SpaceError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The defaults file (`config.toml`) cannot be read or is not valid.
    #[error(transparent)]
    Defaults(#[from] DefaultsError),
    /// The trial's config has errors that would stop Primus at start-up.
    #[error(
        "{path}: the trial's config has {} that would stop Primus at start-up ({}); fix them, or launch anyway with `primus-tune run --force`",
        crate::util::text::count(errors.len(), "lint error", "lint errors"),
        errors.first().map_or(String::new(), |d| d.message.clone())
    )]
    LintGate {
        path: String,
        errors: Vec<Diagnostic>,
    },
    /// The profile cannot show the effect of knobs the space sweeps.
    #[error(
        "profile `{profile}` does not model {}{}{}: a sweep of `{space}` with it would rank noise, not evidence. Sweep it with a profile that runs the real job (primus, megatron or one of yours), or pass --allow-unmodeled for a demo (its results are then labelled as such, and its pick is not applied)",
        flags.join(", "),
        if *stand_in { " (it is a CPU stand-in)" } else { "" },
        if *memory { "; the space ranks what fits in GPU memory, and a CPU stand-in's peak is the host's" } else { "" }
    )]
    Unmodeled {
        profile: String,
        space: String,
        flags: Vec<String>,
        stand_in: bool,
        /// Some of `flags` are there because they move memory and the profile is a stand-in.
        memory: bool,
    },
    #[error("no study `{name}` in {db}")]
    NoStudy { name: String, db: String },
    #[error("no trial {id} in {db}")]
    NoTrial { id: i64, db: String },
    #[error("study `{name}` has no result yet (finish it with `{resume}`)")]
    Unfinished { name: String, resume: String },
    #[error("{}: no trial database yet (run a trial first: {run})", path.display())]
    NoDatabase { path: PathBuf, run: String },
    /// Another runner holds the study's lease ([`crate::app::sweep::lease`]).
    #[error(
        "study `{study}` is being run by {holder}; one runner per study: wait for it to end or stop it (its lease is taken over once that process is gone, or its heartbeat is more than {} s old)",
        crate::util::liveness::STALE_AFTER.as_secs()
    )]
    StudyBusy { study: String, holder: String },
    /// Another runner took the study's lease over while this one ran it (its heartbeat could
    /// not be written for longer than the staleness limit).
    #[error(
        "study `{study}`: {why} while this sweep ran it (this runner's heartbeat went stale); it stopped launching trials"
    )]
    LeaseLost { study: String, why: String },
    /// A resume names a budget other than the study's own.
    #[error(
        "study `{study}` (id {id}) was started with {budget}; resume it without budget flags or with the same ones"
    )]
    BudgetConflict {
        study: String,
        id: i64,
        /// The study's budget flags, as the command line writes them.
        budget: String,
    },
    #[error("{0}")]
    Usage(String),
    /// The request is well-formed but cannot be carried out for this experiment, profile or
    /// host (a setting the profile cannot pass on, a space that does not apply, a report that
    /// cannot be written).
    #[error("{0}")]
    Failed(String),
    /// A file or folder named as input does not exist, or a folder holds no experiment.
    #[error("{}: {why}", path.display())]
    NoInput { path: PathBuf, why: String },
    /// An output named by the user (a report's folder, ...) cannot be created or written;
    /// `why` names it.
    #[error("{why}")]
    CantCreate { path: PathBuf, why: String },
}

impl AppError {
    /// The lint errors behind a refused launch (to list them under the message).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            AppError::LintGate { errors, .. } => errors,
            _ => &[],
        }
    }
}

impl From<crate::config::ConfigError> for AppError {
    fn from(e: crate::config::ConfigError) -> Self {
        AppError::Config(Box::new(e))
    }
}

impl From<crate::config::doc::EditError> for AppError {
    fn from(e: crate::config::doc::EditError) -> Self {
        AppError::Edit(Box::new(e))
    }
}

impl From<crate::run::trial::TrialError> for AppError {
    fn from(e: crate::run::trial::TrialError) -> Self {
        AppError::Trial(Box::new(e))
    }
}

/// What is wrong with the defaults file, and where. (Here, with the error that wraps it, so the
/// leaves of `app/` do not import the defaults; `DefaultsError::at` builds one.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", display_path(file), at.map_or(String::new(), |(l, c)| format!(":{l}:{c}")))]
pub struct DefaultsError {
    pub file: PathBuf,
    /// Line and column (1-based), when the error has a place.
    pub at: Option<(usize, usize)>,
    pub message: String,
}
