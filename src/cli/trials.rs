//! `primus-tune trials [CONFIG] [--all] [--status WORD] [--json | --csv]`, `trials show ID` and `trials compare A B`.

use super::{CliError, display_path, print_json};
use crate::app::views::compare::{Change, CompareVerdict, Comparison, show_json};
use crate::app::views::trials::{self, TrialSummary};
use crate::app::{Session, SessionOptions};
use crate::domain::job::Job;
use crate::domain::trial::Summary;
use crate::store::{TrialFilter, TrialRow, TrialStatus};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

const GIB: f64 = (1u64 << 30) as f64;

#[derive(Debug, Args)]
pub struct TrialsArgs {
    #[command(subcommand)]
    pub command: Option<TrialsCommand>,
    #[command(flatten)]
    pub db: DbArgs,
    /// Only trials shown with this word in the status column: a status (running, completed,
    /// failed, stopped, interrupted) or the failure class of a trial that did not complete
    /// (oom, host-oom, nccl, hang, traceback, config-assertion, non-zero-exit, killed-by-user,
    /// timeout, not-launched, job-time-limit, job-cancelled, node-fail, preempted, job-lost,
    /// unschedulable, pending-limit).
    #[arg(long, value_name = "WORD")]
    pub status: Option<String>,
    /// Only the last N trials.
    #[arg(long)]
    pub last: Option<usize>,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Export CSV.
    #[arg(long)]
    pub csv: bool,
    /// List the trials of every experiment in the workspace, with an experiment column
    /// (default: the experiment's own).
    #[arg(long)]
    pub all: bool,
}

