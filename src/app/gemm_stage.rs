//! One HipBLASLt tuning stage as a use case: the stage's plan on top of a prepared trial (the
//! same defaults and lint gate as any trial; a profile that never calls hipBLASLt is refused by
//! the plan), run through the run engine, and what the stage produced, in one summary both
//! frontends show.

use super::events::{AppEvent, Events, StageEvent};
use super::trial::{Cancel, PreparedTrial, TrialRequest, forwarding};
use super::{AppError, Session};
use crate::gemm::runner::{self, StageRun};
use crate::gemm::stage::{self, StageContext, StagePlan};
use crate::gemm::status::{Comparison, TuneLayout};
use crate::gemm::{dump, results};
use crate::store::Store;
use crate::util::paths::display_path;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The profile a stage runs with when the request names none.
pub const DEFAULT_STAGE_PROFILE: &str = "primus";

#[derive(Debug, Clone)]
pub struct StageRequest {
    /// 1 (dump shapes), 2 (tune offline), 3 (tuned vs untuned).
    pub stage: u8,
    pub trial: TrialRequest,
    /// The Python that runs Primus' offline tuning script (stage 2 outside its hook).
    pub python: String,
    /// Stage 3: this result file instead of the experiment's.
    pub override_file: Option<PathBuf>,
}

