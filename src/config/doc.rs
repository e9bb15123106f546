//! `YamlDoc`: comment- and layout-preserving edits of one YAML file, a unified diff of the
//! changes, and an atomic, conflict-checked save.
//!
//! Edits splice text at the exact byte ranges the parser reports, so every byte outside the
//! edited value (comments, blank lines, key order, quoting, anchors) stays as it was.

use super::yaml::{self, Node, NodeKind, Style};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{col}: YAML error: {message}", path.display())]
    Yaml {
        path: PathBuf,
        line: u32,
        col: u32,
        message: String,
    },
    #[error("{}:{line}: `{key}` holds a {what}, not a mapping, so `{full}` cannot be set inside it", path.display())]
    NotAMapping {
        path: PathBuf,
        line: u32,
        key: String,
        full: String,
        what: &'static str,
    },
    #[error("{}:{line}: `{key}` is a {what}; edit it by hand", path.display())]
    NotEditable {
        path: PathBuf,
        line: u32,
        key: String,
        what: &'static str,
    },
    /// The key holds a mapping (a section of keys): replacing it with one value would drop
    /// every key inside it.
    #[error(
        "{}:{line}: `{key}` is a section ({}: {}), not a value; set one of its keys, such as `{key}.{}=...`",
        path.display(),
        crate::util::text::count(keys.len(), "key", "keys"),
        keys.join(", "),
        keys.first().map_or("KEY", String::as_str)
    )]
    IsASection {
        path: PathBuf,
        line: u32,
        key: String,
        keys: Vec<String>,
    },
    #[error("{}: changed on disk since it was read; nothing was written (reload and redo the edit)", path.display())]
    Conflict { path: PathBuf },
    #[error("{}: cannot write: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What an edit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditKind {
    Replaced,
    Added,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edit {
    pub kind: EditKind,
    /// 1-based line of the new value in the edited text.
    pub line: u32,
}

#[derive(Debug, Clone)]
pub struct YamlDoc {
    path: PathBuf,
    original: String,
    text: String,
}

#[derive(Debug, Clone, Default)]
pub struct SaveOptions {
    /// Keep the content a save replaces in this folder (the workspace's, see
    /// [`super::backups`]): nothing is written beside the user's file. None: keep nothing.
    pub backups: Option<PathBuf>,
}

impl YamlDoc {
    pub fn open(path: &Path) -> Result<YamlDoc, EditError> {
        use std::io::Read;
        let io = |source| EditError::Io {
            path: path.to_path_buf(),
            source,
        };
        // A regular file only (a FIFO would block, a device never end); its size is the
        // resolver's to cap, which read it first with the session's cap.
        let mut file = crate::util::input::open_regular(path).map_err(|e| io(e.into()))?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(io)?;
        Ok(YamlDoc::from_text(path, text))
    }

