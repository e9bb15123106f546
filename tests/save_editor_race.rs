//! An editor that saves while `set --write` saves (and takes no lock) never loses its change:
//! hundreds of forced races, an editor thread replacing the experiment at a random moment of
//! the save. Afterwards the editor's line must be in the file: either `set` refused ("changed
//! on disk", nothing written) or it saved on top of the editor's text, or the editor saved last.
//!
//! Two kinds of editor: one that writes a new file and renames it over the old (vim's default,
//! most IDEs), and one that truncates and rewrites the file in place. The first must never lose
//! its change; for the second see `src/config/save.rs` for the window no save can close.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
enum Editor {
    RenameOver,
    InPlace,
}

fn editor_save(path: &Path, text: &str, how: Editor) {
    match how {
        Editor::RenameOver => {
            let tmp = path.with_file_name(".editor-save.swp");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, path).unwrap();
        }
        Editor::InPlace => {
            let mut f = std::fs::File::create(path).unwrap();
            f.write_all(text.as_bytes()).unwrap();
        }
    }
}

struct Tally {
    lost: usize,
    refused: usize,
    saved: usize,
}

/// `rounds` races of `set --write train_iters=N` against an editor saving `# editor N` at a
/// random moment within `span` of the start of `set`.
fn race(s: &common::Setup, base: &str, how: Editor, rounds: usize, span: Duration) -> Tally {
    let mut t = Tally {
        lost: 0,
        refused: 0,
        saved: 0,
    };
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..rounds {
        std::fs::write(&s.exp, base).unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(seed % span.as_micros().max(1) as u64);
        let marker = format!("# editor {i}\n");
        let edited = format!("{base}{marker}");
        let child = common::cmd(s)
            .arg("set")
            .arg(&s.exp)
            .arg(format!("train_iters={}", 1000 + i))
            .args(["--write", "--no-backup"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        editor_save(&s.exp, &edited, how);
        let out = child.wait_with_output().unwrap();
        let now = std::fs::read_to_string(&s.exp).unwrap();
        if !now.contains(&marker) {
            t.lost += 1;
        }
        if out.status.success() {
            t.saved += 1;
        } else {
            // Refused: "changed on disk", or (an in-place editor caught mid-write) a file that
            // did not parse. Nothing of it may be in the file.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !now.contains(&format!("train_iters: {}\n", 1000 + i)),
                "round {i}: refused but written: {err}"
            );
            t.refused += 1;
        }
    }
    t
}

#[test]
fn an_editor_saving_during_set_write_keeps_its_change() {
    let s = common::setup("unused", "true", "unused");
    let base = std::fs::read_to_string(&s.exp).unwrap();
    // The editor's moments are spread over a whole save as long as it takes here.
    let t0 = Instant::now();
    let out = common::cmd(&s)
        .arg("set")
        .arg(&s.exp)
        .args(["train_iters=999", "--write", "--no-backup"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let span = t0.elapsed().mul_f64(1.2);
    let rename = race(&s, &base, Editor::RenameOver, 300, span);
    let in_place = race(&s, &base, Editor::InPlace, 150, span);
    eprintln!(
        "editor races over {span:?}: rename-over: {} of 300 lost ({} saved, {} refused); \
         in place: {} of 150 lost ({} saved, {} refused)",
        rename.lost, rename.saved, rename.refused, in_place.lost, in_place.saved, in_place.refused
    );
    assert_eq!(rename.lost, 0, "an editor's rename-over save was lost");
    assert_eq!(in_place.lost, 0, "an editor's in-place save was lost");
}
