//! The TUI in a real terminal: the debug binary runs inside a detached tmux session (80×24,
//! `NO_COLOR`), keys go in with `send-keys`, the screen comes back with `capture-pane -p`. Every
//! step waits for the text it expects (polling, never a fixed sleep), and every screen waited for
//! is kept under `target/tmp/tui_tmux/<test>/` for a look after a failure.
//!
//! Without `tmux` on the PATH the tests say so and pass (CI installs it: `.ci/run`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tmux;

use std::path::PathBuf;
use tmux::{Tui, bare, box_text, have_tmux, right_pane};

#[test]
fn tmux_walks_checklist_edits_a_flag_and_saves() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start("walk");
    let original = std::fs::read_to_string(&tui.config).unwrap();
    let (edited_line, old_value) = original
        .lines()
        .enumerate()
        .find_map(|(i, l)| {
            l.trim_start()
                .strip_prefix("micro_batch_size:")
                .map(|v| (i, v.trim().to_string()))
        })
        .expect("the example sets micro_batch_size");
    assert_ne!(
        old_value, "2",
        "the example must not already have the new value"
    );

    // The checklist, step 1 selected and shown on the right. (Each step waits for the whole
    // state it checks: a capture can fall between two parts of a frame.)
    tui.wait_for("checklist-step-1", |s| {
        s.contains("Quick checklist")
            && s.contains("1. GEMMs (HipBLASLt tuning)")
            && right_pane(s).contains("GEMMs (HipBLASLt tuning) — ")
    });

    // Down twice: step 3 on the right.
    tui.keys(&["Down", "Down"]);
    tui.wait_for("step-3", |s| {
        right_pane(s).contains("Precision — ")
            && !right_pane(s).contains("GEMMs (HipBLASLt tuning) — ")
    });

    // Enter: the step's flags.
    tui.keys(&["Enter"]);
    tui.wait_for("flags-of-precision", |s| {
        s.contains("Flags · Precision") && s.contains("bf16")
    });

    // Search.
    tui.keys(&["/"]);
    tui.type_text("micro_batch_size");
    tui.wait_text("Search: micro_batch_size");
    tui.keys(&["Enter"]);
    // The search finds the flag with its value.
    let value = format!(" {old_value} ");
    tui.wait_for("found", |s| {
        s.contains("Flags · /micro_batch_size")
            && s.lines()
                .any(|l| l.contains(" micro_batch_size ") && l.contains(&value))
    });

    // The editor: clear the value, type 2, keep it as an unsaved edit.
    tui.keys(&["Enter"]);
    tui.wait_text(&format!("micro_batch_size = {old_value}▏"));
    let backspaces = vec!["BSpace"; old_value.chars().count() + 2];
    tui.keys(&backspaces);
    tui.wait_text("micro_batch_size = ▏");
    tui.type_text("2");
    tui.wait_text("micro_batch_size = 2▏");
    tui.keys(&["Enter"]);
    tui.wait_for("pending-row", |s| {
        s.contains("1 unsaved")
            && s.lines().any(|l| {
                // `│* micro_batch_size   2   <file:line>│`: marked pending, the new value.
                let cells: Vec<&str> = l.trim_matches('│').split_whitespace().collect();
                cells.len() >= 3 && cells[..3] == ["*", "micro_batch_size", "2"]
            })
    });
    assert_eq!(
        std::fs::read_to_string(&tui.config).unwrap(),
        original,
        "an unsaved edit touched the file"
    );

    // s: the diff, then y writes.
    tui.keys(&["s"]);
    let removed = format!("-      micro_batch_size: {old_value}");
    tui.wait_for("diff", |s| {
        s.contains("Save these changes?")
            && s.contains(&removed)
            && s.contains("+      micro_batch_size: 2")
    });
    tui.keys(&["y"]);
    tui.wait_for("saved", |s| {
        s.contains("saved 1 change to") && !s.contains("unsaved")
    });

    // q: the shell gets its terminal back.
    tui.keys(&["q"]);
    let code = tui.assert_exited_and_restored();
    assert_eq!(code, 0);

    // The file: that one value changed, every other line byte for byte as it was.
    let now = std::fs::read_to_string(&tui.config).unwrap();
    let (before, after): (Vec<&str>, Vec<&str>) =
        (original.lines().collect(), now.lines().collect());
    assert_eq!(before.len(), after.len(), "line count changed:\n{now}");
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        if i == edited_line {
            assert_eq!(
                *a,
                b.replace(
                    &format!("micro_batch_size: {old_value}"),
                    "micro_batch_size: 2"
                ),
                "line {}",
                i + 1
            );
        } else {
            assert_eq!(a, b, "line {} changed", i + 1);
        }
    }
    assert_eq!(now.ends_with('\n'), original.ends_with('\n'));
    assert!(now.contains("\n      micro_batch_size: 2\n"), "{now}");
    assert!(original.contains('#') && now.matches('#').count() == original.matches('#').count());
    // The version replaced is kept in the workspace (under the data folder), never beside
    // the experiment.
    for kept in [".bak.1", ".orig"] {
        let beside = PathBuf::from(format!("{}{kept}", tui.config.display()));
        assert!(
            !beside.exists(),
            "{} beside the experiment",
            beside.display()
        );
    }
    let kept = files_under(&tui.tmp.path().join("xdg"))
        .into_iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == "backups"))
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t == original))
        .count();
    assert!(
        kept >= 1,
        "the replaced version is not in the workspace's backups"
    );
}

