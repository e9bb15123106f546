//! The Slurm options of `run`, `sweep` and `gemm-tune stage`.

use crate::app::launch::slurm::{SlurmRequest, SlurmSettings};
use clap::Args;
use std::time::Duration;

#[derive(Debug, Clone, Default, Args)]
pub struct SlurmArgs {
    /// Run each trial as a Slurm job (sbatch) on --nodes nodes instead of on this node. The
    /// cluster is Slurm's own (SLURM_CONF as for sbatch); the workspace must be on a
    /// filesystem every node shares.
    #[arg(long, help_heading = "Slurm")]
    pub slurm: bool,
    /// Nodes of each trial's job [default: 1].
    #[arg(long, value_name = "N", help_heading = "Slurm",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: Option<u32>,
    /// GPUs of each node the job asks for (--gpus-per-node); the trial's world is nodes × this.
    #[arg(long, value_name = "G", help_heading = "Slurm",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus_per_node: Option<u32>,
    /// Slurm partition (-p).
    #[arg(long, value_name = "NAME", help_heading = "Slurm")]
    pub partition: Option<String>,
    /// Slurm account to charge (-A).
    #[arg(long, value_name = "NAME", help_heading = "Slurm")]
    pub account: Option<String>,
    /// Time limit of each job, as sbatch takes it (30, 1:00:00, 1-0).
    #[arg(long, value_name = "LIMIT", help_heading = "Slurm")]
    pub time: Option<String>,
    /// Another sbatch option, as sbatch takes it (repeatable): --sbatch-arg=--exclusive.
    #[arg(
        long = "sbatch-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        help_heading = "Slurm"
    )]
    pub sbatch_args: Vec<String>,
    /// Seconds between reads of the job's state and its files.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 1.0,
        help_heading = "Slurm"
    )]
    pub slurm_poll: f64,
    /// Let Slurm requeue a job whose node failed (sbatch --requeue). Default --no-requeue: a
    /// requeued job starts again from the beginning, so the trial ends as node-fail either way.
    #[arg(long, help_heading = "Slurm")]
    pub requeue: bool,
    /// Fail a trial whose job waits in the queue longer than this (pending-limit); a job Slurm
    /// says can never start (PartitionNodeLimit, BadConstraints, ...) fails at once anyway.
    #[arg(long, value_name = "SECONDS", help_heading = "Slurm",
          value_parser = positive_seconds)]
    pub max_pending_seconds: Option<f64>,
}

/// A number of seconds, more than 0.
fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a number of seconds above 0")),
    }
}

impl SlurmArgs {
    pub fn request(&self) -> SlurmRequest {
        SlurmRequest {
            enabled: self.slurm,
            settings: SlurmSettings {
                nodes: self.nodes,
                gpus_per_node: self.gpus_per_node,
                partition: self.partition.clone(),
                account: self.account.clone(),
                time: self.time.clone(),
                sbatch_args: self.sbatch_args.clone(),
            },
            poll: Some(Duration::from_secs_f64(self.slurm_poll.clamp(0.1, 60.0))),
            requeue: self.requeue,
            max_pending: self.max_pending_seconds.map(Duration::from_secs_f64),
        }
    }
}
