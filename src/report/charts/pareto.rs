//! Throughput (or step time) against peak memory for every measured candidate, with the Pareto
//! front: the candidates no other one beats on both speed and memory. That is the choice a user
//! makes when memory headroom matters (room for a longer sequence, a larger model, another
//! process): the fastest candidate within the memory they can spare is on the front.

use super::axis::{Axis, house_style};
use super::fmt::{MemFmt, grouped, num, tick_text};
use super::layout::{Mark, layout};
use super::{BLUE_C, GREEN_C, Look, ORANGE_C, RED_C, compact_label, font_size, subtitle};
use crate::report::{Metric, Report};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Indices of the Pareto front of `points` (speed, higher is better; memory, lower is better):
/// those no other point matches or beats on both and beats on one. Equal points are all on it.
/// In order of memory, then speed (fastest first).
pub fn front(points: &[(f64, f64)]) -> Vec<usize> {
    let mut on: Vec<usize> = (0..points.len())
        .filter(|&i| {
            let (s, m) = points[i];
            !points
                .iter()
                .any(|&(s2, m2)| s2 >= s && m2 <= m && (s2 > s || m2 < m))
        })
        .collect();
    on.sort_by(|&a, &b| {
        points[a]
            .1
            .total_cmp(&points[b].1)
            .then(points[b].0.total_cmp(&points[a].0))
    });
    on
}

/// The candidates the chart can place: (row index, the metric's (value, low, high), peak GiB).
pub fn placed(r: &Report) -> Vec<(usize, (f64, f64, f64), f64)> {
    r.rows
        .iter()
        .enumerate()
        .filter_map(|(i, x)| Some((i, x.throughput(r.metric)?, x.peak_gib.filter(|g| *g > 0.0)?)))
        .collect()
}

/// Speed, higher is better, from the metric's value.
fn speed(m: Metric, v: f64) -> f64 {
    match m {
        Metric::StepMs => -v,
        Metric::TokensPerS => v,
    }
}

/// Row indices of the Pareto front, in order of memory.
pub fn front_rows(r: &Report) -> Vec<usize> {
    let pts = placed(r);
    let xy: Vec<(f64, f64)> = pts
        .iter()
        .map(|(_, v, g)| (speed(r.metric, v.0), *g))
        .collect();
    front(&xy).into_iter().map(|i| pts[i].0).collect()
}

type Boxes = Vec<(i32, i32, i32, i32)>;

fn overlap(a: (i32, i32, i32, i32), b: (i32, i32, i32, i32)) -> i64 {
    let w = (a.2.min(b.2) - a.0.max(b.0)).max(0) as i64;
    let h = (a.3.min(b.3) - a.1.max(b.1)).max(0) as i64;
    w * h
}

/// Where a label of `w`×`h` px goes beside the point at `p`: the first of eight places around
/// it that stays inside `bounds` and clear of `taken`, else the least covered one.
fn place(
    p: (i32, i32),
    (w, h): (i32, i32),
    k: Look,
    taken: &Boxes,
    bounds: (i32, i32, i32, i32),
) -> (i32, i32, i32, i32) {
    let (g, d) = (k.px(16.0), k.px(8.0));
    let spots = [
        (p.0 + g, p.1 - d - h),
        (p.0 + g, p.1 + d),
        (p.0 - g - w, p.1 - d - h),
        (p.0 - g - w, p.1 + d),
        (p.0 - w / 2, p.1 - g - h),
        (p.0 - w / 2, p.1 + g),
        (p.0 + g, p.1 - h / 2),
        (p.0 - g - w, p.1 - h / 2),
    ];
    let cost = |b: (i32, i32, i32, i32)| {
        let out = (bounds.0 - b.0).max(0)
            + (b.2 - bounds.2).max(0)
            + (bounds.1 - b.1).max(0)
            + (b.3 - bounds.3).max(0);
        taken.iter().map(|t| overlap(*t, b)).sum::<i64>() + 1000 * out as i64
    };
    spots
        .iter()
        .map(|&(x, y)| (x, y, x + w, y + h))
        .min_by_key(|b| cost(*b))
        .unwrap_or((p.0, p.1, p.0 + w, p.1 + h))
}

