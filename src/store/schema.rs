//! Schema versions and migrations.
//!
//! `schema_migrations` records every migration applied, one row per version; the database's
//! version is the highest. [`MIGRATIONS`] lists them in order: version `n` is `MIGRATIONS[n-1]`.
//! To change the schema, append a migration; never edit one that has shipped. Each pending
//! migration runs in its own `BEGIN IMMEDIATE` transaction together with its
//! `schema_migrations` row, so a crash leaves the database at the previous version and two
//! processes opening the same file at once apply each migration once. A database whose version
//! is higher than [`SCHEMA_VERSION`] (written by a newer primus-tune) is refused untouched.
//!
//! `PRAGMA foreign_keys` cannot change inside a transaction: a later migration that rebuilds a
//! table (create new, copy, drop old, rename) must not rely on turning it off.

use rusqlite::{Connection, TransactionBehavior};

use super::error::{StoreError, StoreResult};
use super::time::now_rfc3339;
use super::{Ctx, Store};

pub(crate) struct Migration {
    pub version: i64,
    pub description: &'static str,
    pub sql: &'static str,
}

/// Version 1: studies, trials, iterations, memory reports.
///
/// Timestamps are RFC 3339 UTC text (see `time.rs`); JSON columns hold text that `json_valid`
/// accepts. Telemetry (`samples`: trial_id, t, per-GPU readings) is meant to come as its own
/// migration and table keyed by trial like `iterations`.
const V1: &str = r#"
CREATE TABLE studies (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    config_path TEXT NOT NULL,
    kind        TEXT NOT NULL,
    space       TEXT CHECK (space IS NULL OR json_valid(space)),
    notes       TEXT
);

CREATE TABLE trials (
    id              INTEGER PRIMARY KEY,
    study_id        INTEGER REFERENCES studies(id) ON DELETE SET NULL,
    created_at      TEXT NOT NULL,
    started_at      TEXT,
    finished_at     TEXT,
    updated_at      TEXT NOT NULL,
    config_path     TEXT NOT NULL,
    config_hash     TEXT NOT NULL,
    overrides       TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(overrides)),
    profile         TEXT,
    argv            TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(argv)),
    env             TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(env)),
    trial_dir       TEXT NOT NULL,
    runner_pid      INTEGER,
    status          TEXT NOT NULL DEFAULT 'running'
                    CHECK (status IN ('running', 'completed', 'failed', 'stopped', 'interrupted')),
    failure_class   TEXT,
    failure_line    TEXT,
    exit_code       INTEGER,
    exit_signal     INTEGER,
    iterations_seen INTEGER NOT NULL DEFAULT 0,
    wall_s          REAL,
    summary         TEXT CHECK (summary IS NULL OR json_valid(summary)),
    median_step_ms       REAL,
    ci95_ms              REAL,
    tokens_per_s_per_gpu REAL,
    tflops_per_gpu       REAL,
    peak_mem_gib         REAL
);
CREATE INDEX trials_by_study ON trials(study_id, id);
CREATE INDEX trials_by_status ON trials(status, id);

CREATE TABLE iterations (
    trial_id             INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    iteration            INTEGER NOT NULL,
    recorded_at          TEXT NOT NULL,
    elapsed_ms           REAL,
    tflops_per_gpu       REAL,
    tokens_per_s_per_gpu REAL,
    loss                 REAL,
    mem_used_gib         REAL,
    data                 TEXT NOT NULL CHECK (json_valid(data)),
    PRIMARY KEY (trial_id, iteration)
) WITHOUT ROWID;

CREATE TABLE memory_reports (
    trial_id         INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    rank             INTEGER NOT NULL,
    after_iterations INTEGER NOT NULL,
    allocated_mb     REAL,
    max_allocated_mb REAL,
    reserved_mb      REAL,
    max_reserved_mb  REAL,
    PRIMARY KEY (trial_id, rank, after_iterations)
) WITHOUT ROWID;
"#;

/// Version 2: telemetry samples of trials. One row per GPU per sample (`gpu` ≥ 0, the reading
/// as JSON in `data`) and one host row per sample (`gpu` = -1: host CPU/RAM, the trial's process
/// group, and the per-process GPU memory scan when it ran).
const V2: &str = r#"
CREATE TABLE samples (
    trial_id        INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    ts_ms           INTEGER NOT NULL,
    gpu             INTEGER NOT NULL,
    util_pct        REAL,
    vram_used_bytes INTEGER,
    power_w         REAL,
    data            TEXT NOT NULL CHECK (json_valid(data)),
    PRIMARY KEY (trial_id, ts_ms, gpu)
) WITHOUT ROWID;
"#;

/// Version 3: what each trial ran — its experiment's resolved parameters with the trial's
/// overrides applied (flag → value, JSON), so trials compare and apply by what they ran even
/// after the experiment file changed.
const V3: &str = r#"
ALTER TABLE trials ADD COLUMN resolved TEXT CHECK (resolved IS NULL OR json_valid(resolved));
"#;

