//! Telemetry types shared by every backend. Units are normalised at the edge and named in the
//! fields: %, bytes, W, °C, MHz. Every reading is optional: a sensor a device lacks (MI300X has no
//! edge temperature; secondary partitions report no power) stays `None`, never 0.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Static facts about one (logical) GPU.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Index in this backend's enumeration order (0-based).
    pub index: u32,
    /// `amdgpu-sysfs`, `amd-smi`, `nvml`.
    pub backend: String,
    /// Marketing name (`AMD Instinct MI300X`, `NVIDIA H200`).
    pub name: String,
    /// PCI bus id (`0000:0c:00.0`) or UUID, when known.
    pub bus_id: Option<String>,
    pub uuid: Option<String>,
    pub vram_total_bytes: Option<u64>,
    /// Compute units (AMD) or SMs (NVIDIA), when known.
    pub compute_units: Option<u32>,
    /// Logical GPUs of one physical device (MI300X CPX/DPX/QPX partitions) share this id.
    pub physical_id: Option<u32>,
    /// Partition modes (`SPX`/`DPX`/`QPX`/`CPX`, `NPS1`/`NPS4`) and this partition's index.
    pub compute_partition: Option<String>,
    pub memory_partition: Option<String>,
    pub partition_index: Option<u32>,
    pub power_cap_w: Option<f64>,
    /// Driver-side identifiers (DRM card path, KFD gpu_id) for process attribution.
    pub card: Option<String>,
    pub kfd_gpu_id: Option<u64>,
}

/// Whether a power figure is an average (amdgpu `power1_average`) or instantaneous.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PowerKind {
    Average,
    Instant,
}

/// One reading of one GPU.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuSample {
    pub gpu: u32,
    pub util_pct: Option<f64>,
    /// Memory-controller busy percent (amdgpu `mem_busy_percent`, NVML memory utilization).
    pub mem_util_pct: Option<f64>,
    pub vram_used_bytes: Option<u64>,
    pub vram_total_bytes: Option<u64>,
    pub power_w: Option<f64>,
    pub power_kind: Option<PowerKind>,
    /// Temperatures by sensor label: `edge`, `junction`, `mem` (AMD), `gpu`, `memory` (NVIDIA).
    pub temp_c: BTreeMap<String, f64>,
    pub sclk_mhz: Option<f64>,
    pub mclk_mhz: Option<f64>,
    /// Active throttle / violation reasons, when the backend reports them (empty = none active).
    pub throttle: Option<Vec<String>>,
}

/// GPU memory held by one process on one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProcessSample {
    pub pid: u32,
    pub gpu: u32,
    pub vram_bytes: u64,
    pub name: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("{backend}: {message}")]
    Unavailable {
        backend: &'static str,
        message: String,
    },
    #[error("{backend}: reading {what}: {message}")]
    Read {
        backend: &'static str,
        what: String,
        message: String,
    },
}

/// A source of GPU telemetry. Calls may block (NVML, sysfs reads): call them from the sampler
/// thread, never from the UI or the async reactor.
pub trait Backend: Send {
    fn name(&self) -> &'static str;
    fn gpus(&self) -> &[GpuInfo];
    /// One reading of every GPU.
    fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError>;
    /// GPU memory per process (slower; the sampler calls it at a lower rate).
    fn processes(&mut self) -> Result<Vec<ProcessSample>, TelemetryError>;
}
