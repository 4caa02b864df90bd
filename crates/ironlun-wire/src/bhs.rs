//! The 48-byte Basic Header Segment (RFC 7143 §11.2.1) and the opcode space.

use std::fmt;

/// Length of the Basic Header Segment in bytes (RFC 7143 §11.2.1).
pub const BHS_LEN: usize = 48;

/// An iSCSI opcode (RFC 7143 §11.2.1.2).
///
/// A newtype rather than an enum so that an unknown value survives parsing
/// and can be answered with a Reject that quotes it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

impl Opcode {
    // Initiator opcodes.
    pub const NOP_OUT: Opcode = Opcode(0x00);
    pub const SCSI_COMMAND: Opcode = Opcode(0x01);
    pub const TASK_MGMT_REQUEST: Opcode = Opcode(0x02);
    pub const LOGIN_REQUEST: Opcode = Opcode(0x03);
    pub const TEXT_REQUEST: Opcode = Opcode(0x04);
    pub const DATA_OUT: Opcode = Opcode(0x05);
    pub const LOGOUT_REQUEST: Opcode = Opcode(0x06);
    pub const SNACK_REQUEST: Opcode = Opcode(0x10);
    // Target opcodes.
    pub const NOP_IN: Opcode = Opcode(0x20);
    pub const SCSI_RESPONSE: Opcode = Opcode(0x21);
    pub const TASK_MGMT_RESPONSE: Opcode = Opcode(0x22);
    pub const LOGIN_RESPONSE: Opcode = Opcode(0x23);
    pub const TEXT_RESPONSE: Opcode = Opcode(0x24);
    pub const DATA_IN: Opcode = Opcode(0x25);
    pub const LOGOUT_RESPONSE: Opcode = Opcode(0x26);
    pub const R2T: Opcode = Opcode(0x31);
    pub const ASYNC_MESSAGE: Opcode = Opcode(0x32);
    pub const REJECT: Opcode = Opcode(0x3f);

    /// The RFC name of a defined opcode.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::NOP_OUT => "NOP-Out",
            Self::SCSI_COMMAND => "SCSI Command",
            Self::TASK_MGMT_REQUEST => "Task Management Function Request",
            Self::LOGIN_REQUEST => "Login Request",
            Self::TEXT_REQUEST => "Text Request",
            Self::DATA_OUT => "SCSI Data-Out",
            Self::LOGOUT_REQUEST => "Logout Request",
            Self::SNACK_REQUEST => "SNACK Request",
            Self::NOP_IN => "NOP-In",
            Self::SCSI_RESPONSE => "SCSI Response",
            Self::TASK_MGMT_RESPONSE => "Task Management Function Response",
            Self::LOGIN_RESPONSE => "Login Response",
            Self::TEXT_RESPONSE => "Text Response",
            Self::DATA_IN => "SCSI Data-In",
            Self::LOGOUT_RESPONSE => "Logout Response",
            Self::R2T => "Ready To Transfer",
            Self::ASYNC_MESSAGE => "Asynchronous Message",
            Self::REJECT => "Reject",
            _ => return None,
        })
    }

    /// Opcodes 0x20..=0x3f are sent by targets (RFC 7143 §11.2.1.2).
    pub fn is_target_opcode(self) -> bool {
        self.0 & 0x20 != 0
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}(0x{:02x})", self.0),
            None => write!(f, "Opcode(0x{:02x})", self.0),
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A Basic Header Segment: 48 raw bytes with typed accessors for the fields
/// every PDU shares (RFC 7143 §11.2.1). Opcode-specific fields are read by
/// the typed PDUs in [`crate::pdu`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Bhs(pub [u8; BHS_LEN]);

impl Default for Bhs {
    fn default() -> Self {
        Bhs([0; BHS_LEN])
    }
}

impl fmt::Debug for Bhs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Bhs {{ {:?}, I={}, ahs={}w, dsl={}, itt=0x{:08x} }}",
            self.opcode(),
            self.immediate(),
            self.total_ahs_len_words(),
            self.data_segment_len(),
            self.itt()
        )
    }
}

impl Bhs {
    #[inline]
    pub fn new(opcode: Opcode) -> Self {
        let mut b = Bhs::default();
        b.0[0] = opcode.0 & 0x3f;
        b
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8; BHS_LEN] {
        &self.0
    }

