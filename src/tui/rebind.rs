//! `[keys]` of the defaults file: `action = "key"` (or a list of keys) gives an action of the key
//! table other keys, as lazygit's `keybinding:` and gitui's key config do. The keys replace the
//! action's keys on the screens, in lists and everywhere (for `quit` also in overlays and on the
//! quit question); typing into an input line, a question's answers and Ctrl-C/Ctrl-Z stay. An
//! unknown action, an unknown key name, or a key that another action already has where both
//! apply is an error at its `file:line:column`.

use super::keymap::{Action, KEYMAP, Key, Keymap, Scope, key_name};
use super::screens::Tab;
use crate::app::defaults::{DefaultsError, KeyOverride};
use crossterm::event::KeyCode;

/// The name `[keys]` knows an action by (None: it cannot be rebound).
pub fn action_name(a: Action) -> Option<&'static str> {
    use Action as A;
    Some(match a {
        A::Quit => "quit",
        A::OpenEditor => "open_editor",
        A::Help => "help",
        A::Tour => "tour",
        A::GoTab(Tab::Checklist) => "checklist",
        A::GoTab(Tab::Flags) => "flags",
        A::GoTab(Tab::Run) => "run",
        A::GoTab(Tab::Trials) => "trials",
        A::GoTab(Tab::Sweep) => "sweep",
        A::GoTab(Tab::Studies) => "studies",
        A::NextTab => "next_screen",
        A::PrevTab => "previous_screen",
        A::Up => "up",
        A::Down => "down",
        A::PageUp => "page_up",
        A::PageDown => "page_down",
        A::Top => "top",
        A::Bottom => "bottom",
        A::OpenStep => "open_step",
        A::ClearFilter => "clear_filter",
        A::SearchStart => "search",
        A::Edit => "edit",
        A::Undo => "undo",
        A::ShowDiff => "diff",
        A::Save => "save",
        A::ToggleScope => "all_experiments",
        A::Reload => "reload",
        A::ProfileNext => "next_profile",
        A::ProfilePrev => "previous_profile",
        A::StartTrial => "start_trial",
        A::GemmStage => "gemm_stage",
        A::ToggleGemmTuned => "gemm_tuned",
        A::Acknowledge => "acknowledge",
        A::StopTrial => "stop_trial",
        A::NextPanel => "next_chart",
        A::SortNext => "sort",
        A::SortReverse => "sort_reverse",
        A::ToggleDetail => "detail",
        A::Mark => "mark",
        A::Compare => "compare",
        A::ApplyTrial => "apply_trial",
        A::Refresh => "refresh",
        A::SpaceDetail => "space_detail",
        A::StartSweep => "start_sweep",
        A::StopSweep => "stop_sweep",
        A::ApplySweep => "apply_sweep",
        A::OpenStudy => "open_study",
        A::ResumeStudy => "resume_study",
        A::ReportStudy => "report_study",
        A::ApplyStudy => "apply_study",
        A::StudyLog => "study_log",
        A::Messages => "messages",
        A::Backups => "backups",
        A::RestoreVersion => "restore_version",
        // Typing, the overlays' own keys, and the keys kept for leaving and suspending.
        A::None
        | A::ForceQuit
        | A::Suspend
        | A::CloseOverlay
        | A::TourNext
        | A::TourBack
        | A::SearchInput(_)
        | A::SearchBackspace
        | A::SearchDone
        | A::SearchCancel
        | A::EditInput(_)
        | A::EditBackspace
        | A::EditCycle(_)
        | A::EditCancel
        | A::EditCommit
        | A::ConfirmYes
        | A::PromptInput(_)
        | A::PromptBackspace => return None,
    })
}

/// Where an override replaces keys: the screens, the lists, everywhere, and (for `quit`) any
/// overlay.
fn rebindable(scope: Scope) -> bool {
    matches!(
        scope,
        Scope::Global | Scope::Lists | Scope::Screen(_) | Scope::Overlay
    )
}

