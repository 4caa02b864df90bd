//! [`AlignedBuf`]: heap memory aligned for `O_DIRECT`, and for large
//! buffers, physically contiguous where the kernel can make it so.
//!
//! ## Why huge pages
//!
//! A direct read or write of 512 KiB into ordinary memory is 128 scattered
//! 4 KiB pages: 128 segments for the block layer and as many descriptors on
//! a virtio queue. On the development VM (a virtio disk without indirect
//! descriptors) that let one such request into the device at a time, and
//! merged queued ones into a few large requests: 512 KiB sequential reads
//! through io_uring at QD 8 ran at 585–687 MB/s, where fio, whose buffers
//! happened to be physically contiguous, ran at 2.3–2.6 GB/s. The same
//! reads into buffers carved from 2 MiB transparent huge pages ran at
//! 3.7 GB/s. Large buffers ([`HUGE_MIN`] and up) therefore come from
//! [`HugeChunk`]s: 2 MiB-aligned regions advised `MADV_HUGEPAGE`. Where
//! the kernel has no transparent huge pages to give (`never`, or memory too
//! fragmented) they are ordinary pages, and everything works as before.

use std::alloc::{self, Layout};
use std::io;
use std::sync::Arc;

use rustix::mm::{madvise, Advice};

/// Alignment used for direct I/O buffers, offsets and lengths: the page
/// size, a multiple of every logical block size Linux devices use.
pub const DIRECT_ALIGN: usize = 4096;

/// A transparent huge page on x86-64 and arm64 (4 KiB base pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// Buffers from this size up are carved from huge-page chunks.
pub const HUGE_MIN: usize = 64 << 10;

/// A zeroed, [`DIRECT_ALIGN`]-aligned heap buffer, handed to `Bytes`
/// without a copy.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    owner: Owner,
}

/// Who frees the memory.
enum Owner {
    /// A heap allocation of its own.
    Heap(Layout),
    /// A slice of a huge-page chunk, freed with the chunk's last slice
    /// (held, never read: its drop is the point).
    Chunk(#[allow(dead_code)] Arc<HugeChunk>),
}

// SAFETY: AlignedBuf uniquely owns its bytes (like Box<[u8]>): no two
// AlignedBufs cover the same bytes (chunks are carved into disjoint
// slices), and the pointer is never shared outside `&self`/`&mut self`
// borrows, so moving it to or sharing it with another thread is as safe as
// for Box<[u8]>. The chunk itself is only freed (never read or written)
// through the Arc.
unsafe impl Send for AlignedBuf {}
// SAFETY: see Send; shared access only reads through `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (of its own, whatever its size).
    pub fn zeroed(len: usize) -> io::Result<AlignedBuf> {
        let size = len.max(1).next_multiple_of(DIRECT_ALIGN);
        let layout = Layout::from_size_align(size, DIRECT_ALIGN)
            .map_err(|_| io::Error::other("buffer too large"))?;
        // SAFETY: `layout` has non-zero size (at least DIRECT_ALIGN bytes).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(raw).ok_or_else(|| io::Error::other("out of memory"))?;
        Ok(AlignedBuf {
            ptr,
            len,
            owner: Owner::Heap(layout),
        })
    }

    /// Zeroed buffers of `size` bytes carved from one huge-page chunk:
    /// one when `size` is a huge page or more (rounded up to whole huge
    /// pages), else as many as fit in one.
    pub fn huge(size: usize) -> io::Result<Vec<AlignedBuf>> {
        let size = size.max(1).next_multiple_of(DIRECT_ALIGN);
        let chunk = Arc::new(HugeChunk::new(size.next_multiple_of(HUGE_PAGE))?);
        let count = (chunk.layout.size() / size).max(1);
        let mut out = Vec::with_capacity(count);
        for i in 0..count {
            // SAFETY: `i * size + size <= chunk size`, so the offset stays
            // inside the chunk's allocation; the slices are disjoint.
            let at = unsafe { chunk.ptr.as_ptr().add(i * size) };
            let ptr = std::ptr::NonNull::new(at).ok_or_else(|| io::Error::other("null chunk"))?;
            out.push(AlignedBuf {
                ptr,
                len: size,
                owner: Owner::Chunk(chunk.clone()),
            });
        }
        Ok(out)
    }

    /// A buffer holding a copy of `parts`, one after another: from a
    /// huge-page chunk for large totals (see the module docs).
    pub fn gather<'a>(
        parts: impl IntoIterator<Item = &'a [u8]>,
        total: usize,
    ) -> io::Result<crate::pool::PooledBuf> {
        let mut b = crate::pool::PooledBuf::get_aligned(total)?;
        let dst = b.as_mut_slice();
        let mut at = 0;
        for p in parts {
            dst.get_mut(at..at + p.len())
                .ok_or_else(|| io::Error::other("parts longer than their total"))?
                .copy_from_slice(p);
            at += p.len();
        }
        Ok(b)
    }

    /// Where the kernel may write the buffer's `len()` bytes.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether its memory is a huge-page chunk's.
    pub fn from_chunk(&self) -> bool {
        matches!(self.owner, Owner::Chunk(_))
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` points to at least `len` initialised (zeroed or
        // written) bytes owned by self (its own allocation or its disjoint
        // slice of a chunk), alive while `&self` is.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl AsMut<[u8]> for AlignedBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_ref`, and `&mut self` guarantees uniqueness.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if let Owner::Heap(layout) = self.owner {
            // SAFETY: allocated in `zeroed` with exactly this layout, freed
            // once.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) }
        }
        // A chunk's slice: the Arc frees the chunk with its last slice.
    }
}

