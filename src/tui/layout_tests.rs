//! Tables at any width from 60 to 160 columns: the Studies list (a basis column; a long name
//! cut with `…` where its column ends, every column where the header puts it) and the Compare
//! pane (its figures whole, never a digit lost to the column's edge).
#![allow(clippy::unwrap_used)]

use super::app::{App, Msg, update};
use super::render_tests::{screen, trials_compare_app};
use crate::app::views::studies::{StudyStatus, StudySummary};
use crate::domain::evidence::Basis;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn study(name: &str, basis: Option<Basis>, unit: &'static str) -> StudySummary {
    StudySummary {
        id: 1,
        name: name.into(),
        space: "micro-batch-and-recompute".into(),
        experiment: "x.yaml".into(),
        status: StudyStatus::Finished,
        trials: 12,
        gpu_seconds: 12_345.0,
        pick: Some(
            [("micro_batch_size".to_string(), serde_json::json!(2))]
                .into_iter()
                .collect(),
        ),
        started: "2026-12-01T10:04:05.120Z".into(),
        profile: Some("proxy-cpu".into()),
        basis,
        cost_unit: unit,
        unmodeled: Vec::new(),
    }
}

fn studies_app() -> App {
    let mut app = App::new(vec!["proxy-cpu".into()], "proxy-cpu", false);
    update(
        &mut app,
        Msg::Key(KeyEvent::new(KeyCode::Char('6'), KeyModifiers::NONE)),
    );
    let proxy = Basis::Proxy {
        profile: "proxy-cpu".into(),
    };
    let gpu = Basis::Measured {
        profile: "primus".into(),
        gpu: Some("AMD Instinct MI300X".into()),
    };
    update(
        &mut app,
        Msg::Studies(Ok(vec![
            study(
                "micro-batch-and-recompute-20261204T115140",
                Some(proxy),
                "CPU",
            ),
            study("a", Some(gpu), "GPU"),
            study("unfinished-one", None, "GPU"),
        ])),
    );
    app
}

/// The column where the cell `word` starts on each of `lines` (after a space or a border).
fn starts(lines: &[&str], word: &str) -> Vec<Option<usize>> {
    lines
        .iter()
        .map(|l| {
            let b = [" ", "│"]
                .iter()
                .filter_map(|p| l.find(&format!("{p}{word}")).map(|b| b + p.len()))
                .min()?;
            Some(l[..b].chars().count())
        })
        .collect()
}

#[test]
fn the_studies_list_says_each_basis_and_cuts_long_names_in_line() {
    let mut app = studies_app();
    for w in [60, 80, 100, 120, 160] {
        let s = screen(&mut app, w, 16);
        let lines: Vec<&str> = s.lines().skip(3).take(4).collect();
        let (header, rows) = (lines[0], &lines[1..]);
        assert!(header.contains("basis"), "{w}:\n{s}");
        // Each row's status starts under the header's: a long name never pushes it along.
        let status = starts(&[header], "status")[0].unwrap();
        assert_eq!(
            starts(rows, "finished"),
            vec![Some(status); 3],
            "{w} columns:\n{s}"
        );
        // The long name is cut with `…`, never silently.
        assert!(rows[0].contains("…"), "{w}:\n{s}");
        let basis = starts(&[header], "basis")[0].unwrap();
        let cell = |r: &str| r.chars().skip(basis).take(5).collect::<String>();
        assert_eq!(cell(rows[0]), "proxy", "{w}:\n{s}");
        assert!(cell(rows[1]).starts_with("GPU"), "{w}:\n{s}");
        assert!(cell(rows[2]).starts_with('-'), "{w}:\n{s}");
    }
}

#[test]
fn the_compare_pane_keeps_every_digit_from_60_to_160_columns() {
    let mut app = trials_compare_app();
    let c = app.screens.trials.comparison.clone().unwrap();
    let figures = [
        format!("{:.1}", c.median_step_ms.as_ref().unwrap().a),
        format!("{:.1}", c.median_step_ms.as_ref().unwrap().b),
        format!("{:.0}", c.tokens_per_s_per_gpu.as_ref().unwrap().a),
        format!("{:.0}", c.tokens_per_s_per_gpu.as_ref().unwrap().b),
        format!("{:.2}", c.peak_mem_gib.as_ref().unwrap().a),
        format!("{:.2}", c.peak_mem_gib.as_ref().unwrap().b),
        "-8.9 ± 0.4 %".to_string(),
    ];
    for w in (60..=160).step_by(5) {
        let s = screen(&mut app, w, 30);
        let pane: String = s
            .lines()
            .skip_while(|l| !l.contains("┌ Compare"))
            .collect::<Vec<_>>()
            .join("\n");
        for f in &figures {
            let whole = [" ", "│"]
                .iter()
                .any(|end| pane.contains(&format!(" {f}{end}")));
            assert!(whole, "{f} at {w} columns:\n{pane}");
        }
        assert!(pane.contains("tokens/s/GPU"), "{w}:\n{pane}");
    }
}

#[test]
fn studies_of_one_cost_unit_say_it_in_the_header_and_keep_the_pick_whole() {
    let mut app = studies_app();
    let cpu = Basis::Proxy {
        profile: "proxy-cpu".into(),
    };
    update(
        &mut app,
        Msg::Studies(Ok(vec![study("demo-micro-batch", Some(cpu), "CPU")])),
    );
    let s = screen(&mut app, 80, 24);
    let lines: Vec<&str> = s.lines().skip(3).take(2).collect();
    assert!(lines[0].contains(" CPU-min "), "{s}");
    assert!(
        lines[1].contains(" 205.8 ") && lines[1].contains("micro_batch_size=2"),
        "{s}"
    );
}
