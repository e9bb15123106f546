//! The hardware table (`presets/gpus.yaml`): static facts per GPU model for MFU and headroom.

use crate::config::yaml;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;

pub const GPUS_YAML: &str = include_str!("../../presets/gpus.yaml");

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GpuModel {
    pub name: String,
    pub vendor: String,
    /// Lower-case substrings of the product name that identify the model.
    #[serde(rename = "match")]
    pub matches: Vec<String>,
    pub arch: String,
    pub compute_units: u32,
    pub vram_gib: f64,
    /// Dense peak, TFLOP/s per GPU.
    pub peak_bf16_tflops: f64,
    pub peak_fp8_tflops: f64,
    pub memory_bandwidth_tbs: f64,
    pub tbp_w: f64,
}

#[derive(Debug, Clone, Deserialize)]
struct Table {
    gpus: Vec<GpuModel>,
}

static TABLE: LazyLock<Vec<GpuModel>> = LazyLock::new(|| {
    parse(GPUS_YAML).unwrap_or_else(|e| panic!("presets/gpus.yaml is invalid: {e}"))
});

pub fn parse(text: &str) -> Result<Vec<GpuModel>, String> {
    let node = yaml::parse(text)
        .map_err(|e| e.to_string())?
        .ok_or("empty table")?;
    let t: Table = serde_json::from_value(node.typed().to_json()).map_err(|e| e.to_string())?;
    Ok(t.gpus)
}

pub fn table() -> &'static [GpuModel] {
    &TABLE
}

/// The model whose match strings occur in a product name (`AMD Instinct MI300X`, `NVIDIA H200`).
pub fn lookup(product_name: &str) -> Option<&'static GpuModel> {
    let n = product_name.to_lowercase();
    table()
        .iter()
        .find(|m| m.matches.iter().any(|s| n.contains(s.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_parses_and_matches_names() {
        assert!(table().len() >= 5);
        assert_eq!(
            lookup("AMD Instinct MI300X").unwrap().peak_bf16_tflops,
            1307.4
        );
        assert_eq!(lookup("NVIDIA H200").unwrap().compute_units, 132);
        assert_eq!(
            lookup("AMD Instinct MI355X OAM").unwrap().peak_fp8_tflops,
            5033.2
        );
        assert!(lookup("Radeon RX 6900 XT").is_none());
    }
}
