//! What the proxy prints, as upstream Megatron prints it: the iteration line and
//! `report_memory`'s line.

use super::*;

/// Python's `'{:.Nf}'`.
pub(super) fn py_f(x: f64, prec: usize) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{x:.prec$}")
    }
}

/// Python's `'{:.NE}'`: a two-digit signed exponent (`9.000000E-05`).
pub(super) fn py_e(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return "NAN".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "INF" } else { "-INF" }.to_string();
    }
    let s = format!("{x:.prec$E}");
    match s.split_once('E') {
        Some((mantissa, exp)) => {
            let e: i32 = exp.parse().unwrap_or(0);
            format!("{mantissa}E{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
        }
        None => s,
    }
}

/// Megatron's `datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f')`, in UTC.
pub(super) fn timestamp() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_micros()
    )
}

/// The fields of one Megatron iteration line.
pub(super) struct IterationLine<'a> {
    pub(super) timestamp: &'a str,
    pub(super) iteration: u64,
    pub(super) train_iters: u64,
    pub(super) consumed_samples: u64,
    pub(super) elapsed_ms: f64,
    pub(super) tflops: f64,
    pub(super) learning_rate: f64,
    pub(super) global_batch: u64,
    pub(super) loss: f64,
    pub(super) loss_scale: f64,
    pub(super) grad_norm: f64,
    pub(super) skipped: u64,
    pub(super) nan: u64,
}

impl IterationLine<'_> {
    pub(super) fn render(&self) -> String {
        format!(
            " [{}] iteration {:8}/{:8} | consumed samples: {:12} | elapsed time per iteration (ms): {} | \
             throughput per GPU (TFLOP/s/GPU): {} | learning rate: {} | global batch size: {:5} | \
             lm loss: {} | loss scale: {} | grad norm: {} | number of skipped iterations: {:3} | \
             number of nan iterations: {:3} |",
            self.timestamp,
            self.iteration,
            self.train_iters,
            self.consumed_samples,
            py_f(self.elapsed_ms, 1),
            // Megatron prints one decimal; a CPU runs at a few GFLOP/s, which would print 0.0.
            py_f(self.tflops, if self.tflops < 1.0 { 4 } else { 1 }),
            py_e(self.learning_rate, 6),
            self.global_batch,
            py_e(self.loss, 6),
            py_f(self.loss_scale, 1),
            py_f(self.grad_norm, 3),
            self.skipped,
            self.nan
        )
    }
}

pub(super) fn memory_line(after: u64, mb: [f64; 4]) -> String {
    format!(
        "[Rank 0] (after {after} iterations) memory (MB) | allocated: {:.2} | max allocated: {:.2} | \
         reserved: {:.2} | max reserved: {:.2}",
        mb[0], mb[1], mb[2], mb[3]
    )
}
