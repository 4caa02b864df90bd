//! What /proc says about a process and the host: CPU time (all threads),
//! resident memory, and hypervisor steal.

use std::fs;

/// Clock ticks per second for /proc CPU fields.
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant; no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// User + system CPU seconds of a process, all its threads (fields 14 and
/// 15 of /proc/PID/stat, proc(5)). `None` once the process is gone.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu(&text).map(|ticks| ticks as f64 / ticks_per_second())
}

/// utime + stime in ticks from a /proc/PID/stat line. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted
/// after its last ')'.
pub fn parse_stat_cpu(text: &str) -> Option<u64> {
    let after = text.get(text.rfind(')')? + 1..)?;
    let mut f = after.split_whitespace();
    // After the name: state is field 3, so utime (14) is the 12th here.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Resident set size of a process in bytes (VmRSS in /proc/PID/status).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_kib(&text, "VmRSS:").map(|k| k * 1024)
}

fn parse_status_kib(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.get(key.len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Cumulative host CPU counters: (steal, total) in ticks, from the first
/// line of /proc/stat.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostTicks {
    steal: u64,
    total: u64,
}

impl HostTicks {
    pub fn sample() -> HostTicks {
        let text = fs::read_to_string("/proc/stat").unwrap_or_default();
        parse_host_ticks(text.lines().next().unwrap_or("")).unwrap_or_default()
    }

    /// Percent of CPU time the hypervisor stole since `earlier`.
    pub fn steal_pct_since(&self, earlier: &HostTicks) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        let steal = self.steal.saturating_sub(earlier.steal);
        if total == 0 {
            0.0
        } else {
            steal as f64 * 100.0 / total as f64
        }
    }
}

fn parse_host_ticks(line: &str) -> Option<HostTicks> {
    let mut f = line.split_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is
    // already inside user and nice).
    let total: u64 = v.iter().take(8).sum();
    Some(HostTicks {
        steal: v.get(7).copied().unwrap_or(0),
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cpu_counts_fields_after_the_name() {
        // A name with a space and a ')' must not shift the fields.
        let line = "1234 (tgt d) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 75 0 0 20 0 17 0 5000 100000 300";
        assert_eq!(parse_stat_cpu(line), Some(325));
        assert_eq!(parse_stat_cpu("garbage"), None);
    }

    #[test]
    fn status_rss_in_kib() {
        let s = "Name:\ttgtd\nVmHWM:\t  9000 kB\nVmRSS:\t    8123 kB\n";
        assert_eq!(parse_status_kib(s, "VmRSS:"), Some(8123));
        assert_eq!(parse_status_kib(s, "VmSwap:"), None);
    }

    #[test]
    fn steal_is_a_share_of_all_ticks() {
        let a = parse_host_ticks("cpu  100 0 50 800 0 0 0 50 0 0").unwrap();
        let b = parse_host_ticks("cpu  200 0 100 1500 0 0 0 200 0 0").unwrap();
        // 1000 ticks passed, 150 stolen.
        assert!((b.steal_pct_since(&a) - 15.0).abs() < 1e-9);
        assert_eq!(a.steal_pct_since(&b), 0.0);
    }

    #[test]
    fn this_process_has_cpu_and_memory() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).is_some());
        assert!(rss_bytes(pid).unwrap() > 0);
    }
}
