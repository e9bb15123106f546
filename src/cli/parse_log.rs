//! `primus-tune parse-log LOGFILE [--json]`: the trial log parser, offline.

use super::CliError;
use crate::domain::trial::Summary;
use crate::domain::trial::{ExitInfo, Iteration, LogEvent, MemoryReport, RunShape};
use crate::run::failure::FailureDetector;
use crate::run::logparse::LogParser;
use crate::run::steady::SteadyConfig;
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ParseLogArgs {
    /// A training log (Megatron, Primus or TorchTitan console output, or a Primus debug.log).
    pub logfile: PathBuf,
    /// Print JSON: {"iterations": [...], "summary": {...}, "failure": null | {class, line}}.
    #[arg(long)]
    pub json: bool,
    /// Sequence length, to derive tokens/s/GPU when the log does not print it (and a TorchTitan
    /// log's step times, which it prints as tokens/s: step = seq × global batch / GPUs / tps).
    #[arg(long)]
    pub seq_length: Option<u64>,
    /// Global batch size, to derive tokens/s/GPU or TorchTitan's step times (default: from the
    /// log lines).
    #[arg(long)]
    pub global_batch_size: Option<u64>,
    /// GPUs of the run, to derive tokens/s/GPU or TorchTitan's step times.
    #[arg(long, default_value_t = 1)]
    pub world_size: u64,
    /// The early-stop target the summary reports against (CI half-width / median).
    #[arg(long, default_value_t = 0.01)]
    pub ci_target: f64,
}

pub fn run(a: &ParseLogArgs) -> Result<ExitCode, CliError> {
    let unreadable = |e: &dyn std::fmt::Display| CliError::input(&a.logfile, e);
    // A regular file only: a FIFO would block, /dev/zero would never end.
    let file = crate::util::input::open_regular(&a.logfile).map_err(|e| unreadable(&e))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut rows = Rows::start(&mut out, a.json).map_err(|e| unreadable(&e))?;
    let parsed = parse(a, file, &mut |i| rows.write(&mut out, i)).map_err(|e| unreadable(&e))?;
    let Parsed {
        iters,
        memory,
        skipped,
        failure,
    } = parsed;
    let gbs = a
        .global_batch_size
        .or_else(|| iters.iter().rev().find_map(|i| i.global_batch_size));
    let shape = match (a.seq_length, gbs) {
        (Some(seq), Some(g)) => Some(RunShape {
            seq_length: seq,
            global_batch_size: g,
            world_size: a.world_size.max(1),
        }),
        _ => None,
    };
    let cfg = SteadyConfig {
        ci_target: a.ci_target,
        ..SteadyConfig::default()
    };
    let summary = Summary::from_parts(&iters, &memory, shape, &cfg);
    if a.json {
        let mut rest = serde_json::json!({
            "memory_reports": memory,
            "summary": summary,
            "failure": failure,
            "overlong_lines": {"lines": skipped.lines, "bytes_skipped": skipped.bytes},
        });
        crate::util::num::tidy_json(&mut rest);
        rows.finish_json(&mut out, &rest)?;
        return Ok(ExitCode::SUCCESS);
    }
    drop(out);
    if skipped.lines > 0 {
        eprintln!(
            "note: {} longer than {} MiB cut there ({} bytes skipped)",
            crate::util::text::count(skipped.lines as usize, "line", "lines"),
            crate::util::lines::MAX_LINE >> 20,
            skipped.bytes
        );
    }
    println!();
    print_summary(&summary);
    match &failure {
        Some(fl) => println!(
            "failure: {}{}",
            fl.class.label(),
            fl.line
                .as_ref()
                .map(|l| format!("\n  first line: {l}"))
                .unwrap_or_default()
        ),
        None => println!("failure: none found"),
    }
    Ok(ExitCode::SUCCESS)
}

/// What a log holds once read: the iterations (kept for the summary), the memory reports, the
/// overlong lines cut and the failure found.
struct Parsed {
    iters: Vec<Iteration>,
    memory: Vec<MemoryReport>,
    skipped: crate::util::lines::Skipped,
    failure: Option<crate::domain::trial::Failure>,
}

