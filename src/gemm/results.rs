//! Stage-2 result files (`tune_hipblas_gemm_results.txt`): a `Git Version:` line, then for
//! each tuned GEMM an indented CSV header line and one CSV row, as hipblaslt-bench writes them
//! with `HIPBLASLT_TUNING_FILE`.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// One tuned GEMM and the solution hipBLASLt picked for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunedGemm {
    #[serde(flatten)]
    pub gemm: super::Gemm,
    /// `hipblaslt-Gflops`.
    pub gflops: f64,
    /// `us`: one call's time, microseconds.
    pub us: f64,
    pub solution_index: i64,
    /// `gcnArchName`, e.g. `gfx950:sramecc+:xnack-`.
    pub arch: String,
    /// `CUs`.
    pub cus: u32,
    /// The 1-based line of the CSV row (for messages and the TUI).
    #[serde(skip)]
    pub line: usize,
}

/// A parsed result file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuneResults {
    /// The hipBLASLt build that wrote it (`Git Version: …`); solution indices only mean
    /// something to that build.
    pub git_version: String,
    pub entries: Vec<TunedGemm>,
    #[serde(skip)]
    pub path: PathBuf,
}

/// A result file that cannot be read or is malformed or truncated.
pub type ResultsError = super::FileError;

/// The columns a result row must carry, by header name.
const REQUIRED: [&str; 16] = [
    "transA",
    "transB",
    "batch_count",
    "m",
    "n",
    "k",
    "a_type",
    "b_type",
    "c_type",
    "d_type",
    "compute_type",
    "hipblaslt-Gflops",
    "us",
    "solution_index",
    "gcnArchName",
    "CUs",
];

/// A CSV header line: its column names and where each required column sits.
struct Header {
    /// The 1-based line it was read from.
    line: usize,
    /// How many columns it has (a row must have as many fields).
    width: usize,
    /// The index of each [`REQUIRED`] column, in that order.
    at: [usize; REQUIRED.len()],
}

/// Splits a CSV line of the result file (no quoting: hipblaslt-bench writes none) into
/// trimmed fields.
fn fields(text: &str) -> Vec<&str> {
    text.split(',').map(str::trim).collect()
}

/// Whether a line is a header: no field is a number (every row has numeric `m`, `n`, `k`).
fn looks_like_header(fields: &[&str]) -> bool {
    fields.iter().all(|f| f.parse::<f64>().is_err())
}

/// Parses the text of a result file (`path` is for messages).
///
/// The first non-empty line must be `Git Version: <hash>`; after it come pairs of an
/// indented CSV header line and one CSV row. The columns of each row are looked up by name in
/// the header right before it, so their order does not matter. Blank lines and `\r\n` line
/// ends are accepted. Errors name the line: a header without a required column, a row with
/// a different field count than its header, a field that is not a number, a row without a
/// header before it, a header without a row after it (a truncated file), an empty file.
pub fn parse(path: &Path, text: &str) -> Result<TuneResults, ResultsError> {
    let err = |line: usize, message: String| ResultsError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());

    let Some((first_no, first)) = lines.next() else {
        return Err(err(1, "empty file: expected `Git Version: <hash>`".into()));
    };
    let Some(git_version) = first.strip_prefix("Git Version:") else {
        return Err(err(
            first_no,
            "not a hipBLASLt tuning result file: expected `Git Version:` on the first line".into(),
        ));
    };

    let mut entries = Vec::new();
    let mut header: Option<Header> = None;
    for (line_no, line) in lines {
        let row = fields(line);
        if looks_like_header(&row) {
            match (parse_header(&row, line_no), &header) {
                (Ok(_), Some(prev)) => {
                    return Err(err(
                        prev.line,
                        "truncated: header without a result row (another header follows)".into(),
                    ));
                }
                (Ok(head), None) => header = Some(head),
                // Not a header after all: most likely a row cut short.
                (Err(_), Some(prev)) => {
                    return Err(err(
                        line_no,
                        format!(
                            "expected the result row of the header on line {}, found a line \
                             without numbers",
                            prev.line
                        ),
                    ));
                }
                (Err(message), None) => return Err(err(line_no, message)),
            }
        } else {
            let Some(head) = header.take() else {
                return Err(err(
                    line_no,
                    "result row without a CSV header line before it".into(),
                ));
            };
            entries.push(parse_row(&head, &row, line_no).map_err(|m| err(line_no, m))?);
        }
    }
    if let Some(head) = header {
        return Err(err(
            head.line,
            "truncated: header without a result row".into(),
        ));
    }

    Ok(TuneResults {
        git_version: git_version.trim().to_string(),
        entries,
        path: path.to_path_buf(),
    })
}

