//! `primus-tune sweep [CONFIG] --space NAME [--resume STUDY] [--budget-minutes M] [--max-trials N]`

use super::progress::{Style, drive, json_line};
use super::{CliError, LoadArgs, display_path};
use crate::app::sweep::{self, SweepRequest};
use crate::app::trial::TrialRequest;
use crate::app::{Session, SessionOptions};
use crate::domain::study::{StudyRecord, settings};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The experiment, `--env`, `--workspace`; `--set` values apply to every trial.
    #[command(flatten)]
    pub load: LoadArgs,
    /// The space: deepep-cu, sync-free-stage, memory-fit, precision, one of yours, or a YAML file.
    #[arg(long)]
    pub space: Option<String>,
    /// Launch profile of the trials (proxy-cpu, proxy-torch, primus, megatron, ...) [default:
    /// `profile` of the defaults file, else proxy-cpu; a resumed study: the profile its trials
    /// ran with].
    #[arg(long)]
    pub profile: Option<String>,
    /// Name of the new study (default: the space and the time).
    #[arg(long)]
    pub name: Option<String>,
    /// Continue this study after a crash or Ctrl-C: finished trials are not run again.
    #[arg(long, value_name = "STUDY")]
    pub resume: Option<String>,
    /// Stop launching trials after this many minutes of cost: GPU time (wall time × the ranks
    /// of each trial), or for a CPU stand-in's trials CPU time (wall time × its processes, one
    /// per node). A resumed study keeps the cap it started with unless one is given (it counts
    /// the trials it replays).
    #[arg(long)]
    pub budget_minutes: Option<f64>,
    /// Stop launching after this many trials (replayed ones count) [a resumed study: its own
    /// unless given].
    #[arg(long)]
    pub max_trials: Option<usize>,
    /// Iterations of the first, shortest trials [default: 12; a resumed study: its own, and no
    /// other].
    #[arg(long)]
    pub first_iters: Option<u64>,
    /// Longest trial of the halving rungs [default: 60; a resumed study: its own, and no
    /// other]. When start-up dominates, each candidate gets one launch of 18–30 iterations
    /// instead, whatever this says (docs/sweeps.md, "When start-up dominates").
    #[arg(long)]
    pub max_iters: Option<u64>,
    /// GPU memory per GPU in GiB, what the memory model prunes against (default: what
    /// telemetry reports for GPU 0 of this node; none reported: nothing is pruned on a
    /// prediction).
    #[arg(long)]
    pub capacity_gib: Option<f64>,
    /// Share of the memory kept free when pruning on a prediction calibrated by earlier
    /// studies, before any trial; once this study's own peaks recalibrate the model, a forecast
    /// prunes only what would not fit the whole memory even allowing for its error.
    #[arg(long, default_value_t = 0.1)]
    pub headroom: f64,
    /// The trial database (its folder holds the trial folders); default: the workspace's.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// JSON Lines on stdout: one object per event as it happens, the last one the study.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub telemetry: super::monitor::TrialTelemetryArgs,
    /// Train every trial with the tuned GEMMs of `gemm-tune stage 2` (HipBLASLt stage 3).
    #[arg(long)]
    pub gemm_tuned: bool,
    /// Sweep knobs the profile does not model (the CPU proxy and DeepEP CUs, say): a demo, its
    /// results labelled as not evidence.
    #[arg(long)]
    pub allow_unmodeled: bool,
    /// Learn every knob's effect from this sweep's trials alone: do not start from the knob
    /// effects the workspace's earlier studies of the profile measured (when those studies
    /// are of models this one does not resemble)
    #[arg(long)]
    pub no_carried_effects: bool,
    /// Measure every micro/local batch: do not skip a smaller batch once a larger one with the
    /// same other settings fits (the search does so only where the configs run in one
    /// pipeline stage; switch it off where a larger batch may still be slower)
    #[arg(long)]
    pub no_batch_rule: bool,
    /// Trials run at once (Slurm: concurrent jobs the scheduler places; on this node: 1).
    #[arg(long, value_name = "K", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub parallel: u32,
    #[command(flatten)]
    pub slurm: super::slurm_args::SlurmArgs,
}

