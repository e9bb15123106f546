//! The trial store against real database files: round trips, filters, CSV, migrations,
//! crash safety and concurrent access.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use primus_tune::domain::trial::{
    ExitInfo, Failure, FailureClass, Iteration, MemoryReport, SteadyStats,
};
use primus_tune::store::{
    NewTrial, SCHEMA_VERSION, Store, StoreError, TrialEnd, TrialFilter, TrialStatus,
};
use serde_json::{Value, json};

fn new_trial(study_id: Option<i64>, tag: &str) -> NewTrial {
    NewTrial {
        study_id,
        config_path: PathBuf::from("/cfg/llama3_8B-pretrain.yaml"),
        config_hash: format!("hash-{tag}"),
        overrides: vec![
            ("micro_batch_size".into(), json!(2)),
            ("recompute_granularity".into(), json!("full")),
        ],
        profile: Some("fast".into()),
        argv: vec!["bash".into(), "run_pretrain.sh".into(), tag.into()],
        env: vec![("HSA_NO_SCRATCH_RECLAIM".into(), "1".into())],
        trial_dir: PathBuf::from(format!("/runs/{tag}")),
        resolved: Some(json!({"micro_batch_size": 2, "recompute_granularity": "full"})),
    }
}

fn iteration(n: u64) -> Iteration {
    Iteration {
        iteration: n,
        train_iters: Some(100),
        elapsed_ms: Some(1000.0 + n as f64),
        tflops_per_gpu: Some(400.5),
        tokens_per_s_per_gpu: Some(8000.25),
        loss: Some(10.0 - n as f64 * 0.01),
        mem_used_gib: Some(150.0),
        timestamp: Some(format!("2025-01-01 00:00:{:02}", n % 60)),
        ..Iteration::default()
    }
}

fn iterations(range: std::ops::RangeInclusive<u64>) -> Vec<Iteration> {
    range.map(iteration).collect()
}

fn report(rank: u32, after: u64) -> MemoryReport {
    MemoryReport {
        rank,
        after_iterations: after,
        allocated_mb: 1000.0,
        max_allocated_mb: 2000.5,
        reserved_mb: 3000.0,
        max_reserved_mb: 4000.0,
    }
}

fn completed_end() -> TrialEnd {
    let stats = SteadyStats {
        n: 40,
        warmup: 10,
        median_step_ms: 1025.0,
        ci95_ms: 3.5,
        tokens_per_s_per_gpu: Some(8000.0),
        tflops_per_gpu: Some(401.0),
        ..SteadyStats::default()
    };
    let mut end = TrialEnd::new(TrialStatus::Completed, 312.5)
        .with_exit(&ExitInfo {
            code: Some(0),
            ..ExitInfo::default()
        })
        .with_steady(&stats);
    end.iterations_seen = 50;
    end.peak_mem_gib = Some(171.25);
    end.summary = Some(serde_json::to_value(&stats).unwrap());
    end
}

fn tmp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trials.db");
    (dir, path)
}

/// Iterations equal, NaN equal to NaN.
fn same_iterations(a: &[Iteration], b: &[Iteration]) -> bool {
    let norm = |v: &[Iteration]| serde_json::to_string(v).unwrap();
    a.len() == b.len() && norm(a) == norm(b)
}

