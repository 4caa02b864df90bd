//! The initiator's sans-IO login and full feature phase against the
//! target's, stepped deterministically in memory: every PDU goes through
//! the real encoder and decoder, and a tiny RAM device answers READ(10)
//! and WRITE(10).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ironlun_proto::chap::{ChapError, ChapPolicy, Credentials, InitiatorAuth, RANDOM_BYTES};
use ironlun_proto::initiator::{
    InitiatorLogin, InitiatorSession, LoginConfig, LoginError, LoginProgress, Reply, ScsiRequest,
    SessionEvent, SessionLimits, SubmitError, TaskError, ATTR_SIMPLE,
};
use ironlun_proto::login::LoginStatus;
use ironlun_proto::params::{DigestKind, Offers};
use ironlun_proto::target::login::{
    LoginContext, LoginResult, LoginStep, NewSession, TargetInfo, TargetLogin,
};
use ironlun_proto::target::{
    Directory, Event, FfpConfig, ScsiResult, SendTargetsQuery, TargetConnection, TargetListing,
};
use ironlun_proto::OutPdu;
use ironlun_scsi_codes::{opcode, Status};
use ironlun_wire::{
    Digests, Frame, FrameDecoder, LogoutReason, Lun, Outbox, Pdu, R2t, Residual, TmfFunction,
    TmfResponse, RESERVED_TAG,
};

const TARGET: &str = "iqn.2026-11.test:disk";
const BLOCK: usize = 512;

struct Ctx {
    offers: Offers,
    queue_depth: u32,
    chap: Option<ChapPolicy>,
    random_calls: u8,
    /// Mutual CHAP challenges of earlier logins, when remembered.
    challenges: Option<Vec<Vec<u8>>>,
}

impl LoginContext for Ctx {
    fn find_target(&mut self, name: &str, _i: &str) -> Result<TargetInfo, LoginStatus> {
        if name != TARGET {
            return Err(LoginStatus::NOT_FOUND);
        }
        Ok(TargetInfo {
            name: TARGET.into(),
            alias: Some("disk".into()),
            portal_group_tag: 1,
            offers: self.offers.clone(),
            queue_depth: self.queue_depth,
            chap: self.chap.clone(),
        })
    }
    fn discovery_offers(&self) -> Result<Offers, LoginStatus> {
        Ok(self.offers.clone())
    }
    fn discovery_chap(&self) -> Option<ChapPolicy> {
        self.chap.clone()
    }
    fn random(&mut self, buf: &mut [u8]) -> Result<(), LoginStatus> {
        // Deterministic, and different on every call.
        self.random_calls = self.random_calls.wrapping_add(1);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = self.random_calls.wrapping_mul(31).wrapping_add(i as u8);
        }
        Ok(())
    }
    fn challenge_seen_before(&mut self, challenge: &[u8]) -> bool {
        let Some(seen) = &mut self.challenges else {
            return false;
        };
        let known = seen.iter().any(|c| c == challenge);
        seen.push(challenge.to_vec());
        known
    }
    fn create_session(&mut self, _s: &NewSession) -> Result<u16, LoginStatus> {
        Ok(0x42)
    }
}

struct Dir;

impl Directory for Dir {
    fn send_targets(&self, _i: &str, _q: SendTargetsQuery<'_>) -> Vec<TargetListing> {
        (0..300)
            .map(|n| TargetListing {
                name: format!("iqn.2026-11.test:t{n:03}"),
                addresses: vec!["127.0.0.1:3260,1".into()],
            })
            .collect()
    }
}

/// Encodes and decodes a PDU as the wire would carry it.
fn framed(p: OutPdu, digests: Digests) -> Frame {
    let mut o = Outbox::new(digests);
    o.push(&p.pdu, p.data).unwrap();
    let mut bytes = Vec::new();
    o.write_with(|iov| {
        let n = iov.iter().map(|s| s.len()).sum();
        for s in iov {
            bytes.extend_from_slice(s);
        }
        Ok(n)
    })
    .unwrap();
    let mut d = FrameDecoder::new(1 << 24);
    d.digests = digests;
    let mut buf = BytesMut::from(&bytes[..]);
    let f = d.decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    f
}

/// Encodes and decodes a PDU: what the other end's decoder yields.
fn wire(p: OutPdu, digests: Digests) -> (Pdu, Bytes) {
    let f = framed(p, digests);
    (Pdu::decode(&f.bhs).unwrap(), f.data)
}

/// The initiator is fed a PDU and its data as the frame its driver
/// would hand it.
trait Feed {
    fn feed(&mut self, pdu: Pdu, data: Bytes, now: Instant);
}

impl<T> Feed for InitiatorSession<T> {
    fn feed(&mut self, pdu: Pdu, data: Bytes, now: Instant) {
        let p = OutPdu {
            pdu,
            data: data.into(),
        };
        self.handle_frame(framed(p, Digests::default()), now)
            .unwrap();
    }
}

fn login(
    cfg: LoginConfig,
    offers: Offers,
    queue_depth: u32,
) -> Result<(ironlun_proto::initiator::LoginOutcome, LoginResult), LoginError> {
    login_with_chap(cfg, offers, queue_depth, None)
}

fn login_with_chap(
    cfg: LoginConfig,
    offers: Offers,
    queue_depth: u32,
    chap: Option<ChapPolicy>,
) -> Result<(ironlun_proto::initiator::LoginOutcome, LoginResult), LoginError> {
    let mut ctx = Ctx {
        offers,
        queue_depth,
        chap,
        random_calls: 0,
        challenges: None,
    };
    login_in(cfg, &mut ctx, [0xa5; RANDOM_BYTES])
}

