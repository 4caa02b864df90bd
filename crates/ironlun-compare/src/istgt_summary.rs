//! istgt's part of the compare-peers table: its rows against ironlun's
//! (the same runs as tgt's table, by the same goals and the same
//! client-bound rule) and its scaling, printed after tgt's sections and
//! only when istgt was compared, so that tgt's table stays as it was.

use std::fmt::Write;

use crate::clients::Sample;
use crate::summary::{goal_text, med, num, opt, outcome_text, unit, verdict_against};
use crate::workloads::Goal;
use crate::{Report, Row, ScalingRow};

/// Whether istgt was part of the run.
fn compared(r: &Report) -> bool {
    r.rows
        .iter()
        .any(|row| !row.istgt.is_empty() || row.istgt_unsupported.is_some())
        || r.scaling.iter().any(|sc| !sc.istgt.is_empty())
}

/// The istgt sections, when istgt was compared.
pub fn write(s: &mut String, r: &Report) {
    if !compared(r) {
        return;
    }
    let _ = writeln!(
        s,
        "\nistgt, the second peer (the same runs, alternating with tgt's and ironlun's): \
         ratio = ironlun / istgt, by the same goals as against tgt; CPU, client and steal \
         as above. istgt has no null backing store.\n"
    );
    let _ = writeln!(
        s,
        "| workload | LUN | client | istgt | ironlun | ratio (goal) | istgt CPU µs/IO | ironlun CPU µs/IO | CPU ratio (goal) | client µs/IO | client cores | steal % | verdict |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|"
    );
    for row in &r.rows {
        write_row(s, row);
    }
    if r.scaling.iter().any(|sc| !sc.istgt.is_empty()) {
        write_scaling(s, &r.scaling);
    }
}

