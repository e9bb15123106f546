//! Progress of the long use cases as typed events, not prose: a trial's own events, the steps
//! of a sweep, the steps of a HipBLASLt stage. The CLI prints them (a text line each, or one
//! JSON object per line with `--json`); the TUI renders them. Both get the same events.
//!
//! Events travel on a bounded channel ([`Events`]). Async code sends with `send(..).await`;
//! the sweep's synchronous search loop (which never runs inside a runtime) uses [`emit`].

pub use crate::domain::study::LaunchHistory;
use crate::domain::trial::{TrialResult, TrialStatus};
use crate::run::trial::TrialEvent;
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use tokio::sync::mpsc;

/// Where a use case sends its progress.
pub type Events = mpsc::Sender<AppEvent>;

/// A channel for [`Events`] (the frontend keeps the receiver).
pub fn channel() -> (Events, mpsc::Receiver<AppEvent>) {
    mpsc::channel(256)
}

/// Sends from synchronous code that is not inside a tokio runtime (the sweep's loop); a
/// closed receiver (the frontend went away) drops the event.
pub fn emit(events: &Events, ev: AppEvent) {
    let _ = events.blocking_send(ev);
}

// Events are short-lived messages on a channel; the per-iteration ones are the common case.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum AppEvent {
    /// A trial's own events: started, log line, iteration, telemetry, stopping.
    Trial(TrialEvent),
    /// A trial ended (alone, in a sweep or in a stage).
    TrialEnded(Box<TrialEnded>),
    Sweep(SweepEvent),
    Stage(StageEvent),
}

/// The end of one trial, as every frontend reports it.
#[derive(Debug, Clone, Serialize)]
pub struct TrialEnded {
    /// Always `trial-ended` (the JSON Lines tag).
    pub event: &'static str,
    #[serde(flatten)]
    pub result: TrialResult,
}

impl AppEvent {
    pub fn trial_ended(result: TrialResult) -> AppEvent {
        AppEvent::TrialEnded(Box::new(TrialEnded {
            event: "trial-ended",
            result,
        }))
    }

    /// Worth a JSON line: everything but log lines and raw telemetry snapshots (those are in
    /// the trial's folder and its samples).
    pub fn for_json(&self) -> bool {
        !matches!(
            self,
            AppEvent::Trial(TrialEvent::Line { .. } | TrialEvent::Telemetry(_))
        )
    }
}

/// A candidate's settings as `k=v k=v`.
pub type Label = String;

/// The steps of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum SweepEvent {
    #[serde(rename = "sweep-started")]
    Started {
        study: String,
        space: String,
        candidates: usize,
        legal: usize,
        profile: String,
        gpus: u64,
        capacity_gib: Option<f64>,
        /// The memory model's fit from stored trials: (points, scale, offset GiB).
        calibration: Option<(usize, f64, f64)>,
        /// Why the memory model is not used at all (a proxy profile: its peaks are the
        /// stand-in's or the scaled-down shape's, not the config's).
        memory_model_off: Option<String>,
        /// What its measurements will be.
        basis: crate::domain::evidence::Basis,
        /// Knobs the profile does not model (swept anyway, `--allow-unmodeled`).
        unmodeled: Vec<String>,
        /// What the workspace's earlier trials say about a launch (the search's starting point).
        launch_history: Box<LaunchHistory>,
    },
    /// A candidate's trial of this length was already stored: reused, not run again.
    Replayed {
        candidate: usize,
        label: Label,
        iters: u64,
        trial: i64,
    },
    Launching {
        candidate: usize,
        label: Label,
        iters: u64,
    },
    Measured {
        trial: Option<i64>,
        status: TrialStatus,
        failure: Option<String>,
        /// The trial's steady step time per global batch, its 20 % trimmed mean (what the study
        /// ranks by).
        step_ms: Option<f64>,
        peak_gib: Option<f64>,
    },
    CouldNotRun {
        why: String,
    },
    /// The memory model refitted on the study's own peaks.
    Recalibrated {
        points: usize,
        scale: f64,
        offset_gib: f64,
    },
    /// A line of the search's decision log as it is decided: a candidate skipped and why, a
    /// launch its race stopped, a tie-break, the pick (the study keeps them all).
    Decided {
        line: String,
    },
}

