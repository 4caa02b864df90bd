//! The initiator's sans-IO core (`ironlun-proto::initiator`) against a
//! hostile target: the input plays the target, the harness is the
//! initiator's driver with a workload of its own.
//!
//! Input: one byte of settings ([`Settings`]), then records (see
//! [`crate::input`]) by tag:
//!
//! | tag | step |
//! |-----|------|
//! | 1   | time passes: payload as little-endian milliseconds (≤ 10 min) |
//! | 2   | the driver submits another task: payload byte 0 picks it ([`Job`]), byte 1 its LUN or the task an ABORT TASK names, byte 2 its LBA (in 8-block steps) |
//! | any other | bytes arriving from the target |
//!
//! | settings bit | meaning |
//! |--------------|---------|
//! | 0 | the initiator logs in with CHAP |
//! | 1 | ... and mutual CHAP (it challenges the target) |
//! | 2 | a discovery session (otherwise normal) |
//! | 3 | the initiator offers CRC32C digests only (otherwise None only) |
//! | 4 | a command ending in UNIT ATTENTION is sent once more |
//! | 5 | failover: when the connection ends the core hands unfinished SCSI commands back (for another path) instead of failing them |
//! | 6 | the initiator offers InitialR2T=Yes and ImmediateData=No (all write data waits for R2Ts) |
//! | 7 | a task table of 4 tags (otherwise 32) |
//!
//! The initiator is ironlun-initiator-core's [`InitiatorCore`], the
//! session logic the tokio driver in `ironlun-initiator` runs: this
//! harness is a driver of it as thin as that one, with a workload of its
//! own, and no protocol decision of its own (`tests/e2e/harness.rs` holds it
//! to that). The core asks for a connection and logs in on it; frames
//! are cut from the bytes by the real [`FrameDecoder`](ironlun_wire::FrameDecoder) with the core's
//! framing ([`InitiatorCore::decoder`]: the login's limits, then the
//! negotiated digests and MaxRecvDataSegmentLength). Once the login
//! completes the harness submits a first workload (a 4 KiB READ(10) and
//! a 96 KiB WRITE(10), or SendTargets on a discovery session). After
//! every input what the core sends, completes, hands back and reports is
//! drained and checked. Reconnection is off: when the connection ends
//! (a Logout Response, a dropped connection, a broken rule, the input
//! ending) the session ends.
//!
//! Checked beyond "does not panic":
//! - login: only Login Requests, each within the login segment limit and
//!   with parseable text, with the same ITT, ISID, TSIH, CID and CmdSN
//!   throughout, stages that only move forward, T and C never both set,
//!   and ExpStatSN acknowledging the last response (RFC 7143 §11.12); a
//!   bounded number of rounds; with CHAP configured, AuthMethod is only
//!   ever CHAP (or Reject, refusing the target's offer) and the login
//!   completes only after the initiator answered
//!   a challenge, with mutual CHAP only after the target's CHAP_R was
//!   right for the initiator's challenge (the harness recomputes it from
//!   the secret); completion only on T=1 NSG=3 with a success status,
//!   and negotiated values within the initiator's offers or, for a
//!   proposal the target left unanswered, the RFC default (MaxBurstLength
//!   and FirstBurstLength, FirstBurstLength ≤ MaxBurstLength, InitialR2T
//!   an OR, ErrorRecoveryLevel 0, digests only as offered; RFC 7143 §13);
//! - every PDU sent in full feature phase is an initiator PDU (never a
//!   Login Request), encodes with the negotiated digests and decodes back
//!   to itself under the target's MaxRecvDataSegmentLength;
//! - CmdSN: consecutive over non-immediate commands, the next one carried
//!   by immediate PDUs, and never beyond the largest MaxCmdSN the target
//!   allowed, updated as RFC 7143 §4.2.2.1 says (a MaxCmdSN below
//!   ExpCmdSN - 1 is ignored, older values are ignored);
//! - ExpStatSN only acknowledges a status the target sent: the login's
//!   last StatSN + 1, or StatSN + 1 of a PDU that carries status (not an
//!   R2T, not a NOP-In with ITT 0xffffffff; RFC 7143 §4.2.2.2, §11.19);
//! - tags: an ITT is never handed out while a live task holds it, no PDU
//!   goes out for a task that is not live, a command is not sent again
//!   while the target holds it (only after its status, as a unit
//!   attention retry);
//! - writes: immediate data only with ImmediateData=Yes, unsolicited
//!   Data-Out only with InitialR2T=No, together within FirstBurstLength
//!   (§4.2.5.2, §13.10, §13.11); the Data-Out answering an R2T only for a
//!   valid R2T (inside the write and MaxBurstLength, §11.8), inside its
//!   offset and length, DataSN from 0 per R2T and F on the last (§11.7),
//!   each within the target's MaxRecvDataSegmentLength, carrying the
//!   command's own bytes for that offset; each R2T answered in full;
//! - reads: a read completes successfully only with its Data-In in order
//!   (DataSN from 0, offsets without gap or overlap, §11.7.5), never with
//!   more data than asked for, with exactly the bytes the target sent and
//!   the status the target sent for it;
//! - every NOP-In ping (TTT not 0xffffffff) is answered with a NOP-Out
//!   carrying its TTT (§11.19); a NOP-Out with no task's ITT goes out
//!   only from the keep-alive timeout;
//! - logout: a Logout the harness did not ask for goes out only after
//!   the target asked for one (Asynchronous Message, AsyncEvent 1,
//!   §11.9.1), with reason 0 or 1; until it is sent the core means to
//!   wake no later than Parameter3 seconds after the request; nothing new
//!   (command, text, task management, ping, second Logout) follows a
//!   Logout on its connection (§11.14); the Logout Response ends the
//!   connection at once (§11.15);
//! - every task handed in comes back exactly once (a completion, or the
//!   command itself with failover when the connection ends), with the
//!   kind of reply its request asks for, and only after it was sent when
//!   it succeeds; the core takes a task exactly when it says it takes
//!   requests (or, for a Logout of ours, while the one the target asked
//!   for still waits), and refuses one only when the table is full, a
//!   logout is under way or there is no full feature phase connection;
//!   when the
//!   session ends no task and no tag is left, nothing more is sent, and
//!   a new request is refused and still answered;
//! - bounded memory: the session's tags in use are exactly the live
//!   tasks (and the core's own Logout), never more than its limit.

