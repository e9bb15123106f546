//! `primus-tune bench-replay TABLE.json… [--synthetic N [--seed S]] [--json]`: the search replayed against
//! recorded studies, compared with the exhaustive grid of fixed 50-iteration trials.

use super::{CliError, display_path, print_json};
use crate::domain::study::Overrides;
use crate::tune::replay::{
    Carry, CostRatios, FORECAST_AFTER_PEAKS, Phases, ReplayReport, ReplayTable, replay_all,
    synthetic_suite,
};
use crate::tune::search::SearchConfig;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// The benchmark's goal: within this gap of the best (%) ...
const GOAL_GAP_PCT: f64 = 1.0;
/// ... at no more than this share of the grid's GPU-seconds.
const GOAL_RATIO: f64 = 0.25;

#[derive(Debug, Args)]
pub struct BenchReplayArgs {
    /// Recorded studies: {"capacity_bytes": N, "candidates": [{"overrides": {flag: value},
    /// "per_iter_ms": [...], "peak_memory_bytes": N, "oom": bool, "startup_s": S}]}.
    pub table: Vec<PathBuf>,
    /// Print JSON: one study's report as an object ({pick, gpu_seconds, best, gap_pct,
    /// grid_pick, grid_gpu_seconds, ...}); several as {"studies": [...], "summary": {...}}.
    #[arg(long)]
    pub json: bool,
    /// Also replay N synthetic studies with a known optimum.
    #[arg(long, value_name = "N")]
    pub synthetic: Option<usize>,
    /// Also replay N synthetic layout studies: the parallel layouts of a dense 8B, a dense 70B
    /// and an MoE model on 8, 16 and 32 GPUs, each with the layout prior's prediction and a
    /// true step of the prior's form with other speeds and its own error.
    #[arg(long, value_name = "N")]
    pub synthetic_layouts: Option<usize>,
    /// Seconds from launch to the first iteration in every trial of the synthetic studies.
    #[arg(long, value_name = "S", default_value_t = 0.0)]
    pub startup_s: f64,
    /// Print every study's decision log (with --json: also "log" and "verdicts").
    #[arg(long)]
    pub verbose: bool,
    /// The search's first-rung trial length, iterations (default 6).
    #[arg(long, value_name = "N")]
    pub first_iters: Option<u64>,
    /// Trial-length growth per rung (default 3).
    #[arg(long, value_name = "N")]
    pub growth: Option<u64>,
    /// Longest trial, iterations (default 18).
    #[arg(long, value_name = "N")]
    pub max_iters: Option<u64>,
    /// Candidates confirmed in fresh processes (default 2).
    #[arg(long, value_name = "N")]
    pub confirm_top: Option<usize>,
    /// Length of a confirmation trial, iterations (default 12).
    #[arg(long, value_name = "N")]
    pub confirm_iters: Option<u64>,
    /// Indifference zone for ties, % (default 1).
    #[arg(long, value_name = "PCT")]
    pub tolerance_pct: Option<f64>,
    /// Standard errors beyond the tolerance by which the additive model must predict a
    /// candidate slower than the leader to skip its first trial (default 1.5).
    #[arg(long, value_name = "Z", conflicts_with = "no_prune")]
    pub prune_sigmas: Option<f64>,
    /// Give every candidate a first trial (no skipping on the additive model's prediction or
    /// on the recompute and batch rules).
    #[arg(long)]
    pub no_prune: bool,
    /// Replay every study as a job of N pipeline-parallel stages, whatever it records (the
    /// synthetic studies record none): at 1 the batch rule applies (a smaller batch is not
    /// faster in one stage), above 1 it does not. The recorded times stay as they are: this
    /// shows what the search would do, not what the job would measure
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pipeline_stages: Option<u64>,
    /// With one launch per candidate, one more launch for an unresolved tie when a tied
    /// candidate may beat the leader by more than the tolerance with at least this probability
    /// (default 0.1; above 1: never).
    #[arg(long, value_name = "P")]
    pub tie_break_p: Option<f64>,
    /// With one launch per candidate, let every launch run its length: no race (by default a
    /// launch stops once 6 or more steady samples put it above the leader's upper bound plus
    /// the tolerance with 95 % confidence).
    #[arg(long)]
    pub no_race: bool,
    /// Carry the knob effects each study measured to the studies after it, as a sweep
    /// carries those of the workspace's earlier studies: priors on the additive model's
    /// knob-value differences once 3 studies measured a pair (the studies run in order)
    #[arg(long)]
    pub carry_effects: bool,
    /// With --synthetic-layouts: the studies of one world run on one machine, whose links'
    /// speed they share (each study still draws its own compute and host speeds), so a link
    /// scale one measures is true of the next
    #[arg(long)]
    pub shared_links: bool,
    /// Carry the link scale each layout study measured to the later studies of the same
    /// machine, as a sweep carries the latest one of the workspace on the same node (with
    /// --shared-links for the synthetic layout studies)
    #[arg(long)]
    pub carry_links: bool,
    /// With --carry-effects: standard errors by which a prediction that leans on the carried
    /// effects must put a candidate beyond the leader to skip it (default 1.75)
    #[arg(long, value_name = "Z", requires = "carry_effects")]
    pub prior_sigmas: Option<f64>,
    /// Write TABLE back to standard output with the memory model's peak for every candidate
    /// (`predicted_bytes`): the experiment EXP with the --annotate-set values and the
    /// candidate's overrides, on --annotate-gpus GPUs (how a recorded grid gets the forecasts
    /// the replay checks). Nothing is replayed.
    #[arg(long, value_name = "EXP")]
    pub annotate_memory: Option<PathBuf>,
    /// A `--set KEY=VALUE` the recorded grid ran with (repeatable; with --annotate-memory).
    #[arg(long, value_name = "KEY=VALUE", requires = "annotate_memory")]
    pub annotate_set: Vec<String>,
    /// GPUs the recorded grid ran on (with --annotate-memory; default 1).
    #[arg(
        long,
        value_name = "N",
        requires = "annotate_memory",
        default_value_t = 1
    )]
    pub annotate_gpus: u64,
    /// Seed of the synthetic studies (0, the default, is the documented suite; another seed
    /// draws other studies of the same sizes and noise levels).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
}

