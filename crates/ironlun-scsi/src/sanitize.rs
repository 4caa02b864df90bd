//! SANITIZE (SBC-4 §5.30, §4.11), offered only on LUs configured for it:
//! it destroys every block. OVERWRITE writes a pattern over the whole
//! medium, BLOCK ERASE (thin LUs) deallocates it, EXIT FAILURE MODE leaves
//! the failure state a failed sanitize leaves behind. CRYPTOGRAPHIC ERASE
//! is not offered: nothing here is encrypted.
//!
//! The operation is not a task of the session that asked for it (SBC-4
//! §4.11.2): it runs on a thread of its own, at the medium rate the LU is
//! configured with (`job.rs`, `pace.rs`), and no task management function
//! or lost nexus stops it. With IMMED the command returns at once; without
//! it the command waits for the operation, and aborting the command (or
//! a reset, or the nexus going away) ends the wait, not the operation.
//!
//! While it runs, other commands than INQUIRY, REPORT LUNS, REQUEST SENSE
//! and the reporting commands get NOT READY, SANITIZE IN PROGRESS with the
//! progress indication (SPC-5 §4.4.2.4.4), and REQUEST SENSE reports the
//! same. With a [`SanitizeStore`] (the target's state directory) the
//! operation records where it is, and a restarted target resumes it or
//! enters failure mode (`record.rs`).

use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::reservations::Access;
use crate::sense::Sense;
use crate::{Request, Response};
use ironlun_scsi_codes::{opcode, service_action, Asc, SenseKey};

mod job;
mod pace;
mod record;
mod restore;
mod run;

use job::{Job, Method};
pub use record::{SanitizeRecord, SanitizeRestore, SanitizeStore, MAX_RECORD_BYTES};
use run::{begin, internal_failure, Ctl};

/// Sanitize state of one LU.
#[derive(Default)]
pub struct SanitizeState {
    pub(crate) running: AtomicBool,
    /// 0..=65535 for 0..100% of the running operation.
    progress: AtomicU16,
    /// The last sanitize failed: media access is refused until a sanitize
    /// succeeds or EXIT FAILURE MODE (SBC-4 §4.11).
    failed: AtomicBool,
    /// The medium rate an operation keeps to, in bytes per second (none:
    /// as fast as the backend goes).
    rate: Option<u64>,
    store: Option<Arc<dyn SanitizeStore>>,
    ctl: Mutex<Ctl>,
    /// Signalled when an operation finishes, a waiting command is
    /// released, or the target stops.
    changed: Condvar,
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
            return Some(job::failed());
        }
        None
    }

    /// Whether a sanitize operation is under way.
    pub(crate) fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
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

/// The OVERWRITE parameter list (SBC-4 §5.30.2.2): the list is longer
/// than its 4-byte header and at most one block of pattern.
fn overwrite_params(lu: &LogicalUnit, len: usize, data: &[u8]) -> Result<Method, Sense> {
    // The 4-byte header and at most one block of pattern.
    let bs = lu.block_len().get();
    let body = len.saturating_sub(4);
    if len <= 4 || body > bs {
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
    if plen == 0 || plen > bs || plen > body || data.len() < len {
        return Err(Sense::invalid_param(2, None));
    }
    let pattern = data
        .get(4..)
        .and_then(|d| d.get(..plen))
        .unwrap_or(&[])
        .to_vec();
    Ok(Method::Overwrite {
        pattern,
        passes,
        invert,
    })
}

pub fn sanitize(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let immed = cdb.bit(1, 7);
    let sa = cdb.u8(1) & 0x1f;
    let len = usize::from(cdb.be16(7));
    if lu.write_protected_for(req.nexus) {
        return Err(Sense::write_protected());
    }
    let method = match sa {
        service_action::SANITIZE_OVERWRITE => overwrite_params(lu, len, req.data())?,
        service_action::SANITIZE_BLOCK_ERASE | service_action::SANITIZE_EXIT_FAILURE_MODE
            if len != 0 =>
        {
            return Err(Sense::invalid_field(7, None))
        }
        service_action::SANITIZE_BLOCK_ERASE => Method::BlockErase,
        service_action::SANITIZE_EXIT_FAILURE_MODE => {
            lu.sanitize.failed.store(false, Ordering::Release);
            lu.sanitize.forget();
            return Ok(Response::good());
        }
        _ => return Err(Sense::invalid_field(1, Some(4))),
    };
    // The LU lives in the target's map; the operation's thread holds it.
    let me = req
        .map
        .iter()
        .find(|(_, l)| std::ptr::eq(l.as_ref(), lu))
        .map(|(_, l)| Arc::clone(l))
        .ok_or_else(internal_failure)?;
    let job = Job {
        method,
        // The medium's size, a u64.
        total: lu.num_blocks().saturating_mul(lu.block_bytes().get()),
        done: 0,
    };
    let waiter = (!immed).then_some(req.nexus);
    let n = begin(&me, job, waiter)?;
    if !immed {
        lu.sanitize.wait(n)?;
    }
    Ok(Response::written(len as u32))
}

#[cfg(test)]
mod tests;
