//! `primus-tune recommend [CONFIG] [--gpu NAME] [--json] [--apply]`

use super::{CliError, LoadArgs, display_path, format_diag, print_json};
use crate::config::catalog::Catalog;
use crate::config::doc::SaveOptions;
use crate::config::edit::{self, SetRequest};
use crate::telemetry::hardware::{self, GpuModel};
use crate::tune::recommend::{self, Context, Recommendation};
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

/// The GPU model: `--gpu`, else the local GPU, else the experiment's path. With the reason.
fn gpu(
    a: &RecommendArgs,
    path: &std::path::Path,
) -> Result<Option<(&'static GpuModel, String)>, CliError> {
    if let Some(name) = &a.gpu {
        return hardware::lookup(name)
            .map(|g| Some((g, "--gpu".to_string())))
            .ok_or_else(|| {
                let known: Vec<&str> = hardware::table().iter().map(|g| g.name.as_str()).collect();
                CliError::Usage(format!(
                    "--gpu {name}: unknown GPU (known: {})",
                    known.join(", ")
                ))
            });
    }
    if let Ok((Some(b), _)) = crate::telemetry::select::open("auto", &Default::default())
        && let Some(g) = b.gpus().first().and_then(|g| hardware::lookup(&g.name))
    {
        return Ok(Some((g, format!("this machine ({})", b.name()))));
    }
    let p = path.to_string_lossy().to_lowercase();
    Ok(hardware::table()
        .iter()
        .find(|g| g.vendor == "amd" && p.contains(&g.name.to_lowercase()))
        .map(|g| (g, "the experiment's path".to_string())))
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
    let (exp, opts) = a.load.load()?;
    let gpu = gpu(a, &exp.path)?;
    let ctx = Context {
        gpu: gpu.as_ref().map(|g| g.0),
    };
    let mut recs = Vec::new();
    let mut evidence = None;
    if let Some(name) = &a.study {
        let (rec, measured) = from_study(&exp, name)?;
        recs.extend(measured);
        evidence = Some((name.clone(), rec));
    }
    for r in recommend::rules(&exp, &opts.env, &ctx) {
        if !recs.iter().any(|m: &Recommendation| m.flag == r.flag) {
            recs.push(r);
        }
    }
    if a.json && !a.apply {
        print_json(&serde_json::to_value(&recs).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    if !a.json {
        match &gpu {
            Some((g, why)) => println!("GPU: {} (from {why})", g.name),
            None => println!(
                "GPU: unknown (pass --gpu MI300X|MI325X|MI355X for the GPU-specific rules)"
            ),
        }
        if let Some((name, rec)) = &evidence {
            super::sweep::print_record(name, rec);
            println!();
        }
        print_table(&recs);
    }
    if a.apply {
        apply(a, &exp, &opts, &recs)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Measured recommendations: the study's pick, flag by flag, with its evidence.
fn from_study(
    exp: &crate::config::Experiment,
    name: &str,
) -> Result<(crate::domain::study::StudyRecord, Vec<Recommendation>), CliError> {
    let db = crate::run::trial::workspace_dir(&exp.path).join("trials.db");
    let store = crate::store::Store::open(&db).map_err(|e| CliError::Usage(e.to_string()))?;
    let study = store
        .study_by_name(name)
        .map_err(|e| CliError::Usage(e.to_string()))?
        .ok_or_else(|| CliError::Usage(format!("no study `{name}` in {}", display_path(&db))))?;
    let rec: crate::domain::study::StudyRecord = study
        .notes
        .as_deref()
        .and_then(|n| serde_json::from_str(n).ok())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "study `{name}` has no result yet (finish it with `sweep --resume {name}`)"
            ))
        })?;
    let Some(pick) = rec
        .pick
        .and_then(|p| rec.candidates.iter().find(|c| c.id == p))
    else {
        return Ok((rec, Vec::new()));
    };
    let lost: Vec<String> = rec
        .candidates
        .iter()
        .filter(|c| c.id != pick.id)
        .map(|c| {
            format!(
                "{}: {}",
                crate::domain::study::settings(&c.overrides),
                c.why
            )
        })
        .collect();
    let m = exp.main_module();
    let out = pick
        .overrides
        .iter()
        .map(|(flag, value)| {
            let current = m.value(flag).map_or(serde_json::Value::Null, |v| v.to_json());
            let mut reason = format!(
                "fastest of {} candidates in study `{name}`: median {:.1} ms (95 % CI {:.1}–{:.1}, n {}){}",
                rec.candidates.len(),
                pick.median_ms.unwrap_or(f64::NAN),
                pick.ci_low_ms.unwrap_or(f64::NAN),
                pick.ci_high_ms.unwrap_or(f64::NAN),
                pick.n,
                pick.peak_memory_bytes.map_or(String::new(), |b| format!(
                    ", peak {:.2} GiB",
                    b as f64 / (1u64 << 30) as f64
                )),
            );
            if current == *value {
                reason.push_str(" (already set)");
            }
            reason.push_str(&format!("; the others: {}", lost.join("; ")));
            Recommendation {
                flag: flag.clone(),
                value: value.clone(),
                current,
                basis: recommend::Basis::Measured,
                reason,
                source: format!("study {name} ({} trials, profile {})", rec.trials, rec.profile),
                env: false,
            }
        })
        .collect();
    Ok((rec, out))
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
                edit::SetError::Edit(e) => CliError::Edit(e),
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
