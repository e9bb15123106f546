//! Trials as Slurm jobs, as a use case: what the user asks (the command line), merged over the
//! profile's `slurm:` section and the defaults file's `[slurm]` table, becomes the engine's
//! batch launch on Slurm, with the job's shape and where each figure of it was set.

use super::placement::JobAsk;
use crate::app::{AppError, Defaults};
use crate::megatron::Origin;
use crate::run::launch::batch::BatchLaunch;
use crate::run::launch::scheduler::JobSpec;
pub use crate::run::launch::slurm::SlurmSettings;
use crate::run::profile::Profile;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a trial asks of Slurm.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmRequest {
    /// Run on Slurm (`--slurm`); a profile whose trials are jobs (`slurm: job` or `submits`)
    /// runs there anyway.
    pub enabled: bool,
    pub settings: SlurmSettings,
    /// How often the job and its files are read (default 1 s).
    pub poll: Option<Duration>,
    /// Let Slurm requeue the job when a node fails (`--requeue`; the trial still ends, as
    /// `node-fail`); default `--no-requeue`.
    pub requeue: bool,
    /// Longest wait in the queue before the trial fails as `pending-limit`.
    pub max_pending: Option<Duration>,
}

/// The Slurm options of the command line.
const OPTIONS: &str = "--nodes, --gpus-per-node, --partition, --account, --time, --sbatch-arg, \
                       --requeue, --max-pending-seconds";

/// Where one setting came from: the command line, the profile, the defaults file.
fn origin<T>(cli: &Option<T>, profile: &Option<T>, file: &Option<T>) -> Origin {
    if cli.is_some() {
        Origin::Flag
    } else if profile.is_some() {
        Origin::Profile
    } else if file.is_some() {
        Origin::DefaultsFile
    } else {
        Origin::BuiltIn
    }
}

/// The engine's launch for a trial of `profile` on Slurm, with the job's shape as asked, or
/// None when it runs on this node. The command line wins over the profile's `slurm:` section,
/// which wins over the defaults file.
pub fn launch(
    req: &SlurmRequest,
    profile: &Profile,
    defaults: &Defaults,
) -> Result<Option<(BatchLaunch, JobAsk)>, AppError> {
    let submits = profile.slurm.as_ref().is_some_and(|s| s.submits);
    let always = submits || profile.slurm.as_ref().is_some_and(|s| s.job);
    if !req.enabled && !always {
        if !req.settings.is_empty() || req.requeue || req.max_pending.is_some() {
            return Err(AppError::Usage(format!(
                "Slurm options ({OPTIONS}) need --slurm"
            )));
        }
        return Ok(None);
    }
    let from_file = &defaults.slurm;
    let from_profile = profile
        .slurm
        .as_ref()
        .map(|s| s.settings.clone())
        .unwrap_or_default();
    let cli = &req.settings;
    let ask = JobAsk {
        nodes: (
            cli.nodes
                .or(from_profile.nodes)
                .or(from_file.nodes)
                .unwrap_or(1),
            origin(&cli.nodes, &from_profile.nodes, &from_file.nodes),
        ),
        gpus_per_node: cli
            .gpus_per_node
            .or(from_profile.gpus_per_node)
            .or(from_file.gpus_per_node)
            .map(|g| {
                let o = origin(
                    &cli.gpus_per_node,
                    &from_profile.gpus_per_node,
                    &from_file.gpus_per_node,
                );
                (g, o)
            }),
    };
    let s = cli.clone().or(&from_profile.or(from_file));
    if let Some(t) = &s.time
        && !valid_time(t)
    {
        return Err(AppError::Usage(format!(
            "--time {t}: not a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]])"
        )));
    }
    let spec = JobSpec {
        nodes: ask.nodes.0,
        gpus_per_node: ask.gpus_per_node.map(|g| g.0),
        partition: s.partition,
        account: s.account,
        time: s.time,
        extra_args: s.sbatch_args,
        job_name: format!("primus-tune-{}", profile.name),
        requeue: req.requeue,
    };
    let scheduler = Arc::new(crate::run::launch::slurm::Slurm {
        conf: std::env::var_os("SLURM_CONF").map(PathBuf::from),
    });
    Ok(Some((
        BatchLaunch {
            scheduler,
            spec,
            poll: req.poll.unwrap_or(Duration::from_secs(1)),
            submits,
            attach: None,
            max_pending: req.max_pending,
        },
        ask,
    )))
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
        // A source that gives sbatch arguments replaces the others' list.
        assert_eq!(s.sbatch_args, ["--exclusive"]);
    }

    #[test]
    fn a_profile_whose_trials_are_jobs_runs_on_slurm_without_the_flag() {
        let defaults = Defaults::default();
        let job = crate::run::profile::find("primus-slurm", None).unwrap();
        let (b, ask) = launch(&SlurmRequest::default(), &job, &defaults)
            .unwrap()
            .expect("a job");
        assert!(!b.submits, "primus-tune submits it");
        assert_eq!(ask.nodes.0, 1);
        let local = crate::run::profile::find("primus", None).unwrap();
        assert!(
            launch(&SlurmRequest::default(), &local, &defaults)
                .unwrap()
                .is_none()
        );
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
