//! Keys to actions. Actions are plain data, so the key map can be listed (`?`) and tested without
//! a terminal. What a key means depends on the mode: an overlay, an input, or the screen.

use super::app::{App, Overlay, Tab};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Ctrl-C twice or SIGTERM: stop the trial and leave without asking.
    ForceQuit,
    CloseOverlay,
    Help,
    Tour,
    TourNext,
    TourBack,
    GoTab(Tab),
    NextTab,
    PrevTab,
    Up(usize),
    Down(usize),
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
    Reload,
    ProfileNext,
    ProfilePrev,
    StartTrial,
    /// Run the next HipBLASLt stage (Checklist, GEMM step).
    GemmStage,
    /// Train later trials with the tuned GEMMs, or not (Checklist, GEMM step).
    ToggleGemmTuned,
    StopTrial,
    NextPanel,
    SortNext,
    SortReverse,
    ToggleDetail,
    Mark,
    Compare,
    ApplyTrial,
    RefreshTrials,
    StartSweep,
    StopSweep,
    ApplySweep,
}

/// The key map as the help screen lists it: (keys, what they do), by section.
pub const HELP: &[(&str, &[(&str, &str)])] = &[
    (
        "everywhere",
        &[
            ("1-5 Tab S-Tab", "switch screen"),
            ("?  t", "keys, the guided tour"),
            ("q  Ctrl-C", "quit (asks if running)"),
            ("Esc", "close, cancel"),
            ("r", "start a trial"),
        ],
    ),
    (
        "lists",
        &[
            ("Up Down j k", "move"),
            ("PgUp PgDn", "move a page"),
            ("Home End g G", "first, last"),
        ],
    ),
    (
        "Checklist",
        &[
            ("Enter", "the step's flags"),
            ("n  u", "GEMM stage; use tuned"),
        ],
    ),
    (
        "Flags",
        &[
            ("Enter  e", "edit (bools toggle)"),
            ("Left Right", "cycle enum values"),
            ("/", "search by name"),
            ("a", "all flags"),
            ("u", "undo last edit"),
            ("d", "diff of the edits"),
            ("s", "save (diff first)"),
            ("R", "reload from disk"),
        ],
    ),
    (
        "Run",
        &[
            ("Left Right [ ]", "launch profile"),
            ("x", "stop the trial"),
            ("m", "next telemetry chart"),
        ],
    ),
    (
        "Trials",
        &[
            ("s  S", "sort by, reverse"),
            ("Enter", "detail"),
            ("Space  c", "mark, compare"),
            ("a", "apply its settings"),
            ("F5", "refresh"),
        ],
    ),
    (
        "Sweep",
        &[
            ("r  Enter", "sweep the space"),
            ("x", "stop the sweep"),
            ("a", "apply the pick"),
        ],
    ),
];

