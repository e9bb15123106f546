//! `primus-tune gemm-tune status|shapes|results|stage`: the seed guide's three HipBLASLt
//! stages, checked and run as trials.

use super::run::{RunArgs, prepare, print_result, with_progress};
use super::{CliError, LoadArgs, display_path, print_json};
use crate::gemm::dump::{self, DumpSummary};
use crate::gemm::stage::{self, StageContext};
use crate::gemm::status::{self, GemmStatus, Level, TuneLayout};
use crate::gemm::{probe, results, runner};
use crate::store::Store;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// GPUs stage 2 would tune on (for the time estimate; default as `run`).
    #[arg(long)]
    gpus: Option<u64>,
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

fn open_store(db: Option<&Path>, experiment: &Path) -> Option<Store> {
    let path = db
        .map(Path::to_path_buf)
        .unwrap_or_else(|| crate::run::trial::workspace_dir(experiment).join("trials.db"));
    path.exists().then(|| Store::open(&path).ok()).flatten()
}

fn run_status(a: &StatusArgs) -> Result<ExitCode, CliError> {
    let (exp, opts) = a.load.load()?;
    let installed = if a.no_probe {
        None
    } else {
        probe::find_bench(&opts.env).and_then(|b| match probe::probe(&b, Duration::from_secs(60)) {
            Ok(build) => Some(build),
            Err(e) => {
                eprintln!("note: could not learn the hipBLASLt build: {e}");
                None
            }
        })
    };
    let comparison = open_store(a.db.as_deref(), &exp.path)
        .and_then(|s| runner::latest_comparison(&s, &exp.path));
    let st = status::of_experiment(&exp, &opts.env, installed.as_ref(), comparison);
    if a.json {
        print_json(&serde_json::to_value(&st).unwrap_or_default());
    } else {
        print_status(&st);
    }
    let errors = st.notes.iter().any(|n| n.level == Level::Error);
    Ok(if errors {
        ExitCode::from(1)
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
            "  stage 1  done: {} dump file(s), {} GEMM calls, {} unique shapes",
            d.files, d.gemm_lines, d.unique_shapes
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
    let (path, exp_path, env, rate) = match &a.dump {
        Some(p) => (p.clone(), None, a.load.env()?, None),
        None => {
            let (exp, opts) = a.load.load()?;
            let layout = TuneLayout::new(&exp.primus_root, &exp.path, &opts.env);
            let rate =
                open_store(None, &exp.path).and_then(|s| runner::measured_rate(&s, &exp.path));
            (layout.shapes_dir, Some(exp.path), opts.env, rate)
        }
    };
    let summary = dump::read_dumps(&path).map_err(|e| {
        CliError::Usage(match (&e, &exp_path) {
            (dump::DumpError::Io { .. } | dump::DumpError::Empty { .. }, Some(x)) => format!(
                "{e}\n  no stage-1 dump for {}: run `primus-tune gemm-tune stage 1 {}` first",
                display_path(x),
                display_path(x)
            ),
            _ => e.to_string(),
        })
    })?;
    let gpus = a
        .gpus
        .unwrap_or_else(|| crate::run::trial::default_gpus(&env, &Default::default()))
        .max(1);
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
        "{} unique GEMM shapes in {} call(s) from {} file(s)",
        s.shapes.len(),
        s.gemm_lines,
        s.files.len()
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
    match rate {
        Some(r) => println!(
            "stage 2: {} shapes on {gpus} GPU(s), {per_gpu} each; at the {r:.0} s per shape measured in the last stage 2 here, about {:.0} min",
            s.shapes.len(),
            per_gpu as f64 * r / 60.0
        ),
        None => println!(
            "stage 2: {} shapes on {gpus} GPU(s), {per_gpu} each; the guide's rule: often 10–30 minutes (hipblaslt-bench times every solution of each shape)",
            s.shapes.len()
        ),
    }
}

fn short_type(t: &str) -> &str {
    t.strip_suffix("_r").unwrap_or(t)
}

fn run_results(a: &ResultsArgs) -> Result<ExitCode, CliError> {
    let r = results::read(&a.file).map_err(|e| CliError::Usage(e.to_string()))?;
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

/// Polls the result file while stage 2 runs and prints how many shapes are tuned.
fn watch_results(
    file: PathBuf,
    shapes: usize,
    done: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut last = usize::MAX;
        while !done.load(Ordering::Relaxed) {
            let n = std::fs::read_to_string(&file)
                .map(|t| count_entries(&t))
                .unwrap_or(0);
            if n != last {
                eprintln!("  tuned {n} of {shapes} shapes");
                last = n;
            }
            std::thread::park_timeout(Duration::from_secs(2));
        }
    })
}

/// Tuned GEMMs in a result file being written: its CSV header lines (one per entry).
fn count_entries(text: &str) -> usize {
    text.lines()
        .filter(|l| l.trim_start().starts_with("transA,"))
        .count()
}

fn run_stage(a: &StageArgs) -> Result<ExitCode, CliError> {
    let mut run = a.run.clone();
    if run.profile.is_none() {
        run.profile = Some("primus".into());
    }
    let p = prepare(&run)?;
    let layout = TuneLayout::new(&p.exp.primus_root, &p.exp.path, &p.opts.env);
    let plan = stage::plan(
        a.stage,
        &StageContext {
            layout: &layout,
            primus_root: &p.exp.primus_root,
            profile: &p.topts.profile.name,
            hipblaslt: p.topts.profile.capabilities.hipblaslt,
            gpus: p.topts.gpus,
            env: &p.opts.env,
            python: &a.python,
            override_file: a.override_file.as_deref(),
        },
    )
    .map_err(|e| CliError::Usage(e.to_string()))?;
    let json = run.json;
    if a.stage == 3 && !json {
        eprintln!(
            "stage 3: an untuned baseline trial, then one with {}",
            plan.override_file
                .as_deref()
                .map(display_path)
                .unwrap_or_default()
        );
    }
    let store = Store::open(&p.db).map_err(|e| CliError::Usage(e.to_string()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let iters_given = run.max_iters.is_some();
    let mut shown = p.topts.clone();
    runner::apply_plan(&mut shown, &plan, &p.exp.primus_root, iters_given);
    // Stage 2 prints no iterations: the result file growing is its progress.
    let done = Arc::new(AtomicBool::new(false));
    let watcher = (a.stage == 2 && !json)
        .then(|| watch_results(layout.result_file.clone(), plan.shapes, done.clone()));
    let out = rt.block_on(with_progress(&shown, json, |tx, cancel| {
        runner::run_stage(
            &p.exp,
            &p.opts,
            &store,
            &p.topts,
            &plan,
            &layout,
            iters_given,
            tx,
            cancel,
        )
    }));
    done.store(true, Ordering::Relaxed);
    if let Some(w) = watcher {
        w.thread().unpark();
        let _ = w.join();
    }
    let out = out.map_err(|e| CliError::Usage(e.to_string()))?;
    if let Some(old) = &out.set_aside {
        eprintln!("the earlier result file is kept as {}", display_path(old));
    }
    if !json {
        for r in &out.trials {
            print_result(r, false);
        }
    }
    let mut doc =
        serde_json::json!({"stage": a.stage, "study": out.study_id, "trials": out.trials});
    match a.stage {
        1 => match dump::read_dumps(&layout.shapes_dir)
            .ok()
            .filter(|d| d.gemm_lines > 0)
        {
            Some(d) => {
                doc["unique_shapes"] = d.shapes.len().into();
                doc["gemm_lines"] = d.gemm_lines.into();
                if !json {
                    println!(
                        "stage 1: {} unique GEMM shapes dumped to {}; next: primus-tune gemm-tune stage 2",
                        d.shapes.len(),
                        display_path(&layout.shapes_dir)
                    );
                }
            }
            None => eprintln!(
                "stage 1: no GEMM shape was dumped to {} — the workload did not call hipBLASLt (the proxy profiles do not), or it ignored HIPBLASLT_LOG_FILE",
                display_path(&layout.shapes_dir)
            ),
        },
        2 => match results::read(&layout.result_file) {
            Ok(res) => {
                doc["entries"] = res.entries.len().into();
                doc["git_version"] = res.git_version.clone().into();
                if !json {
                    println!(
                        "stage 2: {} GEMMs tuned into {} (hipBLASLt {}); next: primus-tune gemm-tune stage 3",
                        res.entries.len(),
                        display_path(&layout.result_file),
                        res.git_version
                    );
                }
            }
            Err(e) => eprintln!("stage 2: no usable result file: {e}"),
        },
        _ => {
            doc["comparison"] = serde_json::to_value(&out.comparison).unwrap_or_default();
            doc["override_file"] = serde_json::to_value(&plan.override_file).unwrap_or_default();
            match &out.comparison {
                Some(c) if !json => {
                    println!(
                        "stage 3: baseline {:.1} ms, tuned {:.1} ms per step: {}",
                        c.baseline_ms,
                        c.tuned_ms,
                        stage::comparison_text(c.change, c.change_ci)
                    );
                    if c.change < -c.change_ci {
                        println!(
                            "use it in later trials: primus-tune run --gemm-tuned / sweep --gemm-tuned"
                        );
                    }
                }
                Some(_) => {}
                None => eprintln!("stage 3: no comparison (a trial did not complete)"),
            }
        }
    }
    if json {
        print_json(&doc);
    }
    Ok(if out.completed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
