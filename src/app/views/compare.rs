//! Two trials side by side: the settings they differ in (the runner's own keys left out).

use crate::run::trial::trial_settings;
use crate::store::TrialRow;
use std::collections::{BTreeMap, BTreeSet};

/// A stored value as the user reads it (`-` for null).
pub fn show_json(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Settings that differ between two trials: (key, value in a, value in b); a setting a trial
/// did not override reads `(config)`.
pub fn settings_diff(a: &TrialRow, b: &TrialRow) -> Vec<(String, String, String)> {
    let (sa, sb) = (trial_settings(a), trial_settings(b));
    let keys: BTreeSet<&String> = sa.keys().chain(sb.keys()).collect();
    let get = |t: &BTreeMap<String, serde_json::Value>, k: &str| {
        t.get(k).map_or("(config)".to_string(), show_json)
    };
    keys.into_iter()
        .map(|k| (k.clone(), get(&sa, k), get(&sb, k)))
        .filter(|(_, x, y)| x != y)
        .collect()
}
