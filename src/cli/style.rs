//! Colour for people at a terminal: diagnostics' severities and the fatal `error:` prefix, when
//! the stream is a terminal (`[ui] color = "auto"`, the default), always (`"always"`) or never
//! (`"never"`, or `NO_COLOR` set and not empty: <https://no-color.org>).
//! Text is made [`visible`](crate::util::text::visible) first; only our own escapes are added.

use crate::app::defaults::{ColorChoice, Defaults, NO_COLOR_ENV};
use crate::config::diag::{Diagnostic, Severity};
use crate::util::text::{one_line, visible};
use std::io::IsTerminal;
use std::sync::OnceLock;

/// This run's colour choice, once the defaults file is read.
static CHOICE: OnceLock<ColorChoice> = OnceLock::new();

/// Sets this run's colour choice (the first call wins).
pub fn set_choice(c: ColorChoice) {
    let _ = CHOICE.set(c);
}

/// This run's colour choice: as set, else `NO_COLOR` alone (before the file is read).
fn choice() -> ColorChoice {
    CHOICE.get().copied().unwrap_or_else(|| {
        Defaults::default()
            .color(std::env::var_os(NO_COLOR_ENV).as_deref())
            .value
    })
}

/// Colour for a stream: on a terminal with `auto`, always with `always`, never with `never`.
pub fn wanted(is_terminal: bool, choice: ColorChoice) -> bool {
    choice.colour(is_terminal)
}

/// Whether stdout gets colour.
pub fn stdout() -> bool {
    wanted(std::io::stdout().is_terminal(), choice())
}

/// Whether stderr gets colour.
pub fn stderr() -> bool {
    wanted(std::io::stderr().is_terminal(), choice())
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
    // One line each, whatever a key or value in the message holds: a raw newline would start
    // what reads as another finding (`file:line:col:` parsers, a human alike).
    s.push_str(&one_line(&format!(": {}", d.message)));
    if let Some(h) = &d.hint {
        s.push_str(&format!("\n    hint: {}", one_line(h)));
    }
    s
}

/// A suppressed finding as text: `file:line:col: ignored[code]: reason (where it is decided)`,
/// the `ignored[code]` part dim when `colour` (the finding is not in force).
pub fn suppressed(s: &crate::config::suppress::Suppressed, colour: bool) -> String {
    let mut out = String::new();
    if let Some(l) = &s.diagnostic.location {
        out.push_str(&visible(&format!(
            "{}: ",
            crate::config::suppress::place(l)
        )));
    }
    let label = format!("ignored[{}]", s.diagnostic.code);
    if colour {
        out.push_str(&format!("\x1b[2m{}\x1b[0m", visible(&label)));
    } else {
        out.push_str(&label);
    }
    out.push_str(&visible(&format!(": {} ({})", s.by.why(), s.by.place())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_on_a_terminal_unless_no_color_or_the_file_says_otherwise() {
        let d = Defaults::default();
        let c = |no_color: Option<&str>| d.color(no_color.map(OsStr::new)).value;
        assert!(wanted(true, c(None)));
        assert!(wanted(true, c(Some(""))));
        assert!(!wanted(true, c(Some("1"))));
        assert!(!wanted(false, c(None)));
        assert!(wanted(false, ColorChoice::Always));
        assert!(!wanted(true, ColorChoice::Never));
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
