//! `primus-tune trials [--all] [--json | --csv]`, `trials show ID` and `trials compare A B`.

use super::{CliError, display_path, print_json};
use crate::app::views::compare::{Change, Comparison, show_json};
use crate::app::views::trials::{self, TrialSummary};
use crate::app::{Session, SessionOptions};
use crate::store::{TrialFilter, TrialRow, TrialStatus};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct TrialsArgs {
    #[command(subcommand)]
    pub command: Option<TrialsCommand>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Only trials with this status (running, completed, failed, stopped, interrupted).
    #[arg(long)]
    pub status: Option<String>,
    /// Only the last N trials.
    #[arg(long)]
    pub last: Option<usize>,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Export CSV.
    #[arg(long)]
    pub csv: bool,
    /// List the trials of every experiment in the workspace, with an experiment column
    /// (default: the experiment's own).
    #[arg(long)]
    pub all: bool,
}

/// Which workspace to read: an experiment's, a folder, or a database file.
#[derive(Debug, Args, Clone)]
pub struct DbArgs {
    /// The trial database (default: the workspace's; without --config, ./.primus-tune/ when it
    /// holds one, else the bundled example's).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
    /// The experiment whose trials to read.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// The workspace folder (as for `run`).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TrialsCommand {
    /// One trial in detail: settings, figures, failure, iterations.
    Show {
        id: i64,
        /// Print JSON (the trial with its iterations).
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Export the trial's iterations as CSV.
        #[arg(long)]
        csv: bool,
    },
    /// Two trials side by side: the flags they ran differently, step time, throughput and
    /// memory with the change and its 95 % interval, and a verdict (B against A).
    Compare {
        a: i64,
        b: i64,
        /// Print JSON: {a, b, differences: [{flag, a, b}], median_step_ms: {a, b, change_pct,
        /// ci95_pct}, ..., verdict}.
        #[arg(long)]
        json: bool,
    },
}

impl DbArgs {
    pub fn session(&self) -> Result<Session, CliError> {
        Ok(Session::open(SessionOptions {
            config: self.config.clone(),
            db: self.db.clone(),
            workspace: self.workspace.clone(),
            workspace_here: true,
            ..SessionOptions::default()
        })?)
    }
}

