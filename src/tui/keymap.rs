//! The key map: ONE table of (scope, keys, action, help, footer hint). It drives the dispatch
//! of every key, the `?` overlay and the footer hints, so the three cannot drift apart. The
//! keys in force are the table's with the defaults file's `[keys]` applied ([`Keymap`],
//! `rebind.rs`): dispatch, help and footer all read them.
//!
//! Scopes are tried from the most specific: an open overlay; the flag editor or the search
//! line; the screen; lists; everywhere.

use super::app::{App, Overlay};
use super::screens::Tab;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Ctrl-C twice or SIGTERM: stop the trial and leave without asking.
    ForceQuit,
    /// Ctrl-Z: give the terminal back and stop until `fg`.
    Suspend,
    /// Flags: the experiment in `$EDITOR` at the selected flag's line, read again after.
    OpenEditor,
    CloseOverlay,
    Help,
    Tour,
    TourNext,
    TourBack,
    GoTab(Tab),
    NextTab,
    PrevTab,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    OpenStep,
    ClearFilter,
    SearchStart,
    SearchInput(char),
    SearchBackspace,
    SearchDone,
    SearchCancel,
    Edit,
    EditInput(char),
    EditBackspace,
    EditCycle(isize),
    EditCancel,
    EditCommit,
    Undo,
    ShowDiff,
    Save,
    ConfirmYes,
    /// List every experiment's trials and studies, or this experiment's.
    ToggleScope,
    Reload,
    ProfileNext,
    ProfilePrev,
    StartTrial,
    /// Run the next HipBLASLt stage (Checklist, GEMM step).
    GemmStage,
    /// Train later trials with the tuned GEMMs, or not (Checklist, GEMM step).
    ToggleGemmTuned,
    /// Acknowledge the selected step's first open to-do (asks for the reason).
    Acknowledge,
    /// A character of the reason being typed, and taking one back.
    PromptInput(char),
    PromptBackspace,
    StopTrial,
    NextPanel,
    SortNext,
    SortReverse,
    ToggleDetail,
    Mark,
    Compare,
    ApplyTrial,
    /// Read the screen's data again (trials, studies).
    Refresh,
    /// Sweep: the selected space's details (Enter), or back.
    SpaceDetail,
    StartSweep,
    StopSweep,
    ApplySweep,
    /// Studies: the selected study's ranked candidates, or back to the list.
    OpenStudy,
    ResumeStudy,
    ReportStudy,
    ApplyStudy,
    /// Studies: the search's decision log of the selected study, or back to its ranking.
    StudyLog,
    /// The messages (errors and notes) said so far, newest last.
    Messages,
    /// Flags: the versions saves replaced (kept in the workspace).
    Backups,
    /// In the list of kept versions: restore the selected one (its diff first).
    RestoreVersion,
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere but inside an overlay or an input line.
    Global,
    /// Screens with a list or a table (not Run).
    Lists,
    Screen(Tab),
    /// The flag value being typed.
    Editor,
    /// The flag search line.
    Search,
    /// A line of text asked for in an overlay (an acknowledgement's reason).
    Prompt,
    /// The list of kept versions of the experiment.
    Versions,
    /// The guided tour.
    Tour,
    /// The quit question (Ctrl-C there quits at once).
    ConfirmQuit,
    /// A question (quit?, save?).
    Question,
    /// The boxes that only show something: the key help, the diff, an error, the messages
    /// (Enter closes them).
    Info,
    /// Any overlay.
    Overlay,
    /// Always, even in overlays (Ctrl-C).
    Always,
}

/// A key: a code, a code with Ctrl, or any printable character (typed into an input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Code(KeyCode),
    Ctrl(char),
    AnyChar,
}

pub struct Binding {
    pub scope: Scope,
    pub keys: &'static [Key],
    pub action: Action,
    /// What the `?` overlay says (empty: the keys join the row above's).
    pub help: &'static str,
    /// The footer's word for it (None: not in the footer).
    pub hint: Option<&'static str>,
}

const fn c(ch: char) -> Key {
    Key::Code(KeyCode::Char(ch))
}
const fn k(code: KeyCode) -> Key {
    Key::Code(code)
}
const UP: Key = k(KeyCode::Up);
const DOWN: Key = k(KeyCode::Down);
const LEFT: Key = k(KeyCode::Left);
const RIGHT: Key = k(KeyCode::Right);
const ENTER: Key = k(KeyCode::Enter);
const ESC: Key = k(KeyCode::Esc);

