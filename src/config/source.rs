//! Where a value came from, in the one JSON shape every output uses for `source`: an object
//! with a `kind` and the `text` people read, plus the place when there is one —
//! `{"kind": "file", "text": "pre_trainer.yaml:12 via ...", "file", "line", "column", "via",
//! "layer"}`, `{"kind": "command-line", "text": "command line", "layer": "command-line"}`,
//! `{"kind": "default", "text": "default"}`, `{"kind": "patch", "text", "file", "line",
//! "layer"}` for a value one of Primus' patches sets (the file in Primus' tree); and for what
//! is not a value's origin (a rule's citation, the world size's source) `{"kind", "text"}`.

use super::tree::{Layer, Origin};
#[cfg(any(test, feature = "testkit"))]
pub use crate::domain::source::deserialize_reference;
pub use crate::domain::source::{named_json, serialize_reference};
use serde_json::{Value, json};

/// A value's origin (None: the catalog default).
pub fn origin_json(origin: Option<&Origin>) -> Value {
    match origin {
        None => json!({"kind": "default", "text": "default"}),
        Some(o) if o.layer == Layer::CommandLine => json!({
            "kind": "command-line",
            "text": o.describe(),
            "layer": o.layer,
        }),
        Some(o) if o.layer == Layer::Patch => json!({
            "kind": "patch",
            "text": o.describe(),
            "file": o.file.display().to_string(),
            "line": o.line,
            "layer": o.layer,
        }),
        Some(o) => json!({
            "kind": "file",
            "text": o.describe(),
            "file": o.file.display().to_string(),
            "line": o.line,
            "column": o.column,
            "via": o.via.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "layer": o.layer,
        }),
    }
}

/// `serialize_with` for an `Option<Origin>` field written as `source`.
pub fn serialize_origin<S: serde::Serializer>(o: &Option<Origin>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&origin_json(o.as_ref()), s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::Arc;

    #[test]
    fn every_kind_is_an_object_with_kind_and_text() {
        let file = Origin {
            file: Arc::from(Path::new("/r/exp.yaml")),
            line: 12,
            column: 5,
            via: Vec::new(),
            layer: Layer::Experiment,
        };
        let cases = [
            origin_json(Some(&file)),
            origin_json(Some(&Origin::command_line())),
            origin_json(None),
            named_json("flag", "--gpus"),
        ];
        for v in &cases {
            assert!(v["kind"].is_string() && v["text"].is_string(), "{v}");
        }
        assert_eq!(cases[0]["line"], 12);
        assert_eq!(cases[0]["file"], "/r/exp.yaml");
        assert_eq!(cases[0]["text"], "exp.yaml:12");
        assert_eq!(cases[1]["kind"], "command-line");
        assert_eq!(cases[2]["kind"], "default");
    }
}
