//! `primus-tune report`: a finished sweep as a Markdown summary with charts (PNG and SVG).
//!
//! [`build`] is a pure function from what the store holds (the study's [`StudyRecord`], its
//! trial rows and the telemetry samples of the winner's trials) to a [`Report`];
//! [`Report::write`] renders the charts ([`charts`]) and `report.md` into a folder.

pub mod charts;
mod text;

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

/// A trial's own overrides: the candidate's, without what the runner adds.
/// Whether a stored trial ran this candidate: it carries every one of the candidate's values
/// (command-line `--set` values may come with them).
pub fn ran(t: &TrialRow, c: &Overrides) -> bool {
    let own = crate::run::trial::trial_settings(t);
    c.iter().all(|(k, v)| own.get(k) == Some(v))
}

/// A value as short text: strings without quotes, null as `none`.
fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "none".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn knob_name(k: &Knob) -> &str {
    k.flag.trim_start_matches('@')
}

/// The text of a knob's value in a candidate: the value, or for a knob setting several flags
/// (`@name`) its non-null values joined by `/` (`none` when all are null).
fn knob_value(k: &Knob, o: &Overrides) -> Option<String> {
    if !k.flag.starts_with('@') {
        return o.get(&k.flag).map(value_text);
    }
    let map = k.values.iter().filter_map(|v| v.as_object()).find(|m| {
        m.iter()
            .all(|(f, x)| o.get(f).is_some_and(|have| have == x))
    })?;
    let set: Vec<String> = map
        .values()
        .filter(|x| !x.is_null())
        .map(value_text)
        .collect();
    Some(if set.is_empty() {
        "none".into()
    } else {
        set.join("/")
    })
}

fn knob_line(k: &Knob) -> String {
    let values: Vec<String> = k
        .values
        .iter()
        .map(|v| match v.as_object() {
            Some(m) => {
                let set: Vec<String> = m
                    .iter()
                    .map(|(f, x)| format!("{f}={}", value_text(x)))
                    .collect();
                format!("{{{}}}", set.join(", "))
            }
            None => value_text(v),
        })
        .collect();
    format!("`{}`: {}", k.flag, values.join(" · "))
}

/// Chart labels of the candidates and the name of their axis.
fn labels(space: Option<&Space>, cands: &[CandidateRecord]) -> (Vec<String>, String) {
    if let Some(s) = space {
        let per: Option<Vec<Vec<String>>> = cands
            .iter()
            .map(|c| {
                s.knobs
                    .iter()
                    .map(|k| knob_value(k, &c.overrides))
                    .collect()
            })
            .collect();
        if let Some(per) = per {
            if let [k] = s.knobs.as_slice() {
                return (
                    per.into_iter().map(|mut v| v.remove(0)).collect(),
                    knob_name(k).to_string(),
                );
            }
            let labels = cands
                .iter()
                .zip(per)
                .map(|(c, vals)| {
                    let parts: Vec<String> = s
                        .knobs
                        .iter()
                        .zip(vals)
                        .map(|(k, v)| format!("{}={v}", knob_name(k)))
                        .collect();
                    format!("#{} {}", c.id, parts.join(", "))
                })
                .collect();
            return (labels, "candidate".into());
        }
    }
    let labels = cands
        .iter()
        .map(|c| format!("#{} {}", c.id, settings(&c.overrides)))
        .collect();
    (labels, "candidate".into())
}

/// Aggregates one snapshot's GPUs; None when it holds no GPU figure.
fn point(s: &Snapshot, t0: u64) -> Option<TelemetryPoint> {
    let mean = |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    let util = mean(s.gpus.iter().filter_map(|g| g.util_pct).collect());
    let power = mean(s.gpus.iter().filter_map(|g| g.power_w).collect());
    let vram = s
        .gpus
        .iter()
        .filter_map(|g| g.vram_used_bytes)
        .max()
        .map(|b| b as f64 / GIB);
    if util.is_none() && power.is_none() && vram.is_none() {
        return None;
    }
    Some(TelemetryPoint {
        t_s: s.ts_ms.saturating_sub(t0) as f64 / 1000.0,
        util_pct: util,
        power_w: power,
        vram_gib: vram,
    })
}

