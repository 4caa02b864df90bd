//! CPU accounting from /proc: whole-host utilisation with IOMeter's
//! definition (user+nice+system+irq+softirq over elapsed, averaged over
//! CPUs), and the CPU time of one process or of named threads.

use std::fs;

/// Host CPU counters (jiffies) from the first line of /proc/stat.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostCpu {
    busy: u64,
    total: u64,
    /// Time the hypervisor ran something else while a vCPU wanted to run.
    steal: u64,
}

impl HostCpu {
    pub fn sample() -> Option<HostCpu> {
        let text = fs::read_to_string("/proc/stat").ok()?;
        let line = text.lines().next()?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal
        let get = |i: usize| v.get(i).copied().unwrap_or(0);
        let busy = get(0) + get(1) + get(2) + get(5) + get(6);
        let total = busy + get(3) + get(4) + get(7);
        Some(HostCpu {
            busy,
            total,
            steal: get(7),
        })
    }

    /// Percent of all CPU time the hypervisor stole between two samples
    /// (a virtual machine's vCPUs waiting for the host): measurements
    /// taken while it is high are disturbed.
    pub fn steal_pct(&self, later: &HostCpu) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0).then(|| steal as f64 * 100.0 / total as f64)
    }

    /// Percent of the host busy between two samples (0–100, all CPUs).
    pub fn busy_pct(&self, later: &HostCpu) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let busy = later.busy.checked_sub(self.busy)?;
        (total > 0).then(|| busy as f64 * 100.0 / total as f64)
    }
}

/// sysconf(_SC_CLK_TCK), which rustix reads from the auxiliary vector.
fn ticks_per_second() -> f64 {
    let t = rustix::param::clock_ticks_per_second();
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime+stime of a /proc/.../stat line, in seconds.
fn stat_cpu_seconds(text: &str) -> Option<f64> {
    // The command name is in parentheses and may contain spaces: fields
    // are counted after the last ')'.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state(0) ... utime is field 14 overall = index 11 here.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / ticks_per_second())
}

/// CPU seconds used so far by process `pid` (all threads).
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_seconds(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU seconds used by this process's threads whose name starts with
/// `prefix` (e.g. an in-process target's runtime threads).
pub fn threads_cpu_seconds(prefix: &str) -> Option<f64> {
    let mut sum = 0.0;
    let mut found = false;
    for entry in fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = entry.path();
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        if let Some(s) = fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|t| stat_cpu_seconds(&t))
        {
            sum += s;
            found = true;
        }
    }
    found.then_some(sum)
}

/// A target CPU probe for a local process.
pub fn pid_probe(pid: u32) -> crate::TargetCpuProbe {
    std::sync::Arc::new(move || Box::pin(std::future::ready(process_cpu_seconds(pid))))
}

/// A target CPU probe for this process's threads named `prefix...` (an
/// in-process target).
pub fn threads_probe(prefix: &'static str) -> crate::TargetCpuProbe {
    std::sync::Arc::new(move || Box::pin(std::future::ready(threads_cpu_seconds(prefix))))
}

/// Number of online CPUs.
pub fn cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn proc_parsing() {
        let a = HostCpu::sample().unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = HostCpu::sample().unwrap();
        assert!(b.total >= a.total);
        assert!(process_cpu_seconds(std::process::id()).is_some());
        let line = "123 (a b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0";
        assert_eq!(
            stat_cpu_seconds(line).map(|s| s * ticks_per_second()),
            Some(300.0)
        );
    }
}
