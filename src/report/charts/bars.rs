//! The per-candidate charts: throughput (median and 95 % CI, predictions apart) and peak memory
//! (measured and predicted bars, centred on their candidate's tick). A candidate without a
//! measurement is a hatched column naming its verdict, never a blank.

use super::axis::{Cat, CatChart, cat_chart, hatch};
use super::fmt::{MemFmt, grouped, num};
use super::layout::{Mark, diamond, layout};
use super::{
    BLUE_C, GREEN_C, GREY_C, Look, ORANGE_C, PURPLE_C, RED_C, font_size, subtitle, unmeasured_text,
};
use crate::report::{Metric, Report, Row, VerdictKind};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A value of the throughput metric as a label.
fn metric_text(m: Metric, v: f64) -> String {
    match m {
        Metric::StepMs => format!("{} ms", num(v, 1)),
        Metric::TokensPerS => grouped(v),
    }
}

/// The text along an unmeasured candidate's column: its colour, and whether it starts from
/// the high end.
struct Label {
    text: String,
    color: RGBColor,
    at_high: bool,
}

/// Draws the hatched column of an unmeasured candidate at category position `c` over the value
/// range `lo..hi` (`half` wide each side), with `text` along it: from the low end, or from the
/// high end when `at_high` (to stay clear of a mark near the low end).
fn no_data<DB: DrawingBackend>(
    chart: &mut CatChart<'_, DB>,
    k: Look,
    cat: &Cat<'_>,
    c: f64,
    half: f64,
    (lo, hi): (f64, f64),
    label: Label,
) -> DrawResult<(), DB> {
    let Label {
        text,
        color,
        at_high,
    } = label;
    let a = cat.pt(c - half, lo);
    let b = cat.pt(c + half, hi);
    chart.draw_series(std::iter::once(Rectangle::new(
        [a, b],
        GREY_C.mix(0.05).filled(),
    )))?;
    hatch(chart, k, a, b, GREY_C.mix(0.22))?;
    chart.draw_series(std::iter::once(Rectangle::new(
        [a, b],
        GREY_C.mix(0.6).stroke_width(k.u(1.0)),
    )))?;
    let f = k.font(font_size::DATA).color(&color);
    let pad = k.px(10.0);
    let (at, off, style) = match (cat.horizontal, at_high) {
        (true, false) => (
            cat.pt(c, lo),
            (pad, 0),
            f.pos(Pos::new(HPos::Left, VPos::Center)),
        ),
        (true, true) => (
            cat.pt(c, hi),
            (-pad, 0),
            f.pos(Pos::new(HPos::Right, VPos::Center)),
        ),
        // Vertical columns: the text turned to read upwards.
        (false, false) => (
            cat.pt(c, lo),
            (0, -pad),
            f.transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ),
        (false, true) => (
            cat.pt(c, hi),
            (0, pad),
            f.transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Right, VPos::Center)),
        ),
    };
    chart.draw_series(std::iter::once(
        EmptyElement::at(at) + Text::new(text, off, style),
    ))?;
    Ok(())
}

/// An unmeasured candidate's predicted value in the chart's metric: the step time the search's
/// model predicted, carried over to tokens/s through the tokens per step of the measured
/// candidates (tokens/s × step time, their median).
fn predicted(r: &Report, row: &Row) -> Option<f64> {
    let ms = row.predicted_ms.filter(|v| *v > 0.0 && !row.measured())?;
    match r.metric {
        Metric::StepMs => Some(ms),
        Metric::TokensPerS => {
            let mut per_step: Vec<f64> = r
                .rows
                .iter()
                .filter_map(|x| Some(x.tokens_per_s? * x.step_ms?))
                .collect();
            per_step.sort_by(f64::total_cmp);
            per_step.get(per_step.len() / 2).map(|t| t / ms)
        }
    }
}

