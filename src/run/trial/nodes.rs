//! Per-node figures of a trial across nodes: each node's own step time (from its log, when its
//! ranks print iterations) and its GPUs' and host's telemetry over the trial's training span,
//! with the slowest and the hottest node flagged.

use super::super::logparse::LogParser;
use super::super::steady::SteadyConfig;
use crate::domain::telemetry::{NodeSummary, Snapshot};
use crate::domain::trial::{Iteration, LogEvent, RunShape, Summary};
use crate::run::launch::slurm::node_log;
use crate::telemetry::sampler;
use std::path::Path;

/// The iterations a node's log printed (timed by `shape` where the log prints no step time).
fn node_iterations(log: &Path, shape: Option<RunShape>) -> Vec<Iteration> {
    let Ok(text) = std::fs::read(log) else {
        return Vec::new();
    };
    let mut p = LogParser::with_shape(shape);
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&text).lines() {
        for ev in p.feed(line) {
            if let LogEvent::Iteration(it) = ev {
                out.push(it);
            }
        }
    }
    out
}

/// The nodes of a trial in `dir`: those of `node_list` (Slurm's order, which `node-<n>.log`
/// follows), then any other node that sent telemetry. `steady`/`training` are the trial's spans
/// (Unix ms), as for its own telemetry summary.
pub fn summarize(
    dir: &Path,
    node_list: &[String],
    snaps: &[Snapshot],
    steady: Option<(u64, u64)>,
    training: Option<(u64, u64)>,
    shape: Option<RunShape>,
    cfg: &SteadyConfig,
) -> Vec<NodeSummary> {
    let mut names: Vec<String> = node_list.to_vec();
    for s in snaps {
        if let Some(n) = &s.node
            && !names.contains(n)
        {
            names.push(n.clone());
        }
    }
    let none = std::collections::BTreeSet::new();
    let mut out: Vec<NodeSummary> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let iters = if i < node_list.len() {
                node_iterations(&node_log(dir, i as u32), shape)
            } else {
                Vec::new()
            };
            let step = Summary::from_parts(&iters, &[], None, cfg).median_step_ms;
            let mine: Vec<Snapshot> = snaps
                .iter()
                .filter(|s| s.node.as_deref() == Some(name.as_str()))
                .cloned()
                .collect();
            let (gpus, _) = sampler::summarize_training(&mine, &none, steady, training);
            let cpu: Vec<f64> = mine.iter().filter_map(|s| s.host.cpu_pct).collect();
            let temp = gpus
                .iter()
                .flat_map(|g| g.temp_max_c.values().copied())
                .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))));
            NodeSummary {
                node: name.clone(),
                samples: mine.len(),
                gpus,
                cpu_mean_pct: (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64),
                temp_max_c: temp,
                median_step_ms: step,
                iterations: iters.len() as u64,
                slowest: false,
                hottest: false,
            }
        })
        .collect();
    flag(&mut out);
    out
}

/// Flags the slowest node (longest median step) and the hottest (hottest GPU), each only when
/// at least two nodes have the figure and one stands above every other (a tie flags none).
pub fn flag(nodes: &mut [NodeSummary]) {
    let pick = |nodes: &[NodeSummary], f: fn(&NodeSummary) -> Option<f64>| -> Option<usize> {
        let with: Vec<(usize, f64)> = nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| f(n).map(|v| (i, v)))
            .collect();
        if with.len() < 2 {
            return None;
        }
        let (top, v) = *with.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        let alone = with.iter().filter(|(_, x)| *x >= v).count() == 1;
        alone.then_some(top)
    };
    if let Some(i) = pick(nodes, |n| n.median_step_ms) {
        nodes[i].slowest = true;
    }
    if let Some(i) = pick(nodes, |n| n.temp_max_c) {
        nodes[i].hottest = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::telemetry::{GpuSample, HostSample};

    fn snap(node: &str, ts: u64, temp: f64) -> Snapshot {
        Snapshot {
            ts_ms: ts,
            node: Some(node.into()),
            gpus: vec![GpuSample {
                gpu: 0,
                util_pct: Some(90.0),
                temp_c: [("edge".to_string(), temp)].into_iter().collect(),
                ..GpuSample::default()
            }],
            host: HostSample {
                cpu_pct: Some(50.0),
                ..HostSample::default()
            },
            ..Snapshot::default()
        }
    }

    #[test]
    fn each_node_gets_its_own_step_and_telemetry_and_the_extremes_are_flagged() {
        let d = tempfile::tempdir().unwrap();
        let log = |ms: f64| {
            (1..=8)
                .map(|i| {
                    format!(
                        " [2026-01-01 00:00:00] iteration {i:>8}/      50 | consumed samples: \
                         {} | elapsed time per iteration (ms): {ms:.1} | learning rate: \
                         1.0E-04 | global batch size:    16 | lm loss: 1.0E+01 | loss \
                         scale: 1.0 | number of skipped iterations:   0 | number of nan \
                         iterations:   0 |\n",
                        i * 16
                    )
                })
                .collect::<String>()
        };
        std::fs::write(node_log(d.path(), 0), log(100.0)).unwrap();
        std::fs::write(node_log(d.path(), 1), log(130.0)).unwrap();
        let snaps = vec![
            snap("n1", 1000, 70.0),
            snap("n2", 1000, 85.0),
            snap("n1", 2000, 71.0),
            snap("n2", 2000, 84.0),
        ];
        let names = ["n1".to_string(), "n2".to_string()];
        let nodes = summarize(
            d.path(),
            &names,
            &snaps,
            None,
            None,
            None,
            &SteadyConfig::default(),
        );
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].node, "n1");
        assert_eq!(nodes[0].iterations, 8);
        assert_eq!(nodes[0].samples, 2);
        assert!((nodes[0].median_step_ms.unwrap() - 100.0).abs() < 1e-9);
        assert!((nodes[1].median_step_ms.unwrap() - 130.0).abs() < 1e-9);
        assert!(nodes[1].slowest && !nodes[0].slowest);
        assert_eq!(nodes[1].temp_max_c, Some(85.0));
        assert!(nodes[1].hottest && !nodes[0].hottest);
        // One node with a figure is not "the slowest".
        let mut one = vec![nodes[0].clone()];
        one[0].slowest = false;
        flag(&mut one);
        assert!(!one[0].slowest);
        // Nor is one of two that tie.
        let mut tie = vec![nodes[0].clone(), nodes[0].clone()];
        tie[1].node = "n2".into();
        tie[0].slowest = false;
        flag(&mut tie);
        assert!(!tie[0].slowest && !tie[1].slowest, "{tie:?}");
    }
}
