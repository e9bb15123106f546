//! Axes: round ticks over an f64 range with our own label text, and the candidate axis of the
//! bar-like charts (one category per candidate, its label centred on its tick).

use super::fmt::tick_text;
use super::{Look, font_size};
use crate::report::Report;
use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

/// A step between ticks of 1, 2, 2.5 or 5 × 10^k giving about `target` ticks over `span`.
pub fn nice_step(span: f64, target: usize) -> f64 {
    let raw = (span / target.max(1) as f64).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    let k = match raw / mag {
        n if n <= 1.0 => 1.0,
        n if n <= 2.0 => 2.0,
        n if n <= 2.5 => 2.5,
        n if n <= 5.0 => 5.0,
        _ => 10.0,
    };
    k * mag
}

/// Tick positions over `lo..hi` and their step.
pub fn ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let step = nice_step(hi - lo, target);
    let first = (lo / step).ceil() as i64;
    let v: Vec<f64> = (first..)
        .map(|k| k as f64 * step)
        .take_while(|x| *x <= hi + step * 1e-9)
        .take(100)
        .collect();
    (v, step)
}

/// A linear f64 axis with the tick positions given (plotters' `WithKeyPoints` over an f64
/// range cannot take a label formatter).
#[derive(Debug, Clone)]
pub struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub bold: Vec<f64>,
    pub light: Vec<f64>,
}

impl Ranged for Axis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        if self.hi == self.lo {
            return (limit.0 + limit.1) / 2;
        }
        let f = (v - self.lo) / (self.hi - self.lo);
        limit.0 + ((limit.1 - limit.0) as f64 * f).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

impl Axis {
    /// `lo..hi` with about `target` round ticks and a light line between two; and the step.
    pub fn ticked(lo: f64, hi: f64, target: usize) -> (Axis, f64) {
        let (bold, step) = ticks(lo, hi, target);
        let light = bold
            .iter()
            .map(|t| t + step / 2.0)
            .filter(|t| *t < hi)
            .collect();
        (
            Axis {
                lo,
                hi,
                bold,
                light,
            },
            step,
        )
    }
}

pub type CatChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Axis, Axis>>;

/// The candidate axis: positions, orientation and labels.
pub struct Cat<'r> {
    pub labels: Vec<&'r str>,
    pub horizontal: bool,
}

impl Cat<'_> {
    pub fn n(&self) -> usize {
        self.labels.len()
    }

    /// Position of candidate `i` on its axis (the first one on the left, or at the top).
    pub fn pos(&self, i: usize) -> f64 {
        if self.horizontal {
            (self.n() - 1 - i) as f64
        } else {
            i as f64
        }
    }

    /// Chart coordinates of (candidate axis, value axis).
    pub fn pt(&self, c: f64, v: f64) -> (f64, f64) {
        if self.horizontal { (v, c) } else { (c, v) }
    }

    fn label_at(&self, p: f64) -> String {
        let k = p.round();
        if (p - k).abs() > 0.01 || k < 0.0 || k as usize >= self.n() {
            return String::new();
        }
        let i = if self.horizontal {
            self.n() - 1 - k as usize
        } else {
            k as usize
        };
        self.labels[i].to_string()
    }
}

/// A chart with the candidates along one axis and a value range along the other.
pub fn cat_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    k: Look,
    r: &Report,
    cat: &Cat<'_>,
    (lo, hi): (f64, f64),
    value_desc: &str,
) -> DrawResult<CatChart<'a, DB>, DB> {
    let (value, step) = Axis::ticked(lo, hi, if cat.horizontal { 8 } else { 6 });
    let n = cat.n() as f64;
    let cats = Axis {
        lo: -0.5,
        hi: n - 0.5,
        bold: (0..cat.n()).map(|i| i as f64).collect(),
        light: Vec::new(),
    };
    let label_w = cat
        .labels
        .iter()
        .map(|l| {
            area.estimate_text_size(l, &k.font(font_size::TICK))
                .map_or(9 * l.len() as u32, |(w, _)| w)
        })
        .max()
        .unwrap_or(0);
    let mut b = ChartBuilder::on(area);
    let mut chart = if cat.horizontal {
        b.x_label_area_size(k.u(70.0))
            .y_label_area_size(label_w + k.u(60.0))
            .build_cartesian_2d(value, cats)?
    } else {
        b.x_label_area_size(k.u(75.0))
            .y_label_area_size(k.u(115.0))
            .build_cartesian_2d(cats, value)?
    };
    let vfmt = move |v: &f64| tick_text(*v, step);
    let cfmt = |v: &f64| cat.label_at(*v);
    let mut mesh = chart.configure_mesh();
    house_style(&mut mesh, k);
    if cat.horizontal {
        mesh.x_desc(value_desc)
            .y_desc(&r.category_axis)
            .x_label_formatter(&vfmt)
            .y_label_formatter(&cfmt);
    } else {
        mesh.x_desc(&r.category_axis)
            .y_desc(value_desc)
            .x_label_formatter(&cfmt)
            .y_label_formatter(&vfmt);
    }
    mesh.draw()?;
    Ok(chart)
}

/// The grid, axes and fonts every chart shares (scaled by `k`); the caller adds its
/// descriptions and label formatters.
pub fn house_style<'m, 'a, 'b, X, Y, DB>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
    k: Look,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB>
where
    X: Ranged,
    Y: Ranged,
    DB: DrawingBackend,
{
    mesh.label_style(k.font(font_size::TICK))
        .axis_desc_style(k.font(font_size::DESC))
        .bold_line_style(BLACK.mix(0.15).stroke_width(k.u(1.0)))
        .light_line_style(BLACK.mix(0.05).stroke_width(k.u(1.0)))
        .axis_style(BLACK.stroke_width(k.u(1.0)))
        .set_all_tick_mark_size(k.px(5.0))
}

/// Hatches the pixel rectangle between chart points `a` and `b` with 45° lines `gap` px apart.
pub fn hatch<DB: DrawingBackend>(
    chart: &mut CatChart<'_, DB>,
    k: Look,
    a: (f64, f64),
    b: (f64, f64),
    color: RGBAColor,
) -> DrawResult<(), DB> {
    let pa = chart.backend_coord(&a);
    let pb = chart.backend_coord(&b);
    let (w, h) = ((pa.0 - pb.0).abs(), (pa.1 - pb.1).abs());
    // The top-left corner in chart coordinates: lines are offsets from it in pixels.
    let anchor = (
        if pa.0 <= pb.0 { a.0 } else { b.0 },
        if pa.1 <= pb.1 { a.1 } else { b.1 },
    );
    let gap = k.px(14.0).max(4) as usize;
    let style = color.stroke_width(k.u(1.0));
    let mut lines = Vec::new();
    for t in (-h..w).step_by(gap) {
        let ya = (t + h - w).max(0);
        let yb = (t + h).min(h);
        if ya < yb {
            lines.push(vec![(t + h - ya, ya), (t + h - yb, yb)]);
        }
    }
    for l in lines {
        chart.draw_series(std::iter::once(
            EmptyElement::at(anchor) + PathElement::new(l, style),
        ))?;
    }
    Ok(())
}
