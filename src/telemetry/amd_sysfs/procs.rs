//! GPU memory per process from DRM fdinfo (`<procfs>/<pid>/fdinfo/<fd>`) and KFD
//! (`<sysfs>/class/kfd/kfd/proc/<pid>/vram_<gpu_id>`).
//!
//! - fdinfo: blocks with `drm-driver: amdgpu`; `drm-pdev` names the PCI function; one client
//!   can sit behind several fds (dup, fork), so each `(drm-pdev, drm-client-id)` counts once per
//!   pid. fdinfo cannot tell MI300 partitions apart (every partition's clients report the PCI
//!   function), so it is charged to partition 0.
//! - KFD: bytes per process per KFD node, which is per partition.
//! - Merge, per (pid, logical GPU): the larger of the two on an unpartitioned GPU (KFD buffers
//!   are also DRM buffers of the process's render-node file, so the figures overlap rather than
//!   add up); on a partitioned GPU the KFD figures, with fdinfo used only for a process that has
//!   no KFD memory there. Zero-byte entries are dropped.
//!
//! Pids that vanish or cannot be read (permissions) are skipped without error.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::Path;

use super::parse;
use crate::telemetry::types::ProcessSample;

/// How processes map onto the backend's GPUs.
#[derive(Debug, Clone, Default)]
pub struct Attribution {
    /// Normalised PCI address → physical index.
    pub by_bus: HashMap<String, usize>,
    /// KFD gpu_id → logical index.
    pub by_gpu_id: HashMap<u64, usize>,
    /// Logical index → physical index.
    pub physical_of: Vec<usize>,
    /// Physical index → logical index of partition 0.
    pub primary_of: Vec<usize>,
    /// Physical index → split into several logical GPUs.
    pub partitioned: Vec<bool>,
}

fn numeric_entries(dir: &Path) -> std::io::Result<Vec<u32>> {
    let mut pids: Vec<u32> = fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

/// VRAM per physical GPU that one pid's amdgpu DRM clients hold.
fn fdinfo_usage(procfs: &Path, pid: u32, by_bus: &HashMap<String, usize>) -> BTreeMap<usize, u64> {
    let mut usage = BTreeMap::new();
    let pid_dir = procfs.join(pid.to_string());
    let Ok(entries) = fs::read_dir(pid_dir.join("fdinfo")) else {
        return usage;
    };
    let mut seen: HashSet<(String, u64)> = HashSet::new();
    for entry in entries.flatten() {
        let fd = entry.file_name();
        // Cheap pre-filter where the fd link is readable: only DRM device files matter.
        if let Ok(target) = fs::read_link(pid_dir.join("fd").join(&fd))
            && !target.starts_with("/dev/dri")
        {
            continue;
        }
        let Ok(bytes) = fs::read(entry.path()) else {
            continue; // closed or the process exited since the listing
        };
        let Some(info) = parse::parse_fdinfo(&String::from_utf8_lossy(&bytes)) else {
            continue;
        };
        if info.driver != "amdgpu" {
            continue;
        }
        let Some(pdev) = info.pdev else {
            continue;
        };
        let Some(&physical) = by_bus.get(&pdev) else {
            continue;
        };
        if let Some(client) = info.client_id
            && !seen.insert((pdev, client))
        {
            continue;
        }
        *usage.entry(physical).or_insert(0) += info.vram_bytes.unwrap_or(0);
    }
    usage
}

/// `vram_<gpu_id>` bytes per logical GPU for one KFD process directory.
fn kfd_usage(dir: &Path, by_gpu_id: &HashMap<u64, usize>) -> BTreeMap<usize, u64> {
    let mut usage = BTreeMap::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return usage;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(gpu_id) = name
            .to_str()
            .and_then(|n| n.strip_prefix("vram_"))
            .and_then(|id| id.parse::<u64>().ok())
        else {
            continue;
        };
        let (Some(&logical), Some(bytes)) =
            (by_gpu_id.get(&gpu_id), parse::read_u64(&entry.path()))
        else {
            continue;
        };
        *usage.entry(logical).or_insert(0) += bytes;
    }
    usage
}

/// KFD VRAM per logical GPU summed over processes; `None` when the KFD process directory
/// cannot be listed.
pub fn kfd_totals(kfd_proc: &Path, by_gpu_id: &HashMap<u64, usize>) -> Option<HashMap<usize, u64>> {
    let pids = numeric_entries(kfd_proc).ok()?;
    let mut totals = HashMap::new();
    for pid in pids {
        for (logical, bytes) in kfd_usage(&kfd_proc.join(pid.to_string()), by_gpu_id) {
            *totals.entry(logical).or_insert(0) += bytes;
        }
    }
    Some(totals)
}

/// Scans fdinfo and KFD. Fails only when `procfs` itself cannot be listed.
pub fn scan(
    procfs: &Path,
    kfd_proc: &Path,
    at: &Attribution,
) -> std::io::Result<Vec<ProcessSample>> {
    let pids = numeric_entries(procfs)?;
    // (logical, pid) → bytes
    let mut merged: BTreeMap<(usize, u32), u64> = BTreeMap::new();
    // pid → physical GPUs where it holds KFD memory
    let mut kfd_physicals: HashMap<u32, HashSet<usize>> = HashMap::new();
    for pid in numeric_entries(kfd_proc).unwrap_or_default() {
        for (logical, bytes) in kfd_usage(&kfd_proc.join(pid.to_string()), &at.by_gpu_id) {
            merged.insert((logical, pid), bytes);
            if let Some(&physical) = at.physical_of.get(logical) {
                kfd_physicals.entry(pid).or_default().insert(physical);
            }
        }
    }
    for &pid in &pids {
        for (physical, bytes) in fdinfo_usage(procfs, pid, &at.by_bus) {
            let partitioned = at.partitioned.get(physical).copied().unwrap_or(false);
            if partitioned
                && kfd_physicals
                    .get(&pid)
                    .is_some_and(|s| s.contains(&physical))
            {
                continue;
            }
            let Some(&logical) = at.primary_of.get(physical) else {
                continue;
            };
            let slot = merged.entry((logical, pid)).or_insert(0);
            *slot = (*slot).max(bytes);
        }
    }
    let mut names: HashMap<u32, Option<String>> = HashMap::new();
    let mut out = Vec::new();
    for ((logical, pid), bytes) in merged {
        if bytes == 0 {
            continue;
        }
        let name = names
            .entry(pid)
            .or_insert_with(|| {
                parse::read_text(&procfs.join(pid.to_string()).join("comm"))
                    .filter(|s| !s.is_empty())
            })
            .clone();
        out.push(ProcessSample {
            pid,
            gpu: u32::try_from(logical).unwrap_or(u32::MAX),
            vram_bytes: bytes,
            name,
        });
    }
    Ok(out)
}
