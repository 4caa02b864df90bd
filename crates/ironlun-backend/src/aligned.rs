//! [`AlignedBuf`]: heap memory aligned for `O_DIRECT`.

use std::alloc::{self, Layout};
use std::io;

/// Alignment used for direct I/O buffers, offsets and lengths: the page
/// size, a multiple of every logical block size Linux devices use.
pub const DIRECT_ALIGN: usize = 4096;

/// A zeroed, [`DIRECT_ALIGN`]-aligned heap buffer, handed to `Bytes`
/// without a copy.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    layout: Layout,
}

// SAFETY: AlignedBuf uniquely owns its allocation (like Box<[u8]>); the
// pointer is never shared outside `&self`/`&mut self` borrows, so moving it
// to or sharing it with another thread is as safe as for Box<[u8]>.
unsafe impl Send for AlignedBuf {}
// SAFETY: see Send; shared access only reads through `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    pub fn zeroed(len: usize) -> io::Result<AlignedBuf> {
        let size = len.max(1).next_multiple_of(DIRECT_ALIGN);
        let layout = Layout::from_size_align(size, DIRECT_ALIGN)
            .map_err(|_| io::Error::other("buffer too large"))?;
        // SAFETY: `layout` has non-zero size (at least DIRECT_ALIGN bytes).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(raw).ok_or_else(|| io::Error::other("out of memory"))?;
        Ok(AlignedBuf { ptr, len, layout })
    }

    /// A buffer holding a copy of `parts`, one after another.
    pub fn gather<'a>(
        parts: impl IntoIterator<Item = &'a [u8]>,
        total: usize,
    ) -> io::Result<AlignedBuf> {
        let mut b = AlignedBuf::zeroed(total)?;
        let mut at = 0;
        for p in parts {
            b.as_mut()
                .get_mut(at..at + p.len())
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
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` points to `layout.size() >= len` initialised (zeroed
        // or written) bytes owned by self, alive while `&self` is.
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
        // SAFETY: allocated in `zeroed` with exactly this layout, freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Whether `offset` and `len` suit a descriptor opened with `O_DIRECT`.
pub fn direct_aligned(offset: u64, len: usize) -> bool {
    offset % DIRECT_ALIGN as u64 == 0 && len % DIRECT_ALIGN == 0
}

/// Whether a buffer at `ptr` may be handed to `O_DIRECT` as it is.
pub fn buffer_aligned(ptr: *const u8, len: usize) -> bool {
    (ptr as usize) % DIRECT_ALIGN == 0 && len % DIRECT_ALIGN == 0
}
