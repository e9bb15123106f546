//! The run engine: launch a trial, watch its log, measure the steady state, classify failures.

// Decision code as short steps (issue 44): no production function here over the
// threshold in clippy.toml (tests are exempt).
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod capabilities;
pub mod cgroup;
pub mod failure;
pub mod launch;
pub mod logparse;
pub mod megatron_args;
pub mod process;
pub mod profile;

pub mod steady;
pub mod summary;
pub mod supervise;
pub mod trial;
