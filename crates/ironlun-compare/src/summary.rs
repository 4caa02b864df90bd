//! Medians, ratios and goals: the comparison table (Markdown, so it can
//! go into docs/performance.md as printed).

use std::fmt::Write;
use std::path::Path;
use std::process::Command;

use crate::clients::Sample;
use crate::workloads::{Goal, Workload};
use crate::{Report, Row, ScalingRow};

/// Median of the values (mean of the middle two for an even count).
pub fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let hi = *v.get(n / 2)?;
    if n % 2 == 1 {
        Some(hi)
    } else {
        Some((v.get(n / 2 - 1)? + hi) / 2.0)
    }
}

/// Median of one figure of the samples (those that have it).
pub(crate) fn med(s: &[Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    median(s.iter().filter_map(f).collect())
}

/// The figure a workload is judged by: MB/s for large transfers, mean
/// latency at QD 1, else IOPS.
pub fn figure(w: &Workload, s: &Sample) -> f64 {
    match w.goal {
        Goal::LatencyRatio(_) => s.mean_latency_us,
        Goal::RateRatio(_) if w.by_bandwidth() => s.mb_per_s,
        Goal::RateRatio(_) => s.iops,
    }
}

pub(crate) fn unit(w: &Workload) -> &'static str {
    match w.goal {
        Goal::LatencyRatio(_) => "µs",
        Goal::RateRatio(_) if w.by_bandwidth() => "MB/s",
        Goal::RateRatio(_) => "IOPS",
    }
}

/// A figure in few digits: thousands as K, one decimal below 100.
pub(crate) fn num(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1}K", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub fn rate_text(w: &Workload, s: &Sample) -> String {
    format!("{} {}", num(figure(w, s)), unit(w))
}

/// One row's verdicts: the figure ratio and the CPU ratio (ironlun over
/// tgt), and whether each goal holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub tgt: Option<f64>,
    pub ironlun: Option<f64>,
    pub ratio: Option<f64>,
    pub met: Option<bool>,
    pub tgt_cpu: Option<f64>,
    pub ironlun_cpu: Option<f64>,
    pub cpu_ratio: Option<f64>,
    pub cpu_met: Option<bool>,
    pub steal: Option<f64>,
    /// The client's CPU per I/O against each target, microseconds.
    pub tgt_client_cpu: Option<f64>,
    pub ironlun_client_cpu: Option<f64>,
    /// The client's CPU in cores against each target.
    pub tgt_client_cores: Option<f64>,
    pub ironlun_client_cores: Option<f64>,
    /// The row's verdict: by the rate (and CPU) goals, or, when the
    /// client was at a full core against both targets, by CPU per I/O.
    pub outcome: Option<bool>,
    /// Why, in words, for the table.
    pub reason: String,
}

/// A client busy this much of a core against ironlun set the rate itself
/// (every client here drives its I/O from one thread).
pub const CLIENT_BOUND_CORES: f64 = 0.9;

impl Verdict {
    /// The client, not ironlun, limited ironlun's figure.
    pub fn client_bound(&self) -> bool {
        self.ironlun_client_cores
            .is_some_and(|c| c >= CLIENT_BOUND_CORES)
    }

    /// The client at a full core against both targets: each rate is one
    /// core over the client's own cost per I/O, so the rate ratio measures
    /// the client, and the row is judged by CPU per I/O instead.
    pub fn judged_by_cpu(&self) -> bool {
        self.client_bound()
            && self
                .tgt_client_cores
                .is_some_and(|c| c >= CLIENT_BOUND_CORES)
    }
}

/// The most target CPU per I/O, against tgt's, a row may spend: its CPU
/// goal, or else the rate goal turned into a cost (twice the rate at the
/// same resources is half the cost per I/O).
fn cpu_bound(w: &Workload) -> f64 {
    w.cpu_goal.unwrap_or(match w.goal {
        Goal::RateRatio(g) => 1.0 / g,
        Goal::LatencyRatio(g) => g,
    })
}

/// Decides the row against the peer named `peer` and says why.
fn judge(w: &Workload, v: &mut Verdict, peer: &str) {
    if v.judged_by_cpu() {
        let bound = cpu_bound(w);
        let (Some(cpu), Some(ic), Some(tc)) = (v.cpu_ratio, v.ironlun_client_cpu, v.tgt_client_cpu)
        else {
            v.reason = "client-bound against both targets; CPU per I/O not measured".into();
            return;
        };
        v.outcome = Some(cpu <= bound && ic <= tc);
        v.reason = format!(
            "client-bound ({:.2} / {:.2} cores): judged by CPU per I/O: target {cpu:.2}× {peer}'s \
             (≤ {bound:.2}), client {ic:.1} vs {tc:.1} µs (≤ {peer}'s)",
            v.tgt_client_cores.unwrap_or(0.0),
            v.ironlun_client_cores.unwrap_or(0.0),
        );
        return;
    }
    let Some(ratio) = v.ratio else {
        v.reason = "not measured".into();
        return;
    };
    let goal = match w.goal {
        Goal::RateRatio(g) => format!("{ratio:.2}× {peer} (≥ {g:.1})"),
        Goal::LatencyRatio(g) => format!("latency {ratio:.2}× {peer}'s (≤ {g:.1})"),
    };
    v.outcome = v.met.map(|m| m && v.cpu_met != Some(false));
    v.reason = match (v.cpu_ratio, w.cpu_goal) {
        (Some(c), Some(g)) => format!("{goal}, CPU {c:.2}× (≤ {g:.1})"),
        _ => goal,
    };
}

