//! `primus-tune show CONFIG [--json] [--flag NAME ...] [--all] [--profile NAME]`

use super::{CliError, LoadArgs, display_path, print_json};
use crate::app::launch::env::EnvRef;
use crate::config::catalog::{Backend, Catalog, Flag, Step};
use crate::config::megatron_defaults::{Unset, unset};
use crate::config::patches::Patched;
use crate::config::resolve::Module;
use crate::config::tree::Leaf;
use crate::domain::value::Value;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Show only these keys (repeatable); any resolved key, not only catalog flags.
    #[arg(long = "flag", value_name = "NAME")]
    pub flags: Vec<String>,
    /// Show every resolved key, not only the catalog's tuning flags.
    #[arg(long)]
    pub all: bool,
    /// The module to show (default: pre_trainer).
    #[arg(long)]
    pub module: Option<String>,
    /// Resolve as this launch profile's trials see the experiment: with the variables its
    /// `env:` sets (under `--env`), as `run --profile NAME` launches it.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

/// One row: a key, its effective value and where it came from.
struct Row<'a> {
    name: String,
    leaf: Option<&'a Leaf>,
    flag: Option<&'a Flag>,
    /// A mapping written where the flag's value belongs (what Primus passes on instead), and
    /// where it is written.
    mapping: Option<(Value, String)>,
    /// The variables its value was written with (`${PRIMUS_PP:1}`), as resolved.
    env: Vec<EnvRef>,
    /// What the key amounts to when no file sets it (Megatron's default, or nothing).
    unset: Unset,
    /// The Primus patch that set the value Primus runs, if one did.
    patch: Option<&'a Patched>,
}

/// The mapping a file wrote under a flag's key, when it is one (`micro_batch_size: {a: 1}`).
fn mapping_of(module: &crate::config::resolve::Module, name: &str) -> Option<(Value, String)> {
    match module.params.get(name)? {
        crate::config::tree::Item::Map(t) => Some((
            Value::Map(
                t.leaves()
                    .into_iter()
                    .map(|(k, l)| (k, l.value.clone()))
                    .collect(),
            ),
            format!(
                "{} (a mapping where a value belongs: lint error)",
                t.origin.describe()
            ),
        )),
        crate::config::tree::Item::Leaf(_) => None,
    }
}

pub fn run(a: &ShowArgs) -> Result<ExitCode, CliError> {
    let session = a.load.view_session(a.profile.as_deref())?;
    let exp = session.load()?;
    let module = match &a.module {
        Some(m) => exp
            .module(m)
            .ok_or_else(|| CliError::Usage(format!("the experiment has no module `{m}`")))?,
        None => exp.main_module(),
    };
    let catalog = Catalog::builtin();
    let backend = Backend::from_framework(&module.framework);
    let mut rows = rows(module, catalog, backend, a)?;
    for r in &mut rows {
        if let Some(t) = r.leaf.and_then(|l| l.template.as_deref()) {
            r.env = session.env_refs(t);
        }
    }
    if a.json {
        print_json(&serde_json::Value::Array(
            rows.iter().map(row_json).collect(),
        ));
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} — module {} ({}){}",
        display_path(&exp.path),
        module.name,
        module.framework,
        module
            .model_file
            .as_ref()
            .map(|m| format!(", model {}", crate::config::tree::file_name(m)))
            .unwrap_or_default()
    );
    if let Some(p) = &session.view_profile {
        println!("{}", as_launched(p));
    }
    let detailed = !a.flags.is_empty();
    let mut current: Option<Option<Step>> = None;
    for r in &rows {
        let step = r.flag.map(|f| f.step);
        if !detailed && current != Some(step) {
            println!();
            println!("{}", step.map_or("Other keys", Step::title));
            current = Some(step);
        }
        print_row(r, detailed);
    }
    Ok(ExitCode::SUCCESS)
}

/// The line that says a view resolves as a launch profile launches the experiment.
pub fn as_launched(p: &crate::app::launch::view::ViewProfile) -> String {
    if p.sets.is_empty() {
        format!(
            "as profile {} launches it (its env: sets nothing here)",
            p.name
        )
    } else {
        format!(
            "as profile {} launches it: with its env: {} (under --env)",
            p.name,
            p.sets.join(", ")
        )
    }
}

