//! `primus-tune report`: a finished sweep as a Markdown summary with charts (PNG and SVG).
//!
//! [`build`] is a pure function from what the store holds (the study's [`StudyRecord`], its
//! trial rows and the telemetry samples of the winner's trials) to a [`Report`];
//! [`Report::write`] renders the charts ([`charts`]) and `report.md` into a folder.

mod build;
pub mod charts;
mod markdown;
#[cfg(test)]
mod tests;
mod text;

use build::verdict_rank;
pub use build::{build, ran};
use markdown::yaml_scalar;

use crate::domain::evidence::Basis;
use crate::domain::study::{CandidateRecord, StudyRecord, VerdictKind, settings};
use crate::domain::study::{Knob, Overrides};
use crate::domain::telemetry::NodeSummary;
use crate::store::TrialRow;
use crate::telemetry::sampler::Snapshot;
use crate::tune::space::Space;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const GIB: f64 = (1u64 << 30) as f64;

/// What the throughput chart plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Step time (the study's statistic), ms (lower is better).
    StepMs,
    /// Tokens per second per GPU (higher is better); used when every measured candidate has it.
    TokensPerS,
}

/// One candidate of the study, as the report shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: usize,
    /// Short text for the charts' candidate axis (the knob value when the space has one knob).
    pub label: String,
    /// Every override, `k=v k=v`.
    pub settings: String,
    pub verdict: VerdictKind,
    pub why: String,
    /// The experiment's current settings.
    pub baseline: bool,
    pub n: usize,
    pub step_ms: Option<f64>,
    pub ci_low_ms: Option<f64>,
    pub ci_high_ms: Option<f64>,
    /// From the candidate's longest trial with the figure (the log's tokens/s per GPU).
    pub tokens_per_s: Option<f64>,
    pub peak_gib: Option<f64>,
    /// What the peak measures.
    pub peak_source: Option<crate::domain::trial::MemorySource>,
    pub predicted_gib: Option<f64>,
    /// The step time the search predicted for a candidate it did not run (`predicted-slower`
    /// verdicts), ms.
    pub predicted_ms: Option<f64>,
    /// The candidate's trials in the study, by id.
    pub trials: Vec<i64>,
}

impl Row {
    pub fn measured(&self) -> bool {
        self.step_ms.is_some()
    }

    /// (value, low, high) of the throughput metric. Tokens/s has no interval of its own: its
    /// bounds are the step-time interval carried over (tokens/s ∝ 1 / step time).
    pub fn throughput(&self, m: Metric) -> Option<(f64, f64, f64)> {
        let med = self.step_ms?;
        let lo = self.ci_low_ms.unwrap_or(med);
        let hi = self.ci_high_ms.unwrap_or(med);
        match m {
            Metric::StepMs => Some((med, lo, hi)),
            Metric::TokensPerS => {
                let t = self.tokens_per_s?;
                let scale = |ms: f64| if ms > 0.0 { t * med / ms } else { t };
                Some((t, scale(hi), scale(lo)))
            }
        }
    }

    /// The verdict in a few words, for chart markers.
    pub fn short_verdict(&self) -> &str {
        match self.verdict {
            VerdictKind::Oom => "OOM",
            VerdictKind::RuledOut => "ruled out",
            VerdictKind::PredictedOom => "predicted OOM",
            VerdictKind::PredictedSlower => "predicted slower",
            VerdictKind::NotRun => "not run",
            VerdictKind::BestSoFar => "best so far",
            other => other.as_str(),
        }
    }
}

/// Telemetry of one trial: GPU figures over time, aggregated over the trial's GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialSeries {
    pub trial_id: i64,
    /// The trial's length (its `train_iters`), when recorded.
    pub iters: Option<u64>,
    pub points: Vec<TelemetryPoint>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TelemetryPoint {
    /// Seconds since the trial's first sample.
    pub t_s: f64,
    /// Mean utilisation over the GPUs that report it, %.
    pub util_pct: Option<f64>,
    /// Mean board power per GPU, W.
    pub power_w: Option<f64>,
    /// The fullest GPU's VRAM in use, GiB.
    pub vram_gib: Option<f64>,
}

impl TrialSeries {
    pub fn label(&self) -> String {
        match self.iters {
            Some(i) => format!("trial {} ({i} iterations)", self.trial_id),
            None => format!("trial {}", self.trial_id),
        }
    }
}

/// Everything the report shows.
#[derive(Debug, Clone)]
pub struct Report {
    pub study: String,
    pub record: StudyRecord,
    /// The space's knobs and their values, one line each (empty when the space is not stored).
    pub knobs: Vec<String>,
    /// Every candidate, in the space's (cost) order.
    pub rows: Vec<Row>,
    /// What the candidate axis shows: the knob's name, or `candidate`.
    pub category_axis: String,
    /// Candidates down the side (long labels) instead of along the bottom.
    pub horizontal: bool,
    pub metric: Metric,
    pub capacity_gib: Option<f64>,
    /// The predictions against the measured peaks (or why they are not compared).
    pub memory: crate::domain::study::MemoryCheck,
    /// Index into `rows` of the pick.
    pub winner: Option<usize>,
    /// The winner's trials with GPU telemetry.
    pub telemetry: Vec<TrialSeries>,
    /// Most GPUs seen in one sample of the winner's trials.
    pub telemetry_gpus: usize,
    /// The experiment module the YAML snippet goes under.
    pub module: String,
    /// Per trial that ran across two nodes or more (by id), its nodes' figures.
    pub nodes: Vec<(i64, Vec<NodeSummary>)>,
}