/// The step time in a `predicted-slower` verdict's reason (`predicted 130.2 ms, 12.0 % slower
/// than #1 ...`), ms.
fn predicted_ms(why: &str) -> Option<f64> {
    let rest = &why[why.find("predicted ")? + "predicted ".len()..];
    let (num, tail) = rest.split_once(' ')?;
    tail.starts_with("ms")
        .then(|| num.trim_end_matches(',').parse::<f64>().ok())
        .flatten()
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// The report of a study, from what the store holds.
pub fn build(i: &Inputs<'_>) -> Report {
    let rec = i.record;
    let (labels, category_axis) = labels(i.space, &rec.candidates);
    let rows: Vec<Row> = rec
        .candidates
        .iter()
        .zip(labels)
        .map(|(c, label)| {
            let mut mine: Vec<&TrialRow> =
                i.trials.iter().filter(|t| ran(t, &c.overrides)).collect();
            mine.sort_by_key(|t| t.id);
            let tokens_per_s = mine
                .iter()
                .filter(|t| t.tokens_per_s_per_gpu.is_some())
                .max_by_key(|t| (crate::run::trial::trial_iters(t), t.id))
                .and_then(|t| t.tokens_per_s_per_gpu);
            Row {
                id: c.id,
                label: if c.baseline {
                    format!("{label} (current)")
                } else {
                    label
                },
                baseline: c.baseline,
                settings: settings(&c.overrides),
                verdict: c.verdict,
                why: c.why.clone(),
                n: c.n,
                step_ms: c.step_ms,
                ci_low_ms: c.ci_low_ms,
                ci_high_ms: c.ci_high_ms,
                tokens_per_s,
                // A trial that died before allocating reports 0: no peak.
                peak_gib: c
                    .peak_memory_bytes
                    .filter(|b| *b > 0)
                    .map(|b| b as f64 / GIB),
                peak_source: c.peak_memory_source,
                // Beside a proxy's peaks a forecast for the config reads as a comparison it is
                // not (`memory_check`): a proxy study draws none.
                predicted_gib: c
                    .predicted_bytes
                    .filter(|_| !matches!(rec.basis, Some(Basis::Proxy { .. })))
                    .map(|b| b / GIB),
                predicted_ms: (c.verdict == VerdictKind::PredictedSlower)
                    .then(|| predicted_ms(&c.why))
                    .flatten(),
                trials: mine.iter().map(|t| t.id).collect(),
            }
        })
        .collect();
    let measured: Vec<&Row> = rows.iter().filter(|r| r.measured()).collect();
    let metric = if !measured.is_empty() && measured.iter().all(|r| r.tokens_per_s.is_some()) {
        Metric::TokensPerS
    } else {
        Metric::StepMs
    };
    let longest = rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0);
    // Along the bottom while the labels fit side by side; else down the side.
    let horizontal = rows.len() > 8 || rows.len() * longest.max(4) > 90;
    let winner = rec.pick.and_then(|p| rows.iter().position(|r| r.id == p));
    let mut telemetry = Vec::new();
    let mut telemetry_gpus = 0;
    // A CPU stand-in's evidence is its host's: GPUs sampled beside it are not its telemetry.
    let stand_in = rec.basis.as_ref().is_some_and(|b| b.is_proxy());
    if let Some(w) = winner.filter(|_| !stand_in) {
        for id in &rows[w].trials {
            let Some(snaps) = i.samples.get(id) else {
                continue;
            };
            let t0 = snaps.iter().map(|s| s.ts_ms).min().unwrap_or(0);
            let points: Vec<TelemetryPoint> = snaps.iter().filter_map(|s| point(s, t0)).collect();
            if points.is_empty() {
                continue;
            }
            telemetry_gpus =
                telemetry_gpus.max(snaps.iter().map(|s| s.gpus.len()).max().unwrap_or(0));
            telemetry.push(TrialSeries {
                trial_id: *id,
                iters: i
                    .trials
                    .iter()
                    .find(|t| t.id == *id)
                    .and_then(crate::run::trial::trial_iters),
                points,
            });
        }
    }
    let mut nodes: Vec<(i64, Vec<NodeSummary>)> = i
        .trials
        .iter()
        .filter_map(|t| Some((t.id, trial_nodes(t)?)))
        .collect();
    nodes.sort_by_key(|(id, _)| *id);
    Report {
        study: i.name.to_string(),
        record: rec.clone(),
        knobs: i
            .space
            .map(|s| s.knobs.iter().map(knob_line).collect())
            .unwrap_or_default(),
        rows,
        category_axis,
        horizontal,
        metric,
        capacity_gib: rec.capacity_bytes.map(|b| b / GIB),
        memory: i.memory.clone(),
        winner,
        telemetry,
        telemetry_gpus,
        module: i.module.to_string(),
        nodes,
    }
}

/// A trial's per-node figures, when it ran across two nodes or more.
fn trial_nodes(t: &TrialRow) -> Option<Vec<NodeSummary>> {
    let v = t.summary.as_ref()?.get("nodes")?;
    let nodes: Vec<NodeSummary> = serde_json::from_value(v.clone()).ok()?;
    (nodes.len() >= 2).then_some(nodes)
}

/// A YAML scalar: plain when that reads back as the same string, else double-quoted.
fn yaml_scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => {
            let plain = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
                && !s.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
                );
            if plain {
                s.clone()
            } else {
                serde_json::Value::String(s.clone()).to_string()
            }
        }
        serde_json::Value::Null => "null".into(),
        other => other.to_string(),
    }
}

/// Escapes text for a Markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("–".into(), |x| format!("{x:.prec$}"))
}

