//! primus-tune: a performance-tuning assistant for AMD Primus training jobs.
//!
//! The API is the application layer, [`app`] — the use cases the CLI and the TUI both call (a
//! session, a trial, a sweep, a HipBLASLt stage, edits, the read models) — and the plain data
//! of [`domain`]. Under them are the engines: `config` resolves, validates and edits experiment
//! YAMLs exactly as Primus reads them; `run` launches and measures trials; `telemetry` reads
//! GPUs; `store` keeps trials and studies; `tune` searches knob spaces; `gemm` handles the
//! HipBLASLt stages; `report` writes a study's report; `proxy` is the CPU stand-in workload;
//! `megatron` is the typed view of Megatron's parameters.
//!
//! The engines are crate-private. The two frontends, the command line and the TUI, are the
//! binary's own (`src/main.rs` declares them): they reach the engines only through the items
//! [`app::engines`] lists. The `testkit` feature makes the engines public for the integration
//! tests, benchmarks and examples (a dev-dependency turns it on); what only they use is built
//! only with it (`#[cfg(any(test, feature = "testkit"))]`), so dead code stays an error.

// The facade's docs may name engine items that are private without `testkit`.
#![cfg_attr(not(feature = "testkit"), allow(rustdoc::private_intra_doc_links))]

pub mod app;
#[cfg(feature = "testkit")]
pub mod checklist;
#[cfg(not(feature = "testkit"))]
mod checklist;
#[cfg(feature = "testkit")]
pub mod config;
#[cfg(not(feature = "testkit"))]
mod config;
pub mod domain;
#[cfg(feature = "testkit")]
pub mod gemm;
#[cfg(not(feature = "testkit"))]
mod gemm;
#[cfg(feature = "testkit")]
pub mod megatron;
#[cfg(not(feature = "testkit"))]
mod megatron;
#[cfg(feature = "testkit")]
pub mod proxy;
#[cfg(not(feature = "testkit"))]
mod proxy;
#[cfg(feature = "testkit")]
pub mod report;
#[cfg(not(feature = "testkit"))]
mod report;
#[cfg(feature = "testkit")]
pub mod run;
#[cfg(not(feature = "testkit"))]
mod run;
#[cfg(feature = "testkit")]
pub mod store;
#[cfg(not(feature = "testkit"))]
mod store;
#[cfg(feature = "testkit")]
pub mod telemetry;
#[cfg(not(feature = "testkit"))]
mod telemetry;
#[cfg(feature = "testkit")]
pub mod testkit;
#[cfg(feature = "testkit")]
pub mod tune;
#[cfg(not(feature = "testkit"))]
mod tune;
#[cfg(feature = "testkit")]
pub mod util;
#[cfg(not(feature = "testkit"))]
mod util;
