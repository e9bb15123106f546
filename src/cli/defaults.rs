//! `primus-tune defaults [--json]`: every setting the defaults file may hold, its effective
//! value for a command given no flag, and where that value comes from — an environment
//! variable, the file (`file:line:column`) or built in — as `git config --list --show-origin`
//! shows its own. A flag of a command still wins over all of these.

use super::{CliError, print_json};
use crate::app::Defaults;
use crate::app::defaults::{Entry, Origin, defaults_path};
use crate::util::paths::display_path;
use clap::Args;
use serde_json::{Value, json};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct DefaultsArgs {
    /// Print JSON: the file, the state file and each setting with its `source`.
    #[arg(long)]
    pub json: bool,
}

/// A setting's source in the one JSON shape of `source`: `{"kind", "text"}`, and the place for
/// the file.
fn origin_json(o: &Origin) -> Value {
    match o {
        Origin::File(l) => json!({
            "kind": o.kind(),
            "text": o.text(),
            "file": l.file.display().to_string(),
            "line": l.line,
            "column": l.column,
        }),
        _ => crate::domain::source::named_json(o.kind(), &o.text()),
    }
}

/// A value as the table shows it; null is decided per run.
fn value_text(e: &Entry) -> String {
    match (&e.value, e.key.as_str()) {
        (Value::Null, "gpus") => "(detected per run)".into(),
        (Value::Null, "workspace") => "(the experiment's own)".into(),
        (Value::String(s), _) => s.clone(),
        (Value::Array(a), _) => a
            .iter()
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(" "),
        (v, _) => v.to_string(),
    }
}

pub fn run(a: &DefaultsArgs, d: &Defaults) -> Result<ExitCode, CliError> {
    let entries = crate::app::session::effective_defaults(d, |k| std::env::var(k).ok());
    let file = defaults_path();
    let state = crate::app::state::state_path();
    if a.json {
        print_json(&json!({
            "file": file.as_ref().map(|f| f.display().to_string()),
            "file_exists": d.file.is_some(),
            "state_file": state.as_ref().map(|f| f.display().to_string()),
            "settings": entries.iter().map(|e| json!({
                "key": e.key,
                "value": e.value,
                "source": origin_json(&e.origin),
            })).collect::<Vec<_>>(),
        }));
        return Ok(ExitCode::SUCCESS);
    }
    match (&file, d.file.is_some()) {
        (Some(f), true) => println!("defaults file: {}", display_path(f)),
        (Some(f), false) => println!("defaults file: {} (none there)", display_path(f)),
        (None, _) => println!("defaults file: none (no $HOME)"),
    }
    if let Some(s) = &state {
        println!("state file:    {}", display_path(s));
    }
    println!();
    let rows: Vec<(String, String, String)> = entries
        .iter()
        .map(|e| (e.key.clone(), value_text(e), e.origin.text()))
        .collect();
    let kw = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    let vw = rows
        .iter()
        .map(|r| r.1.chars().count())
        .max()
        .unwrap_or(0)
        .min(40);
    for (k, v, o) in rows {
        println!("{k:<kw$}  {v:<vw$}  {o}");
    }
    Ok(ExitCode::SUCCESS)
}
