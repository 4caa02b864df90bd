//! Snapshot pauses under load (issue 39's goals, docs/snapshots.md
//! "Measured pauses"): how long a snapshot of one LUN holds its I/O
//! still under a 4 KiB random QD 32 bench, what a snapshot a second does
//! to the bench's p99.9, and how long a snapshot of a 1 TiB LUN takes.
//! `benches/snapshot-pause` builds and runs it.
//!
//! Per store (`file`: a LUN file on a reflink XFS on a loop device this
//! program makes; `rbd`: an image on the cluster `--ceph-conf` names):
//! `ironlun target` with that LUN, then windows in alternation: the bench
//! alone, and the bench while `ironlun admin snapshot create` runs once a
//! second (the oldest deleted beyond `--keep`). Every pause the answers
//! print is kept, with the bench's p99.9 and what else used the machine
//! in each window. Before the windows, a 1 TiB LUN of the same store with
//! a little data written, and `admin snapshot create` on it timed end to
//! end.
//! Timings are judged against the goals in the output, never by the exit
//! status: a run fails only when something does not work (an I/O error,
//! a mismatch, a refused snapshot).

#[path = "../common/bench_json.rs"]
mod bench_json;
#[path = "../common/bench_run.rs"]
mod bench_run;
#[path = "../common/daemon.rs"]
mod common_daemon;
#[allow(dead_code)]
#[path = "../common/cpu.rs"]
mod cpu;
mod daemon;
mod report;
mod snaps;
mod store;
mod window;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;

use bench_run::{BenchSpec, RunningBench};
use daemon::Daemon;
use report::{BigSnaps, StoreResult};
use store::{Kind, Store};
use window::WindowResult;

