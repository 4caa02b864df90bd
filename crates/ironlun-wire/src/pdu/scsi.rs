//! SCSI Command and SCSI Response (RFC 7143 §11.3, §11.4): the command
//! a task starts with and the status it ends with, each declared once.
//! This and [`super::data`] are the hot path: plain loads and stores of
//! constant offsets, no allocation.

use super::fields::{
    Bits, Byte, Flag, Lun, Octets, Residual, ResidualAt, Word, CMD_SN, EXP_CMD_SN, EXP_STAT_SN,
    FINAL, FLAGS, IMMEDIATE, ITT, LUN, MAX_CMD_SN, STAT_SN,
};
use crate::codes::ServiceResponse;
use ironlun_scsi_codes::Status;

/// Byte 1: R (read) and W (write) bits (§11.3.1).
const READ: Flag = Flag(FLAGS, 0x40);
const WRITE: Flag = Flag(FLAGS, 0x20);
/// Byte 1 bits 0..2: task attribute (§11.3.1.3).
const ATTR: Bits = Bits {
    at: FLAGS,
    mask: 0x07,
    shift: 0,
};
/// Expected Data Transfer Length (§11.3.5) and the CDB (§11.3.7).
const EXPECTED_DATA_TRANSFER_LENGTH: Word = Word(20);
const CDB: Octets = Octets(32);

/// SCSI Response: Response and Status (§11.4.3, §11.4.2), SNACK Tag
/// (§11.4.4), ExpDataSN (§11.4.8) and the two residuals (§11.4.5,
/// §11.4.6), the bidirectional one's o/u bits two places above O/U.
const RESPONSE: Byte = Byte(2);
const STATUS: Byte = Byte(3);
const SNACK_TAG: Word = Word(20);
const EXP_DATA_SN: Word = Word(36);
const BIDI_RESIDUAL: ResidualAt = ResidualAt {
    shift: 2,
    count: 40,
};
const RESIDUAL: ResidualAt = ResidualAt {
    shift: 0,
    count: 44,
};

pdu! {
    /// SCSI Command (RFC 7143 §11.3).
    pub struct ScsiCommand {
        pub immediate: bool = IMMEDIATE,
        pub final_bit: bool = FINAL,
        pub read: bool = READ,
        pub write: bool = WRITE,
        /// Task attribute, byte 1 bits 0..2 (RFC 7143 §11.3.1.3).
        pub attr: u8 = ATTR,
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub expected_data_transfer_length: u32 = EXPECTED_DATA_TRANSFER_LENGTH,
        pub cmd_sn: u32 = CMD_SN,
        pub exp_stat_sn: u32 = EXP_STAT_SN,
        pub cdb: [u8; 16] = CDB,
    }
}

pdu! {
    /// SCSI Response (RFC 7143 §11.4).
    pub struct ScsiResponse {
        pub bidi_residual: Residual = BIDI_RESIDUAL,
        pub residual: Residual = RESIDUAL,
        /// iSCSI service response (RFC 7143 §11.4.3).
        pub response: ServiceResponse = RESPONSE,
        /// SCSI status (RFC 7143 §11.4.2, SAM-5 §5.3).
        pub status: Status = STATUS,
        pub itt: u32 = ITT,
        pub snack_tag: u32 = SNACK_TAG,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
        pub exp_data_sn: u32 = EXP_DATA_SN,
    }
    always { FINAL => true, }
}
