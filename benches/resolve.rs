//! Benchmark: resolve + lint of the largest Primus fixture experiment (and the bundled example).
#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `cargo bench --bench resolve` prints median and p90 wall time per operation.

use primus_tune::config::catalog::Catalog;
use primus_tune::config::env::Env;
use primus_tune::config::lint::lint;
use primus_tune::config::{Experiment, LoadOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn measure(label: &str, iters: usize, mut f: impl FnMut()) {
    for _ in 0..iters / 10 + 1 {
        f();
    }
    let mut times: Vec<Duration> = (0..iters)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    let median = times[times.len() / 2];
    let p90 = times[times.len() * 9 / 10];
    println!(
        "{label:<58} n={iters:<5} median {:>8.1} µs   p90 {:>8.1} µs",
        median.as_secs_f64() * 1e6,
        p90.as_secs_f64() * 1e6
    );
}

fn bench_file(name: &str, path: &Path) {
    let opts = LoadOptions {
        env: Env::empty(),
        ..Default::default()
    };
    let exp = Experiment::load(path, &opts).unwrap_or_else(|e| panic!("{e}"));
    let leaves = exp.main_module().params.leaves().len();
    println!("{name}: {} files, {leaves} resolved keys", exp.files.len());
    let catalog = Catalog::builtin();
    measure(&format!("  resolve {name}"), 300, || {
        std::hint::black_box(Experiment::load(path, &opts).expect("resolves"));
    });
    measure(&format!("  lint (resolved) {name}"), 300, || {
        std::hint::black_box(lint(&exp, &opts.env, None, catalog));
    });
    measure(&format!("  resolve + lint {name}"), 300, || {
        let e = Experiment::load(path, &opts).expect("resolves");
        std::hint::black_box(lint(&e, &opts.env, None, catalog));
    });
}

fn main() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/primus");
    let largest = shared.join("examples/megatron/configs/MI355X/deepseek_v3-BF16-pretrain.yaml");
    if largest.is_file() {
        bench_file("deepseek_v3-BF16-pretrain (MI355X fixture)", &largest);
    } else {
        println!(
            "skipping the shared fixture: {} is absent",
            largest.display()
        );
    }
    let root: PathBuf = primus_tune::util::bundled::examples_root().expect("bundled example");
    bench_file(
        "moe_16B-BF16-pretrain (bundled)",
        &root.join(primus_tune::util::bundled::DEFAULT_EXPERIMENT),
    );
}