impl BenchReplayArgs {
    /// The search configuration: the defaults with this command's changes.
    fn config(&self) -> Result<SearchConfig, CliError> {
        let d = SearchConfig::default();
        let cfg = SearchConfig {
            first_iters: self.first_iters.unwrap_or(d.first_iters),
            growth: self.growth.unwrap_or(d.growth),
            max_iters: self.max_iters.unwrap_or(d.max_iters),
            confirm_top: self.confirm_top.unwrap_or(d.confirm_top),
            confirm_iters: self.confirm_iters.unwrap_or(d.confirm_iters),
            tolerance: self.tolerance_pct.map_or(d.tolerance, |p| p / 100.0),
            priors: !self.no_prune,
            prune_sigmas: if self.no_prune {
                None
            } else {
                self.prune_sigmas.or(d.prune_sigmas)
            },
            tie_break_p: match self.tie_break_p {
                Some(p) if p > 1.0 => None,
                Some(p) => Some(p),
                None => d.tie_break_p,
            },
            race_min_samples: if self.no_race {
                None
            } else {
                d.race_min_samples
            },
            prior_sigmas: self.prior_sigmas.unwrap_or(d.prior_sigmas),
            ..d
        };
        if !(cfg.prior_sigmas.is_finite() && cfg.prior_sigmas >= 0.0) {
            return Err(CliError::Usage(
                "--prior-sigmas must be a non-negative number".into(),
            ));
        }
        if self
            .tie_break_p
            .is_some_and(|p| !(p.is_finite() && p >= 0.0))
        {
            return Err(CliError::Usage(
                "--tie-break-p must be a probability (above 1: never)".into(),
            ));
        }
        if cfg
            .prune_sigmas
            .is_some_and(|z| !(z.is_finite() && z >= 0.0))
        {
            return Err(CliError::Usage(
                "--prune-sigmas must be a non-negative number".into(),
            ));
        }
        if cfg.first_iters < 3 || cfg.growth < 2 || cfg.max_iters < cfg.first_iters {
            return Err(CliError::Usage(
                "need --first-iters >= 3, --growth >= 2 and --max-iters >= --first-iters".into(),
            ));
        }
        if !(cfg.tolerance.is_finite() && cfg.tolerance >= 0.0) {
            return Err(CliError::Usage(
                "--tolerance-pct must be a non-negative number".into(),
            ));
        }
        Ok(cfg)
    }
}