mod ffp;
mod login_check;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ironlun_initiator_core::{
    CoreConfig, End, Event, InitiatorCore, LoginFailure, ReconnectPolicy, Request,
};
use ironlun_proto::chap::RANDOM_BYTES;
use ironlun_proto::initiator::{
    Completed, LoginConfig, LoginOutcome, ScsiRequest, SessionLimits, ATTR_SIMPLE,
};
use ironlun_proto::params::{DigestKind, Offers};
use ironlun_scsi_codes::opcode;
use ironlun_wire::Lun;

use crate::input::{elapsed, run_steps, Sent, Stage, Stepped};
use crate::seeds::rw10;
use crate::world::{initiator_auth, INITIATOR, TARGET};
use ffp::Ffp;
use login_check::LoginSide;

/// What one input exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InitiatorRun {
    /// Login Requests sent.
    pub login_requests: usize,
    pub logged_in: bool,
    pub discovery: bool,
    /// The initiator answered a CHAP challenge.
    pub authenticated: bool,
    /// The target proved it knows its secret (mutual CHAP).
    pub target_authenticated: bool,
    pub login_error: Option<String>,
    /// Tasks the session took, and submits it refused (table full).
    pub submitted: usize,
    pub refused: usize,
    /// Tasks that completed with a reply, and with an error.
    pub replies: usize,
    pub errors: usize,
    /// SCSI commands that ended GOOD.
    pub good: usize,
    /// Bytes reads completed with.
    pub read_bytes: u64,
    /// Write bytes sent as immediate data, unsolicited Data-Out and
    /// Data-Out answering R2Ts.
    pub immediate_bytes: u64,
    pub unsolicited_bytes: u64,
    pub solicited_bytes: u64,
    /// Target PDUs received in full feature phase, by kind.
    pub data_ins: usize,
    pub r2ts: usize,
    pub text_replies: usize,
    pub text_continuations: usize,
    pub tmf_replies: usize,
    pub nop_replies: usize,
    /// NOP-Outs answering the target's pings, and keep-alive pings sent.
    pub ping_echoes: usize,
    pub keepalives: usize,
    pub async_events: usize,
    pub unit_attentions: usize,
    /// Commands the core handed back when the connection ended
    /// (failover).
    pub taken_back: usize,
    pub logged_out: bool,
    /// Why the session failed before the input ended, if it did.
    pub failed: Option<String>,
    /// PDUs the initiator sent, login included.
    pub pdus_out: usize,
}

