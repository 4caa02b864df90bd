//! A transfer buffer aligned for `O_DIRECT`, without unsafe allocation:
//! a vector one alignment longer than needed, used from its first
//! aligned byte. The vector never grows, so its memory never moves.

use bytes::Bytes;

/// Alignment of every buffer: a page, more than any logical block.
pub(crate) const ALIGN: usize = 4096;

pub(crate) struct SlotBuf {
    v: Vec<u8>,
    start: usize,
    len: usize,
}

impl SlotBuf {
    /// A buffer of `len` bytes holding `fill` (repeated or cut to fit).
    pub(crate) fn new(len: usize, fill: &Bytes) -> SlotBuf {
        let v = vec![0u8; len + ALIGN];
        let start = v.as_ptr().align_offset(ALIGN).min(ALIGN);
        let mut b = SlotBuf { v, start, len };
        if !fill.is_empty() {
            for (d, s) in b.as_mut().iter_mut().zip(fill.iter().cycle()) {
                *d = *s;
            }
        }
        b
    }

    pub(crate) fn as_ref(&self) -> &[u8] {
        self.v.get(self.start..self.start + self.len).unwrap_or(&[])
    }

    pub(crate) fn as_mut(&mut self) -> &mut [u8] {
        let (start, len) = (self.start, self.len);
        self.v.get_mut(start..start + len).unwrap_or(&mut [])
    }

    /// The first `len` bytes (all when shorter).
    pub(crate) fn head(&self, len: usize) -> &[u8] {
        let b = self.as_ref();
        b.get(..len).unwrap_or(b)
    }

    /// Copies `data` to the start of the buffer (as much as fits).
    pub(crate) fn put(&mut self, data: &[u8]) {
        for (d, s) in self.as_mut().iter_mut().zip(data) {
            *d = *s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_filled() {
        let fill = Bytes::from_static(&[1, 2, 3]);
        for len in [512, 4096, 131072] {
            let b = SlotBuf::new(len, &fill);
            assert_eq!(b.as_ref().as_ptr() as usize % ALIGN, 0);
            assert_eq!(b.as_ref().len(), len);
            assert_eq!(&b.as_ref()[..4], &[1, 2, 3, 1]);
        }
    }
}
