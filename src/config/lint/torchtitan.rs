//! Rules of the TorchTitan backend: Primus-Turbo switches are gated on the master flag.

use super::Ctx;
use crate::config::diag::{Diagnostic, Severity};

const SWITCHES: &[&str] = &[
    "primus_turbo.use_turbo_attention",
    "primus_turbo.use_turbo_async_tp",
    "primus_turbo.use_turbo_mx_linear",
    "primus_turbo.use_turbo_float8_linear",
    "primus_turbo.use_turbo_grouped_mm",
    "primus_turbo.enable_attention_float8",
];

pub(super) fn check(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    if !cx.on("primus_turbo.enable_primus_turbo") {
        for f in SWITCHES {
            if cx.on(f)
                && cx
                    .leaf(f)
                    .is_some_and(|l| l.origin.layer >= crate::config::tree::Layer::Experiment)
            {
                out.push(
                    cx.diag(
                        Severity::Warning,
                        "turbo-flag-without-master",
                        f,
                        format!("`{f}` is on but `primus_turbo.enable_primus_turbo` is off, so no Turbo patch applies"),
                    )
                    .hint("set `primus_turbo.enable_primus_turbo: true`"),
                );
            }
        }
    }
    if cx.on("parallelism.enable_async_tensor_parallel")
        && cx.int_or("parallelism.tensor_parallel_degree", 1) <= 1
    {
        out.push(
            cx.diag(
                Severity::Warning,
                "async-tp-without-tp",
                "parallelism.enable_async_tensor_parallel",
                "async tensor parallelism is on but `parallelism.tensor_parallel_degree` is 1, so it has nothing to overlap",
            ),
        );
    }
    if cx.on("training.enable_cpu_offload")
        && cx.int_or("parallelism.pipeline_parallel_degree", 1) > 1
    {
        out.push(cx.diag(
            Severity::Warning,
            "cpu-offload-with-pp",
            "training.enable_cpu_offload",
            "CPU offload in TorchTitan works with FSDP; with pipeline parallelism it is not supported",
        ));
    }
}
