//! How a trial ended, as a pure function of what the runner saw: the failure the log showed,
//! how the process exited, and whether a steady-state measurement exists.

use crate::domain::trial::{ExitInfo, Failure, FailureClass, TrialStatus};

/// The trial's status and failure. `measured`: the summary has steady samples; `trains`: the
/// workload prints iterations (a job completes by exiting 0 instead).
pub fn classify(
    failure: Option<Failure>,
    exit: &ExitInfo,
    measured: bool,
    trains: bool,
) -> (TrialStatus, Option<Failure>) {
    let status = match (&failure, exit.stopped_by_user) {
        (None, _) if measured => TrialStatus::Completed,
        (None, false) if !trains && exit.code == Some(0) => TrialStatus::Completed,
        (Some(f), _) if f.class == FailureClass::KilledByUser => TrialStatus::Stopped,
        (_, true) => TrialStatus::Stopped,
        _ => TrialStatus::Failed,
    };
    let failure = match (status, failure) {
        (TrialStatus::Failed, None) => Some(Failure {
            class: FailureClass::NonZeroExit,
            line: Some(format!(
                "the workload ended (exit {}) without a measurable iteration",
                exit.code.map_or("by signal".into(), |c| c.to_string())
            )),
        }),
        (_, f) => f,
    };
    (status, failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: Option<i32>, user: bool) -> ExitInfo {
        ExitInfo {
            code,
            stopped_by_user: user,
            ..ExitInfo::default()
        }
    }

    fn fail(class: FailureClass) -> Option<Failure> {
        Some(Failure { class, line: None })
    }

    #[test]
    fn a_measurement_completes_and_nothing_measured_fails_with_the_exit() {
        assert_eq!(
            classify(None, &exit(Some(0), false), true, true).0,
            TrialStatus::Completed
        );
        let (st, f) = classify(None, &exit(Some(0), false), false, true);
        assert_eq!(st, TrialStatus::Failed);
        assert!(f.unwrap().line.unwrap().contains("exit 0"));
        let (_, f) = classify(None, &exit(None, false), false, true);
        assert!(f.unwrap().line.unwrap().contains("by signal"));
    }

    #[test]
    fn jobs_complete_by_exiting_zero() {
        assert_eq!(
            classify(None, &exit(Some(0), false), false, false).0,
            TrialStatus::Completed
        );
        assert_eq!(
            classify(None, &exit(Some(1), false), false, false).0,
            TrialStatus::Failed
        );
    }

    #[test]
    fn failures_and_user_stops_win_over_measurements() {
        let (st, f) = classify(fail(FailureClass::Oom), &exit(Some(1), false), true, true);
        assert_eq!(
            (st, f.unwrap().class),
            (TrialStatus::Failed, FailureClass::Oom)
        );
        assert_eq!(
            classify(
                fail(FailureClass::KilledByUser),
                &exit(None, false),
                false,
                true
            )
            .0,
            TrialStatus::Stopped
        );
        assert_eq!(
            classify(None, &exit(None, true), false, true).0,
            TrialStatus::Stopped
        );
    }
}
