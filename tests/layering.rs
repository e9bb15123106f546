//! The layers of DESIGN.md §3, enforced on the source tree (test code excluded):
//!
//! - the core (everything but `cli/` and `tui/`) knows no frontend: no `crate::cli`, no
//!   `crate::tui`, no ratatui or crossterm (those are the TUI's alone), and no printing
//!   (`println!` and friends) outside `cli/`;
//! - `tui/` does not import `cli/`;
//! - each engine imports only the layers below it (the table in `allowed`), so there is no
//!   cycle: `store` does not import `run`, `run` does not import `tune`, nothing but the
//!   frontends imports `app`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable source folder") {
        let p = e.expect("readable entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A source file's non-test code, without comments: what it compiles into the binary.
struct Source {
    /// `src`-relative path, `/`-separated (`run/trial/mod.rs`).
    rel: String,
    code: String,
}

fn sources() -> Vec<Source> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 40, "the source tree was found");
    files
        .into_iter()
        .filter_map(|p| {
            let rel = p
                .strip_prefix(&root)
                .ok()?
                .to_string_lossy()
                .replace('\\', "/");
            let name = p.file_name()?.to_string_lossy().into_owned();
            // Test modules in their own files.
            if name.ends_with("tests.rs") || rel.contains("/tests/") {
                return None;
            }
            let text = std::fs::read_to_string(&p).ok()?;
            // By convention a file's tests come last, after `#[cfg(test)]`.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let code = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            Some(Source { rel, code })
        })
        .collect()
}

/// The top-level module a file belongs to (`run` for `run/trial/mod.rs`, `checklist` for
/// `checklist.rs`, `lib`/`main` for the roots).
fn layer(rel: &str) -> &str {
    let first = rel.split('/').next().unwrap_or(rel);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// The crate's modules a file names (`crate::run::…` → `run`).
fn imports(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        // `crate::{a, b}` groups
        if after.starts_with('{') {
            let group = &after[1..after.find('}').unwrap_or(after.len())];
            for part in group.split(',') {
                let n: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !n.is_empty() {
                    out.insert(n);
                }
            }
        } else if !name.is_empty() {
            out.insert(name);
        }
        rest = after;
    }
    out
}

/// The engine layers, bottom up; a layer may import the tiers below its own (and `config` and
/// `megatron`, one tier, each other: `megatron` reads config values, lint reads the typed view).
const TIERS: &[&[&str]] = &[
    &["util"],
    &["domain"],
    &["config", "megatron"],
    &["telemetry", "store"],
    &["run"],
    &["gemm"],
    &["checklist", "tune"],
    &["report"],
    &["app"],
];

/// What each layer may import, besides itself; `None` for a layer the table does not know.
fn allowed(layer: &str) -> Option<Vec<&'static str>> {
    let tier = TIERS.iter().position(|t| t.contains(&layer))?;
    let mut ok: Vec<&str> = TIERS[..tier]
        .iter()
        .flat_map(|t| t.iter().copied())
        .collect();
    if TIERS[tier].contains(&"megatron") {
        ok.extend(TIERS[tier].iter().copied());
    }
    // Side by side, not below one another.
    ok.retain(|m| !(layer == "telemetry" && *m == "store"));
    ok.retain(|m| !(layer == "store" && ["config", "megatron"].contains(m)));
    Some(ok)
}

const FRONTENDS: &[&str] = &["cli", "tui", "main", "lib"];