const fn b(
    scope: Scope,
    keys: &'static [Key],
    action: Action,
    help: &'static str,
    hint: Option<&'static str>,
) -> Binding {
    Binding {
        scope,
        keys,
        action,
        help,
        hint,
    }
}

use Scope::{Editor, Global, Lists, Prompt, Question, Screen, Search};
use Tab::{Checklist, Flags, Run, Studies, Sweep, Trials};

/// The key map. Order matters within a scope: the first matching binding wins, help rows and
/// footer hints follow it.
#[rustfmt::skip]
pub const KEYMAP: &[Binding] = &[
    // Always.
    b(Scope::ConfirmQuit, &[Key::Ctrl('c')], Action::ForceQuit, "quit now (the quit question)", None),
    b(Scope::Always, &[Key::Ctrl('c')], Action::Quit, QUIT, None),
    // Ctrl-Z suspends as in a shell (raw mode turns the terminal's own Ctrl-Z off).
    b(Scope::Always, &[Key::Ctrl('z')], Action::Suspend, "suspend (fg resumes)", None),
    // Overlays.
    b(Scope::Tour, &[ENTER, RIGHT, c(' '), c('n'), k(KeyCode::Tab)], Action::TourNext, "tour: next page", Some("next")),
    b(Scope::Tour, &[LEFT, c('p'), k(KeyCode::BackTab)], Action::TourBack, "tour: page back", Some("back")),
    // `q` on the quit question answers it: quit.
    b(Scope::ConfirmQuit, &[c('q')], Action::ConfirmYes, "", None),
    b(Question, &[c('y'), c('Y')], Action::ConfirmYes, "yes", Some("yes")),
    b(Question, &[c('n'), c('N')], Action::CloseOverlay, "no", Some("no")),
    b(Scope::Versions, &[ENTER, c('r')], Action::RestoreVersion, "kept versions: restore the selected one (diff first)", Some("restore")),
    b(Scope::Info, &[ENTER], Action::CloseOverlay, "close the box", None),
    b(Scope::Overlay, &[ESC, c('?')], Action::CloseOverlay, "close the box", Some("close")),
    // `q` quits from every overlay (asking, as anywhere, when something runs or is unsaved).
    b(Scope::Overlay, &[c('q')], Action::Quit, QUIT, Some("quit")),
    // A box taller than the screen scrolls (the diff, the help, an error, the messages).
    b(Scope::Overlay, &[UP, c('k')], Action::Up, "scroll", None),
    b(Scope::Overlay, &[DOWN, c('j')], Action::Down, "", None),
    b(Scope::Overlay, &[k(KeyCode::PageUp)], Action::PageUp, "scroll a page", None),
    b(Scope::Overlay, &[k(KeyCode::PageDown)], Action::PageDown, "", None),
    b(Scope::Overlay, &[k(KeyCode::Home), c('g')], Action::Top, "first, last line", None),
    b(Scope::Overlay, &[k(KeyCode::End), c('G')], Action::Bottom, "", None),
    // The flag editor and the search line.
    b(Editor, &[Key::AnyChar], Action::EditInput(' '), "type a value", Some("type a value")),
    b(Editor, &[LEFT, UP], Action::EditCycle(-1), "cycle the choices", Some("cycle choices")),
    b(Editor, &[RIGHT, DOWN, k(KeyCode::Tab)], Action::EditCycle(1), "cycle the choices", Some("cycle choices")),
    b(Editor, &[ENTER], Action::EditCommit, "keep it (unsaved)", Some("keep")),
    b(Editor, &[ESC], Action::EditCancel, "cancel", Some("cancel")),
    b(Editor, &[k(KeyCode::Backspace)], Action::EditBackspace, "delete a character", None),
    b(Prompt, &[Key::AnyChar], Action::PromptInput(' '), "type the reason", Some("type the reason")),
    b(Prompt, &[k(KeyCode::Backspace)], Action::PromptBackspace, "delete a character", None),
    b(Prompt, &[ENTER], Action::ConfirmYes, "acknowledge", Some("acknowledge")),
    b(Search, &[Key::AnyChar], Action::SearchInput(' '), "type a name", Some("type a name")),
    b(Search, &[ENTER, DOWN, UP], Action::SearchDone, "done", Some("done")),
    b(Search, &[ESC], Action::SearchCancel, "cancel", Some("cancel")),
    b(Search, &[k(KeyCode::Backspace)], Action::SearchBackspace, "delete a character", None),
    // Screens.
    b(Screen(Checklist), &[UP, c('k')], Action::Up, "select a step", Some("step")),
    b(Screen(Checklist), &[DOWN, c('j')], Action::Down, "", Some("step")),
    b(Screen(Checklist), &[ENTER], Action::OpenStep, "the step's flags", Some("flags")),
    b(Screen(Checklist), &[c('r')], Action::StartTrial, "start a trial", Some("run a trial")),
    b(Screen(Checklist), &[c('n')], Action::GemmStage, "GEMM stage; use tuned", None),
    b(Screen(Checklist), &[c('u')], Action::ToggleGemmTuned, "", None),
    b(Screen(Checklist), &[c('a')], Action::Acknowledge, "acknowledge a to-do", Some("acknowledge")),
    b(Screen(Flags), &[ENTER, c(' ')], Action::Edit, "edit (bools toggle)", Some("edit")),
    b(Screen(Flags), &[c('/')], Action::SearchStart, "search by name", Some("search")),
    b(Screen(Flags), &[c('a'), ESC], Action::ClearFilter, "all flags", None),
    b(Screen(Flags), &[c('u')], Action::Undo, "undo last edit", Some("undo")),
    b(Screen(Flags), &[c('d')], Action::ShowDiff, "diff of the edits", Some("diff")),
    b(Screen(Flags), &[c('s')], Action::Save, "save (diff first)", Some("save")),
    b(Screen(Flags), &[c('e')], Action::OpenEditor, "the file in $EDITOR", Some("$EDITOR")),
    b(Screen(Flags), &[c('b')], Action::Backups, "versions saves replaced; restore one", None),
    b(Screen(Flags), &[c('r')], Action::StartTrial, "start a trial", None),
    b(Screen(Run), &[LEFT, c('[')], Action::ProfilePrev, "launch profile", Some("profile")),
    b(Screen(Run), &[RIGHT, c(']')], Action::ProfileNext, "launch profile", Some("profile")),
    b(Screen(Run), &[c('r'), ENTER], Action::StartTrial, "start a trial", Some("start")),
    b(Screen(Run), &[c('x')], Action::StopTrial, "stop the trial", Some("stop")),
    b(Screen(Run), &[c('m')], Action::NextPanel, "next telemetry chart", Some("charts")),
    b(Screen(Trials), &[c('s')], Action::SortNext, "sort by; S reverses", Some("sort")),
    b(Screen(Trials), &[c('S')], Action::SortReverse, "", None),
    b(Screen(Trials), &[ENTER], Action::ToggleDetail, "detail", Some("detail")),
    b(Screen(Trials), &[c(' ')], Action::Mark, "mark, compare", Some("mark")),
    b(Screen(Trials), &[c('c')], Action::Compare, "", Some("compare")),
    b(Screen(Trials), &[c('a')], Action::ApplyTrial, "apply its settings", Some("apply")),
    b(Screen(Trials), &[c('r')], Action::StartTrial, "start a trial", None),
    b(Screen(Trials), &[c('A')], Action::ToggleScope, "every experiment's, or this one's", None),
    b(Screen(Sweep), &[UP, c('k')], Action::Up, "select a space", Some("space")),
    b(Screen(Sweep), &[DOWN, c('j')], Action::Down, "", Some("space")),
    b(Screen(Sweep), &[ENTER], Action::SpaceDetail, "the space's details", Some("details")),
    b(Screen(Sweep), &[c('r')], Action::StartSweep, "sweep it (asks on GPUs)", Some("sweep")),
    b(Screen(Sweep), &[c('x')], Action::StopSweep, "stop the sweep", Some("stop")),
    b(Screen(Sweep), &[c('a')], Action::ApplySweep, "apply the pick", Some("apply the pick")),
    b(Screen(Studies), &[UP, c('k')], Action::Up, "select a study; in one, a candidate or the log line", Some("study")),
    b(Screen(Studies), &[DOWN, c('j')], Action::Down, "", Some("study")),
    b(Screen(Studies), &[ENTER], Action::OpenStudy, "ranked candidates", Some("ranked")),
    // Its footer hint is the open study's (`screens::studies::hint`).
    b(Screen(Studies), &[c('l')], Action::StudyLog, "the search's decision log", None),
    b(Screen(Studies), &[c('r')], Action::ResumeStudy, "resume it", Some("resume")),
    b(Screen(Studies), &[c('p')], Action::ReportStudy, "write its report", Some("report")),
    b(Screen(Studies), &[c('a')], Action::ApplyStudy, "apply its pick", Some("apply")),
    b(Screen(Studies), &[c('A')], Action::ToggleScope, "every experiment's, or this one's", None),
    // Lists.
    b(Lists, &[UP, c('k')], Action::Up, "move", None),
    b(Lists, &[DOWN, c('j')], Action::Down, "", None),
    b(Lists, &[k(KeyCode::PageUp)], Action::PageUp, "move a page", None),
    b(Lists, &[k(KeyCode::PageDown)], Action::PageDown, "", None),
    b(Lists, &[k(KeyCode::Home), c('g')], Action::Top, "first, last", None),
    b(Lists, &[k(KeyCode::End), c('G')], Action::Bottom, "", None),
    b(Lists, &[k(KeyCode::F(5))], Action::Refresh, "read again", None),
    // Everywhere.
    b(Global, &[c('1')], Action::GoTab(Checklist), "switch screen", None),
    b(Global, &[c('2')], Action::GoTab(Flags), "", None),
    b(Global, &[c('3')], Action::GoTab(Run), "", None),
    b(Global, &[c('4')], Action::GoTab(Trials), "", None),
    b(Global, &[c('5')], Action::GoTab(Sweep), "", None),
    b(Global, &[c('6')], Action::GoTab(Studies), "", None),
    b(Global, &[k(KeyCode::Tab)], Action::NextTab, "", None),
    b(Global, &[k(KeyCode::BackTab)], Action::PrevTab, "", None),
    b(Global, &[c('?')], Action::Help, "keys, the guided tour", Some("keys")),
    b(Global, &[c('t')], Action::Tour, "", None),
    b(Global, &[c('R')], Action::Reload, "reload from disk", None),
    b(Global, &[c('L')], Action::Messages, "the messages (errors, notes)", None),
    b(Global, &[c('q')], Action::Quit, QUIT, Some("quit")),
];

