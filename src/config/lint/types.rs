//! Type and range checks from the catalog, YAML 1.1 typing surprises, unknown keys and model
//! values the merge drops.

use super::{Ctx, loc};
use crate::config::catalog::{Flag, FlagType};
use crate::config::diag::{Diagnostic, Severity};
use crate::config::tree::{Layer, Leaf};
use crate::config::yaml::Style;
use crate::domain::value::Value;

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    for flag in cx.catalog.flags_for(cx.backend) {
        // What the files wrote, not what a Primus patch made of it.
        if let Some(leaf) = cx.module.written(&flag.name) {
            check_flag(cx, flag, leaf, out);
        } else if let Some(crate::config::tree::Item::Map(t)) = cx.module.params.get(&flag.name)
            && !matches!(flag.ty, FlagType::List)
        {
            // A mapping where a scalar belongs: Primus' deep merge hands Megatron the dict,
            // which it cannot use (the preset's value is gone, not kept).
            let written = crate::domain::value::Value::Map(
                t.leaves()
                    .into_iter()
                    .map(|(k, l)| (k, l.value.clone()))
                    .collect(),
            );
            out.push(
                Diagnostic::new(
                    Severity::Error,
                    "wrong-type",
                    format!(
                        "`{}` expects {} but is a mapping `{written}` ({}); Primus passes the \
                         mapping on in place of the preset's value",
                        flag.name,
                        article(flag.ty.label()),
                        t.origin.describe()
                    ),
                )
                .at(Some(loc(&t.origin)))
                .flag(&flag.name)
                .hint(type_hint(flag)),
            );
        }
    }
    for (key, leaf) in cx.module.params.leaves() {
        typing_surprise(cx, &key, leaf, out);
    }
    unknown_keys(cx, out);
    for d in &cx.module.dropped {
        out.push(
            Diagnostic::new(
                Severity::Warning,
                "model-value-dropped",
                format!(
                    "the model preset sets `{}: {}` ({}), but Primus keeps the module preset's `{}` ({}) and drops the model value",
                    d.key,
                    d.model_value,
                    d.model_origin.describe(),
                    d.kept_value,
                    d.kept_origin.describe()
                ),
            )
            .at(Some(loc(&d.model_origin)))
            .flag(&d.key)
            .hint(format!(
                "if the model value is the one you want, set `{}` in the experiment's overrides",
                d.key
            )),
        );
    }
}

