//! `primus-tune studies [CONFIG] [--json]`: the experiment's sweeps, and `studies show STUDY`.

use super::{CliError, print_json};
use crate::app::views::studies::{self, StudySummary};
use crate::app::{Session, SessionOptions};
use crate::domain::study::settings;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct StudiesArgs {
    #[command(subcommand)]
    pub command: Option<StudiesCommand>,
    /// The experiment whose studies to list (default: ./.primus-tune/ when it holds a database,
    /// else the bundled example).
    pub config: Option<PathBuf>,
    /// The trial database (default: the workspace's).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
    /// The workspace folder (as for `run`).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Print JSON: a list of {name, space, experiment, status, trials, gpu_seconds, pick, ...}.
    #[arg(long, global = true)]
    pub json: bool,
    /// List the studies of every experiment in the workspace (default: this experiment's).
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Subcommand)]
pub enum StudiesCommand {
    /// One study: its candidates ranked with their verdicts (the same table `sweep` prints).
    Show {
        study: String,
        /// The experiment the study belongs to.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Also print the search's decision log: what it skipped and why, the launches its
        /// races stopped, the tie-breaks, the pick (with --json it is always in `record.log`).
        #[arg(long)]
        log: bool,
    },
}

fn session(a: &StudiesArgs, config: Option<PathBuf>) -> Result<Session, CliError> {
    Ok(Session::open(SessionOptions {
        config: config.or_else(|| a.config.clone()),
        db: a.db.clone(),
        workspace: a.workspace.clone(),
        workspace_here: true,
        ..SessionOptions::default()
    })?)
}

/// The search's decision log of a finished study, one line each.
fn print_log(r: &crate::domain::study::StudyRecord) {
    println!();
    if r.log.is_empty() {
        println!("decision log: empty");
        return;
    }
    println!("decision log ({} lines):", r.log.len());
    for l in &r.log {
        println!("  {l}");
    }
}

fn pick_text(s: &StudySummary) -> String {
    s.pick.as_ref().map_or("-".into(), settings)
}

pub fn run(a: &StudiesArgs) -> Result<ExitCode, CliError> {
    if let Some(StudiesCommand::Show { study, config, log }) = &a.command {
        let s = session(a, config.clone())?;
        let d = studies::detail(&s, study)?;
        if a.json {
            let mut v = serde_json::to_value(&d.summary).unwrap_or_default();
            v["record"] = serde_json::to_value(&d.record).unwrap_or_default();
            print_json(&v);
            return Ok(ExitCode::SUCCESS);
        }
        match &d.record {
            Some(r) => {
                super::sweep::print_record(study, r);
                if *log {
                    print_log(r);
                }
            }
            None => {
                println!(
                    "study {study}: {} — {} so far; continue with: {}",
                    d.summary.status.as_str(),
                    crate::util::text::count(d.summary.trials as usize, "trial", "trials"),
                    studies::resume_hint(&s, &d.summary)
                );
                if *log {
                    println!(
                        "decision log: none yet (a study stores it when its search ends; a \
                         resumed search decides again from the stored trials)"
                    );
                }
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut s = session(a, None)?;
    s.all_experiments |= a.all;
    let list = studies::list(&s)?;
    if a.json {
        print_json(&serde_json::to_value(&list).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    if list.is_empty() {
        println!(
            "(no studies for {}; start one with: primus-tune sweep {} --space NAME)",
            s.display(),
            s.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let all = s.all_experiments;
    println!(
        "{:<28} {:<16} {:<10} {:>6} {:>8}  {:<20} {}pick",
        "study",
        "space",
        "status",
        "trials",
        "GPU-min",
        "started",
        if all { "experiment  " } else { "" }
    );
    for st in &list {
        println!(
            "{:<28} {:<16} {:<10} {:>6} {:>8.1}  {:<20} {}{}",
            st.name,
            st.space,
            st.status.as_str(),
            st.trials,
            st.gpu_seconds / 60.0,
            st.started.get(..19).unwrap_or(&st.started),
            if all {
                format!("{}  ", st.experiment)
            } else {
                String::new()
            },
            pick_text(st)
        );
    }
    Ok(ExitCode::SUCCESS)
}
