//! Finding amdgpu devices under a sysfs root: DRM nodes grouped by device, MI300-class
//! partitions (`amdgpu_xcp` platform devices) attached to their PCI device, KFD topology nodes.
//!
//! Layout this follows (kernel 6.x):
//! - `class/drm/{cardN,renderDN}` are symlinks to `devices/<pci path>/<bdf>/drm/<node>`, whose
//!   `device` link leads back to the PCI device: one GPU usually has one card and one render
//!   node. Connector entries (`card0-DP-1`) and `version` are not DRM minors and are skipped.
//! - On MI300-class parts amdgpu pre-allocates `MAX_XCP - 1 = 7` extra DRM devices per GPU as
//!   platform devices `devices/platform/amdgpu_xcp.N` (`amdgpu_xcp_N` on newer kernels), whatever
//!   the partition mode. Partition 0 is the PCI device itself. Only the partitions in use have a
//!   KFD topology node; the node's `drm_render_minor` names the partition's render node and its
//!   `domain`/`location_id` the PCI function it belongs to (`location_id` = bus << 8 | devfn,
//!   with the partition id in bits 31:28 on recent kernels or OR-ed into the low bits on some
//!   older ones: the bus and device bits are the same either way).
//! - Without a KFD topology (amdkfd not loaded, or `/sys/class/kfd` not visible), partition
//!   devices are attributed by numbering: each partitionable GPU, in probe (card) order, owns the
//!   next 7 `amdgpu_xcp` devices, and the first `partitions - 1` of them are in use.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use super::ids;
use super::parse::{self, Bdf};

/// Partition devices amdgpu allocates per GPU besides the PCI device (`MAX_XCP - 1`).
pub const XCP_DEVICES_PER_GPU: usize = 7;

/// One DRM minor (`card1`, `renderD128`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrmNode {
    pub name: String,
    pub minor: u32,
    pub render: bool,
}

/// `cardN` / `renderDN`; `None` for connectors (`card0-DP-1`), `version`, `controlD64`...
pub fn parse_drm_name(name: &str) -> Option<DrmNode> {
    let (render, digits) = if let Some(d) = name.strip_prefix("renderD") {
        (true, d)
    } else if let Some(d) = name.strip_prefix("card") {
        (false, d)
    } else {
        return None;
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(DrmNode {
        name: name.to_owned(),
        minor: digits.parse().ok()?,
        render,
    })
}

/// The DRM nodes of one device directory.
#[derive(Debug, Clone)]
pub struct DrmDevice {
    /// The device directory (the `device` link resolved).
    pub dir: PathBuf,
    /// Sorted: card nodes first, then render nodes, each by minor.
    pub nodes: Vec<DrmNode>,
}

impl DrmDevice {
    pub fn card(&self) -> Option<&DrmNode> {
        self.nodes.iter().find(|n| !n.render)
    }

    pub fn render_minor(&self) -> Option<u32> {
        self.nodes.iter().find(|n| n.render).map(|n| n.minor)
    }

    /// The node that names this device to a user: the card, else the render node.
    pub fn display_name(&self) -> Option<&str> {
        self.card()
            .or_else(|| self.nodes.first())
            .map(|n| n.name.as_str())
    }

    fn order_key(&self) -> (u32, u32) {
        (
            self.card().map_or(u32::MAX, |n| n.minor),
            self.render_minor().unwrap_or(u32::MAX),
        )
    }
}

/// Lists `<sysfs>/class/drm`, grouping DRM minors by the device their `device` link resolves to.
pub fn scan_drm(sysfs: &Path) -> std::io::Result<Vec<DrmDevice>> {
    let class = sysfs.join("class").join("drm");
    let mut groups: BTreeMap<PathBuf, Vec<DrmNode>> = BTreeMap::new();
    for entry in fs::read_dir(&class)?.flatten() {
        let file_name = entry.file_name();
        let Some(node) = file_name.to_str().and_then(parse_drm_name) else {
            continue;
        };
        let Ok(dir) = fs::canonicalize(class.join(&file_name).join("device")) else {
            continue;
        };
        if dir.is_dir() {
            groups.entry(dir).or_default().push(node);
        }
    }
    Ok(groups
        .into_iter()
        .map(|(dir, mut nodes)| {
            nodes.sort_by_key(|n| (n.render, n.minor));
            DrmDevice { dir, nodes }
        })
        .collect())
}

/// What a DRM device directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// A PCI function bound to amdgpu.
    Amdgpu,
    /// An MI300-class partition device (`amdgpu_xcp.N` / `amdgpu_xcp_N`) and its number.
    Xcp(Option<u32>),
    Other,
}