/// ironlun against tgt on `row`.
pub fn verdict(row: &Row) -> Verdict {
    verdict_against(&row.workload, &row.tgt, &row.ironlun, "tgt")
}

/// ironlun's runs against a peer's (named `peer`) on workload `w`, by the
/// workload's goals; the verdict's `tgt*` fields then hold the peer's
/// figures.
pub fn verdict_against(
    w: &Workload,
    peer_runs: &[Sample],
    ironlun_runs: &[Sample],
    peer: &str,
) -> Verdict {
    let tgt = med(peer_runs, |s| Some(figure(w, s)));
    let ironlun = med(ironlun_runs, |s| Some(figure(w, s)));
    let ratio = match (tgt, ironlun) {
        (Some(t), Some(i)) if t > 0.0 => Some(i / t),
        _ => None,
    };
    let met = ratio.map(|r| match w.goal {
        Goal::RateRatio(g) => r >= g,
        Goal::LatencyRatio(g) => r <= g,
    });
    let tgt_cpu = med(peer_runs, |s| s.target_cpu_us_per_io);
    let ironlun_cpu = med(ironlun_runs, |s| s.target_cpu_us_per_io);
    let cpu_ratio = match (tgt_cpu, ironlun_cpu) {
        (Some(t), Some(i)) if t > 0.0 => Some(i / t),
        _ => None,
    };
    let cpu_met = match (w.cpu_goal, cpu_ratio) {
        (Some(g), Some(r)) => Some(r <= g),
        _ => None,
    };
    let all: Vec<f64> = peer_runs
        .iter()
        .chain(ironlun_runs)
        .map(|s| s.steal_pct)
        .collect();
    let mut v = Verdict {
        tgt,
        ironlun,
        ratio,
        met,
        tgt_cpu,
        ironlun_cpu,
        cpu_ratio,
        cpu_met,
        steal: median(all),
        tgt_client_cpu: med(peer_runs, |s| s.client_cpu_us_per_io),
        ironlun_client_cpu: med(ironlun_runs, |s| s.client_cpu_us_per_io),
        tgt_client_cores: med(peer_runs, |s| s.client_cores),
        ironlun_client_cores: med(ironlun_runs, |s| s.client_cores),
        outcome: None,
        reason: String::new(),
    };
    judge(w, &mut v, peer);
    v
}

/// A figure formatted by `f`, or a dash when unknown.
pub(crate) fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".to_owned(), f)
}

pub(crate) fn goal_text(met: Option<bool>, goal: String) -> String {
    match met {
        Some(true) => format!("{goal} ✓"),
        Some(false) => format!("{goal} **✗**"),
        None => goal,
    }
}

/// A verdict cell: ✓ or a bold ✗ before the reason, or the reason alone
/// when nothing was decided.
pub(crate) fn outcome_text(outcome: Option<bool>, reason: &str) -> String {
    match outcome {
        Some(true) => format!("✓ {reason}"),
        Some(false) => format!("**✗** {reason}"),
        None => reason.to_owned(),
    }
}

/// The versions measured, one list item each.
pub(crate) fn write_versions(s: &mut String, versions: &[(String, String)]) {
    for (name, v) in versions {
        let _ = writeln!(s, "- {name}: {v}");
    }
}

/// The failed runs, when there were any.
pub(crate) fn write_failures(s: &mut String, failures: &[String]) {
    if !failures.is_empty() {
        let _ = writeln!(s, "\nFailed runs:");
        for f in failures {
            let _ = writeln!(s, "- {f}");
        }
    }
}

/// The whole report as Markdown.
pub fn markdown(r: &Report) -> String {
    let mut s = String::new();
    write_preamble(&mut s, r);
    let bound = write_rows(&mut s, &r.rows);
    write_client_bound(&mut s, &bound);
    write_wire_shares(&mut s, r);
    if !r.scaling.is_empty() {
        write_scaling(&mut s, &r.scaling);
    }
    crate::istgt_summary::write(&mut s, r);
    write_failures(&mut s, &r.failures);
    s
}

