//! Names of AMD Instinct parts by PCI device id, used when a GPU has no (or an empty)
//! `product_name` file.
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

/// The table entry for a PCI device id.
pub fn instinct_part(device_id: u16) -> Option<&'static InstinctPart> {
    INSTINCT_PARTS.iter().find(|p| p.device_id == device_id)
}

/// The display name for a GPU without a usable `product_name`.
pub fn fallback_name(device_id: Option<u16>) -> String {
    match device_id {
        Some(id) => {
            instinct_part(id).map_or_else(|| format!("AMD GPU 0x{id:04x}"), |p| p.name.to_owned())
        }
        None => "AMD GPU".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(fallback_name(Some(0x74a1)), "AMD Instinct MI300X");
        assert_eq!(fallback_name(Some(0x740f)), "AMD Instinct MI210");
        assert_eq!(fallback_name(Some(0x75a3)), "AMD Instinct MI355X");
        assert_eq!(fallback_name(Some(0x73bf)), "AMD GPU 0x73bf");
        assert_eq!(fallback_name(None), "AMD GPU");
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
