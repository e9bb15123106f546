//! Telemetry types shared by every backend. Units are normalised at the edge and named in the
//! fields: %, bytes, W, °C, MHz. Every reading is optional: a sensor a device lacks (MI300X has no
//! edge temperature; secondary partitions report no power) stays `None`, never 0.

pub use crate::domain::telemetry::{GpuInfo, GpuSample, PowerKind, ProcessSample};

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
