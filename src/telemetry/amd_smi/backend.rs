//! The [`AmdSmi`] backend: loading, enumerating GPUs and sampling them.

use super::NAME;
use super::abi::*;
use super::decode::*;
use super::library::*;
use crate::telemetry::types::{
    Backend, GpuInfo, GpuSample, PowerKind, ProcessSample, TelemetryError,
};
use libloading::Library;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::path::Path;
use std::time::Instant;

// ---- the backend ---------------------------------------------------------------------------

/// Per-GPU state: the processor handle (kept as an address so the backend is `Send`) and the
/// last energy-counter reading.
pub(super) struct Dev {
    pub(super) handle: usize,
    pub(super) last_energy: Option<EnergyReading>,
}

/// GPU telemetry from AMD SMI (`libamd_smi.so`), loaded at run time.
pub struct AmdSmi {
    session: Session,
    version: LibVersion,
    abi: Abi,
    calls: StructCalls,
    gpus: Vec<GpuInfo>,
    devs: Vec<Dev>,
    notes: Vec<String>,
    scratch: Vec<u64>,
}

pub(super) fn unavailable(message: String) -> TelemetryError {
    TelemetryError::Unavailable {
        backend: NAME,
        message,
    }
}

impl AmdSmi {
    /// Load AMD SMI from the usual places ([`candidate_paths`]), initialise it and enumerate the
    /// GPUs. `Unavailable` when no library loads (the message names every path tried), when
    /// `amdsmi_init` fails, or when it reports no AMD GPU.
    pub fn load() -> Result<AmdSmi, TelemetryError> {
        let rocm = std::env::var_os("ROCM_PATH");
        let paths = candidate_paths(rocm.as_deref());
        let mut failures = Vec::new();
        for p in &paths {
            match Self::open(p) {
                // A library that loads but cannot start (no driver, no GPU) would fail the same
                // way under another name: its error is the answer.
                Ok(lib) => return Self::start(lib, p),
                Err(e) if e.contains("No such file or directory") => {}
                Err(e) => failures.push(e),
            }
        }
        let tried: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        let mut message = format!("AMD SMI library not found (tried {})", tried.join(", "));
        if !failures.is_empty() {
            message.push_str(&format!("; failed to load: {}", failures.join("; ")));
        }
        Err(unavailable(message))
    }

    /// Load AMD SMI from exactly `path` (tests, or a user-configured location).
    #[cfg(any(test, feature = "testkit"))]
    pub fn load_from(path: &Path) -> Result<AmdSmi, TelemetryError> {
        let lib = Self::open(path).map_err(|e| {
            unavailable(format!(
                "AMD SMI library could not be loaded from {}: {e}",
                path.display()
            ))
        })?;
        Self::start(lib, path)
    }

    fn open(path: &Path) -> Result<Library, String> {
        // SAFETY: loading libamd_smi runs its ELF constructors. That is what using the library at
        // all requires; AMD SMI's constructors only set up its own state.
        unsafe { Library::new(path) }.map_err(|e| error_chain(&e))
    }

