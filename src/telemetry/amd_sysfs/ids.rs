//! Marketing names of AMD GPUs by PCI device id (and revision for Radeon), used when a GPU has
//! no (or an empty) `product_name` file, as amdgpu_top shows "AMD Radeon RX 6900 XT".
//!
//! Source: libdrm's `data/amdgpu.ids` (device, revision, marketing name), cross-checked where
//! possible against real tool output: 0x74a1 is `AMD Instinct MI300X` in rocm-smi `-a` on a
//! 4x MI300X host, 0x740f is `AMD Instinct MI210` in `amd-smi static --json`. amdgpu.ids keys
//! on (device, revision); this table keys on the device id alone, which is unambiguous for the
//! Instinct ids below.
//!
//! `xcds` is the number of accelerator complex dies (compute partitions in CPX mode); it is
//! only used to guess the partition count when the KFD topology is unavailable.

/// One Instinct device id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstinctPart {
    pub device_id: u16,
    pub name: &'static str,
    pub xcds: Option<u32>,
}

const fn part(device_id: u16, name: &'static str, xcds: Option<u32>) -> InstinctPart {
    InstinctPart {
        device_id,
        name,
        xcds,
    }
}

/// Known Instinct parts.
pub const INSTINCT_PARTS: &[InstinctPart] = &[
    part(0x738c, "AMD Instinct MI100", None),
    part(0x7408, "AMD Instinct MI250X", None),
    part(0x740c, "AMD Instinct MI250X / MI250", None),
    part(0x740f, "AMD Instinct MI210", None),
    part(0x74a0, "AMD Instinct MI300A", Some(6)),
    part(0x74a1, "AMD Instinct MI300X", Some(8)),
    part(0x74a2, "AMD Instinct MI308X", None),
    part(0x74a5, "AMD Instinct MI325X", Some(8)),
    part(0x74a8, "AMD Instinct MI308X HF", None),
    part(0x74a9, "AMD Instinct MI300X HF", Some(8)),
    part(0x74b5, "AMD Instinct MI300X VF", None),
    part(0x74b6, "AMD Instinct MI308X", None),
    part(0x74bd, "AMD Instinct MI300X HF", Some(8)),
    part(0x75a0, "AMD Instinct MI350X", Some(8)),
    part(0x75a3, "AMD Instinct MI355X", Some(8)),
    part(0x75b0, "AMD Instinct MI350X VF", None),
    part(0x75b3, "AMD Instinct MI355X VF", None),
];

/// Common Radeon and Radeon Pro cards: (device id, revision, name). amdgpu.ids needs the
/// revision here: 0x73bf is the RX 6900 XT at revision 0xc0 but the RX 6800 XT at 0xc1. A small
/// built-in excerpt of libdrm's `data/amdgpu.ids` (the RDNA 2-4 desktop and workstation cards
/// people train on), not the whole table.
pub const RADEON_PARTS: &[(u16, u8, &str)] = &[
    (0x66af, 0xc1, "AMD Radeon VII"),
    (0x731f, 0xc1, "AMD Radeon RX 5700 XT"),
    (0x731f, 0xc4, "AMD Radeon RX 5700"),
    (0x73a3, 0x00, "AMD Radeon Pro W6800"),
    (0x73a5, 0xc0, "AMD Radeon RX 6950 XT"),
    (0x73af, 0xc0, "AMD Radeon RX 6900 XT"),
    (0x73bf, 0xc0, "AMD Radeon RX 6900 XT"),
    (0x73bf, 0xc1, "AMD Radeon RX 6800 XT"),
    (0x73bf, 0xc3, "AMD Radeon RX 6800"),
    (0x73df, 0xc1, "AMD Radeon RX 6700 XT"),
    (0x73ff, 0xc1, "AMD Radeon RX 6600 XT"),
    (0x7448, 0x00, "AMD Radeon Pro W7900"),
    (0x744c, 0xc8, "AMD Radeon RX 7900 XTX"),
    (0x744c, 0xcc, "AMD Radeon RX 7900 XT"),
    (0x744c, 0xce, "AMD Radeon RX 7900 GRE"),
    (0x745e, 0xcc, "AMD Radeon Pro W7800"),
    (0x747e, 0xc8, "AMD Radeon RX 7800 XT"),
    (0x747e, 0xd8, "AMD Radeon RX 7800M"),
    (0x747e, 0xdb, "AMD Radeon RX 7700"),
    (0x747e, 0xff, "AMD Radeon RX 7700 XT"),
    (0x7480, 0x00, "AMD Radeon Pro W7600"),
    (0x7480, 0xc0, "AMD Radeon RX 7600 XT"),
    (0x7480, 0xc1, "AMD Radeon RX 7700S"),
    (0x7480, 0xc2, "AMD Radeon RX 7650 GRE"),
    (0x7480, 0xc3, "AMD Radeon RX 7600S"),
    (0x7480, 0xc7, "AMD Radeon RX 7600M XT"),
    (0x7480, 0xcf, "AMD Radeon RX 7600"),
    (0x7483, 0xcf, "AMD Radeon RX 7600M"),
    (0x7489, 0x00, "AMD Radeon Pro W7500"),
    (0x7550, 0xc0, "AMD Radeon RX 9070 XT"),
    (0x7550, 0xc3, "AMD Radeon RX 9070"),
    (0x7551, 0xc0, "AMD Radeon AI PRO R9700"),
];

