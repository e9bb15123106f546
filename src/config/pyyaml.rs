//! What PyYAML's SafeLoader — how Primus reads a config — refuses although a YAML 1.2 reader
//! takes it. `lint` must refuse exactly what Primus would fail to load, so [`super::yaml::parse`]
//! runs these checks on the text and on the tree it built (before merge keys are applied),
//! each naming the line and column PyYAML would name:
//!
//! - a `%YAML` directive of another major version than 1, a stream that starts with `...`;
//! - a tab outside quotes, block scalars and comments (PyYAML's scanner skips spaces only);
//! - anchors: a name redefined in the document, a name with characters other than letters,
//!   digits, `-` and `_`;
//! - an empty implicit key (`: value`);
//! - a key that is a list or a mapping (Python cannot hash it);
//! - a merge key (`<<`) whose value is not a mapping or a list of mappings;
//! - a scalar the SafeConstructor cannot build: `!!int x`, `!!bool maybe`, bad base64 under
//!   `!!binary`, a plain `2001-13-14` (an implicit timestamp Python's `date` refuses), `0x_`;
//! - a core tag on the wrong kind of node (`!!seq x`, `!!str [1]`, `!!omap {a: 1}`), and
//!   `!!merge`/`!!value` anywhere but on a mapping key.
//!
//! PyYAML also breaks lines at NEL, LS and PS and takes a BOM inside the text as an ordinary
//! character; `parse` handles those before reading (see there).

use super::yaml::{Node, NodeKind, Pos, Scalar, Style, YamlError};
use regex::Regex;
use std::sync::LazyLock;

fn err(line: u32, col: u32, message: impl Into<String>) -> YamlError {
    YamlError {
        line,
        col,
        message: message.into(),
    }
}

fn at(p: Pos, message: impl Into<String>) -> YamlError {
    err(p.line, p.col, message)
}

/// The directives and the stream's start: `%YAML` must be 1.x; a stream may not open with
/// `...` (PyYAML expects a node there).
pub(super) fn stream_start(text: &str) -> Result<(), YamlError> {
    for (i, line) in text.split('\n').enumerate() {
        let t = line.trim_start_matches('\u{feff}').trim_end_matches('\r');
        let n = i as u32 + 1;
        if let Some(v) = t.strip_prefix("%YAML")
            && v.starts_with([' ', '\t'])
        {
            let major = v.trim().split('.').next().unwrap_or("");
            if major != "1" {
                return Err(err(
                    n,
                    1,
                    "found incompatible YAML document (version 1.* is required)",
                ));
            }
        } else if t == "..." || t.starts_with("... ") {
            return Err(err(
                n,
                1,
                "expected the node content, but found '<document end>'",
            ));
        } else if !(t.trim().is_empty() || t.starts_with('#') || t.starts_with('%')) {
            break;
        }
    }
    Ok(())
}

/// A tab where PyYAML's scanner looks for a token: anywhere but inside a quoted or block
/// scalar (`literal`: their byte spans, sorted) and a comment.
pub(super) fn tabs(text: &str, literal: &[(usize, usize)]) -> Result<(), YamlError> {
    let (mut line, mut col, mut comment, mut prev) = (1u32, 1u32, false, '\n');
    let mut spans = literal.iter().peekable();
    for (i, c) in text.char_indices() {
        while spans.peek().is_some_and(|s| s.1 <= i) {
            spans.next();
        }
        let inside = spans.peek().is_some_and(|s| s.0 <= i);
        if c == '\n' {
            (line, col, comment, prev) = (line + 1, 1, false, c);
            continue;
        }
        if !inside {
            comment |= c == '#' && matches!(prev, ' ' | '\t' | '\n' | '\r');
            if c == '\t' && !comment {
                return Err(err(
                    line,
                    col,
                    "found character '\\t' that cannot start any token (PyYAML takes a tab \
                     only inside quotes, block scalars and comments)",
                ));
            }
        }
        prev = c;
        col += 1;
    }
    Ok(())
}

/// The name of the anchor (`&name`) among the node properties starting at byte `from`, with
/// its position in bytes; None without one.
fn anchor_at(text: &str, from: usize) -> Option<(usize, &str)> {
    let mut i = from;
    for _ in 0..2 {
        let rest = text.get(i..)?;
        let skip = rest.len() - rest.trim_start_matches([' ', '\t', '\r', '\n']).len();
        i += skip;
        let rest = &text[i..];
        let end = rest
            .find(|c: char| c.is_whitespace() || ",[]{}".contains(c))
            .unwrap_or(rest.len());
        match rest.as_bytes().first() {
            Some(b'&') => return Some((i + 1, &rest[1..end])),
            Some(b'!') => i += end,
            _ => return None,
        }
    }
    None
}