/// One login against `ctx` with the initiator's random bytes `nonce`.
fn login_in(
    cfg: LoginConfig,
    ctx: &mut Ctx,
    nonce: [u8; RANDOM_BYTES],
) -> Result<(ironlun_proto::initiator::LoginOutcome, LoginResult), LoginError> {
    let mut ini = InitiatorLogin::new(cfg, nonce);
    let mut tgt = TargetLogin::new(1000, 8, 64 << 10);
    let mut req = ini.start();
    for _ in 0..10 {
        let (resp, result) = match tgt.handle_frame(&framed(req, Digests::default()), ctx) {
            LoginStep::Continue(resp) => (resp, None),
            LoginStep::Complete { response, result } => (response, Some(result)),
            LoginStep::Failed { response, .. } => (response, None),
        };
        match ini.handle_frame(&framed(resp, Digests::default()))? {
            LoginProgress::Send(next) => req = next,
            LoginProgress::Done(outcome) => return Ok((*outcome, *result.expect("target done"))),
        }
    }
    panic!("login did not finish");
}

/// Both ends of one connection in full feature phase, plus a RAM disk.
struct Pair {
    ini: InitiatorSession<u64>,
    tgt: TargetConnection,
    disk: Vec<u8>,
    digests: Digests,
    now: Instant,
    /// PDUs seen on the wire, by kind.
    r2ts: usize,
    data_outs: usize,
    immediate_bytes: usize,
    max_outstanding: usize,
    outstanding: usize,
    replies: Vec<(u64, Result<Reply, TaskError>)>,
    /// The next this many commands end with a unit attention.
    unit_attentions: usize,
}

impl Pair {
    fn new(ini_offers: Offers, tgt_offers: Offers, queue_depth: u32) -> Pair {
        Self::with_limits(
            ini_offers,
            tgt_offers,
            queue_depth,
            SessionLimits::default(),
        )
    }

    fn with_limits(
        ini_offers: Offers,
        tgt_offers: Offers,
        queue_depth: u32,
        limits: SessionLimits,
    ) -> Pair {
        let mut cfg = LoginConfig::normal("iqn.2026-11.test:ini", TARGET);
        cfg.offers = ini_offers;
        let (outcome, result) = login(cfg, tgt_offers, queue_depth).unwrap();
        let mut agreed = result.session.clone();
        if agreed.initial_r2t && !agreed.immediate_data {
            // FirstBurstLength is irrelevant then (RFC 7143 §13.14).
            agreed.first_burst_length = outcome.session.first_burst_length;
        }
        assert_eq!(outcome.session, agreed, "both sides agree");
        assert_eq!(
            outcome.conn.max_xmit_data_segment_length,
            result.conn.max_recv_data_segment_length
        );
        assert_eq!(
            outcome.conn.max_recv_data_segment_length,
            result.conn.max_xmit_data_segment_length
        );
        let now = Instant::now();
        let digests = Digests {
            header: outcome.conn.header_digest,
            data: outcome.conn.data_digest,
        };
        let ffp = FfpConfig {
            queue_depth,
            ..FfpConfig::default()
        };
        Pair {
            ini: InitiatorSession::new(&outcome, limits, now),
            tgt: TargetConnection::new(&result, ffp, Box::new(Dir), now),
            disk: vec![0; 1 << 20],
            digests,
            now,
            r2ts: 0,
            data_outs: 0,
            immediate_bytes: 0,
            max_outstanding: 0,
            outstanding: 0,
            replies: Vec::new(),
            unit_attentions: 0,
        }
    }

    /// Moves PDUs both ways and runs the device until nothing moves.
    fn run(&mut self) {
        loop {
            let mut moved = false;
            while let Some(p) = self.ini.poll_transmit() {
                moved = true;
                let (pdu, data) = wire(p, self.digests);
                match &pdu {
                    Pdu::ScsiCommand(c) => {
                        self.immediate_bytes += data.len();
                        if !c.immediate {
                            self.outstanding += 1;
                            self.max_outstanding = self.max_outstanding.max(self.outstanding);
                        }
                    }
                    Pdu::DataOut(_) => self.data_outs += 1,
                    _ => {}
                }
                let mut b = BytesMut::new();
                ironlun_wire::encode_frame(&pdu.encode(), &[], &data, self.digests, &mut b)
                    .unwrap();
                let mut d = FrameDecoder::new(1 << 24);
                d.digests = self.digests;
                let f = d.decode(&mut b).unwrap().unwrap();
                self.tgt.handle_frame(f, self.now);
            }
            while let Some(ev) = self.tgt.poll_event() {
                moved = true;
                if let Event::Execute(task) = ev {
                    let result = self.execute(task.cdb.as_slice(), task.data_out.contiguous());
                    self.tgt.complete(task.itt, result);
                }
            }
            while let Some(p) = self.tgt.poll_transmit() {
                moved = true;
                let (pdu, data) = wire(p, self.digests);
                match &pdu {
                    Pdu::R2t(_) => self.r2ts += 1,
                    Pdu::ScsiResponse(_) => self.outstanding -= 1,
                    Pdu::DataIn(d) if d.status.is_some() => self.outstanding -= 1,
                    _ => {}
                }
                self.ini.feed(pdu, data, self.now);
            }
            while let Some(c) = self.ini.poll_completion() {
                moved = true;
                self.replies.push((c.token, c.result));
            }
            if !moved {
                break;
            }
        }
    }

