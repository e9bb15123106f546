//! The experiment as the interactive screens show it: the checklist, every catalog flag with
//! its effective value and source, the diagnostics, the knob spaces, the HipBLASLt stages — with
//! the unsaved edits applied and planned against the file on disk (nothing is written here).

use super::compare::show_json;
pub use crate::app::edit::PendingEdit;
use crate::app::edit::requests;
use crate::app::{AppError, Session};
use crate::checklist::{self, Checklist};
use crate::config::catalog::{Backend, Catalog, FlagType, Kind, Step};
use crate::config::diag::{Diagnostic, Severity};
use crate::config::edit;
use crate::config::megatron_defaults::unset;
use crate::config::{Experiment, lint};
use std::path::{Path, PathBuf};

/// The experiment as the Checklist and Flags screens show it, with the unsaved edits applied.
#[derive(Debug, Clone)]
pub struct ConfigView {
    pub path: PathBuf,
    pub module: String,
    pub framework: String,
    pub model: Option<String>,
    pub checklist: Checklist,
    pub flags: Vec<FlagRow>,
    /// Every diagnostic of the effective config (lint), errors first.
    pub diagnostics: Vec<Diagnostic>,
    /// The file's modification time and length when it was read (to notice outside changes).
    pub stamp: Option<FileStamp>,
    /// The knob spaces a sweep can use, and why one does not apply to this experiment.
    pub spaces: Vec<SpaceRow>,
    /// The HipBLASLt tuning stages (Megatron experiments).
    pub gemm: Option<crate::gemm::status::GemmStatus>,
    /// The launch profile whose `env:` the values were resolved with (None: the session's own
    /// environment).
    pub profile: Option<crate::app::launch::view::ViewProfile>,
    /// A variable that profile sets is one the screens show: a catalog environment variable,
    /// or one a value of the module was written with (`${PRIMUS_PP:1}`).
    pub profile_shown: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpaceRow {
    pub name: String,
    pub description: String,
    /// Candidates before legality.
    pub candidates: usize,
    pub not_applicable: Option<String>,
    /// The flags its knobs set, and those of its knobs that move memory (what a profile must
    /// model for its sweep to rank evidence: [`crate::app::sweep::unmodeled`]).
    pub flags: Vec<String>,
    pub memory_flags: Vec<String>,
    /// Its candidates are made for the sweep's world and model (the parallel layouts):
    /// `candidates` is 0 until then, and `layouts` lists them for a world.
    pub per_world: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub modified: std::time::SystemTime,
    pub len: u64,
}

/// One flag with its effective value: a catalog flag, or a key of the resolved module that the
/// catalog does not describe (Primus passes it on as it is; `show --all` lists it too).
#[derive(Debug, Clone, PartialEq)]
pub struct FlagRow {
    /// The checklist step of a catalog flag; None for a key outside the catalog.
    pub step: Option<Step>,
    pub name: String,
    /// The effective value as YAML would print it (`-` when unset and without default).
    pub value: String,
    pub default: String,
    /// `file:line via ...`, `default`, or `command line`.
    pub source: String,
    /// The line of the experiment file that sets it (None: set elsewhere or not at all).
    pub experiment_line: Option<u32>,
    pub ty: FlagType,
    /// Allowed values of an enum.
    pub choices: Vec<String>,
    pub help: String,
    pub doc: String,
    /// Lint findings on this flag (errors and warnings).
    pub problems: Vec<(Severity, String)>,
    /// Set by an unsaved edit.
    pub pending: bool,
    /// An environment variable, not a config key (shown, edited in the launch environment).
    pub env_var: bool,
}

/// The unsaved edits, planned against the file on disk.
#[derive(Debug, Clone, Default)]
pub struct PlanView {
    /// Unified diff of the experiment file.
    pub diff: String,
    pub diagnostics: Vec<Diagnostic>,
    /// Nothing may be written (a type, range or cross-flag error).
    pub refused: bool,
    /// Each edit: the key, its value now (`unset` when the file does not set it) and the text
    /// written.
    pub changes: Vec<ChangeView>,
}

/// One planned edit, as `set` prints it: `key: old → new`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeView {
    pub key: String,
    pub old: String,
    pub new: String,
}

