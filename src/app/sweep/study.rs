//! One sweep's study in four steps, each a method: [`prepare`] (open or resume it, take its lease,
//! plan the trials, judge every candidate's legality), [`Prepared::calibrate`] (the memory
//! model on stored peaks, each candidate's forecast), [`Study::run`] (the search with real
//! trials) and [`Study::record`] (the study's record, stored). [`super::run`] is the four in a
//! row.

use super::lease::HeldLease;
use super::request::{FIRST_ITERS, MAX_ITERS, SweepRequest};
use super::runner::{self, TrialRunner};
use super::setup::{
    Forecasts, SweepOutcome, TrialSetup, forecasts, gib, gpu_facts, measurable, pipeline_stages,
    resume_command, set_up,
};
use super::{effects, history, links, open};
use crate::app::events::{self, AppEvent, Events, SweepEvent};
use crate::app::trial::Cancel;
use crate::app::{AppError, Session};
use crate::domain::evidence::Basis;
use crate::domain::study::{Candidate, CarriedLinks, LinkScale, StudyRecord, VerdictKind};
use crate::store::Store;
use crate::tune::layout::{cost, cost::Machine, frame};
use crate::tune::memory::Calibration;
use crate::tune::search::prior::layout::{StepPrior, measured_links};
use crate::tune::search::{self, SearchConfig, SearchResult};
use crate::tune::space::{self, Space};
use crate::tune::study::{RanOn, record};
use std::collections::BTreeMap;

/// A study ready to calibrate: opened, leased, its trials planned and its candidates judged.
pub(super) struct Prepared<'s> {
    session: &'s Session,
    store: &'s Store,
    req: SweepRequest,
    space: Space,
    t: TrialSetup,
    id: i64,
    name: String,
    held: HeldLease<'s>,
    resume: String,
    cands: Vec<Candidate>,
    legal: Vec<Result<(), space::Illegal>>,
    legal_cands: Vec<Candidate>,
    capacity: Option<f64>,
    basis: Basis,
    /// The search skips a smaller batch once a larger one fits: what fits a GPU is not a CPU
    /// stand-in's to say.
    batch_rule: bool,
    history: history::LaunchHistory,
    knob_effects: search::effects::Effects,
    /// A layout sweep's node, for the layout prior (None: no layout space, or no GPU model).
    machine: Option<Machine>,
    /// The link scale of the workspace's latest layout study on the same node ([`links`]).
    carried_links: Option<CarriedLinks>,
}

/// A study ready to run: prepared, with the memory model's forecasts.
pub(super) struct Study<'s> {
    p: Prepared<'s>,
    f: Forecasts,
}

/// What the search of a study left: its result and what the runner counted.
pub(super) struct Ran {
    result: SearchResult,
    replayed: usize,
    launched: usize,
    per_samples: Option<u64>,
    cancelled: bool,
}

/// Opens (or resumes) the study a request names, takes its lease and plans its trials; refuses
/// a space the experiment cannot use and settings the profile cannot measure.
pub(super) fn prepare<'s>(
    session: &'s Session,
    store: &'s Store,
    exp: crate::config::Experiment,
    req: &SweepRequest,
) -> Result<Prepared<'s>, AppError> {
    let opened = open::open(session, store, &exp, req)?;
    // One runner per study: a resumed study's lease is taken before anything is written or
    // launched; a new one's as soon as it exists.
    let held = opened
        .id
        .map(|id| HeldLease::take(store, id, &opened.name))
        .transpose()?;
    let mut req = opened.req.clone();
    let space = opened.space.clone();
    if let Some(why) = space.not_applicable(&exp) {
        return Err(AppError::Failed(format!("{}: {why}", session.display())));
    }
    let mut t = set_up(session, exp, &req)?;
    let (capacity, gpu_name) = gpu_facts(session, req.capacity_gib);
    let (space, machine, rules) = layouts(space, &t, gpu_name.as_deref())
        .map_err(|why| AppError::Failed(format!("{}: {why}", session.display())))?;
    measurable(session, &mut t, &space, &req)?;
    let prof = t.plan.profile.name.clone();
    req.trial.profile = Some(prof.clone());
    let launch = open::StudyLaunch::of(&req, &prof);
    let id = open::create(store, &t.exp, &opened, &launch)?;
    let name = opened.name.clone();
    let held = HeldLease::keep_or_take(held, store, id, &name)?;
    let resume = resume_command(session, &name, &req);
    let cands = space.candidates_with_baseline(&t.exp);
    // Legal at the trials' world: a candidate Megatron would refuse on it never launches.
    let legal = space::legality(&t.exp, &t.job, &cands, rules);
    let legal_cands: Vec<Candidate> = cands
        .iter()
        .zip(&legal)
        .filter(|(_, l)| l.is_ok())
        .map(|(c, _)| c.clone())
        .collect();
    Ok(Prepared {
        machine,
        basis: basis_of(&t, gpu_name.clone()),
        batch_rule: req.batch_rule && !t.plan.profile.capabilities.stand_in,
        history: history::launch_history(store, &t.exp.path, &prof),
        carried_links: match (&machine, &gpu_name) {
            (Some(m), Some(gpu)) if req.carried_effects => links::carried(
                store,
                links::Node {
                    profile: &prof,
                    gpu,
                    gpus: t.base.gpus,
                    gpus_per_node: m.gpus_per_node,
                },
                &name,
            ),
            _ => None,
        },
        knob_effects: if req.carried_effects {
            effects::knob_effects(store, &prof, &name)
        } else {
            Default::default()
        },
        session,
        store,
        req,
        space,
        t,
        id,
        name,
        held,
        resume,
        cands,
        legal,
        legal_cands,
        capacity,
    })
}

