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

use primus_tune::tune::replay::{ReplayTable, candidates, grid, knobs, synthetic_suite};

/// Iterations of the shortest launch a race lets finish: 2 warm-up + 6 steady samples.
const MIN_LAUNCH_ITERS: usize = 8;

/// Per study: the GPU-seconds of the grid, of the design floor, and per δ of the oracle with
/// whether its pick is within 1 % of the best.
struct Floor {
    grid_s: f64,
    design_s: f64,
    oracle: Vec<(f64, bool)>,
}

/// Least squares by the normal equations with a tiny ridge (columns never seen stay at 0).
fn least_squares(rows: &[(Vec<f64>, f64)], p: usize) -> Vec<f64> {
    let mut a = vec![vec![0.0; p + 1]; p];
    for (x, y) in rows {
        for i in 0..p {
            for j in 0..p {
                a[i][j] += x[i] * x[j];
            }
            a[i][p] += x[i] * y;
        }
    }
    for (i, row) in a.iter_mut().enumerate() {
        row[i] += 1e-9;
    }
    // Gaussian elimination with partial pivoting on the augmented matrix.
    for c in 0..p {
        let piv = (c..p)
            .max_by(|&u, &v| a[u][c].abs().total_cmp(&a[v][c].abs()))
            .unwrap_or(c);
        a.swap(c, piv);
        let head = a[c].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != c && head[c] != 0.0 {
                let f = row[c] / head[c];
                row.iter_mut().zip(&head).for_each(|(u, h)| *u -= f * h);
            }
        }
    }
    (0..p).map(|i| a[i][p] / a[i][i]).collect()
}

fn floor_of(table: &ReplayTable, startup_s: f64, deltas: &[f64]) -> Floor {
    let ks = knobs(table);
    let cands = candidates(table, &ks);
    let fits: Vec<usize> = (0..cands.len())
        .filter(|&i| table.candidates[i].true_step_ms.is_some())
        .collect();
    // One dummy column per knob value after the first among the candidates that fit.
    let mut cols: Vec<(usize, usize)> = Vec::new();
    for k in 0..ks.len() {
        let mut ranks: Vec<usize> = fits.iter().map(|&i| cands[i].ranks[k]).collect();
        ranks.sort_unstable();
        ranks.dedup();
        cols.extend(ranks.into_iter().skip(1).map(|r| (k, r)));
    }
    let p = cols.len() + 1;
    let x = |i: usize| -> Vec<f64> {
        std::iter::once(1.0)
            .chain(
                cols.iter()
                    .map(|&(k, r)| f64::from(u8::from(cands[i].ranks[k] == r))),
            )
            .collect()
    };
    let truth = |i: usize| table.candidates[i].true_step_ms.unwrap_or(f64::INFINITY);
    let rows: Vec<(Vec<f64>, f64)> = fits.iter().map(|&i| (x(i), truth(i).ln())).collect();
    let beta = least_squares(&rows, p);
    let additive: Vec<f64> = fits
        .iter()
        .map(|&i| x(i).iter().zip(&beta).map(|(u, b)| u * b).sum())
        .collect();
    let launch_s = |i: usize| {
        startup_s
            + table.candidates[i]
                .per_iter_ms
                .iter()
                .take(MIN_LAUNCH_ITERS)
                .sum::<f64>()
                / 1000.0
    };
    let mut cheapest: Vec<f64> = fits.iter().map(|&i| launch_s(i)).collect();
    cheapest.sort_by(f64::total_cmp);
    let design_s = cheapest.iter().take(p).sum();
    let best_truth = fits.iter().map(|&i| truth(i)).fold(f64::INFINITY, f64::min);
    let best_additive = additive.iter().copied().fold(f64::INFINITY, f64::min);
    let oracle = deltas
        .iter()
        .map(|d| {
            let run: Vec<usize> = (0..fits.len())
                .filter(|&j| additive[j] <= best_additive + (1.0 + d).ln())
                .map(|j| fits[j])
                .collect();
            let pick = run.iter().map(|&i| truth(i)).fold(f64::INFINITY, f64::min);
            (
                run.iter().map(|&i| launch_s(i)).sum(),
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

/// "total X % median Y % worst Z %" of per-study costs against the grid.
fn summary(costs: &[(f64, f64)]) -> String {
    let total: f64 =
        costs.iter().map(|c| c.0).sum::<f64>() / costs.iter().map(|c| c.1).sum::<f64>();
    let mut r: Vec<f64> = costs.iter().map(|c| c.0 / c.1).collect();
    r.sort_by(f64::total_cmp);
    format!(
        "total {:.1} %, median {:.1} %, worst {:.1} %",
        total * 100.0,
        r[r.len() / 2] * 100.0,
        r[r.len() - 1] * 100.0
    )
}

fn main() {
    let arg = |i: usize, default: f64| {
        std::env::args()
            .nth(i)
            .map_or(default, |s| s.parse().expect("a number"))
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
