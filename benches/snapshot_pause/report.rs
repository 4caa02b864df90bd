//! Per store: the pauses, the bench's p99.9 without and with snapshots,
//! the 1 TiB LUN's snapshot times, and each against issue 39's goal, as
//! Markdown. A verdict is reported, never turned into a failure.

use std::fmt::Write as _;

use serde::Serialize;

use crate::snaps::Snap;
use crate::store::Kind;
use crate::window::WindowResult;
use crate::{ALONE, SNAPSHOTS};

/// The goals (issue 39, docs/snapshots.md).
fn pause_goal_ms(kind: Kind) -> f64 {
    match kind {
        Kind::File => 20.0,
        Kind::Rbd => 100.0,
    }
}
const P999_RATIO_GOAL: f64 = 2.0;
const BIG_GOAL_S: f64 = 1.0;

/// The `q` quantile of `v` (nearest rank); 0 for none.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s.get(rank - 1).copied().unwrap_or(0.0)
}

/// Times in milliseconds: how many, median, p99, highest.
#[derive(Serialize, Default)]
pub struct Stat {
    pub n: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Stat {
    fn of(v: &[f64]) -> Stat {
        Stat {
            n: v.len(),
            p50_ms: quantile(v, 0.5),
            p99_ms: quantile(v, 0.99),
            max_ms: quantile(v, 1.0),
        }
    }
}

/// One kind of window over its repetitions.
#[derive(Serialize)]
pub struct WindowStat {
    pub kind: &'static str,
    pub count: usize,
    /// Medians over the windows.
    pub p999_us: f64,
    pub iops: f64,
    /// The lowest and highest of a window.
    pub p999_range_us: (f64, f64),
    /// The longest I/O of any window of the kind.
    pub max_us: f64,
    pub steal_pct: (f64, f64),
    pub foreign_pct: (f64, f64),
    pub load: (f64, f64),
}

impl WindowStat {
    fn of(kind: &'static str, windows: &[WindowResult]) -> WindowStat {
        let of = |f: fn(&WindowResult) -> f64| -> Vec<f64> {
            windows.iter().filter(|w| w.kind == kind).map(f).collect()
        };
        let range = |v: Vec<f64>| (quantile(&v, 0.0), quantile(&v, 1.0));
        let p999 = of(|w| w.p999_us);
        let mut loads = of(|w| w.load.0);
        loads.extend(of(|w| w.load.1));
        WindowStat {
            kind,
            count: p999.len(),
            p999_us: quantile(&p999, 0.5),
            iops: quantile(&of(|w| w.iops), 0.5),
            p999_range_us: range(p999),
            max_us: quantile(&of(|w| w.max_us), 1.0),
            steal_pct: range(of(|w| w.steal_pct)),
            foreign_pct: range(of(|w| w.foreign_pct)),
            load: range(loads),
        }
    }
}

/// A goal, what was measured, and whether it was met: `met`, `NOT met`,
/// or `not judged` (the run could not show it).
#[derive(Serialize)]
pub struct Verdict {
    pub goal: String,
    pub measured: String,
    pub verdict: &'static str,
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

/// The 1 TiB LUN's snapshots.
#[derive(Serialize)]
pub struct BigSnaps {
    pub size: &'static str,
    pub written_mib: u64,
    /// End to end (`ironlun admin` start to exit), and the pauses.
    pub wall: Stat,
    pub paused: Stat,
    pub snaps: Vec<Snap>,
}

impl BigSnaps {
    pub fn new(size: &'static str, written_mib: u64, snaps: Vec<Snap>) -> BigSnaps {
        let wall: Vec<f64> = snaps.iter().map(|s| s.wall_ms).collect();
        let paused: Vec<f64> = snaps.iter().map(|s| s.paused_ms).collect();
        BigSnaps {
            size,
            written_mib,
            wall: Stat::of(&wall),
            paused: Stat::of(&paused),
            snaps,
        }
    }
}

#[derive(Serialize)]
pub struct StoreResult {
    pub store: Kind,
    pub describe: String,
    /// Why the store was not measured.
    pub skipped: Option<String>,
    /// The pauses of every snapshot of the windows with snapshots, and
    /// `admin snapshot create` end to end.
    pub paused: Stat,
    pub create_wall: Stat,
    pub kinds: Vec<WindowStat>,
    /// Median p99.9 with snapshots over the median alone.
    pub p999_ratio: f64,
    /// Snapshots of the windows that returned after the bench's measured
    /// time had ended: their pauses are not in its p99.9.
    pub late: usize,
    pub big: Option<BigSnaps>,
    pub verdicts: Vec<Verdict>,
    pub windows: Vec<WindowResult>,
}

impl StoreResult {
    pub fn skipped(store: Kind, why: String) -> StoreResult {
        StoreResult {
            store,
            describe: String::new(),
            skipped: Some(why),
            paused: Stat::default(),
            create_wall: Stat::default(),
            kinds: Vec::new(),
            p999_ratio: 0.0,
            late: 0,
            big: None,
            verdicts: Vec::new(),
            windows: Vec::new(),
        }
    }

