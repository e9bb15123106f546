//! Replay of recorded studies: the search runs against a table of per-iteration step times as
//! if it launched trials, and is compared with the exhaustive grid of fixed 50-iteration trials.
//!
//! A table (`primus-tune bench-replay TABLE.json`):
//!
//! ```json
//! {"capacity_bytes": 206158430208,
//!  "candidates": [{"overrides": {"micro_batch_size": 2}, "per_iter_ms": [3400.1, 1800.5, 180.2],
//!                  "peak_memory_bytes": 98000000000, "oom": false, "startup_s": 40.0}]}
//! ```
//!
//! Costs ([`ReplayRunner`]): a trial of k iterations costs `startup_s` plus its k step times; an
//! OOM costs `startup_s` plus one iteration. GPU-seconds are seconds of the recorded job (the
//! GPU count is the same for every candidate, so ratios do not depend on it).

pub mod layouts;
mod phases;
use super::search::effects::Effects;
use super::search::prior::batch::stages;
use super::search::{Job, Runner, SearchConfig, SearchResult, search};
use super::space::ranks_of;
use crate::domain::study::{
    Candidate, Knob, MemoryTrend, Outcome, Overrides, StudyRecord, VerdictKind,
};
use crate::domain::trial::Iteration;
use crate::run::steady::{SteadyConfig, should_stop};
use crate::util::stats::median;
#[cfg(any(test, feature = "testkit"))]
pub use phases::PhaseCost;
pub use phases::Phases;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Iterations every warm-up drops (as the run engine's fixed warm-up).
pub const WARMUP_ITERS: usize = 2;

/// Trial length of the exhaustive-grid baseline.
pub const GRID_ITERS: u64 = 50;

/// A recorded study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayTable {
    /// GPU memory, bytes (informational for the search: a replay has no memory model).
    #[serde(default)]
    pub capacity_bytes: Option<f64>,
    /// The recorded job's pipeline-parallel stages (1 on every H200 grid: one GPU), when
    /// known; a candidate's own override of a stage flag wins. The batch rule
    /// ([`crate::tune::search::prior::batch`]) applies only in one stage; a table that does
    /// not say (the synthetic studies) is replayed without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_stages: Option<u64>,
    /// The node the study ran on (GPU model, world, node size), when tables share one: a
    /// layout study's measured link scale is carried to the next study of the same machine
    /// ([`replay_all`]). Absent: no links to carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    pub candidates: Vec<ReplayCandidate>,
}

/// One recorded candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayCandidate {
    pub overrides: Overrides,
    /// Step times of one long run, warm-up included, in order.
    #[serde(default)]
    pub per_iter_ms: Vec<f64>,
    #[serde(default)]
    pub peak_memory_bytes: Option<f64>,
    #[serde(default)]
    pub oom: bool,
    /// Seconds from launch to the first iteration.
    #[serde(default)]
    pub startup_s: f64,
    /// The noise-free step time, when known (synthetic studies); the truth the gap is measured
    /// against. Recorded studies leave it out and the median of `per_iter_ms` stands in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub true_step_ms: Option<f64>,
    /// The memory model's peak for this candidate's config, bytes, as the model gives it
    /// before any calibration (`bench-replay --annotate-memory` adds it to a recorded table).
    /// The search recalibrates it on the study's measured peaks as it goes, as a sweep does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_bytes: Option<f64>,
    /// The layout prior's predicted step for this candidate's layout (a layout study), as the
    /// sweep gives it to the search ([`crate::tune::search::prior::layout`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout_prior: Option<crate::tune::search::prior::layout::StepPrior>,
}

/// A table that cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Invalid(String),
}

impl ReplayTable {
    /// Parses and checks a table: at least one candidate, distinct overrides, finite positive
    /// step times, at least `WARMUP_ITERS + 1` of them for a candidate that did not OOM, a
    /// finite non-negative `startup_s`.
    pub fn from_json(text: &str) -> Result<ReplayTable, ReplayError> {
        let t: ReplayTable = serde_json::from_str(text)?;
        t.check()?;
        Ok(t)
    }

    fn check(&self) -> Result<(), ReplayError> {
        let bad = |i: usize, m: String| Err(ReplayError::Invalid(format!("candidates[{i}]: {m}")));
        if self.candidates.is_empty() {
            return Err(ReplayError::Invalid("no candidates".into()));
        }
        if let Some(c) = self.capacity_bytes
            && !(c.is_finite() && c > 0.0)
        {
            return Err(ReplayError::Invalid(format!(
                "capacity_bytes must be a positive number, not {c}"
            )));
        }
        if self.pipeline_stages == Some(0) {
            return Err(ReplayError::Invalid(
                "pipeline_stages must be at least 1 (a job runs in one stage or more)".into(),
            ));
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, c) in self.candidates.iter().enumerate() {
            if let Some(j) = seen.insert(key(&c.overrides), i) {
                return bad(i, format!("the same overrides as candidates[{j}]"));
            }
            if let Some(k) = c
                .per_iter_ms
                .iter()
                .position(|v| !(v.is_finite() && *v > 0.0))
            {
                return bad(
                    i,
                    format!(
                        "per_iter_ms[{k}] = {} is not a positive step time",
                        c.per_iter_ms[k]
                    ),
                );
            }
            if !c.oom && c.per_iter_ms.len() <= WARMUP_ITERS {
                return bad(
                    i,
                    format!(
                        "{} step times; a candidate that ran needs at least {} ({WARMUP_ITERS} are warm-up)",
                        c.per_iter_ms.len(),
                        WARMUP_ITERS + 1
                    ),
                );
            }
            if !(c.startup_s.is_finite() && c.startup_s >= 0.0) {
                return bad(i, format!("startup_s = {} is not a duration", c.startup_s));
            }
            if let Some(t) = c.true_step_ms
                && !(t.is_finite() && t > 0.0)
            {
                return bad(i, format!("true_step_ms = {t} is not a positive step time"));
            }
            if let Some(p) = c.predicted_bytes
                && !(p.is_finite() && p > 0.0)
            {
                return bad(i, format!("predicted_bytes = {p} is not a positive size"));
            }
        }
        Ok(())
    }
}

/// A stable key for overrides (BTreeMap order, so equal maps give equal keys).
fn key(o: &Overrides) -> String {
    serde_json::to_string(o).unwrap_or_default()
}

/// Knobs the flags' memory trend is known for: `micro_batch_size` and
/// `turbo_sync_free_moe_stage` use more memory as they grow, `recompute_num_layers` less.
fn trend_of(flag: &str) -> MemoryTrend {
    match flag {
        "micro_batch_size" | "turbo_sync_free_moe_stage" => MemoryTrend::Increasing,
        "recompute_num_layers" => MemoryTrend::Decreasing,
        f if crate::tune::layout::FLAGS.contains(&f) => MemoryTrend::Varies,
        _ => MemoryTrend::None,
    }
}

