//! What a store has to tell the operator while it runs (an RBD client
//! fenced, reconnected, writes lost): this crate has no log and does not
//! know which target and LUN a store serves, so it queues the news and
//! the target, which knows both, logs it ([`Backend::events`]).
//!
//! [`Backend::events`]: crate::Backend::events

use std::sync::Mutex;

use tokio::sync::mpsc;

/// Most events held for a reader that is slow or absent; later ones are
/// dropped (they are log lines; the store's state does not depend on them).
pub const EVENT_BACKLOG: usize = 32;

/// How much an event matters, as a log level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One thing to log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreEvent {
    pub severity: Severity,
    pub message: String,
}

/// The store's side: queues events, never blocks.
pub(crate) struct EventQueue {
    tx: mpsc::Sender<StoreEvent>,
    rx: Mutex<Option<mpsc::Receiver<StoreEvent>>>,
}

impl EventQueue {
    pub(crate) fn new() -> EventQueue {
        let (tx, rx) = mpsc::channel(EVENT_BACKLOG);
        EventQueue {
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }

    /// Queues an event; dropped when [`EVENT_BACKLOG`] are waiting.
    pub(crate) fn send(&self, severity: Severity, message: String) {
        let _ = self.tx.try_send(StoreEvent { severity, message });
    }

    /// The reading end, once.
    pub(crate) fn take(&self) -> Option<StoreEvents> {
        let rx = self.rx.lock().unwrap_or_else(|p| p.into_inner()).take()?;
        Some(StoreEvents(rx))
    }
}

/// A store's events in the order they happened.
pub struct StoreEvents(mpsc::Receiver<StoreEvent>);

impl StoreEvents {
    /// The next event; `None` once the store is gone.
    pub async fn next(&mut self) -> Option<StoreEvent> {
        self.0.recv().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aio::block_on;

    #[test]
    fn events_are_read_once_in_order_and_bounded() {
        let q = EventQueue::new();
        for i in 0..EVENT_BACKLOG + 5 {
            q.send(Severity::Info, format!("event {i}"));
        }
        let mut events = q.take().unwrap();
        assert!(q.take().is_none(), "a second reader");
        for i in 0..EVENT_BACKLOG {
            let e = block_on(events.next()).unwrap();
            assert_eq!(e.message, format!("event {i}"));
        }
        drop(q);
        assert_eq!(block_on(events.next()), None, "the excess was dropped");
    }
}
