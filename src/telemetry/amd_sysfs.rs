//! AMD GPU telemetry read straight from the amdgpu driver's sysfs files, hwmon, DRM fdinfo and
//! the KFD sysfs tree: no ROCm library needed (what nvtop, amdgpu_top and sysinfo do).
//!
//! Both roots are parameters ([`AmdSysfs::open`]): real use passes `/sys` and `/proc`, tests
//! pass fake trees.
//!
//! # What is read from where
//!
//! Devices: every `<sysfs>/class/drm/{cardN,renderDN}` whose `device` link resolves to a PCI
//! function bound to amdgpu (`driver` link → `amdgpu`, else `uevent` `DRIVER=amdgpu`, else
//! vendor `0x1002` with the amdgpu attributes present); nodes resolving to the same directory
//! are one device. MI300-class partition devices (`devices/platform/amdgpu_xcp.N` or
//! `amdgpu_xcp_N`) are attached to their PCI device as described below.
//!
//! Per physical GPU (the PCI device directory), located once at open, re-read every sample:
//!
//! | reading | file | unit conversion |
//! |---|---|---|
//! | `util_pct` | `gpu_busy_percent` | % |
//! | `mem_util_pct` | `mem_busy_percent` | % |
//! | `vram_used_bytes` / `vram_total_bytes` | `mem_info_vram_used` / `mem_info_vram_total` | bytes |
//! | `power_w` | `hwmon/hwmonN/power1_average` (`Average`), else `power1_input` (`Instant`) | µW ÷ 1e6 |
//! | `power_cap_w` | `hwmon/hwmonN/power1_cap` | µW ÷ 1e6 |
//! | `temp_c[label]` | `hwmon/hwmonN/tempN_input`, keyed by `tempN_label` lower-cased (`edge`, `junction`, `mem`; `tempN` when unlabeled) | m°C ÷ 1000 |
//! | `sclk_mhz` / `mclk_mhz` | `hwmon/hwmonN/freqN_input` labelled `sclk` / `mclk` (Hz ÷ 1e6), else the `*` level of `pp_dpm_sclk` / `pp_dpm_mclk` | MHz |
//!
//! The hwmon directory is the one named `amdgpu`. Static facts: `product_name` (else the PCI
//! device id through [`ids`], else `AMD GPU 0x....`), the PCI address (the directory name, else
//! `uevent` `PCI_SLOT_NAME`), `unique_id` as the UUID, compute units and the KFD `gpu_id` from
//! the KFD topology node of the GPU (`<sysfs>/class/kfd/kfd/topology/nodes/N`, matched by
//! `drm_render_minor`, else by `domain` + `location_id`): `simd_count / simd_per_cu`.
//!
//! Every file is trimmed of whitespace and NUL padding. A file that is missing or does not
//! parse gives `None` for that reading; it never fails the sample.
//!
//! # Partitions (MI300X and later)
//!
//! `current_compute_partition` (`SPX`/`DPX`/`QPX`/`CPX`) and `current_memory_partition`
//! (`NPS1`/`NPS4`) come from the PCI device and are copied to each of its logical GPUs. In
//! DPX/QPX/CPX one MI300X shows up as 2/4/8 logical GPUs: partition 0 is the PCI device itself,
//! partitions 1.. are `amdgpu_xcp` platform devices that carry only DRM nodes. amdgpu allocates
//! seven of those per GPU even in SPX, so a partition device counts only when a KFD topology
//! node names its render node (`drm_render_minor`); that node's `domain`/`location_id` tells
//! which PCI device it belongs to. Without a KFD topology the partition devices are assigned
//! by numbering (see `discover`). All partitions of one device share `physical_id` and the PCI
//! bus id; `partition_index` orders them.
//!
//! - Power, temperatures, clocks, utilisation and the power cap exist only for the physical
//!   device: partition 0 reports them, partitions 1.. report `None` (never 0) and no
//!   temperatures, as `amd-smi monitor` shows.
//! - VRAM: each logical GPU reports its share of the device, `mem_info_vram_total / NPS count`
//!   (48 GiB of 192 GiB in CPX/NPS4; the whole device in NPS1). `mem_info_vram_used` covers the
//!   whole device, so a partition's used VRAM is instead the sum of the KFD per-process figures
//!   for its `gpu_id` (ROCm allocations only), `None` when the KFD process directory cannot be
//!   read.
//!
//! # Processes
//!
//! See `procs`: DRM fdinfo (`drm-memory-vram`, KiB) deduplicated by `drm-client-id`, and
//! `<sysfs>/class/kfd/kfd/proc/<pid>/vram_<gpu_id>` (bytes); process names from
//! `<procfs>/<pid>/comm`.

