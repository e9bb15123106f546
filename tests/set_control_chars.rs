//! A key or value holding a line break or another control character prints on one line in
//! `set`'s summary: `"a\nb"` printed raw would read as a change of a key `b`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

#[test]
fn set_summary_escapes_a_newline_in_a_key() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("ex");
    primus_tune::util::bundled::extract(&root).unwrap();
    let exp = root.join("experiments/llama3_8B-BF16-pretrain.yaml");
    let out = common::cli(&d.path().join("data"))
        .arg("set")
        .arg(&exp)
        .args(["x\ny=1", "tab\tkey=2", "--force"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Vec<&str> = stdout.lines().filter(|l| l.contains(" → ")).collect();
    assert_eq!(summary.len(), 2, "{stdout}");
    assert!(summary[0].starts_with("x\\ny: unset → "), "{stdout}");
    assert!(summary[1].starts_with("tab\\tkey: unset → "), "{stdout}");
    assert!(
        !stdout.lines().any(|l| l.starts_with("y: ")),
        "the key's tail printed as a line of its own: {stdout}"
    );
}
