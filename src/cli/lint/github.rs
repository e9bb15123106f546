//! GitHub Actions workflow commands: one `::error|warning|notice file=F,line=L,col=C,
//! title=RULE::message` line per finding, which the runner turns into annotations.
//! <https://docs.github.com/actions/reference/workflow-commands-for-github-actions>

use crate::config::diag::{Diagnostic, Severity};
use std::path::Path;

/// The message part: `%`, CR and LF escaped as the runner unescapes them.
fn data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A property value: as data, and `:` and `,` too.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One finding as a workflow command; `path` writes the file as the annotation names it
/// (relative to the checkout, where the runner resolves it).
pub fn command(d: &Diagnostic, path: &dyn Fn(&Path) -> String) -> String {
    let level = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "notice",
    };
    let mut props = Vec::new();
    if let Some(l) = &d.location {
        props.push(format!("file={}", property(&path(&l.file))));
        if l.line > 0 {
            props.push(format!("line={}", l.line));
            props.push(format!("col={}", l.column.max(1)));
        }
    }
    props.push(format!("title={}", property(d.code)));
    let mut message = d.message.clone();
    if let Some(h) = &d.hint {
        message.push_str(&format!("\nhint: {h}"));
    }
    crate::util::text::visible(&format!(
        "::{level} {}::{}",
        props.join(","),
        data(&message)
    ))
    .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::diag::Location;

    #[test]
    fn a_finding_is_one_escaped_command_line() {
        let d = Diagnostic::new(Severity::Warning, "unknown-key", "100% a, b: c")
            .hint("write `x`\nthen y")
            .at(Some(Location {
                file: "dir,1/a:b.yaml".into(),
                line: 7,
                column: 3,
            }));
        let s = command(&d, &|p| p.display().to_string());
        assert_eq!(
            s,
            "::warning file=dir%2C1/a%3Ab.yaml,line=7,col=3,title=unknown-key::100%25 a, b: c%0Ahint: write `x`%0Athen y"
        );
        assert!(!s.contains('\n'));
    }

    #[test]
    fn info_is_a_notice_and_a_file_without_line_has_no_line() {
        let d = Diagnostic::new(Severity::Info, "r", "m").at(Some(Location {
            file: "a.yaml".into(),
            line: 0,
            column: 0,
        }));
        assert_eq!(
            command(&d, &|p| p.display().to_string()),
            "::notice file=a.yaml,title=r::m"
        );
    }
}
