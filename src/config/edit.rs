//! `set`: change flag values in the experiment file only, typed by the catalog, with the
//! result re-resolved and checked before anything is written.

use super::catalog::{Catalog, Flag, FlagType};
use super::diag::{Diagnostic, Severity};
use super::doc::{EditError, EditKind, YamlDoc};
use super::env;
use super::lint::{self, LAUNCHER_ENV};
use super::literal;
use super::overrides::{python_float, python_int};
use super::resolve::{Experiment, LoadOptions, REQUIRED_META};
use super::yaml::{self, Style};
use crate::domain::value::Value;
use std::collections::BTreeMap;

/// One `KEY=VALUE` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetRequest {
    pub key: String,
    pub text: String,
}

impl SetRequest {
    pub fn parse(s: &str) -> Result<SetRequest, String> {
        match s.split_once('=') {
            // The value is taken as given: spaces are part of it.
            Some((k, v)) if !k.trim().is_empty() => Ok(SetRequest {
                key: k.trim().to_string(),
                text: v.to_string(),
            }),
            _ => Err(format!("`{s}` is not of the form KEY=VALUE")),
        }
    }
}

/// One change made to the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub key: String,
    pub old: Option<Value>,
    /// Where the old effective value came from (None: the key was unset).
    pub old_source: Option<crate::config::tree::Origin>,
    pub new: Value,
    /// The YAML text written.
    pub literal: String,
    pub kind: EditKind,
    pub line: u32,
}

/// The outcome of planning a set: the edited document (not yet saved), the changes, and the
/// diagnostics. `refused` means nothing may be written.
#[derive(Debug)]
pub struct SetPlan {
    pub doc: YamlDoc,
    pub changes: Vec<Change>,
    pub diagnostics: Vec<Diagnostic>,
    pub refused: bool,
}

