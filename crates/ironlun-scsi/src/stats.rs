//! What a logical unit has served, for monitoring: commands by kind,
//! bytes moved, commands that failed (by status and sense key,
//! [`Failure`]), and how long commands took
//! (measured by the transport, which alone sees a command arrive and its
//! status leave). Counters only grow; a reader takes two snapshots and
//! subtracts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::reservations::Access;
use crate::shard::{self, Padded};

mod failure;
pub use failure::Failure;

/// How the counters count a command: by the opcode table's reservation
/// access column (SPC-4 §5.13.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// Reads the medium (READ, VERIFY, ...).
    Read,
    /// Changes the medium or its state (WRITE, WRITE SAME, UNMAP, ...).
    Write,
    /// Anything else (INQUIRY, TEST UNIT READY, a command the LU does not
    /// know, ...).
    Other,
}

impl IoKind {
    pub const ALL: [IoKind; 3] = [IoKind::Read, IoKind::Write, IoKind::Other];

    fn of(access: Option<Access>) -> IoKind {
        match access {
            Some(Access::Read) => IoKind::Read,
            Some(Access::Write) => IoKind::Write,
            _ => IoKind::Other,
        }
    }

    fn index(self) -> usize {
        match self {
            IoKind::Read => 0,
            IoKind::Write => 1,
            IoKind::Other => 2,
        }
    }
}

/// Upper bounds of the latency buckets, in nanoseconds: 10 µs to 10 s in
/// 1-2.5-5 steps, from a memory-backed LU's round trip to an I/O that
/// only a failing disk or a stalled network takes. One more bucket holds
/// everything above the last bound.
pub const LATENCY_BOUNDS_NS: [u64; 19] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

const BUCKETS: usize = LATENCY_BOUNDS_NS.len() + 1;

/// One kind's latencies: a count per bucket and the sum, both relaxed
/// atomics (the count is the buckets' sum, so a reader never sees them
/// disagree).
#[derive(Default)]
struct Latency {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

/// A copy of one kind's latency histogram at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatencySnapshot {
    /// Commands per bucket (not cumulative): `buckets[i]` took at most
    /// `LATENCY_BOUNDS_NS[i]` and more than the bound before; the last
    /// took more than every bound.
    pub buckets: [u64; BUCKETS],
    /// Total time of every command counted, in nanoseconds.
    pub sum_ns: u64,
}

impl LatencySnapshot {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Adds another shard's (or unit's) histogram.
    pub fn add(&mut self, o: &LatencySnapshot) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets) {
            *a = a.saturating_add(b);
        }
        self.sum_ns = self.sum_ns.saturating_add(o.sum_ns);
    }
}

impl Latency {
    fn record(&self, took: Duration) {
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let i = LATENCY_BOUNDS_NS.partition_point(|b| *b < ns);
        if let Some(b) = self.buckets.get(i) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn snapshot(&self) -> LatencySnapshot {
        LatencySnapshot {
            buckets: std::array::from_fn(|i| {
                self.buckets.get(i).map_or(0, |b| b.load(Ordering::Relaxed))
            }),
            sum_ns: self.sum_ns.load(Ordering::Relaxed),
        }
    }
}

/// One thread's share of the counters (crate::shard).
#[derive(Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    other: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    /// By [`Failure::index`].
    failed: [AtomicU64; Failure::COUNT],
    /// By [`IoKind::index`].
    latency: [Latency; 3],
}

/// Live counters, updated once per command with relaxed atomics, each
/// thread in its own shard (on 8 cores, shared counters cost more than a
/// null read's own work); a snapshot adds the shards up.
pub struct IoStats {
    shards: Box<[Padded<Counters>]>,
}

impl Default for IoStats {
    fn default() -> Self {
        IoStats {
            shards: shard::new_set(),
        }
    }
}

/// A copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoSnapshot {
    /// Commands that read the medium (READ, VERIFY, ...).
    pub read_commands: u64,
    /// Commands that change the medium or its state (WRITE, WRITE SAME,
    /// UNMAP, COMPARE AND WRITE, ...).
    pub write_commands: u64,
    /// Every other command (INQUIRY, TEST UNIT READY, ...).
    pub other_commands: u64,
    /// Data returned by read commands.
    pub read_bytes: u64,
    /// Data received with write commands.
    pub write_bytes: u64,
    /// Commands that ended with a status other than GOOD: the sum of
    /// [`IoSnapshot::failures`].
    pub failed_commands: u64,
    /// Those commands by [`Failure`], in the order of [`Failure::all`].
    pub failures: [u64; Failure::COUNT],
}

impl IoSnapshot {
    pub fn commands(&self) -> u64 {
        // Counters stop at their limit rather than wrap to small.
        self.read_commands
            .saturating_add(self.write_commands)
            .saturating_add(self.other_commands)
    }

    /// Adds another LU's counters (target or daemon totals).
    pub fn add(&mut self, o: &IoSnapshot) {
        let sum = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        sum(&mut self.read_commands, o.read_commands);
        sum(&mut self.write_commands, o.write_commands);
        sum(&mut self.other_commands, o.other_commands);
        sum(&mut self.read_bytes, o.read_bytes);
        sum(&mut self.write_bytes, o.write_bytes);
        sum(&mut self.failed_commands, o.failed_commands);
        for (a, b) in self.failures.iter_mut().zip(o.failures) {
            sum(a, b);
        }
    }

    /// Commands that failed as `f` says.
    pub fn failed(&self, f: Failure) -> u64 {
        self.failures.get(f.index()).copied().unwrap_or(0)
    }
}

