//! Benchmark: `LogParser::feed` (and stateless `parse_line`, `FailureDetector::feed`) over a ~100 MB synthetic
//! Megatron/Primus console log. `cargo bench --bench parse` prints MB/s (median of 5 runs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use primus_tune::run::failure::FailureDetector;
use primus_tune::run::logparse::{LogParser, parse_line};
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

const TARGET_BYTES: usize = 100 * 1024 * 1024;
const RUNS: usize = 5;

/// A small deterministic generator (xorshift64*) so every run parses the same text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [lo, hi).
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const ARG_NAMES: [&str; 8] = [
    "error_injection_rate",
    "fault_injector_delay_start_iteration",
    "empty_unused_memory_level",
    "moe_router_topk",
    "overlap_grad_reduce",
    "recompute_granularity",
    "train_iters",
    "use_rocm_mem_info_iters",
];

fn loguru(rng: &mut Rng, level: &str, file: &str, colour: bool) -> String {
    let rank = rng.next() % 8;
    let (s, e) = if colour {
        ("\x1b[32m", "\x1b[0m")
    } else {
        ("", "")
    };
    format!(
        "{s}[20260822 10:{:02}:{:02}]{e}[rank-{rank}/8][{level}]{pad}[{file:->22}] : ",
        rng.next() % 60,
        rng.next() % 60,
        pad = " ".repeat(9 - level.len()),
    )
}

fn iteration_line(rng: &mut Rng, i: u64) -> String {
    let elapsed = rng.range(5000.0, 7000.0);
    let tflops = rng.range(300.0, 450.0);
    let tokens = rng.range(18000.0, 24000.0);
    let used = rng.range(100.0, 190.0);
    let mut s = format!(
        "[2026-08-22 10:11:12.{:06}] iteration {i:8}/{:8} | consumed samples: {:12} | ",
        rng.next() % 1_000_000,
        1_000_000,
        i * 256
    );
    write!(
        s,
        "elapsed time per iteration (ms): {elapsed:.1}/{:.1} | compute per GPU (TFLOP/s/GPU): {tflops:.1} (avg {:.1})  | tokens/s/GPU inst/harmonic mean: {tokens:.1}/{:.1} | ",
        elapsed * 1.01,
        tflops * 0.99,
        tokens * 0.98
    )
    .unwrap();
    write!(
        s,
        "learning rate: {:.6E} | global batch size: {:5} | lm loss: {:.6E} | loss scale: 1.0 | grad norm: {:.3} | number of skipped iterations: {:3} | number of nan iterations: {:3} | ",
        rng.range(1e-6, 1e-4),
        256,
        rng.range(2.0, 12.0),
        rng.range(0.5, 10.0),
        0,
        0
    )
    .unwrap();
    write!(
        s,
        "hip mem usage/free/total/usage_ratio: {used:.2}GB/{:.2}GB/191.98GB/{:.2}%  | rocm mem usage/free/total/usage_ratio: {:.2}GB/{:.2}GB/191.98GB/{:.2}% | rank-{} rocm max mem usage/usage_ratio: {:.2}GB/{:.2}%",
        191.98 - used,
        used / 191.98 * 100.0,
        used + 1.0,
        190.98 - used,
        (used + 1.0) / 191.98 * 100.0,
        rng.next() % 8,
        used + 2.0,
        (used + 2.0) / 191.98 * 100.0
    )
    .unwrap();
    s
}

/// Builds the log: an argument dump, then per iteration the line from the last rank and its
/// rank-0 copy (loguru-prefixed, sometimes coloured), warnings, NCCL chatter and now and then a
/// memory report.
fn build_log() -> String {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut log = String::with_capacity(TARGET_BYTES + 4096);
    for k in 0..2000 {
        let name = ARG_NAMES[k % ARG_NAMES.len()];
        let dots = ".".repeat(48 - name.len());
        writeln!(log, "  {name} {dots} {}", rng.next() % 1000).unwrap();
    }
    let mut i = 0;
    while log.len() < TARGET_BYTES {
        i += 1;
        let line = iteration_line(&mut rng, i);
        for _ in 0..2 {
            let colour = rng.next().is_multiple_of(2);
            let prefix = loguru(&mut rng, "DEBUG", "utils.py:421", colour);
            if colour {
                writeln!(log, "{prefix}\x1b[34m{line}\x1b[0m").unwrap();
            } else {
                writeln!(log, "{prefix}{line}").unwrap();
            }
        }
        let prefix = loguru(&mut rng, "WARNING", "trainer.py:88", false);
        writeln!(
            log,
            "{prefix}/opt/venv/lib/python3.12/site-packages/torch/autograd/graph.py:829: UserWarning: hipBLASLt: no tuned solution for m={} n={} k={}, falling back to the default",
            rng.next() % 65536,
            rng.next() % 65536,
            rng.next() % 65536
        )
        .unwrap();
        writeln!(
            log,
            "host-{}:{}:{} [{}] NCCL INFO Channel {:02}/0 : {} -> {} via P2P/IPC",
            rng.next() % 4,
            rng.next() % 100_000,
            rng.next() % 100_000,
            rng.next() % 8,
            rng.next() % 32,
            rng.next() % 8,
            rng.next() % 8
        )
        .unwrap();
        let prefix = loguru(&mut rng, "INFO", "timers.py:30", false);
        writeln!(
            log,
            "{prefix}    forward-backward ...............................: ({:.2}, {:.2})",
            rng.range(4000.0, 5000.0),
            rng.range(5000.0, 6000.0)
        )
        .unwrap();
        if i.is_multiple_of(50) {
            writeln!(
                log,
                "[Rank {}] (after {i} iterations) memory (MB) | allocated: {:.2} | max allocated: {:.2} | reserved: {:.2} | max reserved: {:.2}",
                rng.next() % 8,
                rng.range(1e4, 9e4),
                rng.range(9e4, 1.5e5),
                rng.range(1e5, 1.6e5),
                rng.range(1.6e5, 1.8e5)
            )
            .unwrap();
        }
    }
    log
}

fn measure(label: &str, bytes: usize, mut run: impl FnMut() -> usize) {
    let mut rates = Vec::with_capacity(RUNS);
    let mut events = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        events = black_box(run());
        let s = t.elapsed().as_secs_f64();
        rates.push(bytes as f64 / 1e6 / s);
    }
    rates.sort_by(f64::total_cmp);
    println!(
        "{label:<28} median {:>8.1} MB/s   (min {:.1}, max {:.1}; {events} events)",
        rates[RUNS / 2],
        rates[0],
        rates[RUNS - 1]
    );
}

fn main() {
    let log = build_log();
    let lines: Vec<&str> = log.lines().collect();
    println!(
        "synthetic Primus log: {:.1} MB, {} lines; {RUNS} runs each",
        log.len() as f64 / 1e6,
        lines.len()
    );
    measure("LogParser::feed", log.len(), || {
        let mut p = LogParser::new();
        lines.iter().map(|l| p.feed(l).len()).sum()
    });
    measure("parse_line (no dedupe)", log.len(), || {
        lines.iter().filter(|l| parse_line(l).is_some()).count()
    });
    measure("FailureDetector::feed", log.len(), || {
        let mut d = FailureDetector::new();
        for l in &lines {
            d.feed(l);
        }
        d.iterations() as usize
    });
}