pub fn run(a: &SweepArgs) -> Result<ExitCode, CliError> {
    let session = Session::open(SessionOptions {
        db: a.db.clone(),
        telemetry: a.telemetry.setup()?,
        ..a.load.options()
    })?;
    let req = SweepRequest {
        space: a.space.clone(),
        name: a.name.clone(),
        resume: a.resume.clone(),
        trial: TrialRequest {
            profile: a.profile.clone(),
            gpus: a.load.flags.gpus,
            gemm_tuned: a.gemm_tuned,
            slurm: a.slurm.request(),
            ..TrialRequest::default()
        },
        parallel: a.parallel as usize,
        first_iters: a.first_iters,
        max_iters: a.max_iters,
        budget_minutes: a.budget_minutes,
        max_trials: a.max_trials,
        capacity_gib: a.capacity_gib,
        headroom: a.headroom,
        allow_unmodeled: a.allow_unmodeled,
        carried_effects: !a.no_carried_effects,
        batch_rule: !a.no_batch_rule,
    };
    if req.space.is_none() && req.resume.is_none() {
        return Err(CliError::Usage(
            "--space NAME is needed (or --resume STUDY)".into(),
        ));
    }
    let style = Style {
        json: a.json,
        trial_headers: false,
        max_iters: a.max_iters.unwrap_or(sweep::MAX_ITERS),
        job: false,
    };
    let out = drive(style, |events, cancel| {
        sweep::run(&session, &req, events, cancel)
    })?;
    let Some(record) = out.record else {
        eprintln!(
            "sweep stopped; finished trials are stored. Continue with: {}",
            out.resume
        );
        if a.json {
            json_line(&serde_json::json!({
                "event": "sweep-stopped", "study": out.study, "id": out.id, "resume": out.resume,
            }));
        }
        return Ok(ExitCode::from(super::exit::NOT_COMPLETED));
    };
    if a.json {
        json_line(&serde_json::json!({
            "event": "sweep-ended", "study": out.study, "id": out.id, "record": record,
        }));
    } else {
        print_record(&out.study, &record);
        if out.replayed > 0 {
            println!(
                "(resumed: {} reused, {} launched)",
                crate::util::text::count(out.replayed, "finished trial", "finished trials"),
                out.launched
            );
        }
        println!(
            "next: primus-tune recommend {} --study {} [--apply]",
            display_path(&session.experiment),
            out.study
        );
    }
    Ok(if record.pick.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::exit::NOT_COMPLETED)
    })
}

fn gib(b: f64) -> f64 {
    b / (1u64 << 30) as f64
}

/// A finished study as text: the pick, then every candidate with its verdict and evidence.
pub fn print_record(name: &str, r: &StudyRecord) {
    println!(
        "study {name}: {}, {:.1} {}-minutes",
        crate::util::text::count(r.trials, "trial", "trials"),
        r.gpu_seconds / 60.0,
        r.cost_unit()
    );
    println!("evidence: {}", r.basis_text());
    println!("{}", r.unit_text());
    if !r.unmodeled.is_empty() {
        println!(
            "not modelled by {}: {} — their verdicts are noise, not evidence",
            r.profile,
            r.unmodeled.join(", ")
        );
    }
    println!("conclusion: {}", r.conclusion_text());
    if let Some(c) = r.pick() {
        println!(
            "pick: {}{} — {} {:.1} ms/batch (95 % CI {:.1}–{:.1}, n {})",
            settings(&c.overrides),
            if c.baseline {
                " (the current settings)"
            } else {
                ""
            },
            r.statistic.name(),
            c.step_ms.unwrap_or(f64::NAN),
            c.ci_low_ms.unwrap_or(f64::NAN),
            c.ci_high_ms.unwrap_or(f64::NAN),
            c.n
        );
    }
    // Step times are per global batch (a proxy that ran part of it is scaled to the whole).
    println!(
        "{:>3}  {:<13} {:>9} {:>17} {:>4} {:>15} {:>9}  settings / why   (* current settings)",
        "id", "verdict", "ms/batch", "95% CI ms", "n", "peak GiB", "pred GiB"
    );
    for c in &r.candidates {
        let ci = match (c.ci_low_ms, c.ci_high_ms) {
            (Some(l), Some(h)) => format!("{l:.1}–{h:.1}"),
            _ => "-".into(),
        };
        println!(
            "{:>3}{} {:<13} {:>9} {:>17} {:>4} {:>15} {:>9}  {} · {}",
            c.id,
            if c.baseline { "*" } else { " " },
            c.verdict,
            c.step_ms.map_or("-".into(), |m| format!("{m:.1}")),
            ci,
            c.n,
            c.peak_memory_bytes.map_or("-".into(), |b| format!(
                "{:.2}{}",
                gib(b as f64),
                c.peak_memory_source
                    .map_or(String::new(), |k| format!(" {}", k.tag()))
            )),
            c.predicted_bytes
                .map_or("-".into(), |b| format!("{:.2}", gib(b))),
            settings(&c.overrides),
            c.why
        );
    }
    match crate::app::views::studies::memory_check(r) {
        crate::domain::study::MemoryCheck::Nothing => {}
        check => println!("memory model vs measured: {check}"),
    }
}
