//! Reading a workspace that cannot be written: a read-only mount, a colleague's folder, a
//! full disk. A command that only reads (`trials`, `studies`, `trials show`, the views) opens
//! the database as usual when it can — so migrations run and interrupted trials are reaped — and
//! falls back to a read-only connection when that fails: no journal-mode switch, no migration,
//! no write of any kind ([`Store::write`] refuses up front on such a store).
//!
//! A WAL database whose `-wal`/`-shm` files are absent (the last writer closed cleanly) cannot
//! be opened even read-only where those files cannot be created; it is then opened
//! `immutable`, which tells SQLite nobody changes the file while it is open. Through a
//! read-only mount that holds for this process; a writer elsewhere (the mount's source) may
//! make a long listing see a torn state, which is the price of reading at all.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::schema::SCHEMA_VERSION;
use super::{Ctx, Store, StoreError, StoreResult};

impl Store {
    /// Opens the database at `path` for a command that only reads: read-write when possible
    /// (see [`Store::open`]), else read-only. When the read-only open fails too, the first
    /// error is the one returned (it says why writing failed), unless the read-only one says
    /// the schema needs an upgrade it cannot make.
    pub fn open_for_reading(path: &Path) -> StoreResult<Store> {
        match Store::open(path) {
            Err(first @ (StoreError::Sqlite { .. } | StoreError::CreateDir { .. })) => {
                match Store::open_read_only(path) {
                    Ok(s) => {
                        tracing::info!(path = %path.display(), error = %first, "opened read-only");
                        Ok(s)
                    }
                    Err(e @ StoreError::NeedsUpgrade { .. }) => Err(e),
                    Err(_) => Err(first),
                }
            }
            other => other,
        }
    }

    /// Opens an existing database read-only (`SQLITE_OPEN_READ_ONLY`): nothing is created,
    /// migrated or written. Refuses a database of another schema version than this
    /// primus-tune's: a newer one as [`Store::open`] does, an older one saying it must be
    /// upgraded by a run that can write.
    pub fn open_read_only(path: &Path) -> StoreResult<Store> {
        let store = match Store::read_only_conn(path, false) {
            Ok(s) => s,
            Err(StoreError::Sqlite { .. }) => Store::read_only_conn(path, true)?,
            Err(e) => return Err(e),
        };
        let found = store.schema_version()?;
        if found < SCHEMA_VERSION {
            return Err(StoreError::NeedsUpgrade {
                path: path.to_path_buf(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        Ok(store)
    }

    /// A read-only connection, checked by reading the schema version (a WAL database that
    /// cannot be read this way fails here, not later in a listing).
    fn read_only_conn(path: &Path, immutable: bool) -> StoreResult<Store> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(uri(path, immutable), flags)
            .ctx(path, "open the database read-only")?;
        conn.busy_timeout(super::BUSY_TIMEOUT)
            .ctx(path, "set the busy timeout")?;
        let store = Store {
            conn: std::sync::Mutex::new(conn),
            path: path.to_path_buf(),
            journal_mode: "read-only".into(),
            patience_ms: 0.into(),
            read_only: true,
        };
        store.preflight()?;
        Ok(store)
    }

    /// Whether the store was opened read-only (nothing can be stored through it).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
}

/// An SQLite URI for `path`: `file:` with every byte outside the unreserved set and `/`
/// percent-encoded (a `?` or `#` in a folder name is not taken for a parameter).
fn uri(path: &Path, immutable: bool) -> String {
    use std::os::unix::ffi::OsStrExt;
    let abs: PathBuf = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::from("file:");
    for &b in abs.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str("?mode=ro");
    if immutable {
        out.push_str("&immutable=1");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_escapes_what_sqlite_would_read_as_parameters() {
        assert_eq!(
            uri(Path::new("/a b/t?x#1%.db"), true),
            "file:/a%20b/t%3Fx%231%25.db?mode=ro&immutable=1"
        );
    }

    #[test]
    fn read_only_reads_and_refuses_every_write() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let s = Store::open(&db).unwrap();
        let id = s.create_study("s", Path::new("e.yaml"), "sweep").unwrap();
        drop(s);
        let ro = Store::open_read_only(&db).unwrap();
        assert!(ro.is_read_only());
        assert_eq!(ro.list_studies().unwrap()[0].id, id);
        let e = ro
            .create_study("t", Path::new("e.yaml"), "sweep")
            .unwrap_err();
        assert!(matches!(e, StoreError::ReadOnly { .. }), "{e}");
    }

    #[test]
    fn an_older_schema_read_only_asks_for_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        drop(Store::open(&db).unwrap());
        let conn = Connection::open(&db).unwrap();
        conn.execute("DELETE FROM schema_migrations WHERE version > 1", [])
            .unwrap();
        drop(conn);
        let e = Store::open_read_only(&db).unwrap_err();
        assert!(
            matches!(e, StoreError::NeedsUpgrade { found: 1, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("upgrade"), "{e}");
    }
}
