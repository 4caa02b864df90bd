//! The summary step: a run's measurement ([`WorkloadResult`]) from what
//! the meter measured, the LUNs' verification and the CPU figures.

use hdrhistogram::Histogram;

use super::issuer::range;
use super::measured::Measured;
use super::meter::HIST_LOW_NS;
use super::LunTarget;
use crate::hdr::Histograms;
use crate::mix::OpMeter;
use crate::result::{Cpu, Latency, ThreadTotals, WorkloadResult, ZoneRate};
use crate::spec::Workload;

/// The measurement of workload `w` on `targets`, run on `threads`
/// threads (`per_thread`: what each counted).
pub(crate) fn workload_result(
    w: &Workload,
    targets: &[LunTarget],
    m: Measured,
    cpu: Cpu,
    per_thread: Vec<ThreadTotals>,
) -> WorkloadResult {
    let elapsed = m.elapsed();
    let zones = zone_rates(w, targets, &m);
    let counts = &m.counts;
    let ios = counts.ios();
    let bytes = counts.bytes() as f64;
    let latency = Latency::from_histogram(&m.all);
    WorkloadResult {
        name: w.name.clone(),
        description: w.description.clone(),
        luns: targets.iter().map(|t| t.label.clone()).collect(),
        elapsed_s: elapsed,
        ios,
        read_ios: counts.reads,
        write_ios: counts.writes,
        iops: ios as f64 / elapsed,
        read_iops: counts.reads as f64 / elapsed,
        write_iops: counts.writes as f64 / elapsed,
        mb_per_s: bytes / elapsed / 1e6,
        mib_per_s: bytes / elapsed / (1u64 << 20) as f64,
        read_mb_per_s: counts.read_bytes as f64 / elapsed / 1e6,
        write_mb_per_s: counts.write_bytes as f64 / elapsed / 1e6,
        transaction_time_us: latency.mean,
        latency_us: latency,
        read_latency_us: Latency::from_histogram(&m.read),
        write_latency_us: Latency::from_histogram(&m.write),
        cpu,
        errors: m.errors,
        error_samples: m.error_samples,
        verify: m.verify,
        histogram_us: log_buckets(&m.all),
        percentiles_us: Latency::curve(&m.all),
        hdr: Histograms::encode(&m.all, &m.read, &m.write).ok(),
        agents: Vec::new(),
        series: m.series,
        zones,
        threads: per_thread.len().max(1) as u32,
        per_thread,
        workload: w.clone(),
        alignment: w.alignment(),
        latency_buckets_ns: super::buckets(&m.all),
        ops: m.ops.as_ref().map(OpMeter::result).unwrap_or_default(),
        steady: m.steady,
    }
}

/// One thread's totals.
pub(crate) fn thread_totals(m: &Measured) -> ThreadTotals {
    ThreadTotals {
        ios: m.counts.ios(),
        read_ios: m.counts.reads,
        write_ios: m.counts.writes,
        bytes: m.counts.bytes(),
        errors: m.errors,
    }
}

/// Each zone's rate, placed in the first target's seek range (`None`
/// when the workload sweeps no zones).
fn zone_rates(w: &Workload, targets: &[LunTarget], meter: &Measured) -> Option<Vec<ZoneRate>> {
    let (zone_start, zone_len) = targets
        .first()
        .and_then(|t| range(w, &t.capacity, t.slice).ok())
        .unwrap_or((0, 0));
    meter.zones.map(|n| {
        meter
            .zone_bytes
            .iter()
            .enumerate()
            .map(|(i, z)| {
                let secs = match (z.first, z.last) {
                    (Some(a), Some(b)) => (b - a).as_secs_f64(),
                    _ => 0.0,
                };
                ZoneRate {
                    zone: i as u32,
                    start_byte: zone_start + zone_len * i as u64 / u64::from(n),
                    mb_per_s: if secs > 0.0 {
                        z.bytes as f64 / secs / 1e6
                    } else {
                        0.0
                    },
                }
            })
            .collect()
    })
}

/// Counts per power-of-√2 latency bucket, for the report's histogram.
pub(crate) fn log_buckets(h: &Histogram<u64>) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    if h.is_empty() {
        return out;
    }
    let mut lo = HIST_LOW_NS as f64;
    let max = h.max() as f64;
    while lo <= max {
        let hi = lo * std::f64::consts::SQRT_2;
        let n = h.count_between(lo as u64, hi as u64 - 1);
        out.push((hi / 1000.0, n));
        lo = hi;
    }
    out
}
