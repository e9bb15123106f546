//! Slurm as a launcher: the batch script a trial is submitted as, and the job's state as Slurm
//! reports it (`squeue` while it is known there, else `scontrol show job`), mapped to what a
//! trial needs: pending with its reason, running, or ended with a failure class. The commands
//! are Slurm's own (`sbatch --parsable`, `squeue`, `scontrol`, `scancel`), for the cluster a
//! [`Slurm`] names.

use crate::domain::trial::FailureClass;
use crate::util::shell::quote;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Slurm settings from one source; a later source fills what an earlier left unset.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlurmSettings {
    pub nodes: Option<u32>,
    pub gpus_per_node: Option<u32>,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub time: Option<String>,
    #[serde(default)]
    pub sbatch_args: Vec<String>,
}

impl SlurmSettings {
    /// `self` with what it leaves unset taken from `other` (extra sbatch arguments add up,
    /// `other`'s first).
    pub fn or(mut self, other: &SlurmSettings) -> SlurmSettings {
        self.nodes = self.nodes.or(other.nodes);
        self.gpus_per_node = self.gpus_per_node.or(other.gpus_per_node);
        self.partition = self.partition.or_else(|| other.partition.clone());
        self.account = self.account.or_else(|| other.account.clone());
        self.time = self.time.or_else(|| other.time.clone());
        let mut args = other.sbatch_args.clone();
        args.extend(self.sbatch_args);
        self.sbatch_args = args;
        self
    }

    pub fn is_empty(&self) -> bool {
        *self == SlurmSettings::default()
    }
}

/// What a trial asks of Slurm.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlurmSpec {
    pub nodes: u32,
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    /// Slurm's time limit (`--time`), as Slurm writes it (`30`, `1:00:00`).
    #[serde(default)]
    pub time: Option<String>,
    /// More `sbatch` arguments, as given (`--exclusive`, `--constraint=mi300x`).
    #[serde(default)]
    pub sbatch_args: Vec<String>,
    #[serde(default)]
    pub job_name: String,
}

impl SlurmSpec {
    /// The `sbatch` options of the job, one word each: nodes, one task per node, GPUs,
    /// partition, account, time, name, the output file in `trial_dir`, then the extra ones.
    pub fn sbatch_options(&self, trial_dir: &Path) -> Vec<String> {
        let mut o = vec![
            format!("--job-name={}", self.job_name),
            format!("--nodes={}", self.nodes.max(1)),
            "--ntasks-per-node=1".into(),
        ];
        if let Some(g) = self.gpus_per_node {
            o.push(format!("--gpus-per-node={g}"));
        }
        if let Some(p) = &self.partition {
            o.push(format!("--partition={p}"));
        }
        if let Some(a) = &self.account {
            o.push(format!("--account={a}"));
        }
        if let Some(t) = &self.time {
            o.push(format!("--time={t}"));
        }
        o.push(format!(
            "--output={}",
            trial_dir.join("slurm-%j.out").display()
        ));
        o.extend(self.sbatch_args.iter().cloned());
        o
    }

    /// The log of node `n` of the job (0-based, Slurm's `%n`).
    pub fn node_log(trial_dir: &Path, n: u32) -> std::path::PathBuf {
        trial_dir.join(format!("node-{n}.log"))
    }

    /// The log primus-tune follows: the last node's, where the last rank runs (Megatron prints
    /// its iterations there, Primus keeps rank 0 and the last rank).
    pub fn last_rank_log(&self, trial_dir: &Path) -> std::path::PathBuf {
        Self::node_log(trial_dir, self.nodes.max(1) - 1)
    }
}

/// The file in the trial folder where a rendered job writes when it started (Unix ms).
pub const JOB_STARTED: &str = "job-started";

/// What each node runs before the workload: it checks that it sees the trial folder (it must
/// be on a filesystem every node shares), and sets the distributed variables Primus' launcher
/// and torchrun read (`NNODES`, `NODE_RANK`, `MASTER_ADDR`, `MASTER_PORT`, `GPUS_PER_NODE`,
/// and torchrun's `PET_*`), then runs the workload's argv (`"$@"`).
const NODE_PRELUDE: &str = r#"if [ ! -e "$PRIMUS_TUNE_TRIAL_DIR/job.sbatch" ]; then echo "primus-tune: node ${SLURMD_NODENAME:-?} does not see the trial folder $PRIMUS_TUNE_TRIAL_DIR: it must be on a filesystem every node shares" >&2; exit 97; fi
export NNODES=$SLURM_NNODES NODE_RANK=$SLURM_NODEID
export MASTER_ADDR=${MASTER_ADDR:-$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)}
export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 20000))}
export PET_NNODES=$NNODES PET_NODE_RANK=$NODE_RANK PET_MASTER_ADDR=$MASTER_ADDR PET_MASTER_PORT=$MASTER_PORT
exec "$@""#;