/// Every file below `dir`.
fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn tmux_sigterm_restores_the_terminal() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start("sigterm");
    let original = std::fs::read_to_string(&tui.config).unwrap();
    tui.wait_text("Quick checklist");
    // Somewhere other than the first screen, with an editor open.
    tui.keys(&["2"]);
    tui.wait_text("┌ Flags ");
    tui.keys(&["/"]);
    tui.type_text("micro_batch_size");
    tui.keys(&["Enter", "Enter"]);
    tui.wait_for("editor", |s| {
        s.contains("micro_batch_size = ") && s.contains('▏')
    });

    let pid = tui.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM sent");
    let code = tui.assert_exited_and_restored();
    // 0: it caught the signal and left in order (143 would mean the default action killed it,
    // and then the checks above would have failed already).
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&tui.config).unwrap(), original);
    assert!(!PathBuf::from(format!("{}.bak.1", tui.config.display())).exists());
}

/// The first-start tour is open (the tour marker lives in the test's private state folder):
/// Tab pages through it, and `q` quits from it with the terminal restored.
#[test]
fn tmux_q_quits_from_the_tour() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start_with("tour-q", &[tmux::CONFIG], (80, 24));
    tui.wait_text("Welcome to primus-tune");
    tui.keys(&["Tab"]);
    tui.wait_text("2/6 · Enter next");
    tui.keys(&["q"]);
    let code = tui.assert_exited_and_restored();
    assert_eq!(code, 0);
    // Shown once: the marker is kept with the TUI's other state ($XDG_STATE_HOME/primus-tune).
    let marker = tui.tmp.path().join("xdg/primus-tune/toured");
    assert!(marker.is_file(), "{}", marker.display());
}

/// Below the minimum size a notice says what is needed; `q` still quits.
#[test]
fn tmux_too_small_terminal_says_so() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start_with("too-small", &[tmux::CONFIG, "--no-tour"], (40, 10));
    let s = tui.wait_text("terminal too small (need 60×16)");
    assert!(!s.contains("Quick checklist"), "{s}");
    tui.keys(&["q"]);
    assert_eq!(tui.assert_exited_and_restored(), 0);
}

