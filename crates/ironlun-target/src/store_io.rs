//! A connection's commands waiting on a store's own asynchronous path
//! (RBD), polled by the connection's task itself.
//!
//! Each access is a future that librbd's completion callback wakes. Held
//! here, in one `FuturesUnordered`, that wake reaches the connection's
//! task directly: no task is spawned per command, and no channel carries
//! the result back (a spawned task cost an allocation, a scheduling and a
//! second wake per command; docs/performance.md, RBD section).
//!
//! A command stays in flight until its store is done with it (its
//! [`Staged`] holds the LU's ticket until then): when the connection
//! gives up waiting, or is dropped with accesses still running, they are
//! handed to a task of their own that finishes them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use ironlun_backend::aio::MediumFuture;
use ironlun_target_core::{Done, Staged};

/// One command's access, finished into its [`Done`] when the store
/// completes it.
struct StoreIo {
    staged: Option<Staged>,
    io: MediumFuture,
}

impl Future for StoreIo {
    type Output = Done;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Done> {
        let this = self.get_mut();
        let outcome = std::task::ready!(this.io.as_mut().poll(cx));
        match this.staged.take() {
            Some(staged) => Poll::Ready(staged.finish(outcome)),
            // Polled again after it finished: FuturesUnordered never does.
            None => Poll::Pending,
        }
    }
}

/// The accesses in flight on one connection.
#[derive(Default)]
pub(crate) struct StoreIos {
    set: FuturesUnordered<StoreIo>,
}

impl StoreIos {
    /// Adds a started access; its outcome finishes `staged`.
    pub(crate) fn push(&mut self, staged: Staged, io: MediumFuture) {
        self.set.push(StoreIo {
            staged: Some(staged),
            io,
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The next finished command (pending forever while none is in
    /// flight: guard a `select!` branch with [`StoreIos::is_empty`]).
    pub(crate) async fn next(&mut self) -> Done {
        match self.set.next().await {
            Some(done) => done,
            None => std::future::pending().await,
        }
    }

    /// A command that has finished already, without waiting.
    pub(crate) fn ready(&mut self) -> Option<Done> {
        self.set.next().now_or_never().flatten()
    }

    /// Lets a task of its own finish what is still in flight (the
    /// results are dropped: the connection is gone). Outside a runtime
    /// the accesses are dropped; their stores keep their buffers until
    /// they complete (ironlun-rbd's `AioState`).
    pub(crate) fn abandon(&mut self) {
        if self.set.is_empty() {
            return;
        }
        let mut set = std::mem::take(&mut self.set);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { while set.next().await.is_some() {} });
        }
    }
}

impl Drop for StoreIos {
    fn drop(&mut self) {
        self.abandon();
    }
}
