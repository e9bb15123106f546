//! Random mutations of the real Primus configs never panic the loader, lint or the editor.
//!
//! The mutated text of one file (an experiment or one of the presets it reads) is fed through
//! `LoadOptions::texts`; every other file is read from `../shared/fixtures/primus`. A load may
//! fail, but then its message must be non-empty and name the file at fault. Tests reading the
//! shared tree are named `shared_*` and skip (with a note on stderr) when it is absent.

use primus_tune::config::catalog::Catalog;
use primus_tune::config::doc::YamlDoc;
use primus_tune::config::lint::lint;
use primus_tune::config::overrides::parse_assignment;
use primus_tune::config::yaml::{self, Node, NodeKind};
use primus_tune::config::{Env, Experiment, Layer, LoadOptions, Value};
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// The corpus: fixture experiments and every file each one reads
// ---------------------------------------------------------------------------------------------

struct Corpus {
    root: PathBuf,
    /// Experiment path and the files its resolution reads (itself first), as the loader names
    /// them (keys for `LoadOptions::texts`).
    experiments: Vec<(PathBuf, Vec<PathBuf>)>,
    texts: HashMap<PathBuf, String>,
}

fn yaml_files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files_under(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml") {
            out.push(p);
        }
    }
}

fn corpus() -> Option<&'static Corpus> {
    static CORPUS: OnceLock<Option<Corpus>> = OnceLock::new();
    CORPUS
        .get_or_init(|| {
            let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/primus");
            if !p.join("primus/configs").is_dir() {
                return None;
            }
            let root = p.canonicalize().expect("canonical fixture root");
            let mut paths = Vec::new();
            for fw in ["megatron", "torchtitan"] {
                yaml_files_under(&root.join("examples").join(fw).join("configs"), &mut paths);
            }
            let mut experiments = Vec::new();
            let mut texts = HashMap::new();
            for path in paths {
                let opts = LoadOptions {
                    env: Env::empty(),
                    ..Default::default()
                };
                let exp = Experiment::load(&path, &opts)
                    .unwrap_or_else(|e| panic!("unmutated fixture must load: {e}"));
                let mut files: Vec<PathBuf> = Vec::new();
                for f in &exp.files {
                    if !files.contains(f) {
                        files.push(f.clone());
                    }
                }
                for f in &files {
                    texts
                        .entry(f.clone())
                        .or_insert_with(|| std::fs::read_to_string(f).expect("readable"));
                }
                experiments.push((exp.path.clone(), files));
            }
            assert!(!experiments.is_empty());
            Some(Corpus {
                root,
                experiments,
                texts,
            })
        })
        .as_ref()
}

/// Say once why the shared tests are skipped.
fn note_skip() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        eprintln!("skipping: the shared Primus fixture tree ../shared/fixtures/primus is absent");
    });
}

macro_rules! corpus_or_skip {
    () => {
        match corpus() {
            Some(c) => c,
            None => {
                note_skip();
                return Ok(());
            }
        }
    };
}

// ---------------------------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------------------------

/// Text inserted whole: YAML and Primus constructs most likely to confuse a loader.
const SNIPPETS: &[&str] = &[
    "${",
    "${}",
    "${A",
    "${UNSET_PRIMUS_FUZZ_VAR}",
    "${PRIMUS_FUZZ:}",
    "${:x}",
    "${A:${B:1}}",
    "${PRIMUS_TP:1}",
    "extends: [x]\n",
    "extends: x.yaml\n",
    "extends:\n  - nope.yaml\n",
    "extends: [pre_trainer.yaml]\n",
    "extends: [trainer_base.yaml]\n",
    "extends: [llama_base.yaml]\n",
    "extends: [../module_base.yaml]\n",
    "extends: [.]\n",
    "extends: [1, null]\n",
    "extends: {a: b}\n",
    "extends:\n",
    "modules:\n",
    "modules: []\n",
    "modules:\n  evaluator:\n    framework: megatron\n",
    "  pre_trainer: null\n",
    "    overrides: 3\n",
    "    overrides:\n",
    "    model: null\n",
    "    model: 7\n",
    "    model: ../../modules/megatron/pre_trainer.yaml\n",
    "    config: ../../models/megatron/llama_base.yaml\n",
    "    config: missing.yaml\n",
    "    framework: maxtext\n",
    "    framework:\n",
    "work_group:\n",
    "&a ",
    "*a",
    "*nope",
    "<<: *a\n",
    "!!str ",
    "!!int x",
    "!!binary ",
    "!custom ",
    "? ",
    "|\n",
    ">-\n",
    "'",
    "\"",
    "\"\\x",
    "\"\\u12",
    "---\n",
    "...\n",
    "--- |\n",
    "%YAML 1.1\n",
    "%TAG ! tag:x,2000:\n",
    "[[[[[[[[[[",
    "{{{{{{{{",
    "- - - -",
    "\t",
    "\u{feff}",
    "é",
    "☃: ☃\n",
    "\r\n",
    "\r",
    "\0",
    "0x1F",
    "1e5",
    ".inf",
    "~",
    "yes",
    "2001-12-14",
    "1:20",
    "=",
];

