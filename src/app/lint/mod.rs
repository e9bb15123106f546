//! Linting one or more experiments (files, and the experiments in folders) for one world size:
//! what `lint` prints in every format. A file that cannot be loaded (YAML error, missing
//! `extends` target, no Primus root, ...) is a `load-error` finding at its place, so one broken
//! experiment does not hide the others' findings.

mod discover;

pub use discover::experiment_files;

use super::AppError;
use super::session::{SessionOptions, load_options};
use crate::config::catalog::Catalog;
use crate::config::diag::{Diagnostic, Location, Severity, counts};
use crate::config::suppress::{Decisions, Suppressed};
use crate::config::{ConfigError, Experiment};
use crate::megatron::World;
use std::path::{Path, PathBuf};

/// The rule code of a file that could not be loaded.
pub use crate::config::lint::codes::LOAD_ERROR;

/// One linted file, its findings, and those the user's decisions suppress (`primus-tune.toml`,
/// `# primus-tune: ignore[...]` comments), each with its reason.
#[derive(Debug, Clone)]
pub struct LintedFile {
    pub path: PathBuf,
    pub diagnostics: Vec<Diagnostic>,
    pub suppressed: Vec<Suppressed>,
}

/// Every file's findings and the world they were checked for.
#[derive(Debug, Clone)]
pub struct LintReport {
    pub files: Vec<LintedFile>,
    pub world: Option<World>,
}

/// Findings by severity, over every file, and the findings suppressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub errors: usize,
    pub warnings: usize,
    pub infos: usize,
    pub ignored: usize,
}

impl Counts {
    pub fn of(diags: &[Diagnostic]) -> Counts {
        let (errors, warnings, infos) = counts(diags);
        Counts {
            errors,
            warnings,
            infos,
            ignored: 0,
        }
    }

    /// A file's counts.
    pub fn of_file(f: &LintedFile) -> Counts {
        Counts {
            ignored: f.suppressed.len(),
            ..Counts::of(&f.diagnostics)
        }
    }
}

impl LintReport {
    pub fn counts(&self) -> Counts {
        self.files.iter().fold(Counts::default(), |a, f| {
            let c = Counts::of_file(f);
            Counts {
                errors: a.errors + c.errors,
                warnings: a.warnings + c.warnings,
                infos: a.infos + c.infos,
                ignored: a.ignored + c.ignored,
            }
        })
    }

    pub fn diagnostics(&self) -> impl Iterator<Item = &Diagnostic> {
        self.files.iter().flat_map(|f| &f.diagnostics)
    }

    pub fn suppressed(&self) -> impl Iterator<Item = &Suppressed> {
        self.files.iter().flat_map(|f| &f.suppressed)
    }
}

