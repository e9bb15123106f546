//! The noise-aware search over a space's candidates: memory pruning, first trials steered and
//! skipped by an additive model over knob values, successive halving on trial length, ties by
//! cost order, confirmation in fresh processes.
//!
//! Pure: trials go through a [`Runner`] (a real trial launcher, or a recorded table in
//! [`super::replay`]), so the whole decision procedure runs in tests without a GPU.
//!
//! A candidate's step time is the 20 % trimmed mean of its steady samples, pooled over its
//! trials, with Yuen's 95 % CI ([`trimmed_mean_ci95`], [`STATISTIC`]): as robust to straggler
//! steps as the median, and with a narrower interval on the same iterations.
//!
//! The procedure ([`search`]):
//!
//! 1. **Predicted OOM.** With a known capacity, a candidate whose predicted peak exceeds
//!    `capacity × (1 − headroom)` is never run ([`Verdict::PredictedOom`]) when the predictions
//!    come calibrated; recalibrated on this study's peaks, a forecast prunes only when, less the
//!    study's forecast error (more the further it extrapolates beyond the largest measured
//!    peak's forecast), it still exceeds the capacity itself. Predictions not yet
//!    calibrated on measured peaks (`predictions_calibrated: false`) prune nothing up front.
//!    Before every first-rung trial the model is recalibrated on the peaks this study measured
//!    (measured ≈ a × prediction + b, least squares; an uncalibrated model needs two peaks, a
//!    slope, before it may rule anything out) and pending candidates that no longer fit are
//!    pruned. A measured candidate's prediction, as reported, is the one in force before its
//!    first trial, so the error the study tracks is a forecast error, not a fit.
//! 2. **First rung.** Candidates get a short trial of `first_iters` iterations, one at a time
//!    (or in batches of up to `parallel` concurrent trials, see below):
//!    * *Design.* Lowest memory first (a linear extension of the memory-dominance order),
//!      every candidate that widens what the additive model can tell apart: the model is
//!      `ln(step) = b₀ + Σ_knob b_knob[value]`, one parameter per knob value beyond each knob's
//!      first; a candidate widens it when its row raises the rank of the measured candidates'
//!      design (so the first trials cover every knob value once the others allow).
//!    * *Prediction.* Then the model is fit by least squares to the measured candidates' log
//!      step times, and the pending candidate it predicts fastest runs next (finding a fast
//!      candidate early sets the bar). Once the fit has `min_df` residual degrees of freedom, a
//!      pending candidate predicted slower than the reference (the measured candidate the model
//!      puts fastest) by more than `ln(1 + tolerance) + prune_sigmas · t/1.96 · σ · √(1 + h)` is
//!      never run ([`Verdict::PredictedSlower`], with the prediction, the reference and the
//!      margin in its reason): σ is the residual standard deviation (at least the typical
//!      relative standard error of a candidate's step time), t Student's 97.5 % quantile for the
//!      residual degrees of freedom, h the leverage of the difference from the reference (huge
//!      for a knob value no measured candidate has, so such a candidate always runs). A space
//!      whose candidates are no more than the model's parameters plus `min_df` (one knob, or a
//!      few candidates) is never pruned this way. The fit is redone after every trial.
//!    * *Priors from earlier studies* ([`SearchConfig::effects`], [`effects`]): with the
//!      knob effects the workspace's earlier studies measured, each pair of neighbouring knob
//!      values they determined gets a normal prior on its difference; once two candidates are
//!      measured the priors count as determined in the design, and predictions may skip
//!      candidates before the fit has `min_df` (σ from the earlier studies' pooled residual,
//!      the margin `−tolerance + prior_sigmas · σ · √(1 + h)` with the posterior leverage h).
//!      Of the most promising, those the calibrated memory forecast says fit run first.
//!    * A candidate that OOMs rules out every pending candidate that dominates it in memory
//!      ([`dominates_in_memory`]; Paddle's history pruning, extended to all knobs at once); a
//!      ruled-out candidate is never run ([`Verdict::RuledOut`]). In the design stage a
//!      candidate runs only after those it dominates; in the prediction stage a fast (often
//!      high-memory) candidate may run first, so an OOM there costs a trial it could have saved.
//!      With memory forecasts, an OOM also rules out every pending candidate the model puts
//!      above every candidate that fit and either `ORDER_SLACK` (5 %) or more above the OOM
//!      one, or at least as high on every knob with a memory trend and no more than 5 % below
//!      it: the model's order across knobs without a memory trend (CUs), not its level.
//!    * *Batches* (`parallel` > 1). The memory recalibration and the choice are made once per
//!      batch: while widening, the next pending candidates in memory order that each raise the
//!      rank given the measured ones and those already in the batch; then the `parallel` lowest
//!      predicted (after the prediction pruning). The batch's outcomes are recorded in its order;
//!      an OOM rules out pending dominators only (one in the same batch already ran and keeps its
//!      own outcome, so a batch may spend a trial a sequential search would have saved).
//! 3. **Halving.** The leader is the lowest step time. A candidate whose 95 % CI lies entirely
//!    above the leader's is out of contention. The next rung keeps the
//!    contenders among the best `1/growth` (by step time; at least two) and gives each a fresh
//!    trial `growth` times longer (capped at `max_iters`); samples are pooled across a
//!    candidate's trials (with `parallel` > 1, a rung's trials, like the confirmations, run in
//!    batches of `parallel` in the rung's order). Keeping `1/growth` (rather than a half) makes
//!    every rung cost about the same, as in standard successive halving; `growth = 2` halves.
//!    It stops when
//!    * the leader's CI is separated from every other candidate's (non-overlapping 95 % CIs),
//!    * or the tie is resolved: some candidate tied with the leader is, even in the worst case
//!      the CIs allow, at most `tolerance` (relative) slower than every tied candidate (an
//!      indifference zone: closer than that, telling them apart is not worth a trial),
//!    * or the longest trials have run (a rung capped at `max_iters` runs only if it at least
//!      doubles the trial length), or the budget (`budget_gpu_seconds`, `max_trials`) is spent.
//!
//!    When start-up dominates (a launch costs at least `launch_ratio` times a first-rung
//!    trial's iterations; [`LaunchCost`]), there are no re-launched rungs: every candidate gets one
//!    long launch (`long_min_iters`–`long_max_iters`, its iterations about `long_share` of the
//!    launch), and one measured on a short trial before that was known, still tied with the
//!    leader, gets one long launch instead. Then a tie the intervals leave unresolved gets
//!    one more launch (the *tie-break*) when the tied candidate likeliest to beat the leader by
//!    more than `tolerance` does so with probability `tie_break_p` or more (the difference of
//!    the two step times as normal, each with the standard error its interval implies): for
//!    whichever of the two has the wider interval relative to its step time, the launch that
//!    narrows their difference the most. Every launch but the leader's then *races* it
//!    ([`Job::race`], [`Race`]): the runner stops it as soon as `race_min_samples` or more
//!    steady samples put it above the leader's upper bound plus `tolerance` with 95 %
//!    confidence, out of contention, where more iterations would only say by how much.
//! 4. **Confirmation.** The provisional pick and the best others (`confirm_top` in all) get one
//!    more trial of `confirm_iters` in a fresh process, pooled, before the final verdict —
//!    unless they already ran in two or more processes (a later rung is a fresh process), which
//!    has already shown whether their level holds across launches.
//! 5. **Ties.** Candidates whose CI overlaps the leader's are ties. The cheapest in cost order
//!    (lexicographic on `ranks`, earlier knobs first) wins among the tied candidates that are
//!    within `tolerance` in the worst case; while none is (the CIs are still too wide to say),
//!    the leader wins. So a cheaper setting is preferred only when it is known not to cost more
//!    than the tolerance.
//!
//! Every decision is written to [`SearchResult::log`], one line each, for the report.

mod additive;
mod confirm;
mod cost;
pub mod effects;
mod halve;
mod ledger;
pub mod prior;
mod rung;
mod screen;
mod step;

use effects::PriorRow;

pub use cost::{LaunchCost, LaunchSource};
#[cfg(any(test, feature = "testkit"))]
pub use prior::recomputes_more;

use super::memory::Calibration;
use crate::domain::study::{Candidate, Conclusion, Knob, MemoryTrend, Outcome};
pub use crate::run::steady::Race;
use crate::util::stats::{Estimate, median, normal_cdf, t975, trimmed_mean_ci95};
pub use additive::Additive;
#[cfg(any(test, feature = "testkit"))]
pub use additive::Fit;
pub use ledger::{LaunchRecord, Phase};
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// One trial the search asks a [`Runner`] for.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    pub candidate: &'a Candidate,
    /// Iterations, warm-up included (the runner's early stop may end the trial sooner).
    pub iters: u64,
    /// Stop the trial once its steady samples are above this bar with 95 % confidence
    /// (racing; see [`SearchConfig::race_min_samples`]). `None`: no race.
    pub race: Option<Race>,
}

impl<'a> Job<'a> {
    /// A trial of `iters` iterations with no race.
    pub fn new(candidate: &'a Candidate, iters: u64) -> Self {
        Job {
            candidate,
            iters,
            race: None,
        }
    }
}

/// Runs trials of candidates.
pub trait Runner {
    /// A trial of `job.iters` iterations in a fresh process. `Outcome::step_ms` are the steady
    /// samples it measured (after its warm-up); a runner may stop early once the figure is
    /// steady, or once it lost the job's race, so it can return fewer than `iters`.
    fn run(&mut self, job: &Job) -> Outcome;

    /// A batch of trials that may run at the same time (as concurrent jobs), each as in
    /// [`Runner::run`]: one outcome per job, in the jobs' order. The search calls it only with
    /// [`SearchConfig::parallel`] above 1, with at most that many jobs. The default runs them
    /// one after the other.
    fn run_many(&mut self, jobs: &[Job]) -> Vec<Outcome> {
        jobs.iter().map(|j| self.run(j)).collect()
    }

    /// One line of the search's decision log (what it skipped and why, a race lost, a
    /// tie-break, the pick), as it is decided: each line once, in the order of
    /// [`SearchResult::log`], the lines before a launch before that launch, the rest when the
    /// search ends. The default ignores them.
    fn decided(&mut self, _line: &str) {}