const FUZZ_CHARS: &[char] = &[
    ':', '{', '}', '[', ']', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '-', '#', '\t', ' ',
    '\n', ',', '?', '$', '\\', 'a', '0', '.', '~', '`',
];

#[derive(Debug, Clone)]
enum Mutation {
    DeleteRange(Index, u8),
    DeleteLine(Index),
    DuplicateLine(Index),
    SwapLines(Index, Index),
    InsertChars(Index, String),
    InsertSnippet(Index, Index),
    InsertSnippetLine(Index, Index),
    Reindent(Index, i8),
    Truncate(Index),
    FlipByte(Index, char),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let chars = prop::collection::vec(prop::sample::select(FUZZ_CHARS), 1..8)
        .prop_map(|v| v.into_iter().collect::<String>());
    prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, n)| Mutation::DeleteRange(i, n)),
        any::<Index>().prop_map(Mutation::DeleteLine),
        any::<Index>().prop_map(Mutation::DuplicateLine),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        (any::<Index>(), chars).prop_map(|(i, s)| Mutation::InsertChars(i, s)),
        (any::<Index>(), any::<Index>()).prop_map(|(i, s)| Mutation::InsertSnippet(i, s)),
        (any::<Index>(), any::<Index>()).prop_map(|(i, s)| Mutation::InsertSnippetLine(i, s)),
        (any::<Index>(), -6i8..=6).prop_map(|(i, d)| Mutation::Reindent(i, d)),
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), prop::sample::select(FUZZ_CHARS))
            .prop_map(|(i, c)| Mutation::FlipByte(i, c)),
    ]
}

/// The char boundary at or before `i`.
fn boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn at(s: &str, idx: &Index) -> usize {
    boundary(s, idx.index(s.len() + 1))
}

fn lines(s: &str) -> Vec<String> {
    s.split_inclusive('\n').map(str::to_string).collect()
}

fn apply(text: &mut String, m: &Mutation) {
    match m {
        Mutation::DeleteRange(i, n) => {
            let a = at(text, i);
            let b = boundary(text, a + *n as usize);
            text.replace_range(a..b, "");
        }
        Mutation::DeleteLine(i) => {
            let mut ls = lines(text);
            if !ls.is_empty() {
                ls.remove(i.index(ls.len()));
            }
            *text = ls.concat();
        }
        Mutation::DuplicateLine(i) => {
            let mut ls = lines(text);
            if !ls.is_empty() {
                let k = i.index(ls.len());
                let mut line = ls[k].clone();
                if !line.ends_with('\n') {
                    line.push('\n');
                }
                ls.insert(k, line);
            }
            *text = ls.concat();
        }
        Mutation::SwapLines(a, b) => {
            let mut ls = lines(text);
            if !ls.is_empty() {
                let (a, b) = (a.index(ls.len()), b.index(ls.len()));
                ls.swap(a, b);
                // Keep every line terminated but the last.
                let n = ls.len();
                for l in ls.iter_mut().take(n - 1) {
                    if !l.ends_with('\n') {
                        l.push('\n');
                    }
                }
            }
            *text = ls.concat();
        }
        Mutation::InsertChars(i, s) => {
            let a = at(text, i);
            text.insert_str(a, s);
        }
        Mutation::InsertSnippet(i, s) => {
            let a = at(text, i);
            text.insert_str(a, s.get::<&str>(SNIPPETS));
        }
        Mutation::InsertSnippetLine(i, s) => {
            // At the start of a line, so `key: value` snippets become entries.
            let mut ls = lines(text);
            let k = i.index(ls.len() + 1);
            let mut snippet = s.get::<&str>(SNIPPETS).to_string();
            if !snippet.ends_with('\n') {
                snippet.push('\n');
            }
            ls.insert(k, snippet);
            *text = ls.concat();
        }
        Mutation::Reindent(i, d) => {
            let mut ls = lines(text);
            if !ls.is_empty() {
                let k = i.index(ls.len());
                let l = &ls[k];
                ls[k] = if *d >= 0 {
                    format!("{}{l}", " ".repeat(*d as usize))
                } else {
                    let strip = l
                        .bytes()
                        .take(d.unsigned_abs() as usize)
                        .take_while(|b| *b == b' ')
                        .count();
                    l[strip..].to_string()
                };
            }
            *text = ls.concat();
        }
        Mutation::Truncate(i) => {
            let a = at(text, i);
            text.truncate(a);
        }
        Mutation::FlipByte(i, c) => {
            let a = at(text, i);
            if a < text.len() {
                let next = text[a..].chars().next().map_or(0, char::len_utf8);
                text.replace_range(a..a + next, &c.to_string());
            } else {
                text.push(*c);
            }
        }
    }
}

