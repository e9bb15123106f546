//! The bundled example: a small Primus root (presets + three experiments) compiled into the
//! binary, so `primus-tune` works on a fresh machine with no Primus checkout.

use std::path::{Path, PathBuf};

macro_rules! bundle {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!("../../presets/examples/", $path)))),*]
    };
}

/// Every file of `presets/examples/` (a test checks the list is complete).
pub const FILES: &[(&str, &str)] = bundle![
    "README.md",
    "experiments/llama3_8B-BF16-pretrain.yaml",
    "experiments/moe_16B-BF16-pretrain.yaml",
    "experiments/llama3.1_8B-torchtitan-pretrain.yaml",
    "primus/configs/modules/module_base.yaml",
    "primus/configs/modules/megatron/pre_trainer.yaml",
    "primus/configs/modules/megatron/trainer_base.yaml",
    "primus/configs/modules/megatron/primus_turbo.yaml",
    "primus/configs/models/megatron/language_model.yaml",
    "primus/configs/models/megatron/llama_base.yaml",
    "primus/configs/models/megatron/llama3_8B.yaml",
    "primus/configs/models/megatron/moe_base.yaml",
    "primus/configs/models/megatron/moe_16B_A3B.yaml",
    "primus/configs/modules/torchtitan/pre_trainer.yaml",
    "primus/configs/models/torchtitan/llama3.1_8B.yaml",
];

/// The experiment opened when no CONFIG is given.
pub const DEFAULT_EXPERIMENT: &str = "experiments/moe_16B-BF16-pretrain.yaml";

/// The folder holding the bundled example: the source checkout's `presets/examples` when this
/// binary runs from one, else a copy written once under the user's data folder (files already
/// there are never overwritten, so edits to them are kept).
#[cfg(any(test, feature = "testkit"))]
pub fn examples_root() -> std::io::Result<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("presets/examples");
    if source.join(DEFAULT_EXPERIMENT).is_file() {
        return Ok(source);
    }
    let root = data_dir(&format!("examples-{}", env!("CARGO_PKG_VERSION")));
    extract(&root)?;
    Ok(root)
}

/// `<data dir>/primus-tune/<name>`: `$XDG_DATA_HOME`, else `~/.local/share`, else the temp folder
/// ([`crate::util::paths::xdg_dir`]: an empty variable counts as unset).
pub fn data_dir(name: &str) -> PathBuf {
    data_dir_in(None, name)
}

/// [`data_dir`] under `home` (a data folder given instead of `$XDG_DATA_HOME`) when set.
pub fn data_dir_in(home: Option<&Path>, name: &str) -> PathBuf {
    home.map(|h| h.join("primus-tune"))
        .or_else(|| crate::util::paths::xdg_dir("XDG_DATA_HOME", ".local/share"))
        .unwrap_or_else(|| std::env::temp_dir().join("primus-tune"))
        .join(name)
}

/// Write the bundled files under `root`, leaving files that already exist untouched.
pub fn extract(root: &Path) -> std::io::Result<()> {
    for (rel, content) in FILES {
        let p = root.join(rel);
        if p.exists() {
            continue;
        }
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&p, content)?;
    }
    Ok(())
}

/// The bundled example as a file the user may edit: always the copy under the data folder, so
/// the interactive editor never writes into a source checkout.
#[cfg(any(test, feature = "testkit"))]
pub fn editable_default_experiment() -> std::io::Result<PathBuf> {
    editable_default_experiment_in(None)
}

/// [`editable_default_experiment`] under the data folder `home` when set.
pub fn editable_default_experiment_in(home: Option<&Path>) -> std::io::Result<PathBuf> {
    let root = data_dir_in(home, &format!("examples-{}", env!("CARGO_PKG_VERSION")));
    extract(&root)?;
    Ok(root.join(DEFAULT_EXPERIMENT))
}

#[cfg(any(test, feature = "testkit"))]
pub fn default_experiment() -> std::io::Result<PathBuf> {
    Ok(examples_root()?.join(DEFAULT_EXPERIMENT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_lists_every_example_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("presets/examples");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    on_disk.push(
                        p.strip_prefix(&root)
                            .unwrap()
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = FILES.iter().map(|(p, _)| p.to_string()).collect();
        listed.sort();
        assert_eq!(listed, on_disk);
    }

    #[test]
    fn extracted_examples_resolve_and_edits_survive_re_extraction() {
        let dir = tempfile::tempdir().unwrap();
        extract(dir.path()).unwrap();
        for exp in [
            "experiments/llama3_8B-BF16-pretrain.yaml",
            "experiments/llama3.1_8B-torchtitan-pretrain.yaml",
            DEFAULT_EXPERIMENT,
        ] {
            let p = dir.path().join(exp);
            crate::config::Experiment::load(&p, &Default::default())
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let p = dir.path().join(DEFAULT_EXPERIMENT);
        std::fs::write(&p, "edited").unwrap();
        extract(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "edited");
    }
}
