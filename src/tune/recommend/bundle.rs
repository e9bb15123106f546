//! Advice that passes its own lint: the recommendations are linted together, as `--apply`
//! would write them (and the launch variables as the launch would set them). A new error with
//! a known one-value fix brings that fix in as a companion (the Turbo grouped GEMM with
//! `moe_use_legacy_grouped_gemm: false`); one without a fix withholds the rule that causes it,
//! with lint's message. A new warning with a known fix brings it in too (a Turbo kernel comes
//! with `enable_primus_turbo`, without which it does nothing), so that what the advice needs is
//! in its bundle, where an acknowledgement can see it. Findings the experiment already has are
//! not the advice's doing.

use super::rules::fixes;
use super::{Basis, Recommendation};
use crate::config::catalog::{Catalog, json_to_value};
use crate::config::diag::{Diagnostic, Severity};
use crate::config::overrides::Override;
use crate::config::{Experiment, LoadOptions, lint};
use serde::Serialize;
use serde_json::Value as Json;
use std::collections::BTreeSet;

/// A recommendation left out because lint would refuse the config with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Withheld {
    #[serde(flatten)]
    pub rec: Recommendation,
    pub why: String,
}

/// The recommendations lint accepts together, and those withheld.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Checked {
    pub recs: Vec<Recommendation>,
    pub withheld: Vec<Withheld>,
}

/// A value as people read it and as a launch variable is set (`null`, `true`, `fp32`).
pub fn as_text(v: &Json) -> String {
    match v {
        Json::Null => "null".into(),
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The text `set` takes for a value, written as YAML that reads back as the same value: `null`
/// is null, and a string that YAML would read as something else is quoted (`"null"`).
pub fn as_yaml(v: &Json) -> String {
    crate::config::literal::render(&json_to_value(v), None)
}

type Key = (&'static str, Option<String>);

fn key(d: &Diagnostic) -> Key {
    (d.code, d.flag.clone())
}

/// What the advice must not bring: an error, or a warning lint knows the fix of.
fn relevant(d: &Diagnostic) -> bool {
    d.severity == Severity::Error || (d.severity == Severity::Warning && !fixes(d.code).is_empty())
}

/// Lints the experiment with recommendations applied, as `--apply` writes them and the launch
/// sets its variables; `base` holds the errors the experiment has without them.
struct Linter<'a> {
    exp: &'a Experiment,
    opts: &'a LoadOptions,
    catalog: &'a Catalog,
    base: BTreeSet<Key>,
}

impl Linter<'_> {
    /// Lint's errors, and its warnings with a known fix, with the recommendations applied
    /// (Err: it does not even resolve).
    fn errors(&self, recs: &[Recommendation]) -> Result<Vec<Diagnostic>, String> {
        let mut with = self.opts.clone();
        for r in recs {
            // The value itself, not its text: Primus' command-line typing reads `null` as the
            // string "null" (only `None` is null there), which is not what `--apply` writes.
            if r.env {
                with.env.set(&r.flag, &as_text(&r.value));
            } else {
                with.overrides
                    .push(Override::new(r.flag.clone(), json_to_value(&r.value)));
            }
        }
        let view = Experiment::load(&self.exp.path, &with).map_err(|e| e.to_string())?;
        Ok(
            lint::lint(&view, &with.env, with.world.as_ref(), self.catalog)
                .into_iter()
                .filter(relevant)
                .collect(),
        )
    }

    /// The errors the recommendations bring (not in `base`).
    fn new_errors(&self, recs: &[Recommendation]) -> Result<Vec<Diagnostic>, String> {
        if recs.is_empty() {
            return Ok(Vec::new()); // the experiment as it stands: `base` itself
        }
        Ok(self
            .errors(recs)?
            .into_iter()
            .filter(|d| !self.base.contains(&key(d)))
            .collect())
    }

    /// Whether `recs` are free of the finding `d`.
    fn clear_of(&self, recs: &[Recommendation], d: &Diagnostic) -> bool {
        self.new_errors(recs)
            .is_ok_and(|e| !e.iter().any(|x| key(x) == key(d)))
    }

    /// The recommendation a finding comes from: the one setting its flag, else one its message
    /// or hint names, else the latest whose removal clears it, else the latest config value
    /// (several recommendations may bring it together, as a sync-free stage and the grouped
    /// GEMM it turns on).
    fn culprit<'r>(
        &self,
        recs: &'r [Recommendation],
        d: &Diagnostic,
    ) -> Option<&'r Recommendation> {
        let named = |r: &&Recommendation| {
            let tick = format!("`{}", r.flag);
            d.message.contains(&tick) || d.hint.as_deref().is_some_and(|h| h.contains(&tick))
        };
        recs.iter()
            .find(|r| d.flag.as_deref() == Some(r.flag.as_str()))
            .or_else(|| recs.iter().find(named))
            .or_else(|| {
                recs.iter().rev().find(|r| {
                    let rest: Vec<Recommendation> =
                        recs.iter().filter(|o| o.flag != r.flag).cloned().collect();
                    self.clear_of(&rest, d)
                })
            })
            .or_else(|| recs.iter().rev().find(|r| !r.env))
    }

    /// The fewest rules (latest first) whose removal clears the finding `d`.
    fn rules_behind(&self, recs: &[Recommendation], d: &Diagnostic) -> Vec<String> {
        let mut rules: Vec<String> = Vec::new();
        for r in recs.iter().rev() {
            if !rules.contains(&r.rule) {
                rules.push(r.rule.clone());
            }
        }
        let without = |out: &[String]| -> Vec<Recommendation> {
            recs.iter()
                .filter(|r| !out.contains(&r.rule))
                .cloned()
                .collect()
        };
        // Grow the set until the finding is gone, then put back what it does not need.
        let mut out: Vec<String> = Vec::new();
        for r in &rules {
            out.push(r.clone());
            if self.clear_of(&without(&out), d) {
                break;
            }
        }
        let mut i = 0;
        while i < out.len() && out.len() > 1 {
            let mut fewer = out.clone();
            fewer.remove(i);
            if self.clear_of(&without(&fewer), d) {
                out = fewer;
            } else {
                i += 1;
            }
        }
        out
    }
}

