//! What outlives the target process about a sanitize (SBC-4 §4.11): an
//! operation under way (the LU it belongs to, its method, pattern and how
//! far it got) or a failed one, as text for a [`SanitizeStore`]; and what
//! a restarted LU does with it: resume the operation (SBC-4 §4.11.2), or
//! enter failure mode when it cannot.

use std::fmt::Write as _;

use super::job::{Job, Method};

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

const MAGIC: &str = "ironlun-sanitize 1";

/// Longest record accepted: a 4096-byte pattern in hex and the rest.
pub const MAX_RECORD_BYTES: usize = 16 << 10;

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
        s
    }

    pub(crate) fn decode(text: &str) -> Result<Record, String> {
        if text.len() > MAX_RECORD_BYTES {
            return Err(format!("longer than {MAX_RECORD_BYTES} bytes"));
        }
        let mut lines = text.lines();
        if lines.next() != Some(MAGIC) {
            return Err("not an ironlun sanitize record".into());
        }
        let mut f = Fields::default();
        for (i, line) in lines.enumerate() {
            f.take(line)
                .ok_or_else(|| format!("line {}: cannot parse '{line}'", i + 2))?;
        }
        f.record()
    }
}

/// The fields of a record as read, before they are checked together.
#[derive(Default)]
struct Fields {
    lu: Option<Geometry>,
    state: Option<String>,
    method: Option<(String, u8, bool)>,
    pattern: Option<Vec<u8>>,
    done: Option<u64>,
}

impl Fields {
    fn take(&mut self, line: &str) -> Option<()> {
        let mut w = line.split(' ');
        match w.next()? {
            "lu" => {
                self.lu = Some(Geometry {
                    naa: u64::from_str_radix(w.next()?, 16).ok()?,
                    block_size: w.next()?.parse().ok()?,
                    blocks: w.next()?.parse().ok()?,
                })
            }
            "state" => self.state = Some(w.next()?.to_owned()),
            "method" => {
                let name = w.next()?.to_owned();
                let passes = w.next().map_or(Some(1), |p| p.parse().ok())?;
                let invert = w.next() == Some("1");
                self.method = Some((name, passes, invert));
            }
            "pattern" => self.pattern = Some(unhex(w.next()?)?),
            "done" => self.done = Some(w.next()?.parse().ok()?),
            _ => return None,
        }
        w.next().is_none().then_some(())
    }

    fn record(self) -> Result<Record, String> {
        let lu = self.lu.ok_or("no lu line")?;
        match self.state.as_deref() {
            Some("failed") => return Ok(Record::Failed { lu }),
            Some("running") => {}
            _ => return Err("no state running or failed".into()),
        }
        let method = match self.method {
            Some((name, passes, invert)) if name == "overwrite" => Method::Overwrite {
                pattern: self.pattern.ok_or("overwrite without a pattern")?,
                passes,
                invert,
            },
            Some((name, ..)) if name == "block-erase" => Method::BlockErase,
            _ => return Err("no known method".into()),
        };
        let job = Job {
            method,
            total: lu.blocks.saturating_mul(u64::from(lu.block_size)),
            done: self.done.ok_or("no done line")?,
        };
        Ok(Record::Running { lu, job })
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What a LU with geometry `here`, offering `offered`, does with the
/// record `saved` (already decoded, or why it could not be): the job to
/// resume, or why it enters failure mode instead.
pub(crate) fn resume_plan(
    saved: Result<Record, String>,
    here: Geometry,
    offered: Offered,
) -> Result<Job, String> {
    let (lu, job) = match saved {
        Err(e) => return Err(format!("the saved sanitize state is unreadable ({e})")),
        Ok(Record::Failed { .. }) => return Err("the last sanitize operation failed".into()),
        Ok(Record::Running { lu, job }) => (lu, job),
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
    if job.done > job.work() || job.done % u64::from(here.block_size.max(1)) != 0 {
        return Err(format!(
            "the interrupted sanitize's progress ({} of {} bytes) does not fit the medium",
            job.done,
            job.work()
        ));
    }
    Ok(job)
}
