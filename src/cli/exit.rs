//! Exit statuses, one meaning each (docs/ci.md, "Exit status"), and how a fatal error is reported:
//! `error: ...` on stderr, and with `--json` also `{"error": {...}}` on stdout.

use super::CliError;
use crate::app::AppError;
use crate::config::ConfigError;
use std::process::ExitCode;

/// Warnings with `lint --strict`.
pub const WARNINGS: u8 = 1;
/// Errors: lint errors, or a command that failed (an invalid config, a refused edit, ...).
pub const ERRORS: u8 = 2;
/// A trial, sweep or GEMM stage ran but did not complete: the trial failed or was stopped, the
/// sweep was stopped, cut short or measured nothing to decide on.
pub const NOT_COMPLETED: u8 = 3;
/// The command conflicts with what the workspace recorded: `sweep --resume` with an iteration
/// budget other than the study's.
pub const CONFLICT: u8 = 4;
/// EX_USAGE (sysexits.h): the command line is wrong (an unknown command or option, a bad
/// value, a malformed `--set`/`--env`).
pub const USAGE: u8 = 64;
/// EX_NOINPUT: a file or folder named as input does not exist, a folder holds no experiment,
/// a trial or study named does not exist, or the workspace has no trial database yet.
pub const NO_INPUT: u8 = 66;
/// EX_CANTCREAT: an output named on the command line (`report --out`, `man --out`, the
/// monitor's snapshot file, the trial database of `--db`/`--workspace`) cannot be created.
pub const CANT_CREATE: u8 = 73;
/// EX_TEMPFAIL: another process holds or changed what the command needed, and nothing was
/// done; the same command succeeds later. The study is being run by another runner (it holds
/// the study's lease: JSON kind `busy`), or a save found the file changed by another program
/// since it was read (kind `changed`; run again, the edit applies to the new text).
pub const TEMP_FAIL: u8 = 75;

/// What kind of failure an error is, as `--json` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Usage,
    NoInput,
    CantCreate,
    Busy,
    Changed,
    Conflict,
    Failed,
}

impl Kind {
    pub fn code(self) -> u8 {
        match self {
            Kind::Usage => USAGE,
            Kind::NoInput => NO_INPUT,
            Kind::CantCreate => CANT_CREATE,
            Kind::Busy | Kind::Changed => TEMP_FAIL,
            Kind::Conflict => CONFLICT,
            Kind::Failed => ERRORS,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Usage => "usage",
            Kind::NoInput => "no-input",
            Kind::CantCreate => "cant-create",
            Kind::Busy => "busy",
            Kind::Changed => "changed",
            Kind::Conflict => "conflict",
            Kind::Failed => "failed",
        }
    }
}

fn config_kind(e: &ConfigError) -> Kind {
    match e {
        ConfigError::BadOverride { .. } => Kind::Usage,
        e if e.is_missing_file() => Kind::NoInput,
        _ => Kind::Failed,
    }
}

fn io_kind(e: &std::io::Error) -> Kind {
    if e.kind() == std::io::ErrorKind::NotFound {
        Kind::NoInput
    } else {
        Kind::Failed
    }
}

impl CliError {
    pub fn kind(&self) -> Kind {
        match self {
            CliError::Usage(_) => Kind::Usage,
            CliError::NoInput(_) => Kind::NoInput,
            CliError::CantCreate(_) => Kind::CantCreate,
            CliError::Failed(_) => Kind::Failed,
            CliError::Config(e) => config_kind(e),
            CliError::Io(e) => io_kind(e),
            CliError::Edit(e) if matches!(**e, crate::config::doc::EditError::Conflict { .. }) => {
                Kind::Conflict
            }
            CliError::Edit(_) => Kind::Failed,
            CliError::App(e) => match e.as_ref() {
                // A name of a fixed set that is none of them: a bad value.
                AppError::Usage(_)
                | AppError::Space(crate::tune::space::SpaceError::NotFound { .. })
                | AppError::Profile(crate::run::profile::ProfileError::NotFound { .. }) => {
                    Kind::Usage
                }
                AppError::NoInput { .. }
                | AppError::NoDatabase { .. }
                | AppError::NoStudy { .. }
                | AppError::NoTrial { .. } => Kind::NoInput,
                AppError::CantCreate { .. }
                | AppError::Store(
                    crate::store::StoreError::CreateDir { .. }
                    | crate::store::StoreError::IsAFolder { .. },
                ) => Kind::CantCreate,
                AppError::StudyBusy { .. } | AppError::LeaseLost { .. } => Kind::Busy,
                AppError::BudgetConflict { .. } => Kind::Conflict,
                AppError::Edit(e)
                    if matches!(**e, crate::config::doc::EditError::Conflict { .. }) =>
                {
                    Kind::Changed
                }
                AppError::Config(e) => config_kind(e),
                AppError::Io(e) => io_kind(e),
                // A space file named with --space that is not there.
                AppError::Space(crate::tune::space::SpaceError::Io { source, .. }) => {
                    io_kind(source)
                }
                _ => Kind::Failed,
            },
        }
    }
}