    /// The user stopped the search (Ctrl-C, `x`): nothing more is launched, and the search ends
    /// with what it measured. The default never stops.
    fn stopped(&self) -> bool {
        false
    }
}

/// Why the search ended early when its runner was stopped.
const STOPPED: &str = "the sweep was stopped";

/// How the search spends trials.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchConfig {
    /// What a trial's cost is counted in, as the log says it: `GPU`(-seconds), or `CPU` for a
    /// CPU stand-in's trials.
    pub cost_unit: &'static str,
    /// Iterations of the first rung's trials (warm-up included).
    pub first_iters: u64,
    /// Each later rung's trials are this many times longer, and it keeps the best `1/growth`
    /// of the contenders (at least 2).
    pub growth: u64,
    /// Longest trial, iterations: rung lengths are capped here, and a capped rung runs only
    /// if it at least doubles the previous length (else the halving ends).
    pub max_iters: u64,
    /// Stop launching after this many trials (OOMs and failures count).
    pub max_trials: Option<usize>,
    /// Stop launching once this many GPU-seconds are spent (the trials in flight finish, so
    /// the total exceeds it by at most one trial, or with [`SearchConfig::parallel`] above 1
    /// by at most one batch: the budget is checked before a batch is launched).
    pub budget_gpu_seconds: Option<f64>,
    /// How many of the top candidates get a confirmation trial before the verdict.
    pub confirm_top: usize,
    /// Length of a confirmation trial, iterations (a fresh process checks for a shift in
    /// level, which a short trial shows; the samples are pooled with the rest).
    pub confirm_iters: u64,
    /// GPU memory, bytes; with it, predicted peaks above `capacity × (1 − headroom)` are
    /// pruned before any trial.
    pub capacity_bytes: Option<f64>,
    /// Share of the capacity kept free (0.05: predictions may use 95 %).
    pub headroom: f64,
    /// Indifference zone (relative, 0.01 = 1 %): a tie whose worst case costs at most this
    /// much needs no more trials.
    pub tolerance: f64,
    /// Skipping first trials on the additive model's prediction: a pending candidate is not
    /// run when it is predicted slower than the leader by more than the tolerance plus this
    /// many standard errors of the prediction (scaled up to Student's t for few residual
    /// degrees of freedom; see [`SearchConfig::min_df`]). `None`: every candidate gets a
    /// first trial.
    pub prune_sigmas: Option<f64>,
    /// Residual degrees of freedom the additive model needs (measured candidates beyond its
    /// parameters) before any prediction may skip a candidate.
    pub min_df: usize,
    /// The memory predictions given to [`search`] are calibrated on measured peaks (stored
    /// trials of this experiment). When not, no candidate is pruned on its prediction before
    /// this study has measured a peak to calibrate it with.
    pub predictions_calibrated: bool,
    /// How many trials may run at once (0 counts as 1). Above 1 the search launches batches
    /// through [`Runner::run_many`]: in the first rung up to this many candidates at a time
    /// (while widening the additive model, the next in memory order that each add to its rank;
    /// then the lowest predicted), later rungs and confirmations in chunks of this many. A batch
    /// never exceeds `max_trials`. 1 launches one trial at a time through [`Runner::run`].
    pub parallel: usize,
    /// Seconds a launch costs before it measures (start-up and warm-up), from earlier trials of
    /// this profile and shape in the workspace; `None`: unknown until this study measures it.
    pub launch_s_prior: Option<f64>,
    /// Launch-to-launch variation of a candidate's median step time (relative standard
    /// deviation), measured from repeated launches kept in the workspace; `None`: not measured
    /// yet (then [`LAUNCH_CV_PRIOR`] is assumed).
    pub launch_cv: Option<f64>,
    /// Start-up dominates when a launch costs at least this many times the iterations of a
    /// first-rung trial; then each candidate gets one long launch and no re-launched rungs.
    pub launch_ratio: f64,
    /// A long launch runs until its iterations cost about this share of the launch.
    pub long_share: f64,
    /// The longest long launch, iterations (the runner's early stop ends a steady one sooner).
    pub long_max_iters: u64,
    /// The shortest long launch, iterations: enough steady samples to decide on one launch.
    pub long_min_iters: u64,
    /// Priors from how training works (the `prior` module): a candidate that only adds
    /// recomputation to one that fits is not launched, nor (in one pipeline stage) one that
    /// only has a smaller batch.
    pub priors: bool,
    /// Each candidate's pipeline-parallel stages (by candidate id), as its config resolves
    /// them: the batch rule ([`prior::batch`]) holds only between candidates known to run in
    /// one stage. A candidate not listed: unknown (the rule does not apply to it).
    pub pipeline_stages: BTreeMap<usize, u64>,
    /// With one launch per candidate, a tie its launches leave unresolved gets one more launch
    /// when a tied candidate may beat the leader by more than the tolerance with at least this
    /// probability; None: never.
    pub tie_break_p: Option<f64>,
    /// With one launch per candidate, a launch stops once this many steady samples or more put
    /// it above the leader's upper bound plus the tolerance with 95 % confidence
    /// ([`Race`]); None: every launch runs to its length (or the runner's early stop).
    pub race_min_samples: Option<usize>,
    /// Knob effects carried from the workspace's earlier studies ([`effects::Effects`]):
    /// priors on the additive model's knob-value differences. With priors, two measured
    /// candidates determine the model, its predictions may skip candidates before it has
    /// residual degrees of freedom (σ from the earlier studies' residuals), and the most
    /// promising candidates the memory forecast says fit run first. `None`: no priors.
    pub effects: Option<effects::Effects>,
    /// With priors, a pending candidate is skipped when predicted slower than the reference
    /// by more than this many standard errors of the prediction (normal) less the tolerance
    /// ([`PRIOR_SIGMAS`]).
    pub prior_sigmas: f64,
    /// A layout sweep's predicted steps, by candidate id ([`prior::layout`]): they order the
    /// first rung and, fitted on the measured layouts, rule out those predicted slower beyond
    /// a margin. Empty: no layout prior.
    pub layout_prior: BTreeMap<usize, prior::layout::StepPrior>,
    /// The links' scale an earlier layout study of the workspace measured on the same node:
    /// until this study's layouts set the links' scale apart, the prior's communication is
    /// scaled by it ([`prior::layout::Fit::with_links`]). None: each study learns its own.
    pub carried_links: Option<crate::domain::study::CarriedLinks>,
}

/// How far above an out-of-memory candidate the memory model must put another before that one
/// is ruled out with it (the model's candidate-to-candidate error, not its level).
const ORDER_SLACK: f64 = 0.05;

/// The least forecast error a memory prediction is allowed before it prunes a candidate (5 %).
pub const FORECAST_SLACK: f64 = 0.05;

/// What a memory forecast's allowed error grows by per doubling beyond the study's reach (the
/// largest forecast among the candidates whose peaks it measured): a model calibrated on small
/// peaks errs more the further it extrapolates (3 %: on the synthetic suite, a calibration on
/// micro batch 1 forecast micro batch 8 8 % high and pruned the best candidate).
pub const EXTRAPOLATION_SLACK: f64 = 0.03;

/// Measured peaks of candidates with a candidate's own recompute settings and precision (float8
/// or not) before its forecast is calibrated on them alone ([`Search::calibration_of`]): two, a
/// slope's worth. (One, a ratio through a single peak, measured on the synthetic suite with
/// carried knob effects: the worst study at 120 s on seed 0 from 55.2 to 66.4 % of its grid.)
pub const SAME_SETTINGS_PEAKS: usize = 2;

/// With knob effects from earlier studies, the standard errors by which a prediction must put
/// a candidate beyond the leader to skip it (1.75). Measured on the four synthetic suites with
/// `bench-replay --carry-effects` (docs/benchmarks.md; 600 picks): 1.5 kept 561 within 1 %
/// against 570, for 1.1–1.9 points less at 120 s; 2 kept 573 for 0.9–1.5 points more.
pub const PRIOR_SIGMAS: f64 = 1.75;

/// Measured candidates before the priors determine the additive model: the level and a
/// second point, and two peaks that calibrate the memory model before the most promising
/// (often the largest) candidates run.
const PRIOR_AFTER: usize = 2;

/// How far beyond the GPU's memory the memory model (as calibrated so far) must put a
/// candidate before it counts as likely to run out of memory (10 %): the candidates the rules
/// rank below it stop waiting for it, and it goes after the other pending candidates. On the
/// H200 grids with the batch rule, 5–20 % all launched 3 OOMs against 8 when every candidate
/// held its siblings back (the uncalibrated model put those OOMs 12–165 % beyond the GPU, the
/// MoE grid's best 2 % beyond), and 2 once such a candidate also went last; 20 % moved one
/// forecast error from 3.6 to 7.3 %. On the synthetic suites without the batch rule (the
/// recompute rule alone defers) at most 0.2 point of any total.
pub const BLOCK_SLACK: f64 = 0.10;

/// Launch-to-launch variation assumed while the workspace has measured none (1 %).
pub const LAUNCH_CV_PRIOR: f64 = 0.01;

/// The tie-break's threshold: one more launch when a tied candidate beats the leader by more
/// than the tolerance with probability 0.1 or more. Measured on the four synthetic suites
/// (seeds 0, 7, 3, 11 at 0, 30 and 120 s, 600 picks; docs/benchmarks.md): 577 within 1 % against
/// 568 without, for 0.1–1.1 points of the totals; 0.05 bought no more picks for up to 0.6
/// points more, 0.15 kept 573 (0.2: 291 of the 300 picks on seeds 0 and 7, against 297).
pub const TIE_BREAK_P: f64 = 0.1;

/// Steady samples a launch needs before its race may stop it (6; see
/// [`SearchConfig::race_min_samples`]).
pub const RACE_MIN_SAMPLES: usize = 6;

