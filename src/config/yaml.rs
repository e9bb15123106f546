//! Reading YAML with source positions, and typing scalars exactly as PyYAML's SafeLoader
//! (YAML 1.1) does — that is what Primus' Python code receives.
//!
//! The tree keeps every key and value with its position so that provenance can name
//! `file:line:col` and the editor can replace a value's exact bytes.

use crate::domain::value::Value;
use indexmap::IndexMap;
use regex::Regex;
use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use std::collections::HashMap;
use std::sync::LazyLock;

/// A position in a source text: 1-based line and column (in characters), byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
    pub offset: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
    Folded,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// The scalar's content after YAML unescaping (not yet typed).
    pub text: String,
    pub style: Style,
    /// Tag suffix for core-schema tags (`str`, `int`, ...), or the full tag otherwise.
    pub tag: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    Scalar(Scalar),
    Seq(Vec<Node>),
    /// Entries in document order; duplicate keys are kept here (the last one wins when typed).
    Map(Vec<(Node, Node)>),
}

/// A YAML node with the span of its text. For scalars `end` is exact (quoted scalars included);
/// for block collections it is the end of their last scalar.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub start: Pos,
    pub end: Pos,
    /// Flow collection (`[..]` / `{..}`) rather than block.
    pub flow: bool,
}

/// A YAML syntax error with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {col}: {message}")]
pub struct YamlError {
    pub line: u32,
    pub col: u32,
    pub message: String,
}