/// What the input's settings byte turned on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub chap: bool,
    pub mutual: bool,
    pub discovery: bool,
    pub digests: bool,
    pub unit_attention_retry: bool,
    pub take_back: bool,
    pub r2t_only: bool,
    pub small_table: bool,
}

impl Settings {
    pub fn from_byte(b: u8) -> Self {
        Settings {
            chap: b & 1 != 0,
            mutual: b & 2 != 0,
            discovery: b & 4 != 0,
            digests: b & 8 != 0,
            unit_attention_retry: b & 16 != 0,
            take_back: b & 32 != 0,
            r2t_only: b & 64 != 0,
            small_table: b & 128 != 0,
        }
    }

    pub fn to_byte(self) -> u8 {
        [
            self.chap,
            self.mutual,
            self.discovery,
            self.digests,
            self.unit_attention_retry,
            self.take_back,
            self.r2t_only,
            self.small_table,
        ]
        .iter()
        .enumerate()
        .fold(0, |b, (i, on)| b | u8::from(*on) << i)
    }

    fn max_tasks(self) -> usize {
        if self.small_table {
            4
        } else {
            32
        }
    }
}

/// Our MaxRecvDataSegmentLength: reads of more come in several Data-In.
const MAX_RECV: u32 = 16 << 10;
/// A discovery session's, so that SendTargets spans Text Responses.
const MAX_RECV_DISCOVERY: u32 = 4096;
/// Writes of more wait for R2Ts; R2Ts ask for at most this much.
const FIRST_BURST: u32 = 16 << 10;
const MAX_BURST: u32 = 64 << 10;
const NOP_INTERVAL: Duration = Duration::from_secs(5);
const NOP_TIMEOUT: Duration = Duration::from_secs(5);
/// Login rounds before the harness calls the login unbounded.
const LOGIN_ROUNDS: usize = 64;
const LOGIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The session the harness opens: reconnection off, failover as the
/// settings say.
pub fn core_config(s: Settings) -> CoreConfig {
    CoreConfig {
        login: login_config(s),
        limits: SessionLimits {
            max_tasks: s.max_tasks(),
            nop_interval: Some(NOP_INTERVAL),
            nop_timeout: NOP_TIMEOUT,
            unit_attention_retries: u8::from(s.unit_attention_retry),
        },
        login_timeout: LOGIN_TIMEOUT,
        reconnect: ReconnectPolicy {
            attempts: 0,
            ..ReconnectPolicy::default()
        },
        failover: s.take_back,
    }
}

/// What the initiator offers, from the settings.
pub fn login_config(s: Settings) -> LoginConfig {
    let mut cfg = if s.discovery {
        LoginConfig::discovery(INITIATOR)
    } else {
        LoginConfig::normal(INITIATOR, TARGET)
    };
    let digest = if s.digests {
        DigestKind::Crc32c
    } else {
        DigestKind::None
    };
    cfg.offers = Offers {
        header_digest: vec![digest],
        data_digest: vec![digest],
        initial_r2t: s.r2t_only,
        immediate_data: !s.r2t_only,
        max_recv_data_segment_length: if s.discovery {
            MAX_RECV_DISCOVERY
        } else {
            MAX_RECV
        },
        max_burst_length: MAX_BURST,
        first_burst_length: FIRST_BURST,
        ..Offers::default()
    };
    if s.chap {
        cfg.auth = Some(initiator_auth(s.mutual));
    }
    cfg
}