    pub fn new(
        store: Kind,
        describe: String,
        windows: Vec<WindowResult>,
        big: Option<BigSnaps>,
    ) -> StoreResult {
        let snaps = || windows.iter().flat_map(|w| &w.snaps);
        let paused: Vec<f64> = snaps().map(|s| s.paused_ms).collect();
        let wall: Vec<f64> = snaps().map(|s| s.wall_ms).collect();
        let kinds: Vec<WindowStat> = [ALONE, SNAPSHOTS]
            .into_iter()
            .map(|k| WindowStat::of(k, &windows))
            .collect();
        let p999 = |k: &str| {
            kinds
                .iter()
                .find(|w| w.kind == k)
                .map_or(0.0, |w| w.p999_us)
        };
        let p999_ratio = if p999(ALONE) > 0.0 {
            p999(SNAPSHOTS) / p999(ALONE)
        } else {
            0.0
        };
        let late = snaps().filter(|s| !s.in_window).count();
        let mut r = StoreResult {
            store,
            describe,
            skipped: None,
            paused: Stat::of(&paused),
            create_wall: Stat::of(&wall),
            kinds,
            p999_ratio,
            late,
            big,
            verdicts: Vec::new(),
            windows,
        };
        r.verdicts = r.judge();
        r
    }

    fn judge(&self) -> Vec<Verdict> {
        let goal = pause_goal_ms(self.store);
        let mut v = vec![
            Verdict {
                goal: format!("pause p99 ≤ {goal:.0} ms"),
                measured: format!(
                    "{:.1} ms over {} snapshots",
                    self.paused.p99_ms, self.paused.n
                ),
                verdict: verdict(self.paused.n > 0 && self.paused.p99_ms <= goal),
            },
            Verdict {
                goal: format!(
                    "bench p99.9 with a snapshot a second ≤ {P999_RATIO_GOAL:.0}× without"
                ),
                measured: if self.late > 0 {
                    format!(
                        "{:.2}× ({} of {} snapshots returned after the bench's window: not a snapshot a second, and their pauses are not in its latencies)",
                        self.p999_ratio, self.late, self.paused.n
                    )
                } else {
                    format!("{:.2}×", self.p999_ratio)
                },
                verdict: if self.late > 0 {
                    "not judged"
                } else {
                    verdict(self.p999_ratio > 0.0 && self.p999_ratio <= P999_RATIO_GOAL)
                },
            },
        ];
        if let Some(b) = &self.big {
            v.push(Verdict {
                goal: format!("snapshot of a {} LUN ≤ {BIG_GOAL_S:.0} s", b.size),
                measured: format!(
                    "{:.2} s at most over {} (end to end)",
                    b.wall.max_ms / 1e3,
                    b.wall.n
                ),
                verdict: verdict(b.wall.n > 0 && b.wall.max_ms <= BIG_GOAL_S * 1e3),
            });
        }
        v
    }
}

/// A progress line for one window.
pub fn window_line(rep: usize, w: &WindowResult) -> String {
    let paused: Vec<f64> = w.snaps.iter().map(|s| s.paused_ms).collect();
    let snaps = if w.snaps.is_empty() {
        String::new()
    } else {
        format!(
            "; {} snapshots, paused median {:.1} ms, max {:.1} ms",
            w.snaps.len(),
            quantile(&paused, 0.5),
            quantile(&paused, 1.0)
        )
    };
    format!(
        "{} {rep}: {:.0} IOPS, p99.9 {:.0} µs, steal {:.1} %, other processes {:.1} %, load {:.1}{snaps}",
        w.kind, w.iops, w.p999_us, w.steal_pct, w.foreign_pct, w.load.1
    )
}

/// A progress line for one store.
pub fn line(r: &StoreResult) -> String {
    if let Some(why) = &r.skipped {
        return format!("{}: skipped: {why}", r.store.name());
    }
    let v: Vec<String> = r
        .verdicts
        .iter()
        .map(|v| format!("{}: {} ({})", v.goal, v.verdict, v.measured))
        .collect();
    format!("{}: {}", r.store.name(), v.join("; "))
}

/// The tables: pauses, windows, the 1 TiB LUN, the verdicts.
pub fn table(results: &[StoreResult]) -> String {
    let mut s = String::from(
        "| store | snapshots | pause p50 | p99 | max | `admin snapshot create` p50 / max | bench p99.9 without | with | ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        if let Some(why) = &r.skipped {
            let _ = writeln!(s, "| {} | skipped: {why} | | | | | | | |", r.store.name());
            continue;
        }
        let p999 = |i: usize| r.kinds.get(i).map_or(0.0, |w| w.p999_us);
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} / {:.0} ms | {:.0} µs | {:.0} µs | {:.2}× |",
            r.store.name(),
            r.paused.n,
            r.paused.p50_ms,
            r.paused.p99_ms,
            r.paused.max_ms,
            r.create_wall.p50_ms,
            r.create_wall.max_ms,
            p999(0),
            p999(1),
            r.p999_ratio
        );
    }
    s.push_str("\nPause: the LU's I/O held still, as each `snapshot create` answered it. Bench p99.9: median over the windows of a kind.\n\n");
    s.push_str("| store | window | windows | bench p99.9 | (lowest–highest) | longest I/O | IOPS | steal % | other processes % | load (1 min) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in results.iter().filter(|r| r.skipped.is_none()) {
        for w in &r.kinds {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0} µs | {:.0}–{:.0} | {:.0} ms | {:.0} | {:.1}–{:.1} | {:.1}–{:.1} | {:.1}–{:.1} |",
                r.store.name(),
                w.kind,
                w.count,
                w.p999_us,
                w.p999_range_us.0,
                w.p999_range_us.1,
                w.max_us / 1e3,
                w.iops,
                w.steal_pct.0,
                w.steal_pct.1,
                w.foreign_pct.0,
                w.foreign_pct.1,
                w.load.0,
                w.load.1
            );
        }
    }
    s.push_str("\nLongest I/O: of any window of the kind (a pause holds up the I/Os in flight and arriving, QD of them; at tens of thousands of IOPS they are fewer than 0.1 % of a window's, so p99.9 need not show it). Steal, other processes (share of all CPU time) and load: lowest–highest over the windows; other processes include the loop device's and XFS's kernel threads and the Ceph daemons, which serve the bench's I/O, as well as whatever else ran.\n");
    big_table(&mut s, results);
    s.push_str("\n| store | goal | measured | verdict |\n|---|---|---|---|\n");
    for r in results.iter().filter(|r| r.skipped.is_none()) {
        for v in &r.verdicts {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                r.store.name(),
                v.goal,
                v.measured,
                v.verdict
            );
        }
    }
    s
}

fn big_table(s: &mut String, results: &[StoreResult]) {
    let bigs: Vec<(&StoreResult, &BigSnaps)> = results
        .iter()
        .filter_map(|r| Some((r, r.big.as_ref()?)))
        .collect();
    if bigs.is_empty() {
        return;
    }
    s.push_str("\n| store | LUN | written | snapshots | `admin snapshot create` each | pauses |\n|---|---|---:|---:|---|---|\n");
    for (r, b) in bigs {
        let each: Vec<String> = b
            .snaps
            .iter()
            .map(|x| format!("{:.2} s", x.wall_ms / 1e3))
            .collect();
        let paused: Vec<String> = b
            .snaps
            .iter()
            .map(|x| format!("{:.1} ms", x.paused_ms))
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} sparse | {} MiB | {} | {} | {} |",
            r.store.name(),
            b.size,
            b.written_mib,
            b.snaps.len(),
            each.join(", "),
            paused.join(", ")
        );
    }
}
