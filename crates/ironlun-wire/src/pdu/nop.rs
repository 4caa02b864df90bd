//! NOP-Out and NOP-In (RFC 7143 §11.18, §11.19): ping and keep-alive,
//! each declared once.

use super::fields::{
    Lun, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FINAL, IMMEDIATE, ITT, LUN, MAX_CMD_SN, STAT_SN, TTT,
};

pdu! {
    /// NOP-Out (RFC 7143 §11.18).
    pub struct NopOut {
        pub immediate: bool = IMMEDIATE,
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub ttt: u32 = TTT,
        pub cmd_sn: u32 = CMD_SN,
        pub exp_stat_sn: u32 = EXP_STAT_SN,
    }
    always { FINAL => true, }
}

pdu! {
    /// NOP-In (RFC 7143 §11.19).
    pub struct NopIn {
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub ttt: u32 = TTT,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
    }
    always { FINAL => true, }
}
