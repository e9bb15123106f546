//! Starting work that takes GPUs: a trial (Run, Checklist, Flags, Trials screens), a GEMM stage,
//! a sweep. On a profile that launches on GPUs it asks first, with what will run, its budget
//! and the GPUs; a CPU stand-in (the proxies) starts at once.

use super::app::{App, Effect, Overlay};
use super::screens;

/// What is about to start: the question's title and lines, the status line once started, and
/// the effect that starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub title: String,
    pub lines: Vec<String>,
    pub said: String,
    pub effect: Effect,
}

/// The question's lines on the GPUs: where the Run screen's profile launches (once the config
/// view is the one read for it), and what the live telemetry sees here.
pub fn gpu_lines(app: &App) -> Vec<String> {
    let chosen = app.profile_name();
    let launch = app
        .config
        .as_ref()
        .and_then(|c| c.profile.as_ref())
        .filter(|p| Some(p.name.as_str()) == chosen)
        .map(|p| p.launch.describe());
    let seen = if launch.is_some() && app.telemetry.gpus.is_empty() {
        "GPUs: none seen by the telemetry here.".to_string()
    } else {
        gpus_line(app)
    };
    launch.into_iter().chain([seen]).collect()
}

/// The GPUs the live telemetry sees, in one line.
pub fn gpus_line(app: &App) -> String {
    let gpus = &app.telemetry.gpus;
    match gpus.first() {
        None => "GPUs: none seen by the telemetry here (the launch uses what its launcher \
                 finds: GPUS_PER_NODE, else every GPU of the node)"
            .into(),
        Some(first) if gpus.iter().all(|g| g.name == first.name) => {
            format!(
                "GPUs: all {} of this node, {} × {}",
                gpus.len(),
                gpus.len(),
                first.name
            )
        }
        Some(_) => {
            let names: Vec<String> = gpus
                .iter()
                .map(|g| format!("{} {}", g.index, g.name))
                .collect();
            format!(
                "GPUs: all {} of this node ({})",
                gpus.len(),
                names.join(", ")
            )
        }
    }
}

/// Ask first on a GPU profile; start at once otherwise.
pub fn ask_or_start(app: &mut App, launch: Launch) -> Vec<Effect> {
    if app.profile_on_gpus() {
        app.overlay = Some(Overlay::ConfirmLaunch(Box::new(launch)));
        vec![]
    } else {
        start(app, launch)
    }
}

/// Start it: the screen that follows it shows it, the status line says so.
pub fn start(app: &mut App, launch: Launch) -> Vec<Effect> {
    match &launch.effect {
        Effect::StartTrial { .. } | Effect::StartGemmStage { .. } => {
            screens::run::starting(app);
            // Kept in the message log; the status line then follows the trial.
            app.info(launch.said.clone());
            app.screens.run.status_line = Some(launch.said);
        }
        Effect::StartSweep { .. } | Effect::ResumeSweep { .. } => {
            screens::sweep::running(app);
            app.info(launch.said);
        }
        _ => app.info(launch.said),
    }
    vec![launch.effect]
}
