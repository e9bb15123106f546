//! Pure helpers that turn what the library filled into samples (no `unsafe`).

use super::abi::*;
use crate::telemetry::types::{PowerKind, ProcessSample};
use std::fmt;
use std::time::Instant;

// ---- pure helpers --------------------------------------------------------------------------

pub(super) fn read_u32_words(scratch: &[u64]) -> [u32; 4] {
    let mut bytes = [0u8; 16];
    for (i, w) in scratch.iter().take(2).enumerate() {
        bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
    }
    let word = |i: usize| {
        let mut b = [0u8; 4];
        b.copy_from_slice(&bytes[i * 4..i * 4 + 4]);
        u32::from_ne_bytes(b)
    };
    [word(0), word(1), word(2), word(3)]
}

/// A C string in a fixed buffer: up to the first NUL, lossy UTF-8, trimmed; `None` when empty.
pub(super) fn c_string(buf: &[u8]) -> Option<String> {
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let s = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `UINT16_MAX`/`UINT32_MAX` mean "unsupported" in AMD SMI structs.
pub(super) fn valid_u32(v: u32) -> Option<u32> {
    (v != u32::MAX && v != u32::from(u16::MAX)).then_some(v)
}

pub(super) fn percent(v: u32) -> Option<f64> {
    valid_u32(v).filter(|p| *p <= 100).map(f64::from)
}

pub(super) fn pick_power(
    current: u32,
    average: u32,
    socket: Option<u64>,
) -> Option<(f64, PowerKind)> {
    let ok = |w: u32| valid_u32(w).filter(|w| *w > 0 && *w < 100_000);
    if let Some(w) = ok(current) {
        return Some((f64::from(w), PowerKind::Instant));
    }
    if let Some(w) = ok(average) {
        return Some((f64::from(w), PowerKind::Average));
    }
    socket
        .and_then(|w| u32::try_from(w).ok())
        .and_then(ok)
        .map(|w| (f64::from(w), PowerKind::Instant))
}

/// One energy-counter reading, with our own clock beside the library's.
#[derive(Clone, Copy)]
pub(super) struct EnergyReading {
    pub(super) ticks: u64,
    pub(super) resolution_uj: f64,
    pub(super) timestamp_ns: u64,
    pub(super) at: Instant,
}

/// Average power between two energy-counter readings; the library's nanosecond timestamps when
/// they advance, our own clock otherwise. `None` on a counter reset or no elapsed time.
pub(super) fn energy_power_w(a: &EnergyReading, b: &EnergyReading) -> Option<f64> {
    if b.ticks < a.ticks {
        return None;
    }
    let joules = (b.ticks - a.ticks) as f64 * b.resolution_uj / 1e6;
    let secs = if b.timestamp_ns > a.timestamp_ns {
        (b.timestamp_ns - a.timestamp_ns) as f64 / 1e9
    } else {
        b.at.duration_since(a.at).as_secs_f64()
    };
    (secs > 0.0).then(|| joules / secs)
}

/// Names of the active violations (`active_*` == 1); `None` when every flag is unsupported.
pub(super) fn violation_names(v: &ViolationHead) -> Option<Vec<String>> {
    let flags = [
        (v.active_prochot_thrm, "prochot"),
        (v.active_ppt_pwr, "ppt-power"),
        (v.active_socket_thrm, "socket-thermal"),
        (v.active_vr_thrm, "vr-thermal"),
        (v.active_hbm_thrm, "hbm-thermal"),
        (
            v.active_gfx_clk_below_host_limit,
            "gfx-clk-below-host-limit",
        ),
    ];
    if flags.iter().all(|(f, _)| *f == u8::MAX) {
        return None;
    }
    Some(
        flags
            .iter()
            .filter(|(f, _)| *f == 1)
            .map(|(_, n)| (*n).to_string())
            .collect(),
    )
}

pub(super) fn process_sample(gpu: u32, pid: u32, name: &[u8], vram: u64) -> ProcessSample {
    ProcessSample {
        pid,
        gpu,
        vram_bytes: vram,
        name: c_string(name),
    }
}

/// PCI address decoded from `amdsmi_bdf_t` (function 3 bits, device 5, bus 8, domain 48).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bdf {
    pub(super) domain: u64,
    pub(super) bus: u64,
    pub(super) device: u64,
    pub(super) function: u64,
}

impl Bdf {
    pub(super) fn from_u64(v: u64) -> Bdf {
        Bdf {
            function: v & 0x7,
            device: (v >> 3) & 0x1f,
            bus: (v >> 8) & 0xff,
            domain: v >> 16,
        }
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}