impl SetPlan {
    /// How many of the changes set a value the experiment did not already have (a request for
    /// the value in force is planned, but changes nothing).
    pub fn changed(&self) -> usize {
        self.changes
            .iter()
            .filter(|c| c.old.as_ref() != Some(&c.new))
            .count()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SetError {
    #[error(transparent)]
    Edit(#[from] EditError),
    #[error("{0}")]
    Usage(String),
    /// The experiment with the edit applied no longer loads.
    #[error(transparent)]
    Config(Box<super::ConfigError>),
}

/// Plan `requests` against `exp` (loaded with `opts`). With `force`, new cross-flag errors and
/// near-miss unknown keys are written anyway; type, range and removed-flag errors never are.
pub fn plan(
    loaded: &Experiment,
    opts: &LoadOptions,
    requests: &[SetRequest],
    module_name: Option<&str>,
    force: bool,
    catalog: &Catalog,
) -> Result<SetPlan, SetError> {
    let mut doc = YamlDoc::open(&loaded.path)?;
    // The experiment as the text this edit starts from: another program may have saved the file
    // since `loaded` was read, and the edit is planned and checked against what it will
    // replace (the save then refuses it if the file changes again). Unchanged, `loaded` is it
    // (resolving a large experiment again costs a good part of a second).
    let reloaded;
    let exp = if loaded.read_from(doc.text()) {
        loaded
    } else {
        let mut base_opts = opts.clone();
        base_opts
            .texts
            .insert(loaded.path.clone(), doc.text().to_string());
        reloaded = Experiment::load(&loaded.path, &base_opts)
            .map_err(|e| SetError::Config(Box::new(e)))?;
        &reloaded
    };
    let module = match module_name {
        Some(m) => exp
            .module(m)
            .ok_or_else(|| SetError::Usage(format!("the experiment has no module `{m}`")))?,
        None => exp.main_module(),
    };
    let mut changes = Vec::new();
    let mut diagnostics = Vec::new();
    let mut hard_refusal = false;
    for req in requests {
        if catalog.env_var(&req.key).is_some() || LAUNCHER_ENV.contains(&req.key.as_str()) {
            return Err(SetError::Usage(format!(
                "`{}` is an environment variable, not a config key: export it in the shell (or the run profile) for the launch",
                req.key
            )));
        }
        let meta = REQUIRED_META.contains(&req.key.as_str());
        let path: Vec<String> = if meta {
            vec![req.key.clone()]
        } else {
            ["modules", module.name.as_str(), "overrides"]
                .iter()
                .map(|s| s.to_string())
                .chain(req.key.split('.').map(str::to_string))
                .collect()
        };
        let path_refs: Vec<&str> = path.iter().map(String::as_str).collect();
        let flag = if meta { None } else { catalog.flag(&req.key) };
        let existing = if meta {
            exp.file.leaf(&req.key)
        } else {
            module.get(&req.key)
        };
        if let Some(f) = flag
            && let Some(instead) = &f.removed
        {
            diagnostics.push(
                Diagnostic::new(
                    Severity::Error,
                    "removed-flag",
                    format!("`{}` has been removed from Primus", req.key),
                )
                .flag(&req.key)
                .hint(instead.clone()),
            );
            hard_refusal = true;
            continue;
        }
        let value = match interpret(&req.key, &req.text, flag, existing.map(|l| &l.value)) {
            Ok(v) => v,
            Err(d) => {
                diagnostics.push(d);
                hard_refusal = true;
                continue;
            }
        };
        let node = doc.node(&path_refs);
        let (lit, note) = literal_for(&value, node.as_ref(), &opts.env);
        if let Some(n) = note {
            diagnostics.push(n.flag(&req.key));
        }
        let edit = doc.set_literal(&path_refs, &lit)?;
        changes.push(Change {
            key: req.key.clone(),
            old: existing.map(|l| l.value.clone()),
            old_source: existing.map(|l| l.origin.clone()),
            new: value,
            literal: lit,
            kind: edit.kind,
            line: edit.line,
        });
    }
    if hard_refusal {
        return Ok(SetPlan {
            doc,
            changes,
            diagnostics,
            refused: true,
        });
    }
    let on = Against {
        exp,
        opts,
        module: module.name.as_str(),
        catalog,
    };
    let refused = verify(on, &doc, &changes, force, &mut diagnostics);
    Ok(SetPlan {
        doc,
        changes,
        diagnostics,
        refused,
    })
}

/// What an edit is checked against: the experiment as the text it starts from, how it was
/// loaded, the module edited and the flag catalog.
#[derive(Clone, Copy)]
struct Against<'a> {
    exp: &'a Experiment,
    opts: &'a LoadOptions,
    module: &'a str,
    catalog: &'a Catalog,
}

/// Re-resolve the edited text: each new value must read back, every other resolved value must
/// be unchanged, and the edit must not bring new errors. Returns whether to refuse.
fn verify(
    on: Against<'_>,
    doc: &YamlDoc,
    changes: &[Change],
    force: bool,
    diagnostics: &mut Vec<Diagnostic>,
) -> bool {
    let Against {
        exp,
        opts,
        module,
        catalog,
    } = on;
    let mut check_opts = opts.clone();
    check_opts
        .texts
        .insert(exp.path.clone(), doc.text().to_string());
    let new = match Experiment::load(&exp.path, &check_opts) {
        Ok(n) => n,
        Err(e) => {
            diagnostics.push(Diagnostic::new(
                Severity::Error,
                "edit-breaks-file",
                format!("the edited file would not load: {e}"),
            ));
            return true;
        }
    };
    let mut refused = false;
    let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
    let (Some(old_m), Some(new_m)) = (exp.module(module), new.module(module)) else {
        return true;
    };
    for c in changes {
        let read = if REQUIRED_META.contains(&c.key.as_str()) {
            new.meta(&c.key).cloned()
        } else {
            // A mapping is an item of its own in the resolved tree, not a leaf; what the file
            // now says, before a Primus patch (which lint and show report).
            new_m.written_value(&c.key)
        };
        if !read.as_ref().is_some_and(|r| r.same(&c.new)) {
            let overridden = new_m.get(&c.key).is_some_and(|l| {
                l.template.is_some() || l.origin.layer == super::tree::Layer::CommandLine
            });
            let sev = if overridden {
                Severity::Warning
            } else {
                Severity::Error
            };
            refused |= !overridden;
            diagnostics.push(
                Diagnostic::new(
                    sev,
                    "edit-read-back",
                    format!(
                        "`{}` reads back as {} instead of {}",
                        c.key,
                        read.map_or("nothing".into(), |v| format!("`{v}`")),
                        c.new
                    ),
                )
                .flag(&c.key),
            );
        }
    }
    // As written: a patch that follows the edit (sequence parallelism at TP 1) is no side effect.
    let before: BTreeMap<String, Value> = old_m.written_values();
    let after: BTreeMap<String, Value> = new_m.written_values();
    let touched = |k: &str| {
        keys.iter()
            .any(|s| k == *s || k.starts_with(&format!("{s}.")) || s.starts_with(&format!("{k}.")))
    };
    for (k, v) in &before {
        if !touched(k) && !after.get(k).is_some_and(|a| a.same(v)) {
            refused = true;
            diagnostics.push(Diagnostic::new(
                Severity::Error,
                "edit-side-effect",
                format!("the edit would also change `{k}` (from `{v}`); nothing was written"),
            ));
        }
    }
    let old_d = lint::lint(exp, &opts.env, opts.world.as_ref(), catalog);
    let seen: std::collections::HashSet<(&str, Option<&str>)> =
        old_d.iter().map(|d| (d.code, d.flag.as_deref())).collect();
    for d in lint::lint(&new, &opts.env, opts.world.as_ref(), catalog) {
        let on_set_key = d.flag.as_deref().is_some_and(|f| keys.contains(&f));
        if seen.contains(&(d.code, d.flag.as_deref()))
            || (d.severity == Severity::Info && !on_set_key)
        {
            continue;
        }
        let hard = on_set_key
            && matches!(
                d.code,
                "wrong-type"
                    | "invalid-value"
                    | "out-of-range"
                    | "removed-flag"
                    | "float-read-as-string"
            );
        let soft = d.severity == Severity::Error || (on_set_key && d.code == "unknown-key");
        if hard || (soft && !force) {
            refused = true;
        }
        diagnostics.push(d);
    }
    if refused
        && !force
        && diagnostics
            .iter()
            .any(|d| d.code == "unknown-key" || d.severity == Severity::Error)
    {
        diagnostics.push(Diagnostic::new(
            Severity::Info,
            "set-refused",
            "nothing was written; fix the values, or pass --force to write cross-flag errors and unknown keys anyway",
        ));
    }
    refused
}

#[allow(clippy::result_large_err)] // one diagnostic per rejected request; not a hot path
/// The typing rule of `set` and the TUI's editor — the value the user's text stands for, or why
/// it is refused:
/// - a catalog flag: `null`, `None` or `~` → null, else its type (bool: `true`/`false` in any case; int: Python's `int()`; float:
///   Python's `float()` or an int; enum: one of its values; string/path: the text without
///   surrounding quotes; lists as written);
/// - a key whose current value is a bool, int or float, when the text is one of that type;
/// - otherwise Primus' own typing of `--key value` ([`crate::config::overrides::coerce`]): `true`/`false`, a Python
///   literal for `[`, `(`, `{` and `None`, a float when the text has a `.`, an int, else the
///   string exactly as given (`yes`, `0x10`, `1e5`, `abc # note`, ` lead` stay strings).
///
/// Refused: a line break (set takes one-line values; write a block scalar in the file) and YAML
/// node syntax — an anchor `&`, an alias `*` or a tag `!` at the start — which set does not
/// write. The value is then written with the quoting that reads back to it
/// ([`super::literal`]), and checked by reading the edited file back.
pub fn interpret(
    key: &str,
    text: &str,
    flag: Option<&Flag>,
    existing: Option<&Value>,
) -> Result<Value, Diagnostic> {
    if text.contains(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}']) {
        return Err(Diagnostic::new(
            Severity::Error,
            "multi-line-value",
            format!(
                "`{key}`: the value has a line break; set writes one-line values (write a block \
                 scalar in the file for more)"
            ),
        )
        .flag(key));
    }
    if let Some(c) = text.chars().next().filter(|c| matches!(c, '&' | '*' | '!')) {
        let what = match c {
            '&' => "an anchor",
            '*' => "an alias",
            _ => "a tag",
        };
        return Err(Diagnostic::new(
            Severity::Error,
            "yaml-syntax-value",
            format!(
                "`{key}`: `{text}` starts like {what} (YAML node syntax), which set does not write"
            ),
        )
        .flag(key)
        .hint("quote the value in the file itself if the text is what you mean"));
    }
    let unquoted = strip_quotes(text);
    let is_null = matches!(text, "null" | "None" | "~" | "Null" | "NULL");
    let bad = |what: &str| {
        Diagnostic::new(
            Severity::Error,
            "wrong-type",
            format!("`{key}` expects {what}, not `{text}`"),
        )
        .flag(key)
    };
    if let Some(f) = flag {
        if is_null {
            return Ok(Value::Null);
        }
        return match f.ty {
            FlagType::Bool => parse_bool(text)
                .map(Value::Bool)
                .ok_or_else(|| bad("true or false")),
            FlagType::Int => python_int(text).map(Value::Int).ok_or_else(|| {
                let digits = text.trim_start_matches(['-', '+']).replace('_', "");
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    Diagnostic::new(
                        Severity::Error,
                        "int-out-of-range",
                        format!(
                            "`{key}`: {text} is an integer beyond the 64-bit range \
                             (±9223372036854775807)"
                        ),
                    )
                    .flag(key)
                } else {
                    bad("a whole number")
                }
            }),
            FlagType::Float => python_float(text)
                .or_else(|| python_int(text).map(|i| i as f64))
                .map(Value::Float)
                .ok_or_else(|| bad("a number")),
            FlagType::Enum => {
                if f.values.iter().any(|v| v == unquoted) {
                    Ok(Value::Str(unquoted.to_string()))
                } else {
                    let near = lint_closest(unquoted, &f.values);
                    let mut d = Diagnostic::new(
                        Severity::Error,
                        "invalid-value",
                        format!(
                            "`{key}` must be one of {}, not `{text}`",
                            f.values.join(", ")
                        ),
                    )
                    .flag(key);
                    if let Some(n) = near {
                        d = d.hint(format!("did you mean `{n}`?"));
                    }
                    Err(d)
                }
            }
            FlagType::String | FlagType::Path => Ok(Value::Str(unquoted.to_string())),
            FlagType::List => match yaml_value(text) {
                Some(v @ Value::List(_)) => Ok(v),
                _ => Err(bad("a list like [a, b]")),
            },
            FlagType::IntList => {
                if text.starts_with('[') {
                    match yaml_value(text) {
                        Some(Value::List(items)) if items.iter().all(|i| i.as_i64().is_some()) => {
                            Ok(Value::List(items))
                        }
                        _ => Err(bad("a list of ints like [0, 3, 4]")),
                    }
                } else if unquoted.split(',').all(|p| p.trim().parse::<i64>().is_ok()) {
                    Ok(Value::Str(unquoted.to_string()))
                } else {
                    Err(bad("ints like \"0,3,4\" or [0, 3, 4]"))
                }
            }
        };
    }
    match existing {
        Some(Value::Bool(_)) if parse_bool(text).is_some() => {
            return Ok(Value::Bool(parse_bool(text).unwrap_or_default()));
        }
        Some(Value::Int(_)) if python_int(text).is_some() => {
            return Ok(Value::Int(python_int(text).unwrap_or_default()));
        }
        Some(Value::Float(_))
            if python_float(text)
                .or_else(|| python_int(text).map(|i| i as f64))
                .is_some() =>
        {
            return Ok(Value::Float(
                python_float(text)
                    .or_else(|| python_int(text).map(|i| i as f64))
                    .unwrap_or_default(),
            ));
        }
        // A list written as YAML's flow list (`[model]`), as in the file and as a catalog list
        // flag takes it; Primus' command line would read a bare name in brackets as a string.
        Some(Value::List(_)) if text.starts_with('[') => {
            if let Some(v @ Value::List(_)) = yaml_value(text) {
                return Ok(v);
            }
        }
        _ => {}
    }
    match super::overrides::coerce(text) {
        // Written into the file, `"null"` reaches Primus as None: its overrides merge turns the
        // string into None (see null_string), so that is what is written.
        Value::Str(s) if s == "null" => Ok(Value::Null),
        v => Ok(v),
    }
}

