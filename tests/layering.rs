//! The core knows nothing about terminals: no ratatui or crossterm outside src/tui/ (DESIGN.md §3).

use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable source folder") {
        let p = e.expect("readable entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn terminal_crates_are_used_only_by_the_tui() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "the source tree was found");
    let tui = src.join("tui");
    let offenders: Vec<String> = files
        .iter()
        .filter(|p| !p.starts_with(&tui))
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            text.contains("ratatui") || text.contains("crossterm")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "terminal crates used in {offenders:?}"
    );
}
