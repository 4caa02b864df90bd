//! Which acknowledged writes a flush has made durable, and what a client
//! that was cut off took with it (docs/rbd.md, "Blocklist and
//! reconnect").
//!
//! librbd completes a write, discard or write-same before the OSDs have
//! it (Ceph 16's default `rbd_cache_policy = writearound`:
//! `WriteAroundObjectDispatch` acknowledges them when dispatched, once the
//! image has seen its first flush) and reports a failure of one at a
//! later flush *of the same client*. A client the cluster blocklisted
//! fails them all, and a new client's flush knows nothing of them: a
//! SYNCHRONIZE CACHE through it would answer GOOD over lost data. So each
//! client keeps a [`Ledger`] of the writes it acknowledged and the part a
//! successful flush covered; when the client is retired (replaced after a
//! blocklist, or fenced), the rest is lost, and the image's [`Standing`]
//! holds the count until a flush has reported it.
//!
//! COMPARE AND WRITE is not counted: librbd sends it to the OSDs without
//! the write-around acknowledgement (`dispatch_unoptimized_io`), so its
//! completion means the OSDs have it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

use crate::Fault;

/// One client's acknowledged writes and the part a flush made durable.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Writes this client completed successfully.
    acked: AtomicU64,
    /// How many of `acked` the newest successful flush covers.
    flushed: AtomicU64,
    /// The client has been taken out of service.
    retired: AtomicBool,
}

impl Ledger {
    /// A write on this client completed successfully. False when the
    /// client was retired meanwhile: its acknowledgement may be counted
    /// as lost already, so the command must not answer GOOD.
    pub(super) fn acked(&self) -> bool {
        self.acked.fetch_add(1, SeqCst);
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

/// The image's standing across its clients: writes lost with a retired
/// client and not yet reported, and whether the cluster fenced this
/// gateway for good.
#[derive(Debug, Default)]
pub(super) struct Standing {
    lost: AtomicU64,
    fenced: AtomicBool,
}

impl Standing {
    /// Whether a command may go to the image. A durable write is refused
    /// while lost writes are unreported; the flush reports them (once: the
    /// count clears), and only then, or without any, says "fenced". Both
    /// answer before the medium is touched.
    pub(super) fn admit(&self, access: Access) -> Result<(), Fault> {
        let lost = match access {
            Access::Plain => 0,
            Access::Durable => self.lost.load(SeqCst),
            Access::Flush => self.lost.swap(0, SeqCst),
        };
        if lost > 0 {
            return Err(Fault::LostWrites(lost));
        }
        if self.fenced.load(SeqCst) {
            return Err(Fault::Fenced);
        }
        Ok(())
    }

    /// Writes of a retired client that no flush covered.
    pub(super) fn lose(&self, writes: u64) {
        if writes > 0 {
            self.lost.fetch_add(writes, SeqCst);
        }
    }

    /// Fences the image for good; true the first time.
    pub(super) fn fence(&self) -> bool {
        !self.fenced.swap(true, SeqCst)
    }

    pub(super) fn fenced(&self) -> bool {
        self.fenced.load(SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn lost_writes_fail_durable_writes_until_one_flush_reports_them() {
        let s = Standing::default();
        assert_eq!(s.admit(Access::Flush), Ok(()));
        s.lose(0);
        assert_eq!(s.admit(Access::Durable), Ok(()), "nothing was lost");
        s.lose(5);
        assert_eq!(s.admit(Access::Plain), Ok(()));
        assert_eq!(s.admit(Access::Durable), Err(Fault::LostWrites(5)));
        assert_eq!(s.admit(Access::Durable), Err(Fault::LostWrites(5)));
        assert_eq!(s.admit(Access::Flush), Err(Fault::LostWrites(5)));
        // Reported once: the initiator has been told.
        assert_eq!(s.admit(Access::Flush), Ok(()));
        assert_eq!(s.admit(Access::Durable), Ok(()));
    }

    #[test]
    fn a_fenced_image_reports_its_lost_writes_first_then_stays_fenced() {
        let s = Standing::default();
        s.lose(2);
        assert!(s.fence());
        assert!(!s.fence(), "fenced once");
        assert_eq!(s.admit(Access::Plain), Err(Fault::Fenced));
        assert_eq!(s.admit(Access::Durable), Err(Fault::LostWrites(2)));
        assert_eq!(s.admit(Access::Flush), Err(Fault::LostWrites(2)));
        for access in [Access::Plain, Access::Durable, Access::Flush] {
            assert_eq!(s.admit(access), Err(Fault::Fenced), "{access:?}");
        }
        assert!(s.fenced());
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
