//! Merging what several agents measured of one workload into one
//! result: counts, bytes, IOPS and MB/s are sums; latencies come from the
//! sum of the agents' HDR histograms (exact: never an average of
//! percentiles); the per-second series adds each second's rates.
//!
//! Two figures are not exact and say so: a second's p99 in the merged
//! series is the largest of the agents' p99s for that second (an upper
//! bound: the agents send no per-second histograms), and the initiator
//! CPU percentages are the agents' mean (each of its own host; the
//! per-agent figures are in [`AgentShare`](crate::result::AgentShare)).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::engine::{buckets, log_buckets};
use crate::hdr::{self, Histograms};
use crate::result::{Cpu, Latency, Second, VerifyReport, WorkloadResult, ZoneRate};

/// Error messages kept in the merged result (all are counted).
const KEEP_ERRORS: usize = 20;

/// The parts (one workload as each agent measured it) as one result.
pub fn merge(parts: Vec<WorkloadResult>) -> Result<WorkloadResult, String> {
    let (all, read, write) = merged_histograms(&parts)?;
    let mut parts = parts.into_iter();
    let Some(mut m) = parts.next() else {
        return Err("no agent measured anything".into());
    };
    let mut cpus = vec![(m.cpu.clone(), m.ios)];
    for p in parts {
        add_totals(&mut m, &p);
        for l in p.luns {
            if !m.luns.contains(&l) {
                m.luns.push(l);
            }
        }
        let room = KEEP_ERRORS.saturating_sub(m.error_samples.len());
        m.error_samples
            .extend(p.error_samples.into_iter().take(room));
        m.verify = merge_verify(m.verify.take(), p.verify);
        m.series = merge_series(&m.series, &p.series);
        m.zones = merge_zones(m.zones.take(), p.zones);
        m.ops = crate::mix::merge(std::mem::take(&mut m.ops), &p.ops);
        m.steady = crate::steady::merge(m.steady.take(), p.steady);

        cpus.push((p.cpu, p.ios));
    }
    m.cpu = merge_cpu(&cpus);
    m.latency_us = Latency::from_histogram(&all);
    m.read_latency_us = Latency::from_histogram(&read);
    m.write_latency_us = Latency::from_histogram(&write);
    m.transaction_time_us = m.latency_us.mean;
    m.histogram_us = log_buckets(&all);
    m.percentiles_us = Latency::curve(&all);
    m.latency_buckets_ns = buckets(&all);
    m.hdr = Some(Histograms::encode(&all, &read, &write)?);
    Ok(m)
}

/// The sums of the parts' histograms (all, read, write).
fn merged_histograms(parts: &[WorkloadResult]) -> Result<hdr::Three, String> {
    let (mut all, mut read, mut write) = (hdr::empty()?, hdr::empty()?, hdr::empty()?);
    for (i, p) in parts.iter().enumerate() {
        let h = p
            .hdr
            .as_ref()
            .ok_or_else(|| format!("part {i} has no latency histograms"))?;
        let (a, r, w) = h.decode()?;
        let add = |into: &mut Histogram<u64>, from: &Histogram<u64>| {
            into.add(from)
                .map_err(|e| format!("merging latency histograms: {e:?}"))
        };
        add(&mut all, &a)?;
        add(&mut read, &r)?;
        add(&mut write, &w)?;
    }
    Ok((all, read, write))
}