/// What `q` (and Ctrl-C) does, as the help says it.
const QUIT: &str = "quit (asks if running)";

/// The keys in force: the table's, with the defaults file's `[keys]` applied — one list per
/// binding of [`KEYMAP`], in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    pub(super) keys: Vec<Vec<Key>>,
}

impl Default for Keymap {
    fn default() -> Keymap {
        Keymap {
            keys: KEYMAP.iter().map(|b| b.keys.to_vec()).collect(),
        }
    }
}

impl Keymap {
    /// Every binding of the table with its keys in force.
    pub fn bindings(&self) -> impl Iterator<Item = (&'static Binding, &[Key])> {
        KEYMAP.iter().zip(self.keys.iter().map(Vec::as_slice))
    }

    /// The first key in force for `action` in `scope`, as the footer names it (`?` when the
    /// defaults file left it no key there).
    pub fn key_for(&self, scope: Scope, action: Action) -> String {
        self.of(scope)
            .find(|(b, keys)| b.action == action && !keys.is_empty())
            .and_then(|(_, keys)| keys.first().map(|k| short_name(*k)))
            .unwrap_or_else(|| "?".into())
    }

    /// The bindings of one scope, in the table's order.
    pub(super) fn of(&self, scope: Scope) -> impl Iterator<Item = (&'static Binding, &[Key])> {
        self.bindings().filter(move |(b, _)| b.scope == scope)
    }
}

