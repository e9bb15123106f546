//! Text from configs and logs shown to a person: control characters (C0 but tab and newline,
//! DEL, C1) are written as visible escapes (`\x1b`, `\u{9b}`), so a value such as
//! `"\x1b]0;title\x07"` cannot retitle, recolour or move the cursor of the terminal that shows
//! it. JSON output needs nothing of this: serde escapes them itself.

use std::borrow::Cow;

/// Whether `c` would act on a terminal instead of being shown.
pub fn is_control(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c)
}

/// `s` with every control character written as an escape.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_control(c) {
            if (c as u32) < 0x80 {
                out.push_str(&format!("\\x{:02x}", c as u32));
            } else {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `s` on one line: [`visible`], and a newline, tab or carriage return inside it written as
/// `\n`, `\t`, `\r` too. For a key or value inside a one-line summary (`key: old → new`),
/// where a raw newline would start what reads as another key's line.
pub fn one_line(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| matches!(c, '\n' | '\t') || is_control(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push_str(&visible(c.encode_utf8(&mut [0; 4]))),
        }
    }
    Cow::Owned(out)
}

/// `s` cut to `w` characters, ending in `…` when cut (terminal cells of the TUI and `monitor`).
pub fn fit(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(w - 1).collect();
    out.push('…');
    out
}

/// A count with its noun: `1 error`, `2 errors`, `0 errors`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_agrees_with_its_noun() {
        assert_eq!(count(1, "error", "errors"), "1 error");
        assert_eq!(count(2, "error", "errors"), "2 errors");
        assert_eq!(count(0, "warning", "warnings"), "0 warnings");
    }

    #[test]
    fn control_characters_become_visible_escapes() {
        assert_eq!(
            visible("plain — ünïcode\tand\nlines"),
            "plain — ünïcode\tand\nlines"
        );
        assert_eq!(visible("\x1b]0;pwned\x07x"), "\\x1b]0;pwned\\x07x");
        assert_eq!(
            visible("a\rb\x7f\u{9b}31m\u{85}"),
            "a\\x0db\\x7f\\u{9b}31m\\u{85}"
        );
        assert!(matches!(visible("ok"), Cow::Borrowed(_)));
    }

    #[test]
    fn one_line_escapes_line_breaks_and_tabs_too() {
        assert_eq!(one_line("a\nb\tc\rd\x1b"), "a\\nb\\tc\\rd\\x1b");
        assert!(matches!(one_line("plain — ü"), Cow::Borrowed(_)));
    }
}
