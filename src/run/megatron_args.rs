//! Upstream Megatron-LM's command line, as its own argparse parser defines it
//! (`presets/megatron-lm-args.tsv`, dumped from the parser by docs/validation/megatron-args.py):
//! which option sets each setting (`dest`) and how. Primus configs name settings by their dest
//! (`add_bias_linear: false`), so a setting is rendered with the option that gives it that value
//! (`--disable-bias-linear`); a setting upstream does not have (a Primus-only one such as
//! `use_turbo_attention`) is refused instead of failing Megatron's argparse after start-up.

use crate::domain::value::{Value, yaml_float};
use std::collections::BTreeMap;

/// The table shipped in the binary (upstream Megatron-LM at the commit its first line names).
const SHIPPED: &str = include_str!("../../presets/megatron-lm-args.tsv");

/// The environment variable naming a table of your own Megatron-LM (made with
/// docs/validation/megatron-args.py), used instead of the shipped one.
pub const TABLE_ENV: &str = "PRIMUS_TUNE_MEGATRON_ARGS";

/// How an option sets its dest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Takes a value (`--num-layers 4`).
    Store,
    /// Sets it true (`--bf16`).
    True,
    /// Sets it false (`--disable-bias-linear` for `add_bias_linear`).
    False,
    /// Sets a constant.
    Const,
}

#[derive(Debug, Clone)]
struct Opt {
    option: String,
    kind: Kind,
    /// argparse `nargs` (`+`, `*`, a count), empty for one value.
    nargs: String,
}

/// Megatron-LM's options by dest.
#[derive(Debug, Clone)]
pub struct MegatronArgs {
    /// What the table describes (its first line).
    pub origin: String,
    by_dest: BTreeMap<String, Vec<Opt>>,
}

impl MegatronArgs {
    /// Parse a table: a `#` first line naming its origin, then `dest option kind nargs` lines.
    pub fn parse(text: &str) -> Result<MegatronArgs, String> {
        let mut by_dest: BTreeMap<String, Vec<Opt>> = BTreeMap::new();
        let mut origin = String::new();
        for (n, line) in text.lines().enumerate() {
            if let Some(c) = line.strip_prefix('#') {
                if origin.is_empty() {
                    origin = c.split(':').next().unwrap_or("").trim().to_string();
                }
                continue;
            }
            if line.trim().is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            let kind = match f.get(2).copied() {
                Some("store") => Kind::Store,
                Some("true") => Kind::True,
                Some("false") => Kind::False,
                Some("const") => Kind::Const,
                _ => return Err(format!("line {}: `dest option kind nargs` expected", n + 1)),
            };
            by_dest.entry(f[0].to_string()).or_default().push(Opt {
                option: f[1].to_string(),
                kind,
                nargs: f.get(3).copied().unwrap_or("").to_string(),
            });
        }
        if by_dest.is_empty() {
            return Err("no options".into());
        }
        Ok(MegatronArgs { origin, by_dest })
    }

    /// The shipped table.
    pub fn shipped() -> MegatronArgs {
        MegatronArgs::parse(SHIPPED).unwrap_or_else(|_| MegatronArgs {
            origin: String::new(),
            by_dest: BTreeMap::new(),
        })
    }

