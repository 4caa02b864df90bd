//! The fields several PDU families share and how every field is coded.
//!
//! **Owns:** the LUN (SAM-5 §4.7), the residual of SCSI Response and
//! Data-In (RFC 7143 §11.4.1, §11.7.5), the reserved tag, the BHS offsets
//! of the words most PDUs carry at the same place (RFC 7143 §11.2.1 and
//! each PDU's section), and the codecs ([`Codec`]) a PDU's field list
//! names: each reads and writes one field at its place, so a layout is
//! written once and decode and encode cannot disagree.

use crate::bhs::Bhs;
use crate::codes::ByteCode;
use crate::WireError;

/// Reserved tag value meaning "no task" (RFC 7143 §11.2.1.8, §11.18.2).
pub const RESERVED_TAG: u32 = 0xffff_ffff;

/// Byte 0's I bit: immediate delivery (RFC 7143 §11.2.1.1).
pub(super) const IMMEDIATE: Flag = Flag(0, 0x40);
/// Byte 1: the F bit and the opcode-specific flags (RFC 7143 §11.2.1.3).
pub(super) const FLAGS: usize = 1;
/// The F (final) bit of byte 1.
pub(super) const FINAL: Flag = Flag(FLAGS, 0x80);
/// Initiator Task Tag (RFC 7143 §11.2.1.8).
pub(super) const ITT: Word = Word(16);
/// Target Transfer Tag (RFC 7143 §11.2.1.9); other PDUs put their own
/// field at 20.
pub(super) const TTT: Word = Word(20);
/// CmdSN of an initiator PDU.
pub(super) const CMD_SN: Word = Word(24);
/// ExpStatSN of an initiator PDU.
pub(super) const EXP_STAT_SN: Word = Word(28);
/// StatSN of a target PDU.
pub(super) const STAT_SN: Word = Word(24);
/// ExpCmdSN of a target PDU.
pub(super) const EXP_CMD_SN: Word = Word(28);
/// MaxCmdSN of a target PDU.
pub(super) const MAX_CMD_SN: Word = Word(32);

/// One field's place and coding in the BHS: `get` and `put` are each
/// other's inverse for every value the field can hold.
pub(super) trait Codec<T> {
    fn get(&self, b: &Bhs) -> Result<T, WireError>;
    fn put(&self, b: &mut Bhs, v: &T);
}

/// A big-endian 32-bit word at an offset.
pub(super) struct Word(pub usize);

impl Codec<u32> for Word {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<u32, WireError> {
        Ok(b.be32(self.0))
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &u32) {
        b.set_be32(self.0, *v);
    }
}

/// A big-endian 16-bit half-word at an offset.
pub(super) struct Half(pub usize);

impl Codec<u16> for Half {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<u16, WireError> {
        Ok(b.be16(self.0))
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &u16) {
        b.set_be16(self.0, *v);
    }
}

/// A whole byte holding a code (or a plain `u8`).
pub(super) struct Byte(pub usize);

impl<T: ByteCode> Codec<T> for Byte {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<T, WireError> {
        Ok(T::from_byte(b.byte(self.0)))
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &T) {
        b.set_byte(self.0, v.to_byte());
    }
}

/// The bits of `mask << shift` in a byte, holding a code (or a `u8`).
pub(super) struct Bits {
    pub at: usize,
    pub mask: u8,
    pub shift: u8,
}

impl<T: ByteCode> Codec<T> for Bits {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<T, WireError> {
        Ok(T::from_byte((b.byte(self.at) >> self.shift) & self.mask))
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &T) {
        let field = self.mask << self.shift;
        let bits = (v.to_byte() & self.mask) << self.shift;
        b.set_byte(self.at, (b.byte(self.at) & !field) | bits);
    }
}

/// One flag bit: `Flag(offset, mask)`.
pub(super) struct Flag(pub usize, pub u8);

impl Codec<bool> for Flag {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<bool, WireError> {
        Ok(b.byte(self.0) & self.1 != 0)
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &bool) {
        b.set_bit(self.0, self.1, *v);
    }
}

/// `N` bytes as they are, at an offset.
pub(super) struct Octets(pub usize);

impl<const N: usize> Codec<[u8; N]> for Octets {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<[u8; N], WireError> {
        let mut v = [0u8; N];
        v.copy_from_slice(b.bytes(self.0, N));
        Ok(v)
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &[u8; N]) {
        b.bytes_mut(self.0, N).copy_from_slice(v);
    }
}

/// The LUN field, bytes 8..16 (RFC 7143 §11.2.1.7).
pub(super) const LUN: Octets = Octets(8);

impl Codec<Lun> for Octets {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<Lun, WireError> {
        Codec::<[u8; 8]>::get(self, b).map(Lun)
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &Lun) {
        Codec::<[u8; 8]>::put(self, b, &v.0);
    }
}

