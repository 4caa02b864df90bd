//! A backend double with injected faults, so that error paths (MEDIUM
//! ERROR sense, failed flushes) are exercised on purpose.

use std::io;
use std::sync::Mutex;

use bytes::Bytes;

use crate::Backend;

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
}

/// Wraps a backend and fails the operations `faults` names.
pub struct FaultyBackend<B> {
    inner: B,
    faults: Mutex<Faults>,
}

impl<B: Backend> FaultyBackend<B> {
    pub fn new(inner: B) -> Self {
        FaultyBackend {
            inner,
            faults: Mutex::new(Faults::default()),
        }
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

fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} fault"))
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
        if Self::hits(&self.faults().read, offset, len) {
            return Err(injected("read"));
        }
        self.inner.read(offset, len)
    }

    fn write(&self, offset: u64, data: &[u8], durable: bool) -> io::Result<()> {
        let f = self.faults();
        if Self::hits(&f.write, offset, data.len()) {
            return Err(if f.no_space {
                io::Error::from_raw_os_error(ENOSPC)
            } else {
                injected("write")
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
                injected("flush")
            });
        }
        self.inner.flush()
    }

    fn may_block(&self) -> bool {
        self.inner.may_block()
    }

    fn copies_data(&self) -> bool {
        self.inner.copies_data()
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
        });
        assert!(b.read(0, 4096).is_ok());
        assert!(b.read(4000, 200).is_err());
        assert!(b.read(8192, 10).is_ok());
        assert!(b.write(4096, &[1], false).is_ok());
        assert!(b.flush().is_err());
    }
}
