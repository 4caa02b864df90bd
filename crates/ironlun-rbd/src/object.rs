//! Single RADOS objects beside the images: small state several gateways
//! share (persistent reservations), updated by compare-and-swap on the
//! object's version and announced with watch/notify. Calls block: use
//! them off the async runtime.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::ffi_object::{ObjectIo, WatchReg};

pub use crate::ffi_object::{NotifyOutcome, WatchEvent, WriteOutcome};

/// The longest object name RADOS takes without complaint here (the OSDs'
/// `osd_max_object_name_len` is 2048 by default).
pub const MAX_OBJECT_NAME: usize = 1024;
/// The largest notify payload this crate sends.
pub const MAX_NOTIFY_PAYLOAD: usize = 4096;
/// Most watch events queued before the reader takes them (more set
/// [`ObjectWatch::take_lost`]).
pub const MAX_WATCH_EVENTS: usize = 256;

/// An object's contents and the version they were read at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned {
    pub data: Vec<u8>,
    pub version: u64,
}

/// One object of a pool (see [`crate::Pool::object`]). Cheap to clone.
#[derive(Clone)]
pub struct RadosObject {
    io: Arc<ObjectIo>,
}

impl std::fmt::Debug for RadosObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RadosObject({})", self.name())
    }
}

impl RadosObject {
    pub(crate) fn new(io: ObjectIo) -> RadosObject {
        RadosObject { io: Arc::new(io) }
    }

    /// The object's name.
    pub fn name(&self) -> String {
        self.io.oid().to_string_lossy().into_owned()
    }

    /// The whole object and its version, `None` when it does not exist.
    /// An object longer than `max` bytes is an error (EFBIG), never cut.
    pub fn read(&self, max: usize) -> Result<Option<Versioned>> {
        Ok(self
            .io
            .read(max)?
            .map(|(data, version)| Versioned { data, version }))
    }

    /// Replaces the object with `data` only if nobody wrote it since it
    /// was read at `version` (`None`: only if it does not exist yet):
    /// `rados_write_op_assert_version` or an exclusive create, then a
    /// full write, as one operation. [`WriteOutcome::Stale`] when the
    /// condition failed: read again and redo.
    pub fn write_if(&self, version: Option<u64>, data: &[u8]) -> Result<WriteOutcome> {
        self.io.write(version, data)
    }

    /// Notifies every watcher (this client's own included) and waits up
    /// to `timeout` for their acknowledgements.
    pub fn notify(&self, payload: &[u8], timeout: Duration) -> Result<NotifyOutcome> {
        if payload.len() > MAX_NOTIFY_PAYLOAD {
            return Err(Error::InvalidArgument(format!(
                "notify payload of {} bytes (at most {MAX_NOTIFY_PAYLOAD})",
                payload.len()
            )));
        }
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        self.io.notify(payload, ms)
    }

    /// Acknowledges a notification a watch of this object received.
    pub fn ack(&self, notify_id: u64, cookie: u64) -> Result<()> {
        self.io.ack(notify_id, cookie)
    }

    /// Starts watching the object (`rados_watch3`); the OSD drops the
    /// watch after `timeout` without hearing from this client. Blocks.
    pub fn watch(&self, timeout: Duration) -> Result<ObjectWatch> {
        let (tx, rx) = sync_channel(MAX_WATCH_EVENTS);
        let secs = u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX).max(1);
        let reg = self.io.watch(tx, secs)?;
        Ok(ObjectWatch { reg, rx })
    }
}

/// A watch on an object: its events, in order. Unwatched on drop.
pub struct ObjectWatch {
    // Field order: the registration goes (and its callbacks stop) before
    // the receiver.
    reg: WatchReg,
    rx: Receiver<WatchEvent>,
}

impl ObjectWatch {
    /// The next event, waiting up to `timeout`; `None` when none came.
    pub fn next(&self, timeout: Duration) -> Option<WatchEvent> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Whether events were dropped (more than [`MAX_WATCH_EVENTS`]
    /// waiting) since the last call: the reader may have missed a change.
    pub fn take_lost(&self) -> bool {
        self.reg.take_lost()
    }

    /// How long ago the OSD last confirmed the watch (`rados_watch_check`),
    /// or the error that ended it. A watch unconfirmed for longer than
    /// its timeout may have been dropped by the OSD: notifications may
    /// be missed, and no error callback comes while the cluster is
    /// unreachable altogether.
    pub fn confirmed_ago(&self) -> Result<Duration> {
        self.reg.check().map(Duration::from_millis)
    }

    /// This watch's cookie, as its notifications carry it.
    pub fn cookie(&self) -> u64 {
        self.reg.cookie()
    }
}

/// The counts of acknowledgements and timeouts in `rados_notify2`'s reply
/// buffer (librados.h: le32 num_acks, then per ack le64 gid, le64
/// cookie, le32 buflen and the payload; then le32 num_timeouts). `None`
/// when the buffer is not of that form.
pub(crate) fn notify_counts(reply: &[u8]) -> Option<(u32, u32)> {
    let mut at = 0usize;
    let le32 = |at: &mut usize| -> Option<u32> {
        let b = reply.get(*at..at.checked_add(4)?)?;
        *at += 4;
        Some(u32::from_le_bytes(b.try_into().ok()?))
    };
    let acks = le32(&mut at)?;
    for _ in 0..acks {
        at = at.checked_add(16)?;
        let len = le32(&mut at)?;
        at = at.checked_add(usize::try_from(len).ok()?)?;
        if at > reply.len() {
            return None;
        }
    }
    let timeouts = le32(&mut at)?;
    Some((acks, timeouts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(acks: &[&[u8]], timeouts: u32) -> Vec<u8> {
        let mut v = (acks.len() as u32).to_le_bytes().to_vec();
        for (i, payload) in acks.iter().enumerate() {
            v.extend_from_slice(&(4100 + i as u64).to_le_bytes());
            v.extend_from_slice(&7u64.to_le_bytes());
            v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
            v.extend_from_slice(payload);
        }
        v.extend_from_slice(&timeouts.to_le_bytes());
        for _ in 0..timeouts {
            v.extend_from_slice(&[0; 16]);
        }
        v
    }

    #[test]
    fn a_notify_reply_is_counted() {
        assert_eq!(notify_counts(&reply(&[], 0)), Some((0, 0)));
        assert_eq!(notify_counts(&reply(&[b"", b"ok"], 1)), Some((2, 1)));
    }

    #[test]
    fn a_short_or_lying_notify_reply_is_refused() {
        assert_eq!(notify_counts(&[]), None);
        let mut r = reply(&[b"abc"], 0);
        r.truncate(10);
        assert_eq!(notify_counts(&r), None);
        // Claims a payload far past the end.
        let mut lie = 1u32.to_le_bytes().to_vec();
        lie.extend_from_slice(&[0; 16]);
        lie.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(notify_counts(&lie), None);
        // Claims more acks than there are bytes.
        assert_eq!(notify_counts(&u32::MAX.to_le_bytes()), None);
    }
}
