//! Stores whose requests complete asynchronously, by themselves (a
//! network store such as Ceph RBD): the driver starts a request and
//! awaits its future; the store's own completion wakes the task. No
//! thread waits for it, and nothing polls.
//!
//! Which commands take this path is the device's decision (the staged
//! READ, WRITE and SYNCHRONIZE CACHE, as for a ring); the other commands
//! reach the store through [`crate::Backend`]'s synchronous methods,
//! which such a store implements by waiting for the same futures
//! ([`block_on`]) on a thread where blocking is fine.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use bytes::Bytes;

use crate::ring::Request;

/// A request in flight: the bytes read, or nothing for writes and
/// flushes.
pub type MediumFuture = Pin<Box<dyn Future<Output = io::Result<Option<Bytes>>> + Send + 'static>>;

/// A store that runs [`Request`]s asynchronously.
pub trait AsyncMedium: Send + Sync {
    /// Starts `request` (already checked against the size by the
    /// device; checked again here). Dropping the future does not cancel
    /// the request: it runs to its end, with its buffers kept alive, so a
    /// caller that must know when the store is done with it (task
    /// management) awaits the future instead.
    fn start(&self, request: &Request) -> MediumFuture;
}

/// Waits for `fut` on this thread, parking it between wakeups. For the
/// synchronous methods of an asynchronous store: call it only where
/// blocking is fine (tokio's blocking pool, a plain thread).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// The size of a store that can change behind the target's back (an
/// RBD image resized in Ceph): [`SizeWatch::changed`] resolves with each
/// new size.
pub struct SizeWatch(tokio::sync::watch::Receiver<u64>);

impl SizeWatch {
    pub fn new(rx: tokio::sync::watch::Receiver<u64>) -> SizeWatch {
        SizeWatch(rx)
    }

    /// The next size; `None` once the store is gone.
    pub async fn changed(&mut self) -> Option<u64> {
        self.0.changed().await.ok()?;
        let size = *self.0.borrow_and_update();
        Some(size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_on_waits_for_a_wakeup_from_another_thread() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.send(7).unwrap();
        });
        assert_eq!(block_on(rx).unwrap(), 7);
        t.join().unwrap();
    }

    #[test]
    fn a_size_watch_ends_with_its_store() {
        let (tx, rx) = tokio::sync::watch::channel(10u64);
        let mut w = SizeWatch::new(rx);
        tx.send(20).unwrap();
        assert_eq!(block_on(w.changed()), Some(20));
        drop(tx);
        assert_eq!(block_on(w.changed()), None);
    }
}
