//! Stage-1 shape dumps: the `hipblaslt-bench` command lines hipBLASLt logs with
//! `HIPBLASLT_LOG_MASK=32` (one per GEMM call, many duplicates), parsed and counted.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// One GEMM as hipBLASLt logged it. Two lines describe the same GEMM when every field is
/// equal (the key `offline_tune_gemm.py` deduplicates on is the whole line; we compare the
/// parsed fields, so spacing differences do not split a shape).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct GemmShape {
    #[serde(flatten)]
    pub gemm: super::Gemm,
    /// Every other `--key value` pair (lda, strides, alpha, beta, scale and bias types, …),
    /// in line order; flags without a value (`--bias_vector`) have an empty value.
    pub rest: Vec<(String, String)>,
}

/// A deduplicated shape and how many dumped lines named it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeCount {
    pub shape: GemmShape,
    pub count: u64,
}

/// What a dump file or folder holds.
#[derive(Debug, Clone, PartialEq)]
pub struct DumpSummary {
    /// The files read (a folder is walked recursively, as `offline_tune_gemm.py` does).
    pub files: Vec<PathBuf>,
    /// Unique shapes, most-called first (ties: by m, n, k).
    pub shapes: Vec<ShapeCount>,
    /// `hipblaslt-bench` lines read, duplicates included.
    pub gemm_lines: u64,
    /// Lines that are not `hipblaslt-bench` lines (other log output), skipped.
    pub other_lines: u64,
}

/// A dump that cannot be read or a `hipblaslt-bench` line that cannot be parsed.
pub type DumpError = super::FileError;

/// The first token of every shape line.
const BENCH: &str = "hipblaslt-bench";

/// Keys `offline_tune_gemm.py` removes before tuning: they name the solution the traced run
/// used, not the GEMM, so two calls that differ only in these are one shape to tune.
const DROPPED: [&str; 2] = ["algo_method", "solution_index"];

/// The string-valued keys every shape line carries, in [`GemmShape`] field order.
const TEXT_KEYS: [&str; 7] = [
    "transA",
    "transB",
    "a_type",
    "b_type",
    "c_type",
    "d_type",
    "compute_type",
];

/// Whether `tok` is an option name (`--lda`, `-m`) rather than a value. A value may start with
/// a dash only as a negative number (`--alpha -1.000000`, `-inf`), so a dash followed by a
/// letter, or a double dash followed by a letter or an underscore, marks a key.
fn is_key(tok: &str) -> bool {
    if tok.parse::<f64>().is_ok() {
        return false;
    }
    let mut chars = tok.chars();
    if chars.next() != Some('-') {
        return false;
    }
    match chars.next() {
        Some('-') => matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_'),
        Some(c) => c.is_ascii_alphabetic(),
        None => false,
    }
}

/// The canonical name of an option: the leading dashes dropped and the long size aliases
/// (`--sizem`) folded into `m`, `n`, `k`.
fn canonical_key(tok: &str) -> &str {
    match tok.trim_start_matches('-') {
        "sizem" => "m",
        "sizen" => "n",
        "sizek" => "k",
        other => other,
    }
}

/// How an option is written in messages and rendered lines: `-m` for one-letter names,
/// `--lda` for the others.
fn flag(key: &str) -> String {
    if key.chars().count() == 1 {
        format!("-{key}")
    } else {
        format!("--{key}")
    }
}

/// Whether the first whitespace-separated token of `text` is exactly `hipblaslt-bench`.
pub fn is_bench_line(text: &str) -> bool {
    text.split_whitespace().next() == Some(BENCH)
}

