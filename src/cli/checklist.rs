//! `primus-tune checklist [CONFIG] [--json]` (also what `primus-tune [CONFIG]` prints for now).

use super::{CliError, LoadArgs, display_path, print_json};
use crate::checklist::FindingKind;
use crate::config::diag::counts;
use clap::Args;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ChecklistArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Check the experiment as this launch profile's trials see it: with the variables its
    /// `env:` sets (under `--env`), as `run --profile NAME` launches it.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
}

pub fn run(a: &ChecklistArgs) -> Result<ExitCode, CliError> {
    let session = a.load.view_session(a.profile.as_deref())?;
    let view = crate::app::views::checklist(&session)?;
    let (list, diags) = (&view.checklist, &view.diagnostics);
    if a.json {
        let mut v = serde_json::to_value(list).map_err(|e| CliError::Failed(e.to_string()))?;
        v["diagnostics"] = serde_json::Value::Array(diags.iter().map(super::diag_json).collect());
        v["suppressed"] = view
            .suppressed
            .iter()
            .map(|s| {
                let mut d = super::diag_json(&s.diagnostic);
                d["reason"] = s.by.why().into();
                d["by"] = crate::config::suppress::place(&s.by.at).into();
                d
            })
            .collect();
        print_json(&v);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Quick checklist — {} ({}{})",
        display_path(&session.experiment),
        list.framework,
        list.model
            .as_ref()
            .map(|m| format!(", model {m}"))
            .unwrap_or_default()
    );
    if let Some(p) = &session.view_profile {
        println!("{}", super::show::as_launched(p));
    }
    for (i, s) in list.steps.iter().enumerate() {
        println!();
        println!("{}. {} — {}", i + 1, s.title, s.status.label());
        for f in &s.findings {
            let mark = match f.kind {
                FindingKind::Ok => "[ok]  ",
                FindingKind::Todo => "[todo]",
                FindingKind::Info => "[i]   ",
                FindingKind::Acknowledged => "[ack] ",
            };
            let rule = match (f.kind, f.rule) {
                (FindingKind::Todo, Some(r)) => format!(" [{r}]"),
                _ => String::new(),
            };
            println!("   {mark} {}{rule}", f.text);
        }
        for d in &s.problems {
            println!("   [{}] {}", d.severity.label(), d.message);
        }
        for act in &s.actions {
            println!("   next: {act}");
        }
    }
    let (e, w, _) = counts(diags);
    println!();
    if e + w > 0 {
        println!(
            "lint: {}, {}:",
            crate::util::text::count(e, "error", "errors"),
            crate::util::text::count(w, "warning", "warnings")
        );
        super::print_diags(
            diags
                .iter()
                .filter(|d| d.severity != crate::config::diag::Severity::Info),
            "  ",
            false,
        );
    } else {
        println!("lint: no errors or warnings");
    }
    for s in &view.suppressed {
        println!("  {}", super::style::suppressed(s, false));
    }
    println!(
        "More: primus-tune show {0} | primus-tune lint {0} | primus-tune set {0} KEY=VALUE",
        display_path(&session.experiment)
    );
    let todo = list
        .steps
        .iter()
        .flat_map(|s| &s.findings)
        .any(|f| f.kind == FindingKind::Todo && f.rule.is_some());
    if todo {
        println!(
            "A to-do you decide against: primus-tune recommend {} --ack RULE --reason \"...\"",
            display_path(&session.experiment)
        );
    }
    Ok(ExitCode::SUCCESS)
}
