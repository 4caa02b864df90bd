//! [`AccessGate`]: ordinary reads and writes share a logical unit; the
//! commands that must look atomic to others (COMPARE AND WRITE, ORWRITE,
//! WRITE ATOMIC) hold it alone (SBC-4 §5.2, §5.9, §5.48).
//!
//! Unlike a reader-writer lock's guard, a shared hold can be a
//! [`SharedTicket`] that owns no borrow: a read or write the transport runs
//! asynchronously (an io_uring) keeps it until the kernel is done, then
//! drops it. A ticket is only ever *tried* for ([`AccessGate::try_shared`]):
//! a transport's network thread never waits for an exclusive command; it
//! runs the command the blocking way instead.
//!
//! Exclusive holders are preferred: once one waits, new shared holders
//! wait (or are refused a ticket) until it is done, so a stream of reads
//! cannot starve a COMPARE AND WRITE.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Set while an exclusive holder holds or waits for the gate; the bits
/// below count shared holders.
const EXCLUSIVE: usize = 1 << (usize::BITS - 1);

#[derive(Default)]
pub(crate) struct AccessGate {
    state: AtomicUsize,
    /// Serialises exclusive holders (held for their whole section).
    exclusive: Mutex<()>,
    /// Waiters sleep on `changed` under `sleep`.
    sleep: Mutex<()>,
    changed: Condvar,
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl AccessGate {
    /// A shared hold now, or `None` while an exclusive holder holds or
    /// waits.
    fn try_enter_shared(&self) -> bool {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            // One more sharer; a count reaching the EXCLUSIVE bit (2^63
            // guards) is refused like an exclusive holder.
            let Some(next) = s.checked_add(1).filter(|n| n & EXCLUSIVE == 0) else {
                return false;
            };
            match self
                .state
                .compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    fn leave_shared(&self) {
        let before = self.state.fetch_sub(1, Ordering::AcqRel);
        if before == EXCLUSIVE | 1 {
            // The last shared holder left while an exclusive one waits.
            let _g = lock(&self.sleep);
            self.changed.notify_all();
        }
    }

    /// Shared access, waiting while an exclusive holder holds or waits.
    pub(crate) fn shared(&self) -> SharedGuard<'_> {
        if !self.try_enter_shared() {
            let mut g = lock(&self.sleep);
            while !self.try_enter_shared() {
                g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
        SharedGuard { gate: self }
    }

    /// Sole access, waiting for shared holders to leave.
    pub(crate) fn exclusive(&self) -> ExclusiveGuard<'_> {
        let serial = lock(&self.exclusive);
        self.state.fetch_or(EXCLUSIVE, Ordering::AcqRel);
        let mut g = lock(&self.sleep);
        while self.state.load(Ordering::Acquire) != EXCLUSIVE {
            g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        drop(g);
        ExclusiveGuard {
            gate: self,
            _serial: serial,
        }
    }
}

/// Shared access for the guard's lifetime.
pub(crate) struct SharedGuard<'a> {
    gate: &'a AccessGate,
}

impl Drop for SharedGuard<'_> {
    fn drop(&mut self) {
        self.gate.leave_shared();
    }
}

/// Sole access for the guard's lifetime.
pub(crate) struct ExclusiveGuard<'a> {
    gate: &'a AccessGate,
    _serial: MutexGuard<'a, ()>,
}

impl Drop for ExclusiveGuard<'_> {
    fn drop(&mut self) {
        let _g = lock(&self.gate.sleep);
        self.gate.state.fetch_and(!EXCLUSIVE, Ordering::AcqRel);
        self.gate.changed.notify_all();
    }
}

/// Shared or sole access, as a write's range needs
/// (`LogicalUnit::write_access`). The guards are held, never read: their
/// drops are the point.
pub(crate) enum WriteGuard<'a> {
    Shared(#[allow(dead_code)] SharedGuard<'a>),
    Exclusive(#[allow(dead_code)] ExclusiveGuard<'a>),
}

/// Shared access that owns its gate: held by a command whose medium
/// access runs asynchronously, released when dropped.
pub struct SharedTicket {
    gate: Arc<dyn HasGate>,
}

/// What owns a gate (a logical unit), so a ticket can keep it alive.
pub(crate) trait HasGate: Send + Sync {
    fn gate(&self) -> &AccessGate;
}

impl SharedTicket {
    /// A ticket now, or `None` while an exclusive holder holds or waits.
    pub(crate) fn try_new(owner: Arc<dyn HasGate>) -> Option<SharedTicket> {
        // Built only once the hold is taken: its Drop releases one.
        if owner.gate().try_enter_shared() {
            Some(SharedTicket { gate: owner })
        } else {
            None
        }
    }
}

impl Drop for SharedTicket {
    fn drop(&mut self) {
        self.gate.gate().leave_shared();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::thread;
    use std::time::Duration;

    use super::*;

    struct Owner(AccessGate);
    impl HasGate for Owner {
        fn gate(&self) -> &AccessGate {
            &self.0
        }
    }

    #[test]
    fn shared_holders_coexist_and_exclusion_waits_for_them() {
        let owner = Arc::new(Owner(AccessGate::default()));
        let a = owner.0.shared();
        let t = SharedTicket::try_new(owner.clone()).unwrap();
        let entered = Arc::new(AtomicBool::new(false));
        let o2 = owner.clone();
        let e2 = entered.clone();
        let h = thread::spawn(move || {
            let _x = o2.0.exclusive();
            e2.store(true, Ordering::SeqCst);
        });
        // The exclusive holder waits: no new tickets meanwhile.
        while owner.0.state.load(Ordering::SeqCst) & EXCLUSIVE == 0 {
            thread::yield_now();
        }
        assert!(SharedTicket::try_new(owner.clone()).is_none());
        drop(a);
        thread::sleep(Duration::from_millis(20));
        assert!(!entered.load(Ordering::SeqCst), "entered past a ticket");
        drop(t);
        h.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        assert_eq!(owner.0.state.load(Ordering::SeqCst), 0);
        assert!(SharedTicket::try_new(owner.clone()).is_some());
    }

    #[test]
    fn a_refused_ticket_releases_nothing() {
        let owner = Arc::new(Owner(AccessGate::default()));
        let x = owner.0.exclusive();
        assert!(SharedTicket::try_new(owner.clone()).is_none());
        assert_eq!(owner.0.state.load(Ordering::SeqCst), EXCLUSIVE);
        drop(x);
        assert_eq!(owner.0.state.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn many_threads_never_overlap_an_exclusive_section() {
        let owner = Arc::new(Owner(AccessGate::default()));
        let inside = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..6)
            .map(|i| {
                let (o, inside) = (owner.clone(), inside.clone());
                thread::spawn(move || {
                    for _ in 0..2000 {
                        if i % 3 == 0 {
                            let _x = o.0.exclusive();
                            assert_eq!(inside.fetch_add(1000, Ordering::SeqCst), 0);
                            inside.fetch_sub(1000, Ordering::SeqCst);
                        } else {
                            let _s = o.0.shared();
                            assert!(inside.fetch_add(1, Ordering::SeqCst) < 1000);
                            inside.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(owner.0.state.load(Ordering::SeqCst), 0);
    }
}
