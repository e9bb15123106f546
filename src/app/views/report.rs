//! A finished study as a report: its record, space, trials and the winner's telemetry, read
//! from the workspace, then written as `report.md` plus charts.

use crate::app::{AppError, Session};
use crate::config::{Experiment, LoadOptions};
use crate::report::{self, Inputs, Written};
use crate::tune::space::Space;
use std::collections::BTreeMap;
use std::path::Path;

/// The experiment's main module name, for the YAML snippet (`pre_trainer` when it cannot load).
fn module_of(config: &Path) -> String {
    Experiment::load(config, &LoadOptions::default())
        .map(|e| e.main_module().name.clone())
        .unwrap_or_else(|_| "pre_trainer".to_string())
}

/// Builds the report of study `name` and writes it into `out` (created if missing).
pub fn write(session: &Session, name: &str, out: &Path) -> Result<Vec<Written>, AppError> {
    write_with(session, name, out, &report::charts::ChartOptions::default())
}

/// [`write()`] with the charts' size and resolution.
pub fn write_with(
    session: &Session,
    name: &str,
    out: &Path,
    opts: &report::charts::ChartOptions,
) -> Result<Vec<Written>, AppError> {
    let record = super::studies::finished_record(session, name)?;
    let store = session.require_store()?;
    let study = store
        .study_by_name(name)?
        .ok_or_else(|| AppError::NoStudy {
            name: name.to_string(),
            db: crate::util::paths::display_path(&session.workspace.db),
        })?;
    let space: Option<Space> = study
        .space
        .clone()
        .and_then(|v| serde_json::from_value(v).ok());
    let trials = store.list_trials(&crate::store::TrialFilter::all().study(study.id))?;
    // Telemetry only of the winner's trials: the only ones the report plots.
    let mut samples = BTreeMap::new();
    if let Some(pick) = record.pick() {
        for t in trials.iter().filter(|t| report::ran(t, &pick.overrides)) {
            samples.insert(t.id, store.samples(t.id)?);
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
        memory: super::studies::memory_check(&record),
    });
    rep.write_with(out, opts).map_err(|e| {
        let why = format!(
            "cannot write the report to {}: {e}",
            crate::util::paths::display_path(out)
        );
        // The file system refused (EX_CANTCREAT); else drawing a chart failed.
        if e.raw_os_error().is_some() {
            AppError::CantCreate {
                path: out.to_path_buf(),
                why,
            }
        } else {
            AppError::Failed(why)
        }
    })
}

/// Where the TUI writes a study's report: `<workspace>/reports/<study>/`.
pub fn default_dir(session: &Session, name: &str) -> std::path::PathBuf {
    session.workspace.root.join("reports").join(name)
}
