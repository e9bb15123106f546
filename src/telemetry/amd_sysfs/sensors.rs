//! The sensor files of one amdgpu PCI device, located once at open time and re-read on every
//! sample. A file that has gone or no longer parses yields `None` for that reading only.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::parse;
use crate::telemetry::types::PowerKind;

/// Where a clock comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClockSource {
    /// hwmon `freqN_input`, Hz.
    HwmonHz(PathBuf),
    /// `pp_dpm_sclk` / `pp_dpm_mclk`: the level marked `*`, MHz.
    Dpm(PathBuf),
}

impl ClockSource {
    pub fn read_mhz(&self) -> Option<f64> {
        match self {
            ClockSource::HwmonHz(p) => parse::read_u64(p).map(|hz| hz as f64 / 1e6),
            ClockSource::Dpm(p) => parse::dpm_current_mhz(&parse::read_text(p)?),
        }
    }
}

/// The sensor files of one device.
#[derive(Debug, Clone, Default)]
pub struct DeviceFiles {
    pub gpu_busy: Option<PathBuf>,
    pub mem_busy: Option<PathBuf>,
    pub vram_used: Option<PathBuf>,
    pub vram_total: Option<PathBuf>,
    /// `power1_average` / `power1_input`, the preferred one first.
    pub power: Vec<(PathBuf, PowerKind)>,
    pub power_cap: Option<PathBuf>,
    /// (key, `tempN_input`) by N.
    pub temps: Vec<(String, PathBuf)>,
    pub sclk: Option<ClockSource>,
    pub mclk: Option<ClockSource>,
}

fn existing(path: PathBuf) -> Option<PathBuf> {
    path.is_file().then_some(path)
}

/// The amdgpu hwmon directory of a device: the first `hwmon/hwmonN` named `amdgpu`, else the
/// first one.
pub fn find_hwmon(dir: &Path) -> Option<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = fs::read_dir(dir.join("hwmon"))
        .ok()?
        .flatten()
        .filter_map(|e| {
            let n = e
                .file_name()
                .to_str()?
                .strip_prefix("hwmon")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .filter(|(_, p)| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter()
        .find(|(_, p)| parse::read_text(&p.join("name")).as_deref() == Some("amdgpu"))
        .or_else(|| dirs.first())
        .map(|(_, p)| p.clone())
}

impl DeviceFiles {
    /// Locates the files of the amdgpu PCI device at `dir`.
    pub fn probe(dir: &Path) -> DeviceFiles {
        let mut files = DeviceFiles {
            gpu_busy: existing(dir.join("gpu_busy_percent")),
            mem_busy: existing(dir.join("mem_busy_percent")),
            vram_used: existing(dir.join("mem_info_vram_used")),
            vram_total: existing(dir.join("mem_info_vram_total")),
            ..DeviceFiles::default()
        };
        let mut hw_sclk = None;
        let mut hw_mclk = None;
        if let Some(hwmon) = find_hwmon(dir) {
            let average = existing(hwmon.join("power1_average")).map(|p| (p, PowerKind::Average));
            let input = existing(hwmon.join("power1_input")).map(|p| (p, PowerKind::Instant));
            files.power = average.into_iter().chain(input).collect();
            // Prefer a file that reads now: some parts list power1_average but cannot report it.
            if let Some(pos) = files
                .power
                .iter()
                .position(|(p, _)| parse::read_u64(p).is_some())
            {
                files.power[..=pos].rotate_right(1);
            }
            files.power_cap = existing(hwmon.join("power1_cap"));
            let names: Vec<String> = fs::read_dir(&hwmon)
                .map(|rd| {
                    rd.flatten()
                        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let mut temps: BTreeMap<u32, PathBuf> = BTreeMap::new();
            let mut freqs: BTreeMap<u32, PathBuf> = BTreeMap::new();
            for name in &names {
                if let Some(n) = parse::hwmon_index(name, "temp", "_input") {
                    temps.insert(n, hwmon.join(name));
                } else if let Some(n) = parse::hwmon_index(name, "freq", "_input") {
                    freqs.insert(n, hwmon.join(name));
                }
            }
            for (n, path) in temps {
                let label = parse::read_text(&hwmon.join(format!("temp{n}_label")));
                let mut key = parse::temp_key(label.as_deref(), n);
                if files.temps.iter().any(|(k, _)| *k == key) {
                    key = format!("temp{n}");
                }
                files.temps.push((key, path));
            }
            for (n, path) in freqs {
                let label = parse::read_text(&hwmon.join(format!("freq{n}_label")));
                let slot = match (label.as_deref().map(str::to_ascii_lowercase).as_deref(), n) {
                    (Some("sclk"), _) | (None, 1) => &mut hw_sclk,
                    (Some("mclk"), _) | (None, 2) => &mut hw_mclk,
                    _ => continue,
                };
                if slot.is_none() {
                    *slot = Some(ClockSource::HwmonHz(path));
                }
            }
        }
        files.sclk = hw_sclk.or_else(|| existing(dir.join("pp_dpm_sclk")).map(ClockSource::Dpm));
        files.mclk = hw_mclk.or_else(|| existing(dir.join("pp_dpm_mclk")).map(ClockSource::Dpm));
        files
    }

    pub fn read_util(&self) -> Option<f64> {
        self.gpu_busy
            .as_deref()
            .and_then(parse::read_u64)
            .map(|v| v as f64)
    }

    pub fn read_mem_util(&self) -> Option<f64> {
        self.mem_busy
            .as_deref()
            .and_then(parse::read_u64)
            .map(|v| v as f64)
    }

    pub fn read_vram_used(&self) -> Option<u64> {
        self.vram_used.as_deref().and_then(parse::read_u64)
    }

    pub fn read_vram_total(&self) -> Option<u64> {
        self.vram_total.as_deref().and_then(parse::read_u64)
    }

    /// Watts and which figure it is; falls back to the other file when the preferred one fails.
    pub fn read_power(&self) -> Option<(f64, PowerKind)> {
        self.power
            .iter()
            .find_map(|(p, kind)| parse::read_u64(p).map(|uw| (uw as f64 / 1e6, *kind)))
    }

    pub fn read_power_cap_w(&self) -> Option<f64> {
        self.power_cap
            .as_deref()
            .and_then(parse::read_u64)
            .map(|uw| uw as f64 / 1e6)
    }

    /// °C by sensor key; sensors that fail to read are left out.
    pub fn read_temps(&self) -> BTreeMap<String, f64> {
        self.temps
            .iter()
            .filter_map(|(k, p)| Some((k.clone(), parse::read_i64(p)? as f64 / 1000.0)))
            .collect()
    }
}