/// Command-line overrides to combine with the mutations (including ones that descend into a
/// scalar or replace a section with a scalar).
const OVERRIDES: &[&str] = &[
    "micro_batch_size=8",
    "training=1",
    "training.steps=3",
    "micro_batch_size.x=1",
    "parallelism.expert_parallel_degree=null",
    "model=[1,2]",
    "a.b.c.d={'x': 1}",
    "seq_length=${PRIMUS_SEQ_LENGTH:1}",
];

// ---------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------

/// Every node's span lies inside the text, on char boundaries, with 1-based positions.
fn check_spans(text: &str, node: &Node) -> Result<(), TestCaseError> {
    prop_assert!(node.start.offset <= node.end.offset, "span {node:?}");
    prop_assert!(node.end.offset <= text.len(), "span past the end: {node:?}");
    prop_assert!(
        text.is_char_boundary(node.start.offset) && text.is_char_boundary(node.end.offset),
        "span not on char boundaries: {:?}",
        (node.start, node.end)
    );
    prop_assert!(
        node.start.line >= 1 && node.start.col >= 1,
        "{:?}",
        node.start
    );
    match &node.kind {
        NodeKind::Scalar(_) => {}
        NodeKind::Seq(items) => {
            for i in items {
                check_spans(text, i)?;
            }
        }
        NodeKind::Map(entries) => {
            for (k, v) in entries {
                check_spans(text, k)?;
                check_spans(text, v)?;
                let _ = k.key_string();
            }
        }
    }
    Ok(())
}

/// Every key path of a parsed document (mapping keys only), up to `limit` paths.
fn key_paths(node: &Node, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>, limit: usize) {
    if let NodeKind::Map(entries) = &node.kind {
        for (k, v) in entries {
            if out.len() >= limit {
                return;
            }
            let Some(key) = k.key_string() else { continue };
            prefix.push(key);
            out.push(prefix.clone());
            key_paths(v, prefix, out, limit);
            prefix.pop();
        }
    }
}

fn lines_of(text: &str) -> u32 {
    text.split('\n').count() as u32
}

