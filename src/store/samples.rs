//! Telemetry samples of a trial (schema version 2): one row per GPU per sample plus a host row.

use rusqlite::params;

use super::error::StoreResult;
use super::{Ctx, Store};
use crate::domain::telemetry::{GpuSample, HostSample, ProcessSample, Snapshot};

/// What the host row (`gpu` = -1) holds.
#[derive(serde::Serialize, serde::Deserialize)]
struct HostRow {
    host: HostSample,
    processes: Option<Vec<ProcessSample>>,
    cost_us: u64,
}

/// One `samples` row: node, ts_ms, gpu, util_pct, vram_used_bytes, power_w, data.
type SampleRow = (
    String,
    i64,
    i64,
    Option<f64>,
    Option<i64>,
    Option<f64>,
    String,
);

impl Store {
    /// Store a batch of snapshots of a trial in one transaction (a repeated timestamp keeps its
    /// first rows). Returns the number of rows written.
    pub fn add_samples(&self, trial_id: i64, snaps: &[Snapshot]) -> StoreResult<usize> {
        if snaps.is_empty() {
            return Ok(0);
        }
        let what = format!("store telemetry of trial {trial_id}");
        let mut rows: Vec<SampleRow> = Vec::new();
        for s in snaps {
            let ts = s.ts_ms as i64;
            let node = s.node.clone().unwrap_or_default();
            for g in &s.gpus {
                let data = serde_json::to_string(g).map_err(self.encode_err(&what))?;
                rows.push((
                    node.clone(),
                    ts,
                    i64::from(g.gpu),
                    g.util_pct,
                    g.vram_used_bytes.map(|b| b as i64),
                    g.power_w,
                    data,
                ));
            }
            let host = HostRow {
                host: s.host.clone(),
                processes: s.processes.clone(),
                cost_us: s.cost_us,
            };
            let data = serde_json::to_string(&host).map_err(self.encode_err(&what))?;
            rows.push((node, ts, -1, None, None, None, data));
        }
        self.write(&what, false, |tx| {
            self.require_trial(tx, trial_id)?;
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO samples (trial_id, node, ts_ms, gpu, util_pct, vram_used_bytes, \
                     power_w, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
                     ON CONFLICT (trial_id, node, ts_ms, gpu) DO NOTHING",
                )
                .ctx(&self.path, &what)?;
            let mut n = 0;
            for (node, ts, gpu, util, vram, power, data) in &rows {
                n += stmt
                    .execute(params![trial_id, node, ts, gpu, util, vram, power, data])
                    .ctx(&self.path, &what)?;
            }
            Ok(n)
        })
    }

    /// The trial's snapshots in time order (nodes in name order at the same time), rebuilt from
    /// the stored rows.
    pub fn samples(&self, trial_id: i64) -> StoreResult<Vec<Snapshot>> {
        let what = format!("read telemetry of trial {trial_id}");
        let rows: Vec<(String, i64, i64, String)> = {
            let conn = self.lock();
            self.require_trial(&conn, trial_id)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT node, ts_ms, gpu, data FROM samples WHERE trial_id = ?1 \
                     ORDER BY ts_ms, node, gpu",
                )
                .ctx(&self.path, &what)?;
            stmt.query_map([trial_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .ctx(&self.path, &what)?
            .collect::<rusqlite::Result<_>>()
            .ctx(&self.path, &what)?
        };
        let mut out: Vec<Snapshot> = Vec::new();
        for (node, ts, gpu, data) in rows {
            let node = (!node.is_empty()).then_some(node);
            if out
                .last()
                .is_none_or(|s| s.ts_ms != ts as u64 || s.node != node)
            {
                out.push(Snapshot {
                    ts_ms: ts as u64,
                    node,
                    ..Snapshot::default()
                });
            }
            let Some(snap) = out.last_mut() else { continue };
            if gpu < 0 {
                let h: HostRow = serde_json::from_str(&data)
                    .map_err(|e| self.corrupt(format!("{what} at {ts}"), e))?;
                snap.host = h.host;
                snap.processes = h.processes;
                snap.cost_us = h.cost_us;
            } else {
                let g: GpuSample = serde_json::from_str(&data)
                    .map_err(|e| self.corrupt(format!("{what} at {ts}"), e))?;
                snap.gpus.push(g);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewTrial;

    #[test]
    fn samples_round_trip() {
        let s = Store::open_in_memory().unwrap();
        let id = s.insert_trial(&NewTrial::default()).unwrap();
        let snap = Snapshot {
            ts_ms: 1000,
            gpus: vec![GpuSample {
                gpu: 0,
                util_pct: Some(97.0),
                vram_used_bytes: Some(5 << 30),
                temp_c: [("junction".to_string(), 71.0)].into_iter().collect(),
                ..GpuSample::default()
            }],
            processes: Some(vec![ProcessSample {
                pid: 9,
                gpu: 0,
                vram_bytes: 1 << 30,
                name: Some("python3".into()),
            }]),
            host: HostSample {
                cpu_pct: Some(12.5),
                ..HostSample::default()
            },
            cost_us: 210,
            node: None,
        };
        let later = Snapshot {
            ts_ms: 1500,
            ..snap.clone()
        };
        assert_eq!(
            s.add_samples(id, &[snap.clone(), later.clone()]).unwrap(),
            4
        );
        assert_eq!(s.add_samples(id, std::slice::from_ref(&snap)).unwrap(), 0);
        assert_eq!(s.samples(id).unwrap(), vec![snap.clone(), later.clone()]);
        // Two nodes read at the same time keep their own rows.
        let n1 = Snapshot {
            ts_ms: 2000,
            node: Some("n1".into()),
            ..snap.clone()
        };
        let n2 = Snapshot {
            node: Some("n2".into()),
            ..n1.clone()
        };
        assert_eq!(s.add_samples(id, &[n2.clone(), n1.clone()]).unwrap(), 4);
        assert_eq!(s.samples(id).unwrap(), vec![snap, later, n1, n2]);
    }
}
