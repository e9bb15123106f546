//! Reading `config.toml`: every key known, every value of its type, every error at its
//! `file:line:column` (a mistyped key with "did you mean").

use super::file::{ColorChoice, Defaults, KeyOverride, Location, Setting};
use crate::app::error::DefaultsError;
use crate::run::launch::slurm::SlurmSettings;
use crate::util::suggest::closest;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml_edit::{Item, TableLike};

/// The keys of the file's top level, of `[ui]` and of `[slurm]`.
pub const TOP_KEYS: [&str; 7] = [
    "profile",
    "gpus",
    "backend",
    "workspace",
    "ui",
    "keys",
    "slurm",
];
pub const UI_KEYS: [&str; 2] = ["color", "mouse"];
pub const SLURM_KEYS: [&str; 6] = [
    "nodes",
    "gpus_per_node",
    "partition",
    "account",
    "time",
    "sbatch_args",
];

/// The defaults file `file`, whose text is `text`.
pub fn parse(text: &str, file: &Path) -> Result<Defaults, DefaultsError> {
    let cx = Cx { text, file };
    let doc = toml_edit::Document::parse(text).map_err(|e| DefaultsError {
        file: file.to_path_buf(),
        at: e.span().map(|s| line_col(text, s.start)),
        message: e.message().trim_end().to_string(),
    })?;
    let root = doc.as_table();
    let mut out = Defaults {
        file: Some(file.to_path_buf()),
        ..Defaults::default()
    };
    for (key, item) in root.iter() {
        match key {
            "profile" => {
                let s = cx.string(root, key, item, key)?;
                if s.value.trim().is_empty() {
                    return Err(DefaultsError::at(&s.at, "`profile` is empty"));
                }
                out.profile = Some(s);
            }
            "gpus" => out.gpus = Some(cx.positive(root, key, item, key)?),
            "backend" => {
                let s = cx.string(root, key, item, key)?;
                cx.one_of(&s, "a telemetry backend", crate::telemetry::select::NAMES)?;
                out.backend = Some(s);
            }
            "workspace" => {
                let s = cx.string(root, key, item, key)?;
                if s.value.trim().is_empty() {
                    return Err(DefaultsError::at(&s.at, "`workspace` is empty"));
                }
                out.workspace = Some(Setting {
                    value: expand(&s.value, file),
                    at: s.at,
                });
            }
            "ui" => ui(&cx, cx.table(root, key, item)?, &mut out)?,
            "keys" => out.keys = keys(&cx, cx.table(root, key, item)?)?,
            "slurm" => slurm(&cx, cx.table(root, key, item)?, &mut out)?,
            other => return Err(cx.unknown(root, other, "the defaults file", &TOP_KEYS)),
        }
    }
    Ok(out)
}

/// `[ui]`: `color` and `mouse`.
fn ui(cx: &Cx, t: &dyn TableLike, out: &mut Defaults) -> Result<(), DefaultsError> {
    for (key, item) in t.iter() {
        match key {
            "color" => {
                let s = cx.string(t, key, item, "[ui] color")?;
                cx.one_of(&s, "a colour choice", &ColorChoice::NAMES)?;
                out.color = Some(Setting {
                    value: ColorChoice::from_name(&s.value).unwrap_or_default(),
                    at: s.at,
                });
            }
            "mouse" => {
                let at = cx.item_at(t, key, item);
                let value = item.as_bool().ok_or_else(|| {
                    DefaultsError::at(
                        &at,
                        format!(
                            "`[ui] mouse` must be true or false, not {}",
                            type_name(item)
                        ),
                    )
                })?;
                out.mouse = Some(Setting { value, at });
            }
            other => return Err(cx.unknown(t, other, "[ui]", &UI_KEYS)),
        }
    }
    Ok(())
}

/// `[keys]`: action = "key" or ["key", ...] (the TUI checks the names).
fn keys(cx: &Cx, t: &dyn TableLike) -> Result<Vec<KeyOverride>, DefaultsError> {
    let mut out = Vec::new();
    for (action, item) in t.iter() {
        let at = cx.key_at(t, action);
        let what = format!("[keys] {action}");
        let keys = match item.as_value() {
            Some(v) if v.is_str() => vec![cx.string(t, action, item, &what)?],
            Some(toml_edit::Value::Array(a)) => {
                let mut keys = Vec::new();
                for v in a.iter() {
                    let vat = cx.loc(v.span()).unwrap_or_else(|| at.clone());
                    let s = v.as_str().ok_or_else(|| {
                        DefaultsError::at(
                            &vat,
                            format!("`{what}` must list keys as strings, not {}", v.type_name()),
                        )
                    })?;
                    keys.push(Setting {
                        value: s.to_string(),
                        at: vat,
                    });
                }
                if keys.is_empty() {
                    return Err(DefaultsError::at(&at, format!("`{what}` lists no key")));
                }
                keys
            }
            _ => {
                return Err(DefaultsError::at(
                    &cx.item_at(t, action, item),
                    format!(
                        "`{what}` must be a key (\"x\") or a list of keys ([\"x\", \"Enter\"]), not {}",
                        type_name(item)
                    ),
                ));
            }
        };
        out.push(KeyOverride {
            action: action.to_string(),
            at,
            keys,
        });
    }
    Ok(out)
}

