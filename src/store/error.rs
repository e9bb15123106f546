//! The store's error type. Every variant names the database file (`:memory:` for an in-memory
//! store) and what was being done when it failed.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{}: cannot create the folder for the database: {source}", path.display())]
    CreateDir {
        /// The folder that could not be created.
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}: is a folder, not a database file (name a file, such as {}/trials.db)",
        path.display(),
        path.display()
    )]
    IsAFolder {
        /// The folder named as the database.
        path: PathBuf,
    },
    #[error("{}: {what}: {source}", path.display())]
    Sqlite {
        path: PathBuf,
        what: String,
        #[source]
        source: Box<rusqlite::Error>,
    },
    #[error(
        "{}: {what}: the database stayed locked for more than {} s (another primus-tune process is writing to it?)",
        path.display(),
        timeout.as_secs()
    )]
    Busy {
        path: PathBuf,
        what: String,
        timeout: Duration,
        #[source]
        source: Box<rusqlite::Error>,
    },
    #[error(
        "{}: the database has schema version {found}, newer than this primus-tune knows (up to {known}); use a newer primus-tune or another database file",
        path.display()
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error(
        "{}: not a primus-tune database: it holds tables ({}) but no schema_migrations table",
        path.display(),
        tables.join(", ")
    )]
    Foreign { path: PathBuf, tables: Vec<String> },
    #[error(
        "{}: the database has schema version {found}, older than this primus-tune's {known}, and it is read-only here: open the workspace once with a primus-tune that can write to it (any command upgrades it), or copy the workspace somewhere writable",
        path.display()
    )]
    NeedsUpgrade {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error(
        "{}: {what}: the database is open read-only (its folder or file cannot be written here); nothing was changed",
        path.display()
    )]
    ReadOnly { path: PathBuf, what: String },
    #[error("{}: there is no trial {id}", path.display())]
    NoSuchTrial { path: PathBuf, id: i64 },
    #[error("{}: there is no study {id}", path.display())]
    NoSuchStudy { path: PathBuf, id: i64 },
    #[error("{}: a study named `{name}` already exists (study {id})", path.display())]
    StudyExists {
        path: PathBuf,
        name: String,
        id: i64,
    },
    #[error(
        "{}: finishing trial {id}: the end status must be completed, failed, stopped or interrupted, not running",
        path.display()
    )]
    StillRunning { path: PathBuf, id: i64 },
    #[error("{}: {what}: cannot encode as JSON: {source}", path.display())]
    Encode {
        path: PathBuf,
        what: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: {what}: unexpected stored value: {message}", path.display())]
    Corrupt {
        path: PathBuf,
        what: String,
        message: String,
    },
    #[error("{}: writing the CSV export: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with a [`StoreError`].
pub type StoreResult<T> = std::result::Result<T, StoreError>;
