//! `moe_layer_freq`: which layers are MoE layers. Megatron takes an int k (every k-th layer,
//! starting with the first: `i % k == 0`), a list of 0/1 per layer, or a Python expression such as
//! `([0]*1+[1]*26)` or `[0,1]*4`, which it evaluates to a list.

use crate::domain::value::Value;

/// Most entries an expression may expand to (a bound for hostile input).
const MAX_ENTRIES: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayerFreqError {
    #[error("cannot read `moe_layer_freq` `{0}` (e.g. 1, [0,1,1], ([0]*1+[1]*26))")]
    Unreadable(String),
    #[error("`moe_layer_freq` has {entries} entries for {layers} layers")]
    Length { entries: usize, layers: u64 },
}

/// The MoE flag of each of `layers` layers. `None` (or null) means every layer; a list or an
/// expression must have one entry per layer.
pub fn parse_layer_freq(freq: Option<&Value>, layers: u64) -> Result<Vec<bool>, LayerFreqError> {
    let n = usize::try_from(layers)
        .ok()
        .filter(|n| *n <= MAX_ENTRIES)
        .ok_or_else(|| LayerFreqError::Unreadable(format!("{layers} layers")))?;
    let every = |k: u64| {
        (0..n)
            .map(|i| (i as u64).is_multiple_of(k))
            .collect::<Vec<bool>>()
    };
    let unreadable = |v: &Value| LayerFreqError::Unreadable(v.to_string());
    let pattern = match freq {
        None | Some(Value::Null) => return Ok(vec![true; n]),
        Some(Value::Int(k)) if *k >= 1 => return Ok(every(*k as u64)),
        Some(Value::List(xs)) => xs
            .iter()
            .map(|x| x.as_f64().map(|f| f != 0.0))
            .collect::<Option<Vec<bool>>>()
            .ok_or_else(|| unreadable(freq.unwrap_or(&Value::Null)))?,
        Some(Value::Str(s)) => match s.trim().parse::<u64>() {
            Ok(k) if k >= 1 => return Ok(every(k)),
            _ => expression(s).ok_or_else(|| LayerFreqError::Unreadable(s.clone()))?,
        },
        Some(other) => return Err(unreadable(other)),
    };
    if pattern.len() != n {
        return Err(LayerFreqError::Length {
            entries: pattern.len(),
            layers,
        });
    }
    Ok(pattern)
}

/// `[a,b,...]*k + [..]*k ...`, optionally in parentheses; entries are numbers (non-zero = MoE).
fn expression(s: &str) -> Option<Vec<bool>> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let s = s
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .unwrap_or(&s);
    let mut out = Vec::new();
    for term in s.split('+') {
        let (list, times) = match term.rsplit_once('*') {
            Some((l, k)) => (l, k.parse::<usize>().ok()?),
            None => (term, 1),
        };
        let inner = list.strip_prefix('[')?.strip_suffix(']')?;
        let items: Vec<bool> = inner
            .split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.parse::<f64>().ok().map(|f| f != 0.0))
            .collect::<Option<_>>()?;
        if out.len() + items.len().saturating_mul(times) > MAX_ENTRIES {
            return None;
        }
        out.extend(items.iter().cycle().take(items.len() * times));
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }

    #[test]
    fn every_form_megatron_takes() {
        assert_eq!(parse_layer_freq(None, 3).unwrap(), vec![true; 3]);
        assert_eq!(
            parse_layer_freq(Some(&Value::Int(2)), 4).unwrap(),
            vec![true, false, true, false]
        );
        assert_eq!(
            parse_layer_freq(Some(&s("2")), 4).unwrap(),
            vec![true, false, true, false]
        );
        let deepseek = parse_layer_freq(Some(&s("([0]*1+[1]*26)")), 27).unwrap();
        assert_eq!(deepseek.iter().filter(|m| **m).count(), 26);
        assert!(!deepseek[0]);
        assert_eq!(
            parse_layer_freq(Some(&s("[0, 1] * 2")), 4).unwrap(),
            vec![false, true, false, true]
        );
        let list = Value::List(vec![Value::Int(0), Value::Int(1), Value::Float(1.0)]);
        assert_eq!(
            parse_layer_freq(Some(&list), 3).unwrap(),
            vec![false, true, true]
        );
    }

    #[test]
    fn wrong_lengths_and_junk_are_errors() {
        assert_eq!(
            parse_layer_freq(Some(&s("[1]*3")), 8),
            Err(LayerFreqError::Length {
                entries: 3,
                layers: 8
            })
        );
        assert!(parse_layer_freq(Some(&s("[1]*99999999999")), 8).is_err());
        assert!(parse_layer_freq(Some(&s("banana")), 8).is_err());
        assert!(parse_layer_freq(Some(&Value::Bool(true)), 8).is_err());
    }

    proptest! {
        #[test]
        fn never_panics_and_always_one_entry_per_layer(text in ".{0,40}", layers in 0u64..64) {
            if let Ok(p) = parse_layer_freq(Some(&Value::Str(text)), layers) {
                prop_assert_eq!(p.len() as u64, layers);
            }
        }

        #[test]
        fn repeated_lists_expand(items in prop::collection::vec(0u8..2, 1..5), k in 1usize..10) {
            let body: Vec<String> = items.iter().map(|i| i.to_string()).collect();
            let text = format!("[{}]*{k}", body.join(","));
            let n = (items.len() * k) as u64;
            let p = parse_layer_freq(Some(&Value::Str(text)), n).unwrap();
            for (i, m) in p.iter().enumerate() {
                prop_assert_eq!(*m, items[i % items.len()] == 1);
            }
        }
    }
}