/// `monitor` on the recorded 8-GPU MI300X sysfs tree at 80×24: after many in-place refreshes
/// the screen holds one table with exactly one header, every GPU once, no line wrapped, and the
/// process table with the trial's processes marked.
#[test]
fn tmux_monitor_fits_80_columns_with_one_header() {
    if !have_tmux() {
        return;
    }
    let tree = tempfile::tempdir().unwrap();
    tmux::copy_tree(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sysfs/mi300x_spx_nps1"),
        tree.path(),
    );
    // pid 4102 belongs to trial 7 (as a trial's processes inherit it), 4101 has a command line.
    let proc_dir = tree.path().join("proc");
    std::fs::write(
        proc_dir.join("4102/environ"),
        b"HOME=/root\0PRIMUS_TUNE_TRIAL_ID=7\0",
    )
    .unwrap();
    std::fs::write(
        proc_dir.join("4101/cmdline"),
        b"python3\0pretrain.py\0--config\0exp.yaml\0",
    )
    .unwrap();
    let (sys, procfs) = (
        tree.path().join("sys").display().to_string(),
        proc_dir.display().to_string(),
    );
    let args = [
        "monitor",
        "--backend",
        "amdgpu-sysfs",
        "--sysfs-root",
        &sys,
        "--procfs-root",
        &procfs,
        "--interval",
        "100",
        "--process-interval",
        "100",
        "--duration",
        "2",
    ];
    let mut tui = Tui::start_with("monitor", &args, (80, 24));
    let s = tui.wait_text("EXITED 0");
    let headers: Vec<&str> = s.lines().filter(|l| l.starts_with("GPU ")).collect();
    assert_eq!(headers.len(), 1, "one header after the refreshes:\n{s}");
    assert!(
        headers[0].contains("UTIL") && headers[0].contains("VRAM"),
        "{s}"
    );
    for g in 0..8 {
        let rows = s
            .lines()
            .filter(|l| l.starts_with(&format!("{g}   ")))
            .count();
        assert_eq!(rows, 1, "GPU {g} once:\n{s}");
    }
    // Nothing wrapped: every GPU row ends with a figure, not a fragment on the next line.
    let gpu_rows: Vec<&str> = s.lines().filter(|l| l.contains("MI300X")).collect();
    assert_eq!(gpu_rows.len(), 8, "{s}");
    assert!(s.lines().all(|l| l.chars().count() <= 80), "{s}");
    assert_eq!(
        s.lines()
            .filter(|l| l.contains("PID") && l.contains("COMMAND"))
            .count(),
        1,
        "{s}"
    );
    assert!(
        s.lines()
            .any(|l| l.trim_start().starts_with("4102") && l.contains("▶7")),
        "trial 7's process marked:\n{s}"
    );
    assert!(
        s.lines()
            .any(|l| l.contains("python3 pretrain.py --config exp.yaml")),
        "{s}"
    );
}

/// A left click on a tab switches screens: the click goes in as the SGR mouse report a terminal
/// sends (`ESC [ < button ; column ; row M`, then `m` on release), typed into the pane.
#[test]
fn tmux_mouse_click_on_a_tab_switches_screens() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start("mouse");
    let first = tui.wait_text("Quick checklist");
    // A tab's middle column on the tab line, 1-based as the report counts.
    let tabs = first.lines().next().unwrap().to_string();
    let col = |name: &str| {
        let at = tabs.find(name).expect("the tab is on the top line");
        tabs[..at].chars().count() + 3
    };
    let col = col("4 Trials");
    tui.type_text(&format!("\x1b[<0;{col};1M\x1b[<0;{col};1m"));
    let trials = tui.wait_text(" Trials · ");
    assert!(!trials.contains("Quick checklist"), "{trials}");
    // And back by a click on "2 Flags".
    let at = tabs.find("2 Flags").unwrap();
    let col = tabs[..at].chars().count() + 3;
    tui.type_text(&format!("\x1b[<0;{col};1M\x1b[<0;{col};1m"));
    tui.wait_text("┌ Flags ");
    tui.keys(&["q"]);
    assert_eq!(tui.assert_exited_and_restored(), 0);
}

