//! The hostile corpus (issue 43): inputs built to cost time or memory out of proportion to
//! their size, generated here (the largest is 15 MiB) rather than committed. Each experiment is
//! the bundled Llama 3 example with the hostile part added, so it reaches every stage a real
//! one does (YAML, `extends`, resolution, lint).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One input and what a refusal of it must say.
pub struct Input {
    pub name: &'static str,
    pub path: PathBuf,
    /// Bytes a command reads from it (with every file it extends); 0 for what is not a file.
    pub bytes: u64,
    /// Words one of which a refusal must print (with the input's file name).
    pub causes: &'static [&'static str],
    pub kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An experiment: every config command reads it.
    Config,
    /// A log or GEMM dump: read line by line.
    Log,
    /// A FIFO, a device or a folder: every command that reads a file is given it.
    Special,
}

/// The bundled example extracted to `dir/ex`: the Primus root every experiment here uses.
pub fn root(dir: &Path) -> PathBuf {
    let root = dir.join("ex");
    if !root.join("experiments").is_dir() {
        primus_tune::util::bundled::extract(&root).expect("extract the bundled example");
    }
    root
}

/// The hostile experiments, written to `dir/ex/experiments`.
pub fn experiments(dir: &Path) -> Vec<Input> {
    let exps = root(dir).join("experiments");
    let base = std::fs::read_to_string(exps.join("llama3_8B-BF16-pretrain.yaml"))
        .expect("the bundled Llama 3 experiment");
    configs(&exps, &base)
}

/// The experiment `base` with `top` before it and `over` among its module overrides.
fn experiment(base: &str, top: &str, over: &str) -> String {
    let anchor = "      train_iters: 50\n";
    assert!(base.contains(anchor), "the example sets train_iters: 50");
    format!("{top}{}", base.replace(anchor, &format!("{anchor}{over}")))
}

fn config(
    exps: &Path,
    name: &'static str,
    text: String,
    extra_bytes: u64,
    causes: &'static [&'static str],
) -> Input {
    let path = exps.join(format!("{name}.yaml"));
    std::fs::write(&path, &text).expect("write an experiment");
    Input {
        name,
        path,
        bytes: text.len() as u64 + extra_bytes,
        causes,
        kind: Kind::Config,
    }
}

/// Just under the 16 MiB cap on inputs.
const BIG: usize = 15 << 20;

