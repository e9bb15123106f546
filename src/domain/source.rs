//! A source that is not a value's origin (a rule's citation, the world size's source) in the
//! one JSON shape outputs use for `source`: `{"kind", "text"}` (the config engine adds the
//! place for a value's origin: `config::source`).

use serde_json::{Value, json};

/// A source that is not a value's origin: its kind and its text.
pub fn named_json(kind: &str, text: &str) -> Value {
    json!({"kind": kind, "text": text})
}

/// `serialize_with` for a citation string written as `source` (`{"kind": "reference", "text"}`).
pub fn serialize_reference<S: serde::Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&named_json("reference", text), s)
}

/// `deserialize_with` for a citation: the `{"kind", "text"}` object, or a plain string.
pub fn deserialize_reference<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Object { text: String },
    }
    Ok(match <Either as serde::Deserialize>::deserialize(d)? {
        Either::Text(t) | Either::Object { text: t } => t,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_basis_writes_an_object_and_reads_both_shapes() {
        use super::super::evidence::Basis;
        let b = Basis::Rule {
            source: "guide §7".into(),
        };
        let v = serde_json::to_value(&b).unwrap_or_default();
        assert_eq!(
            v["source"],
            json!({"kind": "reference", "text": "guide §7"})
        );
        let back: Option<Basis> = serde_json::from_value(v).ok();
        assert_eq!(back.as_ref(), Some(&b));
        let old: Option<Basis> =
            serde_json::from_value(json!({"kind": "rule", "source": "guide §7"})).ok();
        assert_eq!(old, Some(b));
    }
}
