//! The real trial launcher behind the search: each `run` is one trial through the run engine
//! (its own process group, early stop once steady, stored with the study), its events and its
//! end forwarded to the frontend. A resumed sweep first replays the study's finished trials in
//! the order the search asks for them, so nothing finished is run again and the search takes
//! the same decisions as before the interruption.

use crate::app::events::{self, AppEvent, Events, SweepEvent};
use crate::app::trial::forwarding;
use crate::config::{Experiment, LoadOptions};
use crate::domain::study::{Outcome, Overrides};
use crate::domain::trial::{FailureClass, Iteration, StopReason, TrialResult};
use crate::run::trial::{self, TrialOptions};
use crate::store::{Store, TrialFilter, TrialRow, TrialStatus};
use crate::tune::search::{Job, Race, Runner};
use crate::tune::space::as_overrides;
use tokio::sync::watch;

/// The study a runner's trials belong to, and what a second of them costs (GPU-seconds per
/// second for a GPU launch, CPU-seconds for a stand-in).
#[derive(Debug, Clone, Copy)]
pub struct Study {
    pub id: i64,
    pub cost_rate: f64,
}

pub struct TrialRunner<'a> {
    exp: &'a Experiment,
    load: &'a LoadOptions,
    store: &'a Store,
    base: TrialOptions,
    study_id: i64,
    cost_rate: f64,
    rt: tokio::runtime::Runtime,
    cancel: watch::Receiver<bool>,
    /// Set when the study's lease was taken over by another runner: stop as on a cancel.
    lease_lost: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Finished trials of the study not yet replayed, in id order.
    stored: Vec<TrialRow>,
    /// Trials of the study whose runner is gone while their batch job still runs: a resumed
    /// sweep follows the job again instead of submitting the trial again, and cancels the jobs
    /// it does not follow ([`TrialRunner::end_unfollowed`]).
    attachable: Vec<TrialRow>,
    events: Events,
    /// The current settings' global batch (samples per step) at the trials' world: every
    /// trial's step time is scaled to it ([`outcome_of`]).
    reference_batch: Option<f64>,
    /// Whether a trial's configured global batch differed from `reference_batch`.
    batch_differs: std::cell::Cell<bool>,
    pub replayed: usize,
    pub launched: usize,
}

impl<'a> TrialRunner<'a> {
    /// One sweep event to the frontend (from the search loop, outside any runtime).
    pub fn say(&self, ev: SweepEvent) {
        events::emit(&self.events, AppEvent::Sweep(ev));
    }

