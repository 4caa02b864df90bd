//! Data verification: every block a verifying run writes carries a header
//! (magic, checksum, LBA, write generation) and a fill derived from them;
//! every block it reads is checked. A block whose checksum or LBA is wrong
//! is corrupt; a block written in this run that comes back with an older
//! generation (or without a header) is a lost write.

use bytes::{BufMut, Bytes, BytesMut};

const MAGIC: u32 = 0x494c_5642; // "ILVB"
/// Header: magic, crc32c of the rest of the block, LBA, generation.
const HEADER: usize = 4 + 4 + 8 + 8;
/// A generation meaning "overlapping writes raced here: any valid
/// generation is right".
const ANY: u32 = u32::MAX;
/// Largest seek range that can be verified, in blocks (bounds the maps).
pub const MAX_VERIFY_BLOCKS: u64 = 8 << 20;

/// One mismatch.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Mismatch {
    pub lba: u64,
    pub what: String,
}

/// Expected generation per block of one LUN's seek range.
#[derive(Debug)]
pub struct VerifyMap {
    first_lba: u64,
    block_size: usize,
    /// 0: not written in this run; ANY: raced; else the generation.
    gens: Vec<u32>,
    in_flight: Vec<u16>,
    raced: Vec<bool>,
    /// Per block: the tick of the latest write to start or end there.
    touched: Vec<u64>,
    /// Counts write starts and ends: the clock reads are judged by.
    tick: u64,
    next_gen: u32,
    pub checked_blocks: u64,
    pub mismatches: Vec<Mismatch>,
    pub mismatch_count: u64,
}

/// Mismatches kept for the report (all are counted).
const KEEP_MISMATCHES: usize = 100;

impl VerifyMap {
    pub fn new(first_lba: u64, blocks: u64, block_size: u32) -> Result<Self, String> {
        if blocks > MAX_VERIFY_BLOCKS {
            return Err(format!(
                "--verify covers at most {MAX_VERIFY_BLOCKS} blocks; the seek range has {blocks} (use a smaller seek range)"
            ));
        }
        if (block_size as usize) < HEADER {
            return Err(format!("block size {block_size} is too small to verify"));
        }
        let n = blocks as usize;
        Ok(VerifyMap {
            first_lba,
            block_size: block_size as usize,
            gens: vec![0; n],
            in_flight: vec![0; n],
            raced: vec![false; n],
            touched: vec![0; n],
            tick: 0,
            next_gen: 1,
            checked_blocks: 0,
            mismatches: Vec::new(),
            mismatch_count: 0,
        })
    }

    fn idx(&self, lba: u64) -> Option<usize> {
        lba.checked_sub(self.first_lba)
            .map(|i| i as usize)
            .filter(|i| *i < self.gens.len())
    }

    /// Builds the data of a write of `blocks` blocks at `lba`, and notes
    /// it in flight. Returns the data and its generation.
    pub fn start_write(&mut self, lba: u64, blocks: u32) -> (Bytes, u32) {
        self.tick += 1;
        let generation = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        if self.next_gen == ANY {
            self.next_gen = 1;
        }
        let mut buf = BytesMut::with_capacity(blocks as usize * self.block_size);
        for b in 0..u64::from(blocks) {
            fill_block(&mut buf, lba + b, generation, self.block_size);
            if let Some(i) = self.idx(lba + b) {
                if let Some(t) = self.touched.get_mut(i) {
                    *t = self.tick;
                }
                if let (Some(f), Some(r)) = (self.in_flight.get_mut(i), self.raced.get_mut(i)) {
                    if *f > 0 {
                        *r = true;
                    }
                    *f = f.saturating_add(1);
                }
            }
        }
        (buf.freeze(), generation)
    }

    /// A write finished (successfully or not).
    pub fn end_write(&mut self, lba: u64, blocks: u32, generation: u32, ok: bool) {
        self.tick += 1;
        for b in 0..u64::from(blocks) {
            let Some(i) = self.idx(lba + b) else { continue };
            if let Some(t) = self.touched.get_mut(i) {
                *t = self.tick;
            }
            let (Some(f), Some(r), Some(g)) = (
                self.in_flight.get_mut(i),
                self.raced.get_mut(i),
                self.gens.get_mut(i),
            ) else {
                continue;
            };
            *f = f.saturating_sub(1);
            *g = if !ok || *r { ANY } else { generation };
            if *f == 0 {
                *r = false;
            } else {
                *g = ANY;
            }
        }
    }

    /// The mark to keep with a read when it is issued, for
    /// [`VerifyMap::check_read`].
    pub fn read_mark(&self) -> u64 {
        self.tick
    }

