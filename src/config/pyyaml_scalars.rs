//! Whether PyYAML's SafeConstructor can build a scalar: the Python its constructors run
//! (`int()`, `float()`, `datetime`, `base64`), restated, so a value Primus would fail on with a
//! ValueError is refused where it stands. The typing itself stays in [`super::yaml`].

use super::pyyaml::IMPLICIT_TIMESTAMP;
use super::yaml::{FLOAT_RE, INT_RE};

/// `t` under tag `!!tag` (a core tag: `int`, `float`, `bool`, `binary`, `timestamp`, ...).
pub(super) fn constructs(tag: &str, t: &str) -> Result<(), String> {
    match tag {
        "int" => int(t),
        "float" => float(t),
        "bool" => match t.to_lowercase().as_str() {
            "yes" | "no" | "true" | "false" | "on" | "off" => Ok(()),
            _ => Err(format!(
                "`{t}` is not a boolean (KeyError in construct_yaml_bool)"
            )),
        },
        "binary" => binary(t),
        "timestamp" => timestamp(t),
        _ => Ok(()),
    }
}

/// A plain scalar: the implicit int, float or timestamp it resolves to must build.
pub(super) fn implicit(t: &str) -> Result<(), String> {
    if INT_RE.is_match(t) {
        int(t)
    } else if FLOAT_RE.is_match(t) {
        float(t)
    } else if IMPLICIT_TIMESTAMP.is_match(t) {
        timestamp(t)
    } else {
        Ok(())
    }
}

/// Python's `int(s, radix)`: surrounding whitespace, a sign, digits of the radix.
fn py_int(s: &str, radix: u32) -> bool {
    let s = s.trim();
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    !s.is_empty() && s.chars().all(|c| c.is_digit(radix))
}

/// `construct_yaml_int`.
fn int(t: &str) -> Result<(), String> {
    let v = t.replace('_', "");
    let body = v.strip_prefix(['+', '-']).unwrap_or(&v);
    let ok = if v.is_empty() {
        false
    } else if body == "0" {
        true
    } else if let Some(b) = body.strip_prefix("0b") {
        py_int(b, 2)
    } else if let Some(h) = body.strip_prefix("0x") {
        py_int(h, 16)
    } else if body.starts_with('0') {
        py_int(body, 8)
    } else if body.contains(':') {
        body.split(':').all(|p| py_int(p, 10))
    } else {
        py_int(body, 10)
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{t}` is not an integer Python's int() reads (ValueError)"
        ))
    }
}

/// Python's `float(s)`.
fn py_float(s: &str) -> bool {
    let s = s.trim();
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    matches!(body, "inf" | "infinity" | "nan")
        || (!body.starts_with(['i', 'n', '+', '-']) && body.parse::<f64>().is_ok())
}

/// `construct_yaml_float`.
fn float(t: &str) -> Result<(), String> {
    let v = t.replace('_', "").to_lowercase();
    let body = v.strip_prefix(['+', '-']).unwrap_or(&v);
    let ok = matches!(body, ".inf" | ".nan")
        || if body.contains(':') {
            body.split(':').all(py_float)
        } else {
            py_float(&v)
        };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{t}` is not a number Python's float() reads (ValueError)"
        ))
    }
}

/// `construct_yaml_binary`: ASCII, then base64 as `base64.decodebytes` reads it (characters
/// outside the alphabet are skipped; the data must come in whole quads, padded with `=`).
fn binary(t: &str) -> Result<(), String> {
    if !t.is_ascii() {
        return Err("base64 data must be ASCII".into());
    }
    let data = t
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
        .count();
    let pads = t.bytes().filter(|b| *b == b'=').count();
    match data % 4 {
        0 => Ok(()),
        1 => Err("failed to decode base64 data: a stray character".into()),
        r if pads >= 4 - r => Ok(()),
        _ => Err("failed to decode base64 data: Incorrect padding".into()),
    }
}

/// `construct_yaml_timestamp`: the YAML 1.1 timestamp, a date and time Python's `datetime`
/// builds (months 1–12, real days, hours < 24 ..., a zone offset under a day).
fn timestamp(t: &str) -> Result<(), String> {
    static FULL: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:[Tt]|[ \t]+)([0-9]{1,2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+]([0-9]{1,2})(?::([0-9]{2}))?))?)?$",
        )
        .expect("static regex")
    });
    let Some(c) = FULL.captures(t) else {
        return Err(format!("`{t}` is not a timestamp"));
    };
    let n = |i: usize| -> u32 { c.get(i).map_or(0, |m| m.as_str().parse().unwrap_or(99)) };
    let (y, m, d) = (n(1), n(2), n(3));
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    };
    let zone_min = n(7) * 60 + n(8);
    let bad = if y == 0 {
        Some("year 0 is out of range")
    } else if !(1..=12).contains(&m) {
        Some("month must be in 1..12")
    } else if d < 1 || d > days {
        Some("day is out of range for month")
    } else if n(4) > 23 {
        Some("hour must be in 0..23")
    } else if n(5) > 59 {
        Some("minute must be in 0..59")
    } else if n(6) > 59 {
        Some("second must be in 0..59")
    } else if zone_min >= 24 * 60 {
        Some("the zone offset must be under 24 hours")
    } else {
        None
    };
    match bad {
        Some(why) => Err(format!(
            "`{t}` reads as a date (YAML 1.1 timestamp) that Python refuses: {why}; quote it \
             to keep it a string"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_s_constructors_restated() {
        for ok in ["5", "0x1f", "-0b101", "017", "1:20", "+7"] {
            assert!(int(ok).is_ok(), "{ok}");
        }
        for bad in ["", "x", "08", "0x", "1.5"] {
            assert!(int(bad).is_err(), "{bad}");
        }
        assert!(float("1").is_ok() && float(".inf").is_ok() && float("inf").is_ok());
        assert!(float("x").is_err() && float(".").is_err());
        assert!(binary("aGVsbG8=").is_ok() && binary("!!!").is_ok());
        assert!(binary("aGVsbG8").is_err());
        assert!(timestamp("2001-12-14").is_ok() && timestamp("2000-02-29").is_ok());
        for bad in [
            "2001-13-14",
            "2001-02-30",
            "0000-01-01",
            "2001-12-14 25:00:00",
        ] {
            assert!(timestamp(bad).is_err(), "{bad}");
        }
        assert!(timestamp("2001-12-14T21:59:43+25:00").is_err());
    }
}