    fn start(lib: Library, path: &Path) -> Result<AmdSmi, TelemetryError> {
        let api = Api::resolve(&lib).map_err(|e| {
            unavailable(format!(
                "{} is not a usable AMD SMI library (missing symbol {e})",
                path.display()
            ))
        })?;
        // SAFETY: `amdsmi_init(uint64_t init_flags)`; the flag value is AMDSMI_INIT_AMD_GPUS.
        let status = unsafe { (api.init)(INIT_AMD_GPUS) };
        if status != STATUS_SUCCESS {
            return Err(unavailable(format!(
                "amdsmi_init(AMDSMI_INIT_AMD_GPUS) failed with {} (library {})",
                describe(status),
                path.display()
            )));
        }
        let session = Session {
            api,
            path: path.to_path_buf(),
            _lib: lib,
        };
        let mut scratch = vec![0u64; SCRATCH_WORDS];
        // SAFETY: `amdsmi_get_lib_version(amdsmi_version_t*)`; the zeroed scratch buffer (32 KiB,
        // 8-aligned) is far larger than any release's `amdsmi_version_t` (at most 24 bytes), so
        // the library cannot write past it whatever the major.
        let status = unsafe { (session.api.lib_version)(scratch.as_mut_ptr().cast()) };
        if status != STATUS_SUCCESS {
            return Err(unavailable(format!(
                "amdsmi_get_lib_version failed with {} (library {})",
                describe(status),
                path.display()
            )));
        }
        let words = read_u32_words(&scratch);
        let version = LibVersion::from_words(words);
        let abi = Abi::of(&version);
        let calls = abi.struct_calls();
        let mut notes = Vec::new();
        if abi == Abi::Unknown {
            notes.push(format!(
                "AMD SMI {version} (from {}) has a library major whose struct layouts are not \
                 encoded here: only scalar calls are made (VRAM, temperatures, energy-derived \
                 power, partitions, PCI address); activity, clocks, power info, violation status, \
                 ASIC name and the process list are not read",
                path.display()
            ));
        } else if !calls.process_list {
            notes.push(format!(
                "AMD SMI {version}: the process list is not read (amdsmi_proc_info_t layout not \
                 encoded for this version)"
            ));
        }
        let mut me = AmdSmi {
            session,
            version,
            abi,
            calls,
            gpus: Vec::new(),
            devs: Vec::new(),
            notes,
            scratch,
        };
        me.enumerate()?;
        Ok(me)
    }

    /// The library version reported by `amdsmi_get_lib_version`.
    #[cfg(any(test, feature = "testkit"))]
    pub fn lib_version(&self) -> LibVersion {
        self.version
    }

    /// The struct-filling calls made for this library version.
    #[cfg(any(test, feature = "testkit"))]
    pub fn struct_calls(&self) -> StructCalls {
        self.calls
    }

    /// The file the library was loaded from.
    #[cfg(any(test, feature = "testkit"))]
    pub fn library_path(&self) -> &Path {
        &self.session.path
    }

    /// Remarks about what this library version allows (readings skipped, and why).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    // -- enumeration --

