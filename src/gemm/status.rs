//! Which of the three stages is done, from the files on disk and the environment, what comes
//! next, and the traps that silently make a stage do nothing.
//!
//! The layout is Primus' hook (`runner/helpers/hooks/train/pretrain/prepare_experiment.sh`):
//! `<primus root>/output/tune_hipblaslt/<PRIMUS_MODEL or config stem>/` holds
//! `gemm_shape/dump_hipblaslt_gemm_shape_<node rank>.txt` (stage 1) and
//! `gemm_tune/tune_hipblas_gemm_results.txt` (stage 2); stage 3 trains with
//! `HIPBLASLT_TUNING_OVERRIDE_FILE` pointing at the result file.

use super::dump::{self, DumpSummary};
use super::probe::HipblasltBuild;
use super::results::{self, TuneResults};
use crate::config::env::Env;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The result file's name under `gemm_tune/`.
pub const RESULT_FILE: &str = "tune_hipblas_gemm_results.txt";

/// Where one experiment's tuning files live.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuneLayout {
    /// `PRIMUS_MODEL` when set, else the experiment file's stem (what the hook uses).
    pub model_tag: String,
    pub root: PathBuf,
    pub shapes_dir: PathBuf,
    pub result_file: PathBuf,
}

impl TuneLayout {
    pub fn new(primus_root: &Path, experiment: &Path, env: &Env) -> TuneLayout {
        let model_tag = env
            .get("PRIMUS_MODEL")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| model_tag_of(experiment));
        let root = primus_root.join("output/tune_hipblaslt").join(&model_tag);
        TuneLayout {
            shapes_dir: root.join("gemm_shape"),
            result_file: root.join("gemm_tune").join(RESULT_FILE),
            model_tag,
            root,
        }
    }

    /// Stage 1's dump file for a node.
    pub fn dump_file(&self, node_rank: u32) -> PathBuf {
        self.shapes_dir
            .join(format!("dump_hipblaslt_gemm_shape_{node_rank}.txt"))
    }
}

/// The hook's `basename CONFIG .yaml`.
pub fn model_tag_of(experiment: &Path) -> String {
    let name = experiment
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(".yaml").unwrap_or(&name).to_string()
}

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Info,
    Warning,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    pub level: Level,
    pub text: String,
}

fn note(level: Level, text: impl Into<String>) -> Note {
    Note {
        level,
        text: text.into(),
    }
}

/// Stage 1's output as found on disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DumpState {
    pub files: usize,
    pub unique_shapes: usize,
    pub gemm_lines: u64,
    #[serde(skip)]
    pub newest: Option<SystemTime>,
}

/// Stage 2's output as found on disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResultState {
    pub path: PathBuf,
    pub git_version: String,
    pub entries: usize,
    /// Distinct `gcnArchName` values in the file.
    pub archs: Vec<String>,
    /// Dumped shapes that have a tuned entry (`None` without dumps).
    pub covered: Option<usize>,
    #[serde(skip)]
    pub modified: Option<SystemTime>,
}

/// The measured stage-3 comparison, when one ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline_trial: i64,
    pub tuned_trial: i64,
    pub baseline_ms: f64,
    pub tuned_ms: f64,
    /// Relative change of the median step time, tuned vs baseline (negative: faster).
    pub change: f64,
    /// 95 % half-width of `change`.
    pub change_ci: f64,
}

/// Everything `gemm-tune status` says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GemmStatus {
    pub layout: TuneLayout,
    /// The hook runs for the Megatron backend only.
    pub applicable: bool,
    pub dumps: Option<DumpState>,
    pub results: Option<ResultState>,
    /// `HIPBLASLT_TUNING_OVERRIDE_FILE` from the environment, when set and not empty.
    pub override_file: Option<PathBuf>,
    /// Training already runs stage 3 (the master switch, stage 3 and a readable file).
    pub in_use: bool,
    pub comparison: Option<Comparison>,
    /// The highest stage whose output exists (0: none).
    pub done: u8,
    /// The stage to run next (`None`: all done).
    pub next: Option<u8>,
    pub next_text: String,
    pub notes: Vec<Note>,
    pub installed: Option<HipblasltBuild>,
}

