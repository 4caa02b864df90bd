//! Typed views of every RFC 7143 PDU header (RFC 7143 §11.3–§11.19).
//!
//! Each type decodes from and encodes to a [`Bhs`]. The data segment and the
//! AHS travel beside the header in a [`crate::Frame`]; lengths are filled in
//! by the frame encoder, so these types never disagree with the bytes sent.

use crate::bhs::{Bhs, Opcode};
use crate::codes::{AsyncEvent, RejectReason, TmfFunction, TmfResponse};
use crate::WireError;

/// Reserved tag value meaning "no task" (RFC 7143 §11.2.1.8, §11.18.2).
pub const RESERVED_TAG: u32 = 0xffff_ffff;

/// An 8-byte SCSI logical unit number field (SAM-5 §4.7).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Lun(pub [u8; 8]);

impl std::fmt::Debug for Lun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index() {
            Some(i) => write!(f, "Lun({i})"),
            None => write!(f, "Lun({:02x?})", self.0),
        }
    }
}

impl Lun {
    /// Encodes a LUN index with peripheral device addressing below 256 and
    /// flat space addressing above (SAM-5 §4.7.7.2, §4.7.7.4).
    pub fn from_index(n: u16) -> Lun {
        let mut b = [0u8; 8];
        if n < 256 {
            b[1] = n as u8;
        } else {
            let v = n & 0x3fff;
            b[0] = 0x40 | (v >> 8) as u8;
            b[1] = (v & 0xff) as u8;
        }
        Lun(b)
    }

    /// The single-level LUN index, or `None` for an addressing method this
    /// target does not use (which then reaches no logical unit).
    pub fn index(&self) -> Option<u16> {
        let [b0, b1, rest @ ..] = self.0;
        if rest.iter().any(|&b| b != 0) {
            return None;
        }
        match b0 >> 6 {
            0b00 if b0 == 0 => Some(u16::from(b1)),
            0b01 => Some((u16::from(b0 & 0x3f) << 8) | u16::from(b1)),
            _ => None,
        }
    }
}

/// Residual reporting shared by SCSI Response and Data-In
/// (RFC 7143 §11.4.1, §11.7.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Residual {
    #[default]
    None,
    /// The initiator's Expected Data Transfer Length was too small.
    Overflow(u32),
    /// Fewer bytes were transferred than the initiator expected.
    Underflow(u32),
}

impl Residual {
    /// Computes the residual for `transferred` bytes the command wanted to
    /// move against the initiator's expected length.
    pub fn of(expected: u32, wanted: u32) -> Residual {
        use std::cmp::Ordering::*;
        match wanted.cmp(&expected) {
            Greater => Residual::Overflow(wanted - expected),
            Less => Residual::Underflow(expected - wanted),
            Equal => Residual::None,
        }
    }

    pub fn count(self) -> u32 {
        match self {
            Residual::None => 0,
            Residual::Overflow(n) | Residual::Underflow(n) => n,
        }
    }

    /// The O and U bits at bit positions 2 and 1 of byte 1.
    fn flag_bits(self) -> u8 {
        match self {
            Residual::None => 0,
            Residual::Overflow(_) => 0x04,
            Residual::Underflow(_) => 0x02,
        }
    }

    fn from_bits(byte1: u8, count: u32) -> Result<Residual, WireError> {
        match (byte1 & 0x04 != 0, byte1 & 0x02 != 0) {
            (false, false) => Ok(Residual::None),
            (true, false) => Ok(Residual::Overflow(count)),
            (false, true) => Ok(Residual::Underflow(count)),
            (true, true) => Err(WireError::InvalidField("both O and U residual bits set")),
        }
    }
}

// ---------------------------------------------------------------------------
// Initiator PDUs
// ---------------------------------------------------------------------------

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

/// Task Management Function Request (RFC 7143 §11.5).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TaskMgmtRequest {
    pub immediate: bool,
    pub function: TmfFunction,
    pub lun: Lun,
    pub itt: u32,
    pub referenced_task_tag: u32,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    pub ref_cmd_sn: u32,
    pub exp_data_sn: u32,
}

/// Login Request (RFC 7143 §11.12).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LoginRequest {
    pub transit: bool,
    pub cont: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_min: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

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