/// Read the log line by line, handing each iteration to `emit` as it is parsed (the output is
/// written while the log is read: nothing but the summary's inputs is held).
fn parse(
    a: &ParseLogArgs,
    file: std::fs::File,
    emit: &mut dyn FnMut(&Iteration) -> std::io::Result<()>,
) -> std::io::Result<Parsed> {
    // TorchTitan prints no step time: with the shape given, its tokens per second give one.
    let given = a
        .seq_length
        .zip(a.global_batch_size)
        .map(|(seq, g)| RunShape {
            seq_length: seq,
            global_batch_size: g,
            world_size: a.world_size.max(1),
        });
    let mut parser = LogParser::with_shape(given);
    let mut detector = FailureDetector::new();
    let mut p = Parsed {
        iters: Vec::new(),
        memory: Vec::new(),
        skipped: crate::util::lines::Skipped::default(),
        failure: None,
    };
    let mut reader = std::io::BufReader::new(file);
    let mut buf = Vec::new();
    let max = crate::util::lines::MAX_LINE;
    while crate::util::lines::read_line(&mut reader, &mut buf, max, &mut p.skipped)? {
        let text = String::from_utf8_lossy(&buf);
        let line = text.trim_end_matches(['\n', '\r']);
        detector.feed(line);
        for ev in parser.feed(line) {
            match ev {
                LogEvent::Iteration(mut i) => {
                    emit(&i)?;
                    // The summary reads no timestamp: not keeping it saves a string a line.
                    i.timestamp = None;
                    p.iters.push(i);
                }
                LogEvent::Memory(m) => p.memory.push(m),
                LogEvent::Theoretical(_) => {}
            }
        }
    }
    p.failure = detector.finish(&ExitInfo::default(), p.iters.len() as u64);
    Ok(p)
}

/// The iterations written as they are parsed: a table row each, or an element of the JSON
/// document's `iterations` array (pretty-printed as `print_json` prints a whole document, so
/// the output reads as before; `iterations` now comes first, the other keys after it).
struct Rows {
    json: bool,
    written: u64,
}

impl Rows {
    /// Write what comes before the first iteration: the table's header, or the document's
    /// opening up to its `iterations` array.
    fn start(out: &mut impl std::io::Write, json: bool) -> std::io::Result<Self> {
        if json {
            write!(out, "{{\n  \"iterations\": [")?;
        } else {
            table_header(out)?;
        }
        Ok(Rows { json, written: 0 })
    }

    fn write(&mut self, out: &mut impl std::io::Write, i: &Iteration) -> std::io::Result<()> {
        if self.json {
            let mut v = serde_json::to_value(i).map_err(std::io::Error::other)?;
            crate::util::num::tidy_json(&mut v);
            let text = serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?;
            let sep = if self.written == 0 { "\n" } else { ",\n" };
            write!(out, "{sep}    {}", text.replace('\n', "\n    "))?;
        } else {
            table_row(out, i)?;
        }
        self.written += 1;
        Ok(())
    }

    /// Close the `iterations` array and write the document's other keys (`rest`, an object).
    fn finish_json(
        &self,
        out: &mut impl std::io::Write,
        rest: &serde_json::Value,
    ) -> std::io::Result<()> {
        if self.written > 0 {
            write!(out, "\n  ")?;
        }
        write!(out, "]")?;
        let text = serde_json::to_string_pretty(rest).map_err(std::io::Error::other)?;
        // `rest` prints as "{\n  ...\n}": its members follow the array.
        let members = text.strip_prefix('{').unwrap_or(&text);
        writeln!(out, ",{members}")?;
        out.flush()
    }
}

fn table_header(out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>6} {:>11} {:>10} {:>12} {:>12} {:>9}",
        "iter", "step ms", "TFLOP/s", "tokens/s/GPU", "loss", "mem GiB"
    )
}