/// The defaults, tuned on the replay benchmark (`primus-tune bench-replay --synthetic 100`):
/// a 6-iteration screen (4 steady samples after the 2 warm-up iterations), one rung of 18
/// iterations for the best third, 2 confirmations of 12 iterations, a 1 % indifference zone.
/// Longer ladders (6 → 18 → 54) bought no accuracy there (96 against 95 of 100 studies within
/// 1 % of the best) for 30 % more GPU-seconds. Skipping on the additive model's prediction at
/// 1.5 standard errors (`--synthetic 50`, seeds 0 and 7): 22.8 % and 21.4 % of the grid's
/// GPU-seconds against 29.3 % and 28.9 % without, the same 51 of 54 studies within 1 %; 2
/// standard errors cost about 1.4 points more, 1 saved about 2 points but lost a study.
impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            first_iters: 6,
            growth: 3,
            max_iters: 18,
            max_trials: None,
            budget_gpu_seconds: None,
            confirm_top: 2,
            confirm_iters: 12,
            capacity_bytes: None,
            headroom: 0.05,
            tolerance: 0.01,
            prune_sigmas: Some(1.5),
            min_df: 3,
            predictions_calibrated: true,
            parallel: 1,
            launch_s_prior: None,
            launch_cv: None,
            launch_ratio: 1.0,
            long_share: 0.25,
            long_max_iters: 30,
            long_min_iters: 18,
            priors: true,
            pipeline_stages: BTreeMap::new(),
            tie_break_p: Some(TIE_BREAK_P),
            race_min_samples: Some(RACE_MIN_SAMPLES),
            effects: None,
            prior_sigmas: PRIOR_SIGMAS,
            layout_prior: BTreeMap::new(),
            carried_links: None,
            cost_unit: "GPU",
        }
    }
}

/// The search's verdict on one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", content = "detail", rename_all = "kebab-case")]
pub enum Verdict {
    /// The recommendation.
    Winner,
    /// Within the noise of the leader; the winner is cheaper in cost order (or faster).
    Tie { with: usize },
    /// Slower than the winner by `pct` % of its step time, ± `ci_pct` (the two CIs' half-widths
    /// added, as % of the winner's step time).
    Slower { pct: f64, ci_pct: f64 },
    /// Ran out of memory.
    Oom,
    /// Never run: it dominates candidate `by` in memory, which ran out of memory.
    RuledOut { by: usize, reason: String },
    /// Never run: the memory model puts it over the usable capacity.
    PredictedOom { reason: String },
    /// Never run: the additive model fit to the measured candidates predicts it slower than
    /// the leader by more than the margin (a prediction, not a measurement).
    PredictedSlower { reason: String },
    /// A trial failed for another reason (crash, hang, no steady samples).
    Failed(String),
    /// Never run: the budget ended first.
    NotRun,
    /// The fastest of a search cut short before its decision rule was met (no winner).
    BestSoFar,
}

/// What was measured of one candidate, pooled over its trials.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Evidence {
    /// Steady samples pooled over all trials.
    pub n: usize,
    /// The 20 % trimmed mean of the samples ([`trimmed_mean_ci95`]): what the search ranks by.
    pub step_ms: Option<f64>,
    /// Its 95 % CI (the samples' range below 6).
    pub ci_low_ms: Option<f64>,
    pub ci_high_ms: Option<f64>,
    pub trials: usize,
    /// Iterations asked for, summed over trials (a trial that stopped early ran fewer).
    pub iters: u64,
    /// Largest peak its trials reported, of one kind: the allocator's when any trial reported
    /// one (figures of different kinds are never compared).
    pub peak_memory_bytes: Option<u64>,
    pub peak_memory_kind: Option<crate::domain::trial::MemorySource>,
    /// Trials its race stopped early (above the leader with 95 % confidence; [`Race`]).
    pub raced: usize,
}

/// What the search's step times are.
pub const STATISTIC: crate::domain::study::StepStatistic =
    crate::domain::study::StepStatistic::TrimmedMean;

/// A candidate's step time from its steady samples by [`STATISTIC`], with its 95 % CI: what
/// the search ranks by, and what a sweep's progress lines and the replay's grid baseline show.
pub fn step_estimate(samples: &[f64]) -> Option<Estimate> {
    trimmed_mean_ci95(samples)
}

/// The outcome of a search. Candidates are named by `Candidate::id`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct SearchResult {
    /// The recommendation (the baseline when the current settings are kept); `None` when no
    /// candidate produced a measurement or the search was cut short before it decided.
    pub pick: Option<usize>,
    /// What the search concluded.
    pub conclusion: Conclusion,
    /// The candidate holding the experiment's current settings, when one was given.
    pub baseline: Option<usize>,
    /// Measured candidates: the pick first, then by step time.
    pub ranking: Vec<usize>,
    /// One verdict per candidate, in the order given.
    pub verdicts: Vec<(usize, Verdict)>,
    /// Per candidate that had at least one trial.
    pub evidence: BTreeMap<usize, Evidence>,
    pub gpu_seconds: f64,
    pub trials: usize,
    /// One line per decision.
    pub log: Vec<String>,
    /// Per candidate id, the memory model's peak: for a candidate that ran, the prediction in
    /// force before its first trial (so its error is an honest forecast error); for the others,
    /// the prediction recalibrated on every measured peak of the study.
    pub predicted_bytes: BTreeMap<usize, f64>,
    /// The study's final calibration of the model (`points` 0: none).
    pub calibration: Calibration,
    /// Per candidate id that was launched: how many measured peaks of this study the
    /// calibration in force at its first launch was fit to (its forecast's footing).
    pub points_at_launch: BTreeMap<usize, usize>,
    /// Every launch in order: what it was for and what it cost (the replay's breakdown; the
    /// trials themselves are stored with their own figures).
    #[serde(skip)]
    pub launches: Vec<LaunchRecord>,
}

/// Whether `a` dominates `b` in memory: on every knob with a memory trend, `a`'s value needs
/// at least as much memory as `b`'s (`Increasing`: rank ≥; `Decreasing`: rank ≤), knobs
/// without a trend are equal, and `a ≠ b`. If `b` runs out of memory, so will `a` (when memory
/// is monotone in each knob, as the trends claim). Candidates whose `ranks` do not match the
/// knobs are never comparable.
pub fn dominates_in_memory(knobs: &[Knob], a: &Candidate, b: &Candidate) -> bool {
    a.ranks != b.ranks && needs_at_least(knobs, a, b, |ra, rb| ra == rb)
}

/// Whether `a` needs at least `b`'s memory on every knob with a memory trend (`Increasing`:
/// rank ≥; `Decreasing`: rank ≤), whatever their values of knobs without one. Unlike
/// [`dominates_in_memory`] this says nothing of the untrended knobs: the memory model's
/// forecast has to vouch for them.
pub fn at_least_on_trends(knobs: &[Knob], a: &Candidate, b: &Candidate) -> bool {
    needs_at_least(knobs, a, b, |_, _| true)
}

/// `a`'s rank against `b`'s on every knob: at least as much memory along each trend, and
/// `untrended(a's rank, b's rank)` on a knob without one. False when the ranks do not match
/// the knobs.
fn needs_at_least(
    knobs: &[Knob],
    a: &Candidate,
    b: &Candidate,
    untrended: impl Fn(usize, usize) -> bool,
) -> bool {
    a.ranks.len() == knobs.len()
        && b.ranks.len() == knobs.len()
        && knobs
            .iter()
            .zip(a.ranks.iter().zip(&b.ranks))
            .all(|(k, (&ra, &rb))| match k.memory {
                MemoryTrend::Increasing => ra >= rb,
                MemoryTrend::Decreasing => ra <= rb,
                MemoryTrend::None => untrended(ra, rb),
                MemoryTrend::Varies => ra == rb,
            })
}

/// Cost order: lexicographic on `ranks` (earlier knobs first, lower rank cheaper), then id.
pub fn cost_cmp(a: &Candidate, b: &Candidate) -> Ordering {
    a.ranks.cmp(&b.ranks).then(a.id.cmp(&b.id))
}

/// A memory level that grows along every trend: if `a` dominates `b`, `a`'s level is higher.
fn memory_level(knobs: &[Knob], c: &Candidate) -> usize {
    knobs
        .iter()
        .zip(&c.ranks)
        .map(|(k, &r)| match k.memory {
            MemoryTrend::Increasing => r,
            MemoryTrend::Decreasing => k.values.len().saturating_sub(1).saturating_sub(r),
            MemoryTrend::None | MemoryTrend::Varies => 0,
        })
        .sum()
}

/// The step-time estimate of pooled samples: the 20 % trimmed mean and its 95 % CI
/// ([`trimmed_mean_ci95`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    value: f64,
    lo: f64,
    hi: f64,
}

impl Stat {
    fn of(samples: &[f64]) -> Option<Stat> {
        let e = step_estimate(samples)?;
        Some(Stat {
            value: e.value,
            lo: e.lo,
            hi: e.hi,
        })
    }

    fn overlaps(&self, o: &Stat) -> bool {
        self.lo <= o.hi && o.lo <= self.hi
    }

    fn half(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }
}

/// Where a candidate stands during the search.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Not run yet.
    Pending,
    /// Measured, no failure.
    Measured,
    /// In a batch of trials whose outcomes are being recorded: no longer pending (an OOM in
    /// the batch does not rule it out; its own outcome decides).
    Launched,
    /// Out for good, with its final verdict.
    Out(Verdict),
}

struct Search<'a> {
    knobs: &'a [Knob],
    cands: &'a [Candidate],
    cfg: &'a SearchConfig,
    state: Vec<State>,
    samples: Vec<Vec<f64>>,
    evidence: Vec<Evidence>,
    gpu_seconds: f64,
    trials: usize,
    log: Vec<String>,
    budget_note_logged: bool,
    /// The memory model's peak per candidate, as given (calibrated on earlier stored trials).
    predicted: Vec<Option<f64>>,
    /// The prediction in force when a candidate's first trial was launched (calibrated on this
    /// study's trials so far): what its measurement is held against.
    at_launch: Vec<Option<f64>>,
    /// Measured peaks the calibration in force at a candidate's first launch was fit to.
    points_at_launch: Vec<Option<usize>>,
    /// Index of the baseline candidate (the current settings), if any.
    baseline: Option<usize>,
    /// Why the search stopped launching before its decision rule was met.
    stopped: Option<String>,
    /// What a launch costs, as measured so far.
    cost: LaunchCost,
    /// Start-up dominates: one long launch per candidate, no re-launched rungs.
    one_launch: bool,
    /// Per candidate, whether one of its trials was a long launch.
    long: Vec<bool>,
    /// Per candidate, the candidates the rules say it is not faster than: equal in every other
    /// flag, with less recomputation or (in one pipeline stage) a larger batch, or both.
    faster: Vec<Vec<(usize, prior::Because)>>,
    /// Per candidate, the class of its recompute settings and precision (equal for equal
    /// settings): the memory calibration a forecast uses ([`Search::calibration_of`]).
    settings: Vec<usize>,
    /// Log lines already handed to the runner ([`Runner::decided`]).
    said: usize,
    /// What the launches made now are for.
    phase: Phase,
    /// Every launch so far.
    launches: Vec<LaunchRecord>,
}