/// The knobs a table implies.
///
/// * One knob per flag that any candidate overrides, in flag-name order (so cost order is
///   lexicographic in that order).
/// * Its values are the flag's distinct values, sorted ascending when all are numbers, in order
///   of first appearance otherwise; a candidate without the flag has the value `null` (the
///   experiment's own), listed first.
/// * Memory trend: `Increasing` for `micro_batch_size` and `turbo_sync_free_moe_stage`,
///   `Decreasing` for `recompute_num_layers` (more recomputed layers, less memory), `None` for
///   every other flag (so dominance needs those equal). A knob whose values are not all numbers
///   gets `None`, whatever its name.
pub fn knobs(table: &ReplayTable) -> Vec<Knob> {
    knobs_of(
        &table
            .candidates
            .iter()
            .map(|c| &c.overrides)
            .collect::<Vec<_>>(),
    )
}

/// [`knobs`] of candidates given by their overrides alone (a stored study's, say).
pub fn knobs_of(overrides: &[&Overrides]) -> Vec<Knob> {
    let mut flags: Vec<&String> = overrides.iter().flat_map(|o| o.keys()).collect();
    flags.sort();
    flags.dedup();
    flags
        .into_iter()
        .map(|flag| {
            let mut values: Vec<serde_json::Value> = Vec::new();
            for o in overrides {
                let v = o.get(flag).cloned().unwrap_or(serde_json::Value::Null);
                if !values.contains(&v) {
                    values.push(v);
                }
            }
            let numeric = values.iter().all(|v| v.is_number());
            if numeric {
                values.sort_by(|a, b| {
                    a.as_f64()
                        .unwrap_or(f64::NAN)
                        .total_cmp(&b.as_f64().unwrap_or(f64::NAN))
                });
            } else if let Some(p) = values.iter().position(|v| v.is_null()) {
                let null = values.remove(p);
                values.insert(0, null);
            }
            Knob {
                flag: flag.clone(),
                memory: match trend_of(flag) {
                    // A layout flag moves memory whatever its values' type (VPP unset or a
                    // count, sequence parallelism on or off).
                    MemoryTrend::Varies => MemoryTrend::Varies,
                    t if numeric => t,
                    _ => MemoryTrend::None,
                },
                values,
            }
        })
        .collect()
}

/// The table's candidates against `knobs` (from [`knobs`]): id = row index.
pub fn candidates(table: &ReplayTable, knobs: &[Knob]) -> Vec<Candidate> {
    candidates_of(
        &table
            .candidates
            .iter()
            .map(|c| &c.overrides)
            .collect::<Vec<_>>(),
        knobs,
    )
}

/// [`candidates`] given by their overrides alone: id = position.
pub fn candidates_of(overrides: &[&Overrides], knobs: &[Knob]) -> Vec<Candidate> {
    overrides
        .iter()
        .enumerate()
        .map(|(id, o)| Candidate {
            id,
            overrides: (*o).clone(),
            ranks: knobs
                .iter()
                .map(|k| {
                    let v = o.get(&k.flag).cloned().unwrap_or(serde_json::Value::Null);
                    k.values.iter().position(|x| *x == v).unwrap_or(0)
                })
                .collect(),
            baseline: false,
        })
        .collect()
}

/// Adds one stored study's measured candidates to `effects`: against the knobs of its space
/// as it stored them (a group knob such as `@recompute` is one knob, as in the sweep that
/// carries them), or for an older study the knobs its candidates' overrides imply.
pub fn learn_study(effects: &mut Effects, rec: &StudyRecord) {
    let overrides: Vec<&Overrides> = rec.candidates.iter().map(|c| &c.overrides).collect();
    let (knobs, cands) = if rec.knobs.is_empty() {
        let knobs = knobs_of(&overrides);
        let cands = candidates_of(&overrides, &knobs);
        (knobs, cands)
    } else {
        let cands = overrides
            .iter()
            .enumerate()
            .map(|(id, o)| Candidate {
                id,
                overrides: (*o).clone(),
                ranks: ranks_of(&rec.knobs, o).unwrap_or_default(),
                baseline: false,
            })
            .collect();
        (rec.knobs.clone(), cands)
    };
    let measured: Vec<(usize, f64)> = rec
        .candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| !matches!(c.verdict, VerdictKind::Oom | VerdictKind::Failed))
        .filter_map(|(i, c)| Some((i, c.step_ms?)))
        .collect();
    effects.learn(&knobs, &cands, &measured);
}

/// A [`Runner`] that replays a table.
///
/// * A trial of k iterations replays `per_iter_ms[0..k]` and costs `startup_s` plus their sum;
///   it returns the step times after the first `WARMUP_ITERS` as its steady samples.
/// * A later trial of the same candidate is a fresh process: it pays `startup_s` and the two
///   recorded warm-up iterations again, and its steady samples continue where the previous
///   trial's ended (recorded iterations not yet replayed), so pooled samples are never the same
///   recording twice; past the end of the recording it wraps to the first steady iteration.
/// * With `early_stop` (the run engine's rule, [`should_stop`]), a trial ends as soon as its
///   figure is steady, and costs only the iterations it ran.
/// * An OOM costs `startup_s` plus one iteration: the candidate's first recorded step time,
///   or, when none is recorded, the median first step time of the candidates that ran.
/// * A candidate not in the table fails.
pub struct ReplayRunner<'a> {
    table: &'a ReplayTable,
    index: HashMap<String, usize>,
    cursor: Vec<usize>,
    oom_iter_ms: f64,
    pub early_stop: Option<SteadyConfig>,
    /// Every trial: (row, iterations asked for).
    pub launched: Vec<(usize, u64)>,
}

impl<'a> ReplayRunner<'a> {
    /// A runner with the run engine's early stop (`SteadyConfig::default()`).
    pub fn new(table: &'a ReplayTable) -> Self {
        let index = table
            .candidates
            .iter()
            .enumerate()
            .map(|(i, c)| (key(&c.overrides), i))
            .collect();
        let mut firsts: Vec<f64> = table
            .candidates
            .iter()
            .filter(|c| !c.oom)
            .filter_map(|c| c.per_iter_ms.first().copied())
            .collect();
        firsts.sort_by(f64::total_cmp);
        let oom_iter_ms = firsts.get(firsts.len() / 2).copied().unwrap_or(0.0);
        ReplayRunner {
            table,
            index,
            cursor: vec![WARMUP_ITERS; table.candidates.len()],
            oom_iter_ms,
            early_stop: Some(SteadyConfig::default()),
            launched: Vec::new(),
        }
    }

    /// A runner that always runs the full length (the grid baseline).
    pub fn fixed_length(table: &'a ReplayTable) -> Self {
        ReplayRunner {
            early_stop: None,
            ..Self::new(table)
        }
    }
}