/// The steps of a HipBLASLt stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum StageEvent {
    #[serde(rename = "stage-started")]
    Started {
        stage: u8,
        /// Stage 3: the tuned file, compared against an untuned baseline run first.
        override_file: Option<PathBuf>,
        /// Stage 2: the shapes it will tune.
        shapes: usize,
    },
    /// Stage 2's result file grew: `done` of `shapes` shapes tuned.
    Tuned { done: usize, shapes: usize },
    /// Stage 2 moved the earlier result file aside.
    SetAside { file: PathBuf },
}

impl fmt::Display for SweepEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SweepEvent::Started {
                study,
                space,
                candidates,
                legal,
                profile,
                gpus,
                capacity_gib,
                calibration,
                memory_model_off,
                basis,
                unmodeled,
                launch_history,
            } => {
                write!(
                    f,
                    "study {study}: space {space} · {candidates} candidates, {legal} legal · profile {profile} · {}{}",
                    crate::util::text::count(*gpus as usize, "GPU", "GPUs"),
                    capacity_gib.map_or(String::new(), |c| format!(" · {c:.1} GiB each"))
                )?;
                write!(f, "\nevidence: {basis}")?;
                if !unmodeled.is_empty() {
                    write!(
                        f,
                        "\nnot modelled by {profile}: {} — their verdicts are noise, not evidence",
                        unmodeled.join(", ")
                    )?;
                }
                match calibration {
                    _ if memory_model_off.is_some() => write!(
                        f,
                        "\nmemory model: not used ({})",
                        memory_model_off.as_deref().unwrap_or_default()
                    ),
                    None => write!(
                        f,
                        "\nmemory model: not calibrated yet (no stored trial with a peak)"
                    ),
                    Some((n, scale, offset)) => write!(
                        f,
                        "\nmemory model: calibrated on {}: measured ≈ {scale:.3} × model + {offset:.2} GiB",
                        crate::util::text::count(*n, "trial", "trials")
                    ),
                }?;
                write!(f, "\n{launch_history}")
            }
            SweepEvent::Replayed {
                candidate,
                label,
                iters,
                trial,
            } => write!(
                f,
                "candidate {candidate} ({label}), {iters} iterations: trial {trial} already done"
            ),
            SweepEvent::Launching {
                candidate,
                label,
                iters,
            } => write!(
                f,
                "candidate {candidate} ({label}), {iters} iterations: launching"
            ),
            SweepEvent::Measured {
                trial,
                status,
                failure,
                step_ms,
                peak_gib,
            } => write!(
                f,
                "  trial {}: {status}{} · {} {} · peak {}",
                trial.map_or("-".into(), |i| i.to_string()),
                failure
                    .as_ref()
                    .map_or(String::new(), |c| format!(" ({c})")),
                crate::tune::search::STATISTIC.name(),
                step_ms.map_or("-".into(), |m| format!("{m:.1} ms/batch")),
                peak_gib.map_or("-".into(), |m| format!("{m:.2} GiB")),
            ),
            SweepEvent::CouldNotRun { why } => write!(f, "  the trial could not run: {why}"),
            SweepEvent::Decided { line } => write!(f, "search: {line}"),
            SweepEvent::Recalibrated {
                points,
                scale,
                offset_gib,
            } => write!(
                f,
                "memory model recalibrated on {} of this study: measured ≈ {scale:.3} × model {offset_gib:+.2} GiB (each candidate's prediction is the one in force before its first trial, on the peaks of its own recompute settings and precision once two are measured)",
                crate::util::text::count(*points, "measured peak", "measured peaks")
            ),
        }
    }
}

