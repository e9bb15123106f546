//! Decisions written in the user's tree, which CI sees as lint does: `primus-tune.toml` (the
//! nearest one up from the experiment; ruff's `ignore` and `per-file-ignores`) and
//! `# primus-tune: ignore[id, ...] reason` comments in the YAML (ruff's `# noqa`). An id is a
//! lint code or an advice rule: one id space ([`crate::config::lint::codes`]). A lint finding
//! they cover is suppressed, with the reason; a rule they name for the whole experiment is
//! acknowledged (the checklist shows it so, `recommend` holds it back).

pub mod edit;
pub mod file;
pub mod inline;

#[cfg(any(test, feature = "testkit"))]
pub use file::FILE_NAME;

use crate::config::diag::{Diagnostic, Location, Severity};
use crate::config::lint::codes::{self, BAD_IGNORE_FILE, LOAD_ERROR, UNKNOWN_RULE};
use crate::domain::advice::Ack;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The largest file whose comments are read (the loader's own default cap).
const MAX_BYTES: u64 = 16 << 20;

/// What a decision covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "path")]
pub enum Scope {
    /// `[ignore]`: every experiment under the file's folder.
    Folder,
    /// `[per-file-ignores."PATTERN"]` matching the experiment.
    Experiment,
    /// A comment on a line of its own: the file it is in.
    File(PathBuf),
    /// A comment after a value: that line of that file.
    Line(PathBuf, u32),
}

/// One decision: the id, why, where it is written, what it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suppression {
    pub rule: String,
    pub reason: String,
    pub at: Location,
    pub scope: Scope,
}

impl Suppression {
    /// Written beside the finding (a comment in the YAML), as SARIF's `inSource`; else in
    /// `primus-tune.toml` (`external`).
    pub fn in_source(&self) -> bool {
        matches!(self.scope, Scope::File(_) | Scope::Line(..))
    }

    /// `file:line:column` where it is written, as the user reads it.
    pub fn place(&self) -> String {
        place(&self.at)
    }

    /// The reason, or that none was given (a comment may leave it out).
    pub fn why(&self) -> &str {
        if self.reason.is_empty() {
            "no reason given"
        } else {
            &self.reason
        }
    }
}

/// A finding a decision covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppressed {
    pub diagnostic: Diagnostic,
    pub by: Suppression,
}

/// The decisions in force for one experiment, and what is wrong with them.
#[derive(Debug, Clone, Default)]
pub struct Decisions {
    pub entries: Vec<Suppression>,
    /// `bad-ignore-file` (a `primus-tune.toml` that cannot be read) and `unknown-rule` (an id
    /// that names nothing), at their places: lint reports them.
    pub problems: Vec<Diagnostic>,
    experiment: PathBuf,
    /// The files whose comments were read.
    read: Vec<PathBuf>,
}

