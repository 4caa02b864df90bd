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
//!
//! Shared holders count themselves in their thread's shard
//! (crate::shard), so that reads on many cores do not all write one
//! atomic; an exclusive holder sets its flag, then waits until every
//! shard reads zero. Both sides write with `SeqCst` and then read the
//! other side's word (a sharer: its shard, then the flag; an exclusive
//! holder: the flag, then the shards), so in the single total order of
//! `SeqCst` operations at least one of them sees the other: a sharer that
//! missed the flag is seen in its shard, and one that saw it steps back.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::shard::{self, Padded};

pub(crate) struct AccessGate {
    /// Set while an exclusive holder holds or waits.
    exclusive_wanted: AtomicBool,
    /// Shared holders, by the shard of the thread that entered.
    holders: Box<[Padded<AtomicUsize>]>,
    /// Serialises exclusive holders (held for their whole section).
    exclusive: Mutex<()>,
    /// Waiters sleep on `changed` under `sleep`.
    sleep: Mutex<()>,
    changed: Condvar,
}

impl Default for AccessGate {
    fn default() -> Self {
        AccessGate {
            exclusive_wanted: AtomicBool::new(false),
            holders: shard::new_set(),
            exclusive: Mutex::new(()),
            sleep: Mutex::new(()),
            changed: Condvar::new(),
        }
    }
}

fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the caller already holds the gate's `sleep` lock.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sleep {
    Held,
    NotHeld,
}

impl AccessGate {
    /// A shared hold now, counted in the returned shard, or `None` while
    /// an exclusive holder holds or waits.
    fn try_enter_shared(&self, sleep: Sleep) -> Option<usize> {
        // Checked first so that sharers waiting out an exclusive holder
        // do not count themselves in and out (each step back wakes the
        // sleepers, which would wake each other in turn).
        if self.exclusive_wanted.load(Ordering::SeqCst) {
            return None;
        }
        let i = shard::index();
        let slot = &self.holders.get(i)?.0;
        // A count reaching usize::MAX guards in one shard is refused
        // like an exclusive holder.
        if slot.fetch_add(1, Ordering::SeqCst) == usize::MAX - 1 {
            self.leave_shared(i, sleep);
            return None;
        }
        if self.exclusive_wanted.load(Ordering::SeqCst) {
            // Step back: the exclusive holder may have seen this hold.
            self.leave_shared(i, sleep);
            return None;
        }
        Some(i)
    }

    /// Ends a hold counted in shard `i`; wakes a waiting exclusive
    /// holder, which counts the shards again.
    fn leave_shared(&self, i: usize, sleep: Sleep) {
        if let Some(slot) = self.holders.get(i) {
            slot.0.fetch_sub(1, Ordering::SeqCst);
        }
        if self.exclusive_wanted.load(Ordering::SeqCst) {
            // Under the lock, so a waiter between its count and its wait
            // cannot miss this.
            let _g = (sleep == Sleep::NotHeld).then(|| lock(&self.sleep));
            self.changed.notify_all();
        }
    }

    /// Whether no shared holder holds.
    fn no_sharers(&self) -> bool {
        self.holders.iter().all(|h| h.0.load(Ordering::SeqCst) == 0)
    }

    /// Shared access, waiting while an exclusive holder holds or waits.
    pub(crate) fn shared(&self) -> SharedGuard<'_> {
        let shard = match self.try_enter_shared(Sleep::NotHeld) {
            Some(i) => i,
            None => {
                let mut g = lock(&self.sleep);
                loop {
                    if let Some(i) = self.try_enter_shared(Sleep::Held) {
                        break i;
                    }
                    g = self.changed.wait(g).unwrap_or_else(|e| e.into_inner());
                }
            }
        };
        SharedGuard { gate: self, shard }
    }

    /// Sole access, waiting for shared holders to leave.
    pub(crate) fn exclusive(&self) -> ExclusiveGuard<'_> {
        let serial = lock(&self.exclusive);
        self.exclusive_wanted.store(true, Ordering::SeqCst);
        let mut g = lock(&self.sleep);
        while !self.no_sharers() {
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
    /// Where the hold is counted.
    shard: usize,
}

impl Drop for SharedGuard<'_> {
    fn drop(&mut self) {
        self.gate.leave_shared(self.shard, Sleep::NotHeld);
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
        self.gate.exclusive_wanted.store(false, Ordering::SeqCst);
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
    /// Where the hold is counted (a ticket may be dropped on another
    /// thread than the one that took it).
    shard: usize,
}

/// What owns a gate (a logical unit), so a ticket can keep it alive.
pub(crate) trait HasGate: Send + Sync {
    fn gate(&self) -> &AccessGate;
}

impl SharedTicket {
    /// A ticket now, or `None` while an exclusive holder holds or waits.
    pub(crate) fn try_new(owner: Arc<dyn HasGate>) -> Option<SharedTicket> {
        // Built only once the hold is taken: its Drop releases one.
        let shard = owner.gate().try_enter_shared(Sleep::NotHeld)?;
        Some(SharedTicket { gate: owner, shard })
    }
}

impl Drop for SharedTicket {
    fn drop(&mut self) {
        self.gate.gate().leave_shared(self.shard, Sleep::NotHeld);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::thread;
    use std::time::Duration;

    use super::*;

    struct Owner(AccessGate);

    fn idle(g: &AccessGate) -> bool {
        !g.exclusive_wanted.load(Ordering::SeqCst) && g.no_sharers()
    }
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
        while !owner.0.exclusive_wanted.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        assert!(SharedTicket::try_new(owner.clone()).is_none());
        drop(a);
        thread::sleep(Duration::from_millis(20));
        assert!(!entered.load(Ordering::SeqCst), "entered past a ticket");
        drop(t);
        h.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        assert!(idle(&owner.0));
        assert!(SharedTicket::try_new(owner.clone()).is_some());
    }

    #[test]
    fn a_refused_ticket_releases_nothing() {
        let owner = Arc::new(Owner(AccessGate::default()));
        let x = owner.0.exclusive();
        assert!(SharedTicket::try_new(owner.clone()).is_none());
        assert!(owner.0.exclusive_wanted.load(Ordering::SeqCst) && owner.0.no_sharers());
        drop(x);
        assert!(idle(&owner.0));
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
        assert!(idle(&owner.0));
    }

    #[test]
    fn a_ticket_dropped_on_another_thread_releases_where_it_was_counted() {
        let owner = Arc::new(Owner(AccessGate::default()));
        let t = SharedTicket::try_new(owner.clone()).unwrap();
        let shard = t.shard;
        // The dropping thread may have another shard than the taker.
        thread::spawn(move || drop(t)).join().unwrap();
        assert!(idle(&owner.0), "shard {shard} still counts a holder");
        drop(owner.0.exclusive());
    }
}
