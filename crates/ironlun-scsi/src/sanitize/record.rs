//! What outlives the target process about a sanitize (SBC-4 §4.11): an
//! operation under way (the LU it belongs to, its method, pattern and how
//! far it got) or a failed one, as text for a [`SanitizeStore`]; and what
//! a restarted LU does with it: resume the operation (SBC-4 §4.11.2), or
//! enter failure mode when it cannot.

use std::fmt::Write as _;
use std::num::NonZeroU64;

use super::job::{Job, Method};
use crate::saved::{bad_line, decimal, escape, hex64, hex_bytes, lines};

/// Where a LU keeps its sanitize record (the target's state directory).
/// Writes must be atomic: after a crash the old record or the new one.
pub trait SanitizeStore: Send + Sync {
    fn save(&self, text: &str) -> std::io::Result<()>;
    /// No sanitize is under way or failed: forget the record.
    fn clear(&self) -> std::io::Result<()>;
}

/// What a LU did with its saved record when the target started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SanitizeRestore {
    /// No sanitize was under way or failed.
    Nothing,
    /// An interrupted operation runs again from where it was recorded.
    Resumed { progress: u16 },
    /// The LU is in sanitize failure mode: media access gets MEDIUM
    /// ERROR, SANITIZE COMMAND FAILED until a sanitize succeeds or EXIT
    /// FAILURE MODE; `why` says what left it there.
    FailureMode { why: String },
}

/// The medium a record belongs to: the LU's NAA identifier, block size
/// and capacity. An operation resumes only on the same medium.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) naa: u64,
    pub(crate) block_size: u32,
    pub(crate) blocks: u64,
}

/// The sanitize methods a LU offers now (they can differ from when the
/// record was written: the configuration changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Offered {
    pub(crate) overwrite: bool,
    pub(crate) block_erase: bool,
}

/// A saved record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Record {
    Running { lu: Geometry, job: Job },
    Failed { lu: Geometry },
}

/// The record as a caller outside the crate holds it: read from the
/// store's text ([`SanitizeRecord::decode`]) before the LU takes it up
/// ([`crate::LogicalUnit::restore_sanitize`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SanitizeRecord(pub(crate) Record);

impl SanitizeRecord {
    /// Reads a saved record; the error says which line and why.
    pub fn decode(text: &str) -> Result<SanitizeRecord, String> {
        Record::decode(text).map(SanitizeRecord)
    }

    /// The saved form (version 2).
    pub fn encode(&self) -> String {
        self.0.encode()
    }
}

const MAGIC_V1: &str = "ironlun-sanitize 1";
const MAGIC: &str = "ironlun-sanitize 2";

/// Longest record accepted: a 4096-byte pattern in hex and the rest.
pub const MAX_RECORD_BYTES: usize = 16 << 10;

/// Longest OVERWRITE pattern: one logical block of the largest size.
const MAX_PATTERN_BYTES: usize = 4096;

/// Version 2, one field a line, in this order; the running state's lines
/// only when running:
///
/// ```text
/// ironlun-sanitize 2
/// lu <NAA, 16 hex digits> <block size> <blocks>
/// state running|failed
/// method overwrite <passes 1..=31> <invert 0|1>   or   method block-erase
/// pattern <hex>                                     (overwrite only)
/// done <bytes>
/// end
/// ```
///
/// Every field is a number or hex, so none can end a record; the reader
/// takes each line once, in its place and canonical spelling, and
/// nothing after `end`. Version 1 is the same without `end`, and is
/// read too: it has no free text.
impl Record {
    pub(crate) fn encode(&self) -> String {
        let (lu, state) = match self {
            Record::Running { lu, .. } => (lu, "running"),
            Record::Failed { lu } => (lu, "failed"),
        };
        let mut s = format!(
            "{MAGIC}\nlu {:016x} {} {}\nstate {state}\n",
            lu.naa, lu.block_size, lu.blocks
        );
        if let Record::Running { job, .. } = self {
            match &job.method {
                Method::Overwrite {
                    pattern,
                    passes,
                    invert,
                } => {
                    let _ = writeln!(s, "method overwrite {passes} {}", u8::from(*invert));
                    s.push_str("pattern ");
                    for b in pattern {
                        let _ = write!(s, "{b:02x}");
                    }
                    s.push('\n');
                }
                Method::BlockErase => s.push_str("method block-erase\n"),
            }
            let _ = writeln!(s, "done {}", job.done);
        }
        s.push_str("end\n");
        s
    }

