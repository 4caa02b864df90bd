//! The curve: per number of targets, each operation's time and the
//! bench's p99.9 alone and beside the operations, as Markdown tables.

use std::fmt::Write as _;

use serde::Serialize;

use crate::ops::{quantile, OpTimes, CONTROL, KINDS};
use crate::window::WindowResult;

/// An operation kind's times, in milliseconds.
#[derive(Serialize)]
pub struct OpStat {
    pub kind: &'static str,
    pub count: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl OpStat {
    fn of(kind: &'static str, t: &OpTimes) -> OpStat {
        let v = t.get(kind).map_or(&[][..], Vec::as_slice);
        OpStat {
            kind,
            count: v.len(),
            p50_ms: quantile(v, 0.5),
            p99_ms: quantile(v, 0.99),
            max_ms: quantile(v, 1.0),
        }
    }
}

/// One kind of window, summed up over its repetitions.
#[derive(Serialize)]
pub struct WindowStat {
    pub kind: &'static str,
    pub count: usize,
    /// Medians over the windows.
    pub p999_us: f64,
    /// The lowest and highest p99.9 of a window.
    pub p999_range_us: (f64, f64),
    pub iops: f64,
    /// Lowest and highest steal of a window, %.
    pub steal_pct: (f64, f64),
    /// Lowest and highest CPU of other processes in a window, %.
    pub foreign_pct: (f64, f64),
    /// Windows measured in all, the noisier ones included.
    pub attempts: u32,
}

impl WindowStat {
    fn of(kind: &'static str, windows: &[WindowResult]) -> WindowStat {
        let of = |f: fn(&WindowResult) -> f64| -> Vec<f64> {
            windows.iter().filter(|w| w.kind == kind).map(f).collect()
        };
        let range = |v: Vec<f64>| (quantile(&v, 0.0), quantile(&v, 1.0));
        let steal = of(|w| w.steal_pct);
        let p999 = of(|w| w.p999_us);
        WindowStat {
            kind,
            count: steal.len(),
            p999_us: quantile(&p999, 0.5),
            p999_range_us: range(p999),
            iops: quantile(&of(|w| w.iops), 0.5),
            steal_pct: range(steal),
            foreign_pct: range(of(|w| w.foreign_pct)),
            attempts: windows
                .iter()
                .filter(|w| w.kind == kind)
                .map(|w| w.attempts)
                .sum(),
        }
    }
}

/// One point of the curve.
#[derive(Serialize)]
pub struct Point {
    pub targets: usize,
    pub sessions: usize,
    /// Over the kept-open API connection.
    pub api: Vec<OpStat>,
    /// `ironlun admin`, process start to exit.
    pub cli: Vec<OpStat>,
    /// `alone`, `ops`, and `control` if there were such windows.
    pub kinds: Vec<WindowStat>,
    pub windows: Vec<WindowResult>,
}

impl Point {
    pub fn new(
        targets: usize,
        sessions: usize,
        windows: Vec<WindowResult>,
        times: &OpTimes,
        cli: &OpTimes,
    ) -> Point {
        let mut api: Vec<OpStat> = KINDS.iter().map(|k| OpStat::of(k, times)).collect();
        if times.contains_key(CONTROL) {
            api.push(OpStat::of(CONTROL, times));
        }
        let kinds = ["alone", "ops", "control"]
            .into_iter()
            .map(|k| WindowStat::of(k, &windows))
            .filter(|w| w.count > 0)
            .collect();
        Point {
            targets,
            sessions,
            api,
            cli: ["add-lun", "remove-lun"]
                .iter()
                .map(|k| OpStat::of(k, cli))
                .collect(),
            kinds,
            windows,
        }
    }

    /// The p99.9 of a kind of window against the bench's alone, in %.
    fn change(&self, w: &WindowStat) -> f64 {
        match self.kinds.first() {
            Some(alone) if alone.p999_us > 0.0 => (w.p999_us / alone.p999_us - 1.0) * 100.0,
            _ => 0.0,
        }
    }
}

/// A progress line for one point.
pub fn line(p: &Point) -> String {
    let ops: Vec<String> = p
        .api
        .iter()
        .map(|o| format!("{} {:.2}/{:.2} ms", o.kind, o.p50_ms, o.p99_ms))
        .collect();
    let w: Vec<String> = p
        .kinds
        .iter()
        .map(|w| format!("{} {:.0} us ({:+.1} %)", w.kind, w.p999_us, p.change(w)))
        .collect();
    format!(
        "N={} sessions={}: {}; p99.9 {}",
        p.targets,
        p.sessions,
        ops.join(", "),
        w.join(", ")
    )
}

/// The curve as Markdown: operations, then the bench's windows.
pub fn table(points: &[Point]) -> String {
    let mut s = String::from(
        "| targets | sessions | add-target | add-lun | remove-lun | remove-target | `ironlun admin` lun add / remove |\n|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in points {
        let ops: Vec<String> = p
            .api
            .iter()
            .take(KINDS.len())
            .map(|o| format!("{:.2} / {:.2}", o.p50_ms, o.p99_ms))
            .collect();
        let cli: Vec<String> = p.cli.iter().map(|o| format!("{:.1}", o.p50_ms)).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            p.targets,
            p.sessions,
            ops.join(" | "),
            cli.join(" / ")
        );
    }
    s.push_str(
        "\nOperations: median / p99 in ms over the API socket; `ironlun admin`: median in ms, process start to exit.\n\n",
    );
    s.push_str("| targets | window | windows (measured) | bench p99.9 | (lowest–highest) | change | IOPS | steal % | other processes % |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for p in points {
        for w in &p.kinds {
            let _ = writeln!(
                s,
                "| {} | {} | {} ({}) | {:.0} µs | {:.0}–{:.0} | {:+.1} % | {:.0} | {:.1}–{:.1} | {:.1}–{:.1} |",
                p.targets,
                w.kind,
                w.count,
                w.attempts,
                w.p999_us,
                w.p999_range_us.0,
                w.p999_range_us.1,
                p.change(w),
                w.iops,
                w.steal_pct.0,
                w.steal_pct.1,
                w.foreign_pct.0,
                w.foreign_pct.1
            );
        }
    }
    s.push_str(
        "\nBench p99.9 and IOPS: medians over the windows of a kind; change: against the bench alone; steal and other processes: share of all CPU time, lowest–highest kept window; measured: windows run, the noisier redone ones included.\n",
    );
    s
}