fn current(exp: &Experiment, flag: &str) -> Json {
    exp.main_module()
        .value(flag)
        .map_or(Json::Null, |v| v.to_json())
}

/// Brings in the fixes of the findings; true when something was added.
fn add_companions(lint: &Linter, recs: &mut Vec<Recommendation>, found: &[Diagnostic]) -> bool {
    let mut added = false;
    for d in found {
        let fx = fixes(d.code);
        if fx.is_empty() || fx.iter().any(|f| recs.iter().any(|r| r.flag == f.flag)) {
            continue; // no fix, or it would contradict a recommendation: withhold instead
        }
        let Some(parent) = lint.culprit(recs, d).cloned() else {
            continue;
        };
        for f in fx {
            recs.push(Recommendation {
                flag: f.flag.to_string(),
                current: current(lint.exp, f.flag),
                value: f.value,
                basis: Basis::Rule,
                reason: format!(
                    "needed with {}={}: {}",
                    parent.flag,
                    as_text(&parent.value),
                    d.message
                ),
                source: format!("lint: {}", d.code),
                env: f.env,
                rule: parent.rule.clone(),
                companion_of: Some(parent.flag.clone()),
            });
            added = true;
        }
    }
    added
}

/// Lints recommendations for one experiment: what it already has is found once, however many
/// bundles are checked (each check of a large experiment resolves and lints it again).
pub struct Checker<'a> {
    lint: Linter<'a>,
}

impl<'a> Checker<'a> {
    /// `exp` as resolved with `opts`, its findings worked out here.
    #[cfg(any(test, feature = "testkit"))]
    pub fn new(exp: &'a Experiment, opts: &'a LoadOptions, catalog: &'a Catalog) -> Self {
        let found = lint::lint(exp, &opts.env, opts.world.as_ref(), catalog);
        Checker::with_found(exp, opts, catalog, &found)
    }

    /// `exp` as resolved with `opts`; `found`: lint's findings on it with `opts`' environment
    /// and world (suppressed ones too), as the caller has them already.
    pub fn with_found<'d>(
        exp: &'a Experiment,
        opts: &'a LoadOptions,
        catalog: &'a Catalog,
        found: impl IntoIterator<Item = &'d Diagnostic>,
    ) -> Self {
        let base = found.into_iter().filter(|d| relevant(d)).map(key).collect();
        Checker {
            lint: Linter {
                exp,
                opts,
                catalog,
                base,
            },
        }
    }

    /// The recommendations with the companions they need; what lint would still refuse is
    /// withheld. Nothing to check when there are none.
    pub fn check(&self, recs: Vec<Recommendation>) -> Checked {
        if recs.is_empty() {
            return Checked::default();
        }
        settle(&self.lint, recs)
    }
}

/// [`Checker::check`] of one bundle, for an experiment `exp` resolved with `opts`.
#[cfg(any(test, feature = "testkit"))]
pub fn lint_clean(
    exp: &Experiment,
    opts: &LoadOptions,
    catalog: &Catalog,
    recs: Vec<Recommendation>,
) -> Checked {
    Checker::new(exp, opts, catalog).check(recs)
}

/// Lints the recommendations together with the companions they need; withholds what lint
/// would still refuse. At most a few rounds: each round adds a fix or withholds a rule.
fn settle(lint: &Linter, recs: Vec<Recommendation>) -> Checked {
    let mut recs = recs;
    let mut withheld = Vec::new();
    for _ in 0..16 {
        let found = match lint.new_errors(&recs) {
            Ok(f) => f,
            Err(why) => {
                // With them the experiment no longer resolves: withhold them all.
                withheld.extend(recs.drain(..).map(|rec| Withheld {
                    rec,
                    why: format!("with it the experiment does not resolve: {why}"),
                }));
                break;
            }
        };
        if found.is_empty() {
            break;
        }
        if add_companions(lint, &mut recs, &found) {
            continue;
        }
        // No fix: withhold the fewest rules whose removal clears the first error (a warning
        // whose fix would contradict a recommendation is left to lint to say).
        let Some(d) = found.iter().find(|d| d.severity == Severity::Error) else {
            break;
        };
        let out = lint.rules_behind(&recs, d);
        let why = format!("lint would refuse it: error[{}]: {}", d.code, d.message);
        let (gone, kept): (Vec<_>, Vec<_>) = recs.into_iter().partition(|r| out.contains(&r.rule));
        recs = kept;
        withheld.extend(gone.into_iter().map(|rec| Withheld {
            rec,
            why: why.clone(),
        }));
    }
    Checked { recs, withheld }
}
