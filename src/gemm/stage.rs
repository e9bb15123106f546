//! What each stage runs: the environment Primus' hook expects, the trial length, and for
//! stage 2 outside primus-cli the offline tuning command itself. Pure: the CLI and the TUI hand
//! the plan to the run engine.
//!
//! Every stage sets `PRIMUS_MODEL` to the experiment's stem: trials run a copy of the config
//! (`trials/<id>/config.yaml`), and the hook would otherwise name the tuning folder `config`.

use super::status::TuneLayout;
use crate::config::env::Env;
use crate::run::capabilities::Hipblaslt;
use std::path::{Path, PathBuf};

/// Stage 1's default trial length: shapes come from the first forward/backward passes and the
/// first optimizer step; a few more catch anything that starts later.
pub const STAGE1_ITERS: u64 = 10;

/// What the trial of one stage looks like.
#[derive(Debug, Clone, PartialEq)]
pub struct StagePlan {
    pub stage: u8,
    /// Added to the trial's environment, in this order (later entries win).
    pub env: Vec<(String, String)>,
    /// `train_iters` of the trial (stage 1's is short); `None`: the caller's.
    pub iters: Option<u64>,
    /// Stage 2 outside primus-cli: this command replaces the profile's (`argv[0]` is the
    /// interpreter).
    pub command: Option<Vec<String>>,
    /// The trial trains (and prints iterations); stage 2 does not.
    pub trains: bool,
    /// Folders to create before launching.
    pub mkdirs: Vec<PathBuf>,
    /// Stage 3 only: the untuned baseline trial's environment, run first with the same length.
    pub baseline_env: Option<Vec<(String, String)>>,
    /// Stage 3 only: the result file the tuned trial uses.
    pub override_file: Option<PathBuf>,
    /// Stage 2 only: the unique shapes it will tune.
    pub shapes: usize,
}

/// Inputs of [`plan`].
pub struct StageContext<'a> {
    pub layout: &'a TuneLayout,
    pub primus_root: &'a Path,
    /// The launch profile's name (for messages).
    pub profile: &'a str,
    /// How the profile's workload calls hipBLASLt: through Primus' hook (stage 2 runs in it),
    /// directly (the hook's effect is spelled out), or not at all (no stage applies).
    pub hipblaslt: Hipblaslt,
    pub gpus: u64,
    /// The launch environment (the process's, plus `--env`).
    pub env: &'a Env,
    /// The Python that runs `offline_tune_gemm.py` (stage 2 outside primus-cli).
    pub python: &'a str,
    /// Stage 3's file when not the layout's result file.
    pub override_file: Option<&'a Path>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum StageError {
    #[error(
        "stage {0} does not exist: the stages are 1 (dump shapes), 2 (tune offline) and 3 (train with the tuned file)"
    )]
    NoSuchStage(u8),
    #[error(
        "PRIMUS_DETERMINISTIC=1 is set: Primus skips every HipBLASLt tuning stage; unset it (or pass --env PRIMUS_DETERMINISTIC=0) to tune"
    )]
    Deterministic,
    #[error(
        "TE_HIPBLASLT_TUNING=1 is set: turn it off for the shape dump (--env TE_HIPBLASLT_TUNING=0)"
    )]
    TeTuning,
    #[error("no GEMM shapes dumped in {0}: run stage 1 first")]
    NoShapes(PathBuf),
    #[error("{0} is missing: run stage 2 first (or pass --override-file)")]
    NoResult(PathBuf),
    #[error("{0}")]
    BadResult(String),
    #[error("{0} is missing: stage 2 needs Primus' offline tuning script")]
    NoScript(PathBuf),
    #[error(
        "GEMM stage {stage} needs hipBLASLt, which profile `{profile}` never calls: use the primus or megatron profile (or one of yours that runs the real job)"
    )]
    NoHipblaslt { stage: u8, profile: String },
}

