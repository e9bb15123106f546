//! The Primus config engine: read experiment YAMLs with Primus' exact semantics, keep where
//! every value came from, validate, and edit the experiment file safely.

pub mod env;
pub mod error;
pub mod overrides;
mod parse_cache;
mod pyyaml;
mod pyyaml_scalars;
pub mod resolve;
pub mod tree;
pub mod yaml;

pub use crate::domain::value::Value;
#[cfg(any(test, feature = "testkit"))]
pub use env::Env;
pub use error::ConfigError;
#[cfg(any(test, feature = "testkit"))]
pub use resolve::DuplicateKey;
pub use resolve::{Experiment, LoadOptions, Module};
pub use tree::Origin;
#[cfg(any(test, feature = "testkit"))]
pub use tree::{Item, Layer, Leaf, Tree};
pub mod backups;
pub mod catalog;
pub mod diag;
pub mod doc;
pub mod edit;
pub mod lint;
pub mod literal;
pub mod megatron_defaults;
pub mod null_string;
pub mod patches;
pub mod save;
pub mod source;
pub mod suppress;
