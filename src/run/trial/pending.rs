//! A trial's result that the database could not take: when the store stays locked or
//! unavailable past its patience at the end of a trial, everything not yet stored (iterations,
//! memory reports, telemetry, how the trial ended) is written to `result.pending.json` in the
//! trial's folder, and imported into the database the next time a command or the TUI opens
//! the workspace (with the interrupted-trial check, which would otherwise call it interrupted).
//!
//! Iterations go through JSON as they are; a NaN or infinite figure (a diverged loss) is kept
//! as null, i.e. absent.
//!
//! A write that failed for another reason than a lock (a full disk, an I/O error) is tried
//! again after [`RETRY_PAUSES`]; when the folder cannot take the file either (the same full
//! disk), the result is handed to the frontend whole ([`super::TrialEvent::Unstored`]), which
//! prints it: a measurement is never dropped without saying where it went.

use crate::domain::trial::{Iteration, MemoryReport};
use crate::store::{Store, StoreError, TrialEnd};
use crate::telemetry::sampler::Snapshot;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file in the trial's folder.
pub const FILE: &str = "result.pending.json";

/// Pauses before the final write is tried again after a failure that was not a lock (those were
/// waited out for the store's whole patience already): space freed meanwhile is used.
pub const RETRY_PAUSES: [std::time::Duration; 2] = [
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(2),
];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingResult {
    /// The database the trial belongs to (a folder beside another database's is never
    /// imported into the wrong one).
    pub db: PathBuf,
    pub trial_id: i64,
    pub iterations: Vec<Iteration>,
    pub memory: Vec<MemoryReport>,
    pub samples: Vec<Snapshot>,
    pub end: TrialEnd,
}

impl PendingResult {
    /// Store everything it holds (the writes are idempotent: what was stored already is kept).
    pub fn store(&self, store: &Store) -> Result<(), StoreError> {
        store.add_samples(self.trial_id, &self.samples)?;
        store.add_iterations(self.trial_id, &self.iterations)?;
        for m in &self.memory {
            store.add_memory_report(self.trial_id, m)?;
        }
        store.finish_trial(self.trial_id, &self.end)
    }

    /// Write it into the trial's folder (atomically: a temporary file renamed). Compact JSON,
    /// and a temporary file that could not be written whole is removed: on a nearly full disk
    /// every byte counts, and a torn file must not take the space the next attempt needs.
    pub fn keep(&self, trial_dir: &Path) -> std::io::Result<PathBuf> {
        let path = trial_dir.join(FILE);
        let tmp = trial_dir.join(format!(".{FILE}.tmp"));
        let text = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            use std::io::Write;
            f.write_all(&text)?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(path)
    }
}

/// What [`import`] did with a trial's folder.
#[derive(Debug, PartialEq, Eq)]
pub enum Imported {
    /// No pending result for this trial of this database.
    Nothing,
    /// Stored, and the file removed.
    Stored,
}

/// Import the pending result in `trial_dir`, if it is trial `trial_id`'s of `store`.
pub fn import(store: &Store, trial_id: i64, trial_dir: &Path) -> Result<Imported, StoreError> {
    let path = trial_dir.join(FILE);
    let Ok(text) = std::fs::read(&path) else {
        return Ok(Imported::Nothing);
    };
    let Ok(p) = serde_json::from_slice::<PendingResult>(&text) else {
        return Ok(Imported::Nothing);
    };
    let same_db = |a: &Path, b: &Path| {
        a == b || std::fs::canonicalize(a).ok() == std::fs::canonicalize(b).ok()
    };
    if p.trial_id != trial_id || !same_db(&p.db, store.path()) {
        return Ok(Imported::Nothing);
    }
    p.store(store)?;
    let _ = std::fs::remove_file(&path);
    Ok(Imported::Stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{NewTrial, TrialStatus};

    fn trial(store: &Store) -> i64 {
        store
            .insert_trial(&NewTrial {
                study_id: None,
                config_path: "exp.yaml".into(),
                config_hash: "h".into(),
                overrides: Vec::new(),
                profile: None,
                argv: Vec::new(),
                env: Vec::new(),
                trial_dir: PathBuf::new(),
                resolved: None,
            })
            .unwrap()
    }

    #[test]
    fn a_kept_result_is_imported_once_into_its_own_database_only() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::open(&dir.path().join("a.db")).unwrap();
        let b = Store::open(&dir.path().join("b.db")).unwrap();
        let (ta, tb) = (trial(&a), trial(&b));
        let folder = dir.path().join("trial");
        std::fs::create_dir_all(&folder).unwrap();
        let kept = PendingResult {
            db: a.path().to_path_buf(),
            trial_id: ta,
            iterations: vec![Iteration {
                iteration: 1,
                elapsed_ms: Some(100.0),
                loss: Some(f64::NAN),
                ..Iteration::default()
            }],
            memory: Vec::new(),
            samples: Vec::new(),
            end: TrialEnd::new(TrialStatus::Completed, 3.0),
        };
        kept.keep(&folder).unwrap();
        // Another database's trial of the same id, or another id: not imported.
        assert_eq!(import(&b, tb, &folder).unwrap(), Imported::Nothing);
        assert_eq!(import(&a, ta + 1, &folder).unwrap(), Imported::Nothing);
        assert!(folder.join(FILE).is_file());
        assert_eq!(import(&a, ta, &folder).unwrap(), Imported::Stored);
        assert!(!folder.join(FILE).exists());
        let row = a.trial(ta).unwrap().unwrap();
        assert_eq!(row.status, TrialStatus::Completed);
        let its = a.iterations(ta).unwrap();
        assert_eq!(its.len(), 1);
        assert_eq!(its[0].loss, None, "a NaN travels as null");
        assert_eq!(import(&a, ta, &folder).unwrap(), Imported::Nothing);
    }
}