pub fn classify(dir: &Path) -> DeviceKind {
    let base = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Some(rest) = base.strip_prefix("amdgpu_xcp") {
        let number = rest
            .strip_prefix('.')
            .or_else(|| rest.strip_prefix('_'))
            .and_then(|d| d.parse().ok());
        return DeviceKind::Xcp(number);
    }
    if is_amdgpu(dir) {
        DeviceKind::Amdgpu
    } else {
        DeviceKind::Other
    }
}

/// `driver` links to amdgpu; else `uevent` says `DRIVER=amdgpu`; else vendor 0x1002 with the
/// amdgpu attributes present (a snapshot copied without its links).
fn is_amdgpu(dir: &Path) -> bool {
    if let Ok(target) = fs::read_link(dir.join("driver")) {
        return target.file_name().is_some_and(|n| n == "amdgpu");
    }
    if let Some(uevent) = parse::read_text(&dir.join("uevent"))
        && let Some(driver) = parse::uevent_value(&uevent, "DRIVER")
    {
        return driver == "amdgpu";
    }
    parse::read_u64(&dir.join("vendor")) == Some(0x1002)
        && (dir.join("gpu_busy_percent").is_file() || dir.join("mem_info_vram_total").is_file())
}

/// The PCI address: the directory name (`0000:0c:00.0`), else `uevent`'s `PCI_SLOT_NAME`.
pub fn pci_bdf(dir: &Path) -> Option<Bdf> {
    if let Some(bdf) = dir
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(Bdf::parse)
    {
        return Some(bdf);
    }
    let uevent = parse::read_text(&dir.join("uevent"))?;
    Bdf::parse(parse::uevent_value(&uevent, "PCI_SLOT_NAME")?)
}

/// The PCI device id: the `device` file (`0x74a1`), else `uevent`'s `PCI_ID=1002:74A1`.
pub fn pci_device_id(dir: &Path) -> Option<u16> {
    if let Some(id) = parse::read_u64(&dir.join("device")).and_then(|v| u16::try_from(v).ok()) {
        return Some(id);
    }
    let uevent = parse::read_text(&dir.join("uevent"))?;
    let (_, device) = parse::uevent_value(&uevent, "PCI_ID")?.split_once(':')?;
    u16::from_str_radix(device, 16).ok()
}

/// One GPU node of the KFD topology (`<sysfs>/class/kfd/kfd/topology/nodes/N`).
#[derive(Debug, Clone)]
pub struct KfdNode {
    pub node: u32,
    pub gpu_id: u64,
    pub props: BTreeMap<String, u64>,
}

impl KfdNode {
    pub fn render_minor(&self) -> Option<u32> {
        self.props
            .get("drm_render_minor")
            .filter(|&&m| m > 0)
            .and_then(|&m| u32::try_from(m).ok())
    }

    /// (PCI domain, bus, device) of the function this node lives on.
    pub fn location(&self) -> Option<(u32, u8, u8)> {
        let domain = u32::try_from(*self.props.get("domain")?).ok()?;
        let loc = *self.props.get("location_id")?;
        let bus = u8::try_from((loc >> 8) & 0xff).ok()?;
        let device = u8::try_from((loc >> 3) & 0x1f).ok()?;
        Some((domain, bus, device))
    }

    /// `simd_count / simd_per_cu`.
    pub fn compute_units(&self) -> Option<u32> {
        let simds = *self.props.get("simd_count")?;
        let per_cu = *self.props.get("simd_per_cu")?;
        if simds == 0 || per_cu == 0 {
            return None;
        }
        u32::try_from(simds / per_cu).ok()
    }
}

