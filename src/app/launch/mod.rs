//! How a trial launches, decided once: the environment the launch sets and where each variable
//! of it comes from ([`env`](mod@env)), where it runs and on how many ranks ([`placement`], the one
//! place a world is worked out), a batch scheduler's settings ([`slurm`]), and the
//! [`plan::LaunchPlan`] that holds them with the basis of the trial's figures and its launcher.

pub mod env;
pub mod placement;
pub mod plan;
pub mod slurm;
pub mod view;

pub use env::{EnvRef, EnvSource, LaunchEnv};
pub use placement::{FALLBACK_GPUS, Placement};
pub use plan::{LaunchPlan, PlanAsk, PlanBase};
pub use view::{LaunchWhere, ViewProfile, scheduler_title};
