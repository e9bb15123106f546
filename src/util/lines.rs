//! Reading log lines with a cap on their length: a line longer than [`MAX_LINE`] keeps its first
//! [`MAX_LINE`] bytes and the rest is skipped (and counted), so a log with a 1 GB line costs
//! megabytes of memory, not a gigabyte. Training logs' lines are a few hundred bytes.

use std::io::BufRead;

/// The longest line kept, in bytes.
pub const MAX_LINE: usize = 1 << 20;

/// Bytes of overlong lines that were skipped, and how many lines were cut.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Skipped {
    pub lines: u64,
    pub bytes: u64,
}

/// Append to `cut` what `chunk` (bytes up to and maybe including a newline) adds to a line that
/// holds `len` bytes so far; returns the bytes past the cap.
fn take(buf: &mut Vec<u8>, chunk: &[u8], max: usize) -> u64 {
    let room = max.saturating_sub(buf.len());
    let keep = chunk.len().min(room);
    buf.extend_from_slice(&chunk[..keep]);
    (chunk.len() - keep) as u64
}

/// Read the next line (with its newline, when it has one) into `buf`, cleared first, keeping at
/// most `max` bytes; `Ok(false)` at the end of the input. What was cut is added to `skipped`.
pub fn read_line<R: BufRead>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
    skipped: &mut Skipped,
) -> std::io::Result<bool> {
    buf.clear();
    let mut cut = 0u64;
    let mut any = false;
    loop {
        let (done, used) = {
            let avail = match r.fill_buf() {
                Ok(a) => a,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                (true, 0)
            } else {
                any = true;
                match avail.iter().position(|b| *b == b'\n') {
                    Some(i) => {
                        cut += take(buf, &avail[..=i], max);
                        (true, i + 1)
                    }
                    None => {
                        cut += take(buf, avail, max);
                        (false, avail.len())
                    }
                }
            }
        };
        r.consume(used);
        if done {
            break;
        }
    }
    if cut > 0 {
        skipped.lines += 1;
        skipped.bytes += cut;
    }
    Ok(any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_and_counted_short_ones_kept_whole() {
        let long = "x".repeat(5000);
        let text = format!("one\n{long}\ntwo\nlast");
        let mut r = std::io::BufReader::with_capacity(64, text.as_bytes());
        let mut buf = Vec::new();
        let mut skipped = Skipped::default();
        let mut got = Vec::new();
        while read_line(&mut r, &mut buf, 100, &mut skipped).unwrap() {
            got.push(String::from_utf8_lossy(&buf).into_owned());
        }
        assert_eq!(got[0], "one\n");
        assert_eq!(got[1], "x".repeat(100));
        assert_eq!(got[2], "two\n");
        assert_eq!(got[3], "last");
        assert_eq!(got.len(), 4);
        assert_eq!(
            skipped,
            Skipped {
                lines: 1,
                bytes: 4901
            }
        );
    }
}