/// The scopes in force, most specific first.
fn scopes(app: &App) -> Vec<Scope> {
    if let Some(o) = &app.overlay {
        return match o {
            Overlay::ConfirmQuit => {
                vec![Scope::ConfirmQuit, Scope::Always, Question, Scope::Overlay]
            }
            Overlay::ConfirmApply(_) | Overlay::ConfirmLaunch(_) => {
                vec![Scope::Always, Question, Scope::Overlay]
            }
            Overlay::Diff { save: true, .. } | Overlay::Restore { .. } => {
                vec![Scope::Always, Question, Scope::Overlay]
            }
            Overlay::Backups { .. } => vec![Scope::Always, Scope::Versions, Scope::Overlay],
            Overlay::Tour(_) => vec![Scope::Always, Scope::Tour, Scope::Overlay],
            // The typed reason takes every character (`q` too); Esc cancels.
            Overlay::Acknowledge { .. } => vec![Scope::Always, Scope::Prompt, Scope::Overlay],
            Overlay::Help { .. }
            | Overlay::Diff { save: false, .. }
            | Overlay::Error { .. }
            | Overlay::Messages { .. } => vec![Scope::Always, Scope::Info, Scope::Overlay],
        };
    }
    if app.tab == Flags && app.screens.flags.editor.is_some() {
        return vec![Scope::Always, Editor];
    }
    if app.tab == Flags && app.screens.flags.searching {
        return vec![Scope::Always, Search];
    }
    let mut v = vec![Scope::Always, Screen(app.tab)];
    if app.tab.has_list() {
        v.push(Lists);
    }
    v.push(Global);
    v
}