/// Ctrl-Z from an interactive shell: the shell gets the terminal back (job stopped, normal
/// screen), `fg` brings the TUI back redrawn, `q` then quits.
#[test]
fn tmux_ctrl_z_suspends_and_fg_restores() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start_shell("ctrl-z");
    tui.wait_text("PROMPT$");
    let line = tui.launch_line();
    tui.type_text(&line);
    tui.keys(&["Enter"]);
    tui.wait_text("Quick checklist");
    tui.keys(&["C-z"]);
    let stopped = tui.wait_text("Stopped");
    assert!(!stopped.contains("Quick checklist"), "{stopped}");
    assert_eq!(tui.display("#{alternate_on}"), "0", "{stopped}");
    tui.type_text("fg");
    tui.keys(&["Enter"]);
    let back = tui.wait_text("Quick checklist");
    assert!(back.contains("1 Checklist"), "redrawn whole:\n{back}");
    assert_eq!(tui.display("#{alternate_on}"), "1");
    tui.keys(&["q"]);
    tui.wait_for("the prompt again", |s| {
        !s.contains("Quick checklist") && s.trim_end().ends_with("PROMPT$")
    });
}

/// A launch profile whose command submits its own Slurm job of 2 nodes × 8 GPUs: the TUI's
/// question names the job's world, and the trial is linted there (16 ranks: 100 is not a
/// multiple of micro batch 5 × DP 16) before anything is submitted.
#[test]
fn tmux_a_slurm_profile_is_asked_and_linted_at_its_job_s_world() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start_shell_with(
        "slurm-world",
        &[tmux::CONFIG, "--no-tour", "--profile", "job"],
    );
    let profiles = tui.tmp.path().join("config/primus-tune/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    std::fs::write(
        profiles.join("job.yaml"),
        "name: job\nargv: [sbatch, \"{slurm_args}\", --wrap, \"true\"]\n\
         slurm:\n  submits: true\n  nodes: 2\n  gpus_per_node: 8\n",
    )
    .unwrap();
    let text = std::fs::read_to_string(&tui.config).unwrap();
    let text = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            let indent = &l[..l.len() - t.len()];
            if t.starts_with("micro_batch_size:") {
                format!("{indent}micro_batch_size: 5")
            } else if t.starts_with("global_batch_size:") {
                format!("{indent}global_batch_size: 100")
            } else if t.starts_with("expert_model_parallel_size:") {
                format!("{indent}expert_model_parallel_size: 1")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&tui.config, text + "\n").unwrap();
    tui.wait_text("PROMPT$");
    let line = tui.launch_line();
    tui.type_text(&line);
    tui.keys(&["Enter"]);
    tui.wait_text("Quick checklist");
    tui.keys(&["3"]);
    tui.wait_text("job");
    tui.keys(&["r"]);
    tui.wait_for("the question names the job's world", |s| {
        s.contains("Submits a Slurm job at world size 16")
    });
    tui.keys(&["y"]);
    // Refused before anything is submitted; the error is the batch rule at world 16 (at the
    // world of this node, with no GPU here, 100 splits into micro batches of 5). It shows
    // whole, in a box, and goes to the log.
    let s = tui.wait_for("refused by lint at world 16", |s| {
        box_text(s, "Error").is_some_and(|t| t.contains("run --force`"))
    });
    let said = bare(&box_text(&s, "Error").unwrap());
    let file = tui
        .config
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    for part in [
        "the trial could not run:",
        &format!("{file}: the trial's config has 1 lint error that would stop Primus at start-up"),
        "(`global_batch_size: 100` is not divisible by",
        "); fix them, or launch anyway with `primus-tune run --force`",
    ] {
        assert!(said.contains(&bare(part)), "{part}:\n{s}");
    }
    let file_line = s.lines().nth(1).unwrap_or_default().trim_end();
    assert!(file_line.ends_with(" 1 error"), "{s}");
    let log = tui.tmp.path().join("xdg/primus-tune/logs/tui.log");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.lines().any(|l| l.contains("ERROR")
            && l.contains("the trial could not run:")
            && l.contains("launch anyway with `primus-tune run --force`")),
        "{}:\n{logged}",
        log.display()
    );
    tui.keys(&["Enter"]);
    tui.wait_for("the box closed", |s| box_text(s, "Error").is_none());
    tui.keys(&["2", "/"]);
    tui.type_text("global_batch_size");
    tui.keys(&["Enter"]);
    // The flag carries the error (at this node's unknown world it would carry none).
    tui.wait_for("the error at world 16", |s| {
        s.contains("E global_batch_size")
            && s.contains("error: `global_batch_size: 100` is not divisible by micro_batch_size")
    });
    tui.keys(&["q"]);
}