/// Parses one `hipblaslt-bench …` line (`line` is for messages, 1-based).
///
/// The tokens after `hipblaslt-bench` are `--key value` pairs (`-m 1024` and `--sizem 1024`
/// are both `m`); a key followed by another key or by the end of the line is a flag with an
/// empty value (`--bias_vector`). `m`, `n`, `k`, `transA`, `transB`, the four data types and
/// `compute_type` are required; `batch_count` is 1 when absent. `--algo_method` and
/// `--solution_index` are dropped; every other pair goes into [`GemmShape::rest`] (keys
/// without their dashes) in line order.
pub fn parse_line(path: &Path, line: usize, text: &str) -> Result<GemmShape, DumpError> {
    let err = |message: String| DumpError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut tokens = text.split_whitespace().peekable();
    if tokens.next() != Some(BENCH) {
        return Err(err(format!("not a `{BENCH}` line")));
    }

    let mut pairs: Vec<(&str, &str)> = Vec::new();
    while let Some(tok) = tokens.next() {
        if !is_key(tok) {
            return Err(err(format!(
                "unexpected token `{tok}`: expected an option such as `--lda`"
            )));
        }
        let value = tokens.next_if(|next| !is_key(next)).unwrap_or("");
        pairs.push((canonical_key(tok), value));
    }

    // The required keys, each at most once; everything else in order.
    let mut numbers: [Option<u64>; 4] = [None; 4]; // m, n, k, batch_count
    let mut texts: [Option<&str>; 7] = [None; 7];
    let mut rest = Vec::new();
    for (key, value) in pairs {
        let number_slot = match key {
            "m" => Some(0),
            "n" => Some(1),
            "k" => Some(2),
            "batch_count" => Some(3),
            _ => None,
        };
        if let Some(slot) = number_slot {
            if numbers[slot].is_some() {
                return Err(err(format!("`{}` given twice", flag(key))));
            }
            let parsed = value.parse::<u64>().map_err(|_| {
                err(if value.is_empty() {
                    format!("`{}` has no value", flag(key))
                } else {
                    format!("`{}` is not a non-negative integer: `{value}`", flag(key))
                })
            })?;
            numbers[slot] = Some(parsed);
        } else if let Some(slot) = TEXT_KEYS.iter().position(|k| *k == key) {
            if texts[slot].is_some() {
                return Err(err(format!("`{}` given twice", flag(key))));
            }
            if value.is_empty() {
                return Err(err(format!("`{}` has no value", flag(key))));
            }
            texts[slot] = Some(value);
        } else if !DROPPED.contains(&key) {
            rest.push((key.to_string(), value.to_string()));
        }
    }

    let number = |slot: usize, key: &str| {
        numbers[slot].ok_or_else(|| err(format!("missing `{}`", flag(key))))
    };
    let text_at = |slot: usize| {
        texts[slot]
            .map(str::to_string)
            .ok_or_else(|| err(format!("missing `--{}`", TEXT_KEYS[slot])))
    };
    Ok(GemmShape {
        gemm: super::Gemm {
            m: number(0, "m")?,
            n: number(1, "n")?,
            k: number(2, "k")?,
            trans_a: text_at(0)?,
            trans_b: text_at(1)?,
            batch_count: numbers[3].unwrap_or(1),
            a_type: text_at(2)?,
            b_type: text_at(3)?,
            c_type: text_at(4)?,
            d_type: text_at(5)?,
            compute_type: text_at(6)?,
        },
        rest,
    })
}

/// Renders a shape as a `hipblaslt-bench` command line that [`parse_line`] reads back as the
/// same shape: `-m`, `-n`, `-k`, then the other required keys, then [`GemmShape::rest`]
/// (one-letter keys with one dash, the others with two; flags without a value).
#[cfg(any(test, feature = "testkit"))]
pub fn render_line(shape: &GemmShape) -> String {
    let mut out = format!(
        "{BENCH} -m {} -n {} -k {} --transA {} --transB {} --batch_count {} \
         --a_type {} --b_type {} --c_type {} --d_type {} --compute_type {}",
        shape.gemm.m,
        shape.gemm.n,
        shape.gemm.k,
        shape.gemm.trans_a,
        shape.gemm.trans_b,
        shape.gemm.batch_count,
        shape.gemm.a_type,
        shape.gemm.b_type,
        shape.gemm.c_type,
        shape.gemm.d_type,
        shape.gemm.compute_type,
    );
    for (key, value) in &shape.rest {
        out.push(' ');
        out.push_str(&flag(key));
        if !value.is_empty() {
            out.push(' ');
            out.push_str(value);
        }
    }
    out
}

