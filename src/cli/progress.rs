//! Running a use case from the command line: Ctrl-C, SIGTERM, SIGHUP and SIGQUIT cancel it,
//! and its events are printed as they come — as text on stderr (a redrawn progress line on a
//! terminal), or with `--json` as JSON Lines on stdout, one object per event, the last one the result.

use crate::app::Cancel;
use crate::app::events::{self, AppEvent, Events};
use crate::run::trial::TrialEvent;
use std::io::{IsTerminal, Write};
use tokio::sync::watch;

/// How events are shown.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub json: bool,
    /// Print each trial's start (argv, folder): `run` and stages; a sweep's own lines say it.
    pub trial_headers: bool,
    /// Iterations of a trial, for the progress bar.
    pub max_iters: u64,
    /// A job (offline tuning) prints no iterations: its output lines are the progress.
    pub job: bool,
}

/// Cancel on SIGINT, SIGTERM, SIGHUP (an SSH drop) and SIGQUIT, from a thread of its own.
pub fn cancel_on_signals() -> Cancel {
    let (tx, rx) = watch::channel(false);
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async move {
            crate::run::process::stop_signal().await;
            let _ = tx.send(true);
        });
    });
    rx
}

/// Runs `work` on this thread (not inside a runtime) with its events printed by another.
pub fn drive<T>(style: Style, work: impl FnOnce(&Events, Cancel) -> T) -> T {
    let (tx, mut rx) = events::channel();
    let printer = std::thread::spawn(move || {
        let mut p = Printer::new(style);
        while let Some(ev) = rx.blocking_recv() {
            p.print(&ev);
        }
        p.finish();
    });
    let out = work(&tx, cancel_on_signals());
    drop(tx);
    let _ = printer.join();
    out
}

/// Prints one JSON line on stdout, floats without noise (as every `--json` output).
pub fn json_line<T: serde::Serialize + ?Sized>(v: &T) {
    if let Ok(line) = crate::util::num::json_line(v) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

struct Printer {
    style: Style,
    tty: bool,
    /// A `\r` progress line is on screen (end it before printing another line).
    open_line: bool,
    err: std::io::Stderr,
    /// Why GPU telemetry was unavailable, as last said: a sweep's every trial finds the same
    /// host, so the notice is said once, and again only when the reason changes.
    telemetry_told: Option<String>,
}

impl Printer {
    fn new(style: Style) -> Printer {
        Printer {
            tty: std::io::stderr().is_terminal() && !style.json,
            style,
            open_line: false,
            err: std::io::stderr(),
            telemetry_told: None,
        }
    }

    /// The no-telemetry notice, unless the same one was already said.
    fn telemetry_notice(&mut self, why: &str) -> Option<String> {
        if self.telemetry_told.as_deref() == Some(why) {
            return None;
        }
        self.telemetry_told = Some(why.to_string());
        Some(format!(
            "no GPU telemetry ({why}); sampling host figures only"
        ))
    }

    fn line(&mut self, text: &str) {
        if self.open_line {
            let _ = writeln!(self.err);
            self.open_line = false;
        }
        let _ = writeln!(self.err, "{text}");
    }

    fn print(&mut self, ev: &AppEvent) {
        if self.style.json {
            // Straight from the event (not through a map), so `event` comes first on the line.
            if ev.for_json() {
                json_line(ev);
            }
            // primus-tune's own notes go to stderr, as a human reads them; stdout stays JSON.
            if let AppEvent::Trial(TrialEvent::Line { line, .. }) = ev
                && line.starts_with("primus-tune: ")
            {
                self.line(line);
            }
            // The result itself is on stdout, in the event's line; say why there.
            if let AppEvent::Trial(TrialEvent::Unstored { why, file, .. }) = ev {
                self.line(&format!(
                    "primus-tune: the trial's result could not be stored or kept ({why}); it is \
                     the `result-unstored` line on stdout: save its `result` as {} to have it \
                     stored",
                    file.display()
                ));
            }
            return;
        }
        match ev {
            AppEvent::Trial(t) => self.trial(t),
            AppEvent::Sweep(s) => self.line(&s.to_string()),
            AppEvent::Stage(s) => self.line(&s.to_string()),
            AppEvent::TrialEnded(_) => {
                if self.open_line {
                    let _ = writeln!(self.err);
                    self.open_line = false;
                }
            }
        }
    }

    fn trial(&mut self, ev: &TrialEvent) {
        match ev {
            TrialEvent::Started {
                trial_id,
                argv,
                trial_dir,
                ..
            } if self.style.trial_headers => {
                self.line(&format!(
                    "trial {trial_id}: {}",
                    crate::util::shell::join(argv)
                ));
                self.line(&format!(
                    "  folder {}",
                    crate::util::paths::display_path(trial_dir)
                ));
            }
            TrialEvent::Iteration { it, summary } if self.tty => {
                let max_iters = self.style.max_iters.max(1);
                // Kept under 80 columns so `\r` redraws one line on any terminal.
                let step = it.elapsed_ms.map_or("-".into(), |s| format!("{s:.1}ms"));
                let med = match (summary.median_step_ms, summary.ci95_ms) {
                    (Some(m), Some(ci)) if m > 0.0 => {
                        format!("med {m:.1}ms ±{:.1}%", 100.0 * ci / m)
                    }
                    _ => "warming up".into(),
                };
                let eta = summary
                    .median_step_ms
                    .map(|m| m * max_iters.saturating_sub(it.iteration) as f64 / 1000.0)
                    .map_or(String::new(), |s| format!(" ETA≤{s:.0}s"));
                let done = (it.iteration as f64 / max_iters as f64).clamp(0.0, 1.0);
                let bar: String = (0..10)
                    .map(|i| if (i as f64) < done * 10.0 { '#' } else { '.' })
                    .collect();
                let line = format!(
                    "[{bar}] {}/{max_iters} step {step} {med}{eta}",
                    it.iteration
                );
                let line: String = line.chars().take(79).collect();
                let _ = write!(self.err, "\r\x1b[2K{line}");
                let _ = self.err.flush();
                self.open_line = true;
            }
            // primus-tune's own notes in the trial's log (the world it chose, strays it killed).
            TrialEvent::Line { line, .. } if line.starts_with("primus-tune: ") => self.line(line),
            TrialEvent::Line { line, .. } if self.style.job => self.line(&format!("  | {line}")),
            TrialEvent::TelemetryUnavailable { why } => {
                if let Some(text) = self.telemetry_notice(why) {
                    self.line(&text);
                }
            }
            TrialEvent::Stopping { reason } => self.line(&format!("stopping the trial ({reason})")),
            TrialEvent::Unstored { .. } => {
                if let Some(note) = ev.unstored_note() {
                    self.line(&note);
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self) {
        if self.open_line {
            let _ = writeln!(self.err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_no_telemetry_notice_is_said_once_per_reason() {
        let mut p = Printer::new(Style {
            json: false,
            trial_headers: false,
            max_iters: 10,
            job: false,
        });
        let first = p.telemetry_notice("no GPU found");
        assert_eq!(
            first.as_deref(),
            Some("no GPU telemetry (no GPU found); sampling host figures only")
        );
        assert_eq!(p.telemetry_notice("no GPU found"), None);
        assert!(p.telemetry_notice("NVML failed").is_some());
    }
}
