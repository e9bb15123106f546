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

// Each file that calls into the C library carries the allowance (see the module docs).
#[allow(unsafe_code)]
mod abi;
#[allow(unsafe_code)]
mod backend;
mod decode;
#[allow(unsafe_code)]
mod library;
#[cfg(test)]
#[allow(unsafe_code)]
mod tests;

#[cfg(any(test, feature = "testkit"))]
pub use abi::{LibVersion, StructCalls, status_name};
pub use backend::AmdSmi;
#[cfg(any(test, feature = "testkit"))]
pub use library::candidate_paths;

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
