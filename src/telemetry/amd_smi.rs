//! AMD SMI backend: GPU telemetry through `libamd_smi.so`, opened at run time with libloading.
//! There is no link-time dependency, so the same binary runs on hosts without ROCm (the load
//! then fails with [`TelemetryError::Unavailable`] naming every path it tried).
//!
//! # Why this module allows `unsafe`
//!
//! The crate denies `unsafe_code`. This module is the one place that talks to a C library
//! through `dlopen`/`dlsym`: resolving a symbol, calling through it and reading the struct it
//! filled are `unsafe` by nature, and no safe wrapper crate tracks AMD SMI's per-major ABI (see
//! the research notes, §0). The allowance is scoped to this file; every `unsafe` block carries a
//! `// SAFETY:` comment, and the rest of the crate only sees the safe [`AmdSmi`] type.
//!
//! # ABI discipline
//!
//! AMD SMI breaks struct layouts with every library major (SONAME `libamd_smi.so.<major>`:
//! 24 = ROCm 6.1–6.3, 25 = ROCm 6.4, 26 = ROCm 7.x, 27 = ROCm 10 / 7.14). So:
//!
//! 1. every symbol is resolved once, at load;
//! 2. `amdsmi_init(AMDSMI_INIT_AMD_GPUS)` is called, then `amdsmi_get_lib_version`, whose leading
//!    `uint32_t` words are laid out alike in every release (24.x: `year, major, minor, release`;
//!    25+: `major, minor, release`); it is read into an oversized zeroed buffer;
//! 3. only then is any struct-filling call made, and only where this file encodes that struct's
//!    layout for the reported major ([`StructCalls`]). On any other major the backend still
//!    works, with the scalar-out-parameter calls alone, and says so ([`AmdSmi::notes`] and the
//!    GPU name).
//!
//! | call | kind | majors |
//! |---|---|---|
//! | `amdsmi_init`, `amdsmi_shut_down` | scalar | any |
//! | `amdsmi_get_lib_version` | leading `u32` words of an oversized buffer | any |
//! | `amdsmi_get_socket_handles`, `amdsmi_get_processor_handles`, `amdsmi_get_processor_type` | scalar / handle arrays | any |
//! | `amdsmi_get_gpu_memory_total`, `amdsmi_get_gpu_memory_usage` (VRAM, bytes) | scalar | any |
//! | `amdsmi_get_temp_metric` (edge, hotspot, VRAM; °C) | scalar | any |
//! | `amdsmi_get_energy_count` (power from counter deltas) | scalar | any |
//! | `amdsmi_get_gpu_device_bdf` (a `u64` bit-field union) | scalar | any |
//! | `amdsmi_get_gpu_device_uuid`, `amdsmi_get_gpu_compute_partition`, `amdsmi_get_gpu_memory_partition` | char buffer | any |
//! | `amdsmi_get_gpu_activity` (`amdsmi_engine_usage_t`) | struct | 24.6, 24.7, 25, 26 |
//! | `amdsmi_get_clock_info` (`amdsmi_clk_info_t`) | struct | 24.6, 24.7, 25, 26 |
//! | `amdsmi_get_power_info` (`amdsmi_power_info_t`, three layouts) | struct | 24.6, 24.7, 25, 26 |
//! | `amdsmi_get_power_cap_info` (`amdsmi_power_cap_info_t`) | struct | 24.6, 24.7, 25, 26 |
//! | `amdsmi_get_gpu_asic_info` (name; CU count on 24.7 and 26) | struct | 24.6, 24.7, 25, 26 |
//! | `amdsmi_get_violation_status` (PVIOL/TVIOL flags) | struct | 25, 26 |
//! | `amdsmi_get_gpu_kfd_info` (KFD id, partition id) | struct | 26 |
//! | `amdsmi_get_gpu_process_list` (`amdsmi_proc_info_t` array) | struct array | 24.6, 26 |
//!
//! Layout sources: the public `amdsmi.h` of 24.6.1 (ROCm/amdsmi), 26.1.0 and 26.5.0
//! (ROCm/rocm-systems), and the versioned AMD SMI API reference for ROCm 6.3 (24.7) and 6.4
//! (25.x). Major 27 is not encoded: no 27 header was available to check, so a 27 library gets
//! the scalar calls only until its layouts are added here.
//!
//! Buffers handed to struct calls are always larger than the struct (a 32 KiB scratch area;
//! process lists get slack too), so even a layout change within a major cannot make the
//! library write past our memory; at worst a field is misread.
#![allow(unsafe_code)]

