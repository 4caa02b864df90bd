//! Where a run's completions come from: the initiator's sessions,
//! through the run's completion channel, and the local engine when the
//! targets are local files or devices (io_uring's are reaped here;
//! psync's threads send theirs to the same channel).

use std::collections::VecDeque;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::issuer::Completion;
use super::{LunTarget, Path};
use crate::local::{Driver, LocalIo};

pub(super) struct Sources {
    pub(super) tx: mpsc::UnboundedSender<Completion>,
    rx: mpsc::UnboundedReceiver<Completion>,
    local: Option<Driver>,
    /// Completions reaped from the ring and not yet taken.
    reaped: VecDeque<Completion>,
}

impl Sources {
    /// The sources of a run over `targets` with `slots` I/Os in flight
    /// of at most `max_len` bytes, local writes from `payload`.
    pub(super) fn new(
        targets: &[LunTarget],
        slots: usize,
        max_len: usize,
        payload: &Bytes,
    ) -> Result<Sources, String> {
        let (tx, rx) = mpsc::unbounded_channel();
        let engine = targets.iter().find_map(|t| match &t.path {
            Path::Local(d) => Some(d.engine),
            _ => None,
        });
        let local = match engine {
            Some(e) => Some(Driver::new(e, slots, max_len, payload, &tx)?),
            None => None,
        };
        Ok(Sources {
            tx,
            rx,
            local,
            reaped: VecDeque::with_capacity(slots),
        })
    }

    pub(super) fn submit_local(&mut self, io: LocalIo) -> Result<(), String> {
        match &mut self.local {
            Some(d) => d.submit(io),
            None => Err("a local target without a local engine".into()),
        }
    }

    /// Hands queued local I/O to the kernel.
    pub(super) fn flush(&mut self) -> Result<(), String> {
        match &mut self.local {
            Some(d) => d.flush(),
            None => Ok(()),
        }
    }

    /// A completion that has already arrived, if any.
    pub(super) fn try_next(&mut self) -> Option<Completion> {
        if let Some(c) = self.reaped.pop_front() {
            return Some(c);
        }
        if let Some(d) = &mut self.local {
            d.reap(&mut self.reaped);
            if let Some(c) = self.reaped.pop_front() {
                return Some(c);
            }
        }
        self.rx.try_recv().ok()
    }

    /// The next completion (`None`: no source can deliver one).
    pub(super) async fn recv(&mut self) -> Option<Completion> {
        loop {
            if let Some(c) = self.try_next() {
                return Some(c);
            }
            let Sources { rx, local, .. } = self;
            match local {
                Some(d) => {
                    tokio::select! {
                        biased;
                        v = rx.recv() => return v,
                        r = d.ready() => {
                            if let Err(e) = r {
                                tracing::warn!("local engine: {e}");
                                return None;
                            }
                        }
                    }
                }
                None => return rx.recv().await,
            }
        }
    }
}