/// What [`status`] looks at besides the files.
pub struct StatusInput<'a> {
    pub primus_root: &'a Path,
    pub experiment: &'a Path,
    pub framework: &'a str,
    pub env: &'a Env,
    /// The hipBLASLt build here (from [`super::probe`]), when known.
    pub installed: Option<&'a HipblasltBuild>,
    /// The torch profiler is on in the config (`profile: true`).
    pub profiler_on: bool,
    /// The latest stage-3 comparison from the trial store.
    pub comparison: Option<Comparison>,
}

/// The tuning state of an experiment's main module (the profiler flag read from its config).
pub fn of_experiment(
    exp: &crate::config::Experiment,
    env: &Env,
    installed: Option<&HipblasltBuild>,
    comparison: Option<Comparison>,
) -> GemmStatus {
    let m = exp.main_module();
    status(&StatusInput {
        primus_root: &exp.primus_root,
        experiment: &exp.path,
        framework: &m.framework,
        env,
        installed,
        profiler_on: m
            .value("profile")
            .is_some_and(crate::domain::value::Value::truthy),
        comparison,
    })
}

/// Evaluates the tuning state: the stages' files, the environment's switches and traps, the
/// file training would use against the hipBLASLt build here, and the next stage. Each part adds
/// its notes in this order.
pub fn status(input: &StatusInput) -> GemmStatus {
    let env = input.env;
    let layout = TuneLayout::new(input.primus_root, input.experiment, env);
    let mut notes = Vec::new();
    let applicable = applicable(input.framework, &mut notes);
    let (dump_summary, dumps) = dumps_of(&layout, &mut notes);
    let (parsed, results) = results_of(&layout, dump_summary.as_ref(), dumps.as_ref(), &mut notes);
    let (master, stage) = env_traps(env, &layout, &mut notes);
    let (override_file, in_use) = stage3(input, &layout, master, stage, &mut notes);
    let checked = file_in_use(override_file.as_ref(), &layout, parsed.as_ref(), &mut notes);
    if let Some(r) = &checked {
        check_build(r, input.installed, &mut notes);
    }
    let (done, next, next_text) = next_stage(
        results.as_ref(),
        dumps.as_ref(),
        input.comparison.is_some(),
        in_use,
    );
    GemmStatus {
        layout,
        applicable,
        dumps,
        results,
        override_file,
        in_use,
        comparison: input.comparison.clone(),
        done,
        next,
        next_text,
        notes,
        installed: input.installed.cloned(),
    }
}

/// Whether Primus' hook runs for this backend (Megatron only); a note when it does not.
fn applicable(framework: &str, notes: &mut Vec<Note>) -> bool {
    let applicable = framework == "megatron";
    if !applicable {
        notes.push(note(
            Level::Info,
            format!(
                "Primus runs its HipBLASLt tuning hook for the Megatron backend only (this experiment uses {}); the stages here still work, but a {} run does not pick up the tuned file through the hook",
                framework, framework
            ),
        ));
    }

    applicable
}

/// Stage 1's dump: the parsed summary and what status shows of it.
fn dumps_of(
    layout: &TuneLayout,
    notes: &mut Vec<Note>,
) -> (Option<DumpSummary>, Option<DumpState>) {
    let dump_summary: Option<DumpSummary> = if layout.shapes_dir.is_dir() {
        match dump::read_dumps(&layout.shapes_dir) {
            Ok(s) => Some(s),
            Err(dump::DumpError::Empty { .. }) => None,
            Err(e) => {
                notes.push(note(Level::Error, format!("stage 1 dump unreadable: {e}")));
                None
            }
        }
    } else {
        None
    };
    let dumps = dump_summary.as_ref().map(|s| DumpState {
        files: s.files.len(),
        unique_shapes: s.shapes.len(),
        gemm_lines: s.gemm_lines,
        newest: s
            .files
            .iter()
            .filter_map(|f| f.metadata().and_then(|m| m.modified()).ok())
            .max(),
    });
    if dump_summary.as_ref().is_some_and(|s| s.gemm_lines == 0) {
        notes.push(note(
            Level::Warning,
            format!(
                "{} holds no hipblaslt-bench lines: stage 1 ran without HIPBLASLT_LOG_MASK=32, or the run made no GEMM call",
                layout.shapes_dir.display()
            ),
        ));
    }

    (dump_summary, dumps)
}

