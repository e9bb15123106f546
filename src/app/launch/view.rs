//! What a view of the experiment says of the launch a profile makes: the profile it resolves
//! with, and where that profile's trials would run.

use super::placement::Placement;

/// The launch profile a session's views resolve with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewProfile {
    pub name: String,
    /// The variables its `env:` sets that reached the view (a value that needs a trial of its
    /// own, such as `{trial_dir}`, does not).
    pub sets: Vec<String>,
    /// Where its trials run, as a trial started now without options of its own would: its
    /// placement (the world and its source) and its launcher.
    pub launch: LaunchWhere,
}

/// Where a profile's trials run, as a question before a launch says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchWhere {
    pub placement: Placement,
    /// The scheduler of a batch job (None: on this node).
    pub scheduler: Option<&'static str>,
    /// It launches on this node although the defaults file has Slurm settings (they apply to
    /// the commands' `--slurm`): the question says so.
    pub slurm_settings_unused: bool,
}

impl LaunchWhere {
    /// What a question before a launch says of it.
    pub fn describe(&self) -> String {
        let at = match (self.placement.world, self.scheduler) {
            (Some(w), _) => format!("at {w}"),
            (None, Some(_)) => format!(
                "on {}, at a world it does not say: {}",
                crate::util::text::count(self.placement.nodes as usize, "node", "nodes"),
                self.placement.unknown_note().unwrap_or_default()
            ),
            (None, None) => {
                return format!(
                    "Launches on this node; {}.",
                    self.placement.unknown_note().unwrap_or_default()
                );
            }
        };
        let unused = if self.slurm_settings_unused {
            " (The defaults file's [slurm] settings apply to `run --slurm` and `sweep --slurm`; \
             this launch stays here.)"
        } else {
            ""
        };
        match self.scheduler {
            Some(s) => format!("Submits a {} job {at}.", scheduler_title(s)),
            None => format!("Launches on this node {at}.{unused}"),
        }
    }
}

/// A scheduler's name as prose writes it (`Slurm`).
pub fn scheduler_title(name: &str) -> String {
    match name {
        "slurm" => "Slurm".into(),
        other => other.to_string(),
    }
}