impl<'a> Search<'a> {
    /// The study's own calibration: measured peak ≈ a × prediction + b over the candidates
    /// that ran without running out of memory.
    fn calibration(&self) -> Calibration {
        Calibration::fit(&self.peaks(|_| true))
    }

    /// (prediction, measured peak) of the candidates that ran without running out of memory and
    /// pass `keep`.
    fn peaks(&self, keep: impl Fn(usize) -> bool) -> Vec<(f64, f64)> {
        (0..self.cands.len())
            .filter(|&i| self.state[i] == State::Measured || self.is_out_measured(i))
            .filter(|&i| keep(i))
            .filter_map(|i| {
                Some((
                    self.predicted[i]?,
                    self.evidence[i].peak_memory_bytes? as f64,
                ))
            })
            .collect()
    }

    /// The calibration a forecast for candidate `i` uses, and whether it is its settings' own:
    /// fitted on the peaks of the candidates with the same recompute settings and precision
    /// ([`prior::settings_classes`]) once [`SAME_SETTINGS_PEAKS`] of them are measured (and the
    /// study has peaks of other settings too), else `pooled` (all the study's peaks). The
    /// model's error differs from one setting to another (what is recomputed rather than kept;
    /// the caching allocator's reserve, largest with full recompute on both Megatron-LM and
    /// TorchTitan on the H200), and one line through the peaks of several settings misplaces
    /// each: on TorchTitan's Qwen3 1.7B grid, once a full-checkpointing peak 13 % above the
    /// model joined three without checkpointing, the line put local batch 8 without
    /// checkpointing 13 % too high.
    fn calibration_of(&self, pooled: &Calibration, i: usize) -> (Calibration, bool) {
        let own = self.peaks(|j| self.settings[j] == self.settings[i]);
        if own.len() >= SAME_SETTINGS_PEAKS && own.len() < pooled.points {
            (Calibration::fit(&own), true)
        } else {
            (*pooled, false)
        }
    }

    /// Ran to a verdict with a measurement (halving may have moved it out of contention).
    fn is_out_measured(&self, i: usize) -> bool {
        matches!(
            &self.state[i],
            State::Out(Verdict::Slower { .. } | Verdict::Tie { .. })
        )
    }

    /// A candidate's prediction with the study's calibration so far.
    fn calibrated(&self, cal: &Calibration, i: usize) -> Option<f64> {
        let p = self.predicted[i]?;
        let (cal, _) = self.calibration_of(cal, i);
        Some(if cal.points > 0 { cal.predict(p) } else { p })
    }

    /// Pending candidates whose prediction, recalibrated on this study's measured peaks, no
    /// longer fits: never run ([`Verdict::PredictedOom`]).
    fn prune_recalibrated(&mut self) {
        let Some(cap) = self.cfg.capacity_bytes else {
            return;
        };
        let cal = self.calibration();
        // An uncalibrated model needs a slope (two peaks) before it may rule anything out: one
        // peak only shifts it, and a model that overstates how memory grows would then prune
        // candidates that fit.
        let need = if self.cfg.predictions_calibrated {
            1
        } else {
            2
        };
        if cal.points < need {
            return;
        }
        // A forecast is only as good as the model has shown: a candidate is pruned when even a
        // forecast too high by the study's own forecast error (p90 so far, at least
        // FORECAST_SLACK, plus EXTRAPOLATION_SLACK per doubling beyond the study's reach) does
        // not fit the GPU. The headroom is not applied on top: the question
        // here is whether the trial would run out of memory, and a trial that runs measures its
        // own peak (on the H200, Megatron's fastest MoE setting ran at 97 % of the memory).
        let base = self.forecast_slack(need);
        let reach = self.forecast_reach();
        for i in 0..self.cands.len() {
            if self.state[i] != State::Pending || self.baseline == Some(i) {
                continue;
            }
            let (used, own) = self.calibration_of(&cal, i);
            let Some(p) = self.predicted[i].map(|raw| used.predict(raw)) else {
                continue;
            };
            let beyond = match (self.predicted[i], reach) {
                (Some(raw), Some(r)) if raw > r => (raw / r).log2(),
                _ => 0.0,
            };
            let slack = base + EXTRAPOLATION_SLACK * beyond;
            if p / (1.0 + slack) > cap {
                let extrapolated = if beyond > 0.0 {
                    format!(
                        " at {:.1}× the largest forecast a measured peak has checked",
                        2f64.powf(beyond)
                    )
                } else {
                    String::new()
                };
                // The figure its reason gives is the one reported for it.
                self.at_launch[i] = Some(p);
                let which = if own {
                    " with the same recompute settings and precision"
                } else {
                    ""
                };
                let reason = format!(
                    "predicted peak {:.1} GiB > the GPU's {:.1} GiB by more than the model's \
                     forecast error ({:.0} %{extrapolated}), with the model recalibrated on {} \
                     of this study{which} (measured ≈ {:.3} × model {:+.2} GiB)",
                    p / GIB,
                    cap / GIB,
                    slack * 100.0,
                    crate::util::text::count(used.points, "measured peak", "measured peaks"),
                    used.scale,
                    used.offset_bytes / GIB
                );
                self.log
                    .push(format!("{}: predicted OOM: {reason}", self.label(i)));
                self.state[i] = State::Out(Verdict::PredictedOom { reason });
            }
        }
    }

    /// Pending candidates that only add recomputation to a candidate that ran (so fits), or only
    /// have a smaller batch in one pipeline stage, or both: never launched
    /// ([`Verdict::PredictedSlower`], by the rule, not a measurement).
    fn prune_by_prior(&mut self) {
        if !self.cfg.priors {
            return;
        }
        for a in 0..self.cands.len() {
            if self.state[a] != State::Pending || self.baseline == Some(a) {
                continue;
            }
            let Some(&(b, why)) = self.faster[a]
                .iter()
                .find(|&&(b, _)| self.state[b] == State::Measured || self.is_out_measured(b))
            else {
                continue;
            };
            let id = self.cands[b].id;
            let (what, rule) = match why {
                prior::Because::Recompute => (
                    format!(
                        "recomputation adds work: #{id} has the same settings with less \
                         recomputation"
                    ),
                    "rule: the tuning guide §4, `full` recomputes more; Korthikanti et al. 2022",
                ),
                prior::Because::Batch => (
                    format!(
                        "a larger batch is not slower in one pipeline stage: #{id} has the same \
                         settings with a larger batch"
                    ),
                    "rule: the same work in fewer, larger micro steps; on every H200 grid \
                     recorded a larger batch was at most 1 % slower",
                ),
                prior::Because::Both => (
                    format!(
                        "a smaller batch and more recomputation: #{id} has the same settings \
                         with a larger batch and less recomputation"
                    ),
                    "rules: recomputation adds work, the tuning guide §4; a larger batch is not \
                     slower in one pipeline stage",
                ),
            };
            let measured = self
                .stat(b)
                .map_or_else(|| "measured".to_string(), |st| Search::fmt_stat(&st));
            let reason = format!(
                "{what} and fits (it ran, {measured}), so this one is not faster ({rule}); a \
                 prediction, not a measurement"
            );
            self.log.push(format!(
                "{}: predicted slower, not run: {reason}",
                self.label(a)
            ));
            self.state[a] = State::Out(Verdict::PredictedSlower { reason });
        }
    }

    /// Whether a pending candidate's forecast (as calibrated so far) is beyond the GPU by more
    /// than [`BLOCK_SLACK`]: it would likely run out of memory.
    fn likely_oom(&self, cal: &Calibration, b: usize) -> bool {
        self.state[b] == State::Pending
            && match (self.cfg.capacity_bytes, self.calibrated(cal, b)) {
                (Some(cap), Some(p)) => p > cap * (1.0 + BLOCK_SLACK),
                _ => false,
            }
    }

    /// Waits for a candidate the rules say it is not faster than that has not run yet: this one
    /// runs only if that one does not fit. One that would likely run out of memory
    /// (`likely_oom`, per candidate: [`Search::likely_oom`]) holds nothing back: the
    /// candidates waiting for it run first (their peaks calibrate the model, which may then
    /// rule it out); it still runs unless ruled out.
    fn deferred(&self, a: usize, likely_oom: &[bool]) -> bool {
        self.cfg.priors
            && self.faster[a].iter().any(|&(b, _)| {
                matches!(self.state[b], State::Pending | State::Launched) && !likely_oom[b]
            })
    }

    /// The length of a first-rung trial launched now: `short`, or a long launch once start-up
    /// dominates (logged when the search switches).
    fn screen_iters(&mut self, short: u64) -> u64 {
        let long = self.cost.long_iters(
            self.cfg.long_min_iters,
            self.cfg.long_max_iters,
            self.cfg.long_share,
        );
        if !self.one_launch && self.cost.dominates(short, self.cfg.launch_ratio) {
            self.one_launch = true;
            let (launch, src) = self.cost.launch().unwrap_or((0.0, LaunchSource::History));
            let src = match src {
                LaunchSource::Study { n } => format!(
                    "measured on {} of this study",
                    crate::util::text::count(n, "trial", "trials")
                ),
                LaunchSource::History => "from earlier trials in the workspace".to_string(),
            };
            let step = self.cost.step().map_or(String::new(), |st| {
                format!(" against {st:.2} s per iteration")
            });
            self.log.push(format!(
                "start-up dominates: a launch costs {launch:.1} s before it measures ({src}){step}; \
                 each candidate now gets one launch of up to {long} iterations (the early stop \
                 ends a steady one sooner) and no re-launched rungs"
            ));
        }
        if self.one_launch { long } else { short }
    }

