//! `primus-tune monitor`: live GPU telemetry as a refreshing table, JSON Lines or CSV. The
//! table (`view.rs`) fits the terminal and is redrawn in place.

mod view;

use super::CliError;
use crate::app::defaults::Resolved;
use crate::telemetry::host::Host;
use crate::telemetry::sampler::{Collector, SamplerConfig, Snapshot, Ticker};
use crate::telemetry::select::{self, Roots};
use crate::telemetry::{GpuInfo, GpuSample};
use clap::Args;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Debug, Args, Clone)]
pub struct TelemetryArgs {
    /// GPU backend: auto, nvml, amdgpu-sysfs, amd-smi, host [default: `backend` of the
    /// defaults file, else auto].
    #[arg(long, value_parser = select::known)]
    pub backend: Option<String>,
    /// Root of the sysfs tree to read (a recorded tree for tests and demos).
    #[arg(long, value_name = "DIR", default_value = "/sys")]
    pub sysfs_root: PathBuf,
    /// Root of the procfs tree (per-process GPU memory, host figures).
    #[arg(long, value_name = "DIR", default_value = "/proc")]
    pub procfs_root: PathBuf,
}

impl TelemetryArgs {
    pub fn roots(&self) -> Roots {
        Roots {
            sysfs: self.sysfs_root.clone(),
            procfs: self.procfs_root.clone(),
        }
    }

    /// The backend: `--backend`, else the defaults file's `backend`, else `auto`.
    pub fn backend(&self) -> Result<Resolved<String>, CliError> {
        Ok(crate::app::Defaults::load()?.backend(self.backend.as_deref()))
    }

    /// How trials sample telemetry with these arguments (None when disabled).
    pub fn setup(
        &self,
        interval_ms: u64,
        disabled: bool,
    ) -> Result<Option<crate::run::trial::TelemetrySetup>, CliError> {
        if disabled {
            return Ok(None);
        }
        Ok(Some(crate::run::trial::TelemetrySetup {
            backend: self.backend()?.value,
            roots: self.roots(),
            config: crate::telemetry::sampler::SamplerConfig {
                interval: std::time::Duration::from_millis(interval_ms.max(10)),
                process_interval: std::time::Duration::from_millis(2000),
            },
        }))
    }
}

/// Telemetry of the trials a command runs (`run`, `sweep`, `gemm-tune stage`).
#[derive(Debug, Clone, Args)]
pub struct TrialTelemetryArgs {
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// Telemetry sampling interval in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub interval: u64,
    /// Do not sample telemetry during the trials.
    #[arg(long)]
    pub no_telemetry: bool,
}

impl TrialTelemetryArgs {
    pub fn setup(&self) -> Result<Option<crate::run::trial::TelemetrySetup>, CliError> {
        self.telemetry.setup(self.interval, self.no_telemetry)
    }
}

#[derive(Debug, Args)]
pub struct MonitorArgs {
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// Sampling interval in milliseconds.
    #[arg(long, default_value_t = 500)]
    pub interval: u64,
    /// Per-process scan interval in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub process_interval: u64,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
    /// JSON Lines: one object per GPU per sample.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// CSV (the default when stdout is not a terminal).
    #[arg(long)]
    pub csv: bool,
    /// A Slurm trial's monitor step: whole snapshots as JSON Lines, named by this node
    /// (`SLURMD_NODENAME`, else the host name), appended to DIR/telemetry-<node>.jsonl.
    #[arg(long, value_name = "DIR", hide = true, conflicts_with_all = ["csv", "json"])]
    pub snapshots_dir: Option<PathBuf>,
}

enum Mode {
    Table,
    Json,
    Csv,
    /// Whole snapshots of a node, one per line.
    Snapshots(String),
}

/// This node's name as Slurm knows it, else the host name.
fn node_name() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .map(|h| h.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "node".into())
}