/// Logout Request (RFC 7143 §11.14).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LogoutRequest {
    pub immediate: bool,
    pub reason: u8,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

/// SNACK Request (RFC 7143 §11.16).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SnackRequest {
    pub snack_type: u8,
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub exp_stat_sn: u32,
    pub beg_run: u32,
    pub run_length: u32,
}

// ---------------------------------------------------------------------------
// Target PDUs
// ---------------------------------------------------------------------------

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

/// SCSI Response (RFC 7143 §11.4).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ScsiResponse {
    pub bidi_residual: Residual,
    pub residual: Residual,
    /// iSCSI service response (RFC 7143 §11.4.3): 0 = command completed.
    pub response: u8,
    /// SCSI status (SAM-5 §5.3).
    pub status: u8,
    pub itt: u32,
    pub snack_tag: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub exp_data_sn: u32,
}

/// Task Management Function Response (RFC 7143 §11.6).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TaskMgmtResponse {
    pub response: TmfResponse,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
}

/// Login Response (RFC 7143 §11.13).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LoginResponse {
    pub transit: bool,
    pub cont: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_active: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub status_class: u8,
    pub status_detail: u8,
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

/// SCSI Data-In (RFC 7143 §11.7).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DataIn {
    pub final_bit: bool,
    pub ack: bool,
    pub residual: Residual,
    /// `Some(status)` when the S bit is set: status is phase-collapsed into
    /// this PDU (RFC 7143 §11.7.4).
    pub status: Option<u8>,
    pub lun: Lun,
    pub itt: u32,
    pub ttt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn: u32,
    pub buffer_offset: u32,
}

/// Logout Response (RFC 7143 §11.15).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LogoutResponse {
    pub response: u8,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub time2wait: u16,
    pub time2retain: u16,
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

/// Asynchronous Message (RFC 7143 §11.9).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AsyncMessage {
    pub lun: Lun,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub async_event: AsyncEvent,
    pub async_vcode: u8,
    pub parameter1: u16,
    pub parameter2: u16,
    pub parameter3: u16,
}

/// Reject (RFC 7143 §11.17). The data segment carries the rejected header.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Reject {
    pub reason: RejectReason,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    pub data_sn_or_r2t_sn: u32,
}

/// Any PDU header, decoded by opcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pdu {
    NopOut(NopOut),
    ScsiCommand(ScsiCommand),
    TaskMgmtRequest(TaskMgmtRequest),
    LoginRequest(LoginRequest),
    TextRequest(TextRequest),
    DataOut(DataOut),
    LogoutRequest(LogoutRequest),
    SnackRequest(SnackRequest),
    NopIn(NopIn),
    ScsiResponse(ScsiResponse),
    TaskMgmtResponse(TaskMgmtResponse),
    LoginResponse(LoginResponse),
    TextResponse(TextResponse),
    DataIn(DataIn),
    LogoutResponse(LogoutResponse),
    R2t(R2t),
    AsyncMessage(AsyncMessage),
    Reject(Reject),
}

impl Pdu {
    /// Decodes the opcode-specific fields of a BHS. Unknown opcodes are an
    /// error that carries the opcode, so the caller can Reject it.
    pub fn decode(b: &Bhs) -> Result<Pdu, WireError> {
        match Pdu::decode_request(b) {
            Some(p) => Ok(p),
            None => Pdu::decode_response(b),
        }
    }

