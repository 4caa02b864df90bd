//! What the kernel says of this process, for `GET /stats` and the
//! `process_*` metrics of `GET /metrics` (the names and meanings every
//! Prometheus client library gives them): CPU time, resident and virtual
//! memory, open and allowed file descriptors, and when the process
//! started. Linux only, like the daemon; a value the kernel does not give
//! is `None` and left out, never a made-up 0.
//!
//! The /proc files are read with a cap on their size and parsed by field,
//! so an odd kernel cannot make a scrape allocate without bound or panic.

use std::io::Read;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Most of a /proc file read: /proc/self/status is about 1.5 KiB,
/// /proc/self/stat and /proc/uptime far less.
const PROC_FILE_LIMIT: u64 = 64 << 10;

/// CPU time the process has used since it started (all threads).
#[derive(Serialize, Debug, Default, Clone, Copy)]
pub struct CpuTime {
    pub user_s: f64,
    pub system_s: f64,
    pub total_s: f64,
}

/// This process's user and system CPU time (getrusage, microsecond
/// resolution, all threads).
pub fn cpu_time() -> CpuTime {
    // libc: rustix (1.1) has no getrusage.
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` through a valid, writable
    // pointer to memory of that type and touches nothing else;
    // RUSAGE_SELF is always a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    if rc != 0 {
        return CpuTime::default();
    }
    // SAFETY: the call succeeded, so the struct is initialised (and it was
    // zeroed before, which is a valid `rusage` anyway).
    let ru = unsafe { ru.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let user_s = secs(ru.ru_utime);
    let system_s = secs(ru.ru_stime);
    CpuTime {
        user_s,
        system_s,
        total_s: user_s + system_s,
    }
}

/// Memory the process maps now, in bytes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// VmRSS: resident in RAM.
    pub resident: Option<u64>,
    /// VmSize: the whole address space mapped.
    pub virtual_size: Option<u64>,
}

/// VmRSS and VmSize of /proc/self/status.
pub fn memory() -> Memory {
    read_capped("/proc/self/status").map_or_else(Memory::default, |s| memory_of(&s))
}

/// VmRSS and VmSize of a /proc/PID/status text ("VmRSS:  1234 kB").
fn memory_of(status: &str) -> Memory {
    let kib = |key: &str| {
        let line = status.lines().find_map(|l| l.strip_prefix(key))?;
        let mut fields = line.split_whitespace();
        let n: u64 = fields.next()?.parse().ok()?;
        (fields.next() == Some("kB")).then(|| n.checked_mul(1024))?
    };
    Memory {
        resident: kib("VmRSS:"),
        virtual_size: kib("VmSize:"),
    }
}

/// File descriptors open now: the entries of /proc/self/fd (the one this
/// listing holds open included, as every client library counts it).
pub fn open_fds() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    Some(dir.count() as u64)
}

/// The soft limit on open file descriptors (RLIMIT_NOFILE); `None` when
/// unlimited.
pub fn max_fds() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// When the process started, in seconds since the Unix epoch: its start
/// in clock ticks after boot (/proc/self/stat) set against the time since
/// boot (/proc/uptime). Worked out once: it does not change, and the
/// clock-tick rounding would make it wobble from scrape to scrape.
pub fn start_time() -> Option<f64> {
    static START: OnceLock<Option<f64>> = OnceLock::new();
    *START.get_or_init(|| {
        let ticks = start_ticks(&read_capped("/proc/self/stat")?)?;
        let uptime = uptime_of(&read_capped("/proc/uptime")?)?;
        let hz = rustix::param::clock_ticks_per_second();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
        start_of(ticks, hz, uptime, now.as_secs_f64())
    })
}

/// Unix time of a start `ticks` after boot, `uptime` seconds after boot
/// being `now`.
fn start_of(ticks: u64, hz: u64, uptime: f64, now: f64) -> Option<f64> {
    if hz == 0 {
        return None;
    }
    let running = uptime - ticks as f64 / hz as f64;
    (running >= 0.0).then_some(now - running)
}

/// Field 22, starttime, of /proc/PID/stat (proc(5)). The command name in
/// field 2 is in parentheses and may hold spaces and parentheses itself,
/// so the fields are counted from after its last ')': state is field 3.
fn start_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// The first number of /proc/uptime: seconds since boot.
fn uptime_of(text: &str) -> Option<f64> {
    let secs: f64 = text.split_whitespace().next()?.parse().ok()?;
    secs.is_finite().then_some(secs)
}

/// A /proc file as text, at most [`PROC_FILE_LIMIT`] bytes of it.
fn read_capped(path: &str) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(PROC_FILE_LIMIT)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_comes_from_vm_rss_and_vm_size_in_kib() {
        let status = "Name:\tironlun\nVmPeak:\t  999 kB\nVmSize:\t  2048 kB\nVmRSS:\t   100 kB\n";
        assert_eq!(
            memory_of(status),
            Memory {
                resident: Some(100 << 10),
                virtual_size: Some(2 << 20),
            }
        );
        // Missing, not a number, another unit, or too large: not given.
        let odd = "VmRSS:\tlots kB\nVmSize:\t12 MB\n";
        assert_eq!(memory_of(odd), Memory::default());
        let huge = format!("VmRSS:\t{} kB\n", u64::MAX);
        assert_eq!(memory_of(&huge).resident, None);
        assert_eq!(memory_of(""), Memory::default());
    }

    #[test]
    fn start_ticks_are_field_22_counted_after_the_command_name() {
        // A command name with spaces and a ')' of its own.
        let fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        let stat = format!("4242 (a) b (c) {}\n", fields.join(" "));
        assert_eq!(start_ticks(&stat), Some(22));
        assert_eq!(start_ticks("4242 (short) S 1 2"), None);
        assert_eq!(start_ticks("no parenthesis at all"), None);
        assert_eq!(start_ticks(""), None);
    }

    #[test]
    fn start_is_now_less_the_time_running() {
        // Started 100 s after boot, booted 1000 s ago: running 900 s.
        assert_eq!(start_of(10_000, 100, 1000.0, 5000.0), Some(4100.0));
        // A start after "now", or no clock rate: nothing.
        assert_eq!(start_of(10_000, 100, 50.0, 5000.0), None);
        assert_eq!(start_of(10_000, 0, 1000.0, 5000.0), None);
        assert_eq!(uptime_of("1234.56 9999.99\n"), Some(1234.56));
        assert_eq!(uptime_of("NaN 1"), None);
        assert_eq!(uptime_of(""), None);
    }

    #[test]
    fn this_process_is_described() {
        let m = memory();
        let (rss, vsz) = (m.resident.unwrap(), m.virtual_size.unwrap());
        assert!(rss > 0 && vsz >= rss, "{m:?}");
        let open = open_fds().unwrap();
        assert!(open >= 3, "stdin, stdout, stderr at least: {open}");
        assert!(max_fds().is_none_or(|max| max >= open));
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let start = start_time().unwrap();
        // This test process started before now, and not before 2020.
        assert!(start <= now.as_secs_f64() + 1.0 && start > 1.5e9, "{start}");
        assert_eq!(start_time(), Some(start), "the same every time");
        assert!(cpu_time().total_s >= 0.0);
    }
}
