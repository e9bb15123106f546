//! Acknowledged rules: per experiment (its canonical path), the rules of the advice the user
//! decided not to follow, with the reason.

use std::path::Path;

use rusqlite::params;

use super::error::StoreResult;
use super::time::now_rfc3339;
use super::{Ctx, Store};
use crate::domain::advice::Ack;

/// Where an acknowledgement read from the workspace's database is written, in words.
pub const IN_WORKSPACE: &str = "the workspace's database";

impl Store {
    /// Records (or replaces) the acknowledgement of `rule` for the experiment.
    pub fn acknowledge(&self, config_path: &Path, rule: &str, reason: &str) -> StoreResult<Ack> {
        let what = format!("acknowledge rule `{rule}`");
        let at = now_rfc3339();
        self.write(&what, true, |tx| {
            tx.execute(
                "INSERT INTO acknowledgements (config_path, rule, reason, created_at) \
                 VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (config_path, rule) DO UPDATE SET reason = ?3, created_at = ?4",
                params![config_path.to_string_lossy(), rule, reason, at],
            )
            .ctx(&self.path, &what)?;
            Ok(())
        })?;
        Ok(Ack {
            rule: rule.to_string(),
            reason: reason.to_string(),
            at: Some(at),
            from: IN_WORKSPACE.to_string(),
        })
    }

    /// Withdraws the acknowledgement; false when there was none.
    pub fn withdraw_ack(&self, config_path: &Path, rule: &str) -> StoreResult<bool> {
        let what = format!("withdraw the acknowledgement of `{rule}`");
        self.write(&what, true, |tx| {
            let n = tx
                .execute(
                    "DELETE FROM acknowledgements WHERE config_path = ?1 AND rule = ?2",
                    params![config_path.to_string_lossy(), rule],
                )
                .ctx(&self.path, &what)?;
            Ok(n > 0)
        })
    }

    /// The experiment's acknowledgements, by rule.
    pub fn acknowledgements(&self, config_path: &Path) -> StoreResult<Vec<Ack>> {
        let what = "read the acknowledgements";
        let conn = self.lock();
        let mut stmt = conn
            .prepare(
                "SELECT rule, reason, created_at FROM acknowledgements \
                 WHERE config_path = ?1 ORDER BY rule",
            )
            .ctx(&self.path, what)?;
        let rows = stmt
            .query_map([config_path.to_string_lossy()], |r| {
                Ok(Ack {
                    rule: r.get(0)?,
                    reason: r.get(1)?,
                    at: Some(r.get(2)?),
                    from: IN_WORKSPACE.to_string(),
                })
            })
            .ctx(&self.path, what)?;
        rows.collect::<rusqlite::Result<_>>().ctx(&self.path, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgements_are_per_experiment_replaced_and_withdrawn() -> StoreResult<()> {
        let s = Store::open_in_memory()?;
        let a = Path::new("/x/a.yaml");
        let b = Path::new("/x/b.yaml");
        s.acknowledge(a, "turbo-deepep", "DeepEP hangs on our fabric")?;
        s.acknowledge(a, "turbo-deepep", "DeepEP hangs on our RoCE fabric")?;
        s.acknowledge(a, "overlap-param-gather", "measured slower")?;
        let got = s.acknowledgements(a)?;
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].rule, "turbo-deepep");
        assert_eq!(got[1].reason, "DeepEP hangs on our RoCE fabric");
        assert!(s.acknowledgements(b)?.is_empty());
        assert!(s.withdraw_ack(a, "turbo-deepep")?);
        assert!(!s.withdraw_ack(a, "turbo-deepep")?);
        assert_eq!(s.acknowledgements(a)?.len(), 1);
        Ok(())
    }
}