    pub fn from_text(path: &Path, text: String) -> YamlDoc {
        YamlDoc {
            path: path.to_path_buf(),
            original: text.clone(),
            text,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Replaces the whole edited text (a restored version): saved as any edit is.
    pub fn set_text(&mut self, text: String) {
        self.text = text;
    }

    pub fn original(&self) -> &str {
        &self.original
    }

    pub fn is_modified(&self) -> bool {
        self.text != self.original
    }

    /// Drop unsaved edits.
    pub fn revert(&mut self) {
        self.text = self.original.clone();
    }

    fn parse(&self) -> Result<Node, EditError> {
        let err = |line, col, message| EditError::Yaml {
            path: self.path.clone(),
            line,
            col,
            message,
        };
        yaml::parse(&self.text)
            .map_err(|e| err(e.line, e.col, e.message))?
            .ok_or_else(|| err(1, 1, "the file holds no YAML document".into()))
    }

    /// The node at a key path, if present.
    pub fn node(&self, path: &[&str]) -> Option<Node> {
        let mut node = self.parse().ok()?;
        for seg in path {
            node = node.get(seg)?.clone();
        }
        Some(node)
    }

    /// Set the value at `path` (mapping keys from the root) to the YAML text `literal`.
    /// An existing value is replaced in place; a missing key is appended to its mapping with
    /// that mapping's indentation, creating missing parent mappings.
    pub fn set_literal(&mut self, path: &[&str], literal: &str) -> Result<Edit, EditError> {
        let root = self.parse()?;
        let step = indent_step(&root);
        let mut node = &root;
        for (i, seg) in path.iter().enumerate() {
            let last = i + 1 == path.len();
            if node.as_map().is_none() {
                return Err(self.not_a_mapping(path, i, node));
            }
            match node.entry(seg) {
                Some((k, v)) if last => return self.replace(k, v, seg, literal),
                Some((k, v)) => match &v.kind {
                    NodeKind::Map(_) => node = v,
                    NodeKind::Scalar(s) if s.text.is_empty() && s.style == Style::Plain => {
                        // `key:` with no value: open a block under it (not under an explicit
                        // `? key` with no `:` line, whose position is the next entry's).
                        self.colon_after(k, seg)?;
                        let indent = k.start.col as usize - 1 + step;
                        let at = self.line_end(k.end.offset);
                        let block = block_text(&path[i + 1..], literal, indent, step);
                        let line = self.line_of(at);
                        self.insert_at(at, &block);
                        return Ok(Edit {
                            kind: EditKind::Added,
                            line: line + path.len() as u32 - i as u32 - 1,
                        });
                    }
                    _ => return Err(self.not_a_mapping(path, i + 1, v)),
                },
                None => return self.insert_into(node, &path[i..], literal, step),
            }
        }
        Err(EditError::NotEditable {
            path: self.path.clone(),
            line: 1,
            key: String::new(),
            what: "empty key path",
        })
    }

    fn not_a_mapping(&self, path: &[&str], upto: usize, node: &Node) -> EditError {
        EditError::NotAMapping {
            path: self.path.clone(),
            line: node.start.line,
            key: path[..upto].join("."),
            full: path.join("."),
            what: kind_name(node),
        }
    }

    fn replace(
        &mut self,
        key: &Node,
        value: &Node,
        name: &str,
        literal: &str,
    ) -> Result<Edit, EditError> {
        if let NodeKind::Map(entries) = &value.kind {
            return Err(EditError::IsASection {
                path: self.path.clone(),
                line: key.start.line,
                key: name.to_string(),
                keys: entries
                    .iter()
                    .filter_map(|(k, _)| match &k.kind {
                        NodeKind::Scalar(s) => Some(s.text.clone()),
                        _ => None,
                    })
                    .collect(),
            });
        }
        if let NodeKind::Scalar(s) = &value.kind {
            if matches!(s.style, Style::Literal | Style::Folded) {
                return Err(EditError::NotEditable {
                    path: self.path.clone(),
                    line: value.start.line,
                    key: name.to_string(),
                    what: "block scalar (| or >)",
                });
            }
            if value.start.offset == value.end.offset {
                // `key:` with nothing after it: write the value after the colon.
                let colon = self.colon_after(key, name)?;
                self.insert_at(colon, &format!(" {literal}"));
                return Ok(Edit {
                    kind: EditKind::Replaced,
                    line: key.start.line,
                });
            }
        }
        let line_start = self.text[..value.start.offset]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        if matches!(value.kind, NodeKind::Seq(_))
            && !value.flow
            && value.start.line > key.end.line
            && self.text[line_start..value.start.offset].trim().is_empty()
        {
            // A block sequence on the lines below its key: the new value goes after the colon
            // (a scalar in the sequence's place, at the key's indentation, would not be the
            // key's value), and the sequence's lines go. Comments between the key and the
            // sequence, and one after its last item, stay.
            let colon = self.colon_after(key, name)?;
            let from = line_start;
            let rest = &self.text[value.end.offset..];
            let to = if rest.trim_start_matches([' ', '\t', '\r']).starts_with('\n') {
                value.end.offset + rest.find('\n').unwrap_or(0) + 1
            } else {
                value.end.offset
            };
            self.text.replace_range(from..to, "");
            self.insert_at(colon, &format!(" {literal}"));
            return Ok(Edit {
                kind: EditKind::Replaced,
                line: key.start.line,
            });
        }
        self.text
            .replace_range(value.start.offset..value.end.offset, literal);
        Ok(Edit {
            kind: EditKind::Replaced,
            line: value.start.line,
        })
    }

    /// Offset just past the `:` that follows `key`. An explicit key (`? key`) with no `:` line
    /// has none (the next colon is another entry's).
    fn colon_after(&self, key: &Node, name: &str) -> Result<usize, EditError> {
        let rest = &self.text[key.end.offset..];
        let gap = rest.len() - rest.trim_start().len();
        if !rest[gap..].starts_with(':') {
            return Err(EditError::NotEditable {
                path: self.path.clone(),
                line: key.start.line,
                key: name.to_string(),
                what: "explicit key (`?`) with no `:` value line",
            });
        }
        Ok(key.end.offset + gap + 1)
    }

    fn insert_into(
        &mut self,
        map: &Node,
        rest: &[&str],
        literal: &str,
        step: usize,
    ) -> Result<Edit, EditError> {
        if map.flow {
            let close = map.end.offset.saturating_sub(1);
            if self.text.as_bytes().get(close) != Some(&b'}') {
                return Err(EditError::NotEditable {
                    path: self.path.clone(),
                    line: map.start.line,
                    key: rest[0].to_string(),
                    what: "flow mapping this editor cannot extend",
                });
            }
            let empty = map.as_map().is_some_and(<[_]>::is_empty);
            let entry = format!(
                "{}: {}",
                key_text(rest[0]),
                flow_nested(&rest[1..], literal)
            );
            let text = if empty { entry } else { format!(", {entry}") };
            self.insert_at(close, &text);
            return Ok(Edit {
                kind: EditKind::Added,
                line: map.end.line,
            });
        }
        let indent = map
            .as_map()
            .and_then(|m| m.first())
            .map_or(0, |(k, _)| self.entry_indent(k));
        let last_byte = map.end.offset.saturating_sub(1).max(map.start.offset);
        let at = self.line_end(last_byte);
        let line = self.line_of(at);
        let block = block_text(rest, literal, indent, step);
        self.insert_at(at, &block);
        Ok(Edit {
            kind: EditKind::Added,
            line: line + rest.len() as u32 - 1,
        })
    }

    /// The indentation of the mapping entry whose key is `key`: the key's column, or for an
    /// explicit key (`? key`, the key itself further right) the `?`'s.
    fn entry_indent(&self, key: &Node) -> usize {
        let line_start = self.text[..key.start.offset]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let prefix = &self.text[line_start..key.start.offset];
        let lead = prefix.len() - prefix.trim_start_matches([' ', '\t']).len();
        if prefix[lead..].starts_with('?') {
            lead
        } else {
            key.start.col as usize - 1
        }
    }

    /// Offset just past the newline ending the line that holds `offset` (end of text if none;
    /// a newline is added there first when the text does not end with one).
    ///
    /// `offset` may fall inside a multi-byte character (the byte before a mapping's end, when
    /// its last value ends in one): the search is over bytes, and a newline byte never occurs
    /// inside a UTF-8 character, so the offset returned is always a character boundary.
    fn line_end(&mut self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        match self.text.as_bytes()[offset..]
            .iter()
            .position(|&b| b == b'\n')
        {
            Some(i) => offset + i + 1,
            None => {
                self.text.push('\n');
                self.text.len()
            }
        }
    }

    /// 1-based line number of a byte offset.
    fn line_of(&self, offset: usize) -> u32 {
        self.text[..offset].matches('\n').count() as u32 + 1
    }

    fn insert_at(&mut self, offset: usize, s: &str) {
        self.text.insert_str(offset, s);
    }

    /// A unified diff of the unsaved edits, with `a/` and `b/` headers.
    pub fn diff(&self) -> String {
        let cwd = std::env::current_dir().unwrap_or_default();
        let rel = self.path.strip_prefix(&cwd).unwrap_or(&self.path);
        let name = rel.display().to_string();
        let name = name.trim_start_matches('/');
        similar::TextDiff::from_lines(&self.original, &self.text)
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{name}"), &format!("b/{name}"))
            .to_string()
    }

    /// Save the edited text ([`super::save`]): under the folder's lock, refuse if the file
    /// changed on disk since it was read, keep the replaced version when asked (in the
    /// workspace: [`super::backups`]), and rename a synced temp file over the original
    /// (keeping its permissions). A symlink is edited through: the file it points to is
    /// replaced and the link stays. Returns the kept version's path.
    pub fn save(&mut self, opts: SaveOptions) -> Result<Option<PathBuf>, EditError> {
        let read_err = |source| EditError::Io {
            path: self.path.clone(),
            source,
        };
        let target = super::save::target_of(&self.path).map_err(read_err)?;
        let werr = |source| EditError::Write {
            path: target.clone(),
            source,
        };
        let dir = super::save::folder_of(&target);
        let lock = super::save::lock_dir(dir).map_err(werr)?;
        super::save::clean_stale(dir, &lock);
        let (current, seen) = super::save::read_seen(&target).map_err(read_err)?;
        if current != self.original {
            return Err(EditError::Conflict {
                path: self.path.clone(),
            });
        }
        let perms = std::fs::metadata(&target).ok().map(|m| m.permissions());
        let backup = match &opts.backups {
            Some(dir) => {
                let kept = super::backups::keep(dir, &target, self.original.as_bytes()).map_err(
                    |source| EditError::Write {
                        path: dir.clone(),
                        source,
                    },
                )?;
                Some(kept)
            }
            None => None,
        };
        let checked = (seen, self.original.as_bytes());
        super::save::replace_checked(&target, self.text.as_bytes(), perms, &lock, checked)
            .map_err(|e| match e {
                super::save::Refused::Changed => EditError::Conflict {
                    path: self.path.clone(),
                },
                super::save::Refused::Io(source) => werr(source),
            })?;
        self.original = self.text.clone();
        Ok(backup)
    }
}

fn kind_name(n: &Node) -> &'static str {
    match &n.kind {
        NodeKind::Scalar(_) => "scalar",
        NodeKind::Seq(_) => "list",
        NodeKind::Map(_) => "mapping",
    }
}

fn key_text(k: &str) -> String {
    super::literal::render_str(k, None, true)
}

/// `key: value` lines for a (possibly nested) key path, indented.
fn block_text(path: &[&str], literal: &str, indent: usize, step: usize) -> String {
    let pad = " ".repeat(indent);
    match path {
        [] => String::new(),
        [k] => format!("{pad}{}: {literal}\n", key_text(k)),
        [k, rest @ ..] => format!(
            "{pad}{}:\n{}",
            key_text(k),
            block_text(rest, literal, indent + step, step)
        ),
    }
}

fn flow_nested(path: &[&str], literal: &str) -> String {
    match path {
        [] => literal.to_string(),
        [k, rest @ ..] => format!("{{{}: {}}}", key_text(k), flow_nested(rest, literal)),
    }
}

/// The file's indentation step: the column difference between the first block mapping and its
/// first nested block mapping (2 when the file has none).
fn indent_step(root: &Node) -> usize {
    fn find(n: &Node) -> Option<usize> {
        let entries = n.as_map()?;
        for (k, v) in entries {
            if let Some(inner) = v.as_map()
                && !v.flow
                && let Some((ik, _)) = inner.first()
                && ik.start.col > k.start.col
            {
                return Some((ik.start.col - k.start.col) as usize);
            }
        }
        None
    }
    find(root).unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Value;

    const EXP: &str = "\
# header comment
work_group: ${PRIMUS_TEAM:amd}
modules:
  pre_trainer:
    framework: megatron
    overrides:
      # log
      stderr_sink_level: DEBUG   # keep

      micro_batch_size: 4 # per GPU
      lr: 1.0e-5
      cross_entropy_fusion_impl: \"te\"
      training:
        steps: 10
      empty:
# trailing comment
";

    fn doc() -> YamlDoc {
        YamlDoc::from_text(Path::new("exp.yaml"), EXP.to_string())
    }

    fn only_changed_lines(before: &str, after: &str) -> (Vec<String>, Vec<String>) {
        let d = similar::TextDiff::from_lines(before, after);
        let mut del = Vec::new();
        let mut ins = Vec::new();
        for c in d.iter_all_changes() {
            match c.tag() {
                similar::ChangeTag::Delete => del.push(c.value().to_string()),
                similar::ChangeTag::Insert => ins.push(c.value().to_string()),
                similar::ChangeTag::Equal => {}
            }
        }
        (del, ins)
    }

    #[test]
    fn replace_keeps_comments_on_the_line() {
        let mut d = doc();
        let e = d
            .set_literal(
                &["modules", "pre_trainer", "overrides", "micro_batch_size"],
                "8",
            )
            .unwrap();
        assert_eq!(
            e,
            Edit {
                kind: EditKind::Replaced,
                line: 10
            }
        );
        let (del, ins) = only_changed_lines(EXP, d.text());
        assert_eq!(del, vec!["      micro_batch_size: 4 # per GPU\n"]);
        assert_eq!(ins, vec!["      micro_batch_size: 8 # per GPU\n"]);
    }

    #[test]
    fn add_goes_to_the_end_of_the_mapping_with_its_indent() {
        let mut d = doc();
        let e = d
            .set_literal(
                &["modules", "pre_trainer", "overrides", "use_turbo_deepep"],
                "true",
            )
            .unwrap();
        assert_eq!(e.kind, EditKind::Added);
        let (del, ins) = only_changed_lines(EXP, d.text());
        assert!(del.is_empty());
        assert_eq!(ins, vec!["      use_turbo_deepep: true\n"]);
        let n = d
            .node(&["modules", "pre_trainer", "overrides", "use_turbo_deepep"])
            .unwrap();
        assert_eq!(n.start.line, e.line);
        // The trailing comment is still last.
        assert!(d.text().ends_with("# trailing comment\n"));
    }

    /// Found by `loader_fuzz`: a mapping whose last value ends in a multi-byte character (a
    /// snowman, with or without a newline after it) panicked the editor on a slice inside the
    /// character. The key is now added on the next line.
    #[test]
    fn a_key_is_added_after_a_value_ending_in_a_multibyte_character() {
        for text in [
            "a: 1\nname: snow☃",
            "a: 1\nname: snow☃\n",
            "top:\n  name: ☃☃\n",
        ] {
            let mut d = YamlDoc::from_text(Path::new("x.yaml"), text.to_string());
            let path: &[&str] = if text.starts_with("top") {
                &["top", "micro_batch_size"]
            } else {
                &["micro_batch_size"]
            };
            let e = d.set_literal(path, "3").unwrap();
            assert_eq!(e.kind, EditKind::Added, "{text:?}");
            assert!(d.text().starts_with(text.trim_end()), "{:?}", d.text());
            assert!(d.text().contains("micro_batch_size: 3\n"), "{:?}", d.text());
            assert!(d.text().contains("☃\n"), "{:?}", d.text());
        }
    }

    /// Found by `loader_fuzz` (clean-clone CI of 34e7f33): setting a key whose value is a block
    /// sequence written at the key's own indentation replaced only the first item's text and
    /// left the dash (`extends:` / `- 3`, read back as a list). The value now goes after the
    /// colon and the sequence's lines go, keeping the comments around it.
    #[test]
    fn a_block_sequence_value_is_replaced_whole() {
        for (text, want) in [
            (
                "extends:\n- tokenizer_model: meta-llama/Llam",
                "extends: 3\n",
            ),
            ("k:\n- a\n- b\nz: 1\n", "k: 3\nz: 1\n"),
            ("k:\n  - a\n  - b\nz: 1\n", "k: 3\nz: 1\n"),
            ("k:\n- - a\n", "k: 3\n"),
            ("k:\n-\n  a\n", "k: 3\n"),
            (
                "k:  # why\n# note\n- a\n- b  # last\nz: 1\n",
                "k: 3  # why\n# note\n  # last\nz: 1\n",
            ),
            ("top:\n  k:\n  - a\n  z: 1\n", "top:\n  k: 3\n  z: 1\n"),
            ("k: [1, 2]\n", "k: 3\n"),
            ("k:\r\n- a\r\n- b\r\nz: 1\r\n", "k: 3\r\nz: 1\r\n"),
        ] {
            let mut d = YamlDoc::from_text(Path::new("x.yaml"), text.to_string());
            let path: &[&str] = if text.starts_with("top") {
                &["top", "k"]
            } else {
                &[text.split(':').next().unwrap()]
            };
            let e = d.set_literal(path, "3").unwrap();
            assert_eq!(
                (e.kind, e.line),
                (EditKind::Replaced, path.len() as u32),
                "{text:?}"
            );
            assert_eq!(d.text(), want, "{text:?}");
            let root = yaml::parse(d.text()).unwrap().unwrap();
            let got = path.iter().try_fold(&root, |n, s| n.get(s));
            assert_eq!(got.map(Node::typed), Some(Value::Int(3)), "{text:?}");
        }
    }

    /// Found as a user on AMD's TorchTitan experiment (`components: ["model", "loss"]     #
    /// ["model", "loss"]`): replacing a flow list dropped the comment after it, and a flow
    /// mapping with a comment after it could not be extended. Both keep the comment now.
    #[test]
    fn a_flow_value_is_replaced_and_extended_keeping_its_comment() {
        let text = "c:\n  components: [\"model\", \"loss\"]     # [\"model\", \"loss\"]\n  m: {a: 1}  # keep\n";
        let mut d = YamlDoc::from_text(Path::new("x.yaml"), text.to_string());
        d.set_literal(&["c", "components"], "[model]").unwrap();
        d.set_literal(&["c", "m", "b"], "2").unwrap();
        assert_eq!(
            d.text(),
            "c:\n  components: [model]     # [\"model\", \"loss\"]\n  m: {a: 1, b: 2}  # keep\n"
        );
    }

    /// Found by `loader_fuzz`: under an explicit key with nothing after it (`? ` then the next
    /// entry), a nested key was added under the next entry's line, breaking the file. It is
    /// refused now, as setting that key itself already was.
    #[test]
    fn nothing_is_added_under_an_explicit_key_without_a_value_line() {
        let text = "? \nextends: [x]\n";
        let mut d = YamlDoc::from_text(Path::new("x.yaml"), text.to_string());
        let e = d
            .set_literal(&["None", "micro_batch_size"], "3")
            .unwrap_err();
        assert!(matches!(e, EditError::NotEditable { .. }), "{e:?}");
        assert_eq!(d.text(), text);
    }

    /// Found by `loader_fuzz`: a key added to a mapping whose first entry is an explicit key
    /// (`? - a`, the key a sequence) took the sequence's column, not the `?`'s, and broke the
    /// file. A list as a key is refused now, as PyYAML refuses it; an explicit scalar key's
    /// entry still sets the indentation.
    #[test]
    fn a_key_added_after_an_explicit_key_takes_the_entrys_indentation() {
        let text = "extends:\n ?  - llama3_8B.y72\n";
        let mut d = YamlDoc::from_text(Path::new("x.yaml"), text.to_string());
        assert!(
            d.set_literal(&["extends", "micro_batch_size"], "3")
                .is_err()
        );
        assert_eq!(d.text(), text);
        let text = "extends:\n ?  llama3_8B.y72\n";
        let mut d = YamlDoc::from_text(Path::new("x.yaml"), text.to_string());
        d.set_literal(&["extends", "micro_batch_size"], "3")
            .unwrap();
        assert_eq!(
            d.text(),
            "extends:\n ?  llama3_8B.y72\n micro_batch_size: 3\n"
        );
        let root = yaml::parse(d.text()).unwrap().unwrap();
        let v = root.get("extends").and_then(|e| e.get("micro_batch_size"));
        assert_eq!(v.map(Node::typed), Some(crate::config::Value::Int(3)));
    }

    #[test]
    fn nested_sections_are_created_or_extended() {
        let mut d = doc();
        d.set_literal(
            &["modules", "pre_trainer", "overrides", "training", "seq_len"],
            "4096",
        )
        .unwrap();
        let (_, ins) = only_changed_lines(EXP, d.text());
        assert_eq!(ins, vec!["        seq_len: 4096\n"]);
        let mut d = doc();
        d.set_literal(
            &[
                "modules",
                "pre_trainer",
                "overrides",
                "parallelism",
                "tensor_parallel_degree",
            ],
            "2",
        )
        .unwrap();
        let (_, ins) = only_changed_lines(EXP, d.text());
        assert_eq!(
            ins,
            vec![
                "      parallelism:\n",
                "        tensor_parallel_degree: 2\n"
            ]
        );
    }

    #[test]
    fn an_explicit_key_without_a_value_line_is_refused_and_the_next_entry_kept() {
        // Found by loader_fuzz: the empty value of `?` was written after the next entry's
        // colon, turning `sink_level: null` into the string `3 null`.
        for text in ["? \nsink_level: null\n", "?\n\nsink_level: null\n"] {
            let mut d = YamlDoc::from_text(Path::new("/x/exp.yaml"), text.to_string());
            let e = d.set_literal(&["None"], "3").unwrap_err();
            assert!(e.to_string().contains("explicit key"), "{e}");
            assert_eq!(d.text(), text);
        }
        // With its `:` line, an explicit key's empty value is filled.
        let mut d = YamlDoc::from_text(Path::new("/x/exp.yaml"), "? a\n:\nb: 1\n".into());
        d.set_literal(&["a"], "3").unwrap();
        assert_eq!(d.text(), "? a\n: 3\nb: 1\n");
        // A plain `key:` still gets its value after the colon.
        let mut d = YamlDoc::from_text(Path::new("/x/exp.yaml"), "a:\nb: 1\n".into());
        d.set_literal(&["a"], "3").unwrap();
        assert_eq!(d.text(), "a: 3\nb: 1\n");
    }

    #[test]
    fn a_key_holding_a_section_is_refused_with_its_keys_and_the_text_kept() {
        // `set training=3` on a TorchTitan experiment replaced its five keys with `3` (and
        // kept the last one's comment after it).
        let text = "training:\n  local_batch_size: 8\n  steps: 15   # short\nother: 1\n";
        let mut d = YamlDoc::from_text(Path::new("/x/exp.yaml"), text.to_string());
        let e = d.set_literal(&["training"], "3").unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with(
                "/x/exp.yaml:1: `training` is a section (2 keys: local_batch_size, steps)"
            ),
            "{m}"
        );
        assert!(m.contains("such as `training.local_batch_size=...`"), "{m}");
        assert_eq!(d.text(), text);
        // A flow mapping too; its keys are still set one by one.
        let text = "training: {local_batch_size: 8}\n";
        let mut d = YamlDoc::from_text(Path::new("/x/exp.yaml"), text.to_string());
        assert!(d.set_literal(&["training"], "3").is_err());
        assert_eq!(d.text(), text);
        d.set_literal(&["training", "local_batch_size"], "4")
            .unwrap();
        assert_eq!(d.text(), "training: {local_batch_size: 4}\n");
    }

