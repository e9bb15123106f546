//! A sweep's study, opened: a new one (created only once everything it needs is known, so a
//! refused sweep leaves no study behind), or a resumed one, which goes on as it began — the
//! launch it recorded (its iteration budget, profile, GPUs, Slurm settings) is reused, and a
//! different budget is refused with the recorded one named.

use super::request::{FIRST_ITERS, MAX_ITERS, SweepRequest};
use crate::app::launch::slurm::SlurmSettings;
use crate::app::{AppError, Session};
use crate::config::Experiment;
use crate::store::Store;
use crate::tune::space::{self, Space};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a study's trials launch, stored with it (`studies.launch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyLaunch {
    pub first_iters: u64,
    pub max_iters: u64,
    pub profile: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u64>,
    #[serde(default)]
    pub gemm_tuned: bool,
    /// Its trials ran as Slurm jobs with these settings (the command line's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<StudySlurm>,
    #[serde(default = "one")]
    pub parallel: usize,
    /// It sweeps knobs its profile does not model, as a labelled demo.
    #[serde(default)]
    pub demo: bool,
    /// Its caps on cost and trials; absent in launches recorded before they were kept (a
    /// resume then takes the command line's, and records them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps: Option<StudyCaps>,
}

/// A study's `--budget-minutes` and `--max-trials` (None: no cap).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StudyCaps {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_minutes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_trials: Option<usize>,
}

fn one() -> usize {
    1
}

/// The Slurm side of a study's launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudySlurm {
    pub settings: SlurmSettings,
    #[serde(default)]
    pub requeue: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pending_s: Option<f64>,
}

impl StudyLaunch {
    /// The launch a request asks for (the profile as resolved).
    pub fn of(req: &SweepRequest, profile: &str) -> StudyLaunch {
        let sl = &req.trial.slurm;
        StudyLaunch {
            first_iters: req.first_iters.unwrap_or(FIRST_ITERS),
            max_iters: req.max_iters.unwrap_or(MAX_ITERS),
            profile: profile.to_string(),
            gpus: req.trial.gpus,
            gemm_tuned: req.trial.gemm_tuned,
            slurm: sl.enabled.then(|| StudySlurm {
                settings: sl.settings.clone(),
                requeue: sl.requeue,
                max_pending_s: sl.max_pending.map(|d| d.as_secs_f64()),
            }),
            parallel: req.parallel.max(1),
            demo: req.allow_unmodeled,
            caps: Some(StudyCaps {
                budget_minutes: req.budget_minutes,
                max_trials: req.max_trials,
            }),
        }
    }

    /// The iteration budget this launch was started with, as the command line writes it.
    fn budget_flags(&self) -> String {
        format!(
            "--first-iters {} --max-iters {}",
            self.first_iters, self.max_iters
        )
    }

    /// Whether `req` names an iteration budget other than this launch's (a flag left out names
    /// none).
    fn other_budget(&self, req: &SweepRequest) -> bool {
        req.first_iters.is_some_and(|f| f != self.first_iters)
            || req.max_iters.is_some_and(|m| m != self.max_iters)
    }

    /// `req` going on as this launch of study `id` (named `study`): what the request leaves
    /// out is the study's. An iteration budget other than the study's is refused: its finished
    /// trials are of its lengths, and trials of others would neither be reused nor compare.
    /// A cap given (`--budget-minutes`, `--max-trials`) replaces the study's: the cap counts
    /// the trials replayed too, so a study its cap cut short goes on only under a larger one.
    fn resume(
        &self,
        study: &str,
        id: i64,
        mut req: SweepRequest,
    ) -> Result<SweepRequest, AppError> {
        if self.other_budget(&req) {
            return Err(AppError::BudgetConflict {
                study: study.to_string(),
                id,
                budget: self.budget_flags(),
            });
        }
        req.first_iters = Some(self.first_iters);
        req.max_iters = Some(self.max_iters);
        if let Some(c) = self.caps {
            req.budget_minutes = req.budget_minutes.or(c.budget_minutes);
            req.max_trials = req.max_trials.or(c.max_trials);
        }
        req.trial.profile = req.trial.profile.or_else(|| Some(self.profile.clone()));
        req.trial.gpus = req.trial.gpus.or(self.gpus);
        req.trial.gemm_tuned |= self.gemm_tuned;
        if let Some(sl) = &self.slurm
            && !req.trial.slurm.enabled
        {
            let r = &mut req.trial.slurm;
            r.enabled = true;
            r.settings = r.settings.clone().or(&sl.settings);
            r.requeue |= sl.requeue;
            r.max_pending = r
                .max_pending
                .or(sl.max_pending_s.map(Duration::from_secs_f64));
        }
        if req.parallel <= 1 {
            req.parallel = self.parallel;
        }
        req.allow_unmodeled |= self.demo;
        Ok(req)
    }
}

/// A study to run: its id (None: a new one, created by [`create`] once the sweep is set up),
/// name and space.
pub struct Opened {
    pub id: Option<i64>,
    pub name: String,
    pub space: Space,
    pub req: SweepRequest,
}