impl<'s> Prepared<'s> {
    /// The memory model calibrated on this experiment's stored peaks, and each candidate's
    /// forecast.
    pub(super) fn calibrate(self) -> Study<'s> {
        let f = forecasts(self.store, &self.t, &self.cands, self.batch_rule);
        Study { p: self, f }
    }
}

impl Study<'_> {
    /// The memory capacity the search and the record go by: none while the model is off.
    fn capacity(&self) -> Option<f64> {
        self.p.capacity.filter(|_| self.f.off.is_none())
    }

    fn started(&self) -> SweepEvent {
        let (p, f) = (&self.p, &self.f);
        SweepEvent::Started {
            study: p.name.clone(),
            space: p.space.name.clone(),
            candidates: p.cands.len(),
            legal: p.legal_cands.len(),
            profile: p.t.plan.profile.name.clone(),
            gpus: p.t.base.gpus,
            capacity_gib: p.capacity.map(gib),
            calibration: (!f.points.is_empty())
                .then(|| (f.points.len(), f.cal.scale, gib(f.cal.offset_bytes))),
            memory_model_off: f.off.clone(),
            basis: p.basis.clone(),
            unmodeled: p.t.unmodeled.clone(),
            launch_history: Box::new(p.history.clone()),
        }
    }

    fn search_config(&self, cost_unit: &'static str) -> SearchConfig {
        let (p, req) = (&self.p, &self.p.req);
        let (first, most) = (
            req.first_iters.unwrap_or(FIRST_ITERS),
            req.max_iters.unwrap_or(MAX_ITERS),
        );
        let knob_effects = &p.knob_effects;
        SearchConfig {
            cost_unit,
            launch_s_prior: p.history.launch_s.map(|l| l.0),
            launch_cv: p.history.launch_cv.map(|c| c.0),
            first_iters: first,
            max_iters: most.max(first),
            max_trials: req.max_trials,
            budget_gpu_seconds: req.budget_minutes.map(|m| m * 60.0),
            capacity_bytes: self.capacity(),
            headroom: req.headroom,
            predictions_calibrated: !self.f.points.is_empty(),
            parallel: req.parallel.max(1),
            effects: (knob_effects.studies() > 0).then(|| knob_effects.clone()),
            layout_prior: self.layout_prior(),
            carried_links: p.carried_links.clone(),
            pipeline_stages: p
                .legal_cands
                .iter()
                .filter(|_| p.batch_rule)
                .filter_map(|c| Some((c.id, pipeline_stages(self.f.params.get(&c.id)?)?)))
                .collect(),
            ..SearchConfig::default()
        }
    }

    /// The links' scale the study's own measured layouts set apart, for later layout studies
    /// on the same node; none on a CPU stand-in (its links are no GPU node's).
    fn measured_links(&self, rec: &StudyRecord) -> Option<LinkScale> {
        let m = self.p.machine.as_ref()?;
        if !self.p.basis.is_gpu_evidence() || !rec.unmodeled.is_empty() {
            return None;
        }
        let prior = self.layout_prior();
        let points: Vec<_> = rec
            .candidates
            .iter()
            .filter(|c| c.verdict != VerdictKind::Oom)
            .filter_map(|c| Some((*prior.get(&c.id)?, c.step_ms?)))
            .collect();
        measured_links(&points, m.gpus_per_node)
    }

    /// Each legal candidate's predicted step on a layout sweep (empty otherwise).
    fn layout_prior(&self) -> BTreeMap<usize, StepPrior> {
        let (p, f) = (&self.p, &self.f);
        let Some(m) = &p.machine else {
            return BTreeMap::new();
        };
        p.legal_cands
            .iter()
            .filter_map(|c| {
                let params = frame::params_of(f.params.get(&c.id)?, p.t.base.gpus);
                Some((c.id, cost::step_prior(&params, p.t.base.gpus, m)?))
            })
            .collect()
    }

    /// The search over the legal candidates with real trials (blocking: call it from a thread
    /// that is not inside a tokio runtime). `cancel` stops the trial in flight and the search;
    /// a lease taken over by another runner ends it with an error.
    pub(super) fn run(&self, events: &Events, cancel: Cancel) -> Result<Ran, AppError> {
        let p = &self.p;
        let (cost_rate, cost_unit) = p.t.plan.cost_per_second();
        events::emit(events, AppEvent::Sweep(self.started()));
        let mut base = p.t.base.clone();
        base.study_id = Some(p.id);
        // Trials resolve their own environment from the session's (`materialise`).
        let mut runner = TrialRunner::new(
            &p.t.exp,
            &p.session.load,
            p.store,
            base,
            runner::Study {
                id: p.id,
                cost_rate,
            },
            cancel,
            events.clone(),
        )?;
        runner.stop_when(p.held.lost_flag());
        if let Some(line) = p.held.takeover() {
            runner.say(SweepEvent::Decided { line });
        }
        let result = search::search(
            &p.space.knobs,
            &p.legal_cands,
            &mut runner,
            &self.search_config(cost_unit),
            &|c: &Candidate| self.f.predicted.get(&c.id).copied(),
        );
        // A job of this study whose trial the search did not follow again is cancelled: a
        // resume follows a running job or ends it, never leaves it beside a new one.
        runner.end_unfollowed();
        if let Some(e) = p.held.lost(&p.name) {
            return Err(e);
        }
        if result.calibration.points > 0 && !runner.cancelled() {
            runner.say(recalibrated(&result.calibration));
        }
        Ok(Ran {
            cancelled: runner.cancelled(),
            per_samples: runner.per_samples(),
            replayed: runner.replayed,
            launched: runner.launched,
            result,
        })
    }

    /// The study's record from what its search left, stored with the study; none when the
    /// search was cancelled (the study resumes).
    pub(super) fn record(&self, ran: Ran) -> Result<SweepOutcome, AppError> {
        let p = &self.p;
        let mut outcome = SweepOutcome {
            study: p.name.clone(),
            id: p.id,
            record: None,
            replayed: ran.replayed,
            launched: ran.launched,
            resume: p.resume.clone(),
            cost_unit: p.t.plan.cost_per_second().1,
        };
        if ran.cancelled {
            return Ok(outcome);
        }
        let on = RanOn {
            config: &p.t.exp.path,
            profile: &p.t.plan.profile.name,
            gpus: p.t.base.gpus,
            capacity: self.capacity(),
        };
        let mut rec = record(&p.space, on, &p.cands, &p.legal, &ran.result);
        rec.basis = Some(p.basis.clone());
        rec.unmodeled = p.t.unmodeled.clone();
        rec.per_samples = ran.per_samples;
        rec.memory_error = crate::tune::study::memory_check(&rec).mean_error();
        rec.link_scale = self.measured_links(&rec);
        p.store
            .set_study_notes(p.id, serde_json::to_string(&rec).ok().as_deref())?;
        outcome.record = Some(rec);
        Ok(outcome)
    }
}

