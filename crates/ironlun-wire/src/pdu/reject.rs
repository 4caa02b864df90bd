//! Reject (RFC 7143 §11.17): the target refuses a PDU and quotes its
//! header in the data segment; declared once.

use super::fields::{Byte, Word, EXP_CMD_SN, FINAL, ITT, MAX_CMD_SN, RESERVED_TAG, STAT_SN};
use crate::codes::RejectReason;

/// The Reason byte (§11.17.1) and DataSN/R2TSN (§11.17.2).
const REASON: Byte = Byte(2);
const DATA_SN_OR_R2T_SN: Word = Word(36);

pdu! {
    /// Reject (RFC 7143 §11.17). The data segment carries the rejected
    /// header.
    pub struct Reject {
        pub reason: RejectReason = REASON,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
        pub data_sn_or_r2t_sn: u32 = DATA_SN_OR_R2T_SN,
    }
    // The ITT is reserved (§11.17).
    always { FINAL => true, ITT => RESERVED_TAG, }
}
