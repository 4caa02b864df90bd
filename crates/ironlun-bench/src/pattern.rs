//! Write data with a chosen compressibility and dedupe ratio, as fio's
//! `buffer_compress_percentage` and `dedupe_percentage`.
//!
//! * **compress PCT**: each 512-byte chunk of a write is (100-PCT) %
//!   random bytes followed by PCT % zeros, so a compressor removes about
//!   PCT % of it (fio fills `buffer_compress_chunk` segments the same
//!   way; its default chunk is 512 bytes).
//! * **dedupe PCT**: each write is, with probability PCT %, a copy of one
//!   of the last [`DEDUPE_SET`] unique writes of the same worker,
//!   otherwise new data. The unit is the write (fio: the write buffer).
//!   Copies and originals of different sizes differ.
//!
//! Without either, writes carry one shared buffer and no allocation per
//! I/O (and so are all alike: 100 % dedupable).

use std::collections::VecDeque;

use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, RngExt, SeedableRng};

/// Chunk within which the compressible share sits.
pub const CHUNK: usize = 512;
/// Unique writes a duplicate may copy.
pub const DEDUPE_SET: usize = 64;

/// The data shape asked for: percentages, each 0..=100.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub compress_pct: u32,
    pub dedupe_pct: u32,
}

impl Shape {
    /// True when writes need data of their own.
    pub fn active(&self) -> bool {
        self.compress_pct > 0 || self.dedupe_pct > 0
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.compress_pct > 100 || self.dedupe_pct > 100 {
            return Err("compress and dedupe are percentages (0..=100)".into());
        }
        Ok(())
    }
}

/// One worker's source of write data.
#[derive(Debug)]
pub struct WriteData {
    shape: Shape,
    rng: SmallRng,
    salt: u64,
    next_unique: u64,
    /// Seeds of the latest unique writes, newest last.
    recent: VecDeque<u64>,
}

impl WriteData {
    /// A source for a worker whose writes are told apart by `salt`.
    pub fn new(shape: Shape, salt: u64) -> WriteData {
        WriteData {
            shape,
            rng: SmallRng::seed_from_u64(salt ^ 0xda7a),
            salt,
            next_unique: 0,
            recent: VecDeque::with_capacity(DEDUPE_SET),
        }
    }

    /// The data of the next write of `len` bytes.
    pub fn next(&mut self, len: usize) -> Bytes {
        let dup = !self.recent.is_empty() && self.rng.random_range(0..100) < self.shape.dedupe_pct;
        let seed = if dup {
            let i = self.rng.random_range(0..self.recent.len());
            self.recent.get(i).copied().unwrap_or(0)
        } else {
            self.next_unique += 1;
            let s = splitmix(self.salt ^ splitmix(self.next_unique));
            if self.recent.len() == DEDUPE_SET {
                self.recent.pop_front();
            }
            self.recent.push_back(s);
            s
        };
        fill(seed, len, self.shape.compress_pct)
    }
}

/// `len` bytes from `seed`: per chunk, (100-`compress_pct`) % random
/// bytes, then zeros.
pub fn fill(seed: u64, len: usize, compress_pct: u32) -> Bytes {
    let mut v = vec![0u8; len];
    let mut rng = SmallRng::seed_from_u64(seed);
    let keep = CHUNK * (100 - compress_pct.min(100) as usize) / 100;
    for chunk in v.chunks_mut(CHUNK) {
        let n = keep.min(chunk.len());
        if let Some(head) = chunk.get_mut(..n) {
            rng.fill_bytes(head);
        }
    }
    Bytes::from(v)
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::DeflateEncoder;
    use flate2::Compression;
    use std::collections::HashSet;
    use std::io::Write;

    fn deflated(data: &[u8]) -> usize {
        let mut e = DeflateEncoder::new(Vec::new(), Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap().len()
    }

    #[test]
    fn compressed_size_matches_the_random_share() {
        for pct in [0u32, 25, 50, 75, 90] {
            let mut src = WriteData::new(
                Shape {
                    compress_pct: pct,
                    dedupe_pct: 0,
                },
                3,
            );
            let data: Vec<u8> = (0..64).flat_map(|_| src.next(4096)).collect();
            let ratio = deflated(&data) as f64 / data.len() as f64;
            let expect = f64::from(100 - pct) / 100.0;
            // Deflate cannot shrink random bytes and spends a little on
            // the zero runs and block headers.
            assert!(
                ratio >= expect - 0.005 && ratio <= expect + 0.03,
                "compress {pct}: ratio {ratio:.3}, expected {expect:.2}"
            );
        }
    }

    #[test]
    fn dedupe_yields_the_requested_share_of_copies() {
        for pct in [0u32, 30, 80] {
            let mut src = WriteData::new(
                Shape {
                    compress_pct: 0,
                    dedupe_pct: pct,
                },
                9,
            );
            let mut seen = HashSet::new();
            let n = 20_000;
            let copies = (0..n).filter(|_| !seen.insert(src.next(512))).count();
            let got = copies as f64 / f64::from(n);
            // Binomial sd at 20,000 writes is at most 0.0036; 0.02 is 5 sd.
            assert!(
                (got - f64::from(pct) / 100.0).abs() < 0.02,
                "dedupe {pct}: {got}"
            );
        }
    }

    #[test]
    fn workers_do_not_share_unique_data() {
        let shape = Shape {
            compress_pct: 50,
            dedupe_pct: 0,
        };
        let (mut a, mut b) = (WriteData::new(shape, 1), WriteData::new(shape, 2));
        assert_ne!(a.next(4096), b.next(4096));
        assert_eq!(fill(5, 1000, 50).len(), 1000);
        assert!(Shape {
            compress_pct: 101,
            dedupe_pct: 0
        }
        .validate()
        .is_err());
    }
}
