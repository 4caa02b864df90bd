//! Logout Request and Logout Response (RFC 7143 §11.14, §11.15), each
//! declared once.

use super::fields::{
    Bits, Byte, Half, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FINAL, FLAGS, IMMEDIATE, ITT, MAX_CMD_SN,
    STAT_SN,
};
use crate::codes::{LogoutReason, LogoutResult};

/// Byte 1 bits 0..6: the Reason Code (§11.14.1).
const REASON: Bits = Bits {
    at: FLAGS,
    mask: 0x7f,
    shift: 0,
};
/// CID of a request (§11.14.2).
const CID: Half = Half(20);
/// The Response byte (§11.15.1), Time2Wait and Time2Retain (§11.15.2,
/// §11.15.3).
const RESPONSE: Byte = Byte(2);
const TIME2WAIT: Half = Half(40);
const TIME2RETAIN: Half = Half(42);

pdu! {
    /// Logout Request (RFC 7143 §11.14).
    pub struct LogoutRequest {
        pub immediate: bool = IMMEDIATE,
        pub reason: LogoutReason = REASON,
        pub itt: u32 = ITT,
        pub cid: u16 = CID,
        pub cmd_sn: u32 = CMD_SN,
        pub exp_stat_sn: u32 = EXP_STAT_SN,
    }
    always { FINAL => true, }
}

pdu! {
    /// Logout Response (RFC 7143 §11.15).
    pub struct LogoutResponse {
        pub response: LogoutResult = RESPONSE,
        pub itt: u32 = ITT,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
        pub time2wait: u16 = TIME2WAIT,
        pub time2retain: u16 = TIME2RETAIN,
    }
    always { FINAL => true, }
}