/// The catalog's type, enum and range for one flag.
pub(crate) fn check_flag(cx: &Ctx<'_>, flag: &Flag, leaf: &Leaf, out: &mut Vec<Diagnostic>) {
    let name = flag.name.as_str();
    let v = &leaf.value;
    if let Some(instead) = &flag.removed {
        let sev = if v.truthy() {
            Severity::Error
        } else {
            Severity::Warning
        };
        out.push(
            cx.diag(
                sev,
                "removed-flag",
                name,
                format!(
                    "`{name}` has been removed from Primus{}",
                    if v.truthy() {
                        " and setting it makes training fail at start-up"
                    } else {
                        ""
                    }
                ),
            )
            .hint(instead.clone()),
        );
        return;
    }
    if v.is_null() {
        if !flag.nullable {
            out.push(
                cx.diag(
                    Severity::Warning,
                    "null-value",
                    name,
                    format!("`{name}` is null but expects a {}", flag.ty.label()),
                )
                .hint(format!("default: {}", flag.default_value())),
            );
        }
        return;
    }
    let type_ok = match flag.ty {
        FlagType::Bool => matches!(v, Value::Bool(_)),
        FlagType::Int => matches!(v, Value::Int(_)),
        FlagType::Float => matches!(v, Value::Float(_) | Value::Int(_)),
        FlagType::String | FlagType::Path | FlagType::Enum => matches!(v, Value::Str(_)),
        FlagType::List => matches!(v, Value::List(_)),
        FlagType::IntList => int_list(v).is_some(),
    };
    if !type_ok {
        // 0/1 for a switch: Primus hands the int on and Python's truthiness makes it work
        // (AMD's Llama-3.1-70B FP8 example has `sequence_parallel: 1`), so it only reads oddly.
        if flag.ty == FlagType::Bool
            && let Value::Int(i @ (0 | 1)) = v
        {
            let b = *i == 1;
            out.push(
                cx.diag(
                    Severity::Warning,
                    "bool-written-as-int",
                    name,
                    format!(
                        "`{name}: {i}` is an int where a bool is expected; Primus passes it on and Python treats {i} as {}, so it works as {b}",
                        if b { "truthy" } else { "falsy" }
                    ),
                )
                .hint(format!("write `{b}`")),
            );
            return;
        }
        // A float written `1e-5` is a string for PyYAML: say so precisely.
        if flag.ty == FlagType::Float
            && let Value::Str(s) = v
            && s.parse::<f64>().is_ok()
        {
            let f: f64 = s.parse().unwrap_or_default();
            out.push(
                cx.diag(
                    Severity::Warning,
                    "float-read-as-string",
                    name,
                    format!("`{name}: {s}` is read by PyYAML (YAML 1.1) as the string \"{s}\", not a float"),
                )
                .hint(format!("write `{name}: {}`", crate::domain::value::yaml_float(f))),
            );
            return;
        }
        // An integer literal beyond 64 bits: PyYAML keeps a big int; say what it is.
        if flag.ty == FlagType::Int && is_huge_integer(v) {
            // The digits as written (the float this tool holds it as has lost some).
            let written = cx
                .leaf(name)
                .and_then(|l| l.raw.as_ref())
                .map_or_else(|| huge_text(v), |r| r.text.clone());
            out.push(
                cx.diag(
                    Severity::Error,
                    "int-out-of-range",
                    name,
                    format!(
                        "`{name}: {written}` is an integer beyond the 64-bit range \
                         (±9223372036854775807)"
                    ),
                )
                .hint(type_hint(flag)),
            );
            return;
        }
        out.push(
            cx.diag(
                Severity::Error,
                "wrong-type",
                name,
                format!(
                    "`{name}` expects a {} but is {} `{v}`",
                    flag.ty.label(),
                    article(v.type_name()),
                ),
            )
            .hint(type_hint(flag)),
        );
        return;
    }
    if flag.ty == FlagType::Enum
        && let Value::Str(s) = v
        && !flag.values.iter().any(|a| a == s)
    {
        let near = closest(s, flag.values.iter().map(String::as_str));
        let mut d = cx.diag(
            Severity::Error,
            "invalid-value",
            name,
            format!("`{name}: {s}` is not one of {}", flag.values.join(", ")),
        );
        if let Some(n) = near {
            d = d.hint(format!("did you mean `{n}`?"));
        }
        out.push(d);
        return;
    }
    let nums: Vec<f64> = match flag.ty {
        FlagType::IntList => int_list(v)
            .unwrap_or_default()
            .iter()
            .map(|i| *i as f64)
            .collect(),
        _ => v.as_f64().into_iter().collect(),
    };
    for x in nums {
        let low = flag.min.is_some_and(|m| x < m);
        let high = flag.max.is_some_and(|m| x > m);
        if low || high {
            let range = match (flag.min, flag.max) {
                (Some(a), Some(b)) => format!("{a}..={b}"),
                (Some(a), None) => format!(">= {a}"),
                (None, Some(b)) => format!("<= {b}"),
                (None, None) => String::new(),
            };
            out.push(cx.diag(
                Severity::Error,
                "out-of-range",
                name,
                format!("`{name}: {v}` is out of range ({range})"),
            ));
            break;
        }
    }
}

fn article(t: &str) -> String {
    match t {
        "int" => "an int".into(),
        "NoneType" => "None".into(),
        other => format!("a {other}"),
    }
}

fn type_hint(flag: &Flag) -> String {
    match flag.ty {
        FlagType::Bool => "write true or false (unquoted)".into(),
        FlagType::Int => "write a whole number, unquoted".into(),
        FlagType::Float => "write a number with a dot and a signed exponent, e.g. 1.0e-05".into(),
        FlagType::Enum => format!("one of: {}", flag.values.join(", ")),
        FlagType::IntList => "a list like [0, 3, 4] or a string like \"0,3,4\"".into(),
        FlagType::List => "a list like [a, b]".into(),
        FlagType::String | FlagType::Path => "a string".into(),
    }
}

/// Ints from a list or a comma-separated string (Primus' recompute_layer_ids accepts both).
pub(crate) fn int_list(v: &Value) -> Option<Vec<i64>> {
    match v {
        Value::List(items) => items.iter().map(Value::as_i64).collect(),
        Value::Str(s) => s.split(',').map(|p| p.trim().parse::<i64>().ok()).collect(),
        Value::Int(i) => Some(vec![*i]),
        _ => None,
    }
}

/// Values whose plain text a YAML 1.2 reader (and most people) would type differently.
fn typing_surprise(cx: &Ctx<'_>, key: &str, leaf: &Leaf, out: &mut Vec<Diagnostic>) {
    if leaf.origin.layer != Layer::Experiment {
        return;
    }
    let Some(raw) = &leaf.raw else { return };
    if raw.style != Style::Plain || leaf.template.is_some() {
        return;
    }
    // Flags the catalog types are checked precisely by check_flag.
    if cx.catalog.flag(key).is_some() {
        return;
    }
    let t = raw.text.as_str();
    match &leaf.value {
        Value::Str(s) if s.parse::<f64>().is_ok() && !s.contains(',') => {
            let f: f64 = s.parse().unwrap_or_default();
            out.push(
                cx.diag(
                    Severity::Warning,
                    "float-read-as-string",
                    key,
                    format!("`{key}: {t}` is read by PyYAML (YAML 1.1) as a string, not a float"),
                )
                .hint(format!(
                    "write `{key}: {}` if a number is meant",
                    crate::domain::value::yaml_float(f)
                )),
            );
        }
        Value::Bool(b) if !matches!(t.to_ascii_lowercase().as_str(), "true" | "false") => {
            out.push(
                cx.diag(
                    Severity::Warning,
                    "yaml11-bool",
                    key,
                    format!("`{key}: {t}` is read by PyYAML (YAML 1.1) as the boolean {b}"),
                )
                .hint(format!(
                    "quote it (`\"{t}\"`) if a string is meant, or write {b}"
                )),
            );
        }
        Value::Int(i) if is_legacy_octal(t) => {
            out.push(
                cx.diag(
                    Severity::Warning,
                    "yaml11-octal",
                    key,
                    format!("`{key}: {t}` is read by PyYAML (YAML 1.1) as octal, i.e. {i}"),
                )
                .hint("drop the leading zero, or quote it if a string is meant"),
            );
        }
        _ => {}
    }
}