fn table_row(out: &mut impl std::io::Write, i: &Iteration) -> std::io::Result<()> {
    let f = |v: Option<f64>, p: usize| v.map_or("-".into(), |x| format!("{x:.p$}"));
    writeln!(
        out,
        "{:>6} {:>11} {:>10} {:>12} {:>12} {:>9}",
        i.iteration,
        f(i.elapsed_ms, 1),
        f(i.tflops_per_gpu, 1),
        f(i.tokens_per_s_per_gpu, 1),
        i.loss.map_or("-".into(), |l| format!("{l:.4}")),
        f(i.mem_used_gib.or(i.rocm_max_mem_used_gib), 2)
    )
}

/// The steady-state lines shared by `run` and `parse-log`.
pub fn print_summary(s: &Summary) {
    match (s.median_step_ms, s.ci95_ms) {
        (Some(m), Some(ci)) => println!(
            "  steady state: n={} after {} warm-up | median step {m:.1} ms ± {ci:.1} ms (95% CI, ±{:.2}%) | CV {:.1}%{}",
            s.n,
            s.warmup,
            if m > 0.0 { 100.0 * ci / m } else { 0.0 },
            100.0 * s.cv.unwrap_or(0.0),
            if s.stable == Some(false) {
                " | UNSTABLE"
            } else {
                ""
            }
        ),
        (Some(m), None) => println!(
            "  steady state: n={} after {} warm-up | median step {m:.1} ms (one steady sample: no \
             interval, not stable)",
            s.n, s.warmup
        ),
        _ => println!("  steady state: not enough iterations"),
    }
    // A CPU stand-in's figures are its process's, not a GPU's.
    let stand_in = s.basis.as_ref().is_some_and(|b| b.is_proxy());
    let per = if stand_in { " per process" } else { "/GPU" };
    let mut parts = Vec::new();
    if let Some(t) = s.tokens_per_s_per_gpu {
        parts.push(format!("{t:.0} tokens/s{per}"));
    }
    if let Some(t) = s.tflops_per_gpu {
        // A CPU proxy runs at GFLOP/s: keep its digits.
        let p = if t < 1.0 { 4 } else { 1 };
        parts.push(format!("{t:.p$} TFLOP/s{per}"));
    }
    if let Some(m) = s.peak_mem_gib {
        parts.push(format!(
            "peak memory {m:.2} GiB ({}{})",
            s.peak_mem_kind
                .map_or(String::new(), |k| format!("{}: ", k.label())),
            s.peak_mem_source.clone().unwrap_or_default()
        ));
    }
    if !parts.is_empty() {
        println!("  {}", parts.join(" | "));
    }
    if let Some(t) = s.startup_s {
        let figures = if stand_in { "figures" } else { "GPU figures" };
        println!("  start-up {t:.1} s (launch → first iteration; not in the {figures})");
    }
    if let Some(b) = &s.basis {
        println!("  basis: {b}");
    }
    if !s.telemetry.is_empty() {
        let span = s.telemetry_span.map_or(
            "over the whole trial (no iteration seen)",
            crate::domain::trial::TelemetrySpan::label,
        );
        println!("  GPU figures {span}:");
    }
    for g in &s.telemetry {
        let f = |v: Option<f64>, u: &str| v.map_or("-".into(), |x| format!("{x:.0}{u}"));
        println!(
            "  GPU {}: util mean {} max {} | VRAM peak {} (trial {}) | power mean {} max {} | sclk min {} median {}{}",
            g.gpu,
            f(g.util_mean_pct, "%"),
            f(g.util_max_pct, "%"),
            g.vram_peak_bytes.map_or("-".into(), |b| format!(
                "{:.2} GiB",
                b as f64 / (1u64 << 30) as f64
            )),
            g.trial_vram_peak_bytes.map_or("-".into(), |b| format!(
                "{:.2} GiB",
                b as f64 / (1u64 << 30) as f64
            )),
            f(g.power_mean_w, " W"),
            f(g.power_max_w, " W"),
            f(g.sclk_min_mhz, " MHz"),
            f(g.sclk_median_mhz, " MHz"),
            if g.throttled {
                format!(" | THROTTLED: {}", g.throttle_reasons.join(", "))
            } else {
                String::new()
            }
        );
    }
}
