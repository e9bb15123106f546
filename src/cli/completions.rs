//! `primus-tune completions SHELL` and `primus-tune man [--out DIR]`: generated from the clap
//! definitions, so they never disagree with `--help`.

use super::{Cli, CliError};
use clap::{Args, CommandFactory};
use clap_complete::Shell;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell).
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write primus-tune.1 and one page per command (primus-tune-lint.1, ...) into DIR instead
    /// of printing the main page.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The command the scripts complete.
const BIN: &str = "primus-tune";
/// The name the bash script is generated for: `BIN` without its hyphen (see [`script`]).
const BASH_NAME: &str = "primus_tune";

pub fn completions(a: &CompletionsArgs) -> Result<ExitCode, CliError> {
    std::io::stdout().write_all(script(a.shell).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The completion script for `shell`.
///
/// clap_complete (4.6) spells a hyphenated command name two ways in a bash script: its
/// dispatch loop sets `cmd="primus__tune__subcmd__lint"`, its case labels read
/// `primus__subcmd__tune__subcmd__lint)` (clap-rs/clap#6421), so no label ever matched and
/// nothing completed after a subcommand. Generated for a name without a hyphen, the two
/// spellings are one; the script then registers its function for the real command.
fn script(shell: Shell) -> String {
    let mut out = Vec::new();
    match shell {
        Shell::Bash => clap_complete::generate(shell, &mut Cli::command(), BASH_NAME, &mut out),
        Shell::Zsh => return zsh_script(),
        _ => clap_complete::generate(shell, &mut Cli::command(), BIN, &mut out),
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    if shell != Shell::Bash {
        return text;
    }
    let registered = format!(" {BASH_NAME}");
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        let bind = line.trim_start().starts_with("complete -F ");
        match line.strip_suffix(&registered) {
            Some(head) if bind => lines.push(format!("{head} {BIN}")),
            _ => lines.push(line.to_string()),
        }
    }
    lines.push(String::new());
    lines.join("\n")
}

/// The zsh script. clap_complete's counts an optional positional of a command that also has
/// commands (`primus-tune [CONFIG]`, `trials [EXPERIMENT]`, `studies [CONFIG]`) as the first
/// word and the command as the second (`$line[2]`): after `lint` it offered the top level's
/// options, never lint's. It is generated for those commands without their positional, as zsh
/// can say it, and each one's first-word completer then offers the files too (the positional
/// is an experiment file in each).
fn zsh_script() -> String {
    let mut firsts = Vec::new();
    let mut cmd = commands_first(&Cli::command(), BIN, &mut firsts);
    let mut out = Vec::new();
    clap_complete::generate(Shell::Zsh, &mut cmd, BIN, &mut out);
    let text = String::from_utf8_lossy(&out);
    let at = text.find(ZSH_DISPATCH).unwrap_or(text.len());
    let mut s = text[..at].to_string();
    s.push_str("# The first word of a command that also takes an experiment file: either.\n");
    for f in firsts {
        // Kept under another name once (the script may be read twice), then wrapped.
        s.push_str(&format!(
            "(( $+functions[{f}_names] )) || functions[{f}_names]=$functions[{f}]\n\
             {f}() {{\n    {f}_names \"$@\"\n    _files\n}}\n"
        ));
    }
    s.push('\n');
    s.push_str(&text[at..]);
    s
}

/// Where the zsh script ends: it calls its function, or registers it with `compdef`.
const ZSH_DISPATCH: &str = "if [ \"$funcstack[1]\" = \"_primus-tune\" ]; then";

/// `cmd` (at `path`, as zsh's function names spell it) with its commands likewise, less the
/// positional arguments of each command that also has commands; the zsh functions completing
/// those commands' first word go into `firsts`.
fn commands_first(cmd: &clap::Command, path: &str, firsts: &mut Vec<String>) -> clap::Command {
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .map(|s| commands_first(s, &format!("{path}__subcmd__{}", s.get_name()), firsts))
        .collect();
    if subs.is_empty() || cmd.get_positionals().next().is_none() {
        let mut out = cmd.clone();
        for s in subs {
            let name = s.get_name().to_string();
            out = out.mut_subcommand(name, |_| s);
        }
        return out;
    }
    firsts.push(format!("_{path}_commands"));
    let mut out = clap::Command::new(cmd.get_name().to_string())
        .visible_aliases(cmd.get_visible_aliases().map(str::to_string));
    if let Some(v) = cmd.get_version() {
        out = out.version(v.to_string());
    }
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    for a in cmd.get_arguments().filter(|a| !a.is_positional()) {
        out = out.arg(a.clone());
    }
    out.subcommands(subs)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bash_script_completes_primus_tune_and_its_labels_match_its_dispatch() {
        let s = script(Shell::Bash);
        let binds: Vec<&str> = s.lines().filter(|l| l.contains("complete -F")).collect();
        assert!(!binds.is_empty(), "{s}");
        for l in binds {
            assert!(l.ends_with(" -o default primus-tune"), "{l}");
        }
        // Every state the dispatch loop sets has its case label.
        for line in s.lines() {
            let Some(state) = line.trim().strip_prefix("cmd=\"") else {
                continue;
            };
            let state = state.trim_end_matches('"');
            if !state.is_empty() {
                assert!(s.contains(&format!("\n        {state})\n")), "{state}");
            }
        }
    }

    #[test]
    fn the_zsh_script_reads_the_command_as_the_first_word() {
        let s = script(Shell::Zsh);
        assert!(s.contains("case $line[1] in"), "{s}");
        assert!(!s.contains("$line[2]"), "{s}");
        let first = s
            .find("_primus-tune__subcmd__trials_commands_names \"$@\"")
            .expect("the first word's completer of trials");
        assert!(first < s.find(ZSH_DISPATCH).expect("the dispatch"));
    }
}
