//! Small helpers every layer may use: paths as the user reads them, the deterministic generator,
//! `/proc` readers, and the bundled example. Nothing here knows about the other modules.

pub mod bundled;
pub mod paths;
pub mod procfs;
pub mod rng;