use super::types::{Backend, GpuInfo, GpuSample, PowerKind, ProcessSample, TelemetryError};
use libloading::Library;
use std::collections::BTreeMap;
use std::ffi::{OsStr, c_char, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

const NAME: &str = "amd-smi";

/// Library file names, newest ABI first. The unversioned name comes last: many hosts ship no
/// development symlink, and it may point at any major.
pub const LIBRARY_NAMES: &[&str] = &[
    "libamd_smi.so.27",
    "libamd_smi.so.26",
    "libamd_smi.so.25",
    "libamd_smi.so.24",
    "libamd_smi.so",
];

// ---- constants from amdsmi.h (values unchanged from 24.x to 26.x) ----------------------------

const STATUS_SUCCESS: u32 = 0;
const STATUS_OUT_OF_RESOURCES: u32 = 15;
const STATUS_MORE_DATA: u32 = 39;
const STATUS_INSUFFICIENT_SIZE: u32 = 41;
const INIT_AMD_GPUS: u64 = 1 << 1;
const PROCESSOR_TYPE_AMD_GPU: u32 = 1;
const MEM_TYPE_VRAM: u32 = 0;
const TEMP_CURRENT: u32 = 0;
const CLK_TYPE_GFX: u32 = 0;
const CLK_TYPE_MEM: u32 = 4;
/// Temperature sensors read, with the label [`GpuSample::temp_c`] uses.
const TEMP_SENSORS: &[(u32, &str)] = &[(0, "edge"), (1, "junction"), (2, "mem")];

/// Status code to the name `amdsmi.h` gives it.
pub fn status_name(status: u32) -> &'static str {
    match status {
        0 => "SUCCESS",
        1 => "INVAL",
        2 => "NOT_SUPPORTED",
        3 => "NOT_YET_IMPLEMENTED",
        4 => "FAIL_LOAD_MODULE",
        5 => "FAIL_LOAD_SYMBOL",
        6 => "DRM_ERROR",
        7 => "API_FAILED",
        8 => "TIMEOUT",
        9 => "RETRY",
        10 => "NO_PERM",
        11 => "INTERRUPT",
        12 => "IO",
        13 => "ADDRESS_FAULT",
        14 => "FILE_ERROR",
        15 => "OUT_OF_RESOURCES",
        16 => "INTERNAL_EXCEPTION",
        17 => "INPUT_OUT_OF_BOUNDS",
        18 => "INIT_ERROR",
        19 => "REFCOUNT_OVERFLOW",
        20 => "DIRECTORY_NOT_FOUND",
        21 => "IPC_ERROR",
        30 => "BUSY",
        31 => "NOT_FOUND",
        32 => "NOT_INIT",
        33 => "NO_SLOT",
        34 => "DRIVER_NOT_LOADED",
        39 => "MORE_DATA",
        40 => "NO_DATA",
        41 => "INSUFFICIENT_SIZE",
        42 => "UNEXPECTED_SIZE",
        43 => "UNEXPECTED_DATA",
        0xFFFF_FFFE => "MAP_ERROR",
        0xFFFF_FFFF => "UNKNOWN_ERROR",
        _ => "unrecognised status",
    }
}

fn describe(status: u32) -> String {
    format!("status {status} ({})", status_name(status))
}

// ---- library version and the struct layouts it selects --------------------------------------

/// The version `amdsmi_get_lib_version` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LibVersion {
    /// The ABI major, as in the SONAME: 24, 25, 26, 27, …
    pub abi_major: u32,
    /// 24.x only (year scheme `year.major.minor.release`): the header major within the year,
    /// which is what actually changed layouts then (24.6 = ROCm 6.2, 24.7 = ROCm 6.3).
    pub year_major: Option<u32>,
    pub minor: u32,
    pub release: u32,
}

impl LibVersion {
    /// Decode the leading `uint32_t` words of `amdsmi_version_t`. Until 24.x the struct began
    /// with the two-digit year (the SONAME major); from 25.0 it begins with the major.
    pub fn from_words(w: [u32; 4]) -> LibVersion {
        if w[0] <= 24 {
            LibVersion {
                abi_major: w[0],
                year_major: Some(w[1]),
                minor: w[2],
                release: w[3],
            }
        } else {
            LibVersion {
                abi_major: w[0],
                year_major: None,
                minor: w[1],
                release: w[2],
            }
        }
    }

