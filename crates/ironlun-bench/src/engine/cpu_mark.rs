//! CPU marks: the host's, this process's, the target's and the excluded
//! threads' CPU time at one instant, and the run's CPU figures between
//! two marks.

use super::RunOptions;
use crate::cpu::{self, HostCpu};
use crate::result::Cpu;

/// CPU time as read at one instant (`None`: could not be read).
#[derive(Clone, Copy, Default)]
pub(crate) struct CpuMark {
    /// The whole host's CPU counters.
    host: Option<HostCpu>,
    /// This process's cumulative CPU seconds.
    process: Option<f64>,
    /// The target's cumulative CPU seconds, from the run's probe.
    target: Option<f64>,
    /// CPU seconds of this process's threads left out of the initiator's
    /// figures ([`RunOptions::exclude_threads`]).
    excluded: Option<f64>,
}

impl CpuMark {
    /// Reads every clock, in this order: host, process, target, excluded
    /// threads.
    pub(crate) async fn take(opts: &RunOptions) -> CpuMark {
        CpuMark {
            host: HostCpu::sample(),
            process: cpu::process_cpu_seconds(std::process::id()),
            target: target_cpu(opts).await,
            excluded: opts.exclude_threads.and_then(cpu::threads_cpu_seconds),
        }
    }

    /// The CPU figures of `ios` I/Os done over `elapsed` seconds, from
    /// this mark to `end`.
    pub(crate) fn until(&self, end: &CpuMark, elapsed: f64, ios: u64) -> Cpu {
        let excluded_s = match (self.excluded, end.excluded) {
            (Some(a), Some(b)) => (b - a).max(0.0),
            _ => 0.0,
        };
        let iops = ios as f64 / elapsed;
        let ncpu = cpu::cpus() as f64;
        let initiator_pct = match (self.host, end.host) {
            (Some(a), Some(b)) => a
                .busy_pct(&b)
                .map(|p| (p - excluded_s * 100.0 / elapsed / ncpu).max(0.0)),
            _ => None,
        };
        let proc_s = match (self.process, end.process) {
            (Some(a), Some(b)) => Some((b - a - excluded_s).max(0.0)),
            _ => None,
        };
        let target_s = match (self.target, end.target) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        };
        let per_io = |s: Option<f64>| s.filter(|_| ios > 0).map(|s| s * 1e6 / ios as f64);
        Cpu {
            initiator_pct,
            target_pct: target_s.map(|s| s * 100.0 / elapsed / ncpu),
            initiator_process_pct: proc_s.map(|s| s * 100.0 / elapsed / ncpu),
            iops_per_cpu_pct: initiator_pct.filter(|p| *p > 0.0).map(|p| iops / p),
            initiator_us_per_io: per_io(proc_s),
            target_us_per_io: per_io(target_s),
        }
    }
}

async fn target_cpu(opts: &RunOptions) -> Option<f64> {
    match &opts.target_cpu {
        Some(probe) => probe().await,
        None => None,
    }
}
