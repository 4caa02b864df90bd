//! `null`: reads return zeros without touching memory, writes are dropped
//! (the NULLIO backend of the published target comparisons).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::{check_range, zeros, Backend};

pub struct NullBackend {
    size: AtomicU64,
}

impl NullBackend {
    pub fn new(size: u64) -> Self {
        NullBackend {
            size: AtomicU64::new(size),
        }
    }

    fn size(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }
}

impl Backend for NullBackend {
    fn kind(&self) -> &'static str {
        "null"
    }

    fn size_bytes(&self) -> u64 {
        self.size()
    }

    fn resize(&self, bytes: u64) -> io::Result<()> {
        self.size.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        check_range(offset, len, self.size())?;
        Ok(zeros(len))
    }

    fn write(&self, offset: u64, data: &[u8], _durable: bool) -> io::Result<()> {
        check_range(offset, data.len(), self.size())
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn may_block(&self) -> bool {
        false
    }

    fn copies_data(&self) -> bool {
        false
    }

    fn provisioning_granularity(&self) -> u64 {
        4096
    }

    /// Nothing is ever stored.
    fn deallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        check_range(offset, 0, self.size())?;
        check_range(offset + len, 0, self.size())
    }

    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<crate::Extent>> {
        check_range(offset, 0, self.size())?;
        Ok(vec![crate::Extent {
            len,
            allocated: false,
        }])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_zeros_and_drops_writes() {
        let b = NullBackend::new(1 << 20);
        b.write(0, &[1, 2, 3], false).unwrap();
        assert_eq!(&b.read(0, 3).unwrap()[..], &[0, 0, 0]);
        assert!(b.read((1 << 20) - 1, 2).is_err());
        assert!(b.write(1 << 20, &[1], false).is_err());
    }
}