#[test]
fn trial_round_trip() {
    let (_dir, path) = tmp_db();
    let store = Store::open(&path).unwrap();
    assert_eq!(store.journal_mode(), "wal");
    let study = store
        .create_study(
            "mbs-sweep",
            Path::new("/cfg/llama3_8B-pretrain.yaml"),
            "grid",
        )
        .unwrap();
    let id = store.insert_trial(&new_trial(Some(study), "a")).unwrap();

    let running = store.trial(id).unwrap().unwrap();
    assert_eq!(running.status, TrialStatus::Running);
    assert_eq!(
        running.started_at.as_deref(),
        Some(running.created_at.as_str())
    );
    assert_eq!(running.finished_at, None);
    assert_eq!(running.runner_pid, Some(std::process::id()));
    assert_eq!(running.iterations_stored, 0);

    let mut iters = iterations(1..=50);
    iters[49].loss = Some(f64::NAN);
    iters[48].grad_norm = Some(f64::INFINITY);
    assert_eq!(store.add_iterations(id, &iters[..30]).unwrap(), 30);
    assert_eq!(store.add_iterations(id, &iters[30..]).unwrap(), 20);
    assert!(store.add_memory_report(id, &report(0, 10)).unwrap());
    assert!(store.add_memory_report(id, &report(1, 10)).unwrap());
    assert!(store.add_memory_report(id, &report(0, 20)).unwrap());

    let mut end = completed_end();
    end.failure = Some(Failure {
        class: FailureClass::Oom,
        line: Some("torch.OutOfMemoryError: HIP out of memory, \"tried\" to allocate".into()),
    });
    store.finish_trial(id, &end).unwrap();

    let row = store.trial(id).unwrap().unwrap();
    let fresh = new_trial(Some(study), "a");
    assert_eq!(row.status, TrialStatus::Completed);
    assert_eq!(row.study_id, Some(study));
    assert_eq!(row.config_path, fresh.config_path);
    assert_eq!(row.config_hash, fresh.config_hash);
    assert_eq!(row.overrides, fresh.overrides);
    // What it ran is stored, and left out of the list JSON (`trials show --json` carries it).
    assert_eq!(row.resolved, fresh.resolved);
    assert!(
        serde_json::to_value(&row)
            .unwrap()
            .get("resolved")
            .is_none()
    );
    assert_eq!(row.profile, fresh.profile);
    assert_eq!(row.argv, fresh.argv);
    assert_eq!(row.env, fresh.env);
    assert_eq!(row.trial_dir, fresh.trial_dir);
    assert_eq!(row.failure, end.failure);
    assert_eq!(row.exit_code, Some(0));
    assert_eq!(row.exit_signal, None);
    assert_eq!(row.iterations_seen, 50);
    assert_eq!(row.iterations_stored, 50);
    assert_eq!(row.wall_s, Some(312.5));
    assert_eq!(row.summary, end.summary);
    assert_eq!(row.median_step_ms, Some(1025.0));
    assert_eq!(row.ci95_ms, Some(3.5));
    assert_eq!(row.tokens_per_s_per_gpu, Some(8000.0));
    assert_eq!(row.tflops_per_gpu, Some(401.0));
    assert_eq!(row.peak_mem_gib, Some(171.25));
    let finished = row.finished_at.clone().unwrap();
    assert!(finished >= row.created_at);
    assert_eq!(row.updated_at, finished);

    let back = store.iterations(id).unwrap();
    assert!(same_iterations(&back, &iters));
    assert!(back[49].loss.unwrap().is_nan());
    assert_eq!(back[48].grad_norm, Some(f64::INFINITY));
    assert_eq!(
        store.memory_reports(id).unwrap(),
        vec![report(0, 10), report(1, 10), report(0, 20)]
    );

    let studies = store.list_studies().unwrap();
    assert_eq!(studies.len(), 1);
    assert_eq!(studies[0].name, "mbs-sweep");
    assert_eq!(studies[0].kind, "grid");
    assert_eq!(studies[0].trials, 1);

    // The JSON the CLI prints.
    let v = serde_json::to_value(&row).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["failure"]["class"], "oom");
    assert_eq!(
        v["overrides"][0],
        json!({"key": "micro_batch_size", "value": 2})
    );
    assert_eq!(
        v["env"][0],
        json!({"key": "HSA_NO_SCRATCH_RECLAIM", "value": "1"})
    );

    // Everything is still there after reopening the file.
    drop(store);
    let store = Store::open(&path).unwrap();
    assert_eq!(store.trial(id).unwrap().unwrap(), row);
    assert!(same_iterations(&store.iterations(id).unwrap(), &iters));
}