/// `file:line:column` as the user reads it (`file` alone without a line).
pub fn place(l: &Location) -> String {
    let file = crate::util::paths::display_path(&l.file);
    if l.line == 0 {
        file
    } else {
        format!("{file}:{}:{}", l.line, l.column)
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
}

fn unknown_rule(id: &str, at: Location) -> Diagnostic {
    let ids = codes::known_ids();
    Diagnostic::new(
        Severity::Warning,
        UNKNOWN_RULE,
        format!(
            "unknown rule `{id}`: neither a lint code nor an advice rule, so this suppresses \
             nothing{}",
            crate::util::suggest::did_you_mean(id, &ids)
        ),
    )
    .at(Some(at))
    .hint("name a lint code (lint's `[code]`) or an advice rule (the checklist's `[rule]`; `recommend --ack` lists them all)")
}

impl Decisions {
    /// The decisions for `experiment`: its `primus-tune.toml` and the comments in its file.
    pub fn load(experiment: &Path) -> Decisions {
        let mut d = Decisions {
            experiment: experiment.to_path_buf(),
            ..Decisions::default()
        };
        if let Some(toml) = experiment.parent().and_then(file::find) {
            d.read_file(&toml);
        }
        d.read_comments(experiment);
        d
    }

    fn read_file(&mut self, toml: &Path) {
        let parsed = std::fs::read_to_string(toml)
            .map_err(|e| {
                Box::new(
                    Diagnostic::new(
                        Severity::Error,
                        BAD_IGNORE_FILE,
                        format!("cannot read {}: {e}", toml.display()),
                    )
                    .at(Some(Location {
                        file: toml.to_path_buf(),
                        line: 0,
                        column: 0,
                    })),
                )
            })
            .and_then(|text| file::parse(&text, toml));
        let entries = match parsed {
            Ok(e) => e,
            Err(d) => return self.problems.push(*d),
        };
        let dir = toml.parent().map(Path::to_path_buf).unwrap_or_default();
        let rel = std::path::absolute(&self.experiment)
            .ok()
            .and_then(|e| e.strip_prefix(&dir).ok().map(Path::to_path_buf))
            .map(|r| r.to_string_lossy().replace('\\', "/"));
        for e in entries {
            if !codes::is_known(&e.rule) {
                self.problems.push(unknown_rule(&e.rule, e.at.clone()));
                continue;
            }
            let scope = match &e.pattern {
                None => Scope::Folder,
                Some(p) if rel.as_deref().is_some_and(|r| file::matches(p, r)) => Scope::Experiment,
                Some(p) if same_file(&dir.join(p), &self.experiment) => Scope::Experiment,
                Some(_) => continue,
            };
            self.entries.push(Suppression {
                rule: e.rule,
                reason: e.reason,
                at: e.at,
                scope,
            });
        }
    }

    /// The `# primus-tune: ignore[...]` comments of `path` (once per file).
    pub fn read_comments(&mut self, path: &Path) {
        if self.read.iter().any(|p| p == path) {
            return;
        }
        self.read.push(path.to_path_buf());
        // Only a regular file of a sane size: a FIFO would block, a device never end (the
        // loader says what is wrong with such an input).
        let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= MAX_BYTES);
        let Some(text) = regular
            .then(|| std::fs::read_to_string(path).ok())
            .flatten()
        else {
            return;
        };
        for c in inline::comments(&text) {
            for (id, column) in c.ids {
                let at = Location {
                    file: path.to_path_buf(),
                    line: c.line,
                    column,
                };
                if !codes::is_known(&id) {
                    self.problems.push(unknown_rule(&id, at));
                    continue;
                }
                let scope = if c.own_line {
                    Scope::File(path.to_path_buf())
                } else {
                    Scope::Line(path.to_path_buf(), c.line)
                };
                self.entries.push(Suppression {
                    rule: id,
                    reason: c.reason.clone(),
                    at,
                    scope,
                });
            }
        }
    }

    /// The decision that covers finding `d`, if any. A file that cannot be read (`load-error`,
    /// `bad-ignore-file`) is never suppressed: nothing else could be checked.
    pub fn covering(&self, d: &Diagnostic) -> Option<&Suppression> {
        if d.code == LOAD_ERROR || d.code == BAD_IGNORE_FILE {
            return None;
        }
        self.entries.iter().find(|s| {
            s.rule == d.code
                && match &s.scope {
                    Scope::Folder | Scope::Experiment => true,
                    Scope::File(f) => d.location.as_ref().is_some_and(|l| same_file(&l.file, f)),
                    Scope::Line(f, n) => d
                        .location
                        .as_ref()
                        .is_some_and(|l| l.line == *n && same_file(&l.file, f)),
                }
        })
    }

    /// The findings in force and those a decision covers (reading the comments of every file a
    /// finding is in).
    pub fn split(&mut self, diags: Vec<Diagnostic>) -> (Vec<Diagnostic>, Vec<Suppressed>) {
        let files: Vec<PathBuf> = diags
            .iter()
            .filter_map(|d| d.location.as_ref().map(|l| l.file.clone()))
            .collect();
        for f in files {
            self.read_comments(&f);
        }
        let mut kept = Vec::new();
        let mut suppressed = Vec::new();
        for d in diags {
            match self.covering(&d).cloned() {
                Some(by) => suppressed.push(Suppressed { diagnostic: d, by }),
                None => kept.push(d),
            }
        }
        (kept, suppressed)
    }

    /// The rules acknowledged for the whole experiment: every decision of its
    /// `primus-tune.toml`, a comment on a line of its own in its file, and a comment anywhere in
    /// it naming an advice rule (advice is about the experiment, not a line).
    pub fn acks(&self) -> Vec<Ack> {
        let mut out: Vec<Ack> = Vec::new();
        for s in &self.entries {
            let whole = match &s.scope {
                Scope::Folder | Scope::Experiment => true,
                Scope::File(f) => same_file(f, &self.experiment),
                Scope::Line(f, _) => {
                    crate::domain::advice::find(&s.rule).is_some() && same_file(f, &self.experiment)
                }
            };
            if whole && !out.iter().any(|a| a.rule == s.rule) {
                out.push(Ack {
                    rule: s.rule.clone(),
                    reason: s.why().to_string(),
                    at: None,
                    from: s.place(),
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
