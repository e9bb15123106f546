//! `primus-tune recommend [CONFIG] [--gpu NAME] [--json] [--apply]`

use super::{CliError, LoadArgs, display_path, format_diag, print_json};
use crate::app::views::recommend::RecommendRequest;
use crate::config::catalog::Catalog;
use crate::config::doc::SaveOptions;
use crate::config::edit::{self, SetRequest};
use crate::tune::recommend::Recommendation;
use clap::Args;
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
    /// Write the recommended config values into the experiment (diff shown first; atomic,
    /// `.bak` kept). Environment variables are printed for the launch, never written.
    #[arg(long)]
    pub apply: bool,
}

/// The text `set` takes for a JSON value.
fn as_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "null".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "unset".into(),
        other => as_text(other),
    }
}

pub fn run(a: &RecommendArgs) -> Result<ExitCode, CliError> {
    let session = a.load.session(None)?;
    let view = crate::app::views::recommend::recommend(
        &session,
        &RecommendRequest {
            gpu: a.gpu.clone(),
            study: a.study.clone(),
        },
    )?;
    let recs = view.recs;
    if a.json && !a.apply {
        print_json(&serde_json::to_value(&recs).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    if !a.json {
        match &view.gpu {
            Some((g, why)) => println!("GPU: {} (from {why})", g.name),
            None => println!(
                "GPU: unknown (pass --gpu MI300X|MI325X|MI355X for the GPU-specific rules)"
            ),
        }
        if let Some((name, rec)) = &view.evidence {
            super::sweep::print_record(name, rec);
            println!();
        }
        for (flag, why) in &view.ignored {
            println!("{flag}: not recommended from the study ({why})");
        }
        print_table(&recs);
    }
    if a.apply {
        let (exp, opts) = a.load.load()?;
        apply(a, &exp, &opts, &recs)?;
    }
    Ok(ExitCode::SUCCESS)
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
        println!(
            "{kind}{}: {} → {}  [{}] {} ({})",
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
    recs: &[Recommendation],
) -> Result<(), CliError> {
    let requests: Vec<SetRequest> = recs
        .iter()
        .filter(|r| !r.env)
        .map(|r| SetRequest {
            key: r.flag.clone(),
            text: as_text(&r.value),
        })
        .collect();
    let env: Vec<&Recommendation> = recs.iter().filter(|r| r.env).collect();
    if requests.is_empty() {
        println!("no config value to write");
    } else {
        let mut plan = edit::plan(exp, opts, &requests, None, false, Catalog::builtin()).map_err(
            |e| match e {
                edit::SetError::Edit(e) => CliError::from(e),
                edit::SetError::Usage(m) => CliError::Usage(m),
            },
        )?;
        for d in &plan.diagnostics {
            eprintln!("{}", format_diag(d));
        }
        if plan.refused {
            return Err(CliError::Usage(format!(
                "{}: the recommended values were refused; nothing was written",
                display_path(&exp.path)
            )));
        }
        print!("{}", plan.doc.diff());
        plan.doc.save(SaveOptions { backup: true })?;
        if !a.json {
            println!(
                "wrote {} value(s) to {}",
                plan.changes.len(),
                display_path(&exp.path)
            );
        }
    }
    if !env.is_empty() {
        let line: Vec<String> = env
            .iter()
            .map(|r| format!("{}={}", r.flag, as_text(&r.value)))
            .collect();
        println!("for the launch environment: export {}", line.join(" "));
    }
    if a.json {
        print_json(&serde_json::to_value(recs).unwrap_or_default());
    }
    Ok(())
}