    fn execute(&mut self, cdb: &[u8], data_out: &[u8]) -> ScsiResult {
        if self.unit_attentions > 0 {
            self.unit_attentions -= 1;
            // POWER ON, RESET, OR BUS DEVICE RESET OCCURRED, fixed format.
            let mut sense = vec![0u8; 18];
            sense[0] = 0x70;
            sense[2] = 0x06;
            sense[7] = 10;
            sense[12] = 0x29;
            return ScsiResult {
                status: Status::CHECK_CONDITION,
                sense: Bytes::from(sense),
                ..Default::default()
            };
        }
        let lba = u32::from_be_bytes(cdb[2..6].try_into().unwrap()) as usize;
        let blocks = u16::from_be_bytes(cdb[7..9].try_into().unwrap()) as usize;
        let range = lba * BLOCK..(lba + blocks) * BLOCK;
        match cdb[0] {
            opcode::READ_10 => ScsiResult {
                status: Status::GOOD,
                data_in: Bytes::copy_from_slice(&self.disk[range]).into(),
                transfer_length: (blocks * BLOCK) as u32,
                ..Default::default()
            },
            opcode::WRITE_10 => {
                self.disk[range].copy_from_slice(data_out);
                ScsiResult {
                    transfer_length: (blocks * BLOCK) as u32,
                    ..Default::default()
                }
            }
            _ => panic!("unexpected CDB"),
        }
    }
}

fn rw10(op: u8, lba: u32, blocks: u16) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[0] = op;
    c[2..6].copy_from_slice(&lba.to_be_bytes());
    c[7..9].copy_from_slice(&blocks.to_be_bytes());
    c
}

fn write(lba: u32, data: &[u8]) -> ScsiRequest {
    ScsiRequest {
        lun: Lun::from_index(0),
        cdb: rw10(opcode::WRITE_10, lba, (data.len() / BLOCK) as u16),
        read_len: 0,
        write: Bytes::copy_from_slice(data),
        attr: ATTR_SIMPLE,
        discard_data: false,
    }
}

fn read(lba: u32, len: usize) -> ScsiRequest {
    ScsiRequest {
        lun: Lun::from_index(0),
        cdb: rw10(opcode::READ_10, lba, (len / BLOCK) as u16),
        read_len: len as u32,
        write: Bytes::new(),
        attr: ATTR_SIMPLE,
        discard_data: false,
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn offers(initial_r2t: bool, immediate_data: bool, first_burst: u32, mrdsl: u32) -> Offers {
    Offers {
        initial_r2t,
        immediate_data,
        first_burst_length: first_burst,
        max_recv_data_segment_length: mrdsl,
        max_burst_length: 65536,
        ..Offers::default()
    }
}

#[test]
fn every_write_mode_round_trips_and_costs_the_expected_r2ts() {
    // (InitialR2T, ImmediateData): solicited only, immediate only,
    // unsolicited Data-Out only, both.
    for (r2t, imm) in [(true, false), (true, true), (false, false), (false, true)] {
        let tgt = Offers {
            initial_r2t: r2t,
            immediate_data: imm,
            max_recv_data_segment_length: 8192,
            ..Offers::default()
        };
        let mut p = Pair::new(offers(r2t, imm, 16384, 4096), tgt, 16);
        let s = p.ini.session_params().clone();
        assert_eq!((s.initial_r2t, s.immediate_data), (r2t, imm));
        // 200 KiB: immediate/unsolicited part, then several R2T bursts of
        // MaxBurstLength 64 KiB, each in Data-Out PDUs of 8 KiB.
        let data = pattern(200 * 1024, 7);
        p.ini.submit(write(8, &data), 1).unwrap();
        p.run();
        let unsolicited = if r2t && !imm { 0 } else { 16384 };
        let expect_r2ts = (data.len() - unsolicited).div_ceil(65536);
        assert_eq!(
            p.r2ts, expect_r2ts,
            "R2Ts for InitialR2T={r2t} ImmediateData={imm}"
        );
        assert_eq!(p.immediate_bytes, if imm { 8192 } else { 0 });
        p.ini.submit(read(8, data.len()), 2).unwrap();
        p.run();
        assert_eq!(p.replies.len(), 2);
        assert!(matches!(&p.replies[0], (1, Ok(Reply::Scsi(r))) if r.status == Status::GOOD));
        let (2, Ok(Reply::Scsi(r))) = &p.replies[1] else {
            panic!("{:?}", p.replies[1])
        };
        assert_eq!(r.status, Status::GOOD);
        assert_eq!(
            &r.data[..],
            &data[..],
            "read back InitialR2T={r2t} ImmediateData={imm}"
        );
    }
}

#[test]
fn discarded_read_data_is_checked_and_counted_but_not_kept() {
    let tgt = Offers {
        max_recv_data_segment_length: 8192,
        ..Offers::default()
    };
    let mut p = Pair::new(offers(false, true, 16384, 4096), tgt, 16);
    let data = pattern(100 * 1024, 3);
    p.ini.submit(write(0, &data), 1).unwrap();
    let mut r = read(0, data.len());
    r.discard_data = true;
    p.ini.submit(r, 2).unwrap();
    p.run();
    let Some((_, Ok(Reply::Scsi(r)))) = p.replies.iter().find(|(t, _)| *t == 2) else {
        panic!("{:?}", p.replies)
    };
    assert_eq!((r.status, r.residual), (Status::GOOD, Residual::None));
    assert!(r.data.is_empty(), "nothing kept");
    // The same read, kept, gives the bytes (the target sent them).
    p.ini.submit(read(0, data.len()), 3).unwrap();
    p.run();
    let Some((_, Ok(Reply::Scsi(r)))) = p.replies.iter().find(|(t, _)| *t == 3) else {
        panic!("{:?}", p.replies)
    };
    assert_eq!(&r.data[..], &data[..]);
}

#[test]
fn digests_are_negotiated_and_used() {
    let crc = Offers {
        header_digest: vec![DigestKind::Crc32c],
        data_digest: vec![DigestKind::Crc32c],
        ..Offers::default()
    };
    let mut p = Pair::new(crc, Offers::default(), 8);
    assert!(p.ini.conn_params().header_digest && p.ini.conn_params().data_digest);
    assert!(p.digests.header && p.digests.data);
    let data = pattern(64 * 1024, 3);
    p.ini.submit(write(0, &data), 1).unwrap();
    p.ini.submit(read(0, data.len()), 2).unwrap();
    p.run();
    let (2, Ok(Reply::Scsi(r))) = &p.replies[1] else {
        panic!()
    };
    assert_eq!(&r.data[..], &data[..]);
}

#[test]
fn the_command_window_bounds_what_is_in_flight() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 4);
    for i in 0..50u64 {
        p.ini.submit(read(i as u32, 4096), i).unwrap();
    }
    assert!(p.ini.tasks_in_use() == 50);
    p.run();
    assert_eq!(p.replies.len(), 50);
    assert!(p.replies.iter().all(|(_, r)| r.is_ok()));
    assert!(
        p.max_outstanding <= 4,
        "{} commands outstanding with a window of 4",
        p.max_outstanding
    );
    assert_eq!(p.ini.tasks_in_use(), 0);
}

