//! The search's last phase: the provisional pick and the best others, once more each in fresh
//! processes (with one launch per candidate, only where launch-to-launch variation could
//! explain the pick's lead).

use super::step::{Ask, Seen, Step, settle};
use super::{Flow, Search};

/// The confirmation launches.
#[derive(Default)]
pub(super) struct Confirm {
    since: f64,
}

impl Step for Confirm {
    fn step(&mut self, s: &mut Search<'_>, f: &mut Flow, seen: Option<Seen>) -> Option<Ask> {
        let Some(seen) = seen else {
            return self.ask(s, f);
        };
        for &i in &seen.launched {
            if !f.contenders.contains(&i) {
                f.contenders.push(i);
            }
        }
        settle(s, f, &seen, "confirmation", self.since);
        None
    }
}

impl Confirm {
    /// Who is confirmed, in the log, and the launches; None when no confirmation is due.
    fn ask(&mut self, s: &mut Search<'_>, f: &mut Flow) -> Option<Ask> {
        let cfg = s.cfg;
        let (exhausted, contenders) = (f.exhausted, &f.contenders);
        // 4. Confirmation: the provisional pick and the best others, once more each.
        let confirm_iters = cfg.confirm_iters.max(1);
        // With one launch per candidate, a fresh launch is needed only where launch-to-launch
        // variation could explain the pick's lead.
        let one_launch_noise = if s.one_launch && !exhausted {
            s.decide(contenders).and_then(|d| s.launch_noise(&d))
        } else {
            None
        };
        if s.one_launch && !exhausted && one_launch_noise.is_none() && cfg.confirm_top > 0 {
            s.log.push(
                "no confirmation launch: launch-to-launch variation cannot explain the pick's lead"
                    .to_string(),
            );
        }
        if let Some(why) = &one_launch_noise {
            s.log.push(format!("confirm in fresh processes: {why}"));
        }
        if cfg.confirm_top > 0
            && !exhausted
            && (!s.one_launch || one_launch_noise.is_some())
            && let Some(d) = s.decide(contenders)
        {
            let mut confirm = vec![d.pick];
            let all = s.by_step(&s.measured());
            for &(i, _) in d.sorted.iter().chain(all.iter()) {
                if confirm.len() >= cfg.confirm_top {
                    break;
                }
                if !confirm.contains(&i) {
                    confirm.push(i);
                }
            }
            if let Some(b) = s.baseline
                && d.tied.iter().any(|t| t.0 == b)
                && !confirm.contains(&b)
            {
                confirm.push(b);
            }
            // A candidate already measured in two or more processes (a later rung is a fresh
            // process too) has shown whether its level holds across launches.
            let separated = d.tied.len() == 1 && !s.one_launch;
            let (again, done): (Vec<usize>, Vec<usize>) = confirm
                .into_iter()
                .partition(|&i| !separated || s.evidence[i].trials < 2);
            let ids = |v: &[usize]| {
                v.iter()
                    .map(|&i| format!("#{}", s.cands[i].id))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if !done.is_empty() {
                s.log.push(format!(
                    "confirmed already: {} measured in two or more fresh processes",
                    ids(&done)
                ));
            }
            let confirm_iters = if s.one_launch {
                s.screen_iters(confirm_iters)
            } else {
                confirm_iters
            };
            if !again.is_empty() {
                s.log.push(format!(
                    "confirm: {} iterations for {} in fresh processes",
                    confirm_iters,
                    ids(&again)
                ));
            }
            self.since = s.gpu_seconds;
            return Some(Ask::Each {
                list: again,
                iters: confirm_iters,
            });
        }
        None
    }
}
