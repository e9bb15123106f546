//! Numbers for display: float noise such as `1548.8000000000002` (a sum of decimal fractions)
//! is rounded away; nothing a measurement can resolve is lost.

/// Significant digits kept: beyond any figure measured here, short of f64's noise (~16).
const SIGNIFICANT: usize = 12;

/// `x` rounded to 12 significant digits (non-finite values as they are).
pub fn tidy(x: f64) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    format!("{x:.prec$e}", prec = SIGNIFICANT - 1)
        .parse()
        .unwrap_or(x)
}

/// Every float in a JSON value [`tidy`]ed; integers are left alone.
pub fn tidy_json(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::Number(n) if n.is_f64() => {
            if let Some(t) = n.as_f64().map(tidy).and_then(serde_json::Number::from_f64) {
                *n = t;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_json),
        Value::Object(map) => map.values_mut().for_each(tidy_json),
        _ => {}
    }
}

/// serde_json's compact format with every float [`tidy`]ed on the way out: what a JSON Lines
/// record is written with. Unlike [`tidy_json`] nothing is copied into a `Value`, so a struct's
/// fields keep their order (an event's `event` tag first).
struct TidyCompact;

impl serde_json::ser::Formatter for TidyCompact {
    fn write_f64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, x: f64) -> std::io::Result<()> {
        serde_json::ser::CompactFormatter.write_f64(w, tidy(x))
    }
}

/// `v` as one line of JSON, floats [`tidy`]ed.
pub fn json_line<T: serde::Serialize + ?Sized>(v: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, TidyCompact);
    v.serialize(&mut ser)?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_is_rounded_away_and_real_digits_kept() {
        assert_eq!(tidy(1548.8000000000002).to_string(), "1548.8");
        assert_eq!(tidy(0.1 + 0.2).to_string(), "0.3");
        assert_eq!(tidy(221.25), 221.25);
        assert_eq!(tidy(1.0e-5), 1.0e-5);
        assert_eq!(tidy(123456.789012), 123456.789012);
        assert!(tidy(f64::NAN).is_nan());
        let mut v =
            serde_json::json!({"a": [1548.8000000000002, 3], "b": {"c": 0.30000000000000004}});
        tidy_json(&mut v);
        assert_eq!(v.to_string(), r#"{"a":[1548.8,3],"b":{"c":0.3}}"#);
    }

    #[test]
    fn a_json_line_is_tidied_in_field_order() {
        #[derive(serde::Serialize)]
        struct Ev {
            event: &'static str,
            ci95_ms: f64,
            n: u32,
            a: Option<f64>,
        }
        let line = json_line(&Ev {
            event: "measured",
            ci95_ms: 446.90000000000055,
            n: 3,
            a: Some(f64::NAN),
        })
        .unwrap();
        assert_eq!(
            line,
            r#"{"event":"measured","ci95_ms":446.9,"n":3,"a":null}"#
        );
    }
}
