//! Logout Request and Logout Response (RFC 7143 §11.14, §11.15), each
//! header's fields decoded beside their encoding.

use super::fields::{CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FLAGS, F_BIT, MAX_CMD_SN, STAT_SN, TTT};
use super::Layout;
use crate::bhs::Bhs;
use crate::codes::{LogoutReason, LogoutResult};
use crate::WireError;

/// Byte 1 bits 0..6: the Reason Code (§11.14.1).
const REASON_MASK: u8 = 0x7f;
/// CID of a request (§11.14.2), where other requests carry the TTT.
const CID: usize = TTT;
/// The Response byte (§11.15.1).
const RESPONSE: usize = 2;
/// Time2Wait and Time2Retain (§11.15.2, §11.15.3).
const TIME2WAIT: usize = 40;
const TIME2RETAIN: usize = 42;

/// Logout Request (RFC 7143 §11.14).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LogoutRequest {
    pub immediate: bool,
    pub reason: LogoutReason,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl Layout for LogoutRequest {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(LogoutRequest {
            immediate: b.immediate(),
            reason: LogoutReason(b.byte(FLAGS) & REASON_MASK),
            itt: b.itt(),
            cid: b.be16(CID),
            cmd_sn: b.be32(CMD_SN),
            exp_stat_sn: b.be32(EXP_STAT_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_immediate(self.immediate);
        b.set_byte(FLAGS, F_BIT | (self.reason.0 & REASON_MASK));
        b.set_itt(self.itt);
        b.set_be16(CID, self.cid);
        b.set_be32(CMD_SN, self.cmd_sn);
        b.set_be32(EXP_STAT_SN, self.exp_stat_sn);
    }
}

/// Logout Response (RFC 7143 §11.15).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LogoutResponse {
    pub response: LogoutResult,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub time2wait: u16,
    pub time2retain: u16,
}

impl Layout for LogoutResponse {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(LogoutResponse {
            response: LogoutResult(b.byte(RESPONSE)),
            itt: b.itt(),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
            time2wait: b.be16(TIME2WAIT),
            time2retain: b.be16(TIME2RETAIN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(FLAGS, F_BIT);
        b.set_byte(RESPONSE, self.response.0);
        b.set_itt(self.itt);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
        b.set_be16(TIME2WAIT, self.time2wait);
        b.set_be16(TIME2RETAIN, self.time2retain);
    }
}
