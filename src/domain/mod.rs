//! Plain data shared by every layer, with no I/O: a trial (its iterations, failure, summary,
//! status), telemetry (GPU and host readings, snapshots), a study's verdicts, and what produced
//! a figure (its evidence basis). The engines
//! produce and consume these; the store keeps them; the frontends show them.

pub mod advice;
pub mod evidence;
pub mod job;
pub mod source;
pub mod study;
pub mod telemetry;
pub mod trial;
pub mod value;
