//! `ironlun compare-scale` (`benches/compare-scale`): how ironlun and tgt
//! scale with the client's threads and sessions, each target pinned to
//! one half of the machine's CPUs and the client (`ironlun bench`) to the
//! other ([`crate::pin`]), so neither steals the other's cores.
//!
//! Rows, all 4 KiB random reads from a null LUN (the protocol path, not
//! a store): client threads 1 → N (N: the client's CPUs), one session of
//! QD 32 per thread; then sessions 1 → 64 on N threads with the I/Os in
//! flight held equal (8 × 32 against 64 × 4; one session is held to 128,
//! a session's command window). Each row runs against both targets in
//! alternation; samples keep IOPS, MB/s, the target's CPU per I/O (all
//! its threads, from /proc), the client's, and the steal.

pub mod table;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::clients::{self, Load, RunCtx, Sample, Shape};
use crate::daemons::{self, Daemon, TgtLun, NULL_LUN_BYTES};
use crate::pin::Split;

/// I/Os in flight in the session rows (8 × 32, 64 × 4).
pub const IN_FLIGHT: u32 = 256;
/// Most a session is given: the command window both targets grant.
pub const SESSION_QD: u32 = 128;
/// Queue depth per session in the thread rows.
pub const THREAD_QD: u32 = 32;

/// What to run.
pub struct Options {
    /// The ironlun binary (target and bench).
    pub exe: PathBuf,
    /// Alternating repetitions of every row.
    pub reps: usize,
    /// Measured time per run (one second of ramp before).
    pub measure: Duration,
    /// Client thread counts of the thread rows (empty: 1 → N).
    pub threads: Vec<u32>,
    /// Session counts of the session rows.
    pub sessions: Vec<u32>,
    /// Scratch directory for the client's result files.
    pub scratch: PathBuf,
    /// When the run started (RFC 3339).
    pub started: String,
}

/// One row's shape: sessions, QD per session, client threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Spec {
    pub threads: u32,
    pub sessions: u32,
    pub qd: u32,
}

impl Spec {
    /// I/Os in flight.
    pub fn in_flight(&self) -> u32 {
        self.sessions * self.qd
    }
}

/// Both targets' samples of one row.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub spec: Spec,
    pub tgt: Vec<Sample>,
    pub ironlun: Vec<Sample>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub date: String,
    pub host: ironlun_bench::result::HostInfo,
    /// /proc/loadavg's three averages when the run started.
    pub load_average: String,
    /// The CPU sets; `None` on one CPU (nothing pinned).
    pub split: Option<Split>,
    pub versions: Vec<(String, String)>,
    pub reps: usize,
    pub measure_s: f64,
    pub rows: Vec<Row>,
    pub failures: Vec<String>,
    pub elapsed_s: f64,
}

/// The rows for a client of `client_cpus` CPUs: `threads` (default
/// 1, 2, 4 … up to the client's CPUs) × QD 32, then `sessions` on every
/// client thread with [`IN_FLIGHT`] I/Os in flight.
pub fn specs(client_cpus: usize, threads: &[u32], sessions: &[u32]) -> Vec<Spec> {
    let n = u32::try_from(client_cpus.max(1)).unwrap_or(u32::MAX);
    let default: Vec<u32> = std::iter::successors(Some(1u32), |t| t.checked_mul(2))
        .take_while(|t| *t < n)
        .chain(std::iter::once(n))
        .collect();
    let threads = if threads.is_empty() {
        &default
    } else {
        threads
    };
    let mut out: Vec<Spec> = threads
        .iter()
        .map(|&t| Spec {
            threads: t,
            sessions: t,
            qd: THREAD_QD,
        })
        .collect();
    out.extend(sessions.iter().map(|&s| Spec {
        threads: n.min(s),
        sessions: s,
        qd: (IN_FLIGHT / s.max(1)).clamp(1, SESSION_QD),
    }));
    out
}

/// The load average now, as /proc/loadavg gives its first three fields.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".into())
}

fn progress(msg: &str) {
    eprintln!("{msg}");
}

const TGT_IQN: &str = "iqn.2026-11.io.ironlun.compare:scale-tgt";
const IRONLUN_IQN: &str = "iqn.2026-11.io.ironlun.compare:scale-ironlun";

/// A started target and the URL of its null LUN.
struct Served {
    daemon: Daemon,
    url: String,
}

/// Both targets on the target CPUs, each exporting a null LUN.
fn start(exe: &std::path::Path, cpus: Option<&str>) -> Result<[Served; 2], String> {
    let tgt = Daemon::start_tgt_on(
        daemons::free_loopback_addr()?,
        &[(TGT_IQN, vec![TgtLun::null()])],
        cpus,
    )?;
    let ironlun = Daemon::start_ironlun_on(
        exe,
        daemons::free_loopback_addr()?,
        IRONLUN_IQN,
        &[format!("null:{NULL_LUN_BYTES}")],
        &[],
        cpus,
    )?;
    Ok([
        Served {
            url: tgt.lun_url(TGT_IQN, 1),
            daemon: tgt,
        },
        Served {
            url: ironlun.lun_url(IRONLUN_IQN, 0),
            daemon: ironlun,
        },
    ])
}

