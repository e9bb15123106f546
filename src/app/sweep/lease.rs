//! The study's lease while a sweep runs it: taken before anything launches (refused while
//! another runner holds it), its heartbeat written by a thread of its own every
//! [`HEARTBEAT_EVERY`] whatever the sweep is doing (waiting on a trial, loading candidates), and
//! given up when the sweep ends — normally, on Ctrl-C, on an error or a panic (`Drop`). A runner
//! killed outright leaves it behind; the next one takes it over once its holder is provably
//! gone ([`liveness::judge`]).

use crate::app::AppError;
use crate::store::{Lease, LeaseTake, Store, parse_rfc3339};
use crate::util::liveness::{self, HEARTBEAT_EVERY, Liveness, ProcessIdentity};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::SystemTime;

/// A lease this process holds; given up when dropped.
pub struct HeldLease<'a> {
    store: &'a Store,
    study: i64,
    me: ProcessIdentity,
    db: std::path::PathBuf,
    /// Set by the heartbeat thread once another runner took the lease over: this one must stop
    /// launching.
    lost: Arc<AtomicBool>,
    /// Who took it over, and when this runner found out.
    lost_to: Arc<Mutex<Option<String>>>,
    stop: Option<mpsc::Sender<()>>,
    beats: Option<std::thread::JoinHandle<()>>,
    /// The lease it replaced, and why its holder was judged gone.
    replaced: Option<(Lease, String)>,
}

/// Whether a stored lease's holder is provably gone, and why.
fn holder_gone(l: &Lease) -> Option<String> {
    let since = parse_rfc3339(&l.taken_at).unwrap_or(SystemTime::UNIX_EPOCH);
    let beat = parse_rfc3339(&l.heartbeat_at);
    match liveness::judge(&l.holder, since, beat, SystemTime::now()) {
        Liveness::Alive => None,
        Liveness::Gone(why) => Some(why),
    }
}

/// How long ago an RFC 3339 time was, in whole seconds.
fn ago(at: &str) -> String {
    parse_rfc3339(at)
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .map_or_else(|| "?".into(), |d| d.as_secs().to_string())
}

/// The refusal a held lease gives: who holds it, since when, its last heartbeat.
pub fn busy(study: &str, l: &Lease) -> AppError {
    AppError::StudyBusy {
        study: study.to_string(),
        holder: format!(
            "{} since {} (last heartbeat {} s ago)",
            l.holder.describe(),
            l.taken_at,
            ago(&l.heartbeat_at)
        ),
    }
}

impl<'a> HeldLease<'a> {
    /// Takes study `id`'s lease (named `name` in messages) for this process.
    pub fn take(store: &'a Store, id: i64, name: &str) -> Result<HeldLease<'a>, AppError> {
        let me = ProcessIdentity::current();
        let replaced = match store.take_lease(id, &me, holder_gone)? {
            LeaseTake::Held(l) => return Err(busy(name, &l)),
            LeaseTake::Taken { replaced } => replaced,
        };
        let mut held = HeldLease {
            store,
            study: id,
            me,
            db: store.path().to_path_buf(),
            lost: Arc::default(),
            lost_to: Arc::default(),
            stop: None,
            beats: None,
            replaced,
        };
        // An in-memory store (tests) is this process's alone: nobody else reads a heartbeat.
        if held.db != std::path::Path::new(":memory:") {
            held.start_beating();
        }
        Ok(held)
    }

    /// The heartbeat thread, on a connection of its own (the sweep's may be busy for a while).
    fn start_beating(&mut self) {
        let (tx, rx) = mpsc::channel::<()>();
        let (study, me, db) = (self.study, self.me.clone(), self.db.clone());
        let (lost, lost_to) = (self.lost.clone(), self.lost_to.clone());
        let beats = std::thread::spawn(move || {
            let Ok(store) = Store::open(&db) else { return };
            // Until told to stop (or the sender is dropped).
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(HEARTBEAT_EVERY) {
                // A failed write (a locked database) is tried again at the next beat: the
                // staleness limit spans many.
                if let Ok(false) = store.beat_lease(study, &me) {
                    let now = store.lease(study).ok().flatten();
                    let who = now.map_or_else(
                        || "it was released by another process".to_string(),
                        |l| format!("{} took it over", l.holder.describe()),
                    );
                    if let Ok(mut w) = lost_to.lock() {
                        *w = Some(who);
                    }
                    lost.store(true, Ordering::SeqCst);
                    return;
                }
            }
        });
        self.stop = Some(tx);
        self.beats = Some(beats);
    }

    /// `held`, else study `id`'s lease taken now (a new study's, once it exists).
    pub fn keep_or_take(
        held: Option<HeldLease<'a>>,
        store: &'a Store,
        id: i64,
        name: &str,
    ) -> Result<HeldLease<'a>, AppError> {
        match held {
            Some(h) => Ok(h),
            None => HeldLease::take(store, id, name),
        }
    }

    /// What the sweep says when it took the lease over from a runner judged gone.
    pub fn takeover(&self) -> Option<String> {
        let (l, why) = self.replaced.as_ref()?;
        Some(format!(
            "took the study's lease over from {} (held since {}): {why}",
            l.holder.describe(),
            l.taken_at
        ))
    }

    /// The error that ends the sweep once another runner took the lease over.
    pub fn lost(&self, study: &str) -> Option<AppError> {
        Some(AppError::LeaseLost {
            study: study.to_string(),
            why: self.lost_to()?,
        })
    }

    /// Set once another runner took the lease over.
    pub fn lost_flag(&self) -> Arc<AtomicBool> {
        self.lost.clone()
    }

    /// Who took the lease over, if another runner did.
    fn lost_to(&self) -> Option<String> {
        if !self.lost.load(Ordering::SeqCst) {
            return None;
        }
        self.lost_to.lock().ok().and_then(|w| w.clone())
    }
}

impl Drop for HeldLease<'_> {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(b) = self.beats.take() {
            let _ = b.join();
        }
        // A lease left behind (the database unavailable for the store's whole patience) is
        // taken over once this process has ended.
        let _ = self.store.release_lease(self.study, &self.me);
    }
}
