//! The report's charts, drawn with plotters on any backend, so the PNG (bitmap backend) and the
//! SVG (SVG backend) of a chart come from the same code. Text is laid out and, in PNGs, drawn
//! with the embedded DejaVu Sans through plotters' `ab_glyph` renderer: no system font library
//! (fontconfig, FreeType) and no font package is needed.

use super::{Metric, Report, TelemetryPoint};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// DejaVu Sans (assets/fonts/README.md says where it comes from and its licence).
pub(super) static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

const BLUE_C: RGBColor = RGBColor(31, 119, 180);
const ORANGE_C: RGBColor = RGBColor(255, 127, 14);
const GREEN_C: RGBColor = RGBColor(44, 160, 44);
const RED_C: RGBColor = RGBColor(214, 39, 40);
const GREY_C: RGBColor = RGBColor(90, 90, 90);
const PALETTE: [RGBColor; 6] = [
    BLUE_C,
    ORANGE_C,
    GREEN_C,
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
];

/// Registers the embedded font with plotters (once per process).
pub fn register_font() -> std::io::Result<()> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE
        .get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::other(
            "the embedded font could not be loaded",
        ))
    }
}

/// The report's charts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    Throughput,
    Memory,
    Telemetry,
}

impl Chart {
    /// File name without extension.
    pub fn stem(self) -> &'static str {
        match self {
            Chart::Throughput => "throughput",
            Chart::Memory => "memory",
            Chart::Telemetry => "telemetry",
        }
    }

    pub fn heading(self) -> &'static str {
        match self {
            Chart::Throughput => "Throughput by candidate",
            Chart::Memory => "Peak memory by candidate",
            Chart::Telemetry => "Telemetry of the winner",
        }
    }

    /// What the chart shows, for report.md.
    pub fn caption(self, r: &Report) -> String {
        match (self, r.metric) {
            (Chart::Throughput, Metric::StepMs) => "Median step time of each candidate (ms, lower \
                 is better) with its 95 % confidence interval; the pick in green. Candidates \
                 without a measurement are marked × with their verdict."
                .into(),
            (Chart::Throughput, Metric::TokensPerS) => "Tokens per second per GPU of each \
                 candidate (higher is better); the bars are the 95 % confidence interval of the \
                 median step time carried over to tokens/s. The pick in green; candidates without \
                 a measurement are marked × with their verdict."
                .into(),
            (Chart::Memory, _) => format!(
                "Peak GPU memory per GPU of each candidate (GiB): measured (blue) and predicted by \
                 the calibrated memory model (orange){}.",
                if r.capacity_gib.is_some() {
                    "; the dashed red line is the GPU's capacity"
                } else {
                    "; the GPU's capacity is unknown"
                }
            ),
            (Chart::Telemetry, _) => format!(
                "GPU utilisation (%), board power (W) and VRAM in use (GiB) over each trial of the \
                 winner, from {} GPU(s) sampled during the trial.",
                r.telemetry_gpus
            ),
        }
    }

    /// Pixel size (also the SVG's view box).
    pub fn size(self, r: &Report) -> (u32, u32) {
        match self {
            Chart::Telemetry => (1100, 1000),
            _ if r.horizontal => (1200, (200 + 38 * r.rows.len() as u32).max(450)),
            _ => (1000, 620),
        }
    }
}

/// Draws `chart` as `<stem>.png` and `<stem>.svg` in `dir`.
pub fn render(r: &Report, chart: Chart, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    register_font()?;
    let size = chart.size(r);
    let err = |p: &Path| {
        let p = p.to_path_buf();
        move |e: String| std::io::Error::other(format!("{}: {e}", p.display()))
    };
    let png = dir.join(format!("{}.png", chart.stem()));
    {
        let root = super::text::Crisp(BitMapBackend::new(&png, size)).into_drawing_area();
        draw(&root, r, chart).map_err(|e| err(&png)(e.to_string()))?;
        root.present().map_err(|e| err(&png)(e.to_string()))?;
    }
    let svg = dir.join(format!("{}.svg", chart.stem()));
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        draw(&root, r, chart).map_err(|e| err(&svg)(e.to_string()))?;
        root.present().map_err(|e| err(&svg)(e.to_string()))?;
    }
    Ok(vec![png, svg])
}

