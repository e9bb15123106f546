//! The layers of DESIGN.md §3, enforced on the production code as the compiler sees it.
//!
//! Each file of `src/` is parsed with `syn` and placed in the module tree by following `mod`
//! declarations from `lib.rs` and `main.rs`, so a file declared under `#[cfg(test)]` is test
//! code, and so is any item under `#[cfg(test)]` — nothing else. Every path the rest names
//! (`use` trees with groups, renames and globs; `crate::`, `self::`, `super::super::`; paths
//! in expressions, types and macro arguments) is resolved to the module it lands in, through
//! re-exports. Then (the tables are in `rules.rs`):
//!
//! - the core (all but `cli/`, `tui/`, `main.rs`) names neither frontend, uses neither
//!   ratatui nor crossterm, and does not print (`println!`, `print!`, `eprintln!`, `eprint!`,
//!   `dbg!`, `std::io::stdout`/`stderr`): the library must be usable without a terminal;
//! - `cli/` and `tui/` do not import each other;
//! - each engine imports only the layers below it (`TIERS`), `megatron` reads only
//!   `domain::value`, and nothing but the frontends imports `app`;
//! - inside `app/`, the tiers of issue 44 (`APP_TIERS`): leaves → launch → trial → study →
//!   views, and nothing below names `views`;
//! - the import graph, between the folders of `src/` and between the files of `app/`, has no
//!   cycle but the known ones (`KNOWN_CYCLES`).
//!
//! Today's exceptions and violations are listed (`KNOWN`, `KNOWN_CYCLES`); the lists are
//! ratchets: a new entry fails, and so does one that no longer happens until it is removed.
//! Why: so a layer break is a test failure, not a review comment. The compiler holds the
//! outer boundary itself (the frontends are the binary's, the engines crate-private and named
//! by the frontends only through `app::engines`); the tiers among the engines and inside
//! `app/` are held here.

mod graph;
mod rules;
mod tree;

use std::collections::BTreeMap;
use std::path::Path;

use rules::{Violation, against_known, check};
use tree::{Crate, Named};

/// Cycles in the import graph today, each a strongly connected component (sorted): none since
/// the session, defaults and launch cluster was untangled (a new one fails the test).
const KNOWN_CYCLES: &[&[&str]] = &[];

fn read_dir(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    for e in std::fs::read_dir(dir).expect("readable source folder") {
        let p = e.expect("readable entry").path();
        if p.is_dir() {
            read_dir(&p, root, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p
                .strip_prefix(root)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel, std::fs::read_to_string(&p).expect("readable source"));
        }
    }
}

/// `src/`, in memory: `src`-relative path → text.
fn real_tree() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    read_dir(&root, &root, &mut out);
    assert!(out.len() > 40, "the source tree was found");
    out
}

fn load(sources: &BTreeMap<String, String>) -> Crate {
    let c = Crate::load(sources);
    assert!(c.problems.is_empty(), "{}", c.problems.join("\n"));
    c
}

fn list(vs: &[&Violation]) -> String {
    vs.iter().map(|v| format!("  {v}\n")).collect()
}

#[test]
fn every_file_is_in_the_module_tree_and_test_files_are_known_by_their_declaration() {
    let c = load(&real_tree());
    let test_only: Vec<&str> = c
        .files
        .iter()
        .filter(|f| f.test_only)
        .map(|f| f.rel.as_str())
        .collect();
    // Declared `#[cfg(test)] mod …;` (a sample; a name alone would not tell).
    for f in [
        "app/test_session.rs",
        "tui/parity_tests.rs",
        "config/lint/tests.rs",
    ] {
        assert!(
            test_only.contains(&f),
            "{f} not seen as test code: {test_only:?}"
        );
    }
    for f in [
        "lib.rs",
        "main.rs",
        "run/trial/mod.rs",
        "tune/search/prior/batch.rs",
    ] {
        let file = c.files.iter().find(|x| x.rel == f).expect("in the tree");
        assert!(!file.test_only, "{f}");
    }
    let trial = c.files.iter().find(|x| x.rel == "run/trial/mod.rs");
    assert_eq!(
        trial.map(|f| f.module.join("::")),
        Some("run::trial".into())
    );
}

#[test]
fn the_production_code_keeps_the_layers() {
    let found = check(&load(&real_tree()));
    let (new, stale) = against_known(&found);
    assert!(new.is_empty(), "layer violations:\n{}", list(&new));
    assert!(
        stale.is_empty(),
        "fixed, so remove from rules::KNOWN: {stale:#?}"
    );
}

#[test]
fn every_app_module_has_a_tier() {
    let c = load(&real_tree());
    let missing: Vec<String> = c
        .file_modules
        .iter()
        .filter(|m| m.first().is_some_and(|f| f == "app"))
        .filter(|m| c.files.iter().any(|f| &f.module == *m && !f.test_only))
        .filter(|m| rules::app_tier(m).is_none())
        .map(|m| m.join("::"))
        .collect();
    assert!(missing.is_empty(), "add to rules::APP_TIERS: {missing:?}");
}

/// The checks see what they check, else a clean result proves nothing.
#[test]
fn the_checks_see_the_real_edges() {
    let c = load(&real_tree());
    let (folders, app) = graph::imports(&c);
    assert!(folders.has_edge("run", "store"));
    assert!(folders.has_edge("cli", "app") && folders.has_edge("tui", "app"));
    assert!(app.has_edge("app::sweep", "app::trial"));
    let cli_prints = c
        .files
        .iter()
        .filter(|f| f.rel.starts_with("cli/"))
        .flat_map(|f| c.uses(f))
        .any(|u| matches!(u.what, Named::Macro(ref m) if m == "println"));
    assert!(cli_prints, "the CLI's println! is seen");
}

