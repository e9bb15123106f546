//! Colour for people at a terminal: diagnostics' severities and the fatal `error:` prefix, only
//! when the stream is a terminal and `NO_COLOR` is unset or empty (<https://no-color.org>).
//! Text is made [`visible`](crate::util::text::visible) first; only our own escapes are added.

use crate::config::diag::{Diagnostic, Severity};
use crate::util::text::visible;
use std::io::IsTerminal;

/// Colour when the stream is a terminal and `NO_COLOR` is unset or empty.
pub fn wanted(is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Whether stdout gets colour.
pub fn stdout() -> bool {
    wanted(
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// Whether stderr gets colour.
pub fn stderr() -> bool {
    wanted(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// The SGR code of a severity: bold red, bold yellow, bold cyan.
fn sgr(s: Severity) -> &'static str {
    match s {
        Severity::Error => "1;31",
        Severity::Warning => "1;33",
        Severity::Info => "1;36",
    }
}

/// `text` in the severity's colour (or as it is).
pub fn paint(s: Severity, text: &str, colour: bool) -> String {
    if colour {
        format!("\x1b[{}m{}\x1b[0m", sgr(s), visible(text))
    } else {
        visible(text).into_owned()
    }
}

/// One diagnostic as text, safe to print as is: `file:line:col: error[code]: message` and an
/// indented hint, the `error[code]` part coloured when `colour`.
pub fn diagnostic(d: &Diagnostic, colour: bool) -> String {
    let mut s = String::new();
    if let Some(l) = &d.location {
        let file = super::display_path(&l.file);
        s.push_str(&visible(&if l.line == 0 {
            format!("{file}: ")
        } else {
            format!("{file}:{}:{}: ", l.line, l.column)
        }));
    }
    let label = format!("{}[{}]", d.severity.label(), d.code);
    s.push_str(&paint(d.severity, &label, colour));
    s.push_str(&visible(&format!(": {}", d.message)));
    if let Some(h) = &d.hint {
        s.push_str(&visible(&format!("\n    hint: {h}")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(wanted(true, None));
        assert!(wanted(true, Some(OsStr::new(""))));
        assert!(!wanted(true, Some(OsStr::new("1"))));
        assert!(!wanted(false, None));
    }

    #[test]
    fn a_coloured_diagnostic_escapes_the_config_text_but_keeps_its_own_colour() {
        let d = Diagnostic::new(Severity::Warning, "unknown-key", "key `a\x1b[2J`");
        let s = diagnostic(&d, true);
        assert!(
            s.starts_with("\x1b[1;33mwarning[unknown-key]\x1b[0m"),
            "{s:?}"
        );
        assert!(s.contains("a\\x1b[2J"), "{s:?}");
        assert_eq!(s.matches('\x1b').count(), 2, "{s:?}");
        let plain = diagnostic(&d, false);
        assert!(plain.starts_with("warning[unknown-key]: key"), "{plain:?}");
    }
}
