//! Which acknowledged writes a flush has made durable, and what a client
//! that was cut off took with it (docs/rbd.md, "Blocklist and
//! reconnect").
//!
//! librbd completes a write, discard or write-same before the OSDs have
//! it (Ceph 16's default `rbd_cache_policy = writearound`:
//! `WriteAroundObjectDispatch` acknowledges them when dispatched, once the
//! image has seen its first flush) and reports a failure of one at a
//! later flush *of the same client*, and only to that flush: it hands the
//! error over and forgets it (`std::swap(pending_flush_error,
//! m_pending_flush_error)`), so the flush after it succeeds. A client the
//! cluster blocklisted fails them all, and a new client's flush knows
//! nothing of them: a SYNCHRONIZE CACHE through it would answer GOOD over
//! lost data. So each client keeps a [`Ledger`] of the writes it
//! acknowledged and the part a successful flush covered. When the client
//! is retired (replaced after a blocklist, or fenced), the rest is lost;
//! when a flush fails (an OSD that did not answer within
//! `rados_osd_op_timeout`: ETIMEDOUT), so is the rest up to then, since
//! the next flush would not say so ([`Standing::flush_done`]). The
//! image's [`Standing`] holds the count until a flush has reported it
//! (a failed flush reports it at once), and goes on reporting it for
//! [`LOSS_REPORTED_FOR`] (the initiator's own retries of that flush must
//! not see GOOD).
//!
//! COMPARE AND WRITE is not counted: librbd sends it to the OSDs without
//! the write-around acknowledgement (`dispatch_unoptimized_io`), so its
//! completion means the OSDs have it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Mutex;
use std::time::Instant;

use crate::Fault;

/// One client's acknowledged writes and the part a flush made durable.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Writes this client completed successfully.
    acked: AtomicU64,
    /// How many of `acked` are accounted for: covered by the newest
    /// successful flush, or counted lost by a failed one.
    flushed: AtomicU64,
    /// The client has been taken out of service.
    retired: AtomicBool,
    /// librbd's cache is off ([`super::RbdOptions::write_through`]): a
    /// completed write is on the OSDs, covered as it completes.
    write_through: bool,
}

impl Ledger {
    /// The ledger of a new client; `write_through` when its librbd
    /// completes writes only once the OSDs have them.
    pub(super) fn new(write_through: bool) -> Ledger {
        Ledger {
            write_through,
            ..Ledger::default()
        }
    }

    /// A write on this client completed successfully. False when the
    /// client was retired meanwhile: its acknowledgement may be counted
    /// as lost already, so the command must not answer GOOD.
    pub(super) fn acked(&self) -> bool {
        let n = self.acked.fetch_add(1, SeqCst).saturating_add(1);
        if self.write_through {
            self.flushed.fetch_max(n, SeqCst);
        }
        !self.retired.load(SeqCst)
    }

    /// Before a flush: the writes it covers (those already completed).
    pub(super) fn mark(&self) -> u64 {
        self.acked.load(SeqCst)
    }

    /// The flush started at `mark` succeeded.
    pub(super) fn flushed(&self, mark: u64) {
        self.flushed.fetch_max(mark, SeqCst);
    }

    /// A flush failed: librbd has reported, to it alone, the failure of
    /// some write it acknowledged since the last successful flush, and
    /// will not report it again. Every write acknowledged so far and not
    /// accounted for is therefore lost: their count, now accounted for
    /// (a later retirement does not count them again).
    pub(super) fn flush_failed(&self) -> u64 {
        let acked = self.acked.load(SeqCst);
        acked.saturating_sub(self.flushed.fetch_max(acked, SeqCst))
    }

    /// Takes the client out of service: the writes it acknowledged since
    /// its last successful flush, lost with it. A write completing after
    /// this is refused ([`Ledger::acked`]); one completing during it may
    /// be both counted and refused (never neither).
    pub(super) fn retire(&self) -> u64 {
        self.retired.store(true, SeqCst);
        let acked = self.acked.load(SeqCst);
        acked.saturating_sub(self.flushed.load(SeqCst))
    }
}

/// How long lost writes are reported ([`crate::LOSS_REPORTED_FOR`]).
pub(super) use crate::LOSS_REPORTED_FOR;

/// What a command is about to do, for [`Standing::admit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// A read, a write without durability, anything else on the image.
    Plain,
    /// A write that must be durable before GOOD (FUA, write cache
    /// disabled, WRITE AND VERIFY).
    Durable,
    /// SYNCHRONIZE CACHE.
    Flush,
}

