//! A backend double with injected faults, so that error paths (MEDIUM
//! ERROR sense, failed flushes) are exercised on purpose, and with the
//! space its file system has left set by the test (thin provisioning
//! thresholds). [`record`]: a store that writes down every request made
//! of it, for tests of durability.

use std::io;
use std::sync::Mutex;

use bytes::Bytes;

use crate::{Backend, Fault};

pub mod record;

/// Which operations fail, over which byte range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Reads overlapping this range fail.
    pub read: Option<std::ops::Range<u64>>,
    /// Writes overlapping this range fail.
    pub write: Option<std::ops::Range<u64>>,
    pub flush: bool,
    /// The file system is full: failing writes and flushes report ENOSPC
    /// (as Linux numbers it) instead of an I/O error.
    pub no_space: bool,
    /// The failing operations report this store condition instead (an
    /// RBD LU fenced, writes lost); with [`Fault::Fenced`] the store is
    /// not [ready](Backend::ready) either.
    pub raise: Option<Fault>,
}

/// What [`Backend::free_bytes`] and [`Backend::used_bytes`] report
/// instead of the wrapped store's answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Space {
    free: Option<u64>,
    used: Option<u64>,
}

/// Wraps a backend and fails the operations `faults` names; everything
/// else, thin provisioning included, is the wrapped store's.
pub struct FaultyBackend<B> {
    inner: B,
    faults: Mutex<Faults>,
    space: Mutex<Space>,
    /// What [`Backend::physical_block_size`] reports instead of the
    /// wrapped store's answer.
    physical: Option<u32>,
    /// Says it may block whatever the wrapped store says (a network
    /// store's double).
    blocks: bool,
}

impl<B: Backend> FaultyBackend<B> {
    pub fn new(inner: B) -> Self {
        FaultyBackend {
            inner,
            faults: Mutex::new(Faults::default()),
            space: Mutex::new(Space::default()),
            physical: None,
            blocks: false,
        }
    }

    /// As [`FaultyBackend::new`], saying it may block
    /// ([`Backend::may_block`]) as a network store does.
    pub fn blocking(inner: B) -> Self {
        FaultyBackend {
            blocks: true,
            ..FaultyBackend::new(inner)
        }
    }

    /// The store reports `bytes` as its physical block
    /// ([`Backend::physical_block_size`]).
    pub fn with_physical_block(mut self, bytes: u32) -> Self {
        self.physical = Some(bytes);
        self
    }

    /// The space the file system has left, as [`Backend::free_bytes`]
    /// will report it (`None`: the wrapped store's answer).
    pub fn set_free_bytes(&self, free: Option<u64>) {
        self.space_mut().free = free;
    }

    /// What [`Backend::used_bytes`] will report (`None`: the wrapped
    /// store's answer).
    pub fn set_used_bytes(&self, used: Option<u64>) {
        self.space_mut().used = used;
    }

    fn space_mut(&self) -> std::sync::MutexGuard<'_, Space> {
        self.space.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_faults(&self, f: Faults) {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner()) = f;
    }

    fn hits(range: &Option<std::ops::Range<u64>>, offset: u64, len: usize) -> bool {
        range
            .as_ref()
            .is_some_and(|r| offset < r.end && offset + len as u64 > r.start)
    }

    fn faults(&self) -> Faults {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn injected(what: &str, raise: Option<Fault>) -> io::Error {
    match raise {
        Some(f) => f.into(),
        None => io::Error::other(format!("injected {what} fault")),
    }
}

/// ENOSPC on Linux.
const ENOSPC: i32 = 28;

impl<B: Backend> Backend for FaultyBackend<B> {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let f = self.faults();
        if Self::hits(&f.read, offset, len) {
            return Err(injected("read", f.raise));
        }
        self.inner.read(offset, len)
    }

    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()> {
        let f = self.faults();
        if Self::hits(&f.write, offset, data.len()) {
            return Err(if f.no_space {
                io::Error::from_raw_os_error(ENOSPC)
            } else {
                injected("write", f.raise)
            });
        }
        self.inner.write(offset, data, durable)
    }

    fn flush(&self) -> io::Result<()> {
        let f = self.faults();
        if f.flush {
            return Err(if f.no_space {
                io::Error::from_raw_os_error(ENOSPC)
            } else {
                injected("flush", f.raise)
            });
        }
        self.inner.flush()
    }

    fn write_needs_exclusive(&self, offset: u64, len: u64) -> bool {
        self.inner.write_needs_exclusive(offset, len)
    }

    fn may_block(&self) -> bool {
        self.blocks || self.inner.may_block()
    }

    fn ready(&self) -> io::Result<()> {
        match self.faults().raise {
            Some(Fault::Fenced) => Err(Fault::Fenced.into()),
            _ => self.inner.ready(),
        }
    }

    fn copies_data(&self) -> bool {
        self.inner.copies_data()
    }

    fn reports_lost_writes(&self) -> bool {
        self.inner.reports_lost_writes()
    }

    fn free_bytes(&self) -> Option<u64> {
        let set = self.space_mut().free;
        set.or_else(|| self.inner.free_bytes())
    }

    fn used_bytes(&self) -> Option<u64> {
        let set = self.space_mut().used;
        set.or_else(|| self.inner.used_bytes())
    }

    fn provisioning_granularity(&self) -> u64 {
        self.inner.provisioning_granularity()
    }

    fn physical_block_size(&self) -> Option<u32> {
        self.physical.or_else(|| self.inner.physical_block_size())
    }

    fn deallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.deallocate(offset, len)
    }

    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<crate::Extent>> {
        self.inner.allocation(offset, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RamBackend;

    #[test]
    fn faults_hit_only_their_range() {
        let b = FaultyBackend::new(RamBackend::new(1 << 16));
        b.set_faults(Faults {
            read: Some(4096..8192),
            write: None,
            flush: true,
            no_space: false,
            raise: None,
        });
        assert!(b.read(0, 4096).is_ok());
        assert!(b.read(4000, 200).is_err());
        assert!(b.read(8192, 10).is_ok());
        assert!(b.write(4096, &[1], false).is_ok());
        assert!(b.flush().is_err());
    }

    #[test]
    fn space_is_the_inner_stores_until_set() {
        let b = FaultyBackend::new(RamBackend::new(1 << 20));
        assert_eq!(b.free_bytes(), None, "RAM has no file system");
        assert_eq!(b.used_bytes(), Some(0));
        assert_eq!(b.provisioning_granularity(), 64 << 10);
        b.write(0, &[1; 4096], false).unwrap();
        assert_eq!(b.used_bytes(), Some(64 << 10), "one RAM chunk");
        b.set_free_bytes(Some(12345));
        b.set_used_bytes(Some(7));
        assert_eq!((b.free_bytes(), b.used_bytes()), (Some(12345), Some(7)));
        b.set_used_bytes(None);
        assert_eq!(b.used_bytes(), Some(64 << 10));
        b.deallocate(0, 64 << 10).unwrap();
        assert_eq!(b.used_bytes(), Some(0), "deallocation reaches the store");
    }
}