/// Draws `chart` on any backend.
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    r: &Report,
    chart: Chart,
) -> DrawResult<(), DB> {
    root.fill(&WHITE)?;
    match chart {
        Chart::Throughput => throughput(root, r),
        Chart::Memory => memory(root, r),
        Chart::Telemetry => telemetry(root, r),
    }
}

fn font(size: u32) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

/// A legend entry's mark.
#[derive(Clone, Copy)]
enum Mark {
    /// A point with an error bar (horizontal when true).
    ErrBar(RGBColor, bool),
    Bar(RGBColor),
    Line(RGBColor),
    Dashed(RGBColor),
    Cross(RGBColor),
}

const LEGEND_ROW: u32 = 26;
const MARK_W: i32 = 30;

/// Legend entries laid out in lines that fit `width`: (start x, entries) per line.
fn legend_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    items: &[(Mark, String)],
) -> Vec<(i32, Vec<usize>)> {
    let width = area.dim_in_pixel().0 as i32 - 40;
    let f = font(15);
    let w = |i: usize| {
        let t = area
            .estimate_text_size(&items[i].1, &f)
            .map_or(8 * items[i].1.len() as i32, |(w, _)| w as i32);
        MARK_W + 8 + t
    };
    let gap = 30;
    let mut lines: Vec<(i32, Vec<usize>)> = Vec::new();
    let mut used = 0;
    for i in 0..items.len() {
        let wi = w(i);
        match lines.last_mut() {
            Some((lw, line)) if used + gap + wi <= width => {
                used += gap + wi;
                *lw = used;
                line.push(i);
            }
            _ => {
                used = wi;
                lines.push((wi, vec![i]));
            }
        }
    }
    let total = area.dim_in_pixel().0 as i32;
    lines
        .into_iter()
        .map(|(lw, line)| ((total - lw) / 2, line))
        .collect()
}

fn legend_height<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    items: &[(Mark, String)],
) -> u32 {
    legend_lines(area, items).len() as u32 * LEGEND_ROW + 10
}

