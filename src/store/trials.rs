//! Trials, their iterations and memory reports.

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};
use serde_json::Value;

use super::error::{StoreError, StoreResult};
use super::iterdata;
use super::time::now_rfc3339;
use super::types::{NewTrial, TrialEnd, TrialFilter, TrialRow, TrialStatus, key_values};
use super::{Ctx, Store, from_sql_u64, sql_u64};
use crate::domain::trial::{Failure, FailureClass, Iteration, MemoryReport};
use crate::util::liveness::ProcessIdentity;

/// Columns of [`RawTrial`], in any order (read by name).
const TRIAL_COLUMNS: &str = "id, study_id, status, created_at, started_at, finished_at, \
    updated_at, config_path, config_hash, overrides, profile, argv, env, trial_dir, runner_pid, \
    failure_class, failure_line, exit_code, exit_signal, iterations_seen, \
    (SELECT COUNT(*) FROM iterations WHERE iterations.trial_id = trials.id) AS iterations_stored, \
    wall_s, summary, median_step_ms, ci95_ms, tokens_per_s_per_gpu, tflops_per_gpu, peak_mem_gib, resolved, job, \
    runner_host, runner_boot_id, runner_pid_ns, runner_start_ticks, heartbeat_at";

/// A `trials` row as SQLite returns it, before the JSON and enum columns are parsed.
struct RawTrial {
    id: i64,
    study_id: Option<i64>,
    status: String,
    created_at: String,
    started_at: Option<String>,
    finished_at: Option<String>,
    updated_at: String,
    config_path: String,
    config_hash: String,
    overrides: String,
    profile: Option<String>,
    argv: String,
    env: String,
    trial_dir: String,
    runner_pid: Option<i64>,
    failure_class: Option<String>,
    failure_line: Option<String>,
    exit_code: Option<i32>,
    exit_signal: Option<i32>,
    iterations_seen: i64,
    iterations_stored: i64,
    wall_s: Option<f64>,
    summary: Option<String>,
    median_step_ms: Option<f64>,
    ci95_ms: Option<f64>,
    tokens_per_s_per_gpu: Option<f64>,
    tflops_per_gpu: Option<f64>,
    peak_mem_gib: Option<f64>,
    resolved: Option<String>,
    job: Option<String>,
    runner_host: Option<String>,
    runner_boot_id: Option<String>,
    runner_pid_ns: Option<i64>,
    runner_start_ticks: Option<i64>,
    heartbeat_at: Option<String>,
}

fn raw_trial(r: &Row<'_>) -> rusqlite::Result<RawTrial> {
    Ok(RawTrial {
        id: r.get("id")?,
        study_id: r.get("study_id")?,
        status: r.get("status")?,
        created_at: r.get("created_at")?,
        started_at: r.get("started_at")?,
        finished_at: r.get("finished_at")?,
        updated_at: r.get("updated_at")?,
        config_path: r.get("config_path")?,
        config_hash: r.get("config_hash")?,
        overrides: r.get("overrides")?,
        profile: r.get("profile")?,
        argv: r.get("argv")?,
        env: r.get("env")?,
        trial_dir: r.get("trial_dir")?,
        runner_pid: r.get("runner_pid")?,
        failure_class: r.get("failure_class")?,
        failure_line: r.get("failure_line")?,
        exit_code: r.get("exit_code")?,
        exit_signal: r.get("exit_signal")?,
        iterations_seen: r.get("iterations_seen")?,
        iterations_stored: r.get("iterations_stored")?,
        wall_s: r.get("wall_s")?,
        summary: r.get("summary")?,
        median_step_ms: r.get("median_step_ms")?,
        ci95_ms: r.get("ci95_ms")?,
        tokens_per_s_per_gpu: r.get("tokens_per_s_per_gpu")?,
        tflops_per_gpu: r.get("tflops_per_gpu")?,
        peak_mem_gib: r.get("peak_mem_gib")?,
        resolved: r.get("resolved")?,
        job: r.get("job")?,
        runner_host: r.get("runner_host")?,
        runner_boot_id: r.get("runner_boot_id")?,
        runner_pid_ns: r.get("runner_pid_ns")?,
        runner_start_ticks: r.get("runner_start_ticks")?,
        heartbeat_at: r.get("heartbeat_at")?,
    })
}