#[test]
fn duplicates_are_ignored() {
    let store = Store::open_in_memory().unwrap();
    let id = store.insert_trial(&new_trial(None, "d")).unwrap();
    let mut second = iteration(2);
    second.loss = Some(99.0);
    let batch = vec![iteration(1), iteration(2), second, iteration(3)];
    assert_eq!(store.add_iterations(id, &batch).unwrap(), 3);
    assert_eq!(store.add_iterations(id, &iterations(3..=4)).unwrap(), 1);
    assert_eq!(store.add_iterations(id, &[]).unwrap(), 0);
    let back = store.iterations(id).unwrap();
    assert_eq!(
        back,
        iterations(1..=4),
        "the first copy of iteration 2 is kept"
    );

    assert!(store.add_memory_report(id, &report(0, 10)).unwrap());
    let mut again = report(0, 10);
    again.allocated_mb = 5.0;
    assert!(!store.add_memory_report(id, &again).unwrap());
    assert_eq!(store.memory_reports(id).unwrap(), vec![report(0, 10)]);
    assert_eq!(store.trial(id).unwrap().unwrap().iterations_stored, 4);
}

#[test]
fn unknown_ids_and_bad_ends_are_errors() {
    let store = Store::open_in_memory().unwrap();
    assert!(store.trial(7).unwrap().is_none());
    assert!(matches!(
        store.add_iterations(7, &iterations(1..=2)),
        Err(StoreError::NoSuchTrial { id: 7, .. })
    ));
    assert!(matches!(
        store.add_memory_report(7, &report(0, 1)),
        Err(StoreError::NoSuchTrial { id: 7, .. })
    ));
    assert!(matches!(
        store.finish_trial(7, &completed_end()),
        Err(StoreError::NoSuchTrial { id: 7, .. })
    ));
    assert!(matches!(
        store.iterations(7),
        Err(StoreError::NoSuchTrial { .. })
    ));
    assert!(matches!(
        store.memory_reports(7),
        Err(StoreError::NoSuchTrial { .. })
    ));
    let err = store.insert_trial(&new_trial(Some(3), "x")).unwrap_err();
    assert!(
        matches!(err, StoreError::NoSuchStudy { id: 3, .. }),
        "{err}"
    );
    assert_eq!(err.to_string(), ":memory:: there is no study 3");

    let id = store.insert_trial(&new_trial(None, "x")).unwrap();
    let err = store
        .finish_trial(id, &TrialEnd::new(TrialStatus::Running, 1.0))
        .unwrap_err();
    assert!(matches!(err, StoreError::StillRunning { .. }), "{err}");
    assert_eq!(
        store.trial(id).unwrap().unwrap().status,
        TrialStatus::Running
    );
}

