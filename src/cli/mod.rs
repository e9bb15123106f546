//! The headless frontend: clap definitions and dispatch. Each subcommand lives in its own file
//! and prints what the core returns (human text, or JSON with `--json`).

mod bench_replay;
mod checklist;
mod gemm_tune;
mod gpus;
mod lint;
mod monitor;
mod parse_log;
mod proxy;
mod recommend;
mod report;
mod run;
mod set;
mod show;
mod sweep;
mod trials;

use crate::config::env::Env;
use crate::config::overrides::parse_assignment;
use crate::config::{ConfigError, Experiment, LoadOptions};
use clap::{Args, Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "primus-tune",
    version,
    about = "Performance-tuning assistant for AMD Primus training jobs (Megatron-LM and TorchTitan)",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    load: LoadArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Print the checklist instead of opening the interactive TUI (the default when stdout is
    /// not a terminal).
    #[arg(long)]
    no_tui: bool,
    /// Do not show the guided tour on the first start.
    #[arg(long)]
    no_tour: bool,
    #[command(flatten)]
    telemetry: monitor::TelemetryArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate an experiment: Primus/Megatron rules, types, ranges, unknown keys.
    Lint(lint::LintArgs),
    /// Show effective flag values, defaults and where each value came from.
    Show(show::ShowArgs),
    /// Change values in the experiment file (dry run with a diff unless --write).
    Set(set::SetArgs),
    /// The tuning guide's quick checklist for an experiment.
    Checklist(checklist::ChecklistArgs),
    /// Run one short profiling trial: launch, watch the log, measure, store.
    Run(run::RunArgs),
    /// Parse a training log offline: iterations, steady state, failure.
    ParseLog(parse_log::ParseLogArgs),
    /// List stored trials, show one, export CSV.
    Trials(trials::TrialsArgs),
    /// Live GPU telemetry (table, JSON Lines or CSV).
    Monitor(monitor::MonitorArgs),
    /// Detected GPUs, the telemetry backend, and hardware facts.
    Gpus(gpus::GpusArgs),
    /// The built-in CPU workload the proxy-cpu profile runs.
    Proxy(proxy::ProxyArgs),
    /// Recommended settings: rules without measurements, with their sources (--apply writes them).
    Recommend(recommend::RecommendArgs),
    /// Replay recorded studies: the search against the exhaustive grid (GPU-seconds, gap).
    BenchReplay(bench_replay::BenchReplayArgs),
    /// Sweep a knob space with short trials: noise-aware successive halving, memory pruning.
    Sweep(sweep::SweepArgs),
    /// HipBLASLt GEMM tuning (the guide's step 1): status, dumped shapes, results, stages.
    GemmTune(gemm_tune::GemmTuneArgs),
    /// A finished sweep as report.md plus charts (PNG and SVG): evidence, memory, telemetry.
    Report(report::ReportArgs),
}

/// How to load an experiment: shared by every subcommand that reads one.
#[derive(Debug, Args, Clone)]
pub struct LoadArgs {
    /// Experiment YAML (default: the bundled example).
    pub config: Option<PathBuf>,
    /// The Primus root (the folder holding primus/configs/). Default: found by walking up from
    /// the experiment, else $PRIMUS_ROOT.
    #[arg(long, value_name = "DIR")]
    pub primus_root: Option<PathBuf>,
    /// Set an environment variable for this evaluation (repeatable), as the launch would.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// A command-line override, typed as Primus types `--key value` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// Errors the frontend reports before exiting with status 2.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Edit(#[from] crate::config::doc::EditError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let interactive = !cli.json
        && !cli.no_tui
        && std::io::stdout().is_terminal()
        && std::io::stdin().is_terminal();
    let result = match cli.command {
        None if interactive => run_tui(&cli),
        None => checklist::run(&checklist::ChecklistArgs {
            load: cli.load,
            json: cli.json,
        }),
        Some(Command::Lint(a)) => lint::run(&a),
        Some(Command::Show(a)) => show::run(&a),
        Some(Command::Set(a)) => set::run(&a),
        Some(Command::Checklist(a)) => checklist::run(&a),
        Some(Command::Run(a)) => run::run(&a),
        Some(Command::ParseLog(a)) => parse_log::run(&a),
        Some(Command::Trials(a)) => trials::run(&a),
        Some(Command::Monitor(a)) => monitor::run(&a),
        Some(Command::Gpus(a)) => gpus::run(&a),
        Some(Command::Proxy(a)) => proxy::run(&a),
        Some(Command::BenchReplay(a)) => bench_replay::run(&a),
        Some(Command::Recommend(a)) => recommend::run(&a),
        Some(Command::Sweep(a)) => sweep::run(&a),
        Some(Command::Report(a)) => report::run(&a),
        Some(Command::GemmTune(a)) => gemm_tune::run(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `primus-tune [CONFIG]` on a terminal: the TUI (no CONFIG: an editable copy of the bundled
/// example).
fn run_tui(cli: &Cli) -> Result<ExitCode, CliError> {
    let config = match &cli.load.config {
        Some(_) => cli.load.config_path()?,
        None => crate::util::bundled::editable_default_experiment()?,
    };
    let opts = crate::tui::TuiOptions {
        config,
        load: cli.load.options()?,
        env: cli.load.env_pairs()?,
        telemetry_backend: cli.telemetry.backend.clone(),
        roots: cli.telemetry.roots(),
        tour: !cli.no_tour && !crate::tui::toured_marker().exists(),
    };
    crate::tui::run(opts)?;
    Ok(ExitCode::SUCCESS)
}

impl LoadArgs {
    /// The `--env KEY=VALUE` pairs, checked.
    pub fn env_pairs(&self) -> Result<Vec<(String, String)>, CliError> {
        self.env
            .iter()
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
                _ => Err(CliError::Usage(format!(
                    "--env `{kv}` is not of the form KEY=VALUE"
                ))),
            })
            .collect()
    }

    /// The process environment with the `--env` pairs applied.
    pub fn env(&self) -> Result<Env, CliError> {
        let mut env = Env::from_process();
        for (k, v) in self.env_pairs()? {
            env.set(&k, &v);
        }
        Ok(env)
    }

    pub fn options(&self) -> Result<LoadOptions, CliError> {
        let overrides = self
            .overrides
            .iter()
            .map(|s| {
                parse_assignment(s).map_err(|message| ConfigError::BadOverride {
                    text: s.clone(),
                    message,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LoadOptions {
            primus_root: self.primus_root.clone(),
            env: self.env()?,
            overrides,
            texts: Default::default(),
        })
    }

    pub fn config_path(&self) -> Result<PathBuf, CliError> {
        match &self.config {
            Some(p) => {
                if !p.exists() {
                    return Err(CliError::Usage(format!("{}: no such file", p.display())));
                }
                Ok(p.clone())
            }
            None => Ok(crate::util::bundled::default_experiment()?),
        }
    }

    pub fn load(&self) -> Result<(Experiment, LoadOptions), CliError> {
        let opts = self.options()?;
        let exp = Experiment::load(&self.config_path()?, &opts)?;
        Ok((exp, opts))
    }
}

pub use crate::util::paths::display_path;

pub fn print_json(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    );
}

/// One diagnostic as text: `file:line:col: error[code]: message` and an indented hint.
pub fn format_diag(d: &crate::config::diag::Diagnostic) -> String {
    let mut s = String::new();
    if let Some(l) = &d.location {
        s.push_str(&format!(
            "{}:{}:{}: ",
            display_path(&l.file),
            l.line,
            l.column
        ));
    }
    s.push_str(&format!(
        "{}[{}]: {}",
        d.severity.label(),
        d.code,
        d.message
    ));
    if let Some(h) = &d.hint {
        s.push_str(&format!("\n    hint: {h}"));
    }
    s
}

pub fn diag_json(d: &crate::config::diag::Diagnostic) -> serde_json::Value {
    serde_json::json!({
        "severity": d.severity,
        "code": d.code,
        "message": d.message,
        "file": d.location.as_ref().map(|l| l.file.display().to_string()),
        "line": d.location.as_ref().map(|l| l.line),
        "column": d.location.as_ref().map(|l| l.column),
        "hint": d.hint,
        "flag": d.flag,
    })
}