#[test]
fn each_engine_imports_only_the_layers_below_it() {
    let mut offenders = Vec::new();
    for s in sources() {
        let l = layer(&s.rel);
        if FRONTENDS.contains(&l) {
            continue;
        }
        let ok = allowed(l).unwrap_or_else(|| panic!("{}: a layer the table does not know", s.rel));
        for m in imports(&s.code) {
            if m != l && !ok.contains(&m.as_str()) {
                offenders.push(format!("{} imports crate::{m}", s.rel));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "layer violations:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn megatron_reads_only_config_values() {
    for s in sources().iter().filter(|s| layer(&s.rel) == "megatron") {
        for line in s.code.lines().filter(|l| l.contains("crate::config")) {
            assert!(line.contains("crate::config::value"), "{}: {line}", s.rel);
        }
    }
}

#[test]
fn store_and_run_do_not_form_a_cycle() {
    let srcs = sources();
    let store_imports_run = srcs
        .iter()
        .filter(|s| layer(&s.rel) == "store")
        .any(|s| imports(&s.code).contains("run"));
    assert!(!store_imports_run, "store imports run");
    assert!(
        srcs.iter()
            .filter(|s| layer(&s.rel) == "run")
            .any(|s| imports(&s.code).contains("store")),
        "the check sees run's use of the store (else it proves nothing)"
    );
}

#[test]
fn the_core_knows_no_frontend() {
    let offenders: Vec<String> = sources()
        .iter()
        .filter(|s| !FRONTENDS.contains(&layer(&s.rel)))
        .filter(|s| {
            let i = imports(&s.code);
            i.contains("cli") || i.contains("tui")
        })
        .map(|s| s.rel.clone())
        .collect();
    assert!(offenders.is_empty(), "{offenders:?}");
    let tui_uses_cli: Vec<String> = sources()
        .iter()
        .filter(|s| layer(&s.rel) == "tui" && imports(&s.code).contains("cli"))
        .map(|s| s.rel.clone())
        .collect();
    assert!(tui_uses_cli.is_empty(), "{tui_uses_cli:?}");
}

#[test]
fn terminal_crates_are_used_only_by_the_tui() {
    let offenders: Vec<String> = sources()
        .iter()
        .filter(|s| layer(&s.rel) != "tui")
        .filter(|s| s.code.contains("ratatui") || s.code.contains("crossterm"))
        .map(|s| s.rel.clone())
        .collect();
    assert!(
        offenders.is_empty(),
        "terminal crates used in {offenders:?}"
    );
}

#[test]
fn only_the_cli_prints() {
    // (The proxy workload writes its training log to the writer `primus-tune proxy` hands it.)
    let printing = ["println!", "print!", "eprintln!", "eprint!", "dbg!"];
    let prints = |s: &Source| printing.iter().any(|p| s.code.contains(p));
    let srcs = sources();
    let offenders: Vec<String> = srcs
        .iter()
        .filter(|s| layer(&s.rel) != "cli" && prints(s))
        .map(|s| s.rel.clone())
        .collect();
    assert!(offenders.is_empty(), "printing outside cli/: {offenders:?}");
    assert!(
        srcs.iter().any(|s| layer(&s.rel) == "cli" && prints(s)),
        "the check sees the CLI's printing (else it proves nothing)"
    );
}

#[test]
fn nothing_below_the_frontends_imports_the_app_layer() {
    let offenders: Vec<String> = sources()
        .iter()
        .filter(|s| !FRONTENDS.contains(&layer(&s.rel)) && layer(&s.rel) != "app")
        .filter(|s| imports(&s.code).contains("app"))
        .map(|s| s.rel.clone())
        .collect();
    assert!(offenders.is_empty(), "{offenders:?}");
}

/// Every count the tool prints agrees with its noun (`1 error`, `2 GPUs`): no `error(s)` or
/// `launch(es)` in a string of the production code (`util::text::count` writes them).
#[test]
fn no_string_writes_a_noun_with_s_in_brackets() {
    let bracket = |code: &str| -> Vec<String> {
        let mut found = Vec::new();
        for line in code.lines() {
            // Only inside string literals: an odd number of quotes before the match.
            for pat in ["(s)", "(es)"] {
                let mut from = 0;
                while let Some(i) = line[from..].find(pat).map(|i| i + from) {
                    let before = &line[..i];
                    let in_string = before.matches('"').count() % 2 == 1;
                    let after_letter = before.chars().last().is_some_and(|c| c.is_alphabetic());
                    if in_string && after_letter {
                        found.push(line.trim().to_string());
                    }
                    from = i + pat.len();
                }
            }
        }
        found
    };
    let bad: Vec<String> = sources()
        .iter()
        .flat_map(|s| {
            bracket(&s.code)
                .into_iter()
                .map(move |l| format!("{}: {l}", s.rel))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "counts with a bracketed plural:\n{}",
        bad.join("\n")
    );
}
