//! The telemetry chart: utilisation, power and VRAM of the pick's trials over time, one panel
//! each, one line per trial.

use super::axis::{Axis, house_style};
use super::fmt::{num, tick_text};
use super::layout::{Mark, layout};
use super::{GREY_C, Look, PALETTE, RED_C, font_size};
use crate::report::{Report, TelemetryPoint};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One telemetry panel's figure.
struct Panel {
    caption: String,
    desc: &'static str,
    get: fn(&TelemetryPoint) -> Option<f64>,
    /// Fixed upper bound (utilisation: 100 %).
    top: Option<f64>,
    capacity: bool,
}

/// Utilisation, power and VRAM of the winner's trials over time, one line per trial.
pub fn telemetry<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    k: Look,
    r: &Report,
) -> DrawResult<(), DB> {
    let gpus = match r.telemetry_gpus {
        1 => "one GPU".to_string(),
        n => format!("{n} GPUs"),
    };
    let mut items: Vec<(Mark, String)> = r
        .telemetry
        .iter()
        .enumerate()
        .map(|(i, t)| (Mark::Line(PALETTE[i % PALETTE.len()]), t.label()))
        .collect();
    let any_vram = r
        .telemetry
        .iter()
        .any(|t| t.points.iter().any(|p| p.vram_gib.is_some()));
    if let (Some(c), true) = (r.capacity_gib, any_vram) {
        items.push((
            Mark::Dashed(RED_C),
            format!("GPU capacity ({} GiB)", num(c, 1)),
        ));
    }
    // The pick in full: the title has the room.
    let who = r.pick().map_or(String::new(), |p| {
        if p.label.starts_with('#') {
            format!(": {}", p.label)
        } else {
            format!(": {}={}", r.category_axis, p.label)
        }
    });
    let title = format!("GPU telemetry of the pick{who}");
    let plot = layout(root, k, &title, &super::subtitle(r), &items)?;
    let panels = [
        Panel {
            caption: format!("GPU utilisation (mean over {gpus})"),
            desc: "utilisation (%)",
            get: |p| p.util_pct,
            top: Some(100.0),
            capacity: false,
        },
        Panel {
            caption: format!("Board power (mean per GPU over {gpus})"),
            desc: "power (W)",
            get: |p| p.power_w,
            top: None,
            capacity: false,
        },
        Panel {
            caption: format!("VRAM in use (fullest of {gpus})"),
            desc: "VRAM used (GiB)",
            get: |p| p.vram_gib,
            top: None,
            capacity: true,
        },
    ];
    let tmax = r
        .telemetry
        .iter()
        .flat_map(|t| t.points.iter().map(|p| p.t_s))
        .fold(0.0, f64::max)
        .max(1.0);
    for (area, panel) in plot.split_evenly((3, 1)).iter().zip(&panels) {
        let values: Vec<f64> = r
            .telemetry
            .iter()
            .flat_map(|t| t.points.iter().filter_map(panel.get))
            .collect();
        if values.is_empty() {
            let (w, h) = area.dim_in_pixel();
            area.draw(&Text::new(
                format!("{}: not reported by the telemetry backend", panel.caption),
                (w as i32 / 2, h as i32 / 2),
                k.font(font_size::DESC)
                    .color(&GREY_C)
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            ))?;
            continue;
        }
        let vmax = values.iter().copied().fold(0.0, f64::max);
        let cap = r.capacity_gib.filter(|_| panel.capacity);
        let top = match panel.top {
            Some(t) => t.max(vmax) * 1.05,
            None => vmax.max(cap.unwrap_or(0.0)).max(1e-3) * 1.15,
        };
        let (xa, xstep) = Axis::ticked(0.0, tmax, 10);
        let (ya, ystep) = Axis::ticked(0.0, top, 5);
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.caption, k.font(font_size::DESC))
            .margin(k.px(8.0))
            .x_label_area_size(k.u(60.0))
            .y_label_area_size(k.u(110.0))
            .build_cartesian_2d(xa, ya)?;
        let xfmt = move |v: &f64| tick_text(*v, xstep);
        let yfmt = move |v: &f64| tick_text(*v, ystep);
        house_style(&mut chart.configure_mesh(), k)
            .x_label_formatter(&xfmt)
            .y_label_formatter(&yfmt)
            .x_desc("time since the first sample of the trial (s)")
            .y_desc(panel.desc)
            .draw()?;
        let n = r.telemetry.len();
        for (i, t) in r.telemetry.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            // Earlier trials wider, so a later trial drawn over the same values leaves them
            // visible; the samples as dots while there are few.
            let width = k.u(2.0 + 2.0 * (n - 1 - i).min(2) as f64);
            let dots = t.points.len() <= 30;
            // Consecutive samples with the figure, as one line each; a lone sample as a dot.
            let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
            for p in &t.points {
                match ((panel.get)(p), runs.last_mut()) {
                    (Some(v), Some(run)) => run.push((p.t_s, v)),
                    (None, Some(run)) if !run.is_empty() => runs.push(Vec::new()),
                    _ => {}
                }
            }
            for run in runs.into_iter().filter(|r| !r.is_empty()) {
                if run.len() > 1 {
                    chart.draw_series(LineSeries::new(run.clone(), color.stroke_width(width)))?;
                }
                if dots || run.len() == 1 {
                    chart.draw_series(
                        run.into_iter()
                            .map(|p| Circle::new(p, width + k.u(1.0), color.filled())),
                    )?;
                }
            }
        }
        if let Some(c) = cap {
            chart.draw_series(std::iter::once(DashedPathElement::new(
                vec![(0.0, c), (tmax, c)],
                k.u(10.0),
                k.u(6.0),
                RED_C.stroke_width(k.u(2.0)),
            )))?;
        }
    }
    Ok(())
}
