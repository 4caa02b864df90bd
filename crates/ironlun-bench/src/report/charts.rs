//! The report's charts, from results: per workload the latency
//! exceedance plot, IOPS and p99 latency over time and the zone rates;
//! across workloads the overview bars. Each overlays every run that has
//! the workload, one colour per run.

use super::axis::{exceedance_r, Axis};
use super::bars::Bars;
use super::format;
use super::svg::{Line, Plot, Style};
use crate::result::{Second, WorkloadResult};

/// One workload as measured by some of the runs: (run index, result).
pub struct Group<'a> {
    pub name: &'a str,
    pub results: Vec<(usize, &'a WorkloadResult)>,
}

impl Group<'_> {
    /// The group's lines: per run, `points` of its result with tooltips.
    fn lines<F>(&self, runs: &[String], points: F) -> Vec<Line>
    where
        F: Fn(&WorkloadResult) -> Vec<(f64, f64, String)>,
    {
        self.results
            .iter()
            .map(|&(run, r)| {
                let name = runs.get(run).map_or("?", String::as_str);
                let pts = points(r);
                Line {
                    run,
                    points: pts.iter().map(|p| (p.0, p.1)).collect(),
                    tips: pts
                        .into_iter()
                        .map(|p| format!("{name}: {}", p.2))
                        .collect(),
                    style: Style::Solid,
                }
            })
            .collect()
    }
}

/// (percentile %, µs) of a result: its curve, or for files written
/// before the curve existed, the percentiles of its summary.
pub fn percentiles(r: &WorkloadResult) -> Vec<(f64, f64)> {
    if !r.percentiles_us.is_empty() {
        return r.percentiles_us.clone();
    }
    let l = &r.latency_us;
    let all = [
        (50.0, l.p50),
        (90.0, l.p90),
        (99.0, l.p99),
        (99.9, l.p999),
        (99.99, l.p9999),
    ];
    // A percentile beyond 1 - 1/N of N I/Os repeats the maximum.
    let n = r.ios as f64;
    all.into_iter()
        .filter(|&(p, v)| v > 0.0 && exceedance_r(p) <= n.max(2.0))
        .collect()
}

/// A latency axis for values from `min` to `max` µs: log scale when they
/// span more than a factor of five, else linear from zero.
fn latency_axis(min: f64, max: f64, title: &str) -> Axis {
    if min > 0.0 && max / min > 5.0 {
        Axis::log(min, max, 10, format::latency_us, title)
    } else {
        Axis::from_zero(max, format::latency_us, title)
    }
}

fn extent(lines: &[Line], y: bool) -> (f64, f64) {
    let vals = lines
        .iter()
        .flat_map(|l| l.points.iter().map(move |p| if y { p.1 } else { p.0 }));
    vals.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (if v > 0.0 { lo.min(v) } else { lo }, hi.max(v))
    })
}

/// Latency against percentile, 1/(1-p) on a log scale: the tail at a
/// glance, and where runs part.
pub fn exceedance(g: &Group<'_>, runs: &[String]) -> String {
    let lines = g.lines(runs, |r| {
        percentiles(r)
            .into_iter()
            .map(|(p, us)| {
                let tip = format!("p{} = {}", format::percentile(p), format::latency_us(us));
                (exceedance_r(p), us, tip)
            })
            .collect()
    });
    let (min, max) = extent(&lines, true);
    let (_, max_r) = extent(&lines, false);
    Plot {
        kind: "exceedance",
        title: format!("{}: latency by percentile", g.name),
        x: Axis::exceedance(max_r),
        y: latency_axis(min, max, "latency"),
        lines,
        rules: Vec::new(),
        runs,
    }
    .svg()
}

/// The share of I/Os in each latency bucket (powers of √2), so that runs
/// of different lengths compare: two peaks are two populations.
pub fn distribution(g: &Group<'_>, runs: &[String]) -> String {
    let lines = g.lines(runs, |r| {
        let total: u64 = r.histogram_us.iter().map(|b| b.1).sum();
        r.histogram_us
            .iter()
            .filter(|b| b.1 > 0)
            .map(|&(upper, n)| {
                let share = n as f64 * 100.0 / total.max(1) as f64;
                // The bucket's geometric middle.
                let at = upper / 2f64.powf(0.25);
                let tip = format!(
                    "{} to {}: {share:.2} % of I/Os",
                    format::latency_us(upper / std::f64::consts::SQRT_2),
                    format::latency_us(upper)
                );
                (at, share, tip)
            })
            .collect()
    });
    let (min, max) = extent(&lines, false);
    let (_, top) = extent(&lines, true);
    Plot {
        kind: "distribution",
        title: format!("{}: latency distribution", g.name),
        x: Axis::log(min, max, 7, format::latency_us, "latency"),
        y: Axis::from_zero(top, format::pct, "share of I/Os"),
        lines,
        rules: Vec::new(),
        runs,
    }
    .svg()
}

/// The axis of seconds into the measured interval.
fn time_axis(lines: &[Line]) -> Axis {
    let (_, end) = extent(lines, false);
    Axis::over(0.0, end.max(1.0), format::seconds, "time into the run")
}

/// A time series plots at most this many points per run; a longer one
/// is drawn in equal spans of whole seconds.
pub const MAX_TIME_POINTS: usize = 600;

/// Seconds per point so that `len` seconds make at most
/// [`MAX_TIME_POINTS`] points.
fn span(len: usize) -> usize {
    len.div_ceil(MAX_TIME_POINTS).max(1)
}

