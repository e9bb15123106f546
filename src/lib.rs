//! primus-tune: a performance-tuning assistant for AMD Primus training jobs.
//!
//! The API is the application layer, [`app`] — the use cases the CLI and the TUI both call (a
//! session, a trial, a sweep, a HipBLASLt stage, edits, the read models) — and the plain data
//! of [`domain`]. Under them are the engines: [`config`] resolves, validates and edits
//! experiment YAMLs exactly as Primus reads them; [`run`] launches and measures trials;
//! [`telemetry`] reads GPUs; [`store`] keeps trials and studies; [`tune`] searches knob spaces;
//! [`gemm`] handles the HipBLASLt stages; [`report`] writes a study's report. They stay public
//! for the integration tests and benchmarks, and for programs that need one engine alone (a log
//! parser, the store). The two frontends, the command line and the TUI, are the binary's own
//! (`src/main.rs` declares them): the library cannot name them.

pub mod app;
pub mod checklist;
pub mod config;
pub mod domain;
pub mod gemm;
pub mod megatron;
pub mod proxy;
pub mod report;
pub mod run;
pub mod store;
pub mod telemetry;
pub mod tune;
pub mod util;
