//! Merging the threads' measurements exactly: counts and bytes are
//! summed, latency histograms added bucket by bucket (percentiles come
//! from the merged histogram, never from averaging the threads'), and
//! the per-second series merged second by second as the threads close
//! them, all on the same instants (every thread starts from the run's
//! common start).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::engine::measured::Measured;
use crate::engine::meter::{second, Counters, Meter, KEEP_ERRORS};
use crate::mix::OpMeter;
use crate::result::{Second, VerifyReport};

/// The parts' measurements as one. The series is left empty: it is
/// merged from the threads' seconds ([`SeriesMerger`]).
pub(crate) fn merge(parts: Vec<Measured>) -> Result<Measured, String> {
    let mut parts = parts.into_iter();
    let Some(mut m) = parts.next() else {
        return Err("no thread measured anything".into());
    };
    m.series.clear();
    for p in parts {
        add(&mut m.all, &p.all)?;
        add(&mut m.read, &p.read)?;
        add(&mut m.write, &p.write)?;
        m.counts.merge(&p.counts);
        m.errors += p.errors;
        let room = KEEP_ERRORS.saturating_sub(m.error_samples.len());
        m.error_samples
            .extend(p.error_samples.into_iter().take(room));
        for (z, pz) in m.zone_bytes.iter_mut().zip(&p.zone_bytes) {
            z.bytes += pz.bytes;
            z.first = earliest(z.first, pz.first);
            z.last = z.last.max(pz.last);
        }
        m.verify = merge_verify(m.verify, p.verify);
        m.ops = merge_ops(m.ops, p.ops)?;
        m.steady = crate::steady::merge(m.steady, p.steady);
        m.start = m.start.min(p.start);
        m.end = m.end.max(p.end);
    }
    Ok(m)
}

fn add(into: &mut Histogram<u64>, from: &Histogram<u64>) -> Result<(), String> {
    into.add(from)
        .map_err(|e| format!("merging latency histograms: {e:?}"))
}

/// The threads' counts by op: their histograms added, so the
/// percentiles by op are exact too.
fn merge_ops(a: Option<OpMeter>, b: Option<OpMeter>) -> Result<Option<OpMeter>, String> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            a.add(&b)?;
            Ok(Some(a))
        }
        (a, b) => Ok(a.or(b)),
    }
}

fn earliest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn merge_verify(a: Option<VerifyReport>, b: Option<VerifyReport>) -> Option<VerifyReport> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            a.checked_blocks += b.checked_blocks;
            a.mismatch_count += b.mismatch_count;
            a.mismatches.extend(b.mismatches);
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

/// One second as the threads close it, merged so far.
struct Pending {
    counts: Counters,
    latency: Histogram<u64>,
    /// Threads that have closed it.
    threads: usize,
}

/// Merges the threads' seconds: second `t` is complete when every
/// thread has closed it. Only seconds some thread has closed and another
/// has not are held, so memory stays bounded by how far the threads are
/// apart, not by the run's length.
pub(crate) struct SeriesMerger {
    threads: usize,
    pending: BTreeMap<u32, Pending>,
    series: Vec<Second>,
    /// Every merged second so far, for progress.
    pub(crate) total: Counters,
    pub(crate) total_latency: Histogram<u64>,
    /// The last merged second's IOPS and mean latency (µs), for the
    /// steady-state rule.
    pub(crate) last: (f64, f64),
}

impl SeriesMerger {
    pub(crate) fn new(threads: usize) -> Result<SeriesMerger, String> {
        Ok(SeriesMerger {
            threads: threads.max(1),
            pending: BTreeMap::new(),
            series: Vec::new(),
            total: Counters::default(),
            total_latency: Meter::histogram()?,
            last: (0.0, 0.0),
        })
    }