pub fn run(a: &BenchReplayArgs) -> Result<ExitCode, CliError> {
    if a.table.is_empty() && a.synthetic.unwrap_or(0) == 0 && a.synthetic_layouts.unwrap_or(0) == 0
    {
        return Err(CliError::Usage(
            "bench-replay needs a TABLE.json, --synthetic N or --synthetic-layouts N".into(),
        ));
    }
    if !(a.startup_s.is_finite() && a.startup_s >= 0.0) {
        return Err(CliError::Usage(format!(
            "--startup-s {} is not a duration",
            a.startup_s
        )));
    }
    if let Some(exp) = &a.annotate_memory {
        return annotate(a, exp);
    }
    let mut studies: Vec<(String, ReplayTable)> = Vec::new();
    for p in &a.table {
        let name = display_path(p);
        let text = read_table(p)?;
        let t = ReplayTable::from_json(&text).map_err(|e| CliError::input(p, e))?;
        studies.push((name, t));
    }
    studies.extend(synthetic_suite(
        a.synthetic.unwrap_or(0),
        a.startup_s,
        a.seed,
    ));
    studies.extend(crate::tune::replay::layouts::synthetic_layout_suite(
        a.synthetic_layouts.unwrap_or(0),
        a.startup_s,
        a.seed,
        a.shared_links,
    ));
    if let Some(n) = a.pipeline_stages {
        for (_, t) in &mut studies {
            t.pipeline_stages = Some(n);
        }
    }

    let cfg = a.config()?;
    let carry = Carry {
        effects: a.carry_effects,
        links: a.carry_links,
    };
    let reports = replay_all(&studies, &cfg, carry);
    let summary = Summary::of(&reports);

    if a.json {
        let study_json = |name: &str, r: &ReplayReport| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("study".into(), serde_json::json!(name));
                if a.verbose {
                    o.insert("log".into(), serde_json::json!(r.search.log));
                    o.insert("verdicts".into(), serde_json::json!(r.search.verdicts));
                }
            }
            v
        };
        match reports.as_slice() {
            [(name, r)] => print_json(&study_json(name, r)),
            _ => print_json(&serde_json::json!({
                "studies": reports.iter().map(|(n, r)| study_json(n, r)).collect::<Vec<_>>(),
                "summary": summary,
            })),
        }
        return Ok(ExitCode::SUCCESS);
    }

    for (name, r) in &reports {
        println!("{name}");
        println!(
            "  {:<7} {:>9} {:>8} {:>7}  pick",
            "", "GPU-s", "gap %", "trials"
        );
        println!(
            "  {:<7} {:>9.1} {:>8} {:>7}  {}",
            "search",
            r.gpu_seconds,
            pct(r.gap_pct),
            r.trials,
            overrides(r.pick.as_ref())
        );
        println!(
            "  {:<7} {:>9.1} {:>8} {:>7}  {}",
            "grid",
            r.grid_gpu_seconds,
            pct(r.grid_gap_pct),
            r.grid_trials,
            overrides(r.grid_pick.as_ref())
        );
        println!(
            "  ratio {:.2} of the grid's GPU-seconds; {} ruled out by memory and {} predicted slower without a trial, {} OOM trials; best {}",
            r.ratio,
            r.ruled_out,
            r.predicted_slower,
            r.oom_trials,
            overrides(r.best.as_ref())
        );
        if let Some(e) = &r.memory_forecast_error_pct {
            println!(
                "  memory forecast error: median {:.1} %, p90 {:.1} % over {} forecast after {} measured peaks",
                e.median,
                e.p90,
                crate::util::text::count(e.n, "candidate", "candidates"),
                FORECAST_AFTER_PEAKS
            );
        }
        if a.verbose {
            for l in &r.search.log {
                println!("    {l}");
            }
        }
        println!();
    }
    println!("{}", summary.line());
    Ok(ExitCode::SUCCESS)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |x| format!("{x:.2}"))
}