/// The table entry for a PCI device id.
pub fn instinct_part(device_id: u16) -> Option<&'static InstinctPart> {
    INSTINCT_PARTS.iter().find(|p| p.device_id == device_id)
}

/// Where libdrm keeps its table of marketing names (distribution packages, then AMD's own).
const IDS_FILES: &[&str] = &[
    "/usr/share/libdrm/amdgpu.ids",
    "/opt/amdgpu/share/libdrm/amdgpu.ids",
    "/opt/rocm/share/libdrm/amdgpu.ids",
];

/// The entries of an `amdgpu.ids` text: `DEVICE,\tREVISION,\tNAME` lines in hex (comments
/// and the version line skipped).
pub fn parse_ids(text: &str) -> Vec<(u16, u8, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.splitn(3, ',');
            let d = u16::from_str_radix(f.next()?.trim(), 16).ok()?;
            let r = u8::from_str_radix(f.next()?.trim(), 16).ok()?;
            let name = f.next()?.trim();
            (!name.is_empty()).then(|| (d, r, name.to_string()))
        })
        .collect()
}

/// The machine's own `amdgpu.ids` (the table amdgpu_top and libdrm read), once.
fn system_ids() -> &'static [(u16, u8, String)] {
    static IDS: std::sync::OnceLock<Vec<(u16, u8, String)>> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        IDS_FILES
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .map(|t| parse_ids(&t))
            .unwrap_or_default()
    })
}

/// The display name for a GPU without a usable `product_name`: the Instinct part of its
/// device id, else its marketing name by device id and revision from the machine's
/// `amdgpu.ids` (as amdgpu_top shows it), else from the built-in excerpt of that table, else
/// `AMD GPU 0x....`.
pub fn fallback_name(device_id: Option<u16>, revision: Option<u8>) -> String {
    name_from(device_id, revision, system_ids())
}

/// [`fallback_name`] with `ids` as the machine's table.
pub fn name_from(
    device_id: Option<u16>,
    revision: Option<u8>,
    ids: &[(u16, u8, String)],
) -> String {
    let Some(id) = device_id else {
        return "AMD GPU".to_owned();
    };
    if let Some(p) = instinct_part(id) {
        return p.name.to_owned();
    }
    let rev = revision;
    ids.iter()
        .find(|(d, r, _)| *d == id && Some(*r) == rev)
        .map(|(_, _, n)| n.clone())
        .or_else(|| {
            RADEON_PARTS
                .iter()
                .find(|(d, r, _)| *d == id && Some(*r) == rev)
                .map(|(_, _, n)| (*n).to_owned())
        })
        .unwrap_or_else(|| match rev {
            Some(r) => format!("AMD GPU 0x{id:04x} (rev 0x{r:02x})"),
            None => format!("AMD GPU 0x{id:04x}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(fallback_name(Some(0x74a1), Some(0)), "AMD Instinct MI300X");
        assert_eq!(fallback_name(Some(0x740f), None), "AMD Instinct MI210");
        assert_eq!(fallback_name(Some(0x75a3), Some(0)), "AMD Instinct MI355X");
        // Radeon: the revision tells the cards of one device id apart.
        assert_eq!(
            fallback_name(Some(0x73bf), Some(0xc0)),
            "AMD Radeon RX 6900 XT"
        );
        assert_eq!(
            fallback_name(Some(0x73bf), Some(0xc1)),
            "AMD Radeon RX 6800 XT"
        );
        assert_eq!(
            fallback_name(Some(0x744c), Some(0xc8)),
            "AMD Radeon RX 7900 XTX"
        );
        assert_eq!(
            name_from(Some(0x73bf), Some(0x99), &[]),
            "AMD GPU 0x73bf (rev 0x99)"
        );
        // Navi 33: the RX 7600 family by revision, as amdgpu.ids names them.
        assert_eq!(
            name_from(Some(0x7480), Some(0xcf), &[]),
            "AMD Radeon RX 7600"
        );
        assert_eq!(
            name_from(Some(0x7480), Some(0xc0), &[]),
            "AMD Radeon RX 7600 XT"
        );
        // The machine's table first (a newer libdrm names more cards).
        let table = parse_ids(
            "# List of AMDGPU IDs\n#\n1.0.0\n7480,\tCF,\tAMD Radeon RX 7600 (from the file)\n\
             7551,\tC0,\tAMD Radeon AI PRO R9700\n",
        );
        assert_eq!(table.len(), 2);
        assert_eq!(
            name_from(Some(0x7480), Some(0xcf), &table),
            "AMD Radeon RX 7600 (from the file)"
        );
        assert_eq!(name_from(Some(0x73bf), None, &[]), "AMD GPU 0x73bf");
        assert_eq!(fallback_name(None, None), "AMD GPU");
    }

    #[test]
    fn ids_are_unique() {
        for (i, a) in INSTINCT_PARTS.iter().enumerate() {
            assert!(
                INSTINCT_PARTS[i + 1..]
                    .iter()
                    .all(|b| b.device_id != a.device_id)
            );
        }
    }
}
