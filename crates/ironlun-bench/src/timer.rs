//! A timer with microsecond meaning for the engine's near deadlines.
//!
//! tokio's timer wheel has millisecond slots and rounds every deadline up
//! to the next one, so a 1 ms transfer delay (IOMeter's burst delay) or a
//! rate of a few thousand IOPS per worker would come out 1–2 ms late and
//! the workload would run slower than specified. A Linux timerfd,
//! awaited through tokio's reactor, wakes within the kernel's timer slack
//! (~50 µs) instead. Far deadlines (the per-second tick, the end of the
//! run) keep using tokio's timer: arming a timerfd costs a system call.

use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Deadlines closer than this use the precise timer.
pub const NEAR: Duration = Duration::from_millis(5);

/// A one-shot timer on CLOCK_MONOTONIC (the clock `Instant` reads).
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
}

impl PreciseTimer {
    pub fn new() -> io::Result<PreciseTimer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // SAFETY: the descriptor is open, is owned by the OwnedFd moved
        // into the AsyncFd, and so stays open and refers to the same timer
        // until the AsyncFd drops (nothing else can close or replace it).
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(PreciseTimer { fd })
    }

    /// Returns at `deadline` (at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) -> io::Result<()> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: left.subsec_nanos().into(),
            },
        };
        // Arming resets pending expirations.
        timerfd_settime(self.fd.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
        loop {
            let mut guard = self.fd.readable().await?;
            let read = guard.try_io(|fd| {
                // A timerfd read returns the 8-byte expiration count or
                // fails (EAGAIN, as WouldBlock, when nothing expired).
                let mut expirations = [0u8; 8];
                rustix::io::read(fd.get_ref(), &mut expirations)?;
                Ok(())
            });
            match read {
                Ok(r) => return r,
                // Readiness was stale (an earlier arming's expiry); wait.
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_at_the_deadline_and_never_before() {
        let t = PreciseTimer::new().unwrap();
        for us in [0u64, 150, 700, 1300] {
            let due = Instant::now() + Duration::from_micros(us);
            t.sleep_until(due).await.unwrap();
            assert!(Instant::now() >= due);
        }
        // A deadline in the past returns at once.
        t.sleep_until(Instant::now() - Duration::from_millis(1))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_cancelled_wait_does_not_wake_the_next_one_early() {
        let t = PreciseTimer::new().unwrap();
        let first = Instant::now() + Duration::from_millis(1);
        // Cancel the first wait after its deadline has passed: its expiry
        // is pending on the descriptor.
        let _ = tokio::time::timeout(Duration::from_micros(10), t.sleep_until(first)).await;
        std::thread::sleep(Duration::from_millis(3));
        let due = Instant::now() + Duration::from_millis(20);
        t.sleep_until(due).await.unwrap();
        assert!(Instant::now() >= due);
    }
}