fn matches(key: Key, ev: &KeyEvent) -> Option<Option<char>> {
    let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
    match key {
        Key::Ctrl(ch) => (ctrl && ev.code == KeyCode::Char(ch)).then_some(None),
        Key::Code(code) => (!ctrl && ev.code == code).then_some(None),
        Key::AnyChar => match ev.code {
            KeyCode::Char(ch) if !ctrl => Some(Some(ch)),
            _ => None,
        },
    }
}

/// The action a key means now.
pub fn action(app: &App, ev: KeyEvent) -> Action {
    if ev.kind == KeyEventKind::Release {
        return Action::None;
    }
    for scope in scopes(app) {
        for (bind, keys) in app.keymap.of(scope) {
            for key in keys {
                if let Some(ch) = matches(*key, &ev) {
                    return match (bind.action, ch) {
                        (Action::EditInput(_), Some(ch)) => Action::EditInput(ch),
                        (Action::SearchInput(_), Some(ch)) => Action::SearchInput(ch),
                        (Action::PromptInput(_), Some(ch)) => Action::PromptInput(ch),
                        (a, _) => a,
                    };
                }
            }
        }
    }
    Action::None
}

/// A key as the help shows it (and as `[keys]` in the defaults file takes it).
pub fn key_name(key: Key) -> String {
    match key {
        Key::Ctrl(ch) => format!("Ctrl-{}", ch.to_ascii_uppercase()),
        Key::AnyChar => "a-z".into(),
        Key::Code(code) => match code {
            KeyCode::Char(' ') => "Space".into(),
            KeyCode::Char(ch) => ch.to_string(),
            KeyCode::Up => "Up".into(),
            KeyCode::Down => "Down".into(),
            KeyCode::Left => "Left".into(),
            KeyCode::Right => "Right".into(),
            KeyCode::Enter => "Enter".into(),
            KeyCode::Esc => "Esc".into(),
            KeyCode::Tab => "Tab".into(),
            KeyCode::BackTab => "S-Tab".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::Home => "Home".into(),
            KeyCode::End => "End".into(),
            KeyCode::Backspace => "Bksp".into(),
            KeyCode::F(n) => format!("F{n}"),
            other => format!("{other:?}"),
        },
    }
}

/// A key as the footer shows it: arrows as glyphs, Ctrl-x as `^X`.
fn short_name(key: Key) -> String {
    match key {
        Key::Ctrl(ch) => format!("^{}", ch.to_ascii_uppercase()),
        Key::Code(KeyCode::Up) => "↑".into(),
        Key::Code(KeyCode::Down) => "↓".into(),
        Key::Code(KeyCode::Left) => "←".into(),
        Key::Code(KeyCode::Right) => "→".into(),
        Key::AnyChar => String::new(),
        other => key_name(other),
    }
}

/// Joins key names, runs of consecutive digits written `1-6`.
pub(super) fn join_keys(names: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < names.len() {
        let digit = |s: &str| s.len() == 1 && s.chars().all(|c| c.is_ascii_digit());
        let mut j = i;
        while j + 1 < names.len()
            && digit(&names[j])
            && digit(&names[j + 1])
            && names[j + 1].as_bytes()[0] == names[j].as_bytes()[0] + 1
        {
            j += 1;
        }
        if j > i + 1 {
            out.push(format!("{}-{}", names[i], names[j]));
        } else {
            out.extend(names[i..=j].iter().cloned());
        }
        i = j + 1;
    }
    out.join(" ")
}

