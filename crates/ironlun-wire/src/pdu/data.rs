//! SCSI Data-Out, SCSI Data-In and Ready To Transfer (RFC 7143 §11.7,
//! §11.8): the PDUs that move a command's data, each header's fields
//! decoded beside their encoding. Data-In is on the hot path: plain loads
//! and stores, no allocation.

use super::fields::{
    flag, Lun, Residual, EXP_CMD_SN, EXP_STAT_SN, FLAGS, F_BIT, MAX_CMD_SN, STAT_SN, TTT,
};
use super::Layout;
use crate::bhs::Bhs;
use crate::WireError;
use ironlun_scsi_codes::Status;

/// DataSN of Data-In/Data-Out, R2TSN of R2T (§11.7.5, §11.8.3).
const DATA_SN: usize = 36;
/// Buffer Offset (§11.7.6, §11.8.4).
const BUFFER_OFFSET: usize = 40;
/// Data-In's Residual Count; R2T's Desired Data Transfer Length.
const WORD_44: usize = 44;
/// Data-In byte 1: A (acknowledge) bit (§11.7.2).
const A_BIT: u8 = 0x40;
/// Data-In byte 1: S (status) bit (§11.7.3).
const S_BIT: u8 = 0x01;
/// Data-In: status, valid with the S bit (§11.7.4).
const STATUS: usize = 3;

/// SCSI Data-Out (RFC 7143 §11.7).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DataOut {
    pub final_bit: bool,
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub exp_stat_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
}

impl Layout for DataOut {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(DataOut {
            final_bit: b.byte(FLAGS) & F_BIT != 0,
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            ttt: b.be32(TTT),
            exp_stat_sn: b.be32(EXP_STAT_SN),
            data_sn: b.be32(DATA_SN),
            buffer_offset: b.be32(BUFFER_OFFSET),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(FLAGS, flag(self.final_bit, F_BIT));
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(TTT, self.ttt);
        b.set_be32(EXP_STAT_SN, self.exp_stat_sn);
        b.set_be32(DATA_SN, self.data_sn);
        b.set_be32(BUFFER_OFFSET, self.buffer_offset);
    }
}

/// SCSI Data-In (RFC 7143 §11.7).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DataIn {
    pub final_bit: bool,
    pub ack: bool,
    pub residual: Residual,
    /// `Some(status)` when the S bit is set: status is phase-collapsed into
    /// this PDU (RFC 7143 §11.7.4).
    pub status: Option<Status>,
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
}

impl Layout for DataIn {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        let b1 = b.byte(FLAGS);
        Ok(DataIn {
            final_bit: b1 & F_BIT != 0,
            ack: b1 & A_BIT != 0,
            residual: Residual::from_bits(b1, b.be32(WORD_44))?,
            status: (b1 & S_BIT != 0).then(|| Status(b.byte(STATUS))),
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            ttt: b.be32(TTT),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
            data_sn: b.be32(DATA_SN),
            buffer_offset: b.be32(BUFFER_OFFSET),
        })
    }

    fn write(&self, b: &mut Bhs) {
        b.set_byte(
            FLAGS,
            flag(self.final_bit, F_BIT)
                | flag(self.ack, A_BIT)
                | self.residual.flag_bits()
                | flag(self.status.is_some(), S_BIT),
        );
        b.set_byte(STATUS, self.status.map_or(0, |s| s.0));
        b.set_lun_raw(self.lun.0);
        b.set_itt(self.itt);
        b.set_be32(TTT, self.ttt);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
        b.set_be32(DATA_SN, self.data_sn);
        b.set_be32(BUFFER_OFFSET, self.buffer_offset);
        b.set_be32(WORD_44, self.residual.count());
    }
}

/// Ready To Transfer (RFC 7143 §11.8).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct R2t {
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub r2t_sn: u32,
    pub buffer_offset: u32,
    pub desired_data_transfer_length: u32,
}

impl Layout for R2t {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        Ok(R2t {
            lun: Lun(b.lun_raw()),
            itt: b.itt(),
            ttt: b.be32(TTT),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
            r2t_sn: b.be32(DATA_SN),
            buffer_offset: b.be32(BUFFER_OFFSET),
            desired_data_transfer_length: b.be32(WORD_44),
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
        b.set_be32(DATA_SN, self.r2t_sn);
        b.set_be32(BUFFER_OFFSET, self.buffer_offset);
        b.set_be32(WORD_44, self.desired_data_transfer_length);
    }
}
