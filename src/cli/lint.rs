//! `primus-tune lint CONFIG [--gpus N] [--json] [--strict]`

use super::{CliError, LoadArgs, diag_json, display_path, format_diag, print_json};
use crate::config::catalog::Catalog;
use crate::config::diag::counts;
use crate::config::lint::lint;
use crate::megatron::World;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct LintArgs {
    /// The experiment, `--env`, `--set`, and `--gpus N` (the world size Megatron's parallel and
    /// batch sizes are checked against).
    #[command(flatten)]
    pub load: LoadArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Exit with status 1 when there are warnings (errors always give 2).
    #[arg(long)]
    pub strict: bool,
}

/// The world as the summary line says it.
fn world_text(w: Option<&World>) -> String {
    match w {
        Some(w) => w.to_string(),
        None => "world size unknown (no --gpus, GPUS_PER_NODE or GPU detected): its rules skipped"
            .into(),
    }
}

pub fn run(a: &LintArgs) -> Result<ExitCode, CliError> {
    let (exp, opts) = a.load.load()?;
    let world = opts.world.as_ref();
    let diags = lint(&exp, &opts.env, world, Catalog::builtin());
    let (errors, warnings, infos) = counts(&diags);
    if a.json {
        print_json(&serde_json::json!({
            "file": exp.path.display().to_string(),
            "world": world.map(|w| serde_json::json!({
                "gpus": w.gpus,
                "source": w.source_name(),
                "text": w.source_text(),
            })),
            "errors": errors,
            "warnings": warnings,
            "infos": infos,
            "diagnostics": diags.iter().map(diag_json).collect::<Vec<_>>(),
        }));
    } else {
        for d in &diags {
            println!("{}", format_diag(d));
        }
        println!(
            "{}: {errors} error(s), {warnings} warning(s), {infos} note(s); {}",
            display_path(&exp.path),
            world_text(world)
        );
    }
    Ok(if errors > 0 {
        ExitCode::from(2)
    } else if warnings > 0 && a.strict {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
