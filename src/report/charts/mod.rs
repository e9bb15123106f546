//! The report's charts, drawn with plotters on any backend, so the PNG (bitmap backend) and the
//! SVG (SVG backend) of a chart come from the same code. Text is laid out and, in PNGs, drawn
//! with the embedded DejaVu Sans through plotters' `ab_glyph` renderer: no system font library
//! (fontconfig, FreeType) and no font package is needed.
//!
//! Sizes are laid out at 96 DPI (the `--size` of a chart, in CSS pixels); a PNG at another DPI
//! is that many more pixels with every font, line and mark scaled alike ([`Look`]). The SVG is
//! drawn at the layout size.

mod axis;
mod bars;
pub mod fmt;
mod layout;
pub mod pareto;
mod telemetry;

use super::{Metric, Report, Row, VerdictKind};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// DejaVu Sans (assets/fonts/README.md says where it comes from and its licence).
pub(super) static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

const BLUE_C: RGBColor = RGBColor(31, 119, 180);
const ORANGE_C: RGBColor = RGBColor(255, 127, 14);
const GREEN_C: RGBColor = RGBColor(44, 160, 44);
const RED_C: RGBColor = RGBColor(214, 39, 40);
const GREY_C: RGBColor = RGBColor(90, 90, 90);
/// Predictions (never measurements).
const PURPLE_C: RGBColor = RGBColor(148, 103, 189);
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

/// Font sizes at 96 DPI, px.
mod font_size {
    pub const TITLE: f64 = 30.0;
    pub const SUB: f64 = 17.0;
    pub const LEGEND: f64 = 18.0;
    pub const TICK: f64 = 17.0;
    pub const DESC: f64 = 19.0;
    pub const DATA: f64 = 15.0;
}

/// The scale a chart is drawn at: 1 at 96 DPI.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Look {
    pub s: f64,
}

impl Look {
    pub const PLAIN: Look = Look { s: 1.0 };

    /// A length of `v` layout pixels, in backend pixels.
    fn px(self, v: f64) -> i32 {
        (v * self.s).round() as i32
    }

    /// The same, at least 1 (line widths, radii).
    fn u(self, v: f64) -> u32 {
        (v * self.s).round().max(1.0) as u32
    }

    fn font(self, size: f64) -> TextStyle<'static> {
        (FAMILY, size * self.s).into_font().color(&BLACK)
    }
}

/// How big the charts are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChartOptions {
    /// Layout size (px at 96 DPI) of every chart; None: each chart's own default.
    pub size: Option<(u32, u32)>,
    /// Resolution of the PNGs: their pixels are the layout size × dpi / 96.
    pub dpi: u32,
}

impl Default for ChartOptions {
    fn default() -> Self {
        ChartOptions {
            size: None,
            dpi: 96,
        }
    }
}

/// Bounds of `--size` (each side) and `--dpi`, and the most pixels a PNG side may have.
pub const SIZE_RANGE: std::ops::RangeInclusive<u32> = 400..=8000;
pub const DPI_RANGE: std::ops::RangeInclusive<u32> = 48..=600;
const MAX_PNG_SIDE: u32 = 20_000;

impl ChartOptions {
    /// `WxH` (also `W×H`), each side within [`SIZE_RANGE`].
    pub fn parse_size(s: &str) -> Result<(u32, u32), String> {
        let (w, h) = s
            .split_once(['x', 'X', '×'])
            .ok_or_else(|| format!("`{s}` is not WIDTHxHEIGHT (e.g. 1600x1000)"))?;
        let side = |t: &str| {
            t.trim()
                .parse::<u32>()
                .ok()
                .filter(|v| SIZE_RANGE.contains(v))
                .ok_or_else(|| {
                    format!(
                        "`{s}`: each side must be a whole number of pixels from {} to {}",
                        SIZE_RANGE.start(),
                        SIZE_RANGE.end()
                    )
                })
        };
        Ok((side(w)?, side(h)?))
    }

    /// The scale of the PNGs.
    pub fn look(&self) -> Look {
        Look {
            s: f64::from(self.dpi.clamp(*DPI_RANGE.start(), *DPI_RANGE.end())) / 96.0,
        }
    }

    /// The layout size of `chart` for report `r`.
    pub fn layout_size(&self, r: &Report, chart: Chart) -> (u32, u32) {
        self.size.unwrap_or_else(|| chart.size(r))
    }