/// A whole number too large for 64 bits: YAML's big integer (typed as the nearest float here) or
/// a command-line digit string.
fn is_huge_integer(v: &Value) -> bool {
    match v {
        Value::Float(f) => f.is_finite() && f.fract() == 0.0 && f.abs() >= 9.223_372_036_854_776e18,
        Value::Str(s) => {
            let t = s.trim_start_matches(['-', '+']).replace('_', "");
            !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && t.parse::<i64>().is_err()
        }
        _ => false,
    }
}

/// A huge integer as digits.
fn huge_text(v: &Value) -> String {
    match v {
        Value::Float(f) => format!("{f:.0}"),
        other => other.to_string(),
    }
}

fn is_legacy_octal(t: &str) -> bool {
    let b = t.trim_start_matches(['-', '+']);
    b.len() > 1 && b.starts_with('0') && b.bytes().all(|c| c.is_ascii_digit() || c == b'_')
}

/// Keys set by the experiment or the command line that no preset defines and the catalog does
/// not know: Primus passes them through silently, so a typo does nothing.
fn unknown_keys(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let known = || {
        cx.module
            .preset_keys
            .iter()
            .map(String::as_str)
            .chain(cx.catalog.flags_for(cx.backend).map(|f| f.name.as_str()))
    };
    // The did-you-mean search costs a distance per known key: it runs for the first
    // SUGGEST_CAP unknown keys only, so lint stays linear in the size of the file.
    let mut searched = 0usize;
    for (key, leaf) in cx.module.params.leaves() {
        if !matches!(leaf.origin.layer, Layer::Experiment | Layer::CommandLine) {
            continue;
        }
        if cx.module.preset_keys.contains(&key) || cx.catalog.flag(&key).is_some() {
            continue;
        }
        // Module-level attributes such as trainer_class are not parameters.
        if !key_in_overrides(cx, &key) && leaf.origin.layer == Layer::Experiment {
            continue;
        }
        if searched >= SUGGEST_CAP {
            out.push(cx.diag(
                Severity::Info,
                "unlisted-key",
                &key,
                format!(
                    "`{key}` is not defined by the presets; Primus passes it to the backend as is \
                     (no did-you-mean: the search stops after {SUGGEST_CAP} unknown keys)"
                ),
            ));
            continue;
        }
        searched += 1;
        if let Some(near) = closest(&key, known()) {
            out.push(
                cx.diag(
                    Severity::Warning,
                    "unknown-key",
                    &key,
                    format!("`{key}` is not a key any preset or the catalog defines; Primus would pass it through and it would do nothing"),
                )
                .hint(format!("did you mean `{near}`?")),
            );
        } else {
            out.push(cx.diag(
                Severity::Info,
                "unlisted-key",
                &key,
                format!(
                    "`{key}` is not defined by the presets; Primus passes it to the backend as is"
                ),
            ));
        }
    }
}

/// Unknown keys per module that get a did-you-mean search.
pub const SUGGEST_CAP: usize = 200;

fn key_in_overrides(cx: &Ctx<'_>, key: &str) -> bool {
    cx.exp
        .file
        .get(&format!("modules.{}.overrides.{key}", cx.module.name))
        .is_some()
}

/// The closest candidate when it is near enough to be a likely typo: normalized
/// Damerau-Levenshtein similarity ≥ 0.8, or at most 2 edits for a key of 5 or more characters.
/// Candidates whose length alone puts them out of reach are skipped before the distance is
/// computed (an edit changes the length by at most one).
pub fn closest<'c>(key: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    let mut best: Option<(f64, &str)> = None;
    let klen = key.chars().count();
    for c in candidates {
        if c == key {
            continue;
        }
        let clen = c.chars().count();
        let longest = klen.max(clen);
        // Within reach: at most 20 % of the longer length, or 2, in edits.
        let reach = (longest / 5).max(if klen >= 5 { 2 } else { 0 });
        if klen.abs_diff(clen) > reach {
            continue;
        }
        let score = strsim::normalized_damerau_levenshtein(key, c);
        let dist = strsim::damerau_levenshtein(key, c);
        let near = score >= 0.8 || (dist <= 2 && key.len() >= 5);
        if near && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c)
}
