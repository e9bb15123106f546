//! Writing values as YAML text that PyYAML (YAML 1.1) reads back as the same value.

use super::yaml::{Style, type_plain};
use crate::domain::value::{Value, yaml_float};

/// YAML text for `v`. Strings keep the `prefer`red quoting style when given (so an edit keeps
/// the look of the line); otherwise they are plain when that reads back as the same string.
pub fn render(v: &Value, prefer: Option<Style>) -> String {
    render_in(v, prefer, false)
}

fn render_in(v: &Value, prefer: Option<Style>, flow: bool) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => yaml_float(*f),
        Value::Str(s) => render_str(s, prefer, flow),
        Value::List(items) => {
            let parts: Vec<String> = items.iter().map(|i| render_in(i, None, true)).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Map(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{}: {}",
                        render_str(k, None, true),
                        render_in(v, None, true)
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

pub fn render_str(s: &str, prefer: Option<Style>, flow: bool) -> String {
    match prefer {
        Some(Style::SingleQuoted) if !s.contains('\n') => single_quoted(s),
        Some(Style::DoubleQuoted) => double_quoted(s),
        _ if plain_ok(s, flow) => s.to_string(),
        _ => double_quoted(s),
    }
}

/// Whether `s` can be written as a plain scalar and read back as that same string.
pub fn plain_ok(s: &str, flow: bool) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !matches!(type_plain(s), Value::Str(_)) {
        return false;
    }
    if s.trim() != s || s.contains(['\n', '\r', '\t']) || s.chars().any(needs_escape) {
        return false;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return false;
    }
    if flow && s.contains([',', '[', ']', '{', '}']) {
        return false;
    }
    s != "<<"
}

/// A character a YAML stream may not hold raw (C0 but tab and newline, DEL, C1) or that YAML 1.1
/// reads as a line break (NEL, LS, PS): written as an escape in double quotes.
fn needs_escape(c: char) -> bool {
    ((c as u32) < 0x20 && c != '\t' && c != '\n')
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || c == '\u{2028}'
        || c == '\u{2029}'
}

fn single_quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // YAML 1.1's other line breaks, read as breaks if written raw.
            '\u{85}' => out.push_str("\\N"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if needs_escape(c) => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::yaml;

    fn reads_back(v: &Value) {
        let text = format!("k: {}\n", render(v, None));
        let n = yaml::parse(&text).unwrap().unwrap();
        assert_eq!(&n.get("k").unwrap().typed(), v, "text was {text:?}");
    }

    #[test]
    fn rendered_values_read_back() {
        for v in [
            Value::Null,
            Value::Bool(true),
            Value::Int(-3),
            Value::Float(1e-5),
            Value::Float(3.0),
            Value::Str("te".into()),
            Value::Str("yes".into()),
            Value::Str("1e-5".into()),
            Value::Str("0,3,4".into()),
            Value::Str("a: b # c".into()),
            Value::Str(String::new()),
            Value::Str("null".into()),
            Value::Str("-x".into()),
            Value::Str("quote\"and\\slash".into()),
            Value::List(vec![Value::Int(0), Value::Str("a,b".into())]),
        ] {
            reads_back(&v);
        }
        assert_eq!(render(&Value::Float(1e-5), None), "1.0e-05");
        assert_eq!(
            render(&Value::Str("te".into()), Some(Style::DoubleQuoted)),
            "\"te\""
        );
        assert_eq!(render(&Value::Str("yes".into()), None), "\"yes\"");
    }
}