/// The stored name of a failure class: its serde name (`oom`, `host-oom`, …).
pub(crate) fn class_name(class: FailureClass) -> String {
    match serde_json::to_value(class) {
        Ok(Value::String(s)) => s,
        _ => format!("{class:?}"),
    }
}

fn parse_class(name: &str) -> Option<FailureClass> {
    serde_json::from_value(Value::String(name.to_owned())).ok()
}

/// NaN for a float column SQLite stored as NULL (SQLite turns NaN into NULL).
fn get_f64(r: &Row<'_>, col: &str) -> rusqlite::Result<f64> {
    Ok(r.get::<_, Option<f64>>(col)?.unwrap_or(f64::NAN))
}

impl Store {
    /// Records a trial that is starting: status `running`, `created_at` = `started_at` =
    /// `heartbeat_at` = now, its runner this process (pid, host, boot id, PID namespace, start
    /// time). Returns its id.
    pub fn insert_trial(&self, trial: &NewTrial) -> StoreResult<i64> {
        let what = "insert a trial";
        let enc = |what| self.encode_err(what);
        let overrides = key_values::to_json(&trial.overrides).map_err(enc("encode overrides"))?;
        let env = key_values::to_json(&trial.env).map_err(enc("encode env"))?;
        let argv = serde_json::to_string(&trial.argv).map_err(enc("encode argv"))?;
        let resolved = trial
            .resolved
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(enc("encode resolved"))?;
        let now = now_rfc3339();
        let me = crate::util::liveness::ProcessIdentity::current();
        self.write(what, true, |tx| {
            if let Some(study) = trial.study_id {
                self.require_study(tx, study)?;
            }
            tx.execute(
                "INSERT INTO trials (study_id, created_at, started_at, updated_at, config_path, \
                 config_hash, overrides, profile, argv, env, trial_dir, runner_pid, status, \
                 resolved, runner_host, runner_boot_id, runner_pid_ns, runner_start_ticks, \
                 heartbeat_at) \
                 VALUES (?1, ?2, ?2, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'running', ?11, ?12, \
                 ?13, ?14, ?15, ?2)",
                params![
                    trial.study_id,
                    now,
                    trial.config_path.to_string_lossy(),
                    trial.config_hash,
                    overrides,
                    trial.profile,
                    argv,
                    env,
                    trial.trial_dir.to_string_lossy(),
                    me.pid,
                    resolved,
                    me.host,
                    me.boot_id,
                    me.pid_ns.and_then(|n| i64::try_from(n).ok()),
                    me.start_ticks.and_then(|t| i64::try_from(t).ok()),
                ],
            )
            .ctx(&self.path, what)?;
            Ok(tx.last_insert_rowid())
        })
    }

    /// Records how a trial was launched once its folder and command line are known (the folder
    /// is named after the trial id, so it exists only after the insert).
    pub fn set_trial_launch(
        &self,
        trial_id: i64,
        trial_dir: &std::path::Path,
        argv: &[String],
        env: &[(String, String)],
    ) -> StoreResult<()> {
        let what = format!("record the launch of trial {trial_id}");
        let argv = serde_json::to_string(argv).map_err(self.encode_err(&what))?;
        let env = key_values::to_json(env).map_err(self.encode_err(&what))?;
        let now = now_rfc3339();
        self.write(&what, false, |tx| {
            let n = tx
                .execute(
                    "UPDATE trials SET trial_dir = ?2, argv = ?3, env = ?4, updated_at = ?5 WHERE id = ?1",
                    params![trial_id, trial_dir.to_string_lossy(), argv, env, now],
                )
                .ctx(&self.path, &what)?;
            if n == 0 {
                return Err(StoreError::NoSuchTrial {
                    path: self.path.clone(),
                    id: trial_id,
                });
            }
            Ok(())
        })
    }

