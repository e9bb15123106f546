//! Plain data shared by every layer, with no I/O: a trial (its iterations, failure, summary,
//! status), telemetry (GPU and host readings, snapshots) and a study's verdicts. The engines
//! produce and consume these; the store keeps them; the frontends show them.

pub mod study;
pub mod telemetry;
pub mod trial;
