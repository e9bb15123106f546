//! Decisions for an experiment: the nearest `primus-tune.toml` and the comments in its files.
#![allow(clippy::unwrap_used)]

use super::*;

fn diag(code: &'static str, file: &Path, line: u32) -> Diagnostic {
    Diagnostic::new(Severity::Warning, code, "m").at(Some(Location {
        file: file.to_path_buf(),
        line,
        column: 3,
    }))
}

/// exp/a.yaml and exp/b.yaml under a folder whose primus-tune.toml ignores one code for every
/// experiment and acknowledges a rule for a.yaml; a.yaml has a comment on a line and one on a
/// line of its own.
fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let exp = d.path().join("exp");
    std::fs::create_dir_all(&exp).unwrap();
    std::fs::write(
        d.path().join(FILE_NAME),
        "[ignore]\nmodel-value-dropped = \"we keep the module's values\"\n\
         [per-file-ignores.\"exp/a*.yaml\"]\nprimus-turbo = \"no wheel\"\nno-such-rule = \"x\"\n",
    )
    .unwrap();
    let a = exp.join("a.yaml");
    std::fs::write(
        &a,
        "# primus-tune: ignore[duplicate-key] merged by hand\nmodules:\n  x: 1  # primus-tune: ignore[bool-written-as-int, turbo-attention] AMD's recipe\n",
    )
    .unwrap();
    let b = exp.join("b.yaml");
    std::fs::write(&b, "modules: {}\n").unwrap();
    (d, a, b)
}

#[test]
fn findings_are_suppressed_by_the_file_and_by_comments_with_their_reason() {
    let (_d, a, b) = tree();
    let mut dec = Decisions::load(&a);
    let (kept, gone) = dec.split(vec![
        diag("bool-written-as-int", &a, 3),
        diag("bool-written-as-int", &a, 4),
        diag("duplicate-key", &a, 9),
        diag("model-value-dropped", &b, 1),
        diag("unknown-key", &a, 3),
    ]);
    let codes: Vec<(&str, u32)> = kept
        .iter()
        .map(|d| (d.code, d.location.as_ref().unwrap().line))
        .collect();
    assert_eq!(codes, [("bool-written-as-int", 4), ("unknown-key", 3)]);
    let why: Vec<&str> = gone.iter().map(|s| s.by.why()).collect();
    assert_eq!(
        why,
        [
            "AMD's recipe",
            "merged by hand",
            "we keep the module's values"
        ]
    );
    assert!(gone[0].by.in_source() && !gone[2].by.in_source());
    // The id that names nothing is lint's warning at its place, with what it might be.
    assert_eq!(dec.problems.len(), 1, "{:?}", dec.problems);
    let p = &dec.problems[0];
    assert_eq!(p.code, UNKNOWN_RULE);
    assert_eq!(
        p.location.as_ref().map(|l| (l.line, l.column)),
        Some((5, 1))
    );
}

#[test]
fn the_experiment_s_acknowledgements_are_its_whole_file_decisions() {
    let (_d, a, b) = tree();
    let rules = |p: &Path| -> Vec<String> {
        Decisions::load(p)
            .acks()
            .into_iter()
            .map(|a| a.rule)
            .collect()
    };
    // a.yaml: the folder's, its own pattern's, its own-line comment's, and the advice rule
    // its line comment names; not the lint code that comment names for its line.
    assert_eq!(
        rules(&a),
        [
            "model-value-dropped",
            "primus-turbo",
            "duplicate-key",
            "turbo-attention"
        ]
    );
    assert_eq!(rules(&b), ["model-value-dropped"]);
    let ack = &Decisions::load(&a).acks()[1];
    assert_eq!(ack.reason, "no wheel");
    assert!(ack.from.ends_with("primus-tune.toml:4:1"), "{}", ack.from);
}

#[test]
fn a_file_that_cannot_be_read_is_a_problem_and_suppresses_nothing() {
    let (d, a, _) = tree();
    std::fs::write(d.path().join(FILE_NAME), "[ignore\n").unwrap();
    let mut dec = Decisions::load(&a);
    assert_eq!(dec.problems[0].code, BAD_IGNORE_FILE);
    let (kept, _) = dec.split(vec![diag("model-value-dropped", &a, 2)]);
    assert_eq!(kept.len(), 1);
}
