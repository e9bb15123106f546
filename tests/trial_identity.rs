//! Every trial knows what it ran: trials list their difference from the experiment as it is
//! now, compare by the values they ran (also after the file changed), and lists are scoped to
//! their experiment unless `--all`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Setup, cmd};

/// Step time 140 − 20 × micro batch ms (±1 ms of alternating noise).
const WORKLOAD: &str = r#"mbs=$(grep -o '"micro_batch_size": *[0-9]*' "$1/resolved.json" | grep -o '[0-9]*$')
base=$((140 - 20 * mbs))
i=1
while [ $i -le 40 ]; do
  ms=$((base + (i % 2) * 2 - 1))
  printf ' [2026-11-29 22:59:27.865632] iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %s.0 | throughput per GPU (TFLOP/s/GPU): 100.0 | learning rate: 1.000000E-04 | global batch size:    16 | lm loss: 9.800000E+00 | loss scale: 1.0 | grad norm: 1.000 | number of skipped iterations:   0 | number of nan iterations:   0 |\n' $i 40 $i $ms
  i=$((i + 1))
done
"#;

fn run_trial(s: &Setup, exp: &std::path::Path) {
    let out = cmd(s)
        .arg("run")
        .arg(exp)
        .args([
            "--profile",
            "mbs-workload",
            "--max-iters",
            "30",
            "--ci-target",
            "0",
            "--no-telemetry",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn trials_compare_by_what_they_ran_and_list_their_own_experiment() {
    let s = common::setup("mbs-workload", WORKLOAD, "mbs");
    let exp = s.exp.to_str().unwrap().to_string();
    // Trial 1 runs micro batch 1; the file is then edited to 2 and trial 2 runs that.
    common::set_micro_batch(&s, 1);
    run_trial(&s, &s.exp);
    common::set_micro_batch(&s, 2);
    run_trial(&s, &s.exp);

    // The list: trial 1 differs from the file as it is now; trial 2 ran it as it is.
    let rows = json(
        &cmd(&s)
            .args(["trials", "--config", &exp, "--json"])
            .output()
            .unwrap(),
    );
    let by_id = |id: i64| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{rows}"))
            .clone()
    };
    assert_eq!(
        by_id(1)["differences"],
        serde_json::json!([{"flag": "micro_batch_size", "a": 2, "b": 1}])
    );
    assert_eq!(by_id(2)["differences"], serde_json::json!([]));
    assert_eq!(by_id(1)["this_experiment"], true);
    let text = cmd(&s).args(["trials", "--config", &exp]).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("micro_batch_size=1"), "{text}");
    assert!(text.contains("(as the config is)"), "{text}");

    // Compare: the flag they ran differently, and the step time with its interval.
    let c = json(
        &cmd(&s)
            .args(["trials", "compare", "1", "2", "--json", "--config", &exp])
            .output()
            .unwrap(),
    );
    assert_eq!(c["a"], 1);
    assert_eq!(c["b"], 2);
    assert_eq!(
        c["differences"],
        serde_json::json!([{"flag": "micro_batch_size", "a": 1, "b": 2}])
    );
    let m = &c["median_step_ms"];
    assert!((m["a"].as_f64().unwrap() - 120.0).abs() < 2.0, "{c}");
    assert!((m["b"].as_f64().unwrap() - 100.0).abs() < 2.0, "{c}");
    assert!(
        (m["change_pct"].as_f64().unwrap() + 16.7).abs() < 2.0,
        "{c}"
    );
    assert!(m["ci95_pct"].as_f64().unwrap() < 5.0, "{c}");
    assert_eq!(c["verdict"], "faster");
    let text = cmd(&s)
        .args(["trials", "compare", "1", "2", "--config", &exp])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("verdict: trial 2 is faster"), "{text}");
    assert!(text.contains("micro_batch_size"), "{text}");

    // Another experiment in the same workspace: listed only with --all, with its file.
    // A name longer than any default column width.
    let other = s
        .exp
        .with_file_name("other-experiment-with-a-long-name.yaml");
    std::fs::copy(&s.exp, &other).unwrap();
    run_trial(&s, &other);
    let mine = json(
        &cmd(&s)
            .args(["trials", "--config", &exp, "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(mine.as_array().unwrap().len(), 2, "{mine}");
    let all = json(
        &cmd(&s)
            .args(["trials", "--config", &exp, "--all", "--json"])
            .output()
            .unwrap(),
    );
    let all = all.as_array().unwrap();
    assert_eq!(all.len(), 3);
    let third = all.iter().find(|r| r["id"] == 3).unwrap();
    assert_eq!(third["this_experiment"], false);
    assert!(
        third["config_path"]
            .as_str()
            .unwrap()
            .ends_with("other-experiment-with-a-long-name.yaml")
    );
    let text = cmd(&s)
        .args(["trials", "--config", &exp, "--all"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    // The experiment column is as wide as its longest name: every name starts under the
    // header and is followed by a space, never run into the next column.
    let header = text.lines().next().unwrap();
    let at = header.find("experiment").expect("an experiment column");
    let col = header[..at].chars().count();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{text}");
    for row in &rows {
        let name: String = row.chars().skip(col).collect();
        assert!(
            name.starts_with("other-experiment-with-a-long-name.yaml ")
                || name.starts_with(&format!(
                    "{} ",
                    s.exp.file_name().unwrap().to_string_lossy()
                )),
            "{text}"
        );
    }
}
