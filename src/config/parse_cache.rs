//! The last large YAML text this process parsed, with its tree. `recommend` lints each
//! round of its rules by resolving the experiment again (up to 17 times) and `set` reads its
//! document's nodes one lookup at a time: each parsed the same text again, and a 15 MiB
//! experiment costs about a second a parse. Keyed by the text itself (compared byte for byte,
//! not by path or time), so an edited file is never answered from the cache.

use super::yaml::{Node, NodeKind, YamlError};
use std::sync::{Arc, Mutex};

/// Texts shorter than this parse in well under a millisecond: not kept.
const SMALLEST: usize = 256 << 10;
/// Trees kept hold at most one node per this many bytes of text: a dense text (a 495,000-item
/// flow list in 1.4 MiB) makes a tree many times its size, and a copy of it kept would double
/// what the reader holds (with it, `set` on that list peaked at 451 MB, over the 427 MB its
/// 1.4 MiB are allowed); 300,000 anchors in 6.5 MiB (one node per 17 bytes) are kept.
const BYTES_PER_NODE: usize = 8;
/// Entries kept: one. The texts parsed again and again are one at a time (the experiment while
/// `recommend` lints it, the document while `set` reads it), and each kept tree of a text near
/// the node cap costs tens of MB (with 4 kept, `set` on a 495,000-item list peaked at 498 MB).
const KEPT: usize = 1;

type Parsed = Result<Option<Node>, YamlError>;

/// Kept parses, the most recent last.
#[derive(Default)]
struct Cache(Vec<(Arc<str>, Parsed)>);

static CACHE: Mutex<Cache> = Mutex::new(Cache(Vec::new()));

/// `parse(text)`, answered from the process's cache when this text was parsed lately.
pub(super) fn parse(text: &str, parse: fn(&str) -> Parsed) -> Parsed {
    if text.len() < SMALLEST {
        return parse(text);
    }
    let cached = || CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(hit) = cached().get(text) {
        return hit;
    }
    // Parsed without the lock held: another thread's lookups do not wait a whole parse.
    let parsed = parse(text);
    if let Ok(Some(node)) = &parsed
        && nodes(node).saturating_mul(BYTES_PER_NODE) > text.len()
    {
        return parsed;
    }
    cached().put(text, parsed.clone());
    parsed
}

/// Nodes in the tree (its collections, keys and values).
fn nodes(node: &Node) -> usize {
    1 + match &node.kind {
        NodeKind::Scalar(_) => 0,
        NodeKind::Seq(items) => items.iter().map(nodes).sum(),
        NodeKind::Map(entries) => entries.iter().map(|(k, v)| nodes(k) + nodes(v)).sum(),
    }
}

impl Cache {
    /// The kept parse of `text`, moved to the end (most recent).
    fn get(&mut self, text: &str) -> Option<Parsed> {
        let i = self.0.iter().position(|(t, _)| **t == *text)?;
        let entry = self.0.remove(i);
        let parsed = entry.1.clone();
        self.0.push(entry);
        Some(parsed)
    }

    fn put(&mut self, text: &str, parsed: Parsed) {
        if self.get(text).is_some() {
            return;
        }
        if self.0.len() == KEPT {
            drop(self.0.remove(0));
        }
        self.0.push((Arc::from(text), parsed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_parse_answers_the_same_text_only_and_the_oldest_goes_first() {
        let text = |i: usize| format!("a: {i}\n");
        let parsed = |i: usize| super::super::yaml::parse(&text(i));
        let mut c = Cache::default();
        c.put(&text(0), parsed(0));
        assert_eq!(c.get(&text(0)), Some(parsed(0)));
        // One byte changed: not an answer.
        assert_eq!(c.get("a: 9\n"), None);
        for i in 1..=KEPT {
            c.put(&text(i), parsed(i));
        }
        assert_eq!(c.get(&text(0)), None, "the oldest was dropped");
        assert_eq!(c.get(&text(KEPT)), Some(parsed(KEPT)));
        assert_eq!(c.0.len(), KEPT);
    }

    #[test]
    fn nodes_counts_collections_keys_and_values() {
        let tree = super::super::yaml::parse("a: [1, 2]\nb: {c: 3}\n")
            .unwrap()
            .unwrap();
        // The mapping; a and its list of 2; b and its mapping of c: 3.
        assert_eq!(nodes(&tree), 1 + 1 + 3 + 1 + 3);
    }
}