    /// Whether launch-to-launch variation could explain the pick's lead over the runner-up
    /// (then both get a fresh launch before the verdict); the reason when it could.
    fn launch_noise(&self, d: &Decision) -> Option<String> {
        let (cv, src) = match self.cfg.launch_cv {
            Some(cv) => (cv, "as given"),
            None => (LAUNCH_CV_PRIOR, "assumed: none measured yet"),
        };
        if cv.is_nan() || cv <= 0.0 {
            return None;
        }
        let pick = self.stat(d.pick)?.value;
        let (j, next) = d.sorted.iter().find(|t| t.0 != d.pick)?;
        let lead = next.value / pick - 1.0;
        let band = 1.96 * std::f64::consts::SQRT_2 * cv;
        (lead < band).then(|| {
            format!(
                "{} leads {} by {:.2} %, within the {:.2} % that launch-to-launch variation (CV \
                 {:.2} %, {src}) allows",
                self.label(d.pick),
                self.label(*j),
                lead * 100.0,
                band * 100.0,
                cv * 100.0
            )
        })
    }

    /// The relative error a memory forecast is allowed before it prunes: the p90 of this
    /// study's forecast errors so far (forecasts made on at least `need` peaks, against the
    /// peaks then measured), at least [`FORECAST_SLACK`].
    fn forecast_slack(&self, need: usize) -> f64 {
        let mut errs: Vec<f64> = (0..self.cands.len())
            .filter(|&i| self.points_at_launch[i].is_some_and(|p| p >= need))
            .filter(|&i| self.state[i] == State::Measured || self.is_out_measured(i))
            .filter_map(|i| {
                let f = self.at_launch[i]?;
                let m = self.evidence[i].peak_memory_bytes? as f64;
                (m > 0.0).then(|| ((f - m) / m).abs())
            })
            .collect();
        errs.sort_by(f64::total_cmp);
        let p90 = errs
            .get(((0.9 * errs.len() as f64).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0.0);
        p90.max(FORECAST_SLACK)
    }

    /// The largest uncalibrated forecast among the candidates whose peak this study measured:
    /// how far the calibration has been checked. `None` before any peak.
    fn forecast_reach(&self) -> Option<f64> {
        (0..self.cands.len())
            .filter(|&c| self.state[c] == State::Measured || self.is_out_measured(c))
            .filter(|&c| self.evidence[c].peak_memory_bytes.is_some())
            .filter_map(|c| self.predicted[c])
            .filter(|p| *p > 0.0)
            .reduce(f64::max)
    }

    fn label(&self, i: usize) -> String {
        let c = &self.cands[i];
        let kv: Vec<String> = c
            .overrides
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect();
        format!("#{} ({})", c.id, kv.join(", "))
    }

    fn stat(&self, i: usize) -> Option<Stat> {
        Stat::of(&self.samples[i])
    }

    /// Whether another trial may be launched; logs the reason once when not.
    fn can_launch(&mut self) -> bool {
        let why = if self.cfg.max_trials.is_some_and(|m| self.trials >= m) {
            Some(format!("max trials reached ({})", self.trials))
        } else if self
            .cfg
            .budget_gpu_seconds
            .is_some_and(|b| self.gpu_seconds >= b)
        {
            Some(format!(
                "budget spent ({:.0} {}-s of {:.0})",
                self.gpu_seconds,
                self.cfg.cost_unit,
                self.cfg.budget_gpu_seconds.unwrap_or_default()
            ))
        } else {
            None
        };
        match why {
            None => true,
            Some(w) => {
                if !self.budget_note_logged {
                    self.log.push(format!("stop: {w}"));
                    self.budget_note_logged = true;
                }
                self.stopped.get_or_insert(w);
                false
            }
        }
    }

    /// How many trials may run at once.
    fn parallel(&self) -> usize {
        self.cfg.parallel.max(1)
    }

    /// How many of `want` trials may be launched now, as one batch: none when
    /// [`Search::can_launch`] forbids another (the budget is checked before the batch), else at
    /// most what `max_trials` leaves.
    fn room(&mut self, want: usize) -> usize {
        if !self.can_launch() {
            return 0;
        }
        self.cfg
            .max_trials
            .map_or(want, |m| want.min(m.saturating_sub(self.trials)))
    }

    /// Whether the runner was stopped: then nothing more is launched (logged once).
    fn stopped_by(&mut self, runner: &dyn Runner) -> bool {
        if !runner.stopped() {
            return false;
        }
        if self.stopped.as_deref() != Some(STOPPED) {
            self.log.push(format!("stop: {STOPPED}"));
            self.stopped = Some(STOPPED.to_string());
            self.budget_note_logged = true;
        }
        true
    }

    /// One trial of candidate `i`; `false` when the budget forbids it or the runner stopped.
    fn trial(&mut self, runner: &mut dyn Runner, i: usize, iters: u64) -> bool {
        if self.stopped_by(runner) || !self.can_launch() {
            return false;
        }
        let job = Job {
            candidate: &self.cands[i],
            iters,
            race: self.race(i),
        };
        self.say(runner);
        let out = runner.run(&job);
        self.record_raced(i, &job, out);
        true
    }

    /// The race a trial of candidate `i` runs (racing, as Optuna's pruners or irace): once
    /// one launch per candidate decides (start-up dominates), a candidate other than the
    /// leader stops as soon as its steady samples put it, with 95 % confidence, above the
    /// leader's upper bound plus the tolerance: out of contention, where more iterations would
    /// only say more precisely by how much. `None` before a leader is measured, for the leader
    /// itself, in halving (its short trials are the screen) or with `race_min_samples` off.
    fn race(&self, i: usize) -> Option<Race> {
        let min_samples = self.cfg.race_min_samples?;
        if !self.one_launch {
            return None;
        }
        let (leader, st) = *self.by_step(&self.measured()).first()?;
        (leader != i).then(|| Race {
            above_ms: st.hi * (1.0 + self.cfg.tolerance.max(0.0)),
            min_samples,
            per_samples: None,
        })
    }

    /// Hands the runner the log lines it has not had yet ([`Runner::decided`]).
    fn say(&mut self, runner: &mut dyn Runner) {
        for line in &self.log[self.said.min(self.log.len())..] {
            runner.decided(line);
        }
        self.said = self.log.len();
    }

    /// Records a trial's outcome, and says when its race ended it.
    fn record_raced(&mut self, i: usize, job: &Job, out: Outcome) {
        let lost = job.race.filter(|_| out.raced);
        let n = out.step_ms.len();
        self.record(i, job.iters, out);
        if lost.is_some() {
            self.evidence[i].raced += 1;
        }
        if let (Some(r), Some(st)) = (lost, self.stat(i)) {
            self.log.push(format!(
                "{}: stopped after {n} steady samples of the {} iterations asked: {} is above the \
                 bar {:.2} ms (the leader's upper bound + the tolerance) with 95 % confidence",
                self.label(i),
                job.iters,
                Search::fmt_stat(&st),
                r.above_ms
            ));
        }
    }

    /// One batch of trials of `iters` each, launched at once through [`Runner::run_many`]; the
    /// caller has checked [`Search::room`]. The outcomes are recorded in the batch's order.
    fn batch(&mut self, runner: &mut dyn Runner, batch: &[usize], iters: u64) {
        let cands = self.cands;
        let jobs: Vec<Job> = batch
            .iter()
            .map(|&i| Job {
                candidate: &cands[i],
                iters,
                race: self.race(i),
            })
            .collect();
        for &i in batch {
            self.state[i] = State::Launched;
        }
        self.say(runner);
        let mut outs = runner.run_many(&jobs).into_iter();
        for (&i, job) in batch.iter().zip(&jobs) {
            let out = outs.next().unwrap_or_else(|| Outcome {
                failed: Some("the runner returned no outcome for this trial".to_string()),
                ..Outcome::default()
            });
            self.record_raced(i, job, out);
        }
    }

    /// A trial of `iters` for each of `list`, in its order: one at a time, or in batches of
    /// [`Search::parallel`]. Returns the candidates launched (in order), and `false` when the
    /// budget stopped it before the end of the list.
    fn trials(
        &mut self,
        runner: &mut dyn Runner,
        list: &[usize],
        iters: u64,
    ) -> (Vec<usize>, bool) {
        let par = self.parallel();
        let mut launched = Vec::new();
        if par == 1 {
            for &i in list {
                if !self.trial(runner, i, iters) {
                    return (launched, false);
                }
                launched.push(i);
            }
            return (launched, true);
        }
        let mut rest = list;
        while !rest.is_empty() {
            if self.stopped_by(runner) {
                return (launched, false);
            }
            let k = self.room(par.min(rest.len()));
            if k == 0 {
                return (launched, false);
            }
            let (now, later) = rest.split_at(k);
            self.batch(runner, now, iters);
            launched.extend_from_slice(now);
            rest = later;
        }
        (launched, true)
    }

    /// Records the outcome of a trial of `iters` of candidate `i`.
    fn record(&mut self, i: usize, iters: u64, out: Outcome) {
        self.trials += 1;
        let spent = if out.gpu_seconds.is_finite() && out.gpu_seconds > 0.0 {
            out.gpu_seconds
        } else {
            0.0
        };
        self.gpu_seconds += spent;
        self.launches.push(LaunchRecord {
            candidate: self.cands[i].id,
            phase: self.phase,
            gpu_seconds: spent,
            oom: out.oom,
        });
        let ev = &mut self.evidence[i];
        ev.trials += 1;
        ev.iters += iters;
        if let Some(p) = out.peak_memory_bytes {
            use crate::domain::trial::MemorySource::Allocator;
            let (k, known) = (out.peak_memory_kind, ev.peak_memory_kind);
            if ev.peak_memory_bytes.is_none() || k == known {
                ev.peak_memory_bytes = Some(ev.peak_memory_bytes.map_or(p, |q| q.max(p)));
                ev.peak_memory_kind = k;
            } else if k == Some(Allocator) {
                ev.peak_memory_bytes = Some(p);
                ev.peak_memory_kind = k;
            }
        }
        if out.oom {
            self.state[i] = State::Out(Verdict::Oom);
            self.log.push(format!("{}: out of memory", self.label(i)));
            self.rule_out_dominators(i);
            self.rule_out_above(i);
            return;
        }
        if let Some(msg) = out.failed {
            self.log.push(format!("{}: failed: {msg}", self.label(i)));
            self.state[i] = State::Out(Verdict::Failed(msg));
            return;
        }
        let good: Vec<f64> = out
            .step_ms
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        if good.is_empty() {
            let msg = "no steady step times".to_string();
            self.log.push(format!("{}: failed: {msg}", self.label(i)));
            self.state[i] = State::Out(Verdict::Failed(msg));
            return;
        }
        // An iteration's cost is its wall time, not the step scaled to the reference work.
        self.cost
            .observe(out.launch_s, out.wall_step_ms.or_else(|| median(&good)));
        self.samples[i].extend(good);
        self.state[i] = State::Measured;
        if let Some(s) = self.stat(i) {
            let ev = &mut self.evidence[i];
            ev.n = self.samples[i].len();
            ev.step_ms = Some(s.value);
            ev.ci_low_ms = Some(s.lo);
            ev.ci_high_ms = Some(s.hi);
        }
    }

    /// Candidate `b` ran out of memory: every candidate that dominates it in memory and has not
    /// run successfully is ruled out (a measured one evidently fits and keeps its evidence).
    fn rule_out_dominators(&mut self, b: usize) {
        let id = self.cands[b].id;
        self.rule_out(b, "they dominate it in memory", |s, a| {
            dominates_in_memory(s.knobs, &s.cands[a], &s.cands[b])
                .then(|| format!("needs at least the memory of #{id}, which ran out of memory"))
        });
    }

    /// Candidate `b` ran out of memory: every pending candidate the memory model puts above
    /// every candidate that ran within memory is ruled out with it when either
    /// * the model puts it [`ORDER_SLACK`] or more above `b`, or
    /// * it needs at least `b`'s memory on every knob with a memory trend ([`at_least_on_trends`])
    ///   and the model does not put it [`ORDER_SLACK`] or more below `b` (a knob without a known
    ///   trend, such as the CU count, would have to lower its memory by more than the model's
    ///   candidate-to-candidate error for it to fit).
    ///
    /// Unless a candidate that ran within memory is put at least as high (then the model's order
    /// is contradicted near the limit and only dominance counts). The model's order, not its
    /// level: a calibration error shifts every forecast alike, so this holds where the forecast's
    /// slack keeps candidates near the limit in the running.
    fn rule_out_above(&mut self, b: usize) {
        let Some(fb) = self.predicted[b] else {
            return;
        };
        let fits = (0..self.cands.len())
            .filter(|&c| self.state[c] == State::Measured || self.is_out_measured(c))
            .filter_map(|c| self.predicted[c])
            .fold(f64::NEG_INFINITY, f64::max);
        let id = self.cands[b].id;
        self.rule_out(b, "the memory model puts them at or above it", |s, a| {
            let fa = s.predicted[a]?;
            if fa <= fits {
                return None;
            }
            let sizes = format!("{:.1} vs {:.1} GiB, uncalibrated", fa / GIB, fb / GIB);
            if fa >= fb * (1.0 + ORDER_SLACK) {
                Some(format!(
                    "the memory model puts it above #{id} ({sizes}), which ran out of memory, and \
                     above every candidate that fit"
                ))
            } else if fa >= fb * (1.0 - ORDER_SLACK)
                && at_least_on_trends(s.knobs, &s.cands[a], &s.cands[b])
            {
                Some(format!(
                    "it needs at least the memory of #{id}, which ran out of memory, on every knob \
                     with a memory trend, and the memory model puts it within {:.0} % of it or \
                     above ({sizes}) and above every candidate that fit",
                    ORDER_SLACK * 100.0
                ))
            } else {
                None
            }
        });
    }

    /// Rules out every pending candidate (not the current settings) `reason_of` gives a
    /// reason for, as consequences of `b`'s OOM, and logs them with `how`.
    fn rule_out(
        &mut self,
        b: usize,
        how: &str,
        reason_of: impl Fn(&Self, usize) -> Option<String>,
    ) {
        let ruled: Vec<(usize, String)> = (0..self.cands.len())
            .filter(|&a| a != b && self.state[a] == State::Pending && self.baseline != Some(a))
            .filter_map(|a| reason_of(self, a).map(|r| (a, r)))
            .collect();
        if ruled.is_empty() {
            return;
        }
        let by = self.cands[b].id;
        let names: Vec<String> = ruled
            .iter()
            .map(|(a, _)| format!("#{}", self.cands[*a].id))
            .collect();
        for (a, reason) in ruled {
            self.state[a] = State::Out(Verdict::RuledOut { by, reason });
        }
        self.log.push(format!(
            "#{by} OOM rules out {} ({how}; never run)",
            names.join(", ")
        ));
    }

    /// The measured candidates' design rows and log step estimates.
    fn model_rows(&self, model: &Additive) -> Vec<(usize, Vec<f64>, f64)> {
        self.measured()
            .into_iter()
            .filter_map(|i| {
                let x = model.x(&self.cands[i])?;
                let m = self.stat(i)?.value;
                (m > 0.0).then(|| (i, x, m.ln()))
            })
            .collect()
    }

    /// The measurement noise of a candidate's step estimate, relative (log scale): the median
    /// over measured candidates of the trimmed mean's standard error over its value. A floor
    /// for the model's residual σ, which with few degrees of freedom can come out small by
    /// chance.
    fn estimate_noise(&self) -> f64 {
        let mut v: Vec<f64> = self
            .measured()
            .into_iter()
            .filter(|&i| self.samples[i].len() >= 2)
            .filter_map(|i| {
                let e = step_estimate(&self.samples[i])?;
                (e.value > 0.0).then(|| e.se / e.value)
            })
            .collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }

    /// Fits the additive model to the measured candidates and marks every pending candidate
    /// it predicts slower than the leader by more than the margin ([`Verdict::PredictedSlower`]).
    /// Returns the fit's prediction (log ms) per pending candidate that is still pending.
    fn prune_predicted(&mut self, model: &Additive) -> Vec<(usize, f64)> {
        let rows = self.model_rows(model);
        let fit_rows: Vec<(Vec<f64>, f64)> = rows.iter().map(|r| (r.1.clone(), r.2)).collect();
        let prior = self.prior_rows(model);
        let sigma0 = self.prior_sigma();
        let Some(fit) = model.fit_with_prior(&fit_rows, &prior, sigma0) else {
            return Vec::new();
        };
        let pending: Vec<(usize, Vec<f64>)> = (0..self.cands.len())
            .filter(|&i| self.state[i] == State::Pending && self.baseline != Some(i))
            .filter_map(|i| model.x(&self.cands[i]).map(|x| (i, x)))
            .collect();
        let preds: Vec<(usize, f64)> = pending.iter().map(|(i, x)| (*i, fit.predict(x))).collect();
        let Some(z) = self.cfg.prune_sigmas.filter(|z| z.is_finite() && *z >= 0.0) else {
            return preds;
        };
        let with_prior = !prior.is_empty();
        let has_df = fit.df >= self.cfg.min_df.max(1);
        if !has_df && !with_prior {
            return preds;
        }
        // The reference: the measured candidate the model puts fastest.
        let Some((ref_i, ref_x, ref_pred)) = rows
            .iter()
            .map(|(i, x, _)| (*i, x.clone(), fit.predict(x)))
            .min_by(|a, b| a.2.total_cmp(&b.2))
        else {
            return preds;
        };
        // With priors the σ is the earlier studies' residual (or this study's own once it has
        // the degrees of freedom, whichever is larger), and the quantile the normal's.
        let (sigma, mult) = match (with_prior, has_df) {
            (true, true) => (fit.s.max(sigma0), self.cfg.prior_sigmas),
            (true, false) => (sigma0, self.cfg.prior_sigmas),
            _ => (fit.s.max(self.estimate_noise()), z * t975(fit.df) / 1.96),
        };
        let basis = match &self.cfg.effects {
            Some(e) if with_prior => format!(
                "by the additive model over {} measured candidates and the knob effects of {}",
                rows.len(),
                e.earlier()
            ),
            _ => format!(
                "by the additive model over {} measured candidates",
                rows.len()
            ),
        };
        let tol = (1.0 + self.cfg.tolerance.max(0.0)).ln();
        let mut kept = Vec::new();
        let mut pruned = Vec::new();
        for ((i, x), (_, pred)) in pending.iter().zip(&preds) {
            let d: Vec<f64> = x.iter().zip(&ref_x).map(|(a, b)| a - b).collect();
            // A launch that costs little next to its start-up is still a launch: once start-up
            // dominates, a candidate runs only if it may beat the reference by more than the
            // tolerance (the reference is within the tolerance of anything closer).
            let tol = if self.one_launch { -tol } else { tol };
            let margin = tol + mult * sigma * (1.0 + fit.leverage(&d)).sqrt();
            if pred - ref_pred > margin {
                let reason = format!(
                    "predicted {:.1} ms, {:.1} % slower than #{} (predicted {:.1} ms, measured \
                     {:.1} ms) {basis} (residual σ {:.1} %); the margin is {:.1} %",
                    pred.exp(),
                    ((pred - ref_pred).exp() - 1.0) * 100.0,
                    self.cands[ref_i].id,
                    ref_pred.exp(),
                    self.stat(ref_i).map_or(f64::NAN, |s| s.value),
                    sigma * 100.0,
                    (margin.exp() - 1.0) * 100.0
                );
                self.log.push(format!(
                    "{}: predicted slower, not run: {reason}",
                    self.label(*i)
                ));
                self.state[*i] = State::Out(Verdict::PredictedSlower { reason });
                pruned.push(*i);
            } else {
                kept.push((*i, *pred));
            }
        }
        kept
    }

    /// The priors carried from earlier studies (none without [`SearchConfig::effects`]).
    fn prior_rows(&self, model: &Additive) -> Vec<PriorRow> {
        self.cfg
            .effects
            .as_ref()
            .map(|e| e.rows(self.knobs, self.cands, model))
            .unwrap_or_default()
    }

    /// The σ the priors are weighed against: the larger of the earlier studies' residual σ
    /// and this study's measurement noise (at least 0.5 %).
    fn prior_sigma(&self) -> f64 {
        let e = self.cfg.effects.as_ref().and_then(|e| e.sigma());
        e.unwrap_or(0.0).max(self.estimate_noise()).max(0.005)
    }

    /// What the design has determined: the measured candidates' rows, and once
    /// [`PRIOR_AFTER`] are measured, the contrasts the priors determine.
    fn design_rows(&self, model: &Additive) -> Vec<Vec<f64>> {
        let mut rows: Vec<Vec<f64>> = self.model_rows(model).into_iter().map(|r| r.1).collect();
        if rows.len() >= PRIOR_AFTER {
            rows.extend(self.prior_rows(model).into_iter().map(|r| r.x));
        }
        rows
    }

    /// Predictions, the most promising first (lowest predicted step). With priors the model is
    /// determined before the memory model has seen a peak near the capacity, so once two peaks
    /// calibrate it, the candidates it forecasts to fit come first.
    fn promising(&self, model: &Additive, mut preds: Vec<(usize, f64)>) -> Vec<(usize, f64)> {
        preds.sort_by(|a, b| a.1.total_cmp(&b.1));
        let cal = self.calibration();
        if cal.points >= 2
            && !self.prior_rows(model).is_empty()
            && let Some(cap) = self.cfg.capacity_bytes
        {
            let usable = cap * (1.0 - self.cfg.headroom.clamp(0.0, 1.0));
            let fits: Vec<bool> = (0..self.cands.len())
                .map(|i| self.calibrated(&cal, i).is_none_or(|f| f <= usable))
                .collect();
            // A stable sort: by prediction within each group.
            preds.sort_by_key(|t| !fits[t.0]);
        }
        preds
    }

    fn measured(&self) -> Vec<usize> {
        (0..self.cands.len())
            .filter(|&i| self.state[i] == State::Measured)
            .collect()
    }

    /// Sort measured candidates by step time (then cost order).
    fn by_step(&self, set: &[usize]) -> Vec<(usize, Stat)> {
        let mut v: Vec<(usize, Stat)> = set
            .iter()
            .filter(|&&i| self.state[i] == State::Measured)
            .filter_map(|&i| self.stat(i).map(|s| (i, s)))
            .collect();
        v.sort_by(|a, b| {
            a.1.value
                .total_cmp(&b.1.value)
                .then_with(|| cost_cmp(&self.cands[a.0], &self.cands[b.0]))
        });
        v
    }

    /// Leader, candidates tied with it (leader included, by step time), the tie rule's pick.
    ///
    /// A tied candidate is *eligible* when choosing it costs at most `tolerance` in the worst
    /// case: its CI's upper bound is within `tolerance × leader's step time` of the lowest CI bound
    /// among the tied. The pick is the cheapest eligible candidate in cost order; with none
    /// eligible (the tie is not resolved yet), the leader.
    fn decide(&self, set: &[usize]) -> Option<Decision> {
        let sorted = self.by_step(set);
        let &(leader, ls) = sorted.first()?;
        let tied: Vec<(usize, Stat)> = sorted
            .iter()
            .copied()
            .filter(|(_, s)| s.overlaps(&ls))
            .collect();
        let best_lo = tied.iter().map(|t| t.1.lo).fold(f64::INFINITY, f64::min);
        let loss = |s: &Stat| (s.hi - best_lo) / ls.value;
        let eligible: Vec<usize> = tied
            .iter()
            .filter(|t| loss(&t.1) <= self.cfg.tolerance)
            .map(|t| t.0)
            .collect();
        // The current settings are kept when they are within the tolerance; else the cheapest.
        let pick = match self.baseline.filter(|b| eligible.contains(b)) {
            Some(b) => b,
            None => eligible
                .iter()
                .copied()
                .min_by(|&a, &b| cost_cmp(&self.cands[a], &self.cands[b]))
                .unwrap_or(leader),
        };
        let pick_loss = tied
            .iter()
            .find(|t| t.0 == pick)
            .map_or(f64::INFINITY, |t| loss(&t.1));
        Some(Decision {
            sorted,
            leader,
            tied,
            pick,
            resolved: !eligible.is_empty(),
            pick_loss,
        })
    }

    /// The tied candidate likeliest to be faster than the leader by more than the tolerance,
    /// its step time, and that probability: the difference of the two step times as normal,
    /// each with the standard error its 95 % interval implies (half-width / 1.96).
    fn challenger(&self, d: &Decision) -> Option<(usize, Stat, f64)> {
        let ls = d.sorted.first()?.1;
        let se = |x: &Stat| x.half() / 1.96;
        d.tied
            .iter()
            .filter(|t| t.0 != d.leader)
            .map(|&(i, x)| {
                let margin = ls.value - x.value - self.cfg.tolerance * ls.value;
                let sd = se(&ls).hypot(se(&x));
                let p = if sd > 0.0 {
                    normal_cdf(margin / sd)
                } else if margin > 0.0 {
                    1.0
                } else {
                    0.0
                };
                (i, x, p)
            })
            .max_by(|a, b| a.2.total_cmp(&b.2))
    }

    /// Logs what a stage cost: the GPU-seconds since `since`, and the total.
    fn note_spent(&mut self, stage: &str, since: f64) {
        let u = self.cfg.cost_unit;
        self.log.push(format!(
            "{stage} spent {:.1} {u}-s (total {:.1} {u}-s, {} trials)",
            self.gpu_seconds - since,
            self.gpu_seconds,
            self.trials
        ));
    }

    /// The first rung's launches by what they were for (the design, then the promising ones).
    fn note_phases(&mut self) {
        let of = |p: Phase| {
            self.launches
                .iter()
                .filter(|l| l.phase == p)
                .fold((0, 0.0), |(n, g), l| (n + 1, g + l.gpu_seconds))
        };
        let ((dn, dg), (pn, pg)) = (of(Phase::Design), of(Phase::Promising));
        if pn > 0 {
            let u = self.cfg.cost_unit;
            self.log.push(format!(
                "rung 1: {} for the design ({dg:.1} {u}-s: what the model needs to \
                 place every candidate), {pn} for the most promising candidates after it \
                 ({pg:.1} {u}-s)",
                crate::util::text::count(dn, "launch", "launches")
            ));
        }
    }

    fn fmt_stat(s: &Stat) -> String {
        format!("{:.2} ms [{:.2}, {:.2}]", s.value, s.lo, s.hi)
    }
}

struct Decision {
    sorted: Vec<(usize, Stat)>,
    leader: usize,
    tied: Vec<(usize, Stat)>,
    pick: usize,
    /// Some tied candidate is within the tolerance in the worst case.
    resolved: bool,
    /// The pick's worst-case loss (relative to the leader's step time).
    pick_loss: f64,
}

/// A search of `cands` not started: every candidate pending, the memory model's predictions
/// taken (finite ones only).
fn start<'a>(
    knobs: &'a [Knob],
    cands: &'a [Candidate],
    cfg: &'a SearchConfig,
    predicted_bytes: &dyn Fn(&Candidate) -> Option<f64>,
) -> Search<'a> {
    let n = cands.len();
    Search {
        knobs,
        cands,
        cfg,
        state: vec![State::Pending; n],
        samples: vec![Vec::new(); n],
        evidence: vec![Evidence::default(); n],
        gpu_seconds: 0.0,
        trials: 0,
        log: Vec::new(),
        budget_note_logged: false,
        predicted: cands
            .iter()
            .map(|c| predicted_bytes(c).filter(|p| p.is_finite()))
            .collect(),
        at_launch: vec![None; n],
        points_at_launch: vec![None; n],
        baseline: cands.iter().position(|c| c.baseline),
        stopped: None,
        cost: LaunchCost::new(cfg.launch_s_prior),
        one_launch: false,
        long: vec![false; n],
        faster: prior::faster_siblings(cands, &|c: &Candidate| {
            cfg.pipeline_stages.get(&c.id) == Some(&1)
        }),
        settings: prior::settings_classes(cands),
        said: 0,
        phase: Phase::Design,
        launches: Vec::new(),
    }
}

