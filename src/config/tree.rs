//! The resolved configuration tree: every value with where it came from and what it replaced.

use super::yaml::Style;
use crate::domain::value::Value;
use indexmap::IndexMap;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which layer of Primus' merge order a value came from (lowest to highest priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layer {
    ModulePreset,
    ModelPreset,
    Experiment,
    CommandLine,
    /// Set by one of Primus' `build_args` patches after every layer (the file is the patch's,
    /// relative to Primus' tree).
    Patch,
}

impl Layer {
    pub fn label(self) -> &'static str {
        match self {
            Layer::ModulePreset => "module preset",
            Layer::ModelPreset => "model preset",
            Layer::Experiment => "experiment",
            Layer::CommandLine => "command line",
            Layer::Patch => "Primus patch",
        }
    }
}

/// Where a value was written: file, 1-based line and column, and the `extends` chain that
/// brought the file in (outermost first).
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub file: Arc<Path>,
    pub line: u32,
    pub column: u32,
    pub via: Vec<Arc<Path>>,
    pub layer: Layer,
}

impl Origin {
    pub fn command_line() -> Self {
        Origin {
            file: Arc::from(Path::new("<command line>")),
            line: 0,
            column: 0,
            via: Vec::new(),
            layer: Layer::CommandLine,
        }
    }

    /// `primus_turbo.yaml:12 via pre_trainer.yaml → trainer_base.yaml`
    pub fn describe(&self) -> String {
        if self.layer == Layer::CommandLine {
            return "command line".into();
        }
        if self.layer == Layer::Patch {
            return format!("Primus patch {}:{}", file_name(&self.file), self.line);
        }
        let mut s = format!("{}:{}", file_name(&self.file), self.line);
        if !self.via.is_empty() {
            let chain: Vec<String> = self.via.iter().map(|p| file_name(p)).collect();
            s.push_str(" via ");
            s.push_str(&chain.join(" → "));
        }
        s
    }

    /// `path:line:col` with the path relative to `base` where it lies below it.
    pub fn location(&self, base: &Path) -> String {
        format!(
            "{}:{}:{}",
            relative(&self.file, base).display(),
            self.line,
            self.column
        )
    }
}

pub fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

pub fn relative(p: &Path, base: &Path) -> PathBuf {
    p.strip_prefix(base)
        .map(Path::to_path_buf)
        .unwrap_or_else(|_| p.to_path_buf())
}

/// The scalar as it is written in its file.
#[derive(Debug, Clone, PartialEq)]
pub struct RawScalar {
    pub text: String,
    pub style: Style,
}

/// A definition that a later layer or file replaced.
#[derive(Debug, Clone, PartialEq)]
pub struct Shadow {
    pub value: Value,
    pub origin: Origin,
}

/// A non-mapping value (scalars and lists; lists are replaced whole when merged).
#[derive(Debug, Clone, PartialEq)]
pub struct Leaf {
    pub value: Value,
    pub origin: Origin,
    /// The scalar as written (absent for lists).
    pub raw: Option<RawScalar>,
    /// The `${VAR:default}` text when environment substitution produced the value.
    pub template: Option<String>,
    /// Earlier definitions this one replaced, oldest first.
    pub shadowed: Vec<Shadow>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Leaf(Leaf),
    Map(Tree),
}

impl Item {
    pub fn origin(&self) -> &Origin {
        match self {
            Item::Leaf(l) => &l.origin,
            Item::Map(t) => &t.origin,
        }
    }

    pub fn value(&self) -> Value {
        match self {
            Item::Leaf(l) => l.value.clone(),
            Item::Map(t) => t.to_value(),
        }
    }

    fn shadowed_mut(&mut self) -> &mut Vec<Shadow> {
        match self {
            Item::Leaf(l) => &mut l.shadowed,
            Item::Map(t) => &mut t.shadowed,
        }
    }

