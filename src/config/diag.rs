//! Diagnostics: what lint and the editor report.

use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

/// Error: Primus or Megatron refuses to start with this (an assert or ValueError), or the value
/// has the wrong type or range. Warning: accepted but silently ineffective or surprising.
/// Info: worth knowing, nothing wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Hash)]
pub struct Location {
    pub file: PathBuf,
    pub line: u32,
    pub column: u32,
}

impl Location {
    pub fn display_from(&self, base: &Path) -> String {
        let p = self.file.strip_prefix(base).unwrap_or(&self.file);
        if self.line == 0 {
            p.display().to_string()
        } else {
            format!("{}:{}:{}", p.display(), self.line, self.column)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Hash)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable identifier of the rule (kebab-case), for scripts and suppression.
    pub code: &'static str,
    pub message: String,
    /// The offending value, or where the fix should go.
    pub location: Option<Location>,
    pub hint: Option<String>,
    /// The flag (or env var) the diagnostic is about, when there is one.
    pub flag: Option<String>,
}

impl Diagnostic {
    pub fn new(severity: Severity, code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            code,
            message: message.into(),
            location: None,
            hint: None,
            flag: None,
        }
    }

    pub fn at(mut self, location: Option<Location>) -> Self {
        self.location = location;
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn flag(mut self, flag: impl Into<String>) -> Self {
        self.flag = Some(flag.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = &self.location {
            write!(f, "{}: ", l.display_from(Path::new("")))?;
        }
        write!(
            f,
            "{}[{}]: {}",
            self.severity.label(),
            self.code,
            self.message
        )?;
        if let Some(h) = &self.hint {
            write!(f, "\n  hint: {h}")?;
        }
        Ok(())
    }
}

/// Counts by severity.
pub fn counts(diags: &[Diagnostic]) -> (usize, usize, usize) {
    let n = |s| diags.iter().filter(|d| d.severity == s).count();
    (n(Severity::Error), n(Severity::Warning), n(Severity::Info))
}