fn kv(k: &str, v: impl Into<String>) -> (String, String) {
    (k.to_string(), v.into())
}

/// The plan of stage `stage`. Checks the stage's inputs exist (shapes for 2, a readable
/// result file for 3) and the environment does not defeat it.
pub fn plan(stage: u8, cx: &StageContext) -> Result<StagePlan, StageError> {
    if !(1..=3).contains(&stage) {
        return Err(StageError::NoSuchStage(stage));
    }
    if cx.hipblaslt == Hipblaslt::None {
        return Err(StageError::NoHipblaslt {
            stage,
            profile: cx.profile.to_string(),
        });
    }
    if cx.env.get("PRIMUS_DETERMINISTIC") == Some("1") {
        return Err(StageError::Deterministic);
    }
    let layout = cx.layout;
    let common = |stage: u8| {
        vec![
            kv("PRIMUS_HIPBLASLT_TUNING", "1"),
            kv("PRIMUS_HIPBLASLT_TUNING_STAGE", stage.to_string()),
            kv("PRIMUS_MODEL", layout.model_tag.clone()),
        ]
    };
    let empty = StagePlan {
        stage,
        env: Vec::new(),
        iters: None,
        command: None,
        trains: true,
        mkdirs: Vec::new(),
        baseline_env: None,
        override_file: None,
        shapes: 0,
    };
    match stage {
        1 => {
            if cx.env.get("TE_HIPBLASLT_TUNING") == Some("1") {
                return Err(StageError::TeTuning);
            }
            let rank: u32 = cx
                .env
                .get("NODE_RANK")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let mut env = common(1);
            // What the hook sets, spelled out so every profile gets it and a stray
            // HIPBLASLT_LOG_FILE in the user's shell cannot send the dump elsewhere.
            env.push(kv("HIPBLASLT_LOG_MASK", "32"));
            env.push(kv(
                "HIPBLASLT_LOG_FILE",
                layout.dump_file(rank).display().to_string(),
            ));
            env.push(kv("HIPBLASLT_TUNING_OVERRIDE_FILE", ""));
            Ok(StagePlan {
                env,
                iters: Some(STAGE1_ITERS),
                mkdirs: vec![layout.shapes_dir.clone()],
                ..empty
            })
        }
        2 => {
            let shapes = super::dump::read_dumps(&layout.shapes_dir)
                .ok()
                .filter(|d| d.gemm_lines > 0)
                .map(|d| d.shapes.len())
                .ok_or_else(|| StageError::NoShapes(layout.shapes_dir.clone()))?;
            let tune_dir = layout
                .result_file
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| layout.root.clone());
            let mut env = common(2);
            env.push(kv("GPUS_PER_NODE", cx.gpus.max(1).to_string()));
            let command = if cx.hipblaslt == Hipblaslt::PrimusHook {
                None
            } else {
                let script = cx
                    .primus_root
                    .join("examples/offline_tune/offline_tune_gemm.py");
                if !script.is_file() {
                    return Err(StageError::NoScript(script));
                }
                Some(vec![
                    cx.python.to_string(),
                    script.display().to_string(),
                    "--dump-shape-path-or-file".into(),
                    layout.shapes_dir.display().to_string(),
                    "--tune-result-path".into(),
                    layout.result_file.display().to_string(),
                    "--num-devices".into(),
                    cx.gpus.max(1).to_string(),
                ])
            };
            Ok(StagePlan {
                env,
                command,
                trains: false,
                mkdirs: vec![tune_dir],
                shapes,
                ..empty
            })
        }
        _ => {
            let file = cx
                .override_file
                .map(Path::to_path_buf)
                .unwrap_or_else(|| layout.result_file.clone());
            if !file.is_file() {
                return Err(StageError::NoResult(file));
            }
            super::results::read(&file).map_err(|e| StageError::BadResult(e.to_string()))?;
            Ok(StagePlan {
                env: tuned_env(layout, &file),
                baseline_env: Some(vec![
                    kv("PRIMUS_HIPBLASLT_TUNING", "0"),
                    kv("PRIMUS_HIPBLASLT_TUNING_STAGE", "0"),
                    kv("PRIMUS_MODEL", layout.model_tag.clone()),
                    kv("HIPBLASLT_TUNING_OVERRIDE_FILE", ""),
                ]),
                override_file: Some(file),
                ..empty
            })
        }
    }
}

