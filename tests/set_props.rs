//! Property: `set` then re-resolve gives the new value, leaves every other resolved value and
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! every other line of the file unchanged.

use primus_tune::config::catalog::Catalog;
use primus_tune::config::doc::EditKind;
use primus_tune::config::edit::{SetRequest, plan};
use primus_tune::config::env::Env;
use primus_tune::config::{Experiment, LoadOptions, Value};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// Keys of the bundled MoE example with generators of legal text for them.
fn request() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        (1i64..=64).prop_map(|v| ("micro_batch_size".into(), v.to_string())),
        (1i64..=304).prop_map(|v| ("turbo_deepep_num_cu".into(), v.to_string())),
        (1e-7f64..1e-2).prop_map(|v| ("lr".into(), format!("{v:e}"))),
        (0.0f64..0.5).prop_map(|v| ("weight_decay".into(), v.to_string())),
        any::<bool>().prop_map(|v| ("use_turbo_rms_norm".into(), v.to_string())),
        any::<bool>().prop_map(|v| ("cross_entropy_loss_fusion".into(), v.to_string())),
        prop::sample::select(vec!["native", "te"])
            .prop_map(|v| ("cross_entropy_fusion_impl".into(), v.to_string())),
        (128i64..=32768).prop_map(|v| ("seq_length".into(), v.to_string())),
        (1i64..=1000).prop_map(|v| ("train_iters".into(), v.to_string())),
        "[a-zA-Z0-9_ :#'\"-]{1,16}".prop_map(|v| ("wandb_project".into(), v)),
        ("[a-z]{3,8}", "[a-zA-Z0-9_.:-]{1,12}").prop_map(|(k, v)| (format!("pt_extra_{k}"), v)),
    ]
}

/// The values as the files set them (what `set` writes), before Primus' patches.
fn leaves(exp: &Experiment) -> BTreeMap<String, Value> {
    exp.main_module().written_values()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn set_changes_only_what_it_sets(reqs in prop::collection::vec(request(), 1..4)) {
        // Distinct keys, in order.
        let mut seen = std::collections::HashSet::new();
        let reqs: Vec<SetRequest> = reqs
            .into_iter()
            .filter(|(k, _)| seen.insert(k.clone()))
            .map(|(key, text)| SetRequest { key, text })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        primus_tune::util::bundled::extract(dir.path()).unwrap();
        let path = dir.path().join(primus_tune::util::bundled::DEFAULT_EXPERIMENT);
        let opts = LoadOptions { env: Env::empty(), ..Default::default() };
        let exp = Experiment::load(&path, &opts).unwrap();
        let before_text = std::fs::read_to_string(&path).unwrap();
        let before = leaves(&exp);

        let p = plan(&exp, &opts, &reqs, None, true, Catalog::builtin()).unwrap();
        prop_assert!(!p.refused, "refused: {:?}", p.diagnostics);

        let mut check = opts.clone();
        check.texts.insert(exp.path.clone(), p.doc.text().to_string());
        let after_exp = Experiment::load(&path, &check).unwrap();
        let after = leaves(&after_exp);
        for c in &p.changes {
            prop_assert_eq!(after.get(&c.key), Some(&c.new), "key {}", c.key);
        }
        for (k, v) in &before {
            if !p.changes.iter().any(|c| &c.key == k) {
                prop_assert_eq!(after.get(k), Some(v), "other key {} changed", k);
            }
        }

        // Lines: replaced keys change their own line, added keys add one line each.
        let diff = similar::TextDiff::from_lines(before_text.as_str(), p.doc.text());
        let mut deleted = 0;
        let mut inserted = 0;
        for ch in diff.iter_all_changes() {
            match ch.tag() {
                similar::ChangeTag::Delete => deleted += 1,
                similar::ChangeTag::Insert => inserted += 1,
                similar::ChangeTag::Equal => {}
            }
        }
        let replaced = p.changes.iter().filter(|c| c.kind == EditKind::Replaced).count();
        let added = p.changes.iter().filter(|c| c.kind == EditKind::Added).count();
        prop_assert!(deleted <= replaced, "deleted {} lines for {} replacements", deleted, replaced);
        prop_assert_eq!(inserted, deleted + added);
        for c in &p.changes {
            let line = p.doc.text().lines().nth(c.line as usize - 1).unwrap_or("");
            let last = c.key.rsplit('.').next().unwrap();
            prop_assert!(line.trim_start().starts_with(&format!("{last}:")), "line {} is {:?}", c.line, line);
        }
    }
}