/// PyYAML's anchor and alias names: letters, digits, `-` and `_`, at least one.
fn name_error(name: &str) -> Option<String> {
    let bad = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'));
    match (name.is_empty(), bad) {
        (true, _) => Some("expected alphabetic or numeric character, but found none".into()),
        (_, Some(c)) => Some(format!(
            "expected alphabetic or numeric character, but found {c:?} (PyYAML's anchor \
             names are letters, digits, '-' and '_')"
        )),
        _ => None,
    }
}

/// Anchors of one document by name, to refuse one defined twice (PyYAML's composer does).
/// Names borrow the text: 300,000 anchors were as many small allocations.
#[derive(Default)]
pub(super) struct Anchors<'t> {
    seen: std::collections::HashMap<&'t str, u32>,
}

impl<'t> Anchors<'t> {
    /// The anchor of the node whose properties start at `start`.
    pub(super) fn define(&mut self, text: &'t str, start: Pos) -> Result<(), YamlError> {
        let Some((_, name)) = anchor_at(text, start.offset) else {
            return Ok(());
        };
        if let Some(why) = name_error(name) {
            return Err(at(start, format!("while scanning an anchor: {why}")));
        }
        if let Some(first) = self.seen.insert(name, start.line) {
            return Err(at(
                start,
                format!(
                    "found duplicate anchor '{name}'; first occurrence on line {first}, second \
                     occurrence here (PyYAML refuses a redefined anchor)"
                ),
            ));
        }
        Ok(())
    }

    /// An alias (`*name`) at `start`: its name must be one PyYAML scans.
    pub(super) fn alias(text: &str, start: Pos) -> Result<(), YamlError> {
        let rest = text.get(start.offset + 1..).unwrap_or("");
        let end = rest
            .find(|c: char| c.is_whitespace() || ",[]{}".contains(c))
            .unwrap_or(rest.len());
        match name_error(&rest[..end]) {
            Some(why) => Err(at(start, format!("while scanning an alias: {why}"))),
            None => Ok(()),
        }
    }
}

/// A core tag on a collection: it must be one that builds that kind of node.
pub(super) fn collection_tag(tag: &str, node: &Node) -> Result<(), YamlError> {
    let found = match node.kind {
        NodeKind::Seq(_) => "sequence",
        _ => "mapping",
    };
    let fits = match tag {
        "seq" => found == "sequence",
        "map" | "set" => found == "mapping",
        "omap" | "pairs" => return ordered_pairs(tag, node),
        _ => false,
    };
    if fits {
        return Ok(());
    }
    let expected = match tag {
        "seq" => "a sequence node",
        "map" | "set" => "a mapping node",
        "merge" | "value" => {
            return Err(at(node.start, undefined(tag)));
        }
        _ => "a scalar node",
    };
    Err(at(
        node.start,
        format!("tag `!!{tag}`: expected {expected}, but found {found}"),
    ))
}

/// `!!omap` / `!!pairs`: a sequence of one-pair mappings.
fn ordered_pairs(tag: &str, node: &Node) -> Result<(), YamlError> {
    let NodeKind::Seq(items) = &node.kind else {
        return Err(at(
            node.start,
            format!("tag `!!{tag}`: expected a sequence, but found mapping"),
        ));
    };
    match items
        .iter()
        .find(|i| !matches!(&i.kind, NodeKind::Map(e) if e.len() == 1))
    {
        Some(i) => Err(at(
            i.start,
            format!("tag `!!{tag}`: expected a mapping of length 1 in each item"),
        )),
        None => Ok(()),
    }
}

fn undefined(tag: &str) -> String {
    format!(
        "could not determine a constructor for the tag 'tag:yaml.org,2002:{tag}' (`!!{tag}` \
         belongs on a mapping key)"
    )
}

/// The tree as PyYAML's constructor would build it: keys, merge keys and scalars; `literal`
/// collects the byte spans of quoted and block scalars (for [`tabs`]).
pub(super) fn tree(
    node: &Node,
    text: &str,
    literal: &mut Vec<(usize, usize)>,
) -> Result<(), YamlError> {
    match &node.kind {
        NodeKind::Scalar(s) => {
            if s.style != Style::Plain {
                literal.push((node.start.offset, node.end.offset));
            }
            scalar(s, node.start, false)
        }
        NodeKind::Seq(items) => items.iter().try_for_each(|n| tree(n, text, literal)),
        NodeKind::Map(entries) => {
            for (k, v) in entries {
                key(k, v, text)?;
                match &k.kind {
                    NodeKind::Scalar(s) => {
                        if s.style != Style::Plain {
                            literal.push((k.start.offset, k.end.offset));
                        }
                        scalar(s, k.start, true)?;
                    }
                    _ => tree(k, text, literal)?,
                }
                tree(v, text, literal)?;
            }
            Ok(())
        }
    }
}