/// Stage 2's result file: parsed, and what status shows of it against the dump.
fn results_of(
    layout: &TuneLayout,
    dump_summary: Option<&DumpSummary>,
    dumps: Option<&DumpState>,
    notes: &mut Vec<Note>,
) -> (Option<TuneResults>, Option<ResultState>) {
    let parsed: Option<TuneResults> = if layout.result_file.is_file() {
        match results::read(&layout.result_file) {
            Ok(r) => Some(r),
            Err(e) => {
                notes.push(note(
                    Level::Error,
                    format!("stage 2 result file unusable: {e}"),
                ));
                None
            }
        }
    } else {
        None
    };
    let results = parsed.as_ref().map(|r| result_state(r, dump_summary));
    if let (Some(r), Some(d)) = (&results, dumps) {
        if let Some(c) = r.covered
            && c < d.unique_shapes
        {
            notes.push(note(
                Level::Warning,
                format!(
                    "the result file tunes {c} of the {} dumped shapes: stage 2 was interrupted or the shapes were dumped again; re-run stage 2",
                    d.unique_shapes
                ),
            ));
        }
        if let (Some(dm), Some(rm)) = (d.newest, r.modified)
            && dm > rm
        {
            notes.push(note(
                Level::Warning,
                "the shapes were dumped after the result file was written: re-run stage 2 so it covers them",
            ));
        }
    }
    if let Some(r) = &results
        && r.entries == 0
    {
        notes.push(note(
            Level::Warning,
            "the result file has no tuned GEMM: stage 2 found nothing to tune or every tuning failed",
        ));
    }

    (parsed, results)
}

/// The environment's switches (the master switch, the stage) and its traps.
fn env_traps<'e>(
    env: &'e Env,
    layout: &TuneLayout,
    notes: &mut Vec<Note>,
) -> (bool, Option<&'e str>) {
    let master = env.get("PRIMUS_HIPBLASLT_TUNING") == Some("1");
    let stage = env
        .get("PRIMUS_HIPBLASLT_TUNING_STAGE")
        .filter(|s| !s.is_empty());
    let deterministic = env.get("PRIMUS_DETERMINISTIC") == Some("1");
    if deterministic {
        notes.push(note(
            Level::Warning,
            "PRIMUS_DETERMINISTIC=1: Primus skips every tuning stage and forces TE_HIPBLASLT_TUNING_RUN_COUNT/ALGO_COUNT to 0",
        ));
    }
    if let Some(s) = stage
        && !master
    {
        notes.push(note(
            Level::Warning,
            format!(
                "PRIMUS_HIPBLASLT_TUNING_STAGE={s} is set but PRIMUS_HIPBLASLT_TUNING is not 1, so the stage is ignored"
            ),
        ));
    }
    if let Some(s) = stage
        && !matches!(s, "0" | "1" | "2" | "3")
    {
        notes.push(note(
            Level::Error,
            format!(
                "PRIMUS_HIPBLASLT_TUNING_STAGE={s}: Primus accepts 0, 1, 2 or 3 and stops otherwise"
            ),
        ));
    }
    if master && stage.unwrap_or("0") == "0" {
        for k in [
            "TE_HIPBLASLT_TUNING_RUN_COUNT",
            "TE_HIPBLASLT_TUNING_ALGO_COUNT",
        ] {
            if env.get(k) == Some("0") {
                notes.push(note(
                    Level::Warning,
                    format!("{k}=0 with stage 0: Transformer Engine's online tuning does nothing"),
                ));
            }
        }
    }
    if !master && !deterministic {
        notes.push(note(
            Level::Info,
            "with PRIMUS_HIPBLASLT_TUNING unset, Primus sets TE_HIPBLASLT_TUNING_RUN_COUNT and ALGO_COUNT to 0 (tuning off)",
        ));
    }
    if env.get("TE_HIPBLASLT_TUNING") == Some("1") {
        notes.push(note(
            Level::Warning,
            "TE_HIPBLASLT_TUNING=1 is set: turn it off for the stage-1 shape dump (Primus' old launcher refused it)",
        ));
    }
    if let Some(f) = env.get("HIPBLASLT_LOG_FILE").filter(|s| !s.is_empty()) {
        notes.push(note(
            Level::Warning,
            format!(
                "HIPBLASLT_LOG_FILE={f} is set: stage 1 writes its dump there instead of {}, where stage 2 reads",
                layout.shapes_dir.display()
            ),
        ));
    }
    (master, stage)
}

