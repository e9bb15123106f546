//! SARIF 2.1.0 (OASIS), as GitHub code scanning reads it: one run of the `primus-tune` driver,
//! its rules (the codes found, sorted), one result per finding.
//! <https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html>

use crate::app::lint::LintReport;
use crate::config::diag::{Diagnostic, Severity};
use crate::config::suppress::Suppression;
use serde_json::{Value, json};
use std::path::Path;

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
pub const VERSION: &str = "2.1.0";

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A path as a URI reference: relative (to the current folder, where the checkout is) with
/// `/` separators when below it, else a `file://` URI; bytes outside the unreserved set and
/// `/` percent-encoded.
pub fn uri(p: &Path) -> String {
    let cwd = std::env::current_dir().unwrap_or_default();
    let (rel, prefix) = match p.strip_prefix(&cwd) {
        Ok(r) if p.is_absolute() => (r.to_path_buf(), ""),
        _ if p.is_absolute() => (p.to_path_buf(), "file://"),
        _ => (p.to_path_buf(), ""),
    };
    let text = rel.to_string_lossy().replace('\\', "/");
    let text = text.strip_prefix("./").unwrap_or(&text);
    let mut out = String::from(prefix);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn result(d: &Diagnostic, rule_index: usize) -> Value {
    let mut text = d.message.clone();
    if let Some(h) = &d.hint {
        text.push_str(&format!("\nhint: {h}"));
    }
    let locations: Vec<Value> = d
        .location
        .iter()
        .map(|l| {
            // GitHub code scanning needs a start line: a finding about the whole file (line
            // unknown) is shown at its first line.
            let region = if l.line > 0 {
                json!({ "startLine": l.line, "startColumn": l.column.max(1) })
            } else {
                json!({ "startLine": 1 })
            };
            json!({ "physicalLocation": {
                "artifactLocation": { "uri": uri(&l.file) },
                "region": region,
            }})
        })
        .collect();
    json!({
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": level(d.severity),
        "message": { "text": text },
        "locations": locations,
    })
}

/// A suppressed finding's `suppressions` (SARIF §3.35): `inSource` for a comment beside it,
/// `external` for `primus-tune.toml`, accepted, with the reason as the justification.
fn suppression(s: &Suppression) -> Value {
    json!([{
        "kind": if s.in_source() { "inSource" } else { "external" },
        "status": "accepted",
        "justification": s.why(),
        "location": { "physicalLocation": {
            "artifactLocation": { "uri": uri(&s.at.file) },
            "region": { "startLine": s.at.line.max(1), "startColumn": s.at.column.max(1) },
        }},
    }])
}

/// The SARIF log of a lint report: the findings, and the suppressed ones with their
/// suppressions (code scanning shows them as dismissed, with the reason).
pub fn log(r: &LintReport) -> Value {
    let mut rules: Vec<&str> = r
        .diagnostics()
        .chain(r.suppressed().map(|s| &s.diagnostic))
        .map(|d| d.code)
        .collect();
    rules.sort_unstable();
    rules.dedup();
    let index = |code: &str| rules.binary_search(&code).unwrap_or_default();
    let results: Vec<Value> = r
        .diagnostics()
        .map(|d| result(d, index(d.code)))
        .chain(r.suppressed().map(|s| {
            let mut v = result(&s.diagnostic, index(s.diagnostic.code));
            v["suppressions"] = suppression(&s.by);
            v
        }))
        .collect();
    json!({
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [{
            "tool": { "driver": {
                "name": "primus-tune",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules.iter().map(|id| json!({
                    "id": id,
                    "name": id,
                    "shortDescription": { "text": format!("primus-tune lint rule {id}") },
                })).collect::<Vec<_>>(),
            }},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::lint::LintedFile;
    use crate::config::diag::Location;

    #[test]
    fn findings_become_results_with_rules_levels_and_regions() {
        let at = |line| {
            Some(Location {
                file: "exp dir/a.yaml".into(),
                line,
                column: 4,
            })
        };
        let r = LintReport {
            files: vec![LintedFile {
                path: "exp dir/a.yaml".into(),
                diagnostics: vec![
                    Diagnostic::new(Severity::Warning, "zeta", "w").at(at(3)),
                    Diagnostic::new(Severity::Info, "alpha", "i")
                        .hint("h")
                        .at(at(0)),
                ],
                suppressed: vec![crate::config::suppress::Suppressed {
                    diagnostic: Diagnostic::new(Severity::Warning, "beta", "s").at(at(5)),
                    by: Suppression {
                        rule: "beta".into(),
                        reason: "decided".into(),
                        at: Location {
                            file: "exp dir/a.yaml".into(),
                            line: 5,
                            column: 9,
                        },
                        scope: crate::config::suppress::Scope::Line("exp dir/a.yaml".into(), 5),
                    },
                }],
            }],
            world: None,
        };
        let v = log(&r);
        assert_eq!(v["version"], "2.1.0");
        let run = &v["runs"][0];
        assert_eq!(run["tool"]["driver"]["rules"][0]["id"], "alpha");
        let res = &run["results"];
        assert_eq!(res[0]["ruleId"], "zeta");
        assert_eq!(res[0]["ruleIndex"], 2);
        assert!(res[0].get("suppressions").is_none());
        // The suppressed finding: a result with its suppression, in the source, with why.
        assert_eq!(res[2]["ruleId"], "beta");
        assert_eq!(res[2]["ruleIndex"], 1);
        let s = &res[2]["suppressions"][0];
        assert_eq!(s["kind"], "inSource");
        assert_eq!(s["status"], "accepted");
        assert_eq!(s["justification"], "decided");
        assert_eq!(
            s["location"]["physicalLocation"]["region"]["startColumn"],
            9
        );
        assert_eq!(res[0]["level"], "warning");
        let loc = &res[0]["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], "exp%20dir/a.yaml");
        assert_eq!(loc["region"]["startLine"], 3);
        assert_eq!(loc["region"]["startColumn"], 4);
        assert_eq!(res[1]["level"], "note");
        assert_eq!(res[1]["message"]["text"], "i\nhint: h");
        let whole = &res[1]["locations"][0]["physicalLocation"]["region"];
        assert_eq!(whole["startLine"], 1);
        assert!(whole.get("startColumn").is_none());
    }

    #[test]
    fn absolute_paths_outside_the_folder_are_file_uris() {
        assert_eq!(
            uri(Path::new("/nowhere/x y.yaml")),
            "file:///nowhere/x%20y.yaml"
        );
    }
}
