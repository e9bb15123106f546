//! What the screens show, as plain data built from the core (`load.rs` builds it; the views only
//! read it). Nothing here does I/O.

use crate::checklist::Checklist;
use crate::config::catalog::{FlagType, Step};
use crate::config::diag::{Diagnostic, Severity};
use std::path::PathBuf;

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
}

#[derive(Debug, Clone, PartialEq)]
pub struct SpaceRow {
    pub name: String,
    pub description: String,
    /// Candidates before legality.
    pub candidates: usize,
    pub not_applicable: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub modified: std::time::SystemTime,
    pub len: u64,
}

/// One catalog flag with its effective value.
#[derive(Debug, Clone, PartialEq)]
pub struct FlagRow {
    pub step: Step,
    pub name: String,
    /// The effective value as YAML would print it (`-` when unset and without default).
    pub value: String,
    pub default: String,
    /// `file:line via ...`, `default`, or `command line`.
    pub source: String,
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
}

/// One unsaved edit: the flag and the text the user typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEdit {
    pub key: String,
    pub text: String,
}

/// How a value is written for the user: YAML-like, short.
pub fn show_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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
        self.flags.iter().filter(move |f| f.step == step)
    }
}
