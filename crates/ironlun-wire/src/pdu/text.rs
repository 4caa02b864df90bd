//! Text Request and Text Response headers (RFC 7143 §11.10, §11.11),
//! each declared once. The key=value segment they carry is
//! [`crate::text`]'s.

use super::fields::{
    Flag, Lun, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FINAL, FLAGS, IMMEDIATE, ITT, LUN, MAX_CMD_SN,
    STAT_SN, TTT,
};

/// Byte 1: C (continue) bit (§11.10.2).
const CONTINUE: Flag = Flag(FLAGS, 0x40);

pdu! {
    /// Text Request (RFC 7143 §11.10).
    pub struct TextRequest {
        pub immediate: bool = IMMEDIATE,
        pub final_bit: bool = FINAL,
        pub cont: bool = CONTINUE,
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub ttt: u32 = TTT,
        pub cmd_sn: u32 = CMD_SN,
        pub exp_stat_sn: u32 = EXP_STAT_SN,
    }
}

pdu! {
    /// Text Response (RFC 7143 §11.11).
    pub struct TextResponse {
        pub final_bit: bool = FINAL,
        pub cont: bool = CONTINUE,
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub ttt: u32 = TTT,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
    }
}
