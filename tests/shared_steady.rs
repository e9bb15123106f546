#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Steady-state statistics on a real Megatron-LM log (`../shared/fixtures/megatron-logs`,
//! 30 iterations on one H200). The iteration lines are read here with a small local regex so
//! that this test does not depend on the project's log parser.
//!
//! Each test skips (with a message on stderr) when the fixture folder is absent.

use primus_tune::domain::trial::{Iteration, RunShape};
use primus_tune::run::steady::{SteadyConfig, should_stop, stats};
use regex::Regex;
use std::path::{Path, PathBuf};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/megatron-logs");
    if !p.is_dir() {
        eprintln!(
            "skipping: the shared Megatron log fixtures {} are absent",
            p.display()
        );
        return None;
    }
    Some(p)
}

/// The iteration lines of a Megatron log: counter, elapsed ms, TFLOP/s/GPU.
fn read_iterations(path: &Path) -> Vec<Iteration> {
    let text = std::fs::read_to_string(path).expect("read log");
    let it_re = Regex::new(r"\biteration\s+(\d+)/\s*(\d+)\s*\|").unwrap();
    let ms_re = Regex::new(r"elapsed time per iteration \(ms\):\s*([0-9.]+)").unwrap();
    let tf_re = Regex::new(r"throughput per GPU \(TFLOP/s/GPU\):\s*([0-9.]+)").unwrap();
    text.lines()
        .filter_map(|line| {
            let c = it_re.captures(line)?;
            let num = |re: &Regex| {
                re.captures(line)
                    .map(|m| m[1].parse::<f64>().expect("number"))
            };
            Some(Iteration {
                iteration: c[1].parse().unwrap(),
                train_iters: Some(c[2].parse().unwrap()),
                elapsed_ms: num(&ms_re),
                tflops_per_gpu: num(&tf_re),
                ..Default::default()
            })
        })
        .collect()
}

const SHAPE: RunShape = RunShape {
    seq_length: 2048,
    global_batch_size: 16,
    world_size: 1,
};

