//! What else used the machine during a window: CPU steal (the
//! hypervisor's) and the CPU of processes other than the daemon, the
//! bench and this program (other jobs on the machine), each as a share
//! of all CPU time. A window with much of either says more about the
//! machine than about the daemon.

/// Clock ticks per second of /proc's counters (USER_HZ).
fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The counters a window's figures come from.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    /// Every CPU's time (/proc/stat `cpu`), seconds.
    total: f64,
    /// Of it, busy (user, nice, system, irq, softirq).
    busy: f64,
    steal: f64,
    /// This program (with its threads), the daemon, and waited-for
    /// children (the bench, once it has exited), seconds.
    ours: f64,
}

impl Usage {
    pub fn now(daemon: u32) -> Usage {
        let hz = ticks_per_s();
        let (total, busy, steal) = machine().unwrap_or_default();
        let ours = rusage(libc::RUSAGE_SELF)
            + rusage(libc::RUSAGE_CHILDREN)
            + process(daemon).unwrap_or(0.0) / hz;
        Usage {
            total: total / hz,
            busy: busy / hz,
            steal: steal / hz,
            ours,
        }
    }

    /// Steal since `earlier`, % of all CPU time.
    pub fn steal_pct(&self, earlier: &Usage) -> f64 {
        pct(self.steal - earlier.steal, self.total - earlier.total)
    }

    /// Busy time of other processes since `earlier`, % of all CPU time.
    pub fn foreign_pct(&self, earlier: &Usage) -> f64 {
        let other = (self.busy - earlier.busy) - (self.ours - earlier.ours);
        pct(other.max(0.0), self.total - earlier.total)
    }
}

/// Waits (at most `within`) until other processes use no more than
/// `limit` % of the machine's CPU over half a second; whether they did.
pub fn wait_quiet(daemon: u32, limit: f64, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        let start = Usage::now(daemon);
        std::thread::sleep(std::time::Duration::from_millis(500));
        let busy = Usage::now(daemon).foreign_pct(&start) + Usage::now(daemon).steal_pct(&start);
        if busy <= limit {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
    }
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        part * 100.0 / whole
    } else {
        0.0
    }
}

/// (total, busy, steal) ticks: `cpu user nice system idle iowait irq
/// softirq steal ...` (guest time is inside user and nice already).
fn machine() -> Option<(f64, f64, f64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let mut f = text.lines().next()?.split_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<f64> = f.take(8).filter_map(|x| x.parse().ok()).collect();
    let [user, nice, system, idle, iowait, irq, softirq, steal] = v.try_into().ok()?;
    let busy = user + nice + system + irq + softirq;
    Some((busy + idle + iowait + steal, busy, steal))
}

/// A process's user and system time, ticks (/proc/PID/stat fields 14
/// and 15, counted after the command name's closing parenthesis).
fn process(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = text.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i)?.parse::<f64>().ok();
    Some(ticks(11)? + ticks(12)?)
}

/// getrusage's user and system time, seconds.
fn rusage(who: libc::c_int) -> f64 {
    // SAFETY: rusage is plain old data; getrusage fills it in.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `r` is a valid, writable rusage.
    if unsafe { libc::getrusage(who, &mut r) } != 0 {
        return 0.0;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(r.ru_utime) + s(r.ru_stime)
}