    /// Which struct-filling calls this backend makes for this version.
    pub fn struct_calls(&self) -> StructCalls {
        Abi::of(self).struct_calls()
    }
}

impl fmt::Display for LibVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.year_major {
            Some(m) => write!(
                f,
                "{}.{}.{}.{}",
                self.abi_major, m, self.minor, self.release
            ),
            None => write!(f, "{}.{}.{}", self.abi_major, self.minor, self.release),
        }
    }
}

/// The struct-filling calls made for a library version; everything `false` on a major whose
/// layouts are not encoded here (only scalar calls are made then).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StructCalls {
    pub activity: bool,
    pub clock: bool,
    pub power_info: bool,
    pub power_cap: bool,
    pub asic_info: bool,
    pub violation: bool,
    pub kfd_info: bool,
    pub process_list: bool,
}

impl StructCalls {
    pub fn any(&self) -> bool {
        self.activity
            || self.clock
            || self.power_info
            || self.power_cap
            || self.asic_info
            || self.violation
            || self.kfd_info
            || self.process_list
    }
}

/// The encoded ABIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abi {
    /// 24.6 / 24.7 (year scheme).
    Y24 {
        sub: u32,
    },
    M25,
    M26,
    Unknown,
}

impl Abi {
    fn of(v: &LibVersion) -> Abi {
        match (v.abi_major, v.year_major) {
            (24, Some(sub @ (6 | 7))) => Abi::Y24 { sub },
            (25, None) => Abi::M25,
            (26, None) => Abi::M26,
            _ => Abi::Unknown,
        }
    }

    fn struct_calls(self) -> StructCalls {
        // Engine usage, clock info and power-cap info are identical in the 24.6 and 26.x
        // headers; 25 sits between them. Violation status has its 25/26 layout (with the
        // graphics-clock fields) only from 25. The process-info layout is encoded for 24.6 and 26.
        match self {
            Abi::Y24 { sub } => StructCalls {
                activity: true,
                clock: true,
                power_info: true,
                power_cap: true,
                asic_info: true,
                violation: false,
                kfd_info: false,
                process_list: sub == 6,
            },
            Abi::M25 => StructCalls {
                activity: true,
                clock: true,
                power_info: true,
                power_cap: true,
                asic_info: true,
                violation: true,
                kfd_info: false,
                process_list: false,
            },
            Abi::M26 => StructCalls {
                activity: true,
                clock: true,
                power_info: true,
                power_cap: true,
                asic_info: true,
                violation: true,
                kfd_info: true,
                process_list: true,
            },
            Abi::Unknown => StructCalls::default(),
        }
    }
}

// ---- C struct layouts (public amdsmi.h, per major) -----------------------------------------

/// Marker for the `repr(C)` structs below: integers and byte arrays only, so every bit pattern
/// is a valid value.
///
/// # Safety
/// Implementors must be `repr(C)`, contain only integer fields (or arrays of them), and have an
/// alignment of at most 8.
unsafe trait Plain: Copy {}

/// `amdsmi_engine_usage_t` (24.x–26.x).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct EngineUsage {
    gfx_activity: u32,
    umc_activity: u32,
    mm_activity: u32,
    reserved: [u32; 13],
}

/// `amdsmi_clk_info_t` (24.x–26.x), MHz.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct ClkInfo {
    clk: u32,
    min_clk: u32,
    max_clk: u32,
    clk_locked: u8,
    clk_deep_sleep: u8,
    reserved: [u32; 4],
}

/// `amdsmi_power_info_t` of 24.6 / 24.7, W.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct PowerInfoY24 {
    current_socket_power: u32,
    average_socket_power: u32,
    gfx_voltage: u32,
    soc_voltage: u32,
    mem_voltage: u32,
    power_limit: u32,
    reserved: [u32; 11],
}

/// `amdsmi_power_info_t` of 25.x; `socket_power` is host-only (µW) there.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct PowerInfo25 {
    socket_power: u64,
    current_socket_power: u32,
    average_socket_power: u32,
    gfx_voltage: u32,
    soc_voltage: u32,
    mem_voltage: u32,
    power_limit: u32,
    reserved: [u32; 2],
}

