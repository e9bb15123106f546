//! Choosing the GPU backend at run time: one binary for every machine.

use super::amd_smi::AmdSmi;
use super::amd_sysfs::AmdSysfs;
use super::nvml::Nvml;
use super::types::Backend;
use std::path::{Path, PathBuf};

/// Backend names accepted by `--backend`.
pub const NAMES: &[&str] = &["auto", "nvml", "amdgpu-sysfs", "amd-smi", "host"];

#[derive(Debug, Clone)]
pub struct Roots {
    pub sysfs: PathBuf,
    pub procfs: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sysfs: PathBuf::from("/sys"),
            procfs: PathBuf::from("/proc"),
        }
    }
}

/// The backend that opened (None: host only) and why the others did not.
pub type Opened = (Option<Box<dyn Backend>>, Vec<String>);

/// A backend name `--backend` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown backend `{name}` (one of {all}){near}",
    name = .0,
    near = crate::util::suggest::did_you_mean(&self.0, &BACKENDS),
    all = BACKENDS.join(", ")
)]
pub struct UnknownBackend(pub String);

/// The names `--backend` takes.
pub const BACKENDS: [&str; 5] = ["auto", "nvml", "amdgpu-sysfs", "amd-smi", "host"];

/// `name` when it is one of [`BACKENDS`] (to check `--backend` as it is parsed, before a
/// trial that would sample nothing is launched).
pub fn known(name: &str) -> Result<String, UnknownBackend> {
    if BACKENDS.contains(&name) {
        Ok(name.to_string())
    } else {
        Err(UnknownBackend(name.to_string()))
    }
}

/// Open the named backend, or with `auto` the first that works: NVML, then amdgpu sysfs (AMD SMI
/// only when asked for by name: it adds counters, sysfs needs no ROCm). Returns the backend (None:
/// host only) and one line per backend that was tried and failed.
pub fn open(name: &str, roots: &Roots) -> Result<Opened, UnknownBackend> {
    let mut notes = Vec::new();
    let try_nvml = |notes: &mut Vec<String>| match Nvml::open(&roots.procfs) {
        Ok(b) => Some(Box::new(b) as Box<dyn Backend>),
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    };
    let try_sysfs = |notes: &mut Vec<String>| match AmdSysfs::open(&roots.sysfs, &roots.procfs) {
        Ok(b) => Some(Box::new(b) as Box<dyn Backend>),
        Err(e) => {
            notes.push(e.to_string());
            None
        }
    };
    let backend = match name {
        "auto" => {
            // A recorded sysfs tree given explicitly wins over whatever this machine has.
            let explicit_tree = roots.sysfs != Path::new("/sys");
            if explicit_tree {
                try_sysfs(&mut notes)
            } else {
                try_nvml(&mut notes).or_else(|| try_sysfs(&mut notes))
            }
        }
        "nvml" => try_nvml(&mut notes),
        "amdgpu-sysfs" => try_sysfs(&mut notes),
        "amd-smi" => match AmdSmi::load() {
            Ok(b) => {
                // What this library version cannot read is said where the backend is named.
                notes.extend(b.notes().iter().cloned());
                Some(Box::new(b) as Box<dyn Backend>)
            }
            Err(e) => {
                notes.push(e.to_string());
                None
            }
        },
        "host" => None,
        other => return Err(UnknownBackend(other.to_string())),
    };
    Ok((backend, notes))
}
