//! Plain data the store takes and returns. All of it is `Serialize` so the CLI can print it as
//! JSON; key/value lists serialise as arrays of `{"key": …, "value": …}` objects, exactly as they
//! are stored in the database.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[cfg(any(test, feature = "testkit"))]
pub use crate::domain::trial::ParseStatusError;
pub use crate::domain::trial::TrialStatus;
use crate::domain::trial::{ExitInfo, Failure, SteadyStats};

/// What the run engine knows when it launches a trial.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct NewTrial {
    /// The study the trial belongs to, if any (it must exist).
    pub study_id: Option<i64>,
    /// The experiment YAML the trial ran.
    pub config_path: PathBuf,
    /// Hash of the resolved config (whatever the caller uses; stored as given).
    pub config_hash: String,
    /// Overrides applied on top of the config, in order.
    #[serde(with = "key_values")]
    pub overrides: Vec<(String, Value)>,
    /// The launch profile name, if any.
    pub profile: Option<String>,
    /// The command line that was run.
    pub argv: Vec<String>,
    /// Environment variables set for the trial (not the whole environment), in order.
    #[serde(with = "key_values")]
    pub env: Vec<(String, String)>,
    /// Folder holding the trial's logs and artefacts.
    pub trial_dir: PathBuf,
    /// What it runs: the main module's resolved parameters with the overrides applied (a JSON
    /// object, flag → value).
    #[serde(default)]
    pub resolved: Option<Value>,
}

/// How a trial ended, as the run engine fills it in for [`Store::finish_trial`].
///
/// Start from [`TrialEnd::new`] and add what is known with [`TrialEnd::with_exit`],
/// [`TrialEnd::with_steady`] and [`TrialEnd::with_failure`], or set the fields directly.
///
/// [`Store::finish_trial`]: super::Store::finish_trial
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialEnd {
    /// Anything but `running`.
    pub status: TrialStatus,
    pub failure: Option<Failure>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    /// Iterations the engine parsed from the log.
    pub iterations_seen: u64,
    /// Wall-clock seconds from launch to the end.
    pub wall_s: f64,
    /// The full summary (steady-state statistics and whatever else the engine reports).
    pub summary: Option<Value>,
    // Copies of the headline numbers, stored in their own columns so trials sort by them.
    pub median_step_ms: Option<f64>,
    pub ci95_ms: Option<f64>,
    pub tokens_per_s_per_gpu: Option<f64>,
    pub tflops_per_gpu: Option<f64>,
    pub peak_mem_gib: Option<f64>,
}

impl TrialEnd {
    /// An end with the given status and wall time and nothing else known.
    pub fn new(status: TrialStatus, wall_s: f64) -> Self {
        TrialEnd {
            status,
            failure: None,
            exit_code: None,
            exit_signal: None,
            iterations_seen: 0,
            wall_s,
            summary: None,
            median_step_ms: None,
            ci95_ms: None,
            tokens_per_s_per_gpu: None,
            tflops_per_gpu: None,
            peak_mem_gib: None,
        }
    }

    /// Copies the exit code and signal.
    pub fn with_exit(mut self, exit: &ExitInfo) -> Self {
        self.exit_code = exit.code;
        self.exit_signal = exit.signal;
        self
    }

    pub fn with_failure(mut self, failure: Option<Failure>) -> Self {
        self.failure = failure;
        self
    }

    /// Copies the headline numbers of `stats` (nothing when it holds no iteration).
    pub fn with_steady(mut self, stats: &SteadyStats) -> Self {
        if stats.n > 0 {
            self.median_step_ms = Some(stats.median_step_ms);
            self.ci95_ms = Some(stats.ci95_ms);
            self.tokens_per_s_per_gpu = stats.tokens_per_s_per_gpu;
            self.tflops_per_gpu = stats.tflops_per_gpu;
        }
        self
    }
}

/// One stored trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRow {
    pub id: i64,
    pub study_id: Option<i64>,
    pub status: TrialStatus,
    pub created_at: String,
    pub started_at: Option<String>,
    /// When it ended; for an interrupted trial, the last time anything was stored for it.
    pub finished_at: Option<String>,
    /// The last time anything was stored for it.
    pub updated_at: String,
    pub config_path: PathBuf,
    pub config_hash: String,
    #[serde(with = "key_values")]
    pub overrides: Vec<(String, Value)>,
    pub profile: Option<String>,
    pub argv: Vec<String>,
    #[serde(with = "key_values")]
    pub env: Vec<(String, String)>,
    pub trial_dir: PathBuf,
    /// Process id of the primus-tune that inserted the trial.
    pub runner_pid: Option<u32>,
    /// That process as another one can judge it (host, boot id, PID namespace, start time);
    /// absent for trials stored before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<crate::util::liveness::ProcessIdentity>,
    /// The runner's last heartbeat while it watched the trial (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_at: Option<String>,
    pub failure: Option<Failure>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    /// As reported by the engine at the end (0 until then).
    pub iterations_seen: u64,
    /// Rows in the `iterations` table for this trial.
    pub iterations_stored: u64,
    pub wall_s: Option<f64>,
    pub summary: Option<Value>,
    pub median_step_ms: Option<f64>,
    pub ci95_ms: Option<f64>,
    pub tokens_per_s_per_gpu: Option<f64>,
    pub tflops_per_gpu: Option<f64>,
    pub peak_mem_gib: Option<f64>,
    /// What it ran (see [`NewTrial::resolved`]); absent for trials stored before it was kept.
    /// Left out of the JSON of lists (`trials show --json` carries it).
    #[serde(skip)]
    pub resolved: Option<Value>,
    /// Its batch job, when it ran as one (a Slurm job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<crate::domain::job::Job>,
}

