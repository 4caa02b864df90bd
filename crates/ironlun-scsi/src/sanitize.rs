//! SANITIZE (SBC-4 §5.30, §4.11), offered only on LUs configured for it:
//! it destroys every block. OVERWRITE writes a pattern over the whole
//! medium, BLOCK ERASE (thin LUs) deallocates it, EXIT FAILURE MODE leaves
//! the failure state a failed sanitize leaves behind. CRYPTOGRAPHIC ERASE
//! is not offered: nothing here is encrypted.
//!
//! While a sanitize operation runs, other commands than INQUIRY, REPORT
//! LUNS, REQUEST SENSE and the reporting commands get NOT READY, SANITIZE
//! IN PROGRESS; REQUEST SENSE reports progress. Task management does not
//! stop the operation. With IMMED the command returns at once and the
//! operation runs on a thread of its own.

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::Arc;

use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::reservations::Access;
use crate::sense::Sense;
use crate::{Request, Response};
use ironlun_scsi_codes::{opcode, service_action, Asc, SenseKey};

/// Bytes written per step of an overwrite pass.
const CHUNK: usize = 1 << 20;

/// Sanitize state of one LU.
#[derive(Default)]
pub struct SanitizeState {
    pub(crate) running: AtomicBool,
    /// 0..=65535 for 0..100% of the running operation.
    progress: AtomicU16,
    /// The last sanitize failed: media access is refused until a sanitize
    /// succeeds or EXIT FAILURE MODE (SBC-4 §4.11.4).
    failed: AtomicBool,
}

impl SanitizeState {
    /// The refusal for a command while a sanitize runs or after one
    /// failed; `None` lets it through.
    pub(crate) fn gate(&self, access: Access, op: u8) -> Option<Sense> {
        if access == Access::Exempt || op == opcode::REQUEST_SENSE {
            return None;
        }
        if self.running.load(Ordering::Acquire) {
            return Some(self.in_progress());
        }
        if self.failed.load(Ordering::Acquire)
            && matches!(access, Access::Read | Access::Write)
            && op != opcode::SANITIZE
        {
            return Some(Sense::new(
                SenseKey::MEDIUM_ERROR,
                Asc::SANITIZE_COMMAND_FAILED,
            ));
        }
        None
    }

    /// What REQUEST SENSE reports during a sanitize.
    pub(crate) fn pending_sense(&self) -> Option<Sense> {
        self.running
            .load(Ordering::Acquire)
            .then(|| self.in_progress())
    }

    fn in_progress(&self) -> Sense {
        Sense::new(SenseKey::NOT_READY, Asc::LU_NOT_READY_SANITIZE_IN_PROGRESS)
            .with_progress(self.progress.load(Ordering::Relaxed))
    }
}

enum Job {
    Overwrite {
        pattern: Vec<u8>,
        passes: u8,
        invert: bool,
    },
    BlockErase,
}

/// The OVERWRITE parameter list (SBC-4 §5.30.2.2): the list is longer
/// than its 4-byte header and at most one block of pattern.
fn overwrite_params(lu: &LogicalUnit, len: usize, data: &[u8]) -> Result<Job, Sense> {
    let bs = lu.block_size() as usize;
    if len <= 4 || len > bs + 4 {
        return Err(Sense::invalid_field(7, None));
    }
    let p = Cdb(data.get(..len).unwrap_or(data));
    let invert = p.bit(0, 7);
    let test = (p.u8(0) >> 5) & 0x03;
    let passes = p.u8(0) & 0x1f;
    let plen = usize::from(p.be16(2));
    if test != 0 {
        return Err(Sense::invalid_param(0, Some(6)));
    }
    if passes == 0 {
        return Err(Sense::invalid_param(0, Some(4)));
    }
    if plen == 0 || plen > bs || plen + 4 > len || data.len() < len {
        return Err(Sense::invalid_param(2, None));
    }
    let pattern = data.get(4..4 + plen).unwrap_or(&[]).to_vec();
    Ok(Job::Overwrite {
        pattern,
        passes,
        invert,
    })
}