pub fn run(a: &MonitorArgs) -> Result<ExitCode, CliError> {
    let (backend, notes) = select::open(&a.telemetry.backend()?.value, &a.telemetry.roots())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if backend.is_none() {
        eprintln!(
            "no GPU telemetry ({}); showing host figures only",
            if notes.is_empty() {
                "host backend chosen".into()
            } else {
                notes.join("; ")
            }
        );
    }
    let mode = if a.snapshots_dir.is_some() {
        Mode::Snapshots(node_name())
    } else if a.json {
        Mode::Json
    } else if a.csv || !std::io::stdout().is_terminal() {
        Mode::Csv
    } else {
        Mode::Table
    };
    let host = Host::new(&a.telemetry.procfs_root);
    let cfg = SamplerConfig {
        interval: Duration::from_millis(a.interval.max(10)),
        process_interval: Duration::from_millis(a.process_interval.max(10)),
    };
    // No sampler thread here: the reads and the writes take turns on this thread, which saves
    // two wake-ups per sample (monitor has nothing else to do meanwhile).
    let mut collector = Collector::new(backend, host, &cfg);
    let gpus = collector.gpus();
    let name = collector.backend_name().unwrap_or("host");
    let end = a
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    // One write per sample, however many GPUs (flushed below).
    let sink: Box<dyn Write> = match (&a.snapshots_dir, &mode) {
        (Some(dir), Mode::Snapshots(node)) => {
            let safe: String = node
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = dir.join(format!("telemetry-{safe}.jsonl"));
            Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
                    .map_err(|e| {
                        CliError::CantCreate(format!("cannot create {}: {e}", path.display()))
                    })?,
            )
        }
        _ => Box::new(std::io::stdout().lock()),
    };
    let mut out = std::io::BufWriter::new(sink);
    let mut csv_header: Option<Vec<String>> = None;
    let mut lines_drawn = 0usize;
    // The processes of the last scan (they are read every `--process-interval`).
    let mut procs: Option<Vec<view::ProcRow>> = None;
    let users = crate::util::procinfo::Users::load(std::path::Path::new("/etc/passwd"));
    let mut ticker = Ticker::new(cfg.interval);
    loop {
        let s = collector.collect(0);
        let ok = match mode {
            Mode::Json => write_json(&mut out, &s, &gpus),
            Mode::Snapshots(ref node) => {
                let mut s = s;
                s.node = Some(node.clone());
                serde_json::to_string(&s)
                    .map_err(std::io::Error::other)
                    .and_then(|j| writeln!(out, "{j}"))
            }
            Mode::Csv => write_csv(&mut out, &s, &gpus, &mut csv_header),
            Mode::Table => {
                if let Some(p) = &s.processes {
                    procs = Some(process_rows(p, &a.telemetry.procfs_root, &users));
                }
                // One column short of the width (no line ends in the last column, where
                // terminals wrap) and one row short of the height: the cursor then goes back
                // up over exactly the lines drawn, so the table is redrawn in place.
                let (w, h) = crate::tui::terminal_size().unwrap_or((80, 24));
                let lines = view::view(
                    &s,
                    &gpus,
                    name,
                    procs.as_deref(),
                    usize::from(w.saturating_sub(1)).max(20),
                    usize::from(h.saturating_sub(1)).max(3),
                );
                let up = if lines_drawn > 0 {
                    format!("\r\x1b[{lines_drawn}A")
                } else {
                    String::new()
                };
                lines_drawn = lines.len();
                let mut text = up;
                for l in &lines {
                    text.push_str(l);
                    text.push_str("\x1b[K\n");
                }
                // A shorter table than the last one: clear what is left below.
                text.push_str("\x1b[J");
                write!(out, "{text}")
            }
        };
        if ok.and_then(|()| out.flush()).is_err() {
            break; // the reader went away
        }
        let wait = ticker.advance();
        if end.is_some_and(|e| ticker.next() >= e) {
            break;
        }
        std::thread::sleep(wait);
    }
    Ok(ExitCode::SUCCESS)
}

