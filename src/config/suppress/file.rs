//! `primus-tune.toml`: decisions about rules for the experiments under its folder, as ruff's
//! `ignore` and `per-file-ignores`, each with its reason:
//!
//! ```toml
//! [ignore]                                     # every experiment under this folder
//! bool-written-as-int = "AMD's recipe writes 1; Python reads it as true"
//!
//! [per-file-ignores."MI300X/grok1.yaml"]       # a path or glob (* ? **) from this folder
//! primus-turbo = "no primus_turbo wheel for our ROCm"
//! ```
//!
//! The nearest one up from the experiment's folder is the one in force (as ruff's nearest
//! configuration).

use crate::config::diag::{Diagnostic, Location, Severity};
use crate::config::lint::codes::BAD_IGNORE_FILE;
use std::path::{Path, PathBuf};
use toml_edit::{Item, TableLike};

pub const FILE_NAME: &str = "primus-tune.toml";

/// The sections of the file.
const SECTIONS: [&str; 2] = ["ignore", "per-file-ignores"];

/// One decision of the file: the id, why, where it is written, and the experiments it is for
/// (None: every one under the file's folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub rule: String,
    pub reason: String,
    /// Where its id is written.
    pub at: Location,
    pub pattern: Option<String>,
}

/// The nearest `primus-tune.toml` at or above `dir`.
pub fn find(dir: &Path) -> Option<PathBuf> {
    let start = std::path::absolute(dir).ok()?;
    start
        .ancestors()
        .map(|d| d.join(FILE_NAME))
        .find(|p| p.is_file())
}

/// 1-based line and column (in characters) of byte offset `at` in `text`.
pub fn line_col(text: &str, at: usize) -> (u32, u32) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() as u32 + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() as u32 + 1)
}

struct Cx<'a> {
    text: &'a str,
    file: &'a Path,
}

impl Cx<'_> {
    fn loc(&self, span: Option<std::ops::Range<usize>>) -> Location {
        let (line, column) = span.map_or((1, 1), |s| line_col(self.text, s.start));
        Location {
            file: self.file.to_path_buf(),
            line,
            column,
        }
    }

    fn bad(&self, span: Option<std::ops::Range<usize>>, message: String) -> Box<Diagnostic> {
        Box::new(
            Diagnostic::new(Severity::Error, BAD_IGNORE_FILE, message)
                .at(Some(self.loc(span)))
                .hint(
                    "`[ignore]` and `[per-file-ignores.\"PATH\"]` tables of `rule = \"reason\"` \
                 (docs/config.md: Decisions in your tree)",
                ),
        )
    }

    /// The `id = "reason"` entries of one table.
    fn entries(
        &self,
        t: &dyn TableLike,
        pattern: Option<&str>,
        out: &mut Vec<Entry>,
    ) -> Result<(), Box<Diagnostic>> {
        for (id, item) in t.iter() {
            let key = t.key(id);
            let at = self.loc(key.and_then(|k| k.span()));
            let reason = item.as_str().map(str::trim).unwrap_or_default();
            if reason.is_empty() {
                return Err(self.bad(
                    item.span().or_else(|| key.and_then(|k| k.span())),
                    format!(
                        "`{id}` needs its reason as a non-empty string (`{id} = \"why\"`): it is \
                         what a later reader sees"
                    ),
                ));
            }
            out.push(Entry {
                rule: id.to_string(),
                reason: reason.to_string(),
                at,
                pattern: pattern.map(str::to_string),
            });
        }
        Ok(())
    }
}

