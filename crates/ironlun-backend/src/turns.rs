//! [`Turns`]: at most a few threads at a time in a section; the others
//! sleep until one leaves.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// A counting limit on threads inside a section.
pub struct Turns {
    limit: usize,
    inside: Mutex<usize>,
    left: Condvar,
}

/// One thread's place in the section, given back when dropped.
pub struct Turn<'a> {
    turns: &'a Turns,
}

impl Turns {
    /// At most `limit` (at least one) threads inside at once.
    pub fn new(limit: usize) -> Turns {
        Turns {
            limit: limit.max(1),
            inside: Mutex::new(0),
            left: Condvar::new(),
        }
    }

    fn count(&self) -> MutexGuard<'_, usize> {
        // The count is only ever left consistent: a poisoned lock is used.
        self.inside.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a place in the section.
    pub fn enter(&self) -> Turn<'_> {
        let mut n = self.count();
        while *n >= self.limit {
            n = self.left.wait(n).unwrap_or_else(PoisonError::into_inner);
        }
        *n = n.saturating_add(1);
        Turn { turns: self }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut n = self.turns.count();
        *n = n.saturating_sub(1);
        drop(n);
        self.turns.left.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn never_more_than_the_limit_inside() {
        let t = Arc::new(Turns::new(2));
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..6)
            .map(|_| {
                let (t, inside, most) = (t.clone(), inside.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        let _turn = t.enter();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(most.load(Ordering::SeqCst) <= 2);
        assert_eq!(*t.count(), 0);
    }
}
