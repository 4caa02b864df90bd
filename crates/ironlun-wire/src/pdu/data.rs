//! SCSI Data-Out, SCSI Data-In and Ready To Transfer (RFC 7143 §11.7,
//! §11.8): the PDUs that move a command's data, each declared once.
//! Data-In is on the hot path: plain loads and stores of constant
//! offsets, no allocation.

use super::fields::{
    Codec, Flag, Lun, Residual, ResidualAt, Word, EXP_CMD_SN, EXP_STAT_SN, FINAL, FLAGS, ITT, LUN,
    MAX_CMD_SN, STAT_SN, TTT,
};
use crate::bhs::Bhs;
use crate::WireError;
use ironlun_scsi_codes::Status;

/// DataSN of Data-In/Data-Out (§11.7.5), R2TSN of R2T (§11.8.3).
const DATA_SN: Word = Word(36);
/// Buffer Offset (§11.7.6, §11.8.4).
const BUFFER_OFFSET: Word = Word(40);
/// R2T's Desired Data Transfer Length (§11.8.5).
const DESIRED_DATA_TRANSFER_LENGTH: Word = Word(44);
/// Data-In's A (acknowledge) bit (§11.7.2) and residual (§11.7.5).
const ACK: Flag = Flag(FLAGS, 0x40);
const RESIDUAL: ResidualAt = ResidualAt {
    shift: 0,
    count: 44,
};

/// Data-In's status: byte 3, valid when the S bit is set (§11.7.3,
/// §11.7.4).
struct StatusIfS;

const S_BIT: Flag = Flag(FLAGS, 0x01);
const STATUS: usize = 3;

impl Codec<Option<Status>> for StatusIfS {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<Option<Status>, WireError> {
        Ok(S_BIT.get(b)?.then(|| Status(b.byte(STATUS))))
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &Option<Status>) {
        S_BIT.put(b, &v.is_some());
        b.set_byte(STATUS, v.map_or(0, |s| s.0));
    }
}

pdu! {
    /// SCSI Data-Out (RFC 7143 §11.7).
    pub struct DataOut {
        pub final_bit: bool = FINAL,
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub ttt: u32 = TTT,
        pub exp_stat_sn: u32 = EXP_STAT_SN,
        pub data_sn: u32 = DATA_SN,
        pub buffer_offset: u32 = BUFFER_OFFSET,
    }
}

pdu! {
    /// SCSI Data-In (RFC 7143 §11.7).
    pub struct DataIn {
        pub final_bit: bool = FINAL,
        pub ack: bool = ACK,
        pub residual: Residual = RESIDUAL,
        /// `Some(status)` when the S bit is set: status is phase-collapsed
        /// into this PDU (RFC 7143 §11.7.4).
        pub status: Option<Status> = StatusIfS,
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub ttt: u32 = TTT,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
        pub data_sn: u32 = DATA_SN,
        pub buffer_offset: u32 = BUFFER_OFFSET,
    }
}

pdu! {
    /// Ready To Transfer (RFC 7143 §11.8).
    pub struct R2t {
        pub lun: Lun = LUN,
        pub itt: u32 = ITT,
        pub ttt: u32 = TTT,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
        pub r2t_sn: u32 = DATA_SN,
        pub buffer_offset: u32 = BUFFER_OFFSET,
        pub desired_data_transfer_length: u32 = DESIRED_DATA_TRANSFER_LENGTH,
    }
    always { FINAL => true, }
}