impl Runner for ReplayRunner<'_> {
    fn run(&mut self, job: &Job) -> Outcome {
        let (c, iters) = (job.candidate, job.iters);
        let Some(&row) = self.index.get(&key(&c.overrides)) else {
            return Outcome {
                failed: Some("not in the replayed table".into()),
                ..Outcome::default()
            };
        };
        self.launched.push((row, iters));
        let rec = &self.table.candidates[row];
        let peak = rec
            .peak_memory_bytes
            .filter(|p| p.is_finite() && *p >= 0.0)
            .map(|p| p as u64);
        if rec.oom {
            let first = rec.per_iter_ms.first().copied().unwrap_or(self.oom_iter_ms);
            return Outcome {
                oom: true,
                peak_memory_bytes: peak,
                gpu_seconds: rec.startup_s + first / 1000.0,
                ..Outcome::default()
            };
        }
        let rec_len = rec.per_iter_ms.len();
        let k = usize::try_from(iters).unwrap_or(usize::MAX);
        // The trial's iterations: the recorded warm-up, then unseen steady ones.
        let mut series: Vec<f64> = rec
            .per_iter_ms
            .iter()
            .take(WARMUP_ITERS.min(k))
            .copied()
            .collect();
        let mut cur = self.cursor[row];
        let mut iters_seen: Vec<Iteration> = Vec::new();
        let mut raced = false;
        if self.early_stop.is_some() || job.race.is_some() {
            iters_seen = series
                .iter()
                .enumerate()
                .map(|(i, &ms)| iteration(i, ms))
                .collect();
        }
        while series.len() < k && rec_len > WARMUP_ITERS {
            if cur >= rec_len {
                cur = WARMUP_ITERS;
            }
            let ms = rec.per_iter_ms[cur];
            cur += 1;
            series.push(ms);
            if self.early_stop.is_some() || job.race.is_some() {
                iters_seen.push(iteration(series.len() - 1, ms));
            }
            if let Some(cfg) = &self.early_stop
                && should_stop(&iters_seen, cfg)
            {
                break;
            }
            // The run engine's race rule, as a trial's stop policy applies it.
            if job
                .race
                .is_some_and(|r| r.lost(&iters_seen, WARMUP_ITERS, None))
            {
                raced = true;
                break;
            }
        }
        self.cursor[row] = cur;
        let cost_ms: f64 = series.iter().sum();
        let warm_ms: f64 = series.iter().take(WARMUP_ITERS).sum();
        Outcome {
            step_ms: series.iter().skip(WARMUP_ITERS).copied().collect(),
            oom: false,
            failed: None,
            peak_memory_bytes: peak,
            // A recorded table's peaks are of one kind, whichever the table recorded.
            peak_memory_kind: None,
            gpu_seconds: rec.startup_s + cost_ms / 1000.0,
            launch_s: (series.len() > WARMUP_ITERS).then(|| rec.startup_s + warm_ms / 1000.0),
            // A recording's step times are as run.
            wall_step_ms: None,
            raced,
        }
    }
}

fn iteration(i: usize, ms: f64) -> Iteration {
    Iteration {
        iteration: i as u64 + 1,
        elapsed_ms: Some(ms),
        ..Default::default()
    }
}

/// A candidate's true step time: `true_step_ms` when known, else the median of all its
/// recorded step times after the warm-up. `None` for an OOM.
pub fn true_step_ms(c: &ReplayCandidate) -> Option<f64> {
    if c.oom {
        return None;
    }
    c.true_step_ms
        .or_else(|| median(c.per_iter_ms.get(WARMUP_ITERS..).unwrap_or(&[])))
}

/// The truly best candidate (row index): lowest [`true_step_ms`] among those that did not OOM.
pub fn true_best(table: &ReplayTable) -> Option<usize> {
    table
        .candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| true_step_ms(c).map(|t| (i, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|t| t.0)
}

/// The exhaustive-grid baseline: every candidate one trial of [`GRID_ITERS`] iterations (no
/// early stop), the best step time by the search's statistic (the 20 % trimmed mean) wins.
/// Returns (pick row, GPU-seconds, trials).
pub fn grid(table: &ReplayTable) -> (Option<usize>, f64, usize) {
    let ks = knobs(table);
    let cands = candidates(table, &ks);
    let mut runner = ReplayRunner::fixed_length(table);
    let mut spent = 0.0;
    let mut best: Option<(usize, f64)> = None;
    for c in &cands {
        let out = runner.run(&Job::new(c, GRID_ITERS));
        spent += out.gpu_seconds;
        if out.oom || out.failed.is_some() {
            continue;
        }
        if let Some(m) = super::search::step_estimate(&out.step_ms).map(|e| e.value)
            && best.is_none_or(|(_, b)| m < b)
        {
            best = Some((c.id, m));
        }
    }
    (best.map(|b| b.0), spent, cands.len())
}

/// What [`replay_all`] carries from each study to the studies after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Carry {
    /// The knob effects each study measured ([`Effects`]).
    pub effects: bool,
    /// The link scale a layout study measured, to later studies of the same
    /// [`ReplayTable::machine`] ([`crate::tune::search::SearchConfig::carried_links`]).
    pub links: bool,
}

/// Replays several studies in order, each carrying what `carry` names from the studies before
/// it, as a sweep starts from the workspace's earlier studies; with nothing to carry, each is
/// replayed alone.
pub fn replay_all(
    studies: &[(String, ReplayTable)],
    cfg: &SearchConfig,
    carry: Carry,
) -> Vec<(String, ReplayReport)> {
    let mut effects = Effects::default();
    let mut links: HashMap<String, crate::domain::study::CarriedLinks> = HashMap::new();
    studies
        .iter()
        .map(|(name, t)| {
            let mut cfg = cfg.clone();
            if carry.effects {
                cfg.effects = Some(effects.clone());
            }
            if carry.links {
                cfg.carried_links = t.machine.as_ref().and_then(|m| links.get(m)).cloned();
            }
            let r = replay(t, &cfg);
            let measured: Vec<(usize, f64)> = r
                .search
                .evidence
                .iter()
                .filter(|(id, _)| t.candidates.get(**id).is_some_and(|c| !c.oom))
                .filter_map(|(&id, e)| Some((id, e.step_ms?)))
                .collect();
            if carry.effects {
                let ks = knobs(t);
                effects.learn(&ks, &candidates(t, &ks), &measured);
            }
            let points: Vec<_> = measured
                .iter()
                .filter_map(|&(id, ms)| Some((t.candidates.get(id)?.layout_prior?, ms)))
                .collect();
            if let (true, Some(m), Some(scale)) = (
                carry.links,
                &t.machine,
                // The node size is the machine key's; 8, the synthetic studies' node.
                crate::tune::search::prior::layout::measured_links(&points, 8),
            ) {
                links.insert(
                    m.clone(),
                    crate::domain::study::CarriedLinks {
                        scale,
                        from: name.clone(),
                    },
                );
            }
            (name.clone(), r)
        })
        .collect()
}

/// GPU-seconds against the grid over several studies: the total's ratio, and the median and
/// the worst study's (what `bench-replay` reports).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostRatios {
    pub total: f64,
    pub median: f64,
    pub max: f64,
}