/// Draws the legend as centred lines of entries at the top of `area`.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    items: &[(Mark, String)],
) -> DrawResult<(), DB> {
    let f = font(15);
    let gap = 30;
    for (row, (x0, line)) in legend_lines(area, items).into_iter().enumerate() {
        let y = 5 + row as i32 * LEGEND_ROW as i32 + LEGEND_ROW as i32 / 2;
        let mut x = x0;
        for i in line {
            let (mark, text) = &items[i];
            draw_mark(area, *mark, x, y)?;
            let tx = x + MARK_W + 8;
            area.draw(&Text::new(
                text.as_str(),
                (tx, y),
                f.pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
            let tw = area
                .estimate_text_size(text, &f)
                .map_or(8 * text.len() as i32, |(w, _)| w as i32);
            x = tx + tw + gap;
        }
    }
    Ok(())
}

fn draw_mark<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    mark: Mark,
    x: i32,
    y: i32,
) -> DrawResult<(), DB> {
    let mid = x + MARK_W / 2;
    match mark {
        Mark::ErrBar(c, horizontal) => {
            let s = c.stroke_width(2);
            // (along, across) → pixels, so one drawing serves both orientations.
            let p = |a: i32, b: i32| {
                if horizontal {
                    (mid + a, y + b)
                } else {
                    (mid + b, y + a)
                }
            };
            area.draw(&PathElement::new(vec![p(-11, 0), p(11, 0)], s))?;
            area.draw(&PathElement::new(vec![p(-11, -5), p(-11, 5)], s))?;
            area.draw(&PathElement::new(vec![p(11, -5), p(11, 5)], s))?;
            area.draw(&Circle::new((mid, y), 5, c.filled()))?;
        }
        Mark::Bar(c) => {
            area.draw(&Rectangle::new(
                [(x + 4, y - 7), (x + MARK_W - 4, y + 7)],
                c.filled(),
            ))?;
        }
        Mark::Line(c) => {
            area.draw(&PathElement::new(
                vec![(x, y), (x + MARK_W, y)],
                c.stroke_width(3),
            ))?;
        }
        Mark::Dashed(c) => {
            let s = c.stroke_width(2);
            area.draw(&PathElement::new(vec![(x, y), (x + 11, y)], s))?;
            area.draw(&PathElement::new(vec![(x + 19, y), (x + MARK_W, y)], s))?;
        }
        Mark::Cross(c) => {
            area.draw(&Cross::new((mid, y), 6, c.stroke_width(2)))?;
        }
    }
    Ok(())
}

/// Title on top, legend below it, the rest for the plot.
fn layout<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    items: &[(Mark, String)],
) -> DrawResult<DrawingArea<DB, Shift>, DB> {
    let area = root.margin(8, 0, 0, 0);
    // The title at 22 px, smaller if it is too wide, cut short if still too wide.
    let room = area.dim_in_pixel().0.saturating_sub(30);
    let width = |t: &str, size: u32| {
        area.estimate_text_size(t, &font(size))
            .map_or(10 * t.len() as u32, |(w, _)| w)
    };
    let size = (14..=22)
        .rev()
        .find(|sz| width(title, *sz) <= room)
        .unwrap_or(14);
    let mut title = title.to_string();
    while width(&title, size) > room && title.chars().count() > 10 {
        let keep = title.chars().count() - 2;
        title = format!("{}…", title.chars().take(keep).collect::<String>());
    }
    let body = area.titled(&title, font(size))?;
    let (legend, plot) = body.split_vertically(legend_height(&body, items));
    draw_legend(&legend, items)?;
    Ok(plot.margin(12, 15, 10, 35))
}

/// A step between ticks of 1, 2, 2.5 or 5 × 10^k giving about `target` ticks over `span`.
fn nice_step(span: f64, target: usize) -> f64 {
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
fn ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let step = nice_step(hi - lo, target);
    let first = (lo / step).ceil() as i64;
    let v: Vec<f64> = (first..)
        .map(|k| k as f64 * step)
        .take_while(|x| *x <= hi + step * 1e-9)
        .take(100)
        .collect();
    (v, step)
}

/// A tick's text with as many decimals as its step needs.
fn tick_text(v: f64, step: f64) -> String {
    let prec = (0..6)
        .find(|&p| {
            let s = step * 10f64.powi(p);
            (s - s.round()).abs() < 1e-6 * s.abs().max(1.0)
        })
        .unwrap_or(6) as usize;
    if prec == 0 {
        grouped(v)
    } else {
        format!("{v:.prec$}")
    }
}

/// A whole number with thousands separated (`172,462`) from 10,000 on.
fn grouped(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    if digits.len() <= 4 {
        return format!("{v:.0}");
    }
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}

/// A linear f64 axis with the tick positions given (plotters' `WithKeyPoints` over an f64
/// range cannot take a label formatter).
#[derive(Debug, Clone)]
struct Axis {
    lo: f64,
    hi: f64,
    bold: Vec<f64>,
    light: Vec<f64>,
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
    fn ticked(lo: f64, hi: f64, target: usize) -> (Axis, f64) {
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

type CatChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<Axis, Axis>>;

/// The candidate axis: positions, orientation and labels.
struct Cat<'r> {
    labels: Vec<&'r str>,
    horizontal: bool,
}

impl Cat<'_> {
    fn n(&self) -> usize {
        self.labels.len()
    }

