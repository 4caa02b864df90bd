//! Reject (RFC 7143 §11.17): the target refuses a PDU and quotes its
//! header in the data segment; the fields decoded beside their encoding.

use super::fields::{EXP_CMD_SN, FLAGS, F_BIT, MAX_CMD_SN, RESERVED_TAG, STAT_SN};
use super::Layout;
use crate::bhs::Bhs;
use crate::codes::RejectReason;
use crate::WireError;

/// The Reason byte (§11.17.1).
const REASON: usize = 2;
/// DataSN/R2TSN (§11.17.2).
const DATA_SN_OR_R2T_SN: usize = 36;

/// Reject (RFC 7143 §11.17). The data segment carries the rejected header.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Reject {
    pub reason: RejectReason,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn_or_r2t_sn: u32,
}

impl Layout for Reject {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(Reject {
            reason: RejectReason(b.byte(REASON)),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
            data_sn_or_r2t_sn: b.be32(DATA_SN_OR_R2T_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(FLAGS, F_BIT);
        b.set_byte(REASON, self.reason.0);
        // The ITT is reserved (§11.17).
        b.set_itt(RESERVED_TAG);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
        b.set_be32(DATA_SN_OR_R2T_SN, self.data_sn_or_r2t_sn);
    }
}
