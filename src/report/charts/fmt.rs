//! Numbers as the charts print them: one convention everywhere (a comma between thousands from
//! 1,000 on, a point before decimals), and memory in a unit and precision chosen from the data so
//! that 0.014 GiB never reads `0.0`.

/// `v` with `decimals` decimals and its whole part grouped by thousands (`172,462`,
/// `1,234.5`, `-1,000`).
pub fn num(v: f64, decimals: usize) -> String {
    let s = format!("{:.decimals$}", v.abs());
    let (whole, frac) = s
        .split_once('.')
        .map_or((s.as_str(), None), |(w, f)| (w, Some(f)));
    let mut out = String::new();
    for (i, ch) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    // No `-0.0`: only a value that still reads as non-zero keeps its sign.
    if v < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        format!("-{out}")
    } else {
        out
    }
}

/// A whole number, grouped (`172,462`).
pub fn grouped(v: f64) -> String {
    num(v, 0)
}

/// Decimals a tick step needs (0.25 → 2, 5 → 0).
pub fn step_decimals(step: f64) -> usize {
    (0..6)
        .find(|&p| {
            let s = step * 10f64.powi(p);
            (s - s.round()).abs() < 1e-6 * s.abs().max(1.0)
        })
        .unwrap_or(6) as usize
}

/// A tick's text with as many decimals as its step needs.
pub fn tick_text(v: f64, step: f64) -> String {
    num(v, step_decimals(step))
}

/// How a chart prints memory: GiB, or MiB when everything plotted is below 1 GiB, with the
/// decimals that give the smallest value two significant digits (at least one, at most three).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemFmt {
    /// MiB per GiB when in MiB, else 1.
    pub mul: f64,
    pub unit: &'static str,
    pub decimals: usize,
}

impl MemFmt {
    /// From the values to be shown (GiB); non-positive and non-finite ones are ignored.
    pub fn of(values: impl IntoIterator<Item = f64>) -> MemFmt {
        let vals: Vec<f64> = values
            .into_iter()
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let max = vals.iter().copied().fold(0.0, f64::max);
        let (mul, unit) = if max > 0.0 && max < 1.0 {
            (1024.0, "MiB")
        } else {
            (1.0, "GiB")
        };
        let min = vals.iter().copied().fold(f64::INFINITY, f64::min) * mul;
        let decimals = if min.is_finite() {
            (1 - min.log10().floor() as i64).clamp(1, 3) as usize
        } else {
            1
        };
        MemFmt {
            mul,
            unit,
            decimals,
        }
    }

    /// A value given in GiB, in the chart's unit (without the unit).
    pub fn value(&self, gib: f64) -> f64 {
        gib * self.mul
    }

    /// `v` (GiB) as text in the chart's unit, without the unit; a positive value too small for
    /// the decimals reads `<0.001`, never `0.0`.
    pub fn text(&self, gib: f64) -> String {
        let v = gib * self.mul;
        let least = 10f64.powi(-(self.decimals as i32));
        if v > 0.0 && v < least / 2.0 {
            format!("<{}", num(least, self.decimals))
        } else {
            num(v, self.decimals)
        }
    }

    /// `v` (GiB) with the unit.
    pub fn with_unit(&self, gib: f64) -> String {
        format!("{} {}", self.text(gib), self.unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_thousands_convention() {
        assert_eq!(num(1234.0, 0), "1,234");
        assert_eq!(num(172462.4, 0), "172,462");
        assert_eq!(num(1234.56, 1), "1,234.6");
        assert_eq!(num(999.0, 0), "999");
        assert_eq!(num(-1234567.0, 0), "-1,234,567");
        assert_eq!(num(-0.01, 1), "0.0");
        assert_eq!(tick_text(180000.0, 20000.0), "180,000");
        assert_eq!(tick_text(1500.0, 500.0), "1,500");
        assert_eq!(tick_text(2.5, 2.5), "2.5");
        assert_eq!(tick_text(0.25, 0.05), "0.25");
    }

    #[test]
    fn memory_precision_comes_from_the_data() {
        // A CPU proxy's peaks: 0.014–0.04 GiB read in MiB, never `0.0`.
        let f = MemFmt::of([0.014, 0.04]);
        assert_eq!((f.unit, f.decimals), ("MiB", 1));
        assert_eq!(f.text(0.014), "14.3");
        assert_eq!(f.with_unit(0.04), "41.0 MiB");
        // Beside a large value, the small one keeps two significant digits.
        let f = MemFmt::of([0.014, 80.0]);
        assert_eq!((f.unit, f.decimals), ("GiB", 3));
        assert_eq!(f.text(0.014), "0.014");
        assert_eq!(f.text(0.0001), "<0.001");
        let f = MemFmt::of([44.0, 116.0, -5.0]);
        assert_eq!((f.unit, f.decimals), ("GiB", 1));
        assert_eq!(f.text(116.0), "116.0");
        assert_eq!(f.text(1536.0), "1,536.0");
        assert_eq!(MemFmt::of([]).unit, "GiB");
    }
}