/// The chart.
pub fn chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    k: Look,
    r: &Report,
) -> DrawResult<(), DB> {
    let m = r.metric;
    let pts = placed(r);
    let front = front_rows(r);
    let mem_max = pts.iter().map(|p| p.2).fold(0.0, f64::max);
    let mem_min = pts.iter().map(|p| p.2).fold(f64::INFINITY, f64::min);
    // The capacity when it is near enough the points to be drawn without squeezing them.
    let cap_drawn = r
        .capacity_gib
        .filter(|c| mem_max > 0.0 && *c <= 2.5 * mem_max);
    let fmt = MemFmt::of(pts.iter().map(|p| p.2).chain(cap_drawn));
    let mut items = vec![(
        Mark::Dot(BLUE_C),
        "measured candidate (median, 95 % CI)".to_string(),
    )];
    items.push((
        Mark::Front(ORANGE_C),
        "Pareto front: no other candidate is both faster and smaller".to_string(),
    ));
    if r.winner.is_some_and(|w| pts.iter().any(|p| p.0 == w)) {
        items.push((Mark::Pick(GREEN_C), "the pick".to_string()));
    }
    match (r.capacity_gib, cap_drawn) {
        (Some(c), Some(_)) => items.push((
            Mark::Dashed(RED_C),
            format!("GPU capacity ({})", fmt.with_unit(c)),
        )),
        (Some(c), None) => items.push((
            Mark::Dashed(RED_C),
            format!("GPU capacity {} GiB: right of the axis", num(c, 1)),
        )),
        _ => {}
    }
    let (title, ydesc) = match m {
        Metric::StepMs => (
            "Step time against peak memory",
            format!(
                "step time, {} (ms), lower is better",
                r.record.statistic.name()
            ),
        ),
        Metric::TokensPerS => (
            "Throughput against peak memory",
            "throughput (tokens/s per GPU), higher is better".to_string(),
        ),
    };
    let left_out = r.rows.len() - pts.len();
    let mut sub = subtitle(r);
    if left_out > 0 {
        sub.push_str(&format!(
            " · {left_out} candidate{} without a step time and a peak not shown",
            if left_out == 1 { "" } else { "s" }
        ));
    }
    let plot = layout(root, k, title, &sub, &items)?;
    // Memory: from 0 when the points spread over much of it, else around them.
    let (xl, xh) = {
        let hi = fmt.value(mem_max.max(cap_drawn.unwrap_or(0.0)));
        let lo = fmt.value(if mem_min.is_finite() { mem_min } else { 0.0 });
        let span = (hi - lo).max(hi * 0.1).max(1e-6);
        let lo = if lo < 0.4 * hi {
            0.0
        } else {
            (lo - span * 0.15).max(0.0)
        };
        (lo, hi + span * 0.12)
    };
    let (yl, yh) = {
        let lo = pts.iter().map(|p| p.1.1).fold(f64::INFINITY, f64::min);
        let hi = pts.iter().map(|p| p.1.2).fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
        let span = (hi - lo).max(hi.abs() * 0.05).max(1e-6);
        ((lo - span * 0.2).max(0.0), hi + span * 0.25)
    };
    let (xa, xstep) = Axis::ticked(xl, xh, 8);
    let (ya, ystep) = Axis::ticked(yl, yh, 6);
    let mut chart = ChartBuilder::on(&plot)
        .x_label_area_size(k.u(75.0))
        .y_label_area_size(k.u(115.0))
        .build_cartesian_2d(xa, ya)?;
    let xfmt = move |v: &f64| tick_text(*v, xstep);
    let yfmt = move |v: &f64| tick_text(*v, ystep);
    let xdesc = format!("peak memory per GPU ({})", fmt.unit);
    house_style(&mut chart.configure_mesh(), k)
        .x_label_formatter(&xfmt)
        .y_label_formatter(&yfmt)
        .x_desc(xdesc)
        .y_desc(ydesc)
        .draw()?;
    if let Some(c) = cap_drawn {
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(fmt.value(c), yl), (fmt.value(c), yh)],
            k.u(10.0),
            k.u(6.0),
            RED_C.stroke_width(k.u(2.0)),
        )))?;
    }
    let at = |i: usize| pts.iter().find(|p| p.0 == i);
    // The front, joined in order of memory.
    let line: Vec<(f64, f64)> = front
        .iter()
        .filter_map(|&i| at(i).map(|p| (fmt.value(p.2), p.1.0)))
        .collect();
    if line.len() > 1 {
        chart.draw_series(LineSeries::new(
            line.clone(),
            ORANGE_C.stroke_width(k.u(2.5)),
        ))?;
    }
    for &(_, (v, lo, hi), g) in &pts {
        let x = fmt.value(g);
        let s = BLUE_C.mix(0.5).stroke_width(k.u(1.5));
        let w = k.px(6.0);
        chart.draw_series(std::iter::once(PathElement::new(vec![(x, lo), (x, hi)], s)))?;
        for end in [lo, hi] {
            chart.draw_series(std::iter::once(
                EmptyElement::at((x, end)) + PathElement::new(vec![(-w, 0), (w, 0)], s),
            ))?;
        }
        chart.draw_series(std::iter::once(Circle::new(
            (x, v),
            k.u(6.0),
            BLUE_C.filled(),
        )))?;
    }
    for p in &line {
        chart.draw_series(std::iter::once(Circle::new(
            *p,
            k.u(12.0),
            ORANGE_C.stroke_width(k.u(2.5)),
        )))?;
    }
    if let Some(p) = r.winner.and_then(at) {
        let c = (fmt.value(p.2), p.1.0);
        chart.draw_series(std::iter::once(Circle::new(c, k.u(9.0), GREEN_C.filled())))?;
        chart.draw_series(std::iter::once(Circle::new(
            c,
            k.u(9.0),
            BLACK.stroke_width(k.u(2.0)),
        )))?;
    }
    // Labels beside their points, clear of the points and of each other where there is room.
    let (xr, yr) = chart.plotting_area().get_pixel_range();
    let bounds = (xr.start, yr.start, xr.end, yr.end);
    let pix: Vec<(i32, i32)> = pts
        .iter()
        .map(|p| chart.backend_coord(&(fmt.value(p.2), p.1.0)))
        .collect();
    let r0 = k.px(16.0);
    let mut taken: Boxes = pix
        .iter()
        .map(|p| (p.0 - r0, p.1 - r0, p.0 + r0, p.1 + r0))
        .collect();
    let font = k.font(font_size::DATA);
    for (p, px) in pts.iter().zip(&pix) {
        let row = &r.rows[p.0];
        let value = match m {
            Metric::StepMs => format!("{} ms", num(p.1.0, 1)),
            Metric::TokensPerS => grouped(p.1.0),
        };
        let text = format!(
            "{} · {value} · {}",
            compact_label(r, row),
            fmt.with_unit(p.2)
        );
        let (w, h) = root
            .estimate_text_size(&text, &font)
            .map_or((9 * text.len() as i32, k.px(16.0)), |(w, h)| {
                (w as i32, h as i32)
            });
        let b = place(*px, (w, h), k, &taken, bounds);
        taken.push(b);
        root.draw(&Text::new(
            text,
            (b.0, b.1),
            font.pos(Pos::new(HPos::Left, VPos::Top)),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_is_what_nothing_beats_on_both() {
        // (speed, memory): 0 fast and big, 1 slower and smaller, 2 dominated by 1, 3 the
        // smallest and slowest, 4 a copy of 1 (on the front with it), 5 as fast as 0 but bigger.
        let pts = [
            (10.0, 80.0),
            (8.0, 50.0),
            (7.0, 60.0),
            (5.0, 20.0),
            (8.0, 50.0),
            (10.0, 90.0),
        ];
        assert_eq!(front(&pts), vec![3, 1, 4, 0]);
        assert_eq!(front(&[]), Vec::<usize>::new());
        assert_eq!(front(&[(1.0, 1.0)]), vec![0]);
    }

    #[test]
    fn a_label_goes_where_there_is_room() {
        let k = Look::PLAIN;
        let bounds = (0, 0, 1000, 1000);
        // Up and to the right when free.
        let b = place((500, 500), (100, 20), k, &Vec::new(), bounds);
        assert_eq!(b, (516, 472, 616, 492));
        // Below it when that is taken.
        let b2 = place((500, 500), (100, 20), k, &vec![b], bounds);
        assert_eq!(b2, (516, 508, 616, 528));
        // To the left at the right edge.
        let b3 = place((990, 500), (100, 20), k, &Vec::new(), bounds);
        assert!(b3.2 <= 1000, "{b3:?}");
    }
}
