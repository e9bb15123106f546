//! `primus-tune run [CONFIG] [--profile P] [--set key=value ...] [--max-iters N] ...`

use super::{CliError, display_path, format_diag, print_json};
use crate::config::catalog::Catalog;
use crate::config::diag::Severity;
use crate::config::overrides::parse_assignment;
use crate::config::{ConfigError, Experiment, LoadOptions};
use crate::domain::trial::TrialResult;
use crate::run::profile;
use crate::run::trial::{self, TrialEvent, TrialOptions};
use crate::store::Store;
use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Experiment YAML (default: the bundled example).
    pub config: Option<PathBuf>,
    /// Launch profile: proxy-cpu, proxy-torch, primus, megatron, or one of yours [default:
    /// proxy-cpu; gemm-tune stage: primus].
    #[arg(long)]
    pub profile: Option<String>,
    /// Override for this trial (repeatable), typed as Primus types `--key value`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Environment for the trial and for `${VAR}` in the config (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Iteration budget (becomes train_iters) [default: 50; gemm-tune stage 1: 10].
    #[arg(long)]
    pub max_iters: Option<u64>,
    /// Wall-clock budget of the trial.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Stop once the 95 % CI half-width of the median step is within this fraction of it.
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
    /// GPUs (world size) of the trial (default: $GPUS_PER_NODE × $NNODES, else 1 for the
    /// proxies and 8 otherwise).
    #[arg(long)]
    pub gpus: Option<u64>,
    /// The trial database (default: .primus-tune/trials.db beside the experiment).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Launch even when lint finds errors in the trial's config.
    #[arg(long)]
    pub force: bool,
    /// The Primus root (default: found by walking up from the experiment, else $PRIMUS_ROOT).
    #[arg(long, value_name = "DIR")]
    pub primus_root: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub telemetry: super::monitor::TelemetryArgs,
    /// Telemetry sampling interval in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub interval: u64,
    /// Do not sample telemetry during the trial.
    #[arg(long)]
    pub no_telemetry: bool,
    /// Train with the tuned GEMMs of `gemm-tune stage 2` (HipBLASLt stage 3).
    #[arg(long)]
    pub gemm_tuned: bool,
}

/// A trial ready to launch: the experiment, its load options, the engine's options and the
/// trial database.
pub struct Prepared {
    pub exp: Experiment,
    pub opts: LoadOptions,
    pub topts: TrialOptions,
    pub db: PathBuf,
}

pub fn run(a: &RunArgs) -> Result<ExitCode, CliError> {
    let p = prepare(a)?;
    let result = execute(&p, a.json)?;
    print_result(&result, a.json);
    Ok(
        if result.status == crate::domain::trial::TrialStatus::Completed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(3)
        },
    )
}