#[test]
fn task_tags_are_bounded() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 4);
    let limits = SessionLimits {
        max_tasks: 3,
        ..SessionLimits::default()
    };
    let mut cfg = LoginConfig::normal("iqn.2026-11.test:ini", TARGET);
    cfg.isid[5] = 9;
    let (outcome, _) = login(cfg, Offers::default(), 4).unwrap();
    let mut s: InitiatorSession<u32> = InitiatorSession::new(&outcome, limits, p.now);
    for i in 0..3 {
        s.submit(read(0, 512), i).unwrap();
    }
    assert!(s.submit(read(0, 512), 9).is_err());
    // The pair itself is untouched by this.
    p.run();
}

#[test]
fn send_targets_follows_text_continuation() {
    let mut cfg = LoginConfig::discovery("iqn.2026-11.test:ini");
    cfg.offers.max_recv_data_segment_length = 4096;
    let (outcome, result) = login(cfg, Offers::default(), 8).unwrap();
    assert!(result.discovery);
    let now = Instant::now();
    let mut ini: InitiatorSession<u8> =
        InitiatorSession::new(&outcome, SessionLimits::default(), now);
    let mut tgt = TargetConnection::new(&result, FfpConfig::default(), Box::new(Dir), now);
    ini.submit_text(&[("SendTargets", "All")], 5).unwrap();
    let mut rounds = 0;
    let reply = loop {
        rounds += 1;
        assert!(rounds < 100);
        while let Some(p) = ini.poll_transmit() {
            let (pdu, data) = wire(p, Digests::default());
            let mut b = BytesMut::new();
            ironlun_wire::encode_frame(&pdu.encode(), &[], &data, Digests::default(), &mut b)
                .unwrap();
            let f = FrameDecoder::new(1 << 24).decode(&mut b).unwrap().unwrap();
            tgt.handle_frame(f, now);
        }
        while let Some(p) = tgt.poll_transmit() {
            let (pdu, data) = wire(p, Digests::default());
            assert!(
                data.len() <= 4096,
                "target honours our MaxRecvDataSegmentLength"
            );
            ini.feed(pdu, data, now);
        }
        if let Some(c) = ini.poll_completion() {
            break c;
        }
    };
    assert_eq!(reply.token, 5);
    let Ok(Reply::Text(pairs)) = reply.result else {
        panic!("{:?}", reply.result)
    };
    let names: Vec<_> = pairs.iter().filter(|(k, _)| k == "TargetName").collect();
    assert_eq!(names.len(), 300);
    assert!(rounds > 2, "the answer took several PDUs");
}

#[test]
fn login_to_an_unknown_target_reports_the_status() {
    let cfg = LoginConfig::normal("iqn.2026-11.test:ini", "iqn.2026-11.test:nope");
    let err = login(cfg, Offers::default(), 8).unwrap_err();
    assert_eq!(
        err,
        LoginError::Refused {
            status: LoginStatus::NOT_FOUND,
            redirect: None
        }
    );
}