fn configs(exps: &Path, base: &str) -> Vec<Input> {
    let mut out = vec![diamond(exps, base)];
    let flow = format!("      zz_flow: [{}1]\n", "1, ".repeat(BIG / 3));
    let causes = &["500,000 YAML nodes"];
    out.push(config(
        exps,
        "flow_list_15mib",
        experiment(base, "", &flow),
        0,
        causes,
    ));
    // The largest list accepted: the cost of an input just under the cap on nodes.
    let flow = format!("      zz_flow: [{}1]\n", "1, ".repeat(495_000));
    out.push(config(
        exps,
        "flow_list_495k",
        experiment(base, "", &flow),
        0,
        &[],
    ));
    out.push(anchors(exps, base));
    // Nine aliases of nine aliases ... : 9^9 copies of "lol".
    let mut laughs = String::from("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let nine = vec![format!("*l{}", i - 1); 9].join(", ");
        writeln!(laughs, "l{i}: &l{i} [{nine}]").expect("string");
    }
    let causes = &["too many nodes"];
    out.push(config(
        exps,
        "billion_laughs",
        experiment(base, &laughs, ""),
        0,
        causes,
    ));
    // Anchors of aliases, each 250 brackets deeper: a tree deeper than any stack.
    let mut deep = format!("c0: &c0 {}1{}\n", "[".repeat(250), "]".repeat(250));
    for i in 1..12 {
        let (open, close) = ("[".repeat(250), "]".repeat(250));
        writeln!(deep, "c{i}: &c{i} {open}*c{}{close}", i - 1).expect("string");
    }
    let causes = &["deeper than 256"];
    out.push(config(
        exps,
        "alias_nesting",
        experiment(base, &deep, ""),
        0,
        causes,
    ));
    // 200 nested anchors around a 100,000-item list: each anchor kept a copy of all of it.
    let list = format!("[{}1]", "1, ".repeat(100_000));
    let nested = format!(
        "zz_nested: {}{list}{}\n",
        (0..200).map(|i| format!("&n{i} [")).collect::<String>(),
        "]".repeat(200)
    );
    out.push(config(
        exps,
        "nested_anchors",
        experiment(base, &nested, ""),
        0,
        &[],
    ));
    let flow = format!("zz_deep: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let causes = &["recursion limit", "deeper than"];
    out.push(config(
        exps,
        "nested_flow",
        experiment(base, &flow, ""),
        0,
        causes,
    ));
    let mut block = String::from("zz_deep:\n");
    for i in 0..1000 {
        writeln!(block, "{}k{i}:", " ".repeat(i + 1)).expect("string");
    }
    let causes = &["deeper than 256"];
    out.push(config(
        exps,
        "nested_block",
        experiment(base, &block, ""),
        0,
        causes,
    ));
    // Just inside the nesting limit: accepted, and no walk of it overflows the stack.
    let at_limit = format!("zz_deep: {}1{}\n", "[".repeat(250), "]".repeat(250));
    out.push(config(
        exps,
        "nested_250",
        experiment(base, &at_limit, ""),
        0,
        &[],
    ));
    let long = format!("      zz_long: {}\n", "x".repeat(BIG));
    out.push(config(
        exps,
        "long_line",
        experiment(base, "", &long),
        0,
        &[],
    ));
    let key = format!("      {}: 1\n", "k".repeat(BIG));
    let causes = &["simple key", "1024"];
    out.push(config(
        exps,
        "long_key",
        experiment(base, "", &key),
        0,
        causes,
    ));
    out.push(duplicates(exps, base));
    out.push(merge_keys(exps, base));
    out
}

/// 32 presets, each extending the next two: resolved naively, 2^32 reads.
fn diamond(exps: &Path, base: &str) -> Input {
    let mut extra = 0;
    for i in 0..32 {
        let next: Vec<String> = (i + 1..=i + 2)
            .filter(|j| *j < 32)
            .map(|j| format!("diamond_{j}.yaml"))
            .collect();
        let mut text = String::new();
        if !next.is_empty() {
            writeln!(text, "extends: [{}]", next.join(", ")).expect("string");
        }
        writeln!(
            text,
            "shared: {i}\nzz_diamond_{i}: {i}\nnest:\n  k{i}: {i}\n  shared: {i}"
        )
        .expect("string");
        extra += text.len() as u64;
        std::fs::write(exps.join(format!("diamond_{i}.yaml")), text).expect("write a preset");
    }
    let text = experiment(base, "extends: [diamond_0.yaml]\n", "");
    config(exps, "extends_diamond", text, extra, &[])
}

/// 300,000 anchored scalars and 90,000 aliases to them.
fn anchors(exps: &Path, base: &str) -> Input {
    let mut top = String::from("zz_anchors:\n");
    for i in 0..300_000 {
        writeln!(top, "  - &a{i} {i}").expect("string");
    }
    let aliases: Vec<String> = (0..300_000)
        .step_by(3)
        .take(90_000)
        .map(|i| format!("*a{i}"))
        .collect();
    writeln!(top, "zz_aliases: [{}]", aliases.join(", ")).expect("string");
    config(exps, "anchors_300k", experiment(base, &top, ""), 0, &[])
}

/// 75,000 keys, then the first of them 75,000 times more (each removal from an ordered map
/// shifted the 75,000 after it).
fn duplicates(exps: &Path, base: &str) -> Input {
    let mut over = String::new();
    for i in 0..75_000 {
        writeln!(over, "      zz_k{i}: {i}").expect("string");
    }
    for i in 0..75_000 {
        writeln!(over, "      zz_k0: {i}").expect("string");
    }
    config(
        exps,
        "duplicate_keys_150k",
        experiment(base, "", &over),
        0,
        &[],
    )
}

/// A merge (`<<`) of a 40,000-key mapping.
fn merge_keys(exps: &Path, base: &str) -> Input {
    let keys: Vec<String> = (0..40_000).map(|i| format!("m{i}: {i}")).collect();
    let top = format!(
        "zz_base: &b {{{}}}\nzz_merged: {{<<: *b, m1: x}}\n",
        keys.join(", ")
    );
    config(exps, "merge_keys_40k", experiment(base, &top, ""), 0, &[])
}

/// A FIFO, `/dev/zero` and a folder, the first and last in `dir/ex/experiments`.
pub fn specials(dir: &Path) -> Vec<Input> {
    let exps = root(dir).join("experiments");
    let fifo = exps.join("fifo.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let dir = exps.join("folder.yaml");
    std::fs::create_dir_all(&dir).expect("a folder");
    let special = |name, path, causes| Input {
        name,
        path,
        bytes: 0,
        causes,
        kind: Kind::Special,
    };
    vec![
        special("fifo", fifo, &["FIFO"]),
        special(
            "dev_zero",
            PathBuf::from("/dev/zero"),
            &["character device"],
        ),
        special(
            "folder",
            dir,
            &["a directory", "no experiment", "no shape dump"],
        ),
    ]
}

/// 100,000 Megatron iteration lines, and one 15 MiB line.
pub fn logs(dir: &Path) -> Vec<Input> {
    let mut log = String::new();
    for i in 1..=100_000 {
        writeln!(
            log,
            " [2026-11-29 22:59:27.865632] iteration {i:>8}/  100000 | consumed samples: {:>12} | \
             elapsed time per iteration (ms): 100.0 | global batch size:    16 |",
            16 * i
        )
        .expect("string");
    }
    let path = dir.join("iterations_100k.log");
    std::fs::write(&path, &log).expect("write a log");
    let long = dir.join("one_line_15mib.log");
    std::fs::write(&long, "y".repeat(BIG)).expect("write a log");
    vec![
        Input {
            name: "iterations_100k",
            path,
            bytes: log.len() as u64,
            causes: &[],
            kind: Kind::Log,
        },
        Input {
            name: "one_line_15mib",
            path: long,
            bytes: BIG as u64,
            causes: &[],
            kind: Kind::Log,
        },
    ]
}
