//! Slurm as a launcher: the batch script a trial is submitted as, and the job's state as Slurm
//! reports it (`squeue` while it is known there, else `scontrol show job`), mapped to what a
//! trial needs: pending with its reason, running, or ended with a failure class. The commands
//! are Slurm's own (`sbatch --parsable`, `squeue`, `scontrol`, `scancel`), for the cluster a
//! [`Slurm`] names.

use crate::util::shell::quote;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// What a trial asks of Slurm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmSpec {
    pub nodes: u32,
    pub gpus_per_node: Option<u32>,
    pub partition: Option<String>,
    pub account: Option<String>,
    /// Slurm's time limit (`--time`), as Slurm writes it (`30`, `1:00:00`).
    pub time: Option<String>,
    /// More `#SBATCH` arguments, as given.
    pub sbatch_args: Vec<String>,
    pub job_name: String,
}

/// The batch script of a job that runs `argv` once per node (`srun --ntasks-per-node=1`) in
/// `workdir` with `env` exported, its output in `<workdir>/slurm-<jobid>.out`. Every word is
/// quoted for the shell.
pub fn batch_script(
    spec: &SlurmSpec,
    argv: &[String],
    env: &[(String, String)],
    workdir: &Path,
) -> String {
    let mut s = String::from("#!/bin/bash\n");
    let mut directive = |d: String| s.push_str(&format!("#SBATCH {d}\n"));
    directive(format!("--job-name={}", quote(&spec.job_name)));
    directive(format!("--nodes={}", spec.nodes.max(1)));
    directive("--ntasks-per-node=1".into());
    if let Some(g) = spec.gpus_per_node {
        directive(format!("--gpus-per-node={g}"));
    }
    if let Some(p) = &spec.partition {
        directive(format!("--partition={}", quote(p)));
    }
    if let Some(a) = &spec.account {
        directive(format!("--account={}", quote(a)));
    }
    if let Some(t) = &spec.time {
        directive(format!("--time={}", quote(t)));
    }
    let out = workdir.join("slurm-%j.out");
    directive(format!("--output={}", quote(&out.display().to_string())));
    for a in &spec.sbatch_args {
        directive(quote(a));
    }
    for (k, v) in env {
        s.push_str(&format!("export {k}={}\n", quote(v)));
    }
    s.push_str(&format!("cd {}\n", quote(&workdir.display().to_string())));
    s.push_str(&format!(
        "exec srun --ntasks-per-node=1 {}\n",
        crate::util::shell::join(argv)
    ));
    s
}

/// A job's state, from Slurm's state names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Waiting; Slurm's reason (`Resources`, `Priority`, ...).
    Pending {
        reason: String,
    },
    Running,
    /// Being completed, suspended or requeued: not over yet.
    Transient(String),
    Completed,
    /// Ended without completing: the trial's failure.
    Ended(SlurmEnd),
}

/// How a job ended when it did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlurmEnd {
    Failed,
    Cancelled,
    Timeout,
    NodeFail,
    Preempted,
    OutOfMemory,
    BootFail,
    Deadline,
}

impl SlurmEnd {
    /// The failure class name a trial records.
    pub fn class(self) -> &'static str {
        match self {
            SlurmEnd::Failed => "non-zero-exit",
            SlurmEnd::Cancelled => "slurm-cancelled",
            SlurmEnd::Timeout => "slurm-timeout",
            SlurmEnd::NodeFail => "node-fail",
            SlurmEnd::Preempted => "slurm-preempted",
            SlurmEnd::OutOfMemory => "host-oom",
            SlurmEnd::BootFail => "node-fail",
            SlurmEnd::Deadline => "slurm-timeout",
        }
    }
}

impl JobState {
    /// From a state name as `squeue %T`, `sacct State` or `scontrol JobState` write it
    /// (`CANCELLED by 0` included), with the pending reason when there is one.
    pub fn parse(state: &str, reason: &str) -> JobState {
        let name = state
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        match name.as_str() {
            "PENDING" | "PD" => JobState::Pending {
                reason: reason.trim().trim_matches(['(', ')']).to_string(),
            },
            "RUNNING" | "R" => JobState::Running,
            "COMPLETED" | "CD" => JobState::Completed,
            "FAILED" | "F" => JobState::Ended(SlurmEnd::Failed),
            "CANCELLED" | "CA" => JobState::Ended(SlurmEnd::Cancelled),
            "TIMEOUT" | "TO" => JobState::Ended(SlurmEnd::Timeout),
            "NODE_FAIL" | "NF" => JobState::Ended(SlurmEnd::NodeFail),
            "PREEMPTED" | "PR" => JobState::Ended(SlurmEnd::Preempted),
            "OUT_OF_MEMORY" | "OOM" => JobState::Ended(SlurmEnd::OutOfMemory),
            "BOOT_FAIL" | "BF" => JobState::Ended(SlurmEnd::BootFail),
            "DEADLINE" | "DL" => JobState::Ended(SlurmEnd::Deadline),
            other => JobState::Transient(other.to_string()),
        }
    }

