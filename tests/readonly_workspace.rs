//! A workspace that cannot be written can still be read: on a read-only bind mount, `trials`,
//! `studies` and `trials show N` (text and `--json`) work and exit 0, and a database of an older
//! schema says it must be upgraded where it can be written (not "attempt to write a readonly
//! database"). The mounts are real; where this process may not mount, the tests say so and skip.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::mount::Mount;
use std::process::Output;

const WORKLOAD: &str = r#"for i in 1 2 3 4 5 6; do printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): 100.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' "$i" 6 "$i"; done"#;

/// A workspace holding one completed trial and one study, then seen through a read-only mount
/// (the setup's workspace variable points at the mount).
fn read_only_workspace() -> Result<(common::Setup, Mount), String> {
    let mut s = common::setup("ro-workload", WORKLOAD, "unused");
    let out = common::cmd(&s)
        .arg("run")
        .arg(&s.exp)
        .args(["--profile", "ro-workload", "--no-telemetry", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let store = primus_tune::store::Store::open(&s.ws.join("trials.db")).unwrap();
    store.create_study("ro-study", &s.exp, "sweep").unwrap();
    drop(store);
    let ro = s.dir.path().join("ro");
    let m = Mount::read_only_bind(&s.ws, &ro)?;
    s.ws = ro;
    Ok((s, m))
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The command with the setup's experiment: `studies` takes it as its argument, `trials` as
/// `--config`.
fn run(s: &common::Setup, args: &[&str]) -> Output {
    let mut c = common::cmd(s);
    c.args(args);
    if args[0] == "studies" {
        c.arg(&s.exp);
    } else {
        c.arg("--config").arg(&s.exp);
    }
    c.output().unwrap()
}

#[test]
fn a_read_only_workspace_lists_and_shows_its_trials() {
    let (s, _mount) = match read_only_workspace() {
        Ok(x) => x,
        Err(why) => {
            eprintln!("skipped: cannot make a read-only mount here: {why}");
            return;
        }
    };
    let before: Vec<_> = std::fs::read_dir(&s.ws)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let out = run(&s, &["trials"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = run(&s, &["trials", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().map(Vec::len), Some(1), "{rows}");
    assert_eq!(rows[0]["status"], "completed", "{}", rows[0]["status"]);

    let out = run(&s, &["studies"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = run(&s, &["studies", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ro-study"),
        "{}",
        text(&out)
    );

    let out = run(&s, &["trials", "show", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = run(&s, &["trials", "show", "1", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["iterations"].as_array().map(Vec::len), Some(6), "{v}");
    let after: Vec<_> = std::fs::read_dir(&s.ws)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before, after, "nothing was created in the workspace");
}

#[test]
fn an_older_schema_on_a_read_only_workspace_asks_for_an_upgrade() {
    let (mut s, mount) = match read_only_workspace() {
        Ok(x) => x,
        Err(why) => {
            eprintln!("skipped: cannot make a read-only mount here: {why}");
            return;
        }
    };
    drop(mount);
    // The schema as an older primus-tune left it: its last migration not applied yet.
    let src = s.dir.path().join("ws");
    downgrade(&src.join("trials.db"));
    let ro = s.dir.path().join("ro2");
    let _mount = Mount::read_only_bind(&src, &ro).unwrap();
    s.ws = ro;
    for args in [&["trials"][..], &["trials", "show", "1"], &["studies"]] {
        let out = run(&s, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", text(&out));
        assert!(
            err.contains("older than this primus-tune") && err.contains("read-only"),
            "{args:?}: {}",
            text(&out)
        );
    }
}

/// Removes the record of the newest migration: what a database an older version wrote looks
/// like to the version check.
fn downgrade(db: &std::path::Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute(
        "DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)",
        [],
    )
    .unwrap();
}