/// Every action `[keys]` may name, with its name, in the table's order.
pub fn actions() -> Vec<(&'static str, Action)> {
    let mut out: Vec<(&'static str, Action)> = Vec::new();
    for b in KEYMAP.iter().filter(|b| rebindable(b.scope)) {
        if let Some(n) = action_name(b.action)
            && !out.iter().any(|(m, _)| *m == n)
        {
            out.push((n, b.action));
        }
    }
    out
}

/// A key as `[keys]` writes it: one character (`x`, `?`), a name (`Enter`, `Esc`, `Tab`,
/// `S-Tab`, `Space`, `Up`, `Down`, `Left`, `Right`, `PgUp`, `PgDn`, `Home`, `End`, `Backspace`,
/// `F1`…`F12`) or `Ctrl-x`; names in any case, optionally in `<…>` as lazygit writes them.
pub fn parse_key(s: &str) -> Option<Key> {
    let t = s
        .strip_prefix('<')
        .and_then(|x| x.strip_suffix('>'))
        .unwrap_or(s);
    let mut chars = t.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Some(Key::Code(KeyCode::Char(c)));
    }
    let lower = t.to_ascii_lowercase();
    if let Some(rest) = lower
        .strip_prefix("ctrl-")
        .or_else(|| lower.strip_prefix("c-"))
    {
        let mut c = rest.chars();
        return match (c.next(), c.next()) {
            (Some(ch), None) if ch.is_ascii_alphabetic() => Some(Key::Ctrl(ch)),
            _ => None,
        };
    }
    let code = match lower.as_str() {
        "space" => KeyCode::Char(' '),
        "enter" | "return" => KeyCode::Enter,
        "esc" | "escape" => KeyCode::Esc,
        "tab" => KeyCode::Tab,
        "s-tab" | "shift-tab" | "backtab" => KeyCode::BackTab,
        "up" => KeyCode::Up,
        "down" => KeyCode::Down,
        "left" => KeyCode::Left,
        "right" => KeyCode::Right,
        "pgup" | "pageup" => KeyCode::PageUp,
        "pgdn" | "pagedown" => KeyCode::PageDown,
        "home" => KeyCode::Home,
        "end" => KeyCode::End,
        "backspace" | "bksp" => KeyCode::Backspace,
        f => match f.strip_prefix('f').and_then(|n| n.parse::<u8>().ok()) {
            Some(n @ 1..=12) => KeyCode::F(n),
            _ => return None,
        },
    };
    Some(Key::Code(code))
}

/// The scopes in force together (as `keymap::scopes` gives them), with what a message calls
/// them: each screen, and the overlays whose keys an override reaches.
fn stacks() -> Vec<(String, Vec<Scope>)> {
    let mut out: Vec<(String, Vec<Scope>)> = Tab::ALL
        .iter()
        .map(|t| {
            let mut v = vec![Scope::Always, Scope::Screen(*t)];
            if t.has_list() {
                v.push(Scope::Lists);
            }
            v.push(Scope::Global);
            (format!("on the {} screen", t.title()), v)
        })
        .collect();
    for (name, v) in [
        (
            "on the quit question",
            vec![
                Scope::ConfirmQuit,
                Scope::Always,
                Scope::Question,
                Scope::Overlay,
            ],
        ),
        (
            "in a question",
            vec![Scope::Always, Scope::Question, Scope::Overlay],
        ),
        (
            "in the tour",
            vec![Scope::Always, Scope::Tour, Scope::Overlay],
        ),
        (
            "in the help",
            vec![Scope::Always, Scope::Info, Scope::Overlay],
        ),
    ] {
        out.push((name.to_string(), v));
    }
    out
}

/// The name a message gives a binding's action.
fn what(a: Action) -> String {
    if let Some(n) = action_name(a) {
        return format!("`{n}`");
    }
    match a {
        Action::Suspend => "Ctrl-Z (suspend)".into(),
        Action::ForceQuit => "Ctrl-C (quit now)".into(),
        Action::ConfirmYes => "the answer yes".into(),
        Action::CloseOverlay => "close".into(),
        Action::TourNext => "the tour's next page".into(),
        Action::TourBack => "the tour's page back".into(),
        other => format!("{other:?}"),
    }
}

