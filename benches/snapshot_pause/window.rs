//! One measured window: an `ironlun bench` run (4 KiB random, QD 32 by
//! default, verifying) on the LUN, with the snapshots taken in it and
//! what else used the machine over it.

use std::path::Path;
use std::process::Command;

use crate::bench_run::Finished;
use crate::snaps::Snap;

/// What a window measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WindowResult {
    /// `alone` or `snapshots`.
    pub kind: &'static str,
    pub iops: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub errors: u64,
    /// Blocks read back and checked, and those that were wrong (a
    /// verifying bench; 0 and 0 for a plain one).
    pub checked_blocks: u64,
    pub mismatches: u64,
    pub steal_pct: f64,
    /// CPU of other processes, % of all CPU time.
    pub foreign_pct: f64,
    /// The 1-minute load average at the window's start and end.
    pub load: (f64, f64),
    pub snaps: Vec<Snap>,
}

/// Reads a finished bench's window; an error if the bench failed, had
/// an I/O error or read a wrong block.
pub fn result(b: &Finished, kind: &'static str, snaps: Vec<Snap>) -> Result<WindowResult, String> {
    b.exited_well()?;
    let opt = |k: &[&str]| b.num(k).unwrap_or(0.0) as u64;
    let r = WindowResult {
        kind,
        iops: b.num(&["iops"])?,
        p99_us: b.num(&["latency_us", "p99"])?,
        p999_us: b.num(&["latency_us", "p999"])?,
        max_us: b.num(&["latency_us", "max"])?,
        errors: b.num(&["errors"])? as u64,
        checked_blocks: opt(&["verify", "checked_blocks"]),
        mismatches: opt(&["verify", "mismatch_count"]),
        steal_pct: b.steal_pct,
        foreign_pct: b.foreign_pct,
        load: b.load,
        snaps,
    };
    if r.errors > 0 || r.mismatches > 0 {
        return Err(format!(
            "the bench ({}): {} I/O errors, {} wrong blocks",
            b.path.display(),
            r.errors,
            r.mismatches
        ));
    }
    Ok(r)
}

/// Writes `mib` MiB to the LUN at `url` in 1 MiB writes at random places.
pub fn write_some(ironlun: &Path, url: &str, mib: u64) -> Result<(), String> {
    let out = Command::new(ironlun)
        .arg("bench")
        .arg(url)
        .args(["--bs", "1m", "--read", "0", "--random", "100", "--qd", "4"])
        .args(["--ios", &mib.to_string(), "--time", "120s", "--ramp", "0"])
        .output()
        .map_err(|e| format!("ironlun bench: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ironlun bench (the 1 TiB LUN's writes): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}
