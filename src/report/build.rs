//! [`build`]: from what the store holds to a [`Report`], with no I/O.

use super::*;

/// A trial's own overrides: the candidate's, without what the runner adds.
/// Whether a stored trial ran this candidate: it carries every one of the candidate's values
/// (command-line `--set` values may come with them).
pub fn ran(t: &TrialRow, c: &Overrides) -> bool {
    let own = crate::run::trial::trial_settings(t);
    c.iter().all(|(k, v)| own.get(k) == Some(v))
}

/// A value as short text: strings without quotes, null as `none`.
pub(super) fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "none".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub(super) fn knob_name(k: &Knob) -> &str {
    k.flag.trim_start_matches('@')
}

/// The text of a knob's value in a candidate: the value, or for a knob setting several flags
/// (`@name`) its non-null values joined by `/` (`none` when all are null).
pub(super) fn knob_value(k: &Knob, o: &Overrides) -> Option<String> {
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

pub(super) fn knob_line(k: &Knob) -> String {
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
pub(super) fn labels(space: Option<&Space>, cands: &[CandidateRecord]) -> (Vec<String>, String) {
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
pub(super) fn point(s: &Snapshot, t0: u64) -> Option<TelemetryPoint> {
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
pub(super) fn predicted_ms(why: &str) -> Option<f64> {
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
pub(super) fn trial_nodes(t: &TrialRow) -> Option<Vec<NodeSummary>> {
    let v = t.summary.as_ref()?.get("nodes")?;
    let nodes: Vec<NodeSummary> = serde_json::from_value(v.clone()).ok()?;
    (nodes.len() >= 2).then_some(nodes)
}

/// Rank of a verdict in the evidence table.
pub(super) fn verdict_rank(v: VerdictKind) -> u8 {
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