#[test]
fn studies() {
    let store = Store::open_in_memory().unwrap();
    let a = store
        .create_study("a", Path::new("/a.yaml"), "grid")
        .unwrap();
    let err = store
        .create_study("a", Path::new("/other.yaml"), "search")
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::StudyExists { id, .. } if *id == a),
        "{err}"
    );
    let b = store
        .create_study("b", Path::new("/b.yaml"), "search")
        .unwrap();
    store.set_study_notes(b, Some("try TP=2 first")).unwrap();
    let space = json!({"micro_batch_size": [1, 2, 4]});
    store.set_study_space(b, Some(&space)).unwrap();
    let row = store.study_by_name("b").unwrap().unwrap();
    assert_eq!(row.id, b);
    assert_eq!(row.notes.as_deref(), Some("try TP=2 first"));
    assert_eq!(row.space, Some(space));
    assert_eq!(row.config_path, PathBuf::from("/b.yaml"));
    assert!(store.study_by_name("c").unwrap().is_none());
    assert!(store.study(a).unwrap().is_some());
    assert!(matches!(
        store.set_study_notes(99, None),
        Err(StoreError::NoSuchStudy { id: 99, .. })
    ));
    let names: Vec<String> = store
        .list_studies()
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn filters() {
    let store = Store::open_in_memory().unwrap();
    let s1 = store
        .create_study("s1", Path::new("/c.yaml"), "grid")
        .unwrap();
    let s2 = store
        .create_study("s2", Path::new("/c.yaml"), "grid")
        .unwrap();
    let plan = [
        (Some(s1), TrialStatus::Completed),
        (Some(s1), TrialStatus::Failed),
        (Some(s2), TrialStatus::Completed),
        (None, TrialStatus::Stopped),
        (Some(s1), TrialStatus::Running),
        (Some(s1), TrialStatus::Completed),
    ];
    let mut ids = Vec::new();
    for (i, (study, status)) in plan.iter().enumerate() {
        let id = store
            .insert_trial(&new_trial(*study, &i.to_string()))
            .unwrap();
        if status.is_finished() {
            store
                .finish_trial(id, &TrialEnd::new(*status, 1.0))
                .unwrap();
        }
        ids.push(id);
    }
    let ids_of = |f: TrialFilter| -> Vec<i64> {
        store
            .list_trials(&f)
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect()
    };
    assert_eq!(ids_of(TrialFilter::all()), ids);
    assert_eq!(
        ids_of(TrialFilter::all().study(s1)),
        [ids[0], ids[1], ids[4], ids[5]]
    );
    assert_eq!(
        ids_of(TrialFilter::all().status(TrialStatus::Completed)),
        [ids[0], ids[2], ids[5]]
    );
    assert_eq!(
        ids_of(
            TrialFilter::all()
                .status(TrialStatus::Failed)
                .status(TrialStatus::Stopped)
        ),
        [ids[1], ids[3]]
    );
    assert_eq!(
        ids_of(TrialFilter::all().study(s1).status(TrialStatus::Completed)),
        [ids[0], ids[5]]
    );
    assert_eq!(ids_of(TrialFilter::all().last(2)), [ids[4], ids[5]]);
    // By failure class, as the list's status column shows it: a trial that did not complete.
    let oom = store.insert_trial(&new_trial(None, "oom")).unwrap();
    let mut end = TrialEnd::new(TrialStatus::Failed, 1.0);
    end.failure = Some(Failure {
        class: FailureClass::Oom,
        line: None,
    });
    store.finish_trial(oom, &end).unwrap();
    let oom_filter = TrialFilter::all().failure(FailureClass::Oom);
    assert_eq!(ids_of(oom_filter.clone()), [oom]);
    assert!(ids_of(oom_filter.status(TrialStatus::Completed)).is_empty());
    assert!(ids_of(TrialFilter::all().failure(FailureClass::Nccl)).is_empty());
    assert_eq!(ids_of(TrialFilter::all().study(s2).last(5)), [ids[2]]);
    assert!(ids_of(TrialFilter::all().study(999)).is_empty());
    assert_eq!(store.study(s1).unwrap().unwrap().trials, 4);

    // Parsing statuses for the CLI.
    assert_eq!(
        "failed".parse::<TrialStatus>().unwrap(),
        TrialStatus::Failed
    );
    assert!(
        "done"
            .parse::<TrialStatus>()
            .unwrap_err()
            .to_string()
            .contains("done")
    );
}

#[test]
fn mark_interrupted_and_delete() {
    let store = Store::open_in_memory().unwrap();
    let done = store.insert_trial(&new_trial(None, "done")).unwrap();
    store.finish_trial(done, &completed_end()).unwrap();
    let a = store.insert_trial(&new_trial(None, "a")).unwrap();
    store.add_iterations(a, &iterations(1..=3)).unwrap();
    let b = store.insert_trial(&new_trial(None, "b")).unwrap();

    assert!(store.interrupt_trial(b).unwrap());
    assert!(!store.interrupt_trial(b).unwrap());
    assert!(!store.interrupt_trial(done).unwrap());
    assert_eq!(store.mark_interrupted().unwrap(), 1);
    assert_eq!(store.mark_interrupted().unwrap(), 0);
    let row = store.trial(a).unwrap().unwrap();
    assert_eq!(row.status, TrialStatus::Interrupted);
    assert_eq!(row.finished_at.as_deref(), Some(row.updated_at.as_str()));
    assert_eq!(
        store.trial(done).unwrap().unwrap().status,
        TrialStatus::Completed
    );

    assert!(store.delete_trial(a).unwrap());
    assert!(!store.delete_trial(a).unwrap());
    assert!(store.trial(a).unwrap().is_none());
    assert!(matches!(
        store.iterations(a),
        Err(StoreError::NoSuchTrial { .. })
    ));
}