/// What [`build`] reads.
pub struct Inputs<'a> {
    pub name: &'a str,
    pub record: &'a StudyRecord,
    /// The study's space, when stored (better chart labels).
    pub space: Option<&'a Space>,
    /// The study's trials.
    pub trials: &'a [TrialRow],
    /// Telemetry by trial id (only the winner's trials are read).
    pub samples: &'a BTreeMap<i64, Vec<Snapshot>>,
    /// The experiment's main module (`pre_trainer`).
    pub module: &'a str,
    /// The memory model against the measured peaks (the app layer decides whether it applies).
    pub memory: crate::domain::study::MemoryCheck,
}

/// A file [`Report::write`] wrote, or a chart it left out and why.
#[derive(Debug, Clone, PartialEq)]
pub enum Written {
    File(PathBuf),
    Skipped { chart: &'static str, why: String },
}

impl Report {
    /// Rows from best to worst: the winner, ties, slower ones by step time, then the rest.
    pub fn ranked(&self) -> Vec<&Row> {
        let mut v: Vec<&Row> = self.rows.iter().collect();
        v.sort_by(|a, b| {
            verdict_rank(a.verdict)
                .cmp(&verdict_rank(b.verdict))
                .then(
                    a.step_ms
                        .unwrap_or(f64::INFINITY)
                        .total_cmp(&b.step_ms.unwrap_or(f64::INFINITY)),
                )
                .then(a.id.cmp(&b.id))
        });
        v
    }

    pub fn pick(&self) -> Option<&Row> {
        self.winner.map(|w| &self.rows[w])
    }

    /// The charts there is data for, and why each other one is left out.
    pub fn charts(&self) -> Vec<Result<charts::Chart, (charts::Chart, String)>> {
        use charts::Chart;
        let mut out = Vec::new();
        out.push(if self.rows.iter().any(Row::measured) {
            Ok(Chart::Throughput)
        } else {
            Err((
                Chart::Throughput,
                "no candidate produced a step time".to_string(),
            ))
        });
        out.push(
            if self
                .rows
                .iter()
                .any(|r| r.peak_gib.is_some() || r.predicted_gib.is_some())
            {
                Ok(Chart::Memory)
            } else {
                Err((
                    Chart::Memory,
                    "no candidate has a measured peak or a prediction".to_string(),
                ))
            },
        );
        out.push(if charts::pareto::placed(self).is_empty() {
            Err((
                charts::Chart::Pareto,
                "no candidate has both a step time and a measured peak".to_string(),
            ))
        } else {
            Ok(charts::Chart::Pareto)
        });
        out.push(if !self.telemetry.is_empty() {
            Ok(Chart::Telemetry)
        } else if self.winner.is_none() {
            Err((Chart::Telemetry, "there is no winner".to_string()))
        } else if self.record.basis.as_ref().is_some_and(|b| b.is_proxy()) {
            Err((
                Chart::Telemetry,
                "the winner ran on a CPU stand-in: the GPUs of its node are not its evidence, \
                 so no GPU telemetry is shown"
                    .to_string(),
            ))
        } else {
            Err((
                Chart::Telemetry,
                "no GPU telemetry was stored for the winner's trials (host-only sampling: no GPU \
                 backend was available when the sweep ran)"
                    .to_string(),
            ))
        });
        out
    }

    /// The pick's overrides as a YAML snippet for the experiment file.
    pub fn snippet(&self) -> Option<String> {
        let pick = self.record.pick?;
        let c = self.record.candidates.iter().find(|c| c.id == pick)?;
        let mut s = format!("modules:\n  {}:\n    overrides:\n", self.module);
        for (k, v) in &c.overrides {
            let _ = writeln!(s, "      {k}: {}", yaml_scalar(v));
        }
        Some(s)
    }

    /// Renders the charts (PNG and SVG) and `report.md` into `dir`, creating it.
    pub fn write(&self, dir: &Path) -> std::io::Result<Vec<Written>> {
        self.write_with(dir, &charts::ChartOptions::default())
    }

    /// [`Report::write`] with the charts' size and resolution.
    pub fn write_with(
        &self,
        dir: &Path,
        opts: &charts::ChartOptions,
    ) -> std::io::Result<Vec<Written>> {
        std::fs::create_dir_all(dir)?;
        let mut out = Vec::new();
        let mut made = Vec::new();
        for c in self.charts() {
            match c {
                Ok(chart) => {
                    for p in charts::render(self, chart, dir, opts)? {
                        out.push(Written::File(p));
                    }
                    made.push(chart);
                }
                Err((chart, why)) => out.push(Written::Skipped {
                    chart: chart.stem(),
                    why,
                }),
            }
        }
        let md = dir.join("report.md");
        std::fs::write(&md, self.markdown())?;
        out.push(Written::File(md));
        Ok(out)
    }

    /// What produced the figures, short, for chart titles: the profile and the GPU, or the
    /// stand-in.
    pub fn evidence_short(&self) -> String {
        use crate::domain::evidence::Basis;
        match &self.record.basis {
            Some(Basis::Proxy { profile }) => format!("{profile} on the CPU, not GPU evidence"),
            Some(Basis::Measured {
                profile,
                gpu: Some(g),
            }) => format!("{profile} on {g}"),
            Some(Basis::Measured { profile, gpu: None }) => format!("{profile}, GPU unknown"),
            _ => self.record.profile.clone(),
        }
    }
}