fn add_totals(m: &mut WorkloadResult, p: &WorkloadResult) {
    m.elapsed_s = m.elapsed_s.max(p.elapsed_s);
    m.ios += p.ios;
    m.read_ios += p.read_ios;
    m.write_ios += p.write_ios;
    m.iops += p.iops;
    m.read_iops += p.read_iops;
    m.write_iops += p.write_iops;
    m.mb_per_s += p.mb_per_s;
    m.mib_per_s += p.mib_per_s;
    m.read_mb_per_s += p.read_mb_per_s;
    m.write_mb_per_s += p.write_mb_per_s;
    m.errors += p.errors;
    // Every agent's threads: the run's `threads` is their sum and
    // `per_thread` lists them agent by agent, in the agents' order.
    m.threads += p.threads;
    m.per_thread.extend(p.per_thread.iter().cloned());
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

/// Second by second: rates add; p99 is the largest of the parts'.
fn merge_series(a: &[Second], b: &[Second]) -> Vec<Second> {
    let mut by_t: BTreeMap<u32, Second> = BTreeMap::new();
    for s in a.iter().chain(b) {
        let m = by_t.entry(s.t).or_insert_with(|| Second {
            t: s.t,
            ..Second::default()
        });
        m.iops += s.iops;
        m.read_iops += s.read_iops;
        m.write_iops += s.write_iops;
        m.mb_per_s += s.mb_per_s;
        m.p99_us = m.p99_us.max(s.p99_us);
    }
    by_t.into_values().collect()
}

/// Zone by zone, the rates add (every agent swept the same zones).
fn merge_zones(a: Option<Vec<ZoneRate>>, b: Option<Vec<ZoneRate>>) -> Option<Vec<ZoneRate>> {
    let (mut a, b) = (a?, b?);
    for (z, bz) in a.iter_mut().zip(b) {
        z.mb_per_s += bz.mb_per_s;
    }
    Some(a)
}

/// The agents' CPU: host and process percentages as their mean (each is
/// of its own host), CPU time per I/O over all their I/Os (each part's
/// with its I/O count).
fn merge_cpu(cpus: &[(Cpu, u64)]) -> Cpu {
    let mean = |f: fn(&Cpu) -> Option<f64>| -> Option<f64> {
        let v: Option<Vec<f64>> = cpus.iter().map(|(c, _)| f(c)).collect();
        v.filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
    };
    Cpu {
        initiator_pct: mean(|c| c.initiator_pct),
        target_pct: None,
        initiator_process_pct: mean(|c| c.initiator_process_pct),
        iops_per_cpu_pct: None,
        initiator_us_per_io: per_io(cpus),
        target_us_per_io: None,
    }
}

/// Load-generator CPU time per I/O over every part: their CPU times
/// (µs per I/O × I/Os) summed, over all their I/Os.
fn per_io(cpus: &[(Cpu, u64)]) -> Option<f64> {
    let mut us = 0.0;
    let mut ios = 0u64;
    for (c, n) in cpus {
        us += c.initiator_us_per_io? * *n as f64;
        ios += n;
    }
    (ios > 0).then(|| us / ios as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::ThreadTotals;
    use crate::spec::{AccessLine, Workload};

    /// A part that measured `latencies_us`, each a 4 KiB read, over
    /// `secs` seconds (one second per entry of `per_second`).
    fn part(latencies_us: &[u64], per_second: &[(f64, f64)], cpu_us_per_io: f64) -> WorkloadResult {
        let mut all = hdr::empty().unwrap();
        for &us in latencies_us {
            all.record(us * 1000).unwrap();
        }
        let none = hdr::empty().unwrap();
        let n = latencies_us.len() as u64;
        let secs = per_second.len() as f64;
        WorkloadResult {
            name: "w".into(),
            description: String::new(),
            alignment: String::new(),
            luns: vec!["lun".into()],
            elapsed_s: secs,
            ios: n,
            read_ios: n,
            write_ios: 0,
            iops: n as f64 / secs,
            read_iops: n as f64 / secs,
            write_iops: 0.0,
            mb_per_s: n as f64 * 4096.0 / secs / 1e6,
            mib_per_s: n as f64 * 4096.0 / secs / 1048576.0,
            read_mb_per_s: n as f64 * 4096.0 / secs / 1e6,
            write_mb_per_s: 0.0,
            latency_us: Latency::from_histogram(&all),
            read_latency_us: Latency::from_histogram(&all),
            write_latency_us: Latency::default(),
            transaction_time_us: 0.0,
            cpu: Cpu {
                initiator_pct: Some(40.0),
                initiator_process_pct: Some(10.0),
                initiator_us_per_io: Some(cpu_us_per_io),
                ..Cpu::default()
            },
            errors: 1,
            error_samples: vec!["e".into()],
            verify: None,
            series: per_second
                .iter()
                .enumerate()
                .map(|(t, &(iops, p99_us))| Second {
                    t: t as u32,
                    iops,
                    read_iops: iops,
                    write_iops: 0.0,
                    mb_per_s: iops * 4096.0 / 1e6,
                    p99_us,
                })
                .collect(),
            histogram_us: Vec::new(),
            percentiles_us: Vec::new(),
            zones: None,
            hdr: Some(Histograms::encode(&all, &all, &none).unwrap()),
            agents: Vec::new(),
            threads: 1,
            per_thread: vec![ThreadTotals {
                ios: latencies_us.len() as u64,
                read_ios: latencies_us.len() as u64,
                write_ios: 0,
                bytes: latencies_us.len() as u64 * 4096,
                errors: 1,
            }],
            latency_buckets_ns: Vec::new(),
            ops: Default::default(),
            steady: None,
            workload: Workload::simple("w", "", AccessLine::simple(4096, 100, 100), 1),
        }
    }

    #[test]
    fn totals_are_sums_and_percentiles_come_from_the_merged_histogram() {
        // A fast agent (900 I/Os at 100 µs) and a slow one (100 at
        // 10 ms): the merged p99 is the slow agent's latency and the p90
        // the fast one's, which no average of their percentiles gives.
        let fast = part(&[100; 900], &[(450.0, 100.0), (450.0, 100.0)], 4.0);
        let slow = part(&[10_000; 100], &[(60.0, 10_000.0), (40.0, 10_000.0)], 24.0);
        let m = merge(vec![fast.clone(), slow.clone()]).unwrap();
        assert_eq!(m.ios, 1000);
        assert_eq!(m.read_ios, 1000);
        assert_eq!(m.iops, fast.iops + slow.iops);
        assert_eq!(m.mb_per_s, fast.mb_per_s + slow.mb_per_s);
        assert_eq!(m.errors, 2);
        // Each agent's thread, not the first agent's only.
        assert_eq!(m.threads, 2);
        assert_eq!(m.per_thread.len(), 2);
        assert_eq!(m.per_thread.iter().map(|t| t.ios).sum::<u64>(), m.ios);
        let (all, read, write) = m.hdr.as_ref().unwrap().decode().unwrap();
        assert_eq!(all.len(), 1000);
        assert_eq!(read.len(), 1000);
        assert_eq!(write.len(), 0);
        assert_eq!(
            m.latency_us.p99,
            all.value_at_quantile(0.99) as f64 / 1000.0
        );
        assert!(
            (m.latency_us.p99 - 10_000.0).abs() < 10.0,
            "{}",
            m.latency_us.p99
        );
        assert!(
            (m.latency_us.p90 - 100.0).abs() < 0.5,
            "{}",
            m.latency_us.p90
        );
        assert!(
            (m.latency_us.mean - 1090.0).abs() < 2.0,
            "{}",
            m.latency_us.mean
        );
        assert_eq!(m.histogram_us.iter().map(|b| b.1).sum::<u64>(), 1000);
        let series: Vec<(f64, f64)> = m.series.iter().map(|s| (s.iops, s.p99_us)).collect();
        assert_eq!(series, [(510.0, 10_000.0), (490.0, 10_000.0)]);
        // CPU per I/O over every I/O: (900 × 4 + 100 × 24) / 1000.
        assert_eq!(m.cpu.initiator_us_per_io, Some(6.0));
        assert_eq!(m.cpu.initiator_pct, Some(40.0));
        assert_eq!(m.luns, ["lun"]);
    }

    #[test]
    fn a_part_without_histograms_or_no_part_at_all_is_an_error() {
        let mut p = part(&[100; 10], &[(10.0, 100.0)], 1.0);
        assert!(merge(vec![]).is_err());
        p.hdr = None;
        let e = merge(vec![p]).unwrap_err();
        assert!(e.contains("no latency histograms"), "{e}");
    }
}
