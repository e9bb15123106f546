//! `primus-tune gpus [--json]`: detected GPUs, the backend, and static facts from the hardware table.
//! A GPU backend named with `--backend` (or the defaults file's `backend`) that finds no GPU
//! exits with status 2.

use super::monitor::TelemetryArgs;
use super::{CliError, print_json};
use crate::telemetry::hardware;
use crate::telemetry::select;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct GpusArgs {
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &GpusArgs) -> Result<ExitCode, CliError> {
    let asked = a.telemetry.backend()?;
    let (backend, notes) = select::open(&asked.value, &a.telemetry.roots())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let gpus = backend
        .as_ref()
        .map(|b| b.gpus().to_vec())
        .unwrap_or_default();
    let name = backend.as_ref().map(|b| b.name());
    // A GPU backend asked for by name that finds none is a failure (status 2); `auto` on a
    // machine without GPUs and `host` report what there is.
    if gpus.is_empty() && !matches!(asked.value.as_str(), "auto" | "host") {
        let why = if notes.is_empty() {
            "it found no GPU".to_string()
        } else {
            notes.join("; ")
        };
        let named = match &asked.origin {
            crate::app::defaults::Origin::Flag(_) => format!("--backend {}", asked.value),
            o => format!("backend {} ({})", asked.value, o.text()),
        };
        return Err(CliError::Failed(format!("{named}: no GPU: {why}")));
    }
    if a.json {
        let rows: Vec<serde_json::Value> = gpus
            .iter()
            .map(|g| {
                let m = hardware::lookup(&g.name);
                serde_json::json!({
                    "index": g.index,
                    "name": g.name,
                    "backend": g.backend,
                    "bus_id": g.bus_id,
                    "uuid": g.uuid,
                    "vram_total_bytes": g.vram_total_bytes,
                    "compute_units": g.compute_units.or(m.map(|m| m.compute_units)),
                    "power_cap_w": g.power_cap_w,
                    "physical_id": g.physical_id,
                    "compute_partition": g.compute_partition,
                    "memory_partition": g.memory_partition,
                    "model": m.map(|m| m.name.clone()),
                    "peak_bf16_tflops": m.map(|m| m.peak_bf16_tflops),
                    "peak_fp8_tflops": m.map(|m| m.peak_fp8_tflops),
                })
            })
            .collect();
        print_json(&serde_json::json!({
            "backend": name,
            "gpus": rows,
            "unavailable": notes,
        }));
        return Ok(ExitCode::SUCCESS);
    }
    match name {
        Some(n) => println!(
            "backend: {n}, {}",
            crate::util::text::count(gpus.len(), "GPU", "GPUs")
        ),
        None => println!("no GPU found: {}", notes.join("; ")),
    }
    for g in &gpus {
        let m = hardware::lookup(&g.name);
        let cus = g.compute_units.or(m.map(|m| m.compute_units));
        println!(
            "  {} {}{} | VRAM {} | {} | peak BF16 {} / FP8 {} TFLOP/s{}{}",
            g.index,
            g.name,
            g.bus_id
                .as_ref()
                .map(|b| format!(" ({b})"))
                .unwrap_or_default(),
            g.vram_total_bytes.map_or("?".into(), |b| format!(
                "{:.1} GiB",
                b as f64 / (1u64 << 30) as f64
            )),
            cus.map_or("CUs ?".into(), |c| format!("{c} CUs/SMs")),
            m.map_or("?".into(), |m| m.peak_bf16_tflops.to_string()),
            m.map_or("?".into(), |m| m.peak_fp8_tflops.to_string()),
            g.power_cap_w
                .map(|w| format!(" | cap {w:.0} W"))
                .unwrap_or_default(),
            match (&g.compute_partition, &g.memory_partition) {
                (Some(c), Some(mm)) => format!(" | {c}/{mm}"),
                (Some(c), None) => format!(" | {c}"),
                _ => String::new(),
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
