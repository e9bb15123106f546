//! Timestamps. The store writes every time as an RFC 3339 UTC string with millisecond precision,
//! `YYYY-MM-DDTHH:MM:SS.mmmZ`. The width is fixed (for years 0000–9999), so comparing the
//! strings compares the times and `ORDER BY` on a timestamp column sorts chronologically.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time as the store writes it.
pub fn now_rfc3339() -> String {
    rfc3339_utc(SystemTime::now())
}

/// Formats `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, milliseconds truncated).
pub fn rfc3339_utc(t: SystemTime) -> String {
    // Whole seconds (floored) and milliseconds within that second, also before 1970.
    let (secs, millis) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_millis(),
        ),
        Err(e) => {
            let d = e.duration();
            let whole = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            let nanos = d.subsec_nanos();
            if nanos == 0 {
                (-whole, 0)
            } else {
                // Round the negative offset toward minus infinity, then count forward.
                (-whole - 1, (1_000_000_000 - nanos) / 1_000_000)
            }
        }
    };
    let days = secs.div_euclid(86_400);
    let in_day = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        in_day / 3600,
        in_day % 3600 / 60,
        in_day % 60
    )
}

/// The instant a string [`rfc3339_utc`] wrote stands for (None for any other text).
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() != 24 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[23] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, min, sec, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    let secs = days_from_civil(y, m, d) * 86_400 + h * 3600 + min * 60 + sec;
    let d = std::time::Duration::from_millis(u64::try_from(ms).ok()?);
    let t = match u64::try_from(secs) {
        Ok(s) => UNIX_EPOCH + std::time::Duration::from_secs(s),
        Err(_) => UNIX_EPOCH - std::time::Duration::from_secs(secs.unsigned_abs()),
    };
    Some(t + d)
}

/// Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12; // March-based
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Proleptic Gregorian (year, month, day) of a day count from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Both are in range by construction.
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: i64, millis: u64) -> SystemTime {
        let base = if secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
        };
        base + Duration::from_millis(millis)
    }

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_utc(at(951_782_400, 0)), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            rfc3339_utc(at(1_709_251_199, 987)),
            "2024-02-29T23:59:59.987Z"
        );
        assert_eq!(rfc3339_utc(at(-1, 0)), "1969-12-31T23:59:59.000Z");
        assert_eq!(rfc3339_utc(at(-1, 250)), "1969-12-31T23:59:59.250Z");
        assert_eq!(
            rfc3339_utc(at(253_402_300_799, 999)),
            "9999-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn parsing_inverts_formatting() {
        for (secs, ms) in [(0, 0), (-1, 250), (951_782_400, 0), (1_709_251_199, 987)] {
            let t = at(secs, ms);
            assert_eq!(parse_rfc3339(&rfc3339_utc(t)), Some(t));
        }
        assert_eq!(parse_rfc3339("2024-02-29 23:59:59"), None);
    }

    #[test]
    fn string_order_is_time_order() {
        let times = [-86_400 * 400, -1, 0, 59, 3600, 951_782_400, 1_709_251_199];
        let strings: Vec<String> = times.iter().map(|&s| rfc3339_utc(at(s, 0))).collect();
        let mut sorted = strings.clone();
        sorted.sort();
        assert_eq!(strings, sorted);
    }

    #[test]
    fn every_day_of_a_leap_cycle_round_trips() {
        // Walk 400 years day by day: months and days stay in range and increase by one day.
        let mut prev: Option<(i64, u32, u32)> = None;
        for days in -146_097..146_097 {
            let (y, m, d) = civil_from_days(days);
            assert!((1..=12).contains(&m) && (1..=31).contains(&d));
            if let Some((py, pm, pd)) = prev {
                let next_day = (y, m, d) == (py, pm, pd + 1);
                let next_month = (y, m, d) == (py, pm + 1, 1);
                let next_year = (y, m, d) == (py + 1, 1, 1) && (pm, pd) == (12, 31);
                assert!(
                    next_day || next_month || next_year,
                    "{py}-{pm}-{pd} -> {y}-{m}-{d}"
                );
            }
            prev = Some((y, m, d));
        }
    }
}
