//! Sense data (SPC-4 §4.5): the one place where an error becomes bytes.
//!
//! Handlers return a [`Sense`]: a [`SenseCode`] (sense key, ASC, ASCQ,
//! named in ironlun-scsi-codes) with what this device adds to it;
//! [`Sense::encode`] writes it in fixed (SPC-4 §4.5.3) or descriptor
//! (SPC-4 §4.5.2) format, chosen by the control mode page's D_SENSE bit.

use bytes::Bytes;
use ironlun_scsi_codes::{Asc, SenseCode, SenseData, SenseKey};

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
    /// Sense key, ASC and ASCQ.
    pub code: SenseCode,
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
    pub const fn new(key: SenseKey, asc: Asc) -> Sense {
        Sense::from_code(SenseCode::new(key, asc))
    }

    /// The condition `code`, with no INFORMATION and nothing sense-key
    /// specific.
    pub const fn from_code(code: SenseCode) -> Sense {
        Sense {
            code,
            info: None,
            specific: None,
        }
    }

    pub fn with_info(mut self, info: u64) -> Sense {
        self.info = Some(info);
        self
    }

    pub fn invalid_opcode() -> Sense {
        Sense::new(
            SenseKey::ILLEGAL_REQUEST,
            Asc::INVALID_COMMAND_OPERATION_CODE,
        )
        .cdb_field(0, None)
    }

    /// INVALID FIELD IN CDB pointing at `byte` (and `bit`).
    pub fn invalid_field(byte: u16, bit: Option<u8>) -> Sense {
        Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::INVALID_FIELD_IN_CDB).cdb_field(byte, bit)
    }

    pub fn invalid_param(byte: u16, bit: Option<u8>) -> Sense {
        let mut s = Sense::new(
            SenseKey::ILLEGAL_REQUEST,
            Asc::INVALID_FIELD_IN_PARAMETER_LIST,
        );
        s.specific = Some(KeySpecific::Field(FieldPointer {
            in_cdb: false,
            byte,
            bit,
        }));
        s
    }

    pub fn lba_out_of_range() -> Sense {
        Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::LBA_OUT_OF_RANGE)
    }

    pub fn lu_not_supported() -> Sense {
        Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::LOGICAL_UNIT_NOT_SUPPORTED)
    }

    pub fn write_protected() -> Sense {
        Sense::new(SenseKey::DATA_PROTECT, Asc::WRITE_PROTECTED)
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

    /// Encodes the sense data of a current error: descriptor format
    /// when `descriptor`, fixed format otherwise.
    pub fn encode(&self, descriptor: bool) -> Bytes {
        if descriptor {
            let c = self.code;
            let mut v = vec![
                SenseData::DESCRIPTOR_CURRENT,
                c.key.0 & 0x0f,
                c.asc,
                c.ascq,
                0,
                0,
                0,
                0,
            ];
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
            // ADDITIONAL SENSE LENGTH: the bytes after the 8-byte header
            // (at most 32 here).
            let additional = u8::try_from(v.len().saturating_sub(8)).unwrap_or(u8::MAX);
            if let Some(b) = v.get_mut(7) {
                *b = additional;
            }
            Bytes::from(v)
        } else {
            let mut v = [0u8; 18];
            v[0] = SenseData::FIXED_CURRENT;
            v[2] = self.code.key.0 & 0x0f;
            if let Some(info) = self.info {
                // A fixed-format INFORMATION field holds 32 bits.
                if let Ok(i) = u32::try_from(info) {
                    v[0] |= 0x80; // VALID
                    v[3..7].copy_from_slice(&i.to_be_bytes());
                }
            }
            v[7] = 10; // additional sense length
            v[12] = self.code.asc;
            v[13] = self.code.ascq;
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
        assert_eq!(b[2], SenseKey::ILLEGAL_REQUEST.0);
        assert_eq!(b[7], 10);
        assert_eq!((b[12], b[13]), (0x24, 0x00));
        assert_eq!(&b[15..18], &[0x80 | 0x40 | 0x08 | 5, 0, 2]);
    }

    #[test]
    fn fixed_format_information() {
        let b = Sense::new(SenseKey::MEDIUM_ERROR, Asc::UNRECOVERED_READ_ERROR)
            .with_info(0x1234)
            .encode(false);
        assert_eq!(b[0], 0xf0);
        assert_eq!(&b[3..7], &[0, 0, 0x12, 0x34]);
        // Too large for 32 bits: VALID stays clear.
        let b = Sense::new(SenseKey::MEDIUM_ERROR, Asc::UNRECOVERED_READ_ERROR)
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
