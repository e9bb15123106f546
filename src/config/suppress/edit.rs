//! Recording a decision in `primus-tune.toml` (what `recommend --ack` writes) and withdrawing
//! it. The text is edited in place — the rest of the file, its comments and its layout stay as
//! they are — read back to check that it says what was meant, and replaced atomically under
//! the folder's lock (as a save of an experiment is: [`crate::config::save`]).

use super::file::{self, FILE_NAME, is_header_table};
use crate::config::diag::Location;
use crate::config::save;
use std::path::{Path, PathBuf};

/// The comment a new `primus-tune.toml` starts with.
const HEADER: &str = "# primus-tune: decisions about its rules and lint codes, with the reason (read by `lint`,\n\
# `checklist` and `recommend`; `recommend --ack` adds to it). [ignore]: every experiment under\n\
# this folder; [per-file-ignores.\"PATH\"]: the experiments PATH (a glob: * ? **) names.\n";

#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not in a form this edit keeps intact: why, and what to write by hand.
    #[error("{0}")]
    Refused(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> EditError + '_ {
    move |source| EditError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A TOML basic string.
pub fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push('\t'),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A key as TOML reads it: bare when it can be.
fn key(s: &str) -> String {
    let bare = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if bare { s.to_string() } else { quoted(s) }
}

/// The byte offset just past the line that holds `at` (past its newline, or the end).
fn end_of_line(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}

fn start_of_line(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

fn hand(pattern: &str, rule: &str, reason: &str) -> String {
    format!(
        "add `{} = {}` under `[per-file-ignores.{}]` by hand",
        key(rule),
        quoted(reason),
        quoted(pattern)
    )
}

/// `text` with `rule = "reason"` in `[per-file-ignores."pattern"]`: the reason replaced when
/// the rule is there, else a line added to the table, else the table added at the end.
pub fn set(text: &str, pattern: &str, rule: &str, reason: &str) -> Result<String, String> {
    let doc = toml_edit::Document::parse(text).map_err(|e| e.message().trim().to_string())?;
    let entry = format!("{} = {}", key(rule), quoted(reason));
    let table = doc
        .as_table()
        .get("per-file-ignores")
        .and_then(|i| i.as_table_like())
        .and_then(|t| t.get(pattern));
    let out = match table {
        None => {
            let mut out = text.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if !out.trim().is_empty() {
                out.push('\n');
            }
            out.push_str(&format!(
                "[per-file-ignores.{}]\n{entry}\n",
                quoted(pattern)
            ));
            out
        }
        Some(item) if is_header_table(item) => {
            let t = item.as_table().ok_or("not a table")?;
            match t.get_key_value(rule) {
                Some((_, v)) => {
                    let span = v.span().ok_or("the value has no place in the file")?;
                    format!(
                        "{}{}{}",
                        &text[..span.start],
                        quoted(reason),
                        &text[span.end..]
                    )
                }
                None => {
                    let last = t
                        .iter()
                        .filter_map(|(k, _)| t.get(k).and_then(|i| i.span()).map(|s| s.end))
                        .max()
                        .or_else(|| t.span().map(|s| s.end))
                        .ok_or("the table has no place in the file")?;
                    let at = end_of_line(text, last);
                    let nl = if text[..at].ends_with('\n') { "" } else { "\n" };
                    format!("{}{nl}{entry}\n{}", &text[..at], &text[at..])
                }
            }
        }
        Some(_) => {
            return Err(format!(
                "the decisions for {} are written inline or with dotted keys, which this edit \
                 does not rewrite",
                quoted(pattern)
            ));
        }
    };
    Ok(out)
}

/// `text` without `rule` in `[per-file-ignores."pattern"]`; None when it is not there.
pub fn remove(text: &str, pattern: &str, rule: &str) -> Result<Option<String>, String> {
    let doc = toml_edit::Document::parse(text).map_err(|e| e.message().trim().to_string())?;
    let Some(item) = doc
        .as_table()
        .get("per-file-ignores")
        .and_then(|i| i.as_table_like())
        .and_then(|t| t.get(pattern))
    else {
        return Ok(None);
    };
    let Some(t) = item.as_table_like() else {
        return Ok(None);
    };
    let Some((k, v)) = t.get_key_value(rule) else {
        return Ok(None);
    };
    let (Some(ks), Some(vs)) = (k.span(), v.span()) else {
        return Err("the decision has no place in the file".into());
    };
    let (from, to) = (start_of_line(text, ks.start), end_of_line(text, vs.end));
    let after = text[vs.end..to].trim();
    if !is_header_table(item)
        || !text[from..ks.start].trim().is_empty()
        || !(after.is_empty() || after.starts_with('#'))
    {
        return Err(format!(
            "`{rule}` for {} shares its line with other TOML",
            quoted(pattern)
        ));
    }
    Ok(Some(format!("{}{}", &text[..from], &text[to..])))
}

/// Read back: the entries of `text` for `pattern`, rule by rule.
fn reads_back(text: &str, toml: &Path, pattern: &str) -> Result<Vec<file::Entry>, String> {
    let entries = file::parse(text, toml).map_err(|d| d.message)?;
    Ok(entries
        .into_iter()
        .filter(|e| e.pattern.as_deref() == Some(pattern))
        .collect())
}

/// Records `rule = "reason"` for `pattern` in `toml` (created, with a header comment, when
/// absent); returns where it is written.
pub fn record(toml: &Path, pattern: &str, rule: &str, reason: &str) -> Result<Location, EditError> {
    let target = save::target_of(toml).unwrap_or_else(|_| toml.to_path_buf());
    let lock = save::lock_dir(save::folder_of(&target)).map_err(io(&target))?;
    let (text, perms) = match std::fs::read_to_string(&target) {
        Ok(t) => (t, std::fs::metadata(&target).ok().map(|m| m.permissions())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (HEADER.to_string(), None),
        Err(e) => return Err(io(&target)(e)),
    };
    let refused = |why: String| {
        EditError::Refused(format!(
            "{}: {why}; {}",
            target.display(),
            hand(pattern, rule, reason)
        ))
    };
    let new = set(&text, pattern, rule, reason).map_err(refused)?;
    let back = reads_back(&new, &target, pattern).map_err(refused)?;
    let Some(e) = back
        .iter()
        .find(|e| e.rule == rule && e.reason == reason.trim())
    else {
        return Err(refused("the edited file does not read back as that".into()));
    };
    save::replace(&target, new.as_bytes(), perms, &lock).map_err(io(&target))?;
    Ok(e.at.clone())
}

/// Withdraws `rule` for `pattern` from `toml`; false when it was not there.
pub fn withdraw(toml: &Path, pattern: &str, rule: &str) -> Result<bool, EditError> {
    let target = save::target_of(toml).unwrap_or_else(|_| toml.to_path_buf());
    if !target.is_file() {
        return Ok(false);
    }
    let lock = save::lock_dir(save::folder_of(&target)).map_err(io(&target))?;
    let text = std::fs::read_to_string(&target).map_err(io(&target))?;
    let refused = |why: String| {
        EditError::Refused(format!(
            "{}: {why}; delete `{rule}` under `[per-file-ignores.{}]` by hand",
            target.display(),
            quoted(pattern)
        ))
    };
    let Some(new) = remove(&text, pattern, rule).map_err(refused)? else {
        return Ok(false);
    };
    let back = reads_back(&new, &target, pattern).map_err(refused)?;
    if back.iter().any(|e| e.rule == rule) {
        return Err(refused(
            "the edited file still reads as acknowledging it".into(),
        ));
    }
    let perms = std::fs::metadata(&target).ok().map(|m| m.permissions());
    save::replace(&target, new.as_bytes(), perms, &lock).map_err(io(&target))?;
    Ok(true)
}

/// Where a new decision for `experiment` goes: the nearest `primus-tune.toml` up from its
/// folder, else a new one in its folder; and the experiment's path from there (the key of its
/// `[per-file-ignores."PATH"]` table).
pub fn place_for(experiment: &Path) -> std::io::Result<(PathBuf, String)> {
    let exp = std::path::absolute(experiment)?;
    let dir = exp.parent().unwrap_or(Path::new("/"));
    let toml = file::find(dir).unwrap_or_else(|| dir.join(FILE_NAME));
    let base = toml.parent().unwrap_or(Path::new("/"));
    let rel = exp.strip_prefix(base).unwrap_or(&exp);
    Ok((toml.clone(), rel.to_string_lossy().replace('\\', "/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# ours: keep me\n[ignore]\nbool-written-as-int = \"AMD's recipe\"  # why\n\n\
                        [per-file-ignores.\"a.yaml\"]   # the dense one\nprimus-turbo = \"no wheel\"\n\n# tail\n";

    #[test]
    fn a_decision_is_added_replaced_and_removed_keeping_the_rest() {
        let added = set(TEXT, "a.yaml", "turbo-attention", "slower \"here\"").unwrap();
        assert_eq!(
            added,
            TEXT.replace(
                "primus-turbo = \"no wheel\"\n",
                "primus-turbo = \"no wheel\"\nturbo-attention = \"slower \\\"here\\\"\"\n"
            )
        );
        let replaced = set(&added, "a.yaml", "primus-turbo", "no wheel for 6.2").unwrap();
        assert!(
            replaced.contains("primus-turbo = \"no wheel for 6.2\"\n"),
            "{replaced}"
        );
        assert_eq!(replaced.lines().count(), added.lines().count());
        let new = set(TEXT, "sub/b.yaml", "deepep-num-cu", "we keep 80").unwrap();
        assert_eq!(
            new,
            format!("{TEXT}\n[per-file-ignores.\"sub/b.yaml\"]\ndeepep-num-cu = \"we keep 80\"\n")
        );
        let removed = remove(&added, "a.yaml", "turbo-attention")
            .unwrap()
            .unwrap();
        assert_eq!(removed, TEXT);
        assert_eq!(remove(TEXT, "a.yaml", "turbo-attention").unwrap(), None);
        assert_eq!(remove(TEXT, "b.yaml", "primus-turbo").unwrap(), None);
    }

    #[test]
    fn an_inline_table_is_not_rewritten() {
        let text = "[per-file-ignores]\n\"a.yaml\" = { primus-turbo = \"x\" }\n";
        let e = set(text, "a.yaml", "turbo-attention", "y").unwrap_err();
        assert!(e.contains("inline"), "{e}");
        let e = remove(text, "a.yaml", "primus-turbo").unwrap_err();
        assert!(e.contains("shares its line"), "{e}");
    }

    #[test]
    fn record_creates_the_file_and_withdraw_takes_it_back() {
        let d = tempfile::tempdir().unwrap();
        let toml = d.path().join(FILE_NAME);
        let at = record(&toml, "exp.yaml", "primus-turbo", "no wheel").unwrap();
        let text = std::fs::read_to_string(&toml).unwrap();
        assert!(text.starts_with("# primus-tune: decisions"), "{text}");
        assert_eq!(at.line as usize, text.lines().count());
        assert!(withdraw(&toml, "exp.yaml", "primus-turbo").unwrap());
        assert!(!withdraw(&toml, "exp.yaml", "primus-turbo").unwrap());
        let left = std::fs::read_to_string(&toml).unwrap();
        assert!(!left.contains("primus-turbo ="), "{left}");
        // No temp file is left beside it.
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
    }
}