/// A small RFC 4180 reader for checking the export.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' => {
                assert!(field.is_empty(), "quote inside an unquoted field");
                quoted = true;
            }
            ',' => row.push(std::mem::take(&mut field)),
            '\r' => assert_eq!(chars.next(), Some('\n'), "CR without LF outside quotes"),
            '\n' => panic!("bare LF outside quotes"),
            _ => field.push(c),
        }
        if c == '\r' {
            row.push(std::mem::take(&mut field));
            rows.push(std::mem::take(&mut row));
        }
    }
    assert!(
        !quoted && field.is_empty() && row.is_empty(),
        "unterminated record"
    );
    rows
}

#[test]
fn csv_export_quotes_fields() {
    let store = Store::open_in_memory().unwrap();
    let mut trial = new_trial(None, "csv");
    trial.overrides = vec![
        ("comment".into(), json!("a, b")),
        ("quote".into(), json!("say \"hi\"")),
        ("multi".into(), json!("line1\nline2")),
        ("n".into(), json!(4)),
    ];
    trial.profile = Some("p\"1".into());
    let id = store.insert_trial(&trial).unwrap();
    let mut end = completed_end();
    end.failure = Some(Failure {
        class: FailureClass::HostOom,
        line: None,
    });
    end.status = TrialStatus::Failed;
    store.finish_trial(id, &end).unwrap();
    let plain = store.insert_trial(&new_trial(None, "plain")).unwrap();

    let mut out = Vec::new();
    assert_eq!(
        store
            .export_trials_csv(&mut out, &TrialFilter::all())
            .unwrap(),
        2
    );
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("\"comment=a, b;quote=say \"\"hi\"\";multi=line1\nline2;n=4\",\"p\"\"1\"")
    );
    let rows = parse_csv(&text);
    assert_eq!(rows.len(), 3);
    let header = &rows[0];
    assert_eq!(header[0], "id");
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for name in [
        "status",
        "failure_class",
        "median_step_ms",
        "ci95_ms",
        "tokens_per_s_per_gpu",
        "tflops_per_gpu",
        "peak_mem_gib",
        "overrides",
        "profile",
        "created_at",
    ] {
        col(name);
    }
    let row = &rows[1];
    assert!(rows.iter().all(|r| r.len() == header.len()));
    assert_eq!(row[col("id")], id.to_string());
    assert_eq!(row[col("status")], "failed");
    assert_eq!(row[col("failure_class")], "host-oom");
    assert_eq!(row[col("median_step_ms")], "1025");
    assert_eq!(row[col("peak_mem_gib")], "171.25");
    assert_eq!(
        row[col("overrides")],
        "comment=a, b;quote=say \"hi\";multi=line1\nline2;n=4"
    );
    assert_eq!(row[col("profile")], "p\"1");
    let stored = store.trial(id).unwrap().unwrap();
    assert_eq!(row[col("created_at")], stored.created_at);
    assert_eq!(rows[2][col("id")], plain.to_string());
    assert_eq!(rows[2][col("status")], "running");
    assert_eq!(rows[2][col("median_step_ms")], "");

    // Filtered export.
    let mut out = Vec::new();
    let filter = TrialFilter::all().status(TrialStatus::Running);
    assert_eq!(store.export_trials_csv(&mut out, &filter).unwrap(), 1);
    assert_eq!(parse_csv(&String::from_utf8(out).unwrap()).len(), 2);
}

#[test]
fn csv_export_of_iterations() {
    let store = Store::open_in_memory().unwrap();
    let id = store.insert_trial(&new_trial(None, "it")).unwrap();
    let mut iters = iterations(1..=3);
    iters[2].loss = Some(f64::NAN);
    iters[1].timestamp = Some("2025-01-01, 00:00:02".into());
    store.add_iterations(id, &iters).unwrap();
    let mut out = Vec::new();
    assert_eq!(store.export_iterations_csv(&mut out, id).unwrap(), 3);
    let rows = parse_csv(&String::from_utf8(out).unwrap());
    assert_eq!(rows.len(), 4);
    let header = &rows[0];
    assert_eq!(
        &header[..4],
        ["trial_id", "iteration", "train_iters", "elapsed_ms"]
    );
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    assert_eq!(rows[1][col("trial_id")], id.to_string());
    assert_eq!(rows[1][col("iteration")], "1");
    assert_eq!(rows[1][col("elapsed_ms")], "1001");
    assert_eq!(rows[1][col("grad_norm")], "");
    assert_eq!(rows[2][col("timestamp")], "2025-01-01, 00:00:02");
    assert_eq!(rows[3][col("loss")], "NaN");
    assert!(matches!(
        store.export_iterations_csv(&mut Vec::new(), 99),
        Err(StoreError::NoSuchTrial { .. })
    ));
}

