//! The local two-node Slurm cluster the Slurm tests run on (scripts/slurm-local.sh): it starts
//! from Debian's packages (installed when missing), runs one task on each node with
//! `srun -N2 -n2`, and stops leaving no daemon or job step behind. Skipped, saying why, where it
//! cannot run (not root, no apt-get).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-local.sh")
}

/// Processes whose command line names this cluster's folder.
fn left(dir: &std::path::Path) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-af", &dir.display().to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_two_node_cluster_starts_runs_a_task_per_node_and_stops_clean() {
    let uid = Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        eprintln!("skipped: the local Slurm cluster needs root (SlurmUser=root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("slurm");
    // A port base of its own, away from a real cluster's 6817 and from other test runs.
    let port = (17_800 + (std::process::id() % 400) * 3).to_string();
    let start = Command::new("bash")
        .arg(script())
        .args(["start"])
        .arg(&d)
        .env("PT_SLURM_PORT", &port)
        .output()
        .unwrap();
    if !start.status.success() {
        let err = String::from_utf8_lossy(&start.stderr);
        if err.contains("apt-get install") || err.contains("not installed") {
            eprintln!("skipped: Slurm cannot be installed here: {err}");
            return;
        }
        panic!("the cluster did not start: {err}");
    }
    let conf = d.join("slurm.conf");
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
        .env("SLURM_CONF", &conf)
        .output()
        .unwrap();
    let mut lines: Vec<String> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    let stop = Command::new("bash")
        .arg(script())
        .arg("stop")
        .arg(&d)
        .status()
        .unwrap();
    assert!(stop.success());
    assert_eq!(
        lines,
        ["0 n1", "1 n2"],
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(left(&d).is_empty(), "left running: {:?}", left(&d));
}
