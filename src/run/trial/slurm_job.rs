//! A trial as a Slurm job. It is submitted — a batch script primus-tune renders around the
//! profile's command, or the profile's own command when that submits the job itself (Primus'
//! `primus-cli slurm sbatch ...`) — and followed from the trial folder, which every node shares:
//! the job's state from pending (with Slurm's reason) through running to its end, the last
//! rank's log as it grows, and each node's telemetry, written by a monitor step that runs on
//! every node beside the workload (`srun --overlap`). Stopping the trial cancels the job.

use super::TrialError;
use crate::domain::telemetry::Snapshot;
use crate::run::process::Stream;
use crate::run::slurm::{JobExit, JobState, JobStatus, Slurm, SlurmEnd, SlurmSpec};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How a trial runs on Slurm.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmLaunch {
    pub spec: SlurmSpec,
    pub slurm: Slurm,
    /// How often the job's state and the trial folder are read.
    pub poll: Duration,
    /// The profile's command submits the job itself (its output names the job id); else
    /// primus-tune renders and submits the batch script.
    pub submits: bool,
    /// Re-attach to this running job of the trial instead of submitting one (a resumed sweep).
    pub attach: Option<AttachTo>,
}

/// A job a resumed trial follows again.
#[derive(Debug, Clone, PartialEq)]
pub struct AttachTo {
    pub trial_id: i64,
    pub dir: PathBuf,
    pub job: crate::domain::trial::SlurmJob,
}

/// What the follower reports about the job.
#[derive(Debug, Clone)]
pub struct JobUpdate {
    pub status: JobStatus,
    /// Unix ms when it was seen.
    pub at_ms: u64,
    /// Set on the last update: how the job ended (None when Slurm lost it).
    pub exit: Option<JobExit>,
    pub last: bool,
}

/// The follower's channels: the followed logs' lines (closed once the job is over and its
/// files are read to the end), the nodes' telemetry, and the job's states.
pub struct Followers {
    pub lines: mpsc::Receiver<(Stream, String)>,
    pub snaps: mpsc::Receiver<Snapshot>,
    pub states: mpsc::Receiver<JobUpdate>,
}