/// `amdsmi_power_info_t` of 26.x, W on bare metal; unsupported members are `UINT32_MAX`.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct PowerInfo26 {
    socket_power: u64,
    current_socket_power: u32,
    average_socket_power: u32,
    gfx_voltage: u64,
    soc_voltage: u64,
    mem_voltage: u64,
    power_limit: u32,
    reserved: [u64; 18],
}

/// `amdsmi_power_cap_info_t` (24.x–26.x), µW on bare metal.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct PowerCapInfo {
    power_cap: u64,
    default_power_cap: u64,
    dpm_cap: u64,
    min_power_cap: u64,
    max_power_cap: u64,
    reserved: [u64; 3],
}

/// The leading part of `amdsmi_violation_status_t`, identical in 25.x and 26.x (26.x appends
/// per-XCP arrays; the scratch buffer holds those). `active_*`: 1 active, 0 not, `UINT8_MAX`
/// unsupported.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct ViolationHead {
    reference_timestamp: u64,
    violation_timestamp: u64,
    acc_counter: u64,
    acc_prochot_thrm: u64,
    acc_ppt_pwr: u64,
    acc_socket_thrm: u64,
    acc_vr_thrm: u64,
    acc_hbm_thrm: u64,
    acc_gfx_clk_below_host_limit: u64,
    per_prochot_thrm: u64,
    per_ppt_pwr: u64,
    per_socket_thrm: u64,
    per_vr_thrm: u64,
    per_hbm_thrm: u64,
    per_gfx_clk_below_host_limit: u64,
    active_prochot_thrm: u8,
    active_ppt_pwr: u8,
    active_socket_thrm: u8,
    active_vr_thrm: u8,
    active_hbm_thrm: u8,
    active_gfx_clk_below_host_limit: u8,
}

/// `amdsmi_asic_info_t` of 24.6 (`AMDSMI_256_LENGTH` name, no CU count).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct AsicInfoY24_6 {
    market_name: [u8; 256],
    vendor_id: u32,
    vendor_name: [u8; 64],
    subvendor_id: u32,
    device_id: u64,
    rev_id: u32,
    asic_serial: [u8; 32],
    oam_id: u32,
    reserved: [u32; 18],
}

/// `amdsmi_asic_info_t` of 24.7 (adds the CU count and graphics target).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct AsicInfoY24_7 {
    market_name: [u8; 256],
    vendor_id: u32,
    vendor_name: [u8; 64],
    subvendor_id: u32,
    device_id: u64,
    rev_id: u32,
    asic_serial: [u8; 32],
    oam_id: u32,
    num_of_compute_units: u32,
    target_graphics_version: u64,
    reserved: [u32; 15],
}

/// `amdsmi_asic_info_t` of 26.x (`AMDSMI_MAX_STRING_LENGTH` = 256).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct AsicInfo26 {
    market_name: [u8; 256],
    vendor_id: u32,
    vendor_name: [u8; 256],
    subvendor_id: u32,
    device_id: u64,
    rev_id: u32,
    asic_serial: [u8; 256],
    oam_id: u32,
    num_of_compute_units: u32,
    target_graphics_version: u64,
    subsystem_id: u32,
    reserved: [u32; 21],
}

/// The market name opens `amdsmi_asic_info_t` in every major from 24.6 on; 25.x is read for it
/// alone.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct AsicName {
    market_name: [u8; 256],
}

/// `amdsmi_kfd_info_t` of 26.x; `UINT*_MAX` when unsupported.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct KfdInfo {
    kfd_id: u64,
    node_id: u32,
    current_partition_id: u32,
    reserved: [u32; 12],
}

#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct ProcEngineUsage {
    gfx: u64,
    enc: u64,
    reserved: [u32; 12],
}

#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct ProcMemoryUsage {
    gtt_mem: u64,
    cpu_mem: u64,
    vram_mem: u64,
    reserved: [u32; 10],
}

/// `amdsmi_proc_info_t` of 24.6 (`AMDSMI_NORMAL_STRING_LENGTH` = 32).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct ProcInfoY24 {
    name: [u8; 32],
    pid: u32,
    mem: u64,
    engine_usage: ProcEngineUsage,
    memory_usage: ProcMemoryUsage,
    container_name: [u8; 32],
    reserved: [u32; 4],
}

