//! NOP-Out and NOP-In (RFC 7143 §11.18, §11.19): ping and keep-alive,
//! each header's fields decoded beside their encoding.

use super::fields::{Lun, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FLAGS, F_BIT, MAX_CMD_SN, STAT_SN, TTT};
use super::Layout;
use crate::bhs::Bhs;
use crate::WireError;

/// NOP-Out (RFC 7143 §11.18).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NopOut {
    pub immediate: bool,
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl Layout for NopOut {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(NopOut {
            immediate: b.immediate(),
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            ttt: b.be32(TTT),
            cmd_sn: b.be32(CMD_SN),
            exp_stat_sn: b.be32(EXP_STAT_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_immediate(self.immediate);
        b.set_byte(FLAGS, F_BIT);
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(TTT, self.ttt);
        b.set_be32(CMD_SN, self.cmd_sn);
        b.set_be32(EXP_STAT_SN, self.exp_stat_sn);
    }
}

/// NOP-In (RFC 7143 §11.19).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NopIn {
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

impl Layout for NopIn {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(NopIn {
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            ttt: b.be32(TTT),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(FLAGS, F_BIT);
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(TTT, self.ttt);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
    }
}
