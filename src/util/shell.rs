//! A command line as a POSIX shell reads it: what the CLI and the TUI print for a trial's launch,
//! so that pasting it runs the same argv (no `$(…)`, globbing or word splitting of a value).

/// One word quoted for `sh`: left as is when it holds only characters no shell treats
/// specially, else in single quotes (a `'` inside as `'\''`).
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The argv as one line a shell splits back into the same words.
pub fn join(argv: &[String]) -> String {
    argv.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn specials_are_quoted_plain_words_are_not() {
        assert_eq!(quote("--micro-batch-size"), "--micro-batch-size");
        assert_eq!(quote("/a/b.py"), "/a/b.py");
        assert_eq!(quote("$(rm -rf x)"), "'$(rm -rf x)'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// `sh` splits the joined line back into the same words.
        #[test]
        fn sh_reads_back_the_same_words(words in prop::collection::vec("[ -~]{0,12}", 1..5)) {
            let line = join(&words);
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("for w in {line}; do printf '%s\\0' \"$w\"; done")])
                .output()
                .unwrap();
            let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .split('\0')
                .map(str::to_string)
                .collect::<Vec<_>>()[..words.len()]
                .to_vec();
            prop_assert_eq!(got, words);
        }
    }
}
