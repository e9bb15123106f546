//! The log parser and failure detector on the real Megatron-LM logs under
//! `../shared/fixtures/megatron-logs` (one H200, Megatron-Core 0.20.0; see the README there),
//! plus Primus-decorated lines built from Primus' format strings.
//!
//! Expected values were read from the log files. Each test that needs the fixtures skips (with
//! a message on stderr) when the folder is absent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use primus_tune::domain::trial::{
    ExitInfo, FailureClass, Iteration, LogEvent, MemoryReport, TheoreticalMemory,
};
use primus_tune::run::failure::FailureDetector;
use primus_tune::run::logparse::{LogParser, parse_line};
use std::path::{Path, PathBuf};

fn logs_dir() -> Option<PathBuf> {
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

fn read_log(name: &str) -> Option<String> {
    let path = logs_dir()?.join(name);
    Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

macro_rules! log_or_skip {
    ($name:expr) => {
        match read_log($name) {
            Some(text) => text,
            None => return,
        }
    };
}

#[derive(Default)]
struct Parsed {
    iterations: Vec<Iteration>,
    memory: Vec<MemoryReport>,
    theoretical: Vec<TheoreticalMemory>,
}

fn parse_all<'a>(lines: impl IntoIterator<Item = &'a str>) -> Parsed {
    let mut parser = LogParser::new();
    let mut out = Parsed::default();
    for line in lines {
        for ev in parser.feed(line) {
            match ev {
                LogEvent::Iteration(it) => out.iterations.push(it),
                LogEvent::Memory(m) => out.memory.push(m),
                LogEvent::Theoretical(t) => out.theoretical.push(t),
            }
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    assert!(n > 0);
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_run_c_iterations() {
    let text = log_or_skip!("run_c_mbs4.log");
    let p = parse_all(text.lines());
    let numbers: Vec<u64> = p.iterations.iter().map(|i| i.iteration).collect();
    assert_eq!(numbers, (1..=30).collect::<Vec<_>>());
    assert!(p.iterations.iter().all(|i| i.train_iters == Some(30)));
    assert!(p.iterations.iter().all(|i| i.global_batch_size == Some(16)));
    assert!(
        p.iterations
            .iter()
            .all(|i| i.tokens_per_s_per_gpu.is_none())
    );
    assert!(p.iterations.iter().all(|i| i.elapsed_avg_ms.is_none()));

    let first = &p.iterations[0];
    assert_eq!(first.elapsed_ms, Some(3475.4));
    assert_eq!(first.tflops_per_gpu, Some(5.2));
    assert_eq!(
        first.timestamp.as_deref(),
        Some("2026-11-29 23:00:16.013546")
    );

    // Iteration 3 as printed:
    // `elapsed time per iteration (ms): 176.8 | throughput per GPU (TFLOP/s/GPU): 101.8 |
    //  learning rate: 9.000000E-05 | … | lm loss: 9.870974E+00 | … | grad norm: 1.673 |`
    let third = &p.iterations[2];
    assert_eq!(third.iteration, 3);
    assert_eq!(third.elapsed_ms, Some(176.8));
    assert_eq!(third.tflops_per_gpu, Some(101.8));
    assert_eq!(third.learning_rate, Some(9.0e-5));
    assert_eq!(third.loss, Some(9.870974));
    assert_eq!(third.grad_norm, Some(1.673));
    assert_eq!(third.skipped_iterations, Some(0));
    assert_eq!(third.nan_iterations, Some(0));

    let last = &p.iterations[29];
    assert_eq!(last.learning_rate, Some(0.0));
    assert_eq!(last.loss, Some(6.015829));

    // The README's steady-state figures over iterations 3..=30.
    let steady: Vec<&Iteration> = p.iterations.iter().filter(|i| i.iteration >= 3).collect();
    assert_eq!(steady.len(), 28);
    let elapsed = median(steady.iter().map(|i| i.elapsed_ms.unwrap()).collect());
    let tflops = median(steady.iter().map(|i| i.tflops_per_gpu.unwrap()).collect());
    assert!((elapsed - 178.85).abs() < 1e-9, "median elapsed {elapsed}");
    assert!((tflops - 100.55).abs() < 1e-9, "median TFLOP/s {tflops}");
    assert_eq!(format!("{elapsed:.1}"), "178.9");
    assert_eq!(format!("{tflops:.1}"), "100.5");
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_run_c_memory_lines() {
    let text = log_or_skip!("run_c_mbs4.log");
    let p = parse_all(text.lines());
    let after: Vec<u64> = p.memory.iter().map(|m| m.after_iterations).collect();
    assert_eq!(after, vec![1, 2, 10, 20, 30]);
    assert!(p.memory.iter().all(|m| m.rank == 0));
    assert_eq!(
        p.memory[0],
        MemoryReport {
            rank: 0,
            after_iterations: 1,
            allocated_mb: 2041.24,
            max_allocated_mb: 9155.89,
            reserved_mb: 9214.0,
            max_reserved_mb: 9214.0,
        }
    );
    let max_alloc = p
        .memory
        .iter()
        .map(|m| m.max_allocated_mb)
        .fold(0.0, f64::max);
    let max_reserved = p
        .memory
        .iter()
        .map(|m| m.max_reserved_mb)
        .fold(0.0, f64::max);
    assert_eq!(max_alloc, 9807.31);
    assert_eq!(max_reserved, 10214.0);

    // Printed after iterations 1 and 2, identical: one event.
    let raw = text
        .lines()
        .filter(|l| matches!(parse_line(l), Some(LogEvent::Theoretical(_))))
        .count();
    assert_eq!(raw, 2);
    assert_eq!(
        p.theoretical,
        vec![TheoreticalMemory {
            weight_and_optimizer_mb: 1426.82,
            activation_mb: Some(1692.67),
            total_mb: Some(3119.48),
        }]
    );
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_run_c_no_false_events_or_failures() {
    let text = log_or_skip!("run_c_mbs4.log");
    // Only the 30 iteration lines, 5 memory reports and 2 footprint lines carry events.
    let events = text.lines().filter_map(parse_line).count();
    assert_eq!(events, 37);
    let mut d = FailureDetector::new();
    for line in text.lines() {
        d.feed(line);
    }
    assert_eq!(d.iterations(), 30);
    let exit = ExitInfo {
        code: Some(0),
        ..ExitInfo::default()
    };
    assert_eq!(d.finish(&exit, 30), None);
    // Even a non-zero exit finds no line-borne cause in this log.
    let failed = ExitInfo {
        code: Some(1),
        ..ExitInfo::default()
    };
    let f = d.finish(&failed, 30).unwrap();
    assert_eq!((f.class, f.line), (FailureClass::NonZeroExit, None));
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_run_c_survives_primus_decoration() {
    let text = log_or_skip!("run_c_mbs4.log");
    let plain = parse_all(text.lines());
    // Every line as Primus' colourised loguru console would print it, behind a torchrun tag,
    // each iteration line twice (rank 0's copy), fed as raw bytes with CRLF endings.
    let mut parser = LogParser::new();
    let mut events = Vec::new();
    for line in text.lines() {
        let decorated = format!(
            "[default0]:\x1b[32m[20261129 23:00:16]\x1b[0m\x1b[36m[rank-0/1]\x1b[0m\x1b[34m[DEBUG]    \x1b[0m[----------------utils.py:123] : \x1b[1m{line}\x1b[0m\r\n"
        );
        events.extend(parser.feed_bytes(decorated.as_bytes()));
        if line.contains(" iteration ") {
            events.extend(parser.feed_bytes(decorated.as_bytes()));
        }
    }
    let iterations: Vec<Iteration> = events
        .iter()
        .filter_map(|e| match e {
            LogEvent::Iteration(it) => Some(it.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(iterations, plain.iterations);
    assert_eq!(events.len(), 30 + 5 + 1);
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_run_e_oom() {
    let text = log_or_skip!("run_e_oom_mbs96.log");
    let p = parse_all(text.lines());
    assert!(p.iterations.is_empty());
    assert!(p.memory.is_empty());
    assert!(p.theoretical.is_empty());

    let mut d = FailureDetector::new();
    for line in text.lines() {
        d.feed(line);
    }
    assert_eq!(d.iterations(), 0);
    let exit = ExitInfo {
        code: Some(1),
        ..ExitInfo::default()
    };
    let f = d.finish(&exit, 0).expect("a failure");
    assert_eq!(f.class, FailureClass::Oom);
    // The first OOM line is Megatron's WARNING (line 1006), before the list repr of the
    // traceback, the `[rank0]:` traceback and torchrun's ChildFailedError.
    let line = f.line.expect("the offending line");
    assert!(
        line.starts_with(
            "WARNING:megatron.core.utils:CUDA out of memory. Tried to allocate 12.00 GiB."
        ),
        "{line}"
    );
    let (index, _) = text
        .lines()
        .enumerate()
        .find(|(_, l)| *l == line)
        .expect("the line is in the log");
    assert_eq!(index + 1, 1006);
    // Whatever the exit status says, the GPU OOM is the cause.
    for exit in [
        ExitInfo {
            signal: Some(9),
            ..ExitInfo::default()
        },
        ExitInfo::default(),
        ExitInfo {
            code: Some(0),
            ..ExitInfo::default()
        },
    ] {
        assert_eq!(
            d.finish(&exit, 0).map(|f| f.class),
            Some(FailureClass::Oom),
            "{exit:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Primus-format lines (format strings from print_rank_last_patches.py / Megatron training.py)
// ---------------------------------------------------------------------------------------------

/// One Primus HEAD iteration line: raw Megatron segments while the averaging window is empty
/// (iterations ≤ 2), the rewritten ones after.
fn primus_line(i: u64, total: u64) -> String {
    let elapsed = 6000.0 + i as f64;
    let mut s = format!(" [2026-08-22 10:11:{:02}.{:06}]", i % 60, i * 1111);
    s += &format!(" iteration {i:8}/{total:8} |");
    s += &format!(" consumed samples: {:12} |", i * 256);
    if i <= 2 {
        s += &format!(" elapsed time per iteration (ms): {elapsed:.1} |");
        s += &format!(
            " throughput per GPU (TFLOP/s/GPU): {:.1} |",
            400.0 + i as f64
        );
    } else {
        s += &format!(
            " elapsed time per iteration (ms): {elapsed:.1}/{:.1} |",
            elapsed - 0.5
        );
        s += &format!(
            " compute per GPU (TFLOP/s/GPU): {:.1} (avg {:.1})  | tokens/s/GPU inst/harmonic mean: {:.1}/{:.1} |",
            400.0 + i as f64,
            399.0 + i as f64,
            21000.0 + i as f64,
            20999.0 + i as f64
        );
    }
    s += &format!(" learning rate: {:.6E} |", 1e-6 * i as f64);
    s += &format!(" global batch size: {:5} |", 256);
    s += &format!(" lm loss: {:.6E} |", 12.0 - 0.01 * i as f64);
    s += &format!(" loss scale: {:.1} |", 1.0);
    s += &format!(" grad norm: {:.3} |", 7.5);
    s += &format!(" number of skipped iterations: {:3} |", 0);
    s += &format!(" number of nan iterations: {:3} |", 0);
    // Primus re-joins the segments with " | ", drops the empty last one, and appends memory.
    let mut s = s.trim().trim_end_matches('|').trim_end().to_string();
    s += " | hip mem usage/free/total/usage_ratio: 150.12GB/41.87GB/191.98GB/78.19% ";
    s += " | rocm mem usage/free/total/usage_ratio: 151.00GB/40.98GB/191.98GB/78.65%";
    s += " | rank-5 rocm max mem usage/usage_ratio: 152.30GB/79.33%";
    s
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_primus_console_stream() {
    // Single-node Primus console: loguru colours, each iteration line from the last rank and
    // again from rank 0, warnings and an argument dump in between.
    let mut lines = vec![
        "[20260822 10:10:00][rank-0/8][INFO]     [----trainer.py:10] :   train_iters ..................................... 10".to_string(),
        "[20260822 10:10:00][rank-0/8][INFO]     [----trainer.py:10] :   fault_injector_delay_start_iteration ............ None".to_string(),
    ];
    for i in 1..=10 {
        let body = primus_line(i, 10);
        for rank in [7, 0] {
            lines.push(format!(
                "\x1b[32m[20260822 10:11:12]\x1b[0m\x1b[36m[rank-{rank}/8]\x1b[0m\x1b[34m[DEBUG]    \x1b[0m\x1b[36m[----------------utils.py:421]\x1b[0m : \x1b[34m{body}\x1b[0m"
            ));
        }
        lines.push(
            "[default3]:/opt/venv/lib/python3.12/site-packages/torch/autograd/graph.py:829: UserWarning: hipBLASLt fallback".into(),
        );
        if i == 2 {
            lines.push("[Rank 0] (after 2 iterations) memory (MB) | allocated: 80000.10 | max allocated: 150000.20 | reserved: 151000.00 | max reserved: 152000.00".into());
            lines.push("Theoretical memory footprints: weight and optimizer=81234.50 MB".into());
        }
    }
    let p = parse_all(lines.iter().map(String::as_str));
    assert_eq!(p.iterations.len(), 10);
    for (k, it) in p.iterations.iter().enumerate() {
        let i = k as u64 + 1;
        assert_eq!(it.iteration, i);
        assert_eq!(it.train_iters, Some(10));
        assert_eq!(it.elapsed_ms, Some(6000.0 + i as f64));
        assert_eq!(it.tflops_per_gpu, Some(400.0 + i as f64));
        assert_eq!(it.mem_used_gib, Some(150.12));
        assert_eq!(it.rocm_max_mem_rank, Some(5));
        assert!((it.loss.unwrap() - (12.0 - 0.01 * i as f64)).abs() < 1e-6);
        if i <= 2 {
            assert_eq!(it.elapsed_avg_ms, None);
            assert_eq!(it.tokens_per_s_per_gpu, None);
        } else {
            assert_eq!(it.elapsed_avg_ms, Some(6000.0 + i as f64 - 0.5));
            assert_eq!(it.tflops_avg_per_gpu, Some(399.0 + i as f64));
            assert_eq!(it.tokens_per_s_per_gpu, Some(21000.0 + i as f64));
            assert_eq!(it.tokens_avg_per_s_per_gpu, Some(20999.0 + i as f64));
        }
    }
    assert_eq!(p.memory.len(), 1);
    assert_eq!(p.memory[0].max_reserved_mb, 152000.0);
    assert_eq!(p.theoretical.len(), 1);
    assert_eq!(p.theoretical[0].activation_mb, None);

    let mut d = FailureDetector::new();
    for l in &lines {
        d.feed(l);
    }
    assert_eq!(d.iterations(), 20, "the detector counts every copy");
    let ok = ExitInfo {
        code: Some(0),
        ..ExitInfo::default()
    };
    assert_eq!(d.finish(&ok, 10), None);
}
