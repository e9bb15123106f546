//! Trials always end: a trial still `running` in the store whose runner process is gone (killed,
//! crashed, the machine rebooted) becomes `interrupted` — unless its folder holds the result the
//! runner could not store (the database was unavailable at its end), which is imported instead.
//! Run once per session, the first time it opens the store, so `trials`, the TUI and sweeps
//! never show a trial running for ever. A batch trial stays `running` while its job does (its
//! time limit ends it), so a resumed sweep can follow the job again.

use super::AppError;
use crate::domain::trial::TrialStatus;
use crate::store::{Store, TrialFilter, TrialRow, parse_rfc3339, rfc3339_utc};
use crate::util::liveness::{self, Liveness};
use std::time::{Duration, SystemTime};

/// How much earlier than the trial's creation its runner may appear to have started: the boot
/// time `/proc` gives is whole seconds.
const SLACK: Duration = Duration::from_secs(2);

/// Whether the process that started `t` still runs, as this process can tell: on the runner's
/// host, boot and PID namespace, by its pid and start time; elsewhere (another node sharing the
/// workspace, a container), by the age of the heartbeat the runner writes while it watches the
/// trial ([`liveness::judge`]). Trials without a pid count as running: nothing says otherwise.
pub(crate) fn runner_alive(t: &TrialRow) -> bool {
    let Some(pid) = t.runner_pid else {
        return true;
    };
    if let Some(runner) = &t.runner {
        let since = parse_rfc3339(&t.created_at).unwrap_or(SystemTime::UNIX_EPOCH);
        let beat = t.heartbeat_at.as_deref().and_then(parse_rfc3339);
        return liveness::judge(runner, since, beat, SystemTime::now()) == Liveness::Alive;
    }
    // Stored before the runner's host was kept: its pid is all there is.
    if pid == std::process::id() {
        return true;
    }
    match crate::util::procfs::start_time(pid) {
        None => false,
        Some(started) => {
            let started = started.checked_sub(SLACK).unwrap_or(started);
            rfc3339_utc(started) <= t.created_at
        }
    }
}

/// Ends every `running` trial whose runner is gone: its kept result is stored, or it is marked
/// `interrupted`; returns the ids marked interrupted. A read-only store is left as it is (its
/// listing shows such trials still running; a run that can write ends them).
pub fn reap(store: &Store) -> Result<Vec<i64>, AppError> {
    use crate::run::trial::pending::{Imported, import};
    if store.is_read_only() {
        return Ok(Vec::new());
    }
    let running = store.list_trials(&TrialFilter {
        statuses: vec![TrialStatus::Running],
        ..TrialFilter::all()
    })?;
    let mut done = Vec::new();
    for t in running.iter().filter(|t| !runner_alive(t)) {
        if import(store, t.id, &t.trial_dir)? == Imported::Stored {
            continue;
        }
        // A batch trial's job outlives its runner: while the scheduler still runs it, the trial
        // runs (a resumed sweep follows it again); once the job is over, it is interrupted,
        // and its job's record says how the job ended (not the state its runner saw last).
        if let Some(job) = &t.job
            && let Some(sched) = crate::run::launch::scheduler::of_job(job)
        {
            let status = sched.status(&job.id);
            if status.as_ref().is_ok_and(|s| !s.state.is_over()) {
                continue;
            }
            let _ = store.set_trial_job(t.id, &job_ended(job, status.ok()));
        }
        if store.interrupt_trial(t.id)? {
            done.push(t.id);
        }
    }
    Ok(done)
}

/// A job's record once its trial is interrupted: the state the scheduler reports last (`LOST`
/// when it no longer knows the job), no pending reason, and when it was found ended — not the
/// state its runner saw last.
fn job_ended(
    job: &crate::domain::job::Job,
    status: Option<crate::run::launch::scheduler::JobStatus>,
) -> crate::domain::job::Job {
    let mut ended = job.clone();
    ended.state = status.map_or_else(|| "LOST".to_string(), |s| s.name);
    ended.reason = None;
    ended.ended_ms = ended
        .ended_ms
        .or_else(|| Some(crate::run::launch::batch::unix_ms()));
    ended
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::launch::scheduler::{JobEnd, JobState, JobStatus};

    #[test]
    fn a_runner_elsewhere_is_judged_by_its_heartbeat_and_this_one_by_its_pid() {
        let store = Store::open_in_memory().unwrap();
        let id = store
            .insert_trial(&crate::store::NewTrial::default())
            .unwrap();
        let mine = store.trial(id).unwrap().unwrap();
        assert!(runner_alive(&mine), "this process runs it");
        let mut elsewhere = mine.clone();
        if let Some(r) = elsewhere.runner.as_mut() {
            r.host = format!("{}-other", r.host);
        }
        assert!(runner_alive(&elsewhere), "a heartbeat of just now");
        let stale = SystemTime::now() - liveness::STALE_AFTER - Duration::from_secs(5);
        elsewhere.heartbeat_at = Some(rfc3339_utc(stale));
        elsewhere.created_at = rfc3339_utc(stale);
        assert!(!runner_alive(&elsewhere), "its heartbeat went stale");
    }

    #[test]
    fn an_interrupted_trial_s_job_says_how_it_ended_not_how_its_runner_last_saw_it() {
        let running = crate::domain::job::Job {
            scheduler: "slurm".into(),
            id: "7".into(),
            state: "RUNNING".into(),
            node_list: vec!["n1".into()],
            ..Default::default()
        };
        let timeout = JobStatus {
            state: JobState::Ended(JobEnd::TimeLimit),
            name: "TIMEOUT".into(),
            node_list: vec!["n1".into()],
            restarts: 0,
        };
        let j = job_ended(&running, Some(timeout));
        assert_eq!(j.state, "TIMEOUT");
        assert!(j.ended_ms.is_some());
        assert_eq!(job_ended(&running, None).state, "LOST");
    }
}
