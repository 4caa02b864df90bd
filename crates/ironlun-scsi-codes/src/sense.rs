//! Sense keys, additional sense codes and reading them out of sense
//! data (SPC-4 §4.5; the formats as SPC-5 §4.4.2 and §4.4.3 give them).

use core::fmt;

use crate::named_codes;

named_codes!(
    /// A sense key (SPC-4 §4.5.6, table 27): the low four bits of its
    /// byte.
    pub struct SenseKey(pub u8);
    unknown: "sense key 0x{:02x}", 0;
    NO_SENSE = SenseKey(0x0), "NO SENSE";
    RECOVERED_ERROR = SenseKey(0x1), "RECOVERED ERROR";
    NOT_READY = SenseKey(0x2), "NOT READY";
    MEDIUM_ERROR = SenseKey(0x3), "MEDIUM ERROR";
    HARDWARE_ERROR = SenseKey(0x4), "HARDWARE ERROR";
    ILLEGAL_REQUEST = SenseKey(0x5), "ILLEGAL REQUEST";
    UNIT_ATTENTION = SenseKey(0x6), "UNIT ATTENTION";
    DATA_PROTECT = SenseKey(0x7), "DATA PROTECT";
    BLANK_CHECK = SenseKey(0x8), "BLANK CHECK";
    VENDOR_SPECIFIC = SenseKey(0x9), "VENDOR SPECIFIC";
    COPY_ABORTED = SenseKey(0xa), "COPY ABORTED";
    ABORTED_COMMAND = SenseKey(0xb), "ABORTED COMMAND";
    /// Obsolete (once EQUAL).
    RESERVED = SenseKey(0xc), "RESERVED";
    VOLUME_OVERFLOW = SenseKey(0xd), "VOLUME OVERFLOW";
    MISCOMPARE = SenseKey(0xe), "MISCOMPARE";
    COMPLETED = SenseKey(0xf), "COMPLETED";
);

