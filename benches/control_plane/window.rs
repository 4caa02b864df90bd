//! One measured window: an `ironlun bench` run (4 KiB random reads on
//! one LUN), with what else used the machine over it.

use crate::bench_run::Finished;

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
    /// The 1-minute load average at the window's start and end.
    pub load: (f64, f64),
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

/// Reads a finished bench's window.
pub fn result(b: &Finished, kind: &'static str) -> Result<WindowResult, String> {
    b.exited_well()?;
    Ok(WindowResult {
        kind,
        iops: b.num(&["iops"])?,
        p99_us: b.num(&["latency_us", "p99"])?,
        p999_us: b.num(&["latency_us", "p999"])?,
        errors: b.num(&["errors"])? as u64,
        steal_pct: b.steal_pct,
        foreign_pct: b.foreign_pct,
        load: b.load,
        attempts: 1,
    })
}
