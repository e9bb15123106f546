//! primus-tune: a performance-tuning assistant for AMD Primus training jobs.
//!
//! The core knows nothing about terminals: `config` resolves, validates and edits experiment
//! YAMLs exactly as Primus reads them; `checklist` derives the tuning guide's quick-checklist
//! status from a resolved config and the environment. The `cli` frontend prints the same data
//! the TUI will render.

pub mod app;
pub mod checklist;
pub mod cli;
pub mod config;
pub mod domain;
pub mod gemm;
pub mod megatron;
pub mod report;
pub mod run;
pub mod store;
pub mod telemetry;
pub mod tui;
pub mod tune;
pub mod util;