    /// Checks the data of a read of blocks at `lba`, issued at `mark`
    /// ([`VerifyMap::read_mark`]). A block that a write touched while the
    /// read was outstanding (a write started or ended after the read was
    /// issued, or is still running) may hold either content: the target
    /// may order overlapping commands either way (SAM-5 §8.6), and on
    /// different sessions or paths there is no order at all. Such blocks
    /// are not judged.
    pub fn check_read(&mut self, lba: u64, data: &[u8], mark: u64) {
        for (k, block) in data.chunks(self.block_size).enumerate() {
            let lba = lba + k as u64;
            let Some(i) = self.idx(lba) else { continue };
            if self.in_flight.get(i).copied().unwrap_or(0) > 0
                || self.touched.get(i).copied().unwrap_or(0) > mark
            {
                continue;
            }
            let expected = self.gens.get(i).copied().unwrap_or(0);
            self.checked_blocks += 1;
            if let Some(what) = check_block(block, lba, expected) {
                self.mismatch_count += 1;
                if self.mismatches.len() < KEEP_MISMATCHES {
                    self.mismatches.push(Mismatch { lba, what });
                }
            }
        }
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn fill_block(buf: &mut BytesMut, lba: u64, generation: u32, size: usize) {
    let start = buf.len();
    buf.put_u32(MAGIC);
    buf.put_u32(0);
    buf.put_u64(lba);
    buf.put_u64(u64::from(generation));
    let mut x = splitmix(lba ^ (u64::from(generation) << 40));
    while buf.len() - start + 8 <= size {
        buf.put_u64(x);
        x = splitmix(x);
    }
    while buf.len() - start < size {
        buf.put_u8(x as u8);
    }
    if let Some(block) = buf.get_mut(start..start + size) {
        let crc = crc32c::crc32c(block.get(8..).unwrap_or(&[]));
        if let Some(c) = block.get_mut(4..8) {
            c.copy_from_slice(&crc.to_be_bytes());
        }
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map(u32::from_be_bytes)
        .unwrap_or(0)
}

fn be64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

/// What is wrong with a block read back, if anything.
fn check_block(block: &[u8], lba: u64, expected: u32) -> Option<String> {
    if be32(block, 0) != MAGIC {
        return match expected {
            0 => None, // never written by this run: any content is fine
            g => Some(format!(
                "no verification header (expected generation {})",
                if g == ANY {
                    "any".to_owned()
                } else {
                    g.to_string()
                }
            )),
        };
    }
    let crc = crc32c::crc32c(block.get(8..).unwrap_or(&[]));
    if crc != be32(block, 4) {
        return Some(format!(
            "checksum mismatch (stored 0x{:08x}, computed 0x{crc:08x})",
            be32(block, 4)
        ));
    }
    let stored_lba = be64(block, 8);
    if stored_lba != lba {
        return Some(format!("block carries LBA {stored_lba} (misplaced write)"));
    }
    let generation = be64(block, 16);
    if expected != 0 && expected != ANY && generation != u64::from(expected) {
        return Some(format!(
            "stale data: generation {generation}, expected {expected} (lost write)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn written_blocks_verify_and_corruption_is_found() {
        let mut m = VerifyMap::new(100, 64, 512).unwrap();
        let (data, g) = m.start_write(110, 4);
        m.end_write(110, 4, g, true);
        m.check_read(110, &data, m.read_mark());
        assert_eq!(m.mismatch_count, 0);
        assert_eq!(m.checked_blocks, 4);

        let mut bad = data.to_vec();
        bad[512 * 2 + 300] ^= 1;
        m.check_read(110, &bad, m.read_mark());
        assert_eq!(m.mismatches[0].lba, 112);
        assert!(m.mismatches[0].what.contains("checksum"));

        // An older generation where a newer was acknowledged: lost write.
        let (newer, g2) = m.start_write(110, 1);
        m.end_write(110, 1, g2, true);
        m.check_read(110, &data[..512], m.read_mark());
        assert!(m.mismatches.last().unwrap().what.contains("stale"));
        m.check_read(110, &newer, m.read_mark());

        // A block from elsewhere: misplaced.
        m.check_read(111, &data[..512], m.read_mark());
        assert!(m.mismatches.last().unwrap().what.contains("LBA 110"));

        // Never-written blocks may hold anything.
        let before = m.mismatch_count;
        m.check_read(150, &[0u8; 512], m.read_mark());
        assert_eq!(m.mismatch_count, before);
    }

    #[test]
    fn racing_writes_accept_either_generation() {
        let mut m = VerifyMap::new(0, 8, 512).unwrap();
        let (a, ga) = m.start_write(0, 1);
        let (b, gb) = m.start_write(0, 1);
        m.end_write(0, 1, gb, true);
        m.end_write(0, 1, ga, true);
        m.check_read(0, &a, m.read_mark());
        m.check_read(0, &b, m.read_mark());
        assert_eq!(m.mismatch_count, 0);
    }

    #[test]
    fn a_read_overtaken_by_a_write_is_not_judged() {
        let mut m = VerifyMap::new(0, 8, 512).unwrap();
        let (old, g1) = m.start_write(0, 1);
        m.end_write(0, 1, g1, true);
        let mark = m.read_mark();
        // A write is issued and completes while the read is in flight; the
        // target ran the read first, so it returns the old data.
        let (_new, g2) = m.start_write(0, 1);
        m.end_write(0, 1, g2, true);
        m.check_read(0, &old, mark);
        assert_eq!(m.mismatch_count, 0);
        // A read issued after the write must see it.
        m.check_read(0, &old, m.read_mark());
        assert_eq!(m.mismatch_count, 1);
    }

    #[test]
    fn a_read_issued_during_a_write_is_not_judged() {
        let mut m = VerifyMap::new(0, 8, 512).unwrap();
        let (old, g1) = m.start_write(0, 2);
        m.end_write(0, 2, g1, true);
        // The write starts, the read is issued (on another path), the
        // write completes, then the read, which the target ran first.
        let (_new, g2) = m.start_write(1, 1);
        let mark = m.read_mark();
        m.end_write(1, 1, g2, true);
        m.check_read(0, &old, mark);
        // Block 0 was not written meanwhile and is judged; block 1 is not.
        assert_eq!(m.checked_blocks, 1);
        assert_eq!(m.mismatch_count, 0);
        m.check_read(0, &old, m.read_mark());
        assert_eq!(m.mismatch_count, 1);
    }
}
