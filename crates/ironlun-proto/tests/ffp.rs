//! Full feature phase of a target connection, driven deterministically
//! with virtual time and no sockets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ironlun_proto::params::{ConnParams, Offers, SessionParams};
use ironlun_proto::target::login::{LoginResult, TargetInfo};
use ironlun_proto::target::{
    AbortScope, CloseReason, DigestKind, Directory, Event, FfpConfig, Observer, ScsiResult,
    SendTargetsQuery, TargetConnection, TargetListing, TmfRequest,
};
use ironlun_proto::OutPdu;
use ironlun_scsi_codes::{SenseCode, SenseKey, Status};
use ironlun_wire::text::{encode_pairs, parse_pairs};
use ironlun_wire::{
    encode_frame, AsyncEvent, Bhs, DataOut, Digests, Frame, FrameDecoder, LogoutReason,
    LogoutRequest, LogoutResult, Lun, NopOut, Opcode, Pdu, RejectReason, Residual, ScsiCommand,
    TaskMgmtRequest, TextRequest, TmfFunction, TmfResponse, WireError, RESERVED_TAG,
};

struct Dir;

impl Directory for Dir {
    fn send_targets(&self, _i: &str, q: SendTargetsQuery<'_>) -> Vec<TargetListing> {
        let all: Vec<TargetListing> = (0..200)
            .map(|n| TargetListing {
                name: format!("iqn.2026-11.test:t{n:03}"),
                addresses: vec![format!("127.0.0.1:3260,1"), format!("[::1]:3260,1")],
            })
            .collect();
        match q {
            SendTargetsQuery::All => all,
            SendTargetsQuery::Named(n) => all.into_iter().filter(|t| t.name == n).collect(),
        }
    }
}

struct H {
    conn: TargetConnection,
    now: Instant,
    cmd_sn: u32,
}

fn login(session: SessionParams, conn: ConnParams, discovery: bool) -> LoginResult {
    LoginResult {
        initiator_name: "iqn.2026-11.test:init".into(),
        initiator_alias: None,
        isid: [0x80, 0, 0, 0, 0, 1],
        tsih: 1,
        cid: 0,
        discovery,
        target: (!discovery).then(|| TargetInfo {
            name: "iqn.2026-11.test:t000".into(),
            alias: None,
            portal_group_tag: 1,
            offers: Offers::default(),
            queue_depth: 4,
            chap: None,
        }),
        session,
        conn,
        exp_cmd_sn: 10,
        next_stat_sn: 1000,
        summary: String::new(),
    }
}

impl H {
    fn with(session: SessionParams, conn: ConnParams, cfg: FfpConfig, discovery: bool) -> H {
        let now = Instant::now();
        H {
            conn: TargetConnection::new(&login(session, conn, discovery), cfg, Box::new(Dir), now),
            now,
            cmd_sn: 10,
        }
    }

    fn new() -> H {
        H::session(SessionParams::default())
    }

    /// A normal session with these session parameters, queue depth 4 and
    /// no keep-alive pings.
    fn session(session: SessionParams) -> H {
        H::with(session, ConnParams::default(), quiet(4), false)
    }

    fn send(&mut self, pdu: Pdu, data: &[u8]) {
        let mut b = BytesMut::new();
        encode_frame(&pdu.encode(), &[], data, Digests::default(), &mut b).unwrap();
        let f = FrameDecoder::new(1 << 24).decode(&mut b).unwrap().unwrap();
        self.conn.handle_frame(f, self.now);
    }

    fn next_sn(&mut self) -> u32 {
        let s = self.cmd_sn;
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        s
    }

    fn cmd(&mut self, itt: u32, cdb0: u8, read: bool, write: bool, edtl: u32) -> ScsiCommand {
        let mut cdb = [0u8; 16];
        cdb[0] = cdb0;
        ScsiCommand {
            immediate: false,
            final_bit: true,
            read,
            write,
            attr: 1,
            lun: Lun::from_index(0),
            itt,
            expected_data_transfer_length: edtl,
            cmd_sn: self.next_sn(),
            exp_stat_sn: 0,
            cdb,
        }
    }

    fn out(&mut self) -> Vec<OutPdu> {
        std::iter::from_fn(|| self.conn.poll_transmit()).collect()
    }

    fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.conn.poll_event()).collect()
    }
}

/// Queue depth `depth`, no keep-alive pings.
fn quiet(depth: u32) -> FfpConfig {
    FfpConfig {
        queue_depth: depth,
        nop_interval: None,
        ..FfpConfig::default()
    }
}

fn good(data: &[u8]) -> ScsiResult {
    ScsiResult {
        status: Status::GOOD,
        sense: Bytes::new(),
        data_in: Bytes::copy_from_slice(data).into(),
        transfer_length: data.len() as u32,
    }
}