/// Lint `inputs` (files, and folders searched for experiments; none: the session's experiment,
/// the bundled example's copy when `options.config` is None) with the options' `--env`, `--set`
/// and world size, and with `profile`'s launch environment when one is named (its `env:` under
/// `--env`, as `run --profile` launches it). Fails only on what concerns every file: a missing
/// input or a folder without an experiment ([`AppError::NoInput`]), malformed `--env`/`--set`
/// ([`AppError::Usage`]), an unknown profile.
pub fn lint_inputs(
    options: &SessionOptions,
    inputs: &[PathBuf],
    profile: Option<&str>,
) -> Result<LintReport, AppError> {
    let files = if inputs.is_empty() {
        vec![match &options.config {
            Some(p) => p.clone(),
            None => {
                crate::util::bundled::editable_default_experiment_in(options.data_home.as_deref())?
            }
        }]
    } else {
        experiment_files(inputs)?
    };
    let (load, env) = load_options(options)?;
    let load = match profile {
        Some(name) => {
            let p = super::trial::find_profile(Some(name))?;
            let defaults = match &options.defaults {
                Some(d) => d.clone(),
                None => super::Defaults::load()?,
            };
            let detected = super::launch::placement::Detected::default();
            let base = super::launch::PlanBase {
                load: &load,
                env: &env,
                gpus: options.gpus,
                defaults: &defaults,
                detected: &detected,
                telemetry: options.telemetry.as_ref(),
            };
            super::launch::LaunchPlan::for_view(&base, &p).job_load(&load)
        }
        None => load,
    };
    let catalog = Catalog::builtin();
    // A mistake in a `primus-tune.toml` many experiments share is reported once.
    let mut reported: Vec<Diagnostic> = Vec::new();
    let files = files
        .into_iter()
        .map(|path| {
            let found = match Experiment::load(&path, &load) {
                Ok(exp) => crate::config::lint::lint(&exp, &load.env, load.world.as_ref(), catalog),
                Err(e) if e.is_missing_file() => {
                    return Err(AppError::NoInput {
                        why: crate::util::paths::unopenable_why(&path, "no such file"),
                        path,
                    });
                }
                Err(e) => vec![load_error(&path, &e)],
            };
            let found = at_the_file(found, &path);
            // Only what is written in the tree counts here, as it does in CI (not the
            // workspace's records of earlier versions).
            let mut decisions = Decisions::load(&path);
            let (mut diagnostics, suppressed) = decisions.split(found);
            for p in decisions.problems {
                if !reported.contains(&p) {
                    reported.push(p.clone());
                    diagnostics.push(p);
                }
            }
            Ok(LintedFile {
                path,
                diagnostics,
                suppressed,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(LintReport {
        files,
        world: load.world,
    })
}

/// Every finding placed: one without a place of its own (a finding about the whole experiment,
/// such as the world size) is at the linted file, line unknown, so that every output names the
/// file it belongs to (GitHub annotations and SARIF results need one, as ruff's do).
fn at_the_file(diagnostics: Vec<Diagnostic>, path: &Path) -> Vec<Diagnostic> {
    diagnostics
        .into_iter()
        .map(|mut d| {
            d.location.get_or_insert_with(|| Location {
                file: path.to_path_buf(),
                line: 0,
                column: 0,
            });
            d
        })
        .collect()
}

/// A file that cannot be loaded as a finding: at the place the error names (the experiment, or
/// the preset or `extends` target at fault), else at the experiment.
pub fn load_error(experiment: &Path, e: &ConfigError) -> Diagnostic {
    let (line, column) = e.position().unwrap_or((0, 0));
    let file = e.path().unwrap_or(experiment).to_path_buf();
    Diagnostic::new(Severity::Error, LOAD_ERROR, e.message()).at(Some(Location {
        file,
        line,
        column,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_broken_file_is_a_finding_at_its_line_and_the_others_are_still_linted() {
        let d = tempfile::tempdir().unwrap();
        crate::util::bundled::extract(d.path()).unwrap();
        let exps = d.path().join("experiments");
        let broken = exps.join("broken.yaml");
        std::fs::write(&broken, "work_group: a\nmodules:\n  x: [unclosed\n").unwrap();
        let options = SessionOptions {
            gpus: Some(8),
            ..SessionOptions::default()
        };
        let r = lint_inputs(&options, std::slice::from_ref(&exps), None).unwrap();
        assert_eq!(r.files.len(), 4, "{:?}", r.files);
        let b = r.files.iter().find(|f| f.path == broken).unwrap();
        assert_eq!(b.diagnostics.len(), 1);
        let d0 = &b.diagnostics[0];
        assert_eq!((d0.code, d0.severity), (LOAD_ERROR, Severity::Error));
        let at = d0.location.as_ref().unwrap();
        assert_eq!((at.file.clone(), at.line > 1), (broken.clone(), true));
        assert!(!d0.message.starts_with(&broken.display().to_string()));
        assert_eq!(r.counts().errors, 1, "{:?}", r.files);
        assert_eq!(r.world.map(|w| w.gpus), Some(8));
    }
}
