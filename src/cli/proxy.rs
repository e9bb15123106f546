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
    // As a rank of a Slurm job (one proxy per node), it says which.
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(rank) = var("SLURM_PROCID") {
        use std::io::Write;
        let _ = writeln!(
            out,
            "primus-tune proxy-cpu: Slurm rank {rank} of {}, node {} ({})",
            var("SLURM_NTASKS").unwrap_or_else(|| "?".into()),
            var("SLURM_NODEID").unwrap_or_else(|| "?".into()),
            var("SLURMD_NODENAME").unwrap_or_else(|| "?".into()),
        );
    }
    crate::proxy::run_resolved_file(&a.resolved, a.iters, &mut out)
        .map_err(|e| CliError::input(&a.resolved, e))?;
    Ok(ExitCode::SUCCESS)
}
