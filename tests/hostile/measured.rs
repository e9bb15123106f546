//! Running the binary on one input with a deadline, and what it cost: wall time, peak resident
//! memory (its `VmHWM`, sampled), its exit, and what it printed.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Outcome {
    pub wall: Duration,
    pub max_rss_bytes: u64,
    /// The exit code; None when a signal ended it (`signal` says which).
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Killed at the deadline.
    pub timed_out: bool,
    /// The start of its standard output (up to a few MiB) and all of its standard error.
    pub stdout: String,
    pub stderr: String,
}

/// Everything a refusal or an answer is judged by: printed as the failing case's context.
impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tail = |s: &str| s.chars().take(600).collect::<String>();
        write!(
            f,
            "{:.2} s, {} MB peak, code {:?}, signal {:?}, timed out {}\nstderr: {}\nstdout: {}",
            self.wall.as_secs_f64(),
            self.max_rss_bytes >> 20,
            self.code,
            self.signal,
            self.timed_out,
            tail(&self.stderr),
            tail(&self.stdout)
        )
    }
}

/// How much of standard output is read back: a log's JSON can be hundreds of MiB.
const STDOUT_KEPT: u64 = 4 << 20;

/// Run `cmd` (its output going to files under `scratch`), killing it at `limit`.
pub fn run(mut cmd: Command, scratch: &Path, limit: Duration) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    let out = std::fs::File::create(&out_path).expect("stdout file");
    let err = std::fs::File::create(&err_path).expect("stderr file");
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .expect("spawn the binary");
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0;
    let mut timed_out = false;
    let status = loop {
        peak_kib = peak_kib.max(high_water_kib(&status_file));
        if let Some(status) = child.try_wait().expect("wait for the child") {
            break status;
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().expect("wait for the killed child");
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let wall = start.elapsed();
    let read = |p: &Path, max: u64| {
        use std::io::Read;
        let mut bytes = Vec::new();
        let f = std::fs::File::open(p).expect("output file");
        f.take(max).read_to_end(&mut bytes).expect("read output");
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Outcome {
        wall,
        max_rss_bytes: peak_kib * 1024,
        code: status.code(),
        signal: status.signal(),
        timed_out,
        stdout: read(&out_path, STDOUT_KEPT),
        stderr: read(&err_path, u64::MAX),
    }
}

/// The process's peak resident memory so far (`VmHWM`, KiB), 0 once it has exited. Sampled
/// every millisecond while it runs, because `ru_maxrss` from `wait4` is no use here: a child
/// spawned by this (large) test process starts its count at the parent's own peak. A peak
/// within the last millisecond before exit is missed.
fn high_water_kib(status_file: &str) -> u64 {
    std::fs::read_to_string(status_file)
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