#[test]
fn target_pings_are_answered_and_silence_fails_the_connection() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 8);
    // A target ping: NOP-In with a TTT wants a NOP-Out echo.
    p.ini.feed(
        Pdu::NopIn(ironlun_wire::NopIn {
            itt: RESERVED_TAG,
            ttt: 0x77,
            ..Default::default()
        }),
        Bytes::from_static(b"ping"),
        p.now,
    );
    let echo = p.ini.poll_transmit().unwrap();
    let Pdu::NopOut(n) = &echo.pdu else { panic!() };
    assert_eq!(
        (n.ttt, n.itt, &echo.data.to_bytes().unwrap()[..]),
        (0x77, RESERVED_TAG, &b"ping"[..])
    );

    // Keep-alive: after the interval a ping goes out; unanswered, the
    // connection fails and pending tasks end with an error.
    p.ini.submit(read(0, 512), 1).unwrap();
    let _ = std::iter::from_fn(|| p.ini.poll_transmit()).count();
    let t = p.ini.poll_timeout().unwrap();
    p.ini.handle_timeout(t);
    let ping = p.ini.poll_transmit().unwrap();
    assert!(matches!(ping.pdu, Pdu::NopOut(_)));
    let t2 = p.ini.poll_timeout().unwrap();
    assert!(t2 > t);
    p.ini.handle_timeout(t2 + Duration::from_millis(1));
    let c = p.ini.poll_completion().unwrap();
    assert!(matches!(c.result, Err(TaskError::ConnectionFailed(_))));
    assert!(matches!(p.ini.poll_event(), Some(SessionEvent::Failed(_))));
}

#[test]
fn hostile_target_pdus_fail_tasks_or_the_connection_without_panicking() {
    // An R2T beyond the write fails that task only.
    let mut p = Pair::new(offers(true, false, 65536, 8192), Offers::default(), 8);
    let itt = p.ini.submit(write(0, &[1u8; 4096]), 1).unwrap();
    let _ = std::iter::from_fn(|| p.ini.poll_transmit()).count();
    p.ini.feed(
        Pdu::R2t(R2t {
            itt,
            ttt: 9,
            buffer_offset: 4000,
            desired_data_transfer_length: 4096,
            max_cmd_sn: 100,
            exp_cmd_sn: 1,
            ..Default::default()
        }),
        Bytes::new(),
        p.now,
    );
    let c = p.ini.poll_completion().unwrap();
    assert!(
        matches!(c.result, Err(TaskError::Protocol(_))),
        "{:?}",
        c.result
    );
    assert!(p.ini.failure().is_none());

    // Data-In for a tag we never used fails the connection.
    p.ini.feed(
        Pdu::DataIn(ironlun_wire::DataIn {
            itt: 0x1234_5678,
            ..Default::default()
        }),
        Bytes::from_static(b"junk"),
        p.now,
    );
    assert!(p.ini.failure().is_some());
    assert!(p.ini.submit(read(0, 512), 2).is_err());
}

#[test]
fn unfinished_commands_can_be_taken_back_for_reissue() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 2);
    for i in 0..5 {
        p.ini.submit(read(i, 512), u64::from(i)).unwrap();
    }
    let back = p.ini.take_unfinished("path down");
    let mut tokens: Vec<u64> = back.iter().map(|(_, t)| *t).collect();
    tokens.sort();
    assert_eq!(tokens, vec![0, 1, 2, 3, 4]);
    assert_eq!(p.ini.tasks_in_use(), 0);
}

#[test]
fn unit_attentions_are_retried_within_the_limit() {
    let limits = SessionLimits {
        unit_attention_retries: 2,
        ..SessionLimits::default()
    };
    // Small PDUs so the read's data arrives in several Data-In PDUs: a
    // retried read must start its reassembly afresh.
    let o = offers(false, true, 65536, 4096);
    let mut p = Pair::with_limits(o.clone(), o, 8, limits);
    let data = pattern(16 * BLOCK, 7);
    p.unit_attentions = 2;
    p.ini.submit(write(8, &data), 1).unwrap();
    p.run();
    let mut events = Vec::new();
    while let Some(e) = p.ini.poll_event() {
        events.push(e);
    }
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events.iter().all(|e| matches!(e,
        SessionEvent::UnitAttention { lun, sense } if lun.index() == Some(0) && sense[12] == 0x29))
    );
    match p.replies.pop() {
        Some((1, Ok(Reply::Scsi(r)))) => assert_eq!(r.status, Status::GOOD),
        other => panic!("{other:?}"),
    }
    assert_eq!(&p.disk[8 * BLOCK..24 * BLOCK], &data[..]);

    p.unit_attentions = 1;
    p.ini.submit(read(8, data.len()), 2).unwrap();
    p.run();
    match p.replies.pop() {
        Some((2, Ok(Reply::Scsi(r)))) => {
            assert_eq!(r.status, Status::GOOD);
            assert_eq!(&r.data[..], &data[..]);
        }
        other => panic!("{other:?}"),
    }

    // One more than the limit: the caller sees the unit attention.
    p.unit_attentions = 3;
    p.ini.submit(read(8, BLOCK), 3).unwrap();
    p.run();
    match p.replies.pop() {
        Some((3, Ok(Reply::Scsi(r)))) => {
            assert_eq!(r.status, Status::CHECK_CONDITION);
            assert_eq!(r.sense[2] & 0x0f, 6);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.ini.tasks_in_use(), 0);
}

#[test]
fn without_retries_a_unit_attention_reaches_the_caller() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 8);
    p.unit_attentions = 1;
    p.ini.submit(read(0, BLOCK), 9).unwrap();
    p.run();
    assert!(p.ini.poll_event().is_none());
    match p.replies.pop() {
        Some((9, Ok(Reply::Scsi(r)))) => assert_eq!(r.status, Status::CHECK_CONDITION),
        other => panic!("{other:?}"),
    }
}