mod discover;
pub mod ids;
pub mod parse;
mod procs;
mod sensors;

use std::collections::HashMap;
use std::iter;
use std::path::{Path, PathBuf};

use crate::telemetry::types::{Backend, GpuInfo, GpuSample, ProcessSample, TelemetryError};
use discover::KfdNode;
use sensors::DeviceFiles;

/// The backend name, also `GpuInfo::backend`.
pub const BACKEND: &str = "amdgpu-sysfs";

/// One physical GPU: where its sensors are and how its memory divides among partitions.
#[derive(Debug, Clone)]
struct Physical {
    files: DeviceFiles,
    vram_total: Option<u64>,
    /// Divides `vram_total` into one logical GPU's share (1 when not partitioned).
    share_divisor: u64,
    partitioned: bool,
}

/// One logical GPU (a whole device, or one partition of it).
#[derive(Debug, Clone)]
struct Logical {
    physical: usize,
    partition: u32,
    kfd_gpu_id: Option<u64>,
}

/// The amdgpu sysfs backend. Opened once; every [`Backend::sample`] re-reads a handful of small
/// files per physical GPU.
#[derive(Debug)]
pub struct AmdSysfs {
    sysfs_root: PathBuf,
    procfs_root: PathBuf,
    gpus: Vec<GpuInfo>,
    physicals: Vec<Physical>,
    logicals: Vec<Logical>,
    attribution: procs::Attribution,
}

