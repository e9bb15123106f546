//! The headless frontend: clap definitions and dispatch. Each subcommand lives in its own file
//! and prints what the core returns (human text, or JSON with `--json`).

/// Every line printed for people goes through [`crate::util::text::visible`]: a control
/// character from a config value, a key or a log line is shown as an escape, never sent to the
/// terminal. (These shadow the std macros in every subcommand's module; JSON is escaped by
/// serde.)
macro_rules! println {
    () => {
        std::println!()
    };
    ($($arg:tt)*) => {
        std::println!("{}", $crate::util::text::visible(&format!($($arg)*)))
    };
}

macro_rules! eprintln {
    () => {
        std::eprintln!()
    };
    ($($arg:tt)*) => {
        std::eprintln!("{}", $crate::util::text::visible(&format!($($arg)*)))
    };
}

mod backups;
mod bench_replay;
mod checklist;
mod completions;
mod defaults;
mod exit;
mod gemm_tune;
mod gpus;
mod layouts;
mod lint;
mod monitor;
mod parse_log;
mod progress;
mod proxy;
mod recommend;
mod report;
mod run;
mod set;
mod show;
mod slurm_args;
mod studies;
mod style;
mod suggest;
mod sweep;
mod trials;

use crate::app::{AppError, Session, SessionOptions};
use crate::config::{ConfigError, Experiment, LoadOptions};
use crate::run::trial::TelemetrySetup;
use clap::{Args, Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "primus-tune",
    version,
    about = "Performance-tuning assistant for AMD Primus training jobs (Megatron-LM and TorchTitan)",
    args_conflicts_with_subcommands = true,
    after_help = "\
Exit status: 0 success; 1 warnings with `lint --strict`; 2 errors (lint errors, or the command \
failed: an invalid config, a refused edit, ...); 3 a trial, sweep or GEMM stage did not complete; \
64 usage error (unknown command or option, bad value); 66 no input (a file or folder named does \
not exist, a folder holds no experiment, no such trial or study, no trial database yet); 73 an \
output cannot be created (report --out, man --out, the trial database). With --json a fatal error is also printed on stdout as \
{\"error\": {\"kind\", \"exit_code\", \"message\", \"details\"}}."
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
    /// Do not capture the mouse in the TUI (clicks on tabs and rows, the wheel); also
    /// PRIMUS_TUNE_NO_MOUSE set to anything, or `[ui] mouse = false` in the defaults file.
    /// Without capture the terminal's own selection works.
    #[arg(long)]
    no_mouse: bool,
    /// The TUI's launch profile at start [default: the one last chosen for this experiment,
    /// else `profile` of the defaults file, else proxy-cpu]. Without the TUI (`--no-tui`,
    /// `--json`, no terminal), the checklist printed is the experiment as it launches it.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
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
    /// The versions of the experiment that saves replaced (kept in the workspace); restore one.
    Backups(backups::BackupsArgs),
    /// The tuning guide's quick checklist for an experiment.
    Checklist(checklist::ChecklistArgs),
    /// Run one short profiling trial: launch, watch the log, measure, store.
    Run(run::RunArgs),
    /// Parse a training log offline: iterations, steady state, failure.
    ParseLog(parse_log::ParseLogArgs),
    /// List stored trials, show one, export CSV.
    Trials(trials::TrialsArgs),
    /// The experiment's sweeps: space, status, trials, cost (GPU time; a stand-in's CPU time),
    /// pick.
    Studies(studies::StudiesArgs),
    /// Live GPU telemetry (table, JSON Lines or CSV).
    Monitor(monitor::MonitorArgs),
    /// Detected GPUs, the telemetry backend, and hardware facts.
    Gpus(gpus::GpusArgs),
    /// The built-in CPU workload the proxy-cpu profile runs.
    Proxy(proxy::ProxyArgs),
    /// Recommended settings: the guide's rules with their sources, or a study's measured pick
    /// (--study) with its evidence; --apply writes them.
    Recommend(recommend::RecommendArgs),
    /// Replay recorded studies: the search against the exhaustive grid (GPU-seconds, gap).
    BenchReplay(bench_replay::BenchReplayArgs),
    /// The parallel layouts (TP × PP × VPP × CP × EP × micro batch) on a world: each legal one
    /// with its forecast memory and predicted step, each illegal one with the rules it breaks.
    Layouts(layouts::LayoutsArgs),
    /// Sweep a knob space with short trials: noise-aware successive halving, memory pruning.
    Sweep(sweep::SweepArgs),
    /// HipBLASLt GEMM tuning (the guide's step 1): status, dumped shapes, results, stages.
    GemmTune(gemm_tune::GemmTuneArgs),
    /// A finished sweep as report.md plus charts (PNG and SVG): evidence, memory, telemetry.
    Report(report::ReportArgs),
    /// Shell completions: `primus-tune completions bash > ~/.local/share/bash-completion/completions/primus-tune`.
    Completions(completions::CompletionsArgs),
    /// The manual page (roff), generated from these definitions: `primus-tune man | man -l -`.
    Man(completions::ManArgs),
    /// The effective defaults (profile, GPUs, backend, workspace, colour, mouse, keys, Slurm)
    /// and where each comes from: the environment, the defaults file (file:line:column), or
    /// built in.
    Defaults(defaults::DefaultsArgs),
}