/// The processes of a scan with their user, command line and trial.
fn process_rows(
    p: &[crate::telemetry::ProcessSample],
    procfs: &std::path::Path,
    users: &crate::util::procinfo::Users,
) -> Vec<view::ProcRow> {
    let key = crate::run::trial::materialise::TRIAL_ID_ENV;
    p.iter()
        .map(|x| {
            let mut info = crate::util::procinfo::info(procfs, x.pid, users, key);
            if info.command.is_empty() {
                info.command = x.name.clone().unwrap_or_default();
            }
            view::ProcRow {
                pid: x.pid,
                gpu: x.gpu,
                vram_bytes: x.vram_bytes,
                info,
            }
        })
        .collect()
}

/// One JSON Lines record (borrowed: nothing is copied to print a sample).
#[derive(serde::Serialize)]
struct GpuRecord<'a> {
    ts: f64,
    gpu: u32,
    name: Option<&'a str>,
    util_pct: Option<f64>,
    mem_util_pct: Option<f64>,
    vram_used_bytes: Option<u64>,
    vram_total_bytes: Option<u64>,
    power_w: Option<f64>,
    temp_c: &'a std::collections::BTreeMap<String, f64>,
    sclk_mhz: Option<f64>,
    mclk_mhz: Option<f64>,
    throttle: Option<&'a [String]>,
    sample_us: u64,
}

fn gpu_record<'a>(s: &'a Snapshot, g: &'a GpuSample, gpus: &'a [GpuInfo]) -> GpuRecord<'a> {
    GpuRecord {
        ts: s.ts_ms as f64 / 1000.0,
        gpu: g.gpu,
        name: gpus
            .iter()
            .find(|i| i.index == g.gpu)
            .map(|i| i.name.as_str()),
        util_pct: g.util_pct,
        mem_util_pct: g.mem_util_pct,
        vram_used_bytes: g.vram_used_bytes,
        vram_total_bytes: g.vram_total_bytes,
        power_w: g.power_w,
        temp_c: &g.temp_c,
        sclk_mhz: g.sclk_mhz,
        mclk_mhz: g.mclk_mhz,
        throttle: g.throttle.as_deref(),
        sample_us: s.cost_us,
    }
}

fn write_json(out: &mut impl Write, s: &Snapshot, gpus: &[GpuInfo]) -> std::io::Result<()> {
    use crate::util::num::json_line;
    if s.gpus.is_empty() {
        let v = serde_json::json!({"ts": s.ts_ms as f64 / 1000.0, "host": s.host});
        return writeln!(out, "{}", json_line(&v).map_err(std::io::Error::other)?);
    }
    for g in &s.gpus {
        let line = json_line(&gpu_record(s, g, gpus)).map_err(std::io::Error::other)?;
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn write_csv(
    out: &mut impl Write,
    s: &Snapshot,
    gpus: &[GpuInfo],
    header: &mut Option<Vec<String>>,
) -> std::io::Result<()> {
    let sensors = header.get_or_insert_with(|| {
        let mut labels: Vec<String> = s
            .gpus
            .iter()
            .flat_map(|g| g.temp_c.keys().cloned())
            .collect();
        labels.sort();
        labels.dedup();
        let mut cols: Vec<String> = [
            "ts",
            "gpu",
            "name",
            "util_pct",
            "vram_used_bytes",
            "vram_total_bytes",
            "power_w",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        cols.extend(labels.iter().map(|l| format!("temp_{l}_c")));
        cols.extend(["sclk_mhz".into(), "mclk_mhz".into(), "host_cpu_pct".into()]);
        let _ = writeln!(out, "{}", cols.join(","));
        labels
    });
    let f = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x}"));
    let u = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
    for g in &s.gpus {
        let name = gpus
            .iter()
            .find(|i| i.index == g.gpu)
            .map_or(String::new(), |i| i.name.replace([',', '"'], " "));
        let mut row = vec![
            format!("{:.3}", s.ts_ms as f64 / 1000.0),
            g.gpu.to_string(),
            name,
            f(g.util_pct),
            u(g.vram_used_bytes),
            u(g.vram_total_bytes),
            f(g.power_w),
        ];
        row.extend(sensors.iter().map(|l| f(g.temp_c.get(l).copied())));
        row.extend([f(g.sclk_mhz), f(g.mclk_mhz), f(s.host.cpu_pct)]);
        writeln!(out, "{}", row.join(","))?;
    }
    Ok(())
}
