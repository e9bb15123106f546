#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The HipBLASLt parsers on the two real tuning result files of Primus' gpt-oss-20B MLPerf
//! example (`../shared/fixtures/primus/examples/mlperf/gpt_oss_20b`): hipBLASLt builds
//! `de5c1aebb6-dirty` (v26.3, 12 GEMMs) and `fa9cdd18` (v26.5, 20 GEMMs) on MI355X.
//!
//! Each test skips (with a message on stderr) when the fixture folder is absent.

use primus_tune::gemm::dump::{self, GemmShape};
use primus_tune::gemm::results::{self, ResultsError, TuneResults};
use std::path::{Path, PathBuf};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/primus/examples/mlperf/gpt_oss_20b");
    if !p.is_dir() {
        eprintln!("skipped: {} is absent", p.display());
        return None;
    }
    Some(p)
}

fn v26_3() -> Option<(PathBuf, TuneResults)> {
    let path = fixtures()?.join("tune_gemm_results-v26.3.txt");
    let r = results::read(&path).expect("v26.3 parses");
    Some((path, r))
}

fn v26_5() -> Option<(PathBuf, TuneResults)> {
    let path = fixtures()?.join("tune_gemm_results-v26.5.txt");
    let r = results::read(&path).expect("v26.5 parses");
    Some((path, r))
}

const ARCH: &str = "gfx950:sramecc+:xnack-";

