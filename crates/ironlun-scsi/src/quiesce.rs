//! Holding logical units still for a point-in-time operation (a
//! snapshot): each LU's access gate is taken exclusively, so new reads
//! and writes wait at the gate (a staged command is refused its ticket
//! and runs the blocking way, where it waits), the commands in flight
//! finish, the store is flushed, the operation runs, and commands
//! resume. Several LUs are held together (a consistency group): the
//! operation sees all of them at one instant.
//!
//! The pause initiators see is measured from the moment new commands
//! start to wait until they may go again; the caller logs it.

use std::io;
use std::time::{Duration, Instant};

use crate::lu::LogicalUnit;

/// How long an operation held the LUs still.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// Waiting for the commands in flight to finish.
    pub drained: Duration,
    /// The flush inside the hold.
    pub flushed: Duration,
    /// The whole time new commands waited: draining, flushing and the
    /// operation itself.
    pub paused: Duration,
}

/// Runs `op` while every LU of `lus` is held still and flushed; the
/// gates are taken in one order (by address), whatever order `lus` is
/// in, so that two holds never wait for each other. Each LU is flushed
/// once before the hold and once inside it; a flush that fails stops it
/// before `op` runs.
pub fn quiesced<T>(
    lus: &[&LogicalUnit],
    op: impl FnOnce() -> io::Result<T>,
) -> io::Result<(T, Pause)> {
    let mut order: Vec<&LogicalUnit> = lus.to_vec();
    order.sort_by_key(|lu| std::ptr::from_ref(*lu) as usize);
    order.dedup_by_key(|lu| std::ptr::from_ref(*lu) as usize);
    // A sanitize writes the medium without the gate (SBC-4 §4.11: it
    // runs on its own until done): nothing would be held still.
    if order.iter().any(|lu| lu.sanitize.running()) {
        return Err(sanitizing());
    }
    // A flush before the hold: what was written until now reaches the
    // medium while commands still run, so the flush inside the pause
    // has only what came since (measured: a snapshot of a busy reflink
    // file paused for hundreds of ms without it, docs/snapshots.md).
    for lu in &order {
        lu.flush()?;
    }
    let start = Instant::now();
    let held: Vec<_> = order.iter().map(|lu| lu.exclusive_access()).collect();
    // Again, held: a SANITIZE admitted before the hold may have started
    // its run since the check above; none can start now.
    if order.iter().any(|lu| lu.sanitize.running()) {
        drop(held);
        return Err(sanitizing());
    }
    let drained = start.elapsed();
    for lu in &order {
        lu.flush()?;
    }
    let flushed = start.elapsed().saturating_sub(drained);
    let out = op()?;
    drop(held);
    let paused = start.elapsed();
    Ok((
        out,
        Pause {
            drained,
            flushed,
            paused,
        },
    ))
}

/// Refused while a sanitize writes the medium.
fn sanitizing() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "a sanitize operation is under way (SBC-4 §4.11): it writes the medium until it is done; try again after it",
    )
}

impl LogicalUnit {
    /// How many I_T nexuses (sessions) have the LU open now.
    pub fn nexus_count(&self) -> usize {
        self.sessions_matching(|_| true).len()
    }