    /// The PNG's pixels.
    pub fn png_size(&self, r: &Report, chart: Chart) -> (u32, u32) {
        let (w, h) = self.layout_size(r, chart);
        let s = self.look().s;
        let side = |v: u32| ((f64::from(v) * s).round() as u32).clamp(1, MAX_PNG_SIDE);
        (side(w), side(h))
    }
}

/// The report's charts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    Throughput,
    Memory,
    /// Throughput (or step time) against peak memory, the Pareto front marked.
    Pareto,
    Telemetry,
}

impl Chart {
    /// File name without extension.
    pub fn stem(self) -> &'static str {
        match self {
            Chart::Throughput => "throughput",
            Chart::Memory => "memory",
            Chart::Pareto => "throughput-vs-memory",
            Chart::Telemetry => "telemetry",
        }
    }

    pub fn heading(self) -> &'static str {
        match self {
            Chart::Throughput => "Throughput by candidate",
            Chart::Memory => "Peak memory by candidate",
            Chart::Pareto => "Throughput against peak memory",
            Chart::Telemetry => "Telemetry of the winner",
        }
    }

    /// What the chart shows, for report.md.
    pub fn caption(self, r: &Report) -> String {
        let unmeasured = "Candidates without a measurement are hatched columns naming their \
                          verdict; one the search predicted slower (and so did not run) shows its \
                          predicted value as an open purple diamond: a prediction, not a \
                          measurement.";
        let stat = r.record.statistic.name();
        match (self, r.metric) {
            (Chart::Throughput, Metric::StepMs) => format!(
                "Step time of each candidate, the {stat} of its steady steps (ms, lower is \
                 better), with its 95 % confidence interval; the pick in green. {unmeasured}"
            ),
            (Chart::Throughput, Metric::TokensPerS) => format!(
                "Tokens per second per GPU of each candidate (higher is better); the bars are \
                 the 95 % confidence interval of the step time ({stat}) carried over to \
                 tokens/s. The pick in green. {unmeasured}"
            ),
            (Chart::Memory, _) => format!(
                "Peak GPU memory per GPU of each candidate: measured (blue){}{}. Candidates \
                 without a measured peak are hatched, naming why.",
                if r.rows.iter().any(|x| x.predicted_gib.is_some()) {
                    " and predicted by the calibrated memory model (orange)"
                } else {
                    "; the memory model made no prediction"
                },
                if r.capacity_gib.is_some() {
                    "; the dashed red line is the GPU's capacity"
                } else {
                    "; the GPU's capacity is unknown"
                }
            ),
            (Chart::Pareto, m) => {
                let front = pareto::front_rows(r);
                let ids: Vec<String> = front
                    .iter()
                    .map(|&i| format!("#{}", r.rows[i].id))
                    .collect();
                format!(
                    "{} against the measured peak memory per GPU of every measured candidate. \
                     The Pareto front (no other candidate is both faster and smaller) is ringed \
                     and joined: {}. The pick is the large green dot with a black ring{}. When \
                     memory headroom matters, choose along the front.",
                    match m {
                        Metric::StepMs => format!("Step time, the {stat} (ms, lower is better),"),
                        Metric::TokensPerS => {
                            "Tokens per second per GPU (higher is better)".to_string()
                        }
                    },
                    if ids.is_empty() {
                        "none".to_string()
                    } else {
                        ids.join(", ")
                    },
                    if r.capacity_gib.is_some() {
                        "; the dashed red line is the GPU's capacity"
                    } else {
                        ""
                    }
                )
            }
            (Chart::Telemetry, _) => format!(
                "GPU utilisation (%), board power (W) and VRAM in use (GiB) over each trial of the \
                 winner, from {} sampled during the trial.",
                crate::util::text::count(r.telemetry_gpus, "GPU", "GPUs")
            ),
        }
    }

    /// The default layout size (px at 96 DPI; also the SVG's view box).
    pub fn size(self, r: &Report) -> (u32, u32) {
        match self {
            Chart::Telemetry => (1600, 1200),
            Chart::Throughput | Chart::Memory if r.horizontal => {
                (1600, (330 + 56 * r.rows.len() as u32).clamp(1000, 8000))
            }
            _ => (1600, 1000),
        }
    }
}