/// The study a request names: resumed with its recorded launch, or a new one of its space.
pub fn open(
    session: &Session,
    store: &Store,
    exp: &Experiment,
    req: &SweepRequest,
) -> Result<Opened, AppError> {
    let db = crate::util::paths::display_path(&session.workspace.db);
    let Some(name) = &req.resume else {
        let space_name = req
            .space
            .as_deref()
            .ok_or_else(|| AppError::Usage("--space NAME is needed (or --resume STUDY)".into()))?;
        let space = space::find(space_name, space::user_dir().as_deref())?;
        if let Some(why) = space.not_applicable(exp) {
            return Err(AppError::Failed(format!("{}: {why}", session.display())));
        }
        let name = req.name.clone().unwrap_or_else(|| {
            format!(
                "{}-{}",
                space.name,
                crate::store::now_rfc3339().replace([':', '-', '.'], "")
            )
        });
        if let Some(existing) = store.study_by_name(&name)? {
            return Err(AppError::Store(crate::store::StoreError::StudyExists {
                path: store.path().to_path_buf(),
                name,
                id: existing.id,
            }));
        }
        let mut req = req.clone();
        req.first_iters = Some(req.first_iters.unwrap_or(FIRST_ITERS));
        req.max_iters = Some(req.max_iters.unwrap_or(MAX_ITERS));
        return Ok(Opened {
            id: None,
            name,
            space,
            req,
        });
    };
    let s = store
        .study_by_name(name)?
        .ok_or_else(|| AppError::NoStudy {
            name: name.clone(),
            db,
        })?;
    let space: Space = s
        .space
        .clone()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| AppError::Failed(format!("study `{name}` has no space recorded")))?;
    let recorded: Option<StudyLaunch> = s.launch.and_then(|v| serde_json::from_value(v).ok());
    let req = match recorded {
        Some(l) => l.resume(name, s.id, req.clone())?,
        None => resume_unrecorded(store, s.id, req.clone()),
    };
    Ok(Opened {
        id: Some(s.id),
        name: name.clone(),
        space,
        req,
    })
}

/// A study stored before its launch was recorded: the profile and Slurm shape of its trials,
/// the default budget unless given.
fn resume_unrecorded(store: &Store, study: i64, mut req: SweepRequest) -> SweepRequest {
    let trials = store
        .list_trials(&crate::store::TrialFilter::all().study(study))
        .unwrap_or_default();
    if req.trial.profile.is_none() {
        req.trial.profile = trials.iter().find_map(|t| t.profile.clone());
    }
    if !req.trial.slurm.enabled
        && let Some(job) = trials.iter().rev().find_map(|t| t.job.clone())
    {
        req.trial.slurm.enabled = true;
        let set = &mut req.trial.slurm.settings;
        set.nodes = set.nodes.or(Some(job.nodes));
        set.gpus_per_node = set.gpus_per_node.or(job.gpus_per_node);
    }
    req.first_iters = Some(req.first_iters.unwrap_or(FIRST_ITERS));
    req.max_iters = Some(req.max_iters.unwrap_or(MAX_ITERS));
    req
}

/// The study's id: created now for a new one (with its space); its launch recorded either way.
pub fn create(
    store: &Store,
    exp: &Experiment,
    o: &Opened,
    launch: &StudyLaunch,
) -> Result<i64, AppError> {
    let id = match o.id {
        Some(id) => id,
        None => {
            let id = store.create_study(&o.name, &exp.path, &o.space.name)?;
            store.set_study_space(id, serde_json::to_value(&o.space).ok().as_ref())?;
            id
        }
    };
    store.set_study_launch(id, serde_json::to_value(launch).ok().as_ref())?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_goes_on_with_the_study_s_budget_and_refuses_another() {
        let launch = StudyLaunch {
            first_iters: 60,
            max_iters: 60,
            profile: "proxy-cpu".into(),
            gpus: None,
            gemm_tuned: false,
            slurm: Some(StudySlurm {
                settings: SlurmSettings {
                    nodes: Some(2),
                    ..Default::default()
                },
                requeue: false,
                max_pending_s: Some(30.0),
            }),
            parallel: 2,
            demo: true,
            caps: Some(StudyCaps {
                budget_minutes: None,
                max_trials: Some(5),
            }),
        };
        let r = launch.resume("s", 3, SweepRequest::default()).unwrap();
        assert_eq!((r.first_iters, r.max_iters), (Some(60), Some(60)));
        assert_eq!(r.trial.profile.as_deref(), Some("proxy-cpu"));
        assert!(r.trial.slurm.enabled);
        assert_eq!(r.trial.slurm.settings.nodes, Some(2));
        assert_eq!(r.trial.slurm.max_pending, Some(Duration::from_secs(30)));
        assert_eq!(r.parallel, 2);
        assert!(r.allow_unmodeled, "a demo goes on as a demo");
        assert_eq!((r.budget_minutes, r.max_trials), (None, Some(5)));
        let same = SweepRequest {
            first_iters: Some(60),
            max_trials: Some(5),
            ..SweepRequest::default()
        };
        assert!(launch.resume("s", 3, same).is_ok());
        for other in [
            SweepRequest {
                max_iters: Some(2000),
                ..SweepRequest::default()
            },
            SweepRequest {
                first_iters: Some(6),
                max_trials: Some(5),
                ..SweepRequest::default()
            },
        ] {
            let e = launch.resume("s", 3, other).unwrap_err().to_string();
            assert_eq!(
                e,
                "study `s` (id 3) was started with --first-iters 60 --max-iters 60; resume it \
                 without budget flags or with the same ones"
            );
        }
        // A larger cap goes on past the one that cut the study short.
        let more = SweepRequest {
            max_trials: Some(9),
            budget_minutes: Some(30.0),
            ..SweepRequest::default()
        };
        let r = launch.resume("s", 3, more).unwrap();
        assert_eq!((r.budget_minutes, r.max_trials), (Some(30.0), Some(9)));
        // Stored and read back as JSON.
        let v = serde_json::to_value(&launch).unwrap();
        assert_eq!(serde_json::from_value::<StudyLaunch>(v).unwrap(), launch);
    }
}