fn executed(evs: &[Event]) -> Vec<(u32, Bytes)> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Execute(t) => Some((t.itt, Bytes::copy_from_slice(t.data_out.contiguous()))),
            _ => None,
        })
        .collect()
}

#[test]
fn read_is_split_by_mrdsl_with_bursts_and_phase_collapse() {
    let session = SessionParams {
        max_burst_length: 16384,
        ..SessionParams::default()
    };
    let conn = ConnParams {
        max_xmit_data_segment_length: 4096,
        ..ConnParams::default()
    };
    let cfg = quiet(4);
    let mut h = H::with(session, conn, cfg, false);
    let c = h.cmd(7, 0x28, true, false, 40000);
    h.send(Pdu::ScsiCommand(c), &[]);
    let ev = h.events();
    assert_eq!(executed(&ev).len(), 1);
    let data: Vec<u8> = (0..36864u32).map(|i| i as u8).collect();
    h.conn.complete(7, good(&data));
    let out = h.out();
    let mut offset = 0u32;
    let mut reassembled = Vec::new();
    for (i, p) in out.iter().enumerate() {
        let Pdu::DataIn(d) = &p.pdu else {
            panic!("{:?}", p.pdu)
        };
        assert_eq!(d.data_sn, i as u32);
        assert_eq!(d.buffer_offset, offset);
        assert!(p.data.len() <= 4096);
        offset += p.data.len() as u32;
        reassembled.extend_from_slice(&p.data.to_bytes().unwrap());
        // F at the end of each 16 KiB burst and at the end.
        let end_of_burst = offset % 16384 == 0 || offset == 36864;
        assert_eq!(d.final_bit, end_of_burst, "PDU {i}");
        let last = i + 1 == out.len();
        assert_eq!(d.status.is_some(), last);
        if last {
            assert_eq!(d.status, Some(Status::GOOD));
            assert_eq!(d.residual, Residual::Underflow(40000 - 36864));
            assert_eq!(d.stat_sn, 1000);
        }
    }
    assert_eq!(reassembled, data);
}

#[test]
fn read_overflow_is_truncated_to_edtl() {
    let mut h = H::new();
    let c = h.cmd(1, 0x28, true, false, 200);
    h.send(Pdu::ScsiCommand(c), &[]);
    h.events();
    h.conn.complete(1, good(&[9u8; 512]));
    let out = h.out();
    assert_eq!(out.len(), 1);
    let Pdu::DataIn(d) = &out[0].pdu else {
        panic!()
    };
    assert_eq!(out[0].data.len(), 200);
    assert_eq!(d.residual, Residual::Overflow(312));
}

#[test]
fn check_condition_goes_in_a_scsi_response_with_sense_length() {
    let mut h = H::new();
    let c = h.cmd(2, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(c), &[]);
    h.events();
    let sense = Bytes::from_static(&[0x70, 0, 5, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x21, 0, 0, 0, 0, 0]);
    h.conn.complete(
        2,
        ScsiResult {
            status: Status::CHECK_CONDITION,
            sense: sense.clone(),
            data_in: Bytes::new().into(),
            transfer_length: 0,
        },
    );
    let out = h.out();
    assert_eq!(out.len(), 1);
    let Pdu::ScsiResponse(r) = &out[0].pdu else {
        panic!()
    };
    assert_eq!(r.status, Status::CHECK_CONDITION);
    assert_eq!(r.residual, Residual::Underflow(512));
    assert_eq!(&out[0].data.to_bytes().unwrap()[..2], &[0, 18]);
    assert_eq!(&out[0].data.to_bytes().unwrap()[2..], &sense[..]);
}

#[test]
fn write_with_immediate_data_executes_at_once() {
    let mut h = H::new();
    let c = h.cmd(3, 0x2a, false, true, 1024);
    h.send(Pdu::ScsiCommand(c), &[5u8; 1024]);
    let ex = executed(&h.events());
    assert_eq!(ex.len(), 1);
    assert_eq!(&ex[0].1[..], &[5u8; 1024][..]);
    assert!(h.out().is_empty(), "no R2T needed");
    h.conn.complete(
        3,
        ScsiResult {
            transfer_length: 1024,
            ..good(&[])
        },
    );
    let out = h.out();
    let Pdu::ScsiResponse(r) = &out[0].pdu else {
        panic!()
    };
    assert_eq!((r.status, r.residual), (Status::GOOD, Residual::None));
}

