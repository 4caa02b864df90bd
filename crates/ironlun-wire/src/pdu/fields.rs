//! The fields several PDU families share: the LUN (SAM-5 §4.7), the
//! residual of SCSI Response and Data-In (RFC 7143 §11.4.1, §11.7.5), the
//! reserved tag, and the BHS offsets of the words most PDUs carry at the
//! same place (RFC 7143 §11.2.1 and each PDU's section).

use crate::WireError;

/// Reserved tag value meaning "no task" (RFC 7143 §11.2.1.8, §11.18.2).
pub const RESERVED_TAG: u32 = 0xffff_ffff;

/// Byte 1: the F bit and the opcode-specific flags (RFC 7143 §11.2.1.3).
pub(super) const FLAGS: usize = 1;
/// The F (final) bit of byte 1.
pub(super) const F_BIT: u8 = 0x80;
/// Target Transfer Tag, or the opcode-specific word at 20.
pub(super) const TTT: usize = 20;
/// CmdSN of an initiator PDU.
pub(super) const CMD_SN: usize = 24;
/// ExpStatSN of an initiator PDU.
pub(super) const EXP_STAT_SN: usize = 28;
/// StatSN of a target PDU.
pub(super) const STAT_SN: usize = 24;
/// ExpCmdSN of a target PDU.
pub(super) const EXP_CMD_SN: usize = 28;
/// MaxCmdSN of a target PDU.
pub(super) const MAX_CMD_SN: usize = 32;

/// `mask` when `on`, else 0: one flag bit of a flags byte.
pub(super) fn flag(on: bool, mask: u8) -> u8 {
    if on {
        mask
    } else {
        0
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
            Greater => Residual::Overflow(wanted - expected),
            Less => Residual::Underflow(expected - wanted),
            Equal => Residual::None,
        }
    }

    pub fn count(self) -> u32 {
        match self {
            Residual::None => 0,
            Residual::Overflow(n) | Residual::Underflow(n) => n,
        }
    }

    /// The O and U bits at bit positions 2 and 1 of byte 1.
    pub(super) fn flag_bits(self) -> u8 {
        match self {
            Residual::None => 0,
            Residual::Overflow(_) => 0x04,
            Residual::Underflow(_) => 0x02,
        }
    }

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