/// Step time (or tokens/s) with its 95 % CI per candidate; predictions and the unmeasured apart.
pub fn throughput<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    k: Look,
    r: &Report,
) -> DrawResult<(), DB> {
    let m = r.metric;
    let vals: Vec<Option<(f64, f64, f64)>> = r.rows.iter().map(|x| x.throughput(m)).collect();
    let preds: Vec<Option<f64>> = r.rows.iter().map(|x| predicted(r, x)).collect();
    let winner = r.winner;
    let mut items = Vec::new();
    if vals
        .iter()
        .enumerate()
        .any(|(i, v)| v.is_some() && Some(i) != winner)
    {
        items.push((
            Mark::ErrBar(BLUE_C, r.horizontal),
            format!("{} with 95 % CI", r.record.statistic.name()),
        ));
    }
    if winner.is_some() {
        items.push((
            Mark::ErrBar(GREEN_C, r.horizontal),
            "winner (the pick)".to_string(),
        ));
    }
    if preds.iter().any(Option::is_some) {
        items.push((
            Mark::Hollow(PURPLE_C),
            "prediction, not measured".to_string(),
        ));
    }
    if vals.iter().any(Option::is_none) {
        items.push((
            Mark::Shade,
            "not measured (why along the column)".to_string(),
        ));
    }
    let (title, desc) = match m {
        Metric::StepMs => (
            "Step time per candidate",
            format!(
                "step time, {} (ms), lower is better",
                r.record.statistic.name()
            ),
        ),
        Metric::TokensPerS => (
            "Throughput per candidate",
            "throughput (tokens/s per GPU), higher is better".to_string(),
        ),
    };
    let plot = layout(root, k, title, &subtitle(r), &items)?;
    let all = vals
        .iter()
        .flatten()
        .flat_map(|v| [v.1, v.2])
        .chain(preds.iter().flatten().copied());
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let span = (hi - lo).max(hi.abs() * 0.05).max(1e-6);
    let bottom = (lo - span * 0.2).max(0.0);
    let top = hi + span * 0.2;
    let cat = Cat {
        labels: r.rows.iter().map(|x| x.label.as_str()).collect(),
        horizontal: r.horizontal,
    };
    let mut chart = cat_chart(&plot, k, r, &cat, (bottom, top), &desc)?;
    let label_off = if r.horizontal {
        (-k.px(20.0), -k.px(28.0))
    } else {
        (k.px(14.0), -k.px(10.0))
    };
    for (i, (row, v)) in r.rows.iter().zip(&vals).enumerate() {
        let c = cat.pos(i);
        let Some((v, lo, hi)) = v else {
            let pred = preds[i];
            // The text keeps clear of the prediction's mark.
            let mid = (bottom + top) / 2.0;
            let at_high = pred.is_some_and(|p| p < mid);
            no_data(
                &mut chart,
                k,
                &cat,
                c,
                0.42,
                (bottom, top),
                Label {
                    text: unmeasured_text(row),
                    color: if row.verdict == VerdictKind::Oom {
                        RED_C
                    } else {
                        GREY_C
                    },
                    at_high,
                },
            )?;
            if let Some(p) = pred {
                chart.draw_series(std::iter::once(
                    EmptyElement::at(cat.pt(c, p))
                        + diamond((0, 0), k.px(9.0), PURPLE_C.stroke_width(k.u(2.5)))
                        + Text::new(
                            format!("≈{} predicted", metric_text(m, p)),
                            label_off,
                            k.font(font_size::DATA).color(&PURPLE_C),
                        ),
                ))?;
            }
            continue;
        };
        let color = if Some(i) == winner { GREEN_C } else { BLUE_C };
        let s = color.stroke_width(k.u(2.0));
        // Caps 18 px wide, whatever the scale.
        let w = k.px(9.0);
        let cap = if r.horizontal {
            [(0, -w), (0, w)]
        } else {
            [(-w, 0), (w, 0)]
        };
        chart.draw_series(std::iter::once(PathElement::new(
            vec![cat.pt(c, *lo), cat.pt(c, *hi)],
            s,
        )))?;
        for end in [*lo, *hi] {
            chart.draw_series(std::iter::once(
                EmptyElement::at(cat.pt(c, end)) + PathElement::new(cap.to_vec(), s),
            ))?;
        }
        let mut text = metric_text(m, *v);
        if row.verdict == VerdictKind::Tie {
            text.push_str(" (tie)");
        }
        chart.draw_series(std::iter::once(
            EmptyElement::at(cat.pt(c, *v))
                + Circle::new((0, 0), k.u(7.0), color.filled())
                + Text::new(text, label_off, k.font(font_size::DATA)),
        ))?;
    }
    Ok(())
}

