//! The use cases both frontends call, and the only place that orchestrates the engines: a
//! [`Session`] (the experiment, its environment, telemetry and workspace), a trial, a sweep, a
//! HipBLASLt stage, editing the experiment, and the read models the screens and commands show.
//! Long use cases report typed [`events`]; the CLI prints them, the TUI renders them.

// Decision code as short steps (issue 44): no production function here over the
// threshold in clippy.toml (tests are exempt).
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod ack;
pub mod backups;
pub mod defaults;
pub mod edit;
pub mod engines;
mod error;
pub mod events;
pub mod gemm_stage;
pub mod interrupted;
pub mod launch;
pub mod lint;
pub mod session;
pub mod state;
pub mod sweep;
#[cfg(test)]
pub(crate) mod test_session;
pub mod trial;
pub mod views;

pub use defaults::{Defaults, DefaultsError};
pub use error::AppError;
pub use events::{AppEvent, Events};
pub use session::{Session, SessionOptions};
pub use trial::{Cancel, TrialRequest};
