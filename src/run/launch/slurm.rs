//! Slurm, as a [`Scheduler`]: the batch script a trial is submitted as, and the job's state as
//! Slurm reports it (`squeue` while it is known there, else `scontrol show job`), mapped onto
//! the scheduler-neutral states. The commands are Slurm's own (`sbatch --parsable`, `squeue`,
//! `scontrol`, `scancel`, `sinfo`), for the cluster a [`Slurm`] names.

use super::scheduler::{
    JobEnd, JobExit, JobSpec, JobState, JobStatus, Scheduler, SchedulerError, Submission,
};
use crate::util::shell::quote;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Slurm settings from one source (the command line, a profile's `slurm:` section, the
/// defaults file's `[slurm]` table); a later source fills what an earlier left unset.
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
    /// `self` with what it leaves unset taken from `other`. Extra sbatch arguments are one
    /// setting: a source that gives any replaces the other's list, as a flag replaces a
    /// configured value.
    pub fn or(mut self, other: &SlurmSettings) -> SlurmSettings {
        self.nodes = self.nodes.or(other.nodes);
        self.gpus_per_node = self.gpus_per_node.or(other.gpus_per_node);
        self.partition = self.partition.or_else(|| other.partition.clone());
        self.account = self.account.or_else(|| other.account.clone());
        self.time = self.time.or_else(|| other.time.clone());
        if self.sbatch_args.is_empty() {
            self.sbatch_args = other.sbatch_args.clone();
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        *self == SlurmSettings::default()
    }
}

/// The `sbatch` options of a job, one word each: nodes, one task per node, GPUs, partition,
/// account, time, name, requeue, the output file in `trial_dir`, then the extra ones (which
/// may override any of them: sbatch takes the last).
pub fn sbatch_options(spec: &JobSpec, trial_dir: &Path) -> Vec<String> {
    let mut o = vec![
        format!("--job-name={}", spec.job_name),
        format!("--nodes={}", spec.nodes.max(1)),
        "--ntasks-per-node=1".into(),
    ];
    if let Some(g) = spec.gpus_per_node {
        o.push(format!("--gpus-per-node={g}"));
    }
    if let Some(p) = &spec.partition {
        o.push(format!("--partition={p}"));
    }
    if let Some(a) = &spec.account {
        o.push(format!("--account={a}"));
    }
    if let Some(t) = &spec.time {
        o.push(format!("--time={t}"));
    }
    // A requeued job starts again from the beginning on other nodes while the trial follows
    // the first run's logs: a measurement cannot survive it, so by default a node failure ends
    // the job (and the trial, as `node-fail`).
    o.push(if spec.requeue {
        "--requeue".into()
    } else {
        "--no-requeue".into()
    });
    o.push(format!(
        "--output={}",
        trial_dir.join("slurm-%j.out").display()
    ));
    o.extend(spec.extra_args.iter().cloned());
    o
}

/// The log of node `n` of a job in `trial_dir` (0-based, Slurm's `%n`).
pub fn node_log(trial_dir: &Path, n: u32) -> PathBuf {
    trial_dir.join(format!("node-{n}.log"))
}

/// The file in the trial folder where a rendered job writes when it started (Unix ms).
pub const JOB_STARTED: &str = "job-started";

/// What each node runs before the workload: it checks that it sees the trial folder (it must
/// be on a filesystem every node shares), and sets the distributed variables Primus' launcher
/// and torchrun read (`NNODES`, `NODE_RANK`, `MASTER_ADDR`, `MASTER_PORT`, `GPUS_PER_NODE`,
/// and torchrun's `PET_*`), then runs the workload's argv (`"$@"`). `MASTER_ADDR` and
/// `MASTER_PORT` are the job's own (its first node, a port from its id) — sbatch exports the
/// submitting shell's environment, whose values would give every job the same port — unless
/// the trial set them (`--env`, the profile's `env:`): `keep` names those.
fn node_prelude(keep: &[&str]) -> String {
    let set = |name: &str, value: &str| {
        if keep.contains(&name) {
            format!("export {name}=\"${{{name}}}\"")
        } else {
            format!("export {name}={value}")
        }
    };
    [
        r#"if [ ! -e "$PRIMUS_TUNE_TRIAL_DIR/job.sbatch" ]; then echo "primus-tune: node ${SLURMD_NODENAME:-?} does not see the trial folder $PRIMUS_TUNE_TRIAL_DIR: it must be on a filesystem every node shares" >&2; exit 97; fi"#.to_string(),
        "export NNODES=$SLURM_NNODES NODE_RANK=$SLURM_NODEID".into(),
        set(
            "MASTER_ADDR",
            r#""$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)""#,
        ),
        set("MASTER_PORT", "$((20000 + SLURM_JOB_ID % 20000))"),
        "export PET_NNODES=$NNODES PET_NODE_RANK=$NODE_RANK PET_MASTER_ADDR=$MASTER_ADDR PET_MASTER_PORT=$MASTER_PORT".into(),
        r#"exec "$@""#.into(),
    ]
    .join("\n")
}

/// The batch script of a job that runs `argv` once per node (`srun --ntasks-per-node=1`) in
/// `workdir` with `env` exported. Each node's output goes to `node-<n>.log` in `trial_dir`,
/// the script's own to `slurm-<jobid>.out`. Every word is quoted for the shell.
pub fn batch_script(
    spec: &JobSpec,
    argv: &[String],
    env: &[(String, String)],
    workdir: &Path,
    trial_dir: &Path,
) -> String {
    let mut s = String::from("#!/bin/bash\n");
    for o in sbatch_options(spec, trial_dir) {
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
    let keep: Vec<&str> = ["MASTER_ADDR", "MASTER_PORT"]
        .into_iter()
        .filter(|k| env.iter().any(|(e, _)| e == k))
        .collect();
    let node_out = trial_dir.join("node-%n.log");
    let mut words = vec![
        "srun".to_string(),
        "--ntasks-per-node=1".into(),
        "--kill-on-bad-exit=1".into(),
        format!("--output={}", node_out.display()),
        "bash".into(),
        "-c".into(),
        node_prelude(&keep),
        "primus-tune-node".into(),
    ];
    words.extend(argv.iter().cloned());
    s.push_str(&format!("exec {}\n", crate::util::shell::join(&words)));
    s
}

/// A state as `squeue %T`, `sacct State` or `scontrol JobState` write it (`CANCELLED by 0`
/// included), with the pending reason when there is one.
pub fn parse_state(state: &str, reason: &str) -> JobState {
    let name = state
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_uppercase();
    match name.as_str() {
        "PENDING" | "PD" => JobState::Pending {
            // Slurm says `None` for a job it has not looked at yet.
            reason: match reason.trim().trim_matches(['(', ')']) {
                "None" | "(null)" => String::new(),
                r => r.to_string(),
            },
        },
        "RUNNING" | "R" => JobState::Running,
        "REQUEUED" | "RQ" | "REQUEUE_HOLD" | "RH" | "REQUEUE_FED" | "RF" => JobState::Requeued,
        "COMPLETED" | "CD" => JobState::Completed,
        "FAILED" | "F" => JobState::Ended(JobEnd::Failed),
        "CANCELLED" | "CA" => JobState::Ended(JobEnd::Cancelled),
        "TIMEOUT" | "TO" | "DEADLINE" | "DL" => JobState::Ended(JobEnd::TimeLimit),
        "NODE_FAIL" | "NF" | "BOOT_FAIL" | "BF" => JobState::Ended(JobEnd::NodeFail),
        "PREEMPTED" | "PR" => JobState::Ended(JobEnd::Preempted),
        "OUT_OF_MEMORY" | "OOM" => JobState::Ended(JobEnd::OutOfMemory),
        other => JobState::Transient(other.to_string()),
    }
}

/// Pending reasons that mean the job can never start as submitted: it asks for more than the
/// partition has or allows, names what does not exist, or waits on a partition an
/// administrator took down. Limits that only wait for other jobs to end (`AssocMaxJobsLimit`,
/// `QOSMaxJobsPerUserLimit`, `Resources`, `Priority`) are not among them: those jobs start
/// eventually, and `--max-pending-seconds` bounds the wait.
const NEVER_STARTS: &[&str] = &[
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "PartitionConfig",
    "PartitionDown",
    "PartitionInactive",
    "BadConstraints",
    "InvalidAccount",
    "InvalidQOS",
    "AccountNotAllowed",
    "QOSNotAllowed",
    "DependencyNeverSatisfied",
];

/// Whether a pending reason of Slurm's means the job can never start ([`NEVER_STARTS`], and
/// the association's and QOS's per-job and per-node maximums, which the request itself
/// exceeds).
pub fn never_starts(reason: &str) -> bool {
    let r = reason.trim().trim_matches(['(', ')']);
    let first = r.split([',', ' ']).next().unwrap_or("");
    NEVER_STARTS.contains(&first)
        || ((first.starts_with("AssocMax") || first.starts_with("QOSMax"))
            && (first.contains("PerJob") || first.contains("PerNode")))
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

/// The Slurm commands of one cluster: the process's own (`conf` None), or the cluster a
/// `slurm.conf` describes (`SLURM_CONF` set for each command).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slurm {
    pub conf: Option<PathBuf>,
}

impl Slurm {
    fn run(&self, program: &str, args: &[&str]) -> Result<String, SchedulerError> {
        let command = format!("{program} {}", args.join(" "));
        let mut cmd = Command::new(program);
        cmd.args(args);
        if let Some(c) = &self.conf {
            cmd.env("SLURM_CONF", c);
        }
        let out = cmd.output().map_err(|source| SchedulerError::Spawn {
            command: command.clone(),
            source,
        })?;
        if !out.status.success() {
            return Err(SchedulerError::Failed {
                command,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Submits a batch script; the job id (`sbatch --parsable` prints `id` or `id;cluster`).
    pub fn submit_script(&self, script: &Path) -> Result<String, SchedulerError> {
        let out = self.run("sbatch", &["--parsable", &script.display().to_string()])?;
        out.trim()
            .split(';')
            .next()
            .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()))
            .map(str::to_string)
            .ok_or_else(|| SchedulerError::Failed {
                command: "sbatch --parsable".into(),
                stderr: format!("no job id in `{}`", out.trim()),
            })
    }

    /// The job's state alone.
    #[cfg(any(test, feature = "testkit"))]
    pub fn state(&self, id: &str) -> Result<JobState, SchedulerError> {
        Ok(self.status(id)?.state)
    }

    fn show_job(&self, id: &str) -> Result<String, SchedulerError> {
        self.run("scontrol", &["show", "job", id])
            .map_err(|_| SchedulerError::Unknown(id.to_string()))
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

    /// [`Scheduler::cancel`] with more `scancel` options (`--signal=TERM`, `--full`).
    pub fn cancel_with(
        &self,
        id: &str,
        wait: Duration,
        opts: &[&str],
    ) -> Result<bool, SchedulerError> {
        let mut args: Vec<&str> = opts.to_vec();
        args.push(id);
        self.run("scancel", &args)?;
        let end = Instant::now() + wait;
        while Instant::now() < end {
            let q = self
                .run("squeue", &["-h", "-j", id, "-o", "%i"])
                .unwrap_or_default();
            if q.trim().is_empty() {
                return Ok(true);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(false)
    }
}

impl Scheduler for Slurm {
    fn name(&self) -> &'static str {
        "slurm"
    }

    fn title(&self) -> &'static str {
        "Slurm"
    }

    fn conf(&self) -> Option<&Path> {
        self.conf.as_deref()
    }

    fn submit(&self, s: &Submission<'_>) -> Result<String, SchedulerError> {
        let script = batch_script(s.spec, s.argv, s.env, s.workdir, s.dir);
        let path = s.dir.join("job.sbatch");
        std::fs::write(&path, script).map_err(|source| SchedulerError::Spawn {
            command: format!("write {}", path.display()),
            source,
        })?;
        self.submit_script(&path)
    }

    fn submit_options(&self, spec: &JobSpec, dir: &Path) -> Vec<String> {
        sbatch_options(spec, dir)
    }

    /// `Submitted batch job 42`, as `sbatch` prints it.
    fn job_id_in(&self, line: &str) -> Option<String> {
        let rest = line.trim().rsplit_once("Submitted batch job ")?.1;
        let id = rest.split_whitespace().next()?;
        id.chars()
            .all(|c| c.is_ascii_digit())
            .then(|| id.to_string())
    }

    /// `squeue` while it lists the job, else `scontrol show job` (which keeps finished jobs
    /// for `MinJobAge`).
    fn status(&self, id: &str) -> Result<JobStatus, SchedulerError> {
        let q = self
            .run("squeue", &["-h", "-j", id, "-o", "%T|%r|%N"])
            .unwrap_or_default();
        let mut f = q.lines().next().map(|l| l.split('|'));
        if let Some(f) = f.as_mut()
            && let (Some(state), Some(reason)) = (f.next(), f.next())
        {
            let nodes = f.next().unwrap_or("").trim();
            let mut status = JobStatus {
                state: parse_state(state, reason),
                name: state.trim().to_string(),
                node_list: self.hostnames(nodes),
                restarts: 0,
            };
            // A pending job that ran before was requeued: squeue does not say so, its
            // restart count does.
            if matches!(status.state, JobState::Pending { .. })
                && let Ok(s) = self.show_job(id)
            {
                status.restarts = field(&s, "Restarts=").parse().unwrap_or(0);
            }
            return Ok(status);
        }
        let s = self.show_job(id)?;
        let state = field(&s, "JobState=");
        Ok(JobStatus {
            state: parse_state(&state, &field(&s, "Reason=")),
            name: state,
            node_list: self.hostnames(&field(&s, "NodeList=")),
            restarts: field(&s, "Restarts=").parse().unwrap_or(0),
        })
    }

    /// From `sacct` when accounting is enabled, else `scontrol show job`.
    fn exit(&self, id: &str) -> Result<JobExit, SchedulerError> {
        if let Ok(out) = self.run(
            "sacct",
            &["-n", "-P", "-X", "-j", id, "-o", "State,ExitCode"],
        ) && let Some((state, code)) = out.lines().next().and_then(|l| l.split_once('|'))
        {
            let (code, signal) = exit_code(code);
            return Ok(JobExit {
                state: parse_state(state, ""),
                code,
                signal,
                source: "sacct",
            });
        }
        let s = self.show_job(id)?;
        let (code, signal) = exit_code(&field(&s, "ExitCode="));
        Ok(JobExit {
            state: parse_state(&field(&s, "JobState="), &field(&s, "Reason=")),
            code,
            signal,
            source: "scontrol",
        })
    }

    fn cancel(&self, id: &str, wait: Duration) -> Result<bool, SchedulerError> {
        self.cancel_with(id, wait, &[])
    }

    /// `srun --jobid J --overlap`, one task per node.
    fn step_argv(&self, id: &str, nodes: u32, output: &Path, argv: &[String]) -> Vec<String> {
        let mut out = vec![
            "srun".to_string(),
            format!("--jobid={id}"),
            "--overlap".into(),
            format!("--nodes={}", nodes.max(1)),
            "--ntasks-per-node=1".into(),
            "--kill-on-bad-exit=0".into(),
            format!("--output={}", output.display()),
        ];
        out.extend(argv.iter().cloned());
        out
    }

    fn node_log(&self, dir: &Path, n: u32) -> PathBuf {
        node_log(dir, n)
    }

    fn script_log(&self, dir: &Path, id: &str) -> PathBuf {
        dir.join(format!("slurm-{id}.out"))
    }

    fn never_starts(&self, reason: &str) -> bool {
        never_starts(reason)
    }

    /// `sinfo -N`: nodes whose state is down, drained, failing or not responding (`*`).
    fn down_nodes(&self, nodes: &[String]) -> Vec<String> {
        if nodes.is_empty() {
            return Vec::new();
        }
        let list = nodes.join(",");
        let out = self
            .run("sinfo", &["-h", "-N", "-n", &list, "-o", "%N|%T"])
            .unwrap_or_default();
        let mut down: Vec<String> = out
            .lines()
            .filter_map(|l| l.split_once('|'))
            .filter(|(_, state)| {
                let s = state.trim().to_ascii_lowercase();
                s.ends_with('*')
                    || ["down", "drain", "fail", "not_responding", "unknown"]
                        .iter()
                        .any(|d| s.contains(d))
            })
            .map(|(n, _)| n.trim().to_string())
            .collect();
        down.sort();
        down.dedup();
        down
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::trial::FailureClass;

    fn spec() -> JobSpec {
        JobSpec {
            nodes: 2,
            gpus_per_node: Some(8),
            partition: Some("mi300x".into()),
            account: None,
            time: Some("0:30:00".into()),
            extra_args: vec!["--exclusive".into()],
            job_name: "pt-trial-7".into(),
            requeue: false,
        }
    }

    #[test]
    fn the_batch_script_quotes_every_word() {
        let s = batch_script(
            &spec(),
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
            "#SBATCH --no-requeue",
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
        let sl = Slurm::default();
        assert_eq!(
            sl.job_id_in("Submitted batch job 4711").as_deref(),
            Some("4711")
        );
        assert_eq!(sl.job_id_in("sbatch: error: no"), None);
        assert_eq!(exit_code("0:0"), (Some(0), None));
        assert_eq!(exit_code("1:9"), (Some(1), Some(9)));
        // --requeue opts back in.
        let requeue = JobSpec {
            requeue: true,
            ..spec()
        };
        let o = sbatch_options(&requeue, Path::new("/t"));
        assert!(o.contains(&"--requeue".to_string()) && !o.contains(&"--no-requeue".into()));
    }

    /// The job's rendezvous is its own (first node, a port from its id): the submitting
    /// shell's `MASTER_ADDR`/`MASTER_PORT`, which sbatch exports, do not reach the nodes; the
    /// trial's own (`--env`, the profile's `env:`, exported by the script) do.
    #[test]
    fn the_rendezvous_is_the_job_s_unless_the_trial_sets_it() {
        let own = batch_script(
            &spec(),
            &["x".into()],
            &[],
            Path::new("/t"),
            Path::new("/t"),
        );
        assert!(
            own.contains("export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))"),
            "{own}"
        );
        assert!(!own.contains("${MASTER_PORT"), "{own}");
        assert!(!own.contains("${MASTER_ADDR"), "{own}");
        let set = batch_script(
            &spec(),
            &["x".into()],
            &[("MASTER_PORT".into(), "29500".into())],
            Path::new("/t"),
            Path::new("/t"),
        );
        assert!(set.contains("export MASTER_PORT=29500\n"), "{set}");
        assert!(
            set.contains("export MASTER_PORT=\"${MASTER_PORT}\""),
            "{set}"
        );
        assert!(!set.contains("SLURM_JOB_ID % 20000"), "{set}");
        assert!(set.contains("scontrol show hostnames"), "{set}");
    }

    #[test]
    fn states_map_to_what_a_trial_records() {
        assert_eq!(
            parse_state("PENDING", "(Resources)"),
            JobState::Pending {
                reason: "Resources".into()
            }
        );
        assert_eq!(
            parse_state("PENDING", "None"),
            JobState::Pending {
                reason: String::new()
            }
        );
        assert_eq!(parse_state("RUNNING", ""), JobState::Running);
        assert_eq!(parse_state("REQUEUED", ""), JobState::Requeued);
        assert_eq!(parse_state("REQUEUE_HOLD", ""), JobState::Requeued);
        assert_eq!(
            parse_state("CANCELLED by 0", ""),
            JobState::Ended(JobEnd::Cancelled)
        );
        assert!(parse_state("TIMEOUT", "").is_over());
        assert_eq!(JobEnd::TimeLimit.class(), FailureClass::JobTimeLimit);
        assert_eq!(
            parse_state("BOOT_FAIL", ""),
            JobState::Ended(JobEnd::NodeFail)
        );
        assert_eq!(JobEnd::NodeFail.class(), FailureClass::NodeFail);
        assert_eq!(
            parse_state("COMPLETING", ""),
            JobState::Transient("COMPLETING".into())
        );
        assert!(!parse_state("COMPLETING", "").is_over());
    }

    #[test]
    fn reasons_that_can_never_start_fail_fast_and_waits_do_not() {
        for never in [
            "PartitionNodeLimit",
            "(PartitionTimeLimit)",
            "BadConstraints",
            "PartitionDown",
            "AssocMaxNodesPerJobLimit",
            "QOSMaxWallDurationPerJobLimit",
            "InvalidAccount",
        ] {
            assert!(never_starts(never), "{never}");
        }
        for wait in [
            "Resources",
            "Priority",
            "",
            "AssocMaxJobsLimit",
            "QOSMaxJobsPerUserLimit",
            "BeginTime",
            "ReqNodeNotAvail, UnavailableNodes:n1",
        ] {
            assert!(!never_starts(wait), "{wait}");
        }
    }

    #[test]
    fn sbatch_args_of_a_source_replace_the_others() {
        let cli = SlurmSettings {
            sbatch_args: vec!["--exclusive".into()],
            ..SlurmSettings::default()
        };
        let file = SlurmSettings {
            sbatch_args: vec!["--qos=short".into()],
            nodes: Some(2),
            ..SlurmSettings::default()
        };
        let s = cli.or(&file);
        assert_eq!(s.sbatch_args, ["--exclusive"]);
        assert_eq!(s.nodes, Some(2));
        assert_eq!(
            SlurmSettings::default().or(&file).sbatch_args,
            ["--qos=short"]
        );
    }
}