/// Version 4: rules of the advice a user acknowledged for an experiment (the checklist shows
/// them as acknowledged, `recommend` no longer proposes them), with the reason.
const V4: &str = r#"
CREATE TABLE acknowledgements (
    config_path TEXT NOT NULL,
    rule        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (config_path, rule)
) WITHOUT ROWID;
"#;

/// Version 5: trials across nodes. A trial launched as a Slurm job records the job (`slurm`,
/// JSON: id, cluster, nodes, state); telemetry samples name the node they were read on (`node`,
/// '' on the runner's own node), so the key of a sample becomes (trial, node, time, GPU).
const V5: &str = r#"
ALTER TABLE trials ADD COLUMN slurm TEXT CHECK (slurm IS NULL OR json_valid(slurm));
CREATE TABLE samples_v5 (
    trial_id        INTEGER NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
    node            TEXT NOT NULL DEFAULT '',
    ts_ms           INTEGER NOT NULL,
    gpu             INTEGER NOT NULL,
    util_pct        REAL,
    vram_used_bytes INTEGER,
    power_w         REAL,
    data            TEXT NOT NULL CHECK (json_valid(data)),
    PRIMARY KEY (trial_id, node, ts_ms, gpu)
) WITHOUT ROWID;
INSERT INTO samples_v5 (trial_id, node, ts_ms, gpu, util_pct, vram_used_bytes, power_w, data)
    SELECT trial_id, '', ts_ms, gpu, util_pct, vram_used_bytes, power_w, data FROM samples;
DROP TABLE samples;
ALTER TABLE samples_v5 RENAME TO samples;
"#;

/// Version 6: scheduler-neutral jobs and a study's launch. A trial's job (`job`, JSON: the
/// scheduler that runs it, its id, state and nodes) replaces the Slurm-only `slurm` column; the
/// failure classes that named Slurm get the scheduler-neutral names; a study keeps how its
/// trials launch (`launch`, JSON: the iteration budget, the profile, the world and the
/// scheduler's settings) so a resume goes on as it began.
const V6: &str = r#"
ALTER TABLE trials RENAME COLUMN slurm TO job;
UPDATE trials SET job = json_set(job, '$.scheduler', 'slurm') WHERE job IS NOT NULL;
UPDATE trials SET failure_class = CASE failure_class
        WHEN 'slurm-timeout' THEN 'job-time-limit'
        WHEN 'slurm-cancelled' THEN 'job-cancelled'
        WHEN 'slurm-preempted' THEN 'preempted'
        WHEN 'slurm-lost' THEN 'job-lost'
        ELSE failure_class END
    WHERE failure_class LIKE 'slurm-%';
ALTER TABLE studies ADD COLUMN launch TEXT CHECK (launch IS NULL OR json_valid(launch));
"#;

/// Version 7: study leases, one runner per study (`leases.rs`): who holds the study (host, boot
/// id, PID namespace, pid and its start time: a process another one can recognise), since when,
/// and its last heartbeat.
const V7: &str = r#"
CREATE TABLE study_leases (
    study_id     INTEGER PRIMARY KEY REFERENCES studies(id) ON DELETE CASCADE,
    host         TEXT NOT NULL,
    boot_id      TEXT NOT NULL,
    pid_ns       INTEGER,
    pid          INTEGER NOT NULL,
    start_ticks  INTEGER,
    taken_at     TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL
);
"#;

/// Version 8: who runs a trial, as any process sharing the workspace can judge it (another
/// node, another PID namespace): its runner's host, boot id, PID namespace and start time
/// beside `runner_pid`, and the heartbeat the runner writes while it watches the trial.
const V8: &str = r#"
ALTER TABLE trials ADD COLUMN runner_host TEXT;
ALTER TABLE trials ADD COLUMN runner_boot_id TEXT;
ALTER TABLE trials ADD COLUMN runner_pid_ns INTEGER;
ALTER TABLE trials ADD COLUMN runner_start_ticks INTEGER;
ALTER TABLE trials ADD COLUMN heartbeat_at TEXT;
"#;

pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "studies, trials, iterations, memory reports",
        sql: V1,
    },
    Migration {
        version: 2,
        description: "telemetry samples",
        sql: V2,
    },
    Migration {
        version: 3,
        description: "trials' resolved parameters",
        sql: V3,
    },
    Migration {
        version: 4,
        description: "acknowledged rules",
        sql: V4,
    },
    Migration {
        version: 5,
        description: "Slurm jobs of trials, the node of telemetry samples",
        sql: V5,
    },
    Migration {
        version: 6,
        description: "scheduler-neutral jobs, a study's launch",
        sql: V6,
    },
    Migration {
        version: 7,
        description: "study leases",
        sql: V7,
    },
    Migration {
        version: 8,
        description: "trials' runner identity and heartbeat",
        sql: V8,
    },
];

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

const CREATE_MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)";