    /// The PDUs an initiator sends (RFC 7143 §11.1.1); `None` for any
    /// other opcode.
    fn decode_request(b: &Bhs) -> Option<Pdu> {
        let op = b.opcode();
        let lun = Lun(b.lun_raw());
        let b1 = b.byte(1);
        Some(match op {
            Opcode::NOP_OUT => Pdu::NopOut(NopOut {
                immediate: b.immediate(),
                lun,
                itt: b.itt(),
                ttt: b.be32(20),
                cmd_sn: b.be32(24),
                exp_stat_sn: b.be32(28),
            }),
            Opcode::SCSI_COMMAND => {
                let mut cdb = [0u8; 16];
                cdb.copy_from_slice(b.bytes(32, 16));
                Pdu::ScsiCommand(ScsiCommand {
                    immediate: b.immediate(),
                    final_bit: b1 & 0x80 != 0,
                    read: b1 & 0x40 != 0,
                    write: b1 & 0x20 != 0,
                    attr: b1 & 0x07,
                    lun,
                    itt: b.itt(),
                    expected_data_transfer_length: b.be32(20),
                    cmd_sn: b.be32(24),
                    exp_stat_sn: b.be32(28),
                    cdb,
                })
            }
            Opcode::TASK_MGMT_REQUEST => Pdu::TaskMgmtRequest(TaskMgmtRequest {
                immediate: b.immediate(),
                function: TmfFunction(b1 & 0x7f),
                lun,
                itt: b.itt(),
                referenced_task_tag: b.be32(20),
                cmd_sn: b.be32(24),
                exp_stat_sn: b.be32(28),
                ref_cmd_sn: b.be32(32),
                exp_data_sn: b.be32(36),
            }),
            Opcode::LOGIN_REQUEST => Pdu::LoginRequest(LoginRequest {
                transit: b1 & 0x80 != 0,
                cont: b1 & 0x40 != 0,
                csg: (b1 >> 2) & 0x03,
                nsg: b1 & 0x03,
                version_max: b.byte(2),
                version_min: b.byte(3),
                isid: isid_of(b),
                tsih: b.be16(14),
                itt: b.itt(),
                cid: b.be16(20),
                cmd_sn: b.be32(24),
                exp_stat_sn: b.be32(28),
            }),
            Opcode::TEXT_REQUEST => Pdu::TextRequest(TextRequest {
                immediate: b.immediate(),
                final_bit: b1 & 0x80 != 0,
                cont: b1 & 0x40 != 0,
                lun,
                itt: b.itt(),
                ttt: b.be32(20),
                cmd_sn: b.be32(24),
                exp_stat_sn: b.be32(28),
            }),
            Opcode::DATA_OUT => Pdu::DataOut(DataOut {
                final_bit: b1 & 0x80 != 0,
                lun,
                itt: b.itt(),
                ttt: b.be32(20),
                exp_stat_sn: b.be32(28),
                data_sn: b.be32(36),
                buffer_offset: b.be32(40),
            }),
            Opcode::LOGOUT_REQUEST => Pdu::LogoutRequest(LogoutRequest {
                immediate: b.immediate(),
                reason: b1 & 0x7f,
                itt: b.itt(),
                cid: b.be16(20),
                cmd_sn: b.be32(24),
                exp_stat_sn: b.be32(28),
            }),
            Opcode::SNACK_REQUEST => Pdu::SnackRequest(SnackRequest {
                snack_type: b1 & 0x0f,
                lun,
                itt: b.itt(),
                ttt: b.be32(20),
                exp_stat_sn: b.be32(28),
                beg_run: b.be32(40),
                run_length: b.be32(44),
            }),
            _ => return None,
        })
    }

