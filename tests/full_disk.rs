//! A trial whose workspace fills up keeps its measurement: the workspace on a 2 MiB tmpfs, a
//! workload that fills it mid-run and then goes on training. The database cannot take the
//! iterations after that, nor the trial's end; the result must come out kept in the trial's
//! folder or printed whole (`result-unstored` on stdout with `--json`) — and once space is
//! freed (and a printed result saved where it says), the next command stores it: the trial
//! reads `completed` with every iteration, not `interrupted` with none.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::mount::Mount;

const ITERS: usize = 120;

/// 10 iterations, then a file as big as the disk (it stops at "no space left"), then the rest.
fn workload() -> String {
    let it = r#"it() {{ printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): 100.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' "$1" 120 "$1"; }}"#;
    format!(
        "{it}\ni=1; while [ $i -le 10 ]; do it $i; i=$((i+1)); done\n\
         head -c 8388608 /dev/zero > \"$1/fill\" 2>/dev/null\n\
         while [ $i -le {ITERS} ]; do it $i; i=$((i+1)); done\n"
    )
}

#[test]
fn a_full_disk_mid_trial_keeps_the_measurement() {
    let s = common::setup("fill", &workload(), "unused");
    let _disk = match Mount::tmpfs(&s.ws, "2m") {
        Ok(m) => m,
        Err(why) => {
            eprintln!("skipped: cannot mount a small tmpfs here: {why}");
            return;
        }
    };
    let out = common::cmd(&s)
        .arg("run")
        .arg(&s.exp)
        .args([
            "--profile",
            "fill",
            "--no-telemetry",
            "--json",
            "--ci-target",
            "0",
        ])
        .args(["--max-iters", &ITERS.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let trial_dir = s.ws.join("trials/1");
    assert!(
        trial_dir.join("fill").is_file(),
        "the workload filled the disk\n{stderr}"
    );
    let unstored: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "result-unstored")
        .collect();
    let kept = trial_dir.join("result.pending.json").is_file();
    eprintln!(
        "full disk: kept in the folder: {kept}; printed: {}",
        !unstored.is_empty()
    );
    assert!(
        kept || unstored.len() == 1,
        "the measurement went nowhere\nstdout: {stdout}\nstderr: {stderr}"
    );
    if let Some(ev) = unstored.first() {
        assert!(
            stderr.contains("could not be stored or kept"),
            "said why on stderr: {stderr}"
        );
        assert!(
            ev["result"]["iterations"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        );
    }

    // Space comes back; a printed result is saved where it says; the next command stores it.
    std::fs::remove_file(trial_dir.join("fill")).unwrap();
    if let Some(ev) = unstored.first() {
        let file = std::path::PathBuf::from(ev["file"].as_str().unwrap());
        std::fs::write(file, ev["result"].to_string()).unwrap();
    }
    let out = common::cmd(&s)
        .args(["trials", "show", "1", "--json", "--config"])
        .arg(&s.exp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "completed", "{}", v["status"]);
    assert_eq!(
        v["iterations"].as_array().map(Vec::len),
        Some(ITERS),
        "every iteration stored"
    );
}