/// Which workspace to read: an experiment's, a folder, or a database file.
#[derive(Debug, Args, Clone)]
pub struct DbArgs {
    /// The experiment whose trials to read (the same as --config).
    #[arg(value_name = "CONFIG", conflicts_with = "config")]
    pub experiment: Option<PathBuf>,
    /// The trial database (default: the workspace's; without --config, ./.primus-tune/ when it
    /// holds one, else the bundled example's).
    #[arg(long, global = true)]
    pub db: Option<PathBuf>,
    /// The experiment whose trials to read.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// The workspace folder (as for `run`).
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TrialsCommand {
    /// One trial in detail: settings, figures, failure, iterations.
    Show {
        id: i64,
        /// Print JSON (the trial with its iterations).
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Export the trial's iterations as CSV.
        #[arg(long)]
        csv: bool,
    },
    /// Two trials side by side: the flags they ran differently, step time, throughput and
    /// memory with the change and its 95 % interval, and a verdict (B against A).
    Compare {
        a: i64,
        b: i64,
        /// Print JSON: {a, b, differences: [{flag, a, b}], median_step_ms: {a, b, change_pct,
        /// ci95_pct}, ..., verdict}.
        #[arg(long)]
        json: bool,
    },
}

impl DbArgs {
    pub fn session(&self) -> Result<Session, CliError> {
        Ok(Session::open(SessionOptions {
            config: self.config.clone().or_else(|| self.experiment.clone()),
            db: self.db.clone(),
            workspace: self.workspace.clone(),
            workspace_here: true,
            ..SessionOptions::default()
        })?)
    }
}

pub fn run(a: &TrialsArgs) -> Result<ExitCode, CliError> {
    let mut session = a.db.session()?;
    session.all_experiments |= a.all;
    let usage = |e: crate::store::StoreError| CliError::Failed(e.to_string());
    if let Some(TrialsCommand::Compare { a: x, b: y, json }) = &a.command {
        let c = trials::compare(&session, *x, *y)?;
        if *json {
            print_json(&serde_json::to_value(&c).unwrap_or_default());
        } else {
            print_comparison(&c);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(TrialsCommand::Show { id, json, csv }) = &a.command {
        // A trial named must exist: no database is "no input" (66).
        let store = session.require_store()?;
        let t = store
            .trial(*id)
            .map_err(usage)?
            .ok_or_else(|| trials::no_trial(&session, *id))?;
        if *csv {
            let mut out = std::io::stdout().lock();
            store.export_iterations_csv(&mut out, *id).map_err(usage)?;
            return Ok(ExitCode::SUCCESS);
        }
        let iters = store.iterations(*id).map_err(usage)?;
        let summary = trials::summary(&session, *id)?;
        if *json {
            let mut v = serde_json::to_value(&summary).unwrap_or_default();
            v["resolved"] =
                serde_json::to_value(crate::run::trial::trial_params(&t)).unwrap_or_default();
            v["iterations"] = serde_json::to_value(&iters).unwrap_or_default();
            v["memory_reports"] =
                serde_json::to_value(store.memory_reports(*id).map_err(usage)?).unwrap_or_default();
            print_json(&v);
            return Ok(ExitCode::SUCCESS);
        }
        print_detail(&summary, iters.len());
        return Ok(ExitCode::SUCCESS);
    }
    let mut filter = TrialFilter::all();
    if let Some(s) = &a.status {
        filter = trials::with_status(filter, s)?;
    }
    if let Some(n) = a.last {
        filter = filter.last(n);
    }
    if a.csv {
        // A listing of nothing is empty, not an error (as `studies`): the header alone.
        let store = match session.existing_store()? {
            Some(s) => s,
            None => crate::store::Store::open_in_memory().map_err(usage)?,
        };
        let mut out = std::io::stdout().lock();
        store.export_trials_csv(&mut out, &filter).map_err(usage)?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows = trials::list(&session, &filter)?;
    if a.json {
        print_json(&serde_json::to_value(&rows).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    let all = session.all_experiments;
    if rows.is_empty() {
        // Nothing to list is not an error (as `studies`): say how to get something.
        let exp = crate::util::shell::quote(&session.display());
        if all {
            println!("(no trials; run one with: primus-tune run {exp})");
        } else {
            println!(
                "(no trials of {exp}; run one with: primus-tune run {exp}, or --all lists every \
                 experiment's)"
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    // The text columns are as wide as their widest value, so a long profile or experiment
    // name never runs into the next column.
    // A CPU stand-in's figures are its process's, not a GPU's: its profile says so.
    let profile_cell = |t: &TrialSummary| {
        let p = t.profile.clone().unwrap_or_default();
        if t.basis.is_proxy() {
            format!("{p} (stand-in)")
        } else {
            p
        }
    };
    let profile_w = rows
        .iter()
        .map(|t| profile_cell(t).chars().count())
        .fold("profile".len(), usize::max);
    let exp_w = rows
        .iter()
        .map(|t| experiment_name(t).chars().count())
        .fold("experiment".len(), usize::max);
    println!(
        "{:>4} {:<11} {:>10} {:>8} {:>12} {:>8} {:>13}  {:<profile_w$} {}differs from the config",
        "id",
        "status",
        "median ms",
        "±CI %",
        "tokens/s/GPU",
        "TFLOP/s",
        "peak GiB",
        "profile",
        if all {
            format!("{:<exp_w$} ", "experiment")
        } else {
            String::new()
        }
    );
    for t in &rows {
        let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |x| format!("{x:.p$}"));
        let ci = match (t.median_step_ms, t.ci95_ms) {
            (Some(m), Some(c)) if m > 0.0 => format!("{:.2}", 100.0 * c / m),
            _ => "-".into(),
        };
        let status = match &t.failure {
            Some(fl) if t.status != TrialStatus::Completed => serde_json::to_value(fl.class)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| t.status.to_string()),
            _ => t.status.to_string(),
        };
        println!(
            "{:>4} {:<11} {:>10} {:>8} {:>12} {:>8} {:>13}  {:<profile_w$} {}{}",
            t.id,
            status,
            f(t.median_step_ms, 1),
            ci,
            f(t.tokens_per_s_per_gpu, 0),
            f(t.tflops_per_gpu, 1),
            mem_cell(t),
            profile_cell(t),
            if all {
                format!("{:<exp_w$} ", experiment_name(t))
            } else {
                String::new()
            },
            t.settings_text()
        );
    }
    if rows.iter().any(|t| t.basis.is_proxy()) {
        println!(
            "(stand-in): a CPU stand-in's figures, per process and its host's memory: how the \
             knobs it models move the step, not GPU evidence"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Peak memory with what it measures (`61.20 alloc`, `63.80 device`): the kinds differ. A
/// stand-in's peak taken from this node's GPU telemetry is not its own: `-`.
fn mem_cell(t: &TrialSummary) -> String {
    if t.basis.is_proxy()
        && crate::app::views::trials::evidence(t, &t.basis)
            .is_some_and(|(s, _)| s.peak_mem_gib.is_none())
    {
        return "-".into();
    }
    match (t.peak_mem_gib, t.peak_mem_kind()) {
        (Some(g), Some(k)) => format!("{g:.2} {}", k.tag()),
        (Some(g), None) => format!("{g:.2}"),
        _ => "-".into(),
    }
}

fn experiment_name(t: &TrialSummary) -> String {
    t.config_path
        .file_name()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

fn change_text(c: &Change, prec: usize) -> String {
    let ci = c.ci95_pct.map_or(String::new(), |ci| format!(" ± {ci:.1}"));
    format!(
        "{:>12.prec$} {:>12.prec$}   {:+.1}{ci} %",
        c.a, c.b, c.change_pct
    )
}

fn print_comparison(c: &Comparison) {
    println!("trial {} against trial {}", c.b, c.a);
    if c.experiments[0] != c.experiments[1] {
        println!("  experiments: {} | {}", c.experiments[0], c.experiments[1]);
    }
    let [ba, bb] = &c.bases;
    if ba == bb {
        println!("  basis: {ba}");
    } else {
        println!("  basis: trial {}: {ba} | trial {}: {bb}", c.a, c.b);
    }
    if ba.is_proxy() != bb.is_proxy() {
        println!(
            "  note: a CPU stand-in against a GPU measurement: their figures are of different \
             machines, not evidence of one against the other"
        );
    }
    if let (Some(n), Some(m)) = (c.per_samples, c.b_samples) {
        println!(
            "  step times per {n} samples, trial {}'s global batch: trial {} ran {m} a step, \
             its times scaled to {n}",
            c.a, c.b
        );
    }
    println!(
        "  {:<24} {:>12} {:>12}   change (95 % CI)",
        "",
        format!("trial {}", c.a),
        format!("trial {}", c.b)
    );
    let figures = [
        ("median step ms", &c.median_step_ms, 1),
        ("tokens/s/GPU", &c.tokens_per_s_per_gpu, 0),
        ("TFLOP/s/GPU", &c.tflops_per_gpu, 1),
    ];
    for (name, ch, prec) in figures {
        match ch {
            Some(ch) => println!("  {name:<24} {}", change_text(ch, prec)),
            None => println!("  {name:<24} {:>12} {:>12}", "-", "-"),
        }
    }
    let tag = |k: Option<crate::domain::trial::MemorySource>| k.map_or("?", |k| k.tag());
    match (&c.peak_mem_gib, c.peak_mem_kinds) {
        (Some(ch), [k, _]) => println!(
            "  {:<24} {}",
            format!("peak memory GiB ({})", tag(k)),
            change_text(ch, 2)
        ),
        (None, [ka, kb]) if ka != kb => println!(
            "  {:<24} not comparable: trial {} measured {}, trial {} {}",
            "peak memory GiB",
            c.a,
            ka.map_or("nothing", |k| k.label()),
            c.b,
            kb.map_or("nothing", |k| k.label())
        ),
        (None, _) => println!("  {:<24} {:>12} {:>12}", "peak memory GiB", "-", "-"),
    }
    match c.verdict {
        CompareVerdict::Faster | CompareVerdict::Slower => {
            println!("  verdict: trial {} is {}", c.b, c.verdict.text());
        }
        CompareVerdict::NoSignificantDifference => println!(
            "  verdict: no significant difference (the change is within its 95 % interval)"
        ),
        CompareVerdict::SameWithinLaunchNoise => println!(
            "  verdict: same within launch-to-launch noise (beyond the trials' own intervals, \
             within {})",
            c.launch_noise.text()
        ),
        CompareVerdict::NotMeasured => println!(
            "  verdict: not measured (trial {} or {} has no step time)",
            c.a, c.b
        ),
    }
    if c.differences.is_empty() {
        println!("  settings: they ran the same values");
    } else {
        println!("  settings that differ:");
        for d in &c.differences {
            println!(
                "    {:<40} {:>14} {:>14}",
                d.flag,
                show_json(&d.a),
                show_json(&d.b)
            );
        }
    }
}

fn overrides_text(t: &TrialRow) -> String {
    t.overrides
        .iter()
        .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_detail(s: &TrialSummary, stored_iters: usize) {
    let t = &s.row;
    println!("trial {} — {}", t.id, t.status);
    if let Some(f) = &t.failure {
        println!("  failure: {}", f.class.label());
        if let Some(l) = &f.line {
            println!("  cause:   {l}");
        }
    }
    println!(
        "  config:  {} (hash {})",
        t.config_path.display(),
        t.config_hash
    );
    println!("  profile: {}", t.profile.clone().unwrap_or_default());
    println!("  overrides: {}", overrides_text(t));
    println!("  differs from the config now: {}", s.settings_text());
    println!("  argv:    {}", crate::util::shell::join(&t.argv));
    println!("  folder:  {}", t.trial_dir.display());
    println!(
        "  started {} | finished {} | wall {} s | exit {}",
        t.started_at.clone().unwrap_or_else(|| "-".into()),
        t.finished_at.clone().unwrap_or_else(|| "-".into()),
        t.wall_s.map_or("-".into(), |w| format!("{w:.1}")),
        t.exit_code
            .map(|c| c.to_string())
            .or(t.exit_signal.map(|s| format!("signal {s}")))
            .unwrap_or_else(|| "-".into())
    );
    let stop = t
        .stop_reason()
        .map_or(String::new(), |r| format!(" (stop: {})", r.as_str()));
    println!(
        "  iterations: {} seen, {stored_iters} stored{stop}",
        t.iterations_seen
    );
    let (sum, left_out) = crate::app::views::trials::evidence(t, &s.basis).unzip();
    // Its basis is said above (with the profile's for a trial stored before it was kept).
    let sum = sum.map(|mut sum| {
        sum.basis = Some(s.basis.clone());
        sum
    });
    if let Some(j) = &t.job {
        for l in job_lines(j, sum.as_ref().and_then(|s| s.pending_s)) {
            println!("{l}");
        }
    }
    if let Some(note) = left_out.flatten() {
        println!("  note:    {note}");
    }
    if let Some(sum) = &sum {
        super::parse_log::print_summary(sum);
        for l in node_lines(sum) {
            println!("{l}");
        }
    }
}

/// `s` cut to `w` characters, with `…` when cut.
fn cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The queue wait of a batch trial's job, one line: until it started, or (a job that never
/// started) until it ended, or so far.
pub(super) fn queue_line(j: &Job, queued_s: Option<f64>) -> String {
    let waited = queued_s.or_else(|| {
        j.started_ms
            .or(j.ended_ms)
            .map(|t| t.saturating_sub(j.submitted_ms) as f64 / 1000.0)
    });
    match (waited, j.started_ms, j.ended_ms) {
        (Some(w), Some(_), _) => format!("  queued {w:.1} s before the job started (not GPU time)"),
        (Some(w), None, Some(_)) => format!("  queued {w:.1} s; the job never started"),
        (_, None, Some(_)) => "  queued: the job never started".into(),
        _ => "  queued: the job has not started yet".into(),
    }
}

/// A trial's batch job: its scheduler, id and last state seen (with the scheduler's reason),
/// its nodes, its queue wait (the summary's, else from the job's submit and start times).
fn job_lines(j: &Job, queued_s: Option<f64>) -> Vec<String> {
    let mut out = Vec::new();
    let reason = j
        .reason
        .as_ref()
        .map_or(String::new(), |r| format!(" ({r})"));
    let gpus = j.gpus_per_node.map_or(String::new(), |g| {
        format!(
            ", {} each",
            crate::util::text::count(g as usize, "GPU", "GPUs")
        )
    });
    out.push(format!(
        "  job:     {} job {} {}{reason}: {}{gpus}",
        crate::app::launch::view::scheduler_title(&j.scheduler),
        j.id,
        j.state,
        crate::util::text::count(j.nodes as usize, "node", "nodes")
    ));
    if !j.node_list.is_empty() {
        // Long lists keep their first names and a count.
        const SHOWN: usize = 6;
        let mut names = j
            .node_list
            .iter()
            .take(SHOWN)
            .map(|n| cut(n, 24))
            .collect::<Vec<_>>()
            .join(", ");
        if j.node_list.len() > SHOWN {
            names.push_str(&format!(" and {} more", j.node_list.len() - SHOWN));
        }
        out.push(format!("  ran on:  {names}"));
    }
    if let Some(c) = &j.conf {
        out.push(format!("  config:  {}", display_path(c)));
    }
    out.push(queue_line(j, queued_s));
    out
}

/// A trial's nodes, each line within 80 columns: per node its median step and iterations from
/// its own log, its mean host CPU use, the slowest/hottest flags; with several nodes, per GPU
/// its mean utilisation, peak VRAM and hottest sensor (on one node the trial's GPU lines are
/// that node's). Empty for a trial on one machine.
pub(super) fn node_lines(s: &Summary) -> Vec<String> {
    if s.nodes.is_empty() {
        return Vec::new();
    }
    let several = s.nodes.len() >= 2;
    let mut out =
        vec!["  per node (median step and iterations from the node's own log):".to_string()];
    if several && s.nodes.iter().any(|n| !n.gpus.is_empty()) {
        let span = s.telemetry_span.map_or(
            "over the whole trial (no iteration seen)",
            crate::domain::trial::TelemetrySpan::label,
        );
        out.push(format!("  GPU figures per node {span}"));
    }
    out.push(format!(
        "    {:<16} {:>10} {:>10} {:>9}  flags",
        "node", "median ms", "iterations", "mean CPU"
    ));
    for n in &s.nodes {
        let flags: Vec<&str> = [(n.slowest, "slowest"), (n.hottest, "hottest")]
            .into_iter()
            .filter_map(|(on, f)| on.then_some(f))
            .collect();
        out.push(format!(
            "    {:<16} {:>10} {:>10} {:>9}  {}",
            cut(&n.node, 16),
            n.median_step_ms.map_or("-".into(), |m| format!("{m:.1}")),
            n.iterations,
            n.cpu_mean_pct.map_or("-".into(), |c| format!("{c:.0}%")),
            flags.join(" ")
        ));
        if !several {
            continue;
        }
        if n.samples == 0 {
            out.push("      no telemetry from this node".into());
        }
        for g in &n.gpus {
            let temp = g.temp_max_c.values().copied().reduce(f64::max);
            out.push(format!(
                "      GPU {}: util mean {} · VRAM peak {} · hottest {}{}",
                g.gpu,
                g.util_mean_pct.map_or("-".into(), |u| format!("{u:.0}%")),
                g.vram_peak_bytes
                    .map_or("-".into(), |b| format!("{:.2} GiB", b as f64 / GIB)),
                temp.map_or("-".into(), |t| format!("{t:.0} °C")),
                if g.throttled { " · THROTTLED" } else { "" }
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::telemetry::{GpuSummary, NodeSummary};

    fn node(name: &str, step: Option<f64>, slowest: bool, hottest: bool) -> NodeSummary {
        NodeSummary {
            node: name.into(),
            samples: 12,
            gpus: (0..2)
                .map(|g| GpuSummary {
                    gpu: g,
                    samples: 12,
                    util_mean_pct: Some(99.6),
                    vram_peak_bytes: Some(191 << 30),
                    temp_max_c: [("junction".to_string(), 104.6)].into_iter().collect(),
                    throttled: g == 1,
                    ..GpuSummary::default()
                })
                .collect(),
            cpu_mean_pct: Some(35.4),
            temp_max_c: Some(104.6),
            median_step_ms: step,
            iterations: 40,
            slowest,
            hottest,
        }
    }

    /// Each node's line says its own step time, iterations, CPU and flags; with several nodes
    /// each GPU has its line; every line fits 80 columns, even with a long node name.
    #[test]
    fn node_lines_fit_80_columns_and_flag_the_slowest() {
        let s = Summary {
            telemetry_span: Some(crate::domain::trial::TelemetrySpan::Training),
            nodes: vec![
                node(
                    "gpu-node-0001.cluster.example.com",
                    Some(1210.04),
                    false,
                    true,
                ),
                node("n2", Some(12345.67), true, false),
            ],
            ..Summary::default()
        };
        let lines = node_lines(&s);
        for l in &lines {
            assert!(l.chars().count() <= 80, "{l:?} is wider than 80 columns");
        }
        let text = lines.join("\n");
        assert!(
            text.contains("    gpu-node-0001.c…     1210.0         40       35%  hottest"),
            "{text}"
        );
        assert!(
            text.contains("    n2                  12345.7         40       35%  slowest"),
            "{text}"
        );
        assert!(
            text.contains(
                "      GPU 1: util mean 100% · VRAM peak 191.00 GiB · hottest 105 °C · THROTTLED"
            ),
            "{text}"
        );
        assert!(
            text.contains("GPU figures per node from the first iteration to the last"),
            "{text}"
        );
        // On one node the trial's own GPU lines are that node's: no GPU line here.
        let one = Summary {
            nodes: vec![node("n1", None, false, false)],
            ..Summary::default()
        };
        let text = node_lines(&one).join("\n");
        assert!(
            text.contains("    n1                        -         40       35%"),
            "{text}"
        );
        assert!(!text.contains("GPU 0"), "{text}");
        assert!(node_lines(&Summary::default()).is_empty());
    }

    #[test]
    fn job_lines_say_the_state_the_nodes_and_the_queue_wait() {
        let mut j = Job {
            scheduler: "slurm".into(),
            id: "12".into(),
            nodes: 2,
            gpus_per_node: Some(8),
            state: "PENDING".into(),
            reason: Some("Resources".into()),
            submitted_ms: 1_000,
            ..Job::default()
        };
        let text = job_lines(&j, None).join("\n");
        assert!(
            text.contains("  job:     Slurm job 12 PENDING (Resources): 2 nodes, 8 GPUs each"),
            "{text}"
        );
        assert!(text.contains("the job has not started yet"), "{text}");
        j.state = "COMPLETED".into();
        j.reason = None;
        j.started_ms = Some(3_100);
        j.node_list = vec!["n1".into(), "n2".into()];
        let text = job_lines(&j, None).join("\n");
        assert!(text.contains("  ran on:  n1, n2"), "{text}");
        assert!(
            text.contains("  queued 2.1 s before the job started (not GPU time)"),
            "{text}"
        );
        // The summary's figure comes first.
        assert!(job_lines(&j, Some(4.0)).join("\n").contains("queued 4.0 s"));
        // A job cancelled in the queue never started: its wait is not "before it started".
        j.started_ms = None;
        j.ended_ms = Some(3_000);
        j.state = "CANCELLED".into();
        let text = job_lines(&j, Some(2.0)).join("\n");
        assert!(
            text.contains("  queued 2.0 s; the job never started"),
            "{text}"
        );
        assert!(!text.contains("before the job started"), "{text}");
    }
}

#[cfg(test)]
mod status_help_tests {
    use clap::CommandFactory;

    #[test]
    fn the_status_help_names_every_word_it_accepts() {
        let cmd = super::super::Cli::command();
        let trials = cmd.find_subcommand("trials").expect("trials");
        let arg = trials
            .get_arguments()
            .find(|a| a.get_id() == "status")
            .expect("--status");
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        for w in crate::app::views::trials::status_words() {
            assert!(help.contains(&w), "{w} missing from: {help}");
        }
    }
}
