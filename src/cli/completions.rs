//! `primus-tune completions SHELL` and `primus-tune man [--out DIR]`: generated from the clap
//! definitions, so they never disagree with `--help`.

use super::{Cli, CliError};
use clap::{Args, CommandFactory};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell).
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write primus-tune.1 and one page per command (primus-tune-lint.1, ...) into DIR instead
    /// of printing the main page.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn completions(a: &CompletionsArgs) -> Result<ExitCode, CliError> {
    let mut cmd = Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "primus-tune", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

pub fn man(a: &ManArgs) -> Result<ExitCode, CliError> {
    let cmd = Cli::command();
    match &a.out {
        Some(dir) => {
            let cant = |e: std::io::Error| {
                CliError::CantCreate(format!(
                    "cannot write the manual pages into {}: {e}",
                    super::display_path(dir)
                ))
            };
            std::fs::create_dir_all(dir).map_err(cant)?;
            clap_mangen::generate_to(cmd, dir).map_err(cant)?;
            println!("wrote the manual pages into {}", super::display_path(dir));
        }
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
    }
    Ok(ExitCode::SUCCESS)
}
