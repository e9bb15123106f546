//! The rules, as tables, and the checker: every production file's resolved paths, macros
//! and calls against them.

use std::collections::BTreeMap;

use crate::tree::{Crate, File, ModPath, Named, Resolved};

/// The engine layers, bottom up; a layer may import the tiers below its own. `megatron` (the
/// typed view of Megatron's sizes) reads only `domain::value`; `config`'s lint reads it.
pub const TIERS: &[&[&str]] = &[
    &["util"],
    &["domain"],
    &["megatron"],
    &["config", "proxy"],
    &["telemetry", "store"],
    &["run"],
    &["gemm"],
    &["checklist", "tune"],
    // testkit: the fixtures tests and benchmarks share (the `testkit` feature).
    &["report", "testkit"],
    &["app"],
];

/// The frontends: the binary's root and the two user interfaces. `lib.rs` is the library's
/// facade, part of the core.
pub const FRONTENDS: &[&str] = &["cli", "tui", "main"];

/// What an engine layer may import, besides itself; `None` for a layer the table does not know.
pub fn allowed(layer: &str) -> Option<Vec<&'static str>> {
    let tier = TIERS.iter().position(|t| t.contains(&layer))?;
    let mut ok: Vec<&str> = TIERS[..tier]
        .iter()
        .flat_map(|t| t.iter().copied())
        .collect();
    // Side by side, not below one another.
    ok.retain(|m| !(layer == "telemetry" && *m == "store"));
    ok.retain(|m| !(layer == "store" && ["config", "megatron"].contains(m)));
    Some(ok)
}

/// The tiers inside `app/` (issue 44), bottom up: a module imports its own tier and those
/// below. `views` are read models on top; nothing below them names them. Every module of
/// `app/` must be listed (the longest matching prefix wins); the `app` facade itself
/// (`mod.rs`, only re-exports) is above them all.
pub const APP_TIERS: &[(&str, &[&str])] = &[
    ("leaves", &["app::events", "app::error", "app::engines"]),
    (
        "launch",
        &[
            "app::launch",
            "app::session",
            "app::defaults",
            "app::interrupted",
            "app::state",
        ],
    ),
    (
        "trial",
        &[
            "app::trial",
            "app::gemm_stage",
            "app::edit",
            "app::ack",
            "app::backups",
            "app::lint",
        ],
    ),
    ("study", &["app::sweep"]),
    ("views", &["app::views"]),
];

/// Printing the core may do, by file, each with why. The proxy workload writes its
/// Megatron-format training log to the writer `primus-tune proxy` hands it, and the trial
/// supervisor reports through its files: neither prints, so the list is empty today.
pub const MAY_PRINT: &[(&str, &str)] = &[];

/// Known exceptions and violations, `file: what` as the checker words them. Each entry must
/// still happen (the test fails on a stale one, so the list only shrinks) and nothing else may.
pub const KNOWN: &[(&str, &str)] = &[
    // The CLI launches the TUI (`primus-tune` on a terminal) and sizes `monitor` output like
    // it: the one documented frontend-to-frontend edge. Its home is main.rs's dispatch.
    ("cli/mod.rs", "cli imports crate::tui"),
    ("cli/monitor.rs", "cli imports crate::tui"),
];

const PRINT_MACROS: &[&str] = &["println", "print", "eprintln", "eprint", "dbg"];
const PRINT_CALLS: &[&[&str]] = &[&["std", "io", "stdout"], &["std", "io", "stderr"]];
const TERMINAL_CRATES: &[&str] = &["ratatui", "crossterm"];

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub file: String,
    pub what: String,
    pub line: usize,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "src/{}:{}: {}", self.file, self.line, self.what)
    }
}

/// A file's layer: its top-level module (`run` for `run/trial/mod.rs`), `lib` for the
/// library's root, `main` for the binary's.
pub fn layer(f: &File) -> String {
    match f.module.first() {
        Some(m) => m.clone(),
        None if f.bin => "main".into(),
        None => "lib".into(),
    }
}

fn module_layer(m: &ModPath) -> String {
    m.first().cloned().unwrap_or_else(|| "lib".into())
}