/// Every file under `dir`, recursively, in sorted path order. Symbolic links to files are
/// read; links to folders are not followed (as `os.walk` does by default), so a link loop
/// cannot recurse forever.
fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), DumpError> {
    let io = |source| DumpError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    entries.sort();
    for entry in entries {
        let meta = std::fs::symlink_metadata(&entry).map_err(|source| DumpError::Io {
            path: entry.clone(),
            source,
        })?;
        if meta.is_dir() {
            walk(&entry, files)?;
        } else if meta.is_file() || (meta.file_type().is_symlink() && entry.is_file()) {
            files.push(entry);
        }
    }
    Ok(())
}

/// Counts of one dump read: every unique shape, and the first line each exact text was seen.
#[derive(Default)]
struct Counter {
    /// Shape → index into `shapes`.
    index: std::collections::HashMap<GemmShape, usize>,
    /// The exact trimmed line text → index into `shapes` (most lines repeat verbatim, so this
    /// skips re-parsing them).
    seen: std::collections::HashMap<String, usize>,
    shapes: Vec<ShapeCount>,
    gemm_lines: u64,
    other_lines: u64,
}

impl Counter {
    /// Reads one file line by line (invalid UTF-8 replaced, `\r\n` accepted).
    fn read_file(&mut self, path: &Path) -> Result<(), DumpError> {
        use crate::util::lines::{MAX_LINE, Skipped, read_line};
        let io = |source| DumpError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = crate::util::input::open_regular(path).map_err(|e| io(e.into()))?;
        let mut reader = std::io::BufReader::new(file);
        let mut buf = Vec::new();
        let mut line_no = 0usize;
        // A line is cut at MAX_LINE bytes: a file without newlines costs a megabyte, not its
        // size (a cut bench line fails to parse, naming its line).
        let mut skipped = Skipped::default();
        loop {
            if !read_line(&mut reader, &mut buf, MAX_LINE, &mut skipped).map_err(io)? {
                return Ok(());
            }
            line_no += 1;
            let text = String::from_utf8_lossy(&buf);
            self.add_line(path, line_no, text.trim())?;
        }
    }

    /// Counts one trimmed line: a shape, another log line, or nothing (blank).
    fn add_line(&mut self, path: &Path, line: usize, text: &str) -> Result<(), DumpError> {
        if text.is_empty() {
            return Ok(());
        }
        if !is_bench_line(text) {
            self.other_lines += 1;
            return Ok(());
        }
        self.gemm_lines += 1;
        let at = match self.seen.get(text) {
            Some(&at) => at,
            None => {
                let shape = parse_line(path, line, text)?;
                let at = match self.index.get(&shape) {
                    Some(&at) => at,
                    None => {
                        self.shapes.push(ShapeCount {
                            shape: shape.clone(),
                            count: 0,
                        });
                        self.index.insert(shape, self.shapes.len() - 1);
                        self.shapes.len() - 1
                    }
                };
                self.seen.insert(text.to_string(), at);
                at
            }
        };
        self.shapes[at].count += 1;
        Ok(())
    }
}

/// Reads a dump file, or every file under a folder, and counts the unique shapes.
///
/// A folder is walked recursively and every file in it is read, in sorted path order (as
/// `offline_tune_gemm.py` reads every file it finds). Lines whose first token is not
/// `hipblaslt-bench` are counted in [`DumpSummary::other_lines`] and skipped; blank lines are
/// not counted. A `hipblaslt-bench` line that cannot be parsed stops the read with
/// [`DumpError::Parse`]. A folder holding no files is [`DumpError::Empty`]; files without any
/// shape line give a summary with no shapes.
pub fn read_dumps(path: &Path) -> Result<DumpSummary, DumpError> {
    let meta = std::fs::metadata(path).map_err(|source| DumpError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    if meta.is_dir() {
        walk(path, &mut files)?;
        if files.is_empty() {
            return Err(DumpError::Empty {
                path: path.to_path_buf(),
            });
        }
    } else {
        files.push(path.to_path_buf());
    }

    let mut counter = Counter::default();
    for file in &files {
        counter.read_file(file)?;
    }
    let mut shapes = counter.shapes;
    shapes.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.shape.cmp(&b.shape)));
    Ok(DumpSummary {
        files,
        shapes,
        gemm_lines: counter.gemm_lines,
        other_lines: counter.other_lines,
    })
}

