//! `primus-tune`: parse the command line and dispatch to the headless frontend.

/// Parsing and linting a large experiment is mostly small allocations: with glibc's malloc a
/// third of `recommend`'s time on a 3 MiB experiment was spent in it (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

// The frontends are this binary's own; the library's modules are named at its root so that
// their paths read `crate::app::...` here as they do in the library.
#[cfg(not(test))]
use primus_tune::app::engines::{
    checklist, config, gemm, megatron, proxy, report, run, store, telemetry, tune, util,
};
use primus_tune::{app, domain};
// The frontends' own tests build fixtures from the engines, through the `testkit` feature.
#[cfg(test)]
use primus_tune::{
    checklist, config, gemm, megatron, proxy, report, run, store, telemetry, tune, util,
};

mod cli;
mod tui;

fn main() -> std::process::ExitCode {
    restore_sigpipe();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == run::supervise::SUBCOMMAND) {
        cli::supervise(&args[2..]);
    }
    run::supervise::mark_main_binary();
    cli::run()
}

/// Rust ignores SIGPIPE, so `primus-tune show ... | head` would panic on the closed pipe.
/// Restore the Unix default: the process ends quietly when its reader goes away.
#[allow(unsafe_code)]
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