    fn enumerate(&mut self) -> Result<(), TelemetryError> {
        let api = &self.session.api;
        let sockets = handle_list(|count, out| {
            // SAFETY: `amdsmi_get_socket_handles(uint32_t *count, amdsmi_socket_handle *out)`;
            // `out` is null (count query) or has room for `*count` handles.
            unsafe { (api.socket_handles)(count, out) }
        })
        .map_err(|s| {
            unavailable(format!(
                "amdsmi_get_socket_handles failed with {}",
                describe(s)
            ))
        })?;
        let mut handles = Vec::new();
        for socket in sockets {
            let procs = handle_list(|count, out| {
                // SAFETY: `amdsmi_get_processor_handles(socket, uint32_t *count,
                // amdsmi_processor_handle *out)`; `socket` came from the call above, `out` is null
                // (count query) or has room for `*count` handles.
                unsafe { (api.processor_handles)(socket, count, out) }
            })
            .map_err(|s| {
                unavailable(format!(
                    "amdsmi_get_processor_handles failed with {}",
                    describe(s)
                ))
            })?;
            for h in procs {
                let is_gpu = match api.processor_type {
                    Some(f) => {
                        let mut t = 0u32;
                        // SAFETY: `amdsmi_get_processor_type(handle, processor_type_t*)`; the enum
                        // is 4 bytes and `t` is a live `u32`.
                        let s = unsafe { f(h, &mut t) };
                        s != STATUS_SUCCESS || t == PROCESSOR_TYPE_AMD_GPU
                    }
                    None => true,
                };
                if is_gpu {
                    handles.push(h);
                }
            }
        }
        if handles.is_empty() {
            return Err(unavailable(format!(
                "AMD SMI {} ({}) reports no AMD GPU",
                self.version,
                self.session.path.display()
            )));
        }
        let mut physical: Vec<(u64, u64, u64)> = Vec::new();
        for (i, h) in handles.into_iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let info = self.static_info(index, h, &mut physical);
            self.gpus.push(info);
            self.devs.push(Dev {
                handle: h.expose_provenance(),
                last_energy: None,
            });
        }
        Ok(())
    }

    fn static_info(
        &mut self,
        index: u32,
        h: Handle,
        physical: &mut Vec<(u64, u64, u64)>,
    ) -> GpuInfo {
        let bdf = self.bdf(h);
        let physical_id = bdf.map(|b| {
            let key = (b.domain, b.bus, b.device);
            let pos = physical.iter().position(|k| *k == key).unwrap_or_else(|| {
                physical.push(key);
                physical.len() - 1
            });
            u32::try_from(pos).unwrap_or(u32::MAX)
        });
        let asic = self.asic(h);
        let kfd = self.kfd(h);
        let name = match (&asic, self.abi) {
            (Some((Some(n), _)), _) => n.clone(),
            (_, Abi::Unknown) => format!(
                "AMD GPU (AMD SMI {}: unknown ABI, scalar readings only)",
                self.version
            ),
            _ => "AMD GPU".to_string(),
        };
        GpuInfo {
            index,
            backend: NAME.into(),
            name,
            bus_id: bdf.map(|b| b.to_string()),
            uuid: self.string_out(self.session.api.device_uuid.map(UuidOrStr::Uuid), h),
            vram_total_bytes: self.memory(self.session.api.memory_total, h),
            compute_units: asic.and_then(|(_, cu)| cu),
            physical_id,
            compute_partition: self
                .string_out(self.session.api.compute_partition.map(UuidOrStr::Str), h),
            memory_partition: self
                .string_out(self.session.api.memory_partition.map(UuidOrStr::Str), h),
            partition_index: kfd.and_then(|k| valid_u32(k.current_partition_id)),
            power_cap_w: self.power_cap_w(h),
            card: None,
            kfd_gpu_id: kfd.and_then(|k| (k.kfd_id != u64::MAX).then_some(k.kfd_id)),
        }
    }

    // -- struct calls (gated) --

    /// Zero the scratch area, let `call` fill it, and copy a `T` out of its start.
    fn struct_call<T: Plain>(&mut self, call: impl FnOnce(*mut c_void) -> u32) -> Option<T> {
        self.scratch.fill(0);
        let status = call(self.scratch.as_mut_ptr().cast());
        if status != STATUS_SUCCESS {
            return None;
        }
        // SAFETY: the scratch area is 32 KiB of initialised, 8-aligned memory, larger than `T`
        // (sizes asserted at compile time), and `T: Plain` is valid for every bit pattern.
        Some(unsafe { std::ptr::read(self.scratch.as_ptr().cast::<T>()) })
    }

    fn asic(&mut self, h: Handle) -> Option<(Option<String>, Option<u32>)> {
        if !self.calls.asic_info {
            return None;
        }
        let f = self.session.api.asic_info?;
        // SAFETY: `amdsmi_get_gpu_asic_info(handle, amdsmi_asic_info_t*)`; the
        // pointer is the 32 KiB scratch area, larger than the struct of any encoded major.
        let call = |p: *mut c_void| unsafe { f(h, p) };
        match self.abi {
            Abi::Y24 { sub: 6 } => self
                .struct_call::<AsicInfoY24_6>(call)
                .map(|a| (c_string(&a.market_name), None)),
            Abi::Y24 { .. } => self
                .struct_call::<AsicInfoY24_7>(call)
                .map(|a| (c_string(&a.market_name), valid_u32(a.num_of_compute_units))),
            Abi::M25 => self
                .struct_call::<AsicName>(call)
                .map(|a| (c_string(&a.market_name), None)),
            Abi::M26 => self
                .struct_call::<AsicInfo26>(call)
                .map(|a| (c_string(&a.market_name), valid_u32(a.num_of_compute_units))),
            Abi::Unknown => None,
        }
    }

    fn kfd(&mut self, h: Handle) -> Option<KfdInfo> {
        if !self.calls.kfd_info {
            return None;
        }
        let f = self.session.api.kfd_info?;
        // SAFETY: `amdsmi_get_gpu_kfd_info(handle, amdsmi_kfd_info_t*)` (26.x layout, 64 bytes);
        // the pointer is the 32 KiB scratch area.
        self.struct_call::<KfdInfo>(|p| unsafe { f(h, p) })
    }

    fn power_cap_w(&mut self, h: Handle) -> Option<f64> {
        if !self.calls.power_cap {
            return None;
        }
        let f = self.session.api.power_cap_info?;
        // SAFETY: `amdsmi_get_power_cap_info(handle, uint32_t sensor_ind, amdsmi_power_cap_info_t*)`
        // with sensor 0; the pointer is the 32 KiB scratch area.
        let cap = self.struct_call::<PowerCapInfo>(|p| unsafe { f(h, 0, p) })?;
        (cap.power_cap != 0 && cap.power_cap != u64::MAX).then(|| cap.power_cap as f64 / 1e6)
    }

    fn activity(&mut self, h: Handle) -> (Option<f64>, Option<f64>) {
        if !self.calls.activity {
            return (None, None);
        }
        let Some(f) = self.session.api.activity else {
            return (None, None);
        };
        // SAFETY: `amdsmi_get_gpu_activity(handle, amdsmi_engine_usage_t*)`; the pointer is the
        // 32 KiB scratch area.
        match self.struct_call::<EngineUsage>(|p| unsafe { f(h, p) }) {
            Some(u) => (percent(u.gfx_activity), percent(u.umc_activity)),
            None => (None, None),
        }
    }

    fn clock_mhz(&mut self, h: Handle, clk_type: u32) -> Option<f64> {
        if !self.calls.clock {
            return None;
        }
        let f = self.session.api.clock_info?;
        // SAFETY: `amdsmi_get_clock_info(handle, amdsmi_clk_type_t, amdsmi_clk_info_t*)`; the enum
        // is passed as a 4-byte value and the pointer is the 32 KiB scratch area.
        let c = self.struct_call::<ClkInfo>(|p| unsafe { f(h, clk_type, p) })?;
        valid_u32(c.clk).map(f64::from)
    }

    /// Power from `amdsmi_get_power_info`: the current socket power (MI300 and later) is an
    /// instantaneous reading, the average socket power (MI200, Navi) an average.
    fn power_info(&mut self, h: Handle) -> Option<(f64, PowerKind)> {
        if !self.calls.power_info {
            return None;
        }
        let f = self.session.api.power_info?;
        // SAFETY: `amdsmi_get_power_info(handle, amdsmi_power_info_t*)`; the
        // pointer is the 32 KiB scratch area, larger than every encoded layout.
        let call = |p: *mut c_void| unsafe { f(h, p) };
        let (current, average, socket) = match self.abi {
            Abi::Y24 { .. } => {
                let p = self.struct_call::<PowerInfoY24>(call)?;
                (p.current_socket_power, p.average_socket_power, None)
            }
            Abi::M25 => {
                let p = self.struct_call::<PowerInfo25>(call)?;
                (p.current_socket_power, p.average_socket_power, None)
            }
            Abi::M26 => {
                let p = self.struct_call::<PowerInfo26>(call)?;
                (
                    p.current_socket_power,
                    p.average_socket_power,
                    Some(p.socket_power),
                )
            }
            Abi::Unknown => return None,
        };
        pick_power(current, average, socket)
    }

    /// Active PVIOL/TVIOL-style violations (25.x, 26.x layouts). `None` when the call or every
    /// flag is unsupported.
    fn throttle(&mut self, h: Handle) -> Option<Vec<String>> {
        if !self.calls.violation {
            return None;
        }
        let f = self.session.api.violation_status?;
        // SAFETY: `amdsmi_get_violation_status(handle, amdsmi_violation_status_t*)`; the 26.x
        // struct is 6016 bytes and the pointer is the 32 KiB scratch area.
        let v = self.struct_call::<ViolationHead>(|p| unsafe { f(h, p) })?;
        violation_names(&v)
    }

    fn process_list(&mut self, h: Handle, gpu: u32) -> Result<Vec<ProcessSample>, u32> {
        let Some(f) = self.session.api.process_list else {
            return Err(0xFFFF_FFFF);
        };
        let stride = match self.abi {
            Abi::Y24 { sub: 6 } => std::mem::size_of::<ProcInfoY24>(),
            Abi::M26 => std::mem::size_of::<ProcInfo26>(),
            _ => return Err(0xFFFF_FFFF),
        };
        let mut capacity: u32 = 64;
        for _ in 0..3 {
            // Room for `capacity` entries plus the scratch size again as slack.
            let words = (capacity as usize * stride).div_ceil(8) + SCRATCH_WORDS;
            let mut buf = vec![0u64; words];
            let mut count = capacity;
            // SAFETY: `amdsmi_get_gpu_process_list(handle, uint32_t *max_processes,
            // amdsmi_proc_info_t *list)`; `list` has room for `count` entries of this major's
            // layout plus 32 KiB, and `count` is a live `u32` the library may update.
            let status = unsafe { f(h, &mut count, buf.as_mut_ptr().cast()) };
            match status {
                STATUS_SUCCESS => {
                    let n = count.min(capacity) as usize;
                    let base = buf.as_ptr().cast::<u8>();
                    let mut out = Vec::with_capacity(n);
                    for i in 0..n {
                        // SAFETY: entry `i < capacity` lies inside `buf` (sized above), which the
                        // library initialised or we zeroed; both layouts are `Plain`.
                        let entry = unsafe { base.add(i * stride) };
                        out.push(match self.abi {
                            Abi::M26 => {
                                // SAFETY: as above; `read_unaligned` makes no alignment claim.
                                let p = unsafe { entry.cast::<ProcInfo26>().read_unaligned() };
                                process_sample(gpu, p.pid, &p.name, p.memory_usage.vram_mem)
                            }
                            _ => {
                                // SAFETY: as above.
                                let p = unsafe { entry.cast::<ProcInfoY24>().read_unaligned() };
                                process_sample(gpu, p.pid, &p.name, p.memory_usage.vram_mem)
                            }
                        });
                    }
                    return Ok(out);
                }
                STATUS_OUT_OF_RESOURCES | STATUS_MORE_DATA | STATUS_INSUFFICIENT_SIZE => {
                    capacity = count.max(capacity.saturating_mul(2)).min(4096);
                }
                s => return Err(s),
            }
        }
        Err(STATUS_OUT_OF_RESOURCES)
    }

    // -- scalar calls (any major) --

    fn memory(&self, f: Option<MemFn>, h: Handle) -> Option<u64> {
        let f = f?;
        let mut v = 0u64;
        // SAFETY: `amdsmi_get_gpu_memory_{total,usage}(handle, amdsmi_memory_type_t, uint64_t*)`;
        // the enum is passed as a 4-byte value, `v` is a live `u64`.
        let s = unsafe { f(h, MEM_TYPE_VRAM, &mut v) };
        (s == STATUS_SUCCESS).then_some(v)
    }

    fn temperatures(&self, h: Handle) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        let Some(f) = self.session.api.temp_metric else {
            return out;
        };
        for (sensor, label) in TEMP_SENSORS {
            let mut t = 0i64;
            // SAFETY: `amdsmi_get_temp_metric(handle, amdsmi_temperature_type_t,
            // amdsmi_temperature_metric_t, int64_t*)`; enums by 4-byte value, `t` a live `i64`.
            let s = unsafe { f(h, *sensor, TEMP_CURRENT, &mut t) };
            // The library converts to °C (despite the header's "millidegrees" comment).
            if s == STATUS_SUCCESS && (-273..10_000).contains(&t) {
                out.insert((*label).to_string(), t as f64);
            }
        }
        out
    }

    fn energy(&self, h: Handle) -> Option<EnergyReading> {
        let f = self.session.api.energy_count?;
        let (mut ticks, mut res, mut ts) = (0u64, 0f32, 0u64);
        // SAFETY: `amdsmi_get_energy_count(handle, uint64_t*, float*, uint64_t*)`; all three are
        // live locals of the matching types.
        let s = unsafe { f(h, &mut ticks, &mut res, &mut ts) };
        (s == STATUS_SUCCESS && res.is_finite() && res > 0.0).then(|| EnergyReading {
            ticks,
            resolution_uj: f64::from(res),
            timestamp_ns: ts,
            at: Instant::now(),
        })
    }

    fn bdf(&self, h: Handle) -> Option<Bdf> {
        let f = self.session.api.device_bdf?;
        let mut v = 0u64;
        // SAFETY: `amdsmi_get_gpu_device_bdf(handle, amdsmi_bdf_t*)`; `amdsmi_bdf_t` is a union
        // of a 64-bit bit-field struct and `uint64_t as_uint`, so a live `u64` holds it exactly.
        let s = unsafe { f(h, &mut v) };
        (s == STATUS_SUCCESS).then(|| Bdf::from_u64(v))
    }

    fn string_out(&self, f: Option<UuidOrStr>, h: Handle) -> Option<String> {
        let mut buf = [0u8; 256];
        let s = match f? {
            UuidOrStr::Str(f) => {
                // SAFETY: `amdsmi_get_gpu_{compute,memory}_partition(handle, char*, uint32_t len)`;
                // `buf` has `len - 1` bytes of room plus the terminator we keep below.
                unsafe { f(h, buf.as_mut_ptr().cast(), (buf.len() - 1) as u32) }
            }
            UuidOrStr::Uuid(f) => {
                let mut len = (buf.len() - 1) as u32;
                // SAFETY: `amdsmi_get_gpu_device_uuid(handle, unsigned int *len, char*)`; `len`
                // is the room in `buf` (less the terminator we keep below).
                unsafe { f(h, &mut len, buf.as_mut_ptr().cast()) }
            }
        };
        if s != STATUS_SUCCESS {
            return None;
        }
        c_string(&buf)
    }

    fn handle(&self, i: usize) -> Handle {
        std::ptr::with_exposed_provenance_mut(self.devs[i].handle)
    }

    fn power(&mut self, i: usize, h: Handle) -> (Option<f64>, Option<PowerKind>) {
        if let Some((w, kind)) = self.power_info(h) {
            return (Some(w), Some(kind));
        }
        // Scalar fallback: average power between two energy-counter readings.
        let now = self.energy(h);
        let prev = std::mem::replace(&mut self.devs[i].last_energy, now);
        match (prev, now) {
            (Some(a), Some(b)) => (energy_power_w(&a, &b), Some(PowerKind::Average)),
            _ => (None, None),
        }
    }
}