    fn prepend_via(&mut self, file: &Arc<Path>) {
        match self {
            Item::Leaf(l) => {
                l.origin.via.insert(0, file.clone());
                for s in &mut l.shadowed {
                    s.origin.via.insert(0, file.clone());
                }
            }
            Item::Map(t) => t.prepend_via(file),
        }
    }
}

/// A mapping, in Python dict order (keys keep their first position; new keys append).
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    pub entries: IndexMap<String, Item>,
    pub origin: Origin,
    pub shadowed: Vec<Shadow>,
}

/// Where a definition was written: its file, line, column and layer (the `extends` chain that
/// brought it in aside).
type Site = (Arc<Path>, u32, u32, Layer);

fn site(s: &Shadow) -> Site {
    let o = &s.origin;
    (o.file.clone(), o.line, o.column, o.layer)
}

/// Append to `history` the definitions of `more` written where none of it was: a file that
/// two presets extend (a diamond) brings its definitions in by both, and listing each once
/// keeps the history as long as the number of places the key is written, where listing every
/// path to them grew exponentially with the chain's length.
fn append_sites(history: &mut Vec<Shadow>, more: impl Iterator<Item = Shadow>) {
    let mut seen: std::collections::HashSet<Site> = history.iter().map(site).collect();
    for s in more {
        if seen.insert(site(&s)) {
            history.push(s);
        }
    }
}

impl Tree {
    pub fn new(origin: Origin) -> Self {
        Tree {
            entries: IndexMap::new(),
            origin,
            shadowed: Vec::new(),
        }
    }

    /// Primus' `deep_merge(self, over)`: `over` wins, dicts merge recursively, everything else
    /// (lists included) is replaced whole. The replaced definition is remembered.
    pub fn merge(&mut self, over: Tree) {
        for (key, item) in over.entries {
            match (self.entries.get_mut(&key), item) {
                (Some(Item::Map(base)), Item::Map(o)) => base.merge(o),
                (Some(old), mut new) => {
                    let mut history = std::mem::take(old.shadowed_mut());
                    let replaced = Shadow {
                        value: old.value(),
                        origin: old.origin().clone(),
                    };
                    let later = std::mem::take(new.shadowed_mut());
                    // The common case, one value replaced, without building a set.
                    let at = site(&replaced);
                    if later.is_empty() && !history.iter().any(|h| site(h) == at) {
                        history.push(replaced);
                    } else {
                        append_sites(&mut history, std::iter::once(replaced).chain(later));
                    }
                    *new.shadowed_mut() = history;
                    *old = new;
                }
                (None, new) => {
                    self.entries.insert(key, new);
                }
            }
        }
    }

    pub fn prepend_via(&mut self, file: &Arc<Path>) {
        self.origin.via.insert(0, file.clone());
        for s in &mut self.shadowed {
            s.origin.via.insert(0, file.clone());
        }
        for item in self.entries.values_mut() {
            item.prepend_via(file);
        }
    }

    /// Look up a key; dotted keys descend into nested sections (`training.steps`).
    pub fn get(&self, key: &str) -> Option<&Item> {
        if let Some(i) = self.entries.get(key) {
            return Some(i);
        }
        let (head, rest) = key.split_once('.')?;
        match self.entries.get(head)? {
            Item::Map(t) => t.get(rest),
            Item::Leaf(_) => None,
        }
    }

    pub fn leaf(&self, key: &str) -> Option<&Leaf> {
        match self.get(key)? {
            Item::Leaf(l) => Some(l),
            Item::Map(_) => None,
        }
    }

    /// Every leaf with its dotted key, in order.
    pub fn leaves(&self) -> Vec<(String, &Leaf)> {
        let mut out = Vec::new();
        self.collect_leaves("", &mut out);
        out
    }

    fn collect_leaves<'a>(&'a self, prefix: &str, out: &mut Vec<(String, &'a Leaf)>) {
        for (k, item) in &self.entries {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match item {
                Item::Leaf(l) => out.push((key, l)),
                Item::Map(t) if t.entries.is_empty() => {}
                Item::Map(t) => t.collect_leaves(&key, out),
            }
        }
    }