    /// The PDUs a target sends (RFC 7143 §11.1.2); an unknown opcode is
    /// an error that carries it.
    fn decode_response(b: &Bhs) -> Result<Pdu, WireError> {
        let op = b.opcode();
        let lun = Lun(b.lun_raw());
        let b1 = b.byte(1);
        Ok(match op {
            Opcode::NOP_IN => Pdu::NopIn(NopIn {
                lun,
                itt: b.itt(),
                ttt: b.be32(20),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
            }),
            Opcode::SCSI_RESPONSE => Pdu::ScsiResponse(ScsiResponse {
                bidi_residual: Residual::from_bits(b1 >> 2, b.be32(40))?,
                residual: Residual::from_bits(b1, b.be32(44))?,
                response: b.byte(2),
                status: b.byte(3),
                itt: b.itt(),
                snack_tag: b.be32(20),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
                exp_data_sn: b.be32(36),
            }),
            Opcode::TASK_MGMT_RESPONSE => Pdu::TaskMgmtResponse(TaskMgmtResponse {
                response: TmfResponse(b.byte(2)),
                itt: b.itt(),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
            }),
            Opcode::LOGIN_RESPONSE => Pdu::LoginResponse(LoginResponse {
                transit: b1 & 0x80 != 0,
                cont: b1 & 0x40 != 0,
                csg: (b1 >> 2) & 0x03,
                nsg: b1 & 0x03,
                version_max: b.byte(2),
                version_active: b.byte(3),
                isid: isid_of(b),
                tsih: b.be16(14),
                itt: b.itt(),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
                status_class: b.byte(36),
                status_detail: b.byte(37),
            }),
            Opcode::TEXT_RESPONSE => Pdu::TextResponse(TextResponse {
                final_bit: b1 & 0x80 != 0,
                cont: b1 & 0x40 != 0,
                lun,
                itt: b.itt(),
                ttt: b.be32(20),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
            }),
            Opcode::DATA_IN => Pdu::DataIn(DataIn {
                final_bit: b1 & 0x80 != 0,
                ack: b1 & 0x40 != 0,
                residual: Residual::from_bits(b1, b.be32(44))?,
                status: (b1 & 0x01 != 0).then(|| b.byte(3)),
                lun,
                itt: b.itt(),
                ttt: b.be32(20),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
                data_sn: b.be32(36),
                buffer_offset: b.be32(40),
            }),
            Opcode::LOGOUT_RESPONSE => Pdu::LogoutResponse(LogoutResponse {
                response: b.byte(2),
                itt: b.itt(),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
                time2wait: b.be16(40),
                time2retain: b.be16(42),
            }),
            Opcode::R2T => Pdu::R2t(R2t {
                lun,
                itt: b.itt(),
                ttt: b.be32(20),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
                r2t_sn: b.be32(36),
                buffer_offset: b.be32(40),
                desired_data_transfer_length: b.be32(44),
            }),
            Opcode::ASYNC_MESSAGE => Pdu::AsyncMessage(AsyncMessage {
                lun,
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
                async_event: AsyncEvent(b.byte(36)),
                async_vcode: b.byte(37),
                parameter1: b.be16(38),
                parameter2: b.be16(40),
                parameter3: b.be16(42),
            }),
            Opcode::REJECT => Pdu::Reject(Reject {
                reason: RejectReason(b.byte(2)),
                stat_sn: b.be32(24),
                exp_cmd_sn: b.be32(28),
                max_cmd_sn: b.be32(32),
                data_sn_or_r2t_sn: b.be32(36),
            }),
            other => return Err(WireError::UnknownOpcode(other)),
        })
    }

    /// Encodes the header. TotalAHSLength and DataSegmentLength are left 0:
    /// the frame encoder sets them from the segments it actually writes.
    pub fn encode(&self) -> Bhs {
        let mut b = Bhs::new(self.opcode());
        if !self.encode_request(&mut b) {
            self.encode_response(&mut b);
        }
        b
    }