    /// Takes in second `t` of one thread; true when that completed it.
    pub(crate) fn add(
        &mut self,
        t: u32,
        counts: &Counters,
        latency: &Histogram<u64>,
    ) -> Result<bool, String> {
        let p = match self.pending.entry(t) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(Pending {
                counts: Counters::default(),
                latency: Meter::histogram()?,
                threads: 0,
            }),
        };
        p.counts.merge(counts);
        add(&mut p.latency, latency)?;
        p.threads += 1;
        if p.threads < self.threads {
            return Ok(false);
        }
        if let Some(p) = self.pending.remove(&t) {
            self.close(t, p)?;
        }
        Ok(true)
    }

    fn close(&mut self, t: u32, p: Pending) -> Result<(), String> {
        self.total.merge(&p.counts);
        add(&mut self.total_latency, &p.latency)?;
        let s = second(t, &p.counts, &p.latency);
        let mean_us = if p.latency.is_empty() {
            0.0
        } else {
            p.latency.mean() / 1000.0
        };
        self.last = (s.iops, mean_us);
        self.series.push(s);
        Ok(())
    }

    /// The series: every second, in order, including those some thread
    /// never closed (it stopped early).
    pub(crate) fn finish(mut self) -> Result<Vec<Second>, String> {
        for (t, p) in std::mem::take(&mut self.pending) {
            self.close(t, p)?;
        }
        self.series.sort_by_key(|s| s.t);
        Ok(self.series)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::engine::meter::ZoneBytes;
    use crate::mix::Op;

    /// A part that measured `latencies_us` (reads when `read`), each
    /// I/O of 4 KiB.
    fn part(latencies_us: &[u64], read: bool, start: Instant, secs: u64) -> Measured {
        let mut all = Meter::histogram().unwrap();
        let (mut r, mut w) = (all.clone(), all.clone());
        let mut counts = Counters::default();
        let mut ops = OpMeter::new().unwrap();
        for &us in latencies_us {
            ops.record(if read { Op::Read } else { Op::Write }, us * 1000, !read);
            all.record(us * 1000).unwrap();
            if read {
                r.record(us * 1000).unwrap();
                counts.reads += 1;
                counts.read_bytes += 4096;
            } else {
                w.record(us * 1000).unwrap();
                counts.writes += 1;
                counts.write_bytes += 4096;
            }
        }
        Measured {
            all,
            read: r,
            write: w,
            counts,
            errors: u64::from(!read),
            error_samples: vec![format!("error of the {read} part")],
            series: Vec::new(),
            zones: Some(1),
            zone_bytes: vec![ZoneBytes {
                bytes: counts.bytes(),
                first: Some(start),
                last: Some(start + Duration::from_secs(secs)),
            }],
            verify: Some(VerifyReport {
                checked_blocks: counts.reads,
                mismatch_count: 0,
                mismatches: Vec::new(),
            }),
            ops: Some(ops),
            steady: None,
            start,
            end: start + Duration::from_secs(secs),
        }
    }

    #[test]
    fn merged_totals_are_the_sums_and_percentiles_come_from_the_merged_histogram() {
        let t0 = Instant::now();
        // A fast thread (900 I/Os at 100 µs) and a slow one (100 at
        // 10 ms): the merged p99 is the slow thread's latency, which no
        // average of the threads' p99s (100 µs and 10 ms) gives.
        let fast = part(&[100; 900], true, t0, 2);
        let slow = part(&[10_000; 100], false, t0, 3);
        let m = merge(vec![fast, slow]).unwrap();
        assert_eq!(m.counts.reads, 900);
        assert_eq!(m.counts.writes, 100);
        assert_eq!(m.counts.bytes(), 1000 * 4096);
        assert_eq!(m.all.len(), 1000);
        assert_eq!(m.read.len(), 900);
        assert_eq!(m.write.len(), 100);
        let p50 = m.all.value_at_quantile(0.5);
        let p99 = m.all.value_at_quantile(0.99);
        assert!(m.all.equivalent(p50, 100_000), "p50 {p50}");
        assert!(m.all.equivalent(p99, 10_000_000), "p99 {p99}");
        let p90 = m.all.value_at_quantile(0.90);
        assert!(
            m.all.equivalent(p90, 100_000),
            "p90 {p90}: 900 of 1000 are fast"
        );
        assert_eq!(m.errors, 1);
        assert_eq!(m.error_samples.len(), 2);
        assert_eq!(m.zone_bytes[0].bytes, 1000 * 4096);
        assert_eq!(m.zone_bytes[0].last, Some(t0 + Duration::from_secs(3)));
        assert_eq!(m.verify.as_ref().unwrap().checked_blocks, 900);
        // The counts by op are the threads' sums, their percentiles from
        // the added histograms (exact, not the larger of the two).
        let ops = m.ops.as_ref().unwrap().result();
        assert_eq!(ops["read"].ios, 900);
        assert_eq!(ops["write"].ios, 100);
        assert_eq!(ops["write"].miscompares, 100);
        assert_eq!(ops.values().map(|o| o.ios).sum::<u64>(), m.counts.ios());
        assert_eq!(
            m.end,
            t0 + Duration::from_secs(3),
            "the latest thread's end"
        );
    }

    #[test]
    fn a_second_closes_when_every_thread_has_closed_it() {
        let mut s = SeriesMerger::new(2).unwrap();
        let h = |us: &[u64]| {
            let mut h = Meter::histogram().unwrap();
            for &u in us {
                h.record(u * 1000).unwrap();
            }
            h
        };
        let c = |n: u64| Counters {
            reads: n,
            read_bytes: n * 4096,
            ..Counters::default()
        };
        // Thread A is a second ahead of thread B.
        assert!(!s.add(0, &c(99), &h(&[100; 99])).unwrap());
        assert!(!s.add(1, &c(10), &h(&[50; 10])).unwrap());
        assert!(s.add(0, &c(1), &h(&[20_000])).unwrap());
        // What the steady-state rule sees of second 0: both threads'
        // I/Os, mean (99 × 100 + 20,000) / 100 = 299 µs.
        let (iops, mean) = s.last;
        assert_eq!(iops, 100.0);
        assert!((mean - 299.0).abs() < 1.0, "{mean}");
        assert!(s.add(1, &c(30), &h(&[70; 30])).unwrap());
        // Thread A's third second: B stopped before closing it.
        assert!(!s.add(2, &c(5), &h(&[60; 5])).unwrap());
        assert_eq!(s.total.reads, 140);
        assert_eq!(s.total_latency.len(), 140);
        let series = s.finish().unwrap();
        let iops: Vec<f64> = series.iter().map(|x| x.iops).collect();
        assert_eq!(iops, [100.0, 40.0, 5.0]);
        assert_eq!(series.iter().map(|x| x.t).collect::<Vec<_>>(), [0, 1, 2]);
        // Second 0's p99 is from its 100 merged latencies: the 99th
        // smallest is 100 µs (the one slow I/O is the 100th), within the
        // histogram's three significant digits.
        let p99 = series[0].p99_us;
        assert!((100.0..100.5).contains(&p99), "{p99}");
        assert!((series[0].mb_per_s - 100.0 * 4096.0 / 1e6).abs() < 1e-9);
    }
}