fn unavailable(message: String) -> TelemetryError {
    TelemetryError::Unavailable {
        backend: BACKEND,
        message,
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl AmdSysfs {
    /// Finds the amdgpu GPUs under `sysfs_root` (`/sys`) and locates their files; processes are
    /// read from `procfs_root` (`/proc`). `Unavailable` when there is no amdgpu device.
    pub fn open(sysfs_root: &Path, procfs_root: &Path) -> Result<AmdSysfs, TelemetryError> {
        let found = discover::discover(sysfs_root).map_err(|e| {
            unavailable(format!(
                "cannot list {}: {e}",
                sysfs_root.join("class").join("drm").display()
            ))
        })?;
        if found.physicals.is_empty() {
            return Err(unavailable(format!(
                "no amdgpu device under {}",
                sysfs_root.join("class").join("drm").display()
            )));
        }

        let mut gpus = Vec::new();
        let mut physicals = Vec::new();
        let mut logicals = Vec::new();
        let mut attribution = procs::Attribution::default();
        for (pi, p) in found.physicals.iter().enumerate() {
            let dir = &p.primary.dir;
            let files = DeviceFiles::probe(dir);
            let vram_total = files.read_vram_total();
            let count = p.partition_count();
            let partitioned = count > 1;
            let share_divisor = if partitioned {
                p.memory_partition
                    .as_deref()
                    .and_then(discover::nps_count)
                    .unwrap_or(1)
                    .clamp(1, count as u64)
            } else {
                1
            };
            let name = parse::read_text(&dir.join("product_name"))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| {
                    let revision =
                        parse::read_u64(&dir.join("revision")).and_then(|v| u8::try_from(v).ok());
                    ids::fallback_name(p.device_id, revision)
                });
            let bus_id = p.bdf.map(|b| b.to_string());
            let uuid = parse::read_text(&dir.join("unique_id")).filter(|s| !s.is_empty());
            let power_cap_w = files.read_power_cap_w();
            let has_modes = p.compute_partition.is_some() || p.memory_partition.is_some();

            if let Some(bus) = &bus_id {
                attribution.by_bus.insert(bus.clone(), pi);
            }
            attribution.primary_of.push(logicals.len());
            attribution.partitioned.push(partitioned);

            let parts = iter::once((&p.primary, p.primary_kfd))
                .chain(p.secondaries.iter().map(|(d, k)| (d, *k)));
            for (idx, (dev, kfd)) in parts.enumerate() {
                let node: Option<&KfdNode> = kfd.and_then(|k| found.kfd.get(k));
                let index = logicals.len();
                let kfd_gpu_id = node.map(|n| n.gpu_id);
                if let Some(id) = kfd_gpu_id {
                    attribution.by_gpu_id.insert(id, index);
                }
                attribution.physical_of.push(pi);
                let primary = idx == 0;
                gpus.push(GpuInfo {
                    index: to_u32(index),
                    backend: BACKEND.to_owned(),
                    name: name.clone(),
                    bus_id: bus_id.clone(),
                    uuid: uuid.clone().filter(|_| primary),
                    vram_total_bytes: vram_total.map(|t| t / share_divisor),
                    compute_units: node.and_then(KfdNode::compute_units),
                    physical_id: Some(to_u32(pi)),
                    compute_partition: p.compute_partition.clone(),
                    memory_partition: p.memory_partition.clone(),
                    partition_index: (has_modes || partitioned).then_some(to_u32(idx)),
                    power_cap_w: power_cap_w.filter(|_| primary),
                    card: dev.display_name().map(str::to_owned),
                    kfd_gpu_id,
                });
                logicals.push(Logical {
                    physical: pi,
                    partition: to_u32(idx),
                    kfd_gpu_id,
                });
            }
            physicals.push(Physical {
                files,
                vram_total,
                share_divisor,
                partitioned,
            });
        }

        Ok(AmdSysfs {
            sysfs_root: sysfs_root.to_path_buf(),
            procfs_root: procfs_root.to_path_buf(),
            gpus,
            physicals,
            logicals,
            attribution,
        })
    }

    fn kfd_proc_dir(&self) -> PathBuf {
        discover::kfd_dir(&self.sysfs_root).join("proc")
    }
}

impl Backend for AmdSysfs {
    fn name(&self) -> &'static str {
        BACKEND
    }

    fn gpus(&self) -> &[GpuInfo] {
        &self.gpus
    }

    fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
        let kfd_totals: Option<HashMap<usize, u64>> =
            if self.physicals.iter().any(|p| p.partitioned) {
                procs::kfd_totals(&self.kfd_proc_dir(), &self.attribution.by_gpu_id)
            } else {
                None
            };
        let mut out = Vec::with_capacity(self.logicals.len());
        for (i, l) in self.logicals.iter().enumerate() {
            let p = &self.physicals[l.physical];
            let mut s = GpuSample {
                gpu: to_u32(i),
                ..GpuSample::default()
            };
            if p.partitioned {
                s.vram_total_bytes = p.vram_total.map(|t| t / p.share_divisor);
                s.vram_used_bytes = match (&kfd_totals, l.kfd_gpu_id) {
                    (Some(totals), Some(_)) => Some(totals.get(&i).copied().unwrap_or(0)),
                    _ => None,
                };
            } else {
                s.vram_total_bytes = p.vram_total;
                s.vram_used_bytes = p.files.read_vram_used();
            }
            if l.partition == 0 {
                s.util_pct = p.files.read_util();
                s.mem_util_pct = p.files.read_mem_util();
                if let Some((watts, kind)) = p.files.read_power() {
                    s.power_w = Some(watts);
                    s.power_kind = Some(kind);
                }
                s.temp_c = p.files.read_temps();
                s.sclk_mhz = p
                    .files
                    .sclk
                    .as_ref()
                    .and_then(sensors::ClockSource::read_mhz);
                s.mclk_mhz = p
                    .files
                    .mclk
                    .as_ref()
                    .and_then(sensors::ClockSource::read_mhz);
            }
            out.push(s);
        }
        Ok(out)
    }

    fn processes(&mut self) -> Result<Vec<ProcessSample>, TelemetryError> {
        procs::scan(&self.procfs_root, &self.kfd_proc_dir(), &self.attribution).map_err(|e| {
            TelemetryError::Read {
                backend: BACKEND,
                what: self.procfs_root.display().to_string(),
                message: e.to_string(),
            }
        })
    }
}