/// `r`'s series in spans of `span` seconds: (end of the span in seconds,
/// `value` of its seconds combined by `combine`).
fn spans(
    r: &WorkloadResult,
    span: usize,
    value: fn(&Second) -> f64,
    combine: fn(&[f64]) -> f64,
) -> Vec<(f64, f64)> {
    r.series
        .chunks(span)
        .filter_map(|c| {
            let end = c.last()?;
            let vals: Vec<f64> = c.iter().map(value).collect();
            Some((f64::from(end.t) + 1.0, combine(&vals)))
        })
        .collect()
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn most(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// The longest series of the group, in seconds.
fn longest(g: &Group<'_>) -> usize {
    g.results
        .iter()
        .map(|(_, r)| r.series.len())
        .max()
        .unwrap_or(0)
}

/// Completed I/Os per second of the measured interval (the mean per
/// second of each span in a long run).
pub fn iops_over_time(g: &Group<'_>, runs: &[String]) -> String {
    let k = span(longest(g));
    let lines = g.lines(runs, |r| {
        spans(r, k, |s| s.iops, mean)
            .into_iter()
            .map(|(t, v)| (t, v, format!("{t} s: {} IOPS", format::count(v))))
            .collect()
    });
    let (_, max) = extent(&lines, true);
    let title = match k {
        1 => format!("{}: IOPS over time", g.name),
        k => format!("{}: IOPS over time ({k} s means)", g.name),
    };
    Plot {
        kind: "iops",
        title,
        x: time_axis(&lines),
        y: Axis::from_zero(max, format::count, "IOPS"),
        lines,
        rules: Vec::new(),
        runs,
    }
    .svg()
}

/// Each second's 99th percentile latency (the worst second of each span
/// in a long run).
pub fn latency_over_time(g: &Group<'_>, runs: &[String]) -> String {
    let k = span(longest(g));
    let lines = g.lines(runs, |r| {
        spans(r, k, |s| s.p99_us, most)
            .into_iter()
            .map(|(t, v)| (t, v, format!("{t} s: p99 {}", format::latency_us(v))))
            .collect()
    });
    let (_, max) = extent(&lines, true);
    let title = match k {
        1 => format!("{}: p99 latency per second", g.name),
        k => format!("{}: p99 per second (worst of {k} s)", g.name),
    };
    Plot {
        kind: "latency",
        title,
        x: time_axis(&lines),
        y: Axis::from_zero(max, format::latency_us, "p99 latency"),
        lines,
        rules: Vec::new(),
        runs,
    }
    .svg()
}

/// The transfer rate across the LUN (sustained-rate workloads), when any
/// run measured zones.
pub fn zones(g: &Group<'_>, runs: &[String]) -> Option<String> {
    if g.results.iter().all(|(_, r)| r.zones.is_none()) {
        return None;
    }
    let lines = g.lines(runs, |r| {
        r.zones
            .iter()
            .flatten()
            .map(|z| {
                let at = z.start_byte as f64;
                let tip = format!("{}: {:.1} MB/s", format::bytes(at), z.mb_per_s);
                (at, z.mb_per_s, tip)
            })
            .collect()
    });
    let (_, end) = extent(&lines, false);
    let (_, max) = extent(&lines, true);
    Some(
        Plot {
            kind: "zones",
            title: format!("{}: MB/s across the LUN", g.name),
            x: Axis::over_bytes(0.0, end.max(1.0), format::bytes, "zone start"),
            y: Axis::from_zero(max, format::count, "MB/s (10⁶ B/s)"),
            lines,
            rules: Vec::new(),
            runs,
        }
        .svg(),
    )
}

/// Bars of one figure of every workload, a bar per run.
fn bars<'r>(
    kind: &'static str,
    title: &str,
    unit: &str,
    fmt: fn(f64) -> String,
    groups: &[Group<'_>],
    runs: &'r [String],
    value: fn(&WorkloadResult) -> Option<f64>,
) -> Bars<'r> {
    let values = groups
        .iter()
        .map(|g| {
            (0..runs.len())
                .map(|run| {
                    g.results
                        .iter()
                        .find(|(i, _)| *i == run)
                        .and_then(|(_, r)| value(r))
                })
                .collect()
        })
        .collect();
    Bars {
        kind,
        title: title.into(),
        unit: unit.into(),
        fmt,
        groups: groups.iter().map(|g| g.name.to_owned()).collect(),
        values,
        runs,
        rule: None,
        limit: None,
    }
}

/// The overview: IOPS, MB/s, p99 latency and host CPU of every workload.
pub fn overview(groups: &[Group<'_>], runs: &[String]) -> Vec<String> {
    let iops = bars(
        "bars-iops",
        "IOPS",
        "I/Os per second",
        format::count,
        groups,
        runs,
        |r| Some(r.iops),
    );
    let mbs = bars(
        "bars-mbs",
        "Throughput",
        "MB/s (10⁶ B/s)",
        format::count,
        groups,
        runs,
        |r| Some(r.mb_per_s),
    );
    let p99 = bars(
        "bars-p99",
        "p99 latency",
        "latency",
        format::latency_us,
        groups,
        runs,
        |r| (r.ios > 0).then_some(r.latency_us.p99),
    );
    let mut cpu = bars(
        "bars-cpu",
        "Host CPU",
        "% of all CPUs",
        format::pct,
        groups,
        runs,
        |r| r.cpu.initiator_pct,
    );
    // The "acceptable" initiator CPU of the initiator study.
    cpu.rule = Some((8.0, "8 %".into()));
    cpu.limit = Some(100.0);
    [iops, mbs, p99, cpu].iter().map(Bars::svg).collect()
}