/// Draws `chart` as `<stem>.png` (at `opts`' DPI) and `<stem>.svg` in `dir`.
pub fn render(
    r: &Report,
    chart: Chart,
    dir: &Path,
    opts: &ChartOptions,
) -> std::io::Result<Vec<PathBuf>> {
    register_font()?;
    let err = |p: &Path| {
        let p = p.to_path_buf();
        move |e: String| std::io::Error::other(format!("{}: {e}", p.display()))
    };
    let png = dir.join(format!("{}.png", chart.stem()));
    {
        let size = opts.png_size(r, chart);
        let root = super::text::Crisp(BitMapBackend::new(&png, size)).into_drawing_area();
        draw_at(&root, r, chart, opts.look()).map_err(|e| err(&png)(e.to_string()))?;
        root.present().map_err(|e| err(&png)(e.to_string()))?;
    }
    let svg = dir.join(format!("{}.svg", chart.stem()));
    {
        let root = SVGBackend::new(&svg, opts.layout_size(r, chart)).into_drawing_area();
        draw_at(&root, r, chart, Look::PLAIN).map_err(|e| err(&svg)(e.to_string()))?;
        root.present().map_err(|e| err(&svg)(e.to_string()))?;
    }
    Ok(vec![png, svg])
}

/// Draws `chart` on any backend at 96 DPI.
#[cfg(any(test, feature = "testkit"))]
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    r: &Report,
    chart: Chart,
) -> DrawResult<(), DB> {
    draw_at(root, r, chart, Look::PLAIN)
}

/// Draws `chart` on any backend at scale `k`.
pub fn draw_at<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    r: &Report,
    chart: Chart,
    k: Look,
) -> DrawResult<(), DB> {
    root.fill(&WHITE)?;
    match chart {
        Chart::Throughput => bars::throughput(root, k, r),
        Chart::Memory => bars::memory(root, k, r),
        Chart::Pareto => pareto::chart(root, k, r),
        Chart::Telemetry => telemetry::telemetry(root, k, r),
    }
}

/// The line under every title: the study and what produced its figures.
fn subtitle(r: &Report) -> String {
    format!("study {} · {}", r.study, r.evidence_short())
}

/// A candidate in a few characters: `micro_batch_size=2` for a one-knob space, else `#3`
/// followed by its values (`#3 2, full/2`).
fn compact_label(r: &Report, row: &Row) -> String {
    let label = row.label.trim_end_matches(" (current)");
    if !label.starts_with('#') {
        return format!("{}={label}", r.category_axis);
    }
    let (id, rest) = label.split_once(' ').unwrap_or((label, ""));
    // `k=v, k=v` (a stored space) or `k=v k=v` (the overrides).
    let sep = if rest.contains(", ") { ", " } else { " " };
    let values: Vec<&str> = rest
        .split(sep)
        .filter_map(|kv| kv.split_once('=').map(|(_, v)| v))
        .collect();
    if values.is_empty() {
        id.to_string()
    } else {
        format!("{id} {}", values.join(", "))
    }
}

/// Why a candidate has no measurement, for its place on a chart: `not run: predicted OOM`,
/// `OOM`, `failed`.
fn unmeasured_text(row: &Row) -> String {
    match row.verdict {
        VerdictKind::Oom => "ran out of memory".into(),
        VerdictKind::Failed => "failed".into(),
        VerdictKind::NotRun => "not run".into(),
        _ => format!("not run: {}", row.short_verdict()),
    }
}
#[cfg(test)]
mod tests {
    use super::axis::ticks;
    use super::fmt::tick_text;
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let (t, step) = ticks(96.0, 124.0, 6);
        assert_eq!(step, 5.0);
        assert_eq!(t, vec![100.0, 105.0, 110.0, 115.0, 120.0]);
        assert_eq!(tick_text(2.5, 2.5), "2.5");
        assert_eq!(tick_text(100.0, 5.0), "100");
        assert_eq!(tick_text(180000.0, 20000.0), "180,000");
        assert_eq!(tick_text(0.25, 0.05), "0.25");
        let (t, _) = ticks(0.0, 1.0, 5);
        assert_eq!(t.first(), Some(&0.0));
        assert!(t.last().is_some_and(|x| (*x - 1.0).abs() < 1e-9), "{t:?}");
    }

    #[test]
    fn size_and_dpi_options() {
        assert_eq!(ChartOptions::parse_size("1920x1080"), Ok((1920, 1080)));
        assert_eq!(ChartOptions::parse_size("1200×800"), Ok((1200, 800)));
        assert!(ChartOptions::parse_size("1920").is_err());
        assert!(ChartOptions::parse_size("10x10").is_err());
        let o = ChartOptions {
            size: None,
            dpi: 144,
        };
        assert_eq!(o.look().s, 1.5);
    }

    #[test]
    fn the_embedded_font_registers() {
        register_font().unwrap();
        register_font().unwrap();
    }
}
