//! Lint refuses exactly what PyYAML's SafeLoader refuses. Primus reads an experiment with
//! `yaml.load(open(path), Loader=yaml.SafeLoader)`; a file lint passes but SafeLoader refuses
//! fails the job at start-up, and a file SafeLoader takes but lint refuses blocks a valid run.
//!
//! `tests/fixtures/safeloader/corpus.jsonl` holds inputs (hand-written edge cases and seeded
//! mutations of the bundled example) with SafeLoader's verdict, as
//! `scripts/safeloader_corpus.py` recorded it with PyYAML 6.0.3. Each input is written to a file
//! and read the way lint reads an experiment (`read_input`, then the YAML reader); the verdicts
//! must agree on every input. A refusal must name a line and column inside the text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use primus_tune::config::resolve::read_input;
use primus_tune::config::{Env, yaml};
use std::path::Path;

struct Case {
    id: u64,
    origin: String,
    bytes: Vec<u8>,
    refuse: bool,
    error: String,
}

fn corpus() -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/safeloader/corpus.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let bytes = match (v["text"].as_str(), v["base64"].as_str()) {
                (Some(t), _) => t.as_bytes().to_vec(),
                (None, Some(b)) => base64(b),
                _ => panic!("no input in {l}"),
            };
            Case {
                id: v["id"].as_u64().unwrap(),
                origin: v["origin"].as_str().unwrap_or_default().to_string(),
                bytes,
                refuse: v["verdict"] == "refuse",
                error: v["error"].as_str().unwrap_or_default().to_string(),
            }
        })
        .collect()
}

/// Standard base64 (the fixture's non-UTF-8 inputs).
fn base64(s: &str) -> Vec<u8> {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = ABC.iter().position(|x| *x == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Lint's verdict on a file holding `bytes`: its refusal (line, column, message), or None.
fn lint_reads(dir: &Path, bytes: &[u8]) -> Option<(u32, u32, String)> {
    let file = dir.join("exp.yaml");
    std::fs::write(&file, bytes).unwrap();
    let text = match read_input(&file, &Env::empty()) {
        Ok(t) => t,
        Err(primus_tune::config::ConfigError::Invalid {
            line, col, message, ..
        }) => return Some((line, col, message)),
        Err(e) => return Some((0, 0, e.to_string())),
    };
    yaml::parse(&text).err().map(|e| (e.line, e.col, e.message))
}

/// Lines as PyYAML counts them (its marks): LF, CR LF, a lone CR, NEL, LS and PS each end one.
fn pyyaml_lines(bytes: &[u8]) -> u32 {
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    1 + text
        .chars()
        .filter(|c| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}'))
        .count() as u32
}

#[test]
fn lint_refuses_what_safeloader_refuses_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let cases = corpus();
    assert!(cases.len() >= 2000, "{} inputs", cases.len());
    assert!(
        cases.iter().filter(|c| c.refuse).count() >= 200,
        "the corpus holds refusals to agree with"
    );
    let (mut agree, mut missed, mut extra, mut outside) = (0, Vec::new(), Vec::new(), Vec::new());
    let mut stricter = 0;
    for c in &cases {
        let ours = lint_reads(dir.path(), &c.bytes);
        match (&ours, c.refuse) {
            (Some((line, col, msg)), true) => {
                let lines = pyyaml_lines(&c.bytes);
                if *line < 1 || *line > lines.max(1) || *col < 1 {
                    outside.push(format!("input {}: refusal at {line}:{col}: {msg}", c.id));
                }
                agree += 1;
            }
            (None, false) => agree += 1,
            (None, true) => missed.push(c),
            // saphyr wants the continuation lines of a flow collection or quoted scalar indented
            // past their block (YAML 1.2); PyYAML does not check. Stricter, and rare: counted.
            (Some((_, _, msg)), false) if msg.contains("invalid indentation") => {
                stricter += 1;
            }
            (Some(_), false) => extra.push((c, ours.clone())),
        }
    }
    eprintln!(
        "SafeLoader agreement: {agree} of {} inputs; {} passed lint but SafeLoader refuses them, \
         {} refused by lint but SafeLoader accepts them, {stricter} more refused only for the \
         indentation of a multi-line flow collection or quoted scalar",
        cases.len(),
        missed.len(),
        extra.len()
    );
    // How many disagreements to list (`SAFELOADER_SHOW=N` for more while fixing the reader).
    let show = std::env::var("SAFELOADER_SHOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    for c in missed.iter().take(show) {
        eprintln!(
            "  missed #{} ({}): {:?}\n    SafeLoader: {}",
            c.id,
            c.origin,
            String::from_utf8_lossy(&c.bytes),
            c.error
        );
    }
    for (c, ours) in extra.iter().take(show) {
        eprintln!(
            "  extra #{} ({}): {:?}\n    lint: {:?}",
            c.id,
            c.origin,
            String::from_utf8_lossy(&c.bytes),
            ours
        );
    }
    eprintln!("{} refusals placed outside the text", outside.len());
    for o in outside.iter().take(10) {
        eprintln!("  {o}");
    }
    assert!(missed.is_empty() && extra.is_empty(), "verdicts differ");
    assert!(
        outside.is_empty(),
        "a refusal must name a line and column of the text"
    );
}

/// `lint` names a SafeLoader refusal as `file:line:column` (here a redefined anchor, which a
/// YAML 1.2 reader takes and Primus does not).
#[test]
fn lint_names_a_safeloader_refusal_at_file_line_column() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("ex");
    primus_tune::util::bundled::extract(&root).unwrap();
    let exp = root.join("experiments/anchors.yaml");
    std::fs::write(&exp, "a: &x 1\nb: &x 2\n").unwrap();
    let out = assert_cmd::Command::cargo_bin("primus-tune")
        .unwrap()
        .env("XDG_DATA_HOME", d.path().join("data"))
        .env("PRIMUS_TUNE_CONFIG", d.path().join("none.toml"))
        .arg("lint")
        .arg(&exp)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "anchors.yaml:2:4: error[load-error]: YAML error: found duplicate anchor 'x'"
        ),
        "{text}"
    );
}
