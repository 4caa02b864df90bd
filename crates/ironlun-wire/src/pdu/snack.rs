//! SNACK Request (RFC 7143 §11.16): the initiator asks for PDUs again;
//! its fields decoded beside their encoding.

use super::fields::{Lun, EXP_STAT_SN, FLAGS, F_BIT, TTT};
use super::Layout;
use crate::bhs::Bhs;
use crate::codes::SnackType;
use crate::WireError;

/// Byte 1 bits 0..3: the Type (§11.16.1).
const TYPE_MASK: u8 = 0x0f;
/// BegRun and RunLength (§11.16.4, §11.16.5).
const BEG_RUN: usize = 40;
const RUN_LENGTH: usize = 44;

/// SNACK Request (RFC 7143 §11.16).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SnackRequest {
    pub snack_type: SnackType,
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub exp_stat_sn: u32,
    pub beg_run: u32,
    pub run_length: u32,
}

impl Layout for SnackRequest {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(SnackRequest {
            snack_type: SnackType(b.byte(FLAGS) & TYPE_MASK),
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            ttt: b.be32(TTT),
            exp_stat_sn: b.be32(EXP_STAT_SN),
            beg_run: b.be32(BEG_RUN),
            run_length: b.be32(RUN_LENGTH),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(FLAGS, F_BIT | (self.snack_type.0 & TYPE_MASK));
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(TTT, self.ttt);
        b.set_be32(EXP_STAT_SN, self.exp_stat_sn);
        b.set_be32(BEG_RUN, self.beg_run);
        b.set_be32(RUN_LENGTH, self.run_length);
    }
}