/// The stage-3 file (the override, else the experiment's) and whether training uses it now.
fn stage3(
    input: &StatusInput,
    layout: &TuneLayout,
    master: bool,
    stage: Option<&str>,
    notes: &mut Vec<Note>,
) -> (Option<PathBuf>, bool) {
    let env = input.env;
    let override_file = env
        .get("HIPBLASLT_TUNING_OVERRIDE_FILE")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let stage3_file = override_file
        .clone()
        .unwrap_or_else(|| layout.result_file.clone());
    let mut in_use = false;
    if master && stage == Some("3") {
        if stage3_file.is_file() {
            in_use = true;
        } else {
            notes.push(note(
                Level::Error,
                format!(
                    "stage 3 is on but {} is missing: Primus stops with `Missing tuning result file`",
                    stage3_file.display()
                ),
            ));
        }
        if input.profiler_on {
            notes.push(note(
                Level::Warning,
                "the torch profiler is on (profile: true) with HipBLASLt tuning: Primus advises against it",
            ));
        }
    }
    (override_file, in_use)
}

/// The file in use (or about to be), checked against the hipBLASLt build here: the override
/// when it names another file, else the experiment's (read once either way).
fn file_in_use(
    override_file: Option<&PathBuf>,
    layout: &TuneLayout,
    parsed: Option<&TuneResults>,
    notes: &mut Vec<Note>,
) -> Option<TuneResults> {
    match override_file {
        None => parsed.cloned(),
        Some(f) if *f == layout.result_file && f.is_file() => parsed.cloned(),
        Some(f) if !f.is_file() => {
            notes.push(note(
                Level::Error,
                format!(
                    "HIPBLASLT_TUNING_OVERRIDE_FILE={} does not exist",
                    f.display()
                ),
            ));
            None
        }
        Some(f) => match results::read(f) {
            Ok(r) => Some(r),
            Err(e) => {
                notes.push(note(
                    Level::Error,
                    format!("HIPBLASLT_TUNING_OVERRIDE_FILE is not a usable result file: {e}"),
                ));
                None
            }
        },
    }
}

/// The result file against the installed hipBLASLt: its build and the GPU architecture.
fn check_build(r: &TuneResults, installed: Option<&HipblasltBuild>, notes: &mut Vec<Note>) {
    match installed {
        Some(b) => {
            if b.git_version != r.git_version {
                notes.push(note(
                    Level::Warning,
                    format!(
                        "{} was written by hipBLASLt {} but {} is installed: solution indices are build-specific, re-run stage 2",
                        r.path.display(),
                        r.git_version,
                        b.git_version
                    ),
                ));
            } else {
                notes.push(note(
                    Level::Ok,
                    format!("the result file matches the installed hipBLASLt ({})", b.git_version),
                ));
            }
            if let Some(arch) = &b.arch {
                let base = |a: &str| a.split(':').next().unwrap_or(a).to_string();
                let other: Vec<&str> = r
                    .entries
                    .iter()
                    .map(|e| e.arch.as_str())
                    .filter(|a| base(a) != base(arch))
                    .collect();
                if let Some(a) = other.first() {
                    notes.push(note(
                        Level::Warning,
                        format!("{} tuned on {a}, but this GPU is {arch}", other.len()),
                    ));
                }
            }
        }
        None => notes.push(note(
            Level::Info,
            format!(
                "the installed hipBLASLt version is unknown here (no hipblaslt-bench), so the file's build ({}) is not checked",
                r.git_version
            ),
        )),
    }
}

