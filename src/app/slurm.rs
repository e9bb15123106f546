//! Trials as Slurm jobs, as a use case: what the user asks (the command line), merged over the
//! profile's `slurm:` section and the defaults file's `[slurm]` table, becomes the engine's
//! [`SlurmLaunch`].

use super::AppError;
use crate::run::profile::Profile;
pub use crate::run::slurm::SlurmSettings;
use crate::run::slurm::{Slurm, SlurmSpec};
use crate::run::trial::slurm_job::SlurmLaunch;
use std::path::PathBuf;
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
    let from_file = super::defaults::Defaults::load()?.slurm;
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
    fn time_limits_are_checked_as_sbatch_takes_them() {
        for ok in ["30", "0:30", "1:00:00", "2-0", "2-12:00:00", "UNLIMITED"] {
            assert!(valid_time(ok), "{ok}");
        }
        for bad in ["", "1h", "1:2:3:4", "-5", "a-1"] {
            assert!(!valid_time(bad), "{bad}");
        }
    }
}
