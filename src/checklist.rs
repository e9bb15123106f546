//! The tuning guide's quick checklist, evaluated against a resolved experiment, the launch
//! environment and the files on disk. Advice here is a rule from the guide, labelled as such;
//! nothing is a measurement until trials exist.

use crate::config::catalog::{Backend, Catalog, Step};
use crate::config::diag::{Diagnostic, Severity};
use crate::config::env::Env;
use crate::config::megatron_defaults::unset;
use crate::config::resolve::{Experiment, Module};
use crate::domain::advice::{self as rule, Ack, Target};
use crate::domain::value::Value;
use crate::megatron::World;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Done,
    NeedsAttention,
    NotApplicable,
    NotMeasured,
    /// Its to-dos are all acknowledged: the user decided against them, with reasons.
    Acknowledged,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Done => "done",
            Status::NeedsAttention => "needs attention",
            Status::NotApplicable => "not applicable",
            Status::NotMeasured => "not measured",
            Status::Acknowledged => "acknowledged",
        }
    }
}

/// One observation behind a step's status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// `ok` (in place), `todo` (worth doing; from the guide's rules), `info`, `acknowledged`
    /// (a to-do the user decided against, with the reason).
    pub kind: FindingKind,
    pub text: String,
    /// The rule a to-do follows ([`crate::domain::advice`]): what `recommend --ack` names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingKind {
    Ok,
    Todo,
    Info,
    Acknowledged,
}

/// A flag as the step shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlagState {
    pub name: String,
    pub value: serde_json::Value,
    pub default: serde_json::Value,
    /// `file:line via ...`, or `default` when no file sets it (for people).
    #[serde(skip)]
    pub source: String,
    /// Where the value came from (None: the default), written as the `source` object.
    #[serde(
        rename = "source",
        serialize_with = "crate::config::source::serialize_origin"
    )]
    pub origin: Option<crate::config::Origin>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    pub step: Step,
    pub title: &'static str,
    pub status: Status,
    pub findings: Vec<Finding>,
    pub flags: Vec<FlagState>,
    /// What the user can do next (commands).
    pub actions: Vec<String>,
    /// Lint errors and warnings on this step's flags.
    pub problems: Vec<Diagnostic>,
}

