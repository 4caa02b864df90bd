//! The meter: latency histograms (all I/Os, reads, writes, the current
//! second), I/O and byte counters, errors, the per-second series and the
//! bytes moved per zone of a zone sweep.

use std::time::Instant;

use hdrhistogram::Histogram;

use super::issuer::Completed;
use super::measured::Measured;
use super::ProgressFn;
use crate::result::{Second, VerifyReport};
use crate::spec::Workload;

/// Histogram bounds: 1 µs .. 100 s, in nanoseconds.
pub(crate) const HIST_LOW_NS: u64 = 1_000;
pub(crate) const HIST_HIGH_NS: u64 = 100_000_000_000;
/// Significant digits the histograms keep.
pub(crate) const HIST_SIGFIG: u8 = 3;
/// Error messages kept for the report (all are counted).
pub(crate) const KEEP_ERRORS: usize = 20;

/// Measured I/Os and bytes, by direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub(crate) reads: u64,
    pub(crate) writes: u64,
    pub(crate) read_bytes: u64,
    pub(crate) write_bytes: u64,
}

impl Counters {
    /// Adds `other`'s counts to these.
    pub(crate) fn merge(&mut self, other: &Counters) {
        self.reads += other.reads;
        self.writes += other.writes;
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
    }

    pub(crate) fn ios(&self) -> u64 {
        self.reads + self.writes
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.read_bytes + self.write_bytes
    }

    fn add(&mut self, read: bool, bytes: u32) {
        if read {
            self.reads += 1;
            self.read_bytes += u64::from(bytes);
        } else {
            self.writes += 1;
            self.write_bytes += u64::from(bytes);
        }
    }
}

/// What one zone of a sweep moved, and over what time.
#[derive(Clone, Debug, Default)]
pub(crate) struct ZoneBytes {
    pub(crate) bytes: u64,
    /// When the zone's earliest I/O started.
    pub(crate) first: Option<Instant>,
    /// When its latest I/O ended.
    pub(crate) last: Option<Instant>,
}

/// Receives each closed second of the measured interval: its index, its
/// counts and its latency histogram (a threaded run merges the threads'
/// seconds with these).
pub(crate) type SecondSink = Box<dyn FnMut(u32, &Counters, &Histogram<u64>) + Send>;

/// Everything measured over a run.
pub(crate) struct Meter {
    pub(super) all: Histogram<u64>,
    pub(super) read: Histogram<u64>,
    pub(super) write: Histogram<u64>,
    /// The current second's latencies (for its p99).
    second: Histogram<u64>,
    pub(super) counts: Counters,
    /// The current second's counts.
    second_counts: Counters,
    pub(super) errors: u64,
    pub(super) error_samples: Vec<String>,
    pub(super) series: Vec<Second>,
    /// The number of zones (at least one) when the workload sweeps zones.
    pub(super) zones: Option<u32>,
    pub(super) zone_bytes: Vec<ZoneBytes>,
    /// I/Os counted in the measured interval (for a workload's I/O limit).
    pub(super) measured_ios: u64,
    /// Where each closed second goes besides the series.
    pub(super) sink: Option<SecondSink>,
}

impl Meter {
    pub(crate) fn new(w: &Workload) -> Result<Meter, String> {
        let all = Meter::histogram()?;
        let zones = w.zones.map(|n| n.max(1));
        Ok(Meter {
            read: all.clone(),
            write: all.clone(),
            second: all.clone(),
            all,
            counts: Counters::default(),
            second_counts: Counters::default(),
            errors: 0,
            error_samples: Vec::new(),
            series: Vec::new(),
            zones,
            zone_bytes: vec![ZoneBytes::default(); zones.unwrap_or(0) as usize],
            measured_ios: 0,
            sink: None,
        })
    }

