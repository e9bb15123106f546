//! AMD SMI's ABI as this backend encodes it: status codes, the library version, which struct
//! calls a major supports and the `repr(C)` layouts of the structs they fill.

use std::fmt;

// ---- constants from amdsmi.h (values unchanged from 24.x to 26.x) ----------------------------

pub(super) const STATUS_SUCCESS: u32 = 0;
pub(super) const STATUS_OUT_OF_RESOURCES: u32 = 15;
pub(super) const STATUS_MORE_DATA: u32 = 39;
pub(super) const STATUS_INSUFFICIENT_SIZE: u32 = 41;
pub(super) const INIT_AMD_GPUS: u64 = 1 << 1;
pub(super) const PROCESSOR_TYPE_AMD_GPU: u32 = 1;
pub(super) const MEM_TYPE_VRAM: u32 = 0;
pub(super) const TEMP_CURRENT: u32 = 0;
pub(super) const CLK_TYPE_GFX: u32 = 0;
pub(super) const CLK_TYPE_MEM: u32 = 4;
/// Temperature sensors read, with the label [`GpuSample::temp_c`] uses.
pub(super) const TEMP_SENSORS: &[(u32, &str)] = &[(0, "edge"), (1, "junction"), (2, "mem")];

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

pub(super) fn describe(status: u32) -> String {
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
    #[cfg(any(test, feature = "testkit"))]
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
    #[cfg(any(test, feature = "testkit"))]
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
pub(super) enum Abi {
    /// 24.6 / 24.7 (year scheme).
    Y24 {
        sub: u32,
    },
    M25,
    M26,
    Unknown,
}

impl Abi {
    pub(super) fn of(v: &LibVersion) -> Abi {
        match (v.abi_major, v.year_major) {
            (24, Some(sub @ (6 | 7))) => Abi::Y24 { sub },
            (25, None) => Abi::M25,
            (26, None) => Abi::M26,
            _ => Abi::Unknown,
        }
    }

    pub(super) fn struct_calls(self) -> StructCalls {
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
pub(super) unsafe trait Plain: Copy {}

/// `amdsmi_engine_usage_t` (24.x–26.x).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct EngineUsage {
    pub(super) gfx_activity: u32,
    pub(super) umc_activity: u32,
    pub(super) mm_activity: u32,
    pub(super) reserved: [u32; 13],
}

/// `amdsmi_clk_info_t` (24.x–26.x), MHz.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct ClkInfo {
    pub(super) clk: u32,
    pub(super) min_clk: u32,
    pub(super) max_clk: u32,
    pub(super) clk_locked: u8,
    pub(super) clk_deep_sleep: u8,
    pub(super) reserved: [u32; 4],
}

/// `amdsmi_power_info_t` of 24.6 / 24.7, W.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct PowerInfoY24 {
    pub(super) current_socket_power: u32,
    pub(super) average_socket_power: u32,
    pub(super) gfx_voltage: u32,
    pub(super) soc_voltage: u32,
    pub(super) mem_voltage: u32,
    pub(super) power_limit: u32,
    pub(super) reserved: [u32; 11],
}

/// `amdsmi_power_info_t` of 25.x; `socket_power` is host-only (µW) there.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct PowerInfo25 {
    pub(super) socket_power: u64,
    pub(super) current_socket_power: u32,
    pub(super) average_socket_power: u32,
    pub(super) gfx_voltage: u32,
    pub(super) soc_voltage: u32,
    pub(super) mem_voltage: u32,
    pub(super) power_limit: u32,
    pub(super) reserved: [u32; 2],
}

/// `amdsmi_power_info_t` of 26.x, W on bare metal; unsupported members are `UINT32_MAX`.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct PowerInfo26 {
    pub(super) socket_power: u64,
    pub(super) current_socket_power: u32,
    pub(super) average_socket_power: u32,
    pub(super) gfx_voltage: u64,
    pub(super) soc_voltage: u64,
    pub(super) mem_voltage: u64,
    pub(super) power_limit: u32,
    pub(super) reserved: [u64; 18],
}

/// `amdsmi_power_cap_info_t` (24.x–26.x), µW on bare metal.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct PowerCapInfo {
    pub(super) power_cap: u64,
    pub(super) default_power_cap: u64,
    pub(super) dpm_cap: u64,
    pub(super) min_power_cap: u64,
    pub(super) max_power_cap: u64,
    pub(super) reserved: [u64; 3],
}