/// A layout space made for the trials' world and the experiment's model (a resumed study's
/// space is already made), the node its prior predicts for (the GPU the trials run on, by name
/// in the hardware table; None when it is not there: no prior), and the lint rules a
/// candidate breaks even where the experiment's own settings break them too (a layout's).
/// A TorchTitan config with no global batch to hold is refused with the reason.
fn layouts(
    space: Space,
    t: &TrialSetup,
    gpu: Option<&str>,
) -> Result<(Space, Option<Machine>, &'static [&'static str]), String> {
    if space.name != space::LAYOUT_SPACE {
        return Ok((space, None, &[]));
    }
    let world = t.base.gpus;
    let node = t
        .plan
        .placement
        .world
        .and_then(|w| w.gpus_per_node())
        .unwrap_or(t.plan.placement.per_node)
        .max(1);
    let values = t.exp.main_module().values();
    let f = frame::of_config(&values, world, node)?;
    let machine = gpu
        .and_then(crate::telemetry::hardware::lookup)
        .map(|g| Machine::of(g, f.bounds.gpus_per_node));
    let space = if space.is_unfilled() {
        Space::of_layouts(&f.bounds, &f.current, &f.frame)
    } else {
        space
    };
    Ok((space, machine, f.frame.rules()))
}

/// What the sweep's figures are evidence of: the plan's basis, naming the GPU measured on this
/// node when the plan could not.
fn basis_of(t: &TrialSetup, gpu_name: Option<String>) -> Basis {
    match &t.plan.basis {
        Basis::Measured { profile, gpu: None } if t.plan.launcher.batch().is_none() => {
            Basis::Measured {
                profile: profile.clone(),
                gpu: gpu_name,
            }
        }
        b => b.clone(),
    }
}

/// The memory model recalibrated on the study's own peaks, as the frontend is told.
fn recalibrated(c: &Calibration) -> SweepEvent {
    SweepEvent::Recalibrated {
        points: c.points,
        scale: c.scale,
        offset_gib: gib(c.offset_bytes),
    }
}
