//! Task Management Function Request and Response (RFC 7143 §11.5,
//! §11.6), each declared once.

use super::fields::{
    Bits, Byte, Lun, Word, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FINAL, FLAGS, IMMEDIATE, ITT, LUN,
    MAX_CMD_SN, STAT_SN,
};
use crate::codes::{TmfFunction, TmfResponse};

/// Byte 1 bits 0..6: the Function (§11.5.1).
const FUNCTION: Bits = Bits {
    at: FLAGS,
    mask: 0x7f,
    shift: 0,
};
/// Referenced Task Tag (§11.5.2), RefCmdSN (§11.5.3), ExpDataSN
/// (§11.5.4).
const REFERENCED_TASK_TAG: Word = Word(20);
const REF_CMD_SN: Word = Word(32);
const EXP_DATA_SN: Word = Word(36);
/// The Response byte (§11.6.1).
const RESPONSE: Byte = Byte(2);

pdu! {
    /// Task Management Function Request (RFC 7143 §11.5).
    pub struct TaskMgmtRequest {
        pub immediate: bool = IMMEDIATE,
        pub function: TmfFunction = FUNCTION,
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub referenced_task_tag: u32 = REFERENCED_TASK_TAG,
        pub cmd_sn: u32 = CMD_SN,
        pub exp_stat_sn: u32 = EXP_STAT_SN,
        pub ref_cmd_sn: u32 = REF_CMD_SN,
        pub exp_data_sn: u32 = EXP_DATA_SN,
    }
    always { FINAL => true, }
}

pdu! {
    /// Task Management Function Response (RFC 7143 §11.6).
    pub struct TaskMgmtResponse {
        pub response: TmfResponse = RESPONSE,
        pub itt: u32 = ITT,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
    }
    always { FINAL => true, }
}