/// The environment that trains with a tuned file: stage 3 of the hook, and the variable
/// hipBLASLt itself reads (so profiles other than `primus` get it too). `run --gemm-tuned` and
/// `sweep --gemm-tuned` add the same.
pub fn tuned_env(layout: &TuneLayout, file: &Path) -> Vec<(String, String)> {
    vec![
        kv("PRIMUS_HIPBLASLT_TUNING", "1"),
        kv("PRIMUS_HIPBLASLT_TUNING_STAGE", "3"),
        kv("PRIMUS_MODEL", layout.model_tag.clone()),
        kv("HIPBLASLT_TUNING_OVERRIDE_FILE", file.display().to_string()),
    ]
}

/// Moves an earlier result file aside (`<file>.<unix seconds>.prev`) so stage 2 starts a fresh
/// one and the old one is not lost. Returns where it went.
pub fn set_aside_old_result(file: &Path) -> std::io::Result<Option<PathBuf>> {
    if !file.exists() {
        return Ok(None);
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut name = file.as_os_str().to_owned();
    name.push(format!(".{secs}.prev"));
    let to = PathBuf::from(name);
    std::fs::rename(file, &to)?;
    Ok(Some(to))
}

/// The stage-3 comparison of two measured medians: the relative change of the tuned median
/// against the baseline's and its 95 % half-width (the two CIs combined in quadrature, a
/// first-order approximation for a ratio of independent estimates).
pub fn compare(baseline_ms: f64, baseline_ci: f64, tuned_ms: f64, tuned_ci: f64) -> (f64, f64) {
    let ratio = tuned_ms / baseline_ms;
    let rel = ((baseline_ci / baseline_ms).powi(2) + (tuned_ci / tuned_ms).powi(2)).sqrt();
    (ratio - 1.0, ratio * rel)
}

/// One line for a comparison: faster, slower, or within the noise.
pub fn comparison_text(change: f64, ci: f64) -> String {
    let pct = 100.0 * change.abs();
    let ci_pct = 100.0 * ci;
    if change.abs() <= ci {
        format!(
            "no measurable difference: the tuned GEMMs change the step time by {:+.1} ± {ci_pct:.1} %",
            100.0 * change
        )
    } else if change < 0.0 {
        format!("the tuned GEMMs are faster by {pct:.1} ± {ci_pct:.1} % per step")
    } else {
        format!(
            "the tuned GEMMs are slower by {pct:.1} ± {ci_pct:.1} % per step: keep tuning off, or re-run stage 2 on this build"
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const LINE: &str = "hipblaslt-bench --api_method c -m 64 -n 32 -k 16 --transA T --transB N --batch_count 1 --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r --compute_type f32_r\n";
    const RESULT: &str = "Git Version: abc\n    transA,transB,batch_count,m,n,k,a_type,b_type,c_type,d_type,compute_type,hipblaslt-Gflops,us,solution_index,gcnArchName,CUs\n    T,N,1,64,32,16,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,1,1,7,gfx942:sramecc+:xnack-,304\n";

    struct Tree {
        dir: tempfile::TempDir,
        layout: TuneLayout,
    }

    fn tree() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let layout = TuneLayout::new(
            dir.path(),
            Path::new("/x/experiments/llama2_7B-BF16-pretrain.yaml"),
            &Env::empty(),
        );
        Tree { dir, layout }
    }

    fn plan_of(t: &Tree, stage: u8, profile: &str, env: &Env) -> Result<StagePlan, StageError> {
        plan(
            stage,
            &StageContext {
                layout: &t.layout,
                primus_root: t.dir.path(),
                profile,
                hipblaslt: match profile {
                    "primus" => Hipblaslt::PrimusHook,
                    "proxy-cpu" => Hipblaslt::None,
                    _ => Hipblaslt::Direct,
                },
                gpus: 8,
                env,
                python: "python3",
                override_file: None,
            },
        )
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn stage1_sets_the_hook_environment_and_a_short_run() {
        let t = tree();
        let p = plan_of(&t, 1, "primus", &Env::empty().with("NODE_RANK", "3")).unwrap();
        let dump = t
            .dir
            .path()
            .join("output/tune_hipblaslt/llama2_7B-BF16-pretrain/gemm_shape/dump_hipblaslt_gemm_shape_3.txt");
        assert_eq!(
            p.env,
            pairs(&[
                ("PRIMUS_HIPBLASLT_TUNING", "1"),
                ("PRIMUS_HIPBLASLT_TUNING_STAGE", "1"),
                ("PRIMUS_MODEL", "llama2_7B-BF16-pretrain"),
                ("HIPBLASLT_LOG_MASK", "32"),
                ("HIPBLASLT_LOG_FILE", dump.to_str().unwrap()),
                ("HIPBLASLT_TUNING_OVERRIDE_FILE", ""),
            ])
        );
        assert_eq!(p.iters, Some(STAGE1_ITERS));
        assert!(p.trains && p.command.is_none() && p.baseline_env.is_none());
        assert_eq!(p.mkdirs, vec![t.layout.shapes_dir.clone()]);
    }

    #[test]
    fn a_profile_that_never_calls_hipblaslt_gets_no_stage() {
        let t = tree();
        for stage in 1..=3 {
            let e = plan_of(&t, stage, "proxy-cpu", &Env::empty()).unwrap_err();
            assert_eq!(
                e,
                StageError::NoHipblaslt {
                    stage,
                    profile: "proxy-cpu".into()
                }
            );
            assert!(e.to_string().contains("primus or megatron"), "{e}");
        }
    }

    #[test]
    fn stage1_refuses_te_tuning_and_determinism() {
        let t = tree();
        assert_eq!(
            plan_of(
                &t,
                1,
                "primus",
                &Env::empty().with("TE_HIPBLASLT_TUNING", "1")
            ),
            Err(StageError::TeTuning)
        );
        for s in 1..=3 {
            assert_eq!(
                plan_of(
                    &t,
                    s,
                    "primus",
                    &Env::empty().with("PRIMUS_DETERMINISTIC", "1")
                ),
                Err(StageError::Deterministic)
            );
        }
        assert_eq!(
            plan_of(&t, 4, "primus", &Env::empty()),
            Err(StageError::NoSuchStage(4))
        );
    }

    #[test]
    fn stage2_needs_shapes_then_goes_through_the_hook_or_the_script() {
        let t = tree();
        assert_eq!(
            plan_of(&t, 2, "primus", &Env::empty()),
            Err(StageError::NoShapes(t.layout.shapes_dir.clone()))
        );
        std::fs::create_dir_all(&t.layout.shapes_dir).unwrap();
        std::fs::write(t.layout.dump_file(0), LINE).unwrap();
        let p = plan_of(&t, 2, "primus", &Env::empty()).unwrap();
        assert_eq!(
            p.env,
            pairs(&[
                ("PRIMUS_HIPBLASLT_TUNING", "1"),
                ("PRIMUS_HIPBLASLT_TUNING_STAGE", "2"),
                ("PRIMUS_MODEL", "llama2_7B-BF16-pretrain"),
                ("GPUS_PER_NODE", "8"),
            ])
        );
        assert!(!p.trains && p.command.is_none());
        // Outside primus-cli the script runs directly, and must exist.
        let script = t
            .dir
            .path()
            .join("examples/offline_tune/offline_tune_gemm.py");
        assert_eq!(
            plan_of(&t, 2, "megatron", &Env::empty()),
            Err(StageError::NoScript(script.clone()))
        );
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "").unwrap();
        let p = plan_of(&t, 2, "megatron", &Env::empty()).unwrap();
        let s = |p: &Path| p.display().to_string();
        assert_eq!(
            p.command.unwrap(),
            vec![
                "python3".to_string(),
                s(&script),
                "--dump-shape-path-or-file".into(),
                s(&t.layout.shapes_dir),
                "--tune-result-path".into(),
                s(&t.layout.result_file),
                "--num-devices".into(),
                "8".into(),
            ]
        );
        assert_eq!(
            p.mkdirs,
            vec![t.layout.result_file.parent().unwrap().to_path_buf()]
        );
    }

    #[test]
    fn stage3_pairs_a_baseline_with_the_tuned_run() {
        let t = tree();
        assert_eq!(
            plan_of(&t, 3, "primus", &Env::empty()),
            Err(StageError::NoResult(t.layout.result_file.clone()))
        );
        std::fs::create_dir_all(t.layout.result_file.parent().unwrap()).unwrap();
        std::fs::write(&t.layout.result_file, "not a result file\n").unwrap();
        assert!(matches!(
            plan_of(&t, 3, "primus", &Env::empty()),
            Err(StageError::BadResult(m)) if m.contains(":1:")
        ));
        std::fs::write(&t.layout.result_file, RESULT).unwrap();
        let p = plan_of(&t, 3, "primus", &Env::empty()).unwrap();
        let file = t.layout.result_file.display().to_string();
        assert_eq!(
            p.env,
            pairs(&[
                ("PRIMUS_HIPBLASLT_TUNING", "1"),
                ("PRIMUS_HIPBLASLT_TUNING_STAGE", "3"),
                ("PRIMUS_MODEL", "llama2_7B-BF16-pretrain"),
                ("HIPBLASLT_TUNING_OVERRIDE_FILE", &file),
            ])
        );
        assert_eq!(
            p.baseline_env.unwrap(),
            pairs(&[
                ("PRIMUS_HIPBLASLT_TUNING", "0"),
                ("PRIMUS_HIPBLASLT_TUNING_STAGE", "0"),
                ("PRIMUS_MODEL", "llama2_7B-BF16-pretrain"),
                ("HIPBLASLT_TUNING_OVERRIDE_FILE", ""),
            ])
        );
        assert_eq!(p.iters, None);
        assert!(p.trains);
    }

    #[test]
    fn set_aside_keeps_the_old_file() {
        let t = tree();
        let f = t.dir.path().join("r.txt");
        assert_eq!(set_aside_old_result(&f).unwrap(), None);
        std::fs::write(&f, "old").unwrap();
        let to = set_aside_old_result(&f).unwrap().unwrap();
        assert!(!f.exists());
        assert_eq!(std::fs::read_to_string(to).unwrap(), "old");
    }

    #[test]
    fn comparisons_read_as_faster_slower_or_noise() {
        let (c, ci) = compare(110.0, 1.1, 100.0, 1.0);
        assert!((c - (100.0 / 110.0 - 1.0)).abs() < 1e-12);
        // 1 % and 1 % in quadrature, scaled by the ratio.
        assert!((ci - (100.0 / 110.0) * (2.0_f64 * 0.01 * 0.01).sqrt()).abs() < 1e-12);
        assert!(comparison_text(c, ci).starts_with("the tuned GEMMs are faster by 9.1"));
        assert!(comparison_text(0.05, 0.01).contains("slower by 5.0"));
        assert!(comparison_text(-0.004, 0.01).starts_with("no measurable difference"));
    }
}
