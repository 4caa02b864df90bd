//! Asynchronous Message (RFC 7143 §11.9): an event the target announces
//! unasked; declared once.

use super::fields::{
    Byte, Half, Lun, EXP_CMD_SN, FINAL, ITT, LUN, MAX_CMD_SN, RESERVED_TAG, STAT_SN,
};
use crate::codes::AsyncEvent;

/// AsyncEvent and AsyncVCode (§11.9.1, §11.9.2), Parameter1..3
/// (§11.9.1).
const ASYNC_EVENT: Byte = Byte(36);
const ASYNC_VCODE: Byte = Byte(37);
const PARAMETER1: Half = Half(38);
const PARAMETER2: Half = Half(40);
const PARAMETER3: Half = Half(42);

pdu! {
    /// Asynchronous Message (RFC 7143 §11.9).
    pub struct AsyncMessage {
        pub lun: Lun = LUN,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
        pub async_event: AsyncEvent = ASYNC_EVENT,
        pub async_vcode: u8 = ASYNC_VCODE,
        pub parameter1: u16 = PARAMETER1,
        pub parameter2: u16 = PARAMETER2,
        pub parameter3: u16 = PARAMETER3,
    }
    // The ITT is reserved: no task (§11.9).
    always { FINAL => true, ITT => RESERVED_TAG, }
}
