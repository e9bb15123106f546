//! Training-log line parsing: Megatron-LM / Primus iteration lines, Megatron's memory reports
//! and TorchTitan step lines, whatever prefix (loguru, torchrun `[defaultN]:`, `[rankN]:`) and
//! colouring the line carries.
//!
//! Nothing is anchored at the start of a line. An iteration line is found by the words
//! `iteration N/M |`; the rest of the line is split on `|` and each `key: value` segment is read
//! through an alias table, so the segment order, extra segments (MoE losses, energy, `num zeros`)
//! and the Primus rewrites of the Megatron segments (every era listed in the research notes)
//! all parse the same way. `X/Y` and `X (avg Y)` values give the instantaneous value and Primus'
//! running average.

use crate::domain::trial::{Iteration, LogEvent, MemoryReport, RunShape, TheoreticalMemory};
use regex::Regex;
use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

// ---------------------------------------------------------------------------------------------
// ANSI escape removal
// ---------------------------------------------------------------------------------------------

const ESC: u8 = 0x1b;

/// `s` without terminal escape sequences: CSI (`ESC [ … final`, also the 8-bit `U+009B` form),
/// OSC/DCS/SOS/PM/APC strings (ended by BEL or `ESC \`), character-set selections (`ESC ( B`)
/// and two-byte escapes. A lone trailing ESC is dropped. Borrows when there is nothing to remove.
pub fn strip_ansi(s: &str) -> Cow<'_, str> {
    let has_esc = s.contains('\x1b');
    let has_c1 = s.contains('\u{9b}');
    if !has_esc && !has_c1 {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut copied = 0; // start of the text not yet copied
    let mut i = 0;
    while i < b.len() {
        // Jump to the next candidate byte (word-at-a-time search when only ESC can occur).
        if !has_c1 {
            match s[i..].find('\x1b') {
                Some(rel) => i += rel,
                None => break,
            }
        }
        let end = if b[i] == ESC {
            escape_end(b, i + 1)
        } else if b[i] == 0xc2 && b.get(i + 1) == Some(&0x9b) {
            csi_end(b, i + 2)
        } else {
            i += 1;
            continue;
        };
        out.push_str(&s[copied..i]);
        i = end;
        copied = end;
    }
    out.push_str(&s[copied..]);
    Cow::Owned(out)
}

/// End (exclusive) of an escape sequence whose ESC byte precedes `i`. Every index returned lies
/// on a character boundary: sequences are made of ASCII bytes, and string sequences end after
/// an ASCII terminator or at the end of the text.
fn escape_end(b: &[u8], i: usize) -> usize {
    let Some(&c) = b.get(i) else {
        return i;
    };
    match c {
        b'[' => csi_end(b, i + 1),
        // OSC, DCS, SOS, PM, APC: a string up to BEL or ST (`ESC \`).
        b']' | b'P' | b'X' | b'^' | b'_' => {
            let mut j = i + 1;
            while j < b.len() {
                if b[j] == 0x07 {
                    return j + 1;
                }
                if b[j] == ESC {
                    return if b.get(j + 1) == Some(&b'\\') {
                        j + 2
                    } else {
                        j
                    };
                }
                j += 1;
            }
            j
        }
        // nF: intermediates then one final byte (`ESC ( B`).
        0x20..=0x2f => {
            let mut j = i;
            while j < b.len() && (0x20..=0x2f).contains(&b[j]) {
                j += 1;
            }
            if j < b.len() && (0x30..=0x7e).contains(&b[j]) {
                j + 1
            } else {
                j
            }
        }
        // Fe / Fp / Fs two-byte escapes.
        0x30..=0x7e => i + 1,
        _ => i,
    }
}

/// End of a CSI sequence whose introducer ends before `i`: parameter bytes, intermediate bytes,
/// one final byte (when the sequence is malformed, up to the last valid byte).
fn csi_end(b: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < b.len() && (0x30..=0x3f).contains(&b[j]) {
        j += 1;
    }
    while j < b.len() && (0x20..=0x2f).contains(&b[j]) {
        j += 1;
    }
    if j < b.len() && (0x40..=0x7e).contains(&b[j]) {
        j + 1
    } else {
        j
    }
}

// ---------------------------------------------------------------------------------------------
// Line parsing
// ---------------------------------------------------------------------------------------------

/// Words one of which every line of interest contains (checked on the raw line, before escapes
/// are removed: loguru colours whole lines and TorchTitan colours between fields, so the words
/// themselves are never split). One SIMD literal search rejects the other lines.
static CANDIDATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new("iteration|step:|Theoretical memory footprints").expect("static regex")
});

/// The event one log line carries, if any. Pure; accepts any prefix and ANSI colours.
///
/// Recognised: Megatron / Primus iteration lines (every Primus format era), Megatron's
/// `report_memory` line, `Theoretical memory footprints`, and TorchTitan's step line. Ignored
/// (among everything else): argument dumps, TorchTitan `validate step:` lines, evaluation lines,
/// and the word `iteration` inside other text.
pub fn parse_line(line: &str) -> Option<LogEvent> {
    if !CANDIDATE.is_match(line) {
        return None;
    }
    let clean = strip_ansi(line);
    parse_clean(&clean)
}

fn parse_clean(s: &str) -> Option<LogEvent> {
    if s.contains("iteration") {
        if let Some(it) = parse_megatron_iteration(s) {
            return Some(LogEvent::Iteration(it));
        }
        if let Some(m) = parse_memory_report(s) {
            return Some(LogEvent::Memory(m));
        }
    }
    if s.contains("step:")
        && let Some(it) = parse_titan_step(s)
    {
        return Some(LogEvent::Iteration(it));
    }
    parse_theoretical(s).map(LogEvent::Theoretical)
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// A tiny byte cursor for the fixed parts of the formats.
struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str, pos: usize) -> Self {
        Cursor {
            b: s.as_bytes(),
            pos,
        }
    }

    /// Skips spaces and tabs; returns how many.
    fn skip_ws(&mut self) -> usize {
        let start = self.pos;
        while self.pos < self.b.len() && matches!(self.b[self.pos], b' ' | b'\t') {
            self.pos += 1;
        }
        self.pos - start
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.pos) == Some(&c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// An unsigned decimal integer (no sign, no separators), `None` on overflow or no digit.
    fn uint(&mut self) -> Option<u64> {
        let start = self.pos;
        let mut v: u64 = 0;
        while self.pos < self.b.len() && self.b[self.pos].is_ascii_digit() {
            v = v
                .checked_mul(10)?
                .checked_add(u64::from(self.b[self.pos] - b'0'))?;
            self.pos += 1;
        }
        (self.pos > start).then_some(v)
    }

    fn at_end(&self) -> bool {
        self.pos >= self.b.len()
    }
}