impl StepReport {
    /// The first to-do that follows a rule (what acknowledging acts on), if any is open.
    pub fn open_todo(&self) -> Option<&Finding> {
        self.findings
            .iter()
            .find(|f| f.kind == FindingKind::Todo && f.rule.is_some())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checklist {
    pub experiment: PathBuf,
    pub module: String,
    pub framework: String,
    pub model: Option<String>,
    pub steps: Vec<StepReport>,
}

/// Evaluate the checklist for the experiment's main module, with the HipBLASLt tuning state
/// already read (its files, the environment, the stored stage-3 comparison).
/// What the checklist knows beyond the experiment and its environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Known<'a> {
    /// The experiment's acknowledged rules: their to-dos show as acknowledged.
    pub acks: &'a [Ack],
    /// The world size lint checks against (None: unknown).
    pub world: Option<&'a World>,
    /// What the job runs on: Primus-on-AMD to-dos do not apply elsewhere.
    pub target: Target,
    /// The peak of a trial that ran the config as the checklist shows it, on GPUs.
    pub memory: Option<&'a MeasuredMemory>,
}

/// A trial of the workspace that ran the experiment exactly as the checklist resolves it, with
/// a profile that runs the real job (a proxy's peak is its stand-in's, not the config's).
#[derive(Debug, Clone, PartialEq)]
pub struct MeasuredMemory {
    pub trial: i64,
    pub profile: String,
    /// It ran out of GPU memory.
    pub oom: bool,
    /// Its peak, GiB, and what measured it.
    pub peak_gib: Option<f64>,
    pub kind: Option<crate::domain::trial::MemorySource>,
    /// The memory of the GPUs it ran on, GiB (their telemetry; None when not sampled).
    pub capacity_gib: Option<f64>,
    /// The world it launched at, when recorded (a peak per GPU holds for its world: the
    /// distributed optimizer shards more over more ranks).
    pub world: Option<u64>,
}

impl MeasuredMemory {
    /// ` on N GPU(s)` when its world is known, else nothing.
    fn gpus_text(&self) -> String {
        self.world
            .map_or(String::new(), |w| format!(" on {}", gpus(w)))
    }
}

/// `1 GPU`, `8 GPUs`.
fn gpus(n: u64) -> String {
    format!("{n} GPU{}", if n == 1 { "" } else { "s" })
}

pub fn evaluate(
    exp: &Experiment,
    env: &Env,
    catalog: &Catalog,
    diags: &[Diagnostic],
    gemm: &crate::gemm::status::GemmStatus,
    known: &Known,
) -> Checklist {
    let m = exp.main_module();
    let backend = Backend::from_framework(&m.framework);
    let cx = Cx {
        exp,
        m,
        params: crate::megatron::Params::from_values(&m.values()),
        env,
        world: known.world,
        memory: known.memory,
    };
    let steps = Step::CHECKLIST
        .iter()
        .map(|&step| {
            let (status_hint, findings, actions) = match step {
                Step::Gemms => cx.gemms(gemm),
                Step::Kernels => cx.kernels(),
                Step::Precision => cx.precision(),
                Step::Memory => cx.memory(),
                Step::Comm => cx.comm(),
                Step::Moe => cx.moe(),
                Step::Run => (None, Vec::new(), Vec::new()),
            };
            let (findings, excluded) = not_for_target(findings, &known.target);
            let findings = acknowledge(findings, known.acks);
            let open = findings.iter().any(|f| f.kind == FindingKind::Todo);
            let acked = findings.iter().any(|f| f.kind == FindingKind::Acknowledged);
            // What the step's next commands do was decided against, or is not for this job.
            let actions = if (acked || excluded) && !open {
                Vec::new()
            } else {
                actions
            };
            let flags: Vec<FlagState> = catalog
                .flags_for(backend)
                .filter(|f| f.step == step && f.removed.is_none())
                .filter_map(|f| {
                    let leaf = m.get(&f.name);
                    // No file sets it: Megatron's own default, or nothing passed on at all.
                    let value = match leaf {
                        Some(l) => l.value.to_json(),
                        None => unset(m, &f.name).value()?.to_json(),
                    };
                    if leaf.is_none() && value.is_null() {
                        return None;
                    }
                    Some(FlagState {
                        name: f.name.clone(),
                        value,
                        default: f.default.clone(),
                        source: leaf.map_or("Megatron-LM default".into(), |l| l.origin.describe()),
                        origin: leaf.map(|l| l.origin.clone()),
                    })
                })
                .collect();
            let problems: Vec<Diagnostic> = diags
                .iter()
                .filter(|d| d.severity != Severity::Info)
                .filter(|d| {
                    d.flag.as_deref().is_some_and(|f| {
                        catalog
                            .flag(f)
                            .or_else(|| catalog.env_var(f))
                            .is_some_and(|c| c.step == step)
                    })
                })
                .cloned()
                .collect();
            let status = match status_hint {
                Some(s @ (Status::NotApplicable | Status::NotMeasured)) if problems.is_empty() => s,
                _ if !problems.is_empty() => Status::NeedsAttention,
                _ if open => Status::NeedsAttention,
                _ if acked && status_hint.is_none() => Status::Acknowledged,
                _ if excluded && status_hint.is_none() => Status::NotApplicable,
                Some(s) => s,
                None => Status::Done,
            };
            StepReport {
                step,
                title: step.title(),
                status,
                findings,
                flags,
                actions,
                problems,
            }
        })
        .collect();
    Checklist {
        experiment: exp.path.clone(),
        module: m.name.clone(),
        framework: m.framework.clone(),
        model: m.value("model").map(|v| match v {
            Value::Map(map) => map.get("name").map(|n| n.to_string()).unwrap_or_default(),
            other => other.to_string(),
        }),
        steps,
    }
}

type StepEval = (Option<Status>, Vec<Finding>, Vec<String>);

/// To-dos of Primus-on-AMD rules become information when the job runs elsewhere (upstream
/// Megatron-LM, an NVIDIA GPU); true when one did.
fn not_for_target(findings: Vec<Finding>, target: &Target) -> (Vec<Finding>, bool) {
    let Some(why) = target.excludes_primus_amd_briefly() else {
        return (findings, false);
    };
    let mut excluded = false;
    let out = findings
        .into_iter()
        .map(|f| match f.rule {
            Some(r) if f.kind == FindingKind::Todo && rule::is_primus_amd(r) => {
                excluded = true;
                Finding {
                    kind: FindingKind::Info,
                    text: format!("does not apply ({why}): {}", f.text),
                    rule: f.rule,
                }
            }
            _ => f,
        })
        .collect();
    (out, excluded)
}

/// To-dos whose rule the user acknowledged become `acknowledged`, with the reason.
fn acknowledge(findings: Vec<Finding>, acks: &[Ack]) -> Vec<Finding> {
    findings
        .into_iter()
        .map(
            |f| match (f.kind, f.rule.and_then(|r| rule::acked(acks, r))) {
                (FindingKind::Todo, Some(a)) => Finding {
                    kind: FindingKind::Acknowledged,
                    // Where it is decided, by file name: a step's line has little room.
                    text: format!(
                        "{} — acknowledged: {} ({})",
                        f.text,
                        a.reason,
                        std::path::Path::new(&a.from)
                            .file_name()
                            .map_or(a.from.as_str(), |n| n.to_str().unwrap_or_default())
                    ),
                    rule: f.rule,
                },
                _ => f,
            },
        )
        .collect()
}

struct Cx<'a> {
    exp: &'a Experiment,
    m: &'a Module,
    /// Megatron's sizes, as the one typed reading of them (layout, batch, experts).
    params: crate::megatron::Params,
    env: &'a Env,
    world: Option<&'a World>,
    memory: Option<&'a MeasuredMemory>,
}

fn ok(t: impl Into<String>) -> Finding {
    Finding {
        kind: FindingKind::Ok,
        text: t.into(),
        rule: None,
    }
}
/// A to-do that follows `rule`.
fn todo(rule: &'static str, t: impl Into<String>) -> Finding {
    Finding {
        kind: FindingKind::Todo,
        text: t.into(),
        rule: Some(rule),
    }
}
fn info(t: impl Into<String>) -> Finding {
    Finding {
        kind: FindingKind::Info,
        text: t.into(),
        rule: None,
    }
}