pub fn sanitize(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let immed = cdb.bit(1, 7);
    let sa = cdb.u8(1) & 0x1f;
    let len = usize::from(cdb.be16(7));
    if lu.write_protected() {
        return Err(Sense::write_protected());
    }
    let job = match sa {
        service_action::SANITIZE_OVERWRITE => overwrite_params(lu, len, req.data())?,
        service_action::SANITIZE_BLOCK_ERASE | service_action::SANITIZE_EXIT_FAILURE_MODE
            if len != 0 =>
        {
            return Err(Sense::invalid_field(7, None))
        }
        service_action::SANITIZE_BLOCK_ERASE => Job::BlockErase,
        service_action::SANITIZE_EXIT_FAILURE_MODE => {
            lu.sanitize.failed.store(false, Ordering::Release);
            return Ok(Response::good());
        }
        _ => return Err(Sense::invalid_field(1, Some(4))),
    };
    let st = &lu.sanitize;
    if st.running.swap(true, Ordering::AcqRel) {
        return Err(st.in_progress());
    }
    st.progress.store(0, Ordering::Relaxed);
    let written = Response::written(len as u32);
    if immed {
        // The LU lives in the target's map; the operation holds it.
        let me = req
            .map
            .iter()
            .find(|(_, l)| std::ptr::eq(l.as_ref(), lu))
            .map(|(_, l)| Arc::clone(l));
        if let Some(held) = me {
            let spawned = std::thread::Builder::new()
                .name("sanitize".into())
                .spawn(move || {
                    let _ = run(&held, &job);
                });
            if spawned.is_ok() {
                return Ok(written);
            }
            // No thread could be made; nothing was started.
            st.running.store(false, Ordering::Release);
            return Err(Sense::new(
                SenseKey::HARDWARE_ERROR,
                Asc::INTERNAL_TARGET_FAILURE,
            ));
        }
    }
    run(lu, &job).map(|()| written)
}

/// Carries out a sanitize operation and leaves the state: failure mode on
/// error, not running in any case.
fn run(lu: &LogicalUnit, job: &Job) -> Result<(), Sense> {
    let r = match job {
        Job::Overwrite {
            pattern,
            passes,
            invert,
        } => overwrite(lu, pattern, *passes, *invert),
        Job::BlockErase => lu
            .backend
            .deallocate(0, lu.num_blocks() * u64::from(lu.block_size()))
            .map_err(|_| Sense::new(SenseKey::MEDIUM_ERROR, Asc::SANITIZE_COMMAND_FAILED)),
    };
    let st = &lu.sanitize;
    st.failed.store(r.is_err(), Ordering::Release);
    st.progress.store(u16::MAX, Ordering::Relaxed);
    st.running.store(false, Ordering::Release);
    r
}

fn overwrite(lu: &LogicalUnit, pattern: &[u8], passes: u8, invert: bool) -> Result<(), Sense> {
    let bs = lu.block_size() as usize;
    let total = lu.num_blocks() * bs as u64;
    // One block of the pattern repeated, then a chunk of such blocks.
    let block: Vec<u8> = pattern.iter().copied().cycle().take(bs).collect();
    let chunk: Vec<u8> = block
        .iter()
        .copied()
        .cycle()
        .take(CHUNK.min(total as usize))
        .collect();
    let inverted: Vec<u8> = chunk.iter().map(|b| !b).collect();
    let work = total * u64::from(passes);
    let failed = || Sense::new(SenseKey::MEDIUM_ERROR, Asc::SANITIZE_COMMAND_FAILED);
    for pass in 0..u64::from(passes) {
        // INVERT: every other pass writes the inverted pattern, the last
        // one the pattern itself.
        let flip = invert && (u64::from(passes) - 1 - pass) % 2 == 1;
        let data = if flip { &inverted } else { &chunk };
        let mut off = 0u64;
        while off < total {
            let n = (total - off).min(data.len() as u64) as usize;
            lu.backend
                .write(off, data.get(..n).unwrap_or(&[]), false)
                .map_err(|_| failed())?;
            off += n as u64;
            let done = pass * total + off;
            let p = (done as u128 * 65535 / u128::from(work.max(1))) as u16;
            lu.sanitize.progress.store(p, Ordering::Relaxed);
        }
    }
    lu.backend.flush().map_err(|_| failed())
}

#[cfg(test)]
mod tests;