/// Rank of a verdict in the evidence table.
fn verdict_rank(v: VerdictKind) -> u8 {
    match v {
        VerdictKind::Winner | VerdictKind::BestSoFar => 0,
        VerdictKind::Tie => 1,
        VerdictKind::Slower => 2,
        VerdictKind::Failed => 3,
        VerdictKind::Oom => 4,
        VerdictKind::RuledOut => 5,
        VerdictKind::PredictedSlower => 6,
        VerdictKind::PredictedOom => 7,
        VerdictKind::Illegal => 8,
        VerdictKind::NotRun => 9,
    }
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

    /// The Markdown summary (it links the charts [`Report::write`] makes beside it).
    pub fn markdown(&self) -> String {
        let r = &self.record;
        let mut s = String::new();
        let _ = writeln!(s, "# Sweep report: `{}`\n", self.study);
        let _ = writeln!(s, "| | |\n|---|---|");
        let _ = writeln!(s, "| Experiment | `{}` |", cell(&r.config));
        let _ = writeln!(s, "| Space | `{}` |", cell(&r.space));
        for k in &self.knobs {
            let _ = writeln!(s, "| Knob | {} |", cell(k));
        }
        let _ = writeln!(s, "| Launch profile | `{}` |", cell(&r.profile));
        let _ = writeln!(s, "| Evidence | {} |", cell(&r.basis_text()));
        let _ = writeln!(s, "| Conclusion | {} |", cell(&r.conclusion_text()));
        if !r.unmodeled.is_empty() {
            let _ = writeln!(
                s,
                "| Not modelled | {}: the profile does not model them; their verdicts are noise, not evidence |",
                cell(&r.unmodeled.join(", "))
            );
        }
        let _ = writeln!(s, "| GPUs per trial | {} |", r.gpus);
        let _ = writeln!(
            s,
            "| GPU memory (capacity) | {} |",
            self.capacity_gib
                .map_or("unknown".into(), |c| format!("{c:.1} GiB per GPU"))
        );
        let _ = writeln!(
            s,
            "| Candidates | {} ({} measured) |",
            self.rows.len(),
            self.rows.iter().filter(|x| x.measured()).count()
        );
        let _ = writeln!(s, "| Trials | {} |", r.trials);
        let _ = writeln!(
            s,
            "| {0} time | {1:.1} {0}-minutes |",
            r.cost_unit(),
            r.gpu_seconds / 60.0
        );
        let mut model = self.memory.to_string();
        let bad = self
            .rows
            .iter()
            .filter(|x| x.predicted_gib.is_some_and(|p| p <= 0.0))
            .count();
        if bad > 0 {
            let _ = write!(
                model,
                "; {bad} prediction{} at or below 0 GiB (the calibration is off)",
                if bad == 1 { "" } else { "s" }
            );
        }
        let _ = writeln!(s, "| Memory model | {} |\n", cell(&model));

        let _ = writeln!(s, "## Pick\n");
        match self.pick() {
            Some(p) if p.baseline => {
                let _ = writeln!(
                    s,
                    "**Keep the current settings** ({}, candidate {}): step time ({}) {} ms {} \
                     (95 % CI {}–{} ms, n {}). {}.\n",
                    p.settings,
                    p.id,
                    self.record.statistic.name(),
                    opt(p.step_ms, 1),
                    self.record.batch_unit(),
                    opt(p.ci_low_ms, 1),
                    opt(p.ci_high_ms, 1),
                    p.n,
                    r.conclusion_text()
                );
            }
            Some(p) => {
                let mut line = format!(
                    "**{}** (candidate {}): step time ({}) {} ms {} (95 % CI {}–{} ms, n {})",
                    p.settings,
                    p.id,
                    self.record.statistic.name(),
                    opt(p.step_ms, 1),
                    self.record.batch_unit(),
                    opt(p.ci_low_ms, 1),
                    opt(p.ci_high_ms, 1),
                    p.n
                );
                if let Some(t) = p.tokens_per_s {
                    let _ = write!(line, ", {} tokens/s per GPU", charts::fmt::grouped(t));
                }
                if let Some(g) = p.peak_gib {
                    let _ = write!(line, ", peak memory {g:.2} GiB per GPU");
                }
                let _ = writeln!(s, "{line}.\n");
                if let Some(snip) = self.snippet() {
                    let _ = writeln!(
                        s,
                        "Paste into the experiment YAML (merge with its `modules.{}.overrides`):\n",
                        self.module
                    );
                    let _ = writeln!(s, "```yaml\n{snip}```\n");
                    let _ = writeln!(
                        s,
                        "or let primus-tune write it: `primus-tune recommend {} --study {} --apply`.\n",
                        r.config, self.study
                    );
                }
            }
            None if r.conclusion.is_some() => {
                let _ = writeln!(
                    s,
                    "No pick — {}. There is nothing to recommend: resume the study with more \
                     budget (`primus-tune sweep {} --resume {}`).\n",
                    r.conclusion_text(),
                    r.config,
                    self.study
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "No pick: no candidate produced a measurement, so there is nothing to recommend.\n"
                );
            }
        }

        let _ = writeln!(s, "## Evidence\n");
        let stat = self.record.statistic.name();
        let _ = writeln!(
            s,
            "Candidates from best to worst. Step times are the sweep's evidence: the {stat} of \
             the steady-state iterations pooled over the candidate's trials (scaled to the \
             current settings' global batch where a trial ran another), with the 95 % confidence \
             interval of that {stat}; n counts those iterations. Peak memory is the largest any \
             of its trials reported, with what it measures: `alloc` the framework's allocator \
             (its own memory), `procs` the trial's processes, `device` the device memory in use \
             (other processes included); tokens/s per GPU comes from its longest trial's log.\n"
        );
        let _ = writeln!(
            s,
            "| rank | # | settings | verdict | step, {stat} (ms/batch) | 95 % CI (ms) | n | tokens/s/GPU | peak (GiB, source) | predicted (GiB) | why |"
        );
        let _ = writeln!(s, "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|");
        for (rank, row) in self.ranked().into_iter().enumerate() {
            let ci = match (row.ci_low_ms, row.ci_high_ms) {
                (Some(l), Some(h)) => format!("{l:.1}–{h:.1}"),
                _ => "–".into(),
            };
            let mut settings = if row.verdict == VerdictKind::Winner {
                format!("**{}**", cell(&row.settings))
            } else {
                cell(&row.settings)
            };
            if row.baseline {
                settings.push_str(" (current)");
            }
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                rank + 1,
                row.id,
                settings,
                row.verdict,
                opt(row.step_ms, 1),
                ci,
                row.n,
                row.tokens_per_s.map_or("–".into(), charts::fmt::grouped),
                match (row.peak_gib, row.peak_source) {
                    (Some(g), Some(k)) => format!("{g:.2} {}", k.tag()),
                    (g, _) => opt(g, 2),
                },
                opt(row.predicted_gib, 2),
                cell(&row.why)
            );
        }
        let _ = writeln!(s);

        if !self.nodes.is_empty() {
            s.push_str(&self.nodes_section());
        }

        let _ = writeln!(s, "## Charts\n");
        for c in self.charts() {
            match c {
                Ok(chart) => {
                    let stem = chart.stem();
                    let _ = writeln!(s, "### {}\n", chart.heading());
                    let _ = writeln!(s, "{}\n", chart.caption(self));
                    let _ = writeln!(
                        s,
                        "![{}]({stem}.svg)\n\nPNG: [{stem}.png]({stem}.png)\n",
                        chart.heading()
                    );
                    if chart == charts::Chart::Telemetry {
                        s.push_str(&self.telemetry_table());
                    }
                }
                Err((chart, why)) => {
                    let _ = writeln!(s, "### {}\n", chart.heading());
                    let _ = writeln!(s, "No chart: {why}.\n");
                }
            }
        }

        let _ = writeln!(s, "## Decision log\n");
        if r.log.is_empty() {
            let _ = writeln!(s, "(empty)");
        }
        for (i, l) in r.log.iter().enumerate() {
            let _ = writeln!(s, "{}. {}", i + 1, l.replace('\n', " "));
        }
        s
    }

    /// The trials that ran across nodes: one row per node.
    fn nodes_section(&self) -> String {
        let mut s = String::from("## Per node\n\n");
        let _ = writeln!(
            s,
            "Trials that ran across nodes (Slurm), one row per node. The median step and the \
             iterations come from the node's own log (– when its ranks print no iteration); CPU \
             is the node's mean host CPU use; GPU util is the mean over the node's GPUs of each \
             GPU's mean utilisation, VRAM peak the fullest GPU's peak, temperature the hottest \
             GPU sensor, over the trial's steady iterations (or its training span when that is \
             too short). `slowest` marks the node with the longest median step, `hottest` the \
             one with the hottest GPU, each among two nodes or more with the figure.\n"
        );
        let _ = writeln!(
            s,
            "| trial | node | median step (ms) | iterations | CPU (%) | GPU util (%) | VRAM peak (GiB) | max temp (°C) | flags |"
        );
        let _ = writeln!(s, "|---:|---|---:|---:|---:|---:|---:|---:|---|");
        for (id, nodes) in &self.nodes {
            for n in nodes {
                let utils: Vec<f64> = n.gpus.iter().filter_map(|g| g.util_mean_pct).collect();
                let util =
                    (!utils.is_empty()).then(|| utils.iter().sum::<f64>() / utils.len() as f64);
                let vram = n
                    .gpus
                    .iter()
                    .filter_map(|g| g.vram_peak_bytes)
                    .max()
                    .map(|b| b as f64 / GIB);
                let flags: Vec<&str> = [(n.slowest, "slowest"), (n.hottest, "hottest")]
                    .into_iter()
                    .filter_map(|(on, f)| on.then_some(f))
                    .collect();
                let _ = writeln!(
                    s,
                    "| {id} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    cell(&n.node),
                    opt(n.median_step_ms, 1),
                    n.iterations,
                    opt(n.cpu_mean_pct, 0),
                    opt(util, 0),
                    opt(vram, 2),
                    opt(n.temp_max_c, 0),
                    flags.join(", ")
                );
            }
        }
        s.push('\n');
        s
    }

    /// Per trial of the winner: samples, mean utilisation, mean power, peak VRAM.
    fn telemetry_table(&self) -> String {
        let mut s = String::from(
            "| trial | samples | duration (s) | mean GPU util (%) | mean power (W/GPU) | peak VRAM (GiB) |\n|---|---:|---:|---:|---:|---:|\n",
        );
        for t in &self.telemetry {
            let mean = |f: fn(&TelemetryPoint) -> Option<f64>| {
                let xs: Vec<f64> = t.points.iter().filter_map(f).collect();
                (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
            };
            let peak = t
                .points
                .iter()
                .filter_map(|p| p.vram_gib)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {} | {} | {} |",
                t.label(),
                t.points.len(),
                t.points.last().map_or(0.0, |p| p.t_s),
                opt(mean(|p| p.util_pct), 1),
                opt(mean(|p| p.power_w), 0),
                opt(peak, 2)
            );
        }
        s.push('\n');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::GpuSample;
    use serde_json::json;

    fn cand(id: usize, mbs: i64, verdict: &str, step: Option<f64>) -> CandidateRecord {
        CandidateRecord {
            id,
            baseline: false,
            overrides: [("micro_batch_size".to_string(), json!(mbs))]
                .into_iter()
                .collect(),
            verdict: verdict.parse().unwrap(),
            why: format!("{verdict} because"),
            n: if step.is_some() { 12 } else { 0 },
            step_ms: step,
            ci_low_ms: step.map(|m| m - 1.0),
            ci_high_ms: step.map(|m| m + 2.0),
            peak_memory_bytes: step.map(|m| (m as u64) << 30),
            peak_memory_source: None,
            predicted_bytes: Some((mbs as f64 + 10.0) * GIB),
        }
    }

    fn record() -> StudyRecord {
        StudyRecord {
            space: "mbs".into(),
            config: "/x/exp.yaml".into(),
            profile: "proxy-cpu".into(),
            gpus: 8,
            capacity_bytes: Some(192.0 * GIB),
            candidates: vec![
                cand(0, 1, "slower", Some(120.0)),
                cand(1, 2, "winner", Some(100.0)),
                cand(2, 4, "oom", None),
            ],
            pick: Some(1),
            gpu_seconds: 90.0,
            trials: 3,
            log: vec!["rung 1".into(), "pick: #1".into()],
            memory_error: Some(0.05),
            basis: Some(crate::domain::evidence::Basis::Proxy {
                profile: "proxy-cpu".into(),
            }),
            unmodeled: Vec::new(),
            baseline: None,
            conclusion: None,
            per_samples: None,
            statistic: crate::domain::study::StepStatistic::TrimmedMean,
            knobs: Vec::new(),
        }
    }

    fn trial(id: i64, mbs: i64, iters: u64, tokens: Option<f64>) -> TrialRow {
        serde_json::from_value(json!({
            "id": id, "study_id": 1, "status": "completed", "created_at": "t", "updated_at": "t",
            "config_path": "/x/exp.yaml", "config_hash": "h",
            "overrides": [{"key": "micro_batch_size", "value": mbs},
                          {"key": "train_iters", "value": iters}],
            "argv": [], "env": [], "trial_dir": "/x/t", "iterations_seen": iters,
            "iterations_stored": iters, "tokens_per_s_per_gpu": tokens,
        }))
        .unwrap()
    }

    fn space(yaml: &str) -> Space {
        Space::parse(yaml, "test").unwrap()
    }

    fn snap(ts_ms: u64, gpus: &[(f64, f64, u64)]) -> Snapshot {
        Snapshot {
            ts_ms,
            gpus: gpus
                .iter()
                .enumerate()
                .map(|(i, &(util, power, vram))| GpuSample {
                    gpu: i as u32,
                    util_pct: Some(util),
                    power_w: Some(power),
                    vram_used_bytes: Some(vram << 30),
                    ..GpuSample::default()
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    fn mbs_space() -> Space {
        space(
            "name: mbs\ndescription: d\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2, 4]\n",
        )
    }

    /// The study measured on a GPU profile: its peaks are the config's.
    fn gpu_record() -> StudyRecord {
        let mut rec = record();
        rec.profile = "megatron".into();
        rec.basis = Some(Basis::Measured {
            profile: "megatron".into(),
            gpu: Some("AMD Instinct MI300X".into()),
        });
        rec
    }

    fn report_of(trials: &[TrialRow], samples: &BTreeMap<i64, Vec<Snapshot>>) -> Report {
        let rec = gpu_record();
        let sp = mbs_space();
        build(&Inputs {
            name: "s1",
            record: &rec,
            space: Some(&sp),
            trials,
            samples,
            module: "pre_trainer",
            // As the app layer decides for a study measured on a GPU.
            memory: crate::domain::study::MemoryCheck::Compared {
                mean_error: 0.05,
                candidates: 1,
            },
        })
    }

    /// The report of `rec` with no trials or samples.
    fn record_report(rec: &StudyRecord, memory: crate::domain::study::MemoryCheck) -> Report {
        let sp = mbs_space();
        build(&Inputs {
            name: "s1",
            record: rec,
            space: Some(&sp),
            trials: &[],
            samples: &BTreeMap::new(),
            module: "pre_trainer",
            memory,
        })
    }

    #[test]
    fn a_proxy_study_draws_no_forecast_beside_its_peaks() {
        let rec = record();
        assert!(rec.candidates.iter().any(|c| c.predicted_bytes.is_some()));
        let memory = crate::domain::study::MemoryCheck::NotCompared {
            why: "proxy-cpu is a CPU stand-in".into(),
        };
        let r = record_report(&rec, memory);
        assert!(r.rows.iter().all(|x| x.predicted_gib.is_none()));
        let md = r.markdown();
        assert!(
            md.contains("| Memory model | not compared: proxy-cpu is a CPU stand-in |"),
            "{md}"
        );
    }

    /// A CPU stand-in's winner: this node's GPUs were not its evidence, so no GPU telemetry is
    /// drawn or tabled, the report says why, and its cost is CPU time.
    #[test]
    fn a_stand_in_s_report_shows_no_gpu_telemetry_and_counts_cpu_time() {
        let rec = record();
        let sp = mbs_space();
        let trials = vec![trial(2, 2, 12, Some(1150.0))];
        let samples: BTreeMap<i64, Vec<Snapshot>> = [(2, vec![snap(10_000, &[(87.0, 612.0, 40)])])]
            .into_iter()
            .collect();
        let r = build(&Inputs {
            name: "s1",
            record: &rec,
            space: Some(&sp),
            trials: &trials,
            samples: &samples,
            module: "pre_trainer",
            memory: crate::domain::study::MemoryCheck::NotCompared {
                why: "proxy-cpu is a CPU stand-in".into(),
            },
        });
        assert!(r.telemetry.is_empty());
        let why: Vec<String> = r
            .charts()
            .into_iter()
            .filter_map(|c| c.err().map(|(_, why)| why))
            .collect();
        assert!(why.iter().any(|w| w.contains("CPU stand-in")), "{why:?}");
        let md = r.markdown();
        assert!(md.contains("| CPU time | 1.5 CPU-minutes |"), "{md}");
        assert!(!md.contains("GPU-minutes"), "{md}");
    }

    #[test]
    fn a_single_knob_study_reads_by_its_values() {
        let trials = vec![
            trial(1, 1, 12, Some(1000.0)),
            trial(2, 2, 12, Some(1150.0)),
            trial(3, 2, 36, Some(1200.0)),
            trial(4, 4, 12, None),
        ];
        let samples: BTreeMap<i64, Vec<Snapshot>> = [(
            3,
            vec![
                snap(10_000, &[(90.0, 500.0, 40), (70.0, 300.0, 42)]),
                snap(10_500, &[(100.0, 600.0, 41), (80.0, 400.0, 43)]),
                // A host-only sample: skipped.
                Snapshot {
                    ts_ms: 11_000,
                    ..Snapshot::default()
                },
            ],
        )]
        .into_iter()
        .collect();
        let r = report_of(&trials, &samples);
        let labels: Vec<&str> = r.rows.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(labels, ["1", "2", "4"]);
        assert_eq!(r.category_axis, "micro_batch_size");
        assert!(!r.horizontal);
        assert_eq!(r.winner, Some(1));
        assert_eq!(r.rows[1].trials, vec![2, 3]);
        // Tokens/s of the longest trial; every measured candidate has it.
        assert_eq!(r.rows[1].tokens_per_s, Some(1200.0));
        assert_eq!(r.metric, Metric::TokensPerS);
        let (v, lo, hi) = r.rows[1].throughput(Metric::TokensPerS).unwrap();
        assert_eq!(v, 1200.0);
        assert!(
            (lo - 1200.0 * 100.0 / 102.0).abs() < 1e-9 && (hi - 1200.0 * 100.0 / 99.0).abs() < 1e-9
        );
        assert_eq!(r.capacity_gib, Some(192.0));
        // Only trial 3 (of the winner) has samples: mean utilisation, mean power, fullest VRAM.
        assert_eq!(r.telemetry.len(), 1);
        assert_eq!(r.telemetry_gpus, 2);
        let t = &r.telemetry[0];
        assert_eq!((t.trial_id, t.iters), (3, Some(36)));
        assert_eq!(t.points.len(), 2);
        assert_eq!(t.points[1].t_s, 0.5);
        assert_eq!(t.points[0].util_pct, Some(80.0));
        assert_eq!(t.points[0].power_w, Some(400.0));
        assert_eq!(t.points[1].vram_gib, Some(43.0));
        assert_eq!(t.label(), "trial 3 (36 iterations)");
        let ranked: Vec<usize> = r.ranked().iter().map(|x| x.id).collect();
        assert_eq!(ranked, [1, 0, 2]);
        assert_eq!(
            r.snippet().unwrap(),
            "modules:\n  pre_trainer:\n    overrides:\n      micro_batch_size: 2\n"
        );
        let md = r.markdown();
        assert!(
            md.contains(
                "| 1 | 1 | **micro_batch_size=2** | winner | 100.0 | 99.0–102.0 | 12 | 1,200 |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| 3 | 2 | micro_batch_size=4 | oom | – | – | 0 | – | – | 14.00 | oom because |"
            ),
            "{md}"
        );
        assert!(
            md.contains("![Telemetry of the winner](telemetry.svg)"),
            "{md}"
        );
        assert!(
            md.contains("| trial 3 (36 iterations) | 2 | 0.5 | 85.0 | 450 | 43.00 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| Memory model | mean error 5.0 % against the measured peaks (1 candidate) |"
            ),
            "{md}"
        );
        assert!(md.contains("1. rung 1\n2. pick: #1\n"), "{md}");
        assert!(r.charts().iter().all(Result::is_ok));
    }

    #[test]
    fn without_tokens_or_telemetry_it_says_so() {
        let trials = vec![trial(1, 1, 12, Some(1000.0)), trial(2, 2, 12, None)];
        let r = report_of(&trials, &BTreeMap::new());
        assert_eq!(r.metric, Metric::StepMs);
        assert!(r.telemetry.is_empty());
        let skipped: Vec<String> = r
            .charts()
            .into_iter()
            .filter_map(|c| c.err().map(|(c, why)| format!("{}: {why}", c.stem())))
            .collect();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert!(
            skipped[0].starts_with("telemetry: no GPU telemetry"),
            "{skipped:?}"
        );
        assert!(
            r.markdown()
                .contains("No chart: no GPU telemetry was stored")
        );
    }

    #[test]
    fn several_knobs_and_flag_groups_get_short_labels() {
        let sp = space(
            "name: mf\ndescription: d\nknobs:\n  - flag: micro_batch_size\n    values: [1, 2]\n  - flag: \"@recompute\"\n    values:\n      - {recompute_granularity: null, recompute_num_layers: null}\n      - {recompute_granularity: full, recompute_num_layers: 2}\n",
        );
        let mut rec = record();
        rec.candidates = sp
            .candidates()
            .into_iter()
            .map(|c| CandidateRecord {
                overrides: c.overrides,
                ..cand(c.id, 1, "slower", Some(100.0 + c.id as f64))
            })
            .collect();
        rec.pick = Some(0);
        let r = build(&Inputs {
            name: "mf",
            record: &rec,
            space: Some(&sp),
            trials: &[],
            samples: &BTreeMap::new(),
            module: "pre_trainer",
            memory: crate::domain::study::MemoryCheck::Nothing,
        });
        let labels: Vec<&str> = r.rows.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "#0 micro_batch_size=1, recompute=none",
                "#1 micro_batch_size=1, recompute=full/2",
                "#2 micro_batch_size=2, recompute=none",
                "#3 micro_batch_size=2, recompute=full/2",
            ]
        );
        assert_eq!(r.category_axis, "candidate");
        assert!(r.horizontal, "long labels go down the side");
        assert_eq!(
            r.knobs[1],
            "`@recompute`: {recompute_granularity=none, recompute_num_layers=none} · {recompute_granularity=full, recompute_num_layers=2}"
        );
        assert_eq!(
            r.snippet().unwrap(),
            "modules:\n  pre_trainer:\n    overrides:\n      micro_batch_size: 1\n      recompute_granularity: null\n      recompute_num_layers: null\n"
        );
        // Without the space: the settings.
        let r = build(&Inputs {
            name: "mf",
            record: &rec,
            space: None,
            trials: &[],
            samples: &BTreeMap::new(),
            module: "pre_trainer",
            memory: crate::domain::study::MemoryCheck::Nothing,
        });
        assert_eq!(
            r.rows[1].label,
            "#1 micro_batch_size=1 recompute_granularity=full recompute_num_layers=2"
        );
    }

    #[test]
    fn zero_peaks_and_negative_predictions_are_not_taken_at_face_value() {
        let mut rec = gpu_record();
        rec.candidates[2].peak_memory_bytes = Some(0);
        rec.candidates[0].predicted_bytes = Some(-5.0 * GIB);
        // What the app layer gives a study measured on a GPU (its test checks the figure).
        let memory = crate::domain::study::MemoryCheck::Compared {
            mean_error: 0.5,
            candidates: 2,
        };
        let r = record_report(&rec, memory);
        assert_eq!(r.rows[2].peak_gib, None, "an OOM trial's 0 is no peak");
        assert_eq!(r.rows[0].predicted_gib, Some(-5.0));
        let md = r.markdown();
        assert!(
            md.contains(
                "(2 candidates); 1 prediction at or below 0 GiB (the calibration is off) |"
            ),
            "{md}"
        );
        let mut svg = String::new();
        {
            use plotters::prelude::*;
            charts::register_font().unwrap();
            let root = SVGBackend::with_string(&mut svg, charts::Chart::Memory.size(&r))
                .into_drawing_area();
            charts::draw(&root, &r, charts::Chart::Memory).unwrap();
            root.present().unwrap();
        }
        assert!(svg.contains("-5.0 (invalid)"));
        assert!(svg.contains("out of memory, no peak reported"));
    }

    /// A trial across two nodes gets a row per node, the slowest flagged; one on a single node
    /// (or on this machine) gets none, and without such trials there is no section.
    #[test]
    fn a_trial_across_nodes_gets_a_per_node_table() {
        use crate::domain::telemetry::GpuSummary;
        let node = |name: &str, step: f64, temp: f64, slowest: bool, hottest: bool| NodeSummary {
            node: name.into(),
            samples: 20,
            gpus: vec![
                GpuSummary {
                    gpu: 0,
                    samples: 20,
                    util_mean_pct: Some(90.0),
                    vram_peak_bytes: Some(140 << 30),
                    temp_max_c: [("junction".to_string(), temp)].into_iter().collect(),
                    ..GpuSummary::default()
                },
                GpuSummary {
                    gpu: 1,
                    samples: 20,
                    util_mean_pct: Some(80.0),
                    vram_peak_bytes: Some(141 << 30),
                    ..GpuSummary::default()
                },
            ],
            cpu_mean_pct: Some(35.2),
            temp_max_c: Some(temp),
            median_step_ms: Some(step),
            iterations: 40,
            slowest,
            hottest,
        };
        let mut across = trial(2, 2, 12, None);
        across.summary = Some(json!({
            "nodes": [node("gpu-a1", 1210.0, 80.0, false, true), node("gpu-a2", 1250.5, 70.0, true, false)],
        }));
        let mut one = trial(3, 2, 36, None);
        one.summary = Some(json!({ "nodes": [node("gpu-b1", 1200.0, 70.0, false, false)] }));
        let plain = trial(1, 1, 12, None);
        let r = report_of(&[plain.clone(), across, one], &BTreeMap::new());
        assert_eq!(r.nodes.len(), 1);
        assert_eq!(r.nodes[0].0, 2);
        let md = r.markdown();
        assert!(md.contains("## Per node\n"), "{md}");
        assert!(
            md.contains("| 2 | gpu-a1 | 1210.0 | 40 | 35 | 85 | 141.00 | 80 | hottest |"),
            "{md}"
        );
        assert!(
            md.contains("| 2 | gpu-a2 | 1250.5 | 40 | 35 | 85 | 141.00 | 70 | slowest |"),
            "{md}"
        );
        assert!(!md.contains("gpu-b1"), "{md}");
        // The section sits between the evidence and the charts.
        let at = |h: &str| md.find(h).unwrap();
        assert!(at("## Evidence") < at("## Per node") && at("## Per node") < at("## Charts"));
        let md = report_of(&[plain], &BTreeMap::new()).markdown();
        assert!(!md.contains("## Per node"), "{md}");
    }

    #[test]
    fn a_predicted_step_time_is_read_from_the_reason() {
        assert_eq!(
            predicted_ms(
                "not run: predicted 2790.5 ms, 12.5 % slower than #1 (predicted 2480.0 ms)"
            ),
            Some(2790.5)
        );
        assert_eq!(
            predicted_ms("not run: recomputation adds work: #3 fits"),
            None
        );
        assert_eq!(predicted_ms("predicted 352 GiB"), None);
    }

    #[test]
    fn yaml_scalars_read_back_as_written() {
        assert_eq!(yaml_scalar(&json!("selective")), "selective");
        assert_eq!(yaml_scalar(&json!("true")), "\"true\"");
        assert_eq!(yaml_scalar(&json!("1e-5")), "\"1e-5\"");
        assert_eq!(yaml_scalar(&json!("a b")), "\"a b\"");
        assert_eq!(yaml_scalar(&json!(null)), "null");
        assert_eq!(yaml_scalar(&json!(2.5)), "2.5");
        assert_eq!(cell("a|b"), "a\\|b");
    }

    /// Every chart draws on the SVG backend (its text as text) and on a bitmap (its text as
    /// pixels, from the embedded font).
    #[test]
    fn charts_draw_with_labels_and_legends() {
        use plotters::prelude::*;
        let trials = vec![trial(1, 1, 12, None), trial(2, 2, 12, None)];
        let samples: BTreeMap<i64, Vec<Snapshot>> = [(
            2,
            vec![
                snap(0, &[(50.0, 300.0, 10)]),
                snap(500, &[(60.0, 310.0, 11)]),
            ],
        )]
        .into_iter()
        .collect();
        let r = report_of(&trials, &samples);
        charts::register_font().unwrap();
        let expect: [(charts::Chart, &[&str]); 4] = [
            (
                charts::Chart::Throughput,
                &[
                    "step time, 20 % trimmed mean (ms), lower is better",
                    "micro_batch_size",
                    "winner (the pick)",
                    "ran out of memory",
                ],
            ),
            (
                charts::Chart::Memory,
                &[
                    "peak memory per GPU (GiB)",
                    "measured peak per GPU",
                    "predicted by the memory model",
                    "GPU capacity (192.0 GiB)",
                ],
            ),
            (
                charts::Chart::Pareto,
                &[
                    "Step time against peak memory",
                    "peak memory per GPU (GiB)",
                    "micro_batch_size=2 · 100.0 ms · 100.0 GiB",
                    "the pick",
                ],
            ),
            (
                charts::Chart::Telemetry,
                &[
                    "utilisation (%)",
                    "power (W)",
                    "VRAM used (GiB)",
                    "trial 2 (12 iterations)",
                ],
            ),
        ];
        for (chart, texts) in expect {
            let size = chart.size(&r);
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
                charts::draw(&root, &r, chart).unwrap();
                root.present().unwrap();
            }
            for t in texts {
                assert!(svg.contains(t), "{}: no `{t}`", chart.stem());
            }
            let mut px = vec![255u8; (size.0 * size.1 * 3) as usize];
            {
                let root =
                    text::Crisp(BitMapBackend::with_buffer(&mut px, size)).into_drawing_area();
                charts::draw(&root, &r, chart).unwrap();
                root.present().unwrap();
            }
            // The title's glyphs: dark pixels in the top band.
            let dark = px[..(size.0 * 36 * 3) as usize]
                .chunks(3)
                .filter(|p| p.iter().all(|c| *c < 100))
                .count();
            assert!(
                dark > 200,
                "{}: {dark} dark pixels in the title band",
                chart.stem()
            );
        }
    }
}
