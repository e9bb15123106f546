//! How an [`Iteration`] is kept in the `data` column: its serde JSON, plus a `_nonfinite` object
//! naming the float fields that were NaN or infinite (serde_json writes those as `null`, which
//! would read back as "not printed"; a NaN loss is worth keeping).

use serde_json::{Map, Value};

use crate::domain::trial::Iteration;

const NONFINITE_KEY: &str = "_nonfinite";

macro_rules! float_fields {
    ($($field:ident),* $(,)?) => {
        /// The `Option<f64>` fields of [`Iteration`].
        #[cfg(test)]
        const FLOAT_FIELDS: &[&str] = &[$(stringify!($field)),*];

        fn float_values(it: &Iteration) -> Vec<(&'static str, Option<f64>)> {
            vec![$((stringify!($field), it.$field)),*]
        }

        fn float_field_mut<'a>(it: &'a mut Iteration, name: &str) -> Option<&'a mut Option<f64>> {
            match name {
                $(stringify!($field) => Some(&mut it.$field),)*
                _ => None,
            }
        }
    };
}

float_fields!(
    elapsed_ms,
    elapsed_avg_ms,
    tflops_per_gpu,
    tflops_avg_per_gpu,
    tokens_per_s_per_gpu,
    tokens_avg_per_s_per_gpu,
    loss,
    learning_rate,
    grad_norm,
    mem_used_gib,
    mem_total_gib,
    mem_used_pct,
    rocm_mem_used_gib,
    rocm_mem_total_gib,
    rocm_max_mem_used_gib,
    mem_usage_fraction,
    mfu_pct,
);

fn nonfinite_name(x: f64) -> &'static str {
    if x.is_nan() {
        "NaN"
    } else if x > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// The `data` column's text for `it`.
pub(crate) fn encode(it: &Iteration) -> Result<String, serde_json::Error> {
    let mut value = serde_json::to_value(it)?;
    let nonfinite: Map<String, Value> = float_values(it)
        .into_iter()
        .filter_map(|(name, x)| {
            let x = x.filter(|x| !x.is_finite())?;
            Some((name.to_owned(), Value::from(nonfinite_name(x))))
        })
        .collect();
    if let (false, Value::Object(map)) = (nonfinite.is_empty(), &mut value) {
        map.insert(NONFINITE_KEY.to_owned(), Value::Object(nonfinite));
    }
    serde_json::to_string(&value)
}

/// Reads what [`encode`] wrote. Unknown fields (from a newer build) are ignored.
pub(crate) fn decode(text: &str) -> Result<Iteration, String> {
    let mut value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let nonfinite = value.as_object_mut().and_then(|m| m.remove(NONFINITE_KEY));
    let mut it: Iteration = serde_json::from_value(value).map_err(|e| e.to_string())?;
    if let Some(Value::Object(fields)) = nonfinite {
        for (name, v) in fields {
            let x = match v.as_str() {
                Some("NaN") => f64::NAN,
                Some("inf") => f64::INFINITY,
                Some("-inf") => f64::NEG_INFINITY,
                _ => return Err(format!("bad non-finite value {v} for `{name}`")),
            };
            if let Some(slot) = float_field_mut(&mut it, &name) {
                *slot = Some(x);
            }
        }
    }
    Ok(it)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_float_field_is_listed() {
        // A field that accepts 0.5 from JSON is a float; it must be in FLOAT_FIELDS.
        let Value::Object(fields) = serde_json::to_value(Iteration::default()).unwrap() else {
            panic!("Iteration is not a JSON object");
        };
        for name in fields.keys() {
            let mut probe = serde_json::to_value(Iteration::default()).unwrap();
            probe[name.as_str()] = Value::from(0.5);
            let is_float = serde_json::from_value::<Iteration>(probe).is_ok();
            assert_eq!(
                is_float,
                FLOAT_FIELDS.contains(&name.as_str()),
                "field `{name}`"
            );
        }
    }

    #[test]
    fn nonfinite_values_round_trip() {
        let mut it = Iteration {
            iteration: 7,
            timestamp: Some("2025-01-01 00:00:00".into()),
            ..Iteration::default()
        };
        for (i, name) in FLOAT_FIELDS.iter().enumerate() {
            let x = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.25][i % 4];
            *float_field_mut(&mut it, name).unwrap() = Some(x);
        }
        let back = decode(&encode(&it).unwrap()).unwrap();
        for ((name, a), (_, b)) in float_values(&it).into_iter().zip(float_values(&back)) {
            let (a, b) = (a.unwrap(), b.unwrap());
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{name}: {a} vs {b}"
            );
        }
        assert_eq!(back.iteration, 7);
        assert_eq!(back.timestamp, it.timestamp);
    }

    #[test]
    fn finite_iterations_have_no_side_object() {
        let it = Iteration {
            iteration: 1,
            loss: Some(2.5),
            ..Iteration::default()
        };
        let text = encode(&it).unwrap();
        assert!(!text.contains(NONFINITE_KEY));
        assert_eq!(decode(&text).unwrap(), it);
    }
}
