//! `primus-tune gemm-tune status|shapes|results|stage`: the seed guide's three HipBLASLt
//! stages, checked and run as trials.

use super::progress::{Style, drive, json_line};
use super::run::{RunArgs, print_result};
use super::{CliError, LoadArgs, display_path, print_json};
use crate::app::gemm_stage::{self, StageRequest, StageSummary};
use crate::app::{Session, SessionOptions};
use crate::gemm::dump::{self, DumpSummary};
use crate::gemm::status::{self, GemmStatus, Level, TuneLayout};
use crate::gemm::{probe, results, runner, stage};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct GemmTuneArgs {
    #[command(subcommand)]
    cmd: GemmCmd,
}

#[derive(Debug, Subcommand)]
enum GemmCmd {
    /// Which stage is done, what comes next, and the environment's traps.
    Status(StatusArgs),
    /// The GEMM shapes stage 1 dumped: unique shapes with counts (what stage 2 will tune).
    Shapes(ShapesArgs),
    /// A stage-2 result file: per GEMM the chosen solution, its speed and time.
    Results(ResultsArgs),
    /// Run a stage as a trial: 1 dumps the shapes, 2 tunes them offline, 3 compares the tuned
    /// GEMMs against an untuned baseline.
    Stage(Box<StageArgs>),
}