#[test]
fn open_creates_folders_and_reopening_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/c/trials.db");
    let store = Store::open(&path).unwrap();
    assert!(path.is_file());
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    let id = store.insert_trial(&new_trial(None, "x")).unwrap();
    drop(store);
    for _ in 0..2 {
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(
            store.migration_history().unwrap().len() as i64,
            SCHEMA_VERSION
        );
        assert!(store.trial(id).unwrap().is_some());
    }
}

#[test]
fn a_newer_schema_is_refused() {
    let (_dir, path) = tmp_db();
    drop(Store::open(&path).unwrap());
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "INSERT INTO schema_migrations (version, description, applied_at) VALUES (99, 'future', 'x')",
        [],
    )
    .unwrap();
    drop(raw);
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found: 99, known, .. } if known == SCHEMA_VERSION),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(
        text.contains("schema version 99, newer than this primus-tune knows"),
        "{text}"
    );
}

#[test]
fn foreign_and_broken_files_are_refused_untouched() {
    let (dir, path) = tmp_db();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch("CREATE TABLE notes (x TEXT); INSERT INTO notes VALUES ('keep');")
        .unwrap();
    drop(raw);
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(&err, StoreError::Foreign { tables, .. } if tables == &["notes"]),
        "{err}"
    );
    let raw = rusqlite::Connection::open(&path).unwrap();
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "a refused database keeps its journal mode");
    drop(raw);

    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
    let err = Store::open(&junk).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with(&junk.display().to_string()), "{text}");
    assert!(text.contains("not a database"), "{text}");
}

/// Writes trial 1 (finished) and trial 2 (running) through `store`.
fn write_crash_scenario(store: &Store) -> (i64, i64) {
    let t1 = store.insert_trial(&new_trial(None, "one")).unwrap();
    for chunk in iterations(1..=50).chunks(7) {
        store.add_iterations(t1, chunk).unwrap();
    }
    store.add_memory_report(t1, &report(0, 10)).unwrap();
    store.finish_trial(t1, &completed_end()).unwrap();
    let t2 = store.insert_trial(&new_trial(None, "two")).unwrap();
    store.add_iterations(t2, &iterations(1..=20)).unwrap();
    (t1, t2)
}

fn check_after_crash(path: &Path, t1: i64, t2: i64) {
    let store = Store::open(path).unwrap();
    let one = store.trial(t1).unwrap().unwrap();
    assert_eq!(one.status, TrialStatus::Completed);
    assert_eq!(one.summary, completed_end().summary);
    assert!(same_iterations(
        &store.iterations(t1).unwrap(),
        &iterations(1..=50)
    ));
    assert_eq!(store.memory_reports(t1).unwrap(), vec![report(0, 10)]);
    let two = store.trial(t2).unwrap().unwrap();
    assert_eq!(two.status, TrialStatus::Running);
    assert!(same_iterations(
        &store.iterations(t2).unwrap(),
        &iterations(1..=20)
    ));

    assert_eq!(store.mark_interrupted().unwrap(), 1);
    let two = store.trial(t2).unwrap().unwrap();
    assert_eq!(two.status, TrialStatus::Interrupted);
    assert!(two.finished_at.is_some());
    assert_eq!(
        store.trial(t1).unwrap().unwrap().status,
        TrialStatus::Completed
    );
    drop(store);

    let raw = rusqlite::Connection::open(path).unwrap();
    let check: String = raw
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn a_connection_that_is_never_closed_loses_nothing_committed() {
    let (_dir, path) = tmp_db();
    let writer = Store::open(&path).unwrap();
    let reader = Store::open(&path).unwrap();
    let (t1, t2) = write_crash_scenario(&writer);
    // The other handle sees the commits at once.
    assert_eq!(
        reader.trial(t1).unwrap().unwrap().status,
        TrialStatus::Completed
    );
    std::mem::forget(writer); // no clean close, no checkpoint
    drop(reader);
    check_after_crash(&path, t1, t2);
}

const CRASH_ENV: &str = "PRIMUS_TUNE_STORE_CRASH_DB";

/// Not a test on its own: `a_killed_process_loses_no_finished_trial` runs this test binary
/// again with only this test selected and `CRASH_ENV` set; it writes, starts a transaction it
/// never commits, and SIGKILLs itself.
#[test]
fn crash_child() {
    let Some(path) = std::env::var_os(CRASH_ENV) else {
        return;
    };
    let path = PathBuf::from(path);
    let store = Store::open(&path).unwrap();
    let (t1, t2) = write_crash_scenario(&store);
    std::fs::write(path.with_extension("ids"), format!("{t1} {t2}")).unwrap();
    let mut raw = rusqlite::Connection::open(&path).unwrap();
    let tx = raw
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    for n in 21..=500 {
        tx.execute(
            "INSERT INTO iterations (trial_id, iteration, recorded_at, data) VALUES (?1, ?2, 'x', '{}')",
            (t2, n),
        )
        .unwrap();
    }
    tx.execute("UPDATE trials SET status = 'completed' WHERE id = ?1", [t2])
        .unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL).unwrap();
    unreachable!("SIGKILL did not kill the process");
}

