//! Sense data (SPC-4 §4.5): the one place where an error becomes bytes.
//!
//! Handlers return a [`Sense`]; [`Sense::encode`] writes it in fixed
//! (SPC-4 §4.5.3) or descriptor (SPC-4 §4.5.2) format, chosen by the
//! control mode page's D_SENSE bit.

use bytes::Bytes;

/// Sense keys (SPC-4 §4.5.6, table 27).
pub mod key {
    pub const NO_SENSE: u8 = 0x0;
    pub const RECOVERED_ERROR: u8 = 0x1;
    pub const NOT_READY: u8 = 0x2;
    pub const MEDIUM_ERROR: u8 = 0x3;
    pub const HARDWARE_ERROR: u8 = 0x4;
    pub const ILLEGAL_REQUEST: u8 = 0x5;
    pub const UNIT_ATTENTION: u8 = 0x6;
    pub const DATA_PROTECT: u8 = 0x7;
    pub const COPY_ABORTED: u8 = 0xa;
    pub const ABORTED_COMMAND: u8 = 0xb;
    pub const MISCOMPARE: u8 = 0xe;
}

/// Additional sense code and qualifier pairs (SPC-4 Annex D).
pub mod asc {
    pub const NO_ADDITIONAL_SENSE: (u8, u8) = (0x00, 0x00);
    pub const LU_NOT_READY_INITIALIZING_COMMAND_REQUIRED: (u8, u8) = (0x04, 0x02);
    pub const WRITE_ERROR: (u8, u8) = (0x0c, 0x00);
    pub const INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT: (u8, u8) = (0x0e, 0x03);
    pub const UNRECOVERED_READ_ERROR: (u8, u8) = (0x11, 0x00);
    pub const PARAMETER_LIST_LENGTH_ERROR: (u8, u8) = (0x1a, 0x00);
    pub const INVALID_COMMAND_OPERATION_CODE: (u8, u8) = (0x20, 0x00);
    pub const LBA_OUT_OF_RANGE: (u8, u8) = (0x21, 0x00);
    pub const INVALID_FIELD_IN_CDB: (u8, u8) = (0x24, 0x00);
    pub const LOGICAL_UNIT_NOT_SUPPORTED: (u8, u8) = (0x25, 0x00);
    pub const INVALID_FIELD_IN_PARAMETER_LIST: (u8, u8) = (0x26, 0x00);
    pub const INVALID_RELEASE_OF_PERSISTENT_RESERVATION: (u8, u8) = (0x26, 0x04);
    pub const WRITE_PROTECTED: (u8, u8) = (0x27, 0x00);
    pub const POWER_ON_RESET_OR_BUS_DEVICE_RESET: (u8, u8) = (0x29, 0x00);
    pub const BUS_DEVICE_RESET_FUNCTION_OCCURRED: (u8, u8) = (0x29, 0x03);
    pub const I_T_NEXUS_LOSS_OCCURRED: (u8, u8) = (0x29, 0x07);
    pub const MISCOMPARE_DURING_VERIFY: (u8, u8) = (0x1d, 0x00);
    pub const MODE_PARAMETERS_CHANGED: (u8, u8) = (0x2a, 0x01);
    pub const RESERVATIONS_PREEMPTED: (u8, u8) = (0x2a, 0x03);
    pub const RESERVATIONS_RELEASED: (u8, u8) = (0x2a, 0x04);
    pub const REGISTRATIONS_PREEMPTED: (u8, u8) = (0x2a, 0x05);
    pub const CAPACITY_DATA_HAS_CHANGED: (u8, u8) = (0x2a, 0x09);
    pub const COMMANDS_CLEARED_BY_ANOTHER_INITIATOR: (u8, u8) = (0x2f, 0x00);
    pub const SAVING_PARAMETERS_NOT_SUPPORTED: (u8, u8) = (0x39, 0x00);
    pub const REPORTED_LUNS_DATA_HAS_CHANGED: (u8, u8) = (0x3f, 0x0e);
    pub const INTERNAL_TARGET_FAILURE: (u8, u8) = (0x44, 0x00);
}

/// Where in the CDB or parameter list an invalid field sits
/// (SPC-4 §4.5.2.4.2, sense key specific "field pointer").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldPointer {
    /// In the CDB (C/D = 1) or in the parameter data.
    pub in_cdb: bool,
    pub byte: u16,
    pub bit: Option<u8>,
}

/// One sense condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sense {
    pub key: u8,
    pub asc: u8,
    pub ascq: u8,
    /// The INFORMATION field (an LBA for medium errors).
    pub info: Option<u64>,
    /// The sense-key-specific field (SPC-4 §4.5.2.4).
    pub specific: Option<KeySpecific>,
}

/// What the sense-key-specific bytes carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpecific {
    /// ILLEGAL REQUEST: the offending field (SPC-4 §4.5.2.4.2).
    Field(FieldPointer),
    /// NOT READY: progress of a long operation, 0..=65535 for 0..100%
    /// (SPC-4 §4.5.2.4.4).
    Progress(u16),
}

impl Sense {
    pub const fn new(key: u8, (asc, ascq): (u8, u8)) -> Sense {
        Sense {
            key,
            asc,
            ascq,
            info: None,
            specific: None,
        }
    }

    pub fn with_info(mut self, info: u64) -> Sense {
        self.info = Some(info);
        self
    }

    pub fn invalid_opcode() -> Sense {
        Sense::new(key::ILLEGAL_REQUEST, asc::INVALID_COMMAND_OPERATION_CODE).cdb_field(0, None)
    }

