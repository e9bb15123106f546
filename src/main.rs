//! `primus-tune`: parse the command line and dispatch to the headless frontend.

/// Parsing and linting a large experiment is mostly small allocations: with glibc's malloc a
/// third of `recommend`'s time on a 3 MiB experiment was spent in it (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    restore_sigpipe();
    primus_tune::main()
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
