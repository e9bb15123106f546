//! A chart's frame: a short title, a grey subtitle (the study and what produced the figures),
//! the legend as centred lines of entries, and the rest for the plot.

use super::{GREY_C, Look, font_size};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A legend entry's mark.
#[derive(Clone, Copy)]
pub enum Mark {
    /// A point with an error bar (horizontal when true).
    ErrBar(RGBColor, bool),
    Bar(RGBColor),
    Line(RGBColor),
    Dashed(RGBColor),
    /// An open diamond: a prediction, not a measurement.
    Hollow(RGBColor),
    /// A hatched, outlined box: a candidate without a measurement.
    Shade,
    Dot(RGBColor),
    /// A dot with a ring, joined by a line (the Pareto front).
    Front(RGBColor),
    /// A large dot with a dark ring (the pick).
    Pick(RGBColor),
}

const LEGEND_ROW: f64 = 32.0;
const MARK_W: f64 = 36.0;
const GAP: f64 = 36.0;

fn text_w<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, t: &str, f: &TextStyle<'_>) -> i32 {
    area.estimate_text_size(t, f)
        .map_or(9 * t.len() as i32, |(w, _)| w as i32)
}

/// Legend entries laid out in lines that fit `width`: (start x, entries) per line.
fn legend_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    k: Look,
    items: &[(Mark, String)],
) -> Vec<(i32, Vec<usize>)> {
    let total = area.dim_in_pixel().0 as i32;
    let width = total - k.px(50.0);
    let f = k.font(font_size::LEGEND);
    let w = |i: usize| k.px(MARK_W + 10.0) + text_w(area, &items[i].1, &f);
    let gap = k.px(GAP);
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
    lines
        .into_iter()
        .map(|(lw, line)| ((total - lw).max(0) / 2, line))
        .collect()
}

/// Draws the legend as centred lines of entries at the top of `area`; returns its height.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    k: Look,
    items: &[(Mark, String)],
) -> DrawResult<u32, DB> {
    let f = k.font(font_size::LEGEND);
    let row = k.px(LEGEND_ROW);
    let lines = legend_lines(area, k, items);
    for (n, (x0, line)) in lines.iter().enumerate() {
        let y = k.px(4.0) + n as i32 * row + row / 2;
        let mut x = *x0;
        for &i in line {
            let (mark, text) = &items[i];
            draw_mark(area, k, *mark, x, y)?;
            let tx = x + k.px(MARK_W + 10.0);
            area.draw(&Text::new(
                text.as_str(),
                (tx, y),
                f.pos(Pos::new(HPos::Left, VPos::Center)),
            ))?;
            x = tx + text_w(area, text, &f) + k.px(GAP);
        }
    }
    Ok(if lines.is_empty() {
        0
    } else {
        (lines.len() as i32 * row + k.px(12.0)) as u32
    })
}

