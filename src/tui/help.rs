//! The `?` help: every binding of the key table with the keys in force, in sections — the
//! screen shown first (as lazygit lists the focused view's keys first), then everywhere and in
//! boxes, then the other screens. Every scope has its section, so no action can be left out;
//! the box scrolls where it is taller than the terminal.

use super::keymap::{Binding, Key, Keymap, Scope, join_keys, key_name};
use super::screens::Tab;
use super::theme::Theme;
use ratatui::style::Style;

/// A section of the help: its title and rows of (keys, what they do).
pub type HelpSection = (String, Vec<(String, &'static str)>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Screen(Tab),
    /// A flag's value being typed.
    Editing,
    /// The flag search line.
    Searching,
    Everywhere,
    /// The boxes over the screen: the help, the diff, an error, questions, the tour.
    Boxes,
}

/// Where a scope's keys are listed, and their place in that section.
fn section_of(scope: Scope) -> (Section, u8) {
    match scope {
        Scope::Screen(t) => (Section::Screen(t), 0),
        Scope::Editor => (Section::Editing, 0),
        Scope::Search => (Section::Searching, 0),
        Scope::Global => (Section::Everywhere, 0),
        Scope::Lists => (Section::Everywhere, 1),
        Scope::Always => (Section::Everywhere, 2),
        Scope::Info => (Section::Boxes, 0),
        Scope::Overlay => (Section::Boxes, 1),
        Scope::Question => (Section::Boxes, 2),
        Scope::ConfirmQuit => (Section::Boxes, 3),
        Scope::Tour => (Section::Boxes, 4),
        Scope::Prompt => (Section::Boxes, 5),
        Scope::Versions => (Section::Boxes, 6),
    }
}

fn title(s: Section) -> String {
    match s {
        Section::Screen(t) => t.title().to_string(),
        Section::Editing => "Flags: typing a value".into(),
        Section::Searching => "Flags: searching".into(),
        Section::Everywhere => "everywhere".into(),
        Section::Boxes => "in boxes (help, diff, errors, questions, tour)".into(),
    }
}

/// The screen shown, everywhere, the boxes, then the other screens (Flags with its typing and
/// search lines).
fn order(shown: Tab) -> Vec<Section> {
    let screen = |t: Tab| {
        let mut v = vec![Section::Screen(t)];
        if t == Tab::Flags {
            v.extend([Section::Editing, Section::Searching]);
        }
        v
    };
    let mut out = screen(shown);
    out.extend([Section::Everywhere, Section::Boxes]);
    for t in Tab::ALL.into_iter().filter(|t| *t != shown) {
        out.extend(screen(t));
    }
    out
}

/// The help's sections with `shown`'s first: a binding without its own text joins the row
/// above; bindings saying the same thing share a row.
pub fn help(keymap: &Keymap, shown: Tab) -> Vec<HelpSection> {
    order(shown)
        .into_iter()
        .map(|sec| {
            let mut binds: Vec<(&Binding, &[Key], u8)> = keymap
                .bindings()
                .filter_map(|(b, keys)| {
                    let (s, rank) = section_of(b.scope);
                    (s == sec).then_some((b, keys, rank))
                })
                .collect();
            binds.sort_by_key(|b| b.2);
            let mut rows: Vec<(Vec<String>, &'static str)> = Vec::new();
            for (bind, keys, _) in binds {
                let names = keys.iter().map(|k| key_name(*k));
                match (bind.help, rows.last_mut()) {
                    ("", Some(last)) => last.0.extend(names),
                    (help, _) => match rows.iter_mut().find(|r| r.1 == help) {
                        Some(row) => row.0.extend(names),
                        None => rows.push((names.collect(), help)),
                    },
                }
            }
            let rows = rows
                .into_iter()
                .map(|(keys, help)| {
                    let mut seen = Vec::new();
                    for k in keys {
                        if !seen.contains(&k) {
                            seen.push(k);
                        }
                    }
                    (join_keys(&seen), help)
                })
                .collect();
            (title(sec), rows)
        })
        .collect()
}

/// The help's lines: each section's title, then its rows with the keys in a column.
pub fn lines(keymap: &Keymap, shown: Tab, theme: &Theme) -> Vec<(String, Style)> {
    let sections = help(keymap, shown);
    let key_w = sections
        .iter()
        .flat_map(|s| s.1.iter().map(|r| r.0.chars().count()))
        .max()
        .unwrap_or(0)
        .min(16);
    let mut out = Vec::new();
    for (title, rows) in sections {
        out.push((title, theme.title()));
        for (keys, what) in rows {
            out.push((format!(" {keys:<key_w$}  {what}"), Style::default()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::keymap::KEYMAP;

    #[test]
    fn every_binding_of_the_table_is_in_the_help_with_its_keys() {
        let keymap = Keymap::default();
        for shown in Tab::ALL {
            let h = help(&keymap, shown);
            assert_eq!(h[0].0, shown.title(), "the screen shown comes first");
            for (title, rows) in &h {
                assert!(rows.iter().all(|r| !r.1.is_empty()), "{title}: {rows:?}");
            }
            for bind in KEYMAP {
                let section = title(section_of(bind.scope).0);
                let rows = &h.iter().find(|s| s.0 == section).expect("its section").1;
                for k in bind.keys {
                    let name = key_name(*k);
                    let listed = rows.iter().any(|(keys, _)| {
                        keys.split(' ').any(|x| x == name) || digit_in_run(keys, &name)
                    });
                    assert!(listed, "{name} ({:?}) in {section}: {rows:?}", bind.action);
                }
            }
        }
    }

    /// `3` in `1-6`.
    fn digit_in_run(keys: &str, name: &str) -> bool {
        keys.split(' ').any(|k| match k.split_once('-') {
            Some((a, b)) if a.len() == 1 && b.len() == 1 => (a..=b).contains(&name),
            _ => false,
        })
    }

    #[test]
    fn the_help_names_what_the_screens_only_said_elsewhere() {
        let h = help(&Keymap::default(), Tab::Flags);
        let row = |section: &str, keys: &str| {
            h.iter()
                .find(|s| s.0 == section)
                .and_then(|s| s.1.iter().find(|r| r.0 == keys))
                .map(|r| r.1)
        };
        assert_eq!(row("Flags", "e"), Some("the file in $EDITOR"));
        assert_eq!(row("Flags", "r"), Some("start a trial"));
        assert_eq!(
            row("Trials", "A"),
            Some("every experiment's, or this one's")
        );
        assert_eq!(row("Studies", "l"), Some("the search's decision log"));
        assert_eq!(row("everywhere", "1-6 Tab S-Tab"), Some("switch screen"));
        assert_eq!(
            row("everywhere", "q Ctrl-C"),
            Some("quit (asks if running)")
        );
        assert_eq!(row("everywhere", "L"), Some("the messages (errors, notes)"));
        assert_eq!(row("Sweep", "r"), Some("sweep it (asks on GPUs)"));
    }
}