/// The GPU nodes of the KFD topology, by node number; empty when there is none.
pub fn read_kfd_topology(sysfs: &Path) -> Vec<KfdNode> {
    let dir = kfd_dir(sysfs).join("topology").join("nodes");
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut nodes: Vec<KfdNode> = entries
        .flatten()
        .filter_map(|entry| {
            let node: u32 = entry.file_name().to_str()?.parse().ok()?;
            let path = entry.path();
            let gpu_id = parse::read_u64(&path.join("gpu_id"))?;
            if gpu_id == 0 {
                return None; // a CPU node
            }
            let props = parse::parse_kfd_properties(&parse::read_text(&path.join("properties"))?);
            Some(KfdNode {
                node,
                gpu_id,
                props,
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.node);
    nodes
}

/// `<sysfs>/class/kfd/kfd`.
pub fn kfd_dir(sysfs: &Path) -> PathBuf {
    sysfs.join("class").join("kfd").join("kfd")
}

/// One physical GPU (a PCI function bound to amdgpu) with its partitions.
#[derive(Debug, Clone)]
pub struct PhysicalGpu {
    /// The PCI device and its own DRM nodes (partition 0).
    pub primary: DrmDevice,
    pub bdf: Option<Bdf>,
    pub device_id: Option<u16>,
    /// `current_compute_partition` / `current_memory_partition`, when the part has them.
    pub compute_partition: Option<String>,
    pub memory_partition: Option<String>,
    /// The KFD node (index into [`Discovery::kfd`]) of partition 0.
    pub primary_kfd: Option<usize>,
    /// Partitions 1.. in order, each with its KFD node.
    pub secondaries: Vec<(DrmDevice, Option<usize>)>,
}

impl PhysicalGpu {
    /// Logical GPUs this device is split into.
    pub fn partition_count(&self) -> usize {
        1 + self.secondaries.len()
    }
}

/// Everything found under a sysfs root.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// In card order.
    pub physicals: Vec<PhysicalGpu>,
    pub kfd: Vec<KfdNode>,
}

/// Number of compute partitions a mode implies (`CPX` = one per XCD, from the id table).
pub fn partitions_for_mode(mode: &str, device_id: Option<u16>) -> Option<usize> {
    match mode.to_ascii_uppercase().as_str() {
        "SPX" => Some(1),
        "DPX" => Some(2),
        "TPX" => Some(3),
        "QPX" => Some(4),
        "CPX" => device_id
            .and_then(ids::instinct_part)
            .and_then(|p| p.xcds)
            .and_then(|x| usize::try_from(x).ok()),
        _ => None,
    }
}

/// `NPS4` → 4.
pub fn nps_count(mode: &str) -> Option<u64> {
    mode.to_ascii_uppercase().strip_prefix("NPS")?.parse().ok()
}

fn read_mode(dir: &Path, file: &str) -> Option<String> {
    parse::read_text(&dir.join(file)).filter(|s| !s.is_empty())
}

/// Finds the amdgpu GPUs and their partitions under `sysfs`.
pub fn discover(sysfs: &Path) -> std::io::Result<Discovery> {
    let mut physicals = Vec::new();
    let mut xcps: Vec<(Option<u32>, DrmDevice)> = Vec::new();
    let mut by_bdf: HashMap<Bdf, usize> = HashMap::new();
    for dev in scan_drm(sysfs)? {
        match classify(&dev.dir) {
            DeviceKind::Amdgpu => {
                let bdf = pci_bdf(&dev.dir);
                // Two directories for one PCI function (a copied tree): keep the first.
                if let Some(b) = bdf
                    && let Some(&i) = by_bdf.get(&b)
                {
                    let p: &mut PhysicalGpu = &mut physicals[i];
                    p.primary.nodes.extend(dev.nodes);
                    p.primary.nodes.sort_by_key(|n| (n.render, n.minor));
                    continue;
                }
                if let Some(b) = bdf {
                    by_bdf.insert(b, physicals.len());
                }
                physicals.push(PhysicalGpu {
                    bdf,
                    device_id: pci_device_id(&dev.dir),
                    compute_partition: read_mode(&dev.dir, "current_compute_partition"),
                    memory_partition: read_mode(&dev.dir, "current_memory_partition"),
                    primary: dev,
                    primary_kfd: None,
                    secondaries: Vec::new(),
                });
            }
            DeviceKind::Xcp(number) => xcps.push((number, dev)),
            DeviceKind::Other => {}
        }
    }
    physicals.sort_by_key(|p| (p.primary.order_key(), p.bdf));
    xcps.sort_by_key(|(number, dev)| (number.unwrap_or(u32::MAX), dev.order_key()));

    let kfd = read_kfd_topology(sysfs);
    if kfd.is_empty() {
        attach_xcps_by_numbering(&mut physicals, xcps);
    } else {
        attach_with_kfd(&mut physicals, xcps, &kfd);
    }
    Ok(Discovery { physicals, kfd })
}

fn attach_with_kfd(
    physicals: &mut [PhysicalGpu],
    xcps: Vec<(Option<u32>, DrmDevice)>,
    kfd: &[KfdNode],
) {
    let by_minor: HashMap<u32, usize> = kfd
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((n.render_minor()?, i)))
        .collect();
    let seen_minors: BTreeSet<u32> = physicals
        .iter()
        .map(|p| &p.primary)
        .chain(xcps.iter().map(|(_, d)| d))
        .filter_map(DrmDevice::render_minor)
        .collect();
    let mut claimed = vec![false; kfd.len()];

    for p in physicals.iter_mut() {
        let by_render = p
            .primary
            .render_minor()
            .and_then(|m| by_minor.get(&m).copied());
        let by_location = || {
            let b = p.bdf?;
            kfd.iter().enumerate().position(|(i, n)| {
                !claimed[i]
                    && n.location() == Some((b.domain, b.bus, b.device))
                    && n.render_minor().is_none_or(|m| !seen_minors.contains(&m))
            })
        };
        p.primary_kfd = by_render.or_else(by_location);
        if let Some(i) = p.primary_kfd {
            claimed[i] = true;
        }
    }

    for (_, dev) in xcps {
        // Partition devices without a KFD node are allocated but not in use.
        let Some(k) = dev.render_minor().and_then(|m| by_minor.get(&m).copied()) else {
            continue;
        };
        if claimed[k] {
            continue;
        }
        let Some(loc) = kfd[k].location() else {
            continue;
        };
        let Some(p) = physicals
            .iter_mut()
            .find(|p| p.bdf.is_some_and(|b| (b.domain, b.bus, b.device) == loc))
        else {
            continue;
        };
        claimed[k] = true;
        p.secondaries.push((dev, Some(k)));
    }
}

fn attach_xcps_by_numbering(physicals: &mut [PhysicalGpu], xcps: Vec<(Option<u32>, DrmDevice)>) {
    let mut pool = xcps.into_iter().map(|(_, d)| d);
    for p in physicals
        .iter_mut()
        .filter(|p| p.compute_partition.is_some())
    {
        let block: Vec<DrmDevice> = pool.by_ref().take(XCP_DEVICES_PER_GPU).collect();
        let in_use = p
            .compute_partition
            .as_deref()
            .and_then(|mode| partitions_for_mode(mode, p.device_id))
            .map_or(0, |n| n.saturating_sub(1));
        p.secondaries = block.into_iter().take(in_use).map(|d| (d, None)).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drm_names() {
        assert_eq!(
            parse_drm_name("card1"),
            Some(DrmNode {
                name: "card1".into(),
                minor: 1,
                render: false
            })
        );
        assert_eq!(
            parse_drm_name("renderD135").map(|n| (n.minor, n.render)),
            Some((135, true))
        );
        assert_eq!(parse_drm_name("card0-DP-1"), None);
        assert_eq!(parse_drm_name("card0-VGA-1"), None);
        assert_eq!(parse_drm_name("version"), None);
        assert_eq!(parse_drm_name("card"), None);
        assert_eq!(parse_drm_name("controlD64"), None);
    }

    #[test]
    fn xcp_names() {
        assert_eq!(
            classify(Path::new("/sys/devices/platform/amdgpu_xcp.29")),
            DeviceKind::Xcp(Some(29))
        );
        assert_eq!(
            classify(Path::new("/sys/devices/platform/amdgpu_xcp_3")),
            DeviceKind::Xcp(Some(3))
        );
    }

    #[test]
    fn modes() {
        assert_eq!(partitions_for_mode("SPX", None), Some(1));
        assert_eq!(partitions_for_mode("qpx", None), Some(4));
        assert_eq!(partitions_for_mode("CPX", Some(0x74a1)), Some(8));
        assert_eq!(partitions_for_mode("CPX", Some(0x74a0)), Some(6));
        assert_eq!(partitions_for_mode("CPX", None), None);
        assert_eq!(partitions_for_mode("N/A", Some(0x74a1)), None);
        assert_eq!(nps_count("NPS4"), Some(4));
        assert_eq!(nps_count("nps1"), Some(1));
        assert_eq!(nps_count("N/A"), None);
    }

    #[test]
    fn kfd_node_fields() {
        let mut props = BTreeMap::new();
        props.insert("simd_count".to_owned(), 152);
        props.insert("simd_per_cu".to_owned(), 4);
        props.insert("location_id".to_owned(), (3 << 28) | 0x0c00);
        props.insert("domain".to_owned(), 0);
        props.insert("drm_render_minor".to_owned(), 131);
        let n = KfdNode {
            node: 4,
            gpu_id: 17326,
            props,
        };
        assert_eq!(n.compute_units(), Some(38));
        assert_eq!(n.location(), Some((0, 0x0c, 0)));
        assert_eq!(n.render_minor(), Some(131));
        // Older kernels OR the partition id into the low (function) bits.
        let mut old = n.clone();
        old.props.insert("location_id".to_owned(), 0x0c00 | 3);
        assert_eq!(old.location(), Some((0, 0x0c, 0)));
    }
}
