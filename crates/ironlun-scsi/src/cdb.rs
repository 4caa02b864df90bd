//! Reading fields out of a CDB without panicking on short input.
//!
//! CDBs from iSCSI are at least 16 bytes (zero-padded), but the reader does
//! not rely on it: a byte beyond the end reads as zero, and the opcode table
//! has already checked the CDB length for the command.

/// A borrowed CDB.
#[derive(Clone, Copy, Debug)]
pub struct Cdb<'a>(pub &'a [u8]);

impl<'a> Cdb<'a> {
    pub fn opcode(&self) -> u8 {
        self.u8(0)
    }

    pub fn u8(&self, i: usize) -> u8 {
        self.0.get(i).copied().unwrap_or(0)
    }

    fn be(&self, i: usize, n: usize) -> u64 {
        // `n` <= 8 bytes fill the u64; an index that saturates usize is
        // past the end, and reads zero like any other.
        (0..n).fold(0u64, |acc, k| {
            (acc << 8) | u64::from(self.u8(i.saturating_add(k)))
        })
    }

    pub fn be16(&self, i: usize) -> u16 {
        self.be(i, 2) as u16
    }

    pub fn be24(&self, i: usize) -> u32 {
        self.be(i, 3) as u32
    }

    pub fn be32(&self, i: usize) -> u32 {
        self.be(i, 4) as u32
    }

    pub fn be64(&self, i: usize) -> u64 {
        self.be(i, 8)
    }

    pub fn bit(&self, i: usize, bit: u8) -> bool {
        self.u8(i) & (1 << bit) != 0
    }

    /// The service action field of byte 1 (SPC-4 §4.2.5.3).
    pub fn service_action(&self) -> u16 {
        u16::from(self.u8(1) & 0x1f)
    }

    /// CDB length from the group code of the opcode (SPC-4 §4.2.5.1), or
    /// `None` for groups whose length is not fixed.
    pub fn group_len(opcode: u8) -> Option<usize> {
        match opcode >> 5 {
            0 => Some(6),
            1 | 2 => Some(10),
            4 => Some(16),
            5 => Some(12),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_short_cdbs() {
        let c = Cdb(&[0x28, 0x18, 0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x08, 0x00]);
        assert_eq!(c.opcode(), 0x28);
        assert_eq!(c.be32(2), 0x1234);
        assert_eq!(c.be16(7), 8);
        assert!(c.bit(1, 4));
        // Past the end reads zero.
        assert_eq!(c.be64(8), 0x0800_0000_0000_0000);
        assert_eq!(Cdb(&[]).opcode(), 0);
        assert_eq!(Cdb::group_len(0x28), Some(10));
        assert_eq!(Cdb::group_len(0x88), Some(16));
        assert_eq!(Cdb::group_len(0xa8), Some(12));
        assert_eq!(Cdb::group_len(0x12), Some(6));
        assert_eq!(Cdb::group_len(0x7f), None);
    }
}
