//! The loaded library: resolved symbols, the initialised session, where the library is looked
//! for, and the handle-list convention.

use super::LIBRARY_NAMES;
use super::abi::*;
use libloading::Library;
use std::ffi::{OsStr, c_char, c_void};
use std::path::{Path, PathBuf};

// ---- resolved symbols ----------------------------------------------------------------------

pub(super) type Handle = *mut c_void;
pub(super) type InitFn = unsafe extern "C" fn(u64) -> u32;
pub(super) type ShutDownFn = unsafe extern "C" fn() -> u32;
pub(super) type BufFn = unsafe extern "C" fn(*mut c_void) -> u32;
pub(super) type SocketsFn = unsafe extern "C" fn(*mut u32, *mut Handle) -> u32;
pub(super) type ProcessorsFn = unsafe extern "C" fn(Handle, *mut u32, *mut Handle) -> u32;
pub(super) type U32OutFn = unsafe extern "C" fn(Handle, *mut u32) -> u32;
pub(super) type U64OutFn = unsafe extern "C" fn(Handle, *mut u64) -> u32;
pub(super) type MemFn = unsafe extern "C" fn(Handle, u32, *mut u64) -> u32;
pub(super) type TempFn = unsafe extern "C" fn(Handle, u32, u32, *mut i64) -> u32;
pub(super) type EnergyFn = unsafe extern "C" fn(Handle, *mut u64, *mut f32, *mut u64) -> u32;
pub(super) type StrFn = unsafe extern "C" fn(Handle, *mut c_char, u32) -> u32;
pub(super) type UuidFn = unsafe extern "C" fn(Handle, *mut u32, *mut c_char) -> u32;
pub(super) type StructFn = unsafe extern "C" fn(Handle, *mut c_void) -> u32;
pub(super) type IndexedStructFn = unsafe extern "C" fn(Handle, u32, *mut c_void) -> u32;
pub(super) type ProcListFn = unsafe extern "C" fn(Handle, *mut u32, *mut c_void) -> u32;

/// Function pointers copied out of the library. They stay valid while the [`Session`] that owns
/// both them and the `Library` is alive.
pub(super) struct Api {
    pub(super) init: InitFn,
    pub(super) shut_down: ShutDownFn,
    pub(super) lib_version: BufFn,
    pub(super) socket_handles: SocketsFn,
    pub(super) processor_handles: ProcessorsFn,
    pub(super) processor_type: Option<U32OutFn>,
    pub(super) memory_total: Option<MemFn>,
    pub(super) memory_usage: Option<MemFn>,
    pub(super) temp_metric: Option<TempFn>,
    pub(super) energy_count: Option<EnergyFn>,
    pub(super) device_bdf: Option<U64OutFn>,
    pub(super) device_uuid: Option<UuidFn>,
    pub(super) compute_partition: Option<StrFn>,
    pub(super) memory_partition: Option<StrFn>,
    pub(super) activity: Option<StructFn>,
    pub(super) power_info: Option<StructFn>,
    pub(super) power_cap_info: Option<IndexedStructFn>,
    pub(super) clock_info: Option<IndexedStructFn>,
    pub(super) violation_status: Option<StructFn>,
    pub(super) asic_info: Option<StructFn>,
    pub(super) kfd_info: Option<StructFn>,
    pub(super) process_list: Option<ProcListFn>,
}

/// Look a symbol up and copy the function pointer out.
pub(super) fn symbol<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    // SAFETY: every `T` used with this helper is the `extern "C"` function-pointer type that
    // mirrors the symbol's prototype in amdsmi.h (status enum = 4-byte `u32`, enums by value =
    // `u32`, handles = `void*`, structs by pointer). The copied pointer is only called while the
    // owning `Session` keeps `lib` loaded.
    unsafe { lib.get::<T>(name) }
        .map(|s| *s)
        .map_err(|e| format!("{name}: {}", error_chain(&e)))
}

impl Api {
    pub(super) fn resolve(lib: &Library) -> Result<Api, String> {
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
pub(super) struct Session {
    pub(super) api: Api,
    pub(super) path: PathBuf,
    // Declared last: dropped after `Drop::drop` has called `amdsmi_shut_down`.
    pub(super) _lib: Library,
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: `amdsmi_shut_down` takes no arguments; `amdsmi_init` succeeded for this
        // session (a `Session` is only built after it did) and the library is still loaded.
        let _ = unsafe { (self.api.shut_down)() };
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

/// An error and its sources, `: `-joined (libloading puts the `dlerror` text in the source).
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
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
pub(super) fn handle_list(
    mut call: impl FnMut(*mut u32, *mut Handle) -> u32,
) -> Result<Vec<Handle>, u32> {
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
