//! An `ironlun bench` run in the background against one LUN (4 KiB
//! random I/O), with what else used the machine over it: the measured
//! window of the benches that run the target under something else
//! (`control_plane`, `snapshot_pause`, each including this file with
//! `#[path]`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::bench_json::BenchJson;
use crate::cpu::Usage;

/// The bench's settings.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub url: String,
    pub qd: u32,
    /// Percent reads.
    pub read: u32,
    /// Written blocks are read back and checked (`--verify`).
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

/// A bench that ended: its JSON, its exit, and the machine over it.
pub struct Finished {
    pub json: BenchJson,
    /// Where the JSON is (for errors).
    pub path: PathBuf,
    pub status: ExitStatus,
    /// Hypervisor steal, % of all CPU time.
    pub steal_pct: f64,
    /// CPU of other processes than the daemon and the bench, % of all.
    pub foreign_pct: f64,
    /// The 1-minute load average at the start and at the end.
    pub load: (f64, f64),
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

    /// Waits for the bench to end and reads its JSON.
    pub fn finish(mut self) -> Result<Finished, String> {
        let status = self.child.wait().map_err(|e| e.to_string())?;
        let end = Usage::now(self.daemon);
        Ok(Finished {
            json: BenchJson::read(&self.json, status)?,
            path: self.json,
            status,
            steal_pct: end.steal_pct(&self.start),
            foreign_pct: end.foreign_pct(&self.start),
            load: (self.load, load1()),
        })
    }
}

impl Finished {
    /// An error naming the JSON if the bench did not exit well.
    pub fn exited_well(&self) -> Result<(), String> {
        if self.status.success() {
            Ok(())
        } else {
            Err(format!(
                "the bench ({}) exited with {}",
                self.path.display(),
                self.status
            ))
        }
    }

    /// The number at `path` of the bench's workload.
    pub fn num(&self, path: &[&str]) -> Result<f64, String> {
        self.json.num(path)
    }
}

/// The 1-minute load average (/proc/loadavg's first field).
fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}
