//! Keeping the CPUs out of idle while a delay is emulated.
//!
//! On a virtual machine a thread that sleeps often wakes late: an idle
//! vCPU halts and the host is slow to run it again. Measured on this
//! project's 2-vCPU CI machine: a 10 ms sleep overshoots by 21 ms at p90
//! and 239 ms at p99; with a lowest-priority busy thread on each CPU the
//! same sleep overshoots by 0.1 ms at p90 and 0.7 ms at p99. So while a
//! relay with `keep_awake` runs, one `SCHED_IDLE` spinner per CPU keeps
//! the vCPUs running. It is opt-in: the same machine at another hour
//! slept accurately without it, and when the host caps the VM's CPU
//! time the spinners spend that quota (steal time rose to a third of
//! all CPU time in a reproduction run with them). SCHED_IDLE threads run only when nothing else
//! wants the CPU, so they take no time from the target or initiator, but
//! they do show as busy in /proc/stat: their threads are named
//! [`THREAD_NAME`] so host CPU figures can leave them out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Name of the spinner threads.
pub const THREAD_NAME: &str = "netem-awake";

struct Spinners {
    users: usize,
    stop: Option<Arc<AtomicBool>>,
    threads: Vec<JoinHandle<()>>,
}

static SPINNERS: Mutex<Spinners> = Mutex::new(Spinners {
    users: 0,
    stop: None,
    threads: Vec::new(),
});

/// While held, the CPUs are kept awake; the last guard dropped stops the
/// spinners.
pub struct AwakeGuard(());

fn lock() -> std::sync::MutexGuard<'static, Spinners> {
    SPINNERS.lock().unwrap_or_else(|e| e.into_inner())
}

fn spin(stop: &AtomicBool) {
    // libc: rustix (1.1) has no sched_setscheduler.
    // SAFETY: sched_setscheduler with pid 0 changes only the calling
    // thread; `param` is a valid, initialised sched_param that outlives
    // the call. SCHED_IDLE requires priority 0.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1000 {
            std::hint::spin_loop();
        }
    }
}

/// Starts the spinners if they are not running.
pub fn acquire() -> AwakeGuard {
    let mut s = lock();
    s.users += 1;
    if s.users == 1 {
        let stop = Arc::new(AtomicBool::new(false));
        s.stop = Some(stop.clone());
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        for _ in 0..n {
            let stop = stop.clone();
            if let Ok(h) = std::thread::Builder::new()
                .name(THREAD_NAME.into())
                .spawn(move || spin(&stop))
            {
                s.threads.push(h);
            }
        }
    }
    AwakeGuard(())
}

impl Drop for AwakeGuard {
    fn drop(&mut self) {
        let mut s = lock();
        s.users = s.users.saturating_sub(1);
        if s.users == 0 {
            if let Some(stop) = s.stop.take() {
                stop.store(true, Ordering::Relaxed);
            }
            let threads = std::mem::take(&mut s.threads);
            drop(s);
            for t in threads {
                let _ = t.join();
            }
        }
    }
}
