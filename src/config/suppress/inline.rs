//! `# primus-tune: ignore[code, ...] reason` comments in YAML files, as ruff's `# noqa: CODE`:
//! after a value, it covers the findings on that line; on a line of its own, the whole file.

use std::sync::LazyLock;

/// One comment: the ids it names (each with its 1-based column), why, and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    pub ids: Vec<(String, u32)>,
    pub reason: String,
    /// 1-based line and column (of the `#`).
    pub line: u32,
    pub column: u32,
    /// Nothing but the comment on its line: it covers the whole file.
    pub own_line: bool,
}

static MARK: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"(?:^|\s)(#\s*primus-tune:\s*ignore\[([^\]]*)\])(.*)$")
        .unwrap_or_else(|e| unreachable!("a constant pattern: {e}"))
});

/// 1-based column of byte offset `at` in `line`, in characters (as lint's columns are).
fn column(line: &str, at: usize) -> u32 {
    line[..at].chars().count() as u32 + 1
}

/// The suppression comments of a YAML text.
pub fn comments(text: &str) -> Vec<Comment> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(c) = MARK.captures(line) else {
            continue;
        };
        let (Some(hash), Some(list), Some(rest)) = (c.get(1), c.get(2), c.get(3)) else {
            continue;
        };
        let mut ids = Vec::new();
        let mut at = list.start();
        for part in list.as_str().split(',') {
            let id = part.trim();
            if !id.is_empty() {
                let offset = at + part.len() - part.trim_start().len();
                ids.push((id.to_string(), column(line, offset)));
            }
            at += part.len() + 1;
        }
        // The reason follows the bracket, after an optional separator (`: why`, `-- why`).
        let reason = rest
            .as_str()
            .trim()
            .trim_start_matches([':', '-', '—', '–'])
            .trim()
            .to_string();
        out.push(Comment {
            ids,
            reason,
            line: i as u32 + 1,
            column: column(line, hash.start()),
            own_line: line[..hash.start()].trim().is_empty(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_after_a_value_and_on_their_own_line() {
        let text = "modules:\n  # primus-tune: ignore[primus-turbo] no wheel for ROCm 6.2\n  \
                    sequence_parallel: 1  # primus-tune: ignore[bool-written-as-int, yaml11-bool]: AMD's recipe\n  \
                    x: \"# not a comment primus-tune ignore\"\n";
        let c = comments(text);
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(c[0].own_line);
        assert_eq!((c[0].line, c[0].column), (2, 3));
        assert_eq!(c[0].ids, vec![("primus-turbo".to_string(), 25)]);
        assert_eq!(c[0].reason, "no wheel for ROCm 6.2");
        assert!(!c[1].own_line);
        assert_eq!((c[1].line, c[1].column), (3, 25));
        let ids: Vec<&str> = c[1].ids.iter().map(|(i, _)| i.as_str()).collect();
        assert_eq!(ids, ["bool-written-as-int", "yaml11-bool"]);
        assert_eq!(c[1].ids[1].1, 68);
        assert_eq!(c[1].reason, "AMD's recipe");
    }
}