/// Edits to flags all over the experiment make a diff taller than 80×24: the save box sums
/// them up (`key: old → new`), keeps its question in view and scrolls to the diff's last line.
#[test]
fn tmux_the_save_box_scrolls_to_its_last_line() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start("save-scrolls");
    tui.wait_text("Quick checklist");
    tui.keys(&["2"]);
    tui.wait_text("┌ Flags ");
    // Booleans from the top of the overrides to their end: Enter toggles each.
    let flags = [
        "moe_router_force_load_balancing",
        "eod_mask_loss",
        "overlap_param_gather",
        "use_turbo_attention",
        "moe_permute_fusion",
        "cross_entropy_loss_fusion",
    ];
    for (i, flag) in flags.iter().enumerate() {
        tui.keys(&["/"]);
        tui.type_text(flag);
        tui.keys(&["Enter"]);
        tui.wait_text(&format!("Flags · /{flag}"));
        tui.keys(&["Enter"]);
        tui.wait_text(&format!("{} unsaved", i + 1));
    }
    tui.keys(&["s"]);
    let last = "+      cross_entropy_loss_fusion: false";
    let first = tui.wait_for("the save box", |s| {
        // The last edit's plan has come back: the box asks about all six.
        s.contains("y writes the file") && s.contains("cross_entropy_loss_fusion: true → false")
    });
    assert!(!first.contains(last), "the diff fits the box:\n{first}");
    tui.keys(&["End"]);
    let end = tui.wait_for("the diff's last line", |s| s.contains(last));
    assert!(end.contains("y writes the file"), "{end}");
    tui.keys(&["Home"]);
    tui.wait_for("back at the top", |s| {
        s.contains("moe_router_force_load_balancing: true → false") && !s.contains(last)
    });
    tui.keys(&["n"]);
    tui.wait_for("closed", |s| !s.contains("Save these changes?"));
    tui.keys(&["q"]);
    tui.wait_text("Quit?");
    tui.keys(&["y"]);
    assert_eq!(tui.assert_exited_and_restored(), 0);
}

/// `b` on Flags lists the versions saves replaced; Enter shows what restoring one changes and
/// `y` restores it, at 80×24 without colour.
#[test]
fn tmux_a_saved_edit_is_undone_by_restoring_its_kept_version() {
    if !have_tmux() {
        return;
    }
    let mut tui = Tui::start("restore");
    let original = std::fs::read_to_string(&tui.config).unwrap();
    tui.wait_text("Quick checklist");
    tui.keys(&["2"]);
    tui.wait_text("┌ Flags ");
    tui.keys(&["/"]);
    tui.type_text("eod_mask_loss");
    tui.keys(&["Enter"]);
    tui.wait_text("Flags · /eod_mask_loss");
    tui.keys(&["Enter"]);
    tui.wait_text("1 unsaved");
    tui.keys(&["s"]);
    tui.wait_text("y writes the file");
    tui.keys(&["y"]);
    tui.wait_for("saved", |s| {
        s.contains("saved 1 change to") && !s.contains("unsaved")
    });
    assert_ne!(std::fs::read_to_string(&tui.config).unwrap(), original);
    tui.keys(&["b"]);
    tui.wait_for("the kept versions", |s| {
        s.contains("Kept versions") && s.contains("> 1 ") && s.contains("original")
    });
    tui.keys(&["Enter"]);
    tui.wait_for("the restore question", |s| {
        s.contains("Restore version 1?")
            && s.contains("+      eod_mask_loss: ")
            && s.contains("y restores it")
    });
    tui.keys(&["y"]);
    tui.wait_text("restored version 1");
    assert_eq!(std::fs::read_to_string(&tui.config).unwrap(), original);
    tui.keys(&["q"]);
    assert_eq!(tui.assert_exited_and_restored(), 0);
}
