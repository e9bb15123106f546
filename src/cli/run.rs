//! `primus-tune run [CONFIG] [--profile P] [--set key=value ...] [--max-iters N] ...`

use super::progress::{Style, drive};
use super::{CliError, LoadArgs, display_path};
use crate::app::session;
use crate::app::trial::{self, PreparedTrial, TrialRequest};
use crate::app::{Session, SessionOptions};
use crate::domain::trial::{TrialResult, TrialStatus};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The experiment, its Primus root, `--env`, `--workspace`; `--set` values are this trial's
    /// overrides.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Launch profile: proxy-cpu, proxy-torch, primus, megatron, or one of yours [default:
    /// `profile` of the defaults file, else proxy-cpu; gemm-tune stage: primus].
    #[arg(long)]
    pub profile: Option<String>,
    /// Iteration budget (becomes train_iters) [default: 50; gemm-tune stage 1: 10].
    #[arg(long)]
    pub max_iters: Option<u64>,
    /// Wall-clock budget of the trial.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Stop once the 95 % CI half-width of the median step is within this fraction of it (0:
    /// never; the trial runs to --max-iters or --max-seconds).
    #[arg(long, default_value_t = 0.01)]
    pub ci_target: f64,
    /// A trial that prints no new iteration for max(3 × median step, this) seconds has hung.
    #[arg(long, default_value_t = 120.0)]
    pub hang_seconds: f64,
    /// Seconds to wait for the first iteration before calling it a hang.
    #[arg(long, default_value_t = 600.0)]
    pub first_iteration_seconds: f64,
    /// Seconds between SIGINT, SIGTERM and SIGKILL when stopping the trial.
    #[arg(long, default_value_t = 10.0)]
    pub grace_seconds: f64,
    /// After a failure line (out of memory, NCCL, a traceback) with no iteration since, seconds
    /// the workload may take to exit by itself before it is stopped (at least two median steps
    /// once iterations flow).
    #[arg(long, default_value_t = 5.0)]
    pub failure_grace_seconds: f64,
    /// After the last iteration of the budget, seconds the workload may take to end by itself
    /// (its clean-up: a final checkpoint or evaluation, Primus' and the launcher's exit) before
    /// it is stopped; its own exit status is kept. A trial stopped early (the CI target, a
    /// sweep's race) is stopped at once.
    #[arg(long, default_value_t = 60.0)]
    pub end_grace_seconds: f64,
    /// The trial database (its folder holds the trial folders); default: the workspace's.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Launch even when lint finds errors in the trial's config.
    #[arg(long)]
    pub force: bool,
    /// JSON Lines on stdout: one object per event as it happens, the last one the result.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub telemetry: super::monitor::TrialTelemetryArgs,
    /// Train with the tuned GEMMs of `gemm-tune stage 2` (HipBLASLt stage 3).
    #[arg(long)]
    pub gemm_tuned: bool,
    #[command(flatten)]
    pub slurm: super::slurm_args::SlurmArgs,
}

impl RunArgs {
    /// The session: the experiment without `--set` (those are the trial's), the trials'
    /// telemetry, the workspace or `--db`.
    pub fn session(&self) -> Result<Session, CliError> {
        Ok(Session::open(SessionOptions {
            overrides: Vec::new(),
            db: self.db.clone(),
            telemetry: self.telemetry.setup()?,
            ..self.load.options()
        })?)
    }

    /// What the user asked of the trial.
    pub fn request(&self) -> Result<TrialRequest, CliError> {
        Ok(TrialRequest {
            profile: self.profile.clone(),
            overrides: session::overrides(&self.load.flags.overrides)?,
            env: Vec::new(),
            max_iters: self.max_iters,
            max_seconds: self.max_seconds,
            ci_target: self.ci_target,
            hang_seconds: self.hang_seconds,
            first_iteration_seconds: self.first_iteration_seconds,
            grace: Duration::from_secs_f64(self.grace_seconds.max(0.0)),
            failure_grace: Duration::from_secs_f64(self.failure_grace_seconds.max(0.0)),
            end_grace: Duration::from_secs_f64(self.end_grace_seconds.max(0.0)),
            gpus: self.load.flags.gpus,
            force: self.force,
            gemm_tuned: self.gemm_tuned,
            slurm: self.slurm.request(),
        })
    }
}

pub fn run(a: &RunArgs) -> Result<ExitCode, CliError> {
    let session = a.session()?;
    let p = trial::prepare(&session, &a.request()?)?;
    let result = execute(&session, &p, a.json)?;
    if !a.json {
        print_result(&result);
    }
    Ok(if result.status == TrialStatus::Completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::exit::NOT_COMPLETED)
    })
}

/// Runs a prepared trial with its progress printed (Ctrl-C, SIGTERM, SIGHUP and SIGQUIT stop it).
pub fn execute(session: &Session, p: &PreparedTrial, json: bool) -> Result<TrialResult, CliError> {
    let style = Style {
        json,
        trial_headers: true,
        max_iters: p.options.max_iters,
        job: !p.options.trains,
    };
    Ok(drive(style, |events, cancel| {
        trial::run_blocking(session, p, events, cancel)
    })?)
}

pub fn print_result(r: &TrialResult) {
    let s = &r.summary;
    println!(
        "trial {}: {}{} after {:.1} s ({} iterations, stop: {})",
        r.trial_id.map_or("-".into(), |i| i.to_string()),
        r.status,
        r.failure
            .as_ref()
            .map(|f| format!(" — {}", f.class.label()))
            .unwrap_or_default(),
        r.wall_s,
        s.iterations,
        r.stop_reason
    );
    if let Some(f) = &r.failure
        && let Some(line) = &f.line
    {
        println!("  cause: {line}");
    }
    if let Some(j) = &r.job {
        println!("{}", super::trials::queue_line(j, s.pending_s));
    }
    super::parse_log::print_summary(s);
    for l in super::trials::node_lines(s) {
        println!("{l}");
    }
    if let Some(d) = &r.trial_dir {
        println!("  logs: {}", display_path(std::path::Path::new(d)));
    }
}