fn check_load(
    c: &Corpus,
    exp_path: &Path,
    opts: &LoadOptions,
    mutated: &Path,
) -> Result<(), TestCaseError> {
    match Experiment::load(exp_path, opts) {
        Err(e) => {
            let msg = e.to_string();
            prop_assert!(!msg.trim().is_empty(), "empty error message: {e:?}");
            let file = e.path();
            prop_assert!(file.is_some(), "error names no file: {msg}");
            let file = file.unwrap_or(Path::new(""));
            prop_assert!(
                msg.contains(&file.display().to_string()),
                "message does not show the file {}: {msg}",
                file.display()
            );
            prop_assert!(
                file.starts_with(&c.root),
                "error names a file outside the tree: {msg}"
            );
            let _ = mutated;
        }
        Ok(exp) => {
            let _ = lint(&exp, &Env::empty(), None, Catalog::builtin());
            let _ = exp.main_module();
            let _ = exp.env_section();
            for m in &exp.modules {
                for (key, leaf) in m.params.leaves() {
                    let mut origins = vec![&leaf.origin];
                    origins.extend(leaf.shadowed.iter().map(|s| &s.origin));
                    for o in origins {
                        // A Primus patch names its file in Primus' code, which is never read.
                        if matches!(o.layer, Layer::CommandLine | Layer::Patch) {
                            continue;
                        }
                        let f = o.file.to_path_buf();
                        prop_assert!(
                            exp.files.contains(&f),
                            "`{key}` from a file that was not read: {}",
                            f.display()
                        );
                        let text = opts.texts.get(&f).or_else(|| c.texts.get(&f));
                        if let Some(text) = text {
                            prop_assert!(
                                o.line >= 1 && o.line <= lines_of(text) && o.column >= 1,
                                "`{key}` at {}:{}:{} outside the file ({} lines)",
                                f.display(),
                                o.line,
                                o.column,
                                lines_of(text)
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

const LITERALS: &[&str] = &[
    "3", "true", "null", "'x'", "\"a: b\"", "[1, 2]", "{a: 1}", "", "a\nb", "#", "- x", "${A:1}",
    "é",
];

fn check_edit(
    path: &Path,
    text: &str,
    path_pick: &Index,
    extra: &str,
    literal: &str,
) -> Result<(), TestCaseError> {
    let parsed = yaml::parse(text);
    let mut paths = Vec::new();
    if let Ok(Some(node)) = &parsed {
        check_spans(text, node)?;
        key_paths(node, &mut Vec::new(), &mut paths, 2000);
    }
    let mut keys: Vec<String> = if paths.is_empty() {
        vec!["modules".into(), "pre_trainer".into(), "overrides".into()]
    } else {
        path_pick.get(&paths).clone()
    };
    if !extra.is_empty() {
        keys.push(extra.to_string());
    }
    let segs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let mut doc = YamlDoc::from_text(path, text.to_string());
    let result = doc.set_literal(&segs, literal);
    if let Ok(edit) = result {
        let _ = doc.diff();
        let out = doc.text();
        prop_assert!(edit.line >= 1 && edit.line <= lines_of(out), "{edit:?}");
        // A one-line value set into a document that parsed: the result parses, the path reads
        // back as the literal, and every other value is unchanged (no value silently changed).
        if let (Ok(Some(before)), Some(want)) = (&parsed, one_line_value(literal)) {
            let after = match yaml::parse(out) {
                Ok(Some(root)) => root,
                other => {
                    return Err(TestCaseError::fail(format!(
                        "after setting {segs:?} = {literal} in:\n{text:?}\nthe result does not parse ({:?}):\n{out}",
                        other.err()
                    )));
                }
            };
            let got = segs.iter().try_fold(&after, |n, s| n.get(s));
            prop_assert_eq!(
                got.map(Node::typed),
                Some(want),
                "after setting {:?} = {} in:\n{:?}\ngot:\n{}",
                segs,
                literal,
                text,
                out
            );
            let (old, new) = (leaf_values(before), leaf_values(&after));
            for (path, value) in &old {
                let related = keys.starts_with(path) || path.starts_with(&keys);
                if !related {
                    prop_assert_eq!(
                        new.get(path),
                        Some(value),
                        "setting {:?} = {} changed {:?} in:\n{:?}\ngot:\n{}",
                        segs,
                        literal,
                        path,
                        text,
                        out
                    );
                }
            }
        }
    }
    Ok(())
}

/// What a one-line literal reads as, for the literals a flag's value is written as (`None`
/// for the rest, which are there to try the editor on text that is not one value).
fn one_line_value(literal: &str) -> Option<Value> {
    if literal.is_empty() || literal.contains('\n') || literal.starts_with(['#', '-']) {
        return None;
    }
    let root = yaml::parse(&format!("k: {literal}\n")).ok()??;
    Some(root.get("k")?.typed())
}

/// Every key path of a document with its typed value (the last occurrence of a duplicate key,
/// as the loader reads it).
fn leaf_values(root: &Node) -> std::collections::BTreeMap<Vec<String>, Value> {
    let mut paths = Vec::new();
    key_paths(root, &mut Vec::new(), &mut paths, usize::MAX);
    paths
        .into_iter()
        .filter_map(|p| {
            let node = p.iter().try_fold(root, |n, s| n.get(s))?;
            Some((p, node.typed()))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Mutating the experiment or one of its presets never panics the loader, lint or the
    /// editor; failures name the file.
    #[test]
    #[cfg_attr(
        not(shared_fixtures),
        ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
    )]
    fn shared_mutated_configs_never_panic_the_loader(
        exp_pick in any::<Index>(),
        mutate_experiment in any::<bool>(),
        file_pick in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
        overrides in prop::collection::vec(prop::sample::select(OVERRIDES), 0..3),
        env_tp in prop::option::of(prop::sample::select(&["2", "x", "", "1e-5", "true"][..])),
        path_pick in any::<Index>(),
        extra in prop::sample::select(&["", "", "", "micro_batch_size", "new_key", "a b", "#x", "k: v"][..]),
        literal in prop::sample::select(LITERALS),
    ) {
        let c = corpus_or_skip!();
        let (exp_path, files) = exp_pick.get(&c.experiments);
        let target = if mutate_experiment { exp_path } else { file_pick.get(files) };
        let mut text = c.texts[target].clone();
        for m in &mutations {
            apply(&mut text, m);
        }
        let mut env = Env::empty();
        if let Some(v) = env_tp {
            env.set("PRIMUS_TP", v);
        }
        let mut opts = LoadOptions { env, ..Default::default() };
        for o in overrides {
            opts.overrides.push(parse_assignment(o).map_err(TestCaseError::fail)?);
        }
        opts.texts.insert(target.clone(), text.clone());
        check_load(c, exp_path, &opts, target)?;
        check_edit(target, &text, &path_pick, extra, literal)?;
        // And the same edit on the unmutated file (which parses, so edits mostly succeed).
        check_edit(target, &c.texts[target], &path_pick, extra, literal)?;
    }

    /// Arbitrary text never panics the YAML reader, and spans stay in the text.
    #[test]
    fn yaml_parse_never_panics_on_arbitrary_text(text in ".*") {
        if let Ok(Some(node)) = yaml::parse(&text) {
            check_spans(&text, &node)?;
            let _ = node.typed();
            let _ = yaml::duplicate_keys(&node);
        }
    }

    /// Keys repeated in one mapping (at the top or one level down): every earlier occurrence is
    /// reported once, naming the last one, and the typed mapping keeps the last value — what
    /// PyYAML's SafeLoader gives Primus.
    #[test]
    fn yaml_duplicate_keys_name_every_ignored_occurrence_and_the_last_wins(
        pairs in prop::collection::vec((0usize..4, 0i64..100), 1..12),
        nested in any::<bool>(),
        flow in any::<bool>(),
    ) {
        let names = ["a", "b", "lr", "micro_batch_size"];
        let items: Vec<String> = pairs.iter().map(|(k, v)| format!("{}: {v}", names[*k])).collect();
        let body = if flow {
            format!("{{{}}}\n", items.join(", "))
        } else {
            let indent = if nested { "  " } else { "" };
            items.iter().map(|i| format!("{indent}{i}\n")).collect()
        };
        let text = match (nested, flow) {
            (true, true) => format!("overrides: {body}"),
            (true, false) => format!("overrides:\n{body}"),
            (false, _) => body,
        };
        let node = yaml::parse(&text).unwrap().unwrap();
        let line_of = |i: usize| -> u32 { if flow { 1 } else { i as u32 + 1 + u32::from(nested) } };
        let mut expected = Vec::new();
        for (i, (k, _)) in pairs.iter().enumerate() {
            let last = pairs.iter().rposition(|(k2, _)| k2 == k).unwrap();
            if last != i {
                let path = if nested { format!("overrides.{}", names[*k]) } else { names[*k].to_string() };
                expected.push((path, line_of(i), line_of(last)));
            }
        }
        let mut found: Vec<(String, u32, u32)> = yaml::duplicate_keys(&node)
            .into_iter()
            .map(|d| (d.path, d.ignored.line, d.wins.line))
            .collect();
        if flow {
            // One line: compare by occurrence order instead.
            found.sort();
            expected.sort();
        }
        prop_assert_eq!(&found, &expected, "{}", text);
        let map = if nested { node.get("overrides").unwrap().typed() } else { node.typed() };
        let Value::Map(m) = map else { panic!("a mapping: {text}") };
        for (k, _) in &pairs {
            let last = pairs.iter().rev().find(|(k2, _)| k2 == k).unwrap().1;
            prop_assert_eq!(m.get(names[*k]), Some(&Value::Int(last)));
        }
        prop_assert_eq!(m.len(), pairs.iter().map(|p| p.0).collect::<std::collections::BTreeSet<_>>().len());
    }

    /// Byte soup (lossily decoded) never panics the YAML reader.
    #[test]
    fn yaml_parse_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Ok(Some(node)) = yaml::parse(&text) {
            check_spans(&text, &node)?;
            let _ = node.typed();
        }
    }

    /// Text made of YAML punctuation (far likelier to reach deep parser states).
    #[test]
    fn yaml_parse_never_panics_on_yaml_punctuation(
        text in "[-:{}\\[\\]&*!|>'\"%@#?,~ \t\na-c0-2.$\\\\]{0,160}"
    ) {
        if let Ok(Some(node)) = yaml::parse(&text) {
            check_spans(&text, &node)?;
            let _ = node.typed();
        }
        let mut doc = YamlDoc::from_text(Path::new("fuzz.yaml"), text.clone());
        let _ = doc.set_literal(&["a", "b"], "1");
        let _ = doc.set_literal(&["a"], "x");
    }
}

/// Deep flow nesting is refused by the parser's recursion limit; moderate block nesting loads.
#[test]
fn yaml_parse_survives_deep_flow_nesting() {
    for depth in [64usize, 1_000, 10_000] {
        let flow = format!("a: {}{}", "[".repeat(depth), "]".repeat(depth));
        let r = yaml::parse(&flow);
        assert!(depth < 200 || r.is_err(), "flow depth {depth}");
        let flow_map = format!("a: {}{}", "{b: ".repeat(depth), "}".repeat(depth));
        let r = yaml::parse(&flow_map);
        assert!(depth < 200 || r.is_err(), "flow map depth {depth}");
    }
    let mut block = String::new();
    for i in 0..100 {
        block.push_str(&" ".repeat(i));
        block.push_str("k:\n");
    }
    assert!(yaml::parse(&block).is_ok());
    let seq = format!("x:\n  {}a\n", "- ".repeat(100));
    assert!(yaml::parse(&seq).is_ok());
}

/// Parse `text` on a thread with a main-thread-sized (8 MiB) stack.
fn parse_on_big_stack(text: String) -> bool {
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || yaml::parse(&text).map(|n| n.map(|n| n.typed())).is_ok())
        .expect("spawn")
        .join()
        .expect("no panic")
}

/// A 40 KB file of compact nested block sequences (`- - - ... a`, 20 000 levels) must be an
/// error (or a value), not a stack overflow that aborts the process. Today the recursion in
/// `flatten_merge_keys` (src/config/yaml.rs) has no depth limit: the process aborts (also the
/// release CLI, on its 8 MiB main stack; the debug build already at 5 000 levels).
/// WARNING: when run, this aborts the whole test binary.
#[test]
fn yaml_parse_deep_block_nesting_is_an_error_not_a_stack_overflow() {
    let seq = format!("x:\n  {}a\n", "- ".repeat(20_000));
    let _ = parse_on_big_stack(seq);
    let mut block = String::new();
    for i in 0..3_000 {
        block.push_str(&" ".repeat(i));
        block.push_str("k:\n");
    }
    let _ = parse_on_big_stack(block);
}

/// "Billion laughs": aliases must not be expanded into exponentially many nodes. A 300-byte
/// file of 6 levels of 9 aliases each takes seconds and ~170 MB today (7 levels: >60 s, 1.5 GB;
/// 10 levels never finishes), because every alias clones the anchored node.
#[test]
fn yaml_aliases_do_not_expand_exponentially() {
    let mut text = String::from("l0: &l0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..6 {
        let refs = vec![format!("*l{}", i - 1); 9].join(", ");
        text.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
    }
    assert!(text.len() < 400);
    let t = std::time::Instant::now();
    let _ = yaml::parse(&text).map(|n| n.map(|n| n.typed()));
    let took = t.elapsed();
    assert!(
        took < std::time::Duration::from_millis(500),
        "parsing {} bytes took {took:?}",
        text.len()
    );
}

/// The unmutated corpus loads and every fixture file re-parses with in-bounds spans (a sanity
/// check that the fuzz starts from valid input).
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_unmutated_corpus_is_valid() {
    let Some(c) = corpus() else {
        note_skip();
        return;
    };
    assert!(c.experiments.len() >= 8);
    for (path, text) in &c.texts {
        let node = yaml::parse(text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .expect("document");
        check_spans(text, &node).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}