    pub fn new(
        exp: &'a Experiment,
        load: &'a LoadOptions,
        store: &'a Store,
        base: TrialOptions,
        study: Study,
        cancel: watch::Receiver<bool>,
        events: Events,
    ) -> std::io::Result<TrialRunner<'a>> {
        let study_id = study.id;
        let stored = store
            .list_trials(&TrialFilter {
                study_id: Some(study_id),
                ..TrialFilter::all()
            })
            .map_err(std::io::Error::other)?
            .into_iter()
            .filter(reusable)
            .collect::<Vec<_>>();
        let mut stored = stored;
        stored.sort_by_key(|t| t.id);
        let attachable = store
            .list_trials(&TrialFilter {
                study_id: Some(study_id),
                statuses: vec![TrialStatus::Running],
                ..TrialFilter::all()
            })
            .map_err(std::io::Error::other)?
            .into_iter()
            .filter(|t| t.job.is_some() && !crate::app::interrupted::runner_alive(t))
            .collect();
        let reference_batch = trial::global_batch_of(&crate::run::profile::trial_resolved_json(
            &exp.main_module().values(),
            base.gpus,
        ));
        Ok(TrialRunner {
            exp,
            load,
            store,
            base,
            study_id,
            cost_rate: study.cost_rate,
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            cancel,
            lease_lost: Default::default(),
            stored,
            attachable,
            events,
            reference_batch,
            batch_differs: std::cell::Cell::new(false),
            replayed: 0,
            launched: 0,
        })
    }

    /// The samples every step time was scaled to, when some trial's global batch differed
    /// from the current settings' ([`StudyRecord::per_samples`](crate::domain::study::StudyRecord)).
    pub fn per_samples(&self) -> Option<u64> {
        self.reference_batch
            .filter(|_| self.batch_differs.get())
            .map(|g| g.round() as u64)
    }

    /// [`outcome_of`] a stored trial of this study, noting whether its global batch differs.
    fn outcome_of_row(&self, t: &TrialRow) -> Outcome {
        let configured = trial::trial_global_batch(t);
        if let (Some(want), Some(ran)) = (self.reference_batch, configured)
            && (want - ran).abs() > 1e-9
        {
            self.batch_differs.set(true);
        }
        outcome_of(
            self.store,
            t,
            self.cost_rate,
            self.reference_batch,
            configured,
        )
    }

    /// Stops launching once `flag` is set (the study's lease was lost).
    pub fn stop_when(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.lease_lost = flag;
    }

    pub fn cancelled(&self) -> bool {
        *self.cancel.borrow() || self.lease_lost.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The stored trial of this candidate and length, if the study has one left to replay.
    fn take_stored(&mut self, o: &Overrides, iters: u64) -> Option<TrialRow> {
        let i = self
            .stored
            .iter()
            .position(|t| trial::trial_settings(t) == *o && trial::trial_iters(t) == Some(iters))?;
        Some(self.stored.remove(i))
    }

    /// Cancels the jobs of the study's trials that a resume found running and did not follow
    /// (the search did not ask for them again, or the sweep was stopped first); their trials
    /// become `interrupted`, and say so.
    pub fn end_unfollowed(&mut self) {
        for t in std::mem::take(&mut self.attachable) {
            let Some(job) = &t.job else { continue };
            let Some(sched) = crate::run::launch::scheduler::of_job(job) else {
                continue;
            };
            let _ = sched.cancel(&job.id, std::time::Duration::from_secs(120));
            let mut ended = job.clone();
            ended.state = sched
                .status(&job.id)
                .map_or_else(|_| "CANCELLED".to_string(), |s| s.name);
            ended.reason = None;
            ended.ended_ms = Some(crate::run::launch::batch::unix_ms());
            let _ = self.store.set_trial_job(t.id, &ended);
            let _ = self.store.interrupt_trial(t.id);
            self.say(SweepEvent::Decided {
                line: format!(
                    "trial {} of an earlier run: its {} job {} was not followed again; \
                     cancelled, the trial is interrupted",
                    t.id, job.scheduler, job.id
                ),
            });
        }
    }

    /// A trial of this candidate and length whose job still runs, if any.
    fn take_attachable(&mut self, o: &Overrides, iters: u64) -> Option<TrialRow> {
        let i = self
            .attachable
            .iter()
            .position(|t| trial::trial_settings(t) == *o && trial::trial_iters(t) == Some(iters))?;
        Some(self.attachable.remove(i))
    }
}

/// The figure a trial's line shows: what the search ranks by (the trimmed mean per global
/// batch), as the study's table; none for a trial that failed, whose steps before the failure
/// (an OOM in its first iterations) the search does not use.
fn shown_step_ms(out: &Outcome) -> Option<f64> {
    if out.oom || out.failed.is_some() {
        return None;
    }
    crate::tune::search::step_estimate(&out.step_ms).map(|e| e.value)
}

/// A trial a resumed sweep may reuse: it ended by itself (not interrupted or stopped by the
/// user, whose measurement is incomplete).
fn reusable(t: &TrialRow) -> bool {
    match t.status {
        TrialStatus::Completed | TrialStatus::Failed => true,
        TrialStatus::Stopped => t
            .failure
            .as_ref()
            .is_none_or(|f| f.class != FailureClass::KilledByUser),
        TrialStatus::Running | TrialStatus::Interrupted => false,
    }
}

/// Warm-up iterations a stored trial's summary names.
fn warmup(t: &TrialRow) -> usize {
    t.summary
        .as_ref()
        .and_then(|s| s.get("warmup"))
        .and_then(|w| w.as_u64())
        .unwrap_or(0) as usize
}