/// What [`Standing::admit`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admitted {
    Yes,
    /// Refused with this fault; `first` when this flush is the first to
    /// report these lost writes (for the log).
    No {
        fault: Fault,
        first: bool,
    },
}

/// The image's standing across its clients: writes lost with a retired
/// client, the report of them under way, and whether the cluster fenced
/// this gateway for good.
#[derive(Debug, Default)]
pub(super) struct Standing {
    /// Nothing lost, nothing being reported, not fenced: commands pass
    /// without taking the lock.
    troubled: AtomicBool,
    state: Mutex<Trouble>,
}

#[derive(Debug, Default)]
struct Trouble {
    /// Lost writes no flush has reported yet.
    unreported: u64,
    /// Lost writes being reported, until this instant (possibly none: a
    /// flush that failed with no write counted since the last good one
    /// is reported all the same).
    reporting: Option<(Instant, u64)>,
    fenced: bool,
}

impl Trouble {
    fn clear(&self) -> bool {
        self.unreported == 0 && self.reporting.is_none() && !self.fenced
    }

    /// Reports the unreported lost writes, with those being reported:
    /// the report (re)starts at `now`. Their total.
    fn report(&mut self, now: Instant) -> u64 {
        let total = self.unreported + self.reporting.map_or(0, |(_, n)| n);
        self.unreported = 0;
        self.reporting = Some((now + LOSS_REPORTED_FOR, total));
        total
    }
}

impl Standing {
    /// Whether a command may go to the image at `now`. While lost writes
    /// are unreported a durable write is refused with them; a flush
    /// reports them and starts [`LOSS_REPORTED_FOR`], during which every
    /// flush and durable write is refused the same way (the initiator's
    /// retries included). Only then, or without any, a fenced image says
    /// "fenced". All before the medium is touched.
    pub(super) fn admit(&self, access: Access, now: Instant) -> Admitted {
        if !self.troubled.load(SeqCst) {
            return Admitted::Yes;
        }
        let mut t = self.lock();
        if t.reporting.is_some_and(|(until, _)| now >= until) {
            t.reporting = None;
        }
        let reporting = t.reporting.map(|(_, n)| n);
        let lost = match access {
            Access::Plain => None,
            Access::Durable if t.unreported > 0 => {
                Some((t.unreported + reporting.unwrap_or(0), false))
            }
            Access::Flush if t.unreported > 0 => Some((t.report(now), true)),
            Access::Durable | Access::Flush => reporting.map(|n| (n, false)),
        };
        let fenced = t.fenced;
        self.troubled.store(!t.clear(), SeqCst);
        match (lost, fenced) {
            (None, false) => Admitted::Yes,
            (None, true) => Admitted::No {
                fault: Fault::Fenced,
                first: false,
            },
            (Some((n, first)), _) => Admitted::No {
                fault: Fault::LostWrites(n),
                first,
            },
        }
    }

