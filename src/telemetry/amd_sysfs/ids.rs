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
    (0x747e, 0xff, "AMD Radeon RX 7700 XT"),
    (0x7550, 0xc0, "AMD Radeon RX 9070 XT"),
    (0x7550, 0xc3, "AMD Radeon RX 9070"),
    (0x7551, 0xc0, "AMD Radeon AI PRO R9700"),
];

/// The table entry for a PCI device id.
pub fn instinct_part(device_id: u16) -> Option<&'static InstinctPart> {
    INSTINCT_PARTS.iter().find(|p| p.device_id == device_id)
}

/// The display name for a GPU without a usable `product_name`: the Instinct part of its
/// device id, else the Radeon card of its device id and revision, else `AMD GPU 0x....`.
pub fn fallback_name(device_id: Option<u16>, revision: Option<u8>) -> String {
    let Some(id) = device_id else {
        return "AMD GPU".to_owned();
    };
    if let Some(p) = instinct_part(id) {
        return p.name.to_owned();
    }
    RADEON_PARTS
        .iter()
        .find(|(d, r, _)| *d == id && Some(*r) == revision)
        .map_or_else(
            || format!("AMD GPU 0x{id:04x}"),
            |(_, _, name)| (*name).to_owned(),
        )
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
        assert_eq!(fallback_name(Some(0x73bf), Some(0x99)), "AMD GPU 0x73bf");
        assert_eq!(fallback_name(Some(0x73bf), None), "AMD GPU 0x73bf");
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