fn creds(s: &str) -> Credentials {
    Credentials::parse(s).unwrap()
}

fn chap_target(mutual: bool) -> Option<ChapPolicy> {
    Some(ChapPolicy {
        initiator: creds("alice:initiator-secret"),
        target: mutual.then(|| creds("disk:target-secret-1")),
    })
}

fn with_auth(mut cfg: LoginConfig, user_secret: &str, mutual: Option<&str>) -> LoginConfig {
    cfg.auth = Some(InitiatorAuth {
        credentials: creds(user_secret),
        mutual: mutual.map(creds),
    });
    cfg
}

/// CHAP through both sans-IO logins, normal and discovery sessions,
/// one-way and mutual (RFC 7143 §12.1.3).
#[test]
fn chap_logins_succeed_one_way_and_mutual() {
    for discovery in [false, true] {
        for mutual in [false, true] {
            let base = if discovery {
                LoginConfig::discovery("iqn.2026-11.test:host")
            } else {
                LoginConfig::normal("iqn.2026-11.test:host", TARGET)
            };
            let cfg = with_auth(
                base,
                "alice:initiator-secret",
                mutual.then_some("disk:target-secret-1"),
            );
            let (outcome, result) = login_with_chap(cfg, Offers::default(), 8, chap_target(mutual))
                .unwrap_or_else(|e| panic!("discovery={discovery} mutual={mutual}: {e}"));
            assert_eq!(outcome.tsih, 0x42);
            assert_eq!(result.discovery, discovery);
        }
    }
}

#[test]
fn chap_failures_are_refused_with_the_right_status() {
    let normal = || LoginConfig::normal("iqn.2026-11.test:host", TARGET);
    let refused = |r: Result<_, LoginError>| match r {
        Err(LoginError::Refused { status, .. }) => status,
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("expected a refusal, the login succeeded"),
    };
    // Wrong secret.
    let cfg = with_auth(normal(), "alice:wrong-secret-xx", None);
    let r = login_with_chap(cfg, Offers::default(), 8, chap_target(false));
    assert_eq!(refused(r), LoginStatus::AUTHENTICATION_FAILURE);
    // Unknown user.
    let cfg = with_auth(normal(), "mallory:initiator-secret", None);
    let r = login_with_chap(cfg, Offers::default(), 8, chap_target(false));
    assert_eq!(refused(r), LoginStatus::AUTHENTICATION_FAILURE);
    // No credentials at all against a target that requires CHAP.
    let r = login_with_chap(normal(), Offers::default(), 8, chap_target(false));
    assert_eq!(refused(r), LoginStatus::AUTHENTICATION_FAILURE);
    // Mutual CHAP asked of a target without its own credentials.
    let cfg = with_auth(
        normal(),
        "alice:initiator-secret",
        Some("disk:target-secret-1"),
    );
    let r = login_with_chap(cfg, Offers::default(), 8, chap_target(false));
    assert_eq!(refused(r), LoginStatus::AUTHENTICATION_FAILURE);
}

/// A mutual CHAP challenge that an earlier login used is a replay: the
/// login is refused with 0x0201 and the target's response never goes out.
#[test]
fn a_replayed_mutual_challenge_is_refused() {
    let cfg = || {
        with_auth(
            LoginConfig::normal("iqn.2026-11.test:host", TARGET),
            "alice:initiator-secret",
            Some("disk:target-secret-1"),
        )
    };
    let mut ctx = Ctx {
        offers: Offers::default(),
        queue_depth: 8,
        chap: chap_target(true),
        random_calls: 0,
        challenges: Some(Vec::new()),
    };
    login_in(cfg(), &mut ctx, [1; RANDOM_BYTES]).unwrap();
    login_in(cfg(), &mut ctx, [2; RANDOM_BYTES]).unwrap();
    // The same initiator random bytes: the same challenge as the first.
    match login_in(cfg(), &mut ctx, [1; RANDOM_BYTES]) {
        Err(LoginError::Refused { status, .. }) => {
            assert_eq!(status, LoginStatus::AUTHENTICATION_FAILURE)
        }
        other => panic!("a replayed challenge was answered: {other:?}"),
    }
    assert_eq!(ctx.challenges.as_ref().map(Vec::len), Some(3));
}

/// The initiator side refuses a target that cannot prove itself, and one
/// that does not do CHAP when we asked for it (no silent downgrade).
#[test]
fn the_initiator_refuses_an_impostor_or_a_downgrade() {
    let normal = || LoginConfig::normal("iqn.2026-11.test:host", TARGET);
    let cfg = with_auth(
        normal(),
        "alice:initiator-secret",
        Some("disk:the-real-target-secret"),
    );
    let r = login_with_chap(cfg, Offers::default(), 8, chap_target(true));
    assert!(
        matches!(r, Err(LoginError::Chap(ChapError::WrongTargetResponse))),
        "{r:?}"
    );
    let cfg = with_auth(normal(), "alice:initiator-secret", None);
    let r = login_with_chap(cfg, Offers::default(), 8, None);
    assert!(
        matches!(&r, Err(LoginError::Protocol(m)) if m.contains("AuthMethod=CHAP")),
        "{r:?}"
    );
}