impl Node {
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.kind {
            NodeKind::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_scalar(&self) -> Option<&Scalar> {
        match &self.kind {
            NodeKind::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` in a mapping (the last one when a key repeats, as PyYAML keeps).
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entry(key).map(|(_, v)| v)
    }

    /// The `(key, value)` entry for `key` in a mapping (the last one when repeated).
    pub fn entry(&self, key: &str) -> Option<(&Node, &Node)> {
        self.as_map()?
            .iter()
            .rev()
            .find(|(k, _)| k.key_string().as_deref() == Some(key))
            .map(|(k, v)| (k, v))
    }

    /// A mapping key as the string Python would see (`str(key)` for non-string keys).
    pub fn key_string(&self) -> Option<String> {
        match self.typed() {
            Value::Str(s) => Some(s),
            Value::Null => Some("None".into()),
            Value::Bool(b) => Some(if b { "True" } else { "False" }.into()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(crate::domain::value::python_float_repr(f)),
            _ => None,
        }
    }

    /// The node as Python sees it after `yaml.safe_load`.
    pub fn typed(&self) -> Value {
        match &self.kind {
            NodeKind::Scalar(s) => type_scalar(s),
            NodeKind::Seq(items) => Value::List(items.iter().map(Node::typed).collect()),
            NodeKind::Map(entries) => {
                let mut m = IndexMap::new();
                for (k, v) in entries {
                    if let Some(k) = k.key_string() {
                        m.insert(k, v.typed());
                    }
                }
                Value::Map(m)
            }
        }
    }
}

/// A key written more than once in one mapping. PyYAML's SafeLoader keeps the last value
/// without a word (Primus loads with it), so every earlier occurrence is dead text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DuplicateKey {
    /// The key with the path of its mapping, dotted (`modules.pre_trainer.overrides.lr`; list
    /// items as `[i]`).
    pub path: String,
    /// An earlier occurrence of the key: ignored.
    pub ignored: Pos,
    /// The last occurrence: the one that wins.
    pub wins: Pos,
    /// Settings (scalar leaves) under the ignored occurrence, all dropped with it (1 for a
    /// scalar).
    pub dropped: usize,
}

/// Scalar leaves under `node` (a scalar is one).
fn leaf_count(node: &Node) -> usize {
    match &node.kind {
        NodeKind::Scalar(_) => 1,
        NodeKind::Seq(_) => 1,
        NodeKind::Map(entries) => entries.iter().map(|(_, v)| leaf_count(v)).sum(),
    }
}

/// Every key written more than once in one mapping of `node`, at any depth: one entry per
/// ignored occurrence, naming the occurrence that wins. Keys a merge (`<<`) brings in are not
/// duplicates (explicit keys override them); duplicates inside an anchored mapping are reported
/// once, where it is written (its aliases are copies with the same positions).
pub fn duplicate_keys(node: &Node) -> Vec<DuplicateKey> {
    let mut out = Vec::new();
    collect_duplicates(node, "", &mut out);
    out.sort_by_key(|d| (d.ignored.offset, d.wins.offset));
    out.dedup_by(|a, b| a.ignored == b.ignored && a.wins == b.wins);
    out
}

fn collect_duplicates(node: &Node, path: &str, out: &mut Vec<DuplicateKey>) {
    match &node.kind {
        NodeKind::Scalar(_) => {}
        NodeKind::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_duplicates(item, &format!("{path}[{i}]"), out);
            }
        }
        NodeKind::Map(entries) => {
            let mut last: HashMap<String, Pos> = HashMap::new();
            for (k, _) in entries {
                if let Some(name) = k.key_string() {
                    last.insert(name, k.start);
                }
            }
            for (k, v) in entries {
                let name = k.key_string();
                let child = match &name {
                    Some(n) if path.is_empty() => n.clone(),
                    Some(n) => format!("{path}.{n}"),
                    None => path.to_string(),
                };
                if let Some(wins) = name.as_ref().and_then(|n| last.get(n))
                    && *wins != k.start
                {
                    out.push(DuplicateKey {
                        path: child.clone(),
                        ignored: k.start,
                        wins: *wins,
                        dropped: leaf_count(v),
                    });
                }
                collect_duplicates(v, &child, out);
            }
        }
    }
}

/// Parse one YAML document. `Ok(None)` for an empty document (PyYAML returns `None`).
/// What PyYAML's SafeLoader refuses is refused too ([`super::pyyaml`]), at its line and column.
/// A large text parsed before in this process is not parsed again ([`super::parse_cache`]).
pub fn parse(text: &str) -> Result<Option<Node>, YamlError> {
    super::parse_cache::parse(text, parse_text)
}

fn parse_text(text: &str) -> Result<Option<Node>, YamlError> {
    non_printable(text)?;
    super::pyyaml::stream_start(text)?;
    let stand_in = as_pyyaml_reads(text);
    let read = stand_in.as_deref().unwrap_or(text);
    let mut root = build(read)?;
    if read.contains(BOM_STAND_IN) && !text.contains(BOM_STAND_IN) {
        root = root.map(restore_bom);
    }
    let mut literal = Vec::new();
    if let Some(r) = &root {
        super::pyyaml::tree(r, read, &mut literal)?;
        super::pyyaml::root_block(read, r)?;
    }
    literal.sort_unstable();
    super::pyyaml::tabs(read, &literal)?;
    Ok(root.map(flatten_merge_keys))
}

/// What a BOM inside the text is read as (a private-use character: printable, 3 bytes too).
const BOM_STAND_IN: char = '\u{e000}';

/// `text` as PyYAML reads it, when that differs from how saphyr would, with every byte offset
/// kept (node spans index the original text): NEL, LS and PS are line breaks to PyYAML (read
/// as spaces then a newline, of the same length: trailing spaces are nothing before a break);
/// a BOM past the start is an ordinary character to PyYAML but ends a document for saphyr
/// (read as [`BOM_STAND_IN`], given back in the scalars). None: read `text` as it is.
fn as_pyyaml_reads(text: &str) -> Option<String> {
    let head = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let rest = &text[head..];
    let breaks = rest.contains(['\u{85}', '\u{2028}', '\u{2029}']);
    let bom = rest.contains('\u{feff}') && !text.contains(BOM_STAND_IN);
    if !breaks && !bom {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..head]);
    for c in rest.chars() {
        match c {
            '\u{85}' => out.push_str(" \n"),
            '\u{2028}' | '\u{2029}' => out.push_str("  \n"),
            '\u{feff}' if bom => out.push(BOM_STAND_IN),
            c => out.push(c),
        }
    }
    Some(out)
}

fn restore_bom(mut n: Node) -> Node {
    n.kind = match n.kind {
        NodeKind::Scalar(mut s) => {
            s.text = s.text.replace(BOM_STAND_IN, "\u{feff}");
            NodeKind::Scalar(s)
        }
        NodeKind::Seq(items) => NodeKind::Seq(items.into_iter().map(restore_bom).collect()),
        NodeKind::Map(entries) => NodeKind::Map(
            entries
                .into_iter()
                .map(|(k, v)| (restore_bom(k), restore_bom(v)))
                .collect(),
        ),
    };
    n
}

/// The tree of `text` as saphyr reads it (anchors, tags and scalars checked on the way), its
/// syntax errors placed inside the text.
fn build(text: &str) -> Result<Option<Node>, YamlError> {
    let offsets = CharOffsets::new(text);
    let mut b = Builder {
        text,
        offsets: &offsets,
        stack: Vec::new(),
        anchors: HashMap::new(),
        names: Default::default(),
        tags: Vec::new(),
        anchored: 0,
        expanded: 0,
        nodes: 0,
        root: None,
        docs: 0,
        lines: text.split('\n').count() as u32,
    };
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| {
            let p = b.pos(e.marker());
            YamlError {
                line: p.line,
                col: p.col,
                message: scan_message(e.info()),
            }
        })?;
        b.event(ev, span)?;
    }
    Ok(b.root)
}

/// The scanner's message, with what it means where it is terse.
fn scan_message(info: &str) -> String {
    if info == "simple key expect ':'" {
        // The scanner gives up on a key once it runs past its line or 1024 characters.
        return format!(
            "{info}: a key must end with `:` on its own line, within 1024 characters (YAML's \
             limit on keys)"
        );
    }
    info.to_string()
}

/// Character index → byte offset (saphyr's markers count characters).
struct CharOffsets {
    ascii: bool,
    table: Vec<usize>,
    len: usize,
}

impl CharOffsets {
    fn new(text: &str) -> Self {
        let ascii = text.is_ascii();
        let table = if ascii {
            Vec::new()
        } else {
            text.char_indices().map(|(i, _)| i).collect()
        };
        CharOffsets {
            ascii,
            table,
            len: text.len(),
        }
    }

    fn byte(&self, char_index: usize) -> usize {
        if self.ascii {
            char_index.min(self.len)
        } else {
            self.table.get(char_index).copied().unwrap_or(self.len)
        }
    }
}

enum Frame {
    Seq {
        start: Pos,
        items: Vec<Node>,
        anchor: usize,
        flow: bool,
        inside: Cost,
    },
    Map {
        start: Pos,
        entries: Vec<(Node, Node)>,
        pending_key: Option<Node>,
        anchor: usize,
        flow: bool,
        inside: Cost,
    },
}

/// What a node costs an alias that copies it: its size in nodes and how deep its collections
/// nest (0 for a scalar). Summed as the nodes are built, so an anchor costs nothing to measure
/// (measuring each of 256 nested anchors walked the same subtree 256 times).
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    size: usize,
    height: usize,
}

impl Cost {
    const SCALAR: Cost = Cost { size: 1, height: 0 };

    fn add(&mut self, child: Cost) {
        self.size += child.size;
        self.height = self.height.max(child.height);
    }

    /// The collection holding what `self` sums.
    fn closed(self) -> Cost {
        Cost {
            size: self.size + 1,
            height: self.height + 1,
        }
    }
}

struct Builder<'a> {
    text: &'a str,
    offsets: &'a CharOffsets,
    stack: Vec<Frame>,
    /// Anchored nodes (aliases are expanded by copy).
    anchors: HashMap<usize, Anchored>,
    /// Nodes the kept copies of anchored nodes hold (bounded: nested anchors each keep a copy
    /// of everything inside them).
    anchored: usize,
    /// Anchor names seen (PyYAML refuses one defined twice).
    names: super::pyyaml::Anchors<'a>,
    /// The core tag of each open collection, checked when it closes.
    tags: Vec<Option<String>>,
    /// Nodes created by alias expansion so far (bounded, against "billion laughs" inputs).
    expanded: usize,
    /// Nodes written in the text so far (bounded by [`MAX_NODES`]).
    nodes: usize,
    root: Option<Node>,
    docs: usize,
    /// Lines of the text (the last one may be empty): a position past them is clamped.
    lines: u32,
}

impl Builder<'_> {
    fn pos(&self, m: &saphyr_parser::Marker) -> Pos {
        let offset = self.offsets.byte(m.index());
        if m.line() as u32 > self.lines {
            // The scanner's end of stream after a comment can lie past the last line (an
            // empty value at the end of `? \n#`): report the end of the text.
            let last = self.text.rsplit('\n').next().unwrap_or("");
            return Pos {
                line: self.lines,
                col: last.chars().count() as u32 + 1,
                offset: offset.min(self.text.len()),
            };
        }
        Pos {
            line: m.line() as u32,
            col: m.col() as u32 + 1,
            offset,
        }
    }

    fn event(&mut self, ev: Event<'_>, span: Span) -> Result<(), YamlError> {
        let start = self.pos(&span.start);
        self.properties(&ev, start)?;
        if matches!(
            ev,
            Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..)
        ) {
            self.count_node(start)?;
        }
        match ev {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
            Event::DocumentStart(_) => {
                self.docs += 1;
                if self.docs > 1 {
                    return Err(YamlError {
                        line: start.line,
                        col: start.col,
                        message: "expected a single document in the stream, found another one"
                            .into(),
                    });
                }
            }
            Event::Alias(id) => self.alias(id, start)?,
            Event::Scalar(text, style, anchor, tag) => {
                if let Some(why) = tag.as_deref().and_then(refused_tag) {
                    return Err(YamlError {
                        line: start.line,
                        col: start.col,
                        message: why,
                    });
                }
                let style = match style {
                    ScalarStyle::Plain => Style::Plain,
                    ScalarStyle::SingleQuoted => Style::SingleQuoted,
                    ScalarStyle::DoubleQuoted => Style::DoubleQuoted,
                    ScalarStyle::Literal => Style::Literal,
                    ScalarStyle::Folded => Style::Folded,
                };
                let mut end = self.pos(&span.end);
                if matches!(style, Style::SingleQuoted | Style::DoubleQuoted) {
                    // saphyr's span of a quoted scalar can run on over a trailing comment:
                    // find the closing quote ourselves.
                    if let Some(e) = quoted_end(self.text, start.offset, style) {
                        end = pos_at(self.text, start, e);
                    }
                }
                let tag = tag.as_deref().map(tag_name);
                let node = Node {
                    kind: NodeKind::Scalar(Scalar {
                        text: text.into_owned(),
                        style,
                        tag,
                    }),
                    start,
                    end,
                    flow: false,
                };
                self.anchor(anchor, &node, Cost::SCALAR);
                self.push(node, Cost::SCALAR);
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if self.stack.len() >= MAX_DEPTH => {
                return Err(YamlError {
                    line: start.line,
                    col: start.col,
                    message: format!("nesting deeper than {MAX_DEPTH} levels"),
                });
            }
            Event::SequenceStart(_, Some(tag)) if refused_tag(&tag).is_some() => {
                return Err(YamlError {
                    line: start.line,
                    col: start.col,
                    message: refused_tag(&tag).unwrap_or_default(),
                });
            }
            Event::SequenceStart(anchor, tag) => {
                self.tags.push(tag.as_deref().map(tag_name));
                let flow = self.text[start.offset..].starts_with('[');
                self.stack.push(Frame::Seq {
                    start,
                    items: Vec::new(),
                    anchor,
                    flow,
                    inside: Cost::default(),
                });
            }
            Event::MappingStart(_, Some(tag)) if refused_tag(&tag).is_some() => {
                return Err(YamlError {
                    line: start.line,
                    col: start.col,
                    message: refused_tag(&tag).unwrap_or_default(),
                });
            }
            Event::MappingStart(anchor, tag) => {
                self.tags.push(tag.as_deref().map(tag_name));
                let flow = self.text[start.offset..].starts_with('{');
                self.stack.push(Frame::Map {
                    start,
                    entries: Vec::new(),
                    pending_key: None,
                    anchor,
                    flow,
                    inside: Cost::default(),
                });
            }
            Event::SequenceEnd => {
                if let Some(Frame::Seq {
                    start: s,
                    items,
                    anchor,
                    flow,
                    inside,
                }) = self.stack.pop()
                {
                    let end = self.collection_end(flow, s, span, items.last().map(|n| n.end));
                    let s = if flow {
                        s
                    } else {
                        self.block_seq_start(s, items.first().map(|n| n.start))
                    };
                    let node = Node {
                        kind: NodeKind::Seq(items),
                        start: s,
                        end,
                        flow,
                    };
                    self.collection_tag(&node)?;
                    self.anchor(anchor, &node, inside.closed());
                    self.push(node, inside.closed());
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map {
                    start: s,
                    entries,
                    anchor,
                    flow,
                    inside,
                    ..
                }) = self.stack.pop()
                {
                    let end = self.collection_end(flow, s, span, entries.last().map(|e| e.1.end));
                    let node = Node {
                        kind: NodeKind::Map(entries),
                        start: s,
                        end,
                        flow,
                    };
                    self.collection_tag(&node)?;
                    self.anchor(anchor, &node, inside.closed());
                    self.push(node, inside.closed());
                }
            }
        }
        Ok(())
    }

    /// An anchor's name (defined twice? PyYAML's characters?) and an alias's.
    fn properties(&mut self, ev: &Event<'_>, start: Pos) -> Result<(), YamlError> {
        match ev {
            Event::Alias(_) => super::pyyaml::Anchors::alias(self.text, start),
            Event::Scalar(_, _, a, _) | Event::SequenceStart(a, _) | Event::MappingStart(a, _)
                if *a > 0 =>
            {
                self.names.define(self.text, start)
            }
            _ => Ok(()),
        }
    }

    /// The core tag a collection was opened with must build that kind of node.
    fn collection_tag(&mut self, node: &Node) -> Result<(), YamlError> {
        match self.tags.pop() {
            Some(Some(t)) => super::pyyaml::collection_tag(&t, node),
            _ => Ok(()),
        }
    }

    fn count_node(&mut self, at: Pos) -> Result<(), YamlError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(YamlError {
                line: at.line,
                col: at.col,
                message: "more than 500,000 YAML nodes (keys, values and collections) in one \
                          file; refusing to load"
                    .into(),
            });
        }
        Ok(())
    }

    /// An alias: a copy of its anchor's node, within the bounds on copies and on nesting.
    fn alias(&mut self, id: usize, start: Pos) -> Result<(), YamlError> {
        let err = |message: &str| YamlError {
            line: start.line,
            col: start.col,
            message: message.into(),
        };
        let a = self
            .anchors
            .get(&id)
            .ok_or_else(|| err("alias refers to an unknown anchor"))?;
        self.expanded += a.cost.size;
        if self.expanded > MAX_ALIAS_NODES {
            return Err(err(
                "aliases expand to too many nodes (more than 100,000); refusing to load",
            ));
        }
        // A copy nests as deep as its anchor does: aliases of aliases, each inside a few
        // brackets, built a tree deep enough to overflow the stack of every function that
        // walks it.
        if self.stack.len() + a.cost.height > MAX_DEPTH {
            return Err(err(&format!(
                "aliases nest collections deeper than {MAX_DEPTH} levels"
            )));
        }
        let Some(node) = a.node.clone() else {
            return Err(err(
                "anchors hold more than 400,000 nodes in all; refusing to load",
            ));
        };
        let cost = a.cost;
        self.push(node, cost);
        Ok(())
    }

    fn collection_end(&self, flow: bool, start: Pos, span: Span, last: Option<Pos>) -> Pos {
        if flow {
            self.flow_close(start, last)
                .unwrap_or_else(|| self.pos(&span.end))
        } else {
            last.unwrap_or(start)
        }
    }

    /// Just past a flow collection's closing bracket: the first `]` or `}` after its last item
    /// (after its opening bracket when empty), past separators and comments. saphyr's end of a
    /// flow collection lies at the next token, so a comment after the bracket on the same line
    /// (`[a, b]  # note`) was part of its span, and an edit of the value dropped it.
    fn flow_close(&self, start: Pos, last: Option<Pos>) -> Option<Pos> {
        let bytes = self.text.as_bytes();
        let from = last.unwrap_or(Pos {
            offset: start.offset + 1,
            col: start.col + 1,
            ..start
        });
        let mut at = from.offset;
        while let Some(&b) = bytes.get(at) {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' | b',' | b':' => at += 1,
                b'#' => at += bytes[at..].iter().position(|&c| c == b'\n')?,
                b']' | b'}' => return Some(pos_at(self.text, from, at + 1)),
                _ => return None,
            }
        }
        None
    }

    /// Where a block sequence starts: its first `-`. saphyr places a sequence written at its
    /// key's own indentation (`key:` then `- a` in column 1) at its first item, past the dash,
    /// and one whose first item is empty (`-` alone) at the end of the dash's line; an editor
    /// that replaced that span would leave the dash behind. A sequence placed before its first
    /// item and on a dash is where it should be.
    fn block_seq_start(&self, start: Pos, first: Option<Pos>) -> Pos {
        let bytes = self.text.as_bytes();
        let on_dash = bytes.get(start.offset) == Some(&b'-');
        if on_dash && first.is_none_or(|f| f.offset != start.offset) {
            return start;
        }
        let mut at = start.offset.min(bytes.len());
        while at > 0 && matches!(bytes[at - 1], b' ' | b'\t') {
            at -= 1;
        }
        if at == 0 || bytes[at - 1] != b'-' {
            return start;
        }
        let back = (start.offset - (at - 1)) as u32;
        Pos {
            line: start.line,
            col: start.col.saturating_sub(back).max(1),
            offset: at - 1,
        }
    }

    /// Keep a copy of `node` for the aliases to anchor `id` (none when 0), while the copies
    /// kept hold at most [`MAX_ANCHORED_NODES`] nodes: a larger one is only refused if an
    /// alias uses it.
    fn anchor(&mut self, id: usize, node: &Node, cost: Cost) {
        if id == 0 {
            return;
        }
        let keep = cost.size <= MAX_ALIAS_NODES && self.anchored + cost.size <= MAX_ANCHORED_NODES;
        if keep {
            self.anchored += cost.size;
        }
        let node = keep.then(|| node.clone());
        self.anchors.insert(id, Anchored { node, cost });
    }

    fn push(&mut self, node: Node, cost: Cost) {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, inside, .. }) => {
                inside.add(cost);
                items.push(node)
            }
            Some(Frame::Map {
                entries,
                pending_key,
                inside,
                ..
            }) => match pending_key.take() {
                None => {
                    inside.add(cost);
                    *pending_key = Some(node)
                }
                Some(k) => {
                    inside.add(cost);
                    let mut node = node;
                    // An empty value (`key:`) has no text; saphyr places it at the next token,
                    // possibly lines below. Pin it to the end of its key.
                    if let NodeKind::Scalar(s) = &node.kind
                        && s.text.is_empty()
                        && s.style == Style::Plain
                    {
                        node.start = k.end;
                        node.end = k.end;
                    }
                    entries.push((k, node))
                }
            },
        }
    }
}

