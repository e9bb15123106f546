//! NVIDIA telemetry through NVML (nvml-wrapper loads `libnvidia-ml.so.1` at run time, so the
//! same binary runs on machines without the NVIDIA driver).

use super::types::{Backend, GpuInfo, GpuSample, PowerKind, ProcessSample, TelemetryError};
use nvml_wrapper::Nvml as Lib;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use std::path::Path;

const NAME: &str = "nvml";

/// Library names tried in order (the SONAME first: many hosts ship no unversioned symlink).
const CANDIDATES: &[&str] = &[
    "libnvidia-ml.so.1",
    "libnvidia-ml.so",
    "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1",
];

pub struct Nvml {
    lib: Lib,
    gpus: Vec<GpuInfo>,
    /// NVML's device handles, looked up once at open (one per entry of `gpus`).
    handles: Vec<Handle>,
    procfs: std::path::PathBuf,
    /// Samples taken. The slow-changing figures (memory clock, throttle reasons) are read every
    /// `SLOW_EVERY` samples and repeated in between, so a sample costs the same five NVML calls
    /// as `nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw,temperature.gpu,clocks.sm`.
    count: u64,
    slow: Vec<Slow>,
}

/// The figures read every `SLOW_EVERY` samples (every 2 s at the default 500 ms interval).
#[derive(Clone, Default)]
struct Slow {
    mclk_mhz: Option<f64>,
    throttle: Option<Vec<String>>,
}

const SLOW_EVERY: u64 = 4;

/// A device handle from `nvmlDeviceGetHandleByIndex`. NVML documents its handles as valid until
/// `nvmlShutdown` and its calls as thread-safe, so one may move to the sampler thread.
struct Handle(nvml_wrapper_sys::bindings::nvmlDevice_t);

// SAFETY: see `Handle`; the handle is only used with the `Lib` that made it, which outlives it.
#[allow(unsafe_code)]
unsafe impl Send for Handle {}

/// NVML's initialisation allocates and frees several MB; hand the freed pages back to the system
/// so a long-running monitor does not keep them resident.
#[allow(unsafe_code)]
fn release_free_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free heap memory to the kernel; no pointer is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The device behind a cached handle, without a lookup in NVML.
#[allow(unsafe_code)]
fn device<'a>(lib: &'a Lib, h: &Handle) -> nvml_wrapper::Device<'a> {
    // SAFETY: every `Handle` came from the `Lib` it is used with (both live in one `Nvml`).
    unsafe { nvml_wrapper::Device::new(h.0, lib) }
}

impl Nvml {
    /// Load NVML and enumerate the GPUs. `Unavailable` when the library or the driver is missing.
    pub fn open(procfs_root: &Path) -> Result<Nvml, TelemetryError> {
        let mut errors = Vec::new();
        let mut lib = None;
        for c in CANDIDATES {
            match Lib::builder().lib_path(std::ffi::OsStr::new(c)).init() {
                Ok(l) => {
                    lib = Some(l);
                    break;
                }
                Err(e) => errors.push(format!("{c}: {e}")),
            }
        }
        let lib = lib.ok_or_else(|| {
            let not_found = errors
                .iter()
                .all(|e| e.contains("cannot open shared object file"));
            TelemetryError::Unavailable {
                backend: NAME,
                message: if not_found {
                    format!(
                        "libnvidia-ml.so.1 not found ({} places tried)",
                        CANDIDATES.len()
                    )
                } else {
                    format!("NVML could not be loaded ({})", errors.join("; "))
                },
            }
        })?;
        let n = lib
            .device_count()
            .map_err(|e| TelemetryError::Unavailable {
                backend: NAME,
                message: format!("device count: {e}"),
            })?;
        if n == 0 {
            return Err(TelemetryError::Unavailable {
                backend: NAME,
                message: "NVML reports no GPU".into(),
            });
        }
        let mut gpus = Vec::new();
        let mut handles = Vec::new();
        for i in 0..n {
            let d = lib.device_by_index(i).map_err(|e| TelemetryError::Read {
                backend: NAME,
                what: format!("device {i}"),
                message: e.to_string(),
            })?;
            gpus.push(GpuInfo {
                index: i,
                backend: NAME.into(),
                name: d.name().unwrap_or_else(|_| format!("NVIDIA GPU {i}")),
                bus_id: d.pci_info().ok().map(|p| p.bus_id.to_lowercase()),
                uuid: d.uuid().ok(),
                vram_total_bytes: d.memory_info().ok().map(|m| m.total),
                compute_units: None,
                power_cap_w: d
                    .enforced_power_limit()
                    .ok()
                    .map(|mw| f64::from(mw) / 1000.0),
                ..GpuInfo::default()
            });
            #[allow(unsafe_code)]
            // SAFETY: reading the raw handle out of a live device; it stays valid (see `Handle`).
            handles.push(Handle(unsafe { d.handle() }));
        }
        release_free_heap();
        Ok(Nvml {
            lib,
            gpus,
            slow: vec![Slow::default(); handles.len()],
            handles,
            procfs: procfs_root.to_path_buf(),
            count: 0,
        })
    }
}

