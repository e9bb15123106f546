//! Sessions for unit tests: a private copy of the bundled example whose telemetry reads a
//! recorded node (`sys/`, `proc/`), with the built-in defaults (never the user's file).
#![allow(clippy::unwrap_used)]

use super::defaults::Defaults;
use super::session::{Session, SessionOptions};
use crate::run::trial::TelemetrySetup;
use crate::telemetry::select::Roots;
use std::path::Path;

/// The bundled example extracted into `dir`, its workspace `dir/ws`, telemetry from `node`.
pub(crate) fn on_recorded_node(dir: &Path, node: &Path, gpus: Option<u64>) -> Session {
    crate::util::bundled::extract(dir).unwrap();
    Session::open(SessionOptions {
        config: Some(dir.join(crate::util::bundled::DEFAULT_EXPERIMENT)),
        workspace: Some(dir.join("ws")),
        gpus,
        telemetry: Some(TelemetrySetup {
            backend: "amdgpu-sysfs".into(),
            roots: Roots {
                sysfs: node.join("sys"),
                procfs: node.join("proc"),
            },
            ..TelemetrySetup::default()
        }),
        defaults: Some(Defaults::default()),
        ..SessionOptions::default()
    })
    .unwrap()
}
