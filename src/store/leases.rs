//! Study leases: one runner per study. A sweep takes its study's lease before it launches
//! anything, writes a heartbeat into it while it runs and deletes it at its end; a second runner
//! finds it held and is refused, unless its holder is provably gone (the caller judges that).
//! Taking is one `BEGIN IMMEDIATE` transaction — read the lease, judge it, write ours — so of
//! two runners that try at once exactly one gets it (a compare-and-set under SQLite's write
//! lock).

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::error::StoreResult;
use super::time::now_rfc3339;
use super::{Ctx, Store};
use crate::util::liveness::ProcessIdentity;

/// A study's lease as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub study_id: i64,
    pub holder: ProcessIdentity,
    /// When it was taken (RFC 3339).
    pub taken_at: String,
    /// The holder's last heartbeat (RFC 3339).
    pub heartbeat_at: String,
}

/// What an attempt to take a lease found.
#[derive(Debug, Clone, PartialEq)]
pub enum Take {
    /// Ours now; `replaced`: the lease of a holder judged gone, and why it was judged so.
    Taken { replaced: Option<(Lease, String)> },
    /// Another runner holds it (the same process too: one run of a study at a time).
    Held(Lease),
}

const LEASE_COLUMNS: &str =
    "study_id, host, boot_id, pid_ns, pid, start_ticks, taken_at, heartbeat_at";

fn lease_row(r: &Row<'_>) -> rusqlite::Result<Lease> {
    let ns: Option<i64> = r.get("pid_ns")?;
    let ticks: Option<i64> = r.get("start_ticks")?;
    let pid: i64 = r.get("pid")?;
    Ok(Lease {
        study_id: r.get("study_id")?,
        holder: ProcessIdentity {
            host: r.get("host")?,
            boot_id: r.get("boot_id")?,
            pid_ns: ns.and_then(|n| u64::try_from(n).ok()),
            pid: u32::try_from(pid).unwrap_or(0),
            start_ticks: ticks.and_then(|t| u64::try_from(t).ok()),
        },
        taken_at: r.get("taken_at")?,
        heartbeat_at: r.get("heartbeat_at")?,
    })
}

/// The holder's columns in `WHERE`: this exact process.
const IS_HOLDER: &str = "host = ?2 AND boot_id = ?3 AND pid_ns IS ?4 AND pid = ?5 \
    AND start_ticks IS ?6";

fn holder_params(me: &ProcessIdentity) -> (String, String, Option<i64>, i64, Option<i64>) {
    (
        me.host.clone(),
        me.boot_id.clone(),
        me.pid_ns.and_then(|n| i64::try_from(n).ok()),
        i64::from(me.pid),
        me.start_ticks.and_then(|t| i64::try_from(t).ok()),
    )
}

impl Store {
    /// Takes study `study`'s lease for `me`, unless a holder `gone` does not declare gone (it
    /// returns why it is) holds it.
    pub fn take_lease(
        &self,
        study: i64,
        me: &ProcessIdentity,
        gone: impl Fn(&Lease) -> Option<String>,
    ) -> StoreResult<Take> {
        let what = format!("take the lease of study {study}");
        self.write(&what, true, |tx| {
            self.require_study(tx, study)?;
            let found = read_lease(tx, study).ctx(&self.path, &what)?;
            let replaced = match found {
                None => None,
                Some(l) => match gone(&l) {
                    Some(why) => Some((l, why)),
                    None => return Ok(Take::Held(l)),
                },
            };
            let now = now_rfc3339();
            let (host, boot, ns, pid, ticks) = holder_params(me);
            tx.execute(
                "INSERT OR REPLACE INTO study_leases (study_id, host, boot_id, pid_ns, pid, \
                 start_ticks, taken_at, heartbeat_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                params![study, host, boot, ns, pid, ticks, now],
            )
            .ctx(&self.path, &what)?;
            Ok(Take::Taken { replaced })
        })
    }

    /// Writes `me`'s heartbeat into study `study`'s lease; false when `me` no longer holds it
    /// (another runner judged it gone and took it over).
    pub fn beat_lease(&self, study: i64, me: &ProcessIdentity) -> StoreResult<bool> {
        let what = format!("write the heartbeat of study {study}'s lease");
        let (host, boot, ns, pid, ticks) = holder_params(me);
        self.write(&what, false, |tx| {
            let n = tx
                .execute(
                    &format!(
                        "UPDATE study_leases SET heartbeat_at = ?7 WHERE study_id = ?1 AND {IS_HOLDER}"
                    ),
                    params![study, host, boot, ns, pid, ticks, now_rfc3339()],
                )
                .ctx(&self.path, &what)?;
            Ok(n > 0)
        })
    }

    /// Gives study `study`'s lease up if `me` holds it; returns whether it did.
    pub fn release_lease(&self, study: i64, me: &ProcessIdentity) -> StoreResult<bool> {
        let what = format!("release the lease of study {study}");
        let (host, boot, ns, pid, ticks) = holder_params(me);
        self.write(&what, true, |tx| {
            let n = tx
                .execute(
                    &format!("DELETE FROM study_leases WHERE study_id = ?1 AND {IS_HOLDER}"),
                    params![study, host, boot, ns, pid, ticks],
                )
                .ctx(&self.path, &what)?;
            Ok(n > 0)
        })
    }

    /// Study `study`'s lease, if one is held.
    pub fn lease(&self, study: i64) -> StoreResult<Option<Lease>> {
        read_lease(&self.lock(), study).ctx(&self.path, "read a lease")
    }
}

fn read_lease(conn: &Connection, study: i64) -> rusqlite::Result<Option<Lease>> {
    conn.query_row(
        &format!("SELECT {LEASE_COLUMNS} FROM study_leases WHERE study_id = ?1"),
        [study],
        lease_row,
    )
    .optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lease_is_refused_until_its_holder_is_judged_gone() -> StoreResult<()> {
        let store = Store::open_in_memory()?;
        let study = store.create_study("s", std::path::Path::new("x.yaml"), "mbs")?;
        let me = ProcessIdentity::current();
        let other = ProcessIdentity {
            host: "n2".into(),
            ..me.clone()
        };
        let alive = |_: &Lease| None;
        assert_eq!(
            store.take_lease(study, &me, alive)?,
            Take::Taken { replaced: None }
        );
        // Held: by another process, and by this one too (one run of a study at a time).
        for who in [&other, &me] {
            match store.take_lease(study, who, alive)? {
                Take::Held(l) => assert_eq!(l.holder, me),
                t => panic!("{t:?}"),
            }
        }
        assert!(store.beat_lease(study, &me)?);
        assert!(!store.beat_lease(study, &other)?, "not the holder");
        // Its holder judged gone: taken over, and the old holder's heartbeat says it lost it.
        match store.take_lease(study, &other, |_| Some("gone".into()))? {
            Take::Taken {
                replaced: Some((l, why)),
            } => assert_eq!((l.holder, why.as_str()), (me.clone(), "gone")),
            t => panic!("{t:?}"),
        }
        assert!(!store.beat_lease(study, &me)?);
        assert!(
            !store.release_lease(study, &me)?,
            "only its holder releases it"
        );
        assert!(store.release_lease(study, &other)?);
        assert_eq!(store.lease(study)?, None);
        Ok(())
    }
}