/// Reads a header's column names; every [`REQUIRED`] column must be there.
fn parse_header(names: &[&str], line: usize) -> Result<Header, String> {
    let mut at = [0; REQUIRED.len()];
    for (slot, want) in at.iter_mut().zip(REQUIRED) {
        *slot = names.iter().position(|n| *n == want).ok_or_else(|| {
            format!(
                "CSV header lacks the `{want}` column (is this a hipBLASLt tuning result file?)"
            )
        })?;
    }
    Ok(Header {
        line,
        width: names.len(),
        at,
    })
}

/// Reads one row with the columns of `head`.
fn parse_row(head: &Header, row: &[&str], line: usize) -> Result<TunedGemm, String> {
    if row.len() != head.width {
        return Err(format!(
            "the row has {} fields but its header (line {}) has {} columns",
            row.len(),
            head.line,
            head.width
        ));
    }
    // The field of required column `i` (its name is REQUIRED[i]).
    let field = |i: usize| row[head.at[i]];
    fn number<T: std::str::FromStr>(name: &str, value: &str) -> Result<T, String> {
        value
            .parse()
            .map_err(|_| format!("`{name}` is not a number: `{value}`"))
    }
    let num = |i: usize| number::<u64>(REQUIRED[i], field(i));
    let float = |i: usize| number::<f64>(REQUIRED[i], field(i));
    let text = |i: usize| {
        let v = field(i);
        if v.is_empty() {
            Err(format!("`{}` is empty", REQUIRED[i]))
        } else {
            Ok(v.to_string())
        }
    };
    Ok(TunedGemm {
        gemm: super::Gemm {
            trans_a: text(0)?,
            trans_b: text(1)?,
            batch_count: num(2)?,
            m: num(3)?,
            n: num(4)?,
            k: num(5)?,
            a_type: text(6)?,
            b_type: text(7)?,
            c_type: text(8)?,
            d_type: text(9)?,
            compute_type: text(10)?,
        },
        gflops: float(11)?,
        us: float(12)?,
        solution_index: number(REQUIRED[13], field(13))?,
        arch: text(14)?,
        cus: number(REQUIRED[15], field(15))?,
        line,
    })
}

/// Reads and parses a result file.
/// Only a regular file of at most the input cap ([`crate::util::input`]) is read: a FIFO
/// would block, `/dev/zero` would fill memory.
pub fn read(path: &Path) -> Result<TuneResults, ResultsError> {
    use crate::util::input::{InputError, cap_bytes, read_text};
    let text = read_text(path, cap_bytes()).map_err(|e| match e {
        InputError::Io(source) => ResultsError::Io {
            path: path.to_path_buf(),
            source,
        },
        InputError::NotUtf8 { line, .. } => ResultsError::Parse {
            path: path.to_path_buf(),
            line: line as usize,
            message: e.to_string(),
        },
        other => ResultsError::Io {
            path: path.to_path_buf(),
            source: other.into(),
        },
    })?;
    parse(path, &text)
}

