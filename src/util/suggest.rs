//! "Did you mean": the known word a mistyped one most likely meant, for every message that
//! names an unknown word (a command, a key of the defaults file, a key binding's action).

/// The name a mistyped word most likely meant: one edit away (two for words of 5 letters or
/// more), or a word of at least 3 letters that begins a name.
pub fn closest<'c>(word: &str, names: &[&'c str]) -> Option<&'c str> {
    let reach = if word.chars().count() >= 5 { 2 } else { 1 };
    names
        .iter()
        .map(|n| (strsim::damerau_levenshtein(word, n), *n))
        .filter(|(d, n)| *d <= reach || (word.len() >= 3 && n.starts_with(word)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_words_and_prefixes_are_suggested_far_ones_not() {
        assert_eq!(closest("sweeep", &["sweep", "show"]), Some("sweep"));
        assert_eq!(closest("prof", &["profile", "gpus"]), Some("profile"));
        assert_eq!(closest("zzzz", &["profile", "gpus"]), None);
    }
}
