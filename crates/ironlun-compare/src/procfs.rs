//! Resident memory from /proc. (Process CPU time and host steal come from
//! `ironlun_bench::cpu`, which the load generator uses too.)

use std::fs;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_rss_in_kib() {
        let s = "Name:\ttgtd\nVmHWM:\t  9000 kB\nVmRSS:\t    8123 kB\n";
        assert_eq!(parse_status_kib(s, "VmRSS:"), Some(8123));
        assert_eq!(parse_status_kib(s, "VmSwap:"), None);
    }

    #[test]
    fn this_process_has_memory() {
        assert!(rss_bytes(std::process::id()).unwrap() > 0);
    }
}
