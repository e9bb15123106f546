//! The parallel layouts of an experiment on a world: every candidate of the layout space
//! ([`crate::tune::layout`]), judged by the lint as a sweep judges its candidates (the rule ids
//! of what makes one illegal), and for each legal one the memory model's forecast and the
//! prior's predicted step. Nothing here is measured: the forecasts are the memory model's, the
//! steps the prior's, each said so.

use super::super::{AppError, Session};
use crate::config::diag::Diagnostic;
use crate::domain::study::Candidate;
use crate::megatron::World;
use crate::tune::layout::cost::{self, Machine, Predicted};
use crate::tune::layout::frame::{self, Frame, Framed};
use crate::tune::layout::{self, Bounds, Layout};
use crate::tune::{memory, space};
use serde::Serialize;

/// What `layouts` is asked for.
#[derive(Debug, Clone, Default)]
pub struct LayoutsRequest {
    /// The GPU model to predict for (default: this machine's, else the experiment's path).
    pub gpu: Option<String>,
    /// GPUs a node holds (default: the world's source, else 8).
    pub gpus_per_node: Option<u64>,
}

/// One legal layout with its forecasts.
#[derive(Debug, Clone, Serialize)]
pub struct LegalLayout {
    pub layout: Layout,
    pub label: String,
    pub dp: u64,
    /// The experiment's own layout.
    pub current: bool,
    /// The memory model's peak for the first stage (uncalibrated), bytes; or why none.
    pub memory_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_error: Option<String>,
    /// Whether the forecast fits the GPU's memory (None: no capacity known, or no forecast).
    pub fits: Option<bool>,
    /// The prior's step (None: no GPU model to predict for, or a size it needs is missing).
    pub predicted: Option<Predicted>,
    /// The predicted step over the current layout's.
    pub relative: Option<f64>,
}

/// One illegal layout and the lint rules it breaks.
#[derive(Debug, Clone, Serialize)]
pub struct IllegalLayout {
    pub layout: Layout,
    pub label: String,
    /// (rule id, message), as lint says them.
    pub rules: Vec<(String, String)>,
}

/// The layouts of an experiment on a world.
#[derive(Debug, Clone, Serialize)]
pub struct LayoutsView {
    /// `megatron` or `torchtitan`: whose keys the layouts are written as.
    pub backend: String,
    pub world: u64,
    /// Where the world came from, in words.
    pub world_source: String,
    pub bounds: Bounds,
    /// The GPU model predicted for and how it was found; its memory in bytes.
    pub gpu: Option<(String, String)>,
    pub capacity_bytes: Option<f64>,
    pub machine: Option<Machine>,
    /// Legal layouts: those that fit first, then by predicted step (else by memory).
    pub legal: Vec<LegalLayout>,
    pub illegal: Vec<IllegalLayout>,
    /// What every figure here is: the memory model's forecast and the prior's prediction.
    pub basis: String,
}

/// The layouts of the session's experiment on its world.
pub fn layouts(session: &Session, req: &LayoutsRequest) -> Result<LayoutsView, AppError> {
    let exp = session.load()?;
    let module = exp.main_module();
    let values = module.values();
    let world = world_of(session)?;
    let gpu = super::recommend::gpu(session, req.gpu.as_deref())?;
    let (node, assumed) = match req.gpus_per_node {
        Some(n) => (n, false),
        None => world.node(),
    };
    let Framed {
        mut bounds,
        current,
        frame,
        ..
    } = frame::of_config(&values, world.gpus, node)
        .map_err(|why| AppError::Usage(format!("{}: {why}", session.display())))?;
    // One GPU is one node whatever a node holds: nothing was assumed that matters.
    if assumed && world.gpus > 1 {
        bounds.notes.push(format!(
            "{node} GPUs a node assumed: {} does not say (--gpus-per-node N to give it)",
            world.source_text()
        ));
    }
    let all = layout::space(&bounds, &current);
    let machine = gpu
        .as_ref()
        .map(|(g, _)| Machine::of(g, bounds.gpus_per_node));
    let capacity = gpu.as_ref().map(|(g, _)| g.vram_gib * (1u64 << 30) as f64);
    let (legal, illegal) = judge(session, &exp, &all, &frame, &world);
    let mut legal: Vec<LegalLayout> = legal
        .into_iter()
        .map(|(l, e)| forecast(l, &e, &current, world.gpus, machine.as_ref(), capacity))
        .collect();
    relative_to_current(&mut legal);
    order(&mut legal);
    Ok(LayoutsView {
        backend: frame.backend().to_string(),
        world: world.gpus,
        world_source: world.to_string(),
        bounds,
        gpu: gpu.map(|(g, how)| (g.name.clone(), how)),
        capacity_bytes: capacity,
        machine,
        legal,
        illegal,
        basis: basis(&frame),
    })
}

