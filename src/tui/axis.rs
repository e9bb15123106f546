//! Chart axes from the data: bounds on round numbers around the values and labels with the
//! precision those bounds need (a TFLOP/s series at 0.04 reads `0.038 … 0.042`, not `0 … 0`; a
//! flat one gets a band around its value).

/// A round step (1, 2 or 5 × 10^k) near `raw`.
fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let n = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

/// Round bounds around `[lo, hi]` (about four steps; never below 0 for data that is not) and
/// the decimals their labels need.
pub fn nice(lo: f64, hi: f64) -> ([f64; 2], usize) {
    if !lo.is_finite() || !hi.is_finite() || lo > hi {
        return ([0.0, 1.0], 0);
    }
    let nonneg = lo >= 0.0;
    let (mut lo, mut hi) = (lo, hi);
    // A flat series: a band of ±5 % around it (±1 around zero).
    if hi - lo <= hi.abs().max(lo.abs()) * 1e-6 {
        let d = if hi == 0.0 { 1.0 } else { hi.abs() * 0.05 };
        lo -= d;
        hi += d;
    }
    let step = nice_step((hi - lo) / 4.0);
    let mut b0 = (lo / step).floor() * step;
    let b1 = (hi / step).ceil() * step;
    if nonneg && b0 < 0.0 {
        b0 = 0.0;
    }
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    ([b0, b1], decimals.min(6))
}

/// The two labels of an axis with these bounds.
pub fn labels(b: [f64; 2], decimals: usize) -> [String; 2] {
    [
        format!("{:.decimals$}", b[0]),
        format!("{:.decimals$}", b[1]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_get_their_decimals() {
        let (b, d) = nice(0.04, 0.04);
        assert_eq!(labels(b, d), ["0.038", "0.042"]);
        let (b, d) = nice(0.031, 0.047);
        assert_eq!(d, 3, "{b:?}");
        assert!(b[0] <= 0.031 && b[1] >= 0.047, "{b:?}");
        assert_ne!(labels(b, d)[0], labels(b, d)[1]);
    }

    #[test]
    fn a_flat_utilisation_is_not_3_to_3() {
        let (b, d) = nice(3.0, 3.0);
        let [a, z] = labels(b, d);
        assert_ne!(a, z);
        assert_eq!((a.as_str(), z.as_str()), ("2.8", "3.2"));
    }

    #[test]
    fn large_values_are_round_and_whole() {
        let (b, d) = nice(1203.0, 1631.0);
        assert_eq!(d, 0);
        assert_eq!(b, [1200.0, 1800.0]);
        let (b, _) = nice(0.0, 0.0);
        assert_eq!(b, [0.0, 1.0], "nothing below zero for data that is not");
        let (b, _) = nice(-3.0, 5.0);
        assert!(b[0] <= -3.0 && b[1] >= 5.0);
    }
}