/// Found with the initiator's fuzz harness (ironlun-fuzz `initiator`, a
/// hand-written hostile input kept as
/// `fuzz/regressions/initiator/reject-of-a-command-never-sent`): a Reject
/// naming a command still waiting for the window completed that command,
/// but left its slot in the waiting queue; the next task to take the slot
/// was then sent twice, with two CmdSNs. A target cannot reject what was
/// never sent: such a Reject now fails the connection, as any Reject
/// that names no task of ours does.
#[test]
fn a_reject_naming_a_command_never_sent_fails_the_connection() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 1);
    let sent = p.ini.submit(read(0, 512), 1).unwrap();
    let waiting = p.ini.submit(read(1, 512), 2).unwrap();
    let out: Vec<OutPdu> = std::iter::from_fn(|| p.ini.poll_transmit()).collect();
    assert_eq!(out.len(), 1, "a window of one sends one command");
    let mut rejected = Pdu::ScsiCommand(ironlun_wire::ScsiCommand::default()).encode();
    rejected.set_itt(waiting);
    p.ini.feed(
        Pdu::Reject(ironlun_wire::Reject {
            reason: ironlun_wire::RejectReason::INVALID_PDU_FIELD,
            stat_sn: 1002,
            exp_cmd_sn: 1,
            max_cmd_sn: 1,
            ..Default::default()
        }),
        Bytes::copy_from_slice(rejected.as_bytes()),
        p.now,
    );
    assert!(p.ini.failure().is_some());
    let mut tokens: Vec<u64> = std::iter::from_fn(|| p.ini.poll_completion())
        .map(|c| {
            assert!(matches!(c.result, Err(TaskError::ConnectionFailed(_))));
            c.token
        })
        .collect();
    tokens.sort();
    assert_eq!(tokens, vec![1, 2], "each task completes once ({sent:#x})");
    assert!(p.ini.poll_transmit().is_none());
}

/// Found with the initiator's fuzz harness
/// (`fuzz/regressions/initiator/window-nop-in-acknowledged`): a NOP-In
/// with ITT and TTT 0xffffffff (a target announcing its window) carries
/// the next StatSN without using it (RFC 7143 §11.19.5), but the
/// initiator took it as a status and acknowledged it in ExpStatSN before
/// the target had sent it. Only a NOP-In answering our ping advances.
#[test]
fn a_nop_in_with_the_reserved_itt_does_not_advance_exp_stat_sn() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 8);
    p.ini.submit_ping(1).unwrap();
    let ping = p.ini.poll_transmit().unwrap();
    let Pdu::NopOut(first) = &ping.pdu else {
        panic!("{ping:?}")
    };
    let next = first.exp_stat_sn;
    let nop_in = |itt, ttt| {
        Pdu::NopIn(ironlun_wire::NopIn {
            itt,
            ttt,
            stat_sn: next,
            exp_cmd_sn: 1,
            max_cmd_sn: 9,
            ..Default::default()
        })
    };
    // A window announcement, then a ping: neither uses the StatSN.
    p.ini
        .feed(nop_in(RESERVED_TAG, RESERVED_TAG), Bytes::new(), p.now);
    p.ini.feed(nop_in(RESERVED_TAG, 0x77), Bytes::new(), p.now);
    let Pdu::NopOut(echo) = p.ini.poll_transmit().unwrap().pdu else {
        panic!()
    };
    assert_eq!((echo.ttt, echo.exp_stat_sn), (0x77, next));
    // The answer to our ping is a status: it is acknowledged.
    p.ini
        .feed(nop_in(first.itt, RESERVED_TAG), Bytes::new(), p.now);
    assert!(p.ini.poll_completion().unwrap().result.is_ok());
    p.ini.submit_ping(2).unwrap();
    let Pdu::NopOut(n) = p.ini.poll_transmit().unwrap().pdu else {
        panic!()
    };
    assert_eq!(n.exp_stat_sn, next.wrapping_add(1));
}

/// Found with the initiator's fuzz harness
/// (`fuzz/regressions/initiator/ping-data-beyond-the-targets-segment`): a
/// target ping with more data than the target itself accepts in one PDU
/// was echoed whole, past the target's MaxRecvDataSegmentLength. The
/// echo now stops there (a ping should carry no data at all, RFC 7143
/// §11.19.2).
#[test]
fn a_ping_echo_stays_within_the_targets_max_recv_data_segment_length() {
    let ini = Offers {
        max_recv_data_segment_length: 65536,
        ..Offers::default()
    };
    let tgt = Offers {
        max_recv_data_segment_length: 8192,
        ..Offers::default()
    };
    let mut p = Pair::new(ini, tgt, 8);
    let ping: Vec<u8> = (0..9000u32).map(|i| i as u8).collect();
    p.ini.feed(
        Pdu::NopIn(ironlun_wire::NopIn {
            itt: RESERVED_TAG,
            ttt: 0x77,
            ..Default::default()
        }),
        Bytes::from(ping.clone()),
        p.now,
    );
    let echo = p.ini.poll_transmit().unwrap();
    assert!(matches!(echo.pdu, Pdu::NopOut(ref n) if n.ttt == 0x77));
    assert_eq!(&echo.data.to_bytes().unwrap()[..], &ping[..8192]);
}