/// How to load an experiment: shared by every subcommand that reads one.
#[derive(Debug, Args, Clone, Default)]
pub struct LoadArgs {
    /// Experiment YAML (default: the bundled example).
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub flags: LoadFlags,
}

/// How to load an experiment, without naming it (`lint` takes several).
#[derive(Debug, Args, Clone, Default)]
pub struct LoadFlags {
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
    /// Where the experiment's trials and studies live (default: $PRIMUS_TUNE_WORKSPACE, else an
    /// existing .primus-tune/ beside the experiment, else a folder under
    /// ~/.local/share/primus-tune/workspaces/).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// GPUs (world size): what lint checks Megatron's parallel and batch sizes against, and
    /// what trials launch. Default: $GPUS_PER_NODE × $NNODES (as the launch sets them), else
    /// `gpus` of the defaults file, else for a trial of a one-process profile (the proxies) its
    /// one process, else the GPUs detected on this node; a Slurm job's world is its nodes ×
    /// --gpus-per-node. With none of these the world is unknown: lint skips its rules and a
    /// launch starts 8 ranks (one 8-GPU node).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub gpus: Option<u64>,
    /// The largest experiment or extends file read, in MiB (default 16, or
    /// $PRIMUS_TUNE_MAX_YAML_MIB): a larger one is refused.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_yaml_mib: Option<u64>,
}