/// The log's first lines: what the study starts from (launch cost, launch-to-launch variation)
/// and how many trials run at once.
fn note_start(s: &mut Search<'_>) {
    let cfg = s.cfg;
    if let Some(l) = cfg.launch_s_prior {
        s.log.push(format!(
            "launch cost before this study: {l:.1} s to the first steady sample (earlier trials in \
             the workspace)"
        ));
    }
    if let Some(cv) = cfg.launch_cv {
        s.log.push(format!(
            "launch-to-launch variation of the median step before this study: CV {:.2} %",
            cv * 100.0
        ));
    }
    let par = s.parallel();
    if par > 1 {
        s.log.push(format!(
            "up to {par} trials at once: each rung's trials are launched in batches of concurrent \
             jobs"
        ));
    }
}

/// What the phases of a search hand on to one another.
struct Flow {
    /// The current rung's trial length (iterations).
    iters: u64,
    max_iters: u64,
    growth: u64,
    /// The budget ran out, or the search was stopped.
    exhausted: bool,
    /// The candidates still in contention.
    contenders: Vec<usize>,
}

/// Runs the search. `knobs` are the space's knobs (their order and memory trends define cost
/// order and dominance); `predicted_bytes` is the memory model's peak for a candidate (`None`:
/// no prediction). See the module docs for the procedure.
pub fn search(
    knobs: &[Knob],
    cands: &[Candidate],
    runner: &mut dyn Runner,
    cfg: &SearchConfig,
    predicted_bytes: &dyn Fn(&Candidate) -> Option<f64>,
) -> SearchResult {
    let mut s = start(knobs, cands, cfg, predicted_bytes);
    note_start(&mut s);
    let max_iters = cfg.max_iters.max(1);
    let mut f = Flow {
        iters: cfg.first_iters.clamp(1, max_iters),
        max_iters,
        growth: cfg.growth.max(2),
        exhausted: false,
        contenders: Vec::new(),
    };
    // The phases in order, each a step function driven here (step.rs): each reads what the
    // ones before it left in `s` and `f`, and only the driver talks to the runner.
    screen::predicted_oom(&mut s);
    step::drive(&mut s, runner, &mut f, &mut rung::First::default());
    f.contenders = s.measured();
    step::drive(&mut s, runner, &mut f, &mut halve::LongLaunches::default());
    step::drive(&mut s, runner, &mut f, &mut halve::TieBreak::default());
    step::drive(&mut s, runner, &mut f, &mut halve::Rungs::default());
    step::drive(&mut s, runner, &mut f, &mut confirm::Confirm::default());
    // Verdicts.
    let said = s.said;
    let r = finish(s, &f.contenders, f.exhausted);
    for line in r.log.iter().skip(said) {
        runner.decided(line);
    }
    r
}