impl StageRequest {
    pub fn new(stage: u8) -> StageRequest {
        StageRequest {
            stage,
            trial: TrialRequest::default(),
            python: "python3".into(),
            override_file: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PreparedStage {
    pub trial: PreparedTrial,
    pub plan: StagePlan,
    pub layout: TuneLayout,
    /// The request named the trial length (stage 1's short default does not apply).
    iters_given: bool,
}

/// What a stage produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum StageSummary {
    Dumped {
        unique_shapes: usize,
        gemm_lines: u64,
        dir: PathBuf,
    },
    NothingDumped {
        dir: PathBuf,
    },
    Tuned {
        entries: usize,
        file: PathBuf,
        git_version: String,
    },
    NoResult {
        why: String,
    },
    Compared(Comparison),
    NotCompared,
}

impl fmt::Display for StageSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StageSummary::Dumped {
                unique_shapes, dir, ..
            } => write!(
                f,
                "stage 1: {unique_shapes} unique GEMM shapes dumped to {}; next: primus-tune gemm-tune stage 2",
                display_path(dir)
            ),
            StageSummary::NothingDumped { dir } => write!(
                f,
                "stage 1: no GEMM shape was dumped to {} — the workload did not call hipBLASLt, or it ignored HIPBLASLT_LOG_FILE",
                display_path(dir)
            ),
            StageSummary::Tuned {
                entries,
                file,
                git_version,
            } => write!(
                f,
                "stage 2: {entries} GEMMs tuned into {} (hipBLASLt {git_version}); next: primus-tune gemm-tune stage 3",
                display_path(file)
            ),
            StageSummary::NoResult { why } => write!(f, "stage 2: no usable result file: {why}"),
            StageSummary::Compared(c) => write!(
                f,
                "stage 3: baseline {:.1} ms, tuned {:.1} ms per step: {}",
                c.baseline_ms,
                c.tuned_ms,
                stage::comparison_text(c.change, c.change_ci)
            ),
            StageSummary::NotCompared => {
                write!(f, "stage 3: no comparison (a trial did not complete)")
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct StageOutcome {
    pub run: StageRun,
    pub summary: StageSummary,
    pub plan: StagePlan,
}

impl StageOutcome {
    pub fn completed(&self) -> bool {
        self.run.completed()
    }
}

/// Prepare a stage: the trial (profile `primus` unless named), then the stage's plan.
pub fn prepare(session: &Session, req: &StageRequest) -> Result<PreparedStage, AppError> {
    let mut treq = req.trial.clone();
    treq.profile
        .get_or_insert_with(|| DEFAULT_STAGE_PROFILE.into());
    let trial = super::trial::prepare(session, &treq)?;
    let layout = TuneLayout::new(&trial.exp.primus_root, &trial.exp.path, &session.load.env);
    let plan = stage::plan(
        req.stage,
        &StageContext {
            layout: &layout,
            primus_root: &trial.exp.primus_root,
            profile: &trial.options.profile.name,
            hipblaslt: trial.options.profile.capabilities.hipblaslt,
            gpus: trial.options.gpus,
            env: &session.load.env,
            python: &req.python,
            override_file: req.override_file.as_deref(),
        },
    )?;
    Ok(PreparedStage {
        trial,
        plan,
        layout,
        iters_given: req.trial.max_iters.is_some(),
    })
}

/// What the stage left on disk, read back.
fn summarize(run: &StageRun, layout: &TuneLayout) -> StageSummary {
    match run.stage {
        1 => match dump::read_dumps(&layout.shapes_dir)
            .ok()
            .filter(|d| d.gemm_lines > 0)
        {
            Some(d) => StageSummary::Dumped {
                unique_shapes: d.shapes.len(),
                gemm_lines: d.gemm_lines,
                dir: layout.shapes_dir.clone(),
            },
            None => StageSummary::NothingDumped {
                dir: layout.shapes_dir.clone(),
            },
        },
        2 => match results::read(&layout.result_file) {
            Ok(r) => StageSummary::Tuned {
                entries: r.entries.len(),
                file: layout.result_file.clone(),
                git_version: r.git_version,
            },
            Err(e) => StageSummary::NoResult { why: e.to_string() },
        },
        _ => run
            .comparison
            .clone()
            .map_or(StageSummary::NotCompared, StageSummary::Compared),
    }
}

/// Tuned GEMMs in a result file being written: its CSV header lines (one per entry).
fn count_entries(text: &str) -> usize {
    text.lines()
        .filter(|l| l.trim_start().starts_with("transA,"))
        .count()
}

/// Stage 2 prints no iterations: the result file growing is its progress, polled every 2 s.
async fn watch_results(file: PathBuf, shapes: usize, events: Events) {
    let mut last = usize::MAX;
    loop {
        let n = tokio::fs::read_to_string(&file)
            .await
            .map(|t| count_entries(&t))
            .unwrap_or(0);
        if n != last {
            last = n;
            let _ = events
                .send(AppEvent::Stage(StageEvent::Tuned { done: n, shapes }))
                .await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Runs a prepared stage; its trials' events, its progress and each trial's end go to `events`.
pub async fn run(
    session: &Session,
    p: &PreparedStage,
    store: &Store,
    events: &Events,
    cancel: Cancel,
) -> Result<StageOutcome, AppError> {
    let plan = &p.plan;
    let _ = events
        .send(AppEvent::Stage(StageEvent::Started {
            stage: plan.stage,
            override_file: plan.override_file.clone(),
            shapes: plan.shapes,
        }))
        .await;
    let work = forwarding(events, |tx| {
        let trial = runner::StageTrial {
            exp: &p.trial.exp,
            load: &session.load,
            base: &p.trial.options,
            layout: &p.layout,
            iters_given: p.iters_given,
        };
        runner::run_stage(trial, store, plan, tx, cancel)
    });
    let watcher = (plan.stage == 2).then(|| {
        tokio::spawn(watch_results(
            p.layout.result_file.clone(),
            plan.shapes,
            events.clone(),
        ))
    });
    let run = work.await;
    if let Some(w) = watcher {
        w.abort();
    }
    let run = run?;
    if let Some(file) = &run.set_aside {
        let _ = events
            .send(AppEvent::Stage(StageEvent::SetAside { file: file.clone() }))
            .await;
    }
    for t in &run.trials {
        let _ = events.send(AppEvent::trial_ended(t.clone())).await;
    }
    Ok(StageOutcome {
        summary: summarize(&run, &p.layout),
        run,
        plan: plan.clone(),
    })
}

/// [`run`] on a runtime of the calling thread, with the session's store.
pub fn run_blocking(
    session: &Session,
    p: &PreparedStage,
    events: &Events,
    cancel: Cancel,
) -> Result<StageOutcome, AppError> {
    let store = session.store()?;
    super::trial::runtime()?.block_on(run(session, p, &store, events, cancel))
}

/// The trial options as the stage will run them (for a progress display that needs the
/// length or whether it trains).
pub fn shown_options(p: &PreparedStage) -> crate::run::trial::TrialOptions {
    let mut o = p.trial.options.clone();
    runner::apply_plan(&mut o, &p.plan, &p.trial.exp.primus_root, p.iters_given);
    o
}