    /// The fields of a PDU an initiator sends; `false` for the others
    /// (every variant is covered by one of the two: `every_pdu_round_trips`).
    fn encode_request(&self, b: &mut Bhs) -> bool {
        match self {
            Pdu::NopOut(p) => {
                b.set_immediate(p.immediate);
                b.set_byte(1, 0x80);
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.ttt);
                b.set_be32(24, p.cmd_sn);
                b.set_be32(28, p.exp_stat_sn);
            }
            Pdu::ScsiCommand(p) => {
                b.set_immediate(p.immediate);
                b.set_byte(
                    1,
                    flag(p.final_bit, 0x80)
                        | flag(p.read, 0x40)
                        | flag(p.write, 0x20)
                        | (p.attr & 0x07),
                );
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.expected_data_transfer_length);
                b.set_be32(24, p.cmd_sn);
                b.set_be32(28, p.exp_stat_sn);
                b.bytes_mut(32, 16).copy_from_slice(&p.cdb);
            }
            Pdu::TaskMgmtRequest(p) => {
                b.set_immediate(p.immediate);
                b.set_byte(1, 0x80 | (p.function.0 & 0x7f));
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.referenced_task_tag);
                b.set_be32(24, p.cmd_sn);
                b.set_be32(28, p.exp_stat_sn);
                b.set_be32(32, p.ref_cmd_sn);
                b.set_be32(36, p.exp_data_sn);
            }
            Pdu::LoginRequest(p) => {
                // Login requests always carry the I bit (RFC 7143 §11.12).
                b.set_immediate(true);
                b.set_byte(1, login_flags(p.transit, p.cont, p.csg, p.nsg));
                b.set_byte(2, p.version_max);
                b.set_byte(3, p.version_min);
                b.bytes_mut(8, 6).copy_from_slice(&p.isid);
                b.set_be16(14, p.tsih);
                b.set_itt(p.itt);
                b.set_be16(20, p.cid);
                b.set_be32(24, p.cmd_sn);
                b.set_be32(28, p.exp_stat_sn);
            }
            Pdu::TextRequest(p) => {
                b.set_immediate(p.immediate);
                b.set_byte(1, flag(p.final_bit, 0x80) | flag(p.cont, 0x40));
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.ttt);
                b.set_be32(24, p.cmd_sn);
                b.set_be32(28, p.exp_stat_sn);
            }
            Pdu::DataOut(p) => {
                b.set_byte(1, flag(p.final_bit, 0x80));
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.ttt);
                b.set_be32(28, p.exp_stat_sn);
                b.set_be32(36, p.data_sn);
                b.set_be32(40, p.buffer_offset);
            }
            Pdu::LogoutRequest(p) => {
                b.set_immediate(p.immediate);
                b.set_byte(1, 0x80 | (p.reason & 0x7f));
                b.set_itt(p.itt);
                b.set_be16(20, p.cid);
                b.set_be32(24, p.cmd_sn);
                b.set_be32(28, p.exp_stat_sn);
            }
            Pdu::SnackRequest(p) => {
                b.set_byte(1, 0x80 | (p.snack_type & 0x0f));
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.ttt);
                b.set_be32(28, p.exp_stat_sn);
                b.set_be32(40, p.beg_run);
                b.set_be32(44, p.run_length);
            }
            _ => return false,
        }
        true
    }

    /// The fields of a PDU a target sends.
    fn encode_response(&self, b: &mut Bhs) {
        match self {
            Pdu::NopIn(p) => {
                b.set_byte(1, 0x80);
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.ttt);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
            }
            Pdu::ScsiResponse(p) => {
                b.set_byte(
                    1,
                    0x80 | (p.bidi_residual.flag_bits() << 2) | p.residual.flag_bits(),
                );
                b.set_byte(2, p.response);
                b.set_byte(3, p.status);
                b.set_itt(p.itt);
                b.set_be32(20, p.snack_tag);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
                b.set_be32(36, p.exp_data_sn);
                b.set_be32(40, p.bidi_residual.count());
                b.set_be32(44, p.residual.count());
            }
            Pdu::TaskMgmtResponse(p) => {
                b.set_byte(1, 0x80);
                b.set_byte(2, p.response.0);
                b.set_itt(p.itt);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
            }
            Pdu::LoginResponse(p) => {
                b.set_byte(1, login_flags(p.transit, p.cont, p.csg, p.nsg));
                b.set_byte(2, p.version_max);
                b.set_byte(3, p.version_active);
                b.bytes_mut(8, 6).copy_from_slice(&p.isid);
                b.set_be16(14, p.tsih);
                b.set_itt(p.itt);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
                b.set_byte(36, p.status_class);
                b.set_byte(37, p.status_detail);
            }
            Pdu::TextResponse(p) => {
                b.set_byte(1, flag(p.final_bit, 0x80) | flag(p.cont, 0x40));
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.ttt);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
            }
            Pdu::DataIn(p) => encode_data_in(p, b),
            Pdu::LogoutResponse(p) => {
                b.set_byte(1, 0x80);
                b.set_byte(2, p.response);
                b.set_itt(p.itt);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
                b.set_be16(40, p.time2wait);
                b.set_be16(42, p.time2retain);
            }
            Pdu::R2t(p) => {
                b.set_byte(1, 0x80);
                b.set_lun_raw(p.lun.0);
                b.set_itt(p.itt);
                b.set_be32(20, p.ttt);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
                b.set_be32(36, p.r2t_sn);
                b.set_be32(40, p.buffer_offset);
                b.set_be32(44, p.desired_data_transfer_length);
            }
            Pdu::AsyncMessage(p) => {
                b.set_byte(1, 0x80);
                b.set_lun_raw(p.lun.0);
                b.set_itt(RESERVED_TAG);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
                b.set_byte(36, p.async_event.0);
                b.set_byte(37, p.async_vcode);
                b.set_be16(38, p.parameter1);
                b.set_be16(40, p.parameter2);
                b.set_be16(42, p.parameter3);
            }
            Pdu::Reject(p) => {
                b.set_byte(1, 0x80);
                b.set_byte(2, p.reason.0);
                b.set_itt(RESERVED_TAG);
                b.set_be32(24, p.stat_sn);
                b.set_be32(28, p.exp_cmd_sn);
                b.set_be32(32, p.max_cmd_sn);
                b.set_be32(36, p.data_sn_or_r2t_sn);
            }
            _ => {}
        }
    }

    pub fn opcode(&self) -> Opcode {
        match self {
            Pdu::NopOut(_) => Opcode::NOP_OUT,
            Pdu::ScsiCommand(_) => Opcode::SCSI_COMMAND,
            Pdu::TaskMgmtRequest(_) => Opcode::TASK_MGMT_REQUEST,
            Pdu::LoginRequest(_) => Opcode::LOGIN_REQUEST,
            Pdu::TextRequest(_) => Opcode::TEXT_REQUEST,
            Pdu::DataOut(_) => Opcode::DATA_OUT,
            Pdu::LogoutRequest(_) => Opcode::LOGOUT_REQUEST,
            Pdu::SnackRequest(_) => Opcode::SNACK_REQUEST,
            Pdu::NopIn(_) => Opcode::NOP_IN,
            Pdu::ScsiResponse(_) => Opcode::SCSI_RESPONSE,
            Pdu::TaskMgmtResponse(_) => Opcode::TASK_MGMT_RESPONSE,
            Pdu::LoginResponse(_) => Opcode::LOGIN_RESPONSE,
            Pdu::TextResponse(_) => Opcode::TEXT_RESPONSE,
            Pdu::DataIn(_) => Opcode::DATA_IN,
            Pdu::LogoutResponse(_) => Opcode::LOGOUT_RESPONSE,
            Pdu::R2t(_) => Opcode::R2T,
            Pdu::AsyncMessage(_) => Opcode::ASYNC_MESSAGE,
            Pdu::Reject(_) => Opcode::REJECT,
        }
    }
}