#[cfg(unix)]
#[test]
fn a_killed_process_loses_no_finished_trial() {
    use std::os::unix::process::ExitStatusExt;
    let (_dir, path) = tmp_db();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CRASH_ENV, &path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(9),
        "child: {:?}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let ids: Vec<i64> = std::fs::read_to_string(path.with_extension("ids"))
        .expect("the child wrote the trial ids")
        .split(' ')
        .map(|s| s.parse().unwrap())
        .collect();
    // The uncommitted transaction (iterations 21..=500, status change) is gone.
    check_after_crash(&path, ids[0], ids[1]);
}

#[test]
fn concurrent_handles_share_the_file() {
    let (_dir, path) = tmp_db();
    drop(Store::open(&path).unwrap());
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                for t in 0..15 {
                    let id = store
                        .insert_trial(&new_trial(None, &format!("{w}-{t}")))
                        .unwrap();
                    for chunk in iterations(1..=30).chunks(10) {
                        store.add_iterations(id, chunk).unwrap();
                    }
                    store.finish_trial(id, &completed_end()).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let trials = store.list_trials(&TrialFilter::all()).unwrap();
    assert_eq!(trials.len(), 30);
    assert!(
        trials
            .iter()
            .all(|t| t.iterations_stored == 30 && t.status == TrialStatus::Completed)
    );
}

#[test]
fn a_writer_waits_for_another_process_lock() {
    let (_dir, path) = tmp_db();
    let store = Store::open(&path).unwrap();
    let (locked_tx, locked_rx) = mpsc::channel();
    let holder = {
        let path = path.clone();
        std::thread::spawn(move || {
            let mut raw = rusqlite::Connection::open(&path).unwrap();
            let tx = raw
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .unwrap();
            locked_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(400));
            tx.commit().unwrap();
        })
    };
    locked_rx.recv().unwrap();
    let start = Instant::now();
    let id = store.insert_trial(&new_trial(None, "waits")).unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
    holder.join().unwrap();
    assert!(store.trial(id).unwrap().is_some());
}

#[test]
fn store_handle_is_shared_across_threads() {
    let store = std::sync::Arc::new(Store::open_in_memory().unwrap());
    let id = store.insert_trial(&new_trial(None, "shared")).unwrap();
    let handles: Vec<_> = (0..4u64)
        .map(|k| {
            let store = store.clone();
            std::thread::spawn(move || {
                store
                    .add_iterations(id, &iterations(k * 10 + 1..=k * 10 + 10))
                    .unwrap()
            })
        })
        .collect();
    let added: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(added, 40);
    assert_eq!(store.iterations(id).unwrap(), iterations(1..=40));
    let _: Value = serde_json::to_value(store.trial(id).unwrap()).unwrap();
}
