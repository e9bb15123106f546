//! Primus' merges turn the string `"null"` into None: `set_value_by_key`
//! (primus/core/utils/yaml_utils.py) does `if value == "null": value = None` for every value
//! a merge assigns one by one. A merge assigns one by one every scalar (and list) below a
//! section that already exists as a mapping; a section that is new to the namespace is
//! assigned whole, its strings kept. Lists are assigned whole too, so a `"null"` inside one
//! stays a string.
//!
//! A module goes through two merges (`PrimusParser.parse_trainer_module`): the model preset
//! into the module preset (always), then the experiment's `overrides` (when the module has a
//! non-null `overrides`). Hence `${PRIMUS_TOKENIZED_DATA_PATH:null}`, which substitutes to the
//! string `"null"`, reaches Megatron as None.

use super::tree::{Item, Tree};
use crate::domain::value::Value;

fn leaf_to_none(item: &mut Item) {
    if let Item::Leaf(l) = item
        && l.value == Value::Str("null".into())
    {
        l.value = Value::Null;
    }
}

/// What a merge does to the namespace it merges into: every leaf at any depth becomes None
/// where it is the string `"null"`, except below the top-level sections named in `whole`
/// (sections the merge itself added whole).
pub fn merged_into(tree: &mut Tree, whole: &[String]) {
    for (key, item) in &mut tree.entries {
        match item {
            Item::Map(t) if !whole.contains(key) => merged_into(t, &[]),
            Item::Map(_) => {}
            leaf => leaf_to_none(leaf),
        }
    }
}

/// What the overrides merge does to the overrides themselves: their leaves become None where
/// they are `"null"`, except inside a section `base` does not hold as a mapping (assigned whole).
pub fn overrides(over: &mut Tree, base: &Tree) {
    for (key, item) in &mut over.entries {
        match (item, base.entries.get(key)) {
            (Item::Map(o), Some(Item::Map(b))) => overrides(o, b),
            (Item::Map(_), _) => {}
            (leaf, _) => leaf_to_none(leaf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tree::{Layer, Origin};
    use std::path::Path;
    use std::sync::Arc;

    fn tree(pairs: &[(&str, Value)]) -> Tree {
        let o = Origin {
            file: Arc::from(Path::new("x.yaml")),
            line: 1,
            column: 1,
            via: Vec::new(),
            layer: Layer::ModulePreset,
        };
        let mut t = Tree::new(o.clone());
        for (k, v) in pairs {
            t.merge(Tree::singleton(k, v.clone(), o.clone()));
        }
        t
    }

    fn null() -> Value {
        Value::Str("null".into())
    }

    #[test]
    fn a_merge_turns_null_strings_into_none_but_not_in_lists_or_whole_sections() {
        let mut t = tree(&[
            ("a", null()),
            ("s.b", null()),
            ("l", Value::List(vec![null()])),
            ("new.c", null()),
            ("other", Value::Str("Null".into())),
        ]);
        merged_into(&mut t, &["new".to_string()]);
        assert_eq!(t.leaf("a").unwrap().value, Value::Null);
        assert_eq!(t.leaf("s.b").unwrap().value, Value::Null);
        assert_eq!(t.leaf("l").unwrap().value, Value::List(vec![null()]));
        assert_eq!(t.leaf("new.c").unwrap().value, null());
        assert_eq!(t.leaf("other").unwrap().value, Value::Str("Null".into()));
    }

    #[test]
    fn overrides_keep_null_strings_in_sections_they_introduce() {
        let base = tree(&[("s.b", Value::Int(1)), ("scalar", Value::Int(1))]);
        let mut over = tree(&[
            ("a", null()),
            ("s.c", null()),
            ("fresh.d", null()),
            ("scalar.e", null()),
        ]);
        overrides(&mut over, &base);
        assert_eq!(over.leaf("a").unwrap().value, Value::Null);
        assert_eq!(over.leaf("s.c").unwrap().value, Value::Null);
        assert_eq!(over.leaf("fresh.d").unwrap().value, null());
        assert_eq!(over.leaf("scalar.e").unwrap().value, null());
    }
}
