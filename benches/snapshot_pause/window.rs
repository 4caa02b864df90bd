//! One measured window: an `ironlun bench` run (4 KiB random, QD 32 by
//! default, verifying) on the LUN, with the snapshots taken in it and
//! what else used the machine over it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::bench_json::BenchJson;
use crate::cpu::Usage;
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

/// The bench's settings.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub url: String,
    pub qd: u32,
    /// Percent reads.
    pub read: u32,
    pub verify: bool,
    pub time: Duration,
    pub ramp: Duration,
}

/// A bench running.
pub struct RunningBench {
    child: Child,
    json: PathBuf,
    daemon: u32,
    start: Usage,
    load: f64,
}

impl RunningBench {
    /// Starts the bench against `daemon`'s LUN (its pid, for the CPU it
    /// uses).
    pub fn start(
        ironlun: &Path,
        spec: &BenchSpec,
        json: PathBuf,
        daemon: u32,
    ) -> Result<RunningBench, String> {
        let start = Usage::now(daemon);
        let mut cmd = Command::new(ironlun);
        cmd.arg("bench")
            .arg(&spec.url)
            .args(["--bs", "4k", "--random", "100"])
            .args(["--read", &spec.read.to_string()])
            .args(["--qd", &spec.qd.to_string()])
            .args(["--time", &format!("{}ms", spec.time.as_millis())])
            .args(["--ramp", &format!("{}ms", spec.ramp.as_millis())])
            .arg("--json")
            .arg(&json);
        if spec.verify {
            cmd.arg("--verify");
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("ironlun bench: {e}"))?;
        Ok(RunningBench {
            child,
            json,
            daemon,
            start,
            load: load1(),
        })
    }

    /// Waits for the bench to end and reads its JSON; an error if the
    /// bench failed, had an I/O error or read a wrong block.
    pub fn finish(mut self, kind: &'static str, snaps: Vec<Snap>) -> Result<WindowResult, String> {
        let st = self.child.wait().map_err(|e| e.to_string())?;
        let end = Usage::now(self.daemon);
        let w = BenchJson::read(&self.json, st)?;
        let num = |k: &[&str]| w.num(k);
        let opt = |k: &[&str]| num(k).unwrap_or(0.0) as u64;
        let r = WindowResult {
            kind,
            iops: num(&["iops"])?,
            p99_us: num(&["latency_us", "p99"])?,
            p999_us: num(&["latency_us", "p999"])?,
            max_us: num(&["latency_us", "max"])?,
            errors: num(&["errors"])? as u64,
            checked_blocks: opt(&["verify", "checked_blocks"]),
            mismatches: opt(&["verify", "mismatch_count"]),
            steal_pct: end.steal_pct(&self.start),
            foreign_pct: end.foreign_pct(&self.start),
            load: (self.load, load1()),
            snaps,
        };
        if !st.success() || r.errors > 0 || r.mismatches > 0 {
            return Err(format!(
                "the bench ({}) failed: exit {st}, {} I/O errors, {} wrong blocks",
                self.json.display(),
                r.errors,
                r.mismatches
            ));
        }
        Ok(r)
    }
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

/// The 1-minute load average (/proc/loadavg's first field).
fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}
