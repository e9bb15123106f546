//! A batch scheduler as the run engine needs it, whatever its make: submit a trial's job, read
//! its state, cancel it, run a step on its nodes, and say which pending reasons mean it can
//! never start. The job's states here are the scheduler-neutral ones a trial records; each
//! scheduler maps its own names onto them. Slurm is [`super::slurm`]; another scheduler
//! (Flux, PBS, Kubernetes' Jobs) is one more file implementing [`Scheduler`] and one line in
//! [`named`].

use crate::domain::trial::FailureClass;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What a trial asks of the scheduler.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobSpec {
    pub nodes: u32,
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// Slurm's partition (PBS: its queue).
    #[serde(default)]
    pub partition: Option<String>,
    #[serde(default)]
    pub account: Option<String>,
    /// The scheduler's time limit, as it writes it (Slurm: `30`, `1:00:00`).
    #[serde(default)]
    pub time: Option<String>,
    /// More options of the scheduler's submit command, as given (`--exclusive`).
    #[serde(default)]
    pub extra_args: Vec<String>,
    #[serde(default)]
    pub job_name: String,
    /// Let the scheduler requeue the job when a node fails (it then runs again from the
    /// start); false: a node failure ends the job, and the trial.
    #[serde(default)]
    pub requeue: bool,
}

/// A job's state, scheduler-neutral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    /// Waiting; the scheduler's reason (`Resources`, `Priority`, ...), empty when it gave none.
    Pending {
        reason: String,
    },
    Running,
    /// Requeued by the scheduler (off a failed node, or preempted with requeue): what ran is
    /// lost and it would start again from the beginning.
    Requeued,
    /// Being completed, configured, suspended ...: not over yet.
    Transient(String),
    Completed,
    /// Ended without completing: the trial's failure.
    Ended(JobEnd),
}

/// How a job ended when it did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEnd {
    Failed,
    Cancelled,
    TimeLimit,
    NodeFail,
    Preempted,
    OutOfMemory,
    /// Not a scheduler state: the scheduler stopped knowing the job.
    Lost,
}

impl JobEnd {
    /// The failure class a trial records when the job ended so and primus-tune did not end it.
    pub fn class(self) -> FailureClass {
        match self {
            JobEnd::Failed => FailureClass::NonZeroExit,
            JobEnd::Cancelled => FailureClass::JobCancelled,
            JobEnd::TimeLimit => FailureClass::JobTimeLimit,
            JobEnd::NodeFail => FailureClass::NodeFail,
            JobEnd::Preempted => FailureClass::Preempted,
            JobEnd::OutOfMemory => FailureClass::HostOom,
            JobEnd::Lost => FailureClass::JobLost,
        }
    }
}

impl JobState {
    pub fn is_over(&self) -> bool {
        matches!(self, JobState::Completed | JobState::Ended(_))
    }
}

/// A job's state with the scheduler's own name for it and its nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatus {
    pub state: JobState,
    /// The scheduler's own state name (`PENDING`, `RUNNING`, `CANCELLED`, ...).
    pub name: String,
    /// The nodes it runs on (empty while pending).
    pub node_list: Vec<String>,
    /// Times the scheduler has started it again (Slurm's `Restarts`; 0 when unknown).
    pub restarts: u32,
}

/// How a finished job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobExit {
    pub state: JobState,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Which command said so (`sacct`, `scontrol`).
    pub source: &'static str,
}

#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("the scheduler does not know job {0}")]
    Unknown(String),
}

/// What a trial's launch hands the scheduler to submit.
pub struct Submission<'a> {
    pub spec: &'a JobSpec,
    /// The workload's argv, run once per node.
    pub argv: &'a [String],
    /// The environment exported to every node.
    pub env: &'a [(String, String)],
    pub workdir: &'a Path,
    /// The trial folder: every node must see it (the job's script and logs live there).
    pub dir: &'a Path,
}

/// A batch scheduler. Its commands block; the engine calls them off its async loop.
pub trait Scheduler: Send + Sync + std::fmt::Debug {
    /// Its name, as a stored job records it (`slurm`).
    fn name(&self) -> &'static str;
    /// Its name in prose (`Slurm`).
    fn title(&self) -> &'static str;
    /// The configuration its commands use (Slurm's `SLURM_CONF`), stored with the job.
    fn conf(&self) -> Option<&Path>;
    /// Writes the job's script in the trial folder and submits it; the job's id.
    fn submit(&self, s: &Submission<'_>) -> Result<String, SchedulerError>;
    /// The submit options of the job, for a profile whose own command submits it
    /// (`{slurm_args}`).
    fn submit_options(&self, spec: &JobSpec, dir: &Path) -> Vec<String>;
    /// The job id in a line the submit command printed (`Submitted batch job 42`).
    fn job_id_in(&self, line: &str) -> Option<String>;
    fn status(&self, id: &str) -> Result<JobStatus, SchedulerError>;
    /// How a finished job ended.
    fn exit(&self, id: &str) -> Result<JobExit, SchedulerError>;
    /// Cancels the job and waits (up to `wait`) until it left the queue; whether it left.
    fn cancel(&self, id: &str, wait: Duration) -> Result<bool, SchedulerError>;
    /// The argv that runs `argv` once per node inside the running job, beside its workload,
    /// each node's output in `output` (the telemetry step).
    fn step_argv(&self, id: &str, nodes: u32, output: &Path, argv: &[String]) -> Vec<String>;
    /// The log of node `n` (0-based) of a job in `dir`.
    fn node_log(&self, dir: &Path, n: u32) -> PathBuf;
    /// The log of the batch script itself.
    fn script_log(&self, dir: &Path, id: &str) -> PathBuf;
    /// Whether a pending reason means the job can never start as asked (it asks for more
    /// than the cluster or its limits allow); such a job fails at once.
    fn never_starts(&self, reason: &str) -> bool;
    /// Which of `nodes` the scheduler now reports down or not responding.
    fn down_nodes(&self, nodes: &[String]) -> Vec<String>;
}

/// The scheduler a stored job names, reaching the cluster it was submitted to.
pub fn named(name: &str, conf: Option<PathBuf>) -> Option<Arc<dyn Scheduler>> {
    match name {
        "slurm" => Some(Arc::new(super::slurm::Slurm { conf })),
        _ => None,
    }
}

/// The scheduler of a stored job.
pub fn of_job(job: &crate::domain::job::Job) -> Option<Arc<dyn Scheduler>> {
    named(&job.scheduler, job.conf.clone())
}