    /// Byte 0 bits 0..5 (RFC 7143 §11.2.1.2).
    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode(self.0[0] & 0x3f)
    }

    /// The I bit: immediate delivery (RFC 7143 §11.2.1.1).
    #[inline]
    pub fn immediate(&self) -> bool {
        self.0[0] & 0x40 != 0
    }

    #[inline]
    pub fn set_immediate(&mut self, on: bool) {
        self.set_bit(0, 0x40, on);
    }

    /// Byte 1 bit 7: the F (final) bit for most opcodes.
    #[inline]
    pub fn final_bit(&self) -> bool {
        self.0[1] & 0x80 != 0
    }

    #[inline]
    pub fn set_final_bit(&mut self, on: bool) {
        self.set_bit(1, 0x80, on);
    }

    /// TotalAHSLength in 4-byte words (RFC 7143 §11.2.1.4).
    #[inline]
    pub fn total_ahs_len_words(&self) -> u8 {
        self.0[4]
    }

    #[inline]
    pub fn total_ahs_len_bytes(&self) -> usize {
        usize::from(self.0[4]) * 4
    }

    #[inline]
    pub fn set_total_ahs_len_words(&mut self, words: u8) {
        self.0[4] = words;
    }

    /// DataSegmentLength, 24 bits, excluding padding (RFC 7143 §11.2.1.5).
    #[inline]
    pub fn data_segment_len(&self) -> u32 {
        u32::from_be_bytes([0, self.0[5], self.0[6], self.0[7]])
    }

    /// Sets DataSegmentLength. Lengths above 2^24-1 are a programming error;
    /// they are truncated to 24 bits.
    #[inline]
    pub fn set_data_segment_len(&mut self, len: u32) {
        debug_assert!(len < (1 << 24), "data segment length {len} exceeds 24 bits");
        let b = len.to_be_bytes();
        self.0[5] = b[1];
        self.0[6] = b[2];
        self.0[7] = b[3];
    }

    /// Bytes 8..16: LUN or opcode-specific.
    #[inline]
    pub fn lun_raw(&self) -> [u8; 8] {
        let mut l = [0u8; 8];
        l.copy_from_slice(self.bytes(8, 8));
        l
    }

    #[inline]
    pub fn set_lun_raw(&mut self, lun: [u8; 8]) {
        self.bytes_mut(8, 8).copy_from_slice(&lun);
    }

    /// Initiator Task Tag (RFC 7143 §11.2.1.8).
    #[inline]
    pub fn itt(&self) -> u32 {
        self.be32(16)
    }

    #[inline]
    pub fn set_itt(&mut self, itt: u32) {
        self.set_be32(16, itt);
    }

    #[inline]
    pub fn byte(&self, off: usize) -> u8 {
        debug_assert!(off < BHS_LEN);
        self.0.get(off).copied().unwrap_or(0)
    }

    #[inline]
    pub fn set_byte(&mut self, off: usize, v: u8) {
        debug_assert!(off < BHS_LEN);
        if let Some(b) = self.0.get_mut(off) {
            *b = v;
        }
    }

    #[inline]
    pub fn set_bit(&mut self, off: usize, mask: u8, on: bool) {
        let v = self.byte(off);
        self.set_byte(off, if on { v | mask } else { v & !mask });
    }

    #[inline]
    pub fn be16(&self, off: usize) -> u16 {
        let mut b = [0u8; 2];
        b.copy_from_slice(self.bytes(off, 2));
        u16::from_be_bytes(b)
    }

    #[inline]
    pub fn set_be16(&mut self, off: usize, v: u16) {
        self.bytes_mut(off, 2).copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn be32(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.bytes(off, 4));
        u32::from_be_bytes(b)
    }

    #[inline]
    pub fn set_be32(&mut self, off: usize, v: u32) {
        self.bytes_mut(off, 4).copy_from_slice(&v.to_be_bytes());
    }

    /// A fixed-offset sub-slice. Offsets in this crate are constants well
    /// inside the 48 bytes; an out-of-range request is a programming error
    /// caught in debug builds and answered with zeros in release builds.
    #[inline]
    pub fn bytes(&self, off: usize, len: usize) -> &[u8] {
        let range = off..off.saturating_add(len);
        debug_assert!(range.end <= BHS_LEN);
        const ZERO: [u8; BHS_LEN] = [0; BHS_LEN];
        match self.0.get(range) {
            Some(s) => s,
            None => ZERO.get(..len).unwrap_or(&[]),
        }
    }

    #[inline]
    pub fn bytes_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        let range = off..off.saturating_add(len);
        debug_assert!(range.end <= BHS_LEN);
        // Out of range (a programming error): write nowhere rather than
        // panic.
        match self.0.get_mut(range) {
            Some(s) => s,
            None => &mut [],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_fields_round_trip() {
        let mut b = Bhs::new(Opcode::SCSI_COMMAND);
        b.set_immediate(true);
        b.set_final_bit(true);
        b.set_total_ahs_len_words(3);
        b.set_data_segment_len(0x12_3456);
        b.set_itt(0xdead_beef);
        b.set_lun_raw([0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(b.opcode(), Opcode::SCSI_COMMAND);
        assert!(b.immediate());
        assert!(b.final_bit());
        assert_eq!(b.total_ahs_len_bytes(), 12);
        assert_eq!(b.data_segment_len(), 0x12_3456);
        assert_eq!(b.itt(), 0xdead_beef);
        assert_eq!(b.lun_raw()[1], 1);
        assert_eq!(&b.0[..8], &[0x41, 0x80, 0, 0, 3, 0x12, 0x34, 0x56]);
    }

    #[test]
    fn opcode_names_and_direction() {
        assert_eq!(Opcode::R2T.name(), Some("Ready To Transfer"));
        assert_eq!(Opcode(0x1c).name(), None);
        assert!(Opcode::REJECT.is_target_opcode());
        assert!(!Opcode::DATA_OUT.is_target_opcode());
        assert_eq!(format!("{:?}", Opcode(0x1c)), "Opcode(0x1c)");
    }
}
