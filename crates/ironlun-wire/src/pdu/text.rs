//! Text Request and Text Response headers (RFC 7143 §11.10, §11.11),
//! each header's fields decoded beside their encoding. The key=value
//! segment they carry is [`crate::text`]'s.

use super::fields::{
    flag, Lun, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FLAGS, F_BIT, MAX_CMD_SN, STAT_SN, TTT,
};
use super::Layout;
use crate::bhs::Bhs;
use crate::WireError;

/// Byte 1: C (continue) bit (§11.10.2).
const C_BIT: u8 = 0x40;

/// Text Request (RFC 7143 §11.10).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TextRequest {
    pub immediate: bool,
    pub final_bit: bool,
    pub cont: bool,
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl Layout for TextRequest {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        let b1 = b.byte(FLAGS);
        Ok(TextRequest {
            immediate: b.immediate(),
            final_bit: b1 & F_BIT != 0,
            cont: b1 & C_BIT != 0,
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            ttt: b.be32(TTT),
            cmd_sn: b.be32(CMD_SN),
            exp_stat_sn: b.be32(EXP_STAT_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_immediate(self.immediate);
        b.set_byte(FLAGS, flag(self.final_bit, F_BIT) | flag(self.cont, C_BIT));
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(TTT, self.ttt);
        b.set_be32(CMD_SN, self.cmd_sn);
        b.set_be32(EXP_STAT_SN, self.exp_stat_sn);
    }
}

/// Text Response (RFC 7143 §11.11).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TextResponse {
    pub final_bit: bool,
    pub cont: bool,
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl Layout for TextResponse {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        let b1 = b.byte(FLAGS);
        Ok(TextResponse {
            final_bit: b1 & F_BIT != 0,
            cont: b1 & C_BIT != 0,
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            ttt: b.be32(TTT),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(FLAGS, flag(self.final_bit, F_BIT) | flag(self.cont, C_BIT));
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(TTT, self.ttt);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
    }
}