/// `amdsmi_proc_info_t` of 26.x (`AMDSMI_MAX_STRING_LENGTH` = 256). 26.0 has `reserved[11]` where
/// 26.1 has `evicted_time, reserved[10]`: same size.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
struct ProcInfo26 {
    name: [u8; 256],
    pid: u32,
    mem: u64,
    engine_usage: ProcEngineUsage,
    memory_usage: ProcMemoryUsage,
    container_name: [u8; 256],
    cu_occupancy: u32,
    evicted_time: u32,
    reserved: [u32; 10],
}

// SAFETY: this and every impl below: the type is `repr(C)`, holds only integers and integer
// arrays (every bit pattern valid), and its alignment is at most 8 (checked below).
unsafe impl Plain for EngineUsage {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for ClkInfo {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for PowerInfoY24 {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for PowerInfo25 {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for PowerInfo26 {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for PowerCapInfo {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for ViolationHead {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for AsicInfoY24_6 {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for AsicInfoY24_7 {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for AsicInfo26 {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for AsicName {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for KfdInfo {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for ProcInfoY24 {}
// SAFETY: as for `EngineUsage` above.
unsafe impl Plain for ProcInfo26 {}

/// Scratch area for struct calls, in `u64` words (32 KiB; the largest struct read,
/// 26.x `amdsmi_violation_status_t`, is 6016 bytes).
const SCRATCH_WORDS: usize = 4096;

// Sizes computed by hand from the headers; a layout typo here fails the build.
const _: () = {
    use std::mem::{align_of, size_of};
    assert!(size_of::<EngineUsage>() == 64);
    assert!(size_of::<ClkInfo>() == 32);
    assert!(size_of::<PowerInfoY24>() == 68);
    assert!(size_of::<PowerInfo25>() == 40);
    assert!(size_of::<PowerInfo26>() == 192);
    assert!(size_of::<PowerCapInfo>() == 64);
    assert!(size_of::<ViolationHead>() == 128);
    assert!(size_of::<AsicInfoY24_6>() == 448);
    assert!(size_of::<AsicInfoY24_7>() == 456);
    assert!(size_of::<AsicInfo26>() == 896);
    assert!(size_of::<KfdInfo>() == 64);
    assert!(size_of::<ProcInfoY24>() == 224);
    assert!(size_of::<ProcInfo26>() == 704);
    assert!(size_of::<ProcInfo26>() <= SCRATCH_WORDS * 8);
    assert!(align_of::<PowerInfo26>() <= 8 && align_of::<ProcInfo26>() <= 8);
};

// ---- resolved symbols ----------------------------------------------------------------------

type Handle = *mut c_void;
type InitFn = unsafe extern "C" fn(u64) -> u32;
type ShutDownFn = unsafe extern "C" fn() -> u32;
type BufFn = unsafe extern "C" fn(*mut c_void) -> u32;
type SocketsFn = unsafe extern "C" fn(*mut u32, *mut Handle) -> u32;
type ProcessorsFn = unsafe extern "C" fn(Handle, *mut u32, *mut Handle) -> u32;
type U32OutFn = unsafe extern "C" fn(Handle, *mut u32) -> u32;
type U64OutFn = unsafe extern "C" fn(Handle, *mut u64) -> u32;
type MemFn = unsafe extern "C" fn(Handle, u32, *mut u64) -> u32;
type TempFn = unsafe extern "C" fn(Handle, u32, u32, *mut i64) -> u32;
type EnergyFn = unsafe extern "C" fn(Handle, *mut u64, *mut f32, *mut u64) -> u32;
type StrFn = unsafe extern "C" fn(Handle, *mut c_char, u32) -> u32;
type UuidFn = unsafe extern "C" fn(Handle, *mut u32, *mut c_char) -> u32;
type StructFn = unsafe extern "C" fn(Handle, *mut c_void) -> u32;
type IndexedStructFn = unsafe extern "C" fn(Handle, u32, *mut c_void) -> u32;
type ProcListFn = unsafe extern "C" fn(Handle, *mut u32, *mut c_void) -> u32;

/// Function pointers copied out of the library. They stay valid while the [`Session`] that owns
/// both them and the `Library` is alive.
struct Api {
    init: InitFn,
    shut_down: ShutDownFn,
    lib_version: BufFn,
    socket_handles: SocketsFn,
    processor_handles: ProcessorsFn,
    processor_type: Option<U32OutFn>,
    memory_total: Option<MemFn>,
    memory_usage: Option<MemFn>,
    temp_metric: Option<TempFn>,
    energy_count: Option<EnergyFn>,
    device_bdf: Option<U64OutFn>,
    device_uuid: Option<UuidFn>,
    compute_partition: Option<StrFn>,
    memory_partition: Option<StrFn>,
    activity: Option<StructFn>,
    power_info: Option<StructFn>,
    power_cap_info: Option<IndexedStructFn>,
    clock_info: Option<IndexedStructFn>,
    violation_status: Option<StructFn>,
    asic_info: Option<StructFn>,
    kfd_info: Option<StructFn>,
    process_list: Option<ProcListFn>,
}

/// Look a symbol up and copy the function pointer out.
fn symbol<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    // SAFETY: every `T` used with this helper is the `extern "C"` function-pointer type that
    // mirrors the symbol's prototype in amdsmi.h (status enum = 4-byte `u32`, enums by value =
    // `u32`, handles = `void*`, structs by pointer). The copied pointer is only called while the
    // owning `Session` keeps `lib` loaded.
    unsafe { lib.get::<T>(name) }
        .map(|s| *s)
        .map_err(|e| format!("{name}: {}", error_chain(&e)))
}

impl Api {
    fn resolve(lib: &Library) -> Result<Api, String> {
        Ok(Api {
            init: symbol(lib, "amdsmi_init")?,
            shut_down: symbol(lib, "amdsmi_shut_down")?,
            lib_version: symbol(lib, "amdsmi_get_lib_version")?,
            socket_handles: symbol(lib, "amdsmi_get_socket_handles")?,
            processor_handles: symbol(lib, "amdsmi_get_processor_handles")?,
            processor_type: symbol(lib, "amdsmi_get_processor_type").ok(),
            memory_total: symbol(lib, "amdsmi_get_gpu_memory_total").ok(),
            memory_usage: symbol(lib, "amdsmi_get_gpu_memory_usage").ok(),
            temp_metric: symbol(lib, "amdsmi_get_temp_metric").ok(),
            energy_count: symbol(lib, "amdsmi_get_energy_count").ok(),
            device_bdf: symbol(lib, "amdsmi_get_gpu_device_bdf").ok(),
            device_uuid: symbol(lib, "amdsmi_get_gpu_device_uuid").ok(),
            compute_partition: symbol(lib, "amdsmi_get_gpu_compute_partition").ok(),
            memory_partition: symbol(lib, "amdsmi_get_gpu_memory_partition").ok(),
            activity: symbol(lib, "amdsmi_get_gpu_activity").ok(),
            power_info: symbol(lib, "amdsmi_get_power_info").ok(),
            power_cap_info: symbol(lib, "amdsmi_get_power_cap_info").ok(),
            clock_info: symbol(lib, "amdsmi_get_clock_info").ok(),
            violation_status: symbol(lib, "amdsmi_get_violation_status").ok(),
            asic_info: symbol(lib, "amdsmi_get_gpu_asic_info").ok(),
            kfd_info: symbol(lib, "amdsmi_get_gpu_kfd_info").ok(),
            process_list: symbol(lib, "amdsmi_get_gpu_process_list").ok(),
        })
    }
}

/// An initialised library: `amdsmi_shut_down` runs on drop, before the library is unloaded.
struct Session {
    api: Api,
    path: PathBuf,
    // Declared last: dropped after `Drop::drop` has called `amdsmi_shut_down`.
    _lib: Library,
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: `amdsmi_shut_down` takes no arguments; `amdsmi_init` succeeded for this
        // session (a `Session` is only built after it did) and the library is still loaded.
        let _ = unsafe { (self.api.shut_down)() };
    }
}

// ---- the backend ---------------------------------------------------------------------------

/// Per-GPU state: the processor handle (kept as an address so the backend is `Send`) and the
/// last energy-counter reading.
struct Dev {
    handle: usize,
    last_energy: Option<EnergyReading>,
}

#[derive(Clone, Copy)]
struct EnergyReading {
    ticks: u64,
    resolution_uj: f64,
    timestamp_ns: u64,
    at: Instant,
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

fn unavailable(message: String) -> TelemetryError {
    TelemetryError::Unavailable {
        backend: NAME,
        message,
    }
}

/// The paths [`AmdSmi::load`] tries, in order: each library name bare (the loader's search path,
/// `LD_LIBRARY_PATH`), then under `$ROCM_PATH/lib`, `/opt/rocm/lib` and `/opt/rocm/lib64`.
pub fn candidate_paths(rocm_path: Option<&OsStr>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(r) = rocm_path.filter(|r| !r.is_empty()) {
        dirs.push(Path::new(r).join("lib"));
    }
    for d in ["/opt/rocm/lib", "/opt/rocm/lib64"] {
        let d = PathBuf::from(d);
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    let mut out = Vec::new();
    for name in LIBRARY_NAMES {
        out.push(PathBuf::from(name));
        for d in &dirs {
            out.push(d.join(name));
        }
    }
    out
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
    pub fn lib_version(&self) -> LibVersion {
        self.version
    }

    /// The struct-filling calls made for this library version.
    pub fn struct_calls(&self) -> StructCalls {
        self.calls
    }

    /// The file the library was loaded from.
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

enum UuidOrStr {
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

// ---- pure helpers --------------------------------------------------------------------------

/// An error and its sources, `: `-joined (libloading puts the `dlerror` text in the source).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}

/// Collect handles with the count-query convention: a null buffer asks for the count.
fn handle_list(mut call: impl FnMut(*mut u32, *mut Handle) -> u32) -> Result<Vec<Handle>, u32> {
    let mut count = 0u32;
    let s = call(&mut count, std::ptr::null_mut());
    if s != STATUS_SUCCESS {
        return Err(s);
    }
    let mut out = vec![std::ptr::null_mut(); count as usize];
    if count == 0 {
        return Ok(out);
    }
    let s = call(&mut count, out.as_mut_ptr());
    if s != STATUS_SUCCESS {
        return Err(s);
    }
    out.truncate(count as usize);
    Ok(out)
}

fn read_u32_words(scratch: &[u64]) -> [u32; 4] {
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
fn c_string(buf: &[u8]) -> Option<String> {
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let s = String::from_utf8_lossy(&buf[..end]).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `UINT16_MAX`/`UINT32_MAX` mean "unsupported" in AMD SMI structs.
fn valid_u32(v: u32) -> Option<u32> {
    (v != u32::MAX && v != u32::from(u16::MAX)).then_some(v)
}

fn percent(v: u32) -> Option<f64> {
    valid_u32(v).filter(|p| *p <= 100).map(f64::from)
}

fn pick_power(current: u32, average: u32, socket: Option<u64>) -> Option<(f64, PowerKind)> {
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

/// Average power between two energy-counter readings; the library's nanosecond timestamps when
/// they advance, our own clock otherwise. `None` on a counter reset or no elapsed time.
fn energy_power_w(a: &EnergyReading, b: &EnergyReading) -> Option<f64> {
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
fn violation_names(v: &ViolationHead) -> Option<Vec<String>> {
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

fn process_sample(gpu: u32, pid: u32, name: &[u8], vram: u64) -> ProcessSample {
    ProcessSample {
        pid,
        gpu,
        vram_bytes: vram,
        name: c_string(name),
    }
}

/// PCI address decoded from `amdsmi_bdf_t` (function 3 bits, device 5, bus 8, domain 48).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bdf {
    domain: u64,
    bus: u64,
    device: u64,
    function: u64,
}

impl Bdf {
    fn from_u64(v: u64) -> Bdf {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_words_decode_both_schemes() {
        let y = LibVersion::from_words([24, 6, 1, 0]);
        assert_eq!(y.abi_major, 24);
        assert_eq!(y.year_major, Some(6));
        assert_eq!(y.to_string(), "24.6.1.0");
        let n = LibVersion::from_words([26, 5, 0, 0xdead]);
        assert_eq!(
            (n.abi_major, n.year_major, n.minor, n.release),
            (26, None, 5, 0)
        );
        assert_eq!(n.to_string(), "26.5.0");
    }

    #[test]
    fn struct_calls_only_for_encoded_layouts() {
        let v = |w| LibVersion::from_words(w).struct_calls();
        assert!(v([26, 1, 0, 0]).process_list && v([26, 1, 0, 0]).violation);
        assert!(v([25, 2, 0, 0]).power_info && !v([25, 2, 0, 0]).process_list);
        assert!(v([24, 6, 1, 0]).process_list && !v([24, 6, 1, 0]).violation);
        assert!(!v([24, 7, 0, 0]).process_list && v([24, 7, 0, 0]).power_info);
        for unknown in [
            [27, 0, 0, 0],
            [99, 0, 0, 0],
            [24, 5, 0, 0],
            [23, 1, 0, 0],
            [0; 4],
        ] {
            assert!(!v(unknown).any(), "{unknown:?}");
        }
    }

    #[test]
    fn candidates_cover_every_major_and_rocm_dirs() {
        let c = candidate_paths(Some(OsStr::new("/opt/rocm-7.1.0")));
        let s: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(s[0], "libamd_smi.so.27");
        assert_eq!(s[1], "/opt/rocm-7.1.0/lib/libamd_smi.so.27");
        for want in [
            "/opt/rocm/lib/libamd_smi.so.26",
            "/opt/rocm/lib64/libamd_smi.so.25",
            "libamd_smi.so.24",
            "/opt/rocm/lib/libamd_smi.so",
        ] {
            assert!(s.iter().any(|p| p == want), "{want} missing from {s:?}");
        }
        // ROCM_PATH=/opt/rocm is not tried twice.
        let d = candidate_paths(Some(OsStr::new("/opt/rocm")));
        assert_eq!(d.len(), LIBRARY_NAMES.len() * 3);
    }

    #[test]
    fn bdf_decodes_like_the_c_bitfields() {
        let v = (0x0001u64 << 16) | (0x0c << 8) | (0x02 << 3) | 0x1;
        assert_eq!(Bdf::from_u64(v).to_string(), "0001:0c:02.1");
    }

    #[test]
    fn power_prefers_current_then_average_and_skips_sentinels() {
        assert_eq!(
            pick_power(612, u32::MAX, None),
            Some((612.0, PowerKind::Instant))
        );
        assert_eq!(
            pick_power(u32::MAX, 300, None),
            Some((300.0, PowerKind::Average))
        );
        assert_eq!(
            pick_power(u32::MAX, u32::MAX, Some(450)),
            Some((450.0, PowerKind::Instant))
        );
        assert_eq!(pick_power(0, u32::MAX, Some(u64::MAX)), None);
    }

    #[test]
    fn energy_delta_uses_library_timestamps() {
        let t = Instant::now();
        let a = EnergyReading {
            ticks: 0,
            resolution_uj: 16.0,
            timestamp_ns: 1_000_000_000,
            at: t,
        };
        let b = EnergyReading {
            ticks: 38_250_000,
            resolution_uj: 16.0,
            timestamp_ns: 2_000_000_000,
            at: t,
        };
        assert_eq!(energy_power_w(&a, &b), Some(612.0));
        assert_eq!(energy_power_w(&b, &a), None, "counter went backwards");
    }

    #[test]
    fn violations_name_active_flags_only() {
        let mut v = ViolationHead {
            reference_timestamp: 0,
            violation_timestamp: 0,
            acc_counter: 0,
            acc_prochot_thrm: 0,
            acc_ppt_pwr: 0,
            acc_socket_thrm: 0,
            acc_vr_thrm: 0,
            acc_hbm_thrm: 0,
            acc_gfx_clk_below_host_limit: 0,
            per_prochot_thrm: 0,
            per_ppt_pwr: 0,
            per_socket_thrm: 0,
            per_vr_thrm: 0,
            per_hbm_thrm: 0,
            per_gfx_clk_below_host_limit: 0,
            active_prochot_thrm: u8::MAX,
            active_ppt_pwr: u8::MAX,
            active_socket_thrm: u8::MAX,
            active_vr_thrm: u8::MAX,
            active_hbm_thrm: u8::MAX,
            active_gfx_clk_below_host_limit: u8::MAX,
        };
        assert_eq!(violation_names(&v), None);
        v.active_ppt_pwr = 1;
        v.active_socket_thrm = 0;
        assert_eq!(violation_names(&v), Some(vec!["ppt-power".to_string()]));
    }

    #[test]
    fn c_strings_stop_at_nul() {
        assert_eq!(c_string(b"SPX\0junk"), Some("SPX".into()));
        assert_eq!(c_string(b"\0\0"), None);
        assert_eq!(status_name(34), "DRIVER_NOT_LOADED");
    }
}
