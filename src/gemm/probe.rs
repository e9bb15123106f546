//! Which hipBLASLt build is installed here: `hipblaslt-bench` prints the library's version and
//! git revision, and the device it runs on, before anything else. A stage-2 result file only
//! means something to the build that wrote it (its solution indices are build-specific), so
//! `gemm-tune status` compares the two.

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HipblasltBuild {
    /// `hipBLASLt git version: …`, compared with a result file's `Git Version: …`.
    pub git_version: String,
    /// `hipBLASLt version: …` (major × 100000 + minor × 100 + patch).
    pub version: Option<String>,
    /// `gcnArchName` of device 0, e.g. `gfx942:sramecc+:xnack-`.
    pub arch: Option<String>,
    /// Its marketing name, e.g. `AMD Instinct MI300X`.
    pub device: Option<String>,
}

/// Reads the header `hipblaslt-bench` prints:
/// `hipBLASLt version: 100200`, `hipBLASLt git version: de5c1aebb6-dirty`,
/// `Device ID 0 : AMD Instinct MI350X gfx950:sramecc+:xnack-`.
pub fn parse_bench_header(text: &str) -> Option<HipblasltBuild> {
    let mut git = None;
    let mut version = None;
    let mut device = None;
    let mut arch = None;
    for line in text.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("hipBLASLt git version:") {
            git.get_or_insert_with(|| v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("hipBLASLt version:") {
            version.get_or_insert_with(|| v.trim().to_string());
        } else if let Some(rest) = line.strip_prefix("Device ID ")
            && device.is_none()
            && let Some((_, d)) = rest.split_once(" : ")
        {
            let d = d.trim();
            match d.rsplit_once(' ') {
                Some((name, a)) if a.starts_with("gfx") => {
                    device = Some(name.trim().to_string());
                    arch = Some(a.to_string());
                }
                _ => device = Some(d.to_string()),
            }
        }
    }
    Some(HipblasltBuild {
        git_version: git.filter(|g| !g.is_empty())?,
        version,
        arch,
        device,
    })
}

/// `hipblaslt-bench` in `$ROCM_PATH/bin`, `/opt/rocm/bin`, or on `PATH`.
pub fn find_bench(env: &crate::config::env::Env) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(r) = env.get("ROCM_PATH").filter(|s| !s.is_empty()) {
        dirs.push(Path::new(r).join("bin"));
    }
    dirs.push(PathBuf::from("/opt/rocm/bin"));
    if let Some(p) = env.get("PATH") {
        dirs.extend(std::env::split_paths(p));
    }
    dirs.into_iter()
        .map(|d| d.join("hipblaslt-bench"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why the installed hipBLASLt build could not be learned.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} printed no `hipBLASLt git version:` line{}", bench.display(), timeout.map_or(String::new(), |t| format!(" within {:.0} s", t.as_secs_f64())))]
    NoHeader {
        bench: PathBuf,
        /// Set when it was killed at the time limit.
        timeout: Option<Duration>,
    },
}

/// Runs `bench` on a tiny GEMM and reads its header. Gives up (killing it) after `timeout`.
pub fn probe(bench: &Path, timeout: Duration) -> Result<HipblasltBuild, ProbeError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ProbeError::Io { path, source }
    };
    let out_dir = tempfile::tempdir().map_err(io(&std::env::temp_dir()))?;
    let out_path = out_dir.path().join("out.txt");
    let out = std::fs::File::create(&out_path).map_err(io(&out_path))?;
    let err = out.try_clone().map_err(io(&out_path))?;
    let mut child = Command::new(bench)
        .args(["-m", "16", "-n", "16", "-k", "16", "-i", "1", "-j", "0"])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(io(bench))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(io(bench)(e)),
        }
    }
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    parse_bench_header(&text).ok_or_else(|| ProbeError::NoHeader {
        bench: bench.to_path_buf(),
        timeout: (start.elapsed() >= timeout).then_some(timeout),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_header_hipblaslt_bench_prints() {
        let text = "hipBLASLt version: 100200\nhipBLASLt git version: de5c1aebb6-dirty\nQuery device success: there are 1 devices. (Target device ID is 0)\nDevice ID 0 : AMD Instinct MI350X gfx950:sramecc+:xnack-\nwith 270.6 GB memory\n";
        let b = parse_bench_header(text).expect("header");
        assert_eq!(b.git_version, "de5c1aebb6-dirty");
        assert_eq!(b.version.as_deref(), Some("100200"));
        assert_eq!(b.arch.as_deref(), Some("gfx950:sramecc+:xnack-"));
        assert_eq!(b.device.as_deref(), Some("AMD Instinct MI350X"));
    }

    #[test]
    fn no_git_line_means_unknown() {
        assert_eq!(parse_bench_header("hipBLASLt version: 600\n"), None);
        assert_eq!(parse_bench_header("hipBLASLt git version: \n"), None);
    }

    #[test]
    fn a_device_line_without_an_arch_keeps_the_name() {
        let b = parse_bench_header("hipBLASLt git version: 52776da\nDevice ID 0 : Some GPU\n")
            .expect("header");
        assert_eq!(b.device.as_deref(), Some("Some GPU"));
        assert_eq!(b.arch, None);
    }
}