/// Where and how it was measured, the versions, and what the columns mean.
fn write_preamble(s: &mut String, r: &Report) {
    let _ = writeln!(
        s,
        "Measured {} on {} ({} CPUs, kernel {}); {} alternating repetitions of {:.1} s \
         (warm-up excluded), LUNs of {} MiB; {:.0} s in all.\n",
        r.date,
        r.host.cpu_model,
        r.host.cpus,
        r.host.kernel,
        r.reps,
        r.measure_s,
        r.lun_size >> 20,
        r.elapsed_s
    );
    write_versions(s, &r.versions);
    let _ = writeln!(
        s,
        "\nMedians; ratio = ironlun / tgt. CPU = target daemon CPU time (all threads, \
         /proc/PID/stat) per I/O over the measured interval. Client = the client \
         process's own CPU per I/O and its CPU in cores, against tgt / against \
         ironlun; a client at ≥ {CLIENT_BOUND_CORES} of a core against ironlun \
         (in bold) set ironlun's rate itself. A row whose client was at a full core \
         against both targets measures the client, not the targets: it is judged by \
         CPU per I/O (the target's against tgt's, within the row's CPU goal or the \
         rate goal turned into a cost, and the client's against tgt no higher), and \
         the verdict column says so.\n"
    );
}

/// The table of rows; returns the rows missed with the client at a full
/// core against ironlun (but judged by the rate), in words.
fn write_rows(s: &mut String, rows: &[Row]) -> Vec<String> {
    let _ = writeln!(
        s,
        "| workload | LUN | client | tgt | ironlun | ratio (goal) | tgt CPU µs/IO | ironlun CPU µs/IO | CPU ratio (goal) | client µs/IO | client cores | steal % | verdict |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|"
    );
    let mut bound = Vec::new();
    for row in rows {
        let v = verdict(row);
        if v.client_bound() && !v.judged_by_cpu() && v.outcome == Some(false) {
            bound.push(format!(
                "{} {} with {}",
                row.workload.name,
                row.workload.lun.name(),
                row.client.name()
            ));
        }
        write_row(s, row, &v);
    }
    bound
}

/// One row of the table.
fn write_row(s: &mut String, row: &Row, v: &Verdict) {
    let w = &row.workload;
    let goal = match w.goal {
        Goal::RateRatio(g) => format!("≥ {g:.1}"),
        Goal::LatencyRatio(g) => format!("≤ {g:.1}"),
    };
    let cpu_goal = w.cpu_goal.map_or_else(String::new, |g| format!("≤ {g:.1}"));
    let client = match row.note {
        Some(n) => format!("{} ({n})", row.client.name()),
        None => row.client.name().to_owned(),
    };
    let u = unit(w);
    let _ = writeln!(
        s,
        "| {} | {} | {client} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} | {} |",
        w.name,
        w.lun.name(),
        opt(v.tgt, |x| format!("{} {u}", num(x))),
        opt(v.ironlun, |x| format!("{} {u}", num(x))),
        goal_text(v.met, opt(v.ratio, |x| format!("{x:.2} ({goal})"))),
        opt(v.tgt_cpu, |x| format!("{x:.1}")),
        opt(v.ironlun_cpu, |x| format!("{x:.1}")),
        goal_text(
            v.cpu_met,
            opt(v.cpu_ratio, |x| if cpu_goal.is_empty() {
                format!("{x:.2}")
            } else {
                format!("{x:.2} ({cpu_goal})")
            })
        ),
        opt(v.tgt_client_cpu, |x| format!("{x:.1}")),
        opt(v.ironlun_client_cpu, |x| format!("{x:.1}")),
        opt(v.tgt_client_cores, |x| format!("{x:.2}")),
        opt(v.ironlun_client_cores, |x| if v.client_bound() {
            format!("**{x:.2}**")
        } else {
            format!("{x:.2}")
        }),
        opt(v.steal, |x| format!("{x:.0}")),
        outcome_text(v.outcome, &v.reason),
    );
}

/// The note on rows missed with the client at a full core against
/// ironlun, when there were any.
fn write_client_bound(s: &mut String, bound: &[String]) {
    if !bound.is_empty() {
        let _ = writeln!(
            s,
            "\nMissed with the client at a full core against ironlun (but not against \
             tgt): {}. There the ratio measures the client's CPU per I/O against each \
             target more than the targets themselves.",
            bound.join("; ")
        );
    }
}

/// iperf3's loopback rate, and ironlun's rate against it for the rows
/// with a wire-share goal.
fn write_wire_shares(s: &mut String, r: &Report) {
    let wire = median(r.iperf3_mb_per_s.clone());
    let _ = writeln!(
        s,
        "\niperf3, one TCP stream over loopback: {} MB/s (median).",
        opt(wire, |x| format!("{x:.0}"))
    );
    for row in r
        .rows
        .iter()
        .filter(|r| r.workload.wire_share_goal.is_some())
    {
        let w = &row.workload;
        let goal = w.wire_share_goal.unwrap_or(0.0);
        let v = verdict(row);
        if let (Some(i), Some(wire)) = (v.ironlun, wire) {
            let share = i / wire;
            let _ = writeln!(
                s,
                "- {} with {}: ironlun {:.0} MB/s = {:.0} % of iperf3 (goal ≥ {:.0} %) {}",
                w.name,
                row.client.name(),
                i,
                share * 100.0,
                goal * 100.0,
                if share >= goal { "✓" } else { "**✗**" }
            );
        }
    }
}