/// The batch script of a job that runs `argv` once per node (`srun --ntasks-per-node=1`) in
/// `workdir` with `env` exported. Each node's output goes to `node-<n>.log` in `trial_dir`,
/// the script's own to `slurm-<jobid>.out`. Every word is quoted for the shell.
pub fn batch_script(
    spec: &SlurmSpec,
    argv: &[String],
    env: &[(String, String)],
    workdir: &Path,
    trial_dir: &Path,
) -> String {
    let mut s = String::from("#!/bin/bash\n");
    for o in spec.sbatch_options(trial_dir) {
        s.push_str(&format!("#SBATCH {}\n", quote(&o)));
    }
    for (k, v) in env {
        s.push_str(&format!("export {k}={}\n", quote(v)));
    }
    if let Some(g) = spec.gpus_per_node {
        s.push_str(&format!("export GPUS_PER_NODE={g}\n"));
    }
    // When the job started, to the millisecond (its start-up counts from here).
    s.push_str(&format!(
        "date +%s%3N > {}\n",
        quote(&trial_dir.join(JOB_STARTED).display().to_string())
    ));
    s.push_str(&format!(
        "cd {} || exit 97\n",
        quote(&workdir.display().to_string())
    ));
    let node_out = trial_dir.join("node-%n.log");
    let mut words = vec![
        "srun".to_string(),
        "--ntasks-per-node=1".into(),
        "--kill-on-bad-exit=1".into(),
        format!("--output={}", node_out.display()),
        "bash".into(),
        "-c".into(),
        NODE_PRELUDE.into(),
        "primus-tune-node".into(),
    ];
    words.extend(argv.iter().cloned());
    s.push_str(&format!("exec {}\n", crate::util::shell::join(&words)));
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
    /// Not a Slurm state: Slurm stopped knowing the job (it left `squeue` and `scontrol`).
    Lost,
}

