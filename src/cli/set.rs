//! `primus-tune set CONFIG KEY=VALUE ... [--write] [--no-backup] [--json]`

use super::{CliError, LoadArgs, LoadFlags, diag_json, display_path, print_json};
use crate::config::catalog::Catalog;
use crate::config::doc::{EditKind, SaveOptions};
use crate::config::edit::{self, SetRequest};
use crate::config::literal;
use crate::util::text::one_line;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct SetArgs {
    /// Experiment YAML to edit.
    pub config: PathBuf,
    /// Values to set, e.g. micro_batch_size=4 turbo_deepep_num_cu=80.
    #[arg(value_name = "KEY=VALUE", required = true)]
    pub assignments: Vec<String>,
    /// Save the change (default: dry run that prints the diff).
    #[arg(long)]
    pub write: bool,
    /// Do not keep the version a write replaces (kept in the workspace: `primus-tune backups`
    /// lists and restores them).
    #[arg(long)]
    pub no_backup: bool,
    /// Write even when the change breaks a cross-flag rule or sets a key no preset knows.
    #[arg(long)]
    pub force: bool,
    /// The module whose overrides get new keys (default: pre_trainer).
    #[arg(long)]
    pub module: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The Primus root (default: found by walking up from the experiment, else $PRIMUS_ROOT).
    #[arg(long, value_name = "DIR")]
    pub primus_root: Option<PathBuf>,
    /// Set an environment variable for the check (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// GPUs (world size) the edit is checked against (Megatron's parallel and batch asserts).
    /// Default: $GPUS_PER_NODE × $NNODES, else `gpus` of the defaults file, else the GPUs
    /// detected on this node; unknown: the world rules are skipped.
    #[arg(long, value_name = "N")]
    pub gpus: Option<u64>,
}

pub fn run(a: &SetArgs) -> Result<ExitCode, CliError> {
    let requests = a
        .assignments
        .iter()
        .map(|s| SetRequest::parse(s).map_err(CliError::Usage))
        .collect::<Result<Vec<_>, _>>()?;
    let load = LoadArgs {
        config: Some(a.config.clone()),
        flags: LoadFlags {
            primus_root: a.primus_root.clone(),
            env: a.env.clone(),
            gpus: a.gpus,
            ..LoadFlags::default()
        },
    };
    let (exp, opts) = load.load()?;
    let catalog = Catalog::builtin();
    let mut plan = edit::plan(
        &exp,
        &opts,
        &requests,
        a.module.as_deref(),
        a.force,
        catalog,
    )?;
    let diff = plan.doc.diff();
    let mut backup = None;
    let written = a.write && !plan.refused;
    if written {
        let backups = if a.no_backup {
            None
        } else {
            Some(load.session(None)?.backups_of(&exp.path))
        };
        backup = plan.doc.save(SaveOptions { backups })?;
    }
    if a.json {
        print_json(&serde_json::json!({
            "file": exp.path.display().to_string(),
            "refused": plan.refused,
            "written": written,
            "backup": backup.as_ref().map(|b| b.display().to_string()),
            "changes": plan.changes.iter().map(|c| serde_json::json!({
                "key": c.key,
                "old": c.old.as_ref().map(|v| v.to_json()),
                // The one shape of `source` (show's): null when the key was unset.
                "old_source": c.old_source.as_ref().map(|o| crate::config::source::origin_json(Some(o))),
                "new": c.new.to_json(),
                "written_as": c.literal,
                "action": match c.kind { EditKind::Replaced => "replaced", EditKind::Added => "added" },
                "line": c.line,
            })).collect::<Vec<_>>(),
            "diagnostics": plan.diagnostics.iter().map(diag_json).collect::<Vec<_>>(),
            "diff": diff,
        }));
    } else {
        super::print_diags(&plan.diagnostics, "", true);
        if plan.refused {
            eprintln!("{}: nothing was written", display_path(&exp.path));
        } else {
            print!("{diff}");
            for c in &plan.changes {
                let old = c
                    .old
                    .as_ref()
                    .map(|v| {
                        let from = c.old_source.as_ref().map(|o| o.describe());
                        format!(
                            "{} ({})",
                            literal::render(v, None),
                            from.unwrap_or_default()
                        )
                    })
                    .unwrap_or_else(|| "unset".into());
                let what = match c.kind {
                    EditKind::Replaced => "replaced",
                    EditKind::Added => "added",
                };
                // A key or literal holding a line break prints as one line: a raw newline would
                // make its tail read as another key's change.
                println!(
                    "{}: {} → {} ({what} at {}:{})",
                    one_line(&c.key),
                    one_line(&old),
                    one_line(&c.literal),
                    display_path(&exp.path),
                    c.line
                );
            }
            if written {
                println!(
                    "saved {}{}",
                    display_path(&exp.path),
                    backup
                        .as_ref()
                        .map(|_| format!(
                            " (the version it replaced is kept: primus-tune backups {})",
                            crate::app::sweep::shell_word(&display_path(&exp.path))
                        ))
                        .unwrap_or_default()
                );
            } else {
                println!("dry run: nothing written; add --write to save");
            }
        }
    }
    Ok(if plan.refused {
        ExitCode::from(super::exit::ERRORS)
    } else {
        ExitCode::SUCCESS
    })
}