impl CostRatios {
    /// From (spent, grid) GPU-seconds per study; NaN where there is nothing to divide.
    pub fn of(costs: &[(f64, f64)]) -> CostRatios {
        let mut ratios: Vec<f64> = costs
            .iter()
            .map(|&(s, g)| if g > 0.0 { s / g } else { f64::NAN })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let spent: f64 = costs.iter().map(|c| c.0).sum();
        let grid: f64 = costs.iter().map(|c| c.1).sum();
        CostRatios {
            total: if grid > 0.0 { spent / grid } else { f64::NAN },
            median: ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN),
            max: ratios.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// Search against the exhaustive grid on one table.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    /// The search's recommendation.
    pub pick: Option<Overrides>,
    pub gpu_seconds: f64,
    pub trials: usize,
    /// The truly best candidate ([`true_best`]).
    pub best: Option<Overrides>,
    /// How much slower the pick truly is than the best, %.
    pub gap_pct: Option<f64>,
    pub grid_pick: Option<Overrides>,
    pub grid_gpu_seconds: f64,
    pub grid_trials: usize,
    pub grid_gap_pct: Option<f64>,
    /// `gpu_seconds / grid_gpu_seconds`.
    pub ratio: f64,
    /// Candidates ruled out without a trial (dominating an OOM, or predicted to OOM).
    pub ruled_out: usize,
    /// Candidates not run because the additive model predicted them slower than the leader.
    pub predicted_slower: usize,
    /// Trials that ran out of memory.
    pub oom_trials: usize,
    /// The memory model's forecast error on this study: |forecast − measured| / measured, %,
    /// over the candidates that ran without running out of memory and were forecast after at
    /// least [`FORECAST_AFTER_PEAKS`] measured peaks calibrated the model. `None`: no such
    /// candidate (or the table has no predictions).
    pub memory_forecast_error_pct: Option<ForecastError>,
    /// Where the GPU-seconds went, by what each launch was for.
    pub phases: Phases,
    /// The search itself (verdicts, evidence, log).
    #[serde(skip)]
    pub search: SearchResult,
}

/// Replays `table` with the search (the runner's early stop on; the table's capacity when
/// `cfg` has none; no memory model) and with the grid baseline.
pub fn replay(table: &ReplayTable, cfg: &SearchConfig) -> ReplayReport {
    let ks = knobs(table);
    let cands = candidates(table, &ks);
    let mut cfg = cfg.clone();
    if cfg.capacity_bytes.is_none() {
        cfg.capacity_bytes = table.capacity_bytes;
    }
    // A replay re-reads one recording per candidate: its launches do not vary from one
    // another, so no confirmation launch is needed for that.
    let zero_cv = cfg.launch_cv.is_none();
    if zero_cv {
        cfg.launch_cv = Some(0.0);
    }
    // The table's memory predictions are the model's own, uncalibrated: none is trusted to
    // prune before this study has measured two peaks.
    cfg.predictions_calibrated = false;
    if cfg.pipeline_stages.is_empty() {
        cfg.pipeline_stages = cands
            .iter()
            .filter_map(|c| Some((c.id, stages(&c.overrides, table.pipeline_stages)?)))
            .collect();
    }
    if cfg.layout_prior.is_empty() {
        cfg.layout_prior = table
            .candidates
            .iter()
            .enumerate()
            .filter_map(|(id, c)| Some((id, c.layout_prior?)))
            .collect();
    }
    let mut runner = ReplayRunner::new(table);
    let predicted = |c: &Candidate| table.candidates.get(c.id).and_then(|r| r.predicted_bytes);
    let mut res = search(&ks, &cands, &mut runner, &cfg, &predicted);
    if zero_cv {
        res.log.insert(
            0,
            "replay: each launch re-reads the candidate's one recording, so launches do not vary \
             (CV 0)"
                .to_string(),
        );
    }
    let memory_forecast_error_pct = forecast_error(table, &res);
    let (grid_pick, grid_gpu_seconds, grid_trials) = grid(table);
    let best = true_best(table);
    let truth = |row: Option<usize>| {
        row.and_then(|r| table.candidates.get(r))
            .and_then(true_step_ms)
    };
    let gap = |row: Option<usize>| match (truth(row), truth(best)) {
        (Some(p), Some(b)) => Some((p / b - 1.0) * 100.0),
        _ => None,
    };
    let overrides = |row: Option<usize>| {
        row.and_then(|r| table.candidates.get(r))
            .map(|c| c.overrides.clone())
    };
    let ruled_out = res
        .verdicts
        .iter()
        .filter(|(_, v)| {
            matches!(
                v,
                super::search::Verdict::RuledOut { .. }
                    | super::search::Verdict::PredictedOom { .. }
            )
        })
        .count();
    let predicted_slower = res
        .verdicts
        .iter()
        .filter(|(_, v)| matches!(v, super::search::Verdict::PredictedSlower { .. }))
        .count();
    let oom_trials = runner
        .launched
        .iter()
        .filter(|(r, _)| table.candidates[*r].oom)
        .count();
    ReplayReport {
        pick: overrides(res.pick),
        gpu_seconds: res.gpu_seconds,
        trials: res.trials,
        best: overrides(best),
        gap_pct: gap(res.pick),
        grid_pick: overrides(grid_pick),
        grid_gpu_seconds,
        grid_trials,
        grid_gap_pct: gap(grid_pick),
        ratio: if grid_gpu_seconds > 0.0 {
            res.gpu_seconds / grid_gpu_seconds
        } else {
            f64::NAN
        },
        ruled_out,
        predicted_slower,
        oom_trials,
        memory_forecast_error_pct,
        phases: Phases::of(&res),
        search: res,
    }
}

/// Forecasts count once the model is calibrated on this many measured peaks (a slope).
pub const FORECAST_AFTER_PEAKS: usize = 2;

/// The memory model's forecast error over a study's candidates, %.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ForecastError {
    pub median: f64,
    pub p90: f64,
    /// Candidates forecast (after the calibration peaks) and measured.
    pub n: usize,
}

/// The forecast error of `res` against the table's measured peaks (see
/// [`ReplayReport::memory_forecast_error_pct`]).
fn forecast_error(table: &ReplayTable, res: &SearchResult) -> Option<ForecastError> {
    let mut errs: Vec<f64> = res
        .points_at_launch
        .iter()
        .filter(|&(_, &pts)| pts >= FORECAST_AFTER_PEAKS)
        .filter_map(|(&id, _)| {
            let row = table.candidates.get(id)?;
            let measured = row.peak_memory_bytes.filter(|_| !row.oom)?;
            let forecast = *res.predicted_bytes.get(&id)?;
            (measured > 0.0).then(|| ((forecast - measured) / measured).abs() * 100.0)
        })
        .collect();
    if errs.is_empty() {
        return None;
    }
    errs.sort_by(f64::total_cmp);
    let q = |p: f64| errs[((p * errs.len() as f64).ceil() as usize).clamp(1, errs.len()) - 1];
    Some(ForecastError {
        median: median(&errs).unwrap_or(f64::NAN),
        p90: q(0.9),
        n: errs.len(),
    })
}

use crate::util::rng::Rng;

/// Recorded iterations per synthetic candidate (warm-up included).
pub const SYNTHETIC_ITERS: usize = 300;