/// The sessions table and its verdict.
fn write_scaling(s: &mut String, scaling: &[ScalingRow]) {
    let _ = writeln!(
        s,
        "\nSessions (ironlun bench, 4 KiB random reads, QD 64 per session, file LUN): \
         aggregate IOPS and the daemon's peak resident memory.\n"
    );
    let _ = writeln!(
        s,
        "| sessions | tgt IOPS | ironlun IOPS | ratio | tgt RSS MB | ironlun RSS MB |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|");
    let rss = |v: &[Sample]| {
        v.iter()
            .filter_map(|x| x.target_rss_peak)
            .max()
            .map(|b| b as f64 / 1e6)
    };
    for sc in scaling {
        let t = med(&sc.tgt, |x| Some(x.iops));
        let i = med(&sc.ironlun, |x| Some(x.iops));
        let ratio = match (t, i) {
            (Some(t), Some(i)) if t > 0.0 => Some(i / t),
            _ => None,
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            sc.sessions,
            opt(t, num),
            opt(i, num),
            opt(ratio, |x| format!("{x:.2}")),
            opt(rss(&sc.tgt), |x| format!("{x:.0}")),
            opt(rss(&sc.ironlun), |x| format!("{x:.0}")),
        );
    }
    let _ = writeln!(s, "\n{}", scaling_verdict(scaling));
}

/// The least share of the best aggregate IOPS at fewer sessions that a
/// session count may reach (the issue's goal: no point below 95 %).
pub const SESSIONS_FLOOR: f64 = 0.95;

/// Sessions may not cost throughput: ironlun's aggregate IOPS at each
/// session count against the best at fewer counts **in the same
/// repetition**, and the median of those ratios over repetitions, at
/// least [`SESSIONS_FLOOR`]. One repetition measures every count within about
/// a minute (in alternating order), while repetitions lie minutes apart
/// on a VM whose speed drifts; comparing within a repetition keeps that
/// drift out of the verdict. The medians of the table are shown beside
/// it, and a fall of those medians is reported too.
pub fn scaling_verdict(rows: &[ScalingRow]) -> String {
    // (sessions, median paired ratio, repetitions compared)
    let mut worst: Option<(usize, f64, usize)> = None;
    for (j, sc) in rows.iter().enumerate() {
        let ratios: Vec<f64> = sc
            .ironlun
            .iter()
            .filter_map(|s| {
                let best = rows
                    .iter()
                    .take(j)
                    .flat_map(|r| r.ironlun.iter())
                    .filter(|x| x.rep == s.rep)
                    .map(|x| x.iops)
                    .max_by(f64::total_cmp)?;
                (best > 0.0).then(|| s.iops / best)
            })
            .collect();
        let n = ratios.len();
        if let Some(r) = median(ratios) {
            if worst.is_none_or(|(_, w, _)| r < w) {
                worst = Some((sc.sessions, r, n));
            }
        }
    }
    let unpaired = unpaired_worst(rows);
    let aside = match unpaired {
        Some((n, r)) => format!(
            " Across repetitions (the medians in the table), the lowest was {n} sessions at {:.0} % of the best at fewer.",
            r * 100.0
        ),
        None => String::new(),
    };
    match worst {
        // Rounded down, so that a fall never prints as the share allowed.
        Some((n, r, k)) if r < SESSIONS_FLOOR => format!(
            "ironlun's aggregate IOPS **fell** with more sessions: {n} sessions reached {:.1} % of the best at fewer in the same repetition (median of {k}).{aside}",
            (r * 1000.0).floor() / 10.0
        ),
        Some((n, r, k)) => format!(
            "ironlun's aggregate IOPS holds as sessions grow: the lowest was {n} sessions at {:.0} % of the best at fewer in the same repetition (median of {k}; goal ≥ {:.0} %).{aside}",
            r * 100.0,
            SESSIONS_FLOOR * 100.0
        ),
        None => "Not enough session counts measured to judge scaling.".to_owned(),
    }
}

/// The lowest ratio of a count's median IOPS to the best median at fewer
/// counts.
fn unpaired_worst(rows: &[ScalingRow]) -> Option<(usize, f64)> {
    let mut best: Option<f64> = None;
    let mut worst: Option<(usize, f64)> = None;
    for sc in rows {
        let Some(i) = med(&sc.ironlun, |x| Some(x.iops)) else {
            continue;
        };
        if let Some(b) = best.filter(|b| *b > 0.0) {
            let r = i / b;
            if worst.is_none_or(|(_, w)| r < w) {
                worst = Some((sc.sessions, r));
            }
        }
        best = Some(best.map_or(i, |b| b.max(i)));
    }
    worst
}