/// The highest stage done, the next one, and what to do next.
fn next_stage(
    results: Option<&ResultState>,
    dumps: Option<&DumpState>,
    compared: bool,
    in_use: bool,
) -> (u8, Option<u8>, String) {
    let done = if results.is_some_and(|r| r.entries > 0) {
        2
    } else if dumps.is_some_and(|d| d.gemm_lines > 0) {
        1
    } else {
        0
    };
    let done = if done == 2 && compared { 3 } else { done };
    let (next, next_text) = match done {
        0 => (
            Some(1),
            "stage 1: a short training run that dumps the GEMM shapes (gemm-tune stage 1)".to_string(),
        ),
        1 => (
            Some(2),
            format!(
                "stage 2: tune the {} dumped shapes offline (gemm-tune stage 2)",
                dumps.map_or(0, |d| d.unique_shapes)
            ),
        ),
        2 => (
            Some(3),
            "stage 3: train with the tuned file and compare against the untuned baseline (gemm-tune stage 3)"
                .to_string(),
        ),
        _ if in_use => (None, "done: training uses the tuned GEMMs".to_string()),
        _ => (
            None,
            "done: use the tuned file in later trials (run/sweep --gemm-tuned, or export PRIMUS_HIPBLASLT_TUNING=1 PRIMUS_HIPBLASLT_TUNING_STAGE=3)"
                .to_string(),
        ),
    };
    (done, next, next_text)
}

fn result_state(r: &TuneResults, dumps: Option<&DumpSummary>) -> ResultState {
    let mut archs: Vec<String> = r.entries.iter().map(|e| e.arch.clone()).collect();
    archs.sort();
    archs.dedup();
    let covered = dumps.map(|d| {
        d.shapes
            .iter()
            .filter(|s| r.entries.iter().any(|e| same_gemm(&s.shape, e)))
            .count()
    });
    ResultState {
        path: r.path.clone(),
        git_version: r.git_version.clone(),
        entries: r.entries.len(),
        archs,
        covered,
        modified: r.path.metadata().and_then(|m| m.modified()).ok(),
    }
}