/// A mapping entry: an empty implicit key, an unhashable key, a merge key's value.
fn key(k: &Node, v: &Node, text: &str) -> Result<(), YamlError> {
    match &k.kind {
        NodeKind::Seq(_) | NodeKind::Map(_) => Err(at(
            k.start,
            "found unhashable key (a list or mapping as a key: Python cannot hash it)",
        )),
        NodeKind::Scalar(s)
            if s.style == Style::Plain
                && s.text.is_empty()
                && s.tag.is_none()
                && implicit_empty(text, k.start.offset) =>
        {
            Err(at(
                k.start,
                "expected a key before ':' (PyYAML refuses an empty implicit key)",
            ))
        }
        NodeKind::Scalar(s) if is_merge(s) => merge_value(v),
        NodeKind::Scalar(_) => Ok(()),
    }
}

/// An empty key that saphyr placed at its `:` is implicit (`: a`) unless a `?` introduced it
/// (`? \n: a`, which PyYAML takes): the last thing before the `:`, comments aside, tells.
fn implicit_empty(text: &str, at: usize) -> bool {
    if !text.get(at..).is_some_and(|t| t.starts_with(':')) {
        return false;
    }
    let before = text[..at].rsplit('\n').map(|line| {
        let code = match line.find('#') {
            Some(i) if i == 0 || line[..i].ends_with([' ', '\t']) => &line[..i],
            _ => line,
        };
        code.trim()
    });
    before
        .into_iter()
        .find(|code| !code.is_empty())
        .is_none_or(|code| !code.ends_with('?'))
}

fn is_merge(s: &Scalar) -> bool {
    (s.style == Style::Plain && s.text == "<<" && s.tag.is_none())
        || s.tag.as_deref() == Some("merge")
}

fn merge_value(v: &Node) -> Result<(), YamlError> {
    let kind = |n: &Node| match n.kind {
        NodeKind::Scalar(_) => "scalar",
        NodeKind::Seq(_) => "sequence",
        NodeKind::Map(_) => "mapping",
    };
    match &v.kind {
        NodeKind::Map(_) => Ok(()),
        NodeKind::Seq(items) => match items.iter().find(|i| !matches!(i.kind, NodeKind::Map(_))) {
            Some(i) => Err(at(
                i.start,
                format!(
                    "expected a mapping for merging, but found {} (each item of a `<<` list \
                     must be a mapping)",
                    kind(i)
                ),
            )),
            None => Ok(()),
        },
        NodeKind::Scalar(_) => Err(at(
            v.start,
            "expected a mapping or list of mappings for merging, but found scalar",
        )),
    }
}

/// A scalar the SafeConstructor must build: its explicit tag's constructor, else (plain) the
/// implicit int, float or timestamp it resolves to.
fn scalar(s: &Scalar, p: Pos, is_key: bool) -> Result<(), YamlError> {
    let why = match s.tag.as_deref() {
        Some("merge" | "value") if is_key => None,
        Some(t @ ("merge" | "value")) => Some(undefined(t)),
        Some(t @ ("seq" | "omap" | "pairs")) => Some(format!(
            "tag `!!{t}`: expected a sequence node, but found scalar"
        )),
        Some(t @ ("map" | "set")) => Some(format!(
            "tag `!!{t}`: expected a mapping node, but found scalar"
        )),
        Some(t) => super::pyyaml_scalars::constructs(t, &s.text)
            .err()
            .map(|e| format!("tag `!!{t}`: {e}")),
        None if s.style == Style::Plain => super::pyyaml_scalars::implicit(&s.text).err(),
        None => None,
    };
    why.map_or(Ok(()), |w| Err(at(p, w)))
}

/// A block scalar as the whole document: PyYAML reads its content from column 1 on, so a line
/// at column 0 that is not a comment ends it and is refused.
pub(super) fn root_block(text: &str, root: &Node) -> Result<(), YamlError> {
    let NodeKind::Scalar(s) = &root.kind else {
        return Ok(());
    };
    if !matches!(s.style, Style::Literal | Style::Folded) {
        return Ok(());
    }
    let body = &text[root.start.offset.min(text.len())..];
    for (i, line) in body.split('\n').enumerate().skip(1) {
        let first = line.chars().next();
        if first.is_some_and(|c| !c.is_whitespace() && c != '#') {
            return Err(err(
                root.start.line + i as u32,
                1,
                "expected '<document start>', but found a line at column 0 (PyYAML ends a \
                 top-level block scalar there)",
            ));
        }
    }
    Ok(())
}

/// PyYAML's implicit timestamp (YAML 1.1): what a plain scalar must match to be built as one.
pub(super) static IMPLICIT_TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
    )
    .expect("static regex")
});
