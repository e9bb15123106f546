//! `primus-tune backups [CONFIG] [--restore ID [--write]] [--json]`: the versions of the
//! experiment that saves replaced (kept in the workspace, never beside the file), and restoring
//! one.

use super::{CliError, LoadArgs, display_path, print_json};
use crate::app::backups;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct BackupsArgs {
    /// The experiment, `--workspace`.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Restore this version (`1` the newest, `original` the file before its first save):
    /// prints the diff, and with --write saves it (the version it replaces is kept in turn).
    #[arg(long, value_name = "ID")]
    pub restore: Option<String>,
    /// With --restore: write the file (default: show the diff only).
    #[arg(long)]
    pub write: bool,
    /// Print JSON: the list, or {id, written, kept, diff}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &BackupsArgs) -> Result<ExitCode, CliError> {
    let session = a.load.session(None)?;
    if let Some(id) = &a.restore {
        let r = backups::restore(&session, id, a.write)?;
        if a.json {
            print_json(&serde_json::json!({
                "id": r.id, "written": r.written,
                "kept": r.kept.as_ref().map(|k| k.display().to_string()),
                "diff": r.diff,
            }));
        } else if r.diff.is_empty() {
            println!(
                "{} is already version {id}: nothing to restore",
                session.display()
            );
        } else {
            print!("{}", r.diff);
            if r.written {
                println!(
                    "restored version {id} of {} (the version it replaced is kept)",
                    session.display()
                );
            } else {
                println!("dry run: nothing written; add --write to restore");
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let list = backups::list(&session)?;
    if a.json {
        print_json(&serde_json::to_value(&list).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    if list.is_empty() {
        println!(
            "no kept version of {} yet (every save keeps the version it replaces)",
            session.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "versions of {} a save replaced, newest first:",
        session.display()
    );
    println!(
        "{:>9}  {:<24} {:>8} {:>14}",
        "id", "replaced at", "bytes", "lines changed"
    );
    for b in &list {
        println!(
            "{:>9}  {:<24} {:>8} {:>14}",
            b.id,
            b.saved_at.as_deref().unwrap_or("(before the first save)"),
            b.bytes,
            b.lines_changed
        );
    }
    if let Some(first) = list.first() {
        println!(
            "kept in {}; `primus-tune backups {} --restore {}` shows what restoring it changes",
            display_path(first.path.parent().unwrap_or(&first.path)),
            crate::app::sweep::shell_word(&session.display()),
            first.id
        );
    }
    Ok(ExitCode::SUCCESS)
}
