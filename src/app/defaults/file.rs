//! What the defaults file holds, as read: each setting with its place in the file (a leaf of
//! the defaults: reading the file fills it, resolving a setting reads it).

use crate::app::error::DefaultsError;
use crate::run::launch::slurm::SlurmSettings;
use crate::util::paths::display_path;
use std::fmt;
use std::path::PathBuf;

/// A place in the defaults file (1-based line and column, in characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            display_path(&self.file),
            self.line,
            self.column
        )
    }
}

/// A value of the defaults file and where it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    pub at: Location,
}

/// `[ui] color`: colour when the output is a terminal (`auto`), always, or never.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    pub const NAMES: [&'static str; 3] = ["auto", "always", "never"];

    pub fn name(self) -> &'static str {
        match self {
            ColorChoice::Auto => "auto",
            ColorChoice::Always => "always",
            ColorChoice::Never => "never",
        }
    }

    pub fn from_name(s: &str) -> Option<ColorChoice> {
        match s {
            "auto" => Some(ColorChoice::Auto),
            "always" => Some(ColorChoice::Always),
            "never" => Some(ColorChoice::Never),
            _ => None,
        }
    }

    /// Whether a stream gets colour.
    pub fn colour(self, is_terminal: bool) -> bool {
        match self {
            ColorChoice::Auto => is_terminal,
            ColorChoice::Always => true,
            ColorChoice::Never => false,
        }
    }
}

/// A `[keys]` entry as written: an action's name and its keys. Only the TUI knows its actions
/// and key names, so it checks them (with these places in its errors).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyOverride {
    pub action: String,
    /// Where the action's name is written.
    pub at: Location,
    pub keys: Vec<Setting<String>>,
}

/// The defaults file as read. Every field is what the file says (None: it says nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Defaults {
    /// The file read; None when there is none.
    pub file: Option<PathBuf>,
    /// The launch profile of `run`, `sweep` and the TUI's Run screen.
    pub profile: Option<Setting<String>>,
    /// The world size (as `--gpus`).
    pub gpus: Option<Setting<u64>>,
    /// The telemetry backend (as `--backend`).
    pub backend: Option<Setting<String>>,
    /// The workspace folder (`~` expanded, a relative path taken from the file's folder).
    pub workspace: Option<Setting<PathBuf>>,
    /// `[ui] color`.
    pub color: Option<Setting<ColorChoice>>,
    /// `[ui] mouse`.
    pub mouse: Option<Setting<bool>>,
    /// `[keys]`, in the file's order.
    pub keys: Vec<KeyOverride>,
    /// `[slurm]`.
    pub slurm: SlurmSettings,
    /// Each `[slurm]` key the file sets: its name, value and place (for `defaults`).
    pub slurm_entries: Vec<(String, serde_json::Value, Location)>,
}

impl DefaultsError {
    pub fn at(loc: &Location, message: impl Into<String>) -> DefaultsError {
        DefaultsError {
            file: loc.file.clone(),
            at: Some((loc.line, loc.column)),
            message: message.into(),
        }
    }
}