/// The database's schema version: 0 when `schema_migrations` does not exist.
fn current_version(conn: &Connection) -> rusqlite::Result<i64> {
    let exists: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')",
        [],
        |r| r.get(0),
    )?;
    if !exists {
        return Ok(0);
    }
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )
}

/// Tables of a database that has no `schema_migrations` (an empty file has none).
fn user_tables(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    )?;
    let names = stmt.query_map([], |r| r.get(0))?;
    names.collect()
}

impl Store {
    /// Brings the schema up to [`SCHEMA_VERSION`]; returns the version found before.
    pub(crate) fn migrate(&self) -> StoreResult<i64> {
        let mut conn = self.lock();
        let found = current_version(&conn).ctx(&self.path, "read the schema version")?;
        self.check_version(found)?;
        if found == SCHEMA_VERSION {
            return Ok(found);
        }
        self.with_sync(&conn, "FULL")?;
        let result = (|| {
            loop {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .ctx(&self.path, "begin a schema migration")?;
                // Read again under the write lock: another process may have migrated meanwhile.
                let version = current_version(&tx).ctx(&self.path, "read the schema version")?;
                self.check_version(version)?;
                if version == SCHEMA_VERSION {
                    return Ok(());
                }
                if version == 0 {
                    let tables = user_tables(&tx).ctx(&self.path, "list tables")?;
                    if !tables.is_empty() {
                        return Err(StoreError::Foreign {
                            path: self.path.clone(),
                            tables,
                        });
                    }
                    tx.execute_batch(CREATE_MIGRATIONS_TABLE)
                        .ctx(&self.path, "create schema_migrations")?;
                }
                let Some(m) = MIGRATIONS.iter().find(|m| m.version == version + 1) else {
                    return Err(StoreError::Corrupt {
                        path: self.path.clone(),
                        what: "migrate the schema".into(),
                        message: format!("no migration to version {}", version + 1),
                    });
                };
                let what = format!("apply schema migration {} ({})", m.version, m.description);
                tx.execute_batch(m.sql).ctx(&self.path, &what)?;
                tx.execute(
                    "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?1, ?2, ?3)",
                    (m.version, m.description, now_rfc3339()),
                )
                .ctx(&self.path, &what)?;
                tx.commit().ctx(&self.path, &what)?;
            }
        })();
        let restored = self.with_sync(&conn, "NORMAL");
        result.and(restored).map(|()| found)
    }

    /// Read-only checks before anything is written: refuse a newer schema and a foreign file.
    pub(crate) fn preflight(&self) -> StoreResult<()> {
        let conn = self.lock();
        let found = current_version(&conn).ctx(&self.path, "read the database")?;
        self.check_version(found)?;
        if found == 0 {
            let tables = user_tables(&conn).ctx(&self.path, "list tables")?;
            if !tables.is_empty() {
                return Err(StoreError::Foreign {
                    path: self.path.clone(),
                    tables,
                });
            }
        }
        Ok(())
    }

    fn check_version(&self, found: i64) -> StoreResult<()> {
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found,
                known: SCHEMA_VERSION,
            });
        }
        Ok(())
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> StoreResult<i64> {
        current_version(&self.lock()).ctx(&self.path, "read the schema version")
    }

    /// When each migration was applied: `(version, description, applied_at)`.
    pub fn migration_history(&self) -> StoreResult<Vec<(i64, String, String)>> {
        let conn = self.lock();
        let what = "read schema_migrations";
        let mut stmt = conn
            .prepare(
                "SELECT version, description, applied_at FROM schema_migrations ORDER BY version",
            )
            .ctx(&self.path, what)?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .ctx(&self.path, what)?;
        rows.collect::<rusqlite::Result<_>>().ctx(&self.path, what)
    }

    /// Used by the store's tests to look at `sqlite_master`.
    #[cfg(test)]
    pub(crate) fn object_exists(&self, kind: &str, name: &str) -> bool {
        use rusqlite::OptionalExtension;
        self.lock()
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = ?1 AND name = ?2",
                (kind, name),
                |_| Ok(()),
            )
            .optional()
            .ok()
            .flatten()
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_contiguous_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.description);
        }
        assert_eq!(SCHEMA_VERSION, MIGRATIONS.len() as i64);
    }

    #[test]
    fn in_memory_store_is_at_the_latest_version() -> StoreResult<()> {
        let store = Store::open_in_memory()?;
        assert_eq!(store.schema_version()?, SCHEMA_VERSION);
        let history = store.migration_history()?;
        assert_eq!(history.len(), MIGRATIONS.len());
        for t in ["studies", "trials", "iterations", "memory_reports"] {
            assert!(store.object_exists("table", t), "{t}");
        }
        assert!(store.object_exists("index", "trials_by_status"));
        // Running the migrations again is a no-op.
        assert_eq!(store.migrate()?, SCHEMA_VERSION);
        assert_eq!(store.migration_history()?.len(), MIGRATIONS.len());
        Ok(())
    }
}
