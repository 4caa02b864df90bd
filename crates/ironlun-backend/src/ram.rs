//! `ram`: a sparse in-memory store. Memory is allocated per 64 KiB chunk on
//! the first write to it; unwritten chunks read as zeros.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use bytes::Bytes;

use crate::{check_range, zeros, Backend};

const CHUNK: usize = 64 << 10;

pub struct RamBackend {
    size: u64,
    chunks: Vec<RwLock<Option<Box<[u8]>>>>,
    /// Chunks allocated now, changed under the chunk's lock as it is
    /// allocated or released: a monitor reads it without a walk.
    allocated: AtomicU64,
}

impl RamBackend {
    pub fn new(size: u64) -> Self {
        let n = size.div_ceil(CHUNK as u64) as usize;
        RamBackend {
            size,
            chunks: (0..n).map(|_| RwLock::new(None)).collect(),
            allocated: AtomicU64::new(0),
        }
    }

    /// Bytes of memory allocated for data so far.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed) * CHUNK as u64
    }

    /// Calls `f(chunk_index, offset_in_chunk, range_in_request)` for each
    /// chunk that `[offset, offset+len)` touches.
    fn for_each_chunk(
        offset: u64,
        len: usize,
        mut f: impl FnMut(usize, usize, std::ops::Range<usize>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut done = 0usize;
        while done < len {
            let pos = offset + done as u64;
            let idx = (pos / CHUNK as u64) as usize;
            let within = (pos % CHUNK as u64) as usize;
            let n = (CHUNK - within).min(len - done);
            f(idx, within, done..done + n)?;
            done += n;
        }
        Ok(())
    }
}

fn lost_chunk() -> io::Error {
    io::Error::other("chunk index out of range")
}

