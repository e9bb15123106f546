//! A trial as a batch job, on any [`Scheduler`]. It is submitted — a script the scheduler
//! renders around the profile's command, or the profile's own command when that submits the job
//! itself (Primus' `primus-cli slurm sbatch ...`) — and followed from the trial folder, which
//! every node shares: the job's state from pending (with the scheduler's reason) through running
//! to its end, the last rank's log as it grows, and each node's telemetry, written by a monitor
//! step that runs on every node beside the workload. A job the scheduler says can never start,
//! one that waits past its pending limit, and one the scheduler requeues (a node failed: what
//! ran is lost) end the trial with their own failure. Stopping the trial cancels the job.

use super::scheduler::{JobExit, JobSpec, JobState, JobStatus, Scheduler, Submission};
use crate::domain::job::Job;
use crate::domain::telemetry::Snapshot;
use crate::domain::trial::{Failure, FailureClass};
use crate::run::process::Stream;
use crate::run::trial::{Materialised, TrialError, TrialEvent};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How a trial runs as a batch job.
#[derive(Debug, Clone)]
pub struct BatchLaunch {
    pub scheduler: Arc<dyn Scheduler>,
    pub spec: JobSpec,
    /// How often the job's state and the trial folder are read.
    pub poll: Duration,
    /// The profile's command submits the job itself (its output names the job id); else the
    /// scheduler renders and submits the job's script.
    pub submits: bool,
    /// Follow this running job of the trial instead of submitting one (a resumed sweep).
    pub attach: Option<AttachTo>,
    /// Longest wait in the queue before the trial fails as `pending-limit` (None: no limit).
    pub max_pending: Option<Duration>,
}

/// A job a resumed trial follows again.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachTo {
    pub trial_id: i64,
    pub dir: PathBuf,
    pub job: Job,
}

/// What the follower reports about the job.
#[derive(Debug, Clone)]
pub struct JobUpdate {
    pub status: JobStatus,
    /// Unix ms when it was seen.
    pub at_ms: u64,
    /// Set on the last update: how the job ended (None when the scheduler lost it).
    pub exit: Option<JobExit>,
    pub last: bool,
    /// Nodes of the job the scheduler reports down, read when the job was requeued or ended
    /// by a node failure.
    pub down: Vec<String>,
}

/// The follower's channels: the followed logs' lines (closed once the job is over, or
/// requeued, and its files are read to the end), the nodes' telemetry, and the job's states.
pub struct Followers {
    pub lines: mpsc::Receiver<(Stream, String)>,
    pub snaps: mpsc::Receiver<Snapshot>,
    pub states: mpsc::Receiver<JobUpdate>,
}

/// What to follow.
struct Follow {
    scheduler: Arc<dyn Scheduler>,
    job: String,
    dir: PathBuf,
    /// Logs whose lines are the trial's (the last rank's, the batch script's).
    logs: Vec<PathBuf>,
    poll: Duration,
    /// The monitor step's argv (wrapped by the supervisor), started once the job runs.
    monitor: Option<Vec<String>>,
    /// How long the scheduler may not know the job before it counts as lost.
    lost_after: Duration,
    /// The job was seen running before (a re-attached one).
    ran: bool,
}

/// Now, in Unix milliseconds (as telemetry snapshots are stamped).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The telemetry files of the nodes in a trial folder (`telemetry-<node>.jsonl`).
pub fn telemetry_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("telemetry-") && n.ends_with(".jsonl"))
        })
        .collect();
    out.sort();
    out
}

/// A file read as it grows: complete lines only (a partial last line waits for its end).
struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

/// Longest line kept whole; a longer one is cut (a runaway line cannot exhaust memory).
const MAX_LINE: usize = 1 << 20;

