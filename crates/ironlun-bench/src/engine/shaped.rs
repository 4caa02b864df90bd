//! What a workload's shape and the run's options add to the run's loop:
//! counts and latencies by command of a mix, the steady-state rule, the
//! per-I/O latency log, and the HDR buckets of the result.

use std::time::Instant;

use hdrhistogram::Histogram;
use ironlun_initiator::{scsi, xcopy, Responder};
use tokio::sync::oneshot;

use super::issuer::Completed;
use super::{LunTarget, RunOptions};
use crate::iolog::{Entry, LatLog, SharedLatLog};
use crate::mix::{Op, OpMeter};
use crate::spec::Workload;
use crate::steady::{SteadyResult, Tracker};

/// The run's extras; each is absent unless asked for.
pub(super) struct Extras {
    ops: Option<OpMeter>,
    steady: Option<Tracker>,
    log: Option<Log>,
    /// The run's number of each of this part's targets (a load thread's
    /// targets are a subset, in its own order); `None`: the same.
    luns: Option<Vec<usize>>,
    /// Latency sum (ns) and count of the current second's I/Os.
    second: (u128, u64),
}

impl Extras {
    /// `shared`: the run's log when several threads write it.
    pub(super) fn new(
        w: &Workload,
        opts: &RunOptions,
        shared: Option<SharedLatLog>,
        luns: Option<Vec<usize>>,
    ) -> Result<Extras, String> {
        let log = match shared {
            Some(s) => Some(Log::Shared(s)),
            None => opts
                .lat_log
                .as_ref()
                .map(LatLog::create)
                .transpose()?
                .map(Log::Own),
        };
        Ok(Extras {
            ops: w.shape.mix.as_ref().map(|_| OpMeter::new()).transpose()?,
            steady: w.shape.steady.map(Tracker::new),
            log,
            luns,
            second: (0, 0),
        })
    }

    /// The ramp is over: forget what it measured.
    pub(super) fn ramp_over(&mut self) {
        if let Some(o) = &mut self.ops {
            o.reset();
        }
        if let Some(s) = &mut self.steady {
            s.reset();
        }
        self.second = (0, 0);
    }

    /// Takes in a completed I/O that counts in the measured interval.
    pub(super) fn completed(
        &mut self,
        c: &Completed<'_>,
        done: Instant,
        measure_start: Instant,
    ) -> Result<(), String> {
        if c.error.is_some() {
            return Ok(());
        }
        let ns = done.saturating_duration_since(c.io.start).as_nanos() as u64;
        self.second.0 += u128::from(ns);
        self.second.1 += 1;
        if let Some(o) = &mut self.ops {
            o.record(c.io.op, ns, c.miscompare);
        }
        if let Some(log) = &mut self.log {
            let lun = match &self.luns {
                Some(m) => m.get(c.lun).copied().unwrap_or(c.lun),
                None => c.lun,
            };
            let e = Entry {
                t_us: done.saturating_duration_since(measure_start).as_micros() as u64,
                op: c.io.op.name(),
                lun,
                offset: c.offset,
                len: c.io.len,
                lat_us: ns / 1000,
            };
            let r = match log {
                Log::Own(l) => l.record(&e).map_err(|e| e.to_string()),
                Log::Shared(l) => l.record(&e),
            };
            r.map_err(|e| format!("latency log: {e}"))?;
        }
        Ok(())
    }

    /// A second of the measured interval closed with `iops`; true when
    /// the run is steady and may stop.
    pub(super) fn second_closed(&mut self, iops: f64) -> bool {
        let (sum, n) = std::mem::take(&mut self.second);
        let mean_us = if n == 0 {
            0.0
        } else {
            sum as f64 / n as f64 / 1000.0
        };
        self.steady.as_mut().is_some_and(|s| s.push(iops, mean_us))
    }

    /// Closes the log; returns the counts by op and the steady state.
    pub(super) fn finish(self) -> Result<(Option<OpMeter>, Option<SteadyResult>), String> {
        // A shared log is finished by the run that opened it.
        if let Some(Log::Own(log)) = self.log {
            log.finish().map_err(|e| format!("latency log: {e}"))?;
        }
        Ok((self.ops, self.steady.as_ref().map(Tracker::result)))
    }
}

/// Where the latency log goes: a file of this part's own, or the run's
/// file shared by its load threads.
enum Log {
    Own(LatLog),
    Shared(SharedLatLog),
}

/// The histogram's non-empty HDR buckets: (highest latency of the
/// bucket in ns, count).
pub(crate) fn buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| {
            (
                h.highest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect()
}

/// Each target's NAA designator, when the workload's mix copies.
pub(super) async fn designators(
    w: &Workload,
    targets: &[LunTarget],
) -> Result<Option<Vec<[u8; 8]>>, String> {
    if !w.shape.mix.as_ref().is_some_and(|m| m.has(Op::Xcopy)) {
        return Ok(None);
    }
    let mut out = Vec::new();
    for t in targets {
        let (tx, rx) = oneshot::channel();
        let req = scsi::inquiry(t.lun, Some(0x83), 1024);
        let no = |e: String| format!("{}: Device Identification page: {e}", t.label);
        t.path
            .submit(req, Responder::Once(tx))
            .await
            .map_err(|e| no(e.to_string()))?;
        let reply = rx
            .await
            .map_err(|e| no(e.to_string()))?
            .and_then(scsi::check)
            .map_err(|e| no(e.to_string()))?;
        let naa = xcopy::naa_designator(&reply).ok_or_else(|| {
            no("no NAA designator, which EXTENDED COPY needs to name the LU".into())
        })?;
        out.push(naa);
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_every_sample() {
        let mut h = Histogram::<u64>::new_with_bounds(1_000, 100_000_000_000, 3).unwrap();
        for ns in [10_000u64, 10_000, 55_555, 1_000_000, 2_000_000_000] {
            h.record(ns).unwrap();
        }
        let b = buckets(&h);
        assert_eq!(b.len(), 4);
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 5);
        assert_eq!(b[0], (h.highest_equivalent(10_000), 2));
        // Three significant digits, and a 512 ns unit at the bottom (the
        // histogram's lowest value is 1 µs).
        for ((top, _), v) in b.iter().zip([10_000u64, 55_555, 1_000_000, 2_000_000_000]) {
            assert!(*top >= v && *top - v <= (v / 500).max(512), "{b:?}");
        }
    }
}