/// The installed version of Debian package `p` ("?" when not installed).
pub(crate) fn package_version(p: &str) -> String {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", p])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "?".to_owned())
}

/// Versions of everything measured.
pub fn versions(exe: &Path) -> Vec<(String, String)> {
    let pkg = package_version;
    let ironlun = Command::new(exe)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned());
    vec![
        ("ironlun".into(), ironlun),
        ("tgt".into(), pkg("tgt")),
        ("libiscsi-bin (iscsi-perf)".into(), pkg("libiscsi-bin")),
        ("qemu-utils (qemu-img)".into(), pkg("qemu-utils")),
        ("iperf3".into(), pkg("iperf3")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Client;
    use crate::workloads::all;

    fn sample(iops: f64, cpu: f64) -> Sample {
        Sample {
            iops,
            mb_per_s: iops * 4096.0 / 1e6,
            mean_latency_us: 64e6 / iops,
            target_cpu_us_per_io: Some(cpu),
            ..Sample::default()
        }
    }

    /// A report that reaches every part of the table: a row with a note,
    /// one limited by the client against ironlun only, one judged by CPU
    /// per I/O, one by MB/s with a wire-share goal, one unmeasured, the
    /// sessions table (with a count tgt did not serve) and failed runs.
    fn sample_report() -> Report {
        let find = |name: &str, lun| {
            all()
                .into_iter()
                .find(|w| w.name == name && w.lun == lun)
                .unwrap()
        };
        let with_client = |iops: f64, cpu: f64, cores: f64, steal: f64| Sample {
            client_cores: Some(cores),
            client_cpu_us_per_io: Some(cores * 1e6 / iops),
            steal_pct: steal,
            ..sample(iops, cpu)
        };
        let row = |workload, client, note, tgt, ironlun| Row {
            workload,
            client,
            note,
            tgt,
            ironlun,
            istgt: Vec::new(),
            istgt_unsupported: None,
        };
        let file = crate::workloads::LunKind::File;
        let null = crate::workloads::LunKind::Null;
        let rss = |iops: f64, rep, rss: u64| Sample {
            rep,
            target_rss_peak: Some(rss),
            ..sample(iops, 1.0)
        };
        Report {
            date: "2026-01-02T03:04:05Z".into(),
            host: crate::test_host(),
            versions: vec![
                ("ironlun".into(), "ironlun 0.1.0".into()),
                ("tgt".into(), "1:1.0.85-1".into()),
            ],
            reps: 3,
            measure_s: 5.0,
            lun_size: 256 << 20,
            iperf3_mb_per_s: vec![3000.0, 3200.0, 2900.0],
            rows: vec![
                row(
                    find("4k-randread-qd64", file),
                    Client::IronlunBench,
                    None,
                    vec![
                        with_client(40e3, 20.0, 0.5, 1.0),
                        with_client(30e3, 22.0, 0.6, 3.0),
                    ],
                    vec![
                        with_client(70e3, 5.0, 0.7, 2.0),
                        with_client(90e3, 4.0, 0.8, 0.0),
                    ],
                ),
                row(
                    find("4k-randwrite-qd64", file),
                    Client::QemuImg,
                    Client::QemuImg
                        .fit(&find("4k-randwrite-qd64", file))
                        .unwrap(),
                    vec![with_client(50e3, 10.0, 0.6, 0.5)],
                    vec![with_client(80e3, 12.0, 0.97, 0.5)],
                ),
                row(
                    find("4k-randread-qd64", null),
                    Client::QemuImg,
                    None,
                    vec![with_client(75e3, 8.0, 0.99, 4.0)],
                    vec![with_client(126e3, 3.0, 0.99, 6.0)],
                ),
                row(
                    find("512k-seqread-qd8", file),
                    Client::IscsiPerf,
                    None,
                    vec![Sample {
                        mb_per_s: 1500.0,
                        ..sample(2860.0, 30.0)
                    }],
                    vec![Sample {
                        mb_per_s: 2100.0,
                        ..sample(4000.0, 25.0)
                    }],
                ),
                row(
                    find("4k-randread-qd1", file),
                    Client::IscsiPerf,
                    None,
                    vec![Sample {
                        mean_latency_us: 95.5,
                        ..Sample::default()
                    }],
                    vec![],
                ),
            ],
            scaling: vec![
                ScalingRow {
                    sessions: 1,
                    tgt: vec![rss(50e3, 0, 40_000_000), rss(52e3, 1, 41_000_000)],
                    ironlun: vec![rss(90e3, 0, 12_000_000), rss(95e3, 1, 13_500_000)],
                    istgt: Vec::new(),
                },
                ScalingRow {
                    sessions: 64,
                    tgt: vec![],
                    ironlun: vec![sample(88e3, 1.0), sample(91e3, 1.0)],
                    istgt: Vec::new(),
                },
            ],
            failures: vec![
                "iperf3: not installed".into(),
                "4k-randread-qd1 file iscsi-perf against ironlun: timed out".into(),
            ],
            elapsed_s: 612.4,
        }
    }

    /// The whole table, as printed for [`sample_report`].
    const SAMPLE_MARKDOWN: &str = r#"Measured 2026-01-02T03:04:05Z on Test CPU @ 2.0GHz (2 CPUs, kernel 6.1.0-test); 3 alternating repetitions of 5.0 s (warm-up excluded), LUNs of 256 MiB; 612 s in all.

- ironlun: ironlun 0.1.0
- tgt: 1:1.0.85-1

Medians; ratio = ironlun / tgt. CPU = target daemon CPU time (all threads, /proc/PID/stat) per I/O over the measured interval. Client = the client process's own CPU per I/O and its CPU in cores, against tgt / against ironlun; a client at ≥ 0.9 of a core against ironlun (in bold) set ironlun's rate itself. A row whose client was at a full core against both targets measures the client, not the targets: it is judged by CPU per I/O (the target's against tgt's, within the row's CPU goal or the rate goal turned into a cost, and the client's against tgt no higher), and the verdict column says so.

| workload | LUN | client | tgt | ironlun | ratio (goal) | tgt CPU µs/IO | ironlun CPU µs/IO | CPU ratio (goal) | client µs/IO | client cores | steal % | verdict |
|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|
| 4k-randread-qd64 | file | ironlun bench | 35.0K IOPS | 80.0K IOPS | 2.29 (≥ 2.0) ✓ | 21.0 | 4.5 | 0.21 (≤ 0.5) ✓ | 16.2 / 9.4 | 0.55 / 0.75 | 2 | ✓ 2.29× tgt (≥ 2.0), CPU 0.21× (≤ 0.5) |
| 4k-randwrite-qd64 | file | qemu-img bench (sequential: qemu-img bench has no random mode) | 50.0K IOPS | 80.0K IOPS | 1.60 (≥ 2.0) **✗** | 10.0 | 12.0 | 1.20 (≤ 0.5) **✗** | 12.0 / 12.1 | 0.60 / **0.97** | 0 | **✗** 1.60× tgt (≥ 2.0), CPU 1.20× (≤ 0.5) |
| 4k-randread-qd64 | null | qemu-img bench | 75.0K IOPS | 126.0K IOPS | 1.68 (≥ 2.0) **✗** | 8.0 | 3.0 | 0.38 (≤ 0.7) ✓ | 13.2 / 7.9 | 0.99 / **0.99** | 5 | ✓ client-bound (0.99 / 0.99 cores): judged by CPU per I/O: target 0.38× tgt's (≤ 0.70), client 7.9 vs 13.2 µs (≤ tgt's) |
| 512k-seqread-qd8 | file | iscsi-perf | 1500 MB/s | 2100 MB/s | 1.40 (≥ 1.3) ✓ | 30.0 | 25.0 | 0.83 | – / – | – / – | 0 | ✓ 1.40× tgt (≥ 1.3) |
| 4k-randread-qd1 | file | iscsi-perf | 95.5 µs | – | – | – | – | – | – / – | – / – | 0 | not measured |

Missed with the client at a full core against ironlun (but not against tgt): 4k-randwrite-qd64 file with qemu-img bench. There the ratio measures the client's CPU per I/O against each target more than the targets themselves.

iperf3, one TCP stream over loopback: 3000 MB/s (median).
- 512k-seqread-qd8 with iscsi-perf: ironlun 2100 MB/s = 70 % of iperf3 (goal ≥ 60 %) ✓

Sessions (ironlun bench, 4 KiB random reads, QD 64 per session, file LUN): aggregate IOPS and the daemon's peak resident memory.

| sessions | tgt IOPS | ironlun IOPS | ratio | tgt RSS MB | ironlun RSS MB |
|---:|---:|---:|---:|---:|---:|
| 1 | 51.0K | 92.5K | 1.81 | 41 | 14 |
| 64 | – | 89.5K | – | – | – |

ironlun's aggregate IOPS holds as sessions grow: the lowest was 64 sessions at 99 % of the best at fewer in the same repetition (median of 2; goal ≥ 95 %). Across repetitions (the medians in the table), the lowest was 64 sessions at 97 % of the best at fewer.

Failed runs:
- iperf3: not installed
- 4k-randread-qd1 file iscsi-perf against ironlun: timed out
"#;

    /// The table for [`bare_report`]: no sections beyond the rows and the
    /// wire rate, which is unknown.
    const BARE_MARKDOWN: &str = r#"Measured 2026-01-02T03:04:05Z on Test CPU @ 2.0GHz (2 CPUs, kernel 6.1.0-test); 3 alternating repetitions of 5.0 s (warm-up excluded), LUNs of 256 MiB; 612 s in all.


Medians; ratio = ironlun / tgt. CPU = target daemon CPU time (all threads, /proc/PID/stat) per I/O over the measured interval. Client = the client process's own CPU per I/O and its CPU in cores, against tgt / against ironlun; a client at ≥ 0.9 of a core against ironlun (in bold) set ironlun's rate itself. A row whose client was at a full core against both targets measures the client, not the targets: it is judged by CPU per I/O (the target's against tgt's, within the row's CPU goal or the rate goal turned into a cost, and the client's against tgt no higher), and the verdict column says so.

| workload | LUN | client | tgt | ironlun | ratio (goal) | tgt CPU µs/IO | ironlun CPU µs/IO | CPU ratio (goal) | client µs/IO | client cores | steal % | verdict |
|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|
| 4k-randread-qd64 | file | ironlun bench | 35.0K IOPS | 80.0K IOPS | 2.29 (≥ 2.0) ✓ | 21.0 | 4.5 | 0.21 (≤ 0.5) ✓ | 16.2 / 9.4 | 0.55 / 0.75 | 2 | ✓ 2.29× tgt (≥ 2.0), CPU 0.21× (≤ 0.5) |
| 512k-seqread-qd8 | file | iscsi-perf | 1500 MB/s | 2100 MB/s | 1.40 (≥ 1.3) ✓ | 30.0 | 25.0 | 0.83 | – / – | – / – | 0 | ✓ 1.40× tgt (≥ 1.3) |

iperf3, one TCP stream over loopback: – MB/s (median).
"#;

    #[test]
    fn the_markdown_table_is_printed_as_pinned() {
        assert_eq!(markdown(&sample_report()), SAMPLE_MARKDOWN);
        assert_eq!(markdown(&bare_report()), BARE_MARKDOWN);
    }

    /// The same report without iperf3, sessions, versions or failures,
    /// and with two of its rows.
    fn bare_report() -> Report {
        let mut r = sample_report();
        r.iperf3_mb_per_s.clear();
        r.scaling.clear();
        r.failures.clear();
        r.versions.clear();
        let wire = r.rows.swap_remove(3);
        r.rows.truncate(1);
        r.rows.push(wire);
        r
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![f64::NAN, 1.0]), Some(1.0));
    }

    #[test]
    fn verdicts_use_medians_and_each_goal_direction() {
        let w = all().into_iter().next().unwrap(); // 4k random read QD64, ≥ 2.0, CPU ≤ 0.5
        let row = Row {
            workload: w,
            client: Client::IronlunBench,
            note: None,
            tgt: vec![sample(40e3, 20.0), sample(30e3, 22.0), sample(1e3, 99.0)],
            ironlun: vec![sample(70e3, 5.0), sample(61e3, 5.0), sample(90e3, 4.0)],
            istgt: Vec::new(),
            istgt_unsupported: None,
        };
        let v = verdict(&row);
        assert_eq!(v.tgt, Some(30e3));
        assert_eq!(v.ironlun, Some(70e3));
        assert_eq!(v.met, Some(true));
        assert_eq!(v.cpu_met, Some(true));
        let mut slower = row.clone();
        slower.ironlun = vec![sample(50e3, 15.0)];
        let v = verdict(&slower);
        assert_eq!(v.met, Some(false));
        assert_eq!(v.cpu_met, Some(false));
        // Latency: lower is better.
        let qd1 = all().into_iter().find(|w| w.queue_depth == 1).unwrap();
        let lat = Row {
            workload: qd1,
            client: Client::IscsiPerf,
            note: None,
            tgt: vec![Sample {
                mean_latency_us: 100.0,
                ..Sample::default()
            }],
            ironlun: vec![Sample {
                mean_latency_us: 70.0,
                ..Sample::default()
            }],
            istgt: Vec::new(),
            istgt_unsupported: None,
        };
        assert_eq!(verdict(&lat).met, Some(true));
    }

    #[test]
    fn a_client_at_a_full_core_is_called_the_limit() {
        let with_client = |iops, cores| Sample {
            client_cores: Some(cores),
            client_cpu_us_per_io: Some(cores * 1e6 / iops),
            ..sample(iops, 5.0)
        };
        let row = Row {
            workload: all().into_iter().next().unwrap(),
            client: Client::QemuImg,
            note: None,
            tgt: vec![with_client(50e3, 0.8)],
            ironlun: vec![with_client(80e3, 0.97)],
            istgt: Vec::new(),
            istgt_unsupported: None,
        };
        let v = verdict(&row);
        assert!(v.client_bound());
        assert_eq!(v.ironlun_client_cpu, Some(0.97 * 1e6 / 80e3));
        let mut idle = row.clone();
        idle.ironlun = vec![with_client(80e3, 0.5)];
        assert!(!verdict(&idle).client_bound());
        idle.ironlun = vec![sample(80e3, 5.0)];
        assert!(!verdict(&idle).client_bound(), "unknown is not bound");
    }

    #[test]
    fn a_client_at_a_full_core_against_both_is_judged_by_cpu_per_io() {
        // 4 KiB random reads at QD 64 on the null LUN: 2× the rate, CPU ≤ 0.7.
        let w = all()
            .into_iter()
            .find(|w| w.lun == crate::workloads::LunKind::Null && w.read)
            .unwrap();
        let run = |iops: f64, target: f64, client: f64| Sample {
            client_cores: Some(0.99),
            client_cpu_us_per_io: Some(client),
            ..sample(iops, target)
        };
        let row = |il: Sample| Row {
            workload: w.clone(),
            client: Client::QemuImg,
            note: None,
            tgt: vec![run(75e3, 8.0, 13.3)],
            ironlun: vec![il],
            istgt: Vec::new(),
            istgt_unsupported: None,
        };
        // 1.69× the rate misses 2×, but the client set both rates: the
        // target spends 0.37× tgt's per I/O and the client less against
        // it, so the row holds, and says why.
        let v = verdict(&row(run(126e3, 3.0, 7.9)));
        assert_eq!(v.met, Some(false));
        assert!(v.judged_by_cpu());
        assert_eq!(v.outcome, Some(true));
        assert!(v.reason.starts_with("client-bound"), "{}", v.reason);
        // Over the CPU goal, or costing the client more: missed.
        assert_eq!(verdict(&row(run(126e3, 6.0, 7.9))).outcome, Some(false));
        assert_eq!(verdict(&row(run(126e3, 3.0, 14.0))).outcome, Some(false));
        // A client at a full core against ironlun only is judged by the
        // rate as before.
        let mut one = row(run(126e3, 3.0, 7.9));
        one.tgt[0].client_cores = Some(0.6);
        let v = verdict(&one);
        assert!(v.client_bound() && !v.judged_by_cpu());
        assert_eq!(v.outcome, Some(false));
        assert!(v.reason.contains("tgt (≥ 2.0)"), "{}", v.reason);
    }

    #[test]
    fn scaling_that_falls_is_called_out() {
        let row = |n, iops: f64| ScalingRow {
            sessions: n,
            tgt: vec![],
            ironlun: vec![sample(iops, 1.0)],
            istgt: Vec::new(),
        };
        assert!(scaling_verdict(&[row(1, 100.0), row(2, 120.0), row(64, 115.0)]).contains("holds"));
        assert!(scaling_verdict(&[row(1, 100.0), row(2, 120.0), row(64, 80.0)]).contains("fell"));
        // Just under the floor is a fall, and does not print as 95 %.
        let v = scaling_verdict(&[row(1, 100.0), row(8, 94.99)]);
        assert!(v.contains("fell") && v.contains("94.9 %"), "{v}");
        assert!(scaling_verdict(&[row(1, 100.0), row(8, 95.0)]).contains("holds"));
        assert!(scaling_verdict(&[row(1, 100.0)]).contains("Not enough"));
    }

    /// Samples are compared within their repetition: a machine that is
    /// faster in one repetition than in another does not make a count
    /// measured in the slow one look like a fall, and a real fall in every
    /// repetition is still found.
    #[test]
    fn scaling_compares_counts_within_a_repetition() {
        let s = |iops: f64, rep| Sample {
            rep,
            ..sample(iops, 1.0)
        };
        let row = |n, v: Vec<Sample>| ScalingRow {
            sessions: n,
            tgt: vec![],
            ironlun: v,
            istgt: Vec::new(),
        };
        // Repetitions ran at different speeds, and repetition 1 had a slow
        // patch while measuring 8 sessions. Unpaired medians (240 and 180)
        // would call that a fall to 75 %; within repetitions 8 sessions
        // reached 96 %, 75 % and 97 % of 2.
        let outlier = [
            row(2, vec![s(250.0, 0), s(240.0, 1), s(180.0, 2)]),
            row(8, vec![s(240.0, 0), s(180.0, 1), s(175.0, 2)]),
        ];
        let v = scaling_verdict(&outlier);
        assert!(v.contains("holds") && v.contains("96 %"), "{v}");
        assert!(
            v.contains("75 %"),
            "the unpaired figure is still shown: {v}"
        );
        // A fall in most repetitions is a fall.
        let fall = [
            row(2, vec![s(200.0, 0), s(300.0, 1), s(250.0, 2)]),
            row(8, vec![s(150.0, 0), s(290.0, 1), s(200.0, 2)]),
        ];
        assert!(scaling_verdict(&fall).contains("fell"));
    }
}