/// A residual: its O and U bits in byte 1, `shift` places up (0 for the
/// residual, 2 for the bidirectional one), and its count word.
pub(super) struct ResidualAt {
    pub shift: u8,
    pub count: usize,
}

impl Codec<Residual> for ResidualAt {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<Residual, WireError> {
        Residual::from_bits(b.byte(FLAGS) >> self.shift, b.be32(self.count))
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &Residual) {
        let field = Residual::BITS << self.shift;
        let bits = v.flag_bits() << self.shift;
        b.set_byte(FLAGS, (b.byte(FLAGS) & !field) | bits);
        b.set_be32(self.count, v.count());
    }
}

/// An 8-byte SCSI logical unit number field (SAM-5 §4.7).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Lun(pub [u8; 8]);

impl std::fmt::Debug for Lun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index() {
            Some(i) => write!(f, "Lun({i})"),
            None => write!(f, "Lun({:02x?})", self.0),
        }
    }
}

impl Lun {
    /// Encodes a LUN index with peripheral device addressing below 256 and
    /// flat space addressing above (SAM-5 §4.7.7.2, §4.7.7.4).
    pub fn from_index(n: u16) -> Lun {
        let mut b = [0u8; 8];
        if n < 256 {
            b[1] = n as u8;
        } else {
            let v = n & 0x3fff;
            b[0] = 0x40 | (v >> 8) as u8;
            b[1] = (v & 0xff) as u8;
        }
        Lun(b)
    }

    /// The single-level LUN index, or `None` for an addressing method this
    /// target does not use (which then reaches no logical unit).
    pub fn index(&self) -> Option<u16> {
        let [b0, b1, rest @ ..] = self.0;
        if rest.iter().any(|&b| b != 0) {
            return None;
        }
        match b0 >> 6 {
            0b00 if b0 == 0 => Some(u16::from(b1)),
            0b01 => Some((u16::from(b0 & 0x3f) << 8) | u16::from(b1)),
            _ => None,
        }
    }
}

/// Residual reporting shared by SCSI Response and Data-In
/// (RFC 7143 §11.4.1, §11.7.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Residual {
    #[default]
    None,
    /// The initiator's Expected Data Transfer Length was too small.
    Overflow(u32),
    /// Fewer bytes were transferred than the initiator expected.
    Underflow(u32),
}

impl Residual {
    /// Computes the residual for `transferred` bytes the command wanted to
    /// move against the initiator's expected length.
    pub fn of(expected: u32, wanted: u32) -> Residual {
        use std::cmp::Ordering::*;
        match wanted.cmp(&expected) {
            Greater => Residual::Overflow(wanted.abs_diff(expected)),
            Less => Residual::Underflow(expected.abs_diff(wanted)),
            Equal => Residual::None,
        }
    }

    #[inline]
    pub fn count(self) -> u32 {
        match self {
            Residual::None => 0,
            Residual::Overflow(n) | Residual::Underflow(n) => n,
        }
    }

    /// Where the O and U bits sit in byte 1.
    const BITS: u8 = 0x06;

    /// The O and U bits at bit positions 2 and 1 of byte 1.
    #[inline]
    pub(super) fn flag_bits(self) -> u8 {
        match self {
            Residual::None => 0,
            Residual::Overflow(_) => 0x04,
            Residual::Underflow(_) => 0x02,
        }
    }

    #[inline]
    pub(super) fn from_bits(byte1: u8, count: u32) -> Result<Residual, WireError> {
        match (byte1 & 0x04 != 0, byte1 & 0x02 != 0) {
            (false, false) => Ok(Residual::None),
            (true, false) => Ok(Residual::Overflow(count)),
            (false, true) => Ok(Residual::Underflow(count)),
            (true, true) => Err(WireError::InvalidField("both O and U residual bits set")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_addressing() {
        assert_eq!(Lun::from_index(0).0, [0; 8]);
        assert_eq!(Lun::from_index(5).index(), Some(5));
        assert_eq!(Lun::from_index(300).0[0], 0x41);
        assert_eq!(Lun::from_index(300).index(), Some(300));
        // Multi-level or other addressing methods reach no LU.
        assert_eq!(Lun([0, 1, 0, 2, 0, 0, 0, 0]).index(), None);
        assert_eq!(Lun([0x80, 1, 0, 0, 0, 0, 0, 0]).index(), None);
        // Peripheral addressing with a non-zero bus is not a plain index.
        assert_eq!(Lun([0x01, 1, 0, 0, 0, 0, 0, 0]).index(), None);
    }

    #[test]
    fn residual_of() {
        assert_eq!(Residual::of(512, 512), Residual::None);
        assert_eq!(Residual::of(0, 512), Residual::Overflow(512));
        assert_eq!(Residual::of(10000, 512), Residual::Underflow(9488));
    }
}
