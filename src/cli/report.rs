//! `primus-tune report STUDY --out DIR [--config CONFIG] [--db DB]`: a finished sweep as
//! `report.md` plus charts (PNG and SVG).

use super::{CliError, display_path};
use crate::config::{Experiment, LoadOptions};
use crate::domain::study::StudyRecord;
use crate::report::{self, Inputs, Written};
use crate::store::{Store, TrialFilter};
use crate::tune::space::Space;
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The study (its name, as `sweep` printed it).
    pub study: String,
    /// Folder to write report.md and the charts into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The experiment the study swept (its trial database is .primus-tune/trials.db beside it).
    /// Default: the current folder's .primus-tune/trials.db, else the bundled example's.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The trial database, instead of the one beside --config.
    #[arg(long)]
    pub db: Option<PathBuf>,
}

/// The experiment's main module name, for the YAML snippet (`pre_trainer` when it cannot load).
fn module_of(config: &Path) -> String {
    Experiment::load(config, &LoadOptions::default())
        .map(|e| e.main_module().name.clone())
        .unwrap_or_else(|_| "pre_trainer".to_string())
}

pub fn run(a: &ReportArgs) -> Result<ExitCode, CliError> {
    let usage = |e: crate::store::StoreError| CliError::Usage(e.to_string());
    let db = super::trials::DbArgs {
        db: a.db.clone(),
        config: a.config.clone(),
    }
    .path()?;
    if !db.is_file() {
        return Err(CliError::Usage(format!(
            "{}: no trial database (run a sweep first: primus-tune sweep CONFIG --space NAME)",
            display_path(&db)
        )));
    }
    let store = Store::open(&db).map_err(usage)?;
    let name = &a.study;
    let study = store
        .study_by_name(name)
        .map_err(usage)?
        .ok_or_else(|| CliError::Usage(format!("no study `{name}` in {}", display_path(&db))))?;
    let record: StudyRecord = study
        .notes
        .as_deref()
        .and_then(|n| serde_json::from_str(n).ok())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "study `{name}` has no result yet (finish it with `primus-tune sweep --resume {name}`)"
            ))
        })?;
    let space: Option<Space> = study
        .space
        .clone()
        .and_then(|v| serde_json::from_value(v).ok());
    let trials = store
        .list_trials(&TrialFilter::all().study(study.id))
        .map_err(usage)?;
    // Telemetry only of the winner's trials: the only ones the report plots.
    let mut samples = BTreeMap::new();
    if let Some(pick) = record
        .pick
        .and_then(|p| record.candidates.iter().find(|c| c.id == p))
    {
        for t in trials.iter().filter(|t| report::ran(t, &pick.overrides)) {
            samples.insert(t.id, store.samples(t.id).map_err(usage)?);
        }
    }
    let module = module_of(Path::new(&record.config));
    let rep = report::build(&Inputs {
        name,
        record: &record,
        space: space.as_ref(),
        trials: &trials,
        samples: &samples,
        module: &module,
    });
    let written = rep.write(&a.out).map_err(|e| {
        CliError::Usage(format!(
            "cannot write the report to {}: {e}",
            display_path(&a.out)
        ))
    })?;
    for w in &written {
        match w {
            Written::File(p) => println!("wrote {}", display_path(p)),
            Written::Skipped { chart, why } => println!("no {chart} chart: {why}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}