/// The first rung's next batch of up to `par` candidates (`pending`: in memory order): while
/// some pending candidate widens the additive model, the next ones in memory order that each
/// raise the design's rank given the measured candidates and those already picked; once none
/// does (`saturated`), the `par` lowest predicted after [`Search::prune_predicted`] (the first
/// pending ones when nothing can be predicted). `None` when nothing is left to run.
fn first_batch(
    s: &mut Search<'_>,
    model: &Additive,
    pending: &[usize],
    saturated: &mut bool,
    par: usize,
) -> Option<Vec<usize>> {
    let cands = s.cands;
    if !*saturated {
        let mut rows = s.design_rows(model);
        let mut rank = model.rank(&rows);
        let mut batch = Vec::new();
        for &i in pending {
            if batch.len() >= par {
                break;
            }
            match model.x(&cands[i]) {
                // Ranks that do not fit the knobs: the model cannot place it, so it runs.
                None => batch.push(i),
                Some(x) => {
                    rows.push(x);
                    let r = model.rank(&rows);
                    if r > rank {
                        rank = r;
                        batch.push(i);
                    } else {
                        rows.pop();
                    }
                }
            }
        }
        *saturated = batch.is_empty();
        if !batch.is_empty() {
            return Some(batch);
        }
    }
    let preds = s.prune_predicted(model);
    let pending: Vec<usize> = pending
        .iter()
        .copied()
        .filter(|&i| s.state[i] == State::Pending)
        .collect();
    if pending.is_empty() {
        return None;
    }
    // The most promising first (a stable sort: on a tie, the order the sequential search picks).
    let preds = s.promising(model, preds);
    let batch: Vec<usize> = if preds.is_empty() {
        pending.into_iter().take(par).collect()
    } else {
        preds.into_iter().take(par).map(|t| t.0).collect()
    };
    Some(batch)
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A measured candidate (`st`) against the chosen one (`ps`, id `chosen`) and the leader (`ls`).
/// A difference inside its interval is no difference: overlapping either CI, a faster step time
/// that was not a final contender (dropped earlier on fewer samples), or a gap no larger than
/// the two half-widths added is a tie; only the rest is slower.
fn against(st: &Stat, ls: &Stat, ps: &Stat, chosen: usize) -> Verdict {
    let pct = (st.value / ps.value - 1.0) * 100.0;
    let ci_pct = (st.half() + ps.half()) / ps.value * 100.0;
    if st.overlaps(ls) || st.overlaps(ps) || st.value < ps.value || pct <= ci_pct {
        Verdict::Tie { with: chosen }
    } else {
        Verdict::Slower { pct, ci_pct }
    }
}

fn finish(s: Search<'_>, contenders: &[usize], exhausted: bool) -> SearchResult {
    let mut contenders = contenders.to_vec();
    if contenders.is_empty() {
        // Every contender failed late: fall back to everything measured.
        contenders = s.measured();
    }
    // The current settings, when measured, are always held against the leader.
    if let Some(b) = s.baseline
        && s.state[b] == State::Measured
        && !contenders.contains(&b)
    {
        contenders.push(b);
    }
    let decision = s.decide(&contenders);
    let mut log = s.log.clone();
    let n = s.cands.len();
    let mut verdicts: Vec<Verdict> = s
        .state
        .iter()
        .map(|st| match st {
            State::Out(v) => v.clone(),
            State::Pending | State::Launched | State::Measured => Verdict::NotRun,
        })
        .collect();
    let mut ranking = Vec::new();
    let (conclusion, pick) = match &decision {
        None if exhausted => (
            Conclusion::Incomplete {
                best_so_far: None,
                why: s.why_cut(),
            },
            None,
        ),
        None => (Conclusion::NothingMeasured, None),
        Some(d) => {
            ranking = s.rank(d, exhausted, &mut verdicts);
            s.conclude(d, exhausted, &mut log)
        }
    };
    if decision.is_none() {
        log.push(if exhausted && s.stopped.as_deref() == Some(STOPPED) {
            "stopped before any candidate was measured".to_string()
        } else if exhausted {
            format!("incomplete ({}): nothing measured, no pick", s.why_cut())
        } else {
            "pick: none (no candidate was measured)".to_string()
        });
    }
    let evidence = (0..n)
        .filter(|&i| s.evidence[i].trials > 0)
        .map(|i| (s.cands[i].id, s.evidence[i].clone()))
        .collect();
    let calibration = s.calibration();
    SearchResult {
        predicted_bytes: s.predictions(&calibration),
        points_at_launch: (0..n)
            .filter_map(|i| Some((s.cands[i].id, s.points_at_launch[i]?)))
            .collect(),
        calibration,
        pick,
        conclusion,
        baseline: s.baseline.map(|b| s.cands[b].id),
        ranking,
        verdicts: s
            .cands
            .iter()
            .zip(verdicts)
            .map(|(c, v)| (c.id, v))
            .collect(),
        evidence,
        gpu_seconds: s.gpu_seconds,
        trials: s.trials,
        log,
        launches: s.launches,
    }
}

impl Search<'_> {
    /// Why the search ended before a decision: what stopped it, else the budget.
    fn why_cut(&self) -> String {
        self.stopped
            .clone()
            .unwrap_or_else(|| "the budget ended".to_string())
    }

    /// The candidate the decision settles on: the current settings while they are tied with
    /// the fastest (`Some` in the first place), else the decision's pick.
    fn chosen(&self, d: &Decision) -> (Option<usize>, usize) {
        let keep = self.baseline.filter(|b| d.tied.iter().any(|t| t.0 == *b));
        (keep, keep.unwrap_or(d.pick))
    }

    /// The ranking (the chosen candidate first, then the rest by step time) and each measured
    /// candidate's verdict against the chosen one and the leader.
    fn rank(&self, d: &Decision, exhausted: bool, verdicts: &mut [Verdict]) -> Vec<usize> {
        let ls = d.sorted[0].1;
        let (_, chosen) = self.chosen(d);
        let ps = self.stat(chosen).unwrap_or(ls);
        let id = |i: usize| self.cands[i].id;
        let mut ranking = vec![id(chosen)];
        for (i, st) in self.by_step(&self.measured()) {
            if i == chosen {
                verdicts[i] = if exhausted {
                    Verdict::BestSoFar
                } else {
                    Verdict::Winner
                };
                continue;
            }
            ranking.push(id(i));
            verdicts[i] = against(&st, &ls, &ps, id(chosen));
        }
        ranking
    }

    /// The conclusion of a decision and the pick (None while incomplete), with its log line.
    fn conclude(
        &self,
        d: &Decision,
        exhausted: bool,
        log: &mut Vec<String>,
    ) -> (Conclusion, Option<usize>) {
        let ls = d.sorted[0].1;
        let (keep, chosen) = self.chosen(d);
        let ps = self.stat(chosen).unwrap_or(ls);
        let id = |i: usize| self.cands[i].id;
        if exhausted {
            log.push(if self.stopped.as_deref() == Some(STOPPED) {
                format!(
                    "stopped: best so far {} {} (not confirmed)",
                    self.label(chosen),
                    Search::fmt_stat(&ps)
                )
            } else {
                format!(
                    "incomplete ({}): best so far {} {}; no winner: the decision rule was not met",
                    self.why_cut(),
                    self.label(chosen),
                    Search::fmt_stat(&ps)
                )
            });
            let c = Conclusion::Incomplete {
                best_so_far: Some(id(chosen)),
                why: self.why_cut(),
            };
            return (c, None);
        }
        if let Some(b) = keep {
            log.push(if b == d.leader {
                format!(
                    "keep current: {} {} is the fastest",
                    self.label(b),
                    Search::fmt_stat(&ps)
                )
            } else {
                format!(
                    "no significant winner: keep current {} {}; the fastest, {} {}, is \
                     within its noise",
                    self.label(b),
                    Search::fmt_stat(&ps),
                    self.label(d.leader),
                    Search::fmt_stat(&ls)
                )
            });
            let c = Conclusion::KeepCurrent {
                baseline: id(b),
                fastest: id(d.leader),
            };
            return (c, Some(id(b)));
        }
        log.push(if chosen == d.leader {
            format!("pick: {} {}", self.label(chosen), Search::fmt_stat(&ps))
        } else {
            format!(
                "pick: {} {}: tied with the fastest, {} {}, and cheaper in cost order",
                self.label(chosen),
                Search::fmt_stat(&ps),
                self.label(d.leader),
                Search::fmt_stat(&ls)
            )
        });
        (Conclusion::Change { pick: id(chosen) }, Some(id(chosen)))
    }

    /// One prediction per candidate: the one its verdict was taken on (at its first trial, or
    /// when it was pruned), else the study's final calibration.
    fn predictions(&self, calibration: &Calibration) -> BTreeMap<usize, f64> {
        (0..self.cands.len())
            .filter_map(|i| {
                let p = if self.evidence[i].trials > 0 || self.at_launch[i].is_some() {
                    self.at_launch[i]
                } else {
                    self.calibrated(calibration, i)
                };
                Some((self.cands[i].id, p?))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