/// Deepest nesting of collections accepted (PyYAML would hit Python's recursion limit).
const MAX_DEPTH: usize = 256;
/// Nodes written in one document. Every stage after the parse (resolution, lint, the edit
/// model) costs a microsecond or so a node, so a 15 MiB flow list of 5 million numbers took
/// 9 s and 1.6 GB; Primus' own presets hold a few thousand.
const MAX_NODES: usize = 500_000;
/// Nodes that alias expansion may create in one document.
const MAX_ALIAS_NODES: usize = 100_000;
/// Nodes the copies of anchored nodes may hold in one document: 300,000 anchored scalars
/// fit, 256 nested anchors around a 100,000-item list do not.
const MAX_ANCHORED_NODES: usize = 400_000;

/// An anchored node with what an alias to it costs; the copy is not kept when the copies
/// already hold [`MAX_ANCHORED_NODES`] nodes.
struct Anchored {
    node: Option<Node>,
    cost: Cost,
}

/// Byte offset just past the closing quote of a quoted scalar starting at `start`.
fn quoted_end(text: &str, start: usize, style: Style) -> Option<usize> {
    let bytes = text.as_bytes();
    let quote = if style == Style::SingleQuoted {
        b'\''
    } else {
        b'"'
    };
    if bytes.get(start) != Some(&quote) {
        return None;
    }
    let mut i = start + 1;
    while i < bytes.len() {
        let c = bytes[i];
        if quote == b'"' && c == b'\\' {
            i += 2;
            continue;
        }
        if c == quote {
            if quote == b'\'' && bytes.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

/// The position of byte offset `target`, counting from a known position `from` before it.
fn pos_at(text: &str, from: Pos, target: usize) -> Pos {
    let mut p = from;
    for ch in text[from.offset..target].chars() {
        if ch == '\n' {
            p.line += 1;
            p.col = 1;
        } else {
            p.col += 1;
        }
    }
    p.offset = target;
    p
}

/// Apply YAML 1.1 merge keys (`<<: *base`) as PyYAML's SafeLoader does: explicit keys win,
/// among merged maps the earlier one wins.
fn flatten_merge_keys(node: Node) -> Node {
    let Node {
        kind,
        start,
        end,
        flow,
    } = node;
    let kind = match kind {
        NodeKind::Seq(items) => NodeKind::Seq(items.into_iter().map(flatten_merge_keys).collect()),
        NodeKind::Map(entries) => {
            let has_merge = entries.iter().any(|(k, _)| is_merge_key(k));
            let entries: Vec<(Node, Node)> = entries
                .into_iter()
                .map(|(k, v)| (k, flatten_merge_keys(v)))
                .collect();
            if !has_merge {
                NodeKind::Map(entries)
            } else {
                NodeKind::Map(merge_entries(entries))
            }
        }
        k => k,
    };
    Node {
        kind,
        start,
        end,
        flow,
    }
}

/// A mapping's entries with its merge keys applied: the merged mappings' keys first (within
/// one mapping the last of a repeated key counts, as PyYAML constructs its pairs in order;
/// across several the first mapping listed wins), less those written explicitly, then the
/// explicit entries. Keys are looked up in sets: a merged mapping may hold 100,000 keys.
fn merge_entries(entries: Vec<(Node, Node)>) -> Vec<(Node, Node)> {
    use std::collections::HashSet;
    let mut merged: Vec<(Node, Node)> = Vec::new();
    let mut merged_names: HashSet<Option<String>> = HashSet::new();
    let mut explicit: Vec<(Node, Node)> = Vec::new();
    for (k, v) in entries {
        if !is_merge_key(&k) {
            explicit.push((k, v));
            continue;
        }
        let sources: Vec<Node> = match v.kind {
            NodeKind::Seq(items) => items,
            _ => vec![v],
        };
        for src in sources {
            if let NodeKind::Map(es) = src.kind {
                for (mk, mv) in last_of_each(es) {
                    if merged_names.insert(mk.key_string()) {
                        merged.push((mk, mv));
                    }
                }
            }
        }
    }
    let explicit_names: HashSet<Option<String>> =
        explicit.iter().map(|(k, _)| k.key_string()).collect();
    merged.retain(|(mk, _)| !explicit_names.contains(&mk.key_string()));
    merged.extend(explicit);
    merged
}

/// `entries` with only the last of each repeated key, in the order of those last ones.
fn last_of_each(entries: Vec<(Node, Node)>) -> Vec<(Node, Node)> {
    crate::util::dedup::last_of_each(entries, |(k, _)| k.key_string())
}

fn is_merge_key(k: &Node) -> bool {
    matches!(&k.kind, NodeKind::Scalar(s) if (s.style == Style::Plain && s.text == "<<" && s.tag.is_none()) || s.tag.as_deref() == Some("merge"))
}

static BOOL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
        .expect("static regex")
});
pub(super) static INT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
    )
    .expect("static regex")
});
pub(super) static FLOAT_RE: LazyLock<Regex> = LazyLock::new(|| {
    // PyYAML 6's resolver: a float that starts with its point has a digit after it (`.5`).
    Regex::new(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    )
    .expect("static regex")
});
static NULL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:~|null|Null|NULL|)$").expect("static regex"));