fn lint_closest<'a>(s: &str, values: &'a [String]) -> Option<&'a str> {
    values
        .iter()
        .map(|v| (strsim::normalized_damerau_levenshtein(s, v), v.as_str()))
        .filter(|(score, _)| *score >= 0.5)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, v)| v)
}

fn strip_quotes(t: &str) -> &str {
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            return &t[1..t.len() - 1];
        }
    }
    t
}

/// A bool as Primus' command line reads one: `true` or `false`, in any case.
fn parse_bool(t: &str) -> Option<bool> {
    match t.to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// The value of `text` read as a YAML value.
fn yaml_value(text: &str) -> Option<Value> {
    let n = yaml::parse(&format!("v: {text}\n")).ok()??;
    Some(n.get("v")?.typed())
}

/// The YAML text to write for `value` where `node` stands now: a `${VAR:default}` keeps its
/// variable (only the default changes), a quoted string keeps its quotes.
fn literal_for(
    value: &Value,
    node: Option<&yaml::Node>,
    env: &env::Env,
) -> (String, Option<Diagnostic>) {
    let scalar = node.and_then(|n| n.as_scalar());
    let style = scalar.map(|s| s.style);
    if let Some(s) = scalar
        && let [(var, Some(_))] = env::references(&s.text).as_slice()
        && s.text.starts_with("${")
        && s.text.ends_with('}')
        && s.text.matches("${").count() == 1
    {
        let default = match value {
            Value::Str(s) => s.clone(),
            other => literal::render(other, None),
        };
        // The default must come back as this value through Primus' substitution typing.
        if env::try_scalar(&default) == *value && !default.contains('}') {
            let text = format!("${{{var}:{default}}}");
            let prefer = match style {
                Some(Style::SingleQuoted | Style::DoubleQuoted) => style,
                _ => None,
            };
            let lit = literal::render_str(&text, prefer, false);
            let note = env.get(var).map(|v| {
                Diagnostic::new(
                    Severity::Warning,
                    "env-overrides-edit",
                    format!("the value is `${{{var}:…}}` and {var}={v} is set here, so the environment still wins over the new default"),
                )
                .hint(format!("unset {var}, or export {var} with the new value"))
            });
            return (lit, note);
        }
        let note = Diagnostic::new(
            Severity::Info,
            "env-reference-replaced",
            format!(
                "the value was `{}`; it is replaced by a literal because Primus' substitution cannot produce `{value}` from a default",
                s.text
            ),
        );
        return (literal::render(value, None), Some(note));
    }
    let prefer = match (value, style) {
        (Value::Str(_), Some(Style::SingleQuoted | Style::DoubleQuoted)) => style,
        _ => None,
    };
    (literal::render(value, prefer), None)
}