/// Where Megatron's `iteration N/M |` header is in `s`: (start of the word, N, M, end of the
/// header). The word must not be part of a longer identifier, and `|` or the end of the line
/// must follow the numbers.
fn iteration_header(s: &str) -> Option<(usize, u64, u64, usize)> {
    const WORD: &str = "iteration";
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(rel) = s[from..].find(WORD) {
        let at = from + rel;
        from = at + WORD.len();
        if at > 0 && is_word_byte(bytes[at - 1]) {
            continue; // `current_iteration`, `start_iteration`
        }
        let mut c = Cursor::new(s, from);
        if c.skip_ws() == 0 {
            continue; // `iterations`, `iteration:`
        }
        let Some(n) = c.uint() else { continue };
        c.skip_ws();
        if !c.eat(b'/') {
            continue;
        }
        c.skip_ws();
        let Some(m) = c.uint() else { continue };
        c.skip_ws();
        if !(c.at_end() || c.eat(b'|')) {
            continue;
        }
        return Some((at, n, m, c.pos));
    }
    None
}

/// `iteration N/M |` followed by `|`-separated segments.
fn parse_megatron_iteration(s: &str) -> Option<Iteration> {
    let (at, n, m, end) = iteration_header(s)?;
    let mut it = Iteration {
        iteration: n,
        train_iters: Some(m),
        timestamp: find_timestamp(&s[..at]),
        ..Iteration::default()
    };
    for seg in s[end..].split('|') {
        apply_segment(&mut it, seg);
    }
    Some(it)
}

/// The iteration number when `line` is an iteration line (Megatron/Primus or TorchTitan),
/// without reading its fields.
pub(crate) fn iteration_number(line: &str) -> Option<u64> {
    if line.contains("iteration") {
        let clean = strip_ansi(line);
        if let Some((_, n, _, _)) = iteration_header(&clean) {
            return Some(n);
        }
    }
    if line.contains("step:") {
        return parse_titan_step(&strip_ansi(line)).map(|it| it.iteration);
    }
    None
}

/// What a segment key means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Elapsed,
    Tflops,
    Tokens,
    LearningRate,
    GlobalBatch,
    LmLoss,
    Loss,
    GradNorm,
    Skipped,
    Nan,
    HipMem,
    RocmMem,
    RocmMax(Option<u32>),
    MemFraction,
    Mfu,
    Other,
}

/// Maps a segment key (case and spacing ignored) to its meaning.
fn classify_key(key: &str) -> Key {
    // Lower-case with single spaces into a stack buffer; every known key is short ASCII.
    let mut buf = [0u8; 64];
    let mut n = 0;
    let mut space = false;
    for &c in key.trim().as_bytes() {
        if c.is_ascii_whitespace() {
            space = true;
            continue;
        }
        if !c.is_ascii() || n + 2 > buf.len() {
            return Key::Other;
        }
        if space && n > 0 {
            buf[n] = b' ';
            n += 1;
        }
        space = false;
        buf[n] = c.to_ascii_lowercase();
        n += 1;
    }
    let Ok(k) = std::str::from_utf8(&buf[..n]) else {
        return Key::Other;
    };
    match k {
        "learning rate" => return Key::LearningRate,
        "global batch size" => return Key::GlobalBatch,
        "lm loss" => return Key::LmLoss,
        "loss" => return Key::Loss,
        "grad norm" => return Key::GradNorm,
        "number of skipped iterations" => return Key::Skipped,
        "number of nan iterations" => return Key::Nan,
        "mem usages" => return Key::MemFraction,
        "mfu" => return Key::Mfu,
        _ => {}
    }
    if k.starts_with("elapsed time per iteration") {
        Key::Elapsed
    } else if k.contains("tflop") {
        // `throughput per GPU (TFLOP/s/GPU)`, `compute per GPU (TFLOP/s/GPU)`, `TFLOP/s/GPU`.
        Key::Tflops
    } else if k.starts_with("tokens per gpu") || k.starts_with("tokens/s/gpu") {
        // `tokens per GPU (tokens/s/GPU)`, `tokens/s/GPU inst/harmonic mean`.
        Key::Tokens
    } else if k.starts_with("hip mem usage") {
        Key::HipMem
    } else if k.starts_with("rocm mem usage") {
        Key::RocmMem
    } else if let Some(rest) = k.strip_prefix("rank-")
        && k.contains("max mem usage")
    {
        // `rank-R rocm max mem usage/usage_ratio` (v0.5/v0.6: `rank-R max mem usage/...`).
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        Key::RocmMax(rest[..digits].parse().ok())
    } else {
        Key::Other
    }
}

/// Reads one `key: value` segment into `it`.
fn apply_segment(it: &mut Iteration, seg: &str) {
    let Some(colon) = seg.find(':') else { return };
    let key = classify_key(&seg[..colon]);
    let val = seg[colon + 1..].trim();
    match key {
        Key::Elapsed => (it.elapsed_ms, it.elapsed_avg_ms) = inst_avg(val),
        Key::Tflops => (it.tflops_per_gpu, it.tflops_avg_per_gpu) = inst_avg(val),
        Key::Tokens => (it.tokens_per_s_per_gpu, it.tokens_avg_per_s_per_gpu) = inst_avg(val),
        Key::LearningRate => it.learning_rate = number(val),
        Key::GlobalBatch => it.global_batch_size = integer(val),
        Key::LmLoss => it.loss = number(val),
        Key::Loss => {
            if it.loss.is_none() {
                it.loss = number(val);
            }
        }
        Key::GradNorm => it.grad_norm = number(val),
        Key::Skipped => it.skipped_iterations = integer(val),
        Key::Nan => it.nan_iterations = integer(val),
        Key::HipMem => {
            // used/free/total/ratio
            let mut parts = val.split('/');
            it.mem_used_gib = parts.next().and_then(gib);
            let _free = parts.next();
            it.mem_total_gib = parts.next().and_then(gib);
            it.mem_used_pct = parts.next().and_then(number);
        }
        Key::RocmMem => {
            let mut parts = val.split('/');
            it.rocm_mem_used_gib = parts.next().and_then(gib);
            let _free = parts.next();
            it.rocm_mem_total_gib = parts.next().and_then(gib);
        }
        Key::RocmMax(rank) => {
            it.rocm_max_mem_used_gib = val.split('/').next().and_then(gib);
            it.rocm_max_mem_rank = rank;
        }
        Key::MemFraction => it.mem_usage_fraction = number(val),
        Key::Mfu => it.mfu_pct = number(val),
        Key::Other => {}
    }
}