/// PyYAML's reader refuses a stream with a character outside YAML's printable set (a raw ESC, a
/// NUL, DEL, C1 controls): the first one, at its line and column.
fn non_printable(text: &str) -> Result<(), YamlError> {
    let printable = |c: char| {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{7e}' | '\u{85}')
            || ('\u{a0}'..='\u{d7ff}').contains(&c)
            || ('\u{e000}'..='\u{fffd}').contains(&c)
            || c >= '\u{10000}'
    };
    let Some((i, c)) = text.char_indices().find(|(_, c)| !printable(*c)) else {
        return Ok(());
    };
    let before = &text[..i];
    let line = before.matches('\n').count() as u32 + 1;
    let col = before[before.rfind('\n').map_or(0, |p| p + 1)..]
        .chars()
        .count() as u32
        + 1;
    Err(YamlError {
        line,
        col,
        message: format!(
            "special character #x{:x} is not allowed in YAML: PyYAML refuses the file (write it \
             as an escape in a double-quoted string, e.g. \"\\e\")",
            c as u32
        ),
    })
}

/// A tag as the tree keeps it: the suffix of a core-schema tag (`str`, also written verbatim
/// as `!<tag:yaml.org,2002:str>`), else the whole tag.
fn tag_name(t: &saphyr_parser::Tag) -> String {
    if t.is_yaml_core_schema() {
        t.suffix.clone()
    } else if let Some(core) = t.suffix.strip_prefix(CORE_PREFIX) {
        core.to_string()
    } else {
        format!("{}{}", t.handle, t.suffix)
    }
}