    pub(crate) fn decode(text: &str) -> Result<Record, String> {
        if text.len() > MAX_RECORD_BYTES {
            return Err(format!("longer than {MAX_RECORD_BYTES} bytes"));
        }
        let mut r = Reader(lines(text)?);
        let v2 = match r.0.next() {
            Some((MAGIC, _)) => true,
            Some((MAGIC_V1, _)) => false,
            _ => return Err("not an ironlun sanitize record".into()),
        };
        let lu = r.field("lu", geometry)?;
        let record = match r.field("state", Some)? {
            "failed" => Record::Failed { lu },
            "running" => {
                let method = match r.field("method", method)? {
                    None => Method::BlockErase,
                    Some((passes, invert)) => Method::Overwrite {
                        pattern: r.field("pattern", pattern)?,
                        passes,
                        invert,
                    },
                };
                let job = Job {
                    method,
                    total: lu.blocks.saturating_mul(u64::from(lu.block_size)),
                    done: r.field("done", decimal)?,
                };
                Record::Running { lu, job }
            }
            other => return Err(format!("state '{}': not running or failed", escape(other))),
        };
        if v2 {
            r.field("end", |rest| rest.is_empty().then_some(()))
                .map_err(|_| "no end line".to_owned())?;
        }
        match r.0.next() {
            Some((line, n)) => Err(bad_line(n, line, "after the end")),
            None => Ok(record),
        }
    }
}

/// The lines of a record, read in order.
struct Reader<'a, I: Iterator<Item = (&'a str, usize)>>(I);

impl<'a, I: Iterator<Item = (&'a str, usize)>> Reader<'a, I> {
    /// The next line, which must be `key` and what `parse` takes.
    fn field<T>(&mut self, key: &str, parse: impl Fn(&'a str) -> Option<T>) -> Result<T, String> {
        let (line, n) = self.0.next().ok_or_else(|| format!("no {key} line"))?;
        let rest = match line.split_once(' ') {
            Some((k, rest)) if k == key => rest,
            None if line == key => "",
            _ => return Err(bad_line(n, line, &format!("not the {key} line"))),
        };
        parse(rest).ok_or_else(|| bad_line(n, line, &format!("not a {key}")))
    }
}

/// `NAA BLOCK_SIZE BLOCKS`.
fn geometry(rest: &str) -> Option<Geometry> {
    let mut w = rest.split(' ');
    let g = Geometry {
        naa: hex64(w.next()?)?,
        block_size: decimal(w.next()?).filter(|bs| matches!(bs, 512 | 4096))?,
        blocks: decimal(w.next()?).filter(|n| *n > 0)?,
    };
    w.next().is_none().then_some(g)
}

/// `block-erase` (`None`), or `overwrite PASSES INVERT` with 1 to 31
/// passes (SBC-4 §5.30.2.2).
fn method(rest: &str) -> Option<Option<(u8, bool)>> {
    if rest == "block-erase" {
        return Some(None);
    }
    let mut w = rest.split(' ');
    if w.next()? != "overwrite" {
        return None;
    }
    let passes = decimal(w.next()?).filter(|p| (1..=31).contains(p))?;
    let invert = match w.next()? {
        "0" => false,
        "1" => true,
        _ => return None,
    };
    w.next().is_none().then_some(Some((passes, invert)))
}

/// An OVERWRITE pattern: 1 to 4096 bytes in hex.
fn pattern(rest: &str) -> Option<Vec<u8>> {
    hex_bytes(rest).filter(|p| (1..=MAX_PATTERN_BYTES).contains(&p.len()))
}

/// What a LU with geometry `here`, offering `offered`, does with the
/// record `saved` (decoded: a record that does not decode takes the LU
/// offline before it gets here, see `crate::offline`): the job to
/// resume, or why it enters failure mode instead.
pub(crate) fn resume_plan(saved: Record, here: Geometry, offered: Offered) -> Result<Job, String> {
    let (lu, job) = match saved {
        Record::Failed { .. } => return Err("the last sanitize operation failed".into()),
        Record::Running { lu, job } => (lu, job),
    };
    if lu != here {
        return Err(format!(
            "the interrupted sanitize was of another medium ({} blocks of {} bytes, NAA {:x}); this LU has {} blocks of {} bytes, NAA {:x}",
            lu.blocks, lu.block_size, lu.naa, here.blocks, here.block_size, here.naa
        ));
    }
    let can = match &job.method {
        Method::Overwrite {
            pattern, passes, ..
        } => {
            offered.overwrite
                && (1..=31).contains(passes)
                && !pattern.is_empty()
                && pattern.len() <= here.block_size as usize
        }
        Method::BlockErase => offered.block_erase,
    };
    if !can {
        return Err("the interrupted sanitize's method is not offered by this LU now (it needs ,sanitize, BLOCK ERASE also ,thin, and a writable LU)".into());
    }
    let off_block =
        NonZeroU64::new(u64::from(here.block_size)).is_some_and(|bs| job.done % bs != 0);
    if job.done > job.work() || off_block {
        return Err(format!(
            "the interrupted sanitize's progress ({} of {} bytes) does not fit the medium",
            job.done,
            job.work()
        ));
    }
    Ok(job)
}
