//! What any search must spend on the synthetic replay suite: two lower bounds on its GPU-seconds
//! against the exhaustive grid, per start-up (docs/benchmarks.md, "The floor").
//!
//! * **Design floor**: a search that places candidates it has not run by an additive model over
//!   knob values must run at least one candidate per model parameter (1 + Σ (values − 1) over the
//!   candidates that fit). Charged as the cheapest such launches, each the shortest a race allows
//!   (2 warm-up iterations and 6 steady samples), no OOM launch, no confirmation.
//! * **Oracle**: a search told the true additive part of every step time (the synthetic model
//!   without its unmodelled ±1 % per candidate) launches only the candidates within δ of the
//!   best by it, each as short, and picks the fastest it ran. Its picks show how far the
//!   unmodelled part alone forces a search to look.
//!
//! Usage: `cargo run --release --example search_floor -- [STARTUP_S] [SEED] [STUDIES]`
//! (defaults 120, 0, 50; the suite of `primus-tune bench-replay --synthetic STUDIES --startup-s
//! STARTUP_S --seed SEED`).

use primus_tune::domain::study::Candidate;
use primus_tune::tune::replay::{
    CostRatios, ReplayTable, candidates, grid, knobs, synthetic_suite,
};
use primus_tune::tune::search::Additive;

/// Iterations of the shortest launch a race lets finish: 2 warm-up + 6 steady samples.
const MIN_LAUNCH_ITERS: usize = 8;

/// Per study: the GPU-seconds of the grid, of the design floor, and per δ of the oracle with
/// whether its pick is within 1 % of the best.
struct Floor {
    grid_s: f64,
    design_s: f64,
    oracle: Vec<(f64, bool)>,
}

fn floor_of(table: &ReplayTable, startup_s: f64, deltas: &[f64]) -> Floor {
    let ks = knobs(table);
    // The additive model of the search, over the candidates that fit, fitted to the truth.
    let fits: Vec<Candidate> = candidates(table, &ks)
        .into_iter()
        .filter(|c| table.candidates[c.id].true_step_ms.is_some())
        .collect();
    let truth = |c: &Candidate| table.candidates[c.id].true_step_ms.unwrap_or(f64::INFINITY);
    let model = Additive::new(&fits, ks.len());
    // (Every replay candidate has a value of every knob, so each gets a row.)
    let rows: Vec<(Vec<f64>, f64)> = fits
        .iter()
        .filter_map(|c| Some((model.x(c)?, truth(c).ln())))
        .collect();
    assert_eq!(rows.len(), fits.len(), "a candidate the model cannot place");
    let fit = model
        .fit(&rows)
        .expect("a study with a candidate that fits");
    let additive: Vec<f64> = rows.iter().map(|r| fit.predict(&r.0)).collect();
    let launch_s = |c: &Candidate| {
        startup_s
            + table.candidates[c.id]
                .per_iter_ms
                .iter()
                .take(MIN_LAUNCH_ITERS)
                .sum::<f64>()
                / 1000.0
    };
    let mut cheapest: Vec<f64> = fits.iter().map(launch_s).collect();
    cheapest.sort_by(f64::total_cmp);
    let design_s = cheapest.iter().take(model.p()).sum();
    let best_truth = fits.iter().map(truth).fold(f64::INFINITY, f64::min);
    let best_additive = additive.iter().copied().fold(f64::INFINITY, f64::min);
    let oracle = deltas
        .iter()
        .map(|d| {
            let run: Vec<&Candidate> = fits
                .iter()
                .zip(&additive)
                .filter(|(_, a)| **a <= best_additive + (1.0 + d).ln())
                .map(|(c, _)| c)
                .collect();
            let pick = run.iter().map(|c| truth(c)).fold(f64::INFINITY, f64::min);
            (
                run.iter().map(|c| launch_s(c)).sum(),
                pick <= best_truth * 1.01,
            )
        })
        .collect();
    Floor {
        grid_s: grid(table).1,
        design_s,
        oracle,
    }
}

/// "total X %, median Y %, worst Z %" of per-study (cost, grid) GPU-seconds, as `bench-replay`
/// counts them.
fn summary(costs: &[(f64, f64)]) -> String {
    let r = CostRatios::of(costs);
    format!(
        "total {:.1} %, median {:.1} %, worst {:.1} %",
        r.total * 100.0,
        r.median * 100.0,
        r.max * 100.0
    )
}

fn main() {
    let arg = |i: usize, default: f64| match std::env::args().nth(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!(
                "search_floor: argument {i} is `{s}`, not a number\n\
                 usage: search_floor [STARTUP_S] [SEED] [STUDIES]"
            );
            std::process::exit(2)
        }),
    };
    let (startup_s, seed, n) = (arg(1, 120.0), arg(2, 0.0) as u64, arg(3, 50.0) as usize);
    let deltas = [0.0, 0.005, 0.01, 0.02];
    let floors: Vec<Floor> = synthetic_suite(n, startup_s, seed)
        .iter()
        .map(|(_, t)| floor_of(t, startup_s, &deltas))
        .collect();
    println!(
        "{n} synthetic studies, seed {seed}, start-up {startup_s} s; GPU-seconds against the grid:"
    );
    let design: Vec<(f64, f64)> = floors.iter().map(|f| (f.design_s, f.grid_s)).collect();
    println!(
        "  design floor (one launch per model parameter): {}",
        summary(&design)
    );
    for (k, d) in deltas.iter().enumerate() {
        let costs: Vec<(f64, f64)> = floors.iter().map(|f| (f.oracle[k].0, f.grid_s)).collect();
        let within = floors.iter().filter(|f| f.oracle[k].1).count();
        println!(
            "  oracle within {:.1} % of the best additive part: {within} of {n} picks within 1 %; {}",
            d * 100.0,
            summary(&costs)
        );
    }
    let both: Vec<(f64, f64)> = floors
        .iter()
        .map(|f| (f.design_s.max(f.oracle[2].0), f.grid_s))
        .collect();
    println!(
        "  the larger of the design floor and the 1 % oracle: {}",
        summary(&both)
    );
}
