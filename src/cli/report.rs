//! `primus-tune report STUDY [CONFIG] --out DIR [--config CONFIG] [--db DB]`: a finished sweep as
//! `report.md` plus charts (PNG and SVG).

use super::trials::DbArgs;
use super::{CliError, display_path};
use crate::report::Written;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The study (its name, as `sweep` printed it).
    pub study: String,
    /// Folder to write report.md and the charts into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub db: DbArgs,
}

pub fn run(a: &ReportArgs) -> Result<ExitCode, CliError> {
    let session = a.db.session()?;
    let written = crate::app::views::report::write(&session, &a.study, &a.out)?;
    for w in &written {
        match w {
            Written::File(p) => println!("wrote {}", display_path(p)),
            Written::Skipped { chart, why } => println!("no {chart} chart: {why}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
