//! The TUI's calls into the config engine: read the experiment with the unsaved edits applied,
//! plan them (the same checks as `primus-tune set`), save them. Run by the event loop, never by
//! `update` or the views.

use super::model::{ConfigView, FileStamp, FlagRow, PendingEdit, PlanView, SpaceRow, show_json};
use crate::checklist;
use crate::config::catalog::{Backend, Catalog, Kind};
use crate::config::diag::Severity;
use crate::config::doc::SaveOptions;
use crate::config::edit::{self, SetRequest};
use crate::config::{Experiment, LoadOptions, lint};
use std::path::Path;

/// Why the view could not be built, in words for the status line.
pub type LoadError = String;

pub fn stamp(path: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: m.modified().ok()?,
        len: m.len(),
    })
}

fn requests(pending: &[PendingEdit]) -> Vec<SetRequest> {
    pending
        .iter()
        .map(|p| SetRequest {
            key: p.key.clone(),
            text: p.text.clone(),
        })
        .collect()
}

/// Read `path` and build what the screens show; with `pending` edits, plan them against the
/// file on disk and show the edited text's effective values (nothing is written).
pub fn build(
    path: &Path,
    opts: &LoadOptions,
    pending: &[PendingEdit],
) -> Result<(ConfigView, Option<PlanView>), LoadError> {
    let catalog = Catalog::builtin();
    let stamp = stamp(path);
    let on_disk = Experiment::load(path, opts).map_err(|e| e.to_string())?;
    let (exp, plan) = if pending.is_empty() {
        (on_disk, None)
    } else {
        let plan = edit::plan(&on_disk, opts, &requests(pending), None, false, catalog)
            .map_err(|e| e.to_string())?;
        let mut with = opts.clone();
        with.texts
            .insert(on_disk.path.clone(), plan.doc.text().to_string());
        // A refused edit may not even resolve; then the screens show the file as it is.
        let exp = Experiment::load(path, &with).unwrap_or(on_disk);
        let view = PlanView {
            diff: plan.doc.diff(),
            diagnostics: plan.diagnostics,
            refused: plan.refused,
        };
        (exp, Some(view))
    };
    let mut diagnostics = lint::lint(&exp, &opts.env, catalog);
    diagnostics.sort_by_key(|d| match d.severity {
        Severity::Error => 0,
        Severity::Warning => 1,
        Severity::Info => 2,
    });
    let gemm = gemm_status(&exp, &opts.env);
    let checklist = checklist::evaluate_with(&exp, &opts.env, catalog, &diagnostics, &gemm);
    let m = exp.main_module();
    let backend = Backend::from_framework(&m.framework);
    let pending_keys: Vec<&str> = pending.iter().map(|p| p.key.as_str()).collect();
    let flags = catalog
        .flags_for(backend)
        .chain(catalog.env_vars())
        .filter(|f| f.removed.is_none())
        .map(|f| {
            let env_var = f.kind == Kind::Env;
            let (value, source) = if env_var {
                match opts.env.get(&f.name) {
                    Some(v) => (v.to_string(), "environment".to_string()),
                    None => (show_json(&f.default), "default".to_string()),
                }
            } else {
                match m.get(&f.name) {
                    Some(l) => (l.value.to_string(), l.origin.describe()),
                    None => (show_json(&f.default), "default".to_string()),
                }
            };
            FlagRow {
                step: f.step,
                name: f.name.clone(),
                value,
                default: show_json(&f.default),
                source,
                ty: f.ty,
                choices: f.values.clone(),
                help: f.help.clone(),
                doc: f.doc.clone(),
                problems: diagnostics
                    .iter()
                    .filter(|d| d.severity != Severity::Info && d.flag.as_deref() == Some(&f.name))
                    .map(|d| (d.severity, d.message.clone()))
                    .collect(),
                pending: pending_keys.contains(&f.name.as_str()),
                env_var,
            }
        })
        .collect();
    let spaces = crate::tune::space::all(crate::tune::space::user_dir().as_deref())
        .unwrap_or_else(|_| crate::tune::space::builtin())
        .into_iter()
        .map(|sp| SpaceRow {
            candidates: sp.candidates().len(),
            not_applicable: sp.not_applicable(&exp),
            name: sp.name,
            description: sp.description,
        })
        .collect();
    Ok((
        ConfigView {
            gemm: exp.main_module().is_megatron().then_some(gemm),
            spaces,
            path: exp.path.clone(),
            module: m.name.clone(),
            framework: m.framework.clone(),
            model: checklist.model.clone(),
            checklist,
            flags,
            diagnostics,
            stamp,
        },
        plan,
    ))
}

/// The HipBLASLt stages for the Checklist's GEMM step: the files, the environment, and the
/// last stage-3 comparison in the trial store. No hipblaslt-bench probe (it would launch a GPU
/// program on every reload).
fn gemm_status(exp: &Experiment, env: &crate::config::env::Env) -> crate::gemm::status::GemmStatus {
    let db = crate::run::trial::workspace_dir(&exp.path).join("trials.db");
    let comparison = db
        .exists()
        .then(|| crate::store::Store::open(&db).ok())
        .flatten()
        .and_then(|s| crate::gemm::runner::latest_comparison(&s, &exp.path));
    crate::gemm::status::of_experiment(exp, env, None, comparison)
}

/// Check one typed value the way `set` types it (catalog type, enum, range); the message names
/// what is wrong. Pure: used while the user types.
pub fn check_value(key: &str, text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("type a value (null for none)".into());
    }
    let catalog = Catalog::builtin();
    let flag = catalog.flag(key);
    let v = edit::interpret(key, text, flag, None).map_err(|d| d.message)?;
    if let Some(f) = flag {
        if !f.values.is_empty() && !v.is_null() {
            let s = v.to_string();
            if !f.values.contains(&s) {
                return Err(format!("`{key}` is one of {}", f.values.join(", ")));
            }
        }
        if let Some(x) = v.as_f64()
            && (f.min.is_some_and(|m| x < m) || f.max.is_some_and(|m| x > m))
        {
            return Err(match (f.min, f.max) {
                (Some(lo), Some(hi)) => format!("`{key}` must be between {lo} and {hi}"),
                (Some(lo), None) => format!("`{key}` must be at least {lo}"),
                (None, Some(hi)) => format!("`{key}` must be at most {hi}"),
                (None, None) => unreachable!("checked above"),
            });
        }
    }
    Ok(())
}

/// Plan and write the edits (atomic write, `.bak` kept). Ok: what was saved, in words.
pub fn save(path: &Path, opts: &LoadOptions, pending: &[PendingEdit]) -> Result<String, LoadError> {
    let exp = Experiment::load(path, opts).map_err(|e| e.to_string())?;
    let mut plan = edit::plan(
        &exp,
        opts,
        &requests(pending),
        None,
        false,
        Catalog::builtin(),
    )
    .map_err(|e| e.to_string())?;
    if plan.refused {
        let why: Vec<String> = plan
            .diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .map(|d| d.message.clone())
            .collect();
        return Err(format!("not saved: {}", why.join("; ")));
    }
    plan.doc
        .save(SaveOptions { backup: true })
        .map_err(|e| e.to_string())?;
    Ok(format!(
        "saved {} change(s) to {}",
        plan.changes.len(),
        crate::util::paths::display_path(path)
    ))
}