/// Text a user may give `set`: any string (control characters, quotes, YAML syntax, spaces),
/// integers, floats, bools and nulls as they would type them.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,12}",
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| f.to_string()),
        any::<f64>().prop_map(|f| format!("{f:e}")),
        any::<bool>().prop_map(|b| b.to_string()),
        prop::sample::select(vec![
            "None",
            "null",
            "~",
            "yes",
            "No",
            "0x10",
            "1e5",
            "0o7",
            ".inf",
            "nan",
            "[1, 2]",
            "{'a': 1}",
            "(1, 2)",
            "abc # note",
            " lead ",
            "#start",
            "&a",
            "*a",
            "!!str x",
            "a: b",
            "- x",
            "'q'",
            "\"dq\"",
        ])
        .prop_map(str::to_string),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `set KEY=V` on a key no preset or catalog types writes the value Primus would parse
    /// from `--KEY V` (read back from the saved file), or refuses with the file unchanged —
    /// never a value changed on the way.
    #[test]
    fn set_writes_what_primus_would_parse_or_refuses(text in any_text()) {
        let dir = tempfile::tempdir().unwrap();
        primus_tune::util::bundled::extract(dir.path()).unwrap();
        let path = dir.path().join(primus_tune::util::bundled::DEFAULT_EXPERIMENT);
        let opts = LoadOptions { env: Env::empty(), ..Default::default() };
        let exp = Experiment::load(&path, &opts).unwrap();
        let before = std::fs::read_to_string(&path).unwrap();
        let req = SetRequest { key: "pt_prop_key".into(), text: text.clone() };
        let written = match plan(&exp, &opts, &[req], None, true, Catalog::builtin()) {
            Ok(mut p) if !p.refused => {
                p.doc.save(primus_tune::config::doc::SaveOptions::default()).unwrap();
                true
            }
            Ok(p) => {
                prop_assert!(
                    !p.diagnostics.iter().any(|d| d.code == "edit-read-back"),
                    "refused because it would read back differently: {:?}", p.diagnostics
                );
                false
            }
            Err(_) => false,
        };
        let after = std::fs::read_to_string(&path).unwrap();
        if !written {
            prop_assert_eq!(after, before);
            return Ok(());
        }
        let back = Experiment::load(&path, &opts).unwrap();
        let got = back
            .main_module()
            .params
            .get("pt_prop_key")
            .map(primus_tune::config::tree::Item::value)
            .unwrap();
        // The file's string "null" reaches Primus as None (its overrides merge converts it).
        let want = match primus_tune::config::overrides::coerce(&text) {
            Value::Str(s) if s == "null" => Value::Null,
            v => v,
        };
        prop_assert!(got.same(&want), "{text:?}: wrote {got:?}, Primus reads {want:?}");
    }
}

/// `set` plans on the file as it is now: when another program saved it after the experiment
/// was resolved, the change's old value and the checks are of the text on disk, not of the
/// experiment handed in (which is used as it is only while the file still holds its text).
#[test]
fn set_plans_on_the_text_on_disk_when_the_file_changed_since_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    primus_tune::util::bundled::extract(dir.path()).unwrap();
    let path = dir
        .path()
        .join(primus_tune::util::bundled::DEFAULT_EXPERIMENT);
    let opts = LoadOptions {
        env: Env::empty(),
        ..Default::default()
    };
    let exp = Experiment::load(&path, &opts).unwrap();
    let req = |text: &str| SetRequest {
        key: "train_iters".into(),
        text: text.into(),
    };
    let unchanged = plan(&exp, &opts, &[req("77")], None, true, Catalog::builtin()).unwrap();
    let old = |p: &primus_tune::config::edit::SetPlan| p.changes[0].old.clone();
    assert_eq!(old(&unchanged), Some(Value::Int(50)));
    // Another program's save after `exp` was read.
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replace("train_iters: 50", "train_iters: 60");
    assert_ne!(edited, text, "the example sets train_iters: 50");
    std::fs::write(&path, &edited).unwrap();
    let changed = plan(&exp, &opts, &[req("77")], None, true, Catalog::builtin()).unwrap();
    assert_eq!(old(&changed), Some(Value::Int(60)));
    assert!(changed.doc.text().contains("train_iters: 77"));
}