const CORE_PREFIX: &str = "tag:yaml.org,2002:";

/// Why PyYAML's SafeLoader — how Primus reads YAML — cannot construct a node with `tag`, or None
/// when it can: it knows the core schema's `!!null`, `!!bool`, `!!int`, `!!float`, `!!binary`,
/// `!!timestamp`, `!!omap`, `!!pairs`, `!!set`, `!!str`, `!!seq` and `!!map` (and `!`, which
/// only makes a scalar a string); `!!python/...` and local tags make it raise a
/// ConstructorError.
fn refused_tag(tag: &saphyr_parser::Tag) -> Option<String> {
    const SAFE: &[&str] = &[
        "null",
        "bool",
        "int",
        "float",
        "binary",
        "timestamp",
        "omap",
        "pairs",
        "set",
        "str",
        "seq",
        "map",
        // Only on a mapping key (the merge key; a key read as a string): checked with the tree.
        "merge",
        "value",
    ];
    let ok = if tag.is_yaml_core_schema() {
        SAFE.contains(&tag.suffix.as_str())
    } else if let Some(core) = tag.suffix.strip_prefix(CORE_PREFIX) {
        SAFE.contains(&core)
    } else {
        // The non-specific tag `!` (it only makes a scalar a string).
        matches!(
            (tag.handle.as_str(), tag.suffix.as_str()),
            ("!", "") | ("", "!")
        )
    };
    (!ok).then(|| {
        let shown = if tag.is_yaml_core_schema() {
            format!("!!{}", tag.suffix)
        } else {
            tag.to_string()
        };
        format!(
            "tag `{shown}` is not one PyYAML's SafeLoader can construct: Primus fails to load \
             this file (a Python object or local tag has no place in an experiment)"
        )
    })
}