/// The decisions of a `primus-tune.toml` whose text is `text`; a mistake is a `bad-ignore-file`
/// error at its place.
pub fn parse(text: &str, file: &Path) -> Result<Vec<Entry>, Box<Diagnostic>> {
    let cx = Cx { text, file };
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        cx.bad(
            e.span(),
            format!("not valid TOML: {}", e.message().trim_end()),
        )
    })?;
    let root = doc.as_table();
    let mut out = Vec::new();
    for (name, item) in root.iter() {
        let span = root.key(name).and_then(|k| k.span());
        let table = item.as_table_like().ok_or_else(|| {
            cx.bad(
                span.clone(),
                format!("`{name}` must be a table of `rule = \"reason\"`"),
            )
        })?;
        match name {
            "ignore" => cx.entries(table, None, &mut out)?,
            "per-file-ignores" => {
                for (pattern, sub) in table.iter() {
                    let pspan = table.key(pattern).and_then(|k| k.span());
                    let sub = sub.as_table_like().ok_or_else(|| {
                        cx.bad(
                            pspan,
                            format!(
                                "`per-file-ignores.\"{pattern}\"` must be a table of `rule = \"reason\"`"
                            ),
                        )
                    })?;
                    cx.entries(sub, Some(pattern), &mut out)?;
                }
            }
            other => {
                return Err(cx.bad(
                    span,
                    format!(
                        "unknown section `{other}` (known: {}){}",
                        SECTIONS.join(", "),
                        crate::util::suggest::did_you_mean(other, &SECTIONS)
                    ),
                ));
            }
        }
    }
    Ok(out)
}

/// Whether the table `item` is a plain `[header]` table (what `recommend --ack` edits).
pub fn is_header_table(item: &Item) -> bool {
    item.as_table()
        .is_some_and(|t| !t.is_dotted() && !t.is_implicit())
}

/// Whether `path` (relative, `/`-separated) matches the glob `pattern`: `*` and `?` within one
/// component, `**` any number of components.
pub fn matches(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.trim_start_matches("./").split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    parts_match(&p, &s)
}

fn parts_match(p: &[&str], s: &[&str]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((&"**", rest)) => (0..=s.len()).any(|i| parts_match(rest, &s[i..])),
        Some((first, rest)) => {
            s.first()
                .is_some_and(|c| component_match(first.as_bytes(), c.as_bytes()))
                && parts_match(rest, &s[1..])
        }
    }
}

fn component_match(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len()).any(|i| component_match(rest, &s[i..])),
        Some((b'?', rest)) => !s.is_empty() && component_match(rest, &s[1..]),
        Some((c, rest)) => s.first() == Some(c) && component_match(rest, &s[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_with_their_places_and_patterns() {
        let text = "# ours\n[ignore]\nbool-written-as-int = \"AMD's recipe\"\n\n\
                    [per-file-ignores.\"MI300X/*.yaml\"]\nprimus-turbo = \"no wheel\"\n";
        let e = parse(text, Path::new("primus-tune.toml")).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[0].rule.as_str(), e[0].pattern.as_deref()),
            ("bool-written-as-int", None)
        );
        assert_eq!((e[0].at.line, e[0].at.column), (3, 1));
        assert_eq!(e[1].pattern.as_deref(), Some("MI300X/*.yaml"));
        assert_eq!((e[1].at.line, e[1].reason.as_str()), (6, "no wheel"));
    }

    #[test]
    fn mistakes_are_bad_ignore_file_errors_at_their_place() {
        let bad = |text: &str| parse(text, Path::new("p.toml")).unwrap_err();
        let d = bad("[ignore]\nprimus-turbo = \"\"\n");
        assert_eq!(d.code, BAD_IGNORE_FILE);
        assert_eq!(
            d.location.as_ref().map(|l| (l.line, l.column)),
            Some((2, 16))
        );
        assert!(d.message.contains("needs its reason"), "{}", d.message);
        let d = bad("[ignores]\nx = \"y\"\n");
        assert!(
            d.message.contains("did you mean `ignore`?"),
            "{}",
            d.message
        );
        let d = bad("[ignore\n");
        assert!(d.message.starts_with("not valid TOML"), "{}", d.message);
        assert_eq!(d.location.as_ref().map(|l| l.line), Some(1));
    }

    #[test]
    fn globs_match_within_and_across_folders() {
        assert!(matches("grok1.yaml", "grok1.yaml"));
        assert!(matches("MI300X/*.yaml", "MI300X/grok1.yaml"));
        assert!(!matches("MI300X/*.yaml", "MI355X/grok1.yaml"));
        assert!(!matches("*.yaml", "MI300X/grok1.yaml"));
        assert!(matches("**/*.yaml", "MI300X/grok1.yaml"));
        assert!(matches("**/grok?.yaml", "grok1.yaml"));
        assert!(matches("./a/**", "a/b/c.yaml"));
    }
}
