//! Small statistics shared by the search, the replay and the sweep's history.

/// The median of `xs` (the mean of the middle two for an even count); `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Student's t, two-sided 95 % (one-sided 97.5 %), for `df` degrees of freedom.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 10] = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23];
    match df {
        0 => f64::INFINITY,
        1..=10 => T[df - 1],
        11..=15 => 2.16,
        16..=20 => 2.10,
        21..=30 => 2.05,
        _ => 1.96,
    }
}

/// The standard normal distribution function Φ(z), from the error function (Abramowitz and
/// Stegun 7.1.26, absolute error below 1.5·10⁻⁷).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// The share of samples cut from each end by [`trimmed_mean_ci95`].
pub const TRIM: f64 = 0.2;

/// A location estimate with its 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    /// The estimate's standard error.
    pub se: f64,
}

/// The 20 % trimmed mean of `xs` and its 95 % confidence interval: the step time a search
/// ranks candidates by. `None` when empty.
///
/// * The estimate is the mean of what is left once `max(⌊0.2·n⌋, 1)` samples are cut from each
///   end (none of 1 or 2 samples). Up to 4 samples it is the median; from 10 on, the mean of
///   the middle 60 %.
/// * The interval, from 6 samples on, is Yuen's (1974): the winsorized standard deviation
///   `s_w`, standard error `s_w · n / (h · √n)` with `h` the samples kept, and Student's t on
///   `h − 1` degrees of freedom. Below 6 it is the samples' range, as for the median
///   ([`crate::run::steady::median_ci95`]): the best available, weaker than 95 %.
///
/// Why not the median: both ignore a straggler step, but on steady step times (close to
/// normal) the median uses 64 % of the information in the samples and the 20 % trimmed mean
/// about 94 % (Wilcox, *Introduction to Robust Estimation and Hypothesis Testing*, ch. 3), so
/// its interval is narrower on the same iterations. And a step time's cost over a run is its
/// mean, which the trimmed mean follows closer than the median does when steps are skewed.
pub fn trimmed_mean_ci95(xs: &[f64]) -> Option<Estimate> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let (first, last) = (*v.first()?, v[n - 1]);
    let k = if n < 3 {
        0
    } else {
        ((TRIM * n as f64).floor() as usize).max(1)
    };
    let h = n - 2 * k;
    let value = v[k..n - k].iter().sum::<f64>() / h as f64;
    if n < 2 {
        return Some(Estimate {
            value,
            lo: first,
            hi: last,
            se: 0.0,
        });
    }
    let (low, high) = (v[k], v[n - 1 - k]);
    let w: Vec<f64> = v.iter().map(|x| x.clamp(low, high)).collect();
    let wm = w.iter().sum::<f64>() / n as f64;
    let sw2 = w.iter().map(|x| (x - wm).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = sw2.sqrt() * n as f64 / (h as f64 * (n as f64).sqrt());
    let (lo, hi) = if n < 6 {
        (first, last)
    } else {
        let half = t975(h - 1) * se;
        (value - half, value + half)
    };
    Some(Estimate { value, lo, hi, se })
}

#[cfg(test)]
mod tests {
    /// Φ at known points (tables to 7 decimals), symmetric, monotone.
    #[test]
    fn normal_cdf_matches_the_table() {
        for (z, want) in [
            (0.0, 0.5),
            (1.0, 0.841_344_7),
            (1.281_551_6, 0.9),
            (1.959_964, 0.975),
            (3.0, 0.998_650_1),
        ] {
            assert!((super::normal_cdf(z) - want).abs() < 2e-7, "Φ({z})");
            assert!(
                (super::normal_cdf(-z) - (1.0 - want)).abs() < 2e-7,
                "Φ(-{z})"
            );
        }
        let mut last = 0.0;
        for k in -80..=80 {
            let p = super::normal_cdf(f64::from(k) / 10.0);
            assert!(p >= last && (0.0..=1.0).contains(&p));
            last = p;
        }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(super::median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(super::median(&[]), None);
    }

    #[test]
    fn trimmed_mean_cuts_a_fifth_from_each_end() {
        // 10 samples: 2 cut from each end, the mean of the middle 6.
        let xs = [100.0, 1.0, 5.0, 3.0, 4.0, 6.0, 2.0, 7.0, 8.0, -50.0];
        let e = super::trimmed_mean_ci95(&xs).unwrap();
        assert!((e.value - 4.5).abs() < 1e-12, "{e:?}");
        assert!(e.lo < e.value && e.value < e.hi);
        // A straggler moves neither the estimate nor (beyond the winsorizing) its interval.
        let mut ys = xs;
        ys[0] = 1e9;
        assert_eq!(super::trimmed_mean_ci95(&ys), Some(e));
        assert_eq!(super::trimmed_mean_ci95(&[]), None);
        let one = super::trimmed_mean_ci95(&[3.0]).unwrap();
        assert_eq!((one.value, one.lo, one.hi), (3.0, 3.0, 3.0));
        // Up to 4 samples it is the median, and below 6 the interval is the range.
        let three = super::trimmed_mean_ci95(&[9.0, 1.0, 2.0]).unwrap();
        assert_eq!((three.value, three.lo, three.hi), (2.0, 1.0, 9.0));
        let four = super::trimmed_mean_ci95(&[9.0, 1.0, 2.0, 4.0]).unwrap();
        assert_eq!((four.value, four.lo, four.hi), (3.0, 1.0, 9.0));
        let five = super::trimmed_mean_ci95(&[9.0, 1.0, 2.0, 4.0, 6.0]).unwrap();
        assert_eq!((five.value, five.lo, five.hi), (4.0, 1.0, 9.0));
    }

    #[test]
    fn trimmed_mean_interval_covers_and_is_narrower_than_the_medians() {
        // Normal steps (CV 5 %), 24 a trial: the interval covers the true mean about 95 % of
        // the time, and is narrower than the median's order-statistic interval.
        let mut rng = crate::util::rng::Rng(42);
        let (mut covered, mut narrower, runs) = (0, 0, 2000);
        for _ in 0..runs {
            let xs: Vec<f64> = (0..24).map(|_| 100.0 + 5.0 * rng.normal()).collect();
            let e = super::trimmed_mean_ci95(&xs).unwrap();
            covered += usize::from(e.lo <= 100.0 && 100.0 <= e.hi);
            let mut s = xs.clone();
            s.sort_by(f64::total_cmp);
            let (lo, hi) = crate::run::steady::median_ci95(&s);
            narrower += usize::from(e.hi - e.lo < hi - lo);
        }
        let cover = covered as f64 / runs as f64;
        assert!((0.93..=0.975).contains(&cover), "coverage {cover}");
        assert!(
            narrower as f64 > 0.75 * runs as f64,
            "narrower in {narrower} of {runs}"
        );
    }
}
