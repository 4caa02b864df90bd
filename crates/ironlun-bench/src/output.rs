//! Human table, JSON and CSV of a run.

use std::fmt::Write as _;

use crate::result::{RunReport, WorkloadResult};

fn opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    }
}

/// The final table a person reads.
pub fn table(results: &[WorkloadResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<22} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>6}",
        "workload",
        "IOPS",
        "MB/s",
        "MiB/s",
        "mean µs",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "max µs",
        "ini %",
        "tgt %",
        "errors"
    );
    for r in results {
        let l = &r.latency_us;
        let _ = writeln!(
            s,
            "{:<22} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.0} {:>6} {:>6} {:>6}",
            r.name,
            r.iops,
            r.mb_per_s,
            r.mib_per_s,
            l.mean,
            l.p50,
            l.p99,
            l.p999,
            l.max,
            opt(r.cpu.initiator_pct, 1),
            opt(r.cpu.target_pct, 1),
            r.errors
        );
        if r.read_ios > 0 && r.write_ios > 0 {
            let _ = writeln!(
                s,
                "{:<22} read {:.0} IOPS {:.1} MB/s mean {:.1} µs; write {:.0} IOPS {:.1} MB/s mean {:.1} µs",
                "",
                r.read_iops,
                r.read_mb_per_s,
                r.read_latency_us.mean,
                r.write_iops,
                r.write_mb_per_s,
                r.write_latency_us.mean
            );
        }
        if r.workload.random_pct() > 0 && !r.alignment.is_empty() {
            let _ = writeln!(s, "{:<22} random offsets aligned to {}", "", r.alignment);
        }
        if r.per_thread.len() > 1 {
            let ios: Vec<String> = r.per_thread.iter().map(|t| t.ios.to_string()).collect();
            let _ = writeln!(
                s,
                "{:<22} {} threads, I/Os {} = {}",
                "",
                r.threads,
                ios.join(" + "),
                r.ios
            );
        }
        if let Some(v) = &r.verify {
            let _ = writeln!(
                s,
                "{:<22} verify: {} blocks checked, {} mismatches",
                "", v.checked_blocks, v.mismatch_count
            );
            for m in v.mismatches.iter().take(10) {
                let _ = writeln!(s, "{:<22}   LBA {}: {}", "", m.lba, m.what);
            }
        }
        for e in r.error_samples.iter().take(5) {
            let _ = writeln!(s, "{:<22}   error: {e}", "");
        }
        if let Some(z) = &r.zones {
            let rates: Vec<String> = z.iter().map(|z| format!("{:.0}", z.mb_per_s)).collect();
            let _ = writeln!(s, "{:<22} MB/s per zone: {}", "", rates.join(" "));
        }
        if !r.ops.is_empty() {
            let _ = writeln!(s, "{:<22} by op: {}", "", crate::mix::describe(&r.ops));
        }
        if let Some(st) = &r.steady {
            let _ = writeln!(s, "{:<22} steady state: {}", "", st.describe());
        }
        agent_lines(&mut s, r);
    }
    s
}

/// Each agent's part of a run driven by agents, under its totals.
fn agent_lines(s: &mut String, r: &WorkloadResult) {
    for a in &r.agents {
        let _ = writeln!(
            s,
            "{:<22}   agent {} ({}): {:.0} IOPS {:.1} MB/s p99 {:.1} µs, host CPU {} %, \
             process CPU {} %, {} µs CPU per I/O, clock offset {:+.3} ms (rtt {:.3} ms), \
             started {:.3} ms late, {} errors",
            "",
            a.agent,
            a.host,
            a.iops,
            a.mb_per_s,
            a.latency_us.p99,
            opt(a.cpu.initiator_pct, 1),
            opt(a.cpu.initiator_process_pct, 1),
            opt(a.cpu.initiator_us_per_io, 2),
            a.clock_offset_ms,
            a.rtt_ms,
            a.start_late_ms,
            a.errors
        );
    }
}

pub fn json(report: &RunReport) -> Result<String, String> {
    serde_json::to_string_pretty(report).map_err(|e| e.to_string())
}

/// Reads a results file [`json`] wrote.
pub fn read_json(text: &str) -> Result<RunReport, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// One row per workload.
pub fn csv(results: &[WorkloadResult]) -> String {
    let mut s = String::from(
        "name,iops,read_iops,write_iops,mb_per_s,mib_per_s,read_mb_per_s,write_mb_per_s,\
         lat_mean_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_p9999_us,lat_max_us,\
         initiator_cpu_pct,target_cpu_pct,errors,elapsed_s\n",
    );
    for r in results {
        let l = &r.latency_us;
        let _ = writeln!(
            s,
            "{},{:.1},{:.1},{:.1},{:.3},{:.3},{:.3},{:.3},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{},{},{},{:.3}",
            r.name.replace(',', ";"),
            r.iops,
            r.read_iops,
            r.write_iops,
            r.mb_per_s,
            r.mib_per_s,
            r.read_mb_per_s,
            r.write_mb_per_s,
            l.mean,
            l.p50,
            l.p90,
            l.p99,
            l.p999,
            l.p9999,
            l.max,
            opt(r.cpu.initiator_pct, 2),
            opt(r.cpu.target_pct, 2),
            r.errors,
            r.elapsed_s
        );
    }
    s
}
