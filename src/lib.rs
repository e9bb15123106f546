//! primus-tune: a performance-tuning assistant for AMD Primus training jobs.
//!
//! The API is the application layer, [`app`] — the use cases the CLI and the TUI both call (a
//! session, a trial, a sweep, a HipBLASLt stage, edits, the read models) — and the plain data
//! of [`domain`]. Under them are the engines: [`config`] resolves, validates and edits
//! experiment YAMLs exactly as Primus reads them; [`run`] launches and measures trials;
//! [`telemetry`] reads GPUs; [`store`] keeps trials and studies; [`tune`] searches knob spaces;
//! [`gemm`] handles the HipBLASLt stages; [`report`] writes a study's report. They stay public
//! for the integration tests and benchmarks, and for programs that need one engine alone (a log
//! parser, the store). The two frontends are private to the crate: the binary calls [`main`].

pub mod app;
pub mod checklist;
pub mod config;
pub mod domain;
pub mod gemm;
pub mod megatron;
pub mod report;
pub mod run;
pub mod store;
pub mod telemetry;
pub mod tune;
pub mod util;

mod cli;
/// The TUI's internals are public only to its benchmark (`--features bench-internals`).
#[cfg(feature = "bench-internals")]
pub mod tui;
#[cfg(not(feature = "bench-internals"))]
mod tui;

/// The `primus-tune` command: parse the command line, then the TUI on a terminal or the
/// headless command. `primus-tune __supervise ...` is the trial supervisor ([`run::supervise`]),
/// which the binary runs for its own trials.
pub fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == run::supervise::SUBCOMMAND) {
        cli::supervise(&args[2..]);
    }
    run::supervise::mark_main_binary();
    cli::run()
}