/// Runs every row against both targets, alternating which goes first.
/// Failed runs are listed in the report; they never stop the others.
pub fn run(opts: &Options) -> Result<Report, String> {
    let started = Instant::now();
    let load_average = load_average();
    let cpus = ironlun_bench::cpu::cpus();
    let split = Split::halves(cpus);
    let client_cpus = split.as_ref().map_or(1, |s| s.client_cpus);
    std::fs::create_dir_all(&opts.scratch)
        .map_err(|e| format!("{}: {e}", opts.scratch.display()))?;
    let targets = start(&opts.exe, split.as_ref().map(|s| s.target.as_str()))?;
    let ctx = RunCtx {
        exe: opts.exe.clone(),
        measure: opts.measure,
        scratch: opts.scratch.clone(),
    };
    let client = split.as_ref().map(|s| s.client.clone());
    let mut rows: Vec<Row> = specs(client_cpus, &opts.threads, &opts.sessions)
        .into_iter()
        .map(|spec| Row {
            spec,
            tgt: Vec::new(),
            ironlun: Vec::new(),
        })
        .collect();
    let mut failures = Vec::new();
    warm_up(&ctx, &targets, client.as_deref(), &mut failures);
    for rep in 0..opts.reps {
        for (i, row) in rows.iter_mut().enumerate() {
            let at = At { rep, k: rep + i };
            let line = run_row(&ctx, &targets, client.as_deref(), at, row, &mut failures);
            progress(&format!("[rep {}/{}] {line}", rep + 1, opts.reps));
        }
    }
    drop(targets);
    Ok(Report {
        date: opts.started.clone(),
        host: ironlun_bench::result::HostInfo::detect(),
        load_average,
        split,
        versions: versions(&opts.exe),
        reps: opts.reps,
        measure_s: opts.measure.as_secs_f64(),
        rows,
        failures,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

/// The versions measured.
fn versions(exe: &std::path::Path) -> Vec<(String, String)> {
    let mut v = crate::summary::versions(exe);
    v.retain(|(name, _)| name == "ironlun" || name == "tgt");
    v
}

/// The client's shape and load for a row.
fn client_of(spec: &Spec, cpus: Option<&str>) -> (Shape, Load) {
    let shape = Shape {
        block_size: 4096,
        read: true,
        random: true,
        queue_depth: spec.qd,
        align: None,
    };
    let load = Load {
        cpus: cpus.map(str::to_owned),
        threads: Some(spec.threads.min(spec.sessions).max(1)),
    };
    (shape, load)
}

/// One short run against each target, not recorded: threads started and
/// code paths loaded for both alike.
fn warm_up(ctx: &RunCtx, targets: &[Served; 2], cpus: Option<&str>, failures: &mut Vec<String>) {
    let short = RunCtx {
        exe: ctx.exe.clone(),
        measure: Duration::from_millis(500),
        scratch: ctx.scratch.clone(),
    };
    let spec = Spec {
        threads: 1,
        sessions: 1,
        qd: THREAD_QD,
    };
    let (shape, load) = client_of(&spec, cpus);
    for t in targets {
        let urls = [t.url.clone()];
        if let Err(e) = clients::bench_on(&short, &shape, &urls, t.daemon.pid(), &load) {
            failures.push(format!("warm-up against {}: {e}", t.daemon.name));
        }
    }
}

/// Which run of the comparison: its repetition and its place `k` in the
/// alternation.
#[derive(Clone, Copy)]
struct At {
    rep: usize,
    k: usize,
}

/// Runs `row` against both targets (tgt first when `at.k` is even); the
/// progress line.
fn run_row(
    ctx: &RunCtx,
    targets: &[Served; 2],
    cpus: Option<&str>,
    at: At,
    row: &mut Row,
    failures: &mut Vec<String>,
) -> String {
    let spec = row.spec;
    let mut line = table::label(&spec);
    let (shape, load) = client_of(&spec, cpus);
    let order = if at.k % 2 == 0 { [0, 1] } else { [1, 0] };
    for i in order {
        let Some(t) = targets.get(i) else { continue };
        let urls = vec![t.url.clone(); spec.sessions as usize];
        match clients::bench_on(ctx, &shape, &urls, t.daemon.pid(), &load) {
            Ok(mut s) => {
                s.rep = at.rep;
                line.push_str(&format!(
                    "; {} {:.0} IOPS, {} µs target CPU/IO (steal {:.0} %)",
                    t.daemon.name,
                    s.iops,
                    s.target_cpu_us_per_io
                        .map_or_else(|| "?".into(), |c| format!("{c:.1}")),
                    s.steal_pct
                ));
                if t.daemon.name == "tgt" {
                    row.tgt.push(s);
                } else {
                    row.ironlun.push(s);
                }
            }
            Err(e) => {
                line.push_str(&format!("; {} FAILED", t.daemon.name));
                failures.push(format!(
                    "{} against {}: {e}",
                    table::label(&spec),
                    t.daemon.name
                ));
            }
        }
    }
    line
}
