//! `primus-tune report STUDY [CONFIG] --out DIR [--config CONFIG] [--db DB] [--size WxH]
//! [--dpi N]`: a finished sweep as `report.md` plus charts (PNG and SVG). The study may also be
//! named as `recommend` names it, `report [CONFIG] --study STUDY --out DIR`.

use super::trials::DbArgs;
use super::{CliError, display_path};
use crate::report::Written;
use crate::report::charts::ChartOptions;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The study (its name, as `sweep` printed it).
    #[arg(required_unless_present = "study_flag")]
    pub study: Option<String>,
    /// The study, as `recommend --study` names it (then a single argument is the experiment).
    #[arg(long = "study", value_name = "STUDY")]
    pub study_flag: Option<String>,
    /// Folder to write report.md and the charts into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    #[command(flatten)]
    pub db: DbArgs,
    /// Size of every chart, WIDTHxHEIGHT in pixels at 96 DPI (default: 1600x1000, taller for
    /// many candidates).
    #[arg(long, value_name = "WxH", value_parser = ChartOptions::parse_size)]
    pub size: Option<(u32, u32)>,
    /// Resolution of the PNGs: their pixels are the size × DPI / 96, fonts and lines scaled
    /// alike (192 for a sharp slide). The SVGs are drawn at the size.
    #[arg(long, value_name = "N", default_value_t = 96,
          value_parser = clap::value_parser!(u32).range(48..=600))]
    pub dpi: u32,
}

/// The study and the trial-database arguments: `STUDY [CONFIG]`, or `[CONFIG] --study STUDY`.
fn study_and_db(a: &ReportArgs) -> Result<(&str, DbArgs), CliError> {
    let mut db = a.db.clone();
    match (&a.study, &a.study_flag) {
        (Some(s), None) | (None, Some(s)) => Ok((s, db)),
        (Some(first), Some(s)) if db.experiment.is_none() && db.config.is_none() => {
            db.experiment = Some(PathBuf::from(first));
            Ok((s, db))
        }
        (Some(first), Some(s)) => Err(CliError::Usage(format!(
            "two studies named: `{first}` and --study {s}; name one (report STUDY [CONFIG], or \
             report [CONFIG] --study STUDY)"
        ))),
        (None, None) => Err(CliError::Usage(
            "name the study: report STUDY [CONFIG] --out DIR".to_string(),
        )),
    }
}

pub fn run(a: &ReportArgs) -> Result<ExitCode, CliError> {
    let (study, db) = study_and_db(a)?;
    let session = db.session()?;
    let opts = ChartOptions {
        size: a.size,
        dpi: a.dpi,
    };
    let written = crate::app::views::report::write_with(&session, study, &a.out, &opts)?;
    for w in &written {
        match w {
            Written::File(p) => println!("wrote {}", display_path(p)),
            Written::Skipped { chart, why } => println!("no {chart} chart: {why}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
