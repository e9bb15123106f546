//! "Did you mean": the name of a fixed set (commands, profiles, spaces, statuses, backends,
//! ...) that a mistyped word most likely meant. One rule for every such set.

/// The name `word` most likely meant: one edit away (two for words of 5 letters or more), or a
/// name that a word of at least 3 letters begins. Case is ignored (`mi300x` means `MI300X`).
pub fn closest<'c>(word: &str, names: &[&'c str]) -> Option<&'c str> {
    let word = word.to_lowercase();
    let reach = if word.chars().count() >= 5 { 2 } else { 1 };
    names
        .iter()
        .map(|n| (n.to_lowercase(), *n))
        .map(|(low, n)| (strsim::damerau_levenshtein(&word, &low), low, n))
        .filter(|(d, low, _)| *d <= reach || (word.chars().count() >= 3 && low.starts_with(&word)))
        .min_by_key(|(d, _, _)| *d)
        .map(|(_, _, n)| n)
}

/// `; did you mean `NAME`?` for a word that is not one of `names` but near one, else "" (to
/// append to the message that rejects the word).
pub fn did_you_mean<S: AsRef<str>>(word: &str, names: &[S]) -> String {
    let names: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    closest(word, &names)
        .filter(|n| *n != word)
        .map(|n| format!("; did you mean `{n}`?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_are_suggested_and_far_ones_not() {
        let spaces = ["deepep-cu", "memory-fit", "titan-memory-fit", "precision"];
        assert_eq!(closest("memory-fti", &spaces), Some("memory-fit"));
        assert_eq!(closest("prec", &spaces), Some("precision"));
        assert_eq!(closest("zzz", &spaces), None);
        assert_eq!(closest("mi300x", &["MI300X", "H200"]), Some("MI300X"));
        assert_eq!(
            did_you_mean("proxy-cpi", &["proxy-cpu", "primus"]),
            "; did you mean `proxy-cpu`?"
        );
        assert_eq!(did_you_mean("qqqqqq", &["proxy-cpu"]), "");
        assert_eq!(closest("sweeep", &["sweep", "show"]), Some("sweep"));
        assert_eq!(closest("prof", &["profile", "gpus"]), Some("profile"));
    }
}
