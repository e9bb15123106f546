//! Where an experiment's trials and studies live: one folder holding `trials.db` and
//! `trials/<id>/`. Chosen in this order:
//!
//! 1. a folder the user names (`--workspace DIR`, `PRIMUS_TUNE_WORKSPACE`);
//! 2. an existing `.primus-tune/` beside the experiment (what earlier versions wrote: its data
//!    stays in use);
//! 3. `<data dir>/primus-tune/workspaces/<stem>-<hash of the experiment's path>/`, so nothing is
//!    written into the user's Primus checkout.
//!
//! A workspace folder created inside a git work tree gets a `.gitignore` that ignores it.

use super::{Store, StoreError, StoreResult};
use std::path::{Path, PathBuf};

/// The database file inside a workspace.
pub const DB_FILE: &str = "trials.db";
/// The folder of the legacy workspace beside an experiment.
pub const BESIDE: &str = ".primus-tune";

/// How a workspace was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// Named by the user (`--workspace`, `PRIMUS_TUNE_WORKSPACE`, `--db`).
    Chosen,
    /// The `.primus-tune/` folder an earlier version created beside the experiment.
    Beside,
    /// Under the user's data folder, keyed by the experiment's path.
    DataDir,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Workspace {
    pub root: PathBuf,
    /// The trial database (`<root>/trials.db` unless `--db` named another file).
    pub db: PathBuf,
    /// Trial folders: `<root>/trials/<id>/`.
    pub trials_dir: PathBuf,
    pub origin: Origin,
}

