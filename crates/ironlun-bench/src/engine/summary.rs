//! The summary step: a run's measurement ([`WorkloadResult`]) from what
//! the meter measured, the LUNs' verification and the CPU figures.

use hdrhistogram::Histogram;

use super::issuer::{range, Issuer};
use super::meter::{Meter, HIST_LOW_NS};
use super::LunTarget;
use crate::hdr::Histograms;
use crate::result::{Cpu, Latency, VerifyReport, WorkloadResult, ZoneRate};
use crate::spec::Workload;

/// The measurement of workload `w` on `targets`, over `elapsed` seconds.
pub(super) fn workload_result(
    w: &Workload,
    targets: &[LunTarget],
    issuer: &Issuer,
    meter: Meter,
    cpu: Cpu,
    elapsed: f64,
) -> WorkloadResult {
    let zones = zone_rates(w, targets, &meter);
    let counts = &meter.counts;
    let ios = counts.reads + counts.writes;
    let bytes = (counts.read_bytes + counts.write_bytes) as f64;
    let latency = Latency::from_histogram(&meter.all);
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
        read_latency_us: Latency::from_histogram(&meter.read),
        write_latency_us: Latency::from_histogram(&meter.write),
        cpu,
        errors: meter.errors,
        error_samples: meter.error_samples,
        verify: verify_report(issuer),
        series: meter.series,
        histogram_us: log_buckets(&meter.all),
        percentiles_us: Latency::curve(&meter.all),
        zones,
        hdr: Histograms::encode(&meter.all, &meter.read, &meter.write).ok(),
        agents: Vec::new(),
        workload: w.clone(),
        latency_buckets_ns: Vec::new(),
        ops: Default::default(),
        steady: None,
    }
}

/// Every LUN's verification together (`None` without verification).
fn verify_report(issuer: &Issuer) -> Option<VerifyReport> {
    issuer
        .verify_maps()
        .fold(None, |acc: Option<VerifyReport>, v| {
            let mut r = acc.unwrap_or_default();
            r.checked_blocks += v.checked_blocks;
            r.mismatch_count += v.mismatch_count;
            r.mismatches.extend(v.mismatches.iter().cloned());
            Some(r)
        })
}

/// Each zone's rate, placed in the first target's seek range (`None`
/// when the workload sweeps no zones).
fn zone_rates(w: &Workload, targets: &[LunTarget], meter: &Meter) -> Option<Vec<ZoneRate>> {
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