/// A synthetic study with a known optimum (`true_step_ms` on every candidate that fits).
///
/// The model, drawn from `seed` (deterministic):
///
/// * Knobs: `micro_batch_size` ∈ {1, 2, 4, 8}, `recompute_num_layers` ∈ {0, 1, 2, 4} (of 8
///   layers), `turbo_sync_free_moe_stage` ∈ {0, 1, 2, 3}, `turbo_deepep_num_cu` ∈ {16, 24, 32,
///   48}. Each knob gets a random contiguous run of its values until the grid has at least
///   `n_candidates` points; random points are then dropped to leave exactly `n_candidates`
///   (at most 256).
/// * Step time (fixed global batch): a base of 0.3–3 s; a larger micro batch is faster with
///   diminishing returns (0–25 % over the range) plus a ±2 % per-value effect (so it need not
///   be monotone); recomputing layers costs 15–35 % at all 8; each sync-free stage moves the time
///   by −4 % … +2 %; the DeepEP CU count has an interior optimum (0–6 % penalty away from it);
///   and every candidate gets an unmodelled factor of ±1 % (σ).
/// * Memory grows with the micro batch and the sync-free stage and shrinks with recompute; the
///   candidates' peaks are cut at a random quantile, so 0–45 % of them OOM (OOM rows record
///   no iteration, as a real OOM in the first iteration); the largest peak that fits is 90 %
///   of the 192 GiB capacity.
/// * The memory model's prediction (`predicted_bytes`, uncalibrated) weighs the study's three
///   memory terms each 0.7–1.3× wrong and is off by another ±2 % (σ) per candidate, so two
///   measured peaks calibrate it to within a few %, not exactly.
/// * Iterations: `step × (1 + noise_cv·N(0,1))` (floored at half the step), with a 2 % chance
///   of a straggler 20–80 % slower; the first two iterations add a per-study warm-up of 1–6 s
///   and 0.3–2 s (real logs: +3.3 s and +1.7 s on a small model). `startup_s` is per trial.
pub fn synthetic(seed: u64, n_candidates: usize, noise_cv: f64, startup_s: f64) -> ReplayTable {
    let mut rng = Rng(seed ^ 0x5EED_0F5E_A2C4);
    let all: [(&str, [f64; 4]); 4] = [
        ("micro_batch_size", [1.0, 2.0, 4.0, 8.0]),
        ("recompute_num_layers", [0.0, 1.0, 2.0, 4.0]),
        ("turbo_deepep_num_cu", [16.0, 24.0, 32.0, 48.0]),
        ("turbo_sync_free_moe_stage", [0.0, 1.0, 2.0, 3.0]),
    ];
    let points = synthetic_grid(&mut rng, &all, n_candidates.clamp(1, 256));

    // The study's performance and memory model.
    let base_ms = rng.range(300.0, 3000.0);
    let mbs_gain = rng.range(0.0, 0.25);
    let mbs_wiggle: Vec<f64> = (0..4).map(|_| rng.range(-0.02, 0.02)).collect();
    let recompute_cost = rng.range(0.15, 0.35);
    let mut sf = [0.0f64; 4];
    for s in 1..4 {
        sf[s] = sf[s - 1] + rng.range(-0.04, 0.02);
    }
    let cu_best = rng.range(16.0, 48.0);
    let cu_weight = rng.range(0.0, 0.06);
    let warm1_ms = rng.range(1000.0, 6000.0);
    let warm2_ms = rng.range(300.0, 2000.0);
    let fixed_mem = rng.range(0.3, 0.6);
    let act_mem = rng.range(0.05, 0.2);
    let sf_mem = rng.range(0.0, 0.05);
    let oom_share = rng.range(0.0, 0.45);
    let idx = |v: f64, k: usize| all[k].1.iter().position(|&x| x == v).unwrap_or(0);

    let step_of = |p: &[f64; 4], unmodelled: f64| {
        let mbs = p[0];
        let f_mbs = 1.0 - mbs_gain * mbs.log2() / 3.0 + mbs_wiggle[idx(mbs, 0)];
        let f_rc = 1.0 + recompute_cost * p[1] / 8.0;
        let f_cu = 1.0 + cu_weight * ((p[2] - cu_best) / 32.0).powi(2);
        let f_sf = 1.0 + sf[idx(p[3], 3)];
        base_ms * f_mbs * f_rc * f_cu * f_sf * unmodelled
    };
    let mem_of =
        |p: &[f64; 4]| fixed_mem + act_mem * p[0] * (1.0 - 0.8 * p[1] / 8.0) + sf_mem * p[3];
    let mut mems: Vec<f64> = points.iter().map(mem_of).collect();
    mems.sort_by(f64::total_cmp);
    // Capacity: the (1 − oom_share) quantile of the peaks (everything fits at share 0).
    let q = ((1.0 - oom_share) * mems.len() as f64).ceil() as usize;
    let limit = mems[q.clamp(1, mems.len()) - 1];
    // The largest peak that fits uses 90 % of the GPU: what the allocator's reserve and
    // fragmentation leave (a candidate above it runs out of memory before the last 10 %).
    let capacity = 192.0 * 1024.0 * 1024.0 * 1024.0;
    let scale = 0.9 * capacity / limit.max(1e-9);
    // The memory model's view (its own stream, so the studies above stay as they were): each
    // term weighted wrong by up to ±30 % (what a closed form misses), ±2 % per candidate.
    let mut mrng = Rng(seed ^ 0x3E30_0DE1_F00D);
    let w: Vec<f64> = (0..3).map(|_| mrng.range(0.7, 1.3)).collect();
    let model_of = |p: &[f64; 4]| {
        w[0] * fixed_mem + w[1] * act_mem * p[0] * (1.0 - 0.8 * p[1] / 8.0) + w[2] * sf_mem * p[3]
    };

    let candidates = points
        .iter()
        .map(|p| {
            let mut overrides = Overrides::new();
            for (k, (flag, _)) in all.iter().enumerate() {
                overrides.insert((*flag).to_string(), serde_json::json!(p[k] as u64));
            }
            let unmodelled = (0.01 * rng.normal()).exp();
            let step = step_of(p, unmodelled);
            let mem = mem_of(p);
            let oom = mem > limit;
            let per_iter_ms = if oom {
                Vec::new()
            } else {
                synthetic_iterations(&mut rng, step, noise_cv, [warm1_ms, warm2_ms])
            };
            ReplayCandidate {
                overrides,
                per_iter_ms,
                peak_memory_bytes: (!oom).then(|| (mem * scale).round()),
                oom,
                startup_s,
                true_step_ms: (!oom).then_some(step),
                predicted_bytes: Some(
                    (model_of(p) * scale * (1.0 + 0.02 * mrng.normal()).max(0.5)).round(),
                ),
                layout_prior: None,
            }
        })
        .collect();
    ReplayTable {
        capacity_bytes: Some(capacity),
        pipeline_stages: None,
        machine: None,
        candidates,
    }
}

