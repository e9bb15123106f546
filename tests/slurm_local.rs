//! The local two-node Slurm cluster the Slurm tests run on (scripts/slurm-local.sh), and
//! primus-tune's Slurm layer on it (`run::slurm`): a batch script it renders runs one task per
//! node, a job's state is followed from pending (with its reason) through running to its end,
//! and a cancelled job leaves `squeue` and no process behind. Skipped, saying why, where the
//! cluster cannot run (not root, Slurm not installable).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use primus_tune::run::slurm::{self, JobState, Slurm, SlurmEnd, SlurmSpec};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-local.sh")
}

/// A running local cluster; stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
}

impl Cluster {
    /// Started on a port base of its own (`slot` keeps concurrent tests apart), or None when it
    /// cannot run here (said on stderr).
    fn start(slot: u32) -> Option<Cluster> {
        let uid = Command::new("id").arg("-u").output().unwrap();
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            eprintln!("skipped: the local Slurm cluster needs root (SlurmUser=root)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = 17_800 + (std::process::id() % 100) * 12 + slot * 3;
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(dir.path().join("slurm"))
            .env("PT_SLURM_PORT", port.to_string())
            .output()
            .unwrap();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("apt-get install") || err.contains("not installed") {
                eprintln!("skipped: Slurm cannot be installed here: {err}");
                return None;
            }
            panic!("the cluster did not start: {err}");
        }
        Some(Cluster { dir })
    }

    fn folder(&self) -> PathBuf {
        self.dir.path().join("slurm")
    }

    fn conf(&self) -> PathBuf {
        self.folder().join("slurm.conf")
    }

    /// Processes whose command line names this cluster's folder.
    fn left(&self) -> Vec<String> {
        let out = Command::new("pgrep")
            .args(["-af", &self.folder().display().to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn stop(&self) {
        let ok = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.folder())
            .status()
            .unwrap();
        assert!(ok.success());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(self.folder())
            .status();
    }
}

/// Waits up to `limit` for the job's state to satisfy `want`; the states seen.
fn follow(
    sl: &Slurm,
    job: u64,
    limit: Duration,
    want: impl Fn(&JobState) -> bool,
) -> Vec<JobState> {
    let end = Instant::now() + limit;
    let mut seen: Vec<JobState> = Vec::new();
    loop {
        let s = sl.state(job).unwrap();
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if want(&s) || Instant::now() > end {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_two_node_cluster_starts_runs_a_task_per_node_and_stops_clean() {
    let Some(c) = Cluster::start(0) else { return };
    let run = Command::new("timeout")
        .args([
            "60",
            "srun",
            "-N2",
            "-n2",
            "bash",
            "-c",
            "echo $SLURM_PROCID $SLURMD_NODENAME",
        ])
        .env("SLURM_CONF", c.conf())
        .output()
        .unwrap();
    let mut lines: Vec<String> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    c.stop();
    assert_eq!(
        lines,
        ["0 n1", "1 n2"],
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(c.left().is_empty(), "left running: {:?}", c.left());
}

#[test]
fn a_rendered_job_runs_per_node_waits_pending_and_is_cancelled_clean() {
    let Some(c) = Cluster::start(1) else { return };
    let sl = Slurm {
        conf: Some(c.conf()),
    };
    let work = c.dir.path().join("trial");
    std::fs::create_dir_all(&work).unwrap();
    let spec = |name: &str| SlurmSpec {
        nodes: 2,
        job_name: name.into(),
        ..SlurmSpec::default()
    };
    let submit = |name: &str, argv: &[&str]| {
        let text = slurm::batch_script(
            &spec(name),
            &argv.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            &[("PT_MARK".into(), format!("{name} $x"))],
            &work,
        );
        let path = work.join(format!("{name}.sbatch"));
        std::fs::write(&path, text).unwrap();
        sl.submit(&path).unwrap()
    };
    let a = submit(
        "a",
        &[
            "bash",
            "-c",
            "echo \"$SLURM_PROCID $SLURMD_NODENAME $PT_MARK\"; sleep 4",
        ],
    );
    let b = submit("b", &["sleep", "100.0417"]);
    let seen_a = follow(&sl, a, Duration::from_secs(60), |s| s.is_over());
    assert!(seen_a.contains(&JobState::Running), "{seen_a:?}");
    assert_eq!(seen_a.last(), Some(&JobState::Completed), "{seen_a:?}");
    let out = std::fs::read_to_string(work.join(format!("slurm-{a}.out"))).unwrap();
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(lines, ["0 n1 a $x", "1 n2 a $x"], "{out}");
    // b waited for a's nodes: it was pending with a reason, then ran.
    let seen_b = follow(&sl, b, Duration::from_secs(60), |s| *s == JobState::Running);
    assert!(
        seen_b
            .iter()
            .any(|s| matches!(s, JobState::Pending { reason } if !reason.is_empty()))
            || seen_b.first() == Some(&JobState::Running),
        "{seen_b:?}"
    );
    assert!(
        sl.cancel(b, Duration::from_secs(30)).unwrap(),
        "still in squeue"
    );
    assert_eq!(sl.state(b).unwrap(), JobState::Ended(SlurmEnd::Cancelled));
    // The job left squeue; its step's processes end within Slurm's KillWait (5 s here).
    let end = Instant::now() + Duration::from_secs(15);
    let left = loop {
        let p = Command::new("pgrep")
            .args(["-f", "sleep 100.0417"])
            .output()
            .unwrap();
        if p.stdout.is_empty() || Instant::now() > end {
            break p.stdout;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(left.is_empty(), "a job step outlived the cancel by 15 s");
    c.stop();
}