fn rows<'a>(
    module: &'a Module,
    catalog: &'a Catalog,
    backend: Option<Backend>,
    a: &ShowArgs,
) -> Result<Vec<Row<'a>>, CliError> {
    if !a.flags.is_empty() {
        return a
            .flags
            .iter()
            .map(|name| {
                let leaf = module.get(name);
                let flag = catalog.flag(name);
                let unset = unset(module, name);
                if leaf.is_none() && flag.is_none() && unset == Unset::Absent {
                    let keys: Vec<String> = module.params.leaves().into_iter().map(|(k, _)| k).collect();
                    let near = crate::config::lint::closest_key(name, keys.iter().map(String::as_str));
                    return Err(CliError::Usage(format!(
                        "`{name}` is not set by this experiment or its presets and is not a catalog flag{}",
                        near.map(|n| format!("; did you mean `{n}`?")).unwrap_or_default()
                    )));
                }
                Ok(Row {
                    name: name.clone(),
                    leaf,
                    flag,
                    mapping: mapping_of(module, name),
                    env: Vec::new(),
                    unset,
                    patch: module.patch_of(name),
                })
            })
            .collect();
    }
    let mut rows: Vec<Row<'a>> = Vec::new();
    for step in Step::ALL {
        for f in catalog.flags_for(backend).filter(|f| f.step == step) {
            let leaf = module.get(&f.name);
            let mapping = mapping_of(module, &f.name);
            let unset = unset(module, &f.name);
            // A flag no file of this chain sets and Megatron does not know: nothing is passed on.
            if leaf.is_none()
                && mapping.is_none()
                && (f.removed.is_some() || unset == Unset::Absent)
            {
                continue;
            }
            rows.push(Row {
                name: f.name.clone(),
                leaf,
                flag: Some(f),
                mapping,
                env: Vec::new(),
                unset,
                patch: module.patch_of(&f.name),
            });
        }
    }
    if a.all {
        for (k, leaf) in catalog.other_keys(module, backend) {
            rows.push(Row {
                patch: module.patch_of(&k),
                name: k,
                leaf: Some(leaf),
                flag: None,
                mapping: None,
                env: Vec::new(),
                unset: Unset::Absent,
            });
        }
    }
    Ok(rows)
}

fn value_of(r: &Row<'_>) -> Value {
    if let Some((m, _)) = &r.mapping {
        return m.clone();
    }
    match r.leaf {
        Some(l) => l.value.clone(),
        None => r.unset.value().cloned().unwrap_or(Value::Null),
    }
}

fn short(s: String, max: usize) -> String {
    if s.chars().count() <= max {
        s
    } else {
        let cut: String = s.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

fn print_row(r: &Row<'_>, detailed: bool) {
    let value = value_of(r);
    let source = match (&r.mapping, r.leaf) {
        (Some((_, at)), _) => at.clone(),
        (None, Some(l)) => l.origin.describe(),
        (None, None) => r.unset.describe(),
    };
    let source = if r.mapping.is_some() {
        source
    } else {
        crate::app::launch::env::source_with(source, &r.env)
    };
    let changed = r
        .flag
        .is_some_and(|f| r.leaf.is_some() && f.default_value() != value);
    if !detailed {
        println!(
            "  {:<38} {:<14} {}{}",
            short(r.name.clone(), 38),
            short(value.to_string(), 14),
            source,
            if changed {
                format!(
                    "  (default {})",
                    r.flag.map(Flag::default_value).unwrap_or(Value::Null)
                )
            } else {
                String::new()
            }
        );
        return;
    }
    println!();
    println!("{} = {value}", r.name);
    if let Some(f) = r.flag {
        println!("  step:    {}", f.step.title());
        println!(
            "  type:    {}{}",
            f.ty.label(),
            if f.values.is_empty() {
                String::new()
            } else {
                format!(" ({})", f.values.join(", "))
            }
        );
        println!(
            "  default: {}{}",
            f.default_value(),
            f.default_from
                .as_ref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
        println!("  help:    {}", f.help);
        println!("  docs:    {}", f.doc);
    }
    println!("  source:  {source}");
    if let Some(l) = r.leaf {
        println!("  layer:   {}", l.origin.layer.label());
        if let Some(p) = r.patch {
            println!(
                "  patched: {} ({}, {}): Primus runs this value",
                p.patch.id, p.patch.file, p.because
            );
        }
        if let Some(t) = &l.template {
            println!("  written: {t}");
            for e in &r.env {
                println!("  env:     {}", e.describe());
            }
        }
        for s in l.shadowed.iter().rev() {
            println!("  overrides {} from {}", s.value, s.origin.describe());
        }
    }
}

fn row_json(r: &Row<'_>) -> serde_json::Value {
    let value = value_of(r);
    serde_json::json!({
        "name": r.name,
        "value": value.to_json(),
        "type": value.type_name(),
        "default": r.flag.map(|f| f.default.clone()),
        "step": r.flag.map(|f| f.step.key()),
        "source": match r.leaf {
            Some(l) => crate::config::source::origin_json(Some(&l.origin)),
            None => serde_json::json!({"kind": "default", "text": r.unset.describe()}),
        },
        "via": r.leaf.map(|l| l.origin.via.iter().map(|p| p.display().to_string()).collect::<Vec<_>>()),
        "layer": r.leaf.map(|l| l.origin.layer),
        "template": r.leaf.and_then(|l| l.template.clone()),
        "env": r.env.iter().map(|e| serde_json::json!({
            "name": e.name,
            "value": e.value,
            "default": e.default,
            "from": e.source.key(),
            "profile": match &e.source {
                crate::app::launch::env::EnvSource::Profile(p) => Some(p.as_str()),
                _ => None,
            },
        })).collect::<Vec<_>>(),
        "patch": r.patch.map(|p| serde_json::json!({
            "id": p.patch.id,
            "file": p.patch.file,
            "because": p.because,
        })),
        "overridden": r.leaf.map(|l| l.shadowed.iter().map(|s| serde_json::json!({
            "value": s.value.to_json(),
            "file": s.origin.file.display().to_string(),
            "line": s.origin.line,
            "column": s.origin.column,
        })).collect::<Vec<_>>()),
    })
}