/// The knob values of a synthetic study: a random contiguous run of each knob's values until
/// the grid has `n` points or more, then random points dropped to leave `n` (the random draws
/// in this order: the suites' studies depend on it).
fn synthetic_grid(rng: &mut Rng, all: &[(&str, [f64; 4]); 4], n: usize) -> Vec<[f64; 4]> {
    // Value counts per knob until the grid is large enough.
    let mut count = [1usize; 4];
    while count.iter().product::<usize>() < n {
        let k = rng.below(4);
        if count[k] < 4 {
            count[k] += 1;
        }
    }
    let start: Vec<usize> = count.iter().map(|&c| rng.below(4 - c + 1)).collect();
    let mut points: Vec<[f64; 4]> = vec![[0.0; 4]];
    for k in 0..4 {
        let mut next = Vec::new();
        for p in &points {
            for j in 0..count[k] {
                let mut q = *p;
                q[k] = all[k].1[start[k] + j];
                next.push(q);
            }
        }
        points = next;
    }
    while points.len() > n {
        let i = rng.below(points.len());
        points.remove(i);
    }
    points
}

/// The iteration times of a candidate of true step `step` (ms, to 0.1 ms): noise, a 2 %
/// chance of a straggler, and the two warm-up iterations first.
fn synthetic_iterations(rng: &mut Rng, step: f64, noise_cv: f64, warm_ms: [f64; 2]) -> Vec<f64> {
    (0..SYNTHETIC_ITERS)
        .map(|i| {
            let mut ms = (step * (1.0 + noise_cv * rng.normal())).max(0.5 * step);
            if rng.uniform() < 0.02 {
                ms *= rng.range(1.2, 1.8);
            }
            match i {
                0 => ms + warm_ms[0],
                1 => ms + warm_ms[1],
                _ => ms,
            }
        })
        .map(|ms| (ms * 10.0).round() / 10.0)
        .collect()
}