impl ConfigView {
    pub fn errors(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    pub fn warnings(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count()
    }

    /// The flags of one checklist step.
    pub fn flags_of(&self, step: Step) -> impl Iterator<Item = &FlagRow> {
        self.flags.iter().filter(move |f| f.step == Some(step))
    }
}

/// What the Flags screen says of a key outside the catalog.
const OTHER_KEY_HELP: &str = "Not in primus-tune's catalog: Primus passes it to the backend as \
     it is. An edit keeps the type of its current value (a bool, a number, a list).";

/// Errors and warnings of lint on one key.
fn problems_of(diagnostics: &[Diagnostic], key: &str) -> Vec<(Severity, String)> {
    diagnostics
        .iter()
        .filter(|d| d.severity != Severity::Info && d.flag.as_deref() == Some(key))
        .map(|d| (d.severity, d.message.clone()))
        .collect()
}

/// How a key outside the catalog is edited: as the type of its current value.
fn value_type(v: &crate::config::Value) -> FlagType {
    use crate::config::Value;
    match v {
        Value::Bool(_) => FlagType::Bool,
        Value::Int(_) => FlagType::Int,
        Value::Float(_) => FlagType::Float,
        Value::List(_) => FlagType::List,
        Value::Null | Value::Str(_) | Value::Map(_) => FlagType::String,
    }
}

/// Whether a variable the view's profile sets is a catalog environment variable or one a value
/// of `module` was written with ([`ConfigView::profile_shown`]).
fn profile_shown(
    session: &Session,
    module: &crate::config::resolve::Module,
    catalog: &Catalog,
) -> bool {
    let Some(p) = &session.view_profile else {
        return false;
    };
    let templated: std::collections::BTreeSet<String> = module
        .params
        .leaves()
        .into_iter()
        .filter_map(|(_, l)| l.template.clone())
        .flat_map(|t| crate::config::env::references(&t).into_iter().map(|r| r.0))
        .collect();
    p.sets
        .iter()
        .any(|k| templated.contains(k) || catalog.env_vars().any(|f| f.name == *k))
}

/// Where a value comes from: its file and line, and the variables it was written with that
/// are set (`moe.yaml:61 · PRIMUS_PP=2 (profile pp2)`).
fn source_of(session: &Session, l: &crate::config::tree::Leaf) -> String {
    let refs = l
        .template
        .as_deref()
        .map(|t| session.env_refs(t))
        .unwrap_or_default();
    crate::app::launch::env::source_with(l.origin.describe(), &refs)
}

pub fn stamp(path: &Path) -> Option<FileStamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: m.modified().ok()?,
        len: m.len(),
    })
}

/// The experiment with `pending` applied to its text (the file as it is when the edit is refused
/// and does not even resolve), and the plan of the edit as the screens show it.
fn planned(
    session: &Session,
    on_disk: Experiment,
    pending: &[PendingEdit],
) -> Result<(Experiment, Option<PlanView>), AppError> {
    let (path, opts) = (&session.experiment, &session.load);
    let plan = edit::plan(
        &on_disk,
        opts,
        &requests(pending),
        None,
        false,
        Catalog::builtin(),
    )
    .map_err(super::super::edit::set_error)?;
    let mut with = opts.clone();
    with.texts
        .insert(on_disk.path.clone(), plan.doc.text().to_string());
    let exp = Experiment::load(path, &with).unwrap_or(on_disk);
    let changes = plan
        .changes
        .iter()
        .map(|c| ChangeView {
            key: c.key.clone(),
            old: c
                .old
                .as_ref()
                .map_or("unset".into(), |v| crate::config::literal::render(v, None)),
            new: c.literal.clone(),
        })
        .collect();
    let view = PlanView {
        diff: plan.doc.diff(),
        diagnostics: plan.diagnostics,
        refused: plan.refused,
        changes,
    };
    Ok((exp, Some(view)))
}

