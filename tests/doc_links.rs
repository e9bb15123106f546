//! The documentation holds together: every relative link in README.md and docs/*.md points at a
//! file or folder that exists and, with `#anchor`, at a heading of that file (GitHub's rule:
//! the heading's text lowercased, spaces to `-`, punctuation other than `-` and `_` dropped, a
//! repeated heading numbered `-1`, `-2`, ...). Links inside code (fenced blocks, `spans`) are
//! not links. Also: the README stays a short entry point, and every docs/ page opens with a
//! summary paragraph under its title.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file directly in docs/.
fn documents() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("a docs/ folder")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text outside fenced code blocks, line by line (a fenced line becomes empty, so line
/// numbers stay).
fn prose_lines(text: &str) -> Vec<String> {
    let mut fenced = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return String::new();
            }
            if fenced {
                String::new()
            } else {
                line.to_string()
            }
        })
        .collect()
}

/// GitHub's anchor for a heading's text.
fn slug(heading: &str) -> String {
    // A link in a heading reads as its text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|m| open + m) else {
            break;
        };
        let Some(close) = rest[mid..].find(')').map(|c| mid + c) else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a Markdown file's headings give.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let s = slug(&line[hashes + 1..]);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// The prose with inline code spans blanked out (a span may wrap onto the next line).
fn without_code_spans(prose: &str) -> String {
    let mut out = String::with_capacity(prose.len());
    let mut in_code = false;
    for c in prose.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if in_code && c != '\n' {
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// (line, target) of every inline link `[text](target)`.
fn links(text: &str) -> Vec<(usize, String)> {
    let prose = without_code_spans(&prose_lines(text).join("\n"));
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = prose[from..].find("](").map(|i| from + i) {
        let start = at + 2;
        let Some(len) = prose[start..].find([')', ' ', '\n']) else {
            break;
        };
        let target = &prose[start..start + len];
        let line = prose[..at].matches('\n').count() + 1;
        out.push((line, target.to_string()));
        from = start + len;
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_resolves_to_a_file_and_an_anchor() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = read(&doc);
        let dir = doc.parent().expect("a folder");
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.clone()
            } else {
                dir.join(path)
            };
            let at = format!(
                "{}:{line}: ({target})",
                doc.strip_prefix(root()).unwrap_or(&doc).display()
            );
            if !file.exists() {
                broken.push(format!("{at}: no file {}", file.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                if file.extension().is_none_or(|x| x != "md") {
                    broken.push(format!("{at}: an anchor into a file that is not Markdown"));
                } else if !anchors(&read(&file)).contains(anchor) {
                    broken.push(format!("{at}: no heading with the anchor #{anchor}"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser right?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_stays_a_short_entry_point_with_set_up_first() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; move detail to docs/"
    );
    let first_section = readme
        .lines()
        .find(|l| l.starts_with("## "))
        .expect("a section");
    assert_eq!(first_section, "## Set up on a fresh machine");
    assert!(readme.contains("cargo run --release ") && readme.contains("cargo test "));
}

#[test]
fn every_docs_page_opens_with_a_summary_paragraph() {
    for doc in documents().into_iter().skip(1) {
        let text = read(&doc);
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let title = lines.next().unwrap_or_default();
        assert!(title.starts_with("# "), "{}: no title", doc.display());
        let first = lines.next().unwrap_or_default();
        assert!(
            !first.starts_with('#') && !first.starts_with("```") && !first.starts_with('|'),
            "{}: the title is followed by `{first}`, not a summary paragraph",
            doc.display()
        );
    }
}

#[test]
fn the_slug_follows_github() {
    assert_eq!(slug("Defaults: `config.toml`"), "defaults-configtoml");
    assert_eq!(
        slug("`primus-tune backups [CONFIG] [--restore ID [--write]] [--json]`"),
        "primus-tune-backups-config---restore-id---write---json"
    );
    assert_eq!(
        slug("Decisions in your tree: `primus-tune.toml` and comments"),
        "decisions-in-your-tree-primus-tunetoml-and-comments"
    );
    assert_eq!(slug("The screens at 80×24"), "the-screens-at-8024");
    assert_eq!(slug("See [the TUI](tui.md) here"), "see-the-tui-here");
    let a = anchors("# A\n## Same\n```\n# not a heading\n```\n## Same\n");
    assert_eq!(
        a.into_iter().collect::<Vec<_>>(),
        ["a", "same", "same-1"].map(String::from)
    );
}
