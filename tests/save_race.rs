//! Concurrent saves lose no update: 200 pairs of `set --write` on one experiment, started at the
//! same moment, each editing another key. Every save either lands (exit 0, its value in the file)
//! or fails with the "changed on disk" conflict (non-zero, nothing of it written); never "saved"
//! with the edit gone. No temp file is left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Output;

fn set(s: &common::Setup, assignment: &str) -> std::process::Child {
    common::cmd(s)
        .arg("set")
        .arg(&s.exp)
        .arg(assignment)
        .args(["--write", "--no-backup"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether a save landed, checked against the file; a refused one must say why.
fn landed(out: &Output, text: &str, line: &str) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        assert!(
            text.contains(line),
            "`{line}` reported saved but not in the file:\n{text}"
        );
        true
    } else {
        assert!(err.contains("changed on disk"), "{err}");
        assert!(!text.contains(line), "refused but written: {line}");
        false
    }
}

#[test]
fn two_hundred_pairs_of_concurrent_saves_lose_no_update() {
    let s = common::setup("unused", "true", "unused");
    let (mut both, mut one) = (0, 0);
    for i in 0..200 {
        let (a, b) = (1000 + i, 5000 + i);
        let pa = set(&s, &format!("train_iters={a}"));
        let pb = set(&s, &format!("eval_interval={b}"));
        let (oa, ob) = (
            pa.wait_with_output().unwrap(),
            pb.wait_with_output().unwrap(),
        );
        let text = std::fs::read_to_string(&s.exp).unwrap();
        let la = landed(&oa, &text, &format!("train_iters: {a}\n"));
        let lb = landed(&ob, &text, &format!("eval_interval: {b}\n"));
        assert!(la || lb, "pair {i}: neither save landed");
        if la && lb {
            both += 1;
        } else {
            one += 1;
        }
    }
    eprintln!("200 pairs: {both} both landed, {one} one refused with the conflict");
    let dir = s.exp.parent().unwrap();
    let temps: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}

/// SIGKILL at spread-out moments of 100 saves: the file is always byte-exact the old or the new
/// text, and the temp files the killed saves left are gone after the next save.
#[test]
fn a_save_killed_at_any_moment_leaves_the_old_or_the_new_file() {
    let s = common::setup("unused", "true", "unused");
    // How long a whole save takes here: the kills are spread over it.
    let t = std::time::Instant::now();
    assert!(set(&s, "train_iters=6999").wait().unwrap().success());
    let span = t.elapsed().as_micros() as u64 * 12 / 10;
    let mut before = std::fs::read_to_string(&s.exp).unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let (mut old, mut new) = (0, 0);
    for i in 0..100 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let delay = std::time::Duration::from_micros((seed >> 33) % span);
        let mut child = set(&s, &format!("train_iters={}", 7000 + i));
        std::thread::sleep(delay);
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = child.wait();
        let now = std::fs::read_to_string(&s.exp).unwrap();
        if now == before {
            old += 1;
        } else {
            assert_eq!(
                now,
                with_train_iters(&before, 7000 + i),
                "save {i}: neither the old nor the new text"
            );
            new += 1;
            before = now;
        }
    }
    eprintln!("100 killed saves: {old} left the old file, {new} the new one");
    // One save that runs to its end removes what the killed ones left.
    let out = set(&s, "train_iters=9999").wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let temps: Vec<_> = std::fs::read_dir(s.exp.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}

/// `text` with its `train_iters:` line set to `n`, as `set` writes it.
fn with_train_iters(text: &str, n: u64) -> String {
    let lines: Vec<String> = text
        .lines()
        .map(|l| match l.split_once("train_iters:") {
            Some((indent, _)) if indent.trim().is_empty() => format!("{indent}train_iters: {n}"),
            _ => l.to_string(),
        })
        .collect();
    lines.join("\n") + "\n"
}