/// Seconds a stored trial's launch cost before its first steady sample: start-up and the
/// warm-up iterations, what every fresh launch pays before it measures. `None` when the trial
/// stored no start-up or never got past its warm-up.
pub(super) fn launch_s(t: &TrialRow, iterations: &[Iteration]) -> Option<f64> {
    let warmup = warmup(t);
    let startup_s = t
        .summary
        .as_ref()
        .and_then(|s| s.get("startup_s"))
        .and_then(|v| v.as_f64());
    startup_s.filter(|_| iterations.len() > warmup).map(|s| {
        s + iterations
            .iter()
            .take(warmup)
            .filter_map(|i| i.elapsed_ms)
            .sum::<f64>()
            / 1000.0
    })
}

/// The outcome of a stored trial: its steady iterations (after the warm-up its summary names).
/// Step times are normalised to one amount of work, `reference` samples (the current settings'
/// global batch; else the trial's own configured global batch): a workload that processes only
/// part of its batch per step (the proxies cap the micro batches per step) reports `global
/// batch size` in its log, and a candidate whose global batch differs (TorchTitan's
/// `training.local_batch_size` with `global_batch_size: -1` sets it) runs a different one; each
/// step time is scaled by `reference / samples it processed`, so candidates compare by the time
/// of the same work.
///
/// `configured` is the trial's configured global batch ([`trial::trial_global_batch`]), read by
/// the caller, which also notes whether it differs.
fn outcome_of(
    store: &Store,
    t: &TrialRow,
    cost_rate: f64,
    reference: Option<f64>,
    configured: Option<f64>,
) -> Outcome {
    let target = reference.or(configured);
    let warmup = warmup(t);
    let iterations = store.iterations(t.id).unwrap_or_default();
    let launch_s = launch_s(t, &iterations);
    let wall_step_ms = crate::util::stats::median(
        &iterations
            .iter()
            .skip(warmup)
            .filter_map(|i| i.elapsed_ms)
            .collect::<Vec<f64>>(),
    );
    let step_ms: Vec<f64> = iterations
        .iter()
        .skip(warmup)
        .filter_map(|i| {
            let ms = i.elapsed_ms?;
            let ran = i.global_batch_size.map(|g| g as f64).or(configured);
            let scale = match (target, ran) {
                (Some(want), Some(ran)) if ran > 0.0 => want / ran,
                _ => 1.0,
            };
            Some(ms * scale)
        })
        .collect();
    let class = t.failure.as_ref().map(|f| f.class);
    let oom = matches!(class, Some(FailureClass::Oom | FailureClass::HostOom));
    let failed = match (class, t.status) {
        (_, _) if oom => None,
        (Some(c), TrialStatus::Failed | TrialStatus::Stopped) => Some(c.label().to_string()),
        _ => None,
    };
    Outcome {
        step_ms,
        oom,
        failed,
        peak_memory_bytes: t.peak_mem_gib.map(|g| (g * (1u64 << 30) as f64) as u64),
        peak_memory_kind: t.peak_mem_kind(),
        gpu_seconds: t.wall_s.unwrap_or(0.0) * cost_rate,
        launch_s,
        wall_step_ms,
        raced: t.stop_reason() == Some(StopReason::SlowerThanLeader),
    }
}

/// A trial the runner is about to run: its result is known already (replayed, or the sweep
/// was stopped), or it is launched with these options.
enum Prep {
    Known(Outcome),
    Launch(Box<TrialOptions>),
}