impl Keymap {
    /// The table's keys with `overrides` (the defaults file's `[keys]`) applied.
    pub fn with_overrides(overrides: &[KeyOverride]) -> Result<Keymap, DefaultsError> {
        let mut map = Keymap::default();
        let known = actions();
        // Per binding: the override that set its keys.
        let mut by: Vec<Option<usize>> = vec![None; KEYMAP.len()];
        for (oi, o) in overrides.iter().enumerate() {
            let Some((_, action)) = known.iter().find(|(n, _)| *n == o.action) else {
                let names: Vec<&str> = known.iter().map(|(n, _)| *n).collect();
                let near = crate::util::suggest::closest(&o.action, &names)
                    .map(|n| format!("did you mean `{n}`? "))
                    .unwrap_or_default();
                return Err(DefaultsError::at(
                    &o.at,
                    format!(
                        "unknown action `{}` in [keys]; {near}(actions: {})",
                        o.action,
                        names.join(", ")
                    ),
                ));
            };
            let mut keys = Vec::new();
            for k in &o.keys {
                let key = parse_key(&k.value).ok_or_else(|| {
                    DefaultsError::at(
                        &k.at,
                        format!(
                            "`{}` is not a key (one character, Ctrl-x, Space, Enter, Esc, Tab, \
                             S-Tab, Up, Down, Left, Right, PgUp, PgDn, Home, End, Backspace, \
                             F1-F12)",
                            k.value
                        ),
                    )
                })?;
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            for (i, b) in KEYMAP.iter().enumerate() {
                let follows_quit = *action == Action::Quit
                    && b.scope == Scope::ConfirmQuit
                    && b.action == Action::ConfirmYes;
                if (rebindable(b.scope) && b.action == *action) || follows_quit {
                    map.keys[i] = keys.clone();
                    by[i] = Some(oi);
                }
            }
        }
        map.check(overrides, &by)?;
        Ok(map)
    }

    /// A key an override gave that another action has where both apply is an error, at the
    /// key's place in the file.
    fn check(&self, overrides: &[KeyOverride], by: &[Option<usize>]) -> Result<(), DefaultsError> {
        for (place, scopes) in stacks() {
            let binds: Vec<usize> = scopes
                .iter()
                .flat_map(|s| (0..KEYMAP.len()).filter(move |i| KEYMAP[*i].scope == *s))
                .collect();
            for &i in &binds {
                let Some(oi) = by[i] else { continue };
                for &j in &binds {
                    let (a, b) = (&KEYMAP[i], &KEYMAP[j]);
                    if a.action == b.action || by[j] == Some(oi) {
                        continue;
                    }
                    let Some(key) = self.keys[i].iter().find(|k| self.keys[j].contains(k)) else {
                        continue;
                    };
                    let o = &overrides[oi];
                    let at = o
                        .keys
                        .iter()
                        .find(|k| parse_key(&k.value) == Some(*key))
                        .map_or(&o.at, |k| &k.at);
                    let other = match by[j] {
                        Some(_) => format!("{} (also given it in [keys])", what(b.action)),
                        None => what(b.action),
                    };
                    return Err(DefaultsError::at(
                        at,
                        format!(
                            "key `{}` for `{}` is already {other}'s {place}; give that one \
                             another key too, or pick another",
                            key_name(*key),
                            o.action
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::defaults::parse;
    use std::path::Path;

    fn keymap(text: &str) -> Result<Keymap, DefaultsError> {
        let d = parse(text, Path::new("/c/config.toml")).unwrap();
        Keymap::with_overrides(&d.keys)
    }

    #[test]
    fn key_names_parse_as_the_help_writes_them() {
        for k in KEYMAP.iter().flat_map(|b| b.keys) {
            if let Key::Code(_) | Key::Ctrl(_) = k {
                assert_eq!(parse_key(&key_name(*k)), Some(*k), "{k:?}");
            }
        }
        assert_eq!(parse_key("<c-x>"), Some(Key::Ctrl('x')));
        assert_eq!(parse_key("<enter>"), Some(Key::Code(KeyCode::Enter)));
        assert_eq!(parse_key("F13"), None);
        assert_eq!(parse_key("Hyper"), None);
    }

    #[test]
    fn every_rebindable_action_has_one_name() {
        let a = actions();
        let mut names: Vec<&str> = a.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), a.len());
        assert!(names.contains(&"quit") && names.contains(&"start_sweep"));
    }

    #[test]
    fn the_built_in_table_has_no_conflict() {
        assert_eq!(keymap(""), Ok(Keymap::default()));
        // Swapping two keys is fine: neither keeps the other's.
        keymap("[keys]\nundo = \"d\"\ndiff = \"u\"\n").unwrap();
    }

    #[test]
    fn unknown_actions_keys_and_conflicts_are_errors_at_their_place() {
        let e = keymap("[keys]\nquitt = \"x\"\n").unwrap_err();
        assert_eq!(e.at, Some((2, 1)));
        assert!(e.message.contains("did you mean `quit`?"), "{e}");
        let e = keymap("[keys]\nquit = [\"x\", \"Hyper\"]\n").unwrap_err();
        assert_eq!(e.at, Some((2, 14)), "{e}");
        assert!(e.message.contains("`Hyper` is not a key"), "{e}");
        // `/` searches on Flags.
        let e = keymap("[keys]\nquit = \"/\"\n").unwrap_err();
        assert_eq!(e.at, Some((2, 8)), "{e}");
        assert!(
            e.message.contains("already `search`'s on the Flags screen"),
            "{e}"
        );
        // Two overrides giving the same key.
        let e = keymap("[keys]\nhelp = \"z\"\ntour = \"z\"\n").unwrap_err();
        assert!(e.message.contains("also given it"), "{e}");
        // Ctrl-Z stays Ctrl-Z.
        let e = keymap("[keys]\nreload = \"Ctrl-z\"\n").unwrap_err();
        assert!(e.message.contains("suspend"), "{e}");
    }
}
