//! One sanitize operation carried out: what it writes or deallocates,
//! step by step at the LU's medium rate, with its progress, checkpoints
//! and a way to stop it (target shutdown) without losing its place.

use std::num::NonZeroU64;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::pace;
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use ironlun_scsi_codes::{Asc, SenseKey};

/// What a sanitize operation does to every block (SBC-4 §4.11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    /// OVERWRITE: the pattern over every block, `passes` times; with
    /// `invert`, every other pass writes it inverted, the last one as
    /// given (SBC-4 §5.30.2.2).
    Overwrite {
        pattern: Vec<u8>,
        passes: u8,
        invert: bool,
    },
    /// BLOCK ERASE: every block deallocated (thin LUs).
    BlockErase,
}

/// A sanitize operation: its method, the medium's size in bytes, and the
/// bytes of work done (over all passes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Job {
    pub(crate) method: Method,
    pub(crate) total: u64,
    pub(crate) done: u64,
}

impl Job {
    /// Bytes of work in all: the medium once per pass.
    pub(crate) fn work(&self) -> u64 {
        match &self.method {
            Method::Overwrite { passes, .. } => self.total.saturating_mul(u64::from(*passes)),
            Method::BlockErase => self.total,
        }
    }

    /// The pass (from 0) and medium offset the next step starts at.
    pub(crate) fn position(&self) -> (u64, u64) {
        match NonZeroU64::new(self.total) {
            Some(total) => (self.done / total, self.done % total),
            None => (self.done, 0),
        }
    }

    /// Whether pass `pass` writes the inverted pattern: with INVERT,
    /// every other pass counting back from the last, which writes the
    /// pattern itself.
    pub(crate) fn inverted_pass(&self, pass: u64) -> bool {
        match &self.method {
            Method::Overwrite {
                passes,
                invert: true,
                ..
            } => (u64::from(*passes).saturating_sub(pass.saturating_add(1))) % 2 == 1,
            _ => false,
        }
    }
}

/// How an operation ended on its thread.
pub(crate) enum Outcome {
    /// Done, well or with an error (the LU enters failure mode).
    Finished(Result<(), Sense>),
    /// Stopped by the target's shutdown at a checkpoint, to be resumed.
    Stopped,
}

pub(crate) fn failed() -> Sense {
    Sense::new(SenseKey::MEDIUM_ERROR, Asc::SANITIZE_COMMAND_FAILED)
}

/// The data an overwrite writes: one chunk of whole blocks of the
/// pattern, and the same inverted.
struct Chunks {
    plain: Vec<u8>,
    inverted: Vec<u8>,
}

impl Chunks {
    fn new(pattern: &[u8], block: usize, len: usize) -> Chunks {
        let one: Vec<u8> = pattern.iter().copied().cycle().take(block).collect();
        let plain: Vec<u8> = one.iter().copied().cycle().take(len).collect();
        let inverted = plain.iter().map(|b| !b).collect();
        Chunks { plain, inverted }
    }
}

/// Runs `job` on `lu` from where it stands until it is done, fails, or
/// the target stops it. Holds no lock of the LU: commands to it (and to
/// other LUs) go on meanwhile.
pub(crate) fn run(lu: &LogicalUnit, mut job: Job) -> Outcome {
    let st = &lu.sanitize;
    let bs = u64::from(lu.block_size());
    let rate = st.rate();
    let step = match (&job.method, rate) {
        (Method::BlockErase, None) => job.total.max(bs),
        _ => pace::step_bytes(rate, bs),
    };
    let chunks = match &job.method {
        Method::Overwrite { pattern, .. } => Some(Chunks::new(
            pattern,
            bs as usize,
            step.min(job.total) as usize,
        )),
        Method::BlockErase => None,
    };
    let (started, from) = (Instant::now(), job.done);
    let mut last_checkpoint = started;
    let work = job.work();
    while job.done < work {
        if let Err(s) = one_step(lu, &job, step, chunks.as_ref()) {
            return Outcome::Finished(Err(s));
        }
        // `off` < `total` and `done` < `work`, which is a u64: neither
        // saturates.
        let (_, off) = job.position();
        job.done = job
            .done
            .saturating_add(step.min(job.total.saturating_sub(off)));
        st.set_progress(pace::progress(job.done, work));
        let going_on = match rate {
            Some(r) => {
                // `done` only grows from `from`. A due time past what an
                // Instant holds is not waited for.
                let due = pace::due(job.done.saturating_sub(from), r);
                st.pause_until(started.checked_add(due).unwrap_or(started))
            }
            None => !st.stopping(),
        };
        if !going_on || pace::checkpoint_due(last_checkpoint.elapsed()) {
            if let Err(s) = st.checkpoint(lu, &job) {
                return Outcome::Finished(Err(s));
            }
            last_checkpoint = Instant::now();
        }
        if !going_on {
            return Outcome::Stopped;
        }
    }
    Outcome::Finished(lu.backend.flush().map_err(|_| failed()))
}

/// Writes or deallocates the step at the job's position.
fn one_step(lu: &LogicalUnit, job: &Job, step: u64, chunks: Option<&Chunks>) -> Result<(), Sense> {
    let (pass, off) = job.position();
    // `off` < `total` (a remainder).
    let n = step.min(job.total.saturating_sub(off));
    let r = match chunks {
        Some(c) => {
            let data = if job.inverted_pass(pass) {
                &c.inverted
            } else {
                &c.plain
            };
            let bytes = data.get(..n as usize).unwrap_or(&[]);
            lu.backend.write(off, bytes, false)
        }
        None => lu.backend.deallocate(off, n),
    };
    r.map_err(|_| failed())
}

impl super::SanitizeState {
    fn set_progress(&self, p: u16) {
        self.progress.store(p, Ordering::Relaxed);
    }
}