    /// An empty histogram with the meter's bounds.
    pub(crate) fn histogram() -> Result<Histogram<u64>, String> {
        Histogram::<u64>::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, HIST_SIGFIG)
            .map_err(|e| e.to_string())
    }

    /// Forgets what was measured during the ramp: latencies, counts and
    /// errors (zone bytes are kept: a sweep's rate counts from its start).
    pub(super) fn reset(&mut self) {
        self.all.reset();
        self.read.reset();
        self.write.reset();
        self.second.reset();
        self.counts = Counters::default();
        self.second_counts = Counters::default();
        self.errors = 0;
        self.error_samples.clear();
    }

    /// Ends the current second: adds it to the series and reports the
    /// progress so far, `elapsed` seconds into the measured interval.
    pub(super) fn close_second(&mut self, elapsed: f64, progress: Option<&ProgressFn>) {
        let t = self.series.len() as u32;
        self.series
            .push(second(t, &self.second_counts, &self.second));
        if let Some(sink) = &mut self.sink {
            sink(t, &self.second_counts, &self.second);
        }
        if let Some(p) = progress {
            let total = (self.counts.reads + self.counts.writes) as f64;
            let bytes = (self.counts.read_bytes + self.counts.write_bytes) as f64;
            p(
                elapsed,
                total / elapsed.max(1e-9),
                bytes / elapsed.max(1e-9) / 1e6,
                self.all.value_at_quantile(0.99) as f64 / 1000.0,
            );
        }
        self.second_counts = Counters::default();
        self.second.reset();
    }

    /// What was measured over the interval from `start` to `end`, with
    /// the LUNs' verification.
    pub(super) fn finish(
        self,
        verify: Option<VerifyReport>,
        start: Instant,
        end: Instant,
    ) -> Measured {
        Measured {
            all: self.all,
            read: self.read,
            write: self.write,
            counts: self.counts,
            errors: self.errors,
            error_samples: self.error_samples,
            series: self.series,
            zones: self.zones,
            zone_bytes: self.zone_bytes,
            verify,
            ops: None,
            steady: None,
            start,
            end,
        }
    }

    /// Takes in an I/O completed at `done`: its error, its zone's bytes,
    /// and, when it succeeded and `counted` (it completed inside the
    /// measured interval), its latency and size.
    pub(super) fn completed(&mut self, c: &Completed<'_>, done: Instant, counted: bool) {
        let io = &c.io;
        if let Some(e) = &c.error {
            self.errors += 1;
            if self.error_samples.len() < KEEP_ERRORS {
                self.error_samples.push(format!(
                    "{} {} LBA {}: {e}",
                    c.label,
                    if io.read { "read" } else { "write" },
                    io.lba
                ));
            }
        }
        if let Some(n) = self.zones {
            let rel = c.offset - c.range_start;
            let z = (rel * u64::from(n) / c.range_len.max(1)) as usize;
            if let Some(acc) = self.zone_bytes.get_mut(z) {
                acc.bytes += u64::from(io.bytes);
                acc.first = Some(acc.first.map_or(io.start, |s| s.min(io.start)));
                acc.last = Some(done);
            }
        }
        if counted && c.error.is_none() {
            let ns = done.saturating_duration_since(io.start).as_nanos() as u64;
            let ns = ns.clamp(HIST_LOW_NS, HIST_HIGH_NS);
            let _ = self.all.record(ns);
            let _ = self.second.record(ns);
            self.measured_ios += 1;
            if io.read {
                let _ = self.read.record(ns);
            } else {
                let _ = self.write.record(ns);
            }
            self.counts.add(io.read, io.bytes);
            self.second_counts.add(io.read, io.bytes);
        }
    }
}

/// Second `t` of the series, from its counts and latencies.
pub(crate) fn second(t: u32, c: &Counters, h: &Histogram<u64>) -> Second {
    Second {
        t,
        iops: c.ios() as f64,
        read_iops: c.reads as f64,
        write_iops: c.writes as f64,
        mb_per_s: c.bytes() as f64 / 1e6,
        p99_us: h.value_at_quantile(0.99) as f64 / 1000.0,
    }
}
