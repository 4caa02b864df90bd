//! compare-scale's Markdown table: per row and target the medians of
//! IOPS, MB/s, target CPU per I/O, target cores busy, IOPS per target
//! core and the client's cores, with the steal; which rows are judged by
//! CPU per I/O (the client at a full core against both targets), and the
//! sessions goal (64 × 4 against 8 × 32).

use std::fmt::Write;

use super::{Report, Row, Spec, IN_FLIGHT};
use crate::clients::Sample;
use crate::summary::{med, num, opt, write_failures, write_versions, CLIENT_BOUND_CORES};

/// The sessions goal of issue 40: 64 sessions × QD 4 reach this share of
/// 8 × QD 32's IOPS.
pub const SESSIONS_GOAL: f64 = 0.85;

/// A row's name: `2 threads × 2 sessions × QD 32`.
pub fn label(spec: &Spec) -> String {
    let plural = |n: u32, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    format!(
        "{} × {} × QD {}",
        plural(spec.threads, "thread"),
        plural(spec.sessions, "session"),
        spec.qd
    )
}

/// CPU per I/O (µs) at `iops` as cores busy.
fn cores(us_per_io: Option<f64>, iops: f64) -> Option<f64> {
    us_per_io.map(|c| c * iops / 1e6)
}

/// The client's cores in a sample.
pub fn client_cores(s: &Sample) -> Option<f64> {
    cores(s.client_cpu_us_per_io, s.iops)
}

/// Whether the client was at a full core per thread in the median run
/// against `samples`.
fn client_bound(spec: &Spec, samples: &[Sample]) -> bool {
    let threads = f64::from(spec.threads.min(spec.sessions).max(1));
    med(samples, client_cores).is_some_and(|c| c >= CLIENT_BOUND_CORES * threads)
}

/// Rows where the client was at a full core against both targets: their
/// IOPS measure the client, so they are judged by CPU per I/O.
pub fn judged_by_cpu(row: &Row) -> bool {
    !row.tgt.is_empty()
        && !row.ironlun.is_empty()
        && client_bound(&row.spec, &row.tgt)
        && client_bound(&row.spec, &row.ironlun)
}

/// Median with the range over repetitions, when there are several.
fn spread(s: &[Sample], f: impl Fn(&Sample) -> Option<f64>, fmt: fn(f64) -> String) -> String {
    let v: Vec<f64> = s.iter().filter_map(&f).collect();
    let Some(m) = med(s, f) else {
        return "–".into();
    };
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), x| {
            (l.min(*x), h.max(*x))
        });
    if v.len() > 1 && hi > lo {
        format!("{} ({}–{})", fmt(m), fmt(lo), fmt(hi))
    } else {
        fmt(m)
    }
}

fn one(v: f64) -> String {
    format!("{v:.1}")
}

fn two(v: f64) -> String {
    format!("{v:.2}")
}

/// One target's line of a row.
fn write_target(s: &mut String, first: &str, name: &str, samples: &[Sample], target_cpus: usize) {
    let per_core = target_cpus.max(1) as f64;
    let _ = writeln!(
        s,
        "| {first} | {name} | {} | {} | {} | {} | {} | {} | {} |",
        spread(samples, |x| Some(x.iops), num),
        spread(samples, |x| Some(x.mb_per_s), num),
        spread(samples, |x| x.target_cpu_us_per_io, one),
        spread(samples, |x| cores(x.target_cpu_us_per_io, x.iops), two),
        spread(samples, |x| Some(x.iops / per_core), num),
        spread(samples, client_cores, two),
        spread(samples, |x| Some(x.steal_pct), one),
    );
}

/// ironlun over tgt: IOPS and CPU per I/O, medians.
fn ratio_text(row: &Row) -> String {
    let iops = |s: &[Sample]| med(s, |x| Some(x.iops));
    let cpu = |s: &[Sample]| med(s, |x| x.target_cpu_us_per_io);
    let r = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut t = format!(
        "ironlun/tgt: {} IOPS, {} CPU per I/O",
        opt(r(iops(&row.ironlun), iops(&row.tgt)), |x| format!(
            "{x:.2}×"
        )),
        opt(r(cpu(&row.ironlun), cpu(&row.tgt)), |x| format!("{x:.2}×"))
    );
    if judged_by_cpu(row) {
        t.push_str(" — the client was at a full core against both: judged by CPU per I/O");
    }
    t
}