impl SlurmEnd {
    /// The failure class a trial records when the job ended so and primus-tune did not end it.
    pub fn class(self) -> FailureClass {
        match self {
            SlurmEnd::Failed => FailureClass::NonZeroExit,
            SlurmEnd::Cancelled => FailureClass::SlurmCancelled,
            SlurmEnd::Timeout | SlurmEnd::Deadline => FailureClass::SlurmTimeout,
            SlurmEnd::NodeFail | SlurmEnd::BootFail => FailureClass::NodeFail,
            SlurmEnd::Preempted => FailureClass::SlurmPreempted,
            SlurmEnd::OutOfMemory => FailureClass::HostOom,
            SlurmEnd::Lost => FailureClass::SlurmLost,
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
                // Slurm says `None` for a job it has not looked at yet.
                reason: match reason.trim().trim_matches(['(', ')']) {
                    "None" => String::new(),
                    r => r.to_string(),
                },
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

/// A job's state as Slurm names it, with its nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatus {
    pub state: JobState,
    /// Slurm's own state name (`PENDING`, `RUNNING`, `CANCELLED`, ...).
    pub name: String,
    /// The nodes it runs on (empty while pending).
    pub node_list: Vec<String>,
}

/// How a finished job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobExit {
    pub state: JobState,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Which command said so (`sacct` or `scontrol`).
    pub source: &'static str,
}

/// `rc:signal` as Slurm writes an exit code.
fn exit_code(s: &str) -> (Option<i32>, Option<i32>) {
    let mut it = s.trim().split(':');
    let code = it.next().and_then(|c| c.parse().ok());
    let signal = it.next().and_then(|c| c.parse().ok()).filter(|s| *s != 0);
    (code, signal)
}

/// The value of `key` (`JobState=`) in `scontrol show job` output.
fn field(s: &str, key: &str) -> String {
    s.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or("")
        .to_string()
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

    /// The job id in what `sbatch` prints (`Submitted batch job 42`, or `--parsable`'s `42`),
    /// when a line says it.
    pub fn job_id_in(line: &str) -> Option<u64> {
        let t = line.trim();
        if let Some(rest) = t.rsplit_once("Submitted batch job ").map(|x| x.1) {
            return rest.split_whitespace().next()?.parse().ok();
        }
        None
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
        Ok(self.status(job)?.state)
    }

    /// The job's state with its Slurm name and the nodes it runs on.
    pub fn status(&self, job: u64) -> Result<JobStatus, SlurmError> {
        let id = job.to_string();
        let q = self
            .run("squeue", &["-h", "-j", &id, "-o", "%T|%r|%N"])
            .unwrap_or_default();
        let mut f = q.lines().next().map(|l| l.split('|'));
        if let Some(f) = f.as_mut()
            && let (Some(state), Some(reason)) = (f.next(), f.next())
        {
            let nodes = f.next().unwrap_or("").trim();
            return Ok(JobStatus {
                state: JobState::parse(state, reason),
                name: state.trim().to_string(),
                node_list: self.hostnames(nodes),
            });
        }
        let s = self.show_job(job)?;
        let state = field(&s, "JobState=");
        Ok(JobStatus {
            state: JobState::parse(&state, &field(&s, "Reason=")),
            name: state,
            node_list: self.hostnames(&field(&s, "NodeList=")),
        })
    }

    fn show_job(&self, job: u64) -> Result<String, SlurmError> {
        self.run("scontrol", &["show", "job", &job.to_string()])
            .map_err(|_| SlurmError::Unknown(job))
    }

    /// A node list as Slurm compresses it (`n[1-2]`), expanded (`scontrol show hostnames`).
    fn hostnames(&self, list: &str) -> Vec<String> {
        if list.is_empty() || list == "(null)" {
            return Vec::new();
        }
        // Only a bracketed range (`n[1-2]`) needs Slurm to expand it.
        if !list.contains('[') {
            return list.split(',').map(str::to_string).collect();
        }
        self.run("scontrol", &["show", "hostnames", list])
            .map(|o| o.lines().map(str::to_string).collect())
            .unwrap_or_else(|_| vec![list.to_string()])
    }

    /// How a finished job ended: its state and the exit code and signal of its batch script,
    /// from `sacct` when accounting is enabled, else `scontrol show job`.
    pub fn exit(&self, job: u64) -> Result<JobExit, SlurmError> {
        let id = job.to_string();
        if let Ok(out) = self.run(
            "sacct",
            &["-n", "-P", "-X", "-j", &id, "-o", "State,ExitCode"],
        ) && let Some((state, code)) = out.lines().next().and_then(|l| l.split_once('|'))
        {
            let (code, signal) = exit_code(code);
            return Ok(JobExit {
                state: JobState::parse(state, ""),
                code,
                signal,
                source: "sacct",
            });
        }
        let s = self.show_job(job)?;
        let (code, signal) = exit_code(&field(&s, "ExitCode="));
        Ok(JobExit {
            state: JobState::parse(&field(&s, "JobState="), &field(&s, "Reason=")),
            code,
            signal,
            source: "scontrol",
        })
    }

    /// The argv that runs `argv` once per node inside a running job, beside its workload
    /// (`srun --overlap`), each node's output in `output` (`%n`: the node's index).
    pub fn step_argv(&self, job: u64, nodes: u32, output: &Path, argv: &[String]) -> Vec<String> {
        let mut out = vec![
            "srun".to_string(),
            format!("--jobid={job}"),
            "--overlap".into(),
            format!("--nodes={}", nodes.max(1)),
            "--ntasks-per-node=1".into(),
            "--kill-on-bad-exit=0".into(),
            format!("--output={}", output.display()),
        ];
        out.extend(argv.iter().cloned());
        out
    }

    /// Cancel the job and wait (up to `wait`) until `squeue` no longer lists it; whether it left.
    pub fn cancel(&self, job: u64, wait: Duration) -> Result<bool, SlurmError> {
        self.cancel_with(job, wait, &[])
    }

    /// [`Slurm::cancel`] with more `scancel` options (`--signal=TERM`, `--full`).
    pub fn cancel_with(&self, job: u64, wait: Duration, opts: &[&str]) -> Result<bool, SlurmError> {
        let id = job.to_string();
        let mut args: Vec<&str> = opts.to_vec();
        args.push(&id);
        self.run("scancel", &args)?;
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
            job_name: "pt-trial-7".into(),
        };
        let s = batch_script(
            &spec,
            &["torchrun".into(), "--lr".into(), "$(rm -rf /)".into()],
            &[("PRIMUS_TUNE_TRIAL_ID".into(), "7".into())],
            Path::new("/shared/ws/trials/7"),
            Path::new("/shared/ws/trials/7"),
        );
        assert!(s.starts_with("#!/bin/bash\n#SBATCH --job-name=pt-trial-7\n"));
        for line in [
            "#SBATCH --nodes=2",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --gpus-per-node=8",
            "#SBATCH --partition=mi300x",
            "#SBATCH --time=0:30:00",
            "#SBATCH --output=/shared/ws/trials/7/slurm-%j.out",
            "#SBATCH --exclusive",
            "export PRIMUS_TUNE_TRIAL_ID=7",
            "export GPUS_PER_NODE=8",
            "cd /shared/ws/trials/7 || exit 97",
        ] {
            assert!(s.lines().any(|l| l == line), "{line} missing:\n{s}");
        }
        let run = &s[s.find("\nexec srun").unwrap() + 1..];
        let run = run.trim_end();
        assert!(run.starts_with(
            "exec srun --ntasks-per-node=1 --kill-on-bad-exit=1 \
             --output=/shared/ws/trials/7/node-%n.log bash -c "
        ));
        assert!(
            run.ends_with(" primus-tune-node torchrun --lr '$(rm -rf /)'"),
            "{run}"
        );
        assert_eq!(Slurm::job_id_in("Submitted batch job 4711"), Some(4711));
        assert_eq!(Slurm::job_id_in("sbatch: error: no"), None);
        assert_eq!(exit_code("0:0"), (Some(0), None));
        assert_eq!(exit_code("1:9"), (Some(1), Some(9)));
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
        assert_eq!(SlurmEnd::Timeout.class(), FailureClass::SlurmTimeout);
        assert_eq!(SlurmEnd::NodeFail.class(), FailureClass::NodeFail);
        assert_eq!(
            JobState::parse("COMPLETING", ""),
            JobState::Transient("COMPLETING".into())
        );
        assert!(!JobState::parse("COMPLETING", "").is_over());
    }
}
