//! `primus-tune recommend [CONFIG] [--gpu NAME] [--profile P] [--json] [--apply]`,
//! `recommend --ack RULE --reason "..."`, `recommend --unack RULE`

use super::{CliError, LoadArgs, display_path, print_json};
use crate::app::views::recommend::{RecommendRequest, RecommendView};
use crate::config::catalog::Catalog;
use crate::config::doc::SaveOptions;
use crate::config::edit::{self, SetRequest};
use crate::tune::recommend::Recommendation;
use crate::tune::recommend::bundle::{as_text, as_yaml};
use clap::Args;
use serde_json::json;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct RecommendArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// The GPU the job runs on (MI300X, MI325X, MI355X, ...). Default: the GPU this machine
    /// reports, else the one the experiment's path names (configs/MI300X/...).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Print a JSON list: flag, value, current, basis, reason, source, env.
    #[arg(long)]
    pub json: bool,
    /// Recommend from this study's measurements (a `sweep`), with the evidence.
    #[arg(long, value_name = "STUDY")]
    pub study: Option<String>,
    /// Write the recommended config values into the experiment (diff shown first; atomic, the
    /// version replaced kept in the workspace: `primus-tune backups`). With --study, the
    /// study's pick and nothing else. Environment variables are printed for the launch, never
    /// written.
    #[arg(long)]
    pub apply: bool,
    /// The launch profile the job runs with (a profile passing Megatron's flags, such as
    /// `megatron`, runs upstream Megatron-LM, one with `overrides: torchtitan` upstream
    /// TorchTitan: Primus-on-AMD advice does not apply to them). Default: Primus.
    #[arg(long)]
    pub profile: Option<String>,
    /// Acknowledge a rule (an advice rule or a lint code) for this experiment, with --reason:
    /// the checklist shows it as acknowledged, recommend holds back what it governs, lint no
    /// longer reports it. Written to the nearest primus-tune.toml up from the experiment (a new
    /// one beside it when there is none).
    #[arg(long, value_name = "RULE", conflicts_with_all = ["apply", "unack"], requires = "reason")]
    pub ack: Option<String>,
    /// Why the rule is not followed (with --ack).
    #[arg(long, value_name = "TEXT", requires = "ack")]
    pub reason: Option<String>,
    /// Withdraw the acknowledgement of a rule (its entry for this experiment in
    /// primus-tune.toml; one the workspace holds from an earlier version).
    #[arg(long, value_name = "RULE", conflicts_with = "apply")]
    pub unack: Option<String>,
}

fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "unset".into(),
        other => as_text(other),
    }
}

