//! The CPU proxy: a tiny, real transformer training loop that stands in for a Primus job.
//!
//! `primus-tune proxy --resolved <trial>/resolved.json --iters N` (profile `proxy-cpu`) reads the
//! trial's flat Megatron parameters, scales the model down (see [`ProxyShape::from_resolved`])
//! and trains it for `N` iterations on one core, printing one upstream-Megatron iteration line
//! per iteration and Megatron's `report_memory` line after iteration 10 (or the last one if
//! fewer). The run engine, the log parser and the failure detector therefore see exactly what a
//! real job prints, without Primus or a GPU.
//!
//! Nothing printed is invented:
//! - *elapsed time* is the wall time of the iteration (data, forward, backward, optimizer);
//! - *TFLOP/s* is the FLOPs of the GEMMs the proxy really executed (`2·m·n·k` each, recompute
//!   included) divided by that time;
//! - *lm loss* is the mean cross entropy of the next-token objective on the mock data;
//! - *grad norm* is the global L2 norm of the gradients before clipping;
//! - *learning rate* is the value the Adam step used (Megatron's warmup + decay schedule from
//!   the config);
//! - *global batch size* is micro batches run × micro batch size × data-parallel size, which is
//!   the config's `global_batch_size` unless the micro-batch count was capped;
//! - the memory line reports the bytes the proxy holds (weights, gradients and Adam states, plus
//!   the activations kept for backward) as *allocated*, their peak as *max allocated*, and the
//!   process's resident set (`VmRSS` / `VmHWM` from `/proc/self/status`) as *reserved* /
//!   *max reserved*.
//!
//! The model: token embedding; per layer a causal multi-head attention (QKV projection, grouped
//! query heads when configured, `softmax(QKᵀ/√d)·V` per sequence and head, output projection)
//! and either a dense MLP (SwiGLU or GeLU) or an MoE block (softmax router, real top-k routing:
//! only the chosen experts' GEMMs run, on the tokens routed to them; optional shared expert);
//! residual connections, no norms; untied LM head; Adam(W) with global-norm clipping. Backward
//! computes every weight gradient with GEMMs (≈2× the forward FLOPs). Recompute `full` keeps
//! only each recomputed layer's input and reruns its forward during backward; `selective` drops
//! the attention probabilities and recomputes them (Megatron's core-attention recompute).
//! Without `gradient_accumulation_fusion` each micro batch's weight gradients go through a
//! separate buffer that is then added, as in Megatron. All matmuls go through
//! `matrixmultiply::sgemm` (f32, single-threaded; `bf16` does not change the CPU arithmetic);
//! buffers come from a caching allocator so steady iterations do not page-fault.

// Held at 120 lines a function (clippy.toml), as the run engine and the search are.
#![cfg_attr(not(test), deny(clippy::too_many_lines))]
mod attention;
mod mlp;
mod model;
mod moe;
mod printer;
mod shape;
mod tensor;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod titan_tests;
mod trainer;

use attention::*;
use mlp::*;
use model::*;
use moe::*;
use printer::*;
pub use shape::*;
use tensor::*;
#[cfg(any(test, feature = "testkit"))]
pub use trainer::StepStats;
pub use trainer::Trainer;

use crate::util::rng::Rng;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// `MemAvailable` of `/proc/meminfo` in bytes (None where it cannot be read).
pub fn host_available_bytes() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u128 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Why the proxy cannot run this shape on a host with `available` bytes free (None: it fits,
/// or the host's memory is unknown).
pub fn too_big(shape: &ProxyShape, available: Option<u128>) -> Option<String> {
    let need = shape.estimated_bytes();
    let available = available?;
    let gib = |b: u128| b as f64 / (1u64 << 30) as f64;
    (need > available).then(|| {
        format!(
            "the CPU proxy would need about {:.1} GiB of host memory for this shape, {:.1} GiB is available ({}); choose smaller sizes (hidden_size, ffn_hidden_size, seq_length, micro_batch_size, padded_vocab_size)",
            gib(need),
            gib(available),
            shape.describe()
        )
    })
}

/// `VmRSS` / `VmHWM` of this process in bytes (0 where `/proc` is unavailable).
fn proc_memory_bytes() -> (u64, u64) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return (0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Trains the proxy for `iters` iterations, printing a description line, one Megatron iteration
/// line per iteration and the memory line after iteration 10 (or the last one if fewer).
/// Every line is flushed as it is written.
pub fn run(shape: &ProxyShape, iters: u64, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "{}", shape.describe())?;
    out.flush()?;
    if let Some(why) = too_big(shape, host_available_bytes()) {
        return Err(io::Error::new(io::ErrorKind::OutOfMemory, why));
    }
    let mut trainer = Trainer::new(shape);
    let params = trainer.param_bytes();
    let memory_after = iters.min(10);
    let global_batch = shape.global_batch();
    for _ in 0..iters {
        let st = trainer.step();
        let line = IterationLine {
            timestamp: &timestamp(),
            iteration: st.iteration,
            train_iters: iters,
            consumed_samples: st.iteration * global_batch,
            elapsed_ms: st.elapsed_s * 1e3,
            tflops: st.tflops(),
            learning_rate: st.learning_rate,
            global_batch,
            loss: st.loss,
            loss_scale: 1.0,
            grad_norm: st.grad_norm,
            skipped: u64::from(st.skipped),
            nan: u64::from(st.nan),
        };
        writeln!(out, "{}", line.render())?;
        out.flush()?;
        if st.iteration == memory_after {
            let (live, peak) = trainer.activation_bytes();
            let (rss, hwm) = proc_memory_bytes();
            let mb = |b: usize| b as f64 / 1_048_576.0;
            let mbs = [
                mb(params + live),
                mb(params + peak),
                mb(rss as usize),
                mb(hwm as usize),
            ];
            writeln!(out, "{}", memory_line(st.iteration, mbs))?;
            out.flush()?;
        }
    }
    Ok(())
}

/// Reads `resolved.json` (a JSON object), derives the shape and [`run`]s it. A file that is not
/// valid JSON is an `InvalidData` error (the message does not repeat the path).
pub fn run_resolved_file(path: &Path, iters: u64, out: &mut impl Write) -> io::Result<()> {
    // A regular file under the input cap: a FIFO would block, `/dev/zero` fill memory.
    use crate::util::input::{cap_bytes, read_text};
    let text = read_text(path, cap_bytes()).map_err(io::Error::from)?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("not valid JSON: {e}")))?;
    run(&ProxyShape::from_resolved(&value), iters, out)
}