/// Found by the `initiator` fuzz target (libFuzzer, 3 s into its first
/// run; `fuzz/regressions/initiator/unanswered-data-digest-falls-back-to-none`):
/// an initiator offering only CRC32C logged in with DataDigest=None when
/// the target left the proposal unanswered (its answer mangled into an
/// unknown key): the unanswered key kept its RFC default. A target could
/// switch off a digest we require by ignoring it; a digest in effect must
/// now be one we offered, or the login fails.
#[test]
fn a_digest_left_unanswered_does_not_fall_back_to_one_not_offered() {
    let login_with = |answers: &[(&str, &str)]| {
        let mut cfg = LoginConfig::normal("iqn.2026-11.test:ini", TARGET);
        cfg.offers.header_digest = vec![DigestKind::Crc32c];
        cfg.offers.data_digest = vec![DigestKind::Crc32c];
        let mut ini = InitiatorLogin::new(cfg, [0; RANDOM_BYTES]);
        let Pdu::LoginRequest(req) = ini.start().pdu else {
            panic!()
        };
        let response = |csg, nsg, pairs: &[(&str, &str)]| OutPdu {
            pdu: Pdu::LoginResponse(ironlun_wire::LoginResponse {
                transit: true,
                csg,
                nsg,
                isid: req.isid,
                itt: req.itt,
                stat_sn: u32::from(csg),
                exp_cmd_sn: 1,
                max_cmd_sn: 1,
                ..Default::default()
            }),
            data: Bytes::from(ironlun_wire::text::encode_pairs(pairs.iter().copied())).into(),
        };
        let security = response(0, 1, &[("AuthMethod", "None")]);
        let next = ini.handle_frame(&framed(security, Digests::default()));
        assert!(matches!(next, Ok(LoginProgress::Send(_))), "{next:?}");
        ini.handle_frame(&framed(response(1, 3, answers), Digests::default()))
    };
    let r = login_with(&[("HeaderDigest", "CRC32C")]);
    assert!(
        matches!(&r, Err(LoginError::Protocol(m)) if m.contains("DataDigest=None")),
        "{r:?}"
    );
    match login_with(&[("HeaderDigest", "CRC32C"), ("DataDigest", "CRC32C")]) {
        Ok(LoginProgress::Done(o)) => assert!(o.conn.header_digest && o.conn.data_digest),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_completed_abort_task_ends_the_command_and_frees_its_tag() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 8);
    let read_itt = p.ini.submit(read(0, 512), 1).unwrap();
    let tmf_itt = p
        .ini
        .submit_task_mgmt(TmfFunction::ABORT_TASK, Lun::from_index(0), read_itt, 2)
        .unwrap();
    let _ = std::iter::from_fn(|| p.ini.poll_transmit()).count();
    assert_eq!(p.ini.tasks_in_use(), 2);
    // The target aborted the READ (RFC 7143 §11.5.1): no response for it
    // will come, so the initiator ends it itself.
    p.ini.feed(
        Pdu::TaskMgmtResponse(ironlun_wire::TaskMgmtResponse {
            response: TmfResponse::FUNCTION_COMPLETE,
            itt: tmf_itt,
            max_cmd_sn: 100,
            exp_cmd_sn: 1,
            ..Default::default()
        }),
        Bytes::new(),
        p.now,
    );
    assert!(p.ini.failure().is_none(), "{:?}", p.ini.failure());
    let mut done: Vec<_> = std::iter::from_fn(|| p.ini.poll_completion())
        .map(|c| (c.token, c.result))
        .collect();
    done.sort_by_key(|(t, _)| *t);
    assert!(matches!(done[0], (1, Err(TaskError::Aborted))), "{done:?}");
    assert!(
        matches!(done[1], (2, Ok(Reply::TaskMgmt(r))) if r == TmfResponse::FUNCTION_COMPLETE),
        "{done:?}"
    );
    assert_eq!(p.ini.tasks_in_use(), 0);
}

/// RFC 7143 §11.14: after a Logout Request the initiator sends no new
/// request on the connection. A command still waiting for the window
/// stays unsent when the window opens, and a new task is refused with
/// its token handed back.
#[test]
fn nothing_new_follows_a_logout() {
    let mut p = Pair::new(Offers::default(), Offers::default(), 1);
    p.ini.submit(read(0, 512), 1).unwrap();
    p.ini.submit(read(1, 512), 2).unwrap();
    let out: Vec<OutPdu> = std::iter::from_fn(|| p.ini.poll_transmit()).collect();
    assert_eq!(out.len(), 1, "a window of one sends one command");
    p.ini
        .submit_logout(LogoutReason::CLOSE_SESSION, 0, 3)
        .unwrap();
    assert!(p.ini.is_logging_out() && !p.ini.has_capacity());
    let refused = p.ini.submit(read(2, 512), 4).unwrap_err();
    assert_eq!((refused.error, refused.token), (SubmitError::LoggingOut, 4));
    // The window opens: the waiting read still does not go out.
    p.ini.feed(
        Pdu::NopIn(ironlun_wire::NopIn {
            itt: RESERVED_TAG,
            ttt: RESERVED_TAG,
            stat_sn: 1002,
            exp_cmd_sn: 2,
            max_cmd_sn: 10,
            ..Default::default()
        }),
        Bytes::new(),
        p.now,
    );
    let out: Vec<Pdu> = std::iter::from_fn(|| p.ini.poll_transmit())
        .map(|o| o.pdu)
        .collect();
    assert!(
        matches!(out[..], [Pdu::LogoutRequest(_)]),
        "after the Logout: {out:?}"
    );
    // Nor does the keep-alive ping: the logout's own wait bounds it.
    assert_eq!(p.ini.poll_timeout(), None);
    p.ini.handle_timeout(p.now + Duration::from_secs(3600));
    assert!(p.ini.poll_transmit().is_none());
}
