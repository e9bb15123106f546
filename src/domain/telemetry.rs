//! Telemetry as data: what a GPU is, one reading of it, the host and a trial's process group, a
//! snapshot of everything, and a trial's per-GPU summary. Units are in the field names: %, bytes,
//! W, °C, MHz. Every reading is optional: a sensor a device lacks stays `None`, never 0.

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

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HostSample {
    pub cpu_pct: Option<f64>,
    pub ram_used_bytes: Option<u64>,
    pub ram_total_bytes: Option<u64>,
    /// The watched process tree (the running trial's), when one is set.
    pub group: Option<GroupUsage>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GroupUsage {
    /// The tree's root: the trial's supervisor (or its workload when unsupervised), which
    /// leads its process group. Stored samples from before trees name it `pgid`.
    #[serde(alias = "pgid")]
    pub root: i32,
    pub processes: usize,
    pub rss_bytes: u64,
    /// CPU use of the group since the previous sample, in percent of one core.
    pub cpu_pct: Option<f64>,
    pub pids: Vec<u32>,
}

/// One reading of everything.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// Unix time in milliseconds.
    pub ts_ms: u64,
    /// The node it was read on, for a trial across nodes (Slurm's node name); None on the
    /// node primus-tune runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub gpus: Vec<GpuSample>,
    /// Present on the samples where the (slower) process scan ran.
    pub processes: Option<Vec<ProcessSample>>,
    pub host: HostSample,
    /// Wall time the sampler spent reading this snapshot, µs.
    pub cost_us: u64,
}

/// What a trial's telemetry adds to its summary, per GPU.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GpuSummary {
    pub gpu: u32,
    pub samples: usize,
    pub util_mean_pct: Option<f64>,
    pub util_max_pct: Option<f64>,
    pub vram_peak_bytes: Option<u64>,
    /// The GPU's memory, bytes, as its samples report it (absent in older trials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram_total_bytes: Option<u64>,
    /// Peak VRAM held by the trial's own processes on this GPU.
    pub trial_vram_peak_bytes: Option<u64>,
    pub power_mean_w: Option<f64>,
    pub power_max_w: Option<f64>,
    pub temp_max_c: BTreeMap<String, f64>,
    pub sclk_min_mhz: Option<f64>,
    pub sclk_median_mhz: Option<f64>,
    pub throttled: bool,
    pub throttle_reasons: Vec<String>,
}

/// One node of a trial across nodes: its GPUs' telemetry and its own step time, with the
/// slowest and the hottest node of the trial flagged.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NodeSummary {
    /// Slurm's node name.
    pub node: String,
    /// Telemetry snapshots read on the node.
    pub samples: usize,
    /// Per GPU, over the trial's steady span.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuSummary>,
    /// Host CPU use, mean percent of the node's CPUs.
    pub cpu_mean_pct: Option<f64>,
    /// Hottest GPU sensor on the node, °C.
    pub temp_max_c: Option<f64>,
    /// Median steady step time in the node's own log, when its ranks print iterations.
    pub median_step_ms: Option<f64>,
    /// Iterations the node's log printed.
    pub iterations: u64,
    /// The node with the longest median step (only flagged when ≥ 2 nodes have one).
    #[serde(default)]
    pub slowest: bool,
    /// The node with the hottest GPU (only flagged when ≥ 2 nodes have a temperature).
    #[serde(default)]
    pub hottest: bool,
}
