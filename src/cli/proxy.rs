//! `primus-tune proxy --resolved FILE --iters N`: the built-in CPU workload (what the `proxy-cpu`
//! profile launches). It prints Megatron-format lines measured from its own work.

use super::CliError;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// The trial's resolved parameters (resolved.json in the trial folder).
    #[arg(long)]
    pub resolved: PathBuf,
    /// Iterations to run.
    #[arg(long, default_value_t = 30)]
    pub iters: u64,
}

pub fn run(a: &ProxyArgs) -> Result<ExitCode, CliError> {
    let mut out = std::io::stdout().lock();
    crate::run::proxy::run_resolved_file(&a.resolved, a.iters, &mut out)
        .map_err(|e| CliError::Usage(format!("{}: {e}", a.resolved.display())))?;
    Ok(ExitCode::SUCCESS)
}