/// FNV-1a, 64 bits: a stable key for a path (not for security).
fn fnv(text: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// The experiment's path as the key sees it: absolute, symlinks resolved when it exists.
fn canonical(p: &Path) -> PathBuf {
    p.canonicalize()
        .or_else(|_| std::path::absolute(p))
        .unwrap_or_else(|_| p.to_path_buf())
}

impl Workspace {
    /// The workspace in folder `root`.
    pub fn at(root: PathBuf, origin: Origin) -> Workspace {
        Workspace {
            db: root.join(DB_FILE),
            trials_dir: root.join("trials"),
            root,
            origin,
        }
    }

    /// The workspace of a database file named on its own (`--db FILE`): its folder.
    pub fn of_db(db: PathBuf) -> Workspace {
        let root = db
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        Workspace {
            trials_dir: root.join("trials"),
            db,
            root,
            origin: Origin::Chosen,
        }
    }

    /// The data-folder workspace of `experiment` under `data_dir` (`.../primus-tune/workspaces`).
    pub fn keyed(experiment: &Path, data_dir: &Path) -> Workspace {
        let path = canonical(experiment);
        let stem: String = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        let key = format!("{stem}-{:016x}", fnv(&path.to_string_lossy()));
        Workspace::at(data_dir.join(key), Origin::DataDir)
    }

    /// The workspace of `experiment`: `chosen` when given, else an existing `.primus-tune/`
    /// beside it, else its keyed folder under `data_dir`.
    pub fn resolve(experiment: &Path, chosen: Option<&Path>, data_dir: &Path) -> Workspace {
        if let Some(dir) = chosen {
            return Workspace::at(dir.to_path_buf(), Origin::Chosen);
        }
        let beside = canonical(experiment)
            .parent()
            .map(|d| d.join(BESIDE))
            .filter(|d| d.is_dir());
        match beside {
            Some(dir) => Workspace::at(dir, Origin::Beside),
            None => Workspace::keyed(experiment, data_dir),
        }
    }

    /// The database exists (something was stored here).
    pub fn exists(&self) -> bool {
        self.db.is_file()
    }

    /// Opens the database, creating the workspace first when needed (its folder, a
    /// `.gitignore` inside a git work tree, and for a keyed workspace a note naming the
    /// experiment).
    pub fn open(&self, experiment: Option<&Path>) -> StoreResult<Store> {
        self.create(experiment)?;
        Store::open(&self.db)
    }

    /// Opens the database when it exists, for reading: read-only when it cannot be written
    /// ([`Store::open_for_reading`]); `None` when nothing was stored yet.
    pub fn open_existing(&self) -> StoreResult<Option<Store>> {
        // A folder where the database should be is named, as `open` names it, not taken for
        // "nothing stored yet".
        if self.exists() || self.db.is_dir() {
            Store::open_for_reading(&self.db).map(Some)
        } else {
            Ok(None)
        }
    }

    fn create(&self, experiment: Option<&Path>) -> StoreResult<()> {
        if self.root.is_dir() {
            return Ok(());
        }
        let err = |source| StoreError::CreateDir {
            path: self.root.clone(),
            source,
        };
        std::fs::create_dir_all(&self.root).map_err(err)?;
        if inside_git_tree(&self.root) {
            std::fs::write(
                self.root.join(".gitignore"),
                "# primus-tune's trials and studies: measurements, not sources\n*\n",
            )
            .map_err(err)?;
        }
        if let (Origin::DataDir, Some(exp)) = (self.origin, experiment) {
            let note = serde_json::json!({"experiment": canonical(exp)});
            std::fs::write(self.root.join("workspace.json"), format!("{note}\n")).map_err(err)?;
        }
        Ok(())
    }
}

/// `dir` or a folder above it holds `.git` (a work tree or a submodule's file).
fn inside_git_tree(dir: &Path) -> bool {
    canonical(dir).ancestors().any(|a| a.join(".git").exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_order_chosen_then_beside_then_keyed() {
        let t = tempfile::tempdir().unwrap();
        let exp = t.path().join("exps/a.yaml");
        std::fs::create_dir_all(exp.parent().unwrap()).unwrap();
        std::fs::write(&exp, "x: 1\n").unwrap();
        let data = t.path().join("data");
        let w = Workspace::resolve(&exp, None, &data);
        assert_eq!(w.origin, Origin::DataDir);
        assert!(w.root.starts_with(&data));
        assert!(
            w.root
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("a-")
        );
        assert_eq!(Workspace::resolve(&exp, None, &data), w, "stable key");
        let other = t.path().join("exps/b.yaml");
        assert_ne!(Workspace::resolve(&other, None, &data).root, w.root);

        std::fs::create_dir(t.path().join("exps/.primus-tune")).unwrap();
        let w = Workspace::resolve(&exp, None, &data);
        assert_eq!(w.origin, Origin::Beside);
        assert_eq!(
            w.db,
            exp.parent()
                .unwrap()
                .canonicalize()
                .unwrap()
                .join(".primus-tune/trials.db")
        );

        let chosen = t.path().join("mine");
        let w = Workspace::resolve(&exp, Some(&chosen), &data);
        assert_eq!((w.origin, w.root.clone()), (Origin::Chosen, chosen));
    }

    #[test]
    fn created_inside_a_git_tree_it_ignores_itself() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join(".git")).unwrap();
        let w = Workspace::at(t.path().join("ws"), Origin::Chosen);
        w.open(None).unwrap();
        let ignore = std::fs::read_to_string(t.path().join("ws/.gitignore")).unwrap();
        assert!(ignore.lines().any(|l| l == "*"));
        assert!(w.exists());

        let outside = tempfile::tempdir().unwrap();
        let exp = outside.path().join("e.yaml");
        let w = Workspace::keyed(&exp, &outside.path().join("data"));
        w.open(Some(&exp)).unwrap();
        assert!(!w.root.join(".gitignore").exists());
        let note = std::fs::read_to_string(w.root.join("workspace.json")).unwrap();
        assert!(note.contains("e.yaml"), "{note}");
    }

    #[test]
    fn a_db_named_alone_keeps_its_trials_beside_it() {
        let w = Workspace::of_db(PathBuf::from("/x/y/other.db"));
        assert_eq!(w.trials_dir, PathBuf::from("/x/y/trials"));
        assert_eq!(Workspace::of_db("t.db".into()).root, PathBuf::from("."));
    }
}