/// Measured and predicted peak memory per candidate, with the capacity line.
pub fn memory<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    k: Look,
    r: &Report,
) -> DrawResult<(), DB> {
    let any_peak = r.rows.iter().any(|x| x.peak_gib.is_some());
    let any_pred = r.rows.iter().any(|x| x.predicted_gib.is_some());
    let data_max = r
        .rows
        .iter()
        .flat_map(|x| [x.peak_gib, x.predicted_gib])
        .flatten()
        .fold(0.0, f64::max);
    // A capacity far above every bar (a CPU proxy's peaks against a GPU's memory) would flatten
    // the bars: it is then named, not drawn.
    let cap = r.capacity_gib;
    let cap_drawn = cap.filter(|c| data_max <= 0.0 || *c <= 4.0 * data_max);
    let fmt = MemFmt::of(
        r.rows
            .iter()
            .flat_map(|x| [x.peak_gib, x.predicted_gib])
            .flatten()
            .chain(cap_drawn),
    );
    let mut items = Vec::new();
    if any_peak {
        items.push((Mark::Bar(BLUE_C), "measured peak per GPU".to_string()));
    }
    if any_pred {
        items.push((
            Mark::Bar(ORANGE_C),
            "predicted by the memory model".to_string(),
        ));
    }
    match (cap, cap_drawn) {
        (Some(c), Some(_)) => items.push((
            Mark::Dashed(RED_C),
            format!("GPU capacity ({})", fmt.with_unit(c)),
        )),
        (Some(c), None) => items.push((
            Mark::Dashed(RED_C),
            format!(
                "GPU capacity {} GiB: far above these peaks, not drawn",
                num(c, 1)
            ),
        )),
        _ => {}
    }
    if r.rows.iter().any(|x| x.peak_gib.is_none()) {
        items.push((
            Mark::Shade,
            "no measured peak (why along the column)".to_string(),
        ));
    }
    let title = match (any_peak, any_pred) {
        (true, true) => "Peak GPU memory per candidate: measured and predicted",
        (false, true) => "Predicted peak GPU memory per candidate",
        _ => "Measured peak GPU memory per candidate",
    };
    let plot = layout(root, k, title, &subtitle(r), &items)?;
    let max = fmt.value(data_max.max(cap_drawn.unwrap_or(0.0))).max(1e-3);
    // Room beyond the longest bar for its label (`116.0 (OOM)` when horizontal).
    let top = max * if r.horizontal { 1.3 } else { 1.12 };
    let cat = Cat {
        labels: r.rows.iter().map(|x| x.label.as_str()).collect(),
        horizontal: r.horizontal,
    };
    let desc = format!("peak memory per GPU ({})", fmt.unit);
    let mut chart = cat_chart(&plot, k, r, &cat, (0.0, top), &desc)?;
    // Measured first (left, or on top), predicted beside it; a lone series on the tick.
    let two = any_peak && any_pred;
    let (half, off) = if two { (0.18, 0.19) } else { (0.28, 0.0) };
    let first = if r.horizontal { off } else { -off };
    let end_label = |text: String| {
        if r.horizontal {
            Text::new(
                text,
                (k.px(6.0), 0),
                k.font(font_size::DATA)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            )
        } else {
            Text::new(
                text,
                (0, -k.px(5.0)),
                k.font(font_size::DATA)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }
    };
    for (i, row) in r.rows.iter().enumerate() {
        let c = cat.pos(i);
        let mut slots = Vec::new();
        if any_peak {
            slots.push((row.peak_gib, BLUE_C, c + first));
        }
        if any_pred {
            slots.push((row.predicted_gib, ORANGE_C, c - first));
        }
        for (value, color, at) in slots {
            let Some(v) = value else {
                if color == BLUE_C {
                    let (text, tc) = if row.verdict == VerdictKind::Oom {
                        ("out of memory, no peak reported".to_string(), RED_C)
                    } else if row.measured() {
                        ("no peak reported".to_string(), GREY_C)
                    } else {
                        (unmeasured_text(row), GREY_C)
                    };
                    let label = Label {
                        text,
                        color: tc,
                        at_high: false,
                    };
                    no_data(&mut chart, k, &cat, at, half, (0.0, top), label)?;
                }
                continue;
            };
            if v <= 0.0 {
                // A miscalibrated model can predict nothing or less: no bar, the value in words.
                chart.draw_series(std::iter::once(
                    EmptyElement::at(cat.pt(at, 0.0))
                        + end_label(format!("{} (invalid)", fmt.text(v))),
                ))?;
                continue;
            }
            let bar = [cat.pt(at - half, 0.0), cat.pt(at + half, fmt.value(v))];
            chart.draw_series(std::iter::once(Rectangle::new(bar, color.filled())))?;
            let text = if color == BLUE_C && !row.measured() {
                format!("{} ({})", fmt.text(v), row.short_verdict())
            } else {
                fmt.text(v)
            };
            chart.draw_series(std::iter::once(
                EmptyElement::at(cat.pt(at, fmt.value(v))) + end_label(text),
            ))?;
        }
    }
    if let Some(c) = cap_drawn {
        let n = r.rows.len() as f64;
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![cat.pt(-0.5, fmt.value(c)), cat.pt(n - 0.5, fmt.value(c))],
            k.u(10.0),
            k.u(6.0),
            RED_C.stroke_width(k.u(2.0)),
        )))?;
    }
    Ok(())
}