impl TrialRunner<'_> {
    /// Replays a stored trial of the candidate, or builds the options of a new one.
    fn prepare(&mut self, job: &Job) -> Prep {
        let (c, iters) = (job.candidate, job.iters);
        let label = c
            .overrides
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ");
        // What a stored trial of this candidate carries: the `--set` values, then the candidate's.
        let mut expected: Overrides = self
            .base
            .overrides
            .iter()
            .map(|o| (o.key.clone(), o.value.to_json()))
            .collect();
        expected.extend(c.overrides.clone());
        if let Some(t) = self.take_stored(&expected, iters) {
            self.replayed += 1;
            self.say(SweepEvent::Replayed {
                candidate: c.id,
                label,
                iters,
                trial: t.id,
            });
            return Prep::Known(self.outcome_of_row(&t));
        }
        if self.cancelled() {
            return Prep::Known(Outcome {
                failed: Some("the sweep was stopped".into()),
                ..Outcome::default()
            });
        }
        let mut opts = self.base.clone();
        // The command line's `--set` values (in `base`), then the candidate's, which win.
        opts.overrides.retain(|o| !c.overrides.contains_key(&o.key));
        opts.overrides.extend(as_overrides(&c.overrides));
        opts.max_iters = iters;
        // The race's bar is per the study's reference batch, as every figure it compares.
        opts.race = job.race.map(|r| Race {
            per_samples: self.reference_batch,
            ..r
        });
        opts.study_id = Some(self.study_id);
        // A resumed sweep follows the job of this trial that still runs.
        if let Some(t) = self.take_attachable(&expected, iters)
            && let (Some(b), Some(job)) = (opts.launcher.batch_mut(), t.job.clone())
        {
            b.attach = Some(crate::run::launch::batch::AttachTo {
                trial_id: t.id,
                dir: t.trial_dir.clone(),
                job,
            });
        }
        self.say(SweepEvent::Launching {
            candidate: c.id,
            label,
            iters,
        });
        self.launched += 1;
        Prep::Launch(Box::new(opts))
    }

    /// Runs one trial to its end, its events and its end forwarded to the frontend.
    async fn launch(&self, opts: &TrialOptions) -> Result<TrialResult, String> {
        let (exp, load, store) = (self.exp, self.load, self.store);
        let (events, cancel) = (self.events.clone(), self.cancel.clone());
        let r = forwarding(&events, |tx| {
            trial::run_trial(exp, load, store, opts, tx, cancel)
        })
        .await;
        if let Ok(r) = &r {
            let _ = events.send(AppEvent::trial_ended(r.clone())).await;
        }
        r.map_err(|e| e.to_string())
    }

    /// The outcome of a launched trial, as the search sees it.
    fn outcome(&self, result: Result<TrialResult, String>) -> Outcome {
        match result {
            Ok(r) => {
                let out = match r
                    .trial_id
                    .and_then(|id| self.store.trial(id).ok().flatten())
                {
                    Some(row) => self.outcome_of_row(&row),
                    None => Outcome {
                        failed: Some("the trial was not stored".into()),
                        ..Outcome::default()
                    },
                };
                self.say(SweepEvent::Measured {
                    trial: r.trial_id,
                    status: r.status,
                    failure: r.failure.as_ref().map(|f| f.class.label().to_string()),
                    step_ms: shown_step_ms(&out),
                    peak_gib: r.summary.peak_mem_gib,
                });
                out
            }
            Err(e) => {
                self.say(SweepEvent::CouldNotRun { why: e.clone() });
                Outcome {
                    failed: Some(e),
                    ..Outcome::default()
                }
            }
        }
    }
}

