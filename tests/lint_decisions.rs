//! Decisions about rules that CI sees: `recommend --ack` (any lint code or advice rule: one id
//! space) writes `primus-tune.toml` in the user's tree; that file and `# primus-tune:
//! ignore[...]` comments are honoured by `lint` in every format, by `checklist` and by
//! `recommend`, each with the reason.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::Value;
use std::path::PathBuf;

/// A copy of the bundled example whose dense experiment writes `sequence_parallel: 1` (as AMD's
/// Llama-3.1-70B FP8 example does): lint's `bool-written-as-int` warning.
struct Tree {
    dir: tempfile::TempDir,
    exp: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ex");
    primus_tune::util::bundled::extract(&root).unwrap();
    let exp = root.join("experiments/llama3_8B-BF16-pretrain.yaml");
    let text = std::fs::read_to_string(&exp).unwrap().replace(
        "      overlap_grad_reduce: true\n",
        "      overlap_grad_reduce: true\n      sequence_parallel: 1\n",
    );
    std::fs::write(&exp, text).unwrap();
    Tree { dir, exp }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Tree {
    /// `primus-tune CMD EXP ARGS...` with this tree's workspace and data folder.
    fn run(&self, cmd: &str, args: &[&str]) -> Out {
        let out = common::cli(&self.dir.path().join("data"))
            .arg(cmd)
            .arg(&self.exp)
            .args(["--gpus", "8", "--workspace"])
            .arg(self.dir.path().join("ws"))
            .args(args)
            .output()
            .unwrap();
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    fn json(&self, cmd: &str, args: &[&str]) -> Value {
        let out = self.run(cmd, args);
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}\n{}", out.stdout, out.stderr))
    }

    fn toml(&self) -> PathBuf {
        self.exp.with_file_name("primus-tune.toml")
    }

    fn edit(&self, from: &str, to: &str) {
        let text = std::fs::read_to_string(&self.exp).unwrap();
        assert!(text.contains(from), "{text}");
        std::fs::write(&self.exp, text.replace(from, to)).unwrap();
    }
}

const CODE: &str = "bool-written-as-int";

/// The checklist's lint findings with `code` (those it lists, and those it shows per step).
fn checklist_problems(v: &Value, code: &str) -> usize {
    let steps = v["steps"].as_array().unwrap().iter();
    let per_step = steps.flat_map(|s| s["problems"].as_array().cloned().unwrap_or_default());
    let listed = v["diagnostics"].as_array().cloned().unwrap_or_default();
    per_step.chain(listed).filter(|p| p["code"] == code).count()
}

/// `recommend --ack` of a lint code is recorded in `primus-tune.toml` beside the experiment,
/// and then `lint` (text, JSON, GitHub, SARIF) and `checklist` no longer report the finding:
/// each says it is ignored and why; `--unack` brings it back.
#[test]
fn an_acknowledged_lint_code_is_not_reported_in_any_format() {
    let t = tree();
    let out = t.run("lint", &["--strict"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stdout.contains("warning[bool-written-as-int]"),
        "{}",
        out.stdout
    );
    assert_eq!(
        checklist_problems(&t.json("checklist", &["--json"]), CODE),
        1
    );

    let out = t.run(
        "recommend",
        &["--ack", CODE, "--reason", "AMD's recipe writes 1"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("primus-tune.toml:"), "{}", out.stdout);
    let toml = std::fs::read_to_string(t.toml()).unwrap();
    assert!(
        toml.contains(
            "[per-file-ignores.\"llama3_8B-BF16-pretrain.yaml\"]\n\
             bool-written-as-int = \"AMD's recipe writes 1\"\n"
        ),
        "{toml}"
    );

    let out = t.run("lint", &["--strict"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        !out.stdout.contains("warning[bool-written-as-int]"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "llama3_8B-BF16-pretrain.yaml:60:26: ignored[bool-written-as-int]: AMD's recipe \
             writes 1 ("
        ) && out.stdout.contains("0 warnings, 0 infos, 1 ignored;"),
        "{}",
        out.stdout
    );
    let out = t.run("lint", &["--strict", "--format", "github"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(!out.stdout.contains("::warning"), "{}", out.stdout);
    let v = t.json("lint", &["--format", "json"]);
    assert_eq!(
        (v["warnings"].as_u64(), v["ignored"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(v["suppressed"][0]["code"], CODE);
    assert_eq!(v["suppressed"][0]["reason"], "AMD's recipe writes 1");
    let sarif = t.json("lint", &["--format", "sarif"]);
    let result = &sarif["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], CODE, "{sarif}");
    let s = &result["suppressions"][0];
    assert_eq!(
        (&s["kind"], &s["justification"]),
        (&"external".into(), &"AMD's recipe writes 1".into())
    );
    let v = t.json("checklist", &["--json"]);
    assert_eq!(checklist_problems(&v, CODE), 0);
    assert_eq!(v["suppressed"][0]["reason"], "AMD's recipe writes 1", "{v}");
    let out = t.run("checklist", &[]);
    assert!(
        out.stdout
            .contains("ignored[bool-written-as-int]: AMD's recipe writes 1 ("),
        "{}",
        out.stdout
    );

    let out = t.run("recommend", &["--unack", CODE]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("no longer acknowledged"),
        "{}",
        out.stdout
    );
    assert_eq!(t.run("lint", &["--strict"]).code, 1);
    // The file keeps its header comment and its now empty table: nothing else is touched.
    let left = std::fs::read_to_string(t.toml()).unwrap();
    assert!(
        left.starts_with("# primus-tune: ") && !left.contains(CODE),
        "{left}"
    );
}

/// Every lint code is an id `--ack` takes, found on the experiment or not, and an unknown id is
/// refused with both lists and the nearest id of either.
#[test]
fn ack_takes_every_lint_code_and_an_unknown_id_lists_both() {
    let t = tree();
    let out = t.run(
        "recommend",
        &["--ack", "deepep-router-dtyp", "--reason", "x"],
    );
    assert_eq!(out.code, 64, "{}", out.stderr);
    for want in [
        "unknown rule `deepep-router-dtyp`",
        "advice rules: primus-turbo, ",
        "lint codes: async-tp-without-tp, ",
        "did you mean `deepep-router-dtype`?",
    ] {
        assert!(out.stderr.contains(want), "{want}: {}", out.stderr);
    }
    let out = t.run(
        "recommend",
        &["--ack", "deepep-router-dtype", "--reason", "bf16 here"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// A comment after the value suppresses that line's finding (its reason shown); one naming an
/// id that does not exist is lint's `unknown-rule` warning at its place, with a suggestion.
#[test]
fn a_comment_on_the_yaml_line_suppresses_its_finding() {
    let t = tree();
    t.edit(
        "      sequence_parallel: 1\n",
        "      sequence_parallel: 1  # primus-tune: ignore[bool-written-as-int] AMD's recipe\n      \
         # primus-tune: ignore[bool-writen-as-int]\n",
    );
    let out = t.run("lint", &[]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stdout
            .contains(":60:26: ignored[bool-written-as-int]: AMD's recipe (")
            && out.stdout.contains("llama3_8B-BF16-pretrain.yaml:60:"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(":61:29: warning[unknown-rule]: unknown rule `bool-writen-as-int`")
            && out.stdout.contains("did you mean `bool-written-as-int`?"),
        "{}",
        out.stdout
    );
    let sarif = t.json("lint", &["--format", "sarif"]);
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    let s = results
        .iter()
        .find(|r| r["ruleId"] == CODE)
        .map(|r| &r["suppressions"][0])
        .unwrap();
    assert_eq!(s["kind"], "inSource");
}

/// A `primus-tune.toml` up the tree covers every experiment under it (`[ignore]`), lint of a
/// folder included; a mistake in it is an error at its `file:line:column` — a finding for
/// `lint` (exit 2), a failure for `recommend` and `checklist` (exit 2), which cannot honour it.
#[test]
fn a_folder_s_primus_tune_toml_and_its_mistakes() {
    let t = tree();
    let root = t.exp.parent().unwrap().parent().unwrap().to_path_buf();
    let toml = root.join("primus-tune.toml");
    std::fs::write(
        &toml,
        "# our decisions\n[ignore]\nbool-written-as-int = \"every recipe of ours writes 1\"\n",
    )
    .unwrap();
    let out = t.run("lint", &["--strict"]);
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stdout.contains("every recipe of ours writes 1 ("),
        "{}",
        out.stdout
    );
    // `--ack` adds to the nearest file, keeping what is there; `--unack` cannot take back the
    // folder's decision and says where it is.
    let out = t.run(
        "recommend",
        &["--ack", "primus-turbo", "--reason", "no wheel"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = std::fs::read_to_string(&toml).unwrap();
    assert!(
        text.starts_with("# our decisions\n[ignore]\nbool-written-as-int = \"every recipe of ours writes 1\"\n\n[per-file-ignores.\"experiments/llama3_8B-BF16-pretrain.yaml\"]\nprimus-turbo = \"no wheel\"\n"),
        "{text}"
    );
    assert!(!t.toml().exists());
    let out = t.run("recommend", &["--unack", CODE]);
    assert!(
        out.stdout.contains("still acknowledged by ")
            && out.stdout.contains("primus-tune.toml:3:1"),
        "{}",
        out.stdout
    );
    std::fs::write(&toml, "[ignore]\nbool-written-as-int = 1\n").unwrap();
    let out = t.run("lint", &[]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stdout.contains(
            "primus-tune.toml:2:23: error[bad-ignore-file]: `bool-written-as-int` needs its reason"
        ),
        "{}",
        out.stdout
    );
    for cmd in ["recommend", "checklist"] {
        let out = t.run(cmd, &[]);
        assert_eq!(out.code, 2, "{cmd}: {}", out.stdout);
        assert!(
            out.stderr.contains("primus-tune.toml:2:23: "),
            "{cmd}: {}",
            out.stderr
        );
    }
}

/// An advice rule named in a comment of the experiment is acknowledged for it: the checklist
/// shows the to-do as acknowledged with the reason and where it is written, and `recommend`
/// lists it apart and does not advise the flag.
#[test]
fn an_advice_rule_acknowledged_in_a_comment_is_honoured_by_checklist_and_recommend() {
    let t = tree();
    t.edit(
        "      overlap_param_gather: true\n",
        "      overlap_param_gather: false  # primus-tune: ignore[overlap-param-gather] 3 % slower here\n",
    );
    let v = t.json("checklist", &["--json"]);
    let f = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["findings"].as_array().unwrap().clone())
        .find(|f| f["rule"] == "overlap-param-gather")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(f["kind"], "acknowledged", "{f}");
    let text = f["text"].as_str().unwrap();
    assert!(
        text.ends_with("acknowledged: 3 % slower here (llama3_8B-BF16-pretrain.yaml:61:58)"),
        "{text}"
    );
    let v = t.json("recommend", &["--json", "--gpu", "MI300X"]);
    assert_eq!(v["acknowledged"][0]["rule"], "overlap-param-gather", "{v}");
    assert_eq!(v["acknowledged"][0]["reason"], "3 % slower here");
    let flags: Vec<&str> = v["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["flag"].as_str().unwrap())
        .collect();
    assert!(!flags.contains(&"overlap_param_gather"), "{flags:?}");
}
