//! An unknown word where a command belongs: `primus-tune sweeep`, `primus-tune lnt x.yaml` or
//! `primus-tune trials shw 3` is a usage error with "did you mean", never an attempt to open a
//! file named `sweeep`. (The top level, `trials` and `studies` take an optional CONFIG beside
//! their commands, so clap alone would read the word as one.) The rule for "near" is
//! [`crate::util::suggest::closest`], as for every other fixed set of names.

use crate::util::suggest::closest;
use std::ffi::OsString;
use std::path::Path;

/// `cmd`'s first positional argument (a command, or CONFIG) and the arguments after it.
/// Options that take a value skip it.
fn first_positional<'a>(
    cmd: &clap::Command,
    args: &'a [OsString],
) -> Option<(String, &'a [OsString])> {
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let mut i = 0;
    while let Some(a) = args.get(i).map(|a| a.to_string_lossy()) {
        i += 1;
        if a == "--" {
            return args
                .get(i)
                .map(|w| (w.to_string_lossy().into_owned(), &args[i + 1..]));
        }
        if let Some(long) = a.strip_prefix("--") {
            if !long.contains('=')
                && cmd
                    .get_arguments()
                    .any(|x| x.get_long() == Some(long) && takes_value(x))
            {
                i += 1;
            }
        } else if let Some(short) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            let mut chars = short.chars();
            let first = chars.next();
            if chars.next().is_none()
                && cmd
                    .get_arguments()
                    .any(|x| x.get_short() == first && takes_value(x))
            {
                i += 1;
            }
        } else {
            return Some((a.into_owned(), &args[i..]));
        }
    }
    None
}

/// The usage error for a word in a command's place that is neither a command nor an existing
/// file, when it looks like a word (no `/` or `.`, as a path would have); at the top level or
/// under a command that has commands of its own (`trials show`, `gemm-tune status`).
pub fn unknown_command(cmd: &clap::Command, args: &[OsString]) -> Option<String> {
    unknown_under(cmd, args, "")
}

/// [`unknown_command`] below the commands `path` (`""` or `"trials "`).
fn unknown_under(cmd: &clap::Command, args: &[OsString], path: &str) -> Option<String> {
    if !cmd.has_subcommands() {
        return None;
    }
    let (word, rest) = first_positional(cmd, args)?;
    if let Some(sub) = cmd.find_subcommand(&word) {
        return unknown_under(sub, rest, &format!("{path}{} ", sub.get_name()));
    }
    if word == "help" || word.is_empty() || word.contains(['/', '.']) || Path::new(&word).exists() {
        return None;
    }
    let visible: Vec<&str> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    let help = format!("`primus-tune {path}--help` lists the commands");
    let takes_config = cmd.get_positionals().next().is_some();
    Some(match closest(&word, &visible) {
        Some(c) if takes_config => format!(
            "unknown command `{path}{word}`: did you mean `{path}{c}`? (a CONFIG must be an existing file; {help})"
        ),
        Some(c) => format!("unknown command `{path}{word}`: did you mean `{path}{c}`? ({help})"),
        None if takes_config => {
            format!("`{word}` is neither a command nor an existing file ({help})")
        }
        None => format!("unknown command `{path}{word}` ({help})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn check(a: &[&str]) -> Option<String> {
        let args: Vec<OsString> = a.iter().map(Into::into).collect();
        unknown_command(&super::super::Cli::command(), &args)
    }

    #[test]
    fn a_mistyped_command_is_suggested() {
        let e = check(&["sweeep"]).unwrap_or_default();
        assert!(e.contains("did you mean `sweep`?"), "{e}");
        let e = check(&["--gpus", "8", "lnt", "x.yaml"]).unwrap_or_default();
        assert!(e.contains("did you mean `lint`?"), "{e}");
        let e = check(&["recomend"]).unwrap_or_default();
        assert!(e.contains("`recommend`"), "{e}");
        let e = check(&["zzzz"]).unwrap_or_default();
        assert!(e.contains("neither a command nor"), "{e}");
    }

    #[test]
    fn commands_paths_and_option_values_are_left_alone() {
        assert_eq!(check(&["lint", "x.yaml"]), None);
        assert_eq!(check(&["exp.yaml"]), None);
        assert_eq!(check(&["./lnt"]), None);
        assert_eq!(check(&["--workspace", "lnt", "exp.yaml"]), None);
        assert_eq!(check(&["--json"]), None);
        assert_eq!(check(&["help"]), None);
        assert_eq!(check(&["trials", "show", "3"]), None);
        assert_eq!(check(&["trials", "exp.yaml", "--last", "3"]), None);
        assert_eq!(check(&["gemm-tune", "stage", "1"]), None);
        assert_eq!(check(&["lint", "lnt"]), None);
    }

    #[test]
    fn a_mistyped_nested_command_is_suggested() {
        let e = check(&["trials", "shw", "3"]).unwrap_or_default();
        assert!(e.contains("did you mean `trials show`?"), "{e}");
        assert!(e.contains("`primus-tune trials --help`"), "{e}");
        let e = check(&["--json", "studies", "--all", "shwo", "x"]).unwrap_or_default();
        assert!(e.contains("did you mean `studies show`?"), "{e}");
        let e = check(&["gemm-tune", "stauts"]).unwrap_or_default();
        assert!(e.contains("did you mean `gemm-tune status`?"), "{e}");
        assert!(!e.contains("CONFIG"), "{e}");
    }
}