/// A zeroed, [`HUGE_PAGE`]-aligned region of whole huge pages, advised
/// `MADV_HUGEPAGE` before its first touch so the kernel backs it with
/// transparent huge pages where it can.
pub struct HugeChunk {
    ptr: std::ptr::NonNull<u8>,
    layout: Layout,
}

impl HugeChunk {
    fn new(size: usize) -> io::Result<HugeChunk> {
        let layout = Layout::from_size_align(size, HUGE_PAGE)
            .map_err(|_| io::Error::other("buffer too large"))?;
        // SAFETY: `layout` has non-zero size (whole huge pages).
        let raw = unsafe { alloc::alloc(layout) };
        let ptr = std::ptr::NonNull::new(raw).ok_or_else(|| io::Error::other("out of memory"))?;
        // SAFETY: madvise on the range just allocated (page-aligned, as
        // the layout is huge-page aligned) and owned here; MADV_HUGEPAGE
        // changes how pages are backed, never their contents or mapping,
        // so no other memory is affected. A refusal (no THP here) is
        // harmless and ignored.
        let _ = unsafe { madvise(raw.cast(), size, Advice::LinuxHugepage) };
        // Touch (zero) it now: the pages are faulted in as huge pages
        // while the advice holds, and buffers start zeroed as `zeroed`'s.
        // SAFETY: `size` bytes at `raw` are allocated and owned here.
        unsafe { std::ptr::write_bytes(raw, 0, size) };
        Ok(HugeChunk { ptr, layout })
    }
}

impl Drop for HugeChunk {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with exactly this layout, freed once
        // (the last Arc holder drops it).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: a chunk is only ever freed through its Arc (its bytes are
// accessed through the AlignedBufs carved from it, which are Send/Sync on
// their own terms).
unsafe impl Send for HugeChunk {}
// SAFETY: see Send.
unsafe impl Sync for HugeChunk {}

/// Whether `offset` and `len` suit a descriptor opened with `O_DIRECT`.
pub fn direct_aligned(offset: u64, len: usize) -> bool {
    offset % DIRECT_ALIGN as u64 == 0 && len % DIRECT_ALIGN == 0
}

/// Whether a buffer at `ptr` may be handed to `O_DIRECT` as it is.
pub fn buffer_aligned(ptr: *const u8, len: usize) -> bool {
    (ptr as usize) % DIRECT_ALIGN == 0 && len % DIRECT_ALIGN == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_chunks_are_carved_into_disjoint_aligned_zeroed_buffers() {
        let mut bufs = AlignedBuf::huge(512 << 10).unwrap();
        assert_eq!(bufs.len(), 4);
        let base = bufs[0].as_ref().as_ptr() as usize;
        assert_eq!(base % HUGE_PAGE, 0);
        for (i, b) in bufs.iter_mut().enumerate() {
            assert!(b.from_chunk());
            assert_eq!(b.len(), 512 << 10);
            assert_eq!(b.as_ref().as_ptr() as usize, base + i * (512 << 10));
            assert!(b.as_ref().iter().all(|&x| x == 0));
            b.as_mut().fill(i as u8 + 1);
        }
        // Writing one slice leaves the others as they were.
        for (i, b) in bufs.iter().enumerate() {
            assert!(b.as_ref().iter().all(|&x| x == i as u8 + 1));
        }
        // Slices outlive each other in any order (the chunk goes last).
        let last = bufs.pop().unwrap();
        drop(bufs);
        assert_eq!(last.as_ref()[0], 4);
        // Larger than a huge page: one buffer of whole huge pages.
        let big = AlignedBuf::huge(3 << 20).unwrap();
        assert_eq!(big.len(), 1);
        assert_eq!(big[0].len(), 3 << 20);
    }

    #[test]
    fn gathered_parts_are_contiguous() {
        let parts: [&[u8]; 3] = [&[1; 100], &[2; 4000], &[3; 96]];
        let b = AlignedBuf::gather(parts, 4196).unwrap();
        let got = b.as_ref();
        assert_eq!(got.len(), 4196);
        assert!(got[..100].iter().all(|&x| x == 1));
        assert!(got[100..4100].iter().all(|&x| x == 2));
        assert!(got[4100..].iter().all(|&x| x == 3));
        assert!(AlignedBuf::gather(parts, 10).is_err());
    }
}