    /// Its data was replaced under the initiators (a snapshot rolled
    /// back): the size is read again, and every nexus is told CAPACITY
    /// DATA HAS CHANGED (SBC-4 §4.6.3.2; also when the size stayed, as
    /// the blocks' contents did not) and NOT READY TO READY CHANGE,
    /// MEDIUM MAY HAVE CHANGED (28h/00h, SPC-5 §5.14's unit attention
    /// for a medium that may have been replaced), so that an initiator
    /// drops what it cached of the LU.
    pub fn medium_replaced(&self) -> io::Result<()> {
        let size = self.backend().refresh_size();
        if let Ok(bytes) = &size {
            let blocks = *bytes / self.block_bytes();
            if blocks > 0 {
                self.set_num_blocks(blocks);
            }
        }
        // The data was replaced whatever the size refresh says: every
        // nexus is told even when it failed.
        self.establish_ua(ironlun_scsi_codes::Asc::MEDIUM_MAY_HAVE_CHANGED, None);
        size.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::thread;

    use ironlun_backend::testing::record::{Call, CallLog, Recorder};
    use ironlun_backend::RamBackend;

    use super::*;
    use crate::gate::SharedTicket;
    use crate::test_util::cfg;

    fn lu() -> (Arc<LogicalUnit>, CallLog) {
        let rec = Recorder::new(RamBackend::new(1 << 20));
        let log = rec.log();
        (
            Arc::new(LogicalUnit::new(cfg(512), Arc::new(rec)).unwrap()),
            log,
        )
    }

    /// A command in flight holds the operation off; while it runs, no
    /// command may start; the store is flushed before it; afterwards
    /// commands go again.
    #[test]
    fn the_operation_waits_for_commands_in_flight_and_holds_new_ones() {
        let (lu, log) = lu();
        let in_flight = SharedTicket::try_new(lu.clone()).unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let (lu2, ran2) = (lu.clone(), ran.clone());
        let h = thread::spawn(move || {
            quiesced(&[&lu2], || {
                ran2.store(true, Ordering::SeqCst);
                // Inside: a new command is held back.
                Ok(SharedTicket::try_new(lu2.clone()).is_none())
            })
        });
        // The hold is waiting once new tickets are refused.
        while let Some(t) = SharedTicket::try_new(lu.clone()) {
            drop(t);
            thread::yield_now();
        }
        assert!(!ran.load(Ordering::SeqCst), "ran past a command in flight");
        drop(in_flight);
        let (held_back, _pause) = h.join().unwrap().unwrap();
        assert!(held_back, "a command started during the operation");
        assert!(ran.load(Ordering::SeqCst));
        assert_eq!(
            log.take(),
            vec![Call::Flush, Call::Flush],
            "flushed before it"
        );
        assert!(SharedTicket::try_new(lu.clone()).is_some(), "not released");
    }

    /// A consistency group holds every LU at once, given in any order,
    /// and a failed operation releases them all.
    #[test]
    fn a_group_is_held_together_and_released_on_failure() {
        let (a, la) = lu();
        let (b, lb) = lu();
        let r = quiesced(&[&b, &a, &b], || {
            let both = SharedTicket::try_new(a.clone()).is_none()
                && SharedTicket::try_new(b.clone()).is_none();
            Ok(both)
        });
        assert!(r.unwrap().0, "one of the group was not held");
        // Once before the hold, once inside it.
        let twice = vec![Call::Flush, Call::Flush];
        assert_eq!((la.take(), lb.take()), (twice.clone(), twice));
        let failed: io::Result<((), Pause)> = quiesced(&[&a, &b], || Err(io::Error::other("no")));
        assert!(failed.is_err());
        assert!(SharedTicket::try_new(a.clone()).is_some());
        assert!(SharedTicket::try_new(b.clone()).is_some());
    }

    #[test]
    fn nothing_is_held_while_a_sanitize_writes() {
        let (lu, log) = lu();
        lu.sanitize.running.store(true, Ordering::SeqCst);
        let r: io::Result<((), Pause)> = quiesced(&[&lu], || panic!("ran during a sanitize"));
        let e = r.unwrap_err();
        assert!(
            e.to_string().contains("a sanitize operation is under way"),
            "{e}"
        );
        assert!(log.take().is_empty(), "flushed anyway");
        lu.sanitize.running.store(false, Ordering::SeqCst);
        assert!(quiesced(&[&lu], || Ok(())).is_ok());
    }

    #[test]
    fn a_replaced_medium_raises_both_unit_attentions() {
        let (lu, _) = lu();
        let n = crate::test_util::N;
        lu.attach_nexus_as(
            n,
            crate::test_util::id("iqn.2026-11.test:init"),
            None,
            false,
        );
        assert_eq!(lu.nexus_count(), 1);
        lu.medium_replaced().unwrap();
        let codes =
            [lu.take_ua(n).unwrap(), lu.take_ua(n).unwrap()].map(|s| (s.code.asc, s.code.ascq));
        assert_eq!(codes, [(0x2a, 0x09), (0x28, 0x00)]);
        assert!(lu.take_ua(n).is_none());
    }
}
