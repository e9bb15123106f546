//! Command-line overrides, typed the way Primus' train runtime types them
//! (`parse_cli_overrides`, "modern" mode).

use crate::domain::value::Value;
use indexmap::IndexMap;

/// One override: a dotted key and its typed value.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub key: String,
    pub value: Value,
    /// The text as given (`micro_batch_size=4`), for messages.
    pub text: String,
}

impl Override {
    /// An override of `key` with an already typed value (its text is `key=value`).
    pub fn new(key: impl Into<String>, value: Value) -> Override {
        let key = key.into();
        let text = format!("{key}={value}");
        Override { key, value, text }
    }
}

/// Resolved values from whitespace-separated `key=value` assignments, typed as
/// [`parse_assignment`] types them: the unit tests' short way to write a config's values.
#[cfg(test)]
pub(crate) fn values_of(kv: &str) -> std::collections::BTreeMap<String, Value> {
    kv.split_whitespace()
        .map(|a| {
            let o = parse_assignment(a).unwrap_or_else(|e| panic!("{a}: {e}"));
            (o.key, o.value)
        })
        .collect()
}

/// Parse `key=value` (also `--key=value`) into an override typed as Primus types CLI values.
pub fn parse_assignment(token: &str) -> Result<Override, String> {
    let token = token.trim();
    let Some((key, value)) = token.split_once('=') else {
        return Err(format!(
            "override `{token}` is not of the form KEY=VALUE (e.g. micro_batch_size=4)"
        ));
    };
    let key = key.trim_start_matches('-').trim();
    if key.is_empty() || key.split('.').any(str::is_empty) {
        return Err(format!("override `{token}` has an empty key"));
    }
    Ok(Override {
        key: key.to_string(),
        value: coerce(value.trim()),
        text: token.to_string(),
    })
}

/// Normalise Primus CLI tokens (`--key value`, `--key=value`, `key=value`, bare `--flag`)
/// into overrides, exactly as `parse_cli_overrides` does. Invalid tokens are returned apart.
#[cfg(any(test, feature = "testkit"))]
pub fn parse_tokens(tokens: &[String]) -> (Vec<Override>, Vec<String>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let item = tokens[i].trim();
        if item.is_empty() {
            i += 1;
            continue;
        }
        if item.contains('=') {
            if let Ok(o) = parse_assignment(item) {
                out.push(o);
            } else {
                skipped.push(item.to_string());
            }
            i += 1;
        } else if item.starts_with("--") && i + 1 < tokens.len() && !tokens[i + 1].starts_with("--")
        {
            let key = item.trim_start_matches('-');
            let value = tokens[i + 1].trim();
            out.push(Override {
                key: key.to_string(),
                value: coerce(value),
                text: format!("{item} {value}"),
            });
            i += 2;
        } else if item.starts_with("--") {
            out.push(Override {
                key: item.trim_start_matches('-').to_string(),
                value: Value::Bool(true),
                text: item.to_string(),
            });
            i += 1;
        } else {
            skipped.push(item.to_string());
            i += 1;
        }
    }
    (out, skipped)
}

/// `_coerce_cli_value_modern`: `true`/`false` (any case) → bool; `None` or a value starting with
/// `[`, `(` or `{` → a Python literal when it parses; a value with `.` → float when Python's
/// `float()` accepts it; else int when `int()` accepts it; else the string itself.
pub fn coerce(raw: &str) -> Value {
    let lower = raw.to_ascii_lowercase();
    if lower == "true" || lower == "false" {
        return Value::Bool(lower == "true");
    }
    if (raw == "None" || raw.is_empty() || raw.starts_with(['[', '(', '{']))
        && let Some(v) = literal_eval(raw)
    {
        return v;
    }
    if raw.contains('.')
        && let Some(f) = python_float(raw)
    {
        return Value::Float(f);
    }
    if let Some(i) = python_int(raw) {
        return Value::Int(i);
    }
    Value::Str(raw.to_string())
}

/// Python's `int(str)`: optional sign, digits with single underscores between them, whitespace.
pub fn python_int(s: &str) -> Option<i64> {
    let s = s.trim();
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if !valid_digit_groups(body) {
        return None;
    }
    s.replace('_', "").parse().ok()
}

/// Python's `float(str)`.
pub fn python_float(s: &str) -> Option<f64> {
    let s = s.trim();
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), "inf" | "infinity" | "nan") {
        return s
            .to_ascii_lowercase()
            .replace("infinity", "inf")
            .parse()
            .ok();
    }
    let (mant, exp) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let (int_part, frac) = match mant.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mant, None),
    };
    let ok_int = int_part.is_empty() || valid_digit_groups(int_part);
    let ok_frac = frac.is_none_or(|f| f.is_empty() || valid_digit_groups(f));
    let has_digits = !int_part.is_empty() || frac.is_some_and(|f| !f.is_empty());
    let ok_exp = exp.is_none_or(|e| valid_digit_groups(e.strip_prefix(['+', '-']).unwrap_or(e)));
    if !(ok_int && ok_frac && has_digits && ok_exp) {
        return None;
    }
    s.replace('_', "").parse().ok()
}