    /// A flush on the client whose ledger is `ledger`, started at `mark`,
    /// ended: `ok`, or failed. A failed one is reported at once as lost
    /// writes (those [`Ledger::flush_failed`] counts, with any not yet
    /// reported), and starts a report of [`LOSS_REPORTED_FOR`]: librbd
    /// will not report that failure again, and the initiator's retry of
    /// this flush must not answer GOOD. Never a retryable error.
    pub(super) fn flush_done(
        &self,
        ledger: &Ledger,
        mark: u64,
        ok: bool,
        now: Instant,
    ) -> Admitted {
        if ok {
            ledger.flushed(mark);
            return Admitted::Yes;
        }
        let lost = ledger.flush_failed();
        let mut t = self.lock();
        t.unreported += lost;
        let total = t.report(now);
        self.troubled.store(true, SeqCst);
        Admitted::No {
            fault: Fault::LostWrites(total),
            first: true,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Trouble> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes of a retired client that no flush covered.
    pub(super) fn lose(&self, writes: u64) {
        if writes > 0 {
            self.lock().unreported += writes;
            self.troubled.store(true, SeqCst);
        }
    }

    /// Fences the image for good; true the first time.
    pub(super) fn fence(&self) -> bool {
        let first = !std::mem::replace(&mut self.lock().fenced, true);
        self.troubled.store(true, SeqCst);
        first
    }

    pub(super) fn fenced(&self) -> bool {
        self.troubled.load(SeqCst) && self.lock().fenced
    }

    /// Lifts the fence: a new client serves the image (the gateway
    /// group's explicit rejoin, `group.rs`). Lost writes still unreported
    /// stay so.
    pub(super) fn unfence(&self) {
        let mut t = self.lock();
        t.fenced = false;
        self.troubled.store(!t.clear(), SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_write_through_client_loses_nothing_it_acknowledged() {
        let l = Ledger::new(true);
        ack(&l, 5);
        assert_eq!(l.retire(), 0);
        let cached = Ledger::new(false);
        ack(&cached, 5);
        assert_eq!(cached.retire(), 5);
    }

    /// `n` writes acknowledged on `l`.
    fn ack(l: &Ledger, n: u64) {
        for _ in 0..n {
            assert!(l.acked());
        }
    }

    #[test]
    fn a_flush_covers_the_writes_completed_before_it() {
        let l = Ledger::default();
        ack(&l, 3);
        let mark = l.mark();
        ack(&l, 2); // completed while the flush was in flight
        l.flushed(mark);
        assert_eq!(l.retire(), 2);
    }

    #[test]
    fn a_flush_that_failed_covers_nothing() {
        let l = Ledger::default();
        ack(&l, 4);
        let _mark = l.mark(); // the flush failed: `flushed` is not called
        assert_eq!(l.retire(), 4);
    }

    #[test]
    fn flushes_finishing_out_of_order_keep_the_newest_mark() {
        let l = Ledger::default();
        ack(&l, 1);
        let first = l.mark();
        ack(&l, 1);
        let second = l.mark();
        l.flushed(second);
        l.flushed(first);
        assert_eq!(l.retire(), 0);
    }

    #[test]
    fn a_write_completing_on_a_retired_client_is_refused() {
        let l = Ledger::default();
        ack(&l, 1);
        l.flushed(l.mark());
        assert_eq!(l.retire(), 0);
        assert!(!l.acked(), "acknowledged by a client already retired");
    }

    fn lost(n: u64, first: bool) -> Admitted {
        Admitted::No {
            fault: Fault::LostWrites(n),
            first,
        }
    }

    const FENCED: Admitted = Admitted::No {
        fault: Fault::Fenced,
        first: false,
    };

    #[test]
    fn lost_writes_fail_durable_writes_and_flushes_until_the_report_is_over() {
        let s = Standing::default();
        let t0 = Instant::now();
        assert_eq!(s.admit(Access::Flush, t0), Admitted::Yes);
        s.lose(0);
        assert_eq!(
            s.admit(Access::Durable, t0),
            Admitted::Yes,
            "nothing was lost"
        );
        s.lose(5);
        assert_eq!(s.admit(Access::Plain, t0), Admitted::Yes);
        assert_eq!(s.admit(Access::Durable, t0), lost(5, false));
        assert_eq!(s.admit(Access::Durable, t0), lost(5, false));
        assert_eq!(s.admit(Access::Flush, t0), lost(5, true));
        // The initiator's retries of that flush, and durable writes, for
        // as long as the report lasts.
        let later = t0 + LOSS_REPORTED_FOR - Duration::from_millis(1);
        assert_eq!(s.admit(Access::Flush, later), lost(5, false));
        assert_eq!(s.admit(Access::Durable, later), lost(5, false));
        assert_eq!(s.admit(Access::Plain, later), Admitted::Yes);
        // Then flushes answer as usual.
        let over = t0 + LOSS_REPORTED_FOR;
        assert_eq!(s.admit(Access::Flush, over), Admitted::Yes);
        assert_eq!(s.admit(Access::Durable, over), Admitted::Yes);
        assert_eq!(s.admit(Access::Flush, t0), Admitted::Yes, "over for good");
    }

    #[test]
    fn writes_lost_during_a_report_start_it_again_with_the_total() {
        let s = Standing::default();
        let t0 = Instant::now();
        s.lose(2);
        assert_eq!(s.admit(Access::Flush, t0), lost(2, true));
        let t1 = t0 + Duration::from_secs(30);
        s.lose(3);
        assert_eq!(s.admit(Access::Durable, t1), lost(5, false));
        assert_eq!(s.admit(Access::Flush, t1), lost(5, true));
        let t2 = t0 + LOSS_REPORTED_FOR + Duration::from_secs(1);
        assert_eq!(s.admit(Access::Flush, t2), lost(5, false), "from t1 on");
        assert_eq!(
            s.admit(Access::Flush, t1 + LOSS_REPORTED_FOR),
            Admitted::Yes
        );
    }

    #[test]
    fn a_fenced_image_reports_its_lost_writes_first_then_stays_fenced() {
        let s = Standing::default();
        let t0 = Instant::now();
        s.lose(2);
        assert!(!s.fenced());
        assert!(s.fence());
        assert!(!s.fence(), "fenced once");
        assert!(s.fenced());
        assert_eq!(s.admit(Access::Plain, t0), FENCED);
        assert_eq!(s.admit(Access::Durable, t0), lost(2, false));
        assert_eq!(s.admit(Access::Flush, t0), lost(2, true));
        assert_eq!(s.admit(Access::Flush, t0), lost(2, false));
        let over = t0 + LOSS_REPORTED_FOR;
        for access in [Access::Plain, Access::Durable, Access::Flush] {
            assert_eq!(s.admit(access, over), FENCED, "{access:?}");
        }
    }

    /// librbd reports a write that failed (an OSD timed out) to the first
    /// flush after it and then forgets it: that flush and the
    /// initiator's retries of it answer lost writes, never a retryable
    /// error and never GOOD, for the report's minute.
    #[test]
    fn a_failed_flush_reports_the_writes_since_the_last_good_one() {
        let (l, s) = (Ledger::default(), Standing::default());
        let t0 = Instant::now();
        ack(&l, 3);
        assert_eq!(s.admit(Access::Flush, t0), Admitted::Yes);
        assert_eq!(s.flush_done(&l, l.mark(), true, t0), Admitted::Yes);
        ack(&l, 2);
        assert_eq!(s.admit(Access::Flush, t0), Admitted::Yes);
        let mark = l.mark();
        // librbd's flush fails (ETIMEDOUT): the two writes since the last
        // good flush are lost, reported by this flush itself.
        assert_eq!(s.flush_done(&l, mark, false, t0), lost(2, true));
        // The retry of that flush, which librbd would now answer with
        // success, and durable writes, for the report's minute.
        let later = t0 + LOSS_REPORTED_FOR - Duration::from_millis(1);
        assert_eq!(s.admit(Access::Flush, later), lost(2, false));
        assert_eq!(s.admit(Access::Durable, later), lost(2, false));
        assert_eq!(s.admit(Access::Plain, later), Admitted::Yes);
        let over = t0 + LOSS_REPORTED_FOR;
        assert_eq!(s.admit(Access::Flush, over), Admitted::Yes);
        // Counted once: retiring the client later loses nothing more.
        assert_eq!(l.retire(), 0);
    }

    #[test]
    fn a_failed_flush_with_no_write_since_the_last_good_one_is_reported_too() {
        let (l, s) = (Ledger::default(), Standing::default());
        let t0 = Instant::now();
        ack(&l, 1);
        assert_eq!(s.flush_done(&l, l.mark(), true, t0), Admitted::Yes);
        assert_eq!(s.flush_done(&l, l.mark(), false, t0), lost(0, true));
        assert_eq!(s.admit(Access::Flush, t0), lost(0, false));
        assert_eq!(s.admit(Access::Durable, t0), lost(0, false));
        assert_eq!(
            s.admit(Access::Flush, t0 + LOSS_REPORTED_FOR),
            Admitted::Yes
        );
    }

    #[test]
    fn a_failed_flush_adds_to_writes_lost_with_a_client() {
        let (l, s) = (Ledger::default(), Standing::default());
        let t0 = Instant::now();
        s.lose(4); // an earlier client's, not reported yet
        ack(&l, 1);
        assert_eq!(s.flush_done(&l, l.mark(), false, t0), lost(5, true));
        assert_eq!(s.admit(Access::Flush, t0), lost(5, false));
    }

    #[test]
    fn retiring_during_completions_never_loses_a_write_silently() {
        // Completions on four threads race one retirement: every write
        // answered "acknowledged" must be among those the retirement
        // counted as lost.
        let l = std::sync::Arc::new(Ledger::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || (0..20_000).filter(|_| l.acked()).count() as u64)
            })
            .collect();
        let lost = l.retire();
        let told_good: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert!(
            told_good <= lost,
            "{told_good} acknowledged, {lost} counted"
        );
    }
}
