//! What a connection reports as it happens, for the daemon's metrics: an
//! optional [`Observer`] the driver installs
//! ([`TargetConnection::set_observer`]). Only rare events are reported
//! here; per-command counts are the LUs' own (ironlun-scsi's `stats`).

use super::*;

/// Which digest a PDU failed (RFC 7143 §13.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DigestKind {
    Header,
    Data,
}

/// Told of a connection's events as they happen. Every method does
/// nothing unless implemented; calls come from the connection's own
/// thread, one at a time per connection, many connections at once.
pub trait Observer: Send + Sync {
    /// A task management response was queued (RFC 7143 §11.6).
    fn task_management(&self, _function: TmfFunction, _response: TmfResponse) {}
    /// `n` of this connection's tasks were aborted: by task management,
    /// this session's or another's (RFC 7143 §4.2.3.3), or by a logout
    /// that left writes without their data.
    fn tasks_aborted(&self, _n: usize) {}
    /// A PDU failed a digest check (the connection closes at ERL 0).
    fn digest_error(&self, _kind: DigestKind) {}
    /// The connection is closing, for this reason (reported once).
    fn closing(&self, _reason: &CloseReason) {}
}

impl TargetConnection {
    /// Reports this connection's events to `observer` from now on.
    pub fn set_observer(&mut self, observer: Arc<dyn Observer>) {
        self.observer = Some(observer);
    }

    pub(super) fn observe(&self, event: impl FnOnce(&dyn Observer)) {
        if let Some(o) = &self.observer {
            event(o.as_ref());
        }
    }
}