    /// The table a launch uses: the file [`TABLE_ENV`] names, else the shipped one.
    pub fn for_env(env: &crate::config::env::Env) -> Result<MegatronArgs, String> {
        match env.get(TABLE_ENV) {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("{TABLE_ENV}={path}: {e}"))
                .and_then(|t| MegatronArgs::parse(&t).map_err(|e| format!("{path}: {e}"))),
            None => Ok(MegatronArgs::shipped()),
        }
    }

    /// Whether upstream has this setting.
    pub fn knows(&self, dest: &str) -> bool {
        self.by_dest.contains_key(dest)
    }

    /// Every option string that sets `dest`.
    #[cfg(any(test, feature = "testkit"))]
    pub fn options(&self, dest: &str) -> Vec<&str> {
        self.by_dest
            .get(dest)
            .map(|v| v.iter().map(|o| o.option.as_str()).collect())
            .unwrap_or_default()
    }

    /// The arguments that give `dest` the value `value` (none: Megatron's default already is
    /// it, or the value is null), or why no option can.
    pub fn render(&self, dest: &str, value: &Value) -> Result<Vec<String>, String> {
        let Some(opts) = self.by_dest.get(dest) else {
            return Err(format!(
                "`{dest}` is not an argument of upstream Megatron-LM ({}); a Primus-only setting \
                 cannot be passed to it",
                self.origin
            ));
        };
        let of = |k: Kind| opts.iter().find(|o| o.kind == k);
        match value {
            Value::Null => Ok(Vec::new()),
            Value::Bool(b) => {
                let wanted = if *b { Kind::True } else { Kind::False };
                if let Some(o) = of(wanted) {
                    return Ok(vec![o.option.clone()]);
                }
                if let Some(o) = of(Kind::Store) {
                    return Ok(vec![
                        o.option.clone(),
                        if *b { "True" } else { "False" }.into(),
                    ]);
                }
                // Only the opposite switch exists: leaving it out gives this value.
                Ok(Vec::new())
            }
            v => {
                let o = of(Kind::Store).ok_or_else(|| {
                    format!(
                        "`{dest}` is a switch in Megatron-LM ({}); it takes true or false, not `{v}`",
                        opts.iter()
                            .map(|o| o.option.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
                let mut out = vec![o.option.clone()];
                match v {
                    Value::List(items) if !o.nargs.is_empty() => {
                        out.extend(items.iter().map(plain))
                    }
                    other => out.push(plain(other)),
                }
                Ok(out)
            }
        }
    }
}

/// A value as Megatron's argparse types read it (floats in YAML's spelling: `1.0e-05`).
fn plain(v: &Value) -> String {
    match v {
        Value::Float(f) => yaml_float(*f),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_is_upstreams_parser() {
        let t = MegatronArgs::shipped();
        assert!(t.origin.contains("d98e8a64"), "{}", t.origin);
        assert!(t.knows("num_layers") && t.knows("micro_batch_size"));
        assert!(!t.knows("use_turbo_attention"), "a Primus-only setting");
        let r = |k: &str, v: Value| t.render(k, &v).unwrap();
        assert_eq!(r("num_layers", Value::Int(4)), ["--num-layers", "4"]);
        assert_eq!(r("bf16", Value::Bool(true)), ["--bf16"]);
        assert!(r("bf16", Value::Bool(false)).is_empty());
        // The dest is Primus' key; the option is whatever upstream calls the switch.
        assert_eq!(
            r("add_bias_linear", Value::Bool(false)),
            ["--disable-bias-linear"]
        );
        assert!(r("add_bias_linear", Value::Bool(true)).is_empty());
        assert_eq!(
            r("apply_rope_fusion", Value::Bool(false)),
            ["--no-rope-fusion"]
        );
        assert_eq!(
            r("fp8", Value::Str("hybrid".into())),
            ["--fp8-format", "hybrid"]
        );
        assert_eq!(r("lr", Value::Float(1.0e-5)), ["--lr", "1.0e-05"]);
        assert!(r("recompute_granularity", Value::Null).is_empty());
        let e = t
            .render("use_turbo_attention", &Value::Bool(true))
            .unwrap_err();
        assert!(e.contains("not an argument of upstream Megatron-LM"), "{e}");
        assert!(t.render("bf16", &Value::Int(3)).is_err());
    }

    #[test]
    fn lists_follow_nargs_and_bad_tables_are_refused() {
        let t = MegatronArgs::parse(
            "# upstream Megatron-LM test: x\nlayers\t--layers\tstore\t+\nname\t--name\tstore\t\n",
        )
        .unwrap();
        assert_eq!(t.origin, "upstream Megatron-LM test");
        let list = Value::List(vec![Value::Int(1), Value::Int(2)]);
        assert_eq!(t.render("layers", &list).unwrap(), ["--layers", "1", "2"]);
        assert!(MegatronArgs::parse("a\tb\n").is_err());
        assert!(MegatronArgs::parse("# only a comment\n").is_err());
    }
}