    /// Stores a batch of iterations in one transaction. An iteration number already stored for
    /// the trial (earlier, or twice in `iters`) keeps its first row. Returns how many were new.
    pub fn add_iterations(&self, trial_id: i64, iters: &[Iteration]) -> StoreResult<usize> {
        if iters.is_empty() {
            return Ok(0);
        }
        let what = format!("store iterations of trial {trial_id}");
        let data = iters
            .iter()
            .map(iterdata::encode)
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.encode_err(&what))?;
        let now = now_rfc3339();
        self.write(&what, false, |tx| {
            self.require_trial(tx, trial_id)?;
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO iterations (trial_id, iteration, recorded_at, elapsed_ms, \
                     tflops_per_gpu, tokens_per_s_per_gpu, loss, mem_used_gib, data) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) \
                     ON CONFLICT (trial_id, iteration) DO NOTHING",
                )
                .ctx(&self.path, &what)?;
            let mut added = 0;
            for (it, data) in iters.iter().zip(&data) {
                added += stmt
                    .execute(params![
                        trial_id,
                        sql_u64(it.iteration),
                        now,
                        it.elapsed_ms,
                        it.tflops_per_gpu,
                        it.tokens_per_s_per_gpu,
                        it.loss,
                        it.mem_used_gib,
                        data,
                    ])
                    .ctx(&self.path, &what)?;
            }
            self.touch(tx, trial_id, &now, &what)?;
            Ok(added)
        })
    }

    /// Stores a memory report; one already stored for the same rank and iteration count is
    /// kept. Returns whether it was new.
    pub fn add_memory_report(&self, trial_id: i64, report: &MemoryReport) -> StoreResult<bool> {
        let what = format!("store a memory report of trial {trial_id}");
        let now = now_rfc3339();
        self.write(&what, false, |tx| {
            self.require_trial(tx, trial_id)?;
            let added = tx
                .execute(
                    "INSERT INTO memory_reports (trial_id, rank, after_iterations, allocated_mb, \
                     max_allocated_mb, reserved_mb, max_reserved_mb) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
                     ON CONFLICT (trial_id, rank, after_iterations) DO NOTHING",
                    params![
                        trial_id,
                        report.rank,
                        sql_u64(report.after_iterations),
                        report.allocated_mb,
                        report.max_allocated_mb,
                        report.reserved_mb,
                        report.max_reserved_mb,
                    ],
                )
                .ctx(&self.path, &what)?;
            self.touch(tx, trial_id, &now, &what)?;
            Ok(added > 0)
        })
    }

    /// Records how a trial ended, in one durable transaction (`synchronous=FULL`): once this
    /// returns, the trial and everything stored for it survive a crash or power loss.
    /// Finishing a trial again overwrites the earlier end.
    pub fn finish_trial(&self, trial_id: i64, end: &TrialEnd) -> StoreResult<()> {
        if end.status == TrialStatus::Running {
            return Err(StoreError::StillRunning {
                path: self.path.clone(),
                id: trial_id,
            });
        }
        let what = format!("finish trial {trial_id}");
        let summary = end
            .summary
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(self.encode_err(&what))?;
        let failure_class = end.failure.as_ref().map(|f| class_name(f.class));
        let failure_line = end.failure.as_ref().and_then(|f| f.line.as_deref());
        let now = now_rfc3339();
        self.write(&what, true, |tx| {
            let changed = tx
                .execute(
                    "UPDATE trials SET status = ?2, finished_at = ?3, updated_at = ?3, \
                     failure_class = ?4, failure_line = ?5, exit_code = ?6, exit_signal = ?7, \
                     iterations_seen = ?8, wall_s = ?9, summary = ?10, median_step_ms = ?11, \
                     ci95_ms = ?12, tokens_per_s_per_gpu = ?13, tflops_per_gpu = ?14, \
                     peak_mem_gib = ?15 WHERE id = ?1",
                    params![
                        trial_id,
                        end.status.as_str(),
                        now,
                        failure_class,
                        failure_line,
                        end.exit_code,
                        end.exit_signal,
                        sql_u64(end.iterations_seen),
                        end.wall_s,
                        summary,
                        end.median_step_ms,
                        end.ci95_ms,
                        end.tokens_per_s_per_gpu,
                        end.tflops_per_gpu,
                        end.peak_mem_gib,
                    ],
                )
                .ctx(&self.path, &what)?;
            if changed == 0 {
                return Err(self.no_trial(trial_id));
            }
            Ok(())
        })
    }

    /// Records the trial's job (submitted, or a state it moved to).
    pub fn set_trial_job(&self, trial_id: i64, job: &crate::domain::job::Job) -> StoreResult<()> {
        let what = format!("record the job of trial {trial_id}");
        let json = serde_json::to_string(job).map_err(self.encode_err(&what))?;
        self.write(&what, false, |tx| {
            let n = tx
                .execute(
                    "UPDATE trials SET job = ?2, updated_at = ?3 WHERE id = ?1",
                    params![trial_id, json, now_rfc3339()],
                )
                .ctx(&self.path, &what)?;
            if n == 0 {
                return Err(self.no_trial(trial_id));
            }
            Ok(())
        })
    }

    /// Turns every `running` trial into `interrupted`, with `finished_at` set to the last time
    /// anything was stored for it. For start-up, when the caller knows no trial of this
    /// database is still running. Returns how many changed.
    pub fn mark_interrupted(&self) -> StoreResult<usize> {
        let what = "mark running trials interrupted";
        self.write(what, true, |tx| {
            tx.execute(
                "UPDATE trials SET status = 'interrupted', finished_at = updated_at \
                 WHERE status = 'running'",
                [],
            )
            .ctx(&self.path, what)
        })
    }

    /// Writes the heartbeat of a trial that still runs (its runner watches it); returns
    /// whether the trial is still `running`.
    pub fn beat_trial(&self, trial_id: i64) -> StoreResult<bool> {
        let what = format!("write the heartbeat of trial {trial_id}");
        self.write(&what, false, |tx| {
            let n = tx
                .execute(
                    "UPDATE trials SET heartbeat_at = ?2 WHERE id = ?1 AND status = 'running'",
                    params![trial_id, now_rfc3339()],
                )
                .ctx(&self.path, &what)?;
            Ok(n > 0)
        })
    }

    /// Marks one trial interrupted if it is still `running` (for a caller that checks
    /// `runner_pid` itself). Returns whether it changed.
    pub fn interrupt_trial(&self, trial_id: i64) -> StoreResult<bool> {
        let what = format!("mark trial {trial_id} interrupted");
        self.write(&what, true, |tx| {
            let changed = tx
                .execute(
                    "UPDATE trials SET status = 'interrupted', finished_at = updated_at \
                     WHERE id = ?1 AND status = 'running'",
                    [trial_id],
                )
                .ctx(&self.path, &what)?;
            Ok(changed > 0)
        })
    }

    /// Deletes a trial with its iterations and memory reports. Returns whether it existed.
    pub fn delete_trial(&self, trial_id: i64) -> StoreResult<bool> {
        let what = format!("delete trial {trial_id}");
        self.write(&what, true, |tx| {
            let n = tx
                .execute("DELETE FROM trials WHERE id = ?1", [trial_id])
                .ctx(&self.path, &what)?;
            Ok(n > 0)
        })
    }

    /// The trials `filter` selects, by id.
    pub fn list_trials(&self, filter: &TrialFilter) -> StoreResult<Vec<TrialRow>> {
        let mut clauses = Vec::new();
        let mut args = Vec::new();
        if let Some(study) = filter.study_id {
            args.push(SqlValue::Integer(study));
            clauses.push(format!("study_id = ?{}", args.len()));
        }
        if !filter.statuses.is_empty() {
            let mut marks = Vec::new();
            for status in &filter.statuses {
                args.push(SqlValue::Text(status.as_str().to_owned()));
                marks.push(format!("?{}", args.len()));
            }
            clauses.push(format!("status IN ({})", marks.join(", ")));
        }
        if !filter.failures.is_empty() {
            let mut marks = Vec::new();
            for class in &filter.failures {
                args.push(SqlValue::Text(class_name(*class)));
                marks.push(format!("?{}", args.len()));
            }
            args.push(SqlValue::Text(TrialStatus::Completed.as_str().to_owned()));
            clauses.push(format!(
                "failure_class IN ({}) AND status != ?{}",
                marks.join(", "),
                args.len()
            ));
        }
        let mut tail = String::new();
        if !clauses.is_empty() {
            tail = format!("WHERE {}", clauses.join(" AND "));
        }
        match filter.last {
            None => {
                tail.push_str(" ORDER BY id");
                self.query_trials(&tail, &args)
            }
            Some(n) => {
                args.push(SqlValue::Integer(sql_u64(n as u64)));
                tail.push_str(&format!(" ORDER BY id DESC LIMIT ?{}", args.len()));
                let mut rows = self.query_trials(&tail, &args)?;
                rows.reverse();
                Ok(rows)
            }
        }
    }

    /// One trial, if it exists.
    pub fn trial(&self, trial_id: i64) -> StoreResult<Option<TrialRow>> {
        let rows = self.query_trials("WHERE id = ?1", &[SqlValue::Integer(trial_id)])?;
        Ok(rows.into_iter().next())
    }

    /// The trial's iterations, by iteration number. Fails for an unknown trial.
    pub fn iterations(&self, trial_id: i64) -> StoreResult<Vec<Iteration>> {
        let what = format!("read iterations of trial {trial_id}");
        let raw: Vec<(i64, String)> = {
            let conn = self.lock();
            self.require_trial(&conn, trial_id)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT iteration, data FROM iterations WHERE trial_id = ?1 ORDER BY iteration",
                )
                .ctx(&self.path, &what)?;
            stmt.query_map([trial_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .ctx(&self.path, &what)?
                .collect::<rusqlite::Result<_>>()
                .ctx(&self.path, &what)?
        };
        raw.into_iter()
            .map(|(n, data)| {
                iterdata::decode(&data)
                    .map_err(|e| self.corrupt(format!("read iteration {n} of trial {trial_id}"), e))
            })
            .collect()
    }

    /// The trial's memory reports, by iteration count then rank. Fails for an unknown trial.
    pub fn memory_reports(&self, trial_id: i64) -> StoreResult<Vec<MemoryReport>> {
        let what = format!("read memory reports of trial {trial_id}");
        let conn = self.lock();
        self.require_trial(&conn, trial_id)?;
        let mut stmt = conn
            .prepare_cached(
                "SELECT rank, after_iterations, allocated_mb, max_allocated_mb, reserved_mb, \
                 max_reserved_mb FROM memory_reports WHERE trial_id = ?1 \
                 ORDER BY after_iterations, rank",
            )
            .ctx(&self.path, &what)?;
        let rows = stmt
            .query_map([trial_id], |r| {
                Ok(MemoryReport {
                    rank: r.get("rank")?,
                    after_iterations: from_sql_u64(r.get("after_iterations")?),
                    allocated_mb: get_f64(r, "allocated_mb")?,
                    max_allocated_mb: get_f64(r, "max_allocated_mb")?,
                    reserved_mb: get_f64(r, "reserved_mb")?,
                    max_reserved_mb: get_f64(r, "max_reserved_mb")?,
                })
            })
            .ctx(&self.path, &what)?;
        rows.collect::<rusqlite::Result<_>>().ctx(&self.path, &what)
    }

    fn query_trials(&self, tail: &str, args: &[SqlValue]) -> StoreResult<Vec<TrialRow>> {
        let what = "read trials";
        let raws: Vec<RawTrial> = {
            let conn = self.lock();
            let sql = format!("SELECT {TRIAL_COLUMNS} FROM trials {tail}");
            let mut stmt = conn.prepare_cached(&sql).ctx(&self.path, what)?;
            stmt.query_map(params_from_iter(args), raw_trial)
                .ctx(&self.path, what)?
                .collect::<rusqlite::Result<_>>()
                .ctx(&self.path, what)?
        };
        raws.into_iter().map(|raw| self.trial_row(raw)).collect()
    }

    fn trial_row(&self, raw: RawTrial) -> StoreResult<TrialRow> {
        let id = raw.id;
        let bad = |column: &str, message: String| {
            self.corrupt(format!("read trial {id}"), format!("{column}: {message}"))
        };
        let status = raw
            .status
            .parse::<TrialStatus>()
            .map_err(|e| bad("status", e.to_string()))?;
        let failure = match raw.failure_class {
            None => None,
            Some(name) => Some(Failure {
                class: parse_class(&name).ok_or_else(|| {
                    bad(
                        "failure_class",
                        format!("unknown failure class `{name}` (written by a newer primus-tune?)"),
                    )
                })?,
                line: raw.failure_line,
            }),
        };
        let overrides =
            key_values::from_json(&raw.overrides).map_err(|e| bad("overrides", e.to_string()))?;
        let env = key_values::from_json(&raw.env).map_err(|e| bad("env", e.to_string()))?;
        let argv = serde_json::from_str(&raw.argv).map_err(|e| bad("argv", e.to_string()))?;
        let summary = raw
            .summary
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| bad("summary", e.to_string()))?;
        let resolved = raw
            .resolved
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| bad("resolved", e.to_string()))?;
        let job = raw
            .job
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| bad("job", e.to_string()))?;
        Ok(TrialRow {
            id,
            study_id: raw.study_id,
            status,
            created_at: raw.created_at,
            started_at: raw.started_at,
            finished_at: raw.finished_at,
            updated_at: raw.updated_at,
            config_path: raw.config_path.into(),
            config_hash: raw.config_hash,
            overrides,
            profile: raw.profile,
            argv,
            env,
            trial_dir: raw.trial_dir.into(),
            runner_pid: raw.runner_pid.and_then(|p| u32::try_from(p).ok()),
            runner: match (raw.runner_host, raw.runner_boot_id, raw.runner_pid) {
                (Some(host), Some(boot_id), Some(pid)) => Some(ProcessIdentity {
                    host,
                    boot_id,
                    pid_ns: raw.runner_pid_ns.and_then(|n| u64::try_from(n).ok()),
                    pid: u32::try_from(pid).unwrap_or(0),
                    start_ticks: raw.runner_start_ticks.and_then(|t| u64::try_from(t).ok()),
                }),
                _ => None,
            },
            heartbeat_at: raw.heartbeat_at,
            failure,
            exit_code: raw.exit_code,
            exit_signal: raw.exit_signal,
            iterations_seen: from_sql_u64(raw.iterations_seen),
            iterations_stored: from_sql_u64(raw.iterations_stored),
            wall_s: raw.wall_s,
            summary,
            median_step_ms: raw.median_step_ms,
            ci95_ms: raw.ci95_ms,
            tokens_per_s_per_gpu: raw.tokens_per_s_per_gpu,
            tflops_per_gpu: raw.tflops_per_gpu,
            peak_mem_gib: raw.peak_mem_gib,
            resolved,
            job,
        })
    }

    fn no_trial(&self, id: i64) -> StoreError {
        StoreError::NoSuchTrial {
            path: self.path.clone(),
            id,
        }
    }

    pub(super) fn require_trial(&self, conn: &Connection, trial_id: i64) -> StoreResult<()> {
        let found = conn
            .prepare_cached("SELECT 1 FROM trials WHERE id = ?1")
            .and_then(|mut s| s.query_row([trial_id], |_| Ok(())).optional())
            .ctx(&self.path, "look up a trial")?;
        found.ok_or_else(|| self.no_trial(trial_id))
    }

    fn touch(&self, conn: &Connection, trial_id: i64, now: &str, what: &str) -> StoreResult<()> {
        conn.execute(
            "UPDATE trials SET updated_at = ?2 WHERE id = ?1",
            params![trial_id, now],
        )
        .ctx(&self.path, what)?;
        Ok(())
    }
}
