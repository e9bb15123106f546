//! What the TUI remembers between runs, as lazygit keeps its `state.yml` apart from its
//! `config.yml`: whether the tour was shown (a `toured` marker beside the state file), and the
//! launch profile last chosen for each experiment (keyed by the experiment's
//! canonical path), in `$XDG_STATE_HOME/primus-tune/state.toml`, else
//! `~/.local/state/primus-tune/state.toml`. It is written atomically (a temp file renamed over
//! it) under the folder's lock, so two TUIs do not lose each other's entries. It is not a
//! settings file: one that cannot be read is ignored, and rewritten at the next change.

use super::AppError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The state file: `$XDG_STATE_HOME/primus-tune/state.toml`, else
/// `~/.local/state/primus-tune/state.toml` (None without either variable).
pub fn state_path() -> Option<PathBuf> {
    Some(crate::util::paths::xdg_dir("XDG_STATE_HOME", ".local/state")?.join("state.toml"))
}

/// The marker beside the state file that says the TUI's tour was shown once.
fn tour_marker() -> Option<PathBuf> {
    Some(state_path()?.with_file_name("toured"))
}

/// The marker of releases before the state file (under the data folder), still honoured.
fn legacy_tour_marker() -> PathBuf {
    crate::util::bundled::data_dir("state").join("toured")
}

/// Whether the tour was shown once (on this account).
pub fn tour_shown() -> bool {
    tour_marker().is_some_and(|m| m.exists()) || legacy_tour_marker().exists()
}

/// Record that the tour was shown (best effort: a tour shown again is no loss).
pub fn mark_tour_shown() {
    let Some(m) = tour_marker() else {
        return;
    };
    if let Some(d) = m.parent() {
        let _ = std::fs::create_dir_all(d);
    }
    let _ = std::fs::write(m, "");
}

/// How an experiment is named in the state file: its canonical path (the path as given when
/// it cannot be resolved); None for a path that is not UTF-8.
fn experiment_key(experiment: &Path) -> Option<String> {
    let p = std::fs::canonicalize(experiment).unwrap_or_else(|_| experiment.to_path_buf());
    p.to_str().map(str::to_string)
}

/// The profile last chosen for `experiment`, if the state file at `state` says one.
pub fn remembered_profile(state: &Path, experiment: &Path) -> Option<String> {
    read(state).remove(&experiment_key(experiment)?)
}

/// Remember `profile` as the one chosen for `experiment`.
pub fn remember_profile(state: &Path, experiment: &Path, profile: &str) -> Result<(), AppError> {
    let Some(key) = experiment_key(experiment) else {
        return Ok(());
    };
    let dir = crate::config::save::folder_of(state);
    std::fs::create_dir_all(dir)?;
    let lock = crate::config::save::lock_dir(dir)?;
    let mut profiles = read(state);
    if profiles.get(&key).map(String::as_str) == Some(profile) {
        return Ok(());
    }
    profiles.insert(key, profile.to_string());
    crate::config::save::replace(state, write(&profiles).as_bytes(), None, &lock)?;
    Ok(())
}

/// The `[profiles]` table of the state file (empty when it is missing or unreadable).
fn read(state: &Path) -> BTreeMap<String, String> {
    let Ok(text) = std::fs::read_to_string(state) else {
        return BTreeMap::new();
    };
    let Ok(doc) = toml_edit::Document::parse(text.as_str()) else {
        tracing::warn!(file = %state.display(), "unreadable state file ignored");
        return BTreeMap::new();
    };
    doc.get("profiles")
        .and_then(|t| t.as_table_like())
        .map(|t| {
            t.iter()
                .filter_map(|(k, v)| Some((k.to_string(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// The state file's text.
fn write(profiles: &BTreeMap<String, String>) -> String {
    let mut s = String::from(
        "# What the primus-tune TUI remembers between runs (safe to delete).\n\
         # The launch profile last chosen, per experiment.\n[profiles]\n",
    );
    for (exp, profile) in profiles {
        s.push_str(&format!("{} = {}\n", quote(exp), quote(profile)));
    }
    s
}

/// `s` as a TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_is_remembered_per_experiment_and_odd_paths_survive() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state/primus-tune/state.toml");
        let a = d.path().join("a \"q\"\\b.yaml");
        let b = d.path().join("b.yaml");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        assert_eq!(remembered_profile(&state, &a), None);
        remember_profile(&state, &a, "primus").unwrap();
        remember_profile(&state, &b, "proxy-torch").unwrap();
        remember_profile(&state, &a, "megatron").unwrap();
        assert_eq!(remembered_profile(&state, &a).as_deref(), Some("megatron"));
        assert_eq!(
            remembered_profile(&state, &b).as_deref(),
            Some("proxy-torch")
        );
        // The key is the canonical path: another spelling of the same file finds it.
        let other = d.path().join(".").join("b.yaml");
        assert_eq!(
            remembered_profile(&state, &other).as_deref(),
            Some("proxy-torch")
        );
        // No temp file is left beside it.
        let left: Vec<_> = std::fs::read_dir(state.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }

    #[test]
    fn an_unreadable_state_file_is_ignored_and_replaced() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state.toml");
        let exp = d.path().join("e.yaml");
        std::fs::write(&state, "[profiles\n").unwrap();
        assert_eq!(remembered_profile(&state, &exp), None);
        remember_profile(&state, &exp, "primus").unwrap();
        assert_eq!(remembered_profile(&state, &exp).as_deref(), Some("primus"));
    }
}