    /// INVALID FIELD IN CDB pointing at `byte` (and `bit`).
    pub fn invalid_field(byte: u16, bit: Option<u8>) -> Sense {
        Sense::new(key::ILLEGAL_REQUEST, asc::INVALID_FIELD_IN_CDB).cdb_field(byte, bit)
    }

    pub fn invalid_param(byte: u16, bit: Option<u8>) -> Sense {
        let mut s = Sense::new(key::ILLEGAL_REQUEST, asc::INVALID_FIELD_IN_PARAMETER_LIST);
        s.specific = Some(KeySpecific::Field(FieldPointer {
            in_cdb: false,
            byte,
            bit,
        }));
        s
    }

    pub fn lba_out_of_range() -> Sense {
        Sense::new(key::ILLEGAL_REQUEST, asc::LBA_OUT_OF_RANGE)
    }

    pub fn lu_not_supported() -> Sense {
        Sense::new(key::ILLEGAL_REQUEST, asc::LOGICAL_UNIT_NOT_SUPPORTED)
    }

    pub fn write_protected() -> Sense {
        Sense::new(key::DATA_PROTECT, asc::WRITE_PROTECTED)
    }

    fn cdb_field(mut self, byte: u16, bit: Option<u8>) -> Sense {
        self.specific = Some(KeySpecific::Field(FieldPointer {
            in_cdb: true,
            byte,
            bit,
        }));
        self
    }

    /// With a progress indication (a sanitize under way).
    pub fn with_progress(mut self, progress: u16) -> Sense {
        self.specific = Some(KeySpecific::Progress(progress));
        self
    }

    /// Sense-key-specific bytes: a field pointer (SPC-4 §4.5.2.4.2) or a
    /// progress indication (§4.5.2.4.4).
    fn sks(&self) -> Option<[u8; 3]> {
        let f = match self.specific? {
            KeySpecific::Field(f) => f,
            KeySpecific::Progress(p) => {
                let [hi, lo] = p.to_be_bytes();
                return Some([0x80, hi, lo]);
            }
        };
        let mut b0 = 0x80; // SKSV
        if f.in_cdb {
            b0 |= 0x40;
        }
        if let Some(bit) = f.bit {
            b0 |= 0x08 | (bit & 0x07); // BPV + bit pointer
        }
        let [hi, lo] = f.byte.to_be_bytes();
        Some([b0, hi, lo])
    }

    /// Encodes the sense data: descriptor format (response code 0x72) when
    /// `descriptor`, fixed format (0x70) otherwise.
    pub fn encode(&self, descriptor: bool) -> Bytes {
        if descriptor {
            let mut v = vec![0x72, self.key & 0x0f, self.asc, self.ascq, 0, 0, 0, 0];
            if let Some(info) = self.info {
                // Information descriptor (SPC-4 §4.5.2.2).
                v.extend_from_slice(&[0x00, 0x0a, 0x80, 0]);
                v.extend_from_slice(&info.to_be_bytes());
            }
            if let Some(sks) = self.sks() {
                // Sense key specific descriptor (SPC-4 §4.5.2.4).
                v.extend_from_slice(&[0x02, 0x06, 0, 0]);
                v.extend_from_slice(&sks);
                v.push(0);
            }
            let additional = (v.len() - 8) as u8;
            if let Some(b) = v.get_mut(7) {
                *b = additional;
            }
            Bytes::from(v)
        } else {
            let mut v = [0u8; 18];
            v[0] = 0x70;
            v[2] = self.key & 0x0f;
            if let Some(info) = self.info {
                // A fixed-format INFORMATION field holds 32 bits.
                if let Ok(i) = u32::try_from(info) {
                    v[0] |= 0x80; // VALID
                    v[3..7].copy_from_slice(&i.to_be_bytes());
                }
            }
            v[7] = 10; // additional sense length
            v[12] = self.asc;
            v[13] = self.ascq;
            if let Some(sks) = self.sks() {
                v[15..18].copy_from_slice(&sks);
            }
            Bytes::copy_from_slice(&v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_format_layout() {
        let s = Sense::invalid_field(2, Some(5));
        let b = s.encode(false);
        assert_eq!(b.len(), 18);
        assert_eq!(b[0], 0x70);
        assert_eq!(b[2], key::ILLEGAL_REQUEST);
        assert_eq!(b[7], 10);
        assert_eq!((b[12], b[13]), (0x24, 0x00));
        assert_eq!(&b[15..18], &[0x80 | 0x40 | 0x08 | 5, 0, 2]);
    }

    #[test]
    fn fixed_format_information() {
        let b = Sense::new(key::MEDIUM_ERROR, asc::UNRECOVERED_READ_ERROR)
            .with_info(0x1234)
            .encode(false);
        assert_eq!(b[0], 0xf0);
        assert_eq!(&b[3..7], &[0, 0, 0x12, 0x34]);
        // Too large for 32 bits: VALID stays clear.
        let b = Sense::new(key::MEDIUM_ERROR, asc::UNRECOVERED_READ_ERROR)
            .with_info(1 << 40)
            .encode(false);
        assert_eq!(b[0], 0x70);
    }

    #[test]
    fn descriptor_format_layout() {
        let b = Sense::lba_out_of_range().encode(true);
        assert_eq!(&b[..], &[0x72, 5, 0x21, 0, 0, 0, 0, 0]);
        let b = Sense::invalid_field(1, None).with_info(7).encode(true);
        assert_eq!(b[0], 0x72);
        assert_eq!(b[7] as usize, b.len() - 8);
        assert_eq!(&b[8..12], &[0, 0x0a, 0x80, 0]);
        assert_eq!(b[19], 7);
        assert_eq!(&b[20..23], &[0x02, 0x06, 0]);
    }
}
