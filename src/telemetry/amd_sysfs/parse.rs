//! Parsers for the small text files the amdgpu backend reads: sysfs attributes, hwmon names,
//! `pp_dpm_*` level lists, DRM fdinfo blocks, KFD topology properties, PCI addresses.
//!
//! Every reader trims whitespace *and* NUL bytes: real sysfs dumps (and some drivers) pad
//! values with `\0` or trailing spaces.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Strips leading/trailing whitespace and NUL bytes.
pub fn clean(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '\0')
}

/// Reads a file as (lossy) UTF-8 and cleans it; `None` when it cannot be read.
pub fn read_text(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    Some(clean(&String::from_utf8_lossy(&bytes)).to_owned())
}

/// Reads a file holding one unsigned integer (decimal or `0x` hex).
pub fn read_u64(path: &Path) -> Option<u64> {
    parse_u64(&read_text(path)?)
}

/// Reads a file holding one signed decimal integer (temperatures can be negative).
pub fn read_i64(path: &Path) -> Option<i64> {
    clean(&read_text(path)?).parse().ok()
}

/// Parses an unsigned integer written in decimal or with a `0x` prefix.
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = clean(s);
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The value of `KEY=value` in a `uevent` file.
pub fn uevent_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let (k, v) = clean(line).split_once('=')?;
        (k == key).then(|| clean(v))
    })
}

/// The `N` of a hwmon attribute named `<prefix>N<suffix>` (`temp2_input` → 2).
pub fn hwmon_index(name: &str, prefix: &str, suffix: &str) -> Option<u32> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The map key of a temperature sensor: its `tempN_label` lower-cased (`edge`, `junction`,
/// `mem`), or `tempN` when the sensor has no (or an empty) label.
pub fn temp_key(label: Option<&str>, n: u32) -> String {
    match label.map(clean) {
        Some(l) if !l.is_empty() => l.to_ascii_lowercase(),
        _ => format!("temp{n}"),
    }
}

/// One line of a `pp_dpm_*` file: `1: 1500Mhz *` or the deep-sleep level `S: 19Mhz *`.
#[derive(Debug, Clone, PartialEq)]
pub struct DpmLevel {
    /// `S` (deep sleep) or the level number.
    pub level: String,
    pub mhz: f64,
    /// The level marked `*` (the one in use).
    pub current: bool,
}

/// Parses one `pp_dpm_*` line; `None` for lines that are not `<level>: <freq><unit>`.
pub fn parse_dpm_line(line: &str) -> Option<DpmLevel> {
    let (level, rest) = clean(line).split_once(':')?;
    let level = clean(level);
    if level.is_empty() || level.contains(char::is_whitespace) {
        return None;
    }
    let current = rest.contains('*');
    let token = rest.split_whitespace().next()?.trim_end_matches('*');
    let split = token
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(token.len());
    let (number, unit) = token.split_at(split);
    let value: f64 = number.parse().ok()?;
    let mhz = match unit.to_ascii_lowercase().as_str() {
        "" | "mhz" => value,
        "ghz" => value * 1e3,
        "khz" => value / 1e3,
        "hz" => value / 1e6,
        _ => return None,
    };
    Some(DpmLevel {
        level: level.to_owned(),
        mhz,
        current,
    })
}

/// All levels of a `pp_dpm_*` file (padding and unparsable lines skipped).
pub fn parse_dpm_levels(text: &str) -> Vec<DpmLevel> {
    clean(text).lines().filter_map(parse_dpm_line).collect()
}

/// The frequency of the level marked `*`, in MHz.
pub fn dpm_current_mhz(text: &str) -> Option<f64> {
    parse_dpm_levels(text)
        .into_iter()
        .find(|l| l.current)
        .map(|l| l.mhz)
}

/// Parses a DRM fdinfo memory figure: `33570816 KiB`, `16 GiB`, `0` (bytes), `512 B`.
pub fn parse_mem_size(s: &str) -> Option<u64> {
    let mut parts = clean(s).split_whitespace();
    let number: u64 = parts.next()?.parse().ok()?;
    let scale: u64 = match parts.next() {
        None | Some("B") => 1,
        Some("KiB") | Some("kB") | Some("KB") => 1 << 10,
        Some("MiB") | Some("MB") => 1 << 20,
        Some("GiB") | Some("GB") => 1 << 30,
        Some(_) => return None,
    };
    if parts.next().is_some() {
        return None;
    }
    number.checked_mul(scale)
}

/// What one DRM fdinfo file says about its client.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrmFdinfo {
    /// `drm-driver` (`amdgpu`, `i915`, ...).
    pub driver: String,
    pub client_id: Option<u64>,
    /// `drm-pdev`, normalised to lower-case `dddd:bb:dd.f`.
    pub pdev: Option<String>,
    /// Resident VRAM in bytes: `drm-memory-vram` (amdgpu's own key, resident), else
    /// `drm-resident-vram`, else `drm-total-vram`.
    pub vram_bytes: Option<u64>,
}