/// Data-In's fields (RFC 7143 §11.7): the status, when the last PDU
/// carries it, and the residual.
fn encode_data_in(p: &DataIn, b: &mut Bhs) {
    b.set_byte(
        1,
        flag(p.final_bit, 0x80)
            | flag(p.ack, 0x40)
            | p.residual.flag_bits()
            | flag(p.status.is_some(), 0x01),
    );
    b.set_byte(3, p.status.unwrap_or(0));
    b.set_lun_raw(p.lun.0);
    b.set_itt(p.itt);
    b.set_be32(20, p.ttt);
    b.set_be32(24, p.stat_sn);
    b.set_be32(28, p.exp_cmd_sn);
    b.set_be32(32, p.max_cmd_sn);
    b.set_be32(36, p.data_sn);
    b.set_be32(40, p.buffer_offset);
    b.set_be32(44, p.residual.count());
}

fn flag(on: bool, mask: u8) -> u8 {
    if on {
        mask
    } else {
        0
    }
}

fn login_flags(transit: bool, cont: bool, csg: u8, nsg: u8) -> u8 {
    flag(transit, 0x80) | flag(cont, 0x40) | ((csg & 0x03) << 2) | (nsg & 0x03)
}

fn isid_of(b: &Bhs) -> [u8; 6] {
    let mut isid = [0u8; 6];
    isid.copy_from_slice(b.bytes(8, 6));
    isid
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(p: Pdu) {
        let bhs = p.encode();
        let back = Pdu::decode(&bhs).unwrap();
        assert_eq!(back, p, "round trip of {:?}", p.opcode());
        // Encoding the decoded value yields the same bytes.
        assert_eq!(back.encode(), bhs);
    }

    #[test]
    fn every_pdu_round_trips() {
        let lun = Lun::from_index(3);
        round_trip(Pdu::NopOut(NopOut {
            immediate: true,
            lun,
            itt: 1,
            ttt: RESERVED_TAG,
            cmd_sn: 7,
            exp_stat_sn: 9,
        }));
        round_trip(Pdu::ScsiCommand(ScsiCommand {
            immediate: false,
            final_bit: true,
            read: true,
            write: false,
            attr: 1,
            lun,
            itt: 0x1234,
            expected_data_transfer_length: 4096,
            cmd_sn: 0xffff_fffe,
            exp_stat_sn: 2,
            cdb: [0x28, 0, 0, 0, 0, 8, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0],
        }));
        round_trip(Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function: TmfFunction::ABORT_TASK,
            lun,
            itt: 5,
            referenced_task_tag: 4,
            cmd_sn: 10,
            exp_stat_sn: 11,
            ref_cmd_sn: 9,
            exp_data_sn: 0,
        }));
        round_trip(Pdu::LoginRequest(LoginRequest {
            transit: true,
            cont: false,
            csg: 1,
            nsg: 3,
            version_max: 0,
            version_min: 0,
            isid: [0x80, 1, 2, 3, 4, 5],
            tsih: 0,
            itt: 0,
            cid: 1,
            cmd_sn: 1,
            exp_stat_sn: 0,
        }));
        round_trip(Pdu::TextRequest(TextRequest {
            immediate: true,
            final_bit: true,
            cont: false,
            lun: Lun::default(),
            itt: 2,
            ttt: RESERVED_TAG,
            cmd_sn: 3,
            exp_stat_sn: 4,
        }));
        round_trip(Pdu::DataOut(DataOut {
            final_bit: true,
            lun,
            itt: 8,
            ttt: 0x55,
            exp_stat_sn: 3,
            data_sn: 2,
            buffer_offset: 65536,
        }));
        round_trip(Pdu::LogoutRequest(LogoutRequest {
            immediate: true,
            reason: 1,
            itt: 9,
            cid: 1,
            cmd_sn: 5,
            exp_stat_sn: 6,
        }));
        round_trip(Pdu::SnackRequest(SnackRequest {
            snack_type: 1,
            lun,
            itt: 9,
            ttt: 1,
            exp_stat_sn: 6,
            beg_run: 2,
            run_length: 3,
        }));
        round_trip(Pdu::NopIn(NopIn {
            lun,
            itt: RESERVED_TAG,
            ttt: 77,
            stat_sn: 1,
            exp_cmd_sn: 2,
            max_cmd_sn: 33,
        }));
        round_trip(Pdu::ScsiResponse(ScsiResponse {
            bidi_residual: Residual::Underflow(3),
            residual: Residual::Overflow(512),
            response: 0,
            status: 2,
            itt: 1,
            snack_tag: 0,
            stat_sn: 4,
            exp_cmd_sn: 5,
            max_cmd_sn: 68,
            exp_data_sn: 0,
        }));
        round_trip(Pdu::TaskMgmtResponse(TaskMgmtResponse {
            response: TmfResponse::NOT_SUPPORTED,
            itt: 2,
            stat_sn: 3,
            exp_cmd_sn: 4,
            max_cmd_sn: 5,
        }));
        round_trip(Pdu::LoginResponse(LoginResponse {
            transit: true,
            cont: false,
            csg: 1,
            nsg: 3,
            version_max: 0,
            version_active: 0,
            isid: [0x80, 1, 2, 3, 4, 5],
            tsih: 0x1234,
            itt: 0,
            stat_sn: 100,
            exp_cmd_sn: 1,
            max_cmd_sn: 64,
            status_class: 2,
            status_detail: 3,
        }));
        round_trip(Pdu::TextResponse(TextResponse {
            final_bit: false,
            cont: true,
            lun: Lun::default(),
            itt: 2,
            ttt: 9,
            stat_sn: 3,
            exp_cmd_sn: 4,
            max_cmd_sn: 5,
        }));
        round_trip(Pdu::DataIn(DataIn {
            final_bit: true,
            ack: false,
            residual: Residual::Underflow(100),
            status: Some(0),
            lun,
            itt: 1,
            ttt: RESERVED_TAG,
            stat_sn: 2,
            exp_cmd_sn: 3,
            max_cmd_sn: 4,
            data_sn: 5,
            buffer_offset: 8192,
        }));
        round_trip(Pdu::LogoutResponse(LogoutResponse {
            response: 0,
            itt: 1,
            stat_sn: 2,
            exp_cmd_sn: 3,
            max_cmd_sn: 4,
            time2wait: 2,
            time2retain: 20,
        }));
        round_trip(Pdu::R2t(R2t {
            lun,
            itt: 1,
            ttt: 2,
            stat_sn: 3,
            exp_cmd_sn: 4,
            max_cmd_sn: 5,
            r2t_sn: 6,
            buffer_offset: 65536,
            desired_data_transfer_length: 262144,
        }));
        round_trip(Pdu::AsyncMessage(AsyncMessage {
            lun: Lun::default(),
            stat_sn: 1,
            exp_cmd_sn: 2,
            max_cmd_sn: 3,
            async_event: AsyncEvent::LOGOUT_REQUEST,
            async_vcode: 0,
            parameter1: 0,
            parameter2: 0,
            parameter3: 5,
        }));
        round_trip(Pdu::Reject(Reject {
            reason: RejectReason::PROTOCOL_ERROR,
            stat_sn: 1,
            exp_cmd_sn: 2,
            max_cmd_sn: 3,
            data_sn_or_r2t_sn: 0,
        }));
    }

    #[test]
    fn scsi_command_field_offsets_match_rfc() {
        // RFC 7143 §11.3: EDTL at 20, CmdSN at 24, ExpStatSN at 28, CDB at 32.
        let p = Pdu::ScsiCommand(ScsiCommand {
            final_bit: true,
            write: true,
            attr: 1,
            itt: 0x0a0b0c0d,
            expected_data_transfer_length: 0x1000,
            cmd_sn: 0x11223344,
            exp_stat_sn: 0x55667788,
            cdb: [0x2a; 16],
            ..Default::default()
        });
        let b = p.encode();
        assert_eq!(b.0[0], 0x01);
        assert_eq!(b.0[1], 0xa1);
        assert_eq!(&b.0[16..20], &[0x0a, 0x0b, 0x0c, 0x0d]);
        assert_eq!(&b.0[20..24], &[0, 0, 0x10, 0]);
        assert_eq!(&b.0[24..28], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(&b.0[28..32], &[0x55, 0x66, 0x77, 0x88]);
        assert_eq!(&b.0[32..48], &[0x2a; 16]);
    }

    #[test]
    fn unknown_opcode_is_an_error_carrying_the_opcode() {
        let b = Bhs::new(Opcode(0x1e));
        assert_eq!(Pdu::decode(&b), Err(WireError::UnknownOpcode(Opcode(0x1e))));
    }

    #[test]
    fn both_residual_bits_is_invalid() {
        let mut b = Bhs::new(Opcode::SCSI_RESPONSE);
        b.set_byte(1, 0x80 | 0x06);
        assert!(matches!(Pdu::decode(&b), Err(WireError::InvalidField(_))));
    }

    #[test]
    fn lun_addressing() {
        assert_eq!(Lun::from_index(0).0, [0; 8]);
        assert_eq!(Lun::from_index(5).index(), Some(5));
        assert_eq!(Lun::from_index(300).0[0], 0x41);
        assert_eq!(Lun::from_index(300).index(), Some(300));
        // Multi-level or other addressing methods reach no LU.
        assert_eq!(Lun([0, 1, 0, 2, 0, 0, 0, 0]).index(), None);
        assert_eq!(Lun([0x80, 1, 0, 0, 0, 0, 0, 0]).index(), None);
        // Peripheral addressing with a non-zero bus is not a plain index.
        assert_eq!(Lun([0x01, 1, 0, 0, 0, 0, 0, 0]).index(), None);
    }

    #[test]
    fn residual_of() {
        assert_eq!(Residual::of(512, 512), Residual::None);
        assert_eq!(Residual::of(0, 512), Residual::Overflow(512));
        assert_eq!(Residual::of(10000, 512), Residual::Underflow(9488));
    }
}
