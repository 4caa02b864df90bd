//! A whole session through the sans-IO core: login, then full feature
//! phase on RAM logical units, with an in-memory transport.
//!
//! Input: one byte of settings (bits 0–3: [`WorldSettings`]; bits 4–6: the
//! LUs' thin provisioning, write protection and SANITIZE), then records
//! (see [`crate::input`]) by tag:
//!
//! | tag | step |
//! |-----|------|
//! | 1   | time passes: payload as little-endian milliseconds (≤ 10 min) |
//! | 2   | the oldest held commands complete (payload byte: how many, 0 = all) |
//! | 3   | payload bit 0: hold commands instead of running them at once (a blocking backend) |
//! | 4   | the target asks the initiator to log out (payload: seconds to wait) |
//! | 5   | another initiator's task management aborts this connection's tasks |
//! | any other | bytes arriving from the socket |
//!
//! The connection's logic is the daemon's own: [`ConnCore`]
//! (ironlun-target-core), which the daemon's connection driver drives
//! over a socket. This harness is its driver here, minus sockets and
//! other sessions: every command is handed out ([`Dispatch::Driver`]) and
//! run at once or held, signals for other sessions are counted.
//!
//! Checked beyond "does not panic", on every PDU the target sends:
//! - it is a target PDU (never a Login Response after login) and it
//!   encodes with the negotiated digests;
//! - its data segment fits the initiator's MaxRecvDataSegmentLength;
//! - ExpCmdSN and MaxCmdSN never go back, and the window they describe
//!   is never larger than the queue depth (RFC 7143 §4.2.2.1);
//! - StatSN advances by one per status (responses, status-carrying
//!   Data-In, NOP-In replies, Reject, Async Message) and R2T and NOP-In
//!   pings carry the next StatSN without using it (RFC 7143 §4.2.2.2);
//! - the connection never holds more tasks than its window and immediate
//!   allowance;
//! - a task's Data-In PDUs number DataSN from 0 up, with each buffer
//!   offset where the previous PDU ended, and never beyond the command's
//!   Expected Data Transfer Length (RFC 7143 §11.7.4, DataPDUInOrder and
//!   DataSequenceInOrder are Yes); its R2Ts ask for 1 to MaxBurstLength
//!   bytes inside that length (§11.8). Where an initiator reused an ITT,
//!   the bound is the largest length asked for with it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ironlun_proto::login::LOGIN_SEGMENT_MAX;
use ironlun_proto::target::login::LoginResult;
use ironlun_proto::target::{AbortScope, FfpConfig, TargetConnection};
use ironlun_proto::OutPdu;
use ironlun_scsi::NexusId;
use ironlun_target_core::{Action, Command, ConnCore, Dispatch, Lus};
use ironlun_wire::{Digests, Frame, FrameDecoder, Outbox, Pdu, RESERVED_TAG};

use crate::device::{check_response, identity, lun_map};
use crate::input::{elapsed, run_steps, Sent, Stage, Stepped};
use crate::login::{LoginDriver, Phase};
use crate::world::{FuzzDirectory, WorldSettings, QUEUE_DEPTH};

/// What one input exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionRun {
    pub logged_in: bool,
    pub discovery: bool,
    pub authenticated: bool,
    /// Commands the device ran.
    pub commands: usize,
    pub data_in_bytes: u64,
    pub write_bytes: u64,
    pub r2ts: usize,
    pub nop_pings: usize,
    pub text_responses: usize,
    pub tmf_responses: usize,
    /// Signals for other sessions (resets, CLEAR TASK SET, PREEMPT AND
    /// ABORT).
    pub signals: usize,
    pub rejects: usize,
    pub logged_out: bool,
    /// Why the connection closed, if it did.
    pub closed: Option<String>,
    /// PDUs the target sent, login included.
    pub pdus_out: usize,
}

/// Immediate commands allowed beyond the window.
const MAX_IMMEDIATE: u32 = 4;
const NEXUS: NexusId = NexusId(1);