/// `X`, `X/Y` or `X (avg Y)` → (instantaneous, average).
fn inst_avg(val: &str) -> (Option<f64>, Option<f64>) {
    if let Some(p) = val.find("(avg") {
        let avg = val[p + 4..].trim_start();
        let avg = avg.split(')').next().unwrap_or(avg);
        return (number(&val[..p]), number(avg));
    }
    match val.split_once('/') {
        Some((a, b)) => (number(a), number(b)),
        None => (number(val), None),
    }
}

/// A decimal number as Python prints it: `221.2`, `9.865873E+00`, `1,234.56`, `78.19%`, with
/// an optional unit (`ms`, `GB`, `GiB`, `%` …) after it. `nan`/`inf` are read as such.
fn number(s: &str) -> Option<f64> {
    let s = s.trim();
    let end = s
        .bytes()
        .position(|c| !(c.is_ascii_digit() || matches!(c, b'.' | b'+' | b'-' | b'e' | b'E' | b',')))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    if num.is_empty() {
        let lower = unit.trim_end_matches('%').trim();
        return if lower.eq_ignore_ascii_case("nan") || lower.eq_ignore_ascii_case("inf") {
            lower.parse().ok()
        } else {
            None
        };
    }
    if num.contains(',') {
        num.replace(',', "").parse().ok()
    } else {
        num.parse().ok()
    }
}

fn integer(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.contains(',') {
        s.replace(',', "").parse().ok()
    } else {
        s.parse().ok()
    }
}

/// A memory amount in GiB (`GB` and `G` as Primus prints them are GiB; `MB`/`MiB` and
/// `TB`/`TiB` are scaled).
fn gib(s: &str) -> Option<f64> {
    let s = s.trim();
    let v = number(s)?;
    let unit = s.trim_start_matches(|c: char| c.is_ascii_digit() || ".,+-eE".contains(c));
    let unit = unit.trim();
    let is = |names: [&str; 3]| names.iter().any(|n| unit.eq_ignore_ascii_case(n));
    Some(if is(["mb", "mib", "m"]) {
        v / 1024.0
    } else if is(["tb", "tib", "t"]) {
        v * 1024.0
    } else {
        v
    })
}

/// The wall-clock time printed in front of the payload: Megatron's `[YYYY-MM-DD HH:MM:SS(.f)]`
/// (the closest one to the payload), else loguru's `[YYYYMMDD HH:mm:ss]`.
fn find_timestamp(prefix: &str) -> Option<String> {
    let mut loguru = None;
    let mut end = prefix.len();
    while let Some(open) = prefix[..end].rfind('[') {
        end = open;
        let inner = &prefix[open + 1..];
        let Some(close) = inner.find(']') else {
            continue;
        };
        let inner = &inner[..close];
        if is_megatron_time(inner) {
            return Some(inner.to_string());
        }
        if is_loguru_time(inner) {
            loguru = Some(inner);
        }
    }
    loguru.map(str::to_string)
}

fn digits_at(b: &[u8], range: std::ops::Range<usize>) -> bool {
    b.get(range)
        .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
}

/// `YYYY-MM-DD HH:MM:SS` with optional `.ffffff`.
fn is_megatron_time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 19 {
        return false;
    }
    let shape = digits_at(b, 0..4)
        && b[4] == b'-'
        && digits_at(b, 5..7)
        && b[7] == b'-'
        && digits_at(b, 8..10)
        && b[10] == b' '
        && digits_at(b, 11..13)
        && b[13] == b':'
        && digits_at(b, 14..16)
        && b[16] == b':'
        && digits_at(b, 17..19);
    shape && (b.len() == 19 || (b[19] == b'.' && b.len() > 20 && digits_at(b, 20..b.len())))
}

/// `YYYYMMDD HH:mm:ss`.
fn is_loguru_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 17
        && digits_at(b, 0..8)
        && b[8] == b' '
        && digits_at(b, 9..11)
        && b[11] == b':'
        && digits_at(b, 12..14)
        && b[14] == b':'
        && digits_at(b, 15..17)
}

/// Megatron `report_memory`: `[Rank R] (after N iterations) memory (MB) | allocated: … | …`.
fn parse_memory_report(s: &str) -> Option<MemoryReport> {
    const HEAD: &str = "memory (MB)";
    let pos = s.find(HEAD)?;
    let head = &s[..pos];
    let after = head.rfind("(after ")?;
    let mut c = Cursor::new(head, after + "(after ".len());
    let iters = c.uint()?;
    c.skip_ws();
    if !head[c.pos..].starts_with("iteration") {
        return None;
    }
    let rank = match head[..after].rfind("[Rank ") {
        Some(r) => Cursor::new(head, r + "[Rank ".len()).uint()?,
        None => 0,
    };
    let mut m = MemoryReport {
        rank: u32::try_from(rank).ok()?,
        after_iterations: iters,
        ..MemoryReport::default()
    };
    let mut any = false;
    for seg in s[pos + HEAD.len()..].split('|') {
        let Some((k, v)) = seg.split_once(':') else {
            continue;
        };
        let slot = match k.trim() {
            "allocated" => &mut m.allocated_mb,
            "max allocated" => &mut m.max_allocated_mb,
            "reserved" => &mut m.reserved_mb,
            "max reserved" => &mut m.max_reserved_mb,
            _ => continue,
        };
        if let Some(v) = number(v) {
            *slot = v;
            any = true;
        }
    }
    any.then_some(m)
}

/// `Theoretical memory footprints: weight and optimizer=X MB, activation=Y MB, total=Z MB`
/// (activation and total are absent in some Megatron versions).
fn parse_theoretical(s: &str) -> Option<TheoreticalMemory> {
    const HEAD: &str = "Theoretical memory footprints:";
    let pos = s.find(HEAD)?;
    let mut weight = None;
    let mut t = TheoreticalMemory::default();
    for part in s[pos + HEAD.len()..].split(',') {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        let v = number(v);
        match k.trim() {
            "weight and optimizer" => weight = v,
            "activation" => t.activation_mb = v,
            "total" => t.total_mb = v,
            _ => {}
        }
    }
    t.weight_and_optimizer_mb = weight?;
    Some(t)
}

/// Words that, right before `step:`, mark a line that is not a training step.
const NOT_A_TRAINING_STEP: [&str; 7] = [
    "validate",
    "validation",
    "val",
    "eval",
    "evaluation",
    "completed",
    "test",
];