/// Names of the active clock-throttle reasons (idle and "none" are not throttling).
fn throttle_names(r: ThrottleReasons) -> Vec<String> {
    let table = [
        (ThrottleReasons::SW_POWER_CAP, "sw-power-cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw-slowdown"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw-thermal"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw-thermal"),
        (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, "hw-power-brake"),
        (
            ThrottleReasons::APPLICATIONS_CLOCKS_SETTING,
            "applications-clocks",
        ),
        (ThrottleReasons::SYNC_BOOST, "sync-boost"),
    ];
    table
        .iter()
        .filter(|(f, _)| r.contains(*f))
        .map(|(_, n)| (*n).to_string())
        .collect()
}

impl Backend for Nvml {
    fn name(&self) -> &'static str {
        NAME
    }

    fn gpus(&self) -> &[GpuInfo] {
        &self.gpus
    }

    fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
        let mut out = Vec::with_capacity(self.gpus.len());
        let read_slow = self.count.is_multiple_of(SLOW_EVERY);
        self.count += 1;
        for (i, g) in self.gpus.iter().enumerate() {
            let d = device(&self.lib, &self.handles[i]);
            if read_slow {
                self.slow[i] = Slow {
                    mclk_mhz: d.clock_info(Clock::Memory).ok().map(f64::from),
                    throttle: d.current_throttle_reasons().ok().map(throttle_names),
                };
            }
            let util = d.utilization_rates().ok();
            let mem = d.memory_info().ok();
            let mut temp_c = std::collections::BTreeMap::new();
            if let Ok(t) = d.temperature(TemperatureSensor::Gpu) {
                temp_c.insert("gpu".to_string(), f64::from(t));
            }
            out.push(GpuSample {
                gpu: g.index,
                util_pct: util.as_ref().map(|u| f64::from(u.gpu)),
                mem_util_pct: util.as_ref().map(|u| f64::from(u.memory)),
                vram_used_bytes: mem.as_ref().map(|m| m.used),
                vram_total_bytes: mem.as_ref().map(|m| m.total),
                // NVML averages power over about a second on current GPUs.
                power_w: d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
                power_kind: Some(PowerKind::Average),
                temp_c,
                sclk_mhz: d.clock_info(Clock::SM).ok().map(f64::from),
                mclk_mhz: self.slow[i].mclk_mhz,
                throttle: self.slow[i].throttle.clone(),
            });
        }
        Ok(out)
    }

    fn processes(&mut self) -> Result<Vec<ProcessSample>, TelemetryError> {
        let mut out = Vec::new();
        for (i, g) in self.gpus.iter().enumerate() {
            let d = device(&self.lib, &self.handles[i]);
            for p in d.running_compute_processes().unwrap_or_default() {
                let vram = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => b,
                    UsedGpuMemory::Unavailable => 0,
                };
                out.push(ProcessSample {
                    pid: p.pid,
                    gpu: g.index,
                    vram_bytes: vram,
                    name: std::fs::read_to_string(self.procfs.join(p.pid.to_string()).join("comm"))
                        .ok()
                        .map(|s| s.trim().to_string()),
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_unavailable_with_what_was_tried() {
        // This machine has no NVIDIA driver; the GPU machine is covered in docs/validation/.
        if std::path::Path::new("/proc/driver/nvidia").exists() {
            eprintln!("skipped: an NVIDIA driver is present here");
            return;
        }
        let e = Nvml::open(Path::new("/proc")).err().expect("no NVML here");
        let s = e.to_string();
        assert!(s.contains("libnvidia-ml.so.1"), "{s}");
    }

    #[test]
    fn throttle_reasons_skip_idle() {
        let r = ThrottleReasons::GPU_IDLE | ThrottleReasons::SW_POWER_CAP;
        assert_eq!(throttle_names(r), vec!["sw-power-cap".to_string()]);
        assert!(throttle_names(ThrottleReasons::NONE).is_empty());
    }
}