#[derive(Debug, Args)]
struct StatusArgs {
    #[command(flatten)]
    load: LoadArgs,
    /// Do not run hipblaslt-bench to learn the installed hipBLASLt build.
    #[arg(long)]
    no_probe: bool,
    /// The trial database (default: .primus-tune/trials.db beside the experiment).
    #[arg(long)]
    db: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ShapesArgs {
    #[command(flatten)]
    load: LoadArgs,
    /// A dump file or folder to read instead of the experiment's stage-1 folder.
    #[arg(long, value_name = "PATH")]
    dump: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ResultsArgs {
    /// A result file (`tune_hipblas_gemm_results.txt`).
    file: PathBuf,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct StageArgs {
    /// 1 (dump shapes), 2 (tune offline) or 3 (train with the tuned file vs the baseline).
    stage: u8,
    #[command(flatten)]
    run: RunArgs,
    /// Python for Primus' offline tuning script (stage 2 with a profile other than primus).
    #[arg(long, default_value = "python3")]
    python: String,
    /// Stage 3: this result file instead of the experiment's.
    #[arg(long, value_name = "FILE")]
    override_file: Option<PathBuf>,
}

pub fn run(a: &GemmTuneArgs) -> Result<ExitCode, CliError> {
    match &a.cmd {
        GemmCmd::Status(s) => run_status(s),
        GemmCmd::Shapes(s) => run_shapes(s),
        GemmCmd::Results(r) => run_results(r),
        GemmCmd::Stage(s) => run_stage(s),
    }
}

/// The session of a read-only subcommand (`status`, `shapes`): `--db` overrides the workspace.
fn session(load: &LoadArgs, db: Option<PathBuf>) -> Result<Session, CliError> {
    Ok(Session::open(SessionOptions {
        db,
        ..load.options()
    })?)
}

fn run_status(a: &StatusArgs) -> Result<ExitCode, CliError> {
    let session = session(&a.load, a.db.clone())?;
    let exp = session.load()?;
    let installed = if a.no_probe {
        None
    } else {
        probe::find_bench(&session.load.env).and_then(|b| {
            match probe::probe(&b, Duration::from_secs(60)) {
                Ok(build) => Some(build),
                Err(e) => {
                    eprintln!("note: could not learn the hipBLASLt build: {e}");
                    None
                }
            }
        })
    };
    let mut st = crate::app::views::gemm_status(&session, &exp);
    if installed.is_some() {
        let comparison = st.comparison.clone();
        st = status::of_experiment(&exp, &session.load.env, installed.as_ref(), comparison);
    }
    if a.json {
        print_json(&serde_json::to_value(&st).unwrap_or_default());
    } else {
        print_status(&st);
    }
    // As lint: an error-level note is an error (1 is only for `lint --strict` warnings).
    let errors = st.notes.iter().any(|n| n.level == Level::Error);
    Ok(if errors {
        ExitCode::from(super::exit::ERRORS)
    } else {
        ExitCode::SUCCESS
    })
}

/// The status as text (also what `stage` prints at its end).
pub fn print_status(st: &GemmStatus) {
    println!("HipBLASLt GEMM tuning — {}", st.layout.model_tag);
    println!("  folder   {}", display_path(&st.layout.root));
    match &st.dumps {
        Some(d) if d.gemm_lines > 0 => println!(
            "  stage 1  done: {}, {} GEMM calls, {} unique shapes",
            crate::util::text::count(d.files, "dump file", "dump files"),
            d.gemm_lines,
            d.unique_shapes
        ),
        _ => println!("  stage 1  not done (no shapes in gemm_shape/)"),
    }
    match &st.results {
        Some(r) => println!(
            "  stage 2  {}: {} tuned GEMMs, hipBLASLt {}, {}{}",
            if r.entries > 0 { "done" } else { "empty" },
            r.entries,
            r.git_version,
            r.archs.join(", "),
            r.covered
                .zip(st.dumps.as_ref())
                .map(|(c, d)| format!("; covers {c} of {} dumped shapes", d.unique_shapes))
                .unwrap_or_default()
        ),
        None => println!("  stage 2  not done (no {})", status::RESULT_FILE),
    }
    match (&st.comparison, st.in_use) {
        (Some(c), _) => println!(
            "  stage 3  measured (trials {} vs {}): {}",
            c.baseline_trial,
            c.tuned_trial,
            stage::comparison_text(c.change, c.change_ci)
        ),
        (None, true) => println!("  stage 3  on in this environment (not measured here)"),
        (None, false) => println!("  stage 3  not measured"),
    }
    if let Some(b) = &st.installed {
        println!(
            "  hipBLASLt here: {}{}",
            b.git_version,
            b.arch
                .as_ref()
                .map(|a| format!(" on {a}"))
                .unwrap_or_default()
        );
    }
    println!("  next     {}", st.next_text);
    for n in &st.notes {
        let tag = match n.level {
            Level::Ok => "ok",
            Level::Info => "info",
            Level::Warning => "warning",
            Level::Error => "error",
        };
        println!("  {tag}: {}", n.text);
    }
}

/// Billions of floating-point operations of one call of a shape (2·m·n·k per batch).
fn gflop(s: &dump::GemmShape) -> f64 {
    2.0 * s.gemm.m as f64 * s.gemm.n as f64 * s.gemm.k as f64 * s.gemm.batch_count.max(1) as f64
        / 1e9
}

fn run_shapes(a: &ShapesArgs) -> Result<ExitCode, CliError> {
    let session = a.load.session(None)?;
    // The ranks a launch places here (the session's placement: --gpus, the launcher's
    // variables, the defaults file, the GPUs found), else the launch's fallback.
    let gpus = session
        .load
        .world
        .as_ref()
        .map_or(crate::app::launch::FALLBACK_GPUS, |w| w.gpus);
    let (path, exp_path, rate) = match &a.dump {
        Some(p) => (p.clone(), None, None),
        None => {
            let exp = session.load()?;
            let layout = TuneLayout::new(&exp.primus_root, &exp.path, &session.load.env);
            let rate = session
                .existing_store()?
                .and_then(|s| runner::measured_rate(&s, &exp.path));
            (layout.shapes_dir, Some(exp.path), rate)
        }
    };
    let summary = dump::read_dumps(&path).map_err(|e| {
        // A FIFO or a device given as the dump exists: it is refused, not missing.
        let missing = match &e {
            dump::DumpError::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            dump::DumpError::Empty { .. } => true,
            dump::DumpError::Parse { .. } => false,
        };
        let wrap = if missing {
            CliError::NoInput
        } else {
            CliError::Failed
        };
        wrap(match (&e, &exp_path) {
            (_, Some(x)) if missing => format!(
                "{e}\n  no stage-1 dump for {}: run `primus-tune gemm-tune stage 1 {}` first",
                display_path(x),
                display_path(x)
            ),
            _ => e.to_string(),
        })
    })?;
    if a.json {
        let mut v = dump::shapes_json(&summary);
        v["gemm_lines"] = summary.gemm_lines.into();
        v["files"] = summary
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .into();
        print_json(&v);
        return Ok(ExitCode::SUCCESS);
    }
    print_shapes(&summary, gpus, rate);
    Ok(ExitCode::SUCCESS)
}

fn print_shapes(s: &DumpSummary, gpus: u64, rate: Option<f64>) {
    let total: f64 = s
        .shapes
        .iter()
        .map(|c| c.count as f64 * gflop(&c.shape))
        .sum();
    println!(
        "{} unique GEMM shapes in {} from {}",
        s.shapes.len(),
        crate::util::text::count(s.gemm_lines as usize, "call", "calls"),
        crate::util::text::count(s.files.len(), "file", "files")
    );
    println!(
        "{:>7} {:>7} {:>7} {:>7} {:>3} {:>5} {:<16} {:>6} {:>6}",
        "calls", "m", "n", "k", "op", "batch", "types a/b→d", "GFLOP", "share"
    );
    for c in &s.shapes {
        let g = gflop(&c.shape);
        println!(
            "{:>7} {:>7} {:>7} {:>7} {:>3} {:>5} {:<16} {:>6.1} {:>5.1}%",
            c.count,
            c.shape.gemm.m,
            c.shape.gemm.n,
            c.shape.gemm.k,
            format!("{}{}", c.shape.gemm.trans_a, c.shape.gemm.trans_b),
            c.shape.gemm.batch_count,
            format!(
                "{}/{}→{}",
                short_type(&c.shape.gemm.a_type),
                short_type(&c.shape.gemm.b_type),
                short_type(&c.shape.gemm.d_type)
            ),
            g,
            if total > 0.0 {
                100.0 * c.count as f64 * g / total
            } else {
                0.0
            }
        );
    }
    let per_gpu = (s.shapes.len() as u64).div_ceil(gpus);
    let on = crate::util::text::count(gpus as usize, "GPU", "GPUs");
    match rate {
        Some(r) => println!(
            "stage 2: {} shapes on {on}, {per_gpu} each; at the {r:.0} s per shape measured in the last stage 2 here, about {:.0} min",
            s.shapes.len(),
            per_gpu as f64 * r / 60.0
        ),
        None => println!(
            "stage 2: {} shapes on {on}, {per_gpu} each; the guide's rule: often 10–30 minutes (hipblaslt-bench times every solution of each shape)",
            s.shapes.len()
        ),
    }
}

fn short_type(t: &str) -> &str {
    t.strip_suffix("_r").unwrap_or(t)
}

fn run_results(a: &ResultsArgs) -> Result<ExitCode, CliError> {
    let r = results::read(&a.file).map_err(|e| {
        if a.file.exists() {
            CliError::Failed(e.to_string())
        } else {
            CliError::NoInput(e.to_string())
        }
    })?;
    if a.json {
        print_json(&results::results_json(&r));
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}: {} tuned GEMMs, hipBLASLt {}",
        display_path(&a.file),
        r.entries.len(),
        r.git_version
    );
    println!(
        "{:>6} {:>6} {:>6} {:>3} {:>5} {:<14} {:>8} {:>9} {:>9} {:<8} {:>4}",
        "m", "n", "k", "op", "batch", "types a/b→d", "TFLOP/s", "µs", "solution", "arch", "CUs"
    );
    for e in &r.entries {
        println!(
            "{:>6} {:>6} {:>6} {:>3} {:>5} {:<14} {:>8.1} {:>9.1} {:>9} {:<8} {:>4}",
            e.gemm.m,
            e.gemm.n,
            e.gemm.k,
            format!("{}{}", e.gemm.trans_a, e.gemm.trans_b),
            e.gemm.batch_count,
            format!(
                "{}/{}→{}",
                short_type(&e.gemm.a_type),
                short_type(&e.gemm.b_type),
                short_type(&e.gemm.d_type)
            ),
            e.gflops / 1000.0,
            e.us,
            e.solution_index,
            e.arch.split(':').next().unwrap_or(&e.arch),
            e.cus
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_stage(a: &StageArgs) -> Result<ExitCode, CliError> {
    let session = a.run.session()?;
    let req = StageRequest {
        stage: a.stage,
        trial: a.run.request()?,
        python: a.python.clone(),
        override_file: a.override_file.clone(),
    };
    let p = gemm_stage::prepare(&session, &req)?;
    let json = a.run.json;
    let shown = gemm_stage::shown_options(&p);
    let style = Style {
        json,
        trial_headers: true,
        max_iters: shown.max_iters,
        job: !shown.trains,
    };
    let out = drive(style, |events, cancel| {
        gemm_stage::run_blocking(&session, &p, events, cancel)
    })?;
    if !json {
        for r in &out.run.trials {
            print_result(r);
        }
        match &out.summary {
            StageSummary::NothingDumped { .. }
            | StageSummary::NoResult { .. }
            | StageSummary::NotCompared => {
                eprintln!("{}", out.summary)
            }
            s => println!("{s}"),
        }
        if let StageSummary::Compared(c) = &out.summary
            && c.change < -c.change_ci
        {
            println!("use it in later trials: primus-tune run --gemm-tuned / sweep --gemm-tuned");
        }
    } else {
        let mut doc = serde_json::json!({
            "event": "stage-ended",
            "stage": a.stage,
            "study": out.run.study_id,
            "trials": out.run.trials,
            "summary": out.summary,
        });
        match &out.summary {
            StageSummary::Dumped {
                unique_shapes,
                gemm_lines,
                ..
            } => {
                doc["unique_shapes"] = (*unique_shapes).into();
                doc["gemm_lines"] = (*gemm_lines).into();
            }
            StageSummary::Tuned {
                entries,
                git_version,
                ..
            } => {
                doc["entries"] = (*entries).into();
                doc["git_version"] = git_version.clone().into();
            }
            StageSummary::Compared(_) | StageSummary::NotCompared => {
                doc["comparison"] = serde_json::to_value(&out.run.comparison).unwrap_or_default();
                doc["override_file"] =
                    serde_json::to_value(&out.plan.override_file).unwrap_or_default();
            }
            _ => {}
        }
        json_line(&doc);
    }
    Ok(if out.completed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::exit::NOT_COMPLETED)
    })
}