/// Loads and lints the trial's config and builds the engine's options from the arguments.
pub fn prepare(a: &RunArgs) -> Result<Prepared, CliError> {
    let load = super::LoadArgs {
        config: a.config.clone(),
        primus_root: a.primus_root.clone(),
        env: a.env.clone(),
        overrides: Vec::new(),
    };
    let (exp, opts) = load.load()?;
    let overrides = a
        .overrides
        .iter()
        .map(|s| {
            parse_assignment(s).map_err(|message| ConfigError::BadOverride {
                text: s.clone(),
                message,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Lint the trial's config (experiment + overrides) before spending GPU time on it.
    let mut with = opts.clone();
    with.overrides = overrides.clone();
    let trial_view = Experiment::load(&exp.path, &with)?;
    let diags = crate::config::lint::lint(&trial_view, &opts.env, Catalog::builtin());
    let errors: Vec<_> = diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    if !errors.is_empty() && !a.force {
        for d in &errors {
            eprintln!("{}", format_diag(d));
        }
        return Err(CliError::Usage(format!(
            "{}: the trial's config has {} lint error(s) that would stop Primus at start-up; fix them or pass --force",
            display_path(&exp.path),
            errors.len()
        )));
    }
    let profile = profile::find(
        a.profile.as_deref().unwrap_or(profile::DEFAULT_PROFILE),
        profile::user_dir().as_deref(),
    )
    .map_err(|e| CliError::Usage(e.to_string()))?;
    let mut env_pairs = load.env_pairs()?;
    if a.gemm_tuned {
        env_pairs.extend(
            crate::gemm::tuned_env_for(&exp.primus_root, &exp.path, &opts.env)
                .map_err(CliError::Usage)?,
        );
    }
    let gpus = a
        .gpus
        .unwrap_or_else(|| trial::default_gpus(&opts.env, &profile.capabilities));
    let topts = TrialOptions {
        profile,
        overrides,
        env: env_pairs,
        max_iters: a.max_iters.unwrap_or(50).max(1),
        max_seconds: a.max_seconds,
        ci_target: a.ci_target,
        hang_seconds: a.hang_seconds,
        first_iteration_seconds: a.first_iteration_seconds,
        grace: Duration::from_secs_f64(a.grace_seconds.max(0.0)),
        gpus,
        study_id: None,
        trials_dir: trial::workspace_dir(&exp.path).join("trials"),
        telemetry: (!a.no_telemetry).then(|| trial::TelemetrySetup {
            backend: a.telemetry.backend.clone(),
            roots: a.telemetry.roots(),
            config: crate::telemetry::sampler::SamplerConfig {
                interval: Duration::from_millis(a.interval.max(10)),
                process_interval: Duration::from_millis(2000),
            },
        }),
        trains: true,
    };
    let db =
        a.db.clone()
            .unwrap_or_else(|| trial::workspace_dir(&exp.path).join("trials.db"));
    Ok(Prepared {
        exp,
        opts,
        topts,
        db,
    })
}

/// Runs a prepared trial with progress on stderr (Ctrl-C, SIGTERM and SIGHUP stop it).
pub fn execute(p: &Prepared, json: bool) -> Result<TrialResult, CliError> {
    let store = Store::open(&p.db).map_err(|e| CliError::Usage(e.to_string()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_with_progress(&p.exp, &p.opts, &store, &p.topts, json))
}

async fn run_with_progress(
    exp: &Experiment,
    opts: &LoadOptions,
    store: &Store,
    topts: &TrialOptions,
    json: bool,
) -> Result<TrialResult, CliError> {
    with_progress(topts, json, |tx, cancel_rx| {
        trial::run_trial(exp, opts, store, topts, tx, cancel_rx)
    })
    .await
    .map_err(|e| CliError::Usage(e.to_string()))
}

/// Runs `work` (one trial or several in a row) with its events printed to stderr as they come
/// (a progress line on a terminal); Ctrl-C, SIGTERM and SIGHUP cancel it.
pub async fn with_progress<T, F, Fut>(topts: &TrialOptions, json: bool, work: F) -> T
where
    F: FnOnce(mpsc::Sender<TrialEvent>, watch::Receiver<bool>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let (tx, mut rx) = mpsc::channel::<TrialEvent>(256);
    let (cancel_tx, cancel_rx) = watch::channel(false);
    // Ctrl-C, SIGTERM and SIGHUP (SSH drop) stop the trial's whole process group.
    tokio::spawn(async move {
        crate::run::process::stop_signal().await;
        let _ = cancel_tx.send(true);
    });
    let tty = std::io::stderr().is_terminal() && !json;
    let max_iters = topts.max_iters;
    let trains = topts.trains;
    let printer = async move {
        let mut err = std::io::stderr();
        while let Some(ev) = rx.recv().await {
            match ev {
                TrialEvent::Started {
                    trial_id,
                    argv,
                    trial_dir,
                } if !json => {
                    let _ = writeln!(err, "trial {trial_id}: {}", argv.join(" "));
                    let _ = writeln!(err, "  folder {}", display_path(&trial_dir));
                }
                TrialEvent::Iteration { it, summary } if tty => {
                    // Kept under 80 columns so `\r` redraws one line on any terminal.
                    let step = it.elapsed_ms.map_or("-".into(), |s| format!("{s:.1}ms"));
                    let med = match (summary.median_step_ms, summary.ci95_ms) {
                        (Some(m), Some(ci)) if m > 0.0 => {
                            format!("med {m:.1}ms ±{:.1}%", 100.0 * ci / m)
                        }
                        _ => "warming up".into(),
                    };
                    let eta = summary
                        .median_step_ms
                        .map(|m| m * max_iters.saturating_sub(it.iteration) as f64 / 1000.0)
                        .map_or(String::new(), |s| format!(" ETA≤{s:.0}s"));
                    let done = (it.iteration as f64 / max_iters as f64).clamp(0.0, 1.0);
                    let bar: String = (0..10)
                        .map(|i| if (i as f64) < done * 10.0 { '#' } else { '.' })
                        .collect();
                    let line = format!(
                        "[{bar}] {}/{max_iters} step {step} {med}{eta}",
                        it.iteration
                    );
                    let line: String = line.chars().take(79).collect();
                    let _ = write!(err, "\r\x1b[2K{line}");
                    let _ = err.flush();
                }
                // A job (offline GEMM tuning) prints no iterations: its output is the progress.
                TrialEvent::Line(_, line) if !json && !trains => {
                    let _ = writeln!(err, "  | {line}");
                }
                TrialEvent::TelemetryUnavailable(why) if !json => {
                    let _ = writeln!(err, "no GPU telemetry ({why}); sampling host figures only");
                }
                TrialEvent::Stopping(reason) if !json => {
                    if tty {
                        let _ = writeln!(err);
                    }
                    let _ = writeln!(err, "stopping the trial ({reason})");
                }
                _ => {}
            }
        }
        if tty {
            let _ = writeln!(err);
        }
    };
    let (result, ()) = tokio::join!(work(tx, cancel_rx), printer);
    result
}

pub fn print_result(r: &TrialResult, json: bool) {
    if json {
        print_json(&serde_json::to_value(r).unwrap_or_default());
        return;
    }
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
    super::parse_log::print_summary(s);
    if let Some(d) = &r.trial_dir {
        println!("  logs: {}", display_path(std::path::Path::new(d)));
    }
}
