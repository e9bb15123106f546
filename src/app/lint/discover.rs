//! Which files `lint` reads: every file named, and in every folder named (recursively) the
//! experiment YAMLs — `*.yaml`/`*.yml` files with a top-level `modules:` key, which every Primus
//! experiment has and no preset does.

use super::super::AppError;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How much of a file is read to see whether it is an experiment (the loader's own cap).
const SNIFF_BYTES: u64 = 16 << 20;

/// The files to lint for these inputs, in order: a file as named (whatever its name or
/// content: the loader says what is wrong with it), a folder's experiments sorted by path.
/// Hidden entries (`.git`, `.primus-tune`) and symbolic links to folders are not entered.
/// A missing input, or a folder with no experiment, is [`AppError::NoInput`].
pub fn experiment_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, AppError> {
    let mut out: Vec<PathBuf> = Vec::new();
    for input in inputs {
        let Ok(meta) = std::fs::metadata(input) else {
            return Err(AppError::NoInput {
                path: input.clone(),
                why: crate::util::paths::unopenable_why(input, "no such file or folder"),
            });
        };
        if !meta.is_dir() {
            push_unique(&mut out, input.clone());
            continue;
        }
        let mut found = Vec::new();
        walk(input, &mut found)?;
        if found.is_empty() {
            return Err(AppError::NoInput {
                path: input.clone(),
                why: "no experiment in this folder (a *.yaml or *.yml file with a top-level \
                      `modules:` key)"
                    .into(),
            });
        }
        found.sort();
        for f in found {
            push_unique(&mut out, f);
        }
    }
    Ok(out)
}

fn push_unique(out: &mut Vec<PathBuf>, p: PathBuf) {
    if !out.contains(&p) {
        out.push(p);
    }
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), AppError> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk(&path, found)?;
        } else if (kind.is_file() || kind.is_symlink() && path.is_file())
            && has_yaml_extension(&path)
            && is_experiment(&path)
        {
            found.push(path);
        }
    }
    Ok(())
}

fn has_yaml_extension(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

/// A top-level `modules:` key: a line that starts with it (a broken experiment still counts,
/// so that lint reports what is wrong with it instead of passing over it).
fn is_experiment(p: &Path) -> bool {
    let mut text = Vec::new();
    let read = std::fs::File::open(p).and_then(|f| f.take(SNIFF_BYTES).read_to_end(&mut text));
    read.is_ok()
        && String::from_utf8_lossy(&text).lines().any(|l| {
            l.strip_prefix("modules")
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn a_folder_gives_its_experiments_sorted_and_skips_presets_and_hidden_folders() {
        let d = tempfile::tempdir().unwrap();
        let b = write(d.path(), "b/exp.yml", "work_group: a\nmodules:\n  x: {}\n");
        let a = write(d.path(), "a.YAML", "modules : {}\n");
        let broken = write(d.path(), "c/broken.yaml", "modules:\n  - [unclosed\n");
        write(
            d.path(),
            "c/preset.yaml",
            "extends: [base.yaml]\nmodules_x: 1\n  modules: 2\n",
        );
        write(d.path(), "c/notes.txt", "modules:\n");
        write(d.path(), ".primus-tune/exp.yaml", "modules:\n");
        let got = experiment_files(&[d.path().to_path_buf()]).unwrap();
        assert_eq!(got, vec![a, b, broken]);
    }

    #[test]
    fn a_named_file_counts_whatever_it_holds_and_once() {
        let d = tempfile::tempdir().unwrap();
        let f = write(d.path(), "notes.txt", "hello\n");
        let got = experiment_files(&[f.clone(), f.clone()]).unwrap();
        assert_eq!(got, vec![f]);
    }

    #[test]
    fn missing_input_and_a_folder_without_experiments_are_no_input() {
        let d = tempfile::tempdir().unwrap();
        let e = experiment_files(&[d.path().join("nope.yaml")]).unwrap_err();
        assert!(matches!(e, AppError::NoInput { .. }), "{e}");
        write(d.path(), "preset.yaml", "extends: [a.yaml]\n");
        let e = experiment_files(&[d.path().to_path_buf()]).unwrap_err();
        assert!(e.to_string().contains("no experiment"), "{e}");
    }
}