named_codes!(
    /// An additional sense code and its qualifier, (ASC, ASCQ)
    /// (SPC-4 §4.5.6, table 28; in numeric order in Annex D.2). The
    /// constants are the pairs ironlun reports or looks for.
    pub struct Asc(pub u8, pub u8);
    unknown: "ASC/ASCQ 0x{:02x}/0x{:02x}", 0, 1;
    NO_ADDITIONAL_SENSE = Asc(0x00, 0x00), "NO ADDITIONAL SENSE INFORMATION";
    LU_NOT_READY_BECOMING_READY = Asc(0x04, 0x01),
        "LOGICAL UNIT IS IN PROCESS OF BECOMING READY";
    LU_NOT_READY_INITIALIZING_COMMAND_REQUIRED = Asc(0x04, 0x02),
        "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED";
    /// ironlun's answer while a LU is offline because its saved state
    /// could not be read, or fenced from its RBD image: a person has to
    /// look at it.
    LU_NOT_READY_MANUAL_INTERVENTION_REQUIRED = Asc(0x04, 0x03),
        "LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED";
    /// The target port's group is changing its asymmetric access state
    /// (SPC-5 §5.16.2.6).
    LU_NOT_ACCESSIBLE_ASYMMETRIC_ACCESS_STATE_TRANSITION = Asc(0x04, 0x0a),
        "LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE TRANSITION";
    /// A command the standby state does not serve (SPC-5 §5.16.2.4.4).
    LU_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE = Asc(0x04, 0x0b),
        "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN STANDBY STATE";
    /// A command the unavailable state does not serve (SPC-5
    /// §5.16.2.4.5).
    LU_NOT_ACCESSIBLE_TARGET_PORT_IN_UNAVAILABLE_STATE = Asc(0x04, 0x0c),
        "LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN UNAVAILABLE STATE";
    LU_NOT_READY_SANITIZE_IN_PROGRESS = Asc(0x04, 0x1b),
        "LOGICAL UNIT NOT READY, SANITIZE IN PROGRESS";
    UNREACHABLE_COPY_TARGET = Asc(0x08, 0x04), "UNREACHABLE COPY TARGET";
    WRITE_ERROR = Asc(0x0c, 0x00), "WRITE ERROR";
    /// Also iSCSI's code for unsolicited data it did not allow
    /// (RFC 7143 §11.4.7.2).
    UNEXPECTED_UNSOLICITED_DATA = Asc(0x0c, 0x0c), "UNEXPECTED UNSOLICITED DATA";
    /// Also iSCSI's code for less unsolicited data than it required
    /// (RFC 7143 §11.4.7.2).
    NOT_ENOUGH_UNSOLICITED_DATA = Asc(0x0c, 0x0d), "NOT ENOUGH UNSOLICITED DATA";
    INCORRECT_COPY_TARGET_DEVICE_TYPE = Asc(0x0d, 0x03), "INCORRECT COPY TARGET DEVICE TYPE";
    INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT = Asc(0x0e, 0x03),
        "INVALID FIELD IN COMMAND INFORMATION UNIT";
    UNRECOVERED_READ_ERROR = Asc(0x11, 0x00), "UNRECOVERED READ ERROR";
    PARAMETER_LIST_LENGTH_ERROR = Asc(0x1a, 0x00), "PARAMETER LIST LENGTH ERROR";
    MISCOMPARE_DURING_VERIFY = Asc(0x1d, 0x00), "MISCOMPARE DURING VERIFY OPERATION";
    INVALID_COMMAND_OPERATION_CODE = Asc(0x20, 0x00), "INVALID COMMAND OPERATION CODE";
    LBA_OUT_OF_RANGE = Asc(0x21, 0x00), "LOGICAL BLOCK ADDRESS OUT OF RANGE";
    INVALID_FIELD_IN_CDB = Asc(0x24, 0x00), "INVALID FIELD IN CDB";
    LOGICAL_UNIT_NOT_SUPPORTED = Asc(0x25, 0x00), "LOGICAL UNIT NOT SUPPORTED";
    INVALID_FIELD_IN_PARAMETER_LIST = Asc(0x26, 0x00), "INVALID FIELD IN PARAMETER LIST";
    INVALID_RELEASE_OF_PERSISTENT_RESERVATION = Asc(0x26, 0x04),
        "INVALID RELEASE OF PERSISTENT RESERVATION";
    TOO_MANY_TARGET_DESCRIPTORS = Asc(0x26, 0x06), "TOO MANY TARGET DESCRIPTORS";
    UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE = Asc(0x26, 0x07),
        "UNSUPPORTED TARGET DESCRIPTOR TYPE CODE";
    TOO_MANY_SEGMENT_DESCRIPTORS = Asc(0x26, 0x08), "TOO MANY SEGMENT DESCRIPTORS";
    UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE = Asc(0x26, 0x09),
        "UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE";
    WRITE_PROTECTED = Asc(0x27, 0x00), "WRITE PROTECTED";
    SPACE_ALLOCATION_FAILED_WRITE_PROTECT = Asc(0x27, 0x07), "SPACE ALLOCATION FAILED WRITE PROTECT";
    /// The medium may have changed under the initiator (SPC-5's ASC
    /// table; raised after a snapshot rollback replaced the LU's data).
    MEDIUM_MAY_HAVE_CHANGED = Asc(0x28, 0x00),
        "NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED";
    POWER_ON_RESET_OR_BUS_DEVICE_RESET = Asc(0x29, 0x00),
        "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED";
    BUS_DEVICE_RESET_FUNCTION_OCCURRED = Asc(0x29, 0x03), "BUS DEVICE RESET FUNCTION OCCURRED";
    I_T_NEXUS_LOSS_OCCURRED = Asc(0x29, 0x07), "I_T NEXUS LOSS OCCURRED";
    MODE_PARAMETERS_CHANGED = Asc(0x2a, 0x01), "MODE PARAMETERS CHANGED";
    RESERVATIONS_PREEMPTED = Asc(0x2a, 0x03), "RESERVATIONS PREEMPTED";
    RESERVATIONS_RELEASED = Asc(0x2a, 0x04), "RESERVATIONS RELEASED";
    REGISTRATIONS_PREEMPTED = Asc(0x2a, 0x05), "REGISTRATIONS PREEMPTED";
    /// A target port group's asymmetric access state changed (SPC-5
    /// §5.16.2.7).
    ASYMMETRIC_ACCESS_STATE_CHANGED = Asc(0x2a, 0x06), "ASYMMETRIC ACCESS STATE CHANGED";
    /// An implicit change of asymmetric access state did not complete
    /// (SPC-5 §5.16.2.7).
    IMPLICIT_ASYMMETRIC_ACCESS_STATE_TRANSITION_FAILED = Asc(0x2a, 0x07),
        "IMPLICIT ASYMMETRIC ACCESS STATE TRANSITION FAILED";
    CAPACITY_DATA_HAS_CHANGED = Asc(0x2a, 0x09), "CAPACITY DATA HAS CHANGED";
    COMMANDS_CLEARED_BY_ANOTHER_INITIATOR = Asc(0x2f, 0x00),
        "COMMANDS CLEARED BY ANOTHER INITIATOR";
    SANITIZE_COMMAND_FAILED = Asc(0x31, 0x03), "SANITIZE COMMAND FAILED";
    /// A logical block provisioning soft threshold was crossed (SBC-4
    /// §4.7.3.7; the Logical Block Provisioning mode page, 1Ch/02h, sets
    /// it).
    THIN_PROVISIONING_SOFT_THRESHOLD_REACHED = Asc(0x38, 0x07),
        "THIN PROVISIONING SOFT THRESHOLD REACHED";
    SAVING_PARAMETERS_NOT_SUPPORTED = Asc(0x39, 0x00), "SAVING PARAMETERS NOT SUPPORTED";
    REPORTED_LUNS_DATA_HAS_CHANGED = Asc(0x3f, 0x0e), "REPORTED LUNS DATA HAS CHANGED";
    INTERNAL_TARGET_FAILURE = Asc(0x44, 0x00), "INTERNAL TARGET FAILURE";
    DATA_PHASE_ERROR = Asc(0x4b, 0x00), "DATA PHASE ERROR";
    INVALID_TARGET_PORT_TRANSFER_TAG_RECEIVED = Asc(0x4b, 0x01),
        "INVALID TARGET PORT TRANSFER TAG RECEIVED";
    TOO_MUCH_WRITE_DATA = Asc(0x4b, 0x02), "TOO MUCH WRITE DATA";
    DATA_OFFSET_ERROR = Asc(0x4b, 0x05), "DATA OFFSET ERROR";
    /// A REGISTER past the registrations a LU keeps (SPC-5 §5.14.7).
    INSUFFICIENT_REGISTRATION_RESOURCES = Asc(0x55, 0x04),
        "INSUFFICIENT REGISTRATION RESOURCES";
);