fn ffp_config() -> FfpConfig {
    FfpConfig {
        queue_depth: QUEUE_DEPTH,
        max_immediate: MAX_IMMEDIATE,
        max_write_transfer_length: 1 << 20,
        // Small, so that writes wait for budget.
        solicit_budget: 256 << 10,
        nop_interval: Some(Duration::from_secs(5)),
        nop_timeout: Duration::from_secs(5),
        text_limit: 16 << 10,
    }
}

/// The sequence-number state the target has shown the initiator.
struct Numbers {
    next_stat_sn: u32,
    exp_cmd_sn: u32,
    max_cmd_sn: u32,
}

/// `a` is at or after `b` in serial number arithmetic (RFC 1982).
fn serial_ge(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

impl Numbers {
    fn check(&mut self, p: &Pdu) {
        let (stat_sn, exp, max, uses_stat_sn) = match p {
            Pdu::ScsiResponse(r) => (Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn, true),
            Pdu::DataIn(d) => (
                d.status.map(|_| d.stat_sn),
                d.exp_cmd_sn,
                d.max_cmd_sn,
                d.status.is_some(),
            ),
            Pdu::TaskMgmtResponse(r) => (Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn, true),
            Pdu::TextResponse(r) => (Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn, true),
            Pdu::LogoutResponse(r) => (Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn, true),
            Pdu::Reject(r) => (Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn, true),
            Pdu::AsyncMessage(m) => (Some(m.stat_sn), m.exp_cmd_sn, m.max_cmd_sn, true),
            Pdu::NopIn(n) => (
                Some(n.stat_sn),
                n.exp_cmd_sn,
                n.max_cmd_sn,
                n.itt != RESERVED_TAG,
            ),
            Pdu::R2t(r) => (Some(r.stat_sn), r.exp_cmd_sn, r.max_cmd_sn, false),
            other => panic!("the target sent {:?} in full feature phase", other.opcode()),
        };
        if let Some(sn) = stat_sn {
            assert_eq!(sn, self.next_stat_sn, "StatSN out of sequence in {p:?}");
            if uses_stat_sn {
                self.next_stat_sn = sn.wrapping_add(1);
            }
        }
        assert!(serial_ge(exp, self.exp_cmd_sn), "ExpCmdSN went back: {p:?}");
        assert!(serial_ge(max, self.max_cmd_sn), "MaxCmdSN went back: {p:?}");
        let window = max.wrapping_sub(exp).wrapping_add(1) as i32;
        assert!(
            (0..=QUEUE_DEPTH as i32).contains(&window),
            "a window of {window} commands: {p:?}"
        );
        self.exp_cmd_sn = exp;
        self.max_cmd_sn = max;
    }
}

/// Full feature phase: the connection, its LUs and the driver's state.
struct Ffp {
    core: ConnCore,
    max_xmit: usize,
    outbox: Outbox,
    numbers: Numbers,
    hold: bool,
    held: VecDeque<Command>,
    max_burst: u32,
    /// Expected Data Transfer Lengths of the commands received with each
    /// ITT and not yet answered. Several: a command may wait ahead of the
    /// window while another reuses its ITT, and one outside the window is
    /// dropped unseen; which one a response answers is not on the wire.
    edtl: HashMap<u32, Vec<u32>>,
    /// Per task: the next DataSN and buffer offset of its Data-In.
    data_in: HashMap<u32, (u32, u64)>,
}

impl Ffp {
    fn new(result: &LoginResult, lu_settings: u8, now: Instant) -> Ffp {
        let lus = (!result.discovery).then(|| Lus {
            map: Arc::new(lun_map(lu_settings)),
            nexus: NEXUS,
            identity: identity(NEXUS),
            replaced: false,
        });
        let conn = TargetConnection::new(result, ffp_config(), Box::new(FuzzDirectory), now);
        Ffp {
            core: ConnCore::new(conn, lus, Dispatch::Driver, false),
            max_xmit: result.conn.max_xmit_data_segment_length as usize,
            outbox: Outbox::new(Digests {
                header: result.conn.header_digest,
                data: result.conn.data_digest,
            }),
            numbers: Numbers {
                next_stat_sn: result.next_stat_sn,
                exp_cmd_sn: result.exp_cmd_sn,
                max_cmd_sn: result.exp_cmd_sn.wrapping_sub(1),
            },
            hold: false,
            held: VecDeque::new(),
            max_burst: result.session.max_burst_length,
            edtl: HashMap::new(),
            data_in: HashMap::new(),
        }
    }

    /// Notes the length of every command received; a Data-In sequence
    /// starts over with a command whose ITT has no live task.
    fn watch_received(&mut self, frame: &Frame) {
        if let Ok(Pdu::ScsiCommand(c)) = Pdu::decode(&frame.bhs) {
            self.edtl
                .entry(c.itt)
                .or_default()
                .push(c.expected_data_transfer_length);
            if !self.core.conn().has_tasks(AbortScope::Task(c.itt)) {
                self.data_in.remove(&c.itt);
            }
        }
    }

    /// The largest length any command with this ITT asked for.
    fn edtl_bound(&self, itt: u32, what: &str) -> u32 {
        match self.edtl.get(&itt).and_then(|v| v.iter().max()) {
            Some(n) => *n,
            None => panic!("{what} for ITT {itt:#x}, which no command used"),
        }
    }

    /// A command with this ITT was answered, `end` bytes in: forget the
    /// tightest length that fits (never one a still-pending command
    /// needs more than).
    fn answered(&mut self, itt: u32, end: u64) {
        if let Some(v) = self.edtl.get_mut(&itt) {
            let fit = v
                .iter()
                .enumerate()
                .filter(|(_, n)| u64::from(**n) >= end)
                .min_by_key(|(_, n)| **n)
                .map(|(i, _)| i);
            if let Some(i) = fit {
                v.swap_remove(i);
            }
            if v.is_empty() {
                self.edtl.remove(&itt);
            }
        }
        self.data_in.remove(&itt);
    }

    /// Data-In and R2T against the command they serve.
    fn check_transfer(&mut self, p: &OutPdu) {
        match &p.pdu {
            Pdu::DataIn(d) => {
                let edtl = self.edtl_bound(d.itt, "Data-In");
                let (sn, offset) = self.data_in.get(&d.itt).copied().unwrap_or((0, 0));
                assert_eq!(d.data_sn, sn, "DataSN out of order: {d:?}");
                assert_eq!(
                    u64::from(d.buffer_offset),
                    offset,
                    "Data-In offset leaves a gap or overlaps: {d:?}"
                );
                let end = offset + p.data.len() as u64;
                assert!(
                    end <= u64::from(edtl),
                    "Data-In up to {end} for a transfer length of {edtl}: {d:?}"
                );
                if d.status.is_some() {
                    self.answered(d.itt, end);
                } else {
                    self.data_in.insert(d.itt, (sn.wrapping_add(1), end));
                }
            }
            Pdu::R2t(r) => {
                let edtl = self.edtl_bound(r.itt, "R2T");
                let len = r.desired_data_transfer_length;
                assert!(
                    len > 0 && len <= self.max_burst,
                    "R2T for {len} bytes with MaxBurstLength {}: {r:?}",
                    self.max_burst
                );
                let end = u64::from(r.buffer_offset) + u64::from(len);
                assert!(
                    end <= u64::from(edtl),
                    "R2T up to {end} for a transfer length of {edtl}: {r:?}"
                );
            }
            Pdu::ScsiResponse(r) => {
                let end = self.data_in.get(&r.itt).map_or(0, |(_, end)| *end);
                self.answered(r.itt, end);
            }
            _ => {}
        }
    }

    /// Takes the core's actions and sends its PDUs, as the daemon does
    /// after every input: commands run now or are held, signals for other
    /// sessions are counted (there are none).
    fn pump(&mut self, run: &mut SessionRun, sent: &mut Vec<u8>) {
        while let Some(action) = self.core.poll_action() {
            match action {
                Action::Run(cmd) if self.hold => self.held.push_back(cmd),
                Action::Run(cmd) => self.execute(cmd, run),
                Action::Stage(staged) => {
                    run.commands += 1;
                    self.core.completed(staged.run_here());
                }
                Action::Signal { .. } => run.signals += 1,
            }
        }
        let held = self.held.len();
        let tasks = self.core.conn().tasks_in_progress();
        assert!(
            tasks <= (QUEUE_DEPTH + MAX_IMMEDIATE) as usize,
            "{tasks} tasks held by one connection"
        );
        assert!(held <= tasks, "{held} commands held for {tasks} tasks");
        while let Some(p) = self.core.poll_transmit() {
            self.send(p, run, sent);
        }
    }

    fn send(&mut self, p: OutPdu, run: &mut SessionRun, sent: &mut Vec<u8>) {
        run.pdus_out += 1;
        assert!(
            p.data.len() <= self.max_xmit,
            "{} data bytes for a MaxRecvDataSegmentLength of {}: {:?}",
            p.data.len(),
            self.max_xmit,
            p.pdu
        );
        self.numbers.check(&p.pdu);
        self.check_transfer(&p);
        match &p.pdu {
            Pdu::DataIn(_) => run.data_in_bytes += p.data.len() as u64,
            Pdu::R2t(_) => run.r2ts += 1,
            Pdu::NopIn(n) if n.itt == RESERVED_TAG => run.nop_pings += 1,
            Pdu::TextResponse(_) => run.text_responses += 1,
            Pdu::TaskMgmtResponse(_) => run.tmf_responses += 1,
            Pdu::Reject(_) => run.rejects += 1,
            Pdu::LogoutResponse(_) => run.logged_out = true,
            _ => {}
        }
        encode_into(&mut self.outbox, p, sent);
    }

    fn execute(&mut self, cmd: Command, run: &mut SessionRun) {
        run.commands += 1;
        run.write_bytes += cmd.data_out_len() as u64;
        let done = cmd.run();
        check_response(&done.response);
        self.core.completed(done);
    }

    fn complete_held(&mut self, count: usize, run: &mut SessionRun) {
        let n = if count == 0 { self.held.len() } else { count };
        for _ in 0..n {
            let Some(task) = self.held.pop_front() else {
                break;
            };
            self.execute(task, run);
        }
    }
}

/// One connection driven step by step. [`session`] runs an input through
/// it; the seed generator drives it interactively with ironlun's own
/// initiator and records what it sent.
pub struct SessionHarness {
    stage: Stage<LoginDriver, Ffp>,
    decoder: FrameDecoder,
    rbuf: BytesMut,
    now: Instant,
    lu_settings: u8,
    run: SessionRun,
    /// What the target sends (kept for a recording initiator).
    sent: Sent,
}

impl Stepped for SessionHarness {
    type Run = SessionRun;

    fn new(settings: u8) -> Self {
        SessionHarness {
            stage: Stage::Login(Box::new(LoginDriver::new(WorldSettings::from_byte(
                settings,
            )))),
            decoder: FrameDecoder::new(LOGIN_SEGMENT_MAX as u32),
            rbuf: BytesMut::new(),
            now: Instant::now(),
            lu_settings: settings >> 4,
            run: SessionRun::default(),
            sent: Sent::default(),
        }
    }

    fn is_closed(&self) -> bool {
        matches!(self.stage, Stage::Closed)
    }

    fn step(&mut self, tag: u8, payload: &[u8]) {
        let run = &mut self.run;
        let sent = &mut self.sent.bytes;
        match (tag, &mut self.stage) {
            (_, Stage::Closed) => return,
            (1, Stage::Ffp(f)) => {
                self.now += elapsed(payload);
                if f.core.conn().poll_timeout().is_some_and(|t| t <= self.now) {
                    f.core.handle_timeout(self.now);
                }
                f.pump(run, sent);
            }
            (2, Stage::Ffp(f)) => {
                f.complete_held(usize::from(payload.first().copied().unwrap_or(0)), run);
                f.pump(run, sent);
            }
            (3, Stage::Ffp(f)) => f.hold = payload.first().is_some_and(|b| b & 1 != 0),
            (4, Stage::Ffp(f)) => {
                let wait = u64::from(payload.first().copied().unwrap_or(0));
                f.core.request_logout(self.now, Duration::from_secs(wait));
                f.pump(run, sent);
            }
            (5, Stage::Ffp(f)) => {
                let b = payload.first().copied().unwrap_or(0);
                let lun = match b % 3 {
                    0 => None,
                    n => Some(u16::from(n - 1)),
                };
                // Bit 3: by CLEAR TASK SET (the LU tells this nexus).
                f.core.abort_from_other(lun, b & 8 != 0);
                f.pump(run, sent);
            }
            (1..=5, Stage::Login(_)) => {}
            (_, _) => {
                self.rbuf.extend_from_slice(payload);
                self.receive();
            }
        }
        if let Stage::Ffp(f) = &mut self.stage {
            if f.core.is_closing() {
                // Running commands finish before the connection goes, as
                // the daemon waits for them.
                f.complete_held(0, &mut self.run);
                f.pump(&mut self.run, &mut self.sent.bytes);
                self.run.closed = Some(
                    f.core
                        .close_reason()
                        .map_or_else(|| "closing".into(), |r| format!("{r:?}")),
                );
                self.stage = Stage::Closed;
            }
        }
        self.sent.step_done();
    }

    /// The connection ends (the initiator went away).
    fn finish(mut self) -> SessionRun {
        if let Stage::Ffp(f) = &mut self.stage {
            f.complete_held(0, &mut self.run);
            f.pump(&mut self.run, &mut self.sent.bytes);
        }
        self.run
    }
}

impl SessionHarness {
    pub fn run(&self) -> &SessionRun {
        &self.run
    }

    /// What the target sends.
    pub fn sent(&mut self) -> &mut Sent {
        &mut self.sent
    }

    /// Feeds every whole PDU in the read buffer to the connection.
    fn receive(&mut self) {
        loop {
            let decoded = self.decoder.decode(&mut self.rbuf);
            match &mut self.stage {
                Stage::Closed => return,
                Stage::Login(login) => {
                    let frame = match decoded {
                        Ok(Some(f)) => f,
                        Ok(None) => return,
                        Err(_) => {
                            self.stage = Stage::Closed;
                            return;
                        }
                    };
                    let (response, phase) = login.handle(&frame);
                    self.run.pdus_out += 1;
                    self.run.authenticated = login.authenticated;
                    encode_into(
                        &mut Outbox::new(Digests::default()),
                        response,
                        &mut self.sent.bytes,
                    );
                    match phase {
                        Phase::Continue => {}
                        Phase::Failed => {
                            self.stage = Stage::Closed;
                            return;
                        }
                        Phase::Complete(result) => {
                            self.run.logged_in = true;
                            self.run.discovery = result.discovery;
                            self.decoder = FrameDecoder {
                                digests: Digests {
                                    header: result.conn.header_digest,
                                    data: result.conn.data_digest,
                                },
                                max_data_segment_len: result.conn.max_recv_data_segment_length,
                            };
                            let ffp = Ffp::new(&result, self.lu_settings, self.now);
                            self.stage = Stage::Ffp(Box::new(ffp));
                        }
                    }
                }
                Stage::Ffp(f) => {
                    match decoded {
                        Ok(Some(frame)) => {
                            f.watch_received(&frame);
                            f.core.handle_frame(frame, self.now);
                        }
                        Ok(None) => return,
                        Err(e) => {
                            // Undecodable bytes stay in the buffer: the
                            // connection must end, or the driver would spin.
                            f.core.handle_frame_error(&e);
                            assert!(f.core.is_closing(), "{e} did not close the connection");
                        }
                    }
                    f.pump(&mut self.run, &mut self.sent.bytes);
                    if f.core.is_closing() {
                        return;
                    }
                }
            }
        }
    }
}

/// Encodes one PDU onto `out` as the socket would carry it (either
/// side's: a PDU that does not encode is a finding).
pub(crate) fn encode_into(outbox: &mut Outbox, p: OutPdu, out: &mut Vec<u8>) {
    let opcode = p.pdu.opcode();
    if let Err(e) = outbox.push(&p.pdu, p.data) {
        panic!("{opcode:?} does not encode: {e}");
    }
    let written = outbox.write_with(|iov| {
        let mut n = 0;
        for s in iov {
            out.extend_from_slice(s);
            n += s.len();
        }
        Ok(n)
    });
    assert!(matches!(written, Ok(true)), "the outbox kept bytes back");
}

pub fn session(data: &[u8]) -> SessionRun {
    run_steps::<SessionHarness>(data)
}
