//! Round trips of every PDU and the RFC offsets of the hot ones.

use super::*;
use crate::bhs::BHS_LEN;
use crate::codes::{
    AsyncEvent, LoginStatus, LogoutReason, LogoutResult, RejectReason, ServiceResponse, SnackType,
    TmfFunction, TmfResponse,
};
use ironlun_scsi_codes::Status;

fn round_trip(p: Pdu) {
    let bhs = p.encode();
    let back = Pdu::decode(&bhs).unwrap();
    assert_eq!(back, p, "round trip of {:?}", p.opcode());
    // Encoding the decoded value yields the same bytes.
    assert_eq!(back.encode(), bhs);
}

#[test]
#[allow(clippy::too_many_lines)] // a table: one case per PDU
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
        reason: LogoutReason::CLOSE_CONNECTION,
        itt: 9,
        cid: 1,
        cmd_sn: 5,
        exp_stat_sn: 6,
    }));
    round_trip(Pdu::SnackRequest(SnackRequest {
        snack_type: SnackType::STATUS,
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
        response: ServiceResponse::COMMAND_COMPLETED,
        status: Status::CHECK_CONDITION,
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
        status: LoginStatus::NOT_FOUND,
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
        status: Some(Status::GOOD),
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
        response: LogoutResult::CLOSED,
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

/// SplitMix64: a seeded source of test bytes, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A BHS of random bytes with `op` in byte 0 (and a random I bit).
    fn bhs(&mut self, op: Opcode) -> Bhs {
        let mut b = Bhs::default();
        for chunk in b.0.chunks_mut(8) {
            chunk.copy_from_slice(&self.next().to_le_bytes()[..chunk.len()]);
        }
        b.0[0] = (b.0[0] & 0x40) | op.0;
        b
    }
}

/// Every opcode RFC 7143 defines.
const OPCODES: [Opcode; 18] = [
    Opcode::NOP_OUT,
    Opcode::SCSI_COMMAND,
    Opcode::TASK_MGMT_REQUEST,
    Opcode::LOGIN_REQUEST,
    Opcode::TEXT_REQUEST,
    Opcode::DATA_OUT,
    Opcode::LOGOUT_REQUEST,
    Opcode::SNACK_REQUEST,
    Opcode::NOP_IN,
    Opcode::SCSI_RESPONSE,
    Opcode::TASK_MGMT_RESPONSE,
    Opcode::LOGIN_RESPONSE,
    Opcode::TEXT_RESPONSE,
    Opcode::DATA_IN,
    Opcode::LOGOUT_RESPONSE,
    Opcode::R2T,
    Opcode::ASYNC_MESSAGE,
    Opcode::REJECT,
];

/// The canonical bytes of seeded random headers of every opcode:
/// `encode(decode(random))`, or a marker where decoding refuses them.
/// Each canonical header also round-trips both ways: decode(encode(x))
/// == x and encode(decode(bytes)) == bytes.
fn canonical_fingerprint(decode: impl Fn(&Bhs) -> Result<Bhs, WireError>) -> u32 {
    let mut rng = Rng(3720);
    let mut crc = 0u32;
    for _ in 0..5_000 {
        for op in OPCODES {
            let bytes = match decode(&rng.bhs(op)) {
                Ok(v) => v.0,
                Err(_) => [0xee; BHS_LEN],
            };
            crc = crate::digest::crc32c_parts(&[&crc.to_be_bytes(), &bytes]);
        }
    }
    crc
}

/// What [`canonical_fingerprint`] gave for the layout before the PDU
/// families were split (commit 293f517): a change to any field's
/// offset, width or mask changes it.
const FINGERPRINT: u32 = 0x75e9_2f46;

#[test]
fn every_header_round_trips_and_the_wire_format_is_unchanged() {
    let fp = canonical_fingerprint(|b| {
        let p = Pdu::decode(b)?;
        let v = p.encode();
        assert_eq!(Pdu::decode(&v).as_ref(), Ok(&p), "decode(encode(x)) == x");
        assert_eq!(
            Pdu::decode(&v)?.encode(),
            v,
            "encode(decode(bytes)) == bytes"
        );
        Ok(v)
    });
    assert_eq!(fp, FINGERPRINT, "0x{fp:08x}");
}

/// ExpStatSN is read from bytes 28..32 of every initiator PDU and of no
/// target PDU.
#[test]
fn exp_stat_sn_is_an_initiator_pdus_bytes_28_to_32() {
    let mut initiator_pdus = 0;
    for code in 0u8..0x40 {
        let mut raw = [0u8; BHS_LEN];
        raw[0] = code;
        raw[28..32].copy_from_slice(&0x0102_0304u32.to_be_bytes());
        let Ok(p) = Pdu::decode(&Bhs(raw)) else {
            continue;
        };
        let want = (!p.opcode().is_target_opcode()).then_some(0x0102_0304);
        assert_eq!(p.exp_stat_sn(), want, "{:?}", p.opcode());
        initiator_pdus += usize::from(want.is_some());
    }
    assert_eq!(initiator_pdus, 8, "every initiator opcode decoded");
}
