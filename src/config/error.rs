//! Errors of the config engine. Each names the file and, where there is one, the line.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}:{col}: YAML error: {message}", path.display())]
    Yaml {
        path: PathBuf,
        line: u32,
        col: u32,
        message: String,
    },
    #[error("{}: the file is empty or holds no YAML document", path.display())]
    Empty { path: PathBuf },
    #[error("{}:{line}:{col}: {message}", path.display())]
    Invalid {
        path: PathBuf,
        line: u32,
        col: u32,
        message: String,
    },
    #[error("{}:{line}:{col}: extends target `{target}` not found (looked for {})", path.display(), resolved.display())]
    MissingExtends {
        path: PathBuf,
        line: u32,
        col: u32,
        target: String,
        resolved: PathBuf,
    },
    #[error("{}:{line}:{col}: cycle in `extends`: {}", path.display(), chain.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" → "))]
    ExtendsCycle {
        path: PathBuf,
        line: u32,
        col: u32,
        chain: Vec<PathBuf>,
    },
    #[error("{}:{line}:{col}: environment variable `{var}` is required (written `${{{var}}}` without a default) but not set; export it or write `${{{var}:default}}`", path.display())]
    EnvRequired {
        path: PathBuf,
        line: u32,
        col: u32,
        var: String,
    },
    #[error("{}: required key `{key}` is missing (an experiment needs work_group, user_name, exp_name, workspace and modules)", path.display())]
    MissingKey { path: PathBuf, key: String },
    #[error("{}:{line}:{col}: {kind} preset `{name}` not found in {}{}", path.display(), dir.display(), available_hint(available))]
    PresetNotFound {
        path: PathBuf,
        line: u32,
        col: u32,
        kind: &'static str,
        name: String,
        dir: PathBuf,
        available: Vec<String>,
    },
    #[error("{}: no Primus root found (no folder above it holds primus/configs/); pass --primus-root DIR or set PRIMUS_ROOT", path.display())]
    NoPrimusRoot { path: PathBuf },
    #[error("{}: not a Primus root (it has no primus/configs/modules/)", path.display())]
    BadPrimusRoot { path: PathBuf },
    #[error("override `{text}`: {message}")]
    BadOverride { text: String, message: String },
}

fn available_hint(available: &[String]) -> String {
    if available.is_empty() {
        String::new()
    } else {
        let shown: Vec<&str> = available.iter().take(12).map(String::as_str).collect();
        let more = if available.len() > shown.len() {
            format!(", … ({} in all)", available.len())
        } else {
            String::new()
        };
        format!("; available: {}{more}", shown.join(", "))
    }
}

impl ConfigError {
    /// The file the error is about, where there is one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            ConfigError::Io { path, .. }
            | ConfigError::Yaml { path, .. }
            | ConfigError::Empty { path }
            | ConfigError::Invalid { path, .. }
            | ConfigError::MissingExtends { path, .. }
            | ConfigError::ExtendsCycle { path, .. }
            | ConfigError::EnvRequired { path, .. }
            | ConfigError::MissingKey { path, .. }
            | ConfigError::PresetNotFound { path, .. }
            | ConfigError::NoPrimusRoot { path }
            | ConfigError::BadPrimusRoot { path } => Some(path),
            ConfigError::BadOverride { .. } => None,
        }
    }

    /// The line and column the error is at, where it names one.
    pub fn position(&self) -> Option<(u32, u32)> {
        match self {
            ConfigError::Yaml { line, col, .. }
            | ConfigError::Invalid { line, col, .. }
            | ConfigError::MissingExtends { line, col, .. }
            | ConfigError::ExtendsCycle { line, col, .. }
            | ConfigError::EnvRequired { line, col, .. }
            | ConfigError::PresetNotFound { line, col, .. } => Some((*line, *col)),
            _ => None,
        }
    }

    /// The message without the `file[:line:col]: ` it starts with (for a report that names
    /// the place apart).
    pub fn message(&self) -> String {
        let text = self.to_string();
        let Some(path) = self.path() else {
            return text;
        };
        let prefix = match self.position() {
            Some((l, c)) => format!("{}:{l}:{c}: ", path.display()),
            None => format!("{}: ", path.display()),
        };
        text.strip_prefix(&prefix)
            .map_or(text.clone(), str::to_string)
    }

    /// The named file does not exist (as opposed to a file that exists and is wrong).
    pub fn is_missing_file(&self) -> bool {
        matches!(self, ConfigError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}