/// A task the driver submits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// READ(10) of about this many bytes (whole blocks of the LU).
    Read {
        bytes: u32,
        discard: bool,
    },
    /// WRITE(10) of about this many bytes.
    Write {
        bytes: u32,
    },
    TestUnitReady,
    SendTargets,
    /// ABORT TASK of a live SCSI command.
    AbortTask,
    LogicalUnitReset,
    Ping,
    Logout,
}

const JOBS: [Job; 13] = [
    Job::Read {
        bytes: 512,
        discard: false,
    },
    Job::Read {
        bytes: 4096,
        discard: false,
    },
    Job::Read {
        bytes: 96 << 10,
        discard: false,
    },
    Job::Read {
        bytes: 4096,
        discard: true,
    },
    Job::Write { bytes: 512 },
    Job::Write { bytes: 4096 },
    Job::Write { bytes: 96 << 10 },
    Job::TestUnitReady,
    Job::SendTargets,
    Job::AbortTask,
    Job::LogicalUnitReset,
    Job::Ping,
    Job::Logout,
];

impl Job {
    pub fn from_byte(b: u8) -> Job {
        JOBS.get(usize::from(b) % JOBS.len())
            .copied()
            .unwrap_or(Job::Ping)
    }

    /// The payload byte that picks this job.
    pub fn byte(self) -> u8 {
        JOBS.iter().position(|j| *j == self).unwrap_or(0) as u8
    }

    /// Whether only a normal session runs it (a driver sends no SCSI
    /// commands and no task management on a discovery session).
    fn needs_normal_session(self) -> bool {
        !matches!(self, Job::SendTargets | Job::Ping | Job::Logout)
    }
}

/// A SCSI command of the workload: LUN 0 has 512-byte blocks, LUN 1
/// 4096-byte blocks (the target harness's LUs).
fn scsi_request(job: Job, arg: u8, lba: u8, token: u32) -> Option<ScsiRequest> {
    let lun = u16::from(arg & 1);
    let block = if lun == 1 { 4096 } else { 512 };
    let blocks = |bytes: u32| (bytes / block).clamp(1, u32::from(u16::MAX)) as u16;
    let lba = u32::from(lba) * 8;
    let mut req = ScsiRequest {
        lun: Lun::from_index(lun),
        attr: ATTR_SIMPLE,
        ..ScsiRequest::default()
    };
    match job {
        Job::Read { bytes, discard } => {
            let n = blocks(bytes);
            req.cdb = rw10(opcode::READ_10, lba, n);
            req.read_len = u32::from(n) * block;
            req.discard_data = discard;
        }
        Job::Write { bytes } => {
            let n = blocks(bytes);
            req.cdb = rw10(opcode::WRITE_10, lba, n);
            req.write = pattern(token, u32::from(n) * block);
        }
        Job::TestUnitReady => {
            // A 6-byte CDB, all zero but the opcode.
            if let Some(op) = req.cdb.first_mut() {
                *op = opcode::TEST_UNIT_READY;
            }
        }
        _ => return None,
    }
    Some(req)
}

