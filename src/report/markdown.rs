//! `report.md`: the Markdown summary [`Report::write`] puts beside the charts.

use super::*;

/// A YAML scalar: plain when that reads back as the same string, else double-quoted.
pub(super) fn yaml_scalar(v: &serde_json::Value) -> String {
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
pub(super) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub(super) fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or("–".into(), |x| format!("{x:.prec$}"))
}

impl Report {
    /// The Markdown summary (it links the charts [`Report::write`] makes beside it).
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        self.summary_table(&mut s);
        self.pick_section(&mut s);
        self.evidence_section(&mut s);
        if !self.nodes.is_empty() {
            s.push_str(&self.nodes_section());
        }
        self.charts_section(&mut s);
        self.decision_log(&mut s);
        s
    }

    /// The title and the table of what the study was and what it cost.
    fn summary_table(&self, s: &mut String) {
        let r = &self.record;
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
    }

    /// A row's step time as the pick states it: the statistic, the batch it is per, its 95 %
    /// confidence interval and sample count.
    fn step_text(&self, p: &Row) -> String {
        format!(
            "step time ({}) {} ms {} (95 % CI {}–{} ms, n {})",
            self.record.statistic.name(),
            opt(p.step_ms, 1),
            self.record.batch_unit(),
            opt(p.ci_low_ms, 1),
            opt(p.ci_high_ms, 1),
            p.n
        )
    }

    /// What to do: the pick with its figures and snippet, or why there is none.
    fn pick_section(&self, s: &mut String) {
        let r = &self.record;
        let _ = writeln!(s, "## Pick\n");
        match self.pick() {
            Some(p) if p.baseline => {
                let _ = writeln!(
                    s,
                    "**Keep the current settings** ({}, candidate {}): {}. {}.\n",
                    p.settings,
                    p.id,
                    self.step_text(p),
                    r.conclusion_text()
                );
            }
            Some(p) => {
                let mut line = format!(
                    "**{}** (candidate {}): {}",
                    p.settings,
                    p.id,
                    self.step_text(p)
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
    }

    /// Every candidate from best to worst, with its figures.
    fn evidence_section(&self, s: &mut String) {
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
    }

    /// Each chart with its caption, or why it is left out.
    fn charts_section(&self, s: &mut String) {
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
    }

    /// The search's decisions in order.
    fn decision_log(&self, s: &mut String) {
        let r = &self.record;
        let _ = writeln!(s, "## Decision log\n");
        if r.log.is_empty() {
            let _ = writeln!(s, "(empty)");
        }
        for (i, l) in r.log.iter().enumerate() {
            let _ = writeln!(s, "{}. {}", i + 1, l.replace('\n', " "));
        }
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
