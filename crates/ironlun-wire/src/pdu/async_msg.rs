//! Asynchronous Message (RFC 7143 §11.9): an event the target announces
//! unasked; its fields decoded beside their encoding.

use super::fields::{Lun, EXP_CMD_SN, FLAGS, F_BIT, MAX_CMD_SN, RESERVED_TAG, STAT_SN};
use super::Layout;
use crate::bhs::Bhs;
use crate::codes::AsyncEvent;
use crate::WireError;

/// AsyncEvent and AsyncVCode (§11.9.1, §11.9.2).
const ASYNC_EVENT: usize = 36;
const ASYNC_VCODE: usize = 37;
/// Parameter1..3 (§11.9.1).
const PARAMETER1: usize = 38;
const PARAMETER2: usize = 40;
const PARAMETER3: usize = 42;

/// Asynchronous Message (RFC 7143 §11.9).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AsyncMessage {
    pub lun: Lun,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub async_event: AsyncEvent,
    pub async_vcode: u8,
    pub parameter1: u16,
    pub parameter2: u16,
    pub parameter3: u16,
}

impl Layout for AsyncMessage {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(AsyncMessage {
            lun: Lun(b.lun_raw()),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
            async_event: AsyncEvent(b.byte(ASYNC_EVENT)),
            async_vcode: b.byte(ASYNC_VCODE),
            parameter1: b.be16(PARAMETER1),
            parameter2: b.be16(PARAMETER2),
            parameter3: b.be16(PARAMETER3),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(FLAGS, F_BIT);
        b.set_lun_raw(self.lun.0);
        // The ITT is reserved: no task (§11.9).
        b.set_itt(RESERVED_TAG);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
        b.set_byte(ASYNC_EVENT, self.async_event.0);
        b.set_byte(ASYNC_VCODE, self.async_vcode);
        b.set_be16(PARAMETER1, self.parameter1);
        b.set_be16(PARAMETER2, self.parameter2);
        b.set_be16(PARAMETER3, self.parameter3);
    }
}