pub fn run(a: &RecommendArgs) -> Result<ExitCode, CliError> {
    let session = a.load.session(None)?;
    if let Some(code) = decide(a, &session)? {
        return Ok(code);
    }
    let view = crate::app::views::recommend::recommend(
        &session,
        &RecommendRequest {
            gpu: a.gpu.clone(),
            study: a.study.clone(),
            profile: a.profile.clone(),
        },
    )?;
    if a.json && !a.apply {
        print_json(&view_json(&view));
        return Ok(ExitCode::SUCCESS);
    }
    if !a.json {
        match &view.gpu {
            Some((g, why)) => println!("GPU: {} (from {why})", g.name),
            None => println!(
                "GPU: unknown (pass --gpu MI300X|MI325X|MI355X for the GPU-specific rules)"
            ),
        }
        println!("target: {}", view.target.describe());
        if let Some((name, rec)) = &view.evidence {
            super::sweep::print_record(name, rec);
            println!();
        }
        for (flag, why) in &view.ignored {
            println!("{flag}: not recommended from the study ({why})");
        }
        print_table(&view.recs);
        print_set_apart(&view);
    }
    if a.apply {
        let (exp, opts) = a.load.load()?;
        apply(a, &exp, &opts, &view)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--ack` and `--unack`: record or withdraw a decision (None when neither was asked).
fn decide(a: &RecommendArgs, session: &crate::app::Session) -> Result<Option<ExitCode>, CliError> {
    if let Some(rule) = &a.ack {
        let ack = crate::app::ack::acknowledge(session, rule, a.reason.as_deref().unwrap_or(""))?;
        if a.json {
            print_json(&serde_json::to_value(&ack).unwrap_or_default());
        } else {
            println!(
                "acknowledged `{}` for {} in {}: {} (the checklist shows it as acknowledged, \
                 recommend holds back what it governs, lint no longer reports it; `--unack {}` \
                 withdraws it)",
                ack.rule,
                session.display(),
                ack.from,
                ack.reason,
                ack.rule
            );
        }
        return Ok(Some(ExitCode::SUCCESS));
    }
    let Some(rule) = &a.unack else {
        return Ok(None);
    };
    let w = crate::app::ack::withdraw(session, rule)?;
    if a.json {
        print_json(&serde_json::to_value(&w).unwrap_or_default());
        return Ok(Some(ExitCode::SUCCESS));
    }
    if w.withdrawn {
        println!(
            "`{rule}` is no longer acknowledged for {}",
            session.display()
        );
    } else {
        println!(
            "`{rule}` was not acknowledged for {} by --ack",
            session.display()
        );
    }
    for s in &w.still {
        println!(
            "`{rule}` is still acknowledged by {}: {} (edit it there)",
            s.from, s.reason
        );
    }
    Ok(Some(ExitCode::SUCCESS))
}

/// `--json`: the recommendations and everything set apart, each with why.
fn view_json(view: &RecommendView) -> serde_json::Value {
    json!({
        "gpu": view.gpu.as_ref().map(|g| g.0.name.clone()),
        "gpu_from": view.gpu.as_ref().map(|g| g.1.clone()),
        "target": view.target,
        "recommendations": view.recs,
        "withheld": view.withheld,
        "not_applicable": view.not_applicable,
        "acknowledged": view.acknowledged,
        "ignored": view.ignored.iter().map(|(f, why)| json!({"flag": f, "why": why})).collect::<Vec<_>>(),
    })
}

/// What the advice leaves out, and why: withheld by lint, not for this target, acknowledged.
fn print_set_apart(view: &RecommendView) {
    if view.recs.is_empty() && !view.withheld.is_empty() {
        println!("nothing recommended passes lint together; withheld:");
    }
    for w in &view.withheld {
        println!(
            "withheld {}: {} → {} [{}] {}",
            w.rec.rule,
            w.rec.flag,
            show(&w.rec.value),
            w.rec.source,
            w.why
        );
    }
    for n in &view.not_applicable {
        println!(
            "does not apply: {} ({}): {}",
            n.rule,
            n.flags.join(", "),
            n.why
        );
    }
    for a in &view.acknowledged {
        let held = if a.flags.is_empty() {
            String::new()
        } else {
            format!(" (holds back {})", a.flags.join(", "))
        };
        println!(
            "acknowledged {}: {}{held} [{}]",
            a.ack.rule, a.ack.reason, a.ack.from
        );
    }
}

fn print_table(recs: &[Recommendation]) {
    if recs.is_empty() {
        println!("nothing to recommend from the rules: measure with `primus-tune sweep`");
        return;
    }
    for r in recs {
        let kind = if r.env { "env " } else { "" };
        if r.current == r.value {
            // Nothing to change: one short line (the JSON keeps the full reason).
            println!("{kind}{}: {} (already set)", r.flag, show(&r.value));
            continue;
        }
        // The measured reason lists every other candidate; the table above shows them already.
        let reason = r.reason.split("; the others:").next().unwrap_or(&r.reason);
        let with = r
            .companion_of
            .as_ref()
            .map_or(String::new(), |p| format!(" (with {p})"));
        println!(
            "{kind}{}{with}: {} → {}  [{}] {} ({})",
            r.flag,
            show(&r.current),
            show(&r.value),
            serde_json::to_value(r.basis)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            reason,
            r.source
        );
    }
}

fn apply(
    a: &RecommendArgs,
    exp: &crate::config::Experiment,
    opts: &crate::config::LoadOptions,
    view: &RecommendView,
) -> Result<(), CliError> {
    // With a study: its pick alone (the rules are a separate `--apply` without `--study`).
    let recs = view
        .to_apply()
        .map_err(|e| CliError::Failed(format!("{e}; nothing was written")))?;
    let rules_left = recs.len() < view.recs.len();
    let requests: Vec<SetRequest> = recs
        .iter()
        .filter(|r| !r.env)
        .map(|r| SetRequest {
            key: r.flag.clone(),
            text: as_yaml(&r.value),
        })
        .collect();
    let env: Vec<&&Recommendation> = recs.iter().filter(|r| r.env).collect();
    if requests.is_empty() {
        println!("no config value to write");
    } else {
        let mut plan = edit::plan(exp, opts, &requests, None, false, Catalog::builtin())?;
        super::print_diags(&plan.diagnostics, "", true);
        if plan.refused {
            return Err(CliError::Failed(format!(
                "{}: the recommended values were refused; nothing was written",
                display_path(&exp.path)
            )));
        }
        // A value the experiment already has is not a change (nor a reason for a backup).
        let changed = plan.changed();
        let already = plan.changes.len() - changed;
        let already = if already > 0 {
            format!(" ({already} already set)")
        } else {
            String::new()
        };
        if changed == 0 {
            if !a.json {
                println!(
                    "nothing to write to {}: every recommended value is already set",
                    display_path(&exp.path)
                );
            }
        } else {
            print!("{}", plan.doc.diff());
            let backups = a.load.session(None)?.backups_of(&exp.path);
            plan.doc.save(SaveOptions {
                backups: Some(backups),
            })?;
            if !a.json {
                println!(
                    "wrote {} to {}{already}",
                    crate::util::text::count(changed, "value", "values"),
                    display_path(&exp.path)
                );
            }
        }
    }
    if !env.is_empty() {
        let line: Vec<String> = env
            .iter()
            .map(|r| format!("{}={}", r.flag, as_text(&r.value)))
            .collect();
        println!("for the launch environment: export {}", line.join(" "));
    }
    if rules_left && !a.json {
        println!(
            "the rules above are not applied with --study: `primus-tune recommend {} --apply` applies them",
            display_path(&exp.path)
        );
    }
    if a.json {
        print_json(&view_json(view));
    }
    Ok(())
}