#[derive(Parser, Debug)]
#[command(about = "Snapshot pauses under a 4 KiB QD 32 bench, and snapshots of a 1 TiB LUN")]
struct Args {
    /// Stores to measure, comma separated: file, rbd.
    #[arg(long, default_value = "file,rbd", value_delimiter = ',')]
    stores: Vec<Kind>,
    /// Pairs of windows (the bench alone, with a snapshot a second), each
    /// pair starting with the other kind than the last.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Measured time of each window.
    #[arg(long, default_value = "20s", value_parser = duration)]
    window: Duration,
    /// The bench's queue depth.
    #[arg(long, default_value_t = 32)]
    qd: u32,
    /// Percent reads of the bench's 4 KiB random I/O.
    #[arg(long, default_value_t = 50)]
    read: u32,
    /// A plain bench instead of `--verify` (which checks every block read).
    #[arg(long)]
    no_verify: bool,
    /// The measured LUN's size.
    #[arg(long, default_value = "1GiB", value_parser = size)]
    size: u64,
    /// Snapshots a window keeps: past this many the oldest is deleted
    /// after each new one.
    #[arg(long, default_value_t = 2)]
    keep: usize,
    /// `admin snapshot create` runs timed on the 1 TiB LUN (0: none).
    #[arg(long, default_value_t = 3)]
    big_snaps: usize,
    /// The Ceph cluster's configuration for the `rbd` store.
    #[arg(long, env = "CEPH_CONF", value_name = "FILE")]
    ceph_conf: Option<PathBuf>,
    /// The ironlun binary to run (daemon, bench and CLI). Default: the
    /// one built with this program.
    #[arg(long, value_name = "PATH")]
    ironlun: Option<PathBuf>,
    /// Where the table, the JSON, the daemon's logs and the loop-mounted
    /// XFS's image go [default: target/snapshot-pause, with --quick
    /// target/snapshot-pause-smoke].
    #[arg(long)]
    out: Option<PathBuf>,
    /// A smoke run: one pair of 5 s windows on 256 MiB, one 1 TiB snapshot.
    #[arg(long)]
    quick: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn duration(s: &str) -> Result<Duration, String> {
    ironlun_units::parse_duration(s)
}

fn size(s: &str) -> Result<u64, String> {
    ironlun_units::parse_size(s)
}

/// The bench's ramp before each measured window.
const RAMP: Duration = Duration::from_secs(1);
/// How far apart the snapshots of a window start.
const EVERY: Duration = Duration::from_secs(1);
/// The big LUN: 1 TiB, with this much written to it first.
const BIG: &str = "1 TiB";
const BIG_BYTES: u64 = 1 << 40;
const BIG_WRITE_MIB: u64 = 16;

fn main() {
    let mut a = Args::parse();
    if a.quick {
        (a.reps, a.window, a.size, a.big_snaps) = (1, Duration::from_secs(5), 256 << 20, 1);
    }
    if let Err(e) = run(&a) {
        eprintln!("snapshot-pause: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), String> {
    let ironlun = a
        .ironlun
        .as_deref()
        .unwrap_or(Path::new(env!("CARGO_BIN_EXE_ironlun")));
    let default = if a.quick {
        "snapshot-pause-smoke"
    } else {
        "snapshot-pause"
    };
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| Path::new("target").join(default));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let mut results = Vec::new();
    for &kind in &a.stores {
        let dir = out.join(kind.name());
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let r = match Store::open(kind, &dir, a.ceph_conf.as_deref(), a.size) {
            Ok(store) => measure(a, ironlun, &store, &dir)?,
            Err(why) => {
                eprintln!("{}: skipped: {why}", kind.name());
                StoreResult::skipped(kind, why)
            }
        };
        eprintln!("{}", report::line(&r));
        results.push(r);
    }
    let table = report::table(&results);
    println!("{table}");
    let json = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    std::fs::write(out.join("table.md"), &table).map_err(|e| e.to_string())?;
    std::fs::write(out.join("result.json"), json).map_err(|e| e.to_string())?;
    Ok(())
}

/// One store: the 1 TiB LUN, then the windows on a LUN of `--size`.
/// In this order the 1 TiB LUN's snapshots are taken on a fresh file
/// system: after the windows XFS is still freeing the blocks of their
/// deleted snapshots in the background, and a snapshot taken then waited
/// seconds for it (2.6 s once, where the next two took 4 ms).
fn measure(a: &Args, ironlun: &Path, store: &Store, dir: &Path) -> Result<StoreResult, String> {
    let big = if a.big_snaps > 0 {
        Some(big_lun(a, ironlun, store, dir)?)
    } else {
        None
    };
    let spec = store.lun("pause", a.size)?;
    let daemon = daemon::start(ironlun, &dir.join("pause"), &spec)?;
    let windows = windows(a, ironlun, &daemon, dir);
    daemon.stop();
    Ok(StoreResult::new(
        store.kind,
        store.describe(),
        windows?,
        big,
    ))
}

/// The kinds of window: the bench alone, and with a snapshot a second.
pub const ALONE: &str = "alone";
pub const SNAPSHOTS: &str = "snapshots";

fn windows(
    a: &Args,
    ironlun: &Path,
    daemon: &Daemon,
    dir: &Path,
) -> Result<Vec<WindowResult>, String> {
    let spec = BenchSpec {
        url: daemon::url(daemon),
        qd: a.qd,
        read: a.read,
        verify: !a.no_verify,
        time: a.window,
        ramp: RAMP,
    };
    let mut kinds = [ALONE, SNAPSHOTS];
    let mut out = Vec::new();
    for rep in 0..a.reps {
        kinds.rotate_left(usize::from(rep > 0));
        for kind in kinds {
            let json = dir.join(format!("bench-r{rep}-{kind}.json"));
            let bench = RunningBench::start(ironlun, &spec, json, daemon.pid())?;
            let taken = if kind == SNAPSHOTS {
                let s = snaps::Series {
                    ironlun,
                    daemon,
                    tag: format!("r{rep}"),
                    every: EVERY,
                    keep: a.keep,
                };
                s.run(RAMP, a.window)?
            } else {
                Vec::new()
            };
            let w = window::result(&bench.finish()?, kind, taken)?;
            eprintln!("  {}", report::window_line(rep, &w));
            out.push(w);
        }
    }
    Ok(out)
}

/// A 1 TiB LUN of the store with [`BIG_WRITE_MIB`] written at random
/// places, then `--big-snaps` snapshots of it, each timed end to end.
fn big_lun(a: &Args, ironlun: &Path, store: &Store, dir: &Path) -> Result<BigSnaps, String> {
    let spec = store.lun("big", BIG_BYTES)?;
    let daemon = daemon::start(ironlun, &dir.join("big"), &spec)?;
    let r = (|| {
        window::write_some(ironlun, &daemon::url(&daemon), BIG_WRITE_MIB)?;
        let s = snaps::Series {
            ironlun,
            daemon: &daemon,
            tag: "big".into(),
            every: Duration::ZERO,
            keep: a.big_snaps,
        };
        let taken = s.some(a.big_snaps)?;
        s.delete_all(&taken)?;
        Ok(BigSnaps::new(BIG, BIG_WRITE_MIB, taken))
    })();
    daemon.stop();
    store.remove_lun("big")?;
    r
}
