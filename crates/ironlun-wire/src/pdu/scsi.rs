//! SCSI Command and SCSI Response (RFC 7143 §11.3, §11.4): the command
//! a task starts with and the status it ends with, each header's fields
//! decoded beside their encoding. This and [`super::data`] are the hot
//! path: plain loads and stores, no allocation.

use super::fields::{
    flag, Lun, Residual, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FLAGS, F_BIT, MAX_CMD_SN, STAT_SN,
};
use super::Layout;
use crate::bhs::Bhs;
use crate::codes::ServiceResponse;
use crate::WireError;
use ironlun_scsi_codes::Status;

/// SCSI Command's own fields (RFC 7143 §11.3).
mod cmd {
    /// Byte 1: R (read) bit.
    pub const R_BIT: u8 = 0x40;
    /// Byte 1: W (write) bit.
    pub const W_BIT: u8 = 0x20;
    /// Byte 1 bits 0..2: task attribute (§11.3.1.3).
    pub const ATTR_MASK: u8 = 0x07;
    pub const EXPECTED_DATA_TRANSFER_LENGTH: usize = 20;
    pub const CDB: usize = 32;
    pub const CDB_LEN: usize = 16;
}

/// SCSI Response's own fields (RFC 7143 §11.4).
mod rsp {
    pub const RESPONSE: usize = 2;
    pub const STATUS: usize = 3;
    pub const SNACK_TAG: usize = 20;
    pub const EXP_DATA_SN: usize = 36;
    pub const BIDI_RESIDUAL_COUNT: usize = 40;
    pub const RESIDUAL_COUNT: usize = 44;
    /// The bidirectional o/u bits sit two places above the O/U bits.
    pub const BIDI_SHIFT: u8 = 2;
}

/// SCSI Command (RFC 7143 §11.3).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ScsiCommand {
    pub immediate: bool,
    pub final_bit: bool,
    pub read: bool,
    pub write: bool,
    /// Task attribute, byte 1 bits 0..2 (RFC 7143 §11.3.1.3).
    pub attr: u8,
    pub lun: Lun,
    pub itt: u32,
    pub expected_data_transfer_length: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub cdb: [u8; 16],
}

impl Layout for ScsiCommand {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        let b1 = b.byte(FLAGS);
        let mut cdb = [0u8; cmd::CDB_LEN];
        cdb.copy_from_slice(b.bytes(cmd::CDB, cmd::CDB_LEN));
        Ok(ScsiCommand {
            immediate: b.immediate(),
            final_bit: b1 & F_BIT != 0,
            read: b1 & cmd::R_BIT != 0,
            write: b1 & cmd::W_BIT != 0,
            attr: b1 & cmd::ATTR_MASK,
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            expected_data_transfer_length: b.be32(cmd::EXPECTED_DATA_TRANSFER_LENGTH),
            cmd_sn: b.be32(CMD_SN),
            exp_stat_sn: b.be32(EXP_STAT_SN),
            cdb,
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_immediate(self.immediate);
        b.set_byte(
            FLAGS,
            flag(self.final_bit, F_BIT)
                | flag(self.read, cmd::R_BIT)
                | flag(self.write, cmd::W_BIT)
                | (self.attr & cmd::ATTR_MASK),
        );
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(
            cmd::EXPECTED_DATA_TRANSFER_LENGTH,
            self.expected_data_transfer_length,
        );
        b.set_be32(CMD_SN, self.cmd_sn);
        b.set_be32(EXP_STAT_SN, self.exp_stat_sn);
        b.bytes_mut(cmd::CDB, cmd::CDB_LEN)
            .copy_from_slice(&self.cdb);
    }
}

/// SCSI Response (RFC 7143 §11.4).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ScsiResponse {
    pub bidi_residual: Residual,
    pub residual: Residual,
    /// iSCSI service response (RFC 7143 §11.4.3).
    pub response: ServiceResponse,
    /// SCSI status (RFC 7143 §11.4.2, SAM-5 §5.3).
    pub status: Status,
    pub itt: u32,
    pub snack_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub exp_data_sn: u32,
}

impl Layout for ScsiResponse {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        let b1 = b.byte(FLAGS);
        Ok(ScsiResponse {
            bidi_residual: Residual::from_bits(
                b1 >> rsp::BIDI_SHIFT,
                b.be32(rsp::BIDI_RESIDUAL_COUNT),
            )?,
            residual: Residual::from_bits(b1, b.be32(rsp::RESIDUAL_COUNT))?,
            response: ServiceResponse(b.byte(rsp::RESPONSE)),
            status: Status(b.byte(rsp::STATUS)),
            itt: b.itt(),
            snack_tag: b.be32(rsp::SNACK_TAG),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
            exp_data_sn: b.be32(rsp::EXP_DATA_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(
            FLAGS,
            F_BIT | (self.bidi_residual.flag_bits() << rsp::BIDI_SHIFT) | self.residual.flag_bits(),
        );
        b.set_byte(rsp::RESPONSE, self.response.0);
        b.set_byte(rsp::STATUS, self.status.0);
        b.set_itt(self.itt);
        b.set_be32(rsp::SNACK_TAG, self.snack_tag);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
        b.set_be32(rsp::EXP_DATA_SN, self.exp_data_sn);
        b.set_be32(rsp::BIDI_RESIDUAL_COUNT, self.bidi_residual.count());
        b.set_be32(rsp::RESIDUAL_COUNT, self.residual.count());
    }
}