/// The leading part of `amdsmi_violation_status_t`, identical in 25.x and 26.x (26.x appends
/// per-XCP arrays; the scratch buffer holds those). `active_*`: 1 active, 0 not, `UINT8_MAX`
/// unsupported.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct ViolationHead {
    pub(super) reference_timestamp: u64,
    pub(super) violation_timestamp: u64,
    pub(super) acc_counter: u64,
    pub(super) acc_prochot_thrm: u64,
    pub(super) acc_ppt_pwr: u64,
    pub(super) acc_socket_thrm: u64,
    pub(super) acc_vr_thrm: u64,
    pub(super) acc_hbm_thrm: u64,
    pub(super) acc_gfx_clk_below_host_limit: u64,
    pub(super) per_prochot_thrm: u64,
    pub(super) per_ppt_pwr: u64,
    pub(super) per_socket_thrm: u64,
    pub(super) per_vr_thrm: u64,
    pub(super) per_hbm_thrm: u64,
    pub(super) per_gfx_clk_below_host_limit: u64,
    pub(super) active_prochot_thrm: u8,
    pub(super) active_ppt_pwr: u8,
    pub(super) active_socket_thrm: u8,
    pub(super) active_vr_thrm: u8,
    pub(super) active_hbm_thrm: u8,
    pub(super) active_gfx_clk_below_host_limit: u8,
}

/// `amdsmi_asic_info_t` of 24.6 (`AMDSMI_256_LENGTH` name, no CU count).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct AsicInfoY24_6 {
    pub(super) market_name: [u8; 256],
    pub(super) vendor_id: u32,
    pub(super) vendor_name: [u8; 64],
    pub(super) subvendor_id: u32,
    pub(super) device_id: u64,
    pub(super) rev_id: u32,
    pub(super) asic_serial: [u8; 32],
    pub(super) oam_id: u32,
    pub(super) reserved: [u32; 18],
}

/// `amdsmi_asic_info_t` of 24.7 (adds the CU count and graphics target).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct AsicInfoY24_7 {
    pub(super) market_name: [u8; 256],
    pub(super) vendor_id: u32,
    pub(super) vendor_name: [u8; 64],
    pub(super) subvendor_id: u32,
    pub(super) device_id: u64,
    pub(super) rev_id: u32,
    pub(super) asic_serial: [u8; 32],
    pub(super) oam_id: u32,
    pub(super) num_of_compute_units: u32,
    pub(super) target_graphics_version: u64,
    pub(super) reserved: [u32; 15],
}

/// `amdsmi_asic_info_t` of 26.x (`AMDSMI_MAX_STRING_LENGTH` = 256).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct AsicInfo26 {
    pub(super) market_name: [u8; 256],
    pub(super) vendor_id: u32,
    pub(super) vendor_name: [u8; 256],
    pub(super) subvendor_id: u32,
    pub(super) device_id: u64,
    pub(super) rev_id: u32,
    pub(super) asic_serial: [u8; 256],
    pub(super) oam_id: u32,
    pub(super) num_of_compute_units: u32,
    pub(super) target_graphics_version: u64,
    pub(super) subsystem_id: u32,
    pub(super) reserved: [u32; 21],
}

/// The market name opens `amdsmi_asic_info_t` in every major from 24.6 on; 25.x is read for it
/// alone.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct AsicName {
    pub(super) market_name: [u8; 256],
}

/// `amdsmi_kfd_info_t` of 26.x; `UINT*_MAX` when unsupported.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct KfdInfo {
    pub(super) kfd_id: u64,
    pub(super) node_id: u32,
    pub(super) current_partition_id: u32,
    pub(super) reserved: [u32; 12],
}

#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct ProcEngineUsage {
    pub(super) gfx: u64,
    pub(super) enc: u64,
    pub(super) reserved: [u32; 12],
}

#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct ProcMemoryUsage {
    pub(super) gtt_mem: u64,
    pub(super) cpu_mem: u64,
    pub(super) vram_mem: u64,
    pub(super) reserved: [u32; 10],
}

/// `amdsmi_proc_info_t` of 24.6 (`AMDSMI_NORMAL_STRING_LENGTH` = 32).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct ProcInfoY24 {
    pub(super) name: [u8; 32],
    pub(super) pid: u32,
    pub(super) mem: u64,
    pub(super) engine_usage: ProcEngineUsage,
    pub(super) memory_usage: ProcMemoryUsage,
    pub(super) container_name: [u8; 32],
    pub(super) reserved: [u32; 4],
}

/// `amdsmi_proc_info_t` of 26.x (`AMDSMI_MAX_STRING_LENGTH` = 256). 26.0 has `reserved[11]` where
/// 26.1 has `evicted_time, reserved[10]`: same size.
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // mirrors the C layout; not every field is read
pub(super) struct ProcInfo26 {
    pub(super) name: [u8; 256],
    pub(super) pid: u32,
    pub(super) mem: u64,
    pub(super) engine_usage: ProcEngineUsage,
    pub(super) memory_usage: ProcMemoryUsage,
    pub(super) container_name: [u8; 256],
    pub(super) cu_occupancy: u32,
    pub(super) evicted_time: u32,
    pub(super) reserved: [u32; 10],
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
pub(super) const SCRATCH_WORDS: usize = 4096;

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