impl Runner for TrialRunner<'_> {
    fn stopped(&self) -> bool {
        self.cancelled()
    }

    fn decided(&mut self, line: &str) {
        self.say(SweepEvent::Decided {
            line: line.to_string(),
        });
    }

    fn run(&mut self, job: &Job) -> Outcome {
        match self.prepare(job) {
            Prep::Known(o) => o,
            Prep::Launch(opts) => {
                let result = self.rt.block_on(self.launch(&opts));
                self.outcome(result)
            }
        }
    }

    /// The batch's new trials run at once (concurrent Slurm jobs, placed by the scheduler).
    fn run_many(&mut self, jobs: &[Job]) -> Vec<Outcome> {
        let preps: Vec<Prep> = jobs.iter().map(|j| self.prepare(j)).collect();
        let launches: Vec<&TrialOptions> = preps
            .iter()
            .filter_map(|p| match p {
                Prep::Launch(o) => Some(o.as_ref()),
                Prep::Known(_) => None,
            })
            .collect();
        let this = &*self;
        let mut results = this
            .rt
            .block_on(futures_util::future::join_all(
                launches.iter().map(|o| this.launch(o)),
            ))
            .into_iter();
        preps
            .into_iter()
            .map(|p| match p {
                Prep::Known(o) => o,
                Prep::Launch(_) => match results.next() {
                    Some(r) => self.outcome(r),
                    None => Outcome::default(),
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::trial::Iteration;
    use crate::store::{NewTrial, TrialEnd};
    use std::path::Path;

    #[test]
    fn a_failed_trial_shows_no_step_time() {
        let steps = vec![480.0, 483.2, 481.0, 482.5, 479.9, 483.0];
        let ok = Outcome {
            step_ms: steps.clone(),
            ..Outcome::default()
        };
        let shown = shown_step_ms(&ok).expect("a completed trial shows its figure");
        assert!((479.0..484.0).contains(&shown), "{shown}");
        let oom = Outcome {
            step_ms: steps.clone(),
            oom: true,
            ..Outcome::default()
        };
        assert_eq!(shown_step_ms(&oom), None);
        let crashed = Outcome {
            step_ms: steps,
            failed: Some("the workload ended (exit 1)".into()),
            ..Outcome::default()
        };
        assert_eq!(shown_step_ms(&crashed), None);
    }

    /// A completed trial in `dir` whose `resolved.json` configures `global` samples a step: two
    /// warm-up iterations, then steady ones of `ms`, each logging `ran` samples when given.
    fn trial(store: &Store, dir: &Path, global: u64, ms: f64, ran: Option<u64>) -> TrialRow {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("resolved.json"),
            serde_json::json!({"global_batch_size": global}).to_string(),
        )
        .unwrap();
        let id = store
            .insert_trial(&NewTrial {
                config_path: "x.yaml".into(),
                config_hash: format!("{dir:?}"),
                trial_dir: dir.to_path_buf(),
                ..NewTrial::default()
            })
            .unwrap();
        let iters: Vec<Iteration> = (0..8)
            .map(|i| Iteration {
                iteration: i + 1,
                elapsed_ms: Some(if i < 2 { 900.0 } else { ms }),
                global_batch_size: ran,
                ..Default::default()
            })
            .collect();
        store.add_iterations(id, &iters).unwrap();
        let mut end = TrialEnd::new(TrialStatus::Completed, 10.0);
        end.summary = Some(serde_json::json!({"warmup": 2}));
        store.finish_trial(id, &end).unwrap();
        store.trial(id).unwrap().unwrap()
    }

    #[test]
    fn step_times_are_scaled_to_the_current_settings_global_batch() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open_in_memory().unwrap();
        // Step times of a stored trial scaled to `reference` samples.
        let steps = |t: &TrialRow, reference: Option<f64>| {
            outcome_of(&store, t, 1.0, reference, trial::trial_global_batch(t)).step_ms
        };
        // A TorchTitan candidate with local batch 1 (global batch 1 at DP 1) against current
        // settings of 8: its 10 ms steps do an eighth of the work, 80 ms for the same 8 samples.
        let small = trial(&store, &d.path().join("1"), 1, 10.0, None);
        assert_eq!(steps(&small, Some(8.0)), vec![80.0; 6]);
        // What an iteration costs stays its wall time.
        let wall = outcome_of(
            &store,
            &small,
            1.0,
            Some(8.0),
            trial::trial_global_batch(&small),
        );
        assert_eq!(wall.wall_step_ms, Some(10.0));
        // Without a reference, the trial's own configured batch (as before): 10 ms.
        assert_eq!(steps(&small, None), vec![10.0; 6]);
        // A proxy that logs 2 of its configured 8 samples a step is scaled to the 8.
        let capped = trial(&store, &d.path().join("2"), 8, 30.0, Some(2));
        assert_eq!(steps(&capped, Some(8.0)), vec![120.0; 6]);
        assert_eq!(steps(&capped, None), vec![120.0; 6]);
        // A stored trial says whether its race stopped it.
        assert!(!outcome_of(&store, &small, 1.0, None, None).raced);
        let mut raced = small.clone();
        raced.summary = Some(serde_json::json!({"warmup": 2, "stop_reason": "slower-than-leader"}));
        assert!(outcome_of(&store, &raced, 1.0, None, None).raced);
        // A Megatron trial at the reference batch is unchanged.
        let same = trial(&store, &d.path().join("3"), 8, 50.0, Some(8));
        assert_eq!(steps(&same, Some(8.0)), vec![50.0; 6]);
    }
}