fn overrides(o: Option<&Overrides>) -> String {
    match o {
        None => "none".into(),
        Some(o) => o
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Figures over all studies.
#[derive(Debug, serde::Serialize)]
struct Summary {
    studies: usize,
    /// Picks within 1 % of the best.
    within_gap: usize,
    /// Picks within 1 % of the best at ≤ 25 % of the grid's GPU-seconds (the goal).
    within_goal: usize,
    /// The grid's picks within 1 % of the best (the grid measures noise too).
    grid_within_gap: usize,
    /// Total GPU-seconds of the search over the grid's.
    total_ratio: f64,
    median_ratio: f64,
    max_ratio: f64,
    mean_gap_pct: f64,
    max_gap_pct: f64,
    /// Studies with memory forecasts (after the calibration peaks), and of those, the ones
    /// whose p90 forecast error is within 10 % (the goal), and the worst p90.
    memory_forecast_studies: usize,
    memory_forecast_within_10pct: usize,
    memory_forecast_worst_p90_pct: Option<f64>,
    /// Every study's launches by what they were for, summed ([`Phases`]).
    phases: Phases,
    /// The same as % of the grids' GPU-seconds in total: design, promising, follow-up, and
    /// what a perfect prediction after the design would have spent.
    phase_share_pct: PhaseShare,
}

/// [`Summary::phases`] as % of the grids' GPU-seconds.
#[derive(Debug, serde::Serialize)]
struct PhaseShare {
    design: f64,
    promising: f64,
    promising_contenders: f64,
    promising_slower: f64,
    follow_up: f64,
    perfect_prediction: f64,
}

impl Summary {
    fn of(reports: &[(String, ReplayReport)]) -> Summary {
        let gaps: Vec<f64> = reports
            .iter()
            .map(|(_, r)| r.gap_pct.unwrap_or(f64::INFINITY))
            .collect();
        let ok_gap = |g: f64| g <= GOAL_GAP_PCT;
        let costs: Vec<(f64, f64)> = reports
            .iter()
            .map(|(_, r)| (r.gpu_seconds, r.grid_gpu_seconds))
            .collect();
        let cost = CostRatios::of(&costs);
        let finite: Vec<f64> = gaps.iter().copied().filter(|g| g.is_finite()).collect();
        let mut phases = Phases::default();
        for (_, r) in reports {
            phases.add(&r.phases);
        }
        let grid: f64 = reports.iter().map(|(_, r)| r.grid_gpu_seconds).sum();
        let share = |x: f64| {
            if grid > 0.0 {
                x / grid * 100.0
            } else {
                f64::NAN
            }
        };
        let phase_share_pct = PhaseShare {
            design: share(phases.design.gpu_seconds),
            promising: share(phases.promising.gpu_seconds),
            promising_contenders: share(phases.promising.contenders_gpu_seconds),
            promising_slower: share(phases.promising.slower_gpu_seconds),
            follow_up: share(phases.follow_up.gpu_seconds),
            perfect_prediction: share(phases.perfect_prediction_gpu_seconds()),
        };
        Summary {
            phases,
            phase_share_pct,
            studies: reports.len(),
            within_gap: gaps.iter().filter(|&&g| ok_gap(g)).count(),
            within_goal: reports
                .iter()
                .zip(&gaps)
                .filter(|((_, r), g)| ok_gap(**g) && r.ratio <= GOAL_RATIO)
                .count(),
            grid_within_gap: reports
                .iter()
                .filter(|(_, r)| r.grid_gap_pct.is_some_and(ok_gap))
                .count(),
            total_ratio: cost.total,
            median_ratio: cost.median,
            max_ratio: cost.max,
            mean_gap_pct: if finite.is_empty() {
                f64::NAN
            } else {
                finite.iter().sum::<f64>() / finite.len() as f64
            },
            max_gap_pct: gaps.iter().copied().fold(0.0, f64::max),
            memory_forecast_studies: reports
                .iter()
                .filter(|(_, r)| r.memory_forecast_error_pct.is_some())
                .count(),
            memory_forecast_within_10pct: reports
                .iter()
                .filter(|(_, r)| r.memory_forecast_error_pct.is_some_and(|e| e.p90 <= 10.0))
                .count(),
            memory_forecast_worst_p90_pct: reports
                .iter()
                .filter_map(|(_, r)| r.memory_forecast_error_pct.map(|e| e.p90))
                .reduce(f64::max),
        }
    }

    fn line(&self) -> String {
        format!(
            "{} of {} studies within {GOAL_GAP_PCT} % of the best at ≤ {:.0} % of the grid's GPU-seconds; \
             {} within {GOAL_GAP_PCT} % (grid: {}); GPU-seconds vs grid: {:.1} % in total, median {:.1} %, worst {:.1} %; \
             gap: mean {:.2} %, worst {:.2} %",
            self.within_goal,
            self.studies,
            GOAL_RATIO * 100.0,
            self.within_gap,
            self.grid_within_gap,
            self.total_ratio * 100.0,
            self.median_ratio * 100.0,
            self.max_ratio * 100.0,
            self.mean_gap_pct,
            self.max_gap_pct
        ) + &match self.memory_forecast_worst_p90_pct {
            Some(w) => format!(
                "; memory forecast p90 within 10 % in {} of {} studies with forecasts (worst p90 {w:.1} %)",
                self.memory_forecast_within_10pct, self.memory_forecast_studies
            ),
            None => String::new(),
        } + &self.phases_line()
    }

    /// Where the GPU-seconds went (a second line).
    fn phases_line(&self) -> String {
        let (p, s) = (&self.phases, &self.phase_share_pct);
        format!(
            "\nGPU-seconds by what the launches were for, % of the grids': design {:.1} % ({} \
             launches, {} OOM), promising {:.1} % ({} launches, {} OOM: {:.1} % to the picks and \
             their ties, {:.1} % to candidates that ended slower), follow-up {:.1} % ({} \
             launches); with a perfect prediction after the design about {:.1} %",
            s.design,
            p.design.launches,
            p.design.oom_launches,
            s.promising,
            p.promising.launches,
            p.promising.oom_launches,
            s.promising_contenders,
            s.promising_slower,
            s.follow_up,
            p.follow_up.launches,
            s.perfect_prediction
        )
    }
}

/// `--annotate-memory`: the table with the model's peaks added.
fn annotate(a: &BenchReplayArgs, exp: &std::path::Path) -> Result<ExitCode, CliError> {
    let [path] = a.table.as_slice() else {
        return Err(CliError::Usage(
            "--annotate-memory takes exactly one TABLE.json".into(),
        ));
    };
    let text = read_table(path)?;
    let mut t = ReplayTable::from_json(&text).map_err(|e| CliError::input(path, e))?;
    let mut opts = crate::config::LoadOptions::default();
    for s in &a.annotate_set {
        opts.overrides.push(
            crate::config::overrides::parse_assignment(s)
                .map_err(|e| CliError::Usage(format!("--annotate-set {s}: {e}")))?,
        );
    }
    let e = crate::config::Experiment::load(exp, &opts)?;
    let overrides: Vec<Overrides> = t.candidates.iter().map(|c| c.overrides.clone()).collect();
    let peaks = crate::app::sweep::model_peaks(&e, &opts, &overrides, a.annotate_gpus.max(1));
    for (c, p) in t.candidates.iter_mut().zip(peaks) {
        c.predicted_bytes = p.map(f64::round);
    }
    print_json(&serde_json::to_value(&t).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}

/// A table file: a regular file under the input cap (a FIFO would block, `/dev/zero` would
/// fill memory).
fn read_table(path: &std::path::Path) -> Result<String, CliError> {
    use crate::util::input::{cap_bytes, read_text};
    read_text(path, cap_bytes()).map_err(|e| CliError::input(path, e))
}
