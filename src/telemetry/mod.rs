//! GPU and host telemetry: backends (amdgpu sysfs, AMD SMI, NVML, host), one sampler thread,
//! ring buffers for live views.

pub mod amd_smi;
pub mod amd_sysfs;
pub mod hardware;
pub mod host;
pub mod nvml;
pub mod sampler;
pub mod select;
pub mod types;

pub use types::*;