/// 64 × 4 against 8 × 32 for one target, when both rows ran.
fn sessions_share(rows: &[Row], of: fn(&Row) -> &[Sample]) -> Option<f64> {
    let find = |sessions: u32| {
        rows.iter()
            .find(|r| r.spec.sessions == sessions && r.spec.in_flight() == IN_FLIGHT)
    };
    let (few, many) = (find(8)?, find(64)?);
    let a = med(of(many), |x| Some(x.iops))?;
    let b = med(of(few), |x| Some(x.iops))?;
    (b > 0.0).then_some(a / b)
}

/// The whole report as Markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    write_preamble(&mut s, r);
    let target_cpus = r.split.as_ref().map_or(r.host.cpus, |p| p.target_cpus);
    let _ = writeln!(
        s,
        "| row | target | IOPS | MB/s | target µs CPU/IO | target cores busy | IOPS per target core | client cores | steal % |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in &r.rows {
        write_target(
            &mut s,
            &label(&row.spec),
            "ironlun",
            &row.ironlun,
            target_cpus,
        );
        write_target(&mut s, "", "tgt", &row.tgt, target_cpus);
        let _ = writeln!(s, "| | | {} | | | | | | |", ratio_text(row));
    }
    let ironlun = sessions_share(&r.rows, |row| &row.ironlun);
    let tgt = sessions_share(&r.rows, |row| &row.tgt);
    if ironlun.is_some() || tgt.is_some() {
        let pct = |v: Option<f64>| opt(v, |x| format!("{:.0} %", x * 100.0));
        let met = match ironlun {
            Some(x) if x >= SESSIONS_GOAL => "met",
            Some(_) => "not met",
            None => "not measured",
        };
        let _ = writeln!(
            s,
            "\n64 sessions × QD 4 against 8 × QD 32 (the same {IN_FLIGHT} I/Os in flight): \
             ironlun {}, tgt {} of the IOPS; the goal (≥ {:.0} % for ironlun) is {met}.",
            pct(ironlun),
            pct(tgt),
            SESSIONS_GOAL * 100.0
        );
    }
    write_failures(&mut s, &r.failures);
    s
}

/// Where and how it was measured, and what the columns mean.
fn write_preamble(s: &mut String, r: &Report) {
    let pinned = match &r.split {
        Some(p) => format!(
            "the target on CPUs {} ({}), the client (ironlun bench) on CPUs {} ({})",
            p.target, p.target_cpus, p.client, p.client_cpus
        ),
        None => "one CPU: nothing pinned, target and client share it".into(),
    };
    let _ = writeln!(
        s,
        "compare-scale, measured {} on {} ({} CPUs, kernel {}); load average {} at the \
         start; {pinned}; {} of {:.1} s after 1 s of ramp; {:.0} s in all.\n",
        r.date,
        r.host.cpu_model,
        r.host.cpus,
        r.host.kernel,
        r.load_average,
        if r.reps == 1 {
            "one repetition".to_owned()
        } else {
            format!("{} alternating repetitions", r.reps)
        },
        r.measure_s,
        r.elapsed_s
    );
    write_versions(s, &r.versions);
    let _ = writeln!(
        s,
        "\n4 KiB random reads from a null LUN (tgt's null store, ironlun's `null:`) over \
         loopback. Medians, with the range over repetitions when there are several. Target \
         µs CPU/IO: all the daemon's threads, from /proc; target cores busy: that CPU over \
         the run; IOPS per target core: IOPS over the target's CPUs; client cores: ironlun \
         bench's CPU over the run (at ≥ {CLIENT_BOUND_CORES} per client thread against \
         both targets the client set the rate, and the row is judged by CPU per I/O); \
         steal: the hypervisor's, percent of all CPU time over the run. The session rows \
         hold {IN_FLIGHT} I/Os in flight (one session: 128, its command window).\n"
    );
}
