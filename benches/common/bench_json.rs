//! The first workload of an `ironlun bench --json` file, as the benches
//! that run `ironlun bench` in windows read it (`control_plane`,
//! `snapshot_pause`, each including this file with `#[path]`).

use std::path::Path;
use std::process::ExitStatus;

pub struct BenchJson {
    workload: serde_json::Value,
}

impl BenchJson {
    /// Reads `path`, written by a bench that exited with `exit` (named in
    /// the error when the file is missing).
    pub fn read(path: &Path, exit: ExitStatus) -> Result<BenchJson, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: {e} (bench exit: {exit})", path.display()))?;
        let mut v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let workload = v
            .get_mut("workloads")
            .and_then(|w| w.get_mut(0))
            .map(serde_json::Value::take)
            .ok_or("bench JSON: no workload")?;
        Ok(BenchJson { workload })
    }

    /// The number at `path` (e.g. `["latency_us", "p999"]`).
    pub fn num(&self, path: &[&str]) -> Result<f64, String> {
        path.iter()
            .try_fold(&self.workload, |v, k| v.get(k))
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| format!("bench JSON: no {}", path.join(".")))
    }
}