/// A row for each flag of the catalog and each environment variable it knows, then for every
/// other key the module sets.
fn flag_rows(
    session: &Session,
    m: &crate::config::Module,
    diagnostics: &[Diagnostic],
    pending: &[PendingEdit],
) -> Vec<FlagRow> {
    let (catalog, opts) = (Catalog::builtin(), &session.load);
    let backend = Backend::from_framework(&m.framework);
    let pending_keys: Vec<&str> = pending.iter().map(|p| p.key.as_str()).collect();
    let exp_file = std::fs::canonicalize(&session.experiment).ok();
    let in_experiment = |p: &std::path::Path| {
        p == session.experiment
            || Some(p) == exp_file.as_deref()
            || (exp_file.is_some() && std::fs::canonicalize(p).ok() == exp_file)
    };
    let line_in_experiment = |l: &crate::config::tree::Leaf| {
        (l.origin.line > 0 && in_experiment(&l.origin.file)).then_some(l.origin.line)
    };
    let mut flags: Vec<FlagRow> = catalog
        .flags_for(backend)
        .chain(catalog.env_vars())
        .filter(|f| f.removed.is_none())
        .map(|f| {
            let env_var = f.kind == Kind::Env;
            let (value, source, experiment_line) = if env_var {
                match opts.env.get(&f.name) {
                    Some(v) => (v.to_string(), session.env_source(&f.name).text(), None),
                    None => (show_json(&f.default), "default".to_string(), None),
                }
            } else {
                match m.get(&f.name) {
                    Some(l) => (
                        l.value.to_string(),
                        source_of(session, l),
                        line_in_experiment(l),
                    ),
                    // No file sets it: Megatron's own default ("default", as the screen
                    // dims it), or nothing passed on at all.
                    None => match unset(m, &f.name).value() {
                        Some(v) => (show_json(&v.to_json()), "default".to_string(), None),
                        None => ("(not set)".into(), "not set".to_string(), None),
                    },
                }
            };
            FlagRow {
                step: Some(f.step),
                name: f.name.clone(),
                value,
                default: show_json(&f.default),
                source,
                experiment_line,
                ty: f.ty,
                choices: f.values.clone(),
                help: f.help.clone(),
                doc: f.doc.clone(),
                problems: problems_of(diagnostics, &f.name),
                pending: pending_keys.contains(&f.name.as_str()),
                env_var,
            }
        })
        .collect();
    let others = catalog
        .other_keys(m, backend)
        .into_iter()
        .map(|(key, l)| FlagRow {
            step: None,
            value: l.value.to_string(),
            default: "-".into(),
            source: source_of(session, l),
            experiment_line: line_in_experiment(l),
            ty: value_type(&l.value),
            choices: Vec::new(),
            help: OTHER_KEY_HELP.into(),
            doc: "`primus-tune show --all`, which lists every resolved key".into(),
            problems: problems_of(diagnostics, &key),
            pending: pending_keys.contains(&key.as_str()),
            env_var: false,
            name: key,
        });
    flags.extend(others);
    flags
}

/// The knob spaces (built in and the user's), each with whether it applies to `exp`.
fn space_rows(exp: &Experiment) -> Vec<SpaceRow> {
    let mut spaces = crate::tune::space::all(crate::tune::space::user_dir().as_deref())
        .unwrap_or_else(|_| crate::tune::space::builtin());
    if let Ok(layouts) = crate::tune::space::find(crate::tune::space::LAYOUT_SPACE, None) {
        spaces.push(layouts);
    }
    spaces
        .into_iter()
        .map(|sp| SpaceRow {
            candidates: sp.candidates().len(),
            not_applicable: sp.not_applicable(exp),
            flags: sp.flags(),
            memory_flags: sp.memory_flags(),
            per_world: sp.is_unfilled(),
            name: sp.name,
            description: sp.description,
        })
        .collect()
}

/// Read `path` and build what the screens show; with `pending` edits, plan them against the
/// file on disk and show the edited text's effective values (nothing is written).
pub fn build(
    session: &Session,
    pending: &[PendingEdit],
) -> Result<(ConfigView, Option<PlanView>), AppError> {
    let (path, opts) = (&session.experiment, &session.load);
    let catalog = Catalog::builtin();
    let stamp = stamp(path);
    let on_disk = Experiment::load(path, opts)?;
    let (exp, plan) = if pending.is_empty() {
        (on_disk, None)
    } else {
        planned(session, on_disk, pending)?
    };
    let (mut diagnostics, _) = crate::app::ack::split(
        session,
        lint::lint(&exp, &opts.env, opts.world.as_ref(), catalog),
    )?;
    diagnostics.sort_by_key(|d| match d.severity {
        Severity::Error => 0,
        Severity::Warning => 1,
        Severity::Info => 2,
    });
    let (gemm, acks) = super::facts::stored(session, &exp)?;
    let memory = super::measured_memory(session, &exp);
    let known = super::known(session, &acks, memory.as_ref());
    let checklist = checklist::evaluate(&exp, &opts.env, catalog, &diagnostics, &gemm, &known);
    let m = exp.main_module();
    let flags = flag_rows(session, m, &diagnostics, pending);
    let spaces = space_rows(&exp);
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
            profile_shown: profile_shown(session, m, catalog),
            profile: session.view_profile.clone(),
        },
        plan,
    ))
}
