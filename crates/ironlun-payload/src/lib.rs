//! # ironlun-payload: a command's data on its way to and from an initiator
//!
//! **Owns:** [`DataOutBuffer`], the data an initiator sent for a command, kept
//! in the pieces the PDUs carried so that a write reaches the backend
//! without being joined; and [`Payload`], the data of a command's response as it travels
//! from a backend through the SCSI device and the iSCSI layers to the
//! socket: either bytes in memory ([`Bytes`], shared, never copied), or a
//! [`FileRange`] of an open file whose bytes stay in the kernel's page
//! cache until the driver hands the range to the socket with `sendfile`,
//! so user space never copies them.
//!
//! **Must not know:** iSCSI, SCSI, sockets, backends. It reads a file
//! range into memory only when asked ([`Payload::to_bytes`]), for a
//! consumer that needs the bytes themselves (a data digest, a test).
//!
//! ## When a file range's bytes are taken
//!
//! The bytes of a [`FileRange`] are whatever the file holds when they are
//! sent, not when the range was made. For a READ that is still inside the
//! command's lifetime: the status follows the data on the same connection,
//! so the initiator cannot see the status before the data was taken, and
//! a write that overlaps the read and completes meanwhile was concurrent
//! with it (SAM-5 §8.6: overlapping commands with SIMPLE attributes may be
//! executed in any order). What a sender must not do is compute a digest
//! over one read of the range and send another: a data digest needs the
//! bytes in memory first.

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::fmt;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

mod data_out;
pub use data_out::{DataOutBuffer, Slices};

/// A range of an open file, sent from the page cache.
#[derive(Clone)]
pub struct FileRange {
    file: Arc<File>,
    offset: u64,
    len: usize,
}

impl FileRange {
    pub fn new(file: Arc<File>, offset: u64, len: usize) -> FileRange {
        FileRange { file, offset, len }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The range without its first `n` bytes (at most all of them).
    pub fn advance(&mut self, n: usize) {
        let n = n.min(self.len);
        self.offset += n as u64;
        self.len -= n;
    }

    /// Reads the range into memory. Bytes past the end of the file (a file
    /// shrunk behind the target's back) read as zeros, as a sender fills
    /// them (see [`FILL`]).
    pub fn read(&self) -> io::Result<Bytes> {
        let mut buf = BytesMut::zeroed(self.len);
        let mut done = 0usize;
        while let Some(rest) = buf.get_mut(done..).filter(|r| !r.is_empty()) {
            match self.file.read_at(rest, self.offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(buf.freeze())
    }
}

/// What a sender sends for bytes of a [`FileRange`] the file no longer
/// has: zeros, up to this many per call.
pub static FILL: [u8; 4096] = [0; 4096];

impl fmt::Debug for FileRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileRange")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl PartialEq for FileRange {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.file, &other.file) && self.offset == other.offset && self.len == other.len
    }
}

impl Eq for FileRange {}

/// Data to send: in memory, or in a file.
#[derive(Clone, PartialEq, Eq)]
pub enum Payload {
    Mem(Bytes),
    File(FileRange),
}

impl Default for Payload {
    fn default() -> Self {
        Payload::Mem(Bytes::new())
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Payload::Mem(b) => b.fmt(f),
            Payload::File(r) => r.fmt(f),
        }
    }
}

impl From<Bytes> for Payload {
    fn from(b: Bytes) -> Self {
        Payload::Mem(b)
    }
}

impl From<Vec<u8>> for Payload {
    fn from(v: Vec<u8>) -> Self {
        Payload::Mem(Bytes::from(v))
    }
}

impl From<&'static [u8]> for Payload {
    fn from(s: &'static [u8]) -> Self {
        Payload::Mem(Bytes::from_static(s))
    }
}

impl From<FileRange> for Payload {
    fn from(r: FileRange) -> Self {
        Payload::File(r)
    }
}

impl Payload {
    pub fn len(&self) -> usize {
        match self {
            Payload::Mem(b) => b.len(),
            Payload::File(r) => r.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, when they are in memory.
    pub fn as_mem(&self) -> Option<&Bytes> {
        match self {
            Payload::Mem(b) => Some(b),
            Payload::File(_) => None,
        }
    }

    /// A part of the payload. Bounds beyond the end are clamped, and an
    /// inverted range is empty: callers slice by lengths they computed,
    /// and a slip there must not panic the target.
    pub fn slice(&self, range: Range<usize>) -> Payload {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        match self {
            Payload::Mem(b) => Payload::Mem(b.slice(start..end)),
            Payload::File(r) => Payload::File(FileRange {
                file: r.file.clone(),
                offset: r.offset + start as u64,
                len: end - start,
            }),
        }
    }

    /// Keeps the first `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        match self {
            Payload::Mem(b) => b.truncate(len),
            Payload::File(r) => r.len = r.len.min(len),
        }
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// The bytes in memory: shared when they already are, read from the
    /// file otherwise.
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        match self {
            Payload::Mem(b) => Ok(b.clone()),
            Payload::File(r) => r.read(),
        }
    }

    /// Moves a file range's bytes into memory; memory stays as it is.
    pub fn into_mem(self) -> io::Result<Payload> {
        match self {
            Payload::Mem(_) => Ok(self),
            Payload::File(r) => r.read().map(Payload::Mem),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(data: &[u8]) -> Arc<File> {
        let mut f = tempfile_in_tmp();
        f.write_all(data).unwrap();
        Arc::new(f)
    }

    fn tempfile_in_tmp() -> File {
        let path = std::env::temp_dir().join(format!(
            "ironlun-payload-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }

    #[test]
    fn slices_of_a_file_range_read_what_the_file_holds_there() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let p = Payload::File(FileRange::new(file_with(&data), 100, 5000));
        assert_eq!(p.len(), 5000);
        assert_eq!(p.to_bytes().unwrap(), data[100..5100]);
        let s = p.slice(1000..3000);
        assert_eq!(s.to_bytes().unwrap(), data[1100..3100]);
        // Clamped, never a panic.
        assert_eq!(p.slice(4000..9000).len(), 1000);
        let (from, to) = (7000, 6000);
        assert!(p.slice(from..to).is_empty());
        let mut t = p.clone();
        t.truncate(10);
        assert_eq!(t.to_bytes().unwrap(), data[100..110]);
        let mut r = FileRange::new(file_with(&data), 0, 100);
        r.advance(40);
        assert_eq!((r.offset(), r.len()), (40, 60));
    }

    #[test]
    fn bytes_past_the_end_of_a_shrunk_file_read_as_zeros() {
        let p = Payload::File(FileRange::new(file_with(b"abc"), 1, 6));
        assert_eq!(&p.to_bytes().unwrap()[..], b"bc\0\0\0\0");
    }

    #[test]
    fn memory_payloads_slice_like_bytes() {
        let p = Payload::from(b"hello world".to_vec());
        assert_eq!(p.slice(6..11), Payload::from(&b"world"[..]));
        assert_eq!(p.slice(6..99).len(), 5);
        assert_eq!(p.as_mem().map(|b| b.len()), Some(11));
        assert_eq!(p.clone().into_mem().unwrap(), p);
    }
}
