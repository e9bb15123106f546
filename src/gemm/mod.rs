//! HipBLASLt GEMM tuning, the seed guide's step 1: the stage-1 shape dumps, the stage-2 result
//! file, where Primus keeps them, which stage is done and what comes next, and the environment
//! each stage runs with.

pub mod dump;
pub mod probe;
pub mod results;
pub mod runner;
pub mod stage;
pub mod status;

use crate::config::env::Env;
use std::path::{Path, PathBuf};

/// What names a GEMM in both tuning files: sizes, transposes, batch count and types (the
/// dump's `--key value` pairs, the result file's columns of the same names).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct Gemm {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// `N` or `T`.
    pub trans_a: String,
    pub trans_b: String,
    pub batch_count: u64,
    pub a_type: String,
    pub b_type: String,
    pub c_type: String,
    pub d_type: String,
    pub compute_type: String,
}

/// Any GEMM, for the parsers' property tests.
#[cfg(test)]
pub(crate) fn gemm_strategy() -> impl proptest::strategy::Strategy<Value = Gemm> {
    use proptest::prelude::*;
    let ty = || {
        prop::sample::select(vec!["f32_r", "f16_r", "bf16_r", "f8_r", "bf8_r", "i8_r"])
            .prop_map(str::to_string)
    };
    let trans = || prop::sample::select(vec!["N", "T"]).prop_map(str::to_string);
    let dims = (any::<u64>(), any::<u64>(), any::<u64>(), 1u64..100);
    let types = (trans(), trans(), ty(), ty(), ty(), ty(), ty());
    (dims, types).prop_map(|((m, n, k, batch_count), (ta, tb, a, b, c, d, ct))| Gemm {
        m,
        n,
        k,
        trans_a: ta,
        trans_b: tb,
        batch_count,
        a_type: a,
        b_type: b,
        c_type: c,
        d_type: d,
        compute_type: ct,
    })
}

/// A tuning file (a shape dump or a result file) that cannot be read or parsed; the message
/// names the file and, for a parse error, the 1-based line.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    /// A dump folder with no file in it.
    #[error("{path}: no shape dump files found")]
    Empty { path: PathBuf },
}

/// Why the tuned GEMMs cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TunedEnvError {
    #[error("{}: no tuned GEMM file; run `primus-tune gemm-tune stage 2` first", .0.display())]
    Missing(PathBuf),
    #[error(transparent)]
    Unreadable(#[from] results::ResultsError),
}

/// The environment that makes a trial train with the stage-2 result file
/// (`run --gemm-tuned`, `sweep --gemm-tuned`, the TUI's choice): the file named by
/// `HIPBLASLT_TUNING_OVERRIDE_FILE` when set, else the experiment's result file. Fails, naming
/// the file, when it is missing or unreadable.
pub fn tuned_env_for(
    primus_root: &Path,
    experiment: &Path,
    env: &Env,
) -> Result<Vec<(String, String)>, TunedEnvError> {
    let layout = status::TuneLayout::new(primus_root, experiment, env);
    let file = env
        .get("HIPBLASLT_TUNING_OVERRIDE_FILE")
        .filter(|s| !s.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| layout.result_file.clone());
    if !file.is_file() {
        return Err(TunedEnvError::Missing(file));
    }
    results::read(&file)?;
    Ok(stage::tuned_env(&layout, &file))
}