impl Cx<'_> {
    fn on(&self, k: &str) -> bool {
        self.m.value(k).is_some_and(Value::truthy)
    }

    fn int(&self, k: &str, default: i64) -> i64 {
        self.m.value(k).and_then(Value::as_i64).unwrap_or(default)
    }

    fn megatron(&self) -> bool {
        self.m.is_megatron()
    }

    fn is_moe(&self) -> bool {
        if self.megatron() {
            self.params.moe.as_ref().is_some_and(|m| m.experts > 1)
        } else {
            self.int("parallelism.expert_parallel_degree", 1) > 1
                || self.on("primus_turbo.use_turbo_grouped_mm")
        }
    }

    /// Step 1 from [`crate::gemm::status`]: the stage files on disk and the environment's
    /// traps. The next stage is offered as a `gemm-tune` command (and the export it stands for).
    fn gemms(&self, st: &crate::gemm::status::GemmStatus) -> StepEval {
        use crate::gemm::status::Level;
        if !st.applicable {
            return (
                Some(Status::NotApplicable),
                vec![info(
                    "Primus' HipBLASLt tuning hook runs for the Megatron backend only; for TorchTitan use offline_tune_gemm.py by hand",
                )],
                Vec::new(),
            );
        }
        let rel = |p: &std::path::Path| {
            p.strip_prefix(&self.exp.primus_root)
                .unwrap_or(p)
                .display()
                .to_string()
        };
        let mut f = Vec::new();
        let mut actions = Vec::new();
        if let Some(d) = st.dumps.as_ref().filter(|d| d.gemm_lines > 0) {
            f.push(ok(format!(
                "stage 1 done: {} unique shapes in {}",
                d.unique_shapes,
                rel(&st.layout.shapes_dir)
            )));
        }
        if let Some(r) = st.results.as_ref().filter(|r| r.entries > 0) {
            f.push(ok(format!(
                "stage 2 done: {} tuned GEMMs in {}",
                r.entries,
                rel(&r.path)
            )));
        }
        if st.in_use {
            let file = st.override_file.as_ref().unwrap_or(&st.layout.result_file);
            f.push(ok(format!(
                "training uses the tuned GEMMs in {}",
                rel(file)
            )));
        } else if let Some(n) = st.next {
            f.push(todo(rule::HIPBLASLT_TUNING, match n {
                1 => "GEMMs are not tuned: run stage 1 (a short run that dumps GEMM shapes), then 2 and 3".to_string(),
                2 => "tune the dumped shapes offline: stage 2 (often 10–30 minutes)".to_string(),
                _ => "train with the tuned file: stage 3 (compare it against the untuned baseline)".to_string(),
            }));
            actions.push(format!(
                "primus-tune gemm-tune stage {n} {}",
                self.typed_path()
            ));
            actions.push(format!(
                "or by hand: export PRIMUS_HIPBLASLT_TUNING=1 PRIMUS_HIPBLASLT_TUNING_STAGE={n}"
            ));
        }
        for n in &st.notes {
            match n.level {
                Level::Warning | Level::Error => {
                    f.push(todo(rule::HIPBLASLT_TUNING, n.text.clone()))
                }
                Level::Ok | Level::Info => {}
            }
        }
        let status = st.in_use.then_some(Status::Done);
        (status, f, actions)
    }

    /// The experiment as the user would type it in a command: relative to the current folder
    /// when below it, quoted for the shell.
    fn typed_path(&self) -> String {
        let cwd = std::env::current_dir().unwrap_or_default();
        let shown = self.exp.path.strip_prefix(&cwd).unwrap_or(&self.exp.path);
        crate::util::shell::quote(&shown.to_string_lossy())
    }

    fn kernels(&self) -> StepEval {
        let mut f = Vec::new();
        let mut actions = Vec::new();
        if self.megatron() {
            if !self.on("enable_primus_turbo") {
                f.push(todo(
                    rule::PRIMUS_TURBO,
                    "Primus-Turbo is off: install primus_turbo and set enable_primus_turbo: true",
                ));
                actions.push(format!(
                    "primus-tune set {} enable_primus_turbo=true --write",
                    self.typed_path()
                ));
                return (None, f, actions);
            }
            f.push(ok("Primus-Turbo is on (enable_primus_turbo)"));
            let on: Vec<&str> = [
                "use_turbo_attention",
                "use_turbo_gemm",
                "use_turbo_grouped_gemm",
                "use_turbo_rms_norm",
            ]
            .into_iter()
            .filter(|k| self.on(k))
            .collect();
            if !on.is_empty() {
                f.push(ok(format!("Turbo kernels on: {}", on.join(", "))));
            }
            if !self.on("use_turbo_attention") {
                f.push(todo(rule::TURBO_ATTENTION, "rule (Primus performance-tuning guide §2): turn on use_turbo_attention for the optimized attention kernels"));
            }
            if self.is_moe() && !self.on("use_turbo_grouped_gemm") {
                f.push(todo(rule::TURBO_GROUPED_GEMM,
                    "rule (Primus performance-tuning guide §2): MoE model — turn on use_turbo_grouped_gemm",
                ));
            }
        } else {
            if !self.on("primus_turbo.enable_primus_turbo") {
                f.push(todo(
                    rule::PRIMUS_TURBO,
                    "Primus-Turbo is off: set primus_turbo.enable_primus_turbo: true",
                ));
                return (None, f, actions);
            }
            f.push(ok("Primus-Turbo is on (primus_turbo.enable_primus_turbo)"));
            if !self.on("primus_turbo.use_turbo_attention") {
                f.push(todo(rule::TURBO_ATTENTION,
                    "rule (Primus performance-tuning guide §2): turn on primus_turbo.use_turbo_attention",
                ));
            }
        }
        (None, f, actions)
    }

    fn precision(&self) -> StepEval {
        let mut f = Vec::new();
        if self.megatron() {
            let fp8 = self.m.value("fp8").filter(|v| !v.is_null());
            let fp4 = self.m.value("fp4").filter(|v| !v.is_null());
            match (fp8, fp4) {
                (Some(v), _) => f.push(ok(format!(
                    "FP8 ({v}, recipe {}) — keep it only with recipe testing (Primus performance-tuning guide §3)",
                    self.m
                        .value("fp8_recipe")
                        .map_or("delayed".into(), |r| r.to_string())
                ))),
                (None, Some(v)) => f.push(ok(format!(
                    "FP4 ({v}, recipe {}) — experimental; test the recipe (Primus performance-tuning guide §3)",
                    self.m
                        .value("fp4_recipe")
                        .map_or("?".into(), |r| r.to_string())
                ))),
                _ if self.on("bf16") => f.push(ok("BF16 (the guide's default)")),
                _ => f.push(todo(rule::MIXED_PRECISION,
                    "neither bf16 nor FP8/FP4 is on: training runs in FP32",
                )),
            }
            if !self.on("cross_entropy_loss_fusion") {
                f.push(info("rule (Primus performance-tuning guide §3): cross_entropy_loss_fusion: true with cross_entropy_fusion_impl: te uses TE's fused cross entropy"));
            }
        } else {
            let p = self
                .m
                .value("training.mixed_precision_param")
                .map_or("bfloat16".into(), |v| v.to_string());
            f.push(ok(format!("parameters in {p}")));
            if self.on("primus_turbo.use_turbo_float8_linear") {
                f.push(info(
                    "Turbo FP8 linears are on — validate with recipe testing",
                ));
            }
        }
        (None, f, Vec::new())
    }

    /// The data-parallel size at the known world (world / (TP × PP × CP)); None when the world
    /// is unknown.
    fn data_parallel(&self) -> Option<i64> {
        let world = self.world.map(|w| w.gpus as i64)?;
        let mp = self.params.parallelism.model_size() as i64;
        Some((world / mp).max(1))
    }

    /// A finding about data parallelism: a to-do where ranks share the data, only a note at
    /// DP 1, where it does nothing (`what` says what it would do).
    fn for_dp(&self, id: &'static str, flag: &str, todo_text: &str, what: &str) -> Finding {
        match self.data_parallel() {
            Some(1) => info(format!(
                "{flag} is off: it {what} across data-parallel ranks, and at DP 1 on {} there \
                 is none (it matters once the world has more)",
                gpus(self.world.map_or(1, |w| w.gpus))
            )),
            _ => todo(id, todo_text),
        }
    }

    fn memory(&self) -> StepEval {
        let mut f = Vec::new();
        if self.megatron() {
            match self
                .m
                .value("recompute_granularity")
                .and_then(Value::as_str)
            {
                Some(g) => f.push(ok(format!("recompute: {g}"))),
                None => f.push(info("no activation recomputation (fastest while it fits)")),
            }
            if self.on("use_distributed_optimizer") {
                f.push(ok("distributed optimizer shards optimizer state"));
            } else {
                f.push(self.for_dp(
                    rule::DISTRIBUTED_OPTIMIZER,
                    "use_distributed_optimizer",
                    "rule (Primus performance-tuning guide §6): use_distributed_optimizer: true shards optimizer state across DP ranks",
                    "shards optimizer state",
                ));
            }
            if self.on("optimizer_cpu_offload") {
                f.push(ok("optimizer state offloaded to CPU"));
            }
            let batch = self.params.batch;
            let mbs = batch.micro.map_or(1, |m| m as i64);
            let gbs = batch.global.map_or(mbs, |g| g as i64);
            match self.world.map(|w| w.gpus as i64) {
                None => f.push(info(format!(
                    "micro batch {mbs}, global batch {gbs}; the world size is unknown (--gpus, GPUS_PER_NODE), so its data-parallel split is not checked"
                ))),
                Some(world) => {
                    let mp = self.params.parallelism.model_size() as i64;
                    let dp = (world / mp).max(1);
                    let on = gpus(world as u64);
                    if gbs % (mbs * dp) == 0 {
                        f.push(info(format!(
                            "micro batch {mbs}, global batch {gbs}: {} accumulation steps on {on} (DP {dp})",
                            gbs / (mbs * dp)
                        )));
                    } else {
                        f.push(info(format!("global batch {gbs} is not a multiple of micro batch × DP ({mbs} × {dp}) on {on}")));
                    }
                }
            }
        } else {
            let mode = self
                .m
                .value("activation_checkpoint.mode")
                .map_or("none".into(), |v| v.to_string());
            f.push(ok(format!("activation checkpointing: {mode}")));
        }
        match self.memory {
            Some(mm) if mm.oom => {
                f.push(todo(
                    rule::FIT_MEMORY,
                    format!(
                        "measured: trial {} ({}) ran out of GPU memory with these settings{}; \
                         the guide's order: recomputation, the distributed optimizer, CPU \
                         offload, a smaller micro batch with more accumulation, before more GPUs",
                        mm.trial,
                        mm.profile,
                        mm.gpus_text()
                    ),
                ));
                (None, f, Vec::new())
            }
            Some(mm) => {
                let share = match (mm.peak_gib, mm.capacity_gib) {
                    (Some(p), Some(c)) if c > 0.0 => Some(p / c),
                    _ => None,
                };
                let peak = mm.peak_gib.map_or("its peak was not reported".into(), |g| {
                    format!(
                        "peak {g:.1} GiB{}{}",
                        match (share, mm.capacity_gib) {
                            (Some(s), Some(c)) => format!(" of {c:.1} GiB ({:.0} %)", s * 100.0),
                            _ => String::new(),
                        },
                        mm.kind
                            .map_or(String::new(), |k| format!(" ({})", k.label()))
                    )
                });
                f.push(ok(format!(
                    "measured: it fits: trial {} ran these settings{} with {}, {peak}",
                    mm.trial,
                    mm.gpus_text(),
                    mm.profile
                )));
                // Recomputation trades time for memory: with half the GPU free it may cost
                // time for nothing.
                let recomputes = if self.megatron() {
                    self.m
                        .value("recompute_granularity")
                        .and_then(Value::as_str)
                        .is_some()
                } else {
                    self.m
                        .value("activation_checkpoint.mode")
                        .and_then(Value::as_str)
                        .is_some_and(|m| m != "none")
                };
                if recomputes && share.is_some_and(|s| s < 0.5) {
                    f.push(info(
                        "recomputation is on with half the GPU's memory or more free: less of it \
                         (or a larger micro batch) may be faster; the memory-fit space measures \
                         which (recomputation adds work, the guide §4)",
                    ));
                }
                (None, f, Vec::new())
            }
            None => {
                f.push(info(
                    "peak memory is not measured yet: run a short trial to see the headroom",
                ));
                (Some(Status::NotMeasured), f, Vec::new())
            }
        }
    }

    fn comm(&self) -> StepEval {
        let mut f = Vec::new();
        if self.megatron() {
            for (k, krule, what) in [
                (
                    "overlap_grad_reduce",
                    rule::OVERLAP_GRAD_REDUCE,
                    "overlaps the gradient reduce-scatter",
                ),
                (
                    "overlap_param_gather",
                    rule::OVERLAP_PARAM_GATHER,
                    "overlaps the parameter all-gather",
                ),
            ] {
                if self.on(k) {
                    f.push(ok(format!("{k} is on")));
                } else {
                    f.push(self.for_dp(
                        krule,
                        k,
                        &format!("rule (Primus performance-tuning guide §5): turn on {k}"),
                        what,
                    ));
                }
            }
            let (tp, pp) = (self.params.parallelism.tp, self.params.parallelism.pp);
            if tp > 1 || pp > 1 {
                match self.env.get("CUDA_DEVICE_MAX_CONNECTIONS") {
                    Some("1") => f.push(ok("CUDA_DEVICE_MAX_CONNECTIONS=1")),
                    _ => f.push(info("TP/PP overlap needs CUDA_DEVICE_MAX_CONNECTIONS=1 at launch (Primus' scripts set it)")),
                }
            }
            if pp > 1 && !self.on("overlap_p2p_comm") {
                f.push(todo(rule::OVERLAP_P2P,
                    "rule (Primus performance-tuning guide §5): pipeline parallel — turn on overlap_p2p_comm",
                ));
            }
            self.layout(&mut f);
        } else {
            let tp = self.int("parallelism.tensor_parallel_degree", 1);
            if tp > 1 && !self.on("parallelism.enable_async_tensor_parallel") {
                f.push(todo(rule::ASYNC_TP,
                    "rule (Primus performance-tuning guide §5): TP > 1 — turn on parallelism.enable_async_tensor_parallel",
                ));
            } else {
                f.push(ok(
                    "nothing to overlap beyond FSDP's defaults at this parallelism",
                ));
            }
            self.tp_within_node(tp.max(1) as u64, &mut f);
        }
        (None, f, self.layout_actions())
    }

    /// GPUs a node holds, and whether that was assumed ([`World::node`]).
    fn node(&self) -> (u64, bool) {
        self.world
            .map_or((crate::megatron::ASSUMED_GPUS_PER_NODE, true), World::node)
    }

    /// The parallel layout's findings: TP within a node, sequence parallelism with TP, the
    /// interleaved schedule when the 1F1B bubble is large, EP within a node.
    fn layout(&self, f: &mut Vec<Finding>) {
        let par = &self.params.parallelism;
        let node_text = self.node_text();
        let node = self.node().0;
        self.tp_within_node(par.tp, f);
        if par.tp > 1 && !self.on("sequence_parallel") {
            f.push(todo(
                rule::SEQUENCE_PARALLEL,
                format!(
                    "rule (Korthikanti et al. 2022; Megatron-LM docs): TP {} without \
                     sequence_parallel keeps the norm and dropout activations whole on every \
                     TP rank; sequence parallelism splits them for the same communication volume",
                    par.tp
                ),
            ));
        }
        self.bubble(f);
        if let Some(m) = &self.params.moe
            && par.ep > node
        {
            f.push(info(format!(
                "EP {} spans nodes ({node_text}): every MoE layer's all-to-alls cross the \
                 inter-node links (Megatron-LM MoE docs: EP within a node where the {} experts \
                 fit; the DeepEP dispatcher for cross-node EP)",
                par.ep, m.experts
            )));
        }
    }

    /// "8 GPUs a node", or "... assumed".
    fn node_text(&self) -> String {
        match self.node() {
            (node, true) => format!("{node} GPUs a node assumed"),
            (node, false) => format!("{node} GPUs a node"),
        }
    }

    /// TP within a node (either backend: TP all-reduces or all-gathers every layer).
    fn tp_within_node(&self, tp: u64, f: &mut Vec<Finding>) {
        let node_text = self.node_text();
        if tp > self.node().0 {
            f.push(todo(
                rule::TP_WITHIN_NODE,
                format!(
                    "rule (Megatron-LM docs, Narayanan et al. 2021 §3.3): TP {tp} spans nodes \
                     ({node_text}); TP all-reduces every layer, so keep it within a node and \
                     scale across nodes with PP or DP"
                ),
            ));
        } else if tp > 1 {
            f.push(ok(format!("TP {tp} within a node ({node_text})")));
        }
    }

    /// The 1F1B bubble, (p − 1)/(m · v) of the compute (Narayanan et al. 2021 §2.2): a to-do
    /// for the interleaved schedule when it is 10 % or more without interleaving.
    fn bubble(&self, f: &mut Vec<Finding>) {
        let par = &self.params.parallelism;
        if par.pp <= 1 {
            return;
        }
        let dp = self.data_parallel().map(|d| d as u64);
        let m = dp.and_then(|d| self.params.batch.accumulation_steps(d));
        let v = par.vpp.unwrap_or(1);
        let Some(m) = m else {
            f.push(info(format!(
                "PP {}: the pipeline bubble, (p − 1)/(m · v), needs the micro batches per step \
                 (the world, --gpus)",
                par.pp
            )));
            return;
        };
        let bubble = (par.pp - 1) as f64 / (m * v) as f64;
        let text = format!(
            "PP {}, {m} micro batches a step{}: the 1F1B bubble is {:.0} % of the compute \
             ((p − 1)/(m · v), Narayanan et al. 2021 §2.2)",
            par.pp,
            if v > 1 {
                format!(", {v} virtual stages")
            } else {
                String::new()
            },
            bubble * 100.0
        );
        if v == 1 && bubble >= 0.10 {
            f.push(todo(
                rule::INTERLEAVED_PIPELINE,
                format!(
                    "{text}; the interleaved schedule divides it by the virtual stages \
                     (num_virtual_stages_per_pipeline_rank)"
                ),
            ));
        } else {
            f.push(ok(text));
        }
    }

    /// The command that lists the layouts of this world, when the world is known.
    fn layout_actions(&self) -> Vec<String> {
        match self.world {
            Some(w) if w.gpus > 1 => vec![format!(
                "compare layouts: primus-tune layouts {} --gpus {}",
                self.typed_path(),
                w.gpus
            )],
            _ => Vec::new(),
        }
    }

    fn moe(&self) -> StepEval {
        if !self.is_moe() {
            return (
                Some(Status::NotApplicable),
                vec![info("dense model (no experts)")],
                Vec::new(),
            );
        }
        let mut f = Vec::new();
        let actions = Vec::new();
        if !self.megatron() {
            if self.on("primus_turbo.use_turbo_grouped_mm") {
                f.push(ok("Turbo grouped MM for experts"));
            } else {
                f.push(todo(rule::TURBO_GROUPED_GEMM,
                    "rule (Primus performance-tuning guide §2): turn on primus_turbo.use_turbo_grouped_mm",
                ));
            }
            return (None, f, actions);
        }
        let ep = self.int("expert_model_parallel_size", 1);
        for (k, why, krule) in [
            (
                "moe_permute_fusion",
                "fuses permutation and unpermutation",
                rule::PERMUTE_FUSION,
            ),
            (
                "moe_use_fused_router_with_aux_score",
                "fuses router and aux loss (Primus-Turbo)",
                rule::FUSED_ROUTER,
            ),
            (
                "use_turbo_deepep",
                "DeepEP token dispatcher",
                rule::TURBO_DEEPEP,
            ),
        ] {
            if self.on(k) {
                f.push(ok(format!("{k} is on")));
            } else {
                f.push(todo(
                    krule,
                    format!("rule (Primus performance-tuning guide §7): {k}: true — {why}"),
                ));
            }
        }
        if self.on("use_turbo_deepep") {
            let cu = self.int("turbo_deepep_num_cu", 32);
            let rec = if ep >= 16 { "32" } else { "64 or 80" };
            f.push(info(format!(
                "turbo_deepep_num_cu {cu} at EP{ep}; rule (patch notes): {rec}"
            )));
        }
        let stage = self.int("turbo_sync_free_moe_stage", 0);
        if stage == 0 {
            f.push(todo(rule::SYNC_FREE_MOE,
                "sync-free MoE is off: rule (Primus performance-tuning guide §7) — stage 2 on MI300X/MI325X, 1 on MI355X",
            ));
        } else {
            f.push(ok(format!("sync-free MoE stage {stage}")));
        }
        if !self.on("overlap_moe_expert_parallel_comm") {
            f.push(info("overlap_moe_expert_parallel_comm is off (needs EP > 1, no full recompute, no shared-expert overlap)"));
        }
        (None, f, actions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LoadOptions;
    use crate::config::overrides::Override;
    use std::path::Path;

    /// One step of the bundled MoE example's checklist with `--set`-style overrides.
    fn report(sets: &[(&str, Value)], known: &Known, step: Step) -> StepReport {
        report_of("moe_16B-BF16-pretrain.yaml", sets, known, step)
    }

    /// One step's report of a bundled example with `sets` as overrides.
    fn report_of(example: &str, sets: &[(&str, Value)], known: &Known, step: Step) -> StepReport {
        let opts = LoadOptions {
            overrides: sets
                .iter()
                .map(|(k, v)| Override::new(*k, v.clone()))
                .collect(),
            ..LoadOptions::default()
        };
        let exp = Experiment::load(
            &Path::new("presets/examples/experiments").join(example),
            &opts,
        )
        .unwrap();
        let env = Env::default();
        let gemm = crate::gemm::status::of_experiment(&exp, &env, None, None);
        evaluate(&exp, &env, Catalog::builtin(), &[], &gemm, known)
            .steps
            .into_iter()
            .find(|s| s.step == step)
            .unwrap()
    }

    /// The layout findings of the communication step, as (rule, text) of each to-do and the
    /// texts of the rest.
    fn layout_todos(sets: &[(&str, Value)], gpus: u64) -> (Vec<&'static str>, Vec<String>) {
        let world = World::flag(gpus).unwrap();
        let known = Known {
            world: Some(&world),
            ..Known::default()
        };
        let r = report(sets, &known, Step::Comm);
        let rules = r.findings.iter().filter_map(|f| f.rule).collect();
        (rules, r.findings.into_iter().map(|f| f.text).collect())
    }

    #[test]
    fn layout_findings_name_the_rule_and_its_source() {
        use Value::{Bool, Int};
        // TP 16 on 16 GPUs: beyond a node (8 assumed), and no sequence parallelism.
        let (rules, texts) = layout_todos(
            &[
                ("tensor_model_parallel_size", Int(16)),
                ("expert_model_parallel_size", Int(1)),
                ("sequence_parallel", Bool(false)),
            ],
            16,
        );
        assert!(rules.contains(&rule::TP_WITHIN_NODE), "{texts:?}");
        assert!(rules.contains(&rule::SEQUENCE_PARALLEL), "{texts:?}");
        assert!(texts.iter().any(|t| t.contains("8 GPUs a node assumed")));
        // TP 2 with sequence parallelism: both in place.
        let (rules, texts) = layout_todos(
            &[
                ("tensor_model_parallel_size", Int(2)),
                ("expert_model_parallel_size", Int(1)),
                ("sequence_parallel", Bool(true)),
            ],
            8,
        );
        assert!(
            !rules.contains(&rule::TP_WITHIN_NODE) && !rules.contains(&rule::SEQUENCE_PARALLEL)
        );
        assert!(
            texts
                .iter()
                .any(|t| t == "TP 2 within a node (8 GPUs a node assumed)")
        );
    }

    #[test]
    fn a_torchtitan_tp_beyond_a_node_is_a_to_do_and_layouts_is_the_next_command() {
        let comm_at = |tp: i64, gpus: u64| {
            let world = World::flag(gpus).unwrap();
            let known = Known {
                world: Some(&world),
                ..Known::default()
            };
            let tp = [("parallelism.tensor_parallel_degree", Value::Int(tp))];
            report_of(
                "llama3.1_8B-torchtitan-pretrain.yaml",
                &tp,
                &known,
                Step::Comm,
            )
        };
        let wide = comm_at(16, 16);
        assert!(
            wide.findings
                .iter()
                .any(|f| f.rule == Some(rule::TP_WITHIN_NODE)),
            "{:?}",
            wide.findings
        );
        assert!(
            wide.actions
                .iter()
                .any(|a| a.contains("primus-tune layouts"))
        );
        let narrow = comm_at(2, 8);
        assert!(
            narrow
                .findings
                .iter()
                .any(|f| f.text == "TP 2 within a node (8 GPUs a node assumed)")
        );
    }

    #[test]
    fn a_large_bubble_asks_for_the_interleaved_schedule() {
        use Value::Int;
        // 27 layers do not split; 28 do. PP 4 on 8 GPUs: DP 2.
        let base = [
            ("num_layers", Int(28)),
            ("pipeline_model_parallel_size", Int(4)),
            ("expert_model_parallel_size", Int(1)),
            ("micro_batch_size", Int(1)),
        ];
        let with = |gb: i64, vpp: Option<i64>| {
            let mut sets = base.to_vec();
            sets.push(("global_batch_size", Int(gb)));
            if let Some(v) = vpp {
                sets.push(("num_virtual_stages_per_pipeline_rank", Int(v)));
            }
            layout_todos(&sets, 8)
        };
        // 16 samples over DP 2: 8 micro batches, bubble 3/8.
        let (rules, texts) = with(16, None);
        assert!(rules.contains(&rule::INTERLEAVED_PIPELINE), "{texts:?}");
        assert!(
            texts.iter().any(|t| t.contains("bubble is 38 %")),
            "{texts:?}"
        );
        // 256 samples: 128 micro batches, bubble 2 %: nothing to do.
        let (rules, _) = with(256, None);
        assert!(!rules.contains(&rule::INTERLEAVED_PIPELINE));
        // Interleaved already: 3/(8 × 2).
        let (rules, texts) = with(16, Some(2));
        assert!(!rules.contains(&rule::INTERLEAVED_PIPELINE));
        assert!(
            texts
                .iter()
                .any(|t| t.contains("2 virtual stages") && t.contains("19 %"))
        );
    }

    fn comm(acks: &[Ack]) -> StepReport {
        let known = Known {
            acks,
            ..Known::default()
        };
        report(
            &[("overlap_param_gather", Value::Bool(false))],
            &known,
            Step::Comm,
        )
    }

    #[test]
    fn an_acknowledged_to_do_is_not_to_do() {
        let open = comm(&[]);
        assert_eq!(open.status, Status::NeedsAttention);
        let f = open
            .findings
            .iter()
            .find(|f| f.rule == Some(rule::OVERLAP_PARAM_GATHER))
            .unwrap();
        assert_eq!(f.kind, FindingKind::Todo);
        let ack = Ack {
            rule: rule::OVERLAP_PARAM_GATHER.into(),
            reason: "measured slower".into(),
            at: None,
            from: "primus-tune.toml:4:1".into(),
        };
        let done = comm(&[ack]);
        let f = done
            .findings
            .iter()
            .find(|f| f.rule == Some(rule::OVERLAP_PARAM_GATHER))
            .unwrap();
        assert_eq!(f.kind, FindingKind::Acknowledged);
        assert!(
            f.text
                .ends_with("acknowledged: measured slower (primus-tune.toml:4:1)"),
            "{}",
            f.text
        );
        assert_eq!(done.status, Status::Acknowledged, "{:?}", done.findings);
        assert!(done.actions.is_empty(), "{:?}", done.actions);
    }

    /// A measured trial makes the memory step done (with the share of the GPU) or a to-do
    /// when it ran out of memory; with half the GPU free, recomputation is questioned.
    #[test]
    fn the_memory_step_says_what_a_trial_of_the_config_measured() {
        use crate::domain::trial::MemorySource;
        let fits = MeasuredMemory {
            trial: 3,
            profile: "megatron".into(),
            oom: false,
            peak_gib: Some(47.9),
            kind: Some(MemorySource::Allocator),
            capacity_gib: Some(140.4),
            world: Some(1),
        };
        let texts = |r: &StepReport| {
            r.findings
                .iter()
                .map(|f| f.text.clone())
                .collect::<Vec<_>>()
                .join("\n")
        };
        let known = Known {
            memory: Some(&fits),
            ..Known::default()
        };
        let r = report(&[], &known, Step::Memory);
        assert_eq!(r.status, Status::Done);
        let t = texts(&r);
        assert!(
            t.contains("measured: it fits: trial 3 ran these settings on 1 GPU with megatron, peak 47.9 GiB of 140.4 GiB (34 %) (allocator reserved"),
            "{t}"
        );
        assert!(!t.contains("recomputation is on"), "none is on: {t}");
        let selective = [("recompute_granularity", Value::Str("selective".into()))];
        let t = texts(&report(&selective, &known, Step::Memory));
        assert!(
            t.contains("recomputation is on with half the GPU's memory or more free"),
            "{t}"
        );
        // without the GPU's memory there is no share, and no advice from it
        let unknown = MeasuredMemory {
            capacity_gib: None,
            ..fits.clone()
        };
        let known = Known {
            memory: Some(&unknown),
            ..Known::default()
        };
        let t = texts(&report(&selective, &known, Step::Memory));
        assert!(
            t.contains("peak 47.9 GiB (allocator") && !t.contains("recomputation is on"),
            "{t}"
        );
        let oom = MeasuredMemory {
            oom: true,
            peak_gib: None,
            kind: None,
            ..fits.clone()
        };
        let known = Known {
            memory: Some(&oom),
            ..Known::default()
        };
        let r = report(&[], &known, Step::Memory);
        assert_eq!(r.status, Status::NeedsAttention);
        assert_eq!(r.open_todo().and_then(|f| f.rule), Some(rule::FIT_MEMORY));
        assert_eq!(
            report(&[], &Known::default(), Step::Memory).status,
            Status::NotMeasured
        );
    }

    /// At DP 1 there is nothing to shard or overlap across data-parallel ranks: the
    /// distributed optimizer and the gradient/parameter overlaps are notes there, to-dos at
    /// DP 8 (and where the world is unknown), and "1 GPU" is singular.
    #[test]
    fn actions_name_the_experiment_never_a_placeholder() {
        let off = [("enable_primus_turbo", Value::Bool(false))];
        let actions = report(&off, &Known::default(), Step::Kernels).actions;
        assert_eq!(
            actions,
            [
                "primus-tune set presets/examples/experiments/moe_16B-BF16-pretrain.yaml enable_primus_turbo=true --write"
            ],
        );
    }

    #[test]
    fn data_parallel_advice_follows_the_world() {
        let off = [
            ("use_distributed_optimizer", Value::Bool(false)),
            ("overlap_grad_reduce", Value::Bool(false)),
            ("overlap_param_gather", Value::Bool(false)),
            ("expert_model_parallel_size", Value::Int(1)),
        ];
        let todos = |world: Option<&World>| {
            let known = Known {
                world,
                ..Known::default()
            };
            [Step::Memory, Step::Comm]
                .iter()
                .flat_map(|&st| report(&off, &known, st).findings)
                .filter_map(|f| f.rule)
                .collect::<Vec<_>>()
        };
        let one = World::flag(1).unwrap();
        let at_one = todos(Some(&one));
        for r in [
            rule::DISTRIBUTED_OPTIMIZER,
            rule::OVERLAP_GRAD_REDUCE,
            rule::OVERLAP_PARAM_GATHER,
        ] {
            assert!(!at_one.contains(&r), "{r} at DP 1: {at_one:?}");
            assert!(
                todos(Some(&World::flag(8).unwrap())).contains(&r),
                "{r} at DP 8"
            );
            assert!(todos(None).contains(&r), "{r} at an unknown world");
        }
        let known = Known {
            world: Some(&one),
            ..Known::default()
        };
        let text: Vec<String> = report(&off, &known, Step::Memory)
            .findings
            .iter()
            .map(|f| f.text.clone())
            .collect();
        let text = text.join("\n");
        assert!(
            text.contains("on 1 GPU (DP 1)") && !text.contains("1 GPUs"),
            "{text}"
        );
        assert!(text.contains("at DP 1 on 1 GPU there is none"), "{text}");
    }

    #[test]
    fn the_memory_step_uses_the_world_it_is_given_never_a_guess() {
        let memory = |world: Option<&World>| {
            let known = Known {
                world,
                ..Known::default()
            };
            report(&[], &known, Step::Memory)
                .findings
                .iter()
                .map(|f| f.text.clone())
                .collect::<Vec<_>>()
                .join("\n")
        };
        let unknown = memory(None);
        assert!(unknown.contains("world size is unknown"), "{unknown}");
        assert!(!unknown.contains("on 8 GPUs"), "{unknown}");
        let four = World::flag(4).unwrap();
        let known = memory(Some(&four));
        assert!(known.contains("on 4 GPUs"), "{known}");
    }

    #[test]
    fn primus_amd_to_dos_do_not_apply_on_nvidia_or_upstream_megatron() {
        use crate::domain::advice::Framework;
        let step = |target: Target, step: Step| {
            let known = Known {
                target,
                ..Known::default()
            };
            report(&[("enable_primus_turbo", Value::Bool(false))], &known, step)
        };
        let amd = Target {
            framework: Framework::Primus,
            vendor: Some("amd"),
        };
        assert_eq!(step(amd, Step::Kernels).status, Status::NeedsAttention);
        assert_eq!(step(amd, Step::Gemms).status, Status::NeedsAttention);
        for t in [
            Target {
                framework: Framework::Primus,
                vendor: Some("nvidia"),
            },
            Target {
                framework: Framework::UpstreamMegatron,
                vendor: Some("amd"),
            },
            Target {
                framework: Framework::UpstreamTorchtitan,
                vendor: Some("amd"),
            },
        ] {
            for s in [Step::Kernels, Step::Gemms] {
                let r = step(t, s);
                assert_eq!(
                    r.status,
                    Status::NotApplicable,
                    "{t:?} {s:?}: {:?}",
                    r.findings
                );
                assert!(r.actions.is_empty(), "{:?}", r.actions);
                assert!(
                    r.findings
                        .iter()
                        .any(|f| f.text.starts_with("does not apply")),
                    "{:?}",
                    r.findings
                );
            }
        }
    }
}