/// Errors the frontend reports before exiting (with the status of their [`exit::Kind`]).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    App(Box<AppError>),
    #[error(transparent)]
    Config(Box<ConfigError>),
    #[error(transparent)]
    Edit(Box<crate::config::doc::EditError>),
    #[error("{0}")]
    Usage(String),
    /// An input named on the command line does not exist.
    #[error("{0}")]
    NoInput(String),
    /// An output named on the command line cannot be created.
    #[error("{0}")]
    CantCreate(String),
    /// The command failed: an input is not valid, an edit was refused, ...
    #[error("{0}")]
    Failed(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<AppError> for CliError {
    fn from(e: AppError) -> Self {
        CliError::App(Box::new(e))
    }
}

impl From<crate::app::DefaultsError> for CliError {
    fn from(e: crate::app::DefaultsError) -> Self {
        CliError::App(Box::new(AppError::from(e)))
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> Self {
        CliError::Config(Box::new(e))
    }
}

impl From<crate::config::doc::EditError> for CliError {
    fn from(e: crate::config::doc::EditError) -> Self {
        CliError::Edit(Box::new(e))
    }
}

impl From<crate::config::edit::SetError> for CliError {
    fn from(e: crate::config::edit::SetError) -> Self {
        use crate::config::edit::SetError;
        match e {
            SetError::Edit(e) => CliError::from(e),
            SetError::Usage(m) => CliError::Usage(m),
            SetError::Config(e) => CliError::Config(e),
        }
    }
}

impl CliError {
    /// An input file named on the command line that cannot be read or is not valid: "no
    /// input" when it does not exist, else a failure. The message names the file.
    pub fn input(path: &std::path::Path, e: impl std::fmt::Display) -> CliError {
        let text = format!("{}: {e}", display_path(path));
        if path.exists() {
            CliError::Failed(text)
        } else {
            CliError::NoInput(text)
        }
    }

    /// Lint errors behind the error, printed under it.
    fn details(&self) -> Vec<String> {
        match self {
            CliError::App(e) => e.diagnostics().iter().map(format_diag).collect(),
            _ => Vec::new(),
        }
    }
}

/// The trial supervisor's process (`primus-tune __supervise ...`); never returns.
pub fn supervise(args: &[std::ffi::OsString]) -> ! {
    let code = crate::run::supervise::run(args, &mut |line| eprintln!("{line}"));
    std::process::exit(code)
}

pub fn run() -> ExitCode {
    use clap::CommandFactory;
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let json = exit::wants_json(&args);
    if let Some(message) = suggest::unknown_command(&Cli::command(), &args[1.min(args.len())..]) {
        return exit::report(exit::Kind::Usage, &message, &[], json);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        // --help, --version: printed, success.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            if json {
                let text = e.render().to_string();
                let message = text.lines().next().unwrap_or_default();
                let message = message.strip_prefix("error: ").unwrap_or(message);
                print_json(&serde_json::json!({"error": {
                    "kind": exit::Kind::Usage.name(),
                    "exit_code": exit::USAGE,
                    "message": message,
                    "details": [],
                }}));
            }
            let _ = e.print();
            return ExitCode::from(exit::USAGE);
        }
    };
    let interactive = !cli.json
        && !cli.no_tui
        && std::io::stdout().is_terminal()
        && std::io::stdin().is_terminal();
    // The defaults file is read (and checked whole) before any command runs: a bad one stops
    // every command but the ones that never read it, naming its file:line:column.
    let uses_defaults = !matches!(
        cli.command,
        Some(Command::Completions(_) | Command::Man(_) | Command::Proxy(_))
    );
    let defaults = if uses_defaults {
        match read_defaults() {
            Ok(d) => d,
            Err(e) => return exit::report(e.kind(), &e.to_string(), &e.details(), json),
        }
    } else {
        crate::app::Defaults::default()
    };
    style::set_choice(
        defaults
            .color(std::env::var_os(crate::app::defaults::NO_COLOR_ENV).as_deref())
            .value,
    );
    let result = match cli.command {
        None if interactive => run_tui(&cli, defaults),
        None => checklist::run(&checklist::ChecklistArgs {
            load: cli.load,
            json: cli.json,
            profile: cli.profile,
        }),
        Some(Command::Lint(a)) => lint::run(&a),
        Some(Command::Show(a)) => show::run(&a),
        Some(Command::Set(a)) => set::run(&a),
        Some(Command::Backups(a)) => backups::run(&a),
        Some(Command::Checklist(a)) => checklist::run(&a),
        Some(Command::Run(a)) => run::run(&a),
        Some(Command::ParseLog(a)) => parse_log::run(&a),
        Some(Command::Trials(a)) => trials::run(&a),
        Some(Command::Studies(a)) => studies::run(&a),
        Some(Command::Monitor(a)) => monitor::run(&a),
        Some(Command::Gpus(a)) => gpus::run(&a),
        Some(Command::Layouts(a)) => layouts::run(&a),
        Some(Command::Proxy(a)) => proxy::run(&a),
        Some(Command::BenchReplay(a)) => bench_replay::run(&a),
        Some(Command::Recommend(a)) => recommend::run(&a),
        Some(Command::Sweep(a)) => sweep::run(&a),
        Some(Command::Report(a)) => report::run(&a),
        Some(Command::GemmTune(a)) => gemm_tune::run(&a),
        Some(Command::Completions(a)) => completions::completions(&a),
        Some(Command::Man(a)) => completions::man(&a),
        Some(Command::Defaults(a)) => defaults::run(&a, &defaults),
    };
    match result {
        Ok(code) => code,
        Err(e) => exit::report(e.kind(), &e.to_string(), &e.details(), json),
    }
}

/// The defaults file, read, with its `[keys]` checked against the TUI's key table (a mistake
/// there is as much an error of the file as a mistyped key).
fn read_defaults() -> Result<crate::app::Defaults, CliError> {
    let d = crate::app::Defaults::load()?;
    crate::tui::keymap::Keymap::with_overrides(&d.keys)?;
    Ok(d)
}

