//! Small helpers every layer may use: paths as the user reads them, the deterministic generator,
//! `/proc` readers, whether a recorded process still runs, the bundled example, and command lines quoted for a shell. Nothing here knows about the other modules.

pub mod bundled;
pub mod dedup;
pub mod input;
pub mod lines;
pub mod liveness;
pub mod num;
pub mod paths;
pub mod procfs;
pub mod procinfo;
pub mod rng;
pub mod shell;
pub mod stats;
pub mod suggest;
pub mod text;