pub fn run(a: &TrialsArgs) -> Result<ExitCode, CliError> {
    let mut session = a.db.session()?;
    session.all_experiments |= a.all;
    let store = session.require_store()?;
    let usage = |e: crate::store::StoreError| CliError::Usage(e.to_string());
    if let Some(TrialsCommand::Compare { a: x, b: y, json }) = &a.command {
        let c = trials::compare(&session, *x, *y)?;
        if *json {
            print_json(&serde_json::to_value(&c).unwrap_or_default());
        } else {
            print_comparison(&c);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(TrialsCommand::Show { id, json, csv }) = &a.command {
        let t = store.trial(*id).map_err(usage)?.ok_or_else(|| {
            CliError::Usage(format!("no trial {id} in {}", display_path(store.path())))
        })?;
        if *csv {
            let mut out = std::io::stdout().lock();
            store.export_iterations_csv(&mut out, *id).map_err(usage)?;
            return Ok(ExitCode::SUCCESS);
        }
        let iters = store.iterations(*id).map_err(usage)?;
        let summary = trials::summary(&session, *id)?;
        if *json {
            let mut v = serde_json::to_value(&summary).unwrap_or_default();
            v["resolved"] =
                serde_json::to_value(crate::run::trial::trial_params(&t)).unwrap_or_default();
            v["iterations"] = serde_json::to_value(&iters).unwrap_or_default();
            v["memory_reports"] =
                serde_json::to_value(store.memory_reports(*id).map_err(usage)?).unwrap_or_default();
            print_json(&v);
            return Ok(ExitCode::SUCCESS);
        }
        print_detail(&summary, iters.len());
        return Ok(ExitCode::SUCCESS);
    }
    let mut filter = TrialFilter::all();
    if let Some(s) = &a.status {
        let st: TrialStatus = s
            .parse()
            .map_err(|e: crate::domain::trial::ParseStatusError| CliError::Usage(e.to_string()))?;
        filter = filter.status(st);
    }
    if let Some(n) = a.last {
        filter = filter.last(n);
    }
    if a.csv {
        let mut out = std::io::stdout().lock();
        store.export_trials_csv(&mut out, &filter).map_err(usage)?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows = trials::list(&session, &filter)?;
    if a.json {
        print_json(&serde_json::to_value(&rows).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let all = session.all_experiments;
    println!(
        "{:>4} {:<11} {:>10} {:>8} {:>11} {:>8} {:>13}  {:<10} {}differs from the config",
        "id",
        "status",
        "median ms",
        "±CI %",
        "tokens/s/GPU",
        "TFLOP/s",
        "peak GiB",
        "profile",
        if all { "experiment            " } else { "" }
    );
    for t in &rows {
        let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |x| format!("{x:.p$}"));
        let ci = match (t.median_step_ms, t.ci95_ms) {
            (Some(m), Some(c)) if m > 0.0 => format!("{:.2}", 100.0 * c / m),
            _ => "-".into(),
        };
        let status = match &t.failure {
            Some(fl) if t.status != TrialStatus::Completed => serde_json::to_value(fl.class)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| t.status.to_string()),
            _ => t.status.to_string(),
        };
        println!(
            "{:>4} {:<11} {:>10} {:>8} {:>11} {:>8} {:>13}  {:<10} {}{}",
            t.id,
            status,
            f(t.median_step_ms, 1),
            ci,
            f(t.tokens_per_s_per_gpu, 0),
            f(t.tflops_per_gpu, 1),
            mem_cell(t),
            t.profile.clone().unwrap_or_default(),
            if all {
                format!("{:<22}", experiment_name(t))
            } else {
                String::new()
            },
            t.settings_text()
        );
    }
    if rows.is_empty() {
        if all {
            println!("(no trials)");
        } else {
            println!(
                "(no trials of {}; --all lists every experiment's)",
                session.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Peak memory with what it measures (`61.20 alloc`, `63.80 device`): the kinds differ.
fn mem_cell(t: &TrialRow) -> String {
    match (t.peak_mem_gib, t.peak_mem_kind()) {
        (Some(g), Some(k)) => format!("{g:.2} {}", k.tag()),
        (Some(g), None) => format!("{g:.2}"),
        _ => "-".into(),
    }
}

fn experiment_name(t: &TrialSummary) -> String {
    t.config_path
        .file_name()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

fn change_text(c: &Change, prec: usize) -> String {
    let ci = c.ci95_pct.map_or(String::new(), |ci| format!(" ± {ci:.1}"));
    format!(
        "{:>12.prec$} {:>12.prec$}   {:+.1}{ci} %",
        c.a, c.b, c.change_pct
    )
}

fn print_comparison(c: &Comparison) {
    println!("trial {} against trial {}", c.b, c.a);
    if c.experiments[0] != c.experiments[1] {
        println!("  experiments: {} | {}", c.experiments[0], c.experiments[1]);
    }
    println!(
        "  {:<24} {:>12} {:>12}   change (95 % CI)",
        "",
        format!("trial {}", c.a),
        format!("trial {}", c.b)
    );
    let figures = [
        ("median step ms", &c.median_step_ms, 1),
        ("tokens/s/GPU", &c.tokens_per_s_per_gpu, 0),
        ("TFLOP/s/GPU", &c.tflops_per_gpu, 1),
    ];
    for (name, ch, prec) in figures {
        match ch {
            Some(ch) => println!("  {name:<24} {}", change_text(ch, prec)),
            None => println!("  {name:<24} {:>12} {:>12}", "-", "-"),
        }
    }
    let tag = |k: Option<crate::domain::trial::MemorySource>| k.map_or("?", |k| k.tag());
    match (&c.peak_mem_gib, c.peak_mem_kinds) {
        (Some(ch), [k, _]) => println!(
            "  {:<24} {}",
            format!("peak memory GiB ({})", tag(k)),
            change_text(ch, 2)
        ),
        (None, [ka, kb]) if ka != kb => println!(
            "  {:<24} not comparable: trial {} measured {}, trial {} {}",
            "peak memory GiB",
            c.a,
            ka.map_or("nothing", |k| k.label()),
            c.b,
            kb.map_or("nothing", |k| k.label())
        ),
        (None, _) => println!("  {:<24} {:>12} {:>12}", "peak memory GiB", "-", "-"),
    }
    println!("  verdict: trial {} is {}", c.b, c.verdict.text());
    if c.differences.is_empty() {
        println!("  settings: they ran the same values");
    } else {
        println!("  settings that differ:");
        for d in &c.differences {
            println!(
                "    {:<40} {:>14} {:>14}",
                d.flag,
                show_json(&d.a),
                show_json(&d.b)
            );
        }
    }
}

fn overrides_text(t: &TrialRow) -> String {
    t.overrides
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_detail(s: &TrialSummary, stored_iters: usize) {
    let t = &s.row;
    println!("trial {} — {}", t.id, t.status);
    if let Some(f) = &t.failure {
        println!("  failure: {}", f.class.label());
        if let Some(l) = &f.line {
            println!("  cause:   {l}");
        }
    }
    println!(
        "  config:  {} (hash {})",
        t.config_path.display(),
        t.config_hash
    );
    println!("  profile: {}", t.profile.clone().unwrap_or_default());
    println!("  overrides: {}", overrides_text(t));
    println!("  differs from the config now: {}", s.settings_text());
    println!("  argv:    {}", crate::util::shell::join(&t.argv));
    println!("  folder:  {}", t.trial_dir.display());
    println!(
        "  started {} | finished {} | wall {} s | exit {}",
        t.started_at.clone().unwrap_or_else(|| "-".into()),
        t.finished_at.clone().unwrap_or_else(|| "-".into()),
        t.wall_s.map_or("-".into(), |w| format!("{w:.1}")),
        t.exit_code
            .map(|c| c.to_string())
            .or(t.exit_signal.map(|s| format!("signal {s}")))
            .unwrap_or_else(|| "-".into())
    );
    println!(
        "  iterations: {} seen, {stored_iters} stored",
        t.iterations_seen
    );
    if let Some(s) = &t.summary
        && let Ok(sum) = serde_json::from_value::<crate::domain::trial::Summary>(s.clone())
    {
        super::parse_log::print_summary(&sum);
    }
}