/// What every figure of the view is.
fn basis(frame: &Frame) -> String {
    let mut b = String::from(
        "prediction: memory from the memory model (uncalibrated), step from the layout prior \
         (compute at the GPU's peak × 45 %, assumed link speeds, a fitted fixed cost per layer \
         and micro batch, the 1F1B bubble); no layout here was measured",
    );
    if let Frame::Titan(_) = frame {
        b.push_str(
            "; TorchTitan's FSDP traffic is counted as Megatron's distributed optimizer's (one \
             reduce-scatter and one all-gather a step), so the backward pass's re-gathering (torchtitan's default without PP) is \
             not counted",
        );
    }
    b
}

/// The world the layouts tile: the session's, as lint and the checklist see it (`--gpus`, the
/// launcher's variables, the defaults file, else the GPUs detected here); a usage error
/// without one (a layout's legality depends on it).
fn world_of(session: &Session) -> Result<World, AppError> {
    session
        .load
        .world
        .filter(World::builds_groups)
        .ok_or_else(|| {
            AppError::Usage(
                "layouts need the world they tile: give --gpus N (or GPUS_PER_NODE and NNODES)"
                    .into(),
            )
        })
}

/// Splits the layouts into legal ones (with the experiment they load as) and illegal ones
/// (with the lint's errors), linted at `world`.
fn judge(
    session: &Session,
    exp: &crate::config::Experiment,
    all: &[Layout],
    frame: &Frame,
    world: &World,
) -> (Vec<(Layout, crate::config::Experiment)>, Vec<IllegalLayout>) {
    let cands: Vec<Candidate> = all
        .iter()
        .enumerate()
        .map(|(id, l)| Candidate {
            id,
            overrides: frame.overrides(l, world.gpus),
            ranks: Vec::new(),
            baseline: id == 0,
        })
        .collect();
    let mut opts = session.load.clone();
    opts.world = Some(*world);
    let mut legal = Vec::new();
    let mut illegal = Vec::new();
    for (l, j) in all
        .iter()
        .zip(space::judge(exp, &opts, &cands, frame.rules()))
    {
        match j {
            Ok(e) => legal.push((*l, e)),
            Err(found) => illegal.push(IllegalLayout {
                layout: *l,
                label: l.label(),
                rules: rules_of(found),
            }),
        }
    }
    (legal, illegal)
}

fn rules_of(found: Vec<Diagnostic>) -> Vec<(String, String)> {
    found
        .into_iter()
        .map(|d| (d.code.to_string(), d.message))
        .collect()
}

/// A legal layout's memory forecast and predicted step.
fn forecast(
    l: Layout,
    exp: &crate::config::Experiment,
    current: &Layout,
    world: u64,
    machine: Option<&Machine>,
    capacity: Option<f64>,
) -> LegalLayout {
    let values = exp.main_module().values();
    let params = frame::params_of(&values, world);
    let (memory_bytes, memory_error) = match memory::estimate(&values, world) {
        Ok(m) => (Some(m.total_bytes), None),
        Err(e) => (None, Some(e.to_string())),
    };
    LegalLayout {
        layout: l,
        label: l.label(),
        dp: l.dp(world).unwrap_or(1),
        current: l == *current,
        fits: memory_bytes.zip(capacity).map(|(m, c)| m <= c),
        memory_bytes,
        memory_error,
        predicted: machine.and_then(|m| cost::predict(&params, &l, world, m)),
        relative: None,
    }
}

/// Each predicted step over the current layout's (when both are known).
fn relative_to_current(legal: &mut [LegalLayout]) {
    let base = legal
        .iter()
        .find(|l| l.current)
        .and_then(|l| l.predicted)
        .map(|p| p.step_s);
    for l in legal.iter_mut() {
        l.relative = base.zip(l.predicted).map(|(b, p)| p.step_s / b);
    }
}

/// Those that fit (or are not known not to) first, then by predicted step, then by memory.
fn order(legal: &mut [LegalLayout]) {
    let key = |l: &LegalLayout| {
        (
            l.fits == Some(false),
            l.predicted.map_or(f64::INFINITY, |p| p.step_s),
            l.memory_bytes.unwrap_or(f64::INFINITY),
        )
    };
    legal.sort_by(|a, b| {
        let (x, y) = (key(a), key(b));
        x.0.cmp(&y.0)
            .then(x.1.total_cmp(&y.1))
            .then(x.2.total_cmp(&y.2))
    });
}
