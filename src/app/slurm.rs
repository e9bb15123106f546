//! Trials as Slurm jobs, as a use case: what the user asks (the command line), merged over the
//! profile's `slurm:` section and the defaults file's `[slurm]` table, becomes the engine's
//! [`SlurmLaunch`].

use super::AppError;
use crate::run::profile::Profile;
pub use crate::run::slurm::SlurmSettings;
use crate::run::slurm::{Slurm, SlurmSpec};
use crate::run::trial::slurm_job::SlurmLaunch;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a trial asks of Slurm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmRequest {
    /// Run on Slurm (`--slurm`); a profile whose command submits the job runs there anyway.
    pub enabled: bool,
    pub settings: SlurmSettings,
    /// How often the job and its files are read (default 1 s).
    pub poll: Option<Duration>,
}

/// The defaults file: `$PRIMUS_TUNE_CONFIG`, else `$XDG_CONFIG_HOME/primus-tune/config.toml`,
/// else `~/.config/primus-tune/config.toml`.
pub fn defaults_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PRIMUS_TUNE_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("primus-tune/config.toml"))
}

/// The `[slurm]` table of the defaults file at `path` (none when the file does not exist).
pub fn defaults_in(path: &Path) -> Result<SlurmSettings, AppError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SlurmSettings::default()),
        Err(e) => return Err(AppError::Usage(format!("{}: {e}", path.display()))),
    };
    let bad = |msg: String| AppError::Usage(format!("{}: {msg}", path.display()));
    let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let at = e
            .span()
            .map(|s| line_col(&text, s.start))
            .map_or(String::new(), |(l, c)| format!(":{l}:{c}"));
        AppError::Usage(format!("{}{at}: {}", path.display(), e.message()))
    })?;
    let Some(table) = doc.get("slurm") else {
        return Ok(SlurmSettings::default());
    };
    let t = table
        .as_table()
        .ok_or_else(|| bad("`slurm` must be a table ([slurm])".into()))?;
    let mut out = SlurmSettings::default();
    for (key, item) in t.iter() {
        let v = item.as_value();
        let int = |v: Option<&toml_edit::Value>| {
            v.and_then(|v| v.as_integer())
                .and_then(|i| u32::try_from(i).ok())
                .filter(|i| *i > 0)
                .ok_or_else(|| bad(format!("[slurm] {key} must be a positive integer")))
        };
        let string = |v: Option<&toml_edit::Value>| {
            v.and_then(|v| v.as_str())
                .map(str::to_string)
                .ok_or_else(|| bad(format!("[slurm] {key} must be a string")))
        };
        match key {
            "nodes" => out.nodes = Some(int(v)?),
            "gpus_per_node" => out.gpus_per_node = Some(int(v)?),
            "partition" => out.partition = Some(string(v)?),
            "account" => out.account = Some(string(v)?),
            "time" => out.time = Some(string(v)?),
            "sbatch_args" => {
                let arr = v
                    .and_then(|v| v.as_array())
                    .ok_or_else(|| bad("[slurm] sbatch_args must be a list of strings".into()))?;
                for a in arr.iter() {
                    out.sbatch_args.push(string(Some(a))?);
                }
            }
            other => {
                return Err(bad(format!(
                    "[slurm] has no key `{other}` (keys: nodes, gpus_per_node, partition, \
                     account, time, sbatch_args)"
                )));
            }
        }
    }
    Ok(out)
}