pub fn app_tier(m: &ModPath) -> Option<(usize, &'static str)> {
    let name = m.join("::");
    let mut best: Option<(usize, usize, &str)> = None;
    for (i, (tier, prefixes)) in APP_TIERS.iter().enumerate() {
        for p in *prefixes {
            let hit = name == *p || name.starts_with(&format!("{p}::"));
            if hit && best.is_none_or(|b| p.len() > b.1) {
                best = Some((i, p.len(), tier));
            }
        }
    }
    if name == "app" {
        return Some((APP_TIERS.len(), "facade"));
    }
    best.map(|(i, _, t)| (i, t))
}

fn starts_with(path: &[String], prefix: &[&str]) -> bool {
    path.len() >= prefix.len() && path.iter().zip(prefix).all(|(a, b)| a == b)
}

/// Every rule broken by the production code, one per (file, what), at its first line.
pub fn check(c: &Crate) -> Vec<Violation> {
    let mut out: BTreeMap<(String, String), usize> = BTreeMap::new();
    for f in c.files.iter().filter(|f| !f.test_only) {
        let l = layer(f);
        let core = !FRONTENDS.contains(&l.as_str());
        let engine = core && l != "lib";
        let ok = if engine {
            allowed(&l).or_else(|| {
                out.entry((f.rel.clone(), format!("layer `{l}` is not in the table")))
                    .or_insert(0);
                None
            })
        } else {
            None
        };
        let mut say = |what: String, line: usize| {
            let e = out.entry((f.rel.clone(), what)).or_insert(line);
            *e = (*e).min(line);
        };
        for u in c.uses(f) {
            match &u.what {
                Named::Path(Resolved::Crate(p)) => {
                    let m = c.module_of(p);
                    let to = module_layer(&m);
                    if core && (to == "cli" || to == "tui") {
                        say(format!("names crate::{to}"), u.line);
                    } else if let Some(ok) = &ok
                        && to != l
                        && !ok.contains(&to.as_str())
                    {
                        say(format!("{l} imports crate::{to}"), u.line);
                    }
                    if (l == "cli" && to == "tui") || (l == "tui" && to == "cli") {
                        say(format!("{l} imports crate::{to}"), u.line);
                    }
                    if l == "app" && to == "app" {
                        let from_m = &f.module;
                        let to_m = c.file_module_of(&m);
                        match (app_tier(from_m), app_tier(&to_m)) {
                            (Some((a, an)), Some((b, bn))) if b > a => say(
                                format!("app tier: {an} imports {bn} ({})", to_m.join("::")),
                                u.line,
                            ),
                            (None, _) => {
                                say(format!("{} is in no app tier", from_m.join("::")), u.line)
                            }
                            _ => {}
                        }
                    }
                }
                Named::Path(Resolved::Other(p)) => {
                    if l != "tui"
                        && let Some(t) = p.first().filter(|t| TERMINAL_CRATES.contains(&t.as_str()))
                    {
                        say(format!("uses {t}"), u.line);
                    }
                    if core
                        && !MAY_PRINT.iter().any(|(file, _)| *file == f.rel)
                        && PRINT_CALLS.iter().any(|call| starts_with(p, call))
                    {
                        say(format!("prints with {}", p[..3].join("::")), u.line);
                    }
                }
                Named::Macro(name) => {
                    if core
                        && !MAY_PRINT.iter().any(|(file, _)| *file == f.rel)
                        && PRINT_MACROS.contains(&name.as_str())
                    {
                        say(format!("prints with {name}!"), u.line);
                    }
                }
                Named::Str(_) => {}
            }
        }
    }
    out.into_iter()
        .map(|((file, what), line)| Violation { file, what, line })
        .collect()
}

/// The violations not in [`KNOWN`], and the entries of [`KNOWN`] that no longer happen.
pub fn against_known(found: &[Violation]) -> (Vec<&Violation>, Vec<(&'static str, &'static str)>) {
    let new = found
        .iter()
        .filter(|v| !KNOWN.iter().any(|(f, w)| *f == v.file && *w == v.what))
        .collect();
    let stale = KNOWN
        .iter()
        .filter(|(f, w)| !found.iter().any(|v| v.file == *f && v.what == *w))
        .copied()
        .collect();
    (new, stale)
}
