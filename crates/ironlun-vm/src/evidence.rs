//! The evidence channel: the guest's second serial port (`/dev/ttyS1`),
//! which only the case scripts write. The kernel's console is the first
//! port (`console=ttyS0`) and nothing runs a getty, so kernel messages
//! cannot land in an evidence line (they once did, on a shared console,
//! turning `login=ok` into `login=ok[`). QEMU writes the port to a file
//! the host reads as it grows; [`Channel`] turns those reads, which may
//! end anywhere in a line, into records.
//!
//! Every non-empty line on the channel must be an evidence line
//! (`IRONLUN-VM-KV key=value ...`) or the one result line
//! (`IRONLUN-VM-RESULT rc=N`), which comes last. Anything else is
//! recorded as an error, which fails the case: a malformed line is never
//! dropped in silence.

/// Marker of an evidence line.
pub const KV_MARK: &str = "IRONLUN-VM-KV ";
/// Marker of the case's exit status.
pub const RESULT_MARK: &str = "IRONLUN-VM-RESULT rc=";
/// The longest line taken (the longest real one is under 200 bytes).
pub const MAX_LINE: usize = 4096;
/// The most the channel may carry in all (a case writes a few KiB).
pub const MAX_BYTES: usize = 1 << 20;
/// Errors kept; more are counted in the last one.
const MAX_ERRORS: usize = 16;

/// One evidence line: its `key=value` pairs in order.
pub type Record = Vec<(String, String)>;

/// A well-formed channel line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Record(Record),
    Result(i32),
}

/// Parses one complete channel line (without its newline; a trailing
/// `\r` from the tty's output processing is dropped). The marker must
/// open the line and every word after it must be `key=value` with a
/// non-empty key of ASCII letters, digits and `_`.
pub fn parse_line(line: &str) -> Result<Line, String> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    if let Some(rest) = line.strip_prefix(RESULT_MARK) {
        return rest
            .parse::<i32>()
            .map(Line::Result)
            .map_err(|_| format!("a malformed result line: {line:?}"));
    }
    let Some(rest) = line.strip_prefix(KV_MARK) else {
        return Err(format!("not an evidence line: {line:?}"));
    };
    let mut pairs = Vec::new();
    for word in rest.split_whitespace() {
        match word.split_once('=') {
            Some((k, v))
                if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                pairs.push((k.to_owned(), v.to_owned()));
            }
            _ => {
                return Err(format!(
                    "an evidence line with {word:?}, which is not key=value: {line:?}"
                ))
            }
        }
    }
    if pairs.is_empty() {
        return Err(format!("an evidence line without pairs: {line:?}"));
    }
    Ok(Line::Record(pairs))
}

/// The pairs of one evidence line, or `None` for anything else.
pub fn parse_record(line: &str) -> Option<Record> {
    match parse_line(line) {
        Ok(Line::Record(r)) => Some(r),
        _ => None,
    }
}

/// The value of `key` in one evidence line.
pub fn field<'r>(record: &'r [(String, String)], key: &str) -> Option<&'r str> {
    record
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// What the channel carried, once it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// Every evidence line, in order.
    pub records: Vec<Record>,
    /// The result line's status; `None` when there was none.
    pub rc: Option<i32>,
    /// Why the channel cannot be trusted as it stands (empty when it can).
    pub errors: Vec<String>,
    /// The channel's complete lines, as text (for the test's evidence).
    pub text: String,
}

/// The channel being read: takes reads that may end anywhere in a line.
#[derive(Debug, Default)]
pub struct Channel {
    partial: Vec<u8>,
    /// Skipping the rest of an over-long line.
    skipping: bool,
    bytes: usize,
    overflowed: bool,
    dropped_errors: usize,
    ev: Evidence,
}