/// `primus-tune [CONFIG]` on a terminal: the TUI (no CONFIG: the editable copy of the bundled
/// example, as every command uses).
fn run_tui(cli: &Cli, defaults: crate::app::Defaults) -> Result<ExitCode, CliError> {
    let telemetry = cli.telemetry.setup(500, false)?;
    let telemetry_backend = cli.telemetry.backend()?.value;
    let keymap = crate::tui::keymap::Keymap::with_overrides(&defaults.keys)?;
    let env = |k: &str| std::env::var_os(k);
    let mouse = defaults
        .mouse(
            cli.no_mouse,
            env(crate::app::defaults::NO_MOUSE_ENV).as_deref(),
        )
        .value;
    let color = defaults
        .color(env(crate::app::defaults::NO_COLOR_ENV).as_deref())
        .value;
    let session = tui_session(&cli.load, telemetry, None, Some(defaults))?;
    let opts = crate::tui::TuiOptions {
        session,
        telemetry_backend,
        roots: cli.telemetry.roots(),
        tour: !cli.no_tour && !crate::app::state::tour_shown(),
        mouse,
        color,
        keymap,
        profile: cli.profile.clone(),
        state_file: crate::app::state::state_path(),
    };
    crate::tui::run(opts)?;
    Ok(ExitCode::SUCCESS)
}

/// The session the TUI opens for these arguments: the experiment (no CONFIG: the bundled
/// example's copy, as every command uses), its workspace, the trials' telemetry. `data_home`
/// stands for `$XDG_DATA_HOME` when given; `defaults` for the defaults file read already.
pub(crate) fn tui_session(
    load: &LoadArgs,
    telemetry: Option<TelemetrySetup>,
    data_home: Option<PathBuf>,
    defaults: Option<crate::app::Defaults>,
) -> Result<Session, CliError> {
    Ok(Session::open(SessionOptions {
        telemetry,
        data_home,
        defaults,
        ..load.options()
    })?)
}

impl LoadFlags {
    /// The session options these flags give, for `config`.
    pub fn options(&self, config: Option<PathBuf>) -> SessionOptions {
        SessionOptions {
            config,
            primus_root: self.primus_root.clone(),
            env: self
                .env
                .iter()
                .cloned()
                .chain(
                    self.max_yaml_mib
                        .map(|m| format!("{}={m}", crate::util::input::CAP_ENV)),
                )
                .collect(),
            overrides: self.overrides.clone(),
            workspace: self.workspace.clone(),
            gpus: self.gpus,
            ..SessionOptions::default()
        }
    }
}

impl LoadArgs {
    /// The session options these arguments give.
    pub fn options(&self) -> SessionOptions {
        self.flags.options(self.config.clone())
    }

    /// The session: the experiment, its environment and workspace, the trials' telemetry.
    pub fn session(&self, telemetry: Option<TelemetrySetup>) -> Result<Session, CliError> {
        Ok(Session::open(SessionOptions {
            telemetry,
            ..self.options()
        })?)
    }

    /// The session whose views resolve as launch profile `profile` launches the experiment
    /// (its `env:` under `--env`, [`crate::app::Session::launched_by`]); None: as the session's
    /// own environment gives it. An unknown profile is a usage error.
    pub fn view_session(&self, profile: Option<&str>) -> Result<crate::app::Session, CliError> {
        let s = self.session(None)?;
        Ok(match profile {
            Some(name) => s.launched_by(&crate::app::trial::find_profile(Some(name))?),
            None => s,
        })
    }

    /// The experiment (with `--set`) and its load options.
    pub fn load(&self) -> Result<(Experiment, LoadOptions), CliError> {
        let s = self.session(None)?;
        let exp = s.load()?;
        Ok((exp, s.load))
    }
}

pub use crate::util::paths::display_path;

/// Print JSON for scripts, floats without noise (`1548.8`, not `1548.8000000000002`).
pub fn print_json(v: &serde_json::Value) {
    let mut v = v.clone();
    crate::util::num::tidy_json(&mut v);
    println!(
        "{}",
        serde_json::to_string_pretty(&v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    );
}

/// One diagnostic as text: `file:line:col: error[code]: message` and an indented hint.
pub fn format_diag(d: &crate::config::diag::Diagnostic) -> String {
    style::diagnostic(d, false)
}

/// Print diagnostics for people: on stdout (`to_stderr`: stderr), `indent`ed, the severity
/// coloured when that stream is a terminal and NO_COLOR is unset.
pub fn print_diags<'d>(
    diags: impl IntoIterator<Item = &'d crate::config::diag::Diagnostic>,
    indent: &str,
    to_stderr: bool,
) {
    let colour = if to_stderr {
        style::stderr()
    } else {
        style::stdout()
    };
    for d in diags {
        let text = style::diagnostic(d, colour).replace('\n', &format!("\n{indent}"));
        if to_stderr {
            std::eprintln!("{indent}{text}");
        } else {
            std::println!("{indent}{text}");
        }
    }
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