/// `[slurm]`: as `run --slurm`'s options.
fn slurm(cx: &Cx, t: &dyn TableLike, out: &mut Defaults) -> Result<(), DefaultsError> {
    let mut s = SlurmSettings::default();
    for (key, item) in t.iter() {
        let what = format!("[slurm] {key}");
        let at = cx.item_at(t, key, item);
        let value = match key {
            "nodes" | "gpus_per_node" => {
                let n = cx.positive(t, key, item, &what)?.value;
                let n = u32::try_from(n)
                    .map_err(|_| DefaultsError::at(&at, format!("`{what}` is too large")))?;
                if key == "nodes" {
                    s.nodes = Some(n);
                } else {
                    s.gpus_per_node = Some(n);
                }
                serde_json::json!(n)
            }
            "partition" | "account" | "time" => {
                let v = cx.string(t, key, item, &what)?.value;
                let slot = match key {
                    "partition" => &mut s.partition,
                    "account" => &mut s.account,
                    _ => &mut s.time,
                };
                *slot = Some(v.clone());
                serde_json::json!(v)
            }
            "sbatch_args" => {
                let bad = || {
                    DefaultsError::at(
                        &at,
                        format!(
                            "`{what}` must be a list of strings, not {}",
                            type_name(item)
                        ),
                    )
                };
                let arr = item.as_array().ok_or_else(bad)?;
                for a in arr.iter() {
                    s.sbatch_args.push(a.as_str().ok_or_else(bad)?.to_string());
                }
                serde_json::json!(s.sbatch_args)
            }
            other => return Err(cx.unknown(t, other, "[slurm]", &SLURM_KEYS)),
        };
        out.slurm_entries.push((key.to_string(), value, at));
    }
    out.slurm = s;
    Ok(())
}

/// `~` and `~/…` from `$HOME`; a relative path from the defaults file's folder.
fn expand(path: &str, file: &Path) -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    let p = match path.strip_prefix('~') {
        Some("") => home().unwrap_or_else(|| PathBuf::from(path)),
        Some(rest) if rest.starts_with('/') => match home() {
            Some(h) => h.join(rest.trim_start_matches('/')),
            None => PathBuf::from(path),
        },
        _ => PathBuf::from(path),
    };
    if p.is_relative() {
        crate::config::save::folder_of(file).join(p)
    } else {
        p
    }
}

/// An item's type as a message says it: `a string`, `an integer`, `a table`.
fn type_name(item: &Item) -> String {
    let name = item.type_name();
    let article = if name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {name}")
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
pub(crate) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The file being read: its text (for places) and path (for messages).
struct Cx<'a> {
    text: &'a str,
    file: &'a Path,
}

impl Cx<'_> {
    fn loc(&self, span: Option<Range<usize>>) -> Option<Location> {
        span.map(|s| {
            let (line, column) = line_col(self.text, s.start);
            Location {
                file: self.file.to_path_buf(),
                line,
                column,
            }
        })
    }

    /// Where `key` of table `t` is written (the file's start when the parser kept no place).
    fn key_at(&self, t: &dyn TableLike, key: &str) -> Location {
        self.loc(t.key(key).and_then(|k| k.span()))
            .unwrap_or_else(|| Location {
                file: self.file.to_path_buf(),
                line: 1,
                column: 1,
            })
    }

    /// Where `key`'s value is written (else the key).
    fn item_at(&self, t: &dyn TableLike, key: &str, item: &Item) -> Location {
        self.loc(item.span()).unwrap_or_else(|| self.key_at(t, key))
    }

    /// "unknown key" at the key, with the nearest known one.
    fn unknown(&self, t: &dyn TableLike, key: &str, place: &str, known: &[&str]) -> DefaultsError {
        let near = closest(key, known)
            .map(|n| format!("did you mean `{n}`? "))
            .unwrap_or_default();
        DefaultsError::at(
            &self.key_at(t, key),
            format!(
                "unknown key `{key}` in {place}; {near}(keys: {})",
                known.join(", ")
            ),
        )
    }

    fn table<'t>(
        &self,
        t: &dyn TableLike,
        key: &str,
        item: &'t Item,
    ) -> Result<&'t dyn TableLike, DefaultsError> {
        item.as_table_like().ok_or_else(|| {
            DefaultsError::at(
                &self.item_at(t, key, item),
                format!("`{key}` must be a table ([{key}]), not {}", type_name(item)),
            )
        })
    }

    fn string(
        &self,
        t: &dyn TableLike,
        key: &str,
        item: &Item,
        what: &str,
    ) -> Result<Setting<String>, DefaultsError> {
        let at = self.item_at(t, key, item);
        match item.as_str() {
            Some(s) => Ok(Setting {
                value: s.to_string(),
                at,
            }),
            None => Err(DefaultsError::at(
                &at,
                format!("`{what}` must be a string, not {}", type_name(item)),
            )),
        }
    }

    fn positive(
        &self,
        t: &dyn TableLike,
        key: &str,
        item: &Item,
        what: &str,
    ) -> Result<Setting<u64>, DefaultsError> {
        let at = self.item_at(t, key, item);
        match item.as_integer() {
            Some(n) if n >= 1 => Ok(Setting {
                value: n as u64,
                at,
            }),
            Some(n) => Err(DefaultsError::at(
                &at,
                format!("`{what}` must be a whole number of at least 1, not {n}"),
            )),
            None => Err(DefaultsError::at(
                &at,
                format!(
                    "`{what}` must be a whole number of at least 1, not {}",
                    type_name(item)
                ),
            )),
        }
    }

    /// A string value that must be one of `names`.
    fn one_of(&self, s: &Setting<String>, what: &str, names: &[&str]) -> Result<(), DefaultsError> {
        if names.contains(&s.value.as_str()) {
            return Ok(());
        }
        let near = closest(&s.value, names)
            .map(|n| format!("did you mean `{n}`? "))
            .unwrap_or_default();
        Err(DefaultsError::at(
            &s.at,
            format!("`{}` is not {what}; {near}({})", s.value, names.join(", ")),
        ))
    }
}
