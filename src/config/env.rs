//! `${VAR}` / `${VAR:default}` substitution inside YAML strings, as Primus' loader does it
//! (per file, before that file's `extends` are merged).

use crate::domain::value::Value;
use regex::Regex;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// An environment snapshot: the variables a resolution sees. Tests build their own; the CLI
/// takes the process environment plus `--env` overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    pub fn from_process() -> Self {
        Env {
            vars: std::env::vars().collect(),
        }
    }

    pub fn empty() -> Self {
        Env::default()
    }

    pub fn with(mut self, key: &str, value: &str) -> Self {
        self.set(key, value);
        self
    }

    pub fn set(&mut self, key: &str, value: &str) {
        self.vars.insert(key.to_string(), value.to_string());
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

static ENV_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{([^:{}]+)(?::([^}]*))?\}").expect("static regex"));
static INT_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^-?\d+$").expect("static regex"));
static FLOAT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^-?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)$")
        .expect("static regex")
});

/// A required variable (`${VAR}` without default) that is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingVar(pub String);

/// Substitute every `${...}` in `s`. Returns `Ok(None)` when the string holds no reference
/// (Primus then leaves the value untouched); otherwise the substituted text typed the way
/// Primus' `_try_scalar` does: `true`/`false` (any case) → bool, `-?\d+` → int, a float
/// literal (also `1e-5`) → float, else string.
pub fn substitute(s: &str, env: &Env) -> Result<Option<Value>, MissingVar> {
    if !s.contains("${") {
        return Ok(None);
    }
    let mut missing = None;
    let out = ENV_RE.replace_all(s, |c: &regex::Captures<'_>| {
        let var = &c[1];
        match (env.get(var), c.get(2)) {
            (Some(v), _) => v.to_string(),
            (None, Some(d)) => d.as_str().to_string(),
            (None, None) => {
                missing.get_or_insert_with(|| MissingVar(var.to_string()));
                String::new()
            }
        }
    });
    if let Some(m) = missing {
        return Err(m);
    }
    if out == s {
        return Ok(None);
    }
    Ok(Some(try_scalar(&out)))
}

/// Primus' `_try_scalar` on a substituted string.
pub fn try_scalar(s: &str) -> Value {
    if s.eq_ignore_ascii_case("true") {
        return Value::Bool(true);
    }
    if s.eq_ignore_ascii_case("false") {
        return Value::Bool(false);
    }
    if INT_RE.is_match(s)
        && let Ok(i) = s.parse::<i64>()
    {
        return Value::Int(i);
    }
    if FLOAT_RE.is_match(s)
        && let Ok(f) = s.parse::<f64>()
    {
        return Value::Float(f);
    }
    Value::Str(s.to_string())
}

/// The variable references in a string: `(name, default)`.
pub fn references(s: &str) -> Vec<(String, Option<String>)> {
    ENV_RE
        .captures_iter(s)
        .map(|c| (c[1].to_string(), c.get(2).map(|d| d.as_str().to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_typing_of_substituted_values() {
        let env = Env::empty().with("PRIMUS_TP", "2").with("FLAG", "True");
        assert_eq!(substitute("${PRIMUS_TP:1}", &env), Ok(Some(Value::Int(2))));
        assert_eq!(substitute("${PRIMUS_PP:4}", &env), Ok(Some(Value::Int(4))));
        assert_eq!(substitute("${FLAG}", &env), Ok(Some(Value::Bool(true))));
        assert_eq!(substitute("${LR:1e-5}", &env), Ok(Some(Value::Float(1e-5))));
        // `null` as a default is *not* None: Primus only converts bools and numbers.
        assert_eq!(
            substitute("${DATA:null}", &env),
            Ok(Some(Value::Str("null".into())))
        );
        assert_eq!(
            substitute("${PRIMUS_MODEL:deepseek_v3}.yaml", &env),
            Ok(Some(Value::Str("deepseek_v3.yaml".into())))
        );
        assert_eq!(
            substitute("${A:x}-${PRIMUS_TP:1}", &env),
            Ok(Some(Value::Str("x-2".into())))
        );
        assert_eq!(substitute("plain", &env), Ok(None));
    }

    #[test]
    fn required_variable_must_be_set() {
        let env = Env::empty();
        assert_eq!(
            substitute("${WORKSPACE}", &env),
            Err(MissingVar("WORKSPACE".into()))
        );
        let env = env.with("WORKSPACE", "");
        assert_eq!(
            substitute("${WORKSPACE}", &env),
            Ok(Some(Value::Str(String::new())))
        );
    }

    #[test]
    fn default_may_hold_colons() {
        let env = Env::empty();
        assert_eq!(
            substitute("${ADDR:host:1234}", &env),
            Ok(Some(Value::Str("host:1234".into())))
        );
        assert_eq!(
            references("${A:1} and ${B}"),
            vec![("A".into(), Some("1".into())), ("B".into(), None)]
        );
    }
}