/// Parses an fdinfo block; `None` when it is not a DRM client (no `drm-driver` line).
pub fn parse_fdinfo(text: &str) -> Option<DrmFdinfo> {
    let mut info = DrmFdinfo::default();
    let mut has_driver = false;
    let (mut legacy, mut resident, mut total) = (None, None, None);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = clean(value);
        match clean(key) {
            "drm-driver" => {
                info.driver = value.to_owned();
                has_driver = true;
            }
            "drm-client-id" => info.client_id = value.parse().ok(),
            "drm-pdev" => info.pdev = Some(normalize_bus_id(value)),
            "drm-memory-vram" => legacy = parse_mem_size(value),
            "drm-resident-vram" => resident = parse_mem_size(value),
            "drm-total-vram" => total = parse_mem_size(value),
            _ => {}
        }
    }
    info.vram_bytes = legacy.or(resident).or(total);
    has_driver.then_some(info)
}

/// `key value` lines of a KFD topology `properties` file. Unparsable lines are skipped.
pub fn parse_kfd_properties(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let mut it = clean(line).split_whitespace();
            let key = it.next()?;
            let value = parse_u64(it.next()?)?;
            Some((key.to_owned(), value))
        })
        .collect()
}

/// A PCI address `domain:bus:device.function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bdf {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl Bdf {
    /// Parses `0000:0c:00.0` (or `0c:00.0`, domain 0); hex, any case.
    pub fn parse(s: &str) -> Option<Bdf> {
        let s = clean(s);
        let (head, function) = s.rsplit_once('.')?;
        let mut parts: Vec<&str> = head.split(':').collect();
        if parts.len() == 2 {
            parts.insert(0, "0");
        }
        let [domain, bus, device] = parts.as_slice() else {
            return None;
        };
        let bdf = Bdf {
            domain: u32::from_str_radix(domain, 16).ok()?,
            bus: u8::from_str_radix(bus, 16).ok()?,
            device: u8::from_str_radix(device, 16).ok()?,
            function: u8::from_str_radix(function, 16).ok()?,
        };
        (bdf.device < 32 && bdf.function < 8).then_some(bdf)
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// Lower-case `dddd:bb:dd.f` when `s` is a PCI address, else `s` cleaned.
pub fn normalize_bus_id(s: &str) -> String {
    Bdf::parse(s).map_or_else(|| clean(s).to_owned(), |b| b.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn clean_strips_nul_padding_and_spaces() {
        assert_eq!(clean("3\n\0\0\0\0"), "3");
        assert_eq!(clean("  0x1002 \n\0"), "0x1002");
        assert_eq!(clean("\0\0"), "");
        assert_eq!(parse_u64("17163091968\n\0\0\0"), Some(17_163_091_968));
        assert_eq!(parse_u64("0x74a1\n"), Some(0x74a1));
        assert_eq!(parse_u64("n/a"), None);
    }

    #[test]
    fn read_text_trims_a_padded_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gpu_busy_percent");
        let mut bytes = b"42\n".to_vec();
        bytes.resize(4096, 0);
        std::fs::write(&p, bytes).unwrap();
        assert_eq!(read_text(&p).as_deref(), Some("42"));
        assert_eq!(read_u64(&p), Some(42));
        std::fs::write(&p, "-273150 \0").unwrap();
        assert_eq!(read_i64(&p), Some(-273_150));
        assert_eq!(read_u64(&dir.path().join("missing")), None);
    }

    #[test]
    fn dpm_lines() {
        let l = parse_dpm_line("1: 1500Mhz *").unwrap();
        assert_eq!((l.level.as_str(), l.mhz, l.current), ("1", 1500.0, true));
        let l = parse_dpm_line("0: 500Mhz ").unwrap();
        assert_eq!((l.level.as_str(), l.mhz, l.current), ("0", 500.0, false));
        let l = parse_dpm_line("S: 19Mhz *").unwrap();
        assert_eq!((l.level.as_str(), l.mhz, l.current), ("S", 19.0, true));
        assert_eq!(parse_dpm_line("2: 2.1GHz*").unwrap().mhz, 2100.0);
        assert!(parse_dpm_line("OD_SCLK:").is_none());
        assert!(parse_dpm_line("").is_none());
        assert!(parse_dpm_line("0: fast").is_none());
    }

    #[test]
    fn dpm_current_level_with_padding() {
        // The RX 6900 XT snapshot: trailing spaces, then NUL padding.
        let mut sclk = "0: 500Mhz *\n1: 2660Mhz \n".to_owned();
        sclk.push_str(&"\0".repeat(64));
        assert_eq!(dpm_current_mhz(&sclk), Some(500.0));
        // MI300X: three levels, the current one is a deep-sleep value between them.
        assert_eq!(
            dpm_current_mhz("0: 500Mhz\n1: 142Mhz *\n2: 2100Mhz\n"),
            Some(142.0)
        );
        assert_eq!(
            dpm_current_mhz("S: 133Mhz *\n0: 500Mhz\n1: 2100Mhz"),
            Some(133.0)
        );
        assert_eq!(dpm_current_mhz("0: 500Mhz\n1: 2100Mhz\n"), None);
        assert_eq!(parse_dpm_levels("0: 96Mhz \n1: 456Mhz \n\0\0").len(), 2);
    }

    #[test]
    fn hwmon_names_and_labels() {
        assert_eq!(hwmon_index("temp2_input", "temp", "_input"), Some(2));
        assert_eq!(hwmon_index("temp10_input", "temp", "_input"), Some(10));
        assert_eq!(hwmon_index("temp2_crit", "temp", "_input"), None);
        assert_eq!(hwmon_index("temp_input", "temp", "_input"), None);
        assert_eq!(hwmon_index("tempx_input", "temp", "_input"), None);
        assert_eq!(hwmon_index("freq1_input", "freq", "_input"), Some(1));
        assert_eq!(temp_key(Some("junction\n\0\0"), 2), "junction");
        assert_eq!(temp_key(Some("Edge"), 1), "edge");
        assert_eq!(temp_key(Some(" \0"), 3), "temp3");
        assert_eq!(temp_key(None, 4), "temp4");
    }

    #[test]
    fn mem_sizes() {
        assert_eq!(parse_mem_size("33570816 KiB"), Some(33_570_816 * 1024));
        assert_eq!(parse_mem_size("22 MiB"), Some(22 << 20));
        assert_eq!(parse_mem_size("16 GiB"), Some(16 << 30));
        assert_eq!(parse_mem_size("0"), Some(0));
        assert_eq!(parse_mem_size("512 B"), Some(512));
        assert_eq!(parse_mem_size("12 parsecs"), None);
        assert_eq!(parse_mem_size("x KiB"), None);
    }

    #[test]
    fn fdinfo_amdgpu_legacy_and_modern_keys() {
        let text = "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1239\ndrm-driver:\tamdgpu\n\
                    drm-client-id:\t4\ndrm-pdev:\t0000:0C:00.0\npasid:\t32771\n\
                    drm-total-vram:\t44564 KiB\ndrm-resident-vram:\t44000 KiB\n\
                    drm-memory-vram:\t44564 KiB\ndrm-memory-gtt: \t2392 KiB\n\
                    drm-engine-compute:\t46464671 ns\n";
        let info = parse_fdinfo(text).unwrap();
        assert_eq!(info.driver, "amdgpu");
        assert_eq!(info.client_id, Some(4));
        assert_eq!(info.pdev.as_deref(), Some("0000:0c:00.0"));
        assert_eq!(info.vram_bytes, Some(44_564 * 1024));

        let modern = "drm-driver:\tamdgpu\ndrm-client-id:\t9\ndrm-pdev:\t0000:65:00.0\n\
                      drm-total-vram:\t16 GiB\ndrm-resident-vram:\t16777216 KiB\n";
        assert_eq!(parse_fdinfo(modern).unwrap().vram_bytes, Some(16 << 30));
        let total_only = "drm-driver:\tamdgpu\ndrm-total-vram:\t2 MiB\n";
        let info = parse_fdinfo(total_only).unwrap();
        assert_eq!(
            (info.vram_bytes, info.client_id, info.pdev),
            (Some(2 << 20), None, None)
        );
    }

    #[test]
    fn fdinfo_non_drm_and_other_drivers() {
        assert_eq!(
            parse_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t25\nino:\t3\n"),
            None
        );
        assert_eq!(parse_fdinfo(""), None);
        let i915 = parse_fdinfo("drm-driver:\ti915\ndrm-client-id:\t972\n").unwrap();
        assert_eq!((i915.driver.as_str(), i915.vram_bytes), ("i915", None));
    }

    #[test]
    fn kfd_properties() {
        let props = parse_kfd_properties(
            "cpu_cores_count 0\nsimd_count 1216\nlocation_id 268438528\n\
             unique_id 10165846890312063442\nbroken\nname x\n\0\0",
        );
        assert_eq!(props["simd_count"], 1216);
        assert_eq!(props["location_id"], (1 << 28) | 0x0c00);
        assert_eq!(props["unique_id"], 0x8d14_57e2_c20f_59d2);
        assert!(!props.contains_key("broken"));
        assert!(!props.contains_key("name"));
    }

    #[test]
    fn bus_ids() {
        let b = Bdf::parse("0000:0C:00.0\n\0").unwrap();
        assert_eq!((b.domain, b.bus, b.device, b.function), (0, 0x0c, 0, 0));
        assert_eq!(b.to_string(), "0000:0c:00.0");
        assert_eq!(Bdf::parse("c1:00.1").unwrap().to_string(), "0000:c1:00.1");
        assert_eq!(Bdf::parse("10000:e5:1f.7").unwrap().domain, 0x10000);
        assert!(Bdf::parse("amdgpu_xcp.3").is_none());
        assert!(Bdf::parse("device").is_none());
        assert!(Bdf::parse("0000:0c:20.0").is_none());
        assert_eq!(normalize_bus_id("0000:0C:00.0"), "0000:0c:00.0");
        assert_eq!(normalize_bus_id(" weird "), "weird");
    }

    #[test]
    fn uevent_values() {
        let text = "DRIVER=amdgpu\nPCI_ID=1002:73BF\nPCI_SLOT_NAME=0000:0c:00.0\n\0\0";
        assert_eq!(uevent_value(text, "DRIVER"), Some("amdgpu"));
        assert_eq!(uevent_value(text, "PCI_SLOT_NAME"), Some("0000:0c:00.0"));
        assert_eq!(uevent_value(text, "MODALIAS"), None);
    }
}