/// Draws `mark` in the box of width MARK_W starting at `x`, centred on `y`.
pub fn draw_mark<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    k: Look,
    mark: Mark,
    x: i32,
    y: i32,
) -> DrawResult<(), DB> {
    let mid = x + k.px(MARK_W / 2.0);
    let p = |v: f64| k.px(v);
    match mark {
        Mark::ErrBar(c, horizontal) => {
            let s = c.stroke_width(k.u(2.0));
            // (along, across) → pixels, so one drawing serves both orientations.
            let at = |a: f64, b: f64| {
                if horizontal {
                    (mid + p(a), y + p(b))
                } else {
                    (mid + p(b), y + p(a))
                }
            };
            area.draw(&PathElement::new(vec![at(-13.0, 0.0), at(13.0, 0.0)], s))?;
            area.draw(&PathElement::new(vec![at(-13.0, -6.0), at(-13.0, 6.0)], s))?;
            area.draw(&PathElement::new(vec![at(13.0, -6.0), at(13.0, 6.0)], s))?;
            area.draw(&Circle::new((mid, y), k.u(6.0), c.filled()))?;
        }
        Mark::Bar(c) => {
            area.draw(&Rectangle::new(
                [(x + p(5.0), y - p(9.0)), (x + p(MARK_W - 5.0), y + p(9.0))],
                c.filled(),
            ))?;
        }
        Mark::Line(c) => {
            area.draw(&PathElement::new(
                vec![(x, y), (x + p(MARK_W), y)],
                c.stroke_width(k.u(3.0)),
            ))?;
        }
        Mark::Dashed(c) => {
            let s = c.stroke_width(k.u(2.0));
            area.draw(&PathElement::new(vec![(x, y), (x + p(13.0), y)], s))?;
            area.draw(&PathElement::new(
                vec![(x + p(23.0), y), (x + p(MARK_W), y)],
                s,
            ))?;
        }
        Mark::Hollow(c) => {
            area.draw(&diamond((mid, y), p(8.0), c.stroke_width(k.u(2.0))))?;
        }
        Mark::Shade => {
            let (x0, x1, y0, y1) = (x + p(5.0), x + p(MARK_W - 5.0), y - p(10.0), y + p(10.0));
            area.draw(&Rectangle::new(
                [(x0, y0), (x1, y1)],
                GREY_C.mix(0.08).filled(),
            ))?;
            let s = GREY_C.mix(0.45).stroke_width(k.u(1.0));
            let step = p(7.0).max(3);
            let mut t = x0 - (y1 - y0);
            while t < x1 {
                // The 45° line x - (y1 - y) = t, clipped to the box.
                let ya = y0.max(y1 - (x1 - t));
                let yb = y1.min(y1 - (x0 - t));
                if ya < yb {
                    area.draw(&PathElement::new(
                        vec![(t + (y1 - ya), ya), (t + (y1 - yb), yb)],
                        s,
                    ))?;
                }
                t += step;
            }
            area.draw(&Rectangle::new(
                [(x0, y0), (x1, y1)],
                GREY_C.stroke_width(k.u(1.0)),
            ))?;
        }
        Mark::Dot(c) => {
            area.draw(&Circle::new((mid, y), k.u(6.0), c.filled()))?;
        }
        Mark::Front(c) => {
            area.draw(&PathElement::new(
                vec![(x, y), (x + p(MARK_W), y)],
                c.stroke_width(k.u(2.0)),
            ))?;
            area.draw(&Circle::new((mid, y), k.u(10.0), c.stroke_width(k.u(2.0))))?;
        }
        Mark::Pick(c) => {
            area.draw(&Circle::new((mid, y), k.u(9.0), c.filled()))?;
            area.draw(&Circle::new(
                (mid, y),
                k.u(9.0),
                BLACK.stroke_width(k.u(2.0)),
            ))?;
        }
    }
    Ok(())
}

/// An open diamond of half-diagonal `r` px centred on `c` (backend pixels).
pub fn diamond(c: (i32, i32), r: i32, style: ShapeStyle) -> PathElement<(i32, i32)> {
    PathElement::new(
        vec![
            (c.0, c.1 - r),
            (c.0 + r, c.1),
            (c.0, c.1 + r),
            (c.0 - r, c.1),
            (c.0, c.1 - r),
        ],
        style,
    )
}

/// `text` cut short with `…` until it fits `room` px in `f`.
fn fit<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    f: &TextStyle<'_>,
    room: i32,
) -> String {
    let mut t = text.to_string();
    while text_w(area, &t, f) > room && t.chars().count() > 10 {
        let keep = t.chars().count() - 2;
        t = format!("{}…", t.chars().take(keep).collect::<String>());
    }
    t
}

/// Title and subtitle on top, the legend below them, the rest (with margins) for the plot.
pub fn layout<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    k: Look,
    title: &str,
    subtitle: &str,
    items: &[(Mark, String)],
) -> DrawResult<DrawingArea<DB, Shift>, DB> {
    let (w, _) = root.dim_in_pixel();
    let room = w as i32 - k.px(40.0);
    let cx = w as i32 / 2;
    let mut y = k.px(14.0);
    // The title at its size, smaller if it is too wide, cut short if still too wide.
    let size = [font_size::TITLE, 26.0, 22.0, 18.0]
        .into_iter()
        .find(|sz| text_w(root, title, &k.font(*sz)) <= room)
        .unwrap_or(18.0);
    let tf = k.font(size).pos(Pos::new(HPos::Center, VPos::Top));
    root.draw(&Text::new(fit(root, title, &tf, room), (cx, y), tf.clone()))?;
    y += k.px(size * 1.25);
    if !subtitle.is_empty() {
        let sf = k
            .font(font_size::SUB)
            .color(&GREY_C)
            .pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(
            fit(root, subtitle, &sf, room),
            (cx, y),
            sf.clone(),
        ))?;
        y += k.px(font_size::SUB * 1.5);
    }
    let (_, body) = root.split_vertically(y + k.px(6.0));
    let lh = draw_legend(&body, k, items)?;
    let (_, plot) = body.split_vertically(lh);
    Ok(plot.margin(k.px(10.0), k.px(20.0), k.px(14.0), k.px(30.0)))
}