/// A dumped shape and a tuned entry describe the same GEMM: sizes, transposes, batch and the
/// input types (the output and compute type spellings differ between the two formats in some
/// hipBLASLt versions, so they are not compared).
pub fn same_gemm(s: &dump::GemmShape, e: &results::TunedGemm) -> bool {
    let (a, b) = (&s.gemm, &e.gemm);
    (a.m, a.n, a.k, a.batch_count) == (b.m, b.n, b.k, b.batch_count)
        && (&a.trans_a, &a.trans_b, &a.a_type, &a.b_type)
            == (&b.trans_a, &b.trans_b, &b.a_type, &b.b_type)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn line(m: u64) -> String {
        format!(
            "hipblaslt-bench --api_method c -m {m} -n 32 -k 16 --transA T --transB N --batch_count 1 --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r --compute_type f32_r\n"
        )
    }

    fn result(ms: &[u64], git: &str) -> String {
        let mut s = format!("Git Version: {git}\n");
        for m in ms {
            s.push_str("    transA,transB,batch_count,m,n,k,a_type,b_type,c_type,d_type,compute_type,hipblaslt-Gflops,us,solution_index,gcnArchName,CUs\n");
            s.push_str(&format!(
                "    T,N,1,{m},32,16,bf16_r,bf16_r,bf16_r,bf16_r,f32_r,1,1,7,gfx942:sramecc+:xnack-,304\n"
            ));
        }
        s
    }

    struct Case {
        dir: tempfile::TempDir,
        exp: PathBuf,
    }

    fn case() -> Case {
        let dir = tempfile::tempdir().unwrap();
        let exp = dir.path().join("experiments/m.yaml");
        Case { dir, exp }
    }

    impl Case {
        fn layout(&self) -> TuneLayout {
            TuneLayout::new(self.dir.path(), &self.exp, &Env::empty())
        }
        fn dump(&self, ms: &[u64]) {
            let l = self.layout();
            std::fs::create_dir_all(&l.shapes_dir).unwrap();
            let text: String = ms.iter().map(|&m| line(m)).collect();
            std::fs::write(l.dump_file(0), text).unwrap();
        }
        fn results(&self, ms: &[u64], git: &str) {
            let l = self.layout();
            std::fs::create_dir_all(l.result_file.parent().unwrap()).unwrap();
            std::fs::write(&l.result_file, result(ms, git)).unwrap();
        }
        fn status(&self, env: &Env, comparison: Option<Comparison>) -> GemmStatus {
            self.status_with(env, comparison, None, "megatron")
        }
        fn status_with(
            &self,
            env: &Env,
            comparison: Option<Comparison>,
            installed: Option<&HipblasltBuild>,
            framework: &str,
        ) -> GemmStatus {
            status(&StatusInput {
                primus_root: self.dir.path(),
                experiment: &self.exp,
                framework,
                env,
                installed,
                profiler_on: false,
                comparison,
            })
        }
    }

    fn has(st: &GemmStatus, level: Level, text: &str) -> bool {
        st.notes
            .iter()
            .any(|n| n.level == level && n.text.contains(text))
    }

    fn cmp() -> Comparison {
        Comparison {
            baseline_trial: 1,
            tuned_trial: 2,
            baseline_ms: 110.0,
            tuned_ms: 100.0,
            change: -0.09,
            change_ci: 0.01,
        }
    }

    #[test]
    fn the_stages_advance_with_the_files() {
        let c = case();
        let env = Env::empty();
        let st = c.status(&env, None);
        assert_eq!((st.done, st.next), (0, Some(1)));
        assert_eq!(st.layout.model_tag, "m");

        c.dump(&[64, 64, 128]);
        let st = c.status(&env, None);
        assert_eq!((st.done, st.next), (1, Some(2)));
        let d = st.dumps.as_ref().unwrap();
        assert_eq!((d.files, d.gemm_lines, d.unique_shapes), (1, 3, 2));
        assert!(st.next_text.contains("2 dumped shapes"));

        c.results(&[64, 128], "abc");
        let st = c.status(&env, None);
        assert_eq!((st.done, st.next), (2, Some(3)));
        assert_eq!(st.results.as_ref().unwrap().covered, Some(2));
        assert!(!has(&st, Level::Warning, "re-run stage 2"));

        let st = c.status(&env, Some(cmp()));
        assert_eq!((st.done, st.next), (3, None));
        assert!(!st.in_use);
        let env3 = Env::empty()
            .with("PRIMUS_HIPBLASLT_TUNING", "1")
            .with("PRIMUS_HIPBLASLT_TUNING_STAGE", "3");
        let st = c.status(&env3, Some(cmp()));
        assert!(st.in_use);
        assert!(st.next_text.starts_with("done: training uses"));
    }

    #[test]
    fn partial_or_stale_results_say_rerun_stage_2() {
        let c = case();
        c.results(&[64], "abc");
        c.dump(&[64, 128]);
        let st = c.status(&Env::empty(), None);
        assert_eq!(st.results.as_ref().unwrap().covered, Some(1));
        assert!(has(&st, Level::Warning, "tunes 1 of the 2 dumped shapes"));
        // The dump was written after the result file.
        let r = std::fs::File::options()
            .write(true)
            .open(c.layout().result_file)
            .unwrap();
        r.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1))
            .unwrap();
        let st = c.status(&Env::empty(), None);
        assert!(has(&st, Level::Warning, "dumped after the result file"));
    }

    #[test]
    fn a_broken_result_file_is_an_error_not_a_stage() {
        let c = case();
        c.dump(&[64]);
        let l = c.layout();
        std::fs::create_dir_all(l.result_file.parent().unwrap()).unwrap();
        std::fs::write(&l.result_file, "garbage\n").unwrap();
        let st = c.status(&Env::empty(), None);
        assert_eq!(st.done, 1);
        assert!(has(&st, Level::Error, "stage 2 result file unusable"));
    }

    #[test]
    fn environment_traps() {
        let c = case();
        c.results(&[64], "abc");
        let st = c.status(
            &Env::empty()
                .with("PRIMUS_HIPBLASLT_TUNING_STAGE", "5")
                .with("TE_HIPBLASLT_TUNING", "1")
                .with("HIPBLASLT_LOG_FILE", "/tmp/elsewhere.txt"),
            None,
        );
        assert!(has(&st, Level::Warning, "PRIMUS_HIPBLASLT_TUNING is not 1"));
        assert!(has(&st, Level::Error, "accepts 0, 1, 2 or 3"));
        assert!(has(&st, Level::Warning, "TE_HIPBLASLT_TUNING=1"));
        assert!(has(
            &st,
            Level::Warning,
            "HIPBLASLT_LOG_FILE=/tmp/elsewhere.txt"
        ));

        let st = c.status(
            &Env::empty()
                .with("PRIMUS_HIPBLASLT_TUNING", "1")
                .with("TE_HIPBLASLT_TUNING_RUN_COUNT", "0"),
            None,
        );
        assert!(has(
            &st,
            Level::Warning,
            "TE_HIPBLASLT_TUNING_RUN_COUNT=0 with stage 0"
        ));

        // Stage 3 with a missing file stops Primus.
        let missing = c.dir.path().join("none.txt");
        let st = c.status(
            &Env::empty()
                .with("PRIMUS_HIPBLASLT_TUNING", "1")
                .with("PRIMUS_HIPBLASLT_TUNING_STAGE", "3")
                .with("HIPBLASLT_TUNING_OVERRIDE_FILE", missing.to_str().unwrap()),
            None,
        );
        assert!(!st.in_use);
        assert!(has(&st, Level::Error, "Missing tuning result file"));
        assert!(has(&st, Level::Error, "does not exist"));
    }

    #[test]
    fn the_file_is_checked_against_the_installed_build() {
        let c = case();
        c.results(&[64], "abc");
        let same = HipblasltBuild {
            git_version: "abc".into(),
            version: None,
            arch: Some("gfx942:sramecc+:xnack-".into()),
            device: None,
        };
        let st = c.status_with(&Env::empty(), None, Some(&same), "megatron");
        assert!(has(&st, Level::Ok, "matches the installed hipBLASLt"));
        assert!(!st.notes.iter().any(|n| n.level == Level::Warning));
        let other = HipblasltBuild {
            git_version: "def".into(),
            arch: Some("gfx950:sramecc+:xnack-".into()),
            ..same
        };
        let st = c.status_with(&Env::empty(), None, Some(&other), "megatron");
        assert!(has(&st, Level::Warning, "written by hipBLASLt abc but def"));
        assert!(has(&st, Level::Warning, "1 tuned on gfx942"));
        let st = c.status_with(&Env::empty(), None, None, "megatron");
        assert!(has(&st, Level::Info, "version is unknown"));
    }

    #[test]
    fn primus_model_names_the_folder_and_torchtitan_is_flagged() {
        let c = case();
        let l = TuneLayout::new(
            c.dir.path(),
            &c.exp,
            &Env::empty().with("PRIMUS_MODEL", "tag"),
        );
        assert!(l.root.ends_with("output/tune_hipblaslt/tag"));
        assert_eq!(model_tag_of(Path::new("/a/b/x.y.yaml")), "x.y");
        let st = c.status_with(&Env::empty(), None, None, "torchtitan");
        assert!(!st.applicable);
        assert!(has(&st, Level::Info, "Megatron backend only"));
    }
}
