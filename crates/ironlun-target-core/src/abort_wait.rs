//! A task management response that waits for other sessions: the
//! requesting connection keeps an [`AbortWait`], and every session its
//! abort signal reaches holds an [`AbortHold`] until the tasks it ended
//! are gone (RFC 7143 §4.2.3.3: the response follows the end of every
//! affected task; SAM-5 §7.11). Holds count down as they are dropped, so
//! a session that closes, or an inbox that is thrown away, releases its
//! share without doing anything.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Called once the last hold is released: the driver wakes the waiting
/// connection with it.
pub type Wake = Arc<dyn Fn() + Send + Sync>;

struct Shared {
    holds: AtomicUsize,
    wake: Mutex<Option<Wake>>,
}

/// The waiting side, kept by the requesting connection's core.
pub(crate) struct AbortWait {
    shared: Arc<Shared>,
}

impl AbortWait {
    /// A wait and its first hold (the one the abort signal carries).
    pub(crate) fn new() -> (AbortWait, AbortHold) {
        let shared = Arc::new(Shared {
            holds: AtomicUsize::new(1),
            wake: Mutex::new(None),
        });
        let hold = AbortHold {
            shared: shared.clone(),
        };
        (AbortWait { shared }, hold)
    }

    /// Every hold has been released.
    pub(crate) fn is_released(&self) -> bool {
        self.shared.holds.load(Ordering::Acquire) == 0
    }
}

/// One session's share of another session's wait: released when dropped.
/// A clone is one more share (the driver gives one to each recipient).
pub struct AbortHold {
    shared: Arc<Shared>,
}

impl AbortHold {
    /// What to call when the last share is released (the waiting
    /// connection's wakeup). Set it before handing out clones.
    pub fn on_release(&self, wake: Wake) {
        *self.shared.wake.lock().unwrap_or_else(|e| e.into_inner()) = Some(wake);
    }
}

impl Clone for AbortHold {
    fn clone(&self) -> Self {
        self.shared.holds.fetch_add(1, Ordering::AcqRel);
        AbortHold {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for AbortHold {
    fn drop(&mut self) {
        if self.shared.holds.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let wake = self
            .shared
            .wake
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(w) = wake {
            w();
        }
    }
}

/// Shares of the same wait are equal (an inbox keeps one per wait).
impl PartialEq for AbortHold {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl Eq for AbortHold {}

impl fmt::Debug for AbortHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let holds = self.shared.holds.load(Ordering::Relaxed);
        write!(f, "AbortHold({holds} held)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn the_wait_ends_when_every_share_is_dropped_and_wakes_once() {
        let (wait, hold) = AbortWait::new();
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        hold.on_release(Arc::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }));
        let a = hold.clone();
        let b = hold.clone();
        assert_eq!(a, b);
        drop(hold);
        drop(a);
        assert!(!wait.is_released());
        assert_eq!(woken.load(Ordering::SeqCst), 0);
        drop(b);
        assert!(wait.is_released());
        assert_eq!(woken.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn shares_of_different_waits_differ() {
        let (_w1, h1) = AbortWait::new();
        let (_w2, h2) = AbortWait::new();
        assert_ne!(h1, h2);
        let dropped = Arc::new(AtomicBool::new(false));
        let d = dropped.clone();
        h2.on_release(Arc::new(move || d.store(true, Ordering::SeqCst)));
        drop(h2);
        assert!(dropped.load(Ordering::SeqCst));
    }
}