/// What a sense condition says: sense key, ASC and ASCQ (SPC-4 §4.5.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SenseCode {
    pub key: SenseKey,
    pub asc: u8,
    pub ascq: u8,
}

impl SenseCode {
    pub const fn new(key: SenseKey, asc: Asc) -> SenseCode {
        SenseCode {
            key,
            asc: asc.0,
            ascq: asc.1,
        }
    }

    /// The ASC/ASCQ pair.
    pub const fn asc_ascq(self) -> Asc {
        Asc(self.asc, self.ascq)
    }

    /// The sense key, ASC and ASCQ of fixed or descriptor format sense
    /// data; see [`SenseData::parse`].
    pub fn parse(sense: &[u8]) -> Option<SenseCode> {
        SenseData::parse(sense).map(|d| d.code)
    }
}

/// `ILLEGAL REQUEST (key 0x5), ASC/ASCQ 0x24/0x00`.
impl fmt::Display for SenseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (key 0x{:x}), ASC/ASCQ 0x{:02x}/0x{:02x}",
            self.key, self.key.0, self.asc, self.ascq
        )
    }
}

/// Sense data as an initiator reads it: the [`SenseCode`] and the
/// INFORMATION field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SenseData {
    pub code: SenseCode,
    /// INFORMATION, when valid (e.g. the first bad LBA).
    pub information: Option<u64>,
}

impl SenseData {
    /// RESPONSE CODE (byte 0, bits 6..0, SPC-4 §4.5.1) of fixed format
    /// sense data for a current error (SPC-4 §4.5.3).
    pub const FIXED_CURRENT: u8 = 0x70;
    /// Fixed format, deferred error.
    pub const FIXED_DEFERRED: u8 = 0x71;
    /// Descriptor format (SPC-4 §4.5.2), current error.
    pub const DESCRIPTOR_CURRENT: u8 = 0x72;
    /// Descriptor format, deferred error.
    pub const DESCRIPTOR_DEFERRED: u8 = 0x73;

    /// Whether `code` (byte 0 without the VALID bit) is one of the four
    /// response codes above.
    pub fn is_response_code(code: u8) -> bool {
        (Self::FIXED_CURRENT..=Self::DESCRIPTOR_DEFERRED).contains(&code)
    }