/// How PyYAML's SafeLoader types a scalar (YAML 1.1 implicit resolvers; quoted and block
/// scalars are always strings; core-schema tags are honoured).
pub fn type_scalar(s: &Scalar) -> Value {
    if let Some(tag) = &s.tag {
        match tag.as_str() {
            "str" => return Value::Str(s.text.clone()),
            "null" => return Value::Null,
            "bool" => return parse_bool(&s.text).map_or(Value::Str(s.text.clone()), Value::Bool),
            "int" => return parse_int(&s.text).map_or(Value::Str(s.text.clone()), Value::Int),
            "float" => {
                return parse_float(&s.text)
                    .or_else(|| parse_int(&s.text).map(|i| i as f64))
                    .map_or(Value::Str(s.text.clone()), Value::Float);
            }
            _ => {}
        }
    }
    if s.style != Style::Plain {
        return Value::Str(s.text.clone());
    }
    type_plain(&s.text)
}

/// Type a plain (unquoted) scalar's text with the YAML 1.1 implicit resolvers.
pub fn type_plain(t: &str) -> Value {
    if NULL_RE.is_match(t) {
        return Value::Null;
    }
    if BOOL_RE.is_match(t) {
        return Value::Bool(parse_bool(t).unwrap_or(false));
    }
    if INT_RE.is_match(t) {
        if let Some(i) = parse_int(t) {
            return Value::Int(i);
        }
        // Out of i64 range: Python keeps a big int; the nearest we hold is a float.
        if let Ok(f) = t.replace('_', "").parse::<f64>() {
            return Value::Float(f);
        }
    }
    if FLOAT_RE.is_match(t)
        && let Some(f) = parse_float(t)
    {
        return Value::Float(f);
    }
    Value::Str(t.to_string())
}

fn parse_bool(t: &str) -> Option<bool> {
    match t.to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" => Some(true),
        "no" | "false" | "off" => Some(false),
        _ => None,
    }
}