/// A result file as JSON: `{"git_version", "entries": [{"m", "n", "k", "trans_a", "trans_b",
/// "batch_count", "a_type", "b_type", "c_type", "d_type", "compute_type", "gflops", "us",
/// "solution_index", "arch", "cus"}, …]}` in file order.
pub fn results_json(r: &TuneResults) -> serde_json::Value {
    // `TuneResults` serialises as exactly that (the path and the row lines are skipped).
    serde_json::to_value(r).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The 42 columns hipblaslt-bench writes.
    const HEADER: &str = "transA,transB,grouped_gemm,batch_count,m,n,k,alpha,lda,stride_a,beta,ldb,stride_b,ldc,stride_c,ldd,stride_d,a_type,b_type,c_type,d_type,compute_type,scaleA,scaleB,scaleC,scaleD,amaxD,swizzle_a,swizzle_b,activation_type,bias_vector,bias_type,aux_type,rotating_buffer,flush,use_gpu_timer,hipblaslt-Gflops,hipblaslt-GB/s,us,solution_index,gcnArchName,CUs";
    /// Two rows in the documented format (a bf16 and an fp8 GEMM).
    const ROW_BF16: &str = "T,N,0,1,32,32768,2880,1,2880,92160,0,2880,94371840,32,1048576,32,1048576,bf16_r,bf16_r,f32_r,f32_r,f32_r,0,0,0,0,0,0,0,none,0,f32_r,f32_r,512,1,0,151492,4511.27,39.8689,303082,gfx950:sramecc+:xnack-,256";
    const ROW_FP8: &str = "T,N,0,1,2880,32768,4096,1,4096,11796480,0,4096,134217728,2880,94371840,2880,94371840,f8_r,f8_r,bf16_r,bf16_r,f32_r,1,1,0,0,0,0,0,none,0,f32_r,bf16_r,512,1,0,2.69535e+06,1086.96,286.825,306398,gfx950:sramecc+:xnack-,256";

    fn p() -> &'static Path {
        Path::new("r.txt")
    }

    fn sample() -> String {
        format!(
            "Git Version: de5c1aebb6-dirty\n    {HEADER}\n    {ROW_BF16}\n    {HEADER}\n    {ROW_FP8}\n"
        )
    }

    /// The message of a parse error, checking it names `want_line`.
    fn error_at(text: &str, want_line: usize) -> String {
        match parse(p(), text) {
            Err(ResultsError::Parse { line, message, .. }) => {
                assert_eq!(line, want_line, "{message}");
                message
            }
            other => panic!("expected a parse error at line {want_line}, got {other:?}"),
        }
    }

    #[test]
    fn parses_the_documented_sample() {
        let r = parse(p(), &sample()).unwrap();
        assert_eq!(r.git_version, "de5c1aebb6-dirty");
        assert_eq!(r.path, p());
        assert_eq!(r.entries.len(), 2);
        let e = &r.entries[0];
        assert_eq!(
            (e.gemm.m, e.gemm.n, e.gemm.k, e.gemm.batch_count),
            (32, 32768, 2880, 1)
        );
        assert_eq!(
            (e.gemm.trans_a.as_str(), e.gemm.trans_b.as_str()),
            ("T", "N")
        );
        assert_eq!(
            [
                &e.gemm.a_type,
                &e.gemm.b_type,
                &e.gemm.c_type,
                &e.gemm.d_type,
                &e.gemm.compute_type
            ],
            ["bf16_r", "bf16_r", "f32_r", "f32_r", "f32_r"]
        );
        assert_eq!(
            (e.gflops, e.us, e.solution_index),
            (151492.0, 39.8689, 303082)
        );
        assert_eq!(
            (e.arch.as_str(), e.cus, e.line),
            ("gfx950:sramecc+:xnack-", 256, 3)
        );
        let f = &r.entries[1];
        assert_eq!(f.gemm.a_type, "f8_r");
        assert_eq!(f.gflops, 2.69535e6);
        assert_eq!((f.solution_index, f.line), (306398, 5));
    }

    #[test]
    fn crlf_blank_lines_and_bom_are_fine() {
        let text =
            format!("\u{feff}\r\nGit Version: abc\r\n\r\n  {HEADER}\r\n\t{ROW_FP8}\r\n\r\n\r\n");
        let r = parse(p(), &text).unwrap();
        assert_eq!(r.git_version, "abc");
        assert_eq!(r.entries.len(), 1);
        assert_eq!(r.entries[0].line, 5);
        // A file with only the version line has no entries.
        assert!(parse(p(), "Git Version: x\n").unwrap().entries.is_empty());
    }

    #[test]
    fn columns_are_mapped_by_name() {
        // The header and the row reversed: same values.
        let rev = |s: &str| s.split(',').rev().collect::<Vec<_>>().join(",");
        let text = format!(
            "Git Version: x\n{}\n{}\n{HEADER}\n{ROW_FP8}\n",
            rev(HEADER),
            rev(ROW_BF16)
        );
        let r = parse(p(), &text).unwrap();
        let plain = parse(p(), &sample()).unwrap();
        assert_eq!(r.entries, plain.entries);
        // A minimal header with only the required columns.
        let text = "Git Version: x\n  m,n,k,transA,transB,batch_count,a_type,b_type,c_type,d_type,compute_type,hipblaslt-Gflops,us,solution_index,gcnArchName,CUs\n  1,2,3,N,T,4,f8_r,bf8_r,bf16_r,f32_r,f32_r,1e3,0.5,-1,gfx942,304\n";
        let e = &parse(p(), text).unwrap().entries[0];
        assert_eq!(
            (e.gemm.m, e.gemm.n, e.gemm.k, e.gemm.batch_count),
            (1, 2, 3, 4)
        );
        assert_eq!(
            (e.gflops, e.us, e.solution_index, e.cus),
            (1000.0, 0.5, -1, 304)
        );
        assert_eq!(e.gemm.b_type, "bf8_r");
    }

    #[test]
    fn errors_name_the_line() {
        assert!(error_at("", 1).contains("empty"));
        assert!(error_at("\n \n", 1).contains("empty"));
        let m = error_at(&format!("{HEADER}\n{ROW_BF16}\n"), 1);
        assert!(
            m.contains("not a hipBLASLt tuning result file: expected `Git Version:`"),
            "{m}"
        );

        // Header at the end without a row.
        let m = error_at(
            &format!("Git Version: x\n{HEADER}\n{ROW_BF16}\n{HEADER}\n\n"),
            4,
        );
        assert!(m.contains("truncated: header without a result row"), "{m}");
        // Two headers in a row.
        let m = error_at(
            &format!("Git Version: x\n{HEADER}\n{HEADER}\n{ROW_BF16}\n"),
            2,
        );
        assert!(m.contains("truncated"), "{m}");
        // A row without a header: at the start, and a second row after one pair.
        let m = error_at(&format!("Git Version: x\n{ROW_BF16}\n"), 2);
        assert!(m.contains("without a CSV header"), "{m}");
        error_at(
            &format!("Git Version: x\n{HEADER}\n{ROW_BF16}\n{ROW_FP8}\n"),
            4,
        );

        // A header lacking a required column.
        let no_cus = HEADER.replace(",CUs", ",cus");
        let m = error_at(
            &format!("Git Version: x\n{HEADER}\n{ROW_BF16}\n{no_cus}\n{ROW_BF16}\n"),
            4,
        );
        assert!(m.contains("`CUs`"), "{m}");
        // Field count mismatch (a row cut short).
        let short = &ROW_FP8[..ROW_FP8.len() - 4];
        let m = error_at(&format!("Git Version: x\n\n{HEADER}\n{short}"), 4);
        assert!(
            m.contains("41 fields") && m.contains("42 columns") && m.contains("line 3"),
            "{m}"
        );
        // A row cut so short that it holds no number.
        let m = error_at(&format!("Git Version: x\n{HEADER}\nT,N"), 3);
        assert!(m.contains("header on line 2"), "{m}");
        // Non-numeric numbers.
        for (from, to, col) in [
            (",151492,", ",fast,", "hipblaslt-Gflops"),
            (",39.8689,", ",?,", "us"),
            (",303082,", ",3.5,", "solution_index"),
            (",256", ",-1", "CUs"),
            ("T,N,0,1,32,", "T,N,0,1,-32,", "`m`"),
        ] {
            let row = ROW_BF16.replace(from, to);
            let m = error_at(&format!("Git Version: x\n{HEADER}\n{row}\n"), 3);
            assert!(m.contains(col) && m.contains("not a number"), "{m}");
        }
        let row = ROW_BF16.replace(",bf16_r,bf16_r,", ",,bf16_r,");
        assert!(error_at(&format!("Git Version: x\n{HEADER}\n{row}\n"), 3).contains("a_type"));
    }

    #[test]
    fn error_display_names_path_and_line() {
        let e = parse(Path::new("dir/tune.txt"), "Git Version: x\n  a,b\n").unwrap_err();
        assert!(e.to_string().starts_with("dir/tune.txt:2: "), "{e}");
        let e = read(Path::new("/nonexistent/tune.txt")).unwrap_err();
        assert!(matches!(e, ResultsError::Io { .. }));
        assert!(e.to_string().starts_with("/nonexistent/tune.txt: "), "{e}");
    }

    #[test]
    fn results_json_has_exactly_the_documented_fields() {
        let r = parse(p(), &sample()).unwrap();
        let v = results_json(&r);
        assert_eq!(v["git_version"], "de5c1aebb6-dirty");
        assert_eq!(
            v["entries"][0],
            serde_json::json!({
                "m": 32, "n": 32768, "k": 2880, "trans_a": "T", "trans_b": "N",
                "batch_count": 1, "a_type": "bf16_r", "b_type": "bf16_r", "c_type": "f32_r",
                "d_type": "f32_r", "compute_type": "f32_r", "gflops": 151492.0,
                "us": 39.8689, "solution_index": 303082, "arch": "gfx950:sramecc+:xnack-",
                "cus": 256
            })
        );
        assert_eq!(v["entries"][1]["gflops"], 2695350.0);
        assert_eq!(v.as_object().unwrap().len(), 2);
        // The serde form (line and path skipped) says the same.
        assert_eq!(serde_json::to_value(&r).unwrap(), v);
    }

    fn entry_strategy() -> impl Strategy<Value = TunedGemm> {
        let perf = (
            0.0f64..1e7,
            0.0f64..1e6,
            any::<i64>(),
            prop::sample::select(vec!["gfx950:sramecc+:xnack-", "gfx942:sramecc+:xnack-"]),
            any::<u32>(),
        );
        (crate::gemm::gemm_strategy(), perf).prop_map(
            |(gemm, (gflops, us, solution_index, arch, cus))| TunedGemm {
                gemm,
                gflops,
                us,
                solution_index,
                arch: arch.to_string(),
                cus,
                line: 0,
            },
        )
    }

    /// Renders entries as a result file: the 42-column header (columns rotated by `rot` for
    /// each pair, so the order varies) and one row per entry. Entry `i`'s row is on line
    /// `2 * i + 3`.
    fn render(entries: &[TunedGemm], rot: usize, sci: bool) -> String {
        let mut out = String::from("Git Version: 0123abcd\n");
        for (i, e) in entries.iter().enumerate() {
            let gflops = if sci {
                format!("{:e}", e.gflops)
            } else {
                e.gflops.to_string()
            };
            let cols: Vec<(&str, String)> = HEADER
                .split(',')
                .map(|name| {
                    let v = match name {
                        "transA" => e.gemm.trans_a.clone(),
                        "transB" => e.gemm.trans_b.clone(),
                        "batch_count" => e.gemm.batch_count.to_string(),
                        "m" => e.gemm.m.to_string(),
                        "n" => e.gemm.n.to_string(),
                        "k" => e.gemm.k.to_string(),
                        "a_type" => e.gemm.a_type.clone(),
                        "b_type" => e.gemm.b_type.clone(),
                        "c_type" => e.gemm.c_type.clone(),
                        "d_type" => e.gemm.d_type.clone(),
                        "compute_type" => e.gemm.compute_type.clone(),
                        "hipblaslt-Gflops" => gflops.clone(),
                        "us" => e.us.to_string(),
                        "solution_index" => e.solution_index.to_string(),
                        "gcnArchName" => e.arch.clone(),
                        "CUs" => e.cus.to_string(),
                        "activation_type" => "none".into(),
                        "bias_type" | "aux_type" => "f32_r".into(),
                        _ => "0".into(),
                    };
                    (name, v)
                })
                .collect();
            let mut cols = cols;
            let width = cols.len();
            cols.rotate_left((rot + i) % width);
            let names: Vec<&str> = cols.iter().map(|(n, _)| *n).collect();
            let values: Vec<&str> = cols.iter().map(|(_, v)| v.as_str()).collect();
            out.push_str(&format!(
                "    {}\n    {}\n",
                names.join(","),
                values.join(",")
            ));
        }
        out
    }

    fn with_lines(mut entries: Vec<TunedGemm>) -> Vec<TunedGemm> {
        for (i, e) in entries.iter_mut().enumerate() {
            e.line = 2 * i + 3;
        }
        entries
    }

    proptest! {
        #[test]
        fn generated_files_round_trip(
            entries in prop::collection::vec(entry_strategy(), 0..8),
            rot in 0usize..42,
            sci in any::<bool>(),
        ) {
            let text = render(&entries, rot, sci);
            let r = parse(p(), &text).unwrap();
            prop_assert_eq!(r.git_version, "0123abcd");
            prop_assert_eq!(r.entries, with_lines(entries));
        }

        #[test]
        fn truncation_at_a_line_gives_an_error_or_a_prefix(
            entries in prop::collection::vec(entry_strategy(), 1..6),
            rot in 0usize..42,
        ) {
            let text = render(&entries, rot, false);
            let lines: Vec<&str> = text.lines().collect();
            let want = with_lines(entries);
            for keep in 0..=lines.len() {
                let cut = lines[..keep].join("\n");
                match parse(p(), &cut) {
                    Ok(r) => {
                        // Only whole pairs: the version line plus 2 lines per entry.
                        prop_assert!(keep >= 1 && keep % 2 == 1, "kept {} lines", keep);
                        prop_assert_eq!(&r.entries[..], &want[..(keep - 1) / 2]);
                    }
                    Err(ResultsError::Parse { line, message, .. }) => {
                        prop_assert!(keep == 0 || keep % 2 == 0, "kept {}: {}", keep, message);
                        if keep > 0 {
                            prop_assert_eq!(line, keep);
                            prop_assert!(message.contains("truncated"));
                        }
                    }
                    Err(e) => prop_assert!(false, "unexpected {}", e),
                }
            }
        }

        #[test]
        fn truncation_at_any_byte_never_panics(
            entries in prop::collection::vec(entry_strategy(), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let text = render(&entries, 0, true);
            let mut at = cut.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            if let Ok(r) = parse(p(), &text[..at]) {
                prop_assert!(r.entries.len() <= entries.len());
            }
        }

        #[test]
        fn random_text_never_panics(text in ".{0,400}") {
            let _ = parse(p(), &text);
            let _ = parse(p(), &format!("Git Version: x\n{text}"));
        }

        #[test]
        fn random_csv_never_panics(
            rows in prop::collection::vec(
                prop::collection::vec(
                    prop_oneof![
                        prop::sample::select(HEADER.split(',').collect::<Vec<_>>())
                            .prop_map(str::to_string),
                        "[0-9.e+-]{0,6}",
                        "[A-Za-z_]{0,4}",
                    ],
                    0..50,
                ),
                0..10,
            )
        ) {
            let body: Vec<String> = rows.iter().map(|r| r.join(",")).collect();
            let _ = parse(p(), &format!("Git Version: x\n{}", body.join("\n")));
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse(p(), &text);
            let _ = parse(p(), &format!("Git Version: x\n{HEADER}\n{text}"));
        }
    }
}