/// The synthetic studies of the replay benchmark: study `i` (from 0) is [`synthetic`] with seed
/// `i + 1` (with a `suite_seed` other than 0: `suite_seed × 1 000 000 + i + 1`, other studies of
/// the same shapes), 12, 16, 24, 32 or 48 candidates in turn, and a noise CV spread over 1–5 %
/// (a golden-ratio sequence, so any prefix covers the range). Returns (name, table).
pub fn synthetic_suite(n: usize, startup_s: f64, suite_seed: u64) -> Vec<(String, ReplayTable)> {
    const SIZES: [usize; 5] = [12, 16, 24, 32, 48];
    (0..n)
        .map(|i| {
            let size = SIZES[i % SIZES.len()];
            let cv = 0.01 + 0.04 * ((i as f64 * 0.618_033_988_749_895) % 1.0);
            let name = format!(
                "synthetic-{} ({size} candidates, noise CV {:.1} %)",
                i + 1,
                cv * 100.0
            );
            let seed = suite_seed
                .wrapping_mul(1_000_000)
                .wrapping_add(i as u64 + 1);
            (name, synthetic(seed, size, cv, startup_s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::search::Race;
    use serde_json::json;

    fn row(overrides: serde_json::Value, per_iter_ms: &[f64]) -> ReplayCandidate {
        ReplayCandidate {
            overrides: serde_json::from_value(overrides).unwrap(),
            per_iter_ms: per_iter_ms.to_vec(),
            peak_memory_bytes: None,
            oom: false,
            startup_s: 0.0,
            true_step_ms: None,
            predicted_bytes: None,
            layout_prior: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn knobs_are_inferred_from_the_table() {
        let t = ReplayTable {
            capacity_bytes: None,
            pipeline_stages: None,
            machine: None,
            candidates: vec![
                row(
                    json!({"micro_batch_size": 4, "recompute_num_layers": 2, "fp8": "hybrid"}),
                    &[1.0; 3],
                ),
                row(
                    json!({"micro_batch_size": 1, "recompute_num_layers": 0}),
                    &[1.0; 3],
                ),
                row(
                    json!({"micro_batch_size": 2, "recompute_num_layers": 0, "fp8": "e4m3"}),
                    &[1.0; 3],
                ),
                row(
                    json!({"micro_batch_size": 2, "turbo_sync_free_moe_stage": 1, "fp8": "hybrid"}),
                    &[1.0; 3],
                ),
            ],
        };
        let ks = knobs(&t);
        let flags: Vec<&str> = ks.iter().map(|k| k.flag.as_str()).collect();
        assert_eq!(
            flags,
            [
                "fp8",
                "micro_batch_size",
                "recompute_num_layers",
                "turbo_sync_free_moe_stage"
            ]
        );
        // Not numeric: table order, the missing value (null) first, no trend.
        assert_eq!(ks[0].values, [json!(null), json!("hybrid"), json!("e4m3")]);
        assert_eq!(ks[0].memory, MemoryTrend::None);
        assert_eq!(ks[1].values, [json!(1), json!(2), json!(4)]);
        assert_eq!(ks[1].memory, MemoryTrend::Increasing);
        // A missing numeric value is null: not all numbers, so no trend and table order.
        assert_eq!(ks[2].values, [json!(null), json!(2), json!(0)]);
        assert_eq!(ks[2].memory, MemoryTrend::None);
        let cands = candidates(&t, &ks);
        assert_eq!(cands[0].ranks, [1, 2, 1, 0]);
        assert_eq!(cands[3].ranks, [1, 1, 0, 1]);
        assert_eq!(cands[3].id, 3);

        let t = ReplayTable {
            capacity_bytes: None,
            pipeline_stages: None,
            machine: None,
            candidates: vec![
                row(
                    json!({"recompute_num_layers": 4, "turbo_deepep_num_cu": 32}),
                    &[1.0; 3],
                ),
                row(
                    json!({"recompute_num_layers": 0.5, "turbo_deepep_num_cu": 16}),
                    &[1.0; 3],
                ),
            ],
        };
        let ks = knobs(&t);
        assert_eq!(ks[0].values, [json!(0.5), json!(4)]);
        assert_eq!(ks[0].memory, MemoryTrend::Decreasing);
        assert_eq!(ks[1].values, [json!(16), json!(32)]);
        assert_eq!(ks[1].memory, MemoryTrend::None);
    }

    #[test]
    fn trials_cost_startup_and_their_iterations_and_continue_the_recording() {
        let mut r = row(
            json!({"micro_batch_size": 1}),
            &[1000.0, 500.0, 100.0, 110.0, 120.0, 130.0, 140.0],
        );
        r.startup_s = 10.0;
        let mut oom = row(json!({"micro_batch_size": 2}), &[]);
        oom.oom = true;
        oom.startup_s = 5.0;
        let mut oom_with_iter = row(json!({"micro_batch_size": 4}), &[2000.0]);
        oom_with_iter.oom = true;
        let t = ReplayTable {
            capacity_bytes: None,
            pipeline_stages: None,
            machine: None,
            candidates: vec![r, oom, oom_with_iter],
        };
        let ks = knobs(&t);
        let cands = candidates(&t, &ks);
        let mut run = ReplayRunner::fixed_length(&t);
        let o = run.run(&Job::new(&cands[0], 4));
        assert_eq!(o.step_ms, [100.0, 110.0]);
        assert!(close(o.gpu_seconds, 10.0 + 1.71), "{}", o.gpu_seconds);
        // A fresh process: warm-up again, then the iterations not yet replayed.
        let o = run.run(&Job::new(&cands[0], 4));
        assert_eq!(o.step_ms, [120.0, 130.0]);
        assert!(close(o.gpu_seconds, 10.0 + 1.75), "{}", o.gpu_seconds);
        // Past the end: wraps to the first steady iteration.
        let o = run.run(&Job::new(&cands[0], 5));
        assert_eq!(o.step_ms, [140.0, 100.0, 110.0]);
        // An OOM costs start-up and one iteration: the median first iteration of those that ran
        // when none is recorded.
        let o = run.run(&Job::new(&cands[1], 50));
        assert!(o.oom && o.step_ms.is_empty());
        assert!(close(o.gpu_seconds, 5.0 + 1.0), "{}", o.gpu_seconds);
        let o = run.run(&Job::new(&cands[2], 50));
        assert!(close(o.gpu_seconds, 2.0), "{}", o.gpu_seconds);
        assert_eq!(run.launched, [(0, 4), (0, 4), (0, 5), (1, 50), (2, 50)]);
        // Not in the table: a failure.
        let stranger = Candidate {
            id: 9,
            overrides: serde_json::from_value(json!({"micro_batch_size": 8})).unwrap(),
            ranks: vec![0],
            baseline: false,
        };
        assert!(run.run(&Job::new(&stranger, 4)).failed.is_some());
    }

    #[test]
    fn early_stop_ends_a_steady_trial() {
        let mut steps = vec![900.0, 400.0];
        steps.extend([100.0; 60]);
        let t = ReplayTable {
            capacity_bytes: None,
            pipeline_stages: None,
            machine: None,
            candidates: vec![row(json!({"micro_batch_size": 1}), &steps)],
        };
        let cands = candidates(&t, &knobs(&t));
        let mut run = ReplayRunner::new(&t);
        let o = run.run(&Job::new(&cands[0], 60));
        // The engine's rule: 8 steady samples with a CI of zero width.
        assert_eq!(o.step_ms.len(), 8);
        assert!(close(o.gpu_seconds, 1.3 + 0.8), "{}", o.gpu_seconds);
        let mut fixed = ReplayRunner::fixed_length(&t);
        assert_eq!(fixed.run(&Job::new(&cands[0], 60)).step_ms.len(), 58);
    }

    #[test]
    fn a_race_ends_a_replayed_trial_as_the_run_engine_would() {
        // 100 ms ± 10 %: the 1 % CI target is far off.
        let mut steps = vec![900.0, 400.0];
        steps.extend((0..60).map(|i| if i % 2 == 0 { 90.0 } else { 110.0 }));
        let t = ReplayTable {
            capacity_bytes: None,
            pipeline_stages: None,
            machine: None,
            candidates: vec![row(json!({"micro_batch_size": 1}), &steps)],
        };
        let cands = candidates(&t, &knobs(&t));
        let race = |above_ms| {
            Some(Race {
                above_ms,
                min_samples: 6,
                per_samples: None,
            })
        };
        let mut run = ReplayRunner::new(&t);
        let o = run.run(&Job {
            race: race(50.0),
            ..Job::new(&cands[0], 30)
        });
        assert!(o.raced);
        assert_eq!(o.step_ms.len(), 6, "the first 6 steady samples lose it");
        assert!(close(o.gpu_seconds, 1.3 + 0.6), "{}", o.gpu_seconds);
        // A bar it does not clear: the whole trial, not raced.
        let o = run.run(&Job {
            race: race(99.0),
            ..Job::new(&cands[0], 30)
        });
        assert!(!o.raced);
        assert_eq!(o.step_ms.len(), 28);
    }

    #[test]
    fn bad_tables_are_refused_with_the_reason() {
        let e =
            ReplayTable::from_json("{\"candidates\": [\n  {\"overrides\": {}, }]}").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = ReplayTable::from_json("{\"candidates\": []}").unwrap_err();
        assert_eq!(e.to_string(), "no candidates");
        let e = ReplayTable::from_json(
            r#"{"candidates": [{"overrides": {"a": 1}, "per_iter_ms": [1, 1, 1]},
                               {"overrides": {"a": 1}, "per_iter_ms": [1, 1, 1]}]}"#,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "candidates[1]: the same overrides as candidates[0]"
        );
        let e =
            ReplayTable::from_json(r#"{"candidates": [{"overrides": {}, "per_iter_ms": [1, 1]}]}"#)
                .unwrap_err();
        assert!(e.to_string().contains("at least 3"), "{e}");
        let e = ReplayTable::from_json(
            r#"{"candidates": [{"overrides": {}, "per_iter_ms": [1, -1, 1]}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("per_iter_ms[1]"), "{e}");
        let e = ReplayTable::from_json(
            r#"{"candidates": [{"overrides": {}, "per_iter_ms": [1, 1, 1], "startup_s": -3}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("startup_s"), "{e}");
        let e = ReplayTable::from_json(
            r#"{"capacity_bytes": 0, "candidates": [{"overrides": {}, "per_iter_ms": [1, 1, 1]}]}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("capacity_bytes"), "{e}");
        let e = ReplayTable::from_json(
            r#"{"pipeline_stages": 0, "candidates": [{"overrides": {}, "per_iter_ms": [1, 1, 1]}]}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("pipeline_stages must be at least 1"),
            "{e}"
        );
        // An OOM needs no iterations; startup_s defaults to 0.
        let t =
            ReplayTable::from_json(r#"{"candidates": [{"overrides": {}, "oom": true}]}"#).unwrap();
        assert_eq!(t.candidates[0].startup_s, 0.0);
    }

    #[test]
    fn grid_and_true_best() {
        let mut oom = row(json!({"micro_batch_size": 4}), &[]);
        oom.oom = true;
        let t = ReplayTable {
            capacity_bytes: None,
            pipeline_stages: None,
            machine: None,
            candidates: vec![
                row(
                    json!({"micro_batch_size": 1}),
                    &[1000.0, 1000.0, 200.0, 200.0, 200.0],
                ),
                row(
                    json!({"micro_batch_size": 2}),
                    &[1000.0, 1000.0, 150.0, 160.0, 150.0],
                ),
                oom,
            ],
        };
        assert_eq!(true_best(&t), Some(1));
        assert_eq!(true_step_ms(&t.candidates[1]), Some(150.0));
        assert_eq!(true_step_ms(&t.candidates[2]), None);
        let (pick, secs, trials) = grid(&t);
        assert_eq!((pick, trials), (Some(1), 3));
        // 50 iterations each: 2 warm-up + 48 steady (wrapping); the OOM costs one iteration.
        let expect = (2000.0 + 48.0 * 200.0) / 1000.0
            + (2000.0 + 16.0 * 150.0 + 16.0 * 160.0 + 16.0 * 150.0) / 1000.0
            + 1.0;
        assert!(close(secs, expect), "{secs} vs {expect}");
    }

    #[test]
    fn cost_ratios_weigh_the_total_by_gpu_seconds_and_rank_the_studies() {
        let r = CostRatios::of(&[(1.0, 4.0), (3.0, 4.0), (20.0, 20.0)]);
        assert!(close(r.total, 24.0 / 28.0), "{r:?}");
        assert!(close(r.median, 0.75) && close(r.max, 1.0), "{r:?}");
        assert!(CostRatios::of(&[]).total.is_nan());
    }

    #[test]
    fn synthetic_studies_are_deterministic_and_well_formed() {
        let a = synthetic(7, 24, 0.02, 30.0);
        assert!(a == synthetic(7, 24, 0.02, 30.0));
        assert!(a != synthetic(8, 24, 0.02, 30.0));
        assert_eq!(a.candidates.len(), 24);
        let text = serde_json::to_string(&a).unwrap();
        let back = ReplayTable::from_json(&text).unwrap();
        assert_eq!(back.candidates.len(), a.candidates.len());
        assert!(
            back.candidates
                .iter()
                .zip(&a.candidates)
                .all(|(x, y)| x.overrides == y.overrides)
        );
        for c in &a.candidates {
            assert_eq!(c.startup_s, 30.0);
            if c.oom {
                assert!(c.per_iter_ms.is_empty() && c.true_step_ms.is_none());
            } else {
                assert_eq!(c.per_iter_ms.len(), SYNTHETIC_ITERS);
                let t = c.true_step_ms.unwrap();
                // Warm-up is slower; the median is near the truth.
                assert!(c.per_iter_ms[0] > t + 900.0);
                let m = true_step_ms(&ReplayCandidate {
                    true_step_ms: None,
                    ..c.clone()
                })
                .unwrap();
                assert!((m / t - 1.0).abs() < 0.01, "{m} vs {t}");
            }
        }
        assert!(a.candidates.iter().any(|c| !c.oom));
        // Sizes beyond the grid are capped.
        assert_eq!(synthetic(1, 1000, 0.02, 0.0).candidates.len(), 256);
        assert_eq!(synthetic_suite(7, 0.0, 0).len(), 7);
        assert!(
            synthetic_suite(2, 0.0, 0)[1].1
                == synthetic(2, 16, 0.01 + 0.04 * 0.618_033_988_749_895, 0.0)
        );
        assert!(synthetic_suite(2, 0.0, 3)[1].1 != synthetic_suite(2, 0.0, 0)[1].1);
    }

    #[test]
    fn replay_finds_the_best_of_a_synthetic_study_for_less_than_the_grid() {
        for seed in 1..6 {
            let t = synthetic(seed, 32, 0.02, 0.0);
            let r = replay(&t, &SearchConfig::default());
            assert!(r.gap_pct.unwrap() < 1.0, "seed {seed}: {:?}", r.search.log);
            assert!(r.gpu_seconds < r.grid_gpu_seconds, "seed {seed}");
            assert!(close(r.ratio, r.gpu_seconds / r.grid_gpu_seconds));
            assert_eq!(
                r.best,
                t.candidates
                    .get(true_best(&t).unwrap())
                    .map(|c| c.overrides.clone())
            );
            assert_eq!(r.grid_trials, 32);
        }
    }

    /// Every launch is in the ledger once, under what it was for: the phases add up to the
    /// search's GPU-seconds, trials and OOM trials; the design comes before the promising
    /// launches and both before the follow-up; the promising launches' split by how their
    /// candidates ended adds up to no more than they cost.
    #[test]
    fn the_phases_account_for_every_launch() {
        use crate::tune::search::Phase;
        let mut promising = 0;
        for (startup, seed) in [(0.0, 1), (120.0, 2), (120.0, 3), (30.0, 4)] {
            let t = synthetic(seed, 48, 0.03, startup);
            let r = replay(&t, &SearchConfig::default());
            let p = &r.phases;
            let parts = [p.design, p.promising, p.follow_up];
            let sum = |f: fn(&PhaseCost) -> f64| parts.iter().map(f).sum::<f64>();
            assert!(close(sum(|c| c.gpu_seconds), r.gpu_seconds), "{p:?}");
            assert_eq!(parts.iter().map(|c| c.launches).sum::<usize>(), r.trials);
            assert_eq!(
                parts.iter().map(|c| c.oom_launches).sum::<usize>(),
                r.oom_trials
            );
            for c in parts {
                assert!(c.contenders_gpu_seconds + c.slower_gpu_seconds <= c.gpu_seconds + 1e-6);
            }
            let order: Vec<Phase> = r.search.launches.iter().map(|l| l.phase).collect();
            assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
            assert_eq!(order.first(), Some(&Phase::Design));
            // The decision log says how the first rung split (when it had promising launches).
            let said = format!(
                "rung 1: {} for the design ({:.1} GPU-s",
                crate::util::text::count(p.design.launches, "launch", "launches"),
                p.design.gpu_seconds
            );
            assert_eq!(
                r.search.log.iter().any(|l| l.starts_with(&said)),
                p.promising.launches > 0,
                "{said}: {:?}",
                r.search.log
            );
            promising += p.promising.launches;
        }
        assert!(promising > 0);
    }

    #[test]
    fn knob_effects_carried_from_earlier_studies_cut_the_later_ones_launches() {
        let suite = synthetic_suite(20, 120.0, 0);
        let cfg = SearchConfig::default();
        let alone = replay_all(&suite, &cfg, Carry::default());
        let carried = replay_all(
            &suite,
            &cfg,
            Carry {
                effects: true,
                links: false,
            },
        );
        // The first study has no history: the same search, which says so.
        let without = |log: &[String]| -> Vec<String> {
            log.iter()
                .filter(|l| !l.starts_with("knob effects"))
                .cloned()
                .collect()
        };
        assert_eq!(
            without(&alone[0].1.search.log),
            without(&carried[0].1.search.log)
        );
        assert!(
            carried[0].1.search.log.iter().any(|l| l.starts_with(
                "knob effects of 0 earlier studies: none yet for this space's values"
            )),
            "{:?}",
            carried[0].1.search.log
        );
        let spent = |r: &[(String, ReplayReport)]| r.iter().map(|x| x.1.gpu_seconds).sum::<f64>();
        let (a, c) = (spent(&alone), spent(&carried));
        assert!(c < 0.9 * a, "carried {c:.0} GPU-s against {a:.0} alone");
        let last = &carried[19].1.search.log;
        assert!(
            last.iter()
                .any(|l| l.starts_with("knob effects of 19 earlier studies: priors on")),
            "{last:?}"
        );
        // A candidate skipped on the priors says so, as a prediction.
        assert!(carried.iter().any(|(_, r)| r.search.log.iter().any(|l| {
            l.contains("predicted slower, not run")
                && l.contains("and the knob effects of")
                && l.contains("earlier studies")
        })));
        // The picks stay within 1 % of the best as often, give or take one.
        let within = |r: &[(String, ReplayReport)]| {
            r.iter()
                .filter(|x| x.1.gap_pct.is_some_and(|g| g <= 1.0))
                .count()
        };
        assert!(
            within(&carried) + 1 >= within(&alone),
            "{} against {}",
            within(&carried),
            within(&alone)
        );
    }
}