/// TorchTitan: `step: N  loss: L  grad_norm: G  memory: XGiB(Y%)  tps: T  tflops: F  mfu: Z%`
/// (fields after `loss` optional; `loss` required so other `step:` lines are not taken).
fn parse_titan_step(s: &str) -> Option<Iteration> {
    const WORD: &str = "step:";
    let bytes = s.as_bytes();
    let mut from = 0;
    while let Some(rel) = s[from..].find(WORD) {
        let at = from + rel;
        from = at + WORD.len();
        if at > 0 && is_word_byte(bytes[at - 1]) {
            continue;
        }
        let before = s[..at].trim_end();
        let prev = before.rsplit(char::is_whitespace).next().unwrap_or("");
        if NOT_A_TRAINING_STEP
            .iter()
            .any(|w| prev.eq_ignore_ascii_case(w))
        {
            continue;
        }
        let mut toks = s[from..].split_ascii_whitespace();
        let Some(step) = toks.next().and_then(|t| t.parse::<u64>().ok()) else {
            continue;
        };
        let mut it = Iteration {
            iteration: step,
            ..Iteration::default()
        };
        let mut has_loss = false;
        while let Some(tok) = toks.next() {
            let (key, val) = match tok.strip_suffix(':') {
                Some(k) => match toks.next() {
                    Some(v) => (k, v),
                    None => break,
                },
                None => match tok.split_once(':') {
                    Some(kv) => kv,
                    None => continue,
                },
            };
            match key {
                "loss" => {
                    has_loss = true;
                    it.loss = number(val);
                }
                "grad_norm" => it.grad_norm = number(val),
                "memory" => {
                    let (amount, pct) = val.split_once('(').unwrap_or((val, ""));
                    it.mem_used_gib = gib(amount);
                    it.mem_used_pct = number(pct);
                }
                "tps" | "wps" => it.tokens_per_s_per_gpu = number(val),
                "tflops" => it.tflops_per_gpu = number(val),
                "mfu" => it.mfu_pct = number(val),
                _ => {}
            }
        }
        if !has_loss {
            continue;
        }
        it.timestamp = find_timestamp(&s[..at]);
        return Some(it);
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Stateful parser
// ---------------------------------------------------------------------------------------------

/// Feeds a log line by line: removes colours and carriage-return overwrites, and drops repeats.
///
/// Repeats: single-node Primus runs print every iteration line twice (the last rank's line is
/// broadcast to rank 0 and logged there too), so an iteration whose number is not above the last
/// one emitted is dropped. A memory report of a (rank, iteration) already seen, and a theoretical
/// footprint equal to the previous one (Megatron prints it after each of the first iterations),
/// are dropped as well.
#[derive(Debug, Clone, Default)]
pub struct LogParser {
    /// The run's shape: an iteration line without a step time (TorchTitan's) is timed by its
    /// tokens per second ([`Iteration::timed_by_tokens`]).
    shape: Option<RunShape>,
    last_iteration: Option<u64>,
    last_theoretical: Option<TheoreticalMemory>,
    memory_seen: HashSet<(u32, u64)>,
}

impl LogParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that times TorchTitan's iterations (no step time printed) by `shape`.
    pub fn with_shape(shape: Option<RunShape>) -> Self {
        Self {
            shape,
            ..Self::default()
        }
    }

    /// The events of one line (at most one today; a `Vec` so a format may yield more).
    /// A trailing newline is ignored; with `\r` inside the line only the text after the last
    /// one counts (what a terminal would show).
    pub fn feed(&mut self, line: &str) -> Vec<LogEvent> {
        let line = line.trim_end_matches(['\n', '\r']);
        let line = match line.rfind('\r') {
            Some(p) => &line[p + 1..],
            None => line,
        };
        // Repeats are common (every line twice on single-node Primus runs): the header alone
        // tells a stale Megatron iteration line, before any field is read. The header never
        // contains colour codes, so the raw line will do.
        if let (Some(last), Some((_, n, _, _))) = (self.last_iteration, iteration_header(line))
            && n <= last
        {
            return Vec::new();
        }
        let ev = match parse_line(line) {
            Some(LogEvent::Iteration(it)) => LogEvent::Iteration(it.timed_by_tokens(self.shape)),
            Some(ev) => ev,
            None => return Vec::new(),
        };
        let keep = match &ev {
            LogEvent::Iteration(it) => {
                let fresh = self.last_iteration.is_none_or(|last| it.iteration > last);
                if fresh {
                    self.last_iteration = Some(it.iteration);
                }
                fresh
            }
            LogEvent::Memory(m) => self.memory_seen.insert((m.rank, m.after_iterations)),
            LogEvent::Theoretical(t) => {
                let fresh = self.last_theoretical.as_ref() != Some(t);
                if fresh {
                    self.last_theoretical = Some(t.clone());
                }
                fresh
            }
        };
        if keep { vec![ev] } else { Vec::new() }
    }

    /// [`feed`](Self::feed) for raw bytes of one line (invalid UTF-8 is replaced).
    pub fn feed_bytes(&mut self, line: &[u8]) -> Vec<LogEvent> {
        self.feed(&String::from_utf8_lossy(line))
    }

    /// The highest iteration number emitted so far.
    pub fn last_iteration(&self) -> Option<u64> {
        self.last_iteration
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn iter(line: &str) -> Iteration {
        match parse_line(line) {
            Some(LogEvent::Iteration(it)) => it,
            other => panic!("no iteration in {line:?}: {other:?}"),
        }
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9 * b.abs().max(1.0))
    }

    // Lines written from the Megatron / Primus format strings (research notes §3).

    /// Megatron upstream, microsecond timestamp, leading space, trailing `|`.
    const MEGATRON: &str = " [2026-11-29 23:00:16.397649] iteration        3/      30 | consumed samples:           48 | elapsed time per iteration (ms): 176.8 | throughput per GPU (TFLOP/s/GPU): 101.8 | learning rate: 9.000000E-05 | global batch size:    16 | lm loss: 9.870974E+00 | loss scale: 1.0 | grad norm: 1.673 | number of skipped iterations:   0 | number of nan iterations:   0 |";

    /// Primus HEAD (compute/avg, tokens glued in the TFLOP segment, hip+rocm memory last).
    const PRIMUS_HEAD: &str = "[2026-08-22 10:11:12.345678] iteration        5/      50 | consumed samples:         1280 | elapsed time per iteration (ms): 6046.6/6051.2 | compute per GPU (TFLOP/s/GPU): 412.3 (avg 411.9)  | tokens/s/GPU inst/harmonic mean: 21673.2/21656.8 | learning rate: 5.000000E-06 | global batch size:   256 | lm loss: 1.189062E+01 | loss scale: 1.0 | grad norm: 7.499 | number of skipped iterations:   0 | number of nan iterations:   0 | hip mem usage/free/total/usage_ratio: 150.12GB/41.87GB/191.98GB/78.19%  | rocm mem usage/free/total/usage_ratio: 151.00GB/40.98GB/191.98GB/78.65% | rank-5 rocm max mem usage/usage_ratio: 152.30GB/79.33%";

    /// Primus warm-up line (raw Megatron segments, no tokens segment).
    const PRIMUS_WARMUP: &str = "[2026-08-22 10:10:40.001234] iteration        1/      50 | consumed samples:          256 | elapsed time per iteration (ms): 25012.3 | throughput per GPU (TFLOP/s/GPU): 99.7 | learning rate: 1.000000E-06 | global batch size:   256 | lm loss: 1.190112E+01 | loss scale: 1.0 | grad norm: 9.812 | number of skipped iterations:   0 | number of nan iterations:   0 | hip mem usage/free/total/usage_ratio: 150.02GB/41.97GB/191.98GB/78.14%  | rocm mem usage/free/total/usage_ratio: 150.90GB/41.08GB/191.98GB/78.60% | rank-5 rocm max mem usage/usage_ratio: 152.10GB/79.23%";

    #[test]
    fn megatron_upstream_line() {
        let it = iter(MEGATRON);
        assert_eq!(it.iteration, 3);
        assert_eq!(it.train_iters, Some(30));
        assert_eq!(it.elapsed_ms, Some(176.8));
        assert_eq!(it.elapsed_avg_ms, None);
        assert_eq!(it.tflops_per_gpu, Some(101.8));
        assert_eq!(it.tflops_avg_per_gpu, None);
        assert_eq!(it.tokens_per_s_per_gpu, None);
        assert!(close(it.learning_rate, 9e-5));
        assert_eq!(it.global_batch_size, Some(16));
        assert!(close(it.loss, 9.870974));
        assert_eq!(it.grad_norm, Some(1.673));
        assert_eq!(it.skipped_iterations, Some(0));
        assert_eq!(it.nan_iterations, Some(0));
        assert_eq!(it.mem_used_gib, None);
        assert_eq!(it.timestamp.as_deref(), Some("2026-11-29 23:00:16.397649"));
    }

    #[test]
    fn megatron_old_timestamp_without_microseconds_and_moe_losses() {
        // NVIDIA/Megatron-LM issue #756 shape: no microseconds, extra loss and num zeros.
        let line = "[2024-04-06 02:55:45] iteration        2/     100 | consumed samples:          256 | elapsed time per iteration (ms): 5630.1 | throughput per GPU (TFLOP/s/GPU): 231.9 | learning rate: 4.000000E-07 | global batch size:   128 | lm loss: 2.021530E+00 | load_balancing_loss: 1.087362E+00 | loss scale: 1.0 | grad norm: 6.895 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |";
        let it = iter(line);
        assert_eq!((it.iteration, it.train_iters), (2, Some(100)));
        assert_eq!(it.timestamp.as_deref(), Some("2024-04-06 02:55:45"));
        assert!(close(it.loss, 2.02153));
        assert_eq!(it.tflops_per_gpu, Some(231.9));
        assert_eq!(it.global_batch_size, Some(128));
    }

    #[test]
    fn megatron_skipped_samples_energy_and_no_learning_rate() {
        let line = " [2026-01-02 03:04:05.000001] iteration      100/    1000 | consumed samples:        25600 | skipped samples:           12 | elapsed time per iteration (ms): 812.5 | throughput per GPU (TFLOP/s/GPU): 301.0 | energy per GPU (J/iter/GPU): 512.3 | power per GPU (W/GPU): 630.5 | global batch size:   256 | lm loss: 2.69535e+06 | mtp_1 loss: 3.100000E+00 | loss scale: 1.0 | grad norm: 0.912 | params norm: 301.221 | number of skipped iterations:   1 | number of nan iterations:   2 |";
        let it = iter(line);
        assert_eq!(it.learning_rate, None);
        assert!(close(it.loss, 2.69535e6));
        assert_eq!(it.skipped_iterations, Some(1));
        assert_eq!(it.nan_iterations, Some(2));
        assert_eq!(it.elapsed_ms, Some(812.5));
    }

    #[test]
    fn primus_head_format() {
        let it = iter(PRIMUS_HEAD);
        assert_eq!((it.iteration, it.train_iters), (5, Some(50)));
        assert_eq!(it.elapsed_ms, Some(6046.6));
        assert_eq!(it.elapsed_avg_ms, Some(6051.2));
        assert_eq!(it.tflops_per_gpu, Some(412.3));
        assert_eq!(it.tflops_avg_per_gpu, Some(411.9));
        assert_eq!(it.tokens_per_s_per_gpu, Some(21673.2));
        assert_eq!(it.tokens_avg_per_s_per_gpu, Some(21656.8));
        assert!(close(it.loss, 11.89062));
        assert_eq!(it.grad_norm, Some(7.499));
        assert_eq!(it.mem_used_gib, Some(150.12));
        assert_eq!(it.mem_total_gib, Some(191.98));
        assert_eq!(it.mem_used_pct, Some(78.19));
        assert_eq!(it.rocm_mem_used_gib, Some(151.0));
        assert_eq!(it.rocm_mem_total_gib, Some(191.98));
        assert_eq!(it.rocm_max_mem_used_gib, Some(152.3));
        assert_eq!(it.rocm_max_mem_rank, Some(5));
        assert_eq!(it.mem_usage_fraction, None);
    }

    #[test]
    fn primus_warmup_line_has_raw_segments() {
        let it = iter(PRIMUS_WARMUP);
        assert_eq!(it.iteration, 1);
        assert_eq!(it.elapsed_ms, Some(25012.3));
        assert_eq!(it.elapsed_avg_ms, None);
        assert_eq!(it.tflops_per_gpu, Some(99.7));
        assert_eq!(it.tokens_per_s_per_gpu, None);
        assert_eq!(it.mem_used_gib, Some(150.02));
        assert_eq!(it.timestamp.as_deref(), Some("2026-08-22 10:10:40.001234"));
    }

    #[test]
    fn primus_tokens_glued_inside_the_tflop_segment() {
        // `f"{segment} " f" | tokens/s/GPU inst/harmonic mean: …"` with the compute segment.
        let seg = "compute per GPU (TFLOP/s/GPU): 412.3 (avg 411.9)";
        let glued = format!("{seg}  | tokens/s/GPU inst/harmonic mean: 21673.2/21656.8");
        let line = format!(
            "[2026-08-22 10:11:12.345678] iteration        5/      50 | elapsed time per iteration (ms): 6046.6/6051.2 | {glued} | lm loss: 1.189062E+01"
        );
        let it = iter(&line);
        assert_eq!(it.tflops_per_gpu, Some(412.3));
        assert_eq!(it.tflops_avg_per_gpu, Some(411.9));
        assert_eq!(it.tokens_per_s_per_gpu, Some(21673.2));
        assert_eq!(it.tokens_avg_per_s_per_gpu, Some(21656.8));
    }

    #[test]
    fn primus_old_trainer_no_timestamp_legacy_mem_usages() {
        // ≤ Aug-2025: no timestamp, `mem usages` (fraction) between elapsed and throughput.
        let line = " iteration       10/     100 | consumed samples:         2560 | elapsed time per iteration (ms): 6046.6/6051.2 | mem usages: 0.7819 | throughput per GPU (TFLOP/s/GPU): 412.3/411.9 | tokens per GPU (tokens/s/GPU): 21673.2/21656.8 | learning rate: 5.000000E-06 | global batch size:   256 | lm loss: 1.189062E+01 | loss scale: 1.0 | grad norm: 7.499 | number of skipped iterations:   0 | number of nan iterations:   0 |";
        let it = iter(line);
        assert_eq!(it.timestamp, None);
        assert_eq!(it.mem_usage_fraction, Some(0.7819));
        assert_eq!(it.mem_used_gib, None);
        assert_eq!(it.elapsed_avg_ms, Some(6051.2));
        assert_eq!(
            (it.tflops_per_gpu, it.tflops_avg_per_gpu),
            (Some(412.3), Some(411.9))
        );
        assert_eq!(
            (it.tokens_per_s_per_gpu, it.tokens_avg_per_s_per_gpu),
            (Some(21673.2), Some(21656.8))
        );
    }

    #[test]
    fn primus_v05_gib_memory_between_elapsed_and_throughput() {
        // v0.5.0 / v0.6.0: `GiB` units, `rank-R max mem usage` without `rocm`.
        let line = " iteration       12/     100 | consumed samples:         3072 | elapsed time per iteration (ms): 6046.6/6051.2 | hip mem usage/free/total/usage_ratio: 150.12GiB/41.87GiB/191.98GiB/78.19% | rocm mem usage/free/total/usage_ratio: 151.00GiB/40.98GiB/191.98GiB/78.65% | rank-3 max mem usage/usage_ratio: 152.30GiB/79.33% | throughput per GPU (TFLOP/s/GPU): 412.3/411.9 | tokens per GPU (tokens/s/GPU): 21673.2/21656.8 | learning rate: 5.000000E-06 | global batch size:   256 | lm loss: 1.189062E+01 |";
        let it = iter(line);
        assert_eq!(it.mem_used_gib, Some(150.12));
        assert_eq!(it.mem_total_gib, Some(191.98));
        assert_eq!(it.mem_used_pct, Some(78.19));
        assert_eq!(it.rocm_mem_used_gib, Some(151.0));
        assert_eq!(it.rocm_max_mem_used_gib, Some(152.3));
        assert_eq!(it.rocm_max_mem_rank, Some(3));
        assert_eq!(it.tokens_per_s_per_gpu, Some(21673.2));
    }

    #[test]
    fn primus_v07_raw_elapsed_and_throughput_avg_with_tokens_per_gpu() {
        let line = "[2026-01-22 08:00:00.123456] iteration       20/     100 | consumed samples:         5120 | elapsed time per iteration (ms): 6046.6 | throughput per GPU (TFLOP/s/GPU): 412.3/411.9  | tokens per GPU (tokens/s/GPU): 21673.2/21656.8 | learning rate: 5.000000E-06 | global batch size:   256 | lm loss: 1.189062E+01 | loss scale: 1.0 | grad norm: 7.499 | number of skipped iterations:   0 | number of nan iterations:   0 | hip mem usage/free/total/usage_ratio: 150.12GB/41.87GB/191.98GB/78.19%";
        let it = iter(line);
        assert_eq!((it.elapsed_ms, it.elapsed_avg_ms), (Some(6046.6), None));
        assert_eq!(it.tflops_avg_per_gpu, Some(411.9));
        assert_eq!(it.tokens_avg_per_s_per_gpu, Some(21656.8));
        assert_eq!(it.rocm_mem_used_gib, None);
    }

    #[test]
    fn primus_v26_2_to_v26_4_and_v26_5_1_labels() {
        // v26.2 … v26.4: throughput X/AVG + tokens per GPU; v26.5.1: throughput X/AVG + harmonic.
        for tokens in [
            "tokens per GPU (tokens/s/GPU): 100.5/99.5",
            "tokens/s/GPU inst/harmonic mean: 100.5/99.5",
        ] {
            let line = format!(
                "[2026-07-23 01:02:03.000000] iteration        7/      50 | elapsed time per iteration (ms): 10.0/11.0 | throughput per GPU (TFLOP/s/GPU): 300.0/301.5  | {tokens} | lm loss: 2.000000E+00 | hip mem usage/free/total/usage_ratio: 1.00GB/2.00GB/3.00GB/33.33%"
            );
            let it = iter(&line);
            assert_eq!(it.elapsed_avg_ms, Some(11.0));
            assert_eq!(it.tflops_avg_per_gpu, Some(301.5));
            assert_eq!(it.tokens_per_s_per_gpu, Some(100.5));
            assert_eq!(it.tokens_avg_per_s_per_gpu, Some(99.5));
        }
    }

    #[test]
    fn doc_snippet_bare_tflop_key() {
        let it = iter(
            " iteration  4700/ 4768 | elapsed time per iteration (ms): 1460.8/1450.4 | TFLOP/s/GPU: 633.7 | tokens per GPU (tokens/s/GPU): 180743.2 | lm loss: 3.3632",
        );
        assert_eq!((it.iteration, it.train_iters), (4700, Some(4768)));
        assert_eq!(it.tflops_per_gpu, Some(633.7));
        assert_eq!(it.tokens_per_s_per_gpu, Some(180743.2));
        assert_eq!(it.loss, Some(3.3632));
    }

    #[test]
    fn loguru_prefix_torchrun_prefix_and_ansi() {
        let plain = format!(
            "[20260822 10:11:12][rank-7/8][DEBUG]    [----------------utils.py:123] : {PRIMUS_HEAD}"
        );
        assert_eq!(iter(&plain), iter(PRIMUS_HEAD));
        let coloured = format!(
            "\x1b[32m[20260822 10:11:12]\x1b[0m\x1b[36m[rank-7/8]\x1b[0m\x1b[34m[DEBUG]    \x1b[0m\x1b[36m[----utils.py:123]\x1b[0m : \x1b[34m{PRIMUS_HEAD}\x1b[0m"
        );
        assert_eq!(iter(&coloured), iter(PRIMUS_HEAD));
        let torchrun = format!("[default7]:{MEGATRON}");
        assert_eq!(iter(&torchrun), iter(MEGATRON));
    }

    #[test]
    fn loguru_timestamp_when_megatron_printed_none() {
        let line = "[20250801 10:11:12][rank-7/8][DEBUG]    [----trainer.py:42] :  iteration        2/      10 | elapsed time per iteration (ms): 5.0/5.0 |";
        assert_eq!(iter(line).timestamp.as_deref(), Some("20250801 10:11:12"));
    }

    #[test]
    fn numbers_in_every_notation() {
        assert_eq!(number("9.865873E+00"), Some(9.865873));
        assert_eq!(number("2.69535e+06"), Some(2.69535e6));
        assert_eq!(number("1,234.56"), Some(1234.56));
        assert_eq!(number(" 78.19% "), Some(78.19));
        assert_eq!(number("150.12GB"), Some(150.12));
        assert!(number("nan").is_some_and(f64::is_nan));
        assert_eq!(number("abc"), None);
        assert_eq!(number(""), None);
        assert_eq!(gib("512MB"), Some(0.5));
        assert_eq!(gib("2TiB"), Some(2048.0));
        assert_eq!(integer("1,024"), Some(1024));
        assert_eq!(inst_avg("412.3 (avg 411.9)"), (Some(412.3), Some(411.9)));
        assert_eq!(inst_avg("1/2"), (Some(1.0), Some(2.0)));
    }

    #[test]
    fn memory_report_line() {
        let line = "[Rank 0] (after 10 iterations) memory (MB) | allocated: 2041.24 | max allocated: 9806.31 | reserved: 10214.00 | max reserved: 10214.00";
        let Some(LogEvent::Memory(m)) = parse_line(line) else {
            panic!("no memory report");
        };
        assert_eq!(
            m,
            MemoryReport {
                rank: 0,
                after_iterations: 10,
                allocated_mb: 2041.24,
                max_allocated_mb: 9806.31,
                reserved_mb: 10214.0,
                max_reserved_mb: 10214.0,
            }
        );
        let Some(LogEvent::Memory(m)) = parse_line(
            "[default3]:\x1b[0m[Rank 13] (after 1 iterations) memory (MB) | allocated: 1.5 | max allocated: 2.5 | reserved: 3 | max reserved: 4",
        ) else {
            panic!("no memory report");
        };
        assert_eq!(
            (m.rank, m.after_iterations, m.max_reserved_mb),
            (13, 1, 4.0)
        );
    }

    #[test]
    fn theoretical_memory_full_and_short() {
        let full = "Theoretical memory footprints: weight and optimizer=1426.82 MB, activation=1692.67 MB, total=3119.48 MB";
        assert_eq!(
            parse_line(full),
            Some(LogEvent::Theoretical(TheoreticalMemory {
                weight_and_optimizer_mb: 1426.82,
                activation_mb: Some(1692.67),
                total_mb: Some(3119.48),
            }))
        );
        let short = "[20260822 10:11:12][rank-0/8][INFO]     [----training.py:9] : Theoretical memory footprints: weight and optimizer=81234.50 MB";
        assert_eq!(
            parse_line(short),
            Some(LogEvent::Theoretical(TheoreticalMemory {
                weight_and_optimizer_mb: 81234.5,
                activation_mb: None,
                total_mb: None,
            }))
        );
    }

    const TITAN: &str = "[20260822 10:11:12][rank-0/8][INFO]     \x1b[31mstep: 10  \x1b[32mloss:  3.24510  \x1b[38;2;180;60;0mgrad_norm:  1.2345  \x1b[38;2;54;234;195mmemory: 45.67GiB(48.00%)  \x1b[34mtps: 6,759  \x1b[36mtflops: 1,234.56  \x1b[35mmfu: 39.61%\x1b[39m";

    #[test]
    fn torchtitan_step_line() {
        let it = iter(TITAN);
        assert_eq!(it.iteration, 10);
        assert_eq!(it.train_iters, None);
        assert_eq!(it.loss, Some(3.2451));
        assert_eq!(it.grad_norm, Some(1.2345));
        assert_eq!(it.mem_used_gib, Some(45.67));
        assert_eq!(it.mem_used_pct, Some(48.0));
        assert_eq!(it.tokens_per_s_per_gpu, Some(6759.0));
        assert_eq!(it.tflops_per_gpu, Some(1234.56));
        assert_eq!(it.mfu_pct, Some(39.61));
        assert_eq!(it.timestamp.as_deref(), Some("20260822 10:11:12"));
    }

    #[test]
    fn a_parser_with_the_runs_shape_times_torchtitan_steps_by_tokens_per_second() {
        let shape = RunShape {
            seq_length: 8192,
            global_batch_size: 8,
            world_size: 8,
        };
        let timed = |mut p: LogParser| match p.feed(TITAN).pop() {
            Some(LogEvent::Iteration(it)) => it.elapsed_ms,
            other => panic!("{other:?}"),
        };
        let ms = timed(LogParser::with_shape(Some(shape))).unwrap();
        assert!((ms - 8192.0 / 6759.0 * 1e3).abs() < 1e-9, "{ms}");
        assert_eq!(timed(LogParser::new()), None, "no shape, no time made up");
    }

    #[test]
    fn torchtitan_older_and_plain_forms() {
        // Older torchtitan: no grad_norm, `{:7.4f}` loss, colour printing disabled, stdlib
        // logging with Primus' caller prefix.
        let it = iter(
            "[20260822 10:11:12][rank-0/8][INFO]     [------metrics.py:512] : step:  1  loss: 12.2504  memory:  9.52GiB(5.00%)  tps: 812  tflops: 35.10  mfu: 1.40%",
        );
        assert_eq!(it.iteration, 1);
        assert_eq!(it.grad_norm, None);
        assert_eq!(it.mem_used_gib, Some(9.52));
        assert_eq!(it.tokens_per_s_per_gpu, Some(812.0));
        let minimal = iter("[titan] 2026-08-22 10:11:12,345 - root - INFO - step: 2  loss: 11.0");
        assert_eq!((minimal.iteration, minimal.loss), (2, Some(11.0)));
        assert_eq!(minimal.tflops_per_gpu, None);
    }

    #[test]
    fn ignored_lines() {
        for line in [
            "[20260822 10:11:12][rank-0/8][INFO]     validate step: 10  loss:  3.2451  memory: 45.67GiB(48.00%)  tps: 6,759",
            "\x1b[33mvalidate step: 10  loss: 3.2451\x1b[39m",
            "completed step: 49, seconds: 5.018, TFLOP/s/device: 107.127, Tokens/s/device: 6529.527, loss: 10.172",
            "  train_iters ..................................... 30",
            "  fault_injector_delay_start_iteration ............ None",
            "  override_ckpt_iteration ......................... None",
            "Overwriting rerun_state_machine.current_iteration from -1 to 0...",
            "[Rank 0] (after 10 iterations) memory (MB)",
            " validation loss at iteration 10 | lm loss value: 3.1E+00 | lm loss PPL: 22.1 |",
            "the first iteration 3/4 of the plan",
            "global step: 5  warmup",
            "Theoretical memory footprints: activation=12.0 MB",
            "",
            "iteration",
            "iteration 99999999999999999999999/1 |",
        ] {
            assert_eq!(parse_line(line), None, "{line:?}");
        }
    }

    #[test]
    fn strip_ansi_variants() {
        assert!(matches!(strip_ansi("plain"), Cow::Borrowed("plain")));
        assert!(matches!(strip_ansi("µs °C"), Cow::Borrowed("µs °C")));
        assert_eq!(strip_ansi("\x1b[1;31mred\x1b[0m"), "red");
        assert_eq!(strip_ansi("\x1b[38;2;180;60;0morange\x1b[39m"), "orange");
        assert_eq!(strip_ansi("a\x1b]0;title\x07b"), "ab");
        assert_eq!(
            strip_ansi("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b"),
            "alinkb"
        );
        assert_eq!(strip_ansi("a\x1b(Bb"), "ab");
        assert_eq!(strip_ansi("a\x1b7b\x1b8"), "ab");
        assert_eq!(strip_ansi("a\u{9b}1mb"), "ab");
        assert_eq!(strip_ansi("tail\x1b"), "tail");
        assert_eq!(strip_ansi("\x1b[é"), "é");
        assert_eq!(strip_ansi("x\x1b[2Ky"), "xy");
    }

    #[test]
    fn parser_dedupes_repeated_iterations_and_reports() {
        let mut p = LogParser::new();
        let logged =
            format!("[20260822 10:11:12][rank-0/8][DEBUG]    [--utils.py:9] : {PRIMUS_HEAD}");
        assert_eq!(p.feed(PRIMUS_WARMUP).len(), 1);
        assert_eq!(p.feed(PRIMUS_HEAD).len(), 1);
        assert!(p.feed(&logged).is_empty(), "same iteration from rank 0");
        assert!(p.feed(PRIMUS_WARMUP).is_empty(), "stale iteration");
        assert_eq!(p.last_iteration(), Some(5));
        let mem = "[Rank 0] (after 1 iterations) memory (MB) | allocated: 1 | max allocated: 2 | reserved: 3 | max reserved: 4";
        assert_eq!(p.feed(mem).len(), 1);
        assert!(p.feed(mem).is_empty());
        let theo = "Theoretical memory footprints: weight and optimizer=1.00 MB, activation=2.00 MB, total=3.00 MB";
        assert_eq!(p.feed(theo).len(), 1);
        assert!(p.feed(theo).is_empty());
        assert!(p.feed("noise").is_empty());
    }

    #[test]
    fn parser_handles_carriage_returns_and_newlines() {
        let mut p = LogParser::new();
        let line = format!("progress 10%\rprogress 90%\r{MEGATRON}\r\n");
        let ev = p.feed(&line);
        assert_eq!(ev, vec![LogEvent::Iteration(iter(MEGATRON))]);
        let mut p = LogParser::new();
        let bytes = format!("junk\r{TITAN}\n").into_bytes();
        assert_eq!(p.feed_bytes(&bytes), vec![LogEvent::Iteration(iter(TITAN))]);
        assert_eq!(
            LogParser::new()
                .feed_bytes(b"\xff\xfe iteration 1/2 |\r")
                .len(),
            1
        );
    }

    const REAL_SHAPES: [&str; 5] = [
        MEGATRON,
        PRIMUS_HEAD,
        PRIMUS_WARMUP,
        TITAN,
        "[Rank 0] (after 10 iterations) memory (MB) | allocated: 2041.24 | max allocated: 9806.31 | reserved: 10214.00 | max reserved: 10214.00",
    ];

    #[test]
    fn every_prefix_of_real_lines_is_safe() {
        for line in REAL_SHAPES {
            let mut p = LogParser::new();
            for (i, _) in line.char_indices() {
                let _ = parse_line(&line[..i]);
                let _ = p.feed(&line[i..]);
            }
        }
    }

    /// Edits: (position, replacement character, 0 = replace / 1 = insert / 2 = delete).
    fn mutate(line: &str, edits: &[(usize, char, u8)]) -> String {
        let mut chars: Vec<char> = line.chars().collect();
        for &(pos, ch, op) in edits {
            if chars.is_empty() {
                chars.push(ch);
                continue;
            }
            let i = pos % chars.len();
            match op {
                0 => chars[i] = ch,
                1 => chars.insert(i, ch),
                _ => {
                    chars.remove(i);
                }
            }
        }
        chars.into_iter().collect()
    }

    fn interesting_char() -> impl Strategy<Value = char> {
        prop_oneof![
            Just('|'),
            Just('/'),
            Just(':'),
            Just('('),
            Just(')'),
            Just('['),
            Just(']'),
            Just('\x1b'),
            Just('\r'),
            Just('\u{9b}'),
            Just(' '),
            Just(','),
            Just('%'),
            Just('e'),
            Just('-'),
            proptest::char::range('0', '9'),
            any::<char>(),
        ]
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(s in ".*", t in any::<String>()) {
            let _ = parse_line(&s);
            let _ = parse_line(&t);
            let _ = strip_ansi(&t);
            let mut p = LogParser::new();
            let _ = p.feed(&s);
            let _ = p.feed(&t);
            let _ = p.feed_bytes(t.as_bytes());
        }

        #[test]
        fn never_panics_on_mutated_real_lines(
            which in 0..REAL_SHAPES.len(),
            edits in proptest::collection::vec((any::<usize>(), interesting_char(), 0u8..3), 0..12),
        ) {
            let line = mutate(REAL_SHAPES[which], &edits);
            let _ = parse_line(&line);
            let mut p = LogParser::new();
            let _ = p.feed(&line);
            let _ = p.feed(&line);
        }

        #[test]
        fn bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut p = LogParser::new();
            let _ = p.feed_bytes(&b);
        }

        #[test]
        fn ansi_stripping_is_idempotent_on_clean_text(s in "[a-zA-Z0-9 |:./()%-]*") {
            prop_assert_eq!(strip_ansi(&s), Cow::Borrowed(s.as_str()));
            let coloured = format!("\x1b[31m{s}\x1b[0m");
            prop_assert_eq!(strip_ansi(&coloured).into_owned(), s);
        }
    }
}