fn parse_int(t: &str) -> Option<i64> {
    let t = t.replace('_', "");
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t.as_str()),
    };
    let v: i64 = if body == "0" {
        0
    } else if let Some(b) = body.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()?
    } else if let Some(h) = body.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()?
    } else if body.contains(':') {
        let mut v: i64 = 0;
        for part in body.split(':') {
            v = v.checked_mul(60)?.checked_add(part.parse::<i64>().ok()?)?;
        }
        v
    } else if let Some(oct) = body.strip_prefix('0') {
        i64::from_str_radix(oct, 8).ok()?
    } else {
        body.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

fn parse_float(t: &str) -> Option<f64> {
    let t = t.replace('_', "").to_ascii_lowercase();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t.as_str()),
    };
    let v = if body == ".inf" {
        f64::INFINITY
    } else if body == ".nan" {
        f64::NAN
    } else if body.contains(':') {
        let mut v = 0.0;
        for part in body.split(':') {
            v = v * 60.0 + part.parse::<f64>().ok()?;
        }
        v
    } else {
        body.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Value {
        type_plain(s)
    }

    /// A flow collection's span ends at its closing bracket, not at the comment after it on the
    /// same line (which saphyr's end of the collection took in), however it is nested, spread
    /// over lines or empty.
    #[test]
    fn a_flow_collection_ends_at_its_bracket() {
        for (text, want) in [
            (
                "k: [\"model\", \"loss\"]     # [\"model\", \"loss\"]\n",
                "[\"model\", \"loss\"]",
            ),
            ("k: {a: 1}   # c\n", "{a: 1}"),
            ("k: []  # e\n", "[]"),
            ("k: {}  # e\n", "{}"),
            ("k: [a, # x\n  b ]  # y\n", "[a, # x\n  b ]"),
            ("k: {a: }  # z\n", "{a: }"),
            ("k: [[1], [2]]  # n\n", "[[1], [2]]"),
            ("k: [a, ]  # t\n", "[a, ]"),
            ("k: [\"é\", b]  # ü\n", "[\"é\", b]"),
            ("k: [a, b]", "[a, b]"),
        ] {
            let root = parse(text).unwrap().unwrap();
            let v = root.get("k").unwrap();
            assert_eq!(&text[v.start.offset..v.end.offset], want, "{text:?}");
            let line_start = text[..v.end.offset].rfind('\n').map_or(0, |i| i + 1);
            let col = text[line_start..v.end.offset].chars().count() + 1;
            assert_eq!(v.end.col as usize, col, "{text:?}");
        }
    }

    /// A block sequence's span starts at its first dash, however saphyr placed it: at the key's
    /// indentation, nested on one line, with an empty first item, or indented.
    #[test]
    fn a_block_sequence_starts_at_its_first_dash() {
        for (text, start, end) in [
            ("k:\n- a\n- b\n", 3, 10),
            ("k:\n-   a\n", 3, 8),
            ("k:\n- &x a\n", 3, 9),
            ("k:\n- - a\n", 3, 8),
            ("k:\n-\n  a\n", 3, 8),
            ("k:\n# c\n- a\n", 7, 10),
            ("k:\n  - a\n", 5, 8),
            ("k:\n  - - a\n", 5, 10),
        ] {
            let root = parse(text).unwrap().unwrap();
            let v = root.get("k").unwrap();
            assert_eq!((v.start.offset, v.end.offset), (start, end), "{text:?}");
            assert_eq!(text.as_bytes()[start], b'-', "{text:?}");
            let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
            assert_eq!(v.start.col as usize, start - line_start + 1, "{text:?}");
        }
        let root = parse("k:\n  - - a\n").unwrap().unwrap();
        let NodeKind::Seq(items) = &root.get("k").unwrap().kind else {
            panic!("not a sequence")
        };
        assert_eq!(
            items[0].start.offset, 7,
            "the inner sequence stays at its own dash"
        );
    }

    #[test]
    fn pyyaml_safe_loader_typing() {
        assert_eq!(t("1e-5"), Value::Str("1e-5".into()));
        assert_eq!(t("1.0e5"), Value::Str("1.0e5".into()));
        assert_eq!(t("1.0e-5"), Value::Float(1.0e-5));
        assert_eq!(t("1.0e+5"), Value::Float(1.0e5));
        assert_eq!(t("yes"), Value::Bool(true));
        assert_eq!(t("On"), Value::Bool(true));
        assert_eq!(t("off"), Value::Bool(false));
        assert_eq!(t("~"), Value::Null);
        assert_eq!(t(""), Value::Null);
        assert_eq!(t("0,3,4"), Value::Str("0,3,4".into()));
        assert_eq!(t("017"), Value::Int(15));
        assert_eq!(t("0o17"), Value::Str("0o17".into()));
        assert_eq!(t("1_000"), Value::Int(1000));
        assert_eq!(t("0x1F"), Value::Int(31));
        assert_eq!(t("1:30"), Value::Int(90));
        assert_eq!(t(".5"), Value::Float(0.5));
        assert_eq!(t("-.inf"), Value::Float(f64::NEG_INFINITY));
        assert_eq!(t("y"), Value::Str("y".into()));
        assert_eq!(t("TRUE"), Value::Bool(true));
        assert_eq!(t("tRUE"), Value::Str("tRUE".into()));
    }

    #[test]
    fn quoted_scalars_stay_strings_and_tags_apply() {
        let n = parse("a: \"1\"\nb: '1.0e-5'\nc: !!str 12\nd: !!float 3\n")
            .unwrap()
            .unwrap();
        assert_eq!(n.get("a").unwrap().typed(), Value::Str("1".into()));
        assert_eq!(n.get("b").unwrap().typed(), Value::Str("1.0e-5".into()));
        assert_eq!(n.get("c").unwrap().typed(), Value::Str("12".into()));
        assert_eq!(n.get("d").unwrap().typed(), Value::Float(3.0));
    }

    #[test]
    fn positions_are_one_based_and_quoted_end_excludes_comment() {
        let text = "top:\n  key: \"quoted\"   # c\n  n: 5\n";
        let n = parse(text).unwrap().unwrap();
        let v = n.get("top").unwrap().get("key").unwrap();
        assert_eq!((v.start.line, v.start.col), (2, 8));
        assert_eq!(&text[v.start.offset..v.end.offset], "\"quoted\"");
        let five = n.get("top").unwrap().get("n").unwrap();
        assert_eq!(&text[five.start.offset..five.end.offset], "5");
        assert_eq!((five.start.line, five.start.col), (3, 6));
    }

    #[test]
    fn multibyte_text_offsets_are_bytes() {
        let text = "# héllo ünïcode\na: \"é\"\nb: 2\n";
        let n = parse(text).unwrap().unwrap();
        let b = n.get("b").unwrap();
        assert_eq!(&text[b.start.offset..b.end.offset], "2");
        let a = n.get("a").unwrap();
        assert_eq!(&text[a.start.offset..a.end.offset], "\"é\"");
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let n = parse("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\nl: *b\n")
            .unwrap()
            .unwrap();
        let d = n.get("d").unwrap().typed();
        let Value::Map(m) = d else { panic!() };
        assert_eq!(m.get("x"), Some(&Value::Int(1)));
        assert_eq!(m.get("y"), Some(&Value::Int(3)));
        assert_eq!(n.get("l").unwrap().typed(), n.get("base").unwrap().typed());
    }

    /// What an alias copies counts against the nesting limit: anchors of aliases a few
    /// brackets deeper each overflowed the stack of every walk of the tree.
    #[test]
    fn aliases_nesting_past_the_limit_are_refused() {
        let (open, close) = ("[".repeat(100), "]".repeat(100));
        let ok = format!("a: &a {open}1{close}\nb: &b {open}*a{close}\n");
        assert!(parse(&ok).is_ok());
        let deep = format!("{ok}c: {open}*b{close}\n");
        let e = parse(&deep).unwrap_err();
        assert!(e.message.contains("deeper than 256"), "{e:?}");
        assert_eq!(e.line, 3);
    }

    #[test]
    fn more_nodes_than_the_cap_are_refused_where_the_cap_is_passed() {
        // The mapping, its key and the list are 3 nodes; `n` commas make n + 1 items.
        let under = format!("k: [{}1]\n", "1, ".repeat(MAX_NODES - 4));
        assert!(parse(&under).is_ok());
        let over = format!("k: [{}1]\n", "1, ".repeat(MAX_NODES - 3));
        let e = parse(&over).unwrap_err();
        assert!(e.message.contains("500,000 YAML nodes"), "{e:?}");
        assert_eq!((e.line, e.col as usize), (1, 5 + 3 * (MAX_NODES - 3)));
    }

    /// A merge of a large mapping costs its size, not its square; the last of a key repeated
    /// inside it counts, and explicit keys win.
    #[test]
    fn merging_a_large_mapping_keeps_pyyaml_order_and_precedence() {
        let keys: Vec<String> = (0..20_000).map(|i| format!("m{i}: {i}")).collect();
        let text = format!(
            "b: &b {{{}, m0: last}}\nm: {{<<: *b, m1: x}}\n",
            keys.join(", ")
        );
        let node = parse(&text).unwrap().unwrap();
        let m = node.get("m").unwrap().as_map().unwrap();
        assert_eq!(m.len(), 20_000);
        let key = |i: usize| m[i].0.key_string().unwrap();
        // m0's last value sits where its last occurrence is: after m19999.
        assert_eq!(
            (key(0), key(19_997), key(19_998), key(19_999)),
            ("m2".into(), "m19999".into(), "m0".into(), "m1".into())
        );
        assert_eq!(m[19_998].1.typed(), Value::Str("last".into()));
        assert_eq!(m[19_999].1.typed(), Value::Str("x".into()));
    }

    #[test]
    fn duplicate_keys_last_wins() {
        let n = parse("a: 1\na: 2\n").unwrap().unwrap();
        assert_eq!(n.get("a").unwrap().typed(), Value::Int(2));
    }

    #[test]
    fn duplicate_keys_are_found_at_every_depth_with_the_one_that_wins() {
        let text = "a: 1\nm:\n  x: 1\n  y: 2\n  x: 3\nl:\n  - {k: 1, k: 2}\na: 4\na: 5\n";
        let n = parse(text).unwrap().unwrap();
        let d: Vec<String> = duplicate_keys(&n)
            .into_iter()
            .map(|d| {
                format!(
                    "{} {}:{} -> {}:{}",
                    d.path, d.ignored.line, d.ignored.col, d.wins.line, d.wins.col
                )
            })
            .collect();
        assert_eq!(
            d,
            [
                "a 1:1 -> 9:1",
                "m.x 3:3 -> 5:3",
                "l[0].k 7:6 -> 7:12",
                "a 8:1 -> 9:1"
            ]
        );
        assert!(duplicate_keys(&parse("a: 1\nb: {a: 2}\n").unwrap().unwrap()).is_empty());
    }

    #[test]
    fn merged_keys_are_not_duplicates_and_the_last_of_a_repeated_one_counts() {
        // An explicit key overrides a merged one: no duplicate. A key repeated inside the
        // anchored mapping is one, and (as PyYAML constructs it) its last value is merged.
        let text = "base: &b {x: 1, x: 2, y: 1}\nd:\n  <<: *b\n  y: 3\nc: *b\n";
        let n = parse(text).unwrap().unwrap();
        let d = duplicate_keys(&n);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].path, "base.x");
        let Value::Map(m) = n.get("d").unwrap().typed() else {
            panic!()
        };
        assert_eq!(m.get("x"), Some(&Value::Int(2)));
        assert_eq!(m.get("y"), Some(&Value::Int(3)));
    }

    #[test]
    fn empty_and_errors() {
        assert!(parse("").unwrap().is_none());
        assert!(parse("# only a comment\n").unwrap().is_none());
        let e = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.line >= 1);
        let e = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.message.contains("single document"), "{e}");
    }

    #[test]
    fn positions_past_the_last_line_are_clamped_to_the_end_of_the_text() {
        // saphyr puts the empty value of an explicit key before a final comment on line 3.
        let doc = parse("? \n#").unwrap().expect("a document");
        let text_lines = 2;
        let mut stack = vec![&doc];
        while let Some(n) = stack.pop() {
            assert!(
                n.start.line >= 1 && n.start.line <= text_lines,
                "{:?}",
                n.start
            );
            assert!(n.end.line <= text_lines, "{:?}", n.end);
            if let NodeKind::Map(entries) = &n.kind {
                for (k, v) in entries {
                    assert!(k.start.line <= text_lines, "{:?}", k.start);
                    stack.push(v);
                }
            }
        }
    }

    #[test]
    fn what_pyyaml_refuses_is_refused_where_it_stands() {
        let e = parse("a: 1\nb: !!python/name:os.system ''\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 4));
        assert!(
            e.message.contains("!!python/name:os.system"),
            "{}",
            e.message
        );
        let e = parse("a: !!python/object:x {k: 1}\n").unwrap_err();
        assert!(e.message.contains("SafeLoader"), "{}", e.message);
        assert!(parse("a: !local 1\n").is_err());
        for ok in [
            "a: !!str 5\n",
            "a: !!int '5'\n",
            "a: ! 5\n",
            "a: !!set {x: null}\n",
        ] {
            assert!(parse(ok).is_ok(), "{ok}");
        }
        let e = parse("a: 1\nbé: x\u{1b}[31m\n").unwrap_err();
        assert_eq!((e.line, e.col), (2, 6));
        assert!(e.message.contains("#x1b"), "{}", e.message);
        assert!(
            parse("a: \"\\e[31m\"\n").is_ok(),
            "an escape in double quotes is fine"
        );
        assert!(parse("a: x\u{7f}\n").is_err());
        // NEL is a line break to PyYAML: `y` then stands at column 0 without a `:`.
        assert!(parse("a: x\u{85}y\n").is_err());
    }

    #[test]
    fn what_only_pyyaml_refuses_is_refused_too() {
        for (text, at, says) in [
            ("%YAML 2.0\n---\na: 1\n", (1, 1), "version 1.* is required"),
            ("a: &x 1\nb: &x 2\n", (2, 4), "duplicate anchor 'x'"),
            ("c:\n  <<: 1\n", (2, 7), "for merging"),
            ("c:\n  <<: [{x: 1}, 2]\n", (2, 16), "for merging"),
            ("a: !!int x\n", (1, 4), "int()"),
            ("a: 2001-13-14\n", (1, 4), "month must be in 1..12"),
            ("? [1, 2]\n: x\n", (1, 3), "unhashable key"),
            ("a: 1\t\n", (1, 5), "'\\t'"),
            ("a: !!seq x\n", (1, 4), "expected a sequence node"),
            ("a: &x!!str 1\n", (1, 4), "alphabetic or numeric"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!((e.line, e.col), at, "{text:?}: {e}");
            assert!(e.message.contains(says), "{text:?}: {e}");
        }
        for ok in [
            "a: 'x\ty'\n",
            "a: 1 # c\t\n",
            "a: 1\n\u{feff}b: 2\n",
            "? \n: a\n",
            "a: !<tag:yaml.org,2002:str> 1\n",
            "c:\n  !!merge <<: {y: 1}\n",
            "1: 2\n1: 3\n",
        ] {
            assert!(parse(ok).is_ok(), "{ok:?}: {:?}", parse(ok));
        }
        let t = parse("a: x\u{feff}y\n").unwrap().unwrap();
        assert_eq!(t.get("a").unwrap().typed(), Value::Str("x\u{feff}y".into()));
    }

    #[test]
    fn a_duplicated_block_counts_the_settings_it_drops() {
        let n = parse("modules:\n  t:\n    overrides:\n      a: 1\n      b: [1, 2]\n      c: {d: 1, e: 2}\nmodules:\n  t: {}\nx: 1\nx: 2\n")
            .unwrap()
            .unwrap();
        let d = duplicate_keys(&n);
        let modules = d.iter().find(|d| d.path == "modules").unwrap();
        assert_eq!(modules.dropped, 4);
        assert_eq!(d.iter().find(|d| d.path == "x").unwrap().dropped, 1);
    }
}