impl IoStats {
    /// This thread's shard (always one: the index is below the count).
    #[inline]
    fn mine(&self) -> Option<&Counters> {
        self.shards.get(shard::index()).map(|p| &p.0)
    }

    /// Counts one finished command, and says how it was counted.
    /// `access` is `None` for a command the LU does not know; `failure`
    /// is `None` for one that ended GOOD.
    pub(crate) fn record(
        &self,
        access: Option<Access>,
        data_out: usize,
        data_in: usize,
        failure: Option<Failure>,
    ) -> IoKind {
        let add = |c: &AtomicU64, n: usize| {
            c.fetch_add(n as u64, Ordering::Relaxed);
        };
        let kind = IoKind::of(access);
        let Some(mine) = self.mine() else {
            return kind;
        };
        match kind {
            IoKind::Read => {
                add(&mine.reads, 1);
                add(&mine.read_bytes, data_in);
            }
            IoKind::Write => {
                add(&mine.writes, 1);
                add(&mine.write_bytes, data_out);
            }
            IoKind::Other => add(&mine.other, 1),
        }
        if let Some(c) = failure.and_then(|f| mine.failed.get(f.index())) {
            add(c, 1);
        }
        kind
    }

    /// Counts the time one command of this kind took.
    pub(crate) fn record_latency(&self, kind: IoKind, took: Duration) {
        if let Some(l) = self.mine().and_then(|m| m.latency.get(kind.index())) {
            l.record(took);
        }
    }

    pub fn latency(&self, kind: IoKind) -> LatencySnapshot {
        let mut sum = LatencySnapshot::default();
        for s in self.shards.iter() {
            if let Some(l) = s.0.latency.get(kind.index()) {
                sum.add(&l.snapshot());
            }
        }
        sum
    }

    pub fn snapshot(&self) -> IoSnapshot {
        let mut sum = IoSnapshot::default();
        for s in self.shards.iter() {
            sum.add(&s.0.snapshot());
        }
        sum
    }
}

impl Counters {
    fn snapshot(&self) -> IoSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let failures: [u64; Failure::COUNT] =
            std::array::from_fn(|i| self.failed.get(i).map_or(0, get));
        IoSnapshot {
            read_commands: get(&self.reads),
            write_commands: get(&self.writes),
            other_commands: get(&self.other),
            read_bytes: get(&self.read_bytes),
            write_bytes: get(&self.write_bytes),
            failed_commands: failures.iter().sum(),
            failures,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ironlun_scsi_codes::SenseKey;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_latency_lands_in_the_first_bucket_whose_bound_is_not_below_it() {
        let s = IoStats::default();
        // On a bound: that bucket (Prometheus's `le`).
        s.record_latency(IoKind::Read, us(10));
        s.record_latency(IoKind::Read, us(11));
        s.record_latency(IoKind::Read, Duration::ZERO);
        s.record_latency(IoKind::Read, Duration::from_secs(11));
        s.record_latency(IoKind::Read, Duration::MAX);
        let r = s.latency(IoKind::Read);
        assert_eq!(r.buckets[0], 2, "0 and 10 µs: {r:?}");
        assert_eq!(r.buckets[1], 1, "11 µs: {r:?}");
        assert_eq!(r.buckets[BUCKETS - 1], 2, "above 10 s: {r:?}");
        assert_eq!(r.count(), 5);
        assert_eq!(s.latency(IoKind::Write).count(), 0);
        assert_eq!(s.latency(IoKind::Other).count(), 0);
    }

    #[test]
    fn latency_sum_is_in_nanoseconds() {
        let s = IoStats::default();
        s.record_latency(IoKind::Write, us(100));
        s.record_latency(IoKind::Write, Duration::from_nanos(1));
        assert_eq!(s.latency(IoKind::Write).sum_ns, 100_001);
        // The bucket index of an exact bound (100 µs is bound 3).
        assert_eq!(s.latency(IoKind::Write).buckets[3], 1);
        assert_eq!(s.latency(IoKind::Write).buckets[0], 1);
    }

    #[test]
    fn commands_are_counted_by_access_and_the_kind_is_returned() {
        let s = IoStats::default();
        let medium = Failure::CheckCondition(Some(SenseKey::MEDIUM_ERROR));
        let illegal = Failure::CheckCondition(Some(SenseKey::ILLEGAL_REQUEST));
        assert_eq!(s.record(Some(Access::Read), 0, 4096, None), IoKind::Read);
        assert_eq!(
            s.record(Some(Access::Write), 512, 0, Some(medium)),
            IoKind::Write
        );
        assert_eq!(s.record(Some(Access::Exempt), 0, 36, None), IoKind::Other);
        assert_eq!(s.record(None, 0, 0, Some(illegal)), IoKind::Other);
        let snap = s.snapshot();
        assert_eq!(
            (snap.read_commands, snap.write_commands, snap.other_commands),
            (1, 1, 2)
        );
        assert_eq!((snap.read_bytes, snap.write_bytes), (4096, 512));
        assert_eq!(snap.failed_commands, 2);
        assert_eq!(snap.failed(medium), 1);
        assert_eq!(snap.failed(illegal), 1);
        assert_eq!(snap.failed(Failure::Busy), 0);
        let mut sum = snap;
        sum.add(&snap);
        assert_eq!((sum.failed_commands, sum.failed(medium)), (4, 2));
    }

    #[test]
    fn bounds_rise() {
        assert!(LATENCY_BOUNDS_NS.windows(2).all(|w| w[0] < w[1]));
    }
}
