//! What a failed flush leaves behind: the LU's rule that a flush or
//! durable write that failed is not followed by GOOD to the next one.
//!
//! A store reports the failure of a cached write to one flush only. Linux
//! reports a writeback error to one `fdatasync` per open file (errseq_t,
//! "fsyncgate"; a write with `RWF_DSYNC` consumes it the same way) and
//! marks the pages clean: the data never reached the disk, and the next
//! `fdatasync` returns 0. librbd hands a failed write's error to the first
//! flush after it and forgets it. The initiator retries a failed
//! SYNCHRONIZE CACHE by itself (Linux's `scsi_check_sense`, up to 5 times
//! at once), so the retry would answer GOOD over lost writes.
//!
//! So once a flush or durable write (FUA, WRITE AND VERIFY, the write
//! cache off) fails at the store, every flush and durable write of the LU
//! answers MEDIUM ERROR, WRITE ERROR ([`Fault::LostWrites`], no LBA) for
//! [`LOSS_REPORTED_FOR`] after the last such failure, before it reaches
//! the store; then they go to the store again (the initiator has been
//! told, as a disk reports a deferred write error once). Reads and
//! writes without durability go on meanwhile. This holds on every path a
//! command takes (the synchronous handlers, the blocking pool, the
//! io_uring, a store's own asynchronous path): each asks [`Durability`]
//! before the access and tells it the outcome after.
//!
//! Not counted: anything on a store that keeps its own account
//! ([`Backend::reports_lost_writes`]: an RBD image's ledger counts the
//! writes a failed flush took and reports them, and a durable write that
//! failed before librbd acknowledged it lost nothing); a failure a store
//! reports as a [`Fault`] (lost writes it reports itself, a fence); and
//! a durable write refused for want of space (ENOSPC, EDQUOT: the write
//! did not reach the page cache, and the LU's thin provisioning answers
//! it; a flush that fails so is counted).
//!
//! [`Backend::reports_lost_writes`]: ironlun_backend::Backend::reports_lost_writes

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use ironlun_backend::{Fault, LOSS_REPORTED_FOR};

/// The access a command makes, as far as durability goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Durable {
    /// A write that must be on stable storage before GOOD.
    Write,
    /// SYNCHRONIZE CACHE, or a flush a command makes (WCE = 0 unmap).
    Flush,
}

/// One LU's failed flushes: until when flushes and durable writes are
/// refused.
#[derive(Debug, Default)]
pub(crate) struct Durability {
    /// The store keeps its own account: nothing is done here.
    store_reports: bool,
    /// A failure is being reported: lets the hot path skip the lock.
    failing: AtomicBool,
    until: Mutex<Option<Instant>>,
}

impl Durability {
    /// For a LU whose store keeps its own account of lost writes
    /// (`store_reports`), or not.
    pub(crate) fn new(store_reports: bool) -> Durability {
        Durability {
            store_reports,
            ..Durability::default()
        }
    }

    /// Whether a flush or durable write may go to the store at `now`;
    /// the error to answer instead while a failure is being reported.
    pub(crate) fn admit(&self, now: Instant) -> io::Result<()> {
        if !self.failing.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut until = self.lock();
        match *until {
            Some(t) if now < t => Err(Fault::LostWrites(0).into()),
            _ => {
                *until = None;
                self.failing.store(false, Ordering::Release);
                Ok(())
            }
        }
    }

    /// The store's outcome of a flush or durable write, at `now`: a
    /// failure that counts starts (or restarts) the report.
    pub(crate) fn settle<T>(&self, access: Durable, outcome: &io::Result<T>, now: Instant) {
        let Err(e) = outcome else { return };
        if self.store_reports || !counts(access, e) {
            return;
        }
        // An Instant a minute on cannot overflow; were it to, the loss
        // is reported for as long as now allows.
        *self.lock() = Some(now.checked_add(LOSS_REPORTED_FOR).unwrap_or(now));
        self.failing.store(true, Ordering::Release);
    }

    /// Runs `access` on the store unless a failure is being reported,
    /// and settles its outcome.
    pub(crate) fn run<T>(
        &self,
        access: Durable,
        f: impl FnOnce() -> io::Result<T>,
    ) -> io::Result<T> {
        self.admit(Instant::now())?;
        let outcome = f();
        self.settle(access, &outcome, Instant::now());
        outcome
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.until.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether a failure of `access` may have cost writes the store will not
/// report again (see the module's docs for what is not counted).
fn counts(access: Durable, e: &io::Error) -> bool {
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    if Fault::of(e).is_some() {
        return false;
    }
    let no_space = matches!(e.raw_os_error(), Some(ENOSPC | EDQUOT));
    !(access == Durable::Write && no_space)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn lost(r: io::Result<()>) -> bool {
        r.is_err_and(|e| Fault::of(&e) == Some(Fault::LostWrites(0)))
    }

    #[test]
    fn a_failed_flush_refuses_flushes_and_durable_writes_for_the_window() {
        let d = Durability::default();
        let t0 = Instant::now();
        assert!(d.admit(t0).is_ok());
        let eio: io::Result<()> = Err(io::Error::from_raw_os_error(5));
        d.settle(Durable::Flush, &eio, t0);
        assert!(lost(d.admit(t0)));
        assert!(lost(
            d.admit(t0 + LOSS_REPORTED_FOR - Duration::from_millis(1))
        ));
        assert!(d.admit(t0 + LOSS_REPORTED_FOR).is_ok());
        assert!(d.admit(t0).is_ok(), "over for good");
    }

    #[test]
    fn each_failure_restarts_the_window() {
        let d = Durability::default();
        let t0 = Instant::now();
        let eio: io::Result<()> = Err(io::Error::from_raw_os_error(5));
        d.settle(Durable::Write, &eio, t0);
        let t1 = t0 + Duration::from_secs(30);
        d.settle(Durable::Flush, &eio, t1);
        assert!(lost(d.admit(t0 + LOSS_REPORTED_FOR)));
        assert!(d.admit(t1 + LOSS_REPORTED_FOR).is_ok());
    }

    #[test]
    fn a_store_that_keeps_its_own_account_is_left_to_it() {
        let d = Durability::new(true);
        let t0 = Instant::now();
        let etimedout: io::Result<()> = Err(io::Error::from_raw_os_error(110));
        d.settle(Durable::Write, &etimedout, t0);
        d.settle(Durable::Flush, &etimedout, t0);
        assert!(d.admit(t0).is_ok());
    }

    #[test]
    fn what_does_not_count() {
        let d = Durability::default();
        let t0 = Instant::now();
        let enospc: io::Result<()> = Err(io::Error::from_raw_os_error(28));
        d.settle(Durable::Write, &enospc, t0);
        assert!(d.admit(t0).is_ok(), "a durable write refused for space");
        let fenced: io::Result<()> = Err(Fault::Fenced.into());
        d.settle(Durable::Flush, &fenced, t0);
        let lost_writes: io::Result<()> = Err(Fault::LostWrites(3).into());
        d.settle(Durable::Flush, &lost_writes, t0);
        assert!(d.admit(t0).is_ok(), "the store reports its own faults");
        d.settle(Durable::Flush, &Ok(()), t0);
        assert!(d.admit(t0).is_ok());
        d.settle(Durable::Flush, &enospc, t0);
        assert!(lost(d.admit(t0)), "a flush that failed for space counts");
    }
}
