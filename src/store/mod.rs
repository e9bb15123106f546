//! The trial store: one SQLite file holding studies, trials, every parsed iteration and
//! Megatron memory report, so nothing measured is lost and trials can be compared later.
//!
//! # Durability and concurrency
//!
//! The database runs in WAL mode with `synchronous=NORMAL`, which survives a crash of the
//! process at any moment; writes that must also survive a power loss or OS crash (finishing a
//! trial, creating a study, marking trials interrupted, migrations) switch the connection to
//! `synchronous=FULL` for their commit, which also makes every earlier commit durable. Each
//! write is one `BEGIN IMMEDIATE` transaction, so a finished trial is stored completely or not
//! at all, and a second primus-tune process waits up to [`BUSY_TIMEOUT`] for the write lock
//! instead of failing at once, and tries again with back-off for up to [`WRITE_PATIENCE`]
//! before it gives up.
//!
//! [`Store`] is `Send + Sync` (the connection sits behind a mutex), so one handle can be shared
//! between the run engine's tasks.
//!
//! # Conventions
//!
//! Timestamps are RFC 3339 UTC strings with milliseconds (`2025-01-31T09:15:02.120Z`, see
//! [`rfc3339_utc`]); they sort as text. Paths are stored as text (lossily for non-UTF-8 paths).
//! Failure classes are stored under their serde names (`oom`, `host-oom`, …). Iterations keep
//! their complete [`Iteration`](crate::domain::trial::Iteration) as JSON, NaN and infinite values included (JSON has no NaN, so
//! those go in a `_nonfinite` side object).

mod acks;
mod error;
mod export;
mod iterdata;
mod leases;
mod readonly;
mod samples;
mod schema;
mod studies;
mod time;
mod trials;
mod types;
mod workspace;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, Transaction, TransactionBehavior};

pub use error::{StoreError, StoreResult};
#[cfg(any(test, feature = "testkit"))]
pub use export::csv_field;
pub use leases::{Lease, Take as LeaseTake};
#[cfg(any(test, feature = "testkit"))]
pub use schema::SCHEMA_VERSION;
pub use time::{now_rfc3339, parse_rfc3339, rfc3339_utc};
#[cfg(any(test, feature = "testkit"))]
pub use types::ParseStatusError;
pub use types::{NewTrial, StudyRow, TrialEnd, TrialFilter, TrialRow, TrialStatus};
pub use workspace::{
    BESIDE as WORKSPACE_BESIDE, DB_FILE as WORKSPACE_DB, Origin as WorkspaceOrigin, Workspace,
};

/// How long one attempt at a write waits for another connection's lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a write keeps trying, attempt after attempt, before it gives up (unless
/// [`PATIENCE_ENV`] says otherwise).
pub const WRITE_PATIENCE: Duration = Duration::from_secs(180);

/// The environment variable that sets the write patience, in seconds.
pub const PATIENCE_ENV: &str = "PRIMUS_TUNE_DB_PATIENCE";