/// Whether the command line asks for JSON (`--json`, or `--format json|sarif`), before any
/// `--`: then a fatal error is JSON on stdout as well.
pub fn wants_json(args: &[std::ffi::OsString]) -> bool {
    let args: Vec<&str> = args
        .iter()
        .map(|a| a.to_str().unwrap_or(""))
        .take_while(|a| *a != "--")
        .collect();
    args.iter().enumerate().any(|(i, a)| {
        *a == "--json"
            || matches!(*a, "--format=json" | "--format=sarif")
            || (*a == "--format" && matches!(args.get(i + 1), Some(&"json" | &"sarif")))
    })
}

/// Report a fatal error: `error: MESSAGE` (and its details) on stderr, and the JSON object on
/// stdout when asked for; the exit status of its kind.
pub fn report(kind: Kind, message: &str, details: &[String], json: bool) -> ExitCode {
    if json {
        // One line: a streaming command's stdout stays one JSON object per line.
        super::progress::json_line(&serde_json::json!({
            "error": {
                "kind": kind.name(),
                "exit_code": kind.code(),
                "message": message,
                "details": details,
            }
        }));
    }
    let colour = super::style::stderr();
    let prefix = super::style::paint(crate::config::diag::Severity::Error, "error", colour);
    std::eprintln!(
        "{prefix}: {}",
        crate::util::text::visible(message.trim_end())
    );
    for d in details {
        std::eprintln!("  {}", crate::util::text::visible(&d.replace('\n', "\n  ")));
    }
    ExitCode::from(kind.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<std::ffi::OsString> {
        a.iter().map(Into::into).collect()
    }

    #[test]
    fn json_is_asked_for_by_json_and_the_machine_formats_only() {
        assert!(wants_json(&args(&["lint", "--json", "x"])));
        assert!(wants_json(&args(&["lint", "--format", "sarif"])));
        assert!(wants_json(&args(&["lint", "--format=json"])));
        assert!(!wants_json(&args(&["lint", "--format", "github"])));
        assert!(!wants_json(&args(&["run", "--", "--json"])));
    }

    #[test]
    fn kinds_map_to_distinct_codes() {
        let missing = CliError::from(AppError::NoInput {
            path: "x".into(),
            why: "no such file".into(),
        });
        assert_eq!(missing.kind().code(), NO_INPUT);
        assert_eq!(CliError::Usage("bad".into()).kind().code(), USAGE);
        let bad_set = CliError::from(ConfigError::BadOverride {
            text: "a".into(),
            message: "no =".into(),
        });
        assert_eq!(bad_set.kind(), Kind::Usage);
        let yaml = CliError::from(ConfigError::Empty { path: "x".into() });
        assert_eq!(yaml.kind().code(), ERRORS);
        let out = CliError::from(AppError::CantCreate {
            path: "r".into(),
            why: "Permission denied".into(),
        });
        assert_eq!(out.kind().code(), CANT_CREATE);
        let busy = CliError::from(AppError::StudyBusy {
            study: "s".into(),
            holder: "pid 1 on n1".into(),
        });
        assert_eq!(busy.kind().code(), TEMP_FAIL);
        // A save that found the file changed is the same temporary failure, named apart.
        assert_eq!(Kind::Changed.code(), TEMP_FAIL);
        assert_ne!(Kind::Changed.name(), Kind::Busy.name());
        let other_budget = CliError::from(AppError::BudgetConflict {
            study: "s".into(),
            id: 3,
            budget: "--first-iters 10 --max-iters 40".into(),
        });
        assert_eq!(other_budget.kind().code(), CONFLICT);
        let codes = [
            Kind::Usage,
            Kind::NoInput,
            Kind::CantCreate,
            Kind::Busy,
            Kind::Conflict,
            Kind::Failed,
        ]
        .map(Kind::code);
        assert!(
            codes
                .iter()
                .enumerate()
                .all(|(i, c)| !codes[..i].contains(c))
        );
    }
}