pub(super) enum UuidOrStr {
    Uuid(UuidFn),
    Str(StrFn),
}

impl Backend for AmdSmi {
    fn name(&self) -> &'static str {
        NAME
    }

    fn gpus(&self) -> &[GpuInfo] {
        &self.gpus
    }

    fn sample(&mut self) -> Result<Vec<GpuSample>, TelemetryError> {
        let mut out = Vec::with_capacity(self.gpus.len());
        for i in 0..self.gpus.len() {
            let h = self.handle(i);
            let (util_pct, mem_util_pct) = self.activity(h);
            let (power_w, power_kind) = self.power(i, h);
            out.push(GpuSample {
                gpu: self.gpus[i].index,
                util_pct,
                mem_util_pct,
                vram_used_bytes: self.memory(self.session.api.memory_usage, h),
                vram_total_bytes: self.memory(self.session.api.memory_total, h),
                power_w,
                power_kind,
                temp_c: self.temperatures(h),
                sclk_mhz: self.clock_mhz(h, CLK_TYPE_GFX),
                mclk_mhz: self.clock_mhz(h, CLK_TYPE_MEM),
                throttle: self.throttle(h),
            });
        }
        Ok(out)
    }

    fn processes(&mut self) -> Result<Vec<ProcessSample>, TelemetryError> {
        if !self.calls.process_list || self.session.api.process_list.is_none() {
            return Err(TelemetryError::Read {
                backend: NAME,
                what: "process list".into(),
                message: format!(
                    "not read from AMD SMI {}: amdsmi_proc_info_t layout not encoded for this \
                     version",
                    self.version
                ),
            });
        }
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for i in 0..self.gpus.len() {
            let h = self.handle(i);
            let gpu = self.gpus[i].index;
            match self.process_list(h, gpu) {
                Ok(mut p) => out.append(&mut p),
                Err(s) => errors.push(format!("GPU {gpu}: {}", describe(s))),
            }
        }
        if !errors.is_empty() && errors.len() == self.gpus.len() {
            return Err(TelemetryError::Read {
                backend: NAME,
                what: "process list".into(),
                message: format!("amdsmi_get_gpu_process_list failed ({})", errors.join("; ")),
            });
        }
        Ok(out)
    }
}
