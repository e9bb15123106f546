//! Where the memory forecasts of the launched candidates fall against the GPU, for the
//! synthetic replay suite with carried effects: the launches that ran out of memory against
//! those that fit, and the best candidates (docs/benchmarks.md, "a usable-memory limit carried
//! from the workspace's history").
//!
//! Usage: `cargo run --release --example oom_forecasts -- [STARTUP_S] [SEED]` (defaults 120,
//! 0; the suite of `primus-tune bench-replay --synthetic 50 --startup-s STARTUP_S --seed SEED
//! --carry-effects`).

use primus_tune::tune::replay::{Carry, replay_all, synthetic_suite};
use primus_tune::tune::search::SearchConfig;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let startup: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(120.0);
    let seed: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let suite = synthetic_suite(50, startup, seed);
    let carry = Carry {
        effects: true,
        links: false,
    };
    let reports = replay_all(&suite, &SearchConfig::default(), carry);
    // (forecast at launch / capacity, ran out of memory, the study's best, its peak / capacity)
    let mut launched: Vec<(f64, bool, bool, f64)> = Vec::new();
    for ((_, table), (_, r)) in suite.iter().zip(&reports) {
        let Some(cap) = table.capacity_bytes else {
            continue;
        };
        for &id in r.search.evidence.keys() {
            let c = &table.candidates[id];
            let Some(f) = r.search.predicted_bytes.get(&id) else {
                continue;
            };
            let peak = c.peak_memory_bytes.unwrap_or(f64::NAN) / cap;
            launched.push((f / cap, c.oom, r.best.as_ref() == Some(&c.overrides), peak));
        }
    }
    let oom: Vec<f64> = launched.iter().filter(|l| l.1).map(|l| l.0).collect();
    let band = |x: f64| (0.81..=0.96).contains(&x);
    let lo = oom.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = oom.iter().copied().fold(0.0, f64::max);
    println!(
        "{} launches forecast; {} ran out of memory, forecast at {:.0}–{:.0} % of the GPU, {} of them at 81–96 %",
        launched.len(),
        oom.len(),
        lo * 100.0,
        hi * 100.0,
        oom.iter().filter(|&&x| band(x)).count()
    );
    let fit: Vec<f64> = launched.iter().filter(|l| !l.1).map(|l| l.0).collect();
    println!(
        "{} fit, {} of them forecast at 81–96 %",
        fit.len(),
        fit.iter().filter(|&&x| band(x)).count()
    );
    let best: Vec<&(f64, bool, bool, f64)> = launched.iter().filter(|l| l.2).collect();
    println!(
        "{} best candidates launched: {} peak at the 90 % limit itself, {} forecast at 90 % or more",
        best.len(),
        best.iter().filter(|l| l.3 >= 0.8995).count(),
        best.iter().filter(|l| l.0 >= 0.9).count()
    );
}