fn run_c() -> Option<Vec<Iteration>> {
    let root = fixtures()?;
    let iters = read_iterations(&root.join("run_c_mbs4.log"));
    assert_eq!(iters.len(), 30);
    assert_eq!(
        iters.iter().map(|i| i.iteration).collect::<Vec<_>>(),
        (1..=30).collect::<Vec<_>>()
    );
    assert!(
        iters
            .iter()
            .all(|i| i.elapsed_ms.is_some() && i.tflops_per_gpu.is_some())
    );
    Some(iters)
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_steady_full_run() {
    let Some(iters) = run_c() else { return };
    let st = stats(&iters, Some(SHAPE), &SteadyConfig::default()).unwrap();
    eprintln!("run_c_mbs4 full run: {st:#?}");
    // Iterations 1 (3475.4 ms) and 2 (1841.3 ms) are the warm-up; MSER-5 finds nothing more.
    assert_eq!(st.warmup, 2);
    assert_eq!(st.n, 28);
    // The fixture README: median of iterations 3–30 is 178.9 ms and 100.5 TFLOP/s/GPU.
    assert!(
        (st.median_step_ms - 178.9).abs() < 0.05,
        "{}",
        st.median_step_ms
    );
    assert!((st.tflops_per_gpu.unwrap() - 100.5).abs() < 0.05);
    assert_eq!((st.min_step_ms, st.max_step_ms), (172.4, 188.8));
    assert_eq!(st.outliers, 0);
    assert!(st.stable);
    assert!(st.cv > 0.01 && st.cv < 0.03, "cv {}", st.cv);
    assert!(st.ci95_low_ms <= st.median_step_ms && st.median_step_ms <= st.ci95_high_ms);
    // The tokens of a step over the median step shown beside it: 32768 tokens per step.
    let tokens = st.tokens_per_s_per_gpu.unwrap();
    let expect = 2048.0 * 16.0 / (st.median_step_ms / 1000.0);
    assert!((tokens - expect).abs() < 1e-6, "{tokens} vs {expect}");
    // About 32768 / 0.1789 s (the mean step, 179.4 ms, gave 182 600).
    assert!((tokens - 183_200.0).abs() < 600.0, "{tokens}");
}

/// The first prefix length (in parsed iterations) at which `should_stop` says yes, feeding the
/// iterations one at a time as a live trial would.
fn first_stop(iters: &[Iteration], cfg: &SteadyConfig) -> Option<usize> {
    (1..=iters.len()).find(|&k| should_stop(&iters[..k], cfg))
}

fn pct(x: f64, of: f64) -> f64 {
    100.0 * x / of
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_steady_early_stop_vs_fixed_run() {
    let Some(iters) = run_c() else { return };
    let cfg = SteadyConfig::default();
    let full = stats(&iters, Some(SHAPE), &cfg).unwrap();
    eprintln!(
        "fixed run: 30 iterations ({} steady), median {:.2} ms, 95 % CI [{:.1}, {:.1}] = ±{:.2} ms (±{:.2} %), CV {:.2} %, {:.0} tokens/s/GPU, {:.2} TFLOP/s/GPU",
        full.n,
        full.median_step_ms,
        full.ci95_low_ms,
        full.ci95_high_ms,
        full.ci95_ms,
        pct(full.ci95_ms, full.median_step_ms),
        100.0 * full.cv,
        full.tokens_per_s_per_gpu.unwrap(),
        full.tflops_per_gpu.unwrap(),
    );
    for k in [10, 15, 20, 25, 30] {
        let s = stats(&iters[..k], Some(SHAPE), &cfg).unwrap();
        eprintln!(
            "  after {k:2} iterations: median {:.2} ms, CI [{:.1}, {:.1}] ±{:.2} %",
            s.median_step_ms,
            s.ci95_low_ms,
            s.ci95_high_ms,
            pct(s.ci95_ms, s.median_step_ms),
        );
    }

    // Default target (±1 %): with a CV of ~2.4 % the 28 steady samples only reach ±1.51 %, so
    // the rule never fires and the early-stopped run is the fixed run.
    assert_eq!(first_stop(&iters, &cfg), None);
    let half = pct(full.ci95_ms, full.median_step_ms);
    assert!((1.4..1.6).contains(&half), "{half}");
    // Half-width shrinks like 1/√n: about 28 × 1.51² ≈ 64 steady samples would reach ±1 %.
    let needed = (full.n as f64 * (half / 1.0).powi(2)).ceil();
    eprintln!(
        "target ±1 %: no stop within 30 iterations; ~{needed} steady samples needed by 1/√n scaling"
    );

    // At ±2 % the rule fires after 20 iterations (18 steady samples) with a median 0.56 % below
    // the full run's, and the full run's median inside its CI.
    let mut stops = Vec::new();
    for target in [0.015, 0.02, 0.025, 0.03, 0.05] {
        let c = SteadyConfig {
            ci_target: target,
            ..SteadyConfig::default()
        };
        let k = first_stop(&iters, &c);
        match k {
            Some(k) => {
                let s = stats(&iters[..k], Some(SHAPE), &c).unwrap();
                eprintln!(
                    "target ±{:.1} %: stop after {k} iterations ({} steady), median {:.2} ms vs {:.2} ms full ({:+.2} %), CI [{:.1}, {:.1}] ±{:.2} %",
                    100.0 * target,
                    s.n,
                    s.median_step_ms,
                    full.median_step_ms,
                    pct(s.median_step_ms - full.median_step_ms, full.median_step_ms),
                    s.ci95_low_ms,
                    s.ci95_high_ms,
                    pct(s.ci95_ms, s.median_step_ms),
                );
                assert!((s.median_step_ms / full.median_step_ms - 1.0).abs() < 0.01);
                assert!(s.ci95_low_ms <= full.median_step_ms);
                assert!(full.median_step_ms <= s.ci95_high_ms);
            }
            None => eprintln!(
                "target ±{:.1} %: no stop within 30 iterations",
                100.0 * target
            ),
        }
        stops.push(k);
    }
    // ±1.5 %: none; ±2 %: 20; ±2.5 % and looser: 10 (the first point with min_samples = 8
    // steady samples, whose full range is ±2.34 %).
    assert_eq!(stops, [None, Some(20), Some(10), Some(10), Some(10)]);
    let at20 = stats(&iters[..20], Some(SHAPE), &cfg).unwrap();
    assert!((at20.median_step_ms - 177.85).abs() < 1e-9);
    assert_eq!(at20.n, 18);
}