impl Tail {
    fn new(path: PathBuf) -> Tail {
        Tail {
            path,
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// New complete lines since the last read; at `end`, a partial last line too.
    fn read(&mut self, end: bool) -> Vec<String> {
        let mut out = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&self.path)
            && f.seek(SeekFrom::Start(self.offset)).is_ok()
        {
            let mut buf = Vec::new();
            if let Ok(n) = f.read_to_end(&mut buf) {
                self.offset += n as u64;
                for b in buf {
                    if b == b'\n' {
                        out.push(String::from_utf8_lossy(&self.partial).into_owned());
                        self.partial.clear();
                    } else if self.partial.len() < MAX_LINE {
                        self.partial.push(b);
                    }
                }
            }
        }
        if end && !self.partial.is_empty() {
            out.push(String::from_utf8_lossy(&self.partial).into_owned());
            self.partial.clear();
        }
        out
    }
}

/// Starts following the job on a thread of its own (the scheduler's commands block).
fn follow(f: Follow) -> Followers {
    let (lines_tx, lines) = mpsc::channel(4096);
    let (snap_tx, snaps) = mpsc::channel(1024);
    let (state_tx, states) = mpsc::channel(64);
    std::thread::spawn(move || run(f, lines_tx, snap_tx, state_tx));
    Followers {
        lines,
        snaps,
        states,
    }
}

/// Whether a status means the scheduler requeued the job: it says so, or a job that ran
/// (`ran`, or a restart count) waits in the queue again.
fn requeued(s: &JobStatus, ran: bool) -> bool {
    match s.state {
        JobState::Requeued => true,
        JobState::Pending { .. } => ran || s.restarts > 0,
        _ => false,
    }
}

/// The follower's readers of the trial folder: the logs and the nodes' telemetry.
struct Readers {
    logs: Vec<Tail>,
    tele: Vec<Tail>,
}

impl Readers {
    fn read(
        &mut self,
        dir: &Path,
        end: bool,
        lines_tx: &mpsc::Sender<(Stream, String)>,
        snap_tx: &mpsc::Sender<Snapshot>,
    ) {
        for t in self.logs.iter_mut() {
            for l in t.read(end) {
                let _ = lines_tx.blocking_send((Stream::Stdout, l));
            }
        }
        for p in telemetry_files(dir) {
            if !self.tele.iter().any(|t| t.path == p) {
                self.tele.push(Tail::new(p));
            }
        }
        for t in self.tele.iter_mut() {
            for l in t.read(end) {
                if let Ok(s) = serde_json::from_str::<Snapshot>(&l) {
                    let _ = snap_tx.blocking_send(s);
                }
            }
        }
    }
}

fn run(
    f: Follow,
    lines_tx: mpsc::Sender<(Stream, String)>,
    snap_tx: mpsc::Sender<Snapshot>,
    state_tx: mpsc::Sender<JobUpdate>,
) {
    let mut readers = Readers {
        logs: f.logs.iter().cloned().map(Tail::new).collect(),
        tele: Vec::new(),
    };
    let mut monitor: Option<Child> = None;
    let mut last: Option<JobStatus> = None;
    let mut unknown_since: Option<Instant> = None;
    let mut ran = f.ran;
    let send = |status: JobStatus, exit, last: bool, down: Vec<String>| {
        let _ = state_tx.blocking_send(JobUpdate {
            status,
            at_ms: unix_ms(),
            exit,
            last,
            down,
        });
    };
    let final_status = loop {
        let status = match f.scheduler.status(&f.job) {
            Ok(s) => {
                unknown_since = None;
                Some(s)
            }
            Err(_) => {
                let since = *unknown_since.get_or_insert_with(Instant::now);
                (since.elapsed() >= f.lost_after).then(|| JobStatus {
                    state: JobState::Ended(super::scheduler::JobEnd::Lost),
                    name: "LOST".into(),
                    node_list: last
                        .as_ref()
                        .map(|s| s.node_list.clone())
                        .unwrap_or_default(),
                    restarts: 0,
                })
            }
        };
        if let Some(mut s) = status {
            if requeued(&s, ran) {
                // What ran is lost and the job would start again from the beginning: the
                // trial ends here, its logs are no longer followed (a node cut off from the
                // scheduler may still be writing to them).
                let mut nodes = last.as_ref().map_or(Vec::new(), |l| l.node_list.clone());
                if nodes.is_empty() {
                    nodes = s.node_list.clone();
                }
                let down = down_nodes_settled(f.scheduler.as_ref(), &nodes);
                s.state = JobState::Requeued;
                if s.node_list.is_empty() {
                    s.node_list = nodes;
                }
                if let Some(mut m) = monitor {
                    stop_monitor(&mut m);
                }
                // Not its last state: the runner cancels the job (it would run again).
                send(s, None, false, down);
                return;
            }
            if s.state == JobState::Running {
                ran = true;
                if monitor.is_none()
                    && let Some(argv) = &f.monitor
                {
                    monitor = start_monitor(&f, argv);
                }
            }
            let over = s.state.is_over();
            if last.as_ref() != Some(&s) && !over {
                send(s.clone(), None, false, Vec::new());
            }
            last = Some(s.clone());
            if over {
                break s;
            }
        }
        readers.read(&f.dir, false, &lines_tx, &snap_tx);
        if lines_tx.is_closed() {
            // The trial is gone: nobody reads any more.
            return;
        }
        std::thread::sleep(f.poll);
    };
    let ended_ms = unix_ms();
    // What the nodes wrote last reaches a shared filesystem shortly after the job ends.
    readers.read(&f.dir, false, &lines_tx, &snap_tx);
    std::thread::sleep(Duration::from_millis(700));
    readers.read(&f.dir, true, &lines_tx, &snap_tx);
    if let Some(mut m) = monitor {
        stop_monitor(&mut m);
    }
    let exit = match final_status.state {
        JobState::Ended(super::scheduler::JobEnd::Lost) => None,
        _ => f.scheduler.exit(&f.job).ok().or(Some(JobExit {
            state: final_status.state.clone(),
            code: None,
            signal: None,
            source: "the queue",
        })),
    };
    let down = match &final_status.state {
        JobState::Ended(super::scheduler::JobEnd::NodeFail) => {
            down_nodes_settled(f.scheduler.as_ref(), &final_status.node_list)
        }
        _ => Vec::new(),
    };
    let _ = state_tx.blocking_send(JobUpdate {
        status: final_status,
        at_ms: ended_ms,
        exit,
        last: true,
        down,
    });
}

/// The nodes the scheduler reports down, asked again a few times while it reports none: on a
/// busy controller `sinfo` can time out, or the node's state can lag the job's by a poll, and
/// the failure line should still name the node.
fn down_nodes_settled(sched: &dyn Scheduler, nodes: &[String]) -> Vec<String> {
    const TRIES: u32 = 5;
    for i in 0..TRIES {
        let down = sched.down_nodes(nodes);
        if !down.is_empty() || nodes.is_empty() || i + 1 == TRIES {
            return down;
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    Vec::new()
}

/// The monitor step, started once the job runs: its own output goes to `monitor.log`.
fn start_monitor(f: &Follow, argv: &[String]) -> Option<Child> {
    let (program, args) = argv.split_first()?;
    let log = std::fs::File::create(f.dir.join("monitor.log")).ok()?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().ok()?)
        .stderr(log);
    if let Some(c) = f.scheduler.conf() {
        // Slurm's commands in the step find the cluster the job runs on.
        cmd.env("SLURM_CONF", c);
    }
    cmd.spawn().ok()
}

/// Ends the monitor step (it ends with the job; this is for a job that ended first).
fn stop_monitor(m: &mut Child) {
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end {
        if matches!(m.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Ok(pid) = i32::try_from(m.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let end = Instant::now() + Duration::from_secs(5);
    while Instant::now() < end {
        if matches!(m.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = m.kill();
    let _ = m.wait();
}

/// Whether a filesystem is one the nodes of a cluster can share (NFS, Lustre, GPFS, BeeGFS,
/// CephFS, CIFS/SMB, WekaFS, ...), by its type; `Err` names the local type it is.
pub fn shared_filesystem(path: &Path) -> Result<(), String> {
    let st = nix::sys::statfs::statfs(path).map_err(|e| format!("statfs failed: {e}"))?;
    let t = st.filesystem_type().0 as i64;
    let (shared, name) = match t {
        0x6969 => (true, "nfs"),
        0x0bd0_0bd0 => (true, "lustre"),
        0x4750_4653 => (true, "gpfs"),
        0x1983_0326 => (true, "beegfs"),
        0x00c3_6400 => (true, "cephfs"),
        0xff53_4d42 => (true, "cifs"),
        0xfe53_4d42 => (true, "smb2"),
        0x0102_1997 => (true, "9p/v9fs"),
        0x6573_5546 => (true, "fuse"),
        0xaad7_aaea => (true, "panfs"),
        0x2a15_91e3 => (true, "wekafs"),
        0xef53 => (false, "ext2/3/4"),
        0x5846_5342 => (false, "xfs"),
        0x9123_683e => (false, "btrfs"),
        0x0102_1994 => (false, "tmpfs"),
        0x794c_7630 => (false, "overlayfs"),
        0x2fc1_2fc1 => (false, "zfs"),
        _ => (false, "an unknown type"),
    };
    if shared {
        Ok(())
    } else {
        Err(format!("{name} (type {t:#x})"))
    }
}

/// The next job update, or never for a trial that is not a job.
pub async fn recv_update(rx: &mut Option<mpsc::Receiver<JobUpdate>>) -> Option<JobUpdate> {
    match rx {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// A trial's job as the runner keeps it.
pub struct BatchRun {
    pub scheduler: Arc<dyn Scheduler>,
    /// The trial folder.
    pub dir: PathBuf,
    pub record: Job,
    /// When it started running (here, monotonic).
    pub running_since: Option<Instant>,
    pub ended: Option<Instant>,
    pub over: bool,
    /// primus-tune cancelled it (a stop), so its `CANCELLED` end is not a failure.
    pub cancelled: bool,
    pub exit: Option<JobExit>,
    pub last_state: Option<JobState>,
    /// When the previous update was seen (Unix ms).
    pub last_seen_ms: Option<u64>,
    /// The job's own failure, decided from its states (never startable, requeued after a node
    /// failed, waited past its pending limit): it wins over how the job ended after the
    /// runner cancelled it.
    pub failure: Option<Failure>,
    /// Nodes the scheduler reported down when the job ended or was requeued.
    pub down: Vec<String>,
    /// When the job was submitted (monotonic), for the pending limit.
    submitted: Instant,
    max_pending: Option<Duration>,
}

/// An `Instant` `ms` Unix milliseconds ago from now.
fn instant_of(unix: u64) -> Instant {
    let ago = Duration::from_millis(unix_ms().saturating_sub(unix));
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}

/// What an update means for the trial.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// The job runs from now on (start-up and hang clocks start).
    pub began: bool,
    /// The job failed in a way the trial must stop for (it is then cancelled).
    pub failure: Option<Failure>,
}

impl BatchRun {
    /// Records an update (stored with the trial, told to the frontend) and says what it means.
    pub async fn update(
        &mut self,
        u: &JobUpdate,
        store: &crate::store::Store,
        trial_id: i64,
        events: &mpsc::Sender<TrialEvent>,
    ) -> Verdict {
        let began = self.record_update(u);
        if !u.down.is_empty() {
            self.down = u.down.clone();
        }
        let failure = self.judge(u);
        if failure.is_some() && self.failure.is_none() {
            self.failure = failure.clone();
        }
        let patience = if u.last {
            store.patience()
        } else {
            Duration::ZERO
        };
        let r = &self.record;
        let _ = store.with_patience(patience, || store.set_trial_job(trial_id, r));
        let _ = events.send(TrialEvent::Job(Box::new(r.clone()))).await;
        let _ = events
            .send(TrialEvent::Line {
                stream: Stream::Stderr,
                line: self.describe_update(u),
            })
            .await;
        if let Some(f) = &failure
            && let Some(line) = &f.line
        {
            let _ = events
                .send(TrialEvent::Line {
                    stream: Stream::Stderr,
                    line: format!("primus-tune: {line}"),
                })
                .await;
        }
        Verdict { began, failure }
    }

    /// The record after an update; true when it shows the job running for the first time.
    fn record_update(&mut self, u: &JobUpdate) -> bool {
        let r = &mut self.record;
        r.state = u.status.name.clone();
        r.reason = match &u.status.state {
            JobState::Pending { reason } if !reason.is_empty() => Some(reason.clone()),
            _ => None,
        };
        if !u.status.node_list.is_empty() {
            r.node_list = u.status.node_list.clone();
        }
        let mut began = false;
        // The job's own start when its script wrote it, else when it was first seen running.
        let written = std::fs::read_to_string(self.dir.join(super::slurm::JOB_STARTED))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|ms| *ms <= u.at_ms && *ms >= r.submitted_ms);
        if matches!(u.status.state, JobState::Running) && self.running_since.is_none() {
            let at = *r.started_ms.get_or_insert(written.unwrap_or(u.at_ms));
            self.running_since = Some(instant_of(at));
            began = true;
        }
        let ran_by_itself = u.exit.as_ref().is_some_and(|x| {
            x.code.is_some()
                && matches!(
                    x.state,
                    JobState::Completed | JobState::Ended(super::scheduler::JobEnd::Failed)
                )
        });
        if u.last && self.running_since.is_none() && (ran_by_itself || written.is_some()) {
            // It ran between two polls: it started at most one poll before it ended.
            let at = *r
                .started_ms
                .get_or_insert(written.or(self.last_seen_ms).unwrap_or(u.at_ms));
            self.running_since = Some(instant_of(at));
        }
        self.last_seen_ms = Some(u.at_ms);
        if u.last {
            self.over = true;
            self.ended = Some(instant_of(u.at_ms));
            r.ended_ms = Some(u.at_ms);
            self.exit = u.exit.clone();
            self.last_state = Some(match &u.exit {
                Some(x) => x.state.clone(),
                None => u.status.state.clone(),
            });
        }
        began
    }

    /// The job's own failure an update shows, if any.
    fn judge(&self, u: &JobUpdate) -> Option<Failure> {
        let id = &self.record.id;
        let sched = self.scheduler.title();
        match &u.status.state {
            JobState::Requeued => Some(Failure {
                class: FailureClass::NodeFail,
                line: Some(format!(
                    "{sched} requeued job {id} ({}){}: a requeued job starts again from the \
                     beginning, so this trial ends here and the job is cancelled (--requeue \
                     keeps a requeued job; it still ends the trial)",
                    u.status.name,
                    down_text(&u.down)
                )),
            }),
            JobState::Pending { reason } if self.scheduler.never_starts(reason) => Some(Failure {
                class: FailureClass::Unschedulable,
                line: Some(format!(
                    "{sched} says job {id} can never start as submitted ({reason}): \
                         cancelled"
                )),
            }),
            _ => None,
        }
    }

    /// The line the trial's log gets for an update.
    fn describe_update(&self, u: &JobUpdate) -> String {
        let r = &self.record;
        let id = &r.id;
        let sched = self.scheduler.title();
        match (&u.status.state, &u.exit) {
            (JobState::Pending { reason }, _) if reason.is_empty() => {
                format!("primus-tune: {sched} job {id} is pending")
            }
            (JobState::Pending { reason }, _) => {
                format!("primus-tune: {sched} job {id} is pending ({reason})")
            }
            (JobState::Running, _) => format!(
                "primus-tune: {sched} job {id} is running on {}",
                r.node_list.join(",")
            ),
            (JobState::Requeued, _) => format!(
                "primus-tune: {sched} job {id} was requeued{}",
                down_text(&u.down)
            ),
            (_, Some(x)) => format!(
                "primus-tune: {sched} job {id} ended {}{} (exit {}{}, from {})",
                u.status.name,
                down_text(&u.down),
                x.code.map_or("?".into(), |c| c.to_string()),
                x.signal.map_or(String::new(), |s| format!(", signal {s}")),
                x.source
            ),
            _ => format!("primus-tune: {sched} job {id} is {}", u.status.name),
        }
    }

    /// The pending limit's end while the job waits in the queue (None: no limit, or running).
    pub fn pending_deadline(&self) -> Option<Instant> {
        if self.running_since.is_some() || self.over {
            return None;
        }
        self.max_pending.map(|m| self.submitted + m)
    }

    /// The failure of a job that waited past its pending limit, at `now`.
    pub fn pending_over(&mut self, now: Instant) -> Option<Failure> {
        let deadline = self.pending_deadline()?;
        if now < deadline {
            return None;
        }
        let reason = self
            .record
            .reason
            .as_deref()
            .map_or(String::new(), |r| format!(" ({r})"));
        let f = Failure {
            class: FailureClass::PendingLimit,
            line: Some(format!(
                "{} job {} waited {:.0} s in the queue{reason}, past --max-pending-seconds: \
                 cancelled",
                self.scheduler.title(),
                self.record.id,
                now.saturating_duration_since(self.submitted).as_secs_f64()
            )),
        };
        self.failure = Some(f.clone());
        Some(f)
    }

    /// After the trial: a job that is not over (its follower stopped following it, as after a
    /// requeue) is cancelled, and its record says how it ended.
    pub async fn settle(&mut self, store: &crate::store::Store, trial_id: i64) {
        if self.over {
            return;
        }
        self.cancel().await;
        let (sched, id) = (self.scheduler.clone(), self.record.id.clone());
        let status = tokio::task::spawn_blocking(move || sched.status(&id))
            .await
            .ok()
            .and_then(Result::ok);
        self.record.state = status.map_or_else(|| "CANCELLED".to_string(), |s| s.name);
        self.record.reason = None;
        self.record.ended_ms = Some(unix_ms());
        self.over = true;
        let _ = store.set_trial_job(trial_id, &self.record);
    }

    /// Cancels the job and waits until it has left the queue.
    pub async fn cancel(&mut self) {
        if self.over {
            return;
        }
        self.cancelled = true;
        let (sched, id) = (self.scheduler.clone(), self.record.id.clone());
        let _ =
            tokio::task::spawn_blocking(move || sched.cancel(&id, Duration::from_secs(120))).await;
    }

    /// The batch script's exit code and signal.
    pub fn exit_status(&self) -> (Option<i32>, Option<i32>) {
        self.exit
            .as_ref()
            .map_or((None, None), |x| (x.code, x.signal))
    }

    /// Seconds the job ran (not its time in the queue).
    pub fn wall_s(&self) -> f64 {
        match (self.running_since, self.ended) {
            (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
            (Some(a), None) => a.elapsed().as_secs_f64(),
            _ => 0.0,
        }
    }

    /// Seconds it waited in the queue: until it started, or (a job that never started) until
    /// it ended.
    pub fn queued_s(&self) -> Option<f64> {
        let r = &self.record;
        let until = r.started_ms.or(r.ended_ms)?;
        Some(until.saturating_sub(r.submitted_ms) as f64 / 1000.0)
    }

    /// The trial's failure from its job: a failure decided from its states, else how the
    /// scheduler ended it (its time limit, a node failure, a preemption, a cancel by someone
    /// else, lost); None when it completed, failed by its own exit, or primus-tune cancelled
    /// it.
    pub fn job_failure(&self) -> Option<Failure> {
        if let Some(f) = &self.failure {
            return Some(f.clone());
        }
        if self.cancelled {
            return None;
        }
        let end = match &self.last_state {
            Some(JobState::Ended(e)) if *e != super::scheduler::JobEnd::Failed => *e,
            _ => return None,
        };
        Some(Failure {
            class: end.class(),
            line: Some(format!(
                "{} job {} ended {}{}",
                self.scheduler.title(),
                self.record.id,
                self.record.state,
                down_text(&self.down)
            )),
        })
    }
}

/// ` after node n2 failed`, naming the nodes the scheduler reports down.
fn down_text(down: &[String]) -> String {
    match down {
        [] => String::new(),
        [one] => format!(" after node {one} failed"),
        many => format!(" after nodes {} failed", many.join(",")),
    }
}

/// Submits the trial's job (or re-attaches to it) and starts following it.
pub async fn start(
    b: &BatchLaunch,
    m: &Materialised,
    opts: &crate::run::trial::TrialOptions,
    store: &crate::store::Store,
    events: &mpsc::Sender<TrialEvent>,
) -> Result<(BatchRun, Followers), TrialError> {
    let record = match &b.attach {
        Some(a) => {
            let sched = b.scheduler.title();
            let line = format!(
                "primus-tune: re-attached to {sched} job {} of trial {}",
                a.job.id, a.trial_id
            );
            say(events, line).await;
            a.job.clone()
        }
        None => submit(b, m, store, events).await?,
    };
    let _ = events.send(TrialEvent::Job(Box::new(record.clone()))).await;
    let id = record.id.clone();
    let mut logs = vec![b.scheduler.script_log(&m.dir, &id)];
    if !b.submits {
        logs.push(b.scheduler.node_log(&m.dir, b.spec.nodes.max(1) - 1));
    }
    let monitor = opts
        .telemetry
        .as_ref()
        .map(|t| monitor_step(b, m, opts, t, &record));
    let followers = follow(Follow {
        scheduler: b.scheduler.clone(),
        job: id,
        dir: m.dir.clone(),
        logs,
        poll: b.poll,
        monitor,
        lost_after: Duration::from_secs(60),
        ran: record.started_ms.is_some(),
    });
    let submitted = instant_of(record.submitted_ms);
    let ctl = BatchRun {
        scheduler: b.scheduler.clone(),
        dir: m.dir.clone(),
        record,
        running_since: None,
        ended: None,
        over: false,
        cancelled: false,
        exit: None,
        last_state: None,
        last_seen_ms: None,
        failure: None,
        down: Vec::new(),
        submitted,
        max_pending: b.max_pending,
    };
    Ok((ctl, followers))
}

/// A line of primus-tune's own in the trial's output.
async fn say(events: &mpsc::Sender<TrialEvent>, line: String) {
    let _ = events
        .send(TrialEvent::Line {
            stream: Stream::Stderr,
            line,
        })
        .await;
}

/// Submits the trial's job (by the scheduler, or by the profile's own command) and stores it
/// with the trial.
async fn submit(
    b: &BatchLaunch,
    m: &Materialised,
    store: &crate::store::Store,
    events: &mpsc::Sender<TrialEvent>,
) -> Result<Job, TrialError> {
    if let Err(kind) = shared_filesystem(&m.dir) {
        let line = format!(
            "primus-tune: note: the trial folder {} is on a local filesystem ({kind}): \
             every node of the job must see it at the same path (put the workspace on a \
             shared filesystem with --workspace); a node that does not see it fails the \
             job with a message saying so",
            m.dir.display()
        );
        say(events, line).await;
    }
    let id = if b.submits {
        submit_by_profile(b.scheduler.as_ref(), m, events).await?
    } else {
        let (b2, m2) = (b.clone(), m.clone());
        tokio::task::spawn_blocking(move || {
            b2.scheduler.submit(&Submission {
                spec: &b2.spec,
                argv: &m2.launch.argv,
                env: &m2.launch.env,
                workdir: &m2.launch.cwd,
                dir: &m2.dir,
            })
        })
        .await
        .map_err(|e| TrialError::Job(e.to_string()))?
        .map_err(|e| TrialError::Job(e.to_string()))?
    };
    let r = Job {
        scheduler: b.scheduler.name().to_string(),
        id,
        conf: b.scheduler.conf().map(Path::to_path_buf),
        nodes: b.spec.nodes.max(1),
        gpus_per_node: b.spec.gpus_per_node,
        state: "SUBMITTED".into(),
        submitted_ms: unix_ms(),
        ..Default::default()
    };
    store.set_trial_job(m.trial_id, &r)?;
    let line = format!(
        "primus-tune: submitted {} job {} ({}{})",
        b.scheduler.title(),
        r.id,
        crate::util::text::count(r.nodes as usize, "node", "nodes"),
        r.gpus_per_node.map_or(String::new(), |g| format!(
            ", {} each",
            crate::util::text::count(g as usize, "GPU", "GPUs")
        ))
    );
    say(events, line).await;
    Ok(r)
}

/// The job step that samples every node's GPUs into the trial folder (`monitor
/// --snapshots-dir`), under the trial's supervisor when it has one.
fn monitor_step(
    b: &BatchLaunch,
    m: &Materialised,
    opts: &crate::run::trial::TrialOptions,
    t: &crate::run::trial::TelemetrySetup,
    record: &Job,
) -> Vec<String> {
    let exe = opts
        .self_exe
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("primus-tune"));
    let argv = vec![
        exe.display().to_string(),
        "monitor".into(),
        "--snapshots-dir".into(),
        m.dir.display().to_string(),
        "--backend".into(),
        t.backend.clone(),
        "--interval".into(),
        t.config.interval.as_millis().to_string(),
        "--sysfs-root".into(),
        t.roots.sysfs.display().to_string(),
        "--procfs-root".into(),
        t.roots.procfs.display().to_string(),
    ];
    let step = b.scheduler.step_argv(
        &record.id,
        record.nodes,
        &m.dir.join("monitor-%n.log"),
        &argv,
    );
    match &m.launch.supervisor {
        Some(s) => s.wrap(std::process::id(), &step),
        None => step,
    }
}

/// Runs the profile's command, which submits the job itself (Primus' `primus-cli slurm
/// sbatch`), here; its output is the trial's, and names the job (`Submitted batch job N`).
async fn submit_by_profile(
    scheduler: &dyn Scheduler,
    m: &Materialised,
    events: &mpsc::Sender<TrialEvent>,
) -> Result<String, TrialError> {
    let (mut running, mut lines) = crate::run::process::spawn(&m.launch)?;
    let mut job = None;
    let mut tail: Vec<String> = Vec::new();
    while let Some((stream, line)) = lines.recv().await {
        if job.is_none() {
            job = scheduler.job_id_in(&line);
        }
        tail.push(line.clone());
        if tail.len() > 5 {
            tail.remove(0);
        }
        let _ = events.send(TrialEvent::Line { stream, line }).await;
    }
    let status = running.child.wait().await.ok();
    running.guard.disarm();
    match (job, status) {
        (Some(j), Some(s)) if s.success() => Ok(j),
        (j, s) => Err(TrialError::Job(format!(
            "the profile's command {} ({}); its last lines: {}",
            if j.is_some() {
                "failed after submitting"
            } else {
                "named no job (`Submitted batch job N`)"
            },
            s.map_or("no exit status".into(), |s| s.to_string()),
            tail.join(" | ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_returns_complete_lines_as_the_file_grows() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        let mut t = Tail::new(p.clone());
        assert!(t.read(false).is_empty());
        std::fs::write(&p, "one\ntw").unwrap();
        assert_eq!(t.read(false), ["one"]);
        std::fs::write(&p, "one\ntwo\nthr").unwrap();
        assert_eq!(t.read(false), ["two"]);
        assert_eq!(t.read(true), ["thr"]);
    }

    #[test]
    fn telemetry_files_are_the_nodes_streams() {
        let d = tempfile::tempdir().unwrap();
        for n in ["telemetry-n2.jsonl", "telemetry-n1.jsonl", "node-0.log"] {
            std::fs::write(d.path().join(n), "").unwrap();
        }
        let names: Vec<String> = telemetry_files(d.path())
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["telemetry-n1.jsonl", "telemetry-n2.jsonl"]);
    }

    #[test]
    fn a_local_filesystem_is_not_shared() {
        // /proc is procfs: not a filesystem nodes share.
        assert!(shared_filesystem(Path::new("/proc")).is_err());
    }

    fn status(state: JobState, restarts: u32) -> JobStatus {
        JobStatus {
            state,
            name: String::new(),
            node_list: Vec::new(),
            restarts,
        }
    }

    /// A job that ran and waits in the queue again was requeued (Slurm shows it `PENDING`
    /// with a restart count, or `REQUEUED`); a job that never ran is only pending.
    #[test]
    fn a_job_back_in_the_queue_after_it_ran_was_requeued() {
        let pending = || JobState::Pending {
            reason: "BeginTime".into(),
        };
        assert!(requeued(&status(JobState::Requeued, 0), false));
        assert!(requeued(&status(pending(), 0), true));
        assert!(requeued(&status(pending(), 1), false));
        assert!(!requeued(&status(pending(), 0), false));
        assert!(!requeued(&status(JobState::Running, 1), true));
    }
}