pub fn action(app: &App, k: KeyEvent) -> Action {
    if k.kind == KeyEventKind::Release {
        return Action::None;
    }
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && k.code == KeyCode::Char('c') {
        return if app.overlay == Some(Overlay::ConfirmQuit) {
            Action::ForceQuit
        } else {
            Action::Quit
        };
    }
    if let Some(o) = &app.overlay {
        return overlay_key(o, k.code);
    }
    if app.flags.editor.is_some() && app.tab == Tab::Flags {
        return match k.code {
            KeyCode::Esc => Action::EditCancel,
            KeyCode::Enter => Action::EditCommit,
            KeyCode::Backspace => Action::EditBackspace,
            KeyCode::Left | KeyCode::Up => Action::EditCycle(-1),
            KeyCode::Right | KeyCode::Down | KeyCode::Tab => Action::EditCycle(1),
            KeyCode::Char(c) => Action::EditInput(c),
            _ => Action::None,
        };
    }
    if app.flags.searching && app.tab == Tab::Flags {
        return match k.code {
            KeyCode::Esc => Action::SearchCancel,
            KeyCode::Enter | KeyCode::Down | KeyCode::Up => Action::SearchDone,
            KeyCode::Backspace => Action::SearchBackspace,
            KeyCode::Char(c) => Action::SearchInput(c),
            _ => Action::None,
        };
    }
    let page = app.page.max(1);
    let common = match k.code {
        KeyCode::Char('q') => Some(Action::Quit),
        KeyCode::Char('?') => Some(Action::Help),
        KeyCode::Char('t') => Some(Action::Tour),
        KeyCode::Char('1') => Some(Action::GoTab(Tab::Checklist)),
        KeyCode::Char('2') => Some(Action::GoTab(Tab::Flags)),
        KeyCode::Char('3') => Some(Action::GoTab(Tab::Run)),
        KeyCode::Char('4') => Some(Action::GoTab(Tab::Trials)),
        KeyCode::Char('5') => Some(Action::GoTab(Tab::Sweep)),
        KeyCode::Tab => Some(Action::NextTab),
        KeyCode::BackTab => Some(Action::PrevTab),
        KeyCode::Up | KeyCode::Char('k') => Some(Action::Up(1)),
        KeyCode::Down | KeyCode::Char('j') => Some(Action::Down(1)),
        KeyCode::PageUp => Some(Action::Up(page)),
        KeyCode::PageDown => Some(Action::Down(page)),
        KeyCode::Home | KeyCode::Char('g') => Some(Action::Top),
        KeyCode::End | KeyCode::Char('G') => Some(Action::Bottom),
        KeyCode::Char('R') => Some(Action::Reload),
        _ => None,
    };
    if let Some(a) = common {
        return a;
    }
    match (app.tab, k.code) {
        (Tab::Checklist, KeyCode::Enter) => Action::OpenStep,
        (Tab::Checklist, KeyCode::Char('n')) => Action::GemmStage,
        (Tab::Checklist, KeyCode::Char('u')) => Action::ToggleGemmTuned,
        (Tab::Checklist | Tab::Flags, KeyCode::Char('r')) => Action::StartTrial,
        (Tab::Flags, KeyCode::Enter | KeyCode::Char('e') | KeyCode::Char(' ')) => Action::Edit,
        (Tab::Flags, KeyCode::Char('/')) => Action::SearchStart,
        (Tab::Flags, KeyCode::Char('a')) => Action::ClearFilter,
        (Tab::Flags, KeyCode::Esc) => Action::ClearFilter,
        (Tab::Flags, KeyCode::Char('u')) => Action::Undo,
        (Tab::Flags, KeyCode::Char('d')) => Action::ShowDiff,
        (Tab::Flags, KeyCode::Char('s')) => Action::Save,
        (Tab::Run, KeyCode::Left | KeyCode::Char('[')) => Action::ProfilePrev,
        (Tab::Run, KeyCode::Right | KeyCode::Char(']')) => Action::ProfileNext,
        (Tab::Run, KeyCode::Enter | KeyCode::Char('r')) => Action::StartTrial,
        (Tab::Run, KeyCode::Char('x')) => Action::StopTrial,
        (Tab::Run, KeyCode::Char('m')) => Action::NextPanel,
        (Tab::Trials, KeyCode::Char('s')) => Action::SortNext,
        (Tab::Trials, KeyCode::Char('S')) => Action::SortReverse,
        (Tab::Trials, KeyCode::Enter) => Action::ToggleDetail,
        (Tab::Trials, KeyCode::Char(' ')) => Action::Mark,
        (Tab::Trials, KeyCode::Char('c')) => Action::Compare,
        (Tab::Trials, KeyCode::Char('a')) => Action::ApplyTrial,
        (Tab::Trials, KeyCode::F(5)) => Action::RefreshTrials,
        (Tab::Trials, KeyCode::Char('r')) => Action::StartTrial,
        (Tab::Sweep, KeyCode::Enter | KeyCode::Char('r')) => Action::StartSweep,
        (Tab::Sweep, KeyCode::Char('x')) => Action::StopSweep,
        (Tab::Sweep, KeyCode::Char('a')) => Action::ApplySweep,
        _ => Action::None,
    }
}

fn overlay_key(o: &Overlay, code: KeyCode) -> Action {
    match (o, code) {
        (Overlay::Tour(_), KeyCode::Enter | KeyCode::Right | KeyCode::Char(' ' | 'n')) => {
            Action::TourNext
        }
        (Overlay::Tour(_), KeyCode::Left | KeyCode::Char('p')) => Action::TourBack,
        (Overlay::Diff { save: true } | Overlay::ConfirmQuit, KeyCode::Char('y' | 'Y')) => {
            Action::ConfirmYes
        }
        (Overlay::ConfirmQuit, KeyCode::Char('n' | 'N')) => Action::CloseOverlay,
        (Overlay::Diff { save: true }, KeyCode::Char('n' | 'N')) => Action::CloseOverlay,
        (_, KeyCode::Esc | KeyCode::Char('q' | '?')) => Action::CloseOverlay,
        (Overlay::Help | Overlay::Diff { save: false }, KeyCode::Enter) => Action::CloseOverlay,
        _ => Action::None,
    }
}