/// The unique shapes as JSON: `{"shapes": [{"m", "n", "k", "trans_a", "trans_b", "a_type",
/// "b_type", "c_type", "d_type", "compute_type", "batch_count", "count"}, …]}`, in the
/// summary's order (most-called first).
pub fn shapes_json(summary: &DumpSummary) -> serde_json::Value {
    let shapes: Vec<serde_json::Value> = summary
        .shapes
        .iter()
        .map(|s| {
            let mut v = serde_json::to_value(&s.shape.gemm).unwrap_or_default();
            v["count"] = s.count.into();
            v
        })
        .collect();
    serde_json::json!({ "shapes": shapes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    /// The line of hipBLASLt's offline-tuning how-to (double spaces included).
    const DOC_LINE: &str = "hipblaslt-bench --api_method c -m 1024 -n 512 -k 1024 --lda 1024 --ldb 1024 --ldc 1024 --ldd 1024  --stride_a 0 --stride_b 0 --stride_c 0 --stride_d 0  --alpha 1.000000 --beta 1.000000 --transA N --transB N --batch_count 1  --a_type f16_r --b_type f16_r --c_type f16_r --d_type f16_r --scale_type f32_r --bias_type f32_r   --compute_type f32_r --algo_method index --solution_index 56073";

    /// The newer form: scales after the batch count, a bias vector flag, an activation.
    const NEW_LINE: &str = "hipblaslt-bench --api_method c -m 2880 -n 32768 -k 4096 --lda 4096 --ldb 4096 --ldc 2880 --ldd 2880  --stride_a 11796480 --stride_b 134217728 --stride_c 94371840 --stride_d 94371840  --alpha 1.000000 --beta 0.000000 --transA T --transB N --batch_count 1 --scaleA 1 --scaleB 1  --a_type f8_r --b_type f8_r --c_type bf16_r --d_type bf16_r --scale_type f32_r --bias_type bf16_r --bias_vector --bias_source d  --compute_type f32_r --activation_type none --algo_method index --solution_index 306398";

    fn p() -> &'static Path {
        Path::new("dump.txt")
    }

    fn rest_keys(shape: &GemmShape) -> Vec<&str> {
        shape.rest.iter().map(|(k, _)| k.as_str()).collect()
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn parses_the_documented_line() {
        let s = parse_line(p(), 1, DOC_LINE).unwrap();
        assert_eq!((s.gemm.m, s.gemm.n, s.gemm.k), (1024, 512, 1024));
        assert_eq!(
            (s.gemm.trans_a.as_str(), s.gemm.trans_b.as_str()),
            ("N", "N")
        );
        assert_eq!(s.gemm.batch_count, 1);
        assert_eq!(
            [
                &s.gemm.a_type,
                &s.gemm.b_type,
                &s.gemm.c_type,
                &s.gemm.d_type,
                &s.gemm.compute_type
            ],
            ["f16_r", "f16_r", "f16_r", "f16_r", "f32_r"]
        );
        assert_eq!(
            rest_keys(&s),
            [
                "api_method",
                "lda",
                "ldb",
                "ldc",
                "ldd",
                "stride_a",
                "stride_b",
                "stride_c",
                "stride_d",
                "alpha",
                "beta",
                "scale_type",
                "bias_type"
            ]
        );
        assert_eq!(s.rest[0], ("api_method".into(), "c".into()));
        assert_eq!(s.rest[9], ("alpha".into(), "1.000000".into()));
    }

    #[test]
    fn parses_the_newer_line_with_flags() {
        let s = parse_line(p(), 7, NEW_LINE).unwrap();
        assert_eq!((s.gemm.m, s.gemm.n, s.gemm.k), (2880, 32768, 4096));
        assert_eq!(
            (s.gemm.trans_a.as_str(), s.gemm.trans_b.as_str()),
            ("T", "N")
        );
        assert_eq!(
            (s.gemm.a_type.as_str(), s.gemm.d_type.as_str()),
            ("f8_r", "bf16_r")
        );
        let get = |key: &str| {
            s.rest
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("scaleA"), Some("1"));
        assert_eq!(get("scaleB"), Some("1"));
        assert_eq!(get("bias_vector"), Some(""));
        assert_eq!(get("bias_source"), Some("d"));
        assert_eq!(get("activation_type"), Some("none"));
        assert_eq!(get("algo_method"), None);
        assert_eq!(get("solution_index"), None);
        // Line order is kept.
        let keys = rest_keys(&s);
        let at = |k: &str| keys.iter().position(|x| *x == k).unwrap();
        assert!(at("scaleA") < at("bias_vector"));
        assert!(at("bias_vector") < at("bias_source"));
        assert!(at("bias_source") < at("activation_type"));
    }

    #[test]
    fn size_aliases_negative_values_and_trailing_flag() {
        let s = parse_line(
            p(),
            1,
            "  hipblaslt-bench --sizem 8 --sizen 16 --sizek 32 --alpha -1.5 --transA N \
             --transB T --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r \
             --compute_type f32_r --beta -inf --bias_vector\r\n",
        )
        .unwrap();
        assert_eq!((s.gemm.m, s.gemm.n, s.gemm.k), (8, 16, 32));
        assert_eq!(s.gemm.batch_count, 1, "a missing batch_count is 1");
        assert_eq!(
            s.rest,
            vec![
                ("alpha".to_string(), "-1.5".to_string()),
                ("beta".to_string(), "-inf".to_string()),
                ("bias_vector".to_string(), String::new())
            ]
        );
    }

    #[test]
    fn solution_fields_do_not_split_a_shape() {
        let other = NEW_LINE.replace("--solution_index 306398", "--solution_index 1");
        let other = other.replace("--algo_method index", "--algo_method heuristic");
        assert_eq!(
            parse_line(p(), 1, NEW_LINE).unwrap(),
            parse_line(p(), 2, &other).unwrap()
        );
        // But any other field does.
        let other = NEW_LINE.replace("--beta 0.000000", "--beta 1.000000");
        assert_ne!(
            parse_line(p(), 1, NEW_LINE).unwrap(),
            parse_line(p(), 2, &other).unwrap()
        );
    }

    #[test]
    fn errors_name_the_line_and_the_key() {
        let cases = [
            (DOC_LINE.replace("-k 1024 ", ""), "missing `-k`"),
            (DOC_LINE.replace("--transB N ", ""), "missing `--transB`"),
            (
                DOC_LINE.replace("--compute_type f32_r ", ""),
                "missing `--compute_type`",
            ),
            (DOC_LINE.replace("-m 1024", "-m 10x4"), "`-m` is not"),
            (DOC_LINE.replace("-n 512", "-n -512"), "`-n` is not"),
            (DOC_LINE.replace("-n 512", "-n"), "`-n` has no value"),
            (
                DOC_LINE.replace("--batch_count 1", "--batch_count one"),
                "`--batch_count` is not",
            ),
            (
                DOC_LINE.replace("--a_type f16_r", "--a_type"),
                "`--a_type` has no value",
            ),
            (format!("{DOC_LINE} -m 4"), "`-m` given twice"),
            (format!("{DOC_LINE} --sizem 4"), "`-m` given twice"),
            (
                DOC_LINE.replace("--api_method c", "stray --api_method c"),
                "unexpected token `stray`",
            ),
        ];
        for (text, want) in cases {
            let e = parse_line(p(), 42, &text).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with("dump.txt:42: "), "{msg}");
            assert!(msg.contains(want), "{msg} lacks {want}");
        }
        assert!(parse_line(p(), 1, "rocblas-bench -m 1").is_err());
    }

    #[test]
    fn reads_a_file_counting_duplicates_and_skipping_other_lines() {
        let dir = tempfile::tempdir().unwrap();
        let respaced = NEW_LINE.replace("  ", " ").replace(" -k", "   -k");
        let text = format!(
            "some other log line\n{DOC_LINE}\n\n{NEW_LINE}\r\n{NEW_LINE}\n\
             [hipBLASLt] warning: hipblaslt-bench is not a first token here\n{respaced}\n\
             /opt/rocm/bin/hipblaslt-bench -m 1\n{DOC_LINE}"
        );
        let file = write(dir.path(), "dump_0.txt", &text);
        let sum = read_dumps(&file).unwrap();
        assert_eq!(sum.files, vec![file]);
        assert_eq!(sum.gemm_lines, 5);
        assert_eq!(sum.other_lines, 3);
        assert_eq!(sum.shapes.len(), 2);
        assert_eq!(sum.shapes[0].count, 3);
        assert_eq!(sum.shapes[0].shape.gemm.m, 2880);
        assert_eq!(sum.shapes[1].count, 2);
        assert_eq!(sum.shapes[1].shape.gemm.m, 1024);
    }

    #[test]
    fn reads_a_folder_recursively_in_sorted_order() {
        let dir = tempfile::tempdir().unwrap();
        let b = write(dir.path(), "b.txt", &format!("{DOC_LINE}\n"));
        let a = write(dir.path(), "a/dump_1.txt", &format!("{NEW_LINE}\n"));
        let c = write(
            dir.path(),
            "a/z/dump_2.log",
            &format!("{DOC_LINE}\nnoise\n"),
        );
        let sum = read_dumps(dir.path()).unwrap();
        assert_eq!(sum.files, vec![a, c, b]);
        assert_eq!(sum.gemm_lines, 3);
        assert_eq!(sum.other_lines, 1);
        assert_eq!(
            sum.shapes.iter().map(|s| s.count).collect::<Vec<_>>(),
            [2, 1]
        );
    }

    #[test]
    fn ties_sort_by_m_n_k() {
        let dir = tempfile::tempdir().unwrap();
        let line = |m: u32| DOC_LINE.replace("-m 1024", &format!("-m {m}"));
        let text = [line(300), line(20), line(100), line(20), line(100), line(5)].join("\n");
        let file = write(dir.path(), "d.txt", &text);
        let sum = read_dumps(&file).unwrap();
        let got: Vec<(u64, u64)> = sum
            .shapes
            .iter()
            .map(|s| (s.count, s.shape.gemm.m))
            .collect();
        assert_eq!(got, [(2, 20), (2, 100), (1, 5), (1, 300)]);
    }

    #[test]
    fn read_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        assert!(matches!(read_dumps(&missing), Err(DumpError::Io { .. })));

        let empty = dir.path().join("empty");
        std::fs::create_dir_all(empty.join("sub")).unwrap();
        assert!(matches!(read_dumps(&empty), Err(DumpError::Empty { .. })));

        let bad = DOC_LINE.replace("--transA N ", "");
        let file = write(
            dir.path(),
            "bad.txt",
            &format!("noise\n{DOC_LINE}\n\n{bad}\n"),
        );
        match read_dumps(&file) {
            Err(DumpError::Parse {
                path,
                line,
                message,
            }) => {
                assert_eq!(path, file);
                assert_eq!(line, 4);
                assert!(message.contains("--transA"), "{message}");
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn non_utf8_is_read_lossily() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.bin");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"\xff\xfe garbage \x80\n").unwrap();
        f.write_all(DOC_LINE.as_bytes()).unwrap();
        f.write_all(b"\n").unwrap();
        drop(f);
        let sum = read_dumps(&path).unwrap();
        assert_eq!((sum.gemm_lines, sum.other_lines), (1, 1));
    }

    #[test]
    fn shapes_json_has_exactly_the_documented_fields() {
        let dir = tempfile::tempdir().unwrap();
        let file = write(dir.path(), "d.txt", &format!("{NEW_LINE}\n{NEW_LINE}\n"));
        let v = shapes_json(&read_dumps(&file).unwrap());
        assert_eq!(
            v,
            serde_json::json!({"shapes": [{
                "m": 2880, "n": 32768, "k": 4096, "trans_a": "T", "trans_b": "N",
                "a_type": "f8_r", "b_type": "f8_r", "c_type": "bf16_r", "d_type": "bf16_r",
                "compute_type": "f32_r", "batch_count": 1, "count": 2
            }]})
        );
    }

    #[test]
    fn render_line_round_trips_the_real_lines() {
        for line in [DOC_LINE, NEW_LINE] {
            let shape = parse_line(p(), 1, line).unwrap();
            assert_eq!(parse_line(p(), 1, &render_line(&shape)).unwrap(), shape);
        }
    }

    /// Option names that are not required keys, aliases or dropped keys.
    fn rest_key() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z][a-z_]{1,11}",
            "[a-zA-Z]",
            Just("scaleA".to_string()),
            Just("bias_vector".to_string()),
        ]
        .prop_filter("reserved key", |k| {
            !matches!(
                k.as_str(),
                "m" | "n"
                    | "k"
                    | "sizem"
                    | "sizen"
                    | "sizek"
                    | "batch_count"
                    | "algo_method"
                    | "solution_index"
            ) && !TEXT_KEYS.contains(&k.as_str())
        })
    }

    fn shape_strategy() -> impl Strategy<Value = GemmShape> {
        let value = prop_oneof![
            Just(String::new()),
            "[a-z0-9_.]{1,8}",
            (-1000i64..1000).prop_map(|v| v.to_string()),
            (-1.0e3f64..1.0e3).prop_map(|v| format!("{v:.6}")),
        ];
        let rest = prop::collection::vec((rest_key(), value), 0..12);
        (crate::gemm::gemm_strategy(), rest).prop_map(|(gemm, rest)| GemmShape { gemm, rest })
    }

    /// `render_line` with each single space replaced by 1-3 spaces or tabs, and padding.
    fn respace(line: &str, gaps: &[u8]) -> String {
        let mut out = String::from(" ");
        for (i, tok) in line.split(' ').enumerate() {
            if i > 0 {
                let g = gaps.get(i % gaps.len().max(1)).copied().unwrap_or(0);
                out.push_str(["  ", " ", "\t", " \t "][usize::from(g % 4)]);
            }
            out.push_str(tok);
        }
        out.push_str("  ");
        out
    }

    proptest! {
        #[test]
        fn rendered_lines_parse_back(
            shape in shape_strategy(),
            gaps in prop::collection::vec(any::<u8>(), 1..16),
            solution in proptest::option::of(0u32..1_000_000),
        ) {
            let mut line = respace(&render_line(&shape), &gaps);
            if let Some(sol) = solution {
                line.push_str(&format!(" --algo_method index --solution_index {sol}"));
            }
            prop_assert_eq!(parse_line(p(), 1, &line).unwrap(), shape);
        }

        #[test]
        fn counts_add_up(
            shapes in prop::collection::vec(shape_strategy(), 1..5),
            picks in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>()), 1..40),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut text = String::new();
            let mut want: std::collections::HashMap<GemmShape, u64> = Default::default();
            let mut noise = 0;
            for (pick, with_noise) in &picks {
                let shape = pick.get(&shapes);
                *want.entry(shape.clone()).or_default() += 1;
                text.push_str(&respace(&render_line(shape), &[pick.index(7) as u8]));
                text.push('\n');
                if *with_noise {
                    text.push_str("[hipblaslt] some other output\n");
                    noise += 1;
                }
            }
            let file = write(dir.path(), "d.txt", &text);
            let sum = read_dumps(&file).unwrap();
            prop_assert_eq!(sum.gemm_lines, picks.len() as u64);
            prop_assert_eq!(sum.other_lines, noise);
            prop_assert_eq!(sum.shapes.len(), want.len());
            for s in &sum.shapes {
                prop_assert_eq!(Some(&s.count), want.get(&s.shape));
            }
            for w in sum.shapes.windows(2) {
                prop_assert!(
                    w[0].count > w[1].count
                        || (w[0].count == w[1].count && w[0].shape < w[1].shape)
                );
            }
        }

        #[test]
        fn any_bench_line_never_panics(tail in ".{0,200}") {
            let _ = parse_line(p(), 1, &format!("hipblaslt-bench {tail}"));
        }

        #[test]
        fn token_soup_never_panics(
            toks in prop::collection::vec(
                prop_oneof![
                    Just("-m"), Just("-n"), Just("-k"), Just("--transA"), Just("--a_type"),
                    Just("--sizem"), Just("--bias_vector"), Just("-"), Just("--"), Just("-1"),
                    Just("N"), Just("12"), Just("f8_r"), Just("--solution_index"),
                ],
                0..40,
            )
        ) {
            let _ = parse_line(p(), 1, &format!("hipblaslt-bench {}", toks.join(" ")));
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("d.bin");
            let mut data = b"hipblaslt-bench ".to_vec();
            data.extend_from_slice(&bytes);
            data.push(b'\n');
            data.extend_from_slice(&bytes);
            std::fs::write(&path, &data).unwrap();
            let _ = read_dumps(&path);
        }
    }
}