    /// Reads fixed format (response code 70h/71h, SPC-5 §4.4.3) or
    /// descriptor format (72h/73h, SPC-5 §4.4.2) sense data. `None` for
    /// another response code or data too short to hold the sense key; a
    /// missing ASC or ASCQ reads as zero.
    pub fn parse(sense: &[u8]) -> Option<SenseData> {
        let code = sense.first()? & 0x7f;
        let at = |i: usize| sense.get(i).copied().unwrap_or(0);
        match code {
            Self::FIXED_CURRENT | Self::FIXED_DEFERRED => {
                let valid = sense.first()? & 0x80 != 0;
                let info = sense.get(3..7).and_then(|b| <[u8; 4]>::try_from(b).ok());
                Some(SenseData {
                    code: SenseCode {
                        key: SenseKey(sense.get(2)? & 0x0f),
                        asc: at(12),
                        ascq: at(13),
                    },
                    information: if valid {
                        info.map(|b| u64::from(u32::from_be_bytes(b)))
                    } else {
                        None
                    },
                })
            }
            Self::DESCRIPTOR_CURRENT | Self::DESCRIPTOR_DEFERRED => {
                let mut information = None;
                let mut descs = sense.get(8..).unwrap_or(&[]);
                while let (Some(&t), Some(&l)) = (descs.first(), descs.get(1)) {
                    let body = descs.get(2..2 + usize::from(l)).unwrap_or(&[]);
                    // Information descriptor (SPC-5 §4.4.2.2).
                    if t == 0 {
                        information = body
                            .get(2..10)
                            .and_then(|b| <[u8; 8]>::try_from(b).ok())
                            .map(u64::from_be_bytes);
                    }
                    descs = descs.get(2 + usize::from(l)..).unwrap_or(&[]);
                }
                Some(SenseData {
                    code: SenseCode {
                        key: SenseKey(sense.get(1)? & 0x0f),
                        asc: at(2),
                        ascq: at(3),
                    },
                    information,
                })
            }
            _ => None,
        }
    }
}

impl fmt::Display for SenseData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.code.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn fixed_format() {
        let mut s = [0u8; 18];
        s[0] = 0xf0; // VALID, current error
        s[2] = 0x03;
        s[3..7].copy_from_slice(&0x1234u32.to_be_bytes());
        s[7] = 10;
        s[12] = 0x11;
        let d = SenseData::parse(&s).unwrap();
        assert_eq!(
            d.code,
            SenseCode::new(SenseKey::MEDIUM_ERROR, Asc::UNRECOVERED_READ_ERROR)
        );
        assert_eq!(d.information, Some(0x1234));
        s[0] = 0x70;
        assert_eq!(SenseData::parse(&s).unwrap().information, None);
    }

    #[test]
    fn descriptor_format() {
        let mut s = std::vec![0x72, 0x05, 0x24, 0x00, 0, 0, 0, 12];
        s.extend_from_slice(&[0x00, 0x0a, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 7]);
        let d = SenseData::parse(&s).unwrap();
        assert_eq!(d.code.key, SenseKey::ILLEGAL_REQUEST);
        assert_eq!(d.code.asc_ascq(), Asc::INVALID_FIELD_IN_CDB);
        assert_eq!(d.information, Some(7));
    }

    #[test]
    fn short_or_unknown() {
        assert_eq!(SenseCode::parse(&[]), None);
        assert_eq!(SenseCode::parse(&[0x70, 0]), None);
        assert_eq!(SenseCode::parse(&[0x7f, 0, 6]), None);
        // The key alone is enough; ASC/ASCQ read as zero.
        assert_eq!(
            SenseCode::parse(&[0x72, 0x06]),
            Some(SenseCode::new(
                SenseKey::UNIT_ATTENTION,
                Asc::NO_ADDITIONAL_SENSE
            ))
        );
    }

    #[test]
    fn display() {
        let c = SenseCode::new(SenseKey::ILLEGAL_REQUEST, Asc::INVALID_FIELD_IN_CDB);
        assert_eq!(
            format!("{c}"),
            "ILLEGAL REQUEST (key 0x5), ASC/ASCQ 0x24/0x00"
        );
        assert_eq!(
            format!("{}", Asc::I_T_NEXUS_LOSS_OCCURRED),
            "I_T NEXUS LOSS OCCURRED"
        );
        assert_eq!(format!("{}", Asc(0x99, 1)), "ASC/ASCQ 0x99/0x01");
        assert_eq!(format!("{:?}", Asc(0x99, 1)), "Asc(0x99, 0x01)");
        assert_eq!(
            format!("{:?}", SenseKey::MISCOMPARE),
            "SenseKey(MISCOMPARE)"
        );
        assert_eq!(SenseKey(0x6).name(), Some("UNIT ATTENTION"));
    }
}
