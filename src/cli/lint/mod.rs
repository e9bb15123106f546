//! `primus-tune lint [PATH ...] [--format text|json|github|sarif] [--strict]`: files and the
//! experiments in folders, one summary line, findings for people, scripts, GitHub Actions and
//! code scanning.

mod github;
mod sarif;

use super::exit::{ERRORS, WARNINGS};
use super::{CliError, LoadFlags, diag_json, display_path, print_json, style};
use crate::app::lint::{Counts, LintReport, lint_inputs};
use crate::megatron::World;
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// `file:line:col: severity[rule]: message`, then the summary line.
    Text,
    /// One JSON object: counts, the world, every file and every finding.
    Json,
    /// GitHub Actions workflow commands (`::error file=...,line=...::message`), then the
    /// summary line: annotations on the pull request.
    Github,
    /// SARIF 2.1.0 (GitHub code scanning, other SARIF viewers).
    Sarif,
}

#[derive(Debug, Args)]
#[command(after_help = "\
Exit status: 0 no errors (warnings allowed), 1 warnings with --strict, 2 errors (a file that \
cannot be loaded is an error: rule load-error), 64 usage error, 66 no input (a PATH that does \
not exist, a folder with no experiment).

Suppressing a finding, with the reason (any lint code or advice rule): `id = \"why\"` under \
[ignore] (every experiment under the folder) or [per-file-ignores.\"PATH\"] in the nearest \
primus-tune.toml up from the experiment (`recommend CONFIG --ack ID --reason ...` adds it), or \
`# primus-tune: ignore[id, ...] why` after a YAML value (that line) or on a line of its own \
(that file). Suppressed findings are listed as ignored[id] with the reason; they never make the \
exit status.")]
pub struct LintArgs {
    /// Experiment files and folders. A file is linted whatever its name; a folder is searched
    /// recursively (hidden folders and links to folders skipped) for experiment YAMLs: the
    /// *.yaml and *.yml files with a top-level `modules:` key, which presets do not have.
    /// Default: the bundled example.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// `--env`, `--set`, the Primus root, and `--gpus N` (the world size Megatron's parallel and
    /// batch sizes are checked against), the same for every file.
    #[command(flatten)]
    pub load: LoadFlags,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Print JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Exit with status 1 when there are warnings (errors always give 2).
    #[arg(long)]
    pub strict: bool,
    /// Lint as this launch profile's trials see the experiment: with the variables its `env:`
    /// sets (under `--env`), as `run --profile NAME` lints a trial before launching it.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

/// The world as the summary line says it.
fn world_text(w: Option<&World>) -> String {
    match w {
        Some(w) => w.to_string(),
        None => "world size unknown (no --gpus, GPUS_PER_NODE or GPU detected): its rules skipped"
            .into(),
    }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// `N files, E errors, W warnings, I infos; world ...`: "info" is the severity's name
/// everywhere (text, JSON, the summary).
pub fn summary(files: usize, c: Counts, world: Option<&World>) -> String {
    // The suppressed count only when there are some: the line reads as before otherwise.
    let ignored = if c.ignored > 0 {
        format!(", {} ignored", c.ignored)
    } else {
        String::new()
    };
    format!(
        "{}, {}, {}, {}{ignored}; {}",
        plural(files, "file"),
        plural(c.errors, "error"),
        plural(c.warnings, "warning"),
        plural(c.infos, "info"),
        world_text(world)
    )
}

/// 2 with errors, 1 with warnings under `--strict`, else 0.
pub fn status(c: Counts, strict: bool) -> u8 {
    if c.errors > 0 {
        ERRORS
    } else if c.warnings > 0 && strict {
        WARNINGS
    } else {
        0
    }
}

fn json(r: &LintReport) -> serde_json::Value {
    let c = r.counts();
    serde_json::json!({
        "files": r.files.iter().map(|f| {
            let c = Counts::of_file(f);
            serde_json::json!({
                "file": f.path.display().to_string(),
                "errors": c.errors,
                "warnings": c.warnings,
                "infos": c.infos,
                "ignored": c.ignored,
            })
        }).collect::<Vec<_>>(),
        "world": r.world.as_ref().map(|w| serde_json::json!({
            "gpus": w.gpus,
            "source": crate::config::source::named_json(w.source_name(), &w.source_text()),
        })),
        "errors": c.errors,
        "warnings": c.warnings,
        "infos": c.infos,
        "ignored": c.ignored,
        "diagnostics": r.diagnostics().map(diag_json).collect::<Vec<_>>(),
        "suppressed": r.suppressed().map(|s| {
            let mut v = diag_json(&s.diagnostic);
            v["reason"] = s.by.why().into();
            v["by"] = serde_json::json!({
                "rule": s.by.rule,
                "at": crate::config::suppress::place(&s.by.at),
                "in_source": s.by.in_source(),
            });
            v
        }).collect::<Vec<_>>(),
    })
}

pub fn run(a: &LintArgs) -> Result<ExitCode, CliError> {
    let format = if a.json { Format::Json } else { a.format };
    let report = lint_inputs(&a.load.options(None), &a.paths, a.profile.as_deref())?;
    let c = report.counts();
    let line = summary(report.files.len(), c, report.world.as_ref());
    match format {
        // Buffered: a line-buffered stdout made one write a line, a tenth of a lint of 75,000
        // findings.
        Format::Text => {
            let colour = style::stdout();
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for d in report.diagnostics() {
                writeln!(out, "{}", style::diagnostic(d, colour))?;
            }
            for s in report.suppressed() {
                writeln!(out, "{}", style::suppressed(s, colour))?;
            }
            writeln!(out, "{}", crate::util::text::visible(&line))?;
            out.flush()?;
        }
        Format::Json => print_json(&json(&report)),
        Format::Github => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for d in report.diagnostics() {
                writeln!(out, "{}", github::command(d, &display_path))?;
            }
            writeln!(out, "{}", crate::util::text::visible(&line))?;
            out.flush()?;
        }
        Format::Sarif => print_json(&sarif::log(&report)),
    }
    Ok(ExitCode::from(status(c, a.strict)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_counts_with_one_word_per_severity() {
        let c = Counts {
            errors: 1,
            warnings: 2,
            infos: 0,
            ignored: 0,
        };
        let s = summary(3, c, None);
        assert!(
            s.starts_with("3 files, 1 error, 2 warnings, 0 infos; world size unknown"),
            "{s}"
        );
        assert_eq!(status(c, false), ERRORS);
        let w = Counts { errors: 0, ..c };
        assert_eq!((status(w, false), status(w, true)), (0, WARNINGS));
        assert_eq!(status(Counts::default(), true), 0);
        // Suppressed findings are counted apart, and never make the status.
        let quiet = Counts {
            ignored: 4,
            ..Counts::default()
        };
        assert!(
            summary(1, quiet, None)
                .starts_with("1 file, 0 errors, 0 warnings, 0 infos, 4 ignored; ")
        );
        assert_eq!(status(quiet, true), 0);
    }
}
