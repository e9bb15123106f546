//! An unknown word where a command belongs: `primus-tune sweeep` or `primus-tune lnt x.yaml`
//! is a usage error with "did you mean", never an attempt to open a file named `sweeep`.
//! (The top level takes an optional CONFIG, so clap alone would read the word as one.)

use std::ffi::OsString;
use std::path::Path;

/// The top level's first positional argument: the command, or CONFIG. Options that take a
/// value skip it.
fn first_positional(cmd: &clap::Command, args: &[OsString]) -> Option<String> {
    let takes_value = |a: &clap::Arg| a.get_action().takes_values();
    let mut it = args.iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(a) = it.next() {
        if a == "--" {
            return it.next();
        }
        if let Some(long) = a.strip_prefix("--") {
            if !long.contains('=')
                && cmd
                    .get_arguments()
                    .any(|x| x.get_long() == Some(long) && takes_value(x))
            {
                it.next();
            }
        } else if let Some(short) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
            let mut chars = short.chars();
            let first = chars.next();
            if chars.next().is_none()
                && cmd
                    .get_arguments()
                    .any(|x| x.get_short() == first && takes_value(x))
            {
                it.next();
            }
        } else {
            return Some(a);
        }
    }
    None
}

use crate::util::suggest::closest;

/// The usage error for a word in the command's place that is neither a command nor an
/// existing file, when it looks like a word (no `/` or `.`, as a path would have).
pub fn unknown_command(cmd: &clap::Command, args: &[OsString]) -> Option<String> {
    let word = first_positional(cmd, args)?;
    let mut names: Vec<&str> = cmd
        .get_subcommands()
        .flat_map(|s| std::iter::once(s.get_name()).chain(s.get_all_aliases()))
        .collect();
    names.push("help");
    if names.contains(&word.as_str())
        || word.is_empty()
        || word.contains(['/', '.'])
        || Path::new(&word).exists()
    {
        return None;
    }
    let visible: Vec<&str> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name())
        .collect();
    Some(match closest(&word, &visible) {
        Some(c) => format!(
            "unknown command `{word}`: did you mean `{c}`? (a CONFIG must be an existing file; `primus-tune --help` lists the commands)"
        ),
        None => format!(
            "`{word}` is neither a command nor an existing file (`primus-tune --help` lists the commands)"
        ),
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
    }
}