/// The engine's Slurm launch for a trial of `profile`, or None when it runs on this node.
/// The command line wins over the profile's `slurm:` section, which wins over the defaults file.
pub fn launch(req: &SlurmRequest, profile: &Profile) -> Result<Option<SlurmLaunch>, AppError> {
    let submits = profile.slurm.as_ref().is_some_and(|s| s.submits);
    if !req.enabled && !submits {
        if !req.settings.is_empty() {
            return Err(AppError::Usage(
                "Slurm options (--nodes, --gpus-per-node, --partition, --account, --time, \
                 --sbatch-arg) need --slurm"
                    .into(),
            ));
        }
        return Ok(None);
    }
    let from_file = match defaults_path() {
        Some(p) => defaults_in(&p)?,
        None => SlurmSettings::default(),
    };
    let from_profile = profile
        .slurm
        .as_ref()
        .map(|s| s.settings.clone())
        .unwrap_or_default();
    let s = req.settings.clone().or(&from_profile.or(&from_file));
    if let Some(t) = &s.time
        && !valid_time(t)
    {
        return Err(AppError::Usage(format!(
            "--time {t}: not a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]])"
        )));
    }
    let spec = SlurmSpec {
        nodes: s.nodes.unwrap_or(1),
        gpus_per_node: s.gpus_per_node,
        partition: s.partition,
        account: s.account,
        time: s.time,
        sbatch_args: s.sbatch_args,
        job_name: format!("primus-tune-{}", profile.name),
    };
    Ok(Some(SlurmLaunch {
        spec,
        slurm: Slurm {
            conf: std::env::var_os("SLURM_CONF").map(PathBuf::from),
        },
        poll: req.poll.unwrap_or(Duration::from_secs(1)),
        submits,
        attach: None,
    }))
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Whether `t` is a time limit as `sbatch --time` takes it.
fn valid_time(t: &str) -> bool {
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    let num = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if t == "UNLIMITED" || t == "INFINITE" {
        return true;
    }
    days.is_none_or(num) && rest.split(':').count() <= 3 && rest.split(':').all(num)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_wins_over_the_profile_over_the_file() {
        let cli = SlurmSettings {
            nodes: Some(4),
            sbatch_args: vec!["--exclusive".into()],
            ..SlurmSettings::default()
        };
        let profile = SlurmSettings {
            nodes: Some(2),
            partition: Some("mi300x".into()),
            ..SlurmSettings::default()
        };
        let file = SlurmSettings {
            partition: Some("default".into()),
            account: Some("proj".into()),
            sbatch_args: vec!["--qos=short".into()],
            ..SlurmSettings::default()
        };
        let s = cli.or(&profile.or(&file));
        assert_eq!(s.nodes, Some(4));
        assert_eq!(s.partition.as_deref(), Some("mi300x"));
        assert_eq!(s.account.as_deref(), Some("proj"));
        assert_eq!(s.sbatch_args, ["--qos=short", "--exclusive"]);
    }

    #[test]
    fn the_defaults_file_is_read_and_a_bad_key_names_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("config.toml");
        assert!(defaults_in(&p).unwrap().is_empty());
        std::fs::write(
            &p,
            "[slurm]\nnodes = 2\ngpus_per_node = 8\npartition = \"mi300x\"\ntime = \"0:30:00\"\n\
             sbatch_args = [\"--exclusive\"]\n",
        )
        .unwrap();
        let s = defaults_in(&p).unwrap();
        assert_eq!(s.nodes, Some(2));
        assert_eq!(s.gpus_per_node, Some(8));
        assert_eq!(s.sbatch_args, ["--exclusive"]);
        std::fs::write(&p, "[slurm]\nnode = 2\n").unwrap();
        let e = defaults_in(&p).unwrap_err().to_string();
        assert!(e.contains("config.toml") && e.contains("`node`"), "{e}");
        std::fs::write(&p, "[slurm]\nnodes = \n").unwrap();
        let e = defaults_in(&p).unwrap_err().to_string();
        assert!(e.contains("config.toml:2:"), "{e}");
    }

    #[test]
    fn time_limits_are_checked_as_sbatch_takes_them() {
        for ok in ["30", "0:30", "1:00:00", "2-0", "2-12:00:00", "UNLIMITED"] {
            assert!(valid_time(ok), "{ok}");
        }
        for bad in ["", "1h", "1:2:3:4", "-5", "a-1"] {
            assert!(!valid_time(bad), "{bad}");
        }
    }
}