/// The footer: the hints of the keys that matter now, as many as fit in `width` columns.
pub fn footer(app: &App, width: usize) -> String {
    let choices = app
        .screens
        .flags
        .editor
        .as_ref()
        .is_some_and(|e| !e.choices.is_empty());
    let mut parts: Vec<(String, &'static str)> = Vec::new();
    let scopes = scopes(app);
    // While a reason is typed, `q` is a letter: the overlay's `q quit` is not offered.
    let typing = scopes.contains(&Scope::Prompt);
    for scope in scopes {
        for (bind, keys) in app.keymap.of(scope) {
            let hint = match scope {
                Screen(Studies) => super::screens::studies::hint(app, bind.action),
                _ => None,
            };
            let Some(hint) = hint.unwrap_or(bind.hint) else {
                continue;
            };
            if typing && bind.action == Action::Quit {
                continue;
            }
            if matches!(bind.action, Action::EditCycle(_)) && !choices {
                continue;
            }
            let key = keys.first().map_or(String::new(), |k| short_name(*k));
            let last_same = parts.last().is_some_and(|l| l.1 == hint);
            if last_same {
                if let Some(last) = parts.last_mut()
                    && !last.0.contains(&key)
                {
                    last.0.push_str(&key);
                }
            } else if !parts.iter().any(|p| p.1 == hint) {
                parts.push((key, hint));
            }
        }
    }
    let items: Vec<(String, bool)> = parts
        .iter()
        .map(|(key, hint)| {
            let text = if key.is_empty() {
                hint.to_string()
            } else {
                format!("{key} {hint}")
            };
            (text, matches!(*hint, "keys" | "quit"))
        })
        .collect();
    fit_hints(&items, width)
}

/// The footer's hints in `width` columns: all of them joined by ` · ` when they fit, else by
/// two spaces; when even that is too wide, as many of the screen's as fit, then `…` (the rest
/// are in the `?` help), and the `? keys` and `q quit` hints (`keep`) always at the end.
fn fit_hints(items: &[(String, bool)], width: usize) -> String {
    let cols = |s: &str| s.chars().count();
    let (tail, head): (Vec<&(String, bool)>, Vec<_>) = items.iter().partition(|i| i.1);
    for sep in [" · ", "  "] {
        let all: Vec<&str> = head.iter().chain(&tail).map(|i| i.0.as_str()).collect();
        let joined = all.join(sep);
        if cols(&joined) <= width {
            return joined;
        }
    }
    let sep = "  ";
    let tail: Vec<&str> = tail.iter().map(|i| i.0.as_str()).collect();
    let tail_w = cols(&tail.join(sep)) + cols(sep) + 1;
    let mut out: Vec<&str> = Vec::new();
    for (text, _) in &head {
        let used = cols(&out.join(sep)) + if out.is_empty() { 0 } else { cols(sep) };
        if used + cols(text) + cols(sep) + tail_w > width {
            break;
        }
        out.push(text);
    }
    out.push("…");
    out.extend(tail);
    let mut line = out.join(sep);
    while cols(&line) > width {
        line.pop();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_the_help_lists_is_reachable_by_its_keys() {
        // Each listed binding's keys, pressed in its scope, give its action (no earlier binding
        // in a more specific scope shadows it).
        for bind in KEYMAP {
            let Screen(tab) = bind.scope else { continue };
            let mut app = App::new(vec!["proxy-cpu".into()], "proxy-cpu", false);
            app.tab = tab;
            for key in bind.keys {
                let Key::Code(code) = key else { continue };
                let got = action(&app, KeyEvent::new(*code, KeyModifiers::NONE));
                assert_eq!(got, bind.action, "{key:?} on {tab:?}");
            }
        }
    }

    #[test]
    fn a_footer_too_wide_closes_up_then_says_more_keys_exist() {
        let items = |v: &[&str]| -> Vec<(String, bool)> {
            v.iter()
                .map(|t| (t.to_string(), t.ends_with("keys") || t.ends_with("quit")))
                .collect()
        };
        let hints = items(&["Enter edit", "/ search", "^E $EDITOR", "? keys", "q quit"]);
        assert_eq!(
            fit_hints(&hints, 80),
            "Enter edit · / search · ^E $EDITOR · ? keys · q quit"
        );
        // Narrower: two spaces apart, every hint kept.
        assert_eq!(
            fit_hints(&hints, 48),
            "Enter edit  / search  ^E $EDITOR  ? keys  q quit"
        );
        // Narrower still: what fits, then `…` for the rest (the help has them), and the keys.
        assert_eq!(
            fit_hints(&hints, 40),
            "Enter edit  / search  …  ? keys  q quit"
        );
    }

    #[test]
    fn digit_runs_are_joined() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(join_keys(&n(&["1", "2", "3", "Tab"])), "1-3 Tab");
        assert_eq!(join_keys(&n(&["1", "3"])), "1 3");
        assert_eq!(join_keys(&n(&["s", "S"])), "s S");
    }
}