/// One row: istgt's medians beside ironlun's, or why istgt has none.
fn write_row(s: &mut String, row: &Row) {
    let w = &row.workload;
    let client = match row.note {
        Some(n) => format!("{} ({n})", row.client.name()),
        None => row.client.name().to_owned(),
    };
    let u = unit(w);
    let v = verdict_against(w, &row.istgt, &row.ironlun, "istgt");
    if let Some(why) = &row.istgt_unsupported {
        let _ = writeln!(
            s,
            "| {} | {} | {client} | {why} | {} | – | – | {} | – | – | – | {} | {why} |",
            w.name,
            w.lun.name(),
            opt(v.ironlun, |x| format!("{} {u}", num(x))),
            opt(v.ironlun_cpu, |x| format!("{x:.1}")),
            opt(v.steal, |x| format!("{x:.0}")),
        );
        return;
    }
    let goal = match w.goal {
        Goal::RateRatio(g) => format!("≥ {g:.1}"),
        Goal::LatencyRatio(g) => format!("≤ {g:.1}"),
    };
    let cpu_goal = w
        .cpu_goal
        .map_or_else(String::new, |g| format!(" (≤ {g:.1})"));
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
        goal_text(v.cpu_met, opt(v.cpu_ratio, |x| format!("{x:.2}{cpu_goal}"))),
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

/// istgt's aggregate IOPS and peak memory per session count.
fn write_scaling(s: &mut String, scaling: &[ScalingRow]) {
    let _ = writeln!(
        s,
        "\nSessions against istgt (the same runs as above): aggregate IOPS and peak resident memory.\n"
    );
    let _ = writeln!(
        s,
        "| sessions | istgt IOPS | ironlun IOPS | ratio | istgt RSS MB |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|");
    for sc in scaling {
        let t = med(&sc.istgt, |x| Some(x.iops));
        let i = med(&sc.ironlun, |x| Some(x.iops));
        let ratio = match (t, i) {
            (Some(t), Some(i)) if t > 0.0 => Some(i / t),
            _ => None,
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            sc.sessions,
            opt(t, num),
            opt(i, num),
            opt(ratio, |x| format!("{x:.2}")),
            opt(peak_rss_mb(&sc.istgt), |x| format!("{x:.0}")),
        );
    }
}

/// The highest resident memory seen over the runs, MB.
fn peak_rss_mb(v: &[Sample]) -> Option<f64> {
    v.iter()
        .filter_map(|x| x.target_rss_peak)
        .max()
        .map(|b| b as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Client;
    use crate::workloads::{all, LunKind};

    fn sample(iops: f64, cpu: f64, cores: f64) -> Sample {
        Sample {
            iops,
            mb_per_s: iops * 4096.0 / 1e6,
            mean_latency_us: 64e6 / iops,
            target_cpu_us_per_io: Some(cpu),
            client_cores: Some(cores),
            client_cpu_us_per_io: Some(cores * 1e6 / iops),
            steal_pct: 1.0,
            target_rss_peak: Some(9_000_000),
            ..Sample::default()
        }
    }

    fn report() -> Report {
        let find = |lun| {
            all()
                .into_iter()
                .find(|w| w.name == "4k-randread-qd64" && w.lun == lun)
                .unwrap()
        };
        let row = |lun, istgt: Vec<Sample>, unsupported: Option<&str>| Row {
            workload: find(lun),
            client: Client::IronlunBench,
            note: None,
            tgt: vec![sample(40e3, 20.0, 0.5)],
            ironlun: vec![sample(80e3, 5.0, 0.6)],
            istgt,
            istgt_unsupported: unsupported.map(str::to_owned),
        };
        Report {
            date: "2026-01-02T03:04:05Z".into(),
            host: crate::test_host(),
            versions: vec![],
            reps: 1,
            measure_s: 1.0,
            lun_size: 256 << 20,
            iperf3_mb_per_s: vec![],
            rows: vec![
                row(LunKind::File, vec![sample(50e3, 12.0, 0.5)], None),
                row(
                    LunKind::Null,
                    vec![],
                    crate::istgt::unsupported_lun(LunKind::Null),
                ),
            ],
            scaling: vec![ScalingRow {
                sessions: 4,
                tgt: vec![],
                ironlun: vec![sample(90e3, 4.0, 0.6)],
                istgt: vec![sample(45e3, 11.0, 0.5)],
            }],
            failures: vec![],
            elapsed_s: 10.0,
        }
    }

    const WANT: &str = "
istgt, the second peer (the same runs, alternating with tgt's and ironlun's): ratio = ironlun / istgt, by the same goals as against tgt; CPU, client and steal as above. istgt has no null backing store.

| workload | LUN | client | istgt | ironlun | ratio (goal) | istgt CPU µs/IO | ironlun CPU µs/IO | CPU ratio (goal) | client µs/IO | client cores | steal % | verdict |
|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|
| 4k-randread-qd64 | file | ironlun bench | 50.0K IOPS | 80.0K IOPS | 1.60 (≥ 2.0) **✗** | 12.0 | 5.0 | 0.42 (≤ 0.5) ✓ | 10.0 / 7.5 | 0.50 / 0.60 | 1 | **✗** 1.60× istgt (≥ 2.0), CPU 0.42× (≤ 0.5) |
| 4k-randread-qd64 | null | ironlun bench | not supported by istgt (it has no null backing store) | 80.0K IOPS | – | – | 5.0 | – | – | – | 1 | not supported by istgt (it has no null backing store) |

Sessions against istgt (the same runs as above): aggregate IOPS and peak resident memory.

| sessions | istgt IOPS | ironlun IOPS | ratio | istgt RSS MB |
|---:|---:|---:|---:|---:|
| 4 | 45.0K | 90.0K | 2.00 | 9 |
";

    #[test]
    fn istgt_rows_are_printed_as_pinned_with_unsupported_ones_said() {
        let mut s = String::new();
        write(&mut s, &report());
        assert_eq!(s, WANT);
    }

    #[test]
    fn nothing_is_printed_when_istgt_was_not_compared() {
        let mut r = report();
        for row in &mut r.rows {
            row.istgt.clear();
            row.istgt_unsupported = None;
        }
        r.scaling[0].istgt.clear();
        let mut s = String::new();
        write(&mut s, &r);
        assert_eq!(s, "");
    }

    #[test]
    fn a_client_at_a_full_core_against_both_is_judged_by_cpu_per_io() {
        let mut r = report();
        r.rows.truncate(1);
        r.rows[0].istgt = vec![sample(60e3, 12.0, 0.99)];
        r.rows[0].ironlun = vec![sample(70e3, 5.0, 0.99)];
        let mut s = String::new();
        write(&mut s, &r);
        assert!(
            s.contains(
                "✓ client-bound (0.99 / 0.99 cores): judged by CPU per I/O: target 0.42× istgt's"
            ),
            "{s}"
        );
    }
}