    pub fn to_value(&self) -> Value {
        Value::Map(
            self.entries
                .iter()
                .map(|(k, v)| (k.clone(), v.value()))
                .collect(),
        )
    }

    /// Build a nested tree holding `value` at dotted `key`, every node from `origin`.
    pub fn singleton(key: &str, value: Value, origin: Origin) -> Tree {
        let mut parts: Vec<&str> = key.split('.').collect();
        let last = parts.pop().unwrap_or(key);
        let mut tree = Tree::new(origin.clone());
        tree.entries.insert(
            last.to_string(),
            Item::Leaf(Leaf {
                value,
                origin: origin.clone(),
                raw: None,
                template: None,
                shadowed: Vec::new(),
            }),
        );
        for part in parts.into_iter().rev() {
            let mut parent = Tree::new(origin.clone());
            parent.entries.insert(part.to_string(), Item::Map(tree));
            tree = parent;
        }
        tree
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(file: &str, line: u32) -> Origin {
        Origin {
            file: Arc::from(Path::new(file)),
            line,
            column: 1,
            via: Vec::new(),
            layer: Layer::ModulePreset,
        }
    }

    #[test]
    fn merge_replaces_lists_merges_dicts_and_keeps_history() {
        let mut base = Tree::singleton("a.b", Value::Int(1), origin("base.yaml", 3));
        base.merge(Tree::singleton(
            "l",
            Value::List(vec![Value::Int(1), Value::Int(2)]),
            origin("base.yaml", 4),
        ));
        let mut over = Tree::singleton("a.c", Value::Int(2), origin("over.yaml", 1));
        over.merge(Tree::singleton(
            "l",
            Value::List(vec![Value::Int(9)]),
            origin("over.yaml", 2),
        ));
        over.merge(Tree::singleton(
            "a.b",
            Value::Int(5),
            origin("over.yaml", 7),
        ));
        base.merge(over);
        assert_eq!(base.leaf("a.c").unwrap().value, Value::Int(2));
        let b = base.leaf("a.b").unwrap();
        assert_eq!(b.value, Value::Int(5));
        assert_eq!(b.shadowed.len(), 1);
        assert_eq!(b.shadowed[0].value, Value::Int(1));
        assert_eq!(b.shadowed[0].origin.line, 3);
        assert_eq!(
            base.leaf("l").unwrap().value,
            Value::List(vec![Value::Int(9)])
        );
        let keys: Vec<String> = base.leaves().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec!["a.b", "a.c", "l"]);
    }

    /// A file two presets extend (a diamond) brings its definition in twice: the history lists
    /// each place a key is written once, so it grows with the files, not the paths to them.
    #[test]
    fn a_definition_reached_by_two_paths_is_in_the_history_once() {
        let shared = || Tree::singleton("k", Value::Int(0), origin("base.yaml", 1));
        let via = |file: &str, line: u32| {
            let mut t = shared();
            t.merge(Tree::singleton("k", Value::Int(1), origin(file, line)));
            t
        };
        let mut top = via("left.yaml", 2);
        top.merge(via("right.yaml", 3));
        let lines: Vec<(String, u32)> = top
            .leaf("k")
            .unwrap()
            .shadowed
            .iter()
            .map(|s| (file_name(&s.origin.file), s.origin.line))
            .collect();
        assert_eq!(
            lines,
            [("base.yaml".into(), 1), ("left.yaml".into(), 2)],
            "base.yaml:1 once, though both chains bring it"
        );
        assert_eq!(top.leaf("k").unwrap().origin.line, 3);
    }

    #[test]
    fn describe_names_the_chain() {
        let mut o = origin("/r/primus_turbo.yaml", 12);
        o.via = vec![
            Arc::from(Path::new("/r/pre_trainer.yaml")),
            Arc::from(Path::new("/r/trainer_base.yaml")),
        ];
        assert_eq!(
            o.describe(),
            "primus_turbo.yaml:12 via pre_trainer.yaml → trainer_base.yaml"
        );
    }
}
