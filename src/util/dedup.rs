//! Keeping one of each: the rule PyYAML applies to a key written twice in a mapping (the last
//! one wins, placed where it is written), shared by the parser's merge keys and the resolver.

use std::collections::HashMap;
use std::hash::Hash;

/// `items` with only the last of each `key`, in the order of those last ones. Linear: a
/// mapping may repeat 300,000 keys (removing each earlier entry from an ordered map shifted
/// every entry after it).
pub fn last_of_each<T, K: Hash + Eq>(items: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
    let keys: Vec<K> = items.iter().map(key).collect();
    let mut last: HashMap<&K, usize> = HashMap::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        last.insert(k, i);
    }
    let keep: Vec<bool> = (0..keys.len()).map(|i| last[&keys[i]] == i).collect();
    items
        .into_iter()
        .zip(keep)
        .filter_map(|(t, keep)| keep.then_some(t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_of_a_key_stays_where_it_is_written() {
        let items = vec![("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)];
        assert_eq!(
            last_of_each(items, |(k, _)| *k),
            [("a", 3), ("c", 4), ("b", 5)]
        );
        assert_eq!(last_of_each(Vec::<(u8, u8)>::new(), |(k, _)| *k), []);
    }
}
