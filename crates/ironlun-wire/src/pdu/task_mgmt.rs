//! Task Management Function Request and Response (RFC 7143 §11.5,
//! §11.6), each header's fields decoded beside their encoding.

use super::fields::{Lun, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FLAGS, F_BIT, MAX_CMD_SN, STAT_SN, TTT};
use super::Layout;
use crate::bhs::Bhs;
use crate::codes::{TmfFunction, TmfResponse};
use crate::WireError;

/// Byte 1 bits 0..6: the Function (§11.5.1).
const FUNCTION_MASK: u8 = 0x7f;
/// Referenced Task Tag (§11.5.2), where other requests carry the TTT.
const REFERENCED_TASK_TAG: usize = TTT;
/// RefCmdSN (§11.5.3).
const REF_CMD_SN: usize = 32;
/// ExpDataSN (§11.5.4).
const EXP_DATA_SN: usize = 36;
/// The Response byte (§11.6.1).
const RESPONSE: usize = 2;

/// Task Management Function Request (RFC 7143 §11.5).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TaskMgmtRequest {
    pub immediate: bool,
    pub function: TmfFunction,
    pub lun: Lun,
    pub itt: u32,
    pub referenced_task_tag: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub ref_cmd_sn: u32,
    pub exp_data_sn: u32,
}

impl Layout for TaskMgmtRequest {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(TaskMgmtRequest {
            immediate: b.immediate(),
            function: TmfFunction(b.byte(FLAGS) & FUNCTION_MASK),
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            referenced_task_tag: b.be32(REFERENCED_TASK_TAG),
            cmd_sn: b.be32(CMD_SN),
            exp_stat_sn: b.be32(EXP_STAT_SN),
            ref_cmd_sn: b.be32(REF_CMD_SN),
            exp_data_sn: b.be32(EXP_DATA_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_immediate(self.immediate);
        b.set_byte(FLAGS, F_BIT | (self.function.0 & FUNCTION_MASK));
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(REFERENCED_TASK_TAG, self.referenced_task_tag);
        b.set_be32(CMD_SN, self.cmd_sn);
        b.set_be32(EXP_STAT_SN, self.exp_stat_sn);
        b.set_be32(REF_CMD_SN, self.ref_cmd_sn);
        b.set_be32(EXP_DATA_SN, self.exp_data_sn);
    }
}

/// Task Management Function Response (RFC 7143 §11.6).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TaskMgmtResponse {
    pub response: TmfResponse,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl Layout for TaskMgmtResponse {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(TaskMgmtResponse {
            response: TmfResponse(b.byte(RESPONSE)),
            itt: b.itt(),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(FLAGS, F_BIT);
        b.set_byte(RESPONSE, self.response.0);
        b.set_itt(self.itt);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
    }
}