    #[test]
    fn empty_values_and_quoted_values() {
        let mut d = doc();
        d.set_literal(&["modules", "pre_trainer", "overrides", "empty"], "3")
            .unwrap();
        assert!(d.text().contains("      empty: 3\n"));
        let mut d = doc();
        d.set_literal(
            &[
                "modules",
                "pre_trainer",
                "overrides",
                "cross_entropy_fusion_impl",
            ],
            "\"native\"",
        )
        .unwrap();
        assert!(d.text().contains("cross_entropy_fusion_impl: \"native\"\n"));
        let mut d = doc();
        d.set_literal(&["modules", "pre_trainer", "overrides", "empty", "x"], "1")
            .unwrap();
        assert!(
            d.text().contains("      empty:\n        x: 1\n"),
            "{}",
            d.text()
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let mut d = doc();
        let e = d
            .set_literal(&["modules", "pre_trainer", "framework", "x"], "1")
            .unwrap_err();
        assert!(matches!(e, EditError::NotAMapping { .. }), "{e}");
        let mut d = YamlDoc::from_text(Path::new("b.yaml"), "a: |\n  text\n".into());
        assert!(matches!(
            d.set_literal(&["a"], "1"),
            Err(EditError::NotEditable { .. })
        ));
    }

    #[test]
    fn flow_mappings_and_missing_final_newline() {
        let mut d = YamlDoc::from_text(Path::new("f.yaml"), "o: {a: 1}\nz: {}".into());
        d.set_literal(&["o", "b"], "2").unwrap();
        d.set_literal(&["z", "c"], "3").unwrap();
        assert_eq!(d.text(), "o: {a: 1, b: 2}\nz: {c: 3}");
        let mut d = YamlDoc::from_text(Path::new("f.yaml"), "m:\n  a: 1".into());
        d.set_literal(&["m", "b"], "2").unwrap();
        assert_eq!(d.text(), "m:\n  a: 1\n  b: 2\n");
    }

    #[test]
    fn save_is_atomic_keeps_backup_and_refuses_conflicts() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("exp.yaml");
        std::fs::write(&p, EXP).unwrap();
        let mut d = YamlDoc::open(&p).unwrap();
        d.set_literal(&["modules", "pre_trainer", "overrides", "lr"], "2.0e-05")
            .unwrap();
        let ws = tempfile::tempdir().unwrap();
        let keep = SaveOptions {
            backups: Some(ws.path().join("b")),
        };
        let bak = d.save(keep).unwrap().unwrap();
        assert!(bak.starts_with(ws.path()), "kept in the workspace: {bak:?}");
        assert_eq!(std::fs::read_to_string(&bak).unwrap(), EXP);
        assert!(
            std::fs::read_to_string(&p)
                .unwrap()
                .contains("lr: 2.0e-05\n")
        );
        // Someone else writes the file: our next save must refuse and change nothing.
        d.set_literal(&["modules", "pre_trainer", "overrides", "lr"], "3.0e-05")
            .unwrap();
        std::fs::write(&p, "work_group: x\n").unwrap();
        assert!(matches!(
            d.save(SaveOptions::default()),
            Err(EditError::Conflict { .. })
        ));
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "work_group: x\n");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_symlinked_experiment_is_edited_through_the_link() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("real")).unwrap();
        let real = dir.path().join("real/exp.yaml");
        std::fs::write(&real, EXP).unwrap();
        let link = dir.path().join("exp.yaml");
        std::os::unix::fs::symlink("real/exp.yaml", &link).unwrap();
        let mut d = YamlDoc::open(&link).unwrap();
        d.set_literal(&["modules", "pre_trainer", "overrides", "lr"], "2.0e-05")
            .unwrap();
        let ws = tempfile::tempdir().unwrap();
        let bak = d
            .save(SaveOptions {
                backups: Some(ws.path().join("b")),
            })
            .unwrap()
            .unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::read_to_string(&real)
                .unwrap()
                .contains("lr: 2.0e-05\n")
        );
        assert_eq!(
            crate::config::backups::source_of(bak.parent().unwrap()),
            Some(std::fs::canonicalize(&real).unwrap()),
            "the versions are the real file's"
        );
        assert_eq!(std::fs::read_to_string(&bak).unwrap(), EXP);
    }

    #[test]
    fn a_save_removes_temp_files_a_killed_save_left() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("exp.yaml");
        std::fs::write(&p, EXP).unwrap();
        std::fs::write(dir.path().join(".primus-tune-killed.tmp"), "half").unwrap();
        let mut d = YamlDoc::open(&p).unwrap();
        d.set_literal(&["modules", "pre_trainer", "overrides", "lr"], "2.0e-05")
            .unwrap();
        d.save(SaveOptions::default()).unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["exp.yaml"]);
    }
}