    pub fn is_over(&self) -> bool {
        matches!(self, JobState::Completed | JobState::Ended(_))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("Slurm does not know job {0}")]
    Unknown(u64),
}

/// The Slurm commands of one cluster: the process's own (`conf` None), or the cluster a
/// `slurm.conf` describes (`SLURM_CONF` set for each command).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slurm {
    pub conf: Option<std::path::PathBuf>,
}

impl Slurm {
    fn run(&self, program: &str, args: &[&str]) -> Result<String, SlurmError> {
        let command = format!("{program} {}", args.join(" "));
        let mut cmd = Command::new(program);
        cmd.args(args);
        if let Some(c) = &self.conf {
            cmd.env("SLURM_CONF", c);
        }
        let out = cmd.output().map_err(|source| SlurmError::Spawn {
            command: command.clone(),
            source,
        })?;
        if !out.status.success() {
            return Err(SlurmError::Failed {
                command,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Submit a batch script; the job id (`sbatch --parsable` prints `id` or `id;cluster`).
    pub fn submit(&self, script: &Path) -> Result<u64, SlurmError> {
        let out = self.run("sbatch", &["--parsable", &script.display().to_string()])?;
        out.trim()
            .split(';')
            .next()
            .and_then(|id| id.parse().ok())
            .ok_or_else(|| SlurmError::Failed {
                command: "sbatch --parsable".into(),
                stderr: format!("no job id in `{}`", out.trim()),
            })
    }

    /// The job's state: `squeue` while it lists the job, else `scontrol show job` (which keeps
    /// finished jobs for `MinJobAge`).
    pub fn state(&self, job: u64) -> Result<JobState, SlurmError> {
        let id = job.to_string();
        let q = self
            .run("squeue", &["-h", "-j", &id, "-o", "%T|%r"])
            .unwrap_or_default();
        if let Some((state, reason)) = q.lines().next().and_then(|l| l.split_once('|')) {
            return Ok(JobState::parse(state, reason));
        }
        let s = self
            .run("scontrol", &["show", "job", &id])
            .map_err(|_| SlurmError::Unknown(job))?;
        let field = |key: &str| {
            s.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or("")
                .to_string()
        };
        Ok(JobState::parse(&field("JobState="), &field("Reason=")))
    }

    /// Cancel the job and wait (up to `wait`) until `squeue` no longer lists it; whether it left.
    pub fn cancel(&self, job: u64, wait: Duration) -> Result<bool, SlurmError> {
        let id = job.to_string();
        self.run("scancel", &[&id])?;
        let end = Instant::now() + wait;
        while Instant::now() < end {
            let q = self
                .run("squeue", &["-h", "-j", &id, "-o", "%i"])
                .unwrap_or_default();
            if q.trim().is_empty() {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_script_quotes_every_word() {
        let spec = SlurmSpec {
            nodes: 2,
            gpus_per_node: Some(8),
            partition: Some("mi300x".into()),
            account: None,
            time: Some("0:30:00".into()),
            sbatch_args: vec!["--exclusive".into()],
            job_name: "primus-tune trial 7".into(),
        };
        let s = batch_script(
            &spec,
            &["torchrun".into(), "--lr".into(), "$(rm -rf /)".into()],
            &[("PRIMUS_TUNE_TRIAL_ID".into(), "7".into())],
            Path::new("/shared/ws/trials/7"),
        );
        assert!(s.starts_with("#!/bin/bash\n#SBATCH --job-name='primus-tune trial 7'\n"));
        for line in [
            "#SBATCH --nodes=2",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --gpus-per-node=8",
            "#SBATCH --partition=mi300x",
            "#SBATCH --time=0:30:00",
            "#SBATCH --output=/shared/ws/trials/7/slurm-%j.out",
            "#SBATCH --exclusive",
            "export PRIMUS_TUNE_TRIAL_ID=7",
            "cd /shared/ws/trials/7",
            "exec srun --ntasks-per-node=1 torchrun --lr '$(rm -rf /)'",
        ] {
            assert!(s.lines().any(|l| l == line), "{line} missing:\n{s}");
        }
    }

    #[test]
    fn states_map_to_what_a_trial_records() {
        assert_eq!(
            JobState::parse("PENDING", "(Resources)"),
            JobState::Pending {
                reason: "Resources".into()
            }
        );
        assert_eq!(JobState::parse("RUNNING", ""), JobState::Running);
        assert_eq!(
            JobState::parse("CANCELLED by 0", ""),
            JobState::Ended(SlurmEnd::Cancelled)
        );
        assert!(JobState::parse("TIMEOUT", "").is_over());
        assert_eq!(SlurmEnd::Timeout.class(), "slurm-timeout");
        assert_eq!(SlurmEnd::NodeFail.class(), "node-fail");
        assert_eq!(
            JobState::parse("COMPLETING", ""),
            JobState::Transient("COMPLETING".into())
        );
        assert!(!JobState::parse("COMPLETING", "").is_over());
    }
}