/// Write data that differs per task and per offset.
fn pattern(token: u32, len: u32) -> Bytes {
    (0..len)
        .map(|i| (i.wrapping_mul(7) ^ token.wrapping_mul(131) ^ (i >> 9)) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// One initiator session driven step by step through the core.
/// [`initiator`] runs an input through it; the seed generator drives it
/// against the session harness's target and records what that target
/// sent.
pub struct InitiatorHarness {
    settings: Settings,
    core: InitiatorCore<u32>,
    stage: Stage<LoginSide, Ffp>,
    rbuf: BytesMut,
    now: Instant,
    run: InitiatorRun,
    /// The harness ended the input (what follows is not the target's
    /// doing).
    input_ended: bool,
    /// What the initiator sends (kept for a recording target).
    sent: Sent,
}

impl Stepped for InitiatorHarness {
    type Run = InitiatorRun;

    /// The core asks for a connection at once; the first Login Request
    /// follows.
    fn new(settings: u8) -> Self {
        let settings = Settings::from_byte(settings);
        let now = Instant::now();
        let mut h = InitiatorHarness {
            settings,
            core: InitiatorCore::new(core_config(settings), now),
            stage: Stage::Login(Box::new(LoginSide::new(login_config(settings)))),
            rbuf: BytesMut::new(),
            now,
            run: InitiatorRun::default(),
            input_ended: false,
            sent: Sent::default(),
        };
        h.pump();
        h
    }

    fn is_closed(&self) -> bool {
        matches!(self.stage, Stage::Closed)
    }

    fn step(&mut self, tag: u8, payload: &[u8]) {
        let arg = |i: usize| payload.get(i).copied().unwrap_or(0);
        match (tag, &mut self.stage) {
            (_, Stage::Closed) => return,
            (1, _) => {
                self.now += elapsed(payload);
                self.tick();
            }
            (2, Stage::Ffp(f)) => {
                let job = Job::from_byte(arg(0));
                let (core, run) = (&mut self.core, &mut self.run);
                f.submit(core, job, (arg(1), arg(2)), self.now, run);
            }
            (2, _) => {}
            (_, _) => {
                self.rbuf.extend_from_slice(payload);
                self.receive();
            }
        }
        self.pump();
        self.sent.step_done();
    }

    /// The input ended: the connection goes, and with it the session.
    fn finish(mut self) -> InitiatorRun {
        self.input_ended = true;
        self.core
            .handle_connection_lost("the input ended".into(), self.now);
        self.pump();
        assert!(
            self.core.is_ended(),
            "the connection went and the session stayed"
        );
        let refused = self.core.handle_request(Request::Ping, u32::MAX, self.now);
        assert!(refused.is_err(), "an ended session took a new task");
        assert!(
            matches!(
                self.core.poll_completion(),
                Some(Completed {
                    token: u32::MAX,
                    result: Err(_)
                })
            ),
            "a request an ended session refused went unanswered"
        );
        assert!(
            self.core.poll_transmit().is_none(),
            "an ended session sends"
        );
        self.run
    }
}

impl InitiatorHarness {
    pub fn run(&self) -> &InitiatorRun {
        &self.run
    }

    /// What the initiator sends.
    pub fn sent(&mut self) -> &mut Sent {
        &mut self.sent
    }

    /// Time passes: the core's timer runs when it is due.
    fn tick(&mut self) {
        if self.core.poll_timeout().is_none_or(|t| t > self.now) {
            return;
        }
        if let Stage::Ffp(f) = &mut self.stage {
            f.in_timeout = true;
        }
        self.core.handle_timeout(self.now);
        self.pump();
        if let Stage::Ffp(f) = &mut self.stage {
            f.in_timeout = false;
        }
    }

    /// Hands every whole frame in the read buffer to the core, framed as
    /// the core says; bytes for a connection the core has left are
    /// dropped.
    fn receive(&mut self) {
        while self.core.uses_connection() {
            match self.core.decoder().decode(&mut self.rbuf) {
                Ok(Some(frame)) => {
                    let answers_logout = match &mut self.stage {
                        Stage::Login(l) => {
                            l.received(&frame);
                            false
                        }
                        Stage::Ffp(f) => f.note_frame(&frame, &mut self.run),
                        Stage::Closed => false,
                    };
                    self.core.handle_frame(frame, self.now);
                    self.pump();
                    assert!(
                        !(answers_logout && self.core.uses_connection()),
                        "the connection stays open after the Logout Response (RFC 7143 §11.15)"
                    );
                }
                Ok(None) => return,
                Err(e) => {
                    self.core.handle_frame_error(&e, self.now);
                    self.pump();
                }
            }
        }
        self.rbuf.clear();
    }

    /// Drains what the core reports, sends, completes and hands back, as
    /// the driver does after every input, and checks the state it leaves.
    /// Events come first (what the core sends may follow from them: the
    /// Logout for an Asynchronous Message), the end last (after the
    /// answers it brings).
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            let mut end = None;
            while let Some(e) = self.core.poll_event() {
                moved = true;
                match e {
                    Event::Ended(e) => end = Some(e),
                    e => self.event(e),
                }
            }
            while let Some(p) = self.core.poll_transmit() {
                moved = true;
                let (run, out) = (&mut self.run, &mut self.sent.bytes);
                match &mut self.stage {
                    Stage::Login(l) => l.send(p, run, out),
                    Stage::Ffp(f) => f.send(p, run, out),
                    Stage::Closed => panic!("the core sent {:?} after the session ended", p.pdu),
                }
            }
            while let Some(c) = self.core.poll_completion() {
                moved = true;
                in_ffp(&mut self.stage, "a completion").completed(c, &mut self.run);
            }
            while let Some((req, token)) = self.core.poll_orphan() {
                moved = true;
                in_ffp(&mut self.stage, "a command handed back").orphaned(
                    &req,
                    token,
                    &mut self.run,
                );
            }
            if let Some(end) = end {
                self.ended(end);
            }
            if !moved {
                break;
            }
        }
        if let Stage::Ffp(f) = &self.stage {
            f.check_state(&self.core);
        }
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Connect => {
                assert!(
                    matches!(self.stage, Stage::Login(_)),
                    "a new connection with reconnection off"
                );
                self.core.handle_connected([0x5a; RANDOM_BYTES]);
            }
            Event::LoggedIn {
                outcome,
                reinstated,
                reissued,
            } => {
                assert!(!reinstated && reissued == 0, "a second login");
                self.start_session(&outcome);
            }
            Event::Disconnect => {
                if let Stage::Ffp(f) = &mut self.stage {
                    f.ended = true;
                }
            }
            Event::LoginFailed(f) => panic!("a reconnection attempt with reconnection off: {f}"),
            Event::ConnectionFailed { why, .. } => {
                if !self.input_ended {
                    self.run.failed = Some(why);
                }
            }
            Event::LoggedOut { .. } => self.run.logged_out = true,
            Event::Async {
                event, parameters, ..
            } => {
                let now = self.now;
                in_ffp(&mut self.stage, "an asynchronous message").async_event(
                    event,
                    parameters,
                    now,
                    &mut self.run,
                );
            }
            Event::UnitAttention { .. } => {
                assert!(
                    self.settings.unit_attention_retry,
                    "a unit attention retry with retries off"
                );
                self.run.unit_attentions += 1;
            }
            Event::Ended(end) => self.ended(end),
        }
    }

    fn ended(&mut self, end: End) {
        match &end {
            End::LoginFailed(LoginFailure::Connection(_)) if self.input_ended => {}
            End::LoginFailed(f) => self.run.login_error = Some(f.to_string()),
            End::GaveUp { attempts, .. } => assert_eq!(*attempts, 0),
            End::LoggedOut | End::Closed => {}
        }
        if let Stage::Ffp(f) = &self.stage {
            f.check_end();
        }
        self.stage = Stage::Closed;
    }

    /// Login completed: full feature phase begins with the first workload.
    fn start_session(&mut self, outcome: &LoginOutcome) {
        let Stage::Login(login) = &self.stage else {
            panic!("a login completed outside the login phase");
        };
        login.done(outcome, &mut self.run);
        let mut f = Ffp::new(login, outcome, self.settings);
        self.run.logged_in = true;
        self.run.discovery = f.discovery;
        let (core, run, now) = (&mut self.core, &mut self.run, self.now);
        if f.discovery {
            f.submit(core, Job::SendTargets, (0, 0), now, run);
        } else {
            let read = Job::Read {
                bytes: 4096,
                discard: false,
            };
            f.submit(core, read, (0, 0), now, run);
            f.submit(core, Job::Write { bytes: 96 << 10 }, (0, 1), now, run);
        }
        self.stage = Stage::Ffp(Box::new(f));
    }
}

/// The full feature phase account, where only it can be.
fn in_ffp<'a>(stage: &'a mut Stage<LoginSide, Ffp>, what: &str) -> &'a mut Ffp {
    match stage {
        Stage::Ffp(f) => f,
        _ => panic!("{what} outside full feature phase"),
    }
}

pub fn initiator(data: &[u8]) -> InitiatorRun {
    run_steps::<InitiatorHarness>(data)
}