/// The first GEMM of both files: 32×32768×2880, A transposed, bf16 in, f32 out.
fn first_gemm() -> primus_tune::gemm::Gemm {
    primus_tune::gemm::Gemm {
        m: 32,
        n: 32768,
        k: 2880,
        trans_a: "T".into(),
        trans_b: "N".into(),
        batch_count: 1,
        a_type: "bf16_r".into(),
        b_type: "bf16_r".into(),
        c_type: "f32_r".into(),
        d_type: "f32_r".into(),
        compute_type: "f32_r".into(),
    }
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_v26_3_entries() {
    let Some((path, r)) = v26_3() else { return };
    assert_eq!(r.path, path);
    assert_eq!(r.git_version, "de5c1aebb6-dirty");
    assert_eq!(r.entries.len(), 12);
    let e = &r.entries[0];
    assert_eq!(e.gemm, first_gemm());
    assert_eq!(
        (e.gflops, e.us, e.solution_index),
        (151492.0, 39.8689, 303082)
    );
    assert_eq!(e.line, 3);
    // The first fp8 GEMM, with a scientific Gflops figure.
    let f = &r.entries[2];
    assert_eq!((f.gemm.m, f.gemm.n, f.gemm.k), (2880, 32768, 4096));
    assert_eq!(
        (f.gflops, f.us, f.solution_index),
        (2.69535e6, 286.825, 306398)
    );
    // Rows are on the odd lines 3, 5, …, 25.
    let lines: Vec<usize> = r.entries.iter().map(|e| e.line).collect();
    assert_eq!(lines, (0..12).map(|i| 2 * i + 3).collect::<Vec<_>>());
    let last = &r.entries[11];
    assert_eq!(
        (last.gemm.m, last.gemm.n, last.gemm.k),
        (2880, 128256, 32768)
    );
    assert_eq!(last.solution_index, 300155);
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_v26_5_entries() {
    let Some((_, r)) = v26_5() else { return };
    assert_eq!(r.git_version, "fa9cdd18");
    assert_eq!(r.entries.len(), 20);
    // Same GEMM as v26.3's first, another solution index: indices are build-specific.
    let e = &r.entries[0];
    assert_eq!(e.gemm, first_gemm());
    assert_eq!(
        (e.gflops, e.us, e.solution_index),
        (182699.0, 33.0588, 24641)
    );
    let last = &r.entries[19];
    assert_eq!((last.gemm.m, last.gemm.n, last.gemm.k), (5120, 32768, 2880));
    assert_eq!(last.solution_index, 36094);
    assert_eq!(last.line, 41);
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_arch_cus_and_fp8_types() {
    let Some((_, a)) = v26_3() else { return };
    let Some((_, b)) = v26_5() else { return };
    for r in [&a, &b] {
        assert!(r.entries.iter().all(|e| e.arch == ARCH && e.cus == 256));
        assert!(r.entries.iter().all(|e| e.gemm.batch_count == 1));
        assert!(r.entries.iter().all(|e| e.gemm.compute_type == "f32_r"));
        let fp8: Vec<_> = r
            .entries
            .iter()
            .filter(|e| e.gemm.a_type == "f8_r")
            .collect();
        assert_eq!(fp8.len(), 6);
        for e in fp8 {
            assert_eq!(e.gemm.b_type, "f8_r");
            assert_eq!(
                (e.gemm.c_type.as_str(), e.gemm.d_type.as_str()),
                ("bf16_r", "bf16_r")
            );
            assert_eq!(
                (e.gemm.trans_a.as_str(), e.gemm.trans_b.as_str()),
                ("T", "N")
            );
            assert!(e.gflops > 2.0e6, "{e:?}");
        }
        let types: std::collections::BTreeSet<&str> =
            r.entries.iter().map(|e| e.gemm.a_type.as_str()).collect();
        assert_eq!(
            types.into_iter().collect::<Vec<_>>(),
            ["bf16_r", "f32_r", "f8_r"]
        );
    }
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_solution_indices_differ_between_builds() {
    let Some((_, a)) = v26_3() else { return };
    let Some((_, b)) = v26_5() else { return };
    let key = |e: &results::TunedGemm| {
        (
            e.gemm.m,
            e.gemm.n,
            e.gemm.k,
            e.gemm.trans_a.clone(),
            e.gemm.trans_b.clone(),
            e.gemm.a_type.clone(),
        )
    };
    let common: Vec<_> = a
        .entries
        .iter()
        .filter_map(|x| b.entries.iter().find(|y| key(x) == key(y)).map(|y| (x, y)))
        .collect();
    assert!(common.len() >= 8, "{} shapes in common", common.len());
    for (x, y) in &common {
        assert_ne!(x.solution_index, y.solution_index, "{x:?}");
    }
    // The same fp8 GEMM: 306398 in v26.3, 38550 in v26.5.
    let (x, y) = common
        .iter()
        .find(|(x, _)| {
            (x.gemm.m, x.gemm.n, x.gemm.k) == (2880, 32768, 4096) && x.gemm.a_type == "f8_r"
        })
        .unwrap();
    assert_eq!((x.solution_index, y.solution_index), (306398, 38550));
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_results_json() {
    let Some((_, r)) = v26_5() else { return };
    let v = results::results_json(&r);
    assert_eq!(v["git_version"], "fa9cdd18");
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 20);
    assert_eq!(entries[0]["solution_index"], 24641);
    assert_eq!(entries[0]["gflops"], 182699.0);
    assert_eq!(entries[0]["arch"], ARCH);
    assert_eq!(entries[0]["cus"], 256);
    assert_eq!(entries[0].as_object().unwrap().len(), 16);
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_truncated_copies_error_naming_the_line() {
    let Some((path, full)) = v26_3() else { return };
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 25);
    let dir = tempfile::tempdir().unwrap();

    // The last row missing: the header on line 24 has no row.
    let cut = dir.path().join("tune_no_last_row.txt");
    std::fs::write(&cut, lines[..24].join("\n") + "\n").unwrap();
    let err = results::read(&cut).unwrap_err();
    match &err {
        ResultsError::Parse {
            path,
            line,
            message,
        } => {
            assert_eq!(path, &cut);
            assert_eq!(*line, 24);
            assert!(
                message.contains("truncated: header without a result row"),
                "{message}"
            );
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with(&format!("{}:24: ", cut.display())),
        "{err}"
    );

    // The last row cut in the middle: the field count is wrong on line 25.
    let mid = dir.path().join("tune_cut_row.txt");
    let at = text.trim_end().len() - 40;
    std::fs::write(&mid, &text[..at]).unwrap();
    match results::read(&mid).unwrap_err() {
        ResultsError::Parse { line, message, .. } => {
            assert_eq!(line, 25);
            assert!(message.contains("fields"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }

    // Cut after a whole pair: a valid file with the first entries.
    let pairs = dir.path().join("tune_five.txt");
    std::fs::write(&pairs, lines[..11].join("\n")).unwrap();
    let r = results::read(&pairs).unwrap();
    assert_eq!(r.entries[..], full.entries[..5]);
}

/// A shape dump built from the tuned GEMMs (as `hipblaslt-bench` lines, each repeated, with
/// other log lines between) reads back as the same unique shapes.
#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_dump_of_the_tuned_shapes() {
    let Some((_, r)) = v26_5() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("[hipBLASLt] log start\n");
    for (i, e) in r.entries.iter().enumerate() {
        let shape = GemmShape {
            gemm: primus_tune::gemm::Gemm {
                m: e.gemm.m,
                n: e.gemm.n,
                k: e.gemm.k,
                trans_a: e.gemm.trans_a.clone(),
                trans_b: e.gemm.trans_b.clone(),
                batch_count: e.gemm.batch_count,
                a_type: e.gemm.a_type.clone(),
                b_type: e.gemm.b_type.clone(),
                c_type: e.gemm.c_type.clone(),
                d_type: e.gemm.d_type.clone(),
                compute_type: e.gemm.compute_type.clone(),
            },
            rest: vec![
                ("api_method".into(), "c".into()),
                ("alpha".into(), "1.000000".into()),
                ("beta".into(), "0.000000".into()),
            ],
        };
        let line = dump::render_line(&shape);
        for rep in 0..=(i % 3) {
            text.push_str(&format!(
                "{line} --algo_method index --solution_index {}\n",
                e.solution_index + rep as i64
            ));
        }
        text.push_str("some other output\n");
    }
    let file = dir.path().join("dump_hipblaslt_gemm_shape_0.txt");
    std::fs::write(&file, text).unwrap();
    let sum = dump::read_dumps(&file).unwrap();
    assert_eq!(sum.other_lines, 21);
    assert_eq!(
        sum.gemm_lines,
        (0..20).map(|i| i % 3 + 1).sum::<usize>() as u64
    );
    // Some tuned GEMMs differ only in columns a dump line does not carry here (the leading
    // dimensions, beta), so the unique shapes are the distinct (m, n, k, trans, types).
    let mut keys: Vec<_> = r
        .entries
        .iter()
        .map(|e| {
            let types = [
                &e.gemm.a_type,
                &e.gemm.b_type,
                &e.gemm.c_type,
                &e.gemm.d_type,
                &e.gemm.compute_type,
            ];
            (
                e.gemm.m,
                e.gemm.n,
                e.gemm.k,
                e.gemm.trans_a.clone(),
                e.gemm.trans_b.clone(),
                types,
            )
        })
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(sum.shapes.len(), keys.len());
    assert_eq!(
        sum.shapes.iter().map(|s| s.count).sum::<u64>(),
        sum.gemm_lines
    );
    let json = dump::shapes_json(&sum);
    assert_eq!(json["shapes"].as_array().unwrap().len(), keys.len());
}