impl fmt::Display for StageEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = |p: &PathBuf| crate::util::paths::display_path(p);
        match self {
            StageEvent::Started {
                stage: 3,
                override_file,
                ..
            } => write!(
                f,
                "stage 3: an untuned baseline trial, then one with {}",
                override_file.as_ref().map(path).unwrap_or_default()
            ),
            StageEvent::Started {
                stage: 2, shapes, ..
            } => write!(f, "stage 2: tuning {shapes} GEMM shapes offline"),
            StageEvent::Started { stage, .. } => write!(f, "stage {stage}: dumping GEMM shapes"),
            StageEvent::Tuned { done, shapes } => write!(f, "  tuned {done} of {shapes} shapes"),
            StageEvent::SetAside { file } => {
                write!(f, "the earlier result file is kept as {}", path(file))
            }
        }
    }
}

/// What the search starts from, for the sweep's first lines.
impl fmt::Display for LaunchHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.launch_s {
            Some((s, n)) => write!(
                f,
                "launch history: {s:.1} s to the first steady sample (median of {} of this \
                 experiment and profile)",
                crate::util::text::count(n, "earlier trial", "earlier trials")
            )?,
            None => write!(
                f,
                "launch history: none (the first trial measures what a launch costs)"
            )?,
        }
        match self.launch_cv {
            Some((cv, n)) => write!(
                f,
                "; launch-to-launch variation {:.2} % over {}",
                cv * 100.0,
                crate::util::text::count(n, "repeated launch", "repeated launches")
            ),
            None => write!(
                f,
                "; launch-to-launch variation not measured yet ({:.0} % assumed)",
                crate::tune::search::LAUNCH_CV_PRIOR * 100.0
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_carry_an_event_tag() {
        let ev = AppEvent::Sweep(SweepEvent::Launching {
            candidate: 2,
            label: "micro_batch_size=4".into(),
            iters: 12,
        });
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(v["event"], "launching");
        assert_eq!(v["candidate"], 2);
        let ev = AppEvent::Trial(TrialEvent::Stopping {
            reason: crate::domain::trial::StopReason::CiTarget,
        });
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            (v["event"].as_str(), v["reason"].as_str()),
            (Some("stopping"), Some("ci-target"))
        );
        let s = AppEvent::Stage(StageEvent::Tuned { done: 1, shapes: 3 });
        assert_eq!(serde_json::to_value(&s).unwrap()["event"], "tuned");
    }

    #[test]
    fn text_lines_say_what_happened() {
        let m = SweepEvent::Measured {
            trial: Some(7),
            status: TrialStatus::Failed,
            failure: Some("out of GPU memory".into()),
            step_ms: None,
            peak_gib: Some(1.5),
        };
        assert_eq!(
            m.to_string(),
            "  trial 7: failed (out of GPU memory) · 20 % trimmed mean - · peak 1.50 GiB"
        );
        let m = SweepEvent::Measured {
            trial: Some(8),
            status: TrialStatus::Completed,
            failure: None,
            step_ms: Some(1186.04),
            peak_gib: None,
        };
        assert_eq!(
            m.to_string(),
            "  trial 8: completed · 20 % trimmed mean 1186.0 ms/batch · peak -"
        );
        let started = |off: Option<&str>| SweepEvent::Started {
            study: "s".into(),
            space: "memory-fit".into(),
            candidates: 4,
            legal: 4,
            profile: "proxy-cpu".into(),
            gpus: 1,
            capacity_gib: None,
            calibration: Some((3, 1.0, 0.5)),
            memory_model_off: off.map(str::to_string),
            basis: crate::domain::evidence::Basis::Proxy {
                profile: "proxy-cpu".into(),
            },
            unmodeled: vec![],
            launch_history: Default::default(),
        };
        let on = started(None).to_string();
        assert!(on.contains("memory model: calibrated on 3 trials"), "{on}");
        let off = started(Some("a proxy")).to_string();
        assert!(
            off.contains("\nmemory model: not used (a proxy)\n"),
            "{off}"
        );
        assert!(
            off.ends_with(
                "launch history: none (the first trial measures what a launch costs); \
                 launch-to-launch variation not measured yet (1 % assumed)"
            ),
            "{off}"
        );
        assert!(!off.contains("calibrated"), "{off}");
    }
}
