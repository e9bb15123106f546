//! A trial's batch job, whatever scheduler ran it (Slurm today): what it asked for, and the last
//! state the scheduler reported. Stored with the trial, so a later process (a resumed sweep,
//! `trials`) can find the job again through the scheduler that names it.

use serde::{Deserialize, Deserializer, Serialize};

/// A trial's job, as stored with the trial.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Job {
    /// The scheduler that runs it (`slurm`); rows stored before the name was kept are Slurm's.
    #[serde(default = "slurm")]
    pub scheduler: String,
    /// The scheduler's id of the job (Slurm's job id `4711`).
    #[serde(alias = "job_id", deserialize_with = "id_text")]
    pub id: String,
    /// The scheduler's configuration its commands used (Slurm's `slurm.conf`; None: its
    /// default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conf: Option<std::path::PathBuf>,
    pub nodes: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_node: Option<u32>,
    /// The scheduler's own state name, last seen (`PENDING`, `RUNNING`, `COMPLETED`, ...).
    pub state: String,
    /// Why it waits, while pending (`Resources`, `Priority`, ...); never empty when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unix milliseconds: submitted, started running, ended.
    pub submitted_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// The nodes it ran on, once running.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_list: Vec<String>,
}

fn slurm() -> String {
    "slurm".into()
}

/// An id stored as a number (Slurm's, before ids were text) or as text.
fn id_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Number(u64),
        Text(String),
    }
    Ok(match Id::deserialize(d)? {
        Id::Number(n) => n.to_string(),
        Id::Text(t) => t,
    })
}

impl Job {
    /// Where it stands, as a list shows it: `queued (Resources)`, `running on n1,n2`,
    /// `COMPLETED`.
    pub fn describe(&self) -> String {
        match self.state.as_str() {
            "SUBMITTED" => "submitted".into(),
            "PENDING" => match &self.reason {
                Some(r) => format!("queued ({r})"),
                None => "queued".into(),
            },
            "RUNNING" if !self.node_list.is_empty() => {
                format!("running on {}", self.node_list.join(","))
            }
            s => s.to_ascii_lowercase(),
        }
    }

    /// Seconds it waited in the queue before it ran (None: it never ran).
    pub fn pending_s(&self) -> Option<f64> {
        let started = self.started_ms?;
        Some(started.saturating_sub(self.submitted_ms) as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_stored_before_ids_were_text_reads_as_slurms() {
        let old: Job = serde_json::from_value(serde_json::json!({
            "job_id": 4711, "nodes": 2, "state": "RUNNING", "submitted_ms": 1,
            "node_list": ["n1", "n2"]
        }))
        .unwrap();
        assert_eq!((old.scheduler.as_str(), old.id.as_str()), ("slurm", "4711"));
        assert_eq!(old.describe(), "running on n1,n2");
        let v = serde_json::to_value(&old).unwrap();
        assert_eq!(v["id"], "4711");
        assert_eq!(serde_json::from_value::<Job>(v).unwrap(), old);
        let pending = Job {
            state: "PENDING".into(),
            reason: Some("Resources".into()),
            ..Job::default()
        };
        assert_eq!(pending.describe(), "queued (Resources)");
        assert_eq!(pending.pending_s(), None);
    }
}