impl Channel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next bytes read off the channel; returns the lines they
    /// completed, well-formed or not, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let room = MAX_BYTES.saturating_sub(self.bytes);
        if bytes.len() > room && !self.overflowed {
            self.overflowed = true;
            self.error(format!(
                "the evidence channel carried more than {MAX_BYTES} bytes; the rest was not read"
            ));
        }
        let bytes = bytes.get(..room.min(bytes.len())).unwrap_or_default();
        self.bytes += bytes.len();
        let mut done = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                let line = std::mem::take(&mut self.partial);
                if !std::mem::take(&mut self.skipping) {
                    done.extend(self.line(&line));
                }
            } else if !self.skipping {
                self.partial.push(b);
                if self.partial.len() > MAX_LINE {
                    let head = String::from_utf8_lossy(self.partial.get(..80).unwrap_or_default())
                        .into_owned();
                    self.error(format!("a line longer than {MAX_LINE} bytes: {head:?}..."));
                    self.partial.clear();
                    self.skipping = true;
                }
            }
        }
        done
    }

    /// The channel ended (QEMU exited): a line left without its newline
    /// was cut off, and is an error.
    pub fn finish(mut self) -> Evidence {
        if !self.partial.is_empty() || self.skipping {
            let cut = String::from_utf8_lossy(&self.partial).into_owned();
            self.error(format!(
                "the channel ended in the middle of a line: {cut:?}"
            ));
        }
        if self.dropped_errors > 0 {
            let n = self.dropped_errors;
            self.ev.errors.push(format!("and {n} more errors"));
        }
        self.ev
    }

    /// One complete line; returns it unless it was empty.
    fn line(&mut self, raw: &[u8]) -> Option<String> {
        let Ok(text) = std::str::from_utf8(raw) else {
            let lossy = String::from_utf8_lossy(raw).into_owned();
            self.error(format!("a line that is not UTF-8: {lossy:?}"));
            return Some(lossy);
        };
        let text = text.strip_suffix('\r').unwrap_or(text);
        if text.trim().is_empty() {
            return None;
        }
        self.ev.text.push_str(text);
        self.ev.text.push('\n');
        if self.ev.rc.is_some() {
            self.error(format!("a line after the result line: {text:?}"));
            return Some(text.to_owned());
        }
        match parse_line(text) {
            Ok(Line::Record(r)) => self.ev.records.push(r),
            Ok(Line::Result(rc)) => self.ev.rc = Some(rc),
            Err(e) => self.error(e),
        }
        Some(text.to_owned())
    }

    /// The channel could not be read to its end: an error like any other.
    pub fn fail(&mut self, e: String) {
        self.error(e);
    }

    fn error(&mut self, e: String) {
        if self.ev.errors.len() < MAX_ERRORS {
            self.ev.errors.push(e);
        } else {
            self.dropped_errors += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(words: &[(&str, &str)]) -> Record {
        words
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn lines_parse_only_with_the_marker_at_the_start() {
        assert_eq!(
            parse_line("IRONLUN-VM-KV file=/d/f1 sha256=ab\r"),
            Ok(Line::Record(pairs(&[("file", "/d/f1"), ("sha256", "ab")])))
        );
        assert_eq!(
            parse_line("IRONLUN-VM-KV trimmed_bytes="),
            Ok(Line::Record(pairs(&[("trimmed_bytes", "")])))
        );
        assert_eq!(parse_line("IRONLUN-VM-RESULT rc=0"), Ok(Line::Result(0)));
        assert_eq!(parse_line("IRONLUN-VM-RESULT rc=17"), Ok(Line::Result(17)));
        for bad in [
            "[ 13.1] sd 0:0:0:0: foo IRONLUN-VM-KV file=/d/f1",
            "IRONLUN-VM-KV",
            "IRONLUN-VM-KV ",
            "IRONLUN-VM-KV login=ok[    5.120] sd 2:0:0:0: [sda] Attached",
            "IRONLUN-VM-KV =ok",
            "IRONLUN-VM-KV lo-gin=ok",
            "IRONLUN-VM-RESULT rc=",
            "IRONLUN-VM-RESULT rc=0 [ 9.9] reboot",
            "no marker",
        ] {
            assert!(parse_line(bad).is_err(), "{bad}");
            assert!(parse_record(bad).is_none(), "{bad}");
        }
    }

    const STREAM: &str = "IRONLUN-VM-KV discovery=ok\r\n\r\nIRONLUN-VM-KV login=ok\r\n\
        IRONLUN-VM-KV file=/d/f1 sha256=aa lun=0\r\nIRONLUN-VM-RESULT rc=0\r\n";

    fn read_in_chunks(stream: &[u8], cuts: &[usize]) -> (Vec<String>, Evidence) {
        let mut ch = Channel::new();
        let mut lines = Vec::new();
        let mut at = 0;
        for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
            lines.extend(ch.feed(&stream[at..cut]));
            at = cut;
        }
        (lines, ch.finish())
    }

    #[test]
    fn reads_that_split_lines_anywhere_give_the_same_evidence() {
        let s = STREAM.as_bytes();
        let (lines, whole) = read_in_chunks(s, &[]);
        assert_eq!(whole.errors, Vec::<String>::new());
        assert_eq!(whole.rc, Some(0));
        assert_eq!(whole.records.len(), 3);
        assert_eq!(whole.records[1], pairs(&[("login", "ok")]));
        assert_eq!(lines.len(), 4);
        // Every one- and two-cut split, empty reads included.
        for i in 0..=s.len() {
            assert_eq!(read_in_chunks(s, &[i]).1, whole, "cut at {i}");
            for j in i..=s.len() {
                assert_eq!(
                    read_in_chunks(s, &[i, j, j]),
                    (lines.clone(), whole.clone())
                );
            }
        }
        // One byte at a time.
        let ones: Vec<usize> = (1..s.len()).collect();
        assert_eq!(read_in_chunks(s, &ones).1, whole);
    }

    #[test]
    fn a_line_is_complete_only_at_its_newline() {
        let mut ch = Channel::new();
        assert!(ch.feed(b"IRONLUN-VM-KV login=o").is_empty());
        assert_eq!(ch.feed(b"k\nIRONLUN-VM-KV lo"), ["IRONLUN-VM-KV login=ok"]);
        // The channel ends mid-line (QEMU killed at its budget).
        let ev = ch.finish();
        assert_eq!(ev.records, [pairs(&[("login", "ok")])]);
        assert_eq!(ev.rc, None);
        assert_eq!(ev.errors.len(), 1, "{:?}", ev.errors);
        assert!(ev.errors[0].contains("middle of a line"), "{:?}", ev.errors);
    }

    #[test]
    fn foreign_text_and_late_lines_are_errors_not_dropped() {
        let (_, ev) = read_in_chunks(
            b"IRONLUN-VM-KV login=ok[   4.2] scsi 2:0:0:0: Direct-Access\n\
              [   4.3] sd 2:0:0:0: [sda] 262144 512-byte logical blocks\n\
              IRONLUN-VM-KV fsck=clean\nIRONLUN-VM-RESULT rc=0\nIRONLUN-VM-KV late=1\n",
            &[17, 60],
        );
        assert_eq!(ev.records, [pairs(&[("fsck", "clean")])]);
        assert_eq!(ev.rc, Some(0));
        assert_eq!(ev.errors.len(), 3, "{:?}", ev.errors);
        assert!(ev.errors[0].contains("login=ok["), "{:?}", ev.errors);
        assert!(ev.errors[1].contains("not an evidence line"));
        assert!(ev.errors[2].contains("after the result line"));
        let (_, ev) = read_in_chunks(b"IRONLUN-VM-KV a=\xff\n", &[]);
        assert!(ev.errors[0].contains("not UTF-8"), "{:?}", ev.errors);
    }

    #[test]
    fn the_channel_is_bounded() {
        let mut ch = Channel::new();
        let long = vec![b'x'; MAX_LINE + 10];
        ch.feed(b"IRONLUN-VM-KV a=");
        ch.feed(&long);
        assert_eq!(ch.feed(b"tail\nIRONLUN-VM-KV b=1\n").len(), 1);
        let ev = ch.finish();
        assert_eq!(ev.records, [pairs(&[("b", "1")])]);
        assert!(ev.errors[0].contains("longer than"), "{:?}", ev.errors);

        let mut ch = Channel::new();
        let line = b"IRONLUN-VM-KV k=v\n";
        for _ in 0..(MAX_BYTES / line.len() + 2) {
            ch.feed(line);
        }
        let ev = ch.finish();
        assert_eq!(ev.records.len(), MAX_BYTES / line.len());
        assert!(
            ev.errors.iter().any(|e| e.contains("more than")),
            "{:?}",
            ev.errors
        );
        assert!(ev.errors.iter().any(|e| e.contains("middle of a line")));

        let mut ch = Channel::new();
        for _ in 0..100 {
            ch.feed(b"junk\n");
        }
        let ev = ch.finish();
        assert_eq!(ev.errors.len(), MAX_ERRORS + 1);
        assert_eq!(ev.errors[MAX_ERRORS], "and 84 more errors");
    }
}