    /// Position of candidate `i` on its axis (the first one on the left, or at the top).
    fn pos(&self, i: usize) -> f64 {
        if self.horizontal {
            (self.n() - 1 - i) as f64
        } else {
            i as f64
        }
    }

    /// Chart coordinates of (candidate axis, value axis).
    fn pt(&self, c: f64, v: f64) -> (f64, f64) {
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
fn cat_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
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
            area.estimate_text_size(l, &font(14))
                .map_or(8 * l.len() as u32, |(w, _)| w)
        })
        .max()
        .unwrap_or(0);
    let mut b = ChartBuilder::on(area);
    let mut chart = if cat.horizontal {
        b.x_label_area_size(55)
            .y_label_area_size(label_w + 50)
            .build_cartesian_2d(value, cats)?
    } else {
        b.x_label_area_size(60)
            .y_label_area_size(90)
            .build_cartesian_2d(cats, value)?
    };
    let vfmt = move |v: &f64| tick_text(*v, step);
    let cfmt = |v: &f64| cat.label_at(*v);
    let mut mesh = chart.configure_mesh();
    mesh.label_style(font(14))
        .axis_desc_style(font(16))
        .bold_line_style(BLACK.mix(0.15))
        .light_line_style(BLACK.mix(0.05));
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

/// Median (or tokens/s) with its 95 % CI per candidate; unmeasured candidates marked.
fn throughput<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &Report) -> DrawResult<(), DB> {
    let m = r.metric;
    let vals: Vec<Option<(f64, f64, f64)>> = r.rows.iter().map(|x| x.throughput(m)).collect();
    let winner = r.winner;
    let mut items = Vec::new();
    if vals
        .iter()
        .enumerate()
        .any(|(i, v)| v.is_some() && Some(i) != winner)
    {
        items.push((
            Mark::ErrBar(BLUE_C, r.horizontal),
            "median with 95 % CI".to_string(),
        ));
    }
    if winner.is_some() {
        items.push((
            Mark::ErrBar(GREEN_C, r.horizontal),
            "winner (the pick)".to_string(),
        ));
    }
    if vals.iter().any(Option::is_none) {
        items.push((
            Mark::Cross(RED_C),
            "not measured (OOM, ruled out, predicted OOM, ...: verdict beside the mark)"
                .to_string(),
        ));
    }
    let (title, desc) = match m {
        Metric::StepMs => (
            format!(
                "Step time by candidate: median with 95 % CI (study {}; {})",
                r.study,
                r.evidence_short()
            ),
            "median step time (ms), lower is better",
        ),
        Metric::TokensPerS => (
            format!(
                "Throughput by candidate: tokens/s per GPU with 95 % CI (study {}; {})",
                r.study,
                r.evidence_short()
            ),
            "throughput (tokens/s per GPU), higher is better",
        ),
    };
    let plot = layout(root, &title, &items)?;
    let lo = vals
        .iter()
        .flatten()
        .map(|v| v.1)
        .fold(f64::INFINITY, f64::min);
    let hi = vals
        .iter()
        .flatten()
        .map(|v| v.2)
        .fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let span = (hi - lo).max(hi.abs() * 0.05).max(1e-6);
    let unmeasured = vals.iter().any(Option::is_none);
    let bottom = (lo - span * if unmeasured { 0.45 } else { 0.15 }).max(0.0);
    let top = hi + span * 0.15;
    let marker = bottom + (lo - bottom) * 0.35;
    let cat = Cat {
        labels: r.rows.iter().map(|x| x.label.as_str()).collect(),
        horizontal: r.horizontal,
    };
    let mut chart = cat_chart(&plot, r, &cat, (bottom, top), desc)?;
    let label_off = if r.horizontal { (-20, -24) } else { (14, -9) };
    for (i, (row, v)) in r.rows.iter().zip(&vals).enumerate() {
        let c = cat.pos(i);
        match v {
            Some((v, lo, hi)) => {
                let color = if Some(i) == winner { GREEN_C } else { BLUE_C };
                let s = color.stroke_width(2);
                // Caps 16 px wide, whatever the scale.
                let cap = if r.horizontal {
                    [(0, -8), (0, 8)]
                } else {
                    [(-8, 0), (8, 0)]
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
                let mut text = match m {
                    Metric::StepMs => format!("{v:.1} ms"),
                    Metric::TokensPerS => grouped(*v),
                };
                if row.verdict == crate::domain::study::VerdictKind::Tie {
                    text.push_str(" (tie)");
                }
                chart.draw_series(std::iter::once(
                    EmptyElement::at(cat.pt(c, *v))
                        + Circle::new((0, 0), 6, color.filled())
                        + Text::new(text, label_off, font(13)),
                ))?;
            }
            None => {
                chart.draw_series(std::iter::once(
                    EmptyElement::at(cat.pt(c, marker))
                        + Cross::new((0, 0), 7, RED_C.stroke_width(2))
                        + Text::new(
                            row.short_verdict().to_string(),
                            (11, -9),
                            font(13).color(&RED_C),
                        ),
                ))?;
            }
        }
    }
    Ok(())
}

/// Measured and predicted peak memory per candidate, with the capacity line.
fn memory<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &Report) -> DrawResult<(), DB> {
    let cap = r.capacity_gib;
    let oom_without_peak = |x: &super::Row| {
        x.verdict == crate::domain::study::VerdictKind::Oom && x.peak_gib.is_none()
    };
    let mut items = Vec::new();
    if r.rows.iter().any(|x| x.peak_gib.is_some()) {
        items.push((Mark::Bar(BLUE_C), "measured peak per GPU".to_string()));
    }
    if r.rows.iter().any(|x| x.predicted_gib.is_some()) {
        items.push((
            Mark::Bar(ORANGE_C),
            "predicted by the memory model".to_string(),
        ));
    }
    if let Some(c) = cap {
        items.push((Mark::Dashed(RED_C), format!("GPU capacity ({c:.1} GiB)")));
    }
    if r.rows.iter().any(oom_without_peak) {
        items.push((
            Mark::Cross(RED_C),
            "ran out of memory (no peak reported)".to_string(),
        ));
    }
    let title = format!(
        "Peak GPU memory by candidate: measured vs predicted (study {}; {})",
        r.study,
        r.evidence_short()
    );
    let plot = layout(root, &title, &items)?;
    let max = r
        .rows
        .iter()
        .flat_map(|x| [x.peak_gib, x.predicted_gib])
        .flatten()
        .chain(cap)
        .fold(0.0, f64::max)
        .max(1e-3);
    // Room beyond the longest bar for its label (`116.0 (predicted OOM)` when horizontal).
    let top = max * if r.horizontal { 1.35 } else { 1.18 };
    let cat = Cat {
        labels: r.rows.iter().map(|x| x.label.as_str()).collect(),
        horizontal: r.horizontal,
    };
    let mut chart = cat_chart(&plot, r, &cat, (0.0, top), "peak memory per GPU (GiB)")?;
    let off = if r.horizontal { 0.19 } else { -0.19 };
    let half = 0.17;
    let end_label = |text: String| {
        if r.horizontal {
            Text::new(
                text,
                (5, 0),
                font(12).pos(Pos::new(HPos::Left, VPos::Center)),
            )
        } else {
            Text::new(
                text,
                (0, -4),
                font(12).pos(Pos::new(HPos::Center, VPos::Bottom)),
            )
        }
    };
    for (i, row) in r.rows.iter().enumerate() {
        let c = cat.pos(i);
        for (value, color, at) in [
            (row.peak_gib, BLUE_C, c + off),
            (row.predicted_gib, ORANGE_C, c - off),
        ] {
            let Some(v) = value else { continue };
            if v <= 0.0 {
                // A miscalibrated model can predict nothing or less: no bar, the value in words.
                chart.draw_series(std::iter::once(
                    EmptyElement::at(cat.pt(at, 0.0)) + end_label(format!("{v:.1} (invalid)")),
                ))?;
                continue;
            }
            chart.draw_series(std::iter::once(Rectangle::new(
                [cat.pt(at - half, 0.0), cat.pt(at + half, v)],
                color.filled(),
            )))?;
            let text = if row.measured() || row.peak_gib.is_some() || color == BLUE_C {
                format!("{v:.1}")
            } else {
                format!("{v:.1} ({})", row.short_verdict())
            };
            chart.draw_series(std::iter::once(
                EmptyElement::at(cat.pt(at, v)) + end_label(text),
            ))?;
        }
        if oom_without_peak(row) {
            let y = cap.unwrap_or(max);
            chart.draw_series(std::iter::once(
                EmptyElement::at(cat.pt(c + off, y))
                    + Cross::new((0, 0), 7, RED_C.stroke_width(2))
                    + Text::new(
                        "OOM",
                        if r.horizontal { (10, 2) } else { (10, -22) },
                        font(13).color(&RED_C),
                    ),
            ))?;
        }
    }
    if let Some(c) = cap {
        let n = r.rows.len() as f64;
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![cat.pt(-0.5, c), cat.pt(n - 0.5, c)],
            10,
            6,
            RED_C.stroke_width(2),
        )))?;
    }
    Ok(())
}

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
fn telemetry<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &Report) -> DrawResult<(), DB> {
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
        items.push((Mark::Dashed(RED_C), format!("GPU capacity ({c:.1} GiB)")));
    }
    let who = r.pick().map_or(String::new(), |p| {
        if p.label.starts_with('#') {
            format!(" {}", p.label)
        } else {
            format!(" {}={}", r.category_axis, p.label)
        }
    });
    let title = format!(
        "Telemetry of the winner{who} (study {}; {})",
        r.study,
        r.evidence_short()
    );
    let plot = layout(root, &title, &items)?;
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
                font(16)
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
            .caption(&panel.caption, font(16))
            .margin(8)
            .x_label_area_size(48)
            .y_label_area_size(85)
            .build_cartesian_2d(xa, ya)?;
        let xfmt = move |v: &f64| tick_text(*v, xstep);
        let yfmt = move |v: &f64| tick_text(*v, ystep);
        chart
            .configure_mesh()
            .label_style(font(13))
            .axis_desc_style(font(15))
            .bold_line_style(BLACK.mix(0.15))
            .light_line_style(BLACK.mix(0.05))
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
            let width = 2 + 2 * (n - 1 - i).min(2) as u32;
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
                            .map(|p| Circle::new(p, width + 1, color.filled())),
                    )?;
                }
            }
        }
        if let Some(c) = cap {
            chart.draw_series(std::iter::once(DashedPathElement::new(
                vec![(0.0, c), (tmax, c)],
                10,
                6,
                RED_C.stroke_width(2),
            )))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let (t, step) = ticks(96.0, 124.0, 6);
        assert_eq!(step, 5.0);
        assert_eq!(t, vec![100.0, 105.0, 110.0, 115.0, 120.0]);
        assert_eq!(tick_text(2.5, 2.5), "2.5");
        assert_eq!(tick_text(100.0, 5.0), "100");
        assert_eq!(tick_text(180000.0, 20000.0), "180,000");
        assert_eq!(grouped(1234.0), "1234");
        assert_eq!(grouped(-1234567.0), "-1,234,567");
        assert_eq!(tick_text(0.25, 0.05), "0.25");
        let (t, _) = ticks(0.0, 1.0, 5);
        assert_eq!(t.first(), Some(&0.0));
        assert!(t.last().is_some_and(|x| (*x - 1.0).abs() < 1e-9), "{t:?}");
    }

    #[test]
    fn the_embedded_font_registers() {
        register_font().unwrap();
        register_font().unwrap();
    }
}