impl TrialRow {
    /// What its peak memory figure measures: as its summary says, else (older summaries) as
    /// its source text implies; `None` without a figure.
    pub fn peak_mem_kind(&self) -> Option<crate::domain::trial::MemorySource> {
        self.peak_mem_gib?;
        let s = self.summary.as_ref();
        s.and_then(|s| s.get("peak_mem_kind"))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .or_else(|| {
                s.and_then(|s| s.get("peak_mem_source"))
                    .and_then(|v| v.as_str())
                    .map(crate::domain::trial::MemorySource::from_source_text)
            })
    }

    /// Why the runner ended it, as its summary stores it (`None`: stored before the reason was
    /// kept, or the summary is missing).
    pub fn stop_reason(&self) -> Option<crate::domain::trial::StopReason> {
        self.summary_field("stop_reason")
    }

    /// The world it launched at, as its summary stores it (`None`: unknown at launch, or
    /// stored before the world was kept).
    pub fn ran_on_gpus(&self) -> Option<u64> {
        self.summary_field("world")
    }

    /// What its figures are evidence of, as its summary stores it (`None`: stored before it
    /// was kept).
    pub fn stored_basis(&self) -> Option<crate::domain::evidence::Basis> {
        self.summary_field("basis")
    }

    /// The memory of the GPUs it ran on, bytes: the smallest its telemetry reported (`None`:
    /// not sampled, or stored before the summary kept it).
    pub fn gpu_memory_bytes(&self) -> Option<u64> {
        let gpus: Vec<crate::domain::telemetry::GpuSummary> = self.summary_field("telemetry")?;
        gpus.iter().filter_map(|g| g.vram_total_bytes).min()
    }

    /// Field `key` of its summary, typed.
    fn summary_field<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        let v = self.summary.as_ref()?.get(key)?;
        serde_json::from_value(v.clone()).ok()
    }
}

/// Which trials [`Store::list_trials`] returns. The default selects all of them.
///
/// [`Store::list_trials`]: super::Store::list_trials
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TrialFilter {
    /// Only trials of this study.
    pub study_id: Option<i64>,
    /// Only trials with one of these statuses (empty: any).
    pub statuses: Vec<TrialStatus>,
    /// Only the last `n` trials (by id) that match.
    pub last: Option<usize>,
    /// Only trials that did not complete and failed with one of these classes (empty: any), as
    /// the status column shows them.
    #[serde(default)]
    pub failures: Vec<crate::domain::trial::FailureClass>,
}

impl TrialFilter {
    pub fn all() -> Self {
        TrialFilter::default()
    }

    pub fn study(mut self, study_id: i64) -> Self {
        self.study_id = Some(study_id);
        self
    }

    /// Adds a failure class to accept (a trial that did not complete, failing so).
    pub fn failure(mut self, class: crate::domain::trial::FailureClass) -> Self {
        if !self.failures.contains(&class) {
            self.failures.push(class);
        }
        self
    }

    /// Adds a status to accept.
    pub fn status(mut self, status: TrialStatus) -> Self {
        if !self.statuses.contains(&status) {
            self.statuses.push(status);
        }
        self
    }

    pub fn last(mut self, n: usize) -> Self {
        self.last = Some(n);
        self
    }
}

/// One stored study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyRow {
    pub id: i64,
    pub name: String,
    pub created_at: String,
    pub config_path: PathBuf,
    /// What kind of study it is (e.g. a sweep or a search); free text chosen by the caller.
    pub kind: String,
    /// The search space, as the caller describes it.
    pub space: Option<Value>,
    pub notes: Option<String>,
    /// How its trials launch, as the caller recorded it (None: stored before it was kept).
    pub launch: Option<Value>,
    /// Trials recorded for the study.
    pub trials: u64,
}

/// Serialises `Vec<(K, V)>` as `[{"key": k, "value": v}, …]` (order kept, duplicates allowed).
pub(crate) mod key_values {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct PairRef<'a, K, V> {
        key: &'a K,
        value: &'a V,
    }

    #[derive(Deserialize)]
    struct Pair<K, V> {
        key: K,
        value: V,
    }

    pub fn serialize<S, K, V>(pairs: &[(K, V)], s: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        K: Serialize,
        V: Serialize,
    {
        s.collect_seq(pairs.iter().map(|(key, value)| PairRef { key, value }))
    }

    pub fn deserialize<'de, D, K, V>(d: D) -> Result<Vec<(K, V)>, D::Error>
    where
        D: Deserializer<'de>,
        K: Deserialize<'de>,
        V: Deserialize<'de>,
    {
        let pairs = Vec::<Pair<K, V>>::deserialize(d)?;
        Ok(pairs.into_iter().map(|p| (p.key, p.value)).collect())
    }

    /// The stored JSON text of a key/value list.
    pub fn to_json<K: Serialize, V: Serialize>(
        pairs: &[(K, V)],
    ) -> Result<String, serde_json::Error> {
        let refs: Vec<PairRef<'_, K, V>> = pairs
            .iter()
            .map(|(key, value)| PairRef { key, value })
            .collect();
        serde_json::to_string(&refs)
    }

    /// Parses what [`to_json`] wrote.
    pub fn from_json<K, V>(text: &str) -> Result<Vec<(K, V)>, serde_json::Error>
    where
        K: for<'de> Deserialize<'de>,
        V: for<'de> Deserialize<'de>,
    {
        let pairs: Vec<Pair<K, V>> = serde_json::from_str(text)?;
        Ok(pairs.into_iter().map(|p| (p.key, p.value)).collect())
    }
}