/// What to follow.
pub struct Follow {
    pub slurm: Slurm,
    pub job: u64,
    pub dir: PathBuf,
    /// Logs whose lines are the trial's (the last rank's, the batch script's).
    pub logs: Vec<PathBuf>,
    pub poll: Duration,
    /// The monitor step's argv (wrapped by the supervisor), started once the job runs.
    pub monitor: Option<Vec<String>>,
    /// How long Slurm may not know the job before it counts as lost.
    pub lost_after: Duration,
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

/// Starts following the job on a thread of its own (Slurm's commands block).
pub fn follow(f: Follow) -> Followers {
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

fn run(
    f: Follow,
    lines_tx: mpsc::Sender<(Stream, String)>,
    snap_tx: mpsc::Sender<Snapshot>,
    state_tx: mpsc::Sender<JobUpdate>,
) {
    let mut logs: Vec<Tail> = f.logs.iter().cloned().map(Tail::new).collect();
    let mut tele: Vec<Tail> = Vec::new();
    let mut monitor: Option<Child> = None;
    let mut last: Option<JobStatus> = None;
    let mut unknown_since: Option<Instant> = None;
    let read_all = |logs: &mut Vec<Tail>, tele: &mut Vec<Tail>, end: bool| {
        for t in logs.iter_mut() {
            for l in t.read(end) {
                let _ = lines_tx.blocking_send((Stream::Stdout, l));
            }
        }
        for p in telemetry_files(&f.dir) {
            if !tele.iter().any(|t| t.path == p) {
                tele.push(Tail::new(p));
            }
        }
        for t in tele.iter_mut() {
            for l in t.read(end) {
                if let Ok(s) = serde_json::from_str::<Snapshot>(&l) {
                    let _ = snap_tx.blocking_send(s);
                }
            }
        }
    };
    let final_status = loop {
        let status = match f.slurm.status(f.job) {
            Ok(s) => {
                unknown_since = None;
                Some(s)
            }
            Err(_) => {
                let since = *unknown_since.get_or_insert_with(Instant::now);
                (since.elapsed() >= f.lost_after).then(|| JobStatus {
                    state: JobState::Ended(SlurmEnd::Lost),
                    name: "LOST".into(),
                    node_list: last
                        .as_ref()
                        .map(|s| s.node_list.clone())
                        .unwrap_or_default(),
                })
            }
        };
        if let Some(s) = status {
            if s.state == JobState::Running
                && monitor.is_none()
                && let Some(argv) = &f.monitor
            {
                monitor = start_monitor(&f, argv);
            }
            let over = s.state.is_over();
            if last.as_ref() != Some(&s) && !over {
                let _ = state_tx.blocking_send(JobUpdate {
                    status: s.clone(),
                    at_ms: unix_ms(),
                    exit: None,
                    last: false,
                });
            }
            last = Some(s.clone());
            if over {
                break s;
            }
        }
        read_all(&mut logs, &mut tele, false);
        if lines_tx.is_closed() {
            // The trial is gone: nobody reads any more.
            return;
        }
        std::thread::sleep(f.poll);
    };
    let ended_ms = unix_ms();
    // What the nodes wrote last reaches a shared filesystem shortly after the job ends.
    read_all(&mut logs, &mut tele, false);
    std::thread::sleep(Duration::from_millis(700));
    read_all(&mut logs, &mut tele, true);
    if let Some(mut m) = monitor {
        stop_monitor(&mut m);
    }
    let exit = match final_status.state {
        JobState::Ended(SlurmEnd::Lost) => None,
        _ => f.slurm.exit(f.job).ok().or(Some(JobExit {
            state: final_status.state.clone(),
            code: None,
            signal: None,
            source: "squeue",
        })),
    };
    let _ = state_tx.blocking_send(JobUpdate {
        status: final_status,
        at_ms: ended_ms,
        exit,
        last: true,
    });
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
    if let Some(c) = &f.slurm.conf {
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

/// Submits the trial's job: writes `job.sbatch` in the trial folder and runs `sbatch`.
pub fn submit_script(
    launch: &SlurmLaunch,
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    dir: &Path,
) -> Result<u64, TrialError> {
    let script = crate::run::slurm::batch_script(&launch.spec, argv, env, cwd, dir);
    let path = dir.join("job.sbatch");
    std::fs::write(&path, script).map_err(super::io(&path))?;
    launch
        .slurm
        .submit(&path)
        .map_err(|e| TrialError::Slurm(e.to_string()))
}

/// The next job update, or never for a trial that is not a job.
pub async fn recv_update(rx: &mut Option<mpsc::Receiver<JobUpdate>>) -> Option<JobUpdate> {
    match rx {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// A trial's job as the runner keeps it.
pub struct JobCtl {
    pub slurm: Slurm,
    /// The trial folder.
    pub dir: PathBuf,
    pub record: crate::domain::trial::SlurmJob,
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
}

/// An `Instant` `ms` Unix milliseconds ago from now.
fn instant_of(unix: u64) -> Instant {
    let ago = Duration::from_millis(unix_ms().saturating_sub(unix));
    Instant::now().checked_sub(ago).unwrap_or_else(Instant::now)
}

impl JobCtl {
    /// Records an update; true when it shows the job running for the first time.
    pub async fn update(
        &mut self,
        u: &JobUpdate,
        store: &crate::store::Store,
        trial_id: i64,
        events: &mpsc::Sender<super::TrialEvent>,
    ) -> bool {
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
        let written = std::fs::read_to_string(self.dir.join(crate::run::slurm::JOB_STARTED))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|ms| *ms <= u.at_ms);
        if matches!(u.status.state, JobState::Running) && self.running_since.is_none() {
            let at = *r.started_ms.get_or_insert(written.unwrap_or(u.at_ms));
            self.running_since = Some(instant_of(at));
            began = true;
        }
        if u.last
            && self.running_since.is_none()
            && u.exit.as_ref().is_some_and(|x| x.code.is_some())
        {
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
            if let Some(x) = &u.exit {
                self.last_state = Some(x.state.clone());
            } else {
                self.last_state = Some(u.status.state.clone());
            }
        }
        let patience = if u.last {
            store.patience()
        } else {
            Duration::ZERO
        };
        let _ = store.with_patience(patience, || store.set_trial_slurm(trial_id, r));
        let id = r.job_id;
        let line = match (&u.status.state, &u.exit) {
            (JobState::Pending { reason }, _) => {
                format!("primus-tune: Slurm job {id} is pending ({reason})")
            }
            (JobState::Running, _) => format!(
                "primus-tune: Slurm job {id} is running on {}",
                r.node_list.join(",")
            ),
            (_, Some(x)) => format!(
                "primus-tune: Slurm job {id} ended {} (exit {}{}, from {})",
                u.status.name,
                x.code.map_or("?".into(), |c| c.to_string()),
                x.signal.map_or(String::new(), |s| format!(", signal {s}")),
                x.source
            ),
            _ => format!("primus-tune: Slurm job {id} is {}", u.status.name),
        };
        let _ = events
            .send(super::TrialEvent::Job(Box::new(self.record.clone())))
            .await;
        let _ = events
            .send(super::TrialEvent::Line {
                stream: Stream::Stderr,
                line,
            })
            .await;
        began
    }

    /// Cancels the job and waits until it has left `squeue`.
    pub async fn cancel(&mut self) {
        if self.over {
            return;
        }
        self.cancelled = true;
        let (sl, id) = (self.slurm.clone(), self.record.job_id);
        let _ = tokio::task::spawn_blocking(move || sl.cancel(id, Duration::from_secs(120))).await;
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

    /// Seconds it waited in the queue.
    pub fn pending_s(&self) -> Option<f64> {
        let (sub, start) = (self.record.submitted_ms, self.record.started_ms?);
        Some(start.saturating_sub(sub) as f64 / 1000.0)
    }

    /// The failure of a job that Slurm ended (its time limit, a node failure, a preemption,
    /// a cancel by someone else, lost); None when it completed, failed by its own exit, or
    /// primus-tune cancelled it.
    pub fn slurm_failure(&self) -> Option<crate::domain::trial::Failure> {
        if self.cancelled {
            return None;
        }
        let end = match &self.last_state {
            Some(JobState::Ended(e)) if *e != SlurmEnd::Failed => *e,
            _ => return None,
        };
        Some(crate::domain::trial::Failure {
            class: end.class(),
            line: Some(format!(
                "Slurm job {} ended {}",
                self.record.job_id, self.record.state
            )),
        })
    }
}

/// Submits the trial's job (or re-attaches to it) and starts following it.
pub async fn start(
    sl: &SlurmLaunch,
    m: &super::Materialised,
    opts: &super::TrialOptions,
    store: &crate::store::Store,
    events: &mpsc::Sender<super::TrialEvent>,
) -> Result<(JobCtl, Followers), TrialError> {
    let say = |line: String| async move {
        let _ = events
            .send(super::TrialEvent::Line {
                stream: Stream::Stderr,
                line,
            })
            .await;
    };
    let record = match &sl.attach {
        Some(a) => {
            say(format!(
                "primus-tune: re-attached to Slurm job {} of trial {}",
                a.job.job_id, a.trial_id
            ))
            .await;
            a.job.clone()
        }
        None => {
            if let Err(kind) = shared_filesystem(&m.dir) {
                say(format!(
                    "primus-tune: note: the trial folder {} is on a local filesystem ({kind}): \
                     every node of the job must see it at the same path (put the workspace on a \
                     shared filesystem with --workspace); a node that does not see it fails the \
                     job with a message saying so",
                    m.dir.display()
                ))
                .await;
            }
            let job_id = if sl.submits {
                submit_by_profile(m, events).await?
            } else {
                let (sl2, m2) = (sl.clone(), m.clone());
                tokio::task::spawn_blocking(move || {
                    submit_script(
                        &sl2,
                        &m2.launch.argv,
                        &m2.launch.env,
                        &m2.launch.cwd,
                        &m2.dir,
                    )
                })
                .await
                .map_err(|e| TrialError::Slurm(e.to_string()))??
            };
            let r = crate::domain::trial::SlurmJob {
                job_id,
                conf: sl.slurm.conf.clone(),
                nodes: sl.spec.nodes.max(1),
                gpus_per_node: sl.spec.gpus_per_node,
                state: "SUBMITTED".into(),
                submitted_ms: unix_ms(),
                ..Default::default()
            };
            store.set_trial_slurm(m.trial_id, &r)?;
            say(format!(
                "primus-tune: submitted Slurm job {job_id} ({} node(s){})",
                r.nodes,
                r.gpus_per_node
                    .map_or(String::new(), |g| format!(", {g} GPU(s) each"))
            ))
            .await;
            r
        }
    };
    let _ = events
        .send(super::TrialEvent::Job(Box::new(record.clone())))
        .await;
    let job = record.job_id;
    let mut logs = vec![m.dir.join(format!("slurm-{job}.out"))];
    if !sl.submits {
        logs.push(sl.spec.last_rank_log(&m.dir));
    }
    let monitor = opts.telemetry.as_ref().map(|t| {
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
        let step = sl
            .slurm
            .step_argv(job, record.nodes, &m.dir.join("monitor-%n.log"), &argv);
        match &m.launch.supervisor {
            Some(s) => s.wrap(std::process::id(), &step),
            None => step,
        }
    });
    let followers = follow(Follow {
        slurm: sl.slurm.clone(),
        job,
        dir: m.dir.clone(),
        logs,
        poll: sl.poll,
        monitor,
        lost_after: Duration::from_secs(60),
    });
    let ctl = JobCtl {
        slurm: sl.slurm.clone(),
        dir: m.dir.clone(),
        record,
        running_since: None,
        ended: None,
        over: false,
        cancelled: false,
        exit: None,
        last_state: None,
        last_seen_ms: None,
    };
    Ok((ctl, followers))
}

/// Runs the profile's command, which submits the job itself (Primus' `primus-cli slurm
/// sbatch`), here; its output is the trial's, and names the job (`Submitted batch job N`).
async fn submit_by_profile(
    m: &super::Materialised,
    events: &mpsc::Sender<super::TrialEvent>,
) -> Result<u64, TrialError> {
    let (mut running, mut lines) = crate::run::process::spawn(&m.launch)?;
    let mut job = None;
    let mut tail: Vec<String> = Vec::new();
    while let Some((stream, line)) = lines.recv().await {
        if job.is_none() {
            job = Slurm::job_id_in(&line);
        }
        tail.push(line.clone());
        if tail.len() > 5 {
            tail.remove(0);
        }
        let _ = events.send(super::TrialEvent::Line { stream, line }).await;
    }
    let status = running.child.wait().await.ok();
    running.guard.disarm();
    match (job, status) {
        (Some(j), Some(s)) if s.success() => Ok(j),
        (j, s) => Err(TrialError::Slurm(format!(
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
}