impl Backend for RamBackend {
    fn kind(&self) -> &'static str {
        "ram"
    }

    fn size_bytes(&self) -> u64 {
        self.size
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        check_range(offset, len, self.size)?;
        // Unwritten everywhere: a zero slice, no copy.
        let mut any = false;
        Self::for_each_chunk(offset, len, |idx, _, _| {
            let c = self.chunks.get(idx).ok_or_else(lost_chunk)?;
            any |= c.read().map(|g| g.is_some()).unwrap_or(true);
            Ok(())
        })?;
        if !any {
            return Ok(zeros(len));
        }
        // A reused buffer holds old data: every range is either copied or
        // zeroed.
        let mut out = crate::pool::PooledBuf::get(len)?;
        let buf = out.as_mut_slice();
        Self::for_each_chunk(offset, len, |idx, within, range| {
            let c = self.chunks.get(idx).ok_or_else(lost_chunk)?;
            let guard = c.read().unwrap_or_else(|e| e.into_inner());
            let dst = buf.get_mut(range.clone()).ok_or_else(lost_chunk)?;
            match guard.as_ref() {
                Some(data) => {
                    let src = data
                        .get(within..within + range.len())
                        .ok_or_else(lost_chunk)?;
                    dst.copy_from_slice(src);
                }
                None => dst.fill(0),
            }
            Ok(())
        })?;
        Ok(out.freeze())
    }

    fn write(&self, offset: u64, data: &[u8], _durable: bool) -> io::Result<()> {
        check_range(offset, data.len(), self.size)?;
        Self::for_each_chunk(offset, data.len(), |idx, within, range| {
            let c = self.chunks.get(idx).ok_or_else(lost_chunk)?;
            let mut guard = c.write().unwrap_or_else(|e| e.into_inner());
            let chunk = guard.get_or_insert_with(|| {
                self.allocated.fetch_add(1, Ordering::Relaxed);
                vec![0u8; CHUNK].into_boxed_slice()
            });
            let src = data.get(range.clone()).ok_or_else(lost_chunk)?;
            chunk
                .get_mut(within..within + range.len())
                .ok_or_else(lost_chunk)?
                .copy_from_slice(src);
            Ok(())
        })
    }

    fn flush(&self) -> io::Result<()> {
        Ok(())
    }

    fn may_block(&self) -> bool {
        false
    }

    fn used_bytes(&self) -> Option<u64> {
        Some(self.allocated_bytes())
    }

    fn provisioning_granularity(&self) -> u64 {
        CHUNK as u64
    }

    fn deallocate(&self, offset: u64, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::Error::other("range too large"))?;
        check_range(offset, len, self.size)?;
        Self::for_each_chunk(offset, len, |idx, within, range| {
            let c = self.chunks.get(idx).ok_or_else(lost_chunk)?;
            let mut guard = c.write().unwrap_or_else(|e| e.into_inner());
            // The last chunk may be shorter than CHUNK.
            let chunk_len = (self.size - idx as u64 * CHUNK as u64).min(CHUNK as u64) as usize;
            if within == 0 && range.len() == chunk_len {
                if guard.take().is_some() {
                    self.allocated.fetch_sub(1, Ordering::Relaxed);
                }
            } else if let Some(data) = guard.as_mut() {
                if let Some(dst) = data.get_mut(within..within + range.len()) {
                    dst.fill(0);
                }
            }
            Ok(())
        })
    }

    fn allocation(&self, offset: u64, len: u64) -> io::Result<Vec<crate::Extent>> {
        let ulen = usize::try_from(len).map_err(|_| io::Error::other("range too large"))?;
        check_range(offset, ulen, self.size)?;
        let mut out = Vec::new();
        Self::for_each_chunk(offset, ulen, |idx, _, range| {
            let c = self.chunks.get(idx).ok_or_else(lost_chunk)?;
            let allocated = c.read().map(|g| g.is_some()).unwrap_or(true);
            crate::push_extent(&mut out, range.len() as u64, allocated);
            Ok(())
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reused_read_buffers_never_leak_old_data_into_unwritten_ranges() {
        let b = RamBackend::new(16 * CHUNK as u64);
        let len = 4 * CHUNK;
        // Fill the pool's buffers of this size with non-zero data.
        b.write(0, &vec![0xAB; len], false).unwrap();
        let dirty: Vec<_> = (0..4).map(|_| b.read(0, len).unwrap()).collect();
        drop(dirty);
        // Chunks 8 and 10 written, 9 and 11 never: they must read as zeros.
        b.write(8 * CHUNK as u64, &vec![1; CHUNK], false).unwrap();
        b.write(10 * CHUNK as u64, &vec![2; CHUNK], false).unwrap();
        let r = b.read(8 * CHUNK as u64, len).unwrap();
        assert!(r[..CHUNK].iter().all(|&x| x == 1));
        assert!(r[CHUNK..2 * CHUNK].iter().all(|&x| x == 0));
        assert!(r[2 * CHUNK..3 * CHUNK].iter().all(|&x| x == 2));
        assert!(r[3 * CHUNK..].iter().all(|&x| x == 0));
    }

    #[test]
    fn sparse_until_written_and_reads_back_across_chunks() {
        let b = RamBackend::new(1 << 20);
        assert_eq!(b.allocated_bytes(), 0);
        assert!(b.read(0, 4096).unwrap().iter().all(|&x| x == 0));
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        b.write(10_000, &data, false).unwrap();
        assert_eq!(&b.read(10_000, data.len()).unwrap()[..], &data[..]);
        // Only the touched chunks are allocated.
        assert_eq!(b.allocated_bytes(), 4 * CHUNK as u64);
        // Bytes around the write stay zero.
        assert_eq!(b.read(9_999, 1).unwrap()[0], 0);
        assert_eq!(b.read(210_000, 1).unwrap()[0], 0);
    }

    #[test]
    fn deallocate_frees_whole_chunks_and_zeroes_partial_ones() {
        let b = RamBackend::new(4 * CHUNK as u64);
        b.write(0, &vec![7u8; 3 * CHUNK], false).unwrap();
        // Half of chunk 0, all of chunk 1.
        b.deallocate(CHUNK as u64 / 2, CHUNK as u64 * 3 / 2)
            .unwrap();
        assert_eq!(b.allocated_bytes(), 2 * CHUNK as u64);
        let d = b.read(0, 3 * CHUNK).unwrap();
        assert!(d[..CHUNK / 2].iter().all(|&x| x == 7));
        assert!(d[CHUNK / 2..2 * CHUNK].iter().all(|&x| x == 0));
        assert!(d[2 * CHUNK..].iter().all(|&x| x == 7));
        let ext = b.allocation(0, 4 * CHUNK as u64).unwrap();
        assert_eq!(
            ext,
            vec![
                crate::Extent {
                    len: CHUNK as u64,
                    allocated: true
                },
                crate::Extent {
                    len: CHUNK as u64,
                    allocated: false
                },
                crate::Extent {
                    len: CHUNK as u64,
                    allocated: true
                },
                crate::Extent {
                    len: CHUNK as u64,
                    allocated: false
                },
            ]
        );
        assert!(b.deallocate(4 * CHUNK as u64, 1).is_err());
        // The count follows the chunks: releasing a free chunk again or
        // writing an allocated one changes nothing, a new one counts.
        b.deallocate(CHUNK as u64, CHUNK as u64).unwrap();
        b.write(0, &[1; 512], false).unwrap();
        assert_eq!(b.allocated_bytes(), 2 * CHUNK as u64);
        b.write(CHUNK as u64, &[1; 512], false).unwrap();
        assert_eq!(b.allocated_bytes(), 3 * CHUNK as u64);
    }

    #[test]
    fn out_of_range_is_an_error() {
        let b = RamBackend::new(1000);
        assert!(b.write(999, &[1, 2], false).is_err());
        assert!(b.read(u64::MAX, 1).is_err());
        b.write(999, &[7], false).unwrap();
        assert_eq!(b.read(999, 1).unwrap()[0], 7);
    }
}