fn valid_digit_groups(s: &str) -> bool {
    !s.is_empty()
        && s.split('_')
            .all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
}

/// A small `ast.literal_eval` for the literals a CLI override can hold: numbers, strings,
/// `True`/`False`/`None`, lists, tuples (as lists) and dicts with string keys.
pub fn literal_eval(s: &str) -> Option<Value> {
    let mut p = LitParser {
        s: s.as_bytes(),
        i: 0,
    };
    let v = p.value()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct LitParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl LitParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.ws();
        match *self.s.get(self.i)? {
            b'[' => self.seq(b'['),
            b'(' => self.seq(b'('),
            b'{' => self.dict(),
            b'\'' | b'"' => self.string().map(Value::Str),
            _ => self.atom(),
        }
    }

    fn seq(&mut self, open: u8) -> Option<Value> {
        let close = if open == b'[' { b']' } else { b')' };
        self.i += 1;
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(Value::List(items));
            }
            items.push(self.value()?);
            if !self.eat(b',') {
                return self.eat(close).then_some(Value::List(items));
            }
        }
    }

    fn dict(&mut self) -> Option<Value> {
        self.i += 1;
        let mut m = IndexMap::new();
        loop {
            if self.eat(b'}') {
                return Some(Value::Map(m));
            }
            let k = match self.value()? {
                Value::Str(s) => s,
                Value::Int(i) => i.to_string(),
                _ => return None,
            };
            if !self.eat(b':') {
                return None;
            }
            let v = self.value()?;
            m.insert(k, v);
            if !self.eat(b',') {
                return self.eat(b'}').then_some(Value::Map(m));
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let q = self.s[self.i];
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.s.len() {
            let c = self.s[self.i];
            self.i += 1;
            if c == q {
                return String::from_utf8(out).ok();
            }
            if c == b'\\' {
                let e = *self.s.get(self.i)?;
                self.i += 1;
                out.push(match e {
                    b'n' => b'\n',
                    b't' => b'\t',
                    other => other,
                });
            } else {
                out.push(c);
            }
        }
        None
    }

    fn atom(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len() && !b",:)]} \t\n".contains(&self.s[self.i]) {
            self.i += 1;
        }
        let tok = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        match tok {
            "True" => Some(Value::Bool(true)),
            "False" => Some(Value::Bool(false)),
            "None" => Some(Value::Null),
            _ => {
                if let Some(i) = python_int(tok) {
                    Some(Value::Int(i))
                } else if tok.bytes().any(|b| b.is_ascii_digit()) {
                    python_float(tok).map(Value::Float)
                } else {
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coercion_matches_primus_modern_mode() {
        assert_eq!(coerce("true"), Value::Bool(true));
        assert_eq!(coerce("False"), Value::Bool(false));
        assert_eq!(coerce("None"), Value::Null);
        assert_eq!(coerce("null"), Value::Str("null".into()));
        assert_eq!(coerce("4"), Value::Int(4));
        assert_eq!(coerce("1_000"), Value::Int(1000));
        assert_eq!(coerce("1e-5"), Value::Str("1e-5".into()));
        assert_eq!(coerce("1.0e-5"), Value::Float(1e-5));
        assert_eq!(coerce("0,3,4"), Value::Str("0,3,4".into()));
        assert_eq!(coerce("1.2.3"), Value::Str("1.2.3".into()));
        assert_eq!(
            coerce("[0, 1]"),
            Value::List(vec![Value::Int(0), Value::Int(1)])
        );
        assert_eq!(coerce("[0, 1"), Value::Str("[0, 1".into()));
        assert_eq!(coerce("fp32"), Value::Str("fp32".into()));
        assert_eq!(coerce(""), Value::Str(String::new()));
        assert_eq!(coerce(".5"), Value::Float(0.5));
    }

    #[test]
    fn token_forms() {
        let toks: Vec<String> = [
            "--train_iters",
            "10",
            "lr=1.0e-4",
            "--mock_data",
            "--training.steps=5",
            "stray",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (ovs, skipped) = parse_tokens(&toks);
        let pairs: Vec<(&str, &Value)> = ovs.iter().map(|o| (o.key.as_str(), &o.value)).collect();
        assert_eq!(
            pairs,
            vec![
                ("train_iters", &Value::Int(10)),
                ("lr", &Value::Float(1e-4)),
                ("mock_data", &Value::Bool(true)),
                ("training.steps", &Value::Int(5)),
            ]
        );
        assert_eq!(skipped, vec!["stray".to_string()]);
        // As in Primus, a bare flag followed by a non-`--` token takes it as its value.
        let (ovs, _) = parse_tokens(&["--mock_data".into(), "lr=1".into()]);
        assert_eq!(ovs[0].value, Value::Str("lr=1".into()));
    }

    #[test]
    fn literal_dicts_and_tuples() {
        let v = literal_eval("{'a': (1, 2.5), \"b\": None}").unwrap();
        let Value::Map(m) = v else { panic!() };
        assert_eq!(
            m.get("a"),
            Some(&Value::List(vec![Value::Int(1), Value::Float(2.5)]))
        );
        assert_eq!(m.get("b"), Some(&Value::Null));
        assert!(parse_assignment("novalue").is_err());
    }
}