/// The write patience: [`PATIENCE_ENV`] when it holds a number of seconds, else
/// [`WRITE_PATIENCE`].
fn default_patience() -> Duration {
    std::env::var(PATIENCE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map_or(WRITE_PATIENCE, Duration::from_secs_f64)
}

/// An open trial database.
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    journal_mode: String,
    /// How long a write keeps trying, in milliseconds (see [`Store::with_patience`]).
    patience_ms: std::sync::atomic::AtomicU64,
    /// Opened read-only ([`Store::open_read_only`]): every write is refused up front.
    read_only: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("journal_mode", &self.journal_mode)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating the file and its folders if needed) the database at `path` and brings
    /// its schema up to date. Refuses a database written by a newer primus-tune and an SQLite
    /// file that is not a primus-tune database, without changing either.
    pub fn open(path: &Path) -> StoreResult<Store> {
        if path.is_dir() {
            return Err(StoreError::IsAFolder {
                path: path.to_path_buf(),
            });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path).ctx(path, "open the database")?;
        Store::init(conn, path.to_path_buf(), true)
    }

    /// A private database in memory, for tests.
    pub fn open_in_memory() -> StoreResult<Store> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().ctx(&path, "open an in-memory database")?;
        Store::init(conn, path, false)
    }

    fn init(conn: Connection, path: PathBuf, file: bool) -> StoreResult<Store> {
        let patience = default_patience();
        conn.busy_timeout(BUSY_TIMEOUT.min(patience))
            .ctx(&path, "set the busy timeout")?;
        let mut store = Store {
            conn: Mutex::new(conn),
            path,
            journal_mode: "memory".into(),
            patience_ms: (patience.as_millis() as u64).into(),
            read_only: false,
        };
        // Read-only checks first, so a database we must refuse is left exactly as it was.
        store.preflight()?;
        let journal_mode = {
            let conn = store.lock();
            let mode: String = if file {
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
                    .ctx(&store.path, "switch to WAL journal mode")?
            } else {
                "memory".into()
            };
            conn.pragma_update(None, "foreign_keys", "ON")
                .ctx(&store.path, "enable foreign keys")?;
            store.with_sync(&conn, "NORMAL")?;
            mode
        };
        store.journal_mode = journal_mode;
        store.migrate()?;
        Ok(store)
    }

    /// How long a write waits for a lock another process holds.
    pub fn patience(&self) -> Duration {
        Duration::from_millis(self.patience_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Runs `f` with writes waiting at most `patience` for another process's lock (zero: one
    /// attempt that does not wait), then restores the store's own patience. A trial's writes
    /// while it runs use a short one, so a locked database never stalls the watch of the log;
    /// what they could not store is written at the end.
    pub fn with_patience<T>(&self, patience: Duration, f: impl FnOnce() -> T) -> T {
        use std::sync::atomic::Ordering::Relaxed;
        let before = self.patience_ms.swap(patience.as_millis() as u64, Relaxed);
        let _ = self.lock().busy_timeout(BUSY_TIMEOUT.min(patience));
        let out = f();
        self.patience_ms.store(before, Relaxed);
        let _ = self
            .lock()
            .busy_timeout(BUSY_TIMEOUT.min(Duration::from_millis(before)));
        out
    }

    /// The database file (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// SQLite's journal mode: `wal` normally; `memory` in memory; something else when the
    /// file system cannot do WAL (the store still works, with less concurrency).
    pub fn journal_mode(&self) -> &str {
        &self.journal_mode
    }

    /// The connection. A panic while it was held poisons nothing that matters: an open
    /// transaction was rolled back when its guard dropped.
    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn with_sync(&self, conn: &Connection, level: &str) -> StoreResult<()> {
        conn.pragma_update(None, "synchronous", level)
            .ctx(&self.path, "set synchronous")
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction and commits it; `durable` commits with
    /// `synchronous=FULL`. A lock another process holds past [`BUSY_TIMEOUT`] is waited out,
    /// with back-off, for up to [`WRITE_PATIENCE`] in all (a finished measurement is not thrown
    /// away because another primus-tune held the database for a while); then the `Busy` error
    /// says how long it waited.
    fn write<T>(
        &self,
        what: &str,
        durable: bool,
        mut f: impl FnMut(&Transaction<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        if self.read_only {
            return Err(StoreError::ReadOnly {
                path: self.path.clone(),
                what: what.to_owned(),
            });
        }
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(250);
        loop {
            match self.write_once(what, durable, &mut f) {
                Err(StoreError::Busy {
                    path, what, source, ..
                }) => {
                    let waited = started.elapsed();
                    if waited >= self.patience() {
                        return Err(StoreError::Busy {
                            path,
                            what,
                            timeout: waited,
                            source,
                        });
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(4));
                }
                other => return other,
            }
        }
    }

    fn write_once<T>(
        &self,
        what: &str,
        durable: bool,
        f: &mut impl FnMut(&Transaction<'_>) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let mut conn = self.lock();
        if durable {
            self.with_sync(&conn, "FULL")?;
        }
        let result = (|| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .ctx(&self.path, what)?;
            let value = f(&tx)?;
            tx.commit().ctx(&self.path, what)?;
            Ok(value)
        })();
        if durable {
            let restored = self.with_sync(&conn, "NORMAL");
            if result.is_ok() {
                restored?;
            }
        }
        result
    }

    fn corrupt(&self, what: impl Into<String>, message: impl std::fmt::Display) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what: what.into(),
            message: message.to_string(),
        }
    }

    fn encode_err(&self, what: &str) -> impl FnOnce(serde_json::Error) -> StoreError + '_ {
        let what = what.to_owned();
        move |source| StoreError::Encode {
            path: self.path.clone(),
            what,
            source,
        }
    }
}

/// Attaches the database path and the failed step to an SQLite error.
pub(crate) trait Ctx<T> {
    fn ctx(self, path: &Path, what: &str) -> StoreResult<T>;
}

impl<T> Ctx<T> for rusqlite::Result<T> {
    fn ctx(self, path: &Path, what: &str) -> StoreResult<T> {
        self.map_err(|err| {
            let busy = matches!(
                err.sqlite_error_code(),
                Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
            );
            let source = Box::new(err);
            if busy {
                StoreError::Busy {
                    path: path.to_path_buf(),
                    what: what.to_owned(),
                    timeout: BUSY_TIMEOUT,
                    source,
                }
            } else {
                StoreError::Sqlite {
                    path: path.to_path_buf(),
                    what: what.to_owned(),
                    source,
                }
            }
        })
    }
}

/// Widens a count or iteration number for SQLite (which has no unsigned 64-bit integers).
fn sql_u64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The inverse of [`sql_u64`]; negative values (never written) read as 0.
fn from_sql_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Store>();
    }

    #[test]
    fn busy_errors_say_so() {
        let err: rusqlite::Result<()> = Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
            None,
        ));
        let err = err.ctx(Path::new("/x/t.db"), "insert trial").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("/x/t.db: insert trial: the database stayed locked"),
            "{text}"
        );
    }
}
