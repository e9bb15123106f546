//! `primus-tune sweep [CONFIG] --space NAME [--resume STUDY] [--budget-minutes M] [--max-trials N]`

use super::{CliError, LoadArgs, display_path, print_json};
use crate::domain::study::{StudyRecord, settings};
use crate::run::profile;
use crate::tune::sweep::{SweepRequest, run_sweep};
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// The space: deepep-cu, sync-free-stage, memory-fit, precision, one of yours, or a YAML file.
    #[arg(long)]
    pub space: Option<String>,
    /// Launch profile of the trials (proxy-cpu, proxy-torch, primus, megatron, ...).
    #[arg(long, default_value = profile::DEFAULT_PROFILE)]
    pub profile: String,
    /// Name of the new study (default: the space and the time).
    #[arg(long)]
    pub name: Option<String>,
    /// Continue this study after a crash or Ctrl-C: finished trials are not run again.
    #[arg(long, value_name = "STUDY")]
    pub resume: Option<String>,
    /// Stop launching trials after this many minutes of GPU time (wall time × GPUs).
    #[arg(long)]
    pub budget_minutes: Option<f64>,
    /// Stop launching after this many trials.
    #[arg(long)]
    pub max_trials: Option<usize>,
    /// Iterations of the first, shortest trials.
    #[arg(long, default_value_t = 12)]
    pub first_iters: u64,
    /// Longest trial.
    #[arg(long, default_value_t = 60)]
    pub max_iters: u64,
    /// GPU memory per GPU in GiB (default: what telemetry reports for GPU 0).
    #[arg(long)]
    pub capacity_gib: Option<f64>,
    /// Share of the memory kept free when pruning by prediction.
    #[arg(long, default_value_t = 0.1)]
    pub headroom: f64,
    /// GPUs (world size) of each trial (default: as `run`).
    #[arg(long)]
    pub gpus: Option<u64>,
    /// Print the study as JSON.
    #[arg(long)]
    pub json: bool,
    /// Train every trial with the tuned GEMMs of `gemm-tune stage 2` (HipBLASLt stage 3).
    #[arg(long)]
    pub gemm_tuned: bool,
}

/// SIGINT, SIGTERM and SIGHUP stop the trial in flight and the sweep.
fn cancel_on_signals() -> tokio::sync::watch::Receiver<bool> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            crate::run::process::stop_signal().await;
            let _ = tx.send(true);
        });
    });
    rx
}

pub fn run(a: &SweepArgs) -> Result<ExitCode, CliError> {
    let (exp, opts) = a.load.load()?;
    let mut env = a.load.env_pairs()?;
    if a.gemm_tuned {
        env.extend(
            crate::gemm::tuned_env_for(&exp.primus_root, &exp.path, &opts.env)
                .map_err(CliError::Usage)?,
        );
    }
    let req = SweepRequest {
        space: a.space.clone(),
        name: a.name.clone(),
        resume: a.resume.clone(),
        profile: a.profile.clone(),
        gpus: a.gpus,
        first_iters: a.first_iters,
        max_iters: a.max_iters,
        budget_minutes: a.budget_minutes,
        max_trials: a.max_trials,
        capacity_gib: a.capacity_gib,
        headroom: a.headroom,
        env,
    };
    if req.space.is_none() && req.resume.is_none() {
        return Err(CliError::Usage(
            "--space NAME is needed (or --resume STUDY)".into(),
        ));
    }
    let json = a.json;
    let out = run_sweep(
        &exp,
        &opts,
        &req,
        cancel_on_signals(),
        Box::new(move |line: &str| {
            if !json {
                eprintln!("{line}");
            }
        }),
    )
    .map_err(CliError::Usage)?;
    let Some(record) = out.record else {
        eprintln!(
            "sweep stopped; finished trials are stored. Continue with: primus-tune sweep {} --resume {}",
            display_path(&exp.path),
            out.study
        );
        return Ok(ExitCode::from(3));
    };
    if a.json {
        print_json(&serde_json::json!({"study": out.study, "id": out.id, "record": record}));
    } else {
        print_record(&out.study, &record);
        if out.replayed > 0 {
            println!(
                "(resumed: {} finished trial(s) reused, {} launched)",
                out.replayed, out.launched
            );
        }
        println!(
            "next: primus-tune recommend {} --study {} [--apply]",
            display_path(&exp.path),
            out.study
        );
    }
    Ok(if record.pick.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

fn gib(b: f64) -> f64 {
    b / (1u64 << 30) as f64
}

/// A finished study as text: the pick, then every candidate with its verdict and evidence.
pub fn print_record(name: &str, r: &StudyRecord) {
    println!(
        "study {name}: {} trial(s), {:.1} GPU-minutes",
        r.trials,
        r.gpu_seconds / 60.0
    );
    match r.pick.and_then(|p| r.candidates.iter().find(|c| c.id == p)) {
        Some(c) => println!(
            "pick: {} — median {:.1} ms (95 % CI {:.1}–{:.1}, n {})",
            settings(&c.overrides),
            c.median_ms.unwrap_or(f64::NAN),
            c.ci_low_ms.unwrap_or(f64::NAN),
            c.ci_high_ms.unwrap_or(f64::NAN),
            c.n
        ),
        None => println!("no candidate produced a measurement"),
    }
    println!(
        "{:>3}  {:<13} {:>9} {:>17} {:>4} {:>9} {:>9}  settings / why",
        "id", "verdict", "median ms", "95% CI ms", "n", "peak GiB", "pred GiB"
    );
    for c in &r.candidates {
        let ci = match (c.ci_low_ms, c.ci_high_ms) {
            (Some(l), Some(h)) => format!("{l:.1}–{h:.1}"),
            _ => "-".into(),
        };
        println!(
            "{:>3}  {:<13} {:>9} {:>17} {:>4} {:>9} {:>9}  {} · {}",
            c.id,
            c.verdict,
            c.median_ms.map_or("-".into(), |m| format!("{m:.1}")),
            ci,
            c.n,
            c.peak_memory_bytes
                .map_or("-".into(), |b| format!("{:.2}", gib(b as f64))),
            c.predicted_bytes
                .map_or("-".into(), |b| format!("{:.2}", gib(b))),
            settings(&c.overrides),
            c.why
        );
    }
    if let Some(e) = r.memory_error {
        println!(
            "memory model vs measured: mean error {:.1} % over the measured candidates",
            100.0 * e
        );
    }
}