#[test]
fn solicited_write_honours_max_burst_and_max_outstanding_r2t() {
    let session = SessionParams {
        initial_r2t: true,
        immediate_data: false,
        max_burst_length: 8192,
        max_outstanding_r2t: 2,
        ..SessionParams::default()
    };
    let mut h = H::session(session);
    let c = h.cmd(4, 0x2a, false, true, 30000);
    h.send(Pdu::ScsiCommand(c), &[]);
    assert!(h.events().is_empty());
    let r2ts: Vec<_> = h
        .out()
        .into_iter()
        .map(|p| match p.pdu {
            Pdu::R2t(r) => r,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(r2ts.len(), 2, "MaxOutstandingR2T");
    assert_eq!(
        (
            r2ts[0].buffer_offset,
            r2ts[0].desired_data_transfer_length,
            r2ts[0].r2t_sn
        ),
        (0, 8192, 0)
    );
    assert_eq!(
        (
            r2ts[1].buffer_offset,
            r2ts[1].desired_data_transfer_length,
            r2ts[1].r2t_sn
        ),
        (8192, 8192, 1)
    );
    assert_ne!(r2ts[0].ttt, RESERVED_TAG);
    assert_eq!(r2ts[0].stat_sn, 1000, "R2T carries StatSN without using it");

    let data: Vec<u8> = (0..30000u32).map(|i| (i % 251) as u8).collect();
    let mut next_r2ts = vec![r2ts[0].clone(), r2ts[1].clone()];
    let mut seen = 0;
    while let Some(r) = (!next_r2ts.is_empty()).then(|| next_r2ts.remove(0)) {
        seen += 1;
        // Answer each R2T in two Data-Out PDUs.
        let half = r.desired_data_transfer_length / 2;
        for (sn, (off, len)) in [
            (r.buffer_offset, half),
            (
                r.buffer_offset + half,
                r.desired_data_transfer_length - half,
            ),
        ]
        .into_iter()
        .enumerate()
        {
            h.send(
                Pdu::DataOut(DataOut {
                    final_bit: sn == 1,
                    lun: Lun::from_index(0),
                    itt: 4,
                    ttt: r.ttt,
                    exp_stat_sn: 0,
                    data_sn: sn as u32,
                    buffer_offset: off,
                }),
                &data[off as usize..(off + len) as usize],
            );
        }
        for p in h.out() {
            if let Pdu::R2t(r) = p.pdu {
                next_r2ts.push(r);
            }
        }
    }
    assert_eq!(seen, 4, "30000 bytes in 8192-byte bursts");
    let ex = executed(&h.events());
    assert_eq!(ex.len(), 1);
    assert_eq!(&ex[0].1[..], &data[..]);
}

#[test]
fn unsolicited_data_out_up_to_first_burst() {
    let session = SessionParams {
        initial_r2t: false,
        immediate_data: true,
        first_burst_length: 4096,
        ..SessionParams::default()
    };
    let mut h = H::session(session);
    let c = h.cmd(5, 0x2a, false, true, 10000);
    h.send(Pdu::ScsiCommand(c), &[1u8; 1024]);
    // An R2T for what lies beyond FirstBurstLength goes out at once.
    let out = h.out();
    let Pdu::R2t(r) = &out[0].pdu else { panic!() };
    assert_eq!(
        (r.buffer_offset, r.desired_data_transfer_length),
        (4096, 10000 - 4096)
    );
    let ttt = r.ttt;
    h.send(
        Pdu::DataOut(DataOut {
            final_bit: true,
            lun: Lun::from_index(0),
            itt: 5,
            ttt: RESERVED_TAG,
            exp_stat_sn: 0,
            data_sn: 0,
            buffer_offset: 1024,
        }),
        &[2u8; 3072],
    );
    h.send(
        Pdu::DataOut(DataOut {
            final_bit: true,
            lun: Lun::from_index(0),
            itt: 5,
            ttt,
            exp_stat_sn: 0,
            data_sn: 0,
            buffer_offset: 4096,
        }),
        &[3u8; 5904],
    );
    let ex = executed(&h.events());
    assert_eq!(ex.len(), 1);
    let d = &ex[0].1;
    assert_eq!((d[0], d[1024], d[4096], d.len()), (1, 2, 3, 10000));
}

#[test]
fn bad_data_sn_fails_the_task_not_the_connection() {
    let session = SessionParams {
        initial_r2t: true,
        immediate_data: false,
        ..SessionParams::default()
    };
    let mut h = H::session(session);
    let c = h.cmd(6, 0x2a, false, true, 1024);
    h.send(Pdu::ScsiCommand(c), &[]);
    let Pdu::R2t(r) = h.out().remove(0).pdu else {
        panic!()
    };
    h.send(
        Pdu::DataOut(DataOut {
            final_bit: true,
            lun: Lun::from_index(0),
            itt: 6,
            ttt: r.ttt,
            exp_stat_sn: 0,
            data_sn: 27,
            buffer_offset: 0,
        }),
        &[0u8; 1024],
    );
    let ev = h.events();
    assert!(
        matches!(
            ev[..],
            [Event::FailTask {
                itt: 6,
                sense: SenseCode {
                    key: SenseKey::ABORTED_COMMAND,
                    asc: 0x4b,
                    ascq: 0x00
                },
                ..
            }]
        ),
        "{ev:?}"
    );
    assert!(!h.conn.is_closing());
    h.conn.complete(
        6,
        ScsiResult {
            status: Status::CHECK_CONDITION,
            sense: Bytes::from_static(&[0x70; 18]),
            ..Default::default()
        },
    );
    let out = h.out();
    assert!(matches!(out[0].pdu, Pdu::ScsiResponse(ref r) if r.status == Status::CHECK_CONDITION));
    // Data still arriving for the failed task is discarded quietly.
    h.send(
        Pdu::DataOut(DataOut {
            final_bit: true,
            lun: Lun::from_index(0),
            itt: 6,
            ttt: r.ttt,
            exp_stat_sn: 0,
            data_sn: 0,
            buffer_offset: 0,
        }),
        &[0u8; 1024],
    );
    assert!(h.out().is_empty() && h.events().is_empty());
    // And the next command works.
    let c = h.cmd(7, 0x00, false, false, 0);
    h.send(Pdu::ScsiCommand(c), &[]);
    assert_eq!(executed(&h.events()).len(), 1);
}

#[test]
fn cmd_sn_window_ignores_outside_and_reports_max_cmd_sn() {
    let mut h = H::new();
    // Depth 4, nothing in flight: MaxCmdSN = 10 + 3.
    let mut c = h.cmd(1, 0x00, false, false, 0);
    c.cmd_sn = 14; // MaxCmdSN + 1: silently ignored
    h.send(Pdu::ScsiCommand(c), &[]);
    let mut c = h.cmd(2, 0x00, false, false, 0);
    c.cmd_sn = 9; // below ExpCmdSN
    h.send(Pdu::ScsiCommand(c), &[]);
    assert!(h.events().is_empty() && h.out().is_empty());
    assert_eq!(h.conn.stats.ignored_cmd_sn, 2);

    // Three commands in flight (10, 11, 12): responses advertise the shrunk
    // window, never below what was already granted.
    h.cmd_sn = 10;
    for itt in 10..13 {
        let c = h.cmd(itt, 0x00, false, false, 0);
        h.send(Pdu::ScsiCommand(c), &[]);
    }
    assert_eq!(executed(&h.events()).len(), 3);
    h.conn.complete(10, good(&[]));
    let out = h.out();
    let Pdu::ScsiResponse(r) = &out[0].pdu else {
        panic!()
    };
    assert_eq!(r.exp_cmd_sn, 13);
    // In flight: 2 of 4, so MaxCmdSN = 13 + 2 - 1 = 14.
    assert_eq!(r.max_cmd_sn, 14);

    // A command ahead of ExpCmdSN waits for the gap.
    let mut c = h.cmd(20, 0x00, false, false, 0);
    c.cmd_sn = 14;
    h.send(Pdu::ScsiCommand(c), &[]);
    assert!(h.events().is_empty());
    let mut c = h.cmd(21, 0x00, false, false, 0);
    c.cmd_sn = 13;
    h.send(Pdu::ScsiCommand(c), &[]);
    let ex: Vec<u32> = executed(&h.events()).into_iter().map(|(i, _)| i).collect();
    assert_eq!(ex, vec![21, 20], "delivered in CmdSN order");
}

#[test]
fn immediate_commands_bypass_the_window_but_are_bounded() {
    let cfg = FfpConfig {
        queue_depth: 4,
        max_immediate: 2,
        nop_interval: None,
        ..FfpConfig::default()
    };
    let mut h = H::with(SessionParams::default(), ConnParams::default(), cfg, false);
    for itt in 1..=3 {
        let mut c = h.cmd(itt, 0x00, false, false, 0);
        c.immediate = true;
        c.cmd_sn = 10;
        h.send(Pdu::ScsiCommand(c), &[]);
    }
    assert_eq!(executed(&h.events()).len(), 2);
    let out = h.out();
    let Pdu::Reject(r) = &out[0].pdu else {
        panic!()
    };
    assert_eq!(r.reason, RejectReason::IMMEDIATE_COMMAND_REJECT);
    assert_eq!(out[0].data.len(), 48, "Reject quotes the header");
}

#[test]
fn duplicate_itt_and_unknown_opcode_are_rejected() {
    let mut h = H::new();
    let c = h.cmd(1, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(c), &[]);
    let c = h.cmd(1, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(c), &[]);
    let out = h.out();
    assert!(matches!(out[0].pdu, Pdu::Reject(ref r) if r.reason == RejectReason::TASK_IN_PROGRESS));
    let mut f = Frame {
        bhs: Bhs::new(Opcode(0x1d)),
        ahs: Bytes::new(),
        data: Bytes::new(),
    };
    f.bhs.set_itt(99);
    h.conn.handle_frame(f, h.now);
    let out = h.out();
    assert!(
        matches!(out[0].pdu, Pdu::Reject(ref r) if r.reason == RejectReason::COMMAND_NOT_SUPPORTED)
    );
    assert_eq!(out[0].data.to_bytes().unwrap()[0] & 0x3f, 0x1d);
    // Immediate data on a read is a protocol error.
    let c = h.cmd(2, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(c), &[1, 2, 3, 4]);
    assert!(
        matches!(h.out()[0].pdu, Pdu::Reject(ref r) if r.reason == RejectReason::PROTOCOL_ERROR)
    );
}

#[test]
fn nop_out_ping_is_echoed_and_target_pings_idle_initiators() {
    let cfg = FfpConfig {
        queue_depth: 4,
        nop_interval: Some(Duration::from_secs(5)),
        nop_timeout: Duration::from_secs(3),
        ..FfpConfig::default()
    };
    let mut h = H::with(SessionParams::default(), ConnParams::default(), cfg, false);
    let sn = h.next_sn();
    h.send(
        Pdu::NopOut(NopOut {
            immediate: false,
            lun: Lun::default(),
            itt: 77,
            ttt: RESERVED_TAG,
            cmd_sn: sn,
            exp_stat_sn: 0,
        }),
        b"ping!",
    );
    let out = h.out();
    let Pdu::NopIn(n) = &out[0].pdu else { panic!() };
    assert_eq!((n.itt, n.ttt, n.stat_sn), (77, RESERVED_TAG, 1000));
    assert_eq!(&out[0].data.to_bytes().unwrap()[..], b"ping!");

    // Idle for 5 s: the target pings, StatSN not advanced.
    let t0 = h.now;
    assert_eq!(h.conn.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    h.conn.handle_timeout(t0 + Duration::from_secs(5));
    let out = h.out();
    let Pdu::NopIn(ping) = &out[0].pdu else {
        panic!()
    };
    assert_eq!(ping.itt, RESERVED_TAG);
    assert_ne!(ping.ttt, RESERVED_TAG);
    assert_eq!(ping.stat_sn, 1001);
    // Answered in time: no close.
    h.now = t0 + Duration::from_secs(6);
    h.send(
        Pdu::NopOut(NopOut {
            immediate: true,
            lun: Lun::default(),
            itt: RESERVED_TAG,
            ttt: ping.ttt,
            cmd_sn: h.cmd_sn,
            exp_stat_sn: 0,
        }),
        &[],
    );
    assert!(h.out().is_empty(), "no reply to a ping answer");
    // Next ping unanswered: the connection closes after the timeout.
    let t1 = t0 + Duration::from_secs(11);
    h.conn.handle_timeout(t1);
    assert_eq!(h.out().len(), 1);
    h.conn.handle_timeout(t1 + Duration::from_secs(3));
    assert!(matches!(
        h.events()[..],
        [Event::Close(CloseReason::NopTimeout)]
    ));
}

#[test]
fn send_targets_in_discovery_with_long_answer_continued() {
    let cfg = quiet(4);
    let mut h = H::with(SessionParams::default(), ConnParams::default(), cfg, true);
    let sn = h.cmd_sn;
    let text = encode_pairs([("SendTargets", "All")]);
    h.send(
        Pdu::TextRequest(TextRequest {
            immediate: true,
            final_bit: true,
            cont: false,
            lun: Lun::default(),
            itt: 5,
            ttt: RESERVED_TAG,
            cmd_sn: sn,
            exp_stat_sn: 0,
        }),
        &text,
    );
    let mut all = Vec::new();
    loop {
        let out = h.out();
        assert_eq!(out.len(), 1);
        let Pdu::TextResponse(r) = &out[0].pdu else {
            panic!()
        };
        assert!(
            out[0].data.len() <= 8192,
            "initiator's MaxRecvDataSegmentLength"
        );
        all.extend_from_slice(&out[0].data.to_bytes().unwrap());
        if r.final_bit {
            assert!(!r.cont);
            assert_eq!(r.ttt, RESERVED_TAG);
            break;
        }
        assert!(r.cont);
        assert_ne!(r.ttt, RESERVED_TAG);
        h.send(
            Pdu::TextRequest(TextRequest {
                immediate: true,
                final_bit: true,
                cont: false,
                lun: Lun::default(),
                itt: 5,
                ttt: r.ttt,
                cmd_sn: sn,
                exp_stat_sn: 0,
            }),
            &[],
        );
    }
    let pairs = parse_pairs(&all).unwrap();
    assert_eq!(pairs.iter().filter(|(k, _)| k == "TargetName").count(), 200);
    assert_eq!(
        pairs.iter().filter(|(k, _)| k == "TargetAddress").count(),
        400
    );
    // SCSI commands have no place in a discovery session.
    let c = h.cmd(9, 0x00, false, false, 0);
    h.send(Pdu::ScsiCommand(c), &[]);
    assert!(matches!(h.out()[0].pdu, Pdu::Reject(_)));
}

#[test]
fn send_targets_in_a_normal_session_reports_its_own_target() {
    let mut h = H::new();
    let sn = h.next_sn();
    h.send(
        Pdu::TextRequest(TextRequest {
            immediate: false,
            final_bit: true,
            cont: false,
            lun: Lun::default(),
            itt: 5,
            ttt: RESERVED_TAG,
            cmd_sn: sn,
            exp_stat_sn: 0,
        }),
        &encode_pairs([("SendTargets", "All")]),
    );
    let out = h.out();
    let pairs = parse_pairs(&out[0].data.to_bytes().unwrap()).unwrap();
    assert_eq!(
        pairs[0],
        ("TargetName".into(), "iqn.2026-11.test:t000".into())
    );
    assert_eq!(pairs.iter().filter(|(k, _)| k == "TargetName").count(), 1);
}

#[test]
fn logout_waits_for_running_tasks_then_closes() {
    let mut h = H::new();
    let c = h.cmd(1, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(c), &[]);
    h.events();
    let sn = h.next_sn();
    h.send(
        Pdu::LogoutRequest(LogoutRequest {
            immediate: true,
            reason: LogoutReason::CLOSE_SESSION,
            itt: 2,
            cid: 0,
            cmd_sn: sn,
            exp_stat_sn: 0,
        }),
        &[],
    );
    assert!(h.out().is_empty(), "waits for task 1");
    h.conn.complete(1, good(&[0; 512]));
    let out = h.out();
    assert!(matches!(out[0].pdu, Pdu::DataIn(_)));
    let Pdu::LogoutResponse(l) = &out[1].pdu else {
        panic!()
    };
    assert_eq!((l.response, l.itt), (LogoutResult::CLOSED, 2));
    assert!(matches!(
        h.events()[..],
        [Event::Close(CloseReason::LoggedOut)]
    ));
}

#[test]
fn logout_of_another_cid_or_for_recovery_is_refused() {
    let mut h = H::new();
    for (reason, cid, want) in [
        (
            LogoutReason::CLOSE_CONNECTION,
            5u16,
            LogoutResult::CID_NOT_FOUND,
        ),
        (
            LogoutReason::REMOVE_FOR_RECOVERY,
            0,
            LogoutResult::RECOVERY_NOT_SUPPORTED,
        ),
    ] {
        let sn = h.next_sn();
        h.send(
            Pdu::LogoutRequest(LogoutRequest {
                immediate: false,
                reason,
                itt: 3,
                cid,
                cmd_sn: sn,
                exp_stat_sn: 0,
            }),
            &[],
        );
        let out = h.out();
        let Pdu::LogoutResponse(l) = &out[0].pdu else {
            panic!()
        };
        assert_eq!(l.response, want);
        assert!(!h.conn.is_closing());
    }
}

#[test]
fn shutdown_asks_for_logout_and_closes_after_the_wait() {
    let mut h = H::new();
    h.conn.request_logout(h.now, Duration::from_secs(2));
    let out = h.out();
    let Pdu::AsyncMessage(a) = &out[0].pdu else {
        panic!()
    };
    assert_eq!(
        (a.async_event, a.parameter3),
        (AsyncEvent::LOGOUT_REQUEST, 2)
    );
    let deadline = h.conn.poll_timeout().unwrap();
    assert!(deadline > h.now + Duration::from_secs(2));
    h.conn.handle_timeout(deadline);
    assert!(matches!(
        h.events()[..],
        [Event::Close(CloseReason::LogoutTimeout)]
    ));
}

#[test]
fn abort_task_of_a_collecting_write_and_of_a_running_read() {
    let session = SessionParams {
        initial_r2t: true,
        immediate_data: false,
        ..SessionParams::default()
    };
    let mut h = H::with(session, ConnParams::default(), quiet(8), false);
    let w = h.cmd(1, 0x2a, false, true, 4096);
    h.send(Pdu::ScsiCommand(w), &[]);
    h.out();
    let r = h.cmd(2, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(r), &[]);
    assert_eq!(executed(&h.events()).len(), 1);
    for (itt, rtt) in [(10u32, 1u32), (11, 2)] {
        let sn = h.cmd_sn;
        h.send(
            Pdu::TaskMgmtRequest(TaskMgmtRequest {
                immediate: true,
                function: TmfFunction::ABORT_TASK,
                lun: Lun::from_index(0),
                itt,
                referenced_task_tag: rtt,
                cmd_sn: sn,
                exp_stat_sn: 0,
                ref_cmd_sn: 0,
                exp_data_sn: 0,
            }),
            &[],
        );
        let ev = h.events();
        let Event::TaskManagement(req) = &ev[0] else {
            panic!("{ev:?}")
        };
        h.conn.finish_tmf(
            req.itt,
            TmfResponse::FUNCTION_COMPLETE,
            AbortScope::Task(rtt),
        );
    }
    // Task 1 was only collecting: aborted and answered at once. Task 2 is
    // running: its TMF answer waits for it, and its own status is
    // suppressed.
    let tmf_itts = |out: Vec<OutPdu>| -> Vec<u32> {
        out.iter()
            .map(|p| match &p.pdu {
                Pdu::TaskMgmtResponse(t) => {
                    assert_eq!(t.response, TmfResponse::FUNCTION_COMPLETE);
                    t.itt
                }
                other => panic!("only TMF responses expected, got {other:?}"),
            })
            .collect()
    };
    assert_eq!(tmf_itts(h.out()), vec![10]);
    h.conn.complete(2, good(&[0; 512]));
    assert_eq!(tmf_itts(h.out()), vec![11]);
    assert_eq!(h.conn.tasks_in_progress(), 0);
}

#[test]
fn abort_of_an_unknown_task() {
    let mut h = H::new();
    let sn = h.cmd_sn;
    // RefCmdSN below ExpCmdSN: the task ran and is gone.
    h.send(
        Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function: TmfFunction::ABORT_TASK,
            lun: Lun::from_index(0),
            itt: 1,
            referenced_task_tag: 55,
            cmd_sn: sn,
            exp_stat_sn: 0,
            ref_cmd_sn: sn.wrapping_sub(1),
            exp_data_sn: 0,
        }),
        &[],
    );
    let out = h.out();
    assert!(
        matches!(out[0].pdu, Pdu::TaskMgmtResponse(ref t) if t.response == TmfResponse::TASK_DOES_NOT_EXIST)
    );
}

#[test]
fn data_digest_error_rejects_and_closes() {
    let mut h = H::new();
    let bhs = Bhs::new(Opcode::DATA_OUT);
    h.conn.handle_frame_error(&WireError::DataDigest {
        received: 1,
        computed: 2,
        bhs: Box::new(bhs),
    });
    let out = h.out();
    assert!(
        matches!(out[0].pdu, Pdu::Reject(ref r) if r.reason == RejectReason::DATA_DIGEST_ERROR)
    );
    assert!(matches!(
        h.events()[..],
        [Event::Close(CloseReason::ProtocolError(_))]
    ));
}

#[test]
fn oversized_write_executes_without_buffering() {
    let cfg = FfpConfig {
        queue_depth: 4,
        max_write_transfer_length: 1 << 20,
        nop_interval: None,
        ..FfpConfig::default()
    };
    let mut h = H::with(SessionParams::default(), ConnParams::default(), cfg, false);
    let c = h.cmd(1, 0x2a, false, true, 64 << 20);
    h.send(Pdu::ScsiCommand(c), &[]);
    let ex = executed(&h.events());
    assert_eq!(ex.len(), 1);
    assert!(
        ex[0].1.is_empty(),
        "no data collected for an oversize transfer"
    );
    assert!(h.out().is_empty(), "no R2T");
}

fn tmf_request(h: &mut H, function: TmfFunction, itt: u32, rtt: u32) -> TmfRequest {
    let sn = h.cmd_sn;
    h.send(
        Pdu::TaskMgmtRequest(TaskMgmtRequest {
            immediate: true,
            function,
            lun: Lun::from_index(0),
            itt,
            referenced_task_tag: rtt,
            cmd_sn: sn,
            exp_stat_sn: 0,
            ref_cmd_sn: sn,
            exp_data_sn: 0,
        }),
        &[],
    );
    let ev = h.events();
    let [Event::TaskManagement(req)] = &ev[..] else {
        panic!("{ev:?}")
    };
    req.clone()
}

fn tmf_responses(out: Vec<OutPdu>) -> Vec<(u32, TmfResponse)> {
    out.iter()
        .filter_map(|p| match &p.pdu {
            Pdu::TaskMgmtResponse(t) => Some((t.itt, t.response)),
            _ => None,
        })
        .collect()
}

#[test]
fn query_task_and_third_party_abort() {
    let session = SessionParams {
        initial_r2t: true,
        immediate_data: false,
        ..SessionParams::default()
    };
    let mut h = H::with(session, ConnParams::default(), quiet(8), false);
    let w = h.cmd(1, 0x2a, false, true, 4096);
    h.send(Pdu::ScsiCommand(w), &[]);
    h.out();
    let r = h.cmd(2, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(r), &[]);
    assert_eq!(executed(&h.events()).len(), 1);
    assert!(h.conn.has_tasks(AbortScope::Task(1)));
    assert!(h.conn.has_tasks(AbortScope::Lun(Lun::from_index(0))));
    assert!(!h.conn.has_tasks(AbortScope::Lun(Lun::from_index(1))));
    assert!(!h.conn.has_tasks(AbortScope::Task(3)));
    let q = tmf_request(&mut h, TmfFunction::QUERY_TASK, 10, 1);
    h.conn
        .finish_tmf(q.itt, TmfResponse::FUNCTION_SUCCEEDED, AbortScope::None);
    assert_eq!(
        tmf_responses(h.out()),
        vec![(10, TmfResponse::FUNCTION_SUCCEEDED)]
    );
    // Another session's LU reset ends both tasks with no response of
    // their own; late Data-Out for the write is dropped.
    assert_eq!(
        h.conn
            .abort_third_party(AbortScope::Lun(Lun::from_index(0))),
        2
    );
    assert!(!h.conn.has_tasks(AbortScope::All));
    h.conn.complete(2, good(&[0; 512]));
    assert!(h.out().is_empty(), "an aborted read sends nothing");
    assert_eq!(h.conn.tasks_in_progress(), 0);
    assert_eq!(h.conn.abort_third_party(AbortScope::All), 0);
    // The window slots came back: the next command runs.
    let r = h.cmd(3, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(r), &[]);
    assert_eq!(executed(&h.events()).len(), 1);
}

#[test]
fn target_cold_reset_closes_after_its_response() {
    let mut h = H::new();
    let req = tmf_request(&mut h, TmfFunction::TARGET_COLD_RESET, 7, 0xffff_ffff);
    h.conn
        .finish_tmf(req.itt, TmfResponse::FUNCTION_COMPLETE, AbortScope::All);
    assert_eq!(
        tmf_responses(h.out()),
        vec![(7, TmfResponse::FUNCTION_COMPLETE)]
    );
    assert!(matches!(
        h.events()[..],
        [Event::Close(CloseReason::TargetColdReset)]
    ));
    // A warm reset leaves the connection up.
    let mut h = H::new();
    let req = tmf_request(&mut h, TmfFunction::TARGET_WARM_RESET, 8, 0xffff_ffff);
    h.conn
        .finish_tmf(req.itt, TmfResponse::FUNCTION_COMPLETE, AbortScope::All);
    assert_eq!(
        tmf_responses(h.out()),
        vec![(8, TmfResponse::FUNCTION_COMPLETE)]
    );
    assert!(h.events().is_empty());
}

/// Records what a connection reports, in order.
#[derive(Default)]
struct Heard(std::sync::Mutex<Vec<String>>);

impl Heard {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    fn push(&self, s: String) {
        self.0.lock().unwrap().push(s);
    }
}

impl Observer for Heard {
    fn task_management(&self, function: TmfFunction, response: TmfResponse) {
        self.push(format!("tmf {function}: {response}"));
    }
    fn tasks_aborted(&self, n: usize) {
        self.push(format!("aborted {n}"));
    }
    fn digest_error(&self, kind: DigestKind) {
        self.push(format!("digest {kind:?}"));
    }
    fn closing(&self, reason: &CloseReason) {
        self.push(format!("closing {reason:?}"));
    }
}

#[test]
fn the_observer_hears_task_management_aborts_digest_errors_and_the_close() {
    let session = SessionParams {
        initial_r2t: true,
        immediate_data: false,
        ..SessionParams::default()
    };
    let mut h = H::with(session, ConnParams::default(), quiet(8), false);
    let heard = std::sync::Arc::new(Heard::default());
    h.conn.set_observer(heard.clone());
    let w = h.cmd(1, 0x2a, false, true, 4096);
    h.send(Pdu::ScsiCommand(w), &[]);
    let r = h.cmd(2, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(r), &[]);
    h.out();
    h.events();
    let req = tmf_request(&mut h, TmfFunction::ABORT_TASK, 10, 1);
    h.conn
        .finish_tmf(req.itt, TmfResponse::FUNCTION_COMPLETE, AbortScope::Task(1));
    assert_eq!(
        heard.take(),
        ["aborted 1", "tmf ABORT TASK: Function complete"]
    );
    // Another session ends the read; an aborted task is not aborted twice.
    assert_eq!(h.conn.abort_third_party(AbortScope::All), 1);
    assert_eq!(h.conn.abort_third_party(AbortScope::All), 0);
    assert_eq!(heard.take(), ["aborted 1"]);
    assert_eq!(h.conn.complete(2, good(&[0; 512])), None, "no status");
    h.conn.handle_frame_error(&WireError::HeaderDigest {
        received: 1,
        computed: 2,
    });
    h.conn.handle_timeout(h.now + Duration::from_secs(3600));
    assert_eq!(
        heard.take(),
        [
            "digest Header",
            "closing ProtocolError(\"header digest mismatch (received 0x00000001, computed 0x00000002)\")"
        ]
    );
}

#[test]
fn a_completed_command_reports_when_it_arrived() {
    let mut h = H::new();
    let t0 = h.now;
    let r = h.cmd(1, 0x28, true, false, 512);
    h.send(Pdu::ScsiCommand(r), &[]);
    assert_eq!(executed(&h.events()).len(), 1);
    h.now = t0 + Duration::from_millis(5);
    assert_eq!(h.conn.complete(1, good(&[0; 512])), Some(t0));
    assert_eq!(h.conn.complete(1, good(&[0; 512])), None, "already done");
}
