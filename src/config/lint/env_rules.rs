//! Environment rules: the HipBLASLt tuning switches and the overlap connection limit.

use super::{Ctx, LAUNCHER_ENV, loc};
use crate::config::diag::{Diagnostic, Severity};
use crate::config::resolve::Experiment;

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    hipblaslt(cx, out);
    if cx.is_megatron() {
        max_connections(cx, out);
    }
}

fn hipblaslt(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let env = cx.launch_env;
    let master = env.get("PRIMUS_HIPBLASLT_TUNING") == Some("1");
    let det = env.get("PRIMUS_DETERMINISTIC") == Some("1");
    let Some(stage) = env.get("PRIMUS_HIPBLASLT_TUNING_STAGE") else {
        return;
    };
    let var = "PRIMUS_HIPBLASLT_TUNING_STAGE";
    let d = |sev, code, msg: String| Diagnostic::new(sev, code, msg).flag(var);
    if !matches!(stage, "0" | "1" | "2" | "3") {
        out.push(
            d(
                Severity::Error,
                "hipblaslt-stage-invalid",
                format!("{var}={stage} is not a stage; the launcher hook exits with \"expected 0/1/2/3\""),
            )
            .hint("use 1 (dump shapes), 2 (offline tuning) or 3 (train with the tuned file)"),
        );
        return;
    }
    if stage != "0" && det {
        out.push(
            d(
                Severity::Warning,
                "hipblaslt-stage-deterministic",
                format!("{var}={stage} is ignored because PRIMUS_DETERMINISTIC=1 turns HipBLASLt tuning off"),
            )
            .hint("unset PRIMUS_DETERMINISTIC for tuning runs"),
        );
    } else if stage != "0" && !master {
        out.push(
            d(
                Severity::Warning,
                "hipblaslt-stage-without-master",
                format!("{var}={stage} is ignored: the launcher only honours the stage when PRIMUS_HIPBLASLT_TUNING=1, and otherwise forces TE tuning counts to 0"),
            )
            .hint("export PRIMUS_HIPBLASLT_TUNING=1 together with the stage"),
        );
    } else if stage == "3" && master && cx.is_megatron() {
        let file = match env
            .get("HIPBLASLT_TUNING_OVERRIDE_FILE")
            .filter(|s| !s.is_empty())
        {
            Some(f) => std::path::PathBuf::from(f),
            None => {
                let tag = env
                    .get("PRIMUS_MODEL")
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        cx.exp
                            .path
                            .file_stem()
                            .map(|s| s.to_string_lossy().into_owned())
                            .unwrap_or_default()
                    });
                cx.exp
                    .primus_root
                    .join("output/tune_hipblaslt")
                    .join(tag)
                    .join("gemm_tune/tune_hipblas_gemm_results.txt")
            }
        };
        if !file.is_file() {
            out.push(
                d(
                    Severity::Error,
                    "hipblaslt-stage3-missing-file",
                    format!("stage 3 trains with the tuned GEMM file, but {} does not exist (the launcher exits with \"Missing tuning result file\")", file.display()),
                )
                .hint("run stages 1 and 2 first, or point HIPBLASLT_TUNING_OVERRIDE_FILE at a result file"),
            );
        }
    }
}

fn max_connections(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let tp = cx.int_or("tensor_model_parallel_size", 1);
    let pp = cx.int_or("pipeline_model_parallel_size", 1);
    let cp = cx.int_or("context_parallel_size", 1);
    let overlap = cx.on("overlap_grad_reduce")
        || cx.on("overlap_param_gather")
        || cx.on("overlap_p2p_comm")
        || cx.on("tp_comm_overlap");
    if (tp <= 1 && pp <= 1 && cp <= 1) || !overlap || cx.on("use_torch_fsdp2") {
        return;
    }
    let var = "CUDA_DEVICE_MAX_CONNECTIONS";
    match cx.env.get(var) {
        Some("1") => {}
        Some(v) => out.push(
            Diagnostic::new(
                Severity::Warning,
                "cuda-max-connections",
                format!("{var}={v} with TP={tp}, PP={pp}, CP={cp} and communication overlap: compute and communication kernels can be scheduled out of order; overlap needs {var}=1"),
            )
            .flag(var)
            .hint(format!("export {var}=1")),
        ),
        None => out.push(
            Diagnostic::new(
                Severity::Info,
                "cuda-max-connections",
                format!("{var} is not set here; TP/PP overlap needs it to be 1 (Primus' launch scripts set it, a custom launcher must too)"),
            )
            .flag(var),
        ),
    }
}

/// Launcher-read variables in the experiment's `env:` section come too late to matter.
pub(super) fn check_env_section(exp: &Experiment, out: &mut Vec<Diagnostic>) {
    for (name, leaf) in exp.env_section() {
        if LAUNCHER_ENV.contains(&name.as_str()) {
            out.push(
                Diagnostic::new(
                    Severity::Warning,
                    "env-read-by-launcher",
                    format!("`env: {name}` is applied by Primus' Python runtime, after the launcher hooks have already read {name}; it has no effect there"),
                )
                .at(Some(loc(&leaf.origin)))
                .flag(&name)
                .hint(format!("export {name} in the shell (or the run profile) instead")),
            );
        }
    }
}
