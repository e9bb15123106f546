//! A trial as a process tree on this node: spawned through the supervisor in a process group
//! of its own, its output read line by line, stopped as a group (SIGINT, SIGTERM, SIGKILL),
//! and after its end no process of its cgroup or carrying its identity is left.

use crate::run::process::{self, Running, Stream};
use crate::run::trial::{Materialised, TrialError, materialise::TRIAL_DIR_ENV};
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

/// A trial's process tree on this node.
pub struct LocalRun {
    pub running: Running,
}

/// Starts the trial's launch; its output lines come on the receiver.
pub fn start(m: &Materialised) -> Result<(LocalRun, mpsc::Receiver<(Stream, String)>), TrialError> {
    let (running, lines) = process::spawn(&m.launch)?;
    Ok((LocalRun { running }, lines))
}

impl LocalRun {
    /// Stops the tree: SIGINT, then SIGTERM and SIGKILL `grace` apart.
    pub async fn stop(&mut self, grace: Duration) {
        process::stop_tree(&mut self.running, grace).await;
    }

    /// Its exit (code, signal).
    pub async fn wait(&mut self) -> (Option<i32>, Option<i32>) {
        use std::os::unix::process::ExitStatusExt;
        let s = self.running.child.wait().await.ok();
        (s.and_then(|s| s.code()), s.and_then(|s| s.signal()))
    }

    /// After the trial: what is left of the tree is stopped, everything still in the trial's
    /// cgroup is killed, and so is any process that carries the trial's folder in its
    /// environment (one that left the tree, where there is no cgroup); how many were.
    pub async fn sweep_up(&mut self, dir: &Path) -> usize {
        if self.running.alive() {
            process::stop_tree(&mut self.running, Duration::from_millis(200)).await;
        }
        self.running.guard.disarm();
        let in_cgroup = self.running.cgroup.as_ref().map_or(0, |c| c.kill_all());
        in_cgroup + process::kill_strays(TRIAL_DIR_ENV, &dir.display().to_string())
    }
}
