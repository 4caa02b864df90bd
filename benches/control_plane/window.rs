//! One measured window: an `ironlun bench` run (4 KiB random reads on
//! one LUN), with what else used the machine over it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::bench_json::BenchJson;
use crate::cpu::Usage;

/// What the bench of a window measured.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WindowResult {
    /// `alone`, `ops`, or `control` (404 requests in the operations' place).
    pub kind: &'static str,
    pub iops: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub errors: u64,
    pub steal_pct: f64,
    /// CPU of other processes, % of all CPU time.
    pub foreign_pct: f64,
    /// Windows of this kind measured to get this one (more than one: the
    /// others were noisier, see `--redo-above`).
    pub attempts: u32,
}

impl WindowResult {
    /// CPU the daemon and the bench did not get: steal and other
    /// processes, % of all CPU time.
    pub fn noise_pct(&self) -> f64 {
        self.steal_pct + self.foreign_pct
    }
}

/// The bench's settings.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    pub url: String,
    pub qd: u32,
    pub time: Duration,
    pub ramp: Duration,
}

/// A bench running.
pub struct RunningBench {
    child: Child,
    json: PathBuf,
    daemon: u32,
    start: Usage,
}

impl RunningBench {
    /// Starts the bench against `daemon`'s LUN (its pid, for the CPU
    /// it uses).
    pub fn start(
        ironlun: &Path,
        spec: &BenchSpec,
        json: PathBuf,
        daemon: u32,
    ) -> Result<RunningBench, String> {
        let start = Usage::now(daemon);
        let child = Command::new(ironlun)
            .arg("bench")
            .arg(&spec.url)
            .args(["--bs", "4k", "--read", "100", "--random", "100"])
            .args(["--qd", &spec.qd.to_string()])
            .args(["--time", &format!("{}ms", spec.time.as_millis())])
            .args(["--ramp", &format!("{}ms", spec.ramp.as_millis())])
            .arg("--json")
            .arg(&json)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("ironlun bench: {e}"))?;
        Ok(RunningBench {
            child,
            json,
            daemon,
            start,
        })
    }

    /// Waits for the bench to end and reads its JSON.
    pub fn finish(mut self, kind: &'static str) -> Result<WindowResult, String> {
        let st = self.child.wait().map_err(|e| e.to_string())?;
        let end = Usage::now(self.daemon);
        let w = BenchJson::read(&self.json, st)?;
        let num = |k: &[&str]| w.num(k);
        Ok(WindowResult {
            kind,
            iops: num(&["iops"])?,
            p99_us: num(&["latency_us", "p99"])?,
            p999_us: num(&["latency_us", "p999"])?,
            errors: num(&["errors"])? as u64,
            steal_pct: end.steal_pct(&self.start),
            foreign_pct: end.foreign_pct(&self.start),
            attempts: 1,
        })
    }
}
