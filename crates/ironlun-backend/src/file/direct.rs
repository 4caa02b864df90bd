//! Requests to a `,direct` store through its `O_DIRECT` descriptor alone,
//! whatever their alignment: one rule, that no page of the store is ever
//! touched through both descriptors.
//!
//! Mixing them is not safe under concurrency: a direct write invalidates
//! the page cache over its range, and where a concurrent buffered write
//! has that page dirty the invalidation fails ("Page cache invalidation
//! failure on direct I/O. Possible data corruption"), the page cache keeps
//! stale data that a later buffered read returns or writeback puts back
//! over the direct write, and the next fsync fails with EIO. So a range
//! not aligned to [`DIRECT_ALIGN`] is read through the direct descriptor
//! over the enclosing aligned range into an aligned bounce buffer, and
//! written as a read-modify-write of that range ([`write`]). The
//! read-modify-write must not race other requests to the same pages: the
//! store says so ([`crate::Backend::write_needs_exclusive`]) and the LU
//! runs such writes alone.
//!
//! One exception keeps the rule: a store whose size is not a multiple of
//! [`DIRECT_ALIGN`] ends in a partial page that no aligned range covers
//! ([`tail`]). Only the buffered descriptor touches that page, so it too
//! is never touched both ways.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use bytes::Bytes;

use crate::aligned::{buffer_aligned, DIRECT_ALIGN};
use crate::pool::PooledBuf;

const ALIGN: u64 = DIRECT_ALIGN as u64;

/// Where a store of `size` bytes stops being served through the direct
/// descriptor: the end of its last whole aligned page.
pub(super) fn tail(size: u64) -> u64 {
    size / ALIGN * ALIGN
}

/// The aligned range enclosing `[offset, offset + len)`.
fn enclosing(offset: u64, len: u64) -> (u64, u64) {
    let start = offset / ALIGN * ALIGN;
    let end = (offset + len).div_ceil(ALIGN) * ALIGN;
    (start, end)
}

/// Reads `len` bytes at `offset` through `file` (opened `O_DIRECT`); the
/// enclosing aligned range must lie inside the file ([`tail`]). An
/// unaligned range is a slice of the aligned read (no copy).
pub(super) fn read(file: &File, offset: u64, len: usize) -> io::Result<Bytes> {
    let (start, end) = enclosing(offset, len as u64);
    let mut buf = PooledBuf::get_aligned(span(start, end)?)?;
    file.read_exact_at(buf.as_mut_slice(), start)?;
    let head = span(start, offset)?;
    Ok(buf.freeze().slice(head..head + len))
}

/// Writes `parts`, `total` bytes, one after another from `offset` through
/// `file` (opened `O_DIRECT`). An aligned range goes as it is (gathered
/// into one aligned buffer unless it is one already); an unaligned one is
/// a read-modify-write of its enclosing aligned range: the partial first
/// and last pages are read, the data copied over them, and the range
/// written whole. The caller keeps other requests off those pages
/// meanwhile (see the module docs).
pub(super) fn write(
    file: &File,
    offset: u64,
    parts: &[&[u8]],
    total: usize,
    durable: bool,
) -> io::Result<()> {
    let (start, end) = enclosing(offset, total as u64);
    let stop = offset + total as u64;
    if start == offset && end == stop {
        if let [one] = parts {
            if buffer_aligned(one.as_ptr(), one.len()) {
                return super::pwritev_all(file, parts, offset, durable);
            }
        }
    }
    let mut buf = PooledBuf::get_aligned(span(start, end)?)?;
    let page = buf.as_mut_slice();
    if offset != start {
        read_page(file, page, 0, start)?;
    }
    let last = end - ALIGN;
    // Unless the first page, already read, is the last.
    if stop != end && (last != start || offset == start) {
        read_page(file, page, span(start, last)?, last)?;
    }
    let mut at = span(start, offset)?;
    for p in parts {
        page.get_mut(at..at + p.len())
            .ok_or_else(|| io::Error::other("parts longer than their total"))?
            .copy_from_slice(p);
        at += p.len();
    }
    super::pwritev_all(file, &[buf.as_ref()], start, durable)
}

/// Reads the aligned page at `offset` into `buf` from byte `at`.
fn read_page(file: &File, buf: &mut [u8], at: usize, offset: u64) -> io::Result<()> {
    let dst = buf
        .get_mut(at..at + DIRECT_ALIGN)
        .ok_or_else(|| io::Error::other("page outside the bounce buffer"))?;
    file.read_exact_at(dst, offset)
}

/// `to - from` as a buffer length.
fn span(from: u64, to: u64) -> io::Result<usize> {
    usize::try_from(to - from).map_err(|_| io::Error::other("range too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enclosing_ranges_and_the_tail() {
        assert_eq!(enclosing(0, 4096), (0, 4096));
        assert_eq!(enclosing(512, 4096), (0, 8192));
        assert_eq!(enclosing(4096, 512), (4096, 8192));
        assert_eq!(enclosing(7680, 512), (4096, 8192));
        assert_eq!(tail(1 << 20), 1 << 20);
        assert_eq!(tail((1 << 20) + 512), 1 << 20);
    }
}