/// Each kind of break, injected into an in-memory copy of `src/` after the file's tests
/// (where a text scan stopped reading), is reported — and test code is not.
#[test]
fn injected_violations_are_reported() {
    let real = real_tree();
    let cases: &[(&str, &str, &str)] = &[
        ("tune/mod.rs", "use crate::tui;", "names crate::tui"),
        ("app/edit.rs", "use crate::{cli::x};", "names crate::cli"),
        (
            "run/trial/mod.rs",
            "fn f() { super::super::cli::run(); }",
            "names crate::cli",
        ),
        (
            "config/yaml.rs",
            r#"fn f() { eprintln!("x"); }"#,
            "prints with eprintln!",
        ),
        // study must not import views (views read the study, not the other way round)
        (
            "app/sweep/runner.rs",
            "use crate::app::views::trials as t;",
            "app tier: study imports views (app::views::trials)",
        ),
        (
            "report/mod.rs",
            "fn f() { let _ = crate::tui::App::new(); }",
            "names crate::tui",
        ),
        ("store/mod.rs", "fn f() { dbg!(1); }", "prints with dbg!"),
        (
            "util/mod.rs",
            "fn f() { use std::io::{self, Write}; let _ = writeln!(io::stdout(), \"x\"); }",
            "prints with std::io::stdout",
        ),
        ("gemm/mod.rs", "use ratatui::text::Line;", "uses ratatui"),
        (
            "tui/mod.rs",
            "use crate::cli::LoadArgs;",
            "tui imports crate::cli",
        ),
        (
            "store/mod.rs",
            "use crate::run::trial;",
            "store imports crate::run",
        ),
        (
            "app/events.rs",
            "fn f() { super::trial::Cancel::default(); }",
            "app tier: leaves imports trial (app::trial)",
        ),
        (
            "megatron/mod.rs",
            "use crate::config::resolve::Experiment;",
            "megatron imports crate::config",
        ),
    ];
    for (file, code, what) in cases {
        let mut tree = real.clone();
        tree.get_mut(*file)
            .expect("a real file")
            .push_str(&format!("\n{code}\n"));
        let found = check(&load(&tree));
        let (new, _) = against_known(&found);
        assert!(
            new.iter().any(|v| v.file == *file && v.what == *what),
            "{file} + `{code}`: expected `{what}`, got:\n{}",
            list(&new)
        );
    }
    // Test code may do all that.
    let quiet: &[(&str, &str)] = &[
        (
            "config/yaml.rs",
            "#[cfg(test)] mod t { fn f() { eprintln!(\"x\"); crate::tui::run(); } }",
        ),
        ("run/mod.rs", "#[cfg(test)] fn f() { println!(\"x\"); }"),
        (
            "app/test_session.rs",
            "use crate::tui; fn g() { print!(\"x\"); }",
        ),
    ];
    for (file, code) in quiet {
        let mut tree = real.clone();
        tree.get_mut(*file)
            .expect("a real file")
            .push_str(&format!("\n{code}\n"));
        let found = check(&load(&tree));
        let (new, _) = against_known(&found);
        assert!(new.is_empty(), "{file} + `{code}`:\n{}", list(&new));
    }
}

#[test]
fn a_file_no_mod_reaches_is_reported() {
    let mut tree = real_tree();
    tree.insert("run/stray.rs".into(), "use crate::tui;".into());
    let c = Crate::load(&tree);
    assert!(
        c.problems.iter().any(|p| p.starts_with("run/stray.rs")),
        "{:?}",
        c.problems
    );
}

#[test]
fn the_import_graph_has_only_the_known_cycles() {
    let (folders, app) = graph::imports(&load(&real_tree()));
    let mut found = folders.cycles();
    found.extend(app.cycles());
    let known: Vec<Vec<String>> = KNOWN_CYCLES
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let why = |c: &Vec<String>, g: &graph::Graph| -> String {
        let mut s = String::new();
        for a in c {
            for b in c.iter().filter(|b| g.has_edge(a, b)) {
                let at = &g.edges[a][b];
                s += &format!("    {a} → {b} ({})\n", at.iter().next().map_or("", |x| x));
            }
        }
        s
    };
    let new: Vec<String> = found
        .iter()
        .filter(|c| !known.contains(c))
        .map(|c| format!("  {}\n{}{}", c.join(" ⇄ "), why(c, &folders), why(c, &app)))
        .collect();
    let gone: Vec<&Vec<String>> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(
        new.is_empty(),
        "cycles not in KNOWN_CYCLES (a grown known one shows here too):\n{}",
        new.concat()
    );
    assert!(
        gone.is_empty(),
        "broken or shrunk, so update KNOWN_CYCLES: {gone:?}"
    );
}

/// Every count the tool prints agrees with its noun (`1 error`, `2 GPUs`): no `error(s)` or
/// `launch(es)` in a string of the production code (`util::text::count` writes them).
#[test]
fn no_string_writes_a_noun_with_s_in_brackets() {
    let c = load(&real_tree());
    let mut bad = Vec::new();
    for f in c.files.iter().filter(|f| !f.test_only) {
        for u in c.uses(f) {
            let Named::Str(s) = &u.what else { continue };
            for pat in ["(s)", "(es)"] {
                let after_letter = s
                    .match_indices(pat)
                    .any(|(i, _)| s[..i].chars().last().is_some_and(|c| c.is_alphabetic()));
                if after_letter {
                    bad.push(format!("src/{}:{}: {s:?}", f.rel, u.line));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "counts with a bracketed plural:\n{}",
        bad.join("\n")
    );
}
