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
//! | 5 | at the end the driver takes unfinished commands back (`take_unfinished`, as for a reconnect) instead of failing them |
//! | 6 | the initiator offers InitialR2T=Yes and ImmediateData=No (all write data waits for R2Ts) |
//! | 7 | a task table of 4 tags (otherwise 32) |
//!
//! Login Responses are cut from the bytes by the real [`FrameDecoder`]
//! with the login-phase limits and go to [`InitiatorLogin`]; once it
//! completes, the driver starts an [`InitiatorSession`] on the negotiated
//! values and submits a first workload (a 4 KiB READ(10) and a 96 KiB
//! WRITE(10), or SendTargets on a discovery session). From then on every
//! PDU is decoded with the negotiated digests and MaxRecvDataSegmentLength,
//! handed to the session, and what it sends, completes and reports is
//! drained after each one. An undecodable PDU, an Asynchronous Message
//! announcing a dropped connection or session (events 2, 3) and a Logout
//! Response end the connection as the driver in `ironlun-initiator` does;
//! event 1 (logout requested) is answered with a Logout. The input
//! ending ends the connection too: the driver fails the session, or
//! takes its SCSI commands back (settings bit 5).
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
//! - every task submitted completes exactly once, with the kind of reply
//!   its request asks for, and only after it was sent when it succeeds;
//!   when the session fails every task has completed; when the input
//!   ends, failing or taking back leaves no task and no tag; a failed
//!   session takes no new task and sends nothing more;
//! - bounded memory: the session's tags in use are exactly the live
//!   tasks, never more than its limit, and a submit is refused only when
//!   the table is full or the session failed.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ironlun_proto::chap::{decode_binary, Algorithm, Secret, RANDOM_BYTES};
use ironlun_proto::initiator::{
    Completed, InitiatorLogin, InitiatorSession, LoginConfig, LoginOutcome, LoginProgress, Reply,
    ScsiRequest, SessionEvent, SessionLimits, SubmitError, ATTR_SIMPLE,
};
use ironlun_proto::login::LOGIN_SEGMENT_MAX;
use ironlun_proto::params::{DigestKind, Offers, SessionParams};
use ironlun_proto::window::{sn_le, sn_lt};
use ironlun_proto::OutPdu;
use ironlun_scsi_codes::{opcode, Status};
use ironlun_wire::text::parse_pairs;
use ironlun_wire::{
    AsyncEvent, DataIn, DataOut, Digests, Frame, FrameDecoder, LoginResponse, Lun, Outbox, Pdu,
    R2t, ScsiCommand, TmfFunction, RESERVED_TAG,
};

use crate::input::{elapsed, run_steps, Sent, Stage, Stepped};
use crate::login::get;
use crate::seeds::rw10;
use crate::session::encode_into;
use crate::world::{initiator_auth, INITIATOR, TARGET, TARGET_SECRET};

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
    /// Commands `take_unfinished` handed back.
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

/// The login phase, with the harness's own account of it.
struct LoginSide {
    login: InitiatorLogin,
    cfg: LoginConfig,
    /// The first request: its ITT, ISID, TSIH, CID and CmdSN hold
    /// throughout the login.
    first: Option<ironlun_wire::LoginRequest>,
    stage: u8,
    requests: usize,
    /// The last Login Response, and text collected across C=1.
    last: Option<LoginResponse>,
    rx: Vec<u8>,
    algorithm: Option<Algorithm>,
    /// CHAP_I and CHAP_C of the initiator's challenge (mutual CHAP).
    our_challenge: Option<(u8, Vec<u8>)>,
    answered_challenge: bool,
    target_proved: bool,
}

impl LoginSide {
    fn new(cfg: LoginConfig) -> Self {
        LoginSide {
            login: InitiatorLogin::new(cfg.clone(), [0x5a; RANDOM_BYTES]),
            cfg,
            first: None,
            stage: 0,
            requests: 0,
            last: None,
            rx: Vec::new(),
            algorithm: None,
            our_challenge: None,
            answered_challenge: false,
            target_proved: false,
        }
    }

    /// Checks one Login Request and puts it on the wire.
    fn send(&mut self, p: OutPdu, run: &mut InitiatorRun, sent: &mut Vec<u8>) {
        let Pdu::LoginRequest(r) = &p.pdu else {
            panic!("the initiator sent {:?} during login", p.pdu.opcode());
        };
        self.requests += 1;
        run.login_requests = self.requests;
        run.pdus_out += 1;
        assert!(
            self.requests <= LOGIN_ROUNDS,
            "{} Login Requests: the login is unbounded",
            self.requests
        );
        match &self.first {
            None => {
                assert_eq!(r.tsih, 0, "a new session's login with a TSIH: {r:?}");
                self.first = Some(r.clone());
            }
            Some(f) => assert_eq!(
                (r.itt, r.isid, r.tsih, r.cid, r.cmd_sn),
                (f.itt, f.isid, f.tsih, f.cid, f.cmd_sn),
                "ITT, ISID, TSIH, CID or CmdSN changed during the login (RFC 7143 §11.12)"
            ),
        }
        assert!(!(r.transit && r.cont), "T and C both set: {r:?}");
        assert!(
            r.csg >= self.stage && r.csg <= 1,
            "stage {} after stage {}: {r:?}",
            r.csg,
            self.stage
        );
        self.stage = r.csg;
        if r.transit {
            assert!(
                r.nsg > r.csg && (r.nsg == 1 || r.nsg == 3),
                "transit from stage {} to {}: {r:?}",
                r.csg,
                r.nsg
            );
        }
        if let Some(last) = &self.last {
            assert_eq!(
                r.exp_stat_sn,
                last.stat_sn.wrapping_add(1),
                "ExpStatSN does not acknowledge the last Login Response: {r:?}"
            );
        }
        assert!(
            p.data.len() <= LOGIN_SEGMENT_MAX,
            "a Login Request of {} bytes",
            p.data.len()
        );
        let Some(text) = p.data.as_mem() else {
            panic!("a Login Request's data is a file range");
        };
        let pairs = match parse_pairs(text) {
            Ok(p) => p,
            Err(e) => panic!("the initiator's login text does not parse: {e}"),
        };
        if self.cfg.auth.is_some() {
            // CHAP, or a refusal of the target's offer: never agreeing to
            // another method.
            if let Some(m) = get(&pairs, "AuthMethod") {
                assert!(
                    m == "CHAP" || m == "Reject",
                    "AuthMethod={m} with CHAP configured"
                );
            }
        }
        if get(&pairs, "CHAP_R").is_some() {
            self.answered_challenge = true;
        }
        if let (Some(i), Some(c)) = (get(&pairs, "CHAP_I"), get(&pairs, "CHAP_C")) {
            let parsed = (i.parse::<u8>().ok(), decode_binary(c, "CHAP_C").ok());
            let (Some(i), Some(c)) = parsed else {
                panic!("the initiator sent a malformed challenge: {pairs:?}");
            };
            self.our_challenge = Some((i, c));
        }
        encode_into(&mut Outbox::new(Digests::default()), p, sent);
    }

    /// Notes one Login Response before the initiator sees it.
    fn received(&mut self, frame: &Frame) {
        let Ok(Pdu::LoginResponse(r)) = Pdu::decode(&frame.bhs) else {
            return;
        };
        if self.rx.len() + frame.data.len() > 64 << 10 {
            self.rx.clear();
        }
        self.rx.extend_from_slice(&frame.data);
        if !r.cont {
            let text = std::mem::take(&mut self.rx);
            if let Ok(pairs) = parse_pairs(&text) {
                self.watch_chap(&pairs);
            }
        }
        self.last = Some(r);
    }

    fn watch_chap(&mut self, pairs: &[(String, String)]) {
        if let Some(a) = get(pairs, "CHAP_A").and_then(Algorithm::from_code) {
            self.algorithm = Some(a);
        }
        let Some(r) = get(pairs, "CHAP_R") else {
            return;
        };
        let (Some(alg), Some((id, challenge))) = (self.algorithm, &self.our_challenge) else {
            return;
        };
        let right = Secret::new(TARGET_SECRET)
            .ok()
            .map(|s| alg.response(*id, &s, challenge));
        if right.is_some() && decode_binary(r, "CHAP_R").ok() == right {
            self.target_proved = true;
        }
    }

    /// The login completed: on the right response, with the right
    /// authentication, and with values inside what was offered.
    fn done(&self, outcome: &LoginOutcome, run: &mut InitiatorRun) {
        let Some(r) = &self.last else {
            panic!("a login completed without a Login Response");
        };
        assert!(
            r.status_class == 0 && r.transit && !r.cont && r.nsg == 3,
            "the login completed on {r:?}"
        );
        if let Some(auth) = &self.cfg.auth {
            assert!(
                self.answered_challenge,
                "a login with CHAP configured completed without answering a challenge"
            );
            if auth.mutual.is_some() {
                assert!(
                    self.target_proved,
                    "a mutual CHAP login completed without the target's right CHAP_R"
                );
            }
        }
        run.authenticated = self.answered_challenge;
        run.target_authenticated = self.target_proved;
        let offers = &self.cfg.offers;
        let c = &outcome.conn;
        assert_eq!(
            c.max_recv_data_segment_length, offers.max_recv_data_segment_length,
            "our MaxRecvDataSegmentLength is our declaration"
        );
        assert!(
            (512..1 << 24).contains(&c.max_xmit_data_segment_length),
            "the target's MaxRecvDataSegmentLength {}",
            c.max_xmit_data_segment_length
        );
        let crc = offers.header_digest == [DigestKind::Crc32c];
        assert_eq!(
            (c.header_digest, c.data_digest),
            (crc, crc),
            "digests other than the only one offered"
        );
        if self.cfg.target_name.is_none() {
            return; // the session keys are not negotiated (RFC 7143 §13)
        }
        let s = &outcome.session;
        // A proposal the target leaves unanswered keeps the RFC default:
        // no answer is no agreement (the negotiator's rule, RFC 7143 §6.2).
        let d = SessionParams::default();
        assert!(
            s.max_burst_length >= 512
                && (s.max_burst_length <= offers.max_burst_length
                    || s.max_burst_length == d.max_burst_length),
            "MaxBurstLength {} for an offer of {}",
            s.max_burst_length,
            offers.max_burst_length
        );
        // Irrelevant when no unsolicited data can flow (RFC 7143 §13.14).
        let unsolicited = !s.initial_r2t || s.immediate_data;
        let first = s.first_burst_length;
        assert!(
            !unsolicited
                || ((512..=s.max_burst_length).contains(&first)
                    && (first <= offers.first_burst_length
                        || first == d.first_burst_length.min(s.max_burst_length))),
            "FirstBurstLength {first} (offered {}, MaxBurstLength {})",
            offers.first_burst_length,
            s.max_burst_length
        );
        assert!(
            s.initial_r2t || !offers.initial_r2t,
            "InitialR2T is an OR (RFC 7143 §13.10)"
        );
        assert_eq!(
            s.error_recovery_level, 0,
            "ErrorRecoveryLevel above offered"
        );
        assert!(s.max_connections <= offers.max_connections);
    }
}

/// What a task asked for.
#[derive(Clone, Debug)]
enum What {
    Scsi(Box<ScsiRequest>),
    Text,
    TaskMgmt(TmfFunction),
    Logout,
    Ping,
}

/// Data-Out one R2T asked for.
#[derive(Clone, Copy, Debug)]
struct Burst {
    ttt: u32,
    end: usize,
    next_offset: usize,
    next_sn: u32,
}

/// Unsolicited Data-Out still to come after a command with F=0.
#[derive(Clone, Copy, Debug)]
struct Unsolicited {
    end: usize,
    next_offset: usize,
    next_sn: u32,
}

/// One task the session holds, as the harness tracks it.
#[derive(Debug)]
struct Live {
    itt: u32,
    what: What,
    /// Sent, and not yet ended by the target.
    in_flight: bool,
    ever_sent: bool,
    /// Data-In in order so far (bytes kept unless the read discards).
    data: BytesMut,
    data_len: usize,
    next_data_sn: u32,
    /// A Data-In the initiator must refuse arrived.
    broken: bool,
    /// Response and status the target sent.
    status: Option<(u8, u8)>,
    bursts: Vec<Burst>,
    unsolicited: Option<Unsolicited>,
    /// TTT a text continuation must carry.
    continuation: Option<u32>,
}

impl Live {
    fn new(itt: u32, what: What) -> Self {
        Live {
            itt,
            what,
            in_flight: false,
            ever_sent: false,
            data: BytesMut::new(),
            data_len: 0,
            next_data_sn: 0,
            broken: false,
            status: None,
            bursts: Vec::new(),
            unsolicited: None,
            continuation: None,
        }
    }

    fn request(&self) -> Option<&ScsiRequest> {
        match &self.what {
            What::Scsi(r) => Some(r),
            _ => None,
        }
    }

    /// The command went out (again): nothing of an earlier round counts.
    fn sent(&mut self) {
        self.in_flight = true;
        self.ever_sent = true;
        self.data.clear();
        self.data_len = 0;
        self.next_data_sn = 0;
        self.broken = false;
        self.status = None;
        self.bursts.clear();
        self.unsolicited = None;
    }

    /// The target ended the command with a status.
    fn ended(&mut self, status: (u8, u8)) {
        self.status = Some(status);
        self.in_flight = false;
    }

    fn data_in(&mut self, d: &DataIn, data: &[u8]) {
        let Some(req) = self.request() else {
            return;
        };
        let (read_len, discard) = (req.read_len as usize, req.discard_data);
        if !self.in_flight {
            return;
        }
        let in_order = d.data_sn == self.next_data_sn
            && d.buffer_offset as usize == self.data_len
            && self.data_len + data.len() <= read_len;
        if in_order {
            self.next_data_sn = self.next_data_sn.wrapping_add(1);
            self.data_len += data.len();
            if !discard {
                self.data.extend_from_slice(data);
            }
        } else {
            self.broken = true;
        }
        if let Some(status) = d.status {
            self.ended((0, status));
        }
    }

    /// A valid R2T (RFC 7143 §11.8) asks for Data-Out.
    fn r2t(&mut self, r: &R2t, max_burst: u32) {
        let Some(write_len) = self.request().map(|r| r.write.len()) else {
            return;
        };
        let end = r.buffer_offset as usize + r.desired_data_transfer_length as usize;
        let valid = r.desired_data_transfer_length > 0
            && r.desired_data_transfer_length <= max_burst
            && end <= write_len
            && r.ttt != RESERVED_TAG;
        if self.in_flight && valid {
            self.bursts.push(Burst {
                ttt: r.ttt,
                end,
                next_offset: r.buffer_offset as usize,
                next_sn: 0,
            });
        }
    }
}

/// `sn` is StatSN of a PDU that carries status (RFC 7143 §4.2.2.2): the
/// ExpStatSN it allows.
fn status_stat_sn(p: &Pdu) -> Option<u32> {
    match p {
        Pdu::ScsiResponse(r) => Some(r.stat_sn),
        Pdu::DataIn(d) => d.status.map(|_| d.stat_sn),
        Pdu::TaskMgmtResponse(r) => Some(r.stat_sn),
        Pdu::TextResponse(r) => Some(r.stat_sn),
        Pdu::LogoutResponse(r) => Some(r.stat_sn),
        Pdu::Reject(r) => Some(r.stat_sn),
        Pdu::AsyncMessage(m) => Some(m.stat_sn),
        // A NOP-In with ITT 0xffffffff does not advance StatSN (§11.19).
        Pdu::NopIn(n) if n.itt != RESERVED_TAG => Some(n.stat_sn),
        _ => None,
    }
    .map(|sn| sn.wrapping_add(1))
}

/// ExpCmdSN and MaxCmdSN of a target PDU.
fn window_of(p: &Pdu) -> Option<(u32, u32)> {
    Some(match p {
        Pdu::ScsiResponse(r) => (r.exp_cmd_sn, r.max_cmd_sn),
        Pdu::DataIn(d) => (d.exp_cmd_sn, d.max_cmd_sn),
        Pdu::TaskMgmtResponse(r) => (r.exp_cmd_sn, r.max_cmd_sn),
        Pdu::TextResponse(r) => (r.exp_cmd_sn, r.max_cmd_sn),
        Pdu::LogoutResponse(r) => (r.exp_cmd_sn, r.max_cmd_sn),
        Pdu::Reject(r) => (r.exp_cmd_sn, r.max_cmd_sn),
        Pdu::AsyncMessage(m) => (m.exp_cmd_sn, m.max_cmd_sn),
        Pdu::NopIn(n) => (n.exp_cmd_sn, n.max_cmd_sn),
        Pdu::R2t(r) => (r.exp_cmd_sn, r.max_cmd_sn),
        _ => return None,
    })
}

/// ExpStatSN of an initiator PDU.
fn exp_stat_sn_of(p: &Pdu) -> Option<u32> {
    Some(match p {
        Pdu::ScsiCommand(c) => c.exp_stat_sn,
        Pdu::DataOut(d) => d.exp_stat_sn,
        Pdu::NopOut(n) => n.exp_stat_sn,
        Pdu::TextRequest(t) => t.exp_stat_sn,
        Pdu::TaskMgmtRequest(t) => t.exp_stat_sn,
        Pdu::LogoutRequest(l) => l.exp_stat_sn,
        _ => return None,
    })
}

/// Full feature phase: the session and the driver's account of it.
struct Ffp {
    ini: InitiatorSession<u32>,
    settings: Settings,
    discovery: bool,
    params: SessionParams,
    max_xmit: usize,
    max_tasks: usize,
    outbox: Outbox,
    /// Frames what the initiator sends as the target would.
    target_decoder: FrameDecoder,
    live: BTreeMap<u32, Live>,
    by_itt: HashMap<u32, u32>,
    next_token: u32,
    /// CmdSN of the next non-immediate command.
    next_cmd_sn: u32,
    /// The largest MaxCmdSN the target allowed (RFC 7143 §4.2.2.1).
    max_cmd_sn: u32,
    /// ExpStatSN values a status the target sent allows.
    acks: HashSet<u32>,
    /// TTTs of NOP-In pings to answer.
    pings: VecDeque<u32>,
    in_timeout: bool,
    logging_out: bool,
    /// The connection is to end (logout answered, the target leaves).
    ending: bool,
    ended: bool,
    closed: bool,
}

impl Ffp {
    fn new(login: &LoginSide, outcome: &LoginOutcome, settings: Settings, now: Instant) -> Self {
        let limits = SessionLimits {
            max_tasks: settings.max_tasks(),
            nop_interval: Some(NOP_INTERVAL),
            nop_timeout: NOP_TIMEOUT,
            unit_attention_retries: u8::from(settings.unit_attention_retry),
        };
        let digests = Digests {
            header: outcome.conn.header_digest,
            data: outcome.conn.data_digest,
        };
        let max_xmit = outcome.conn.max_xmit_data_segment_length;
        let (next_cmd_sn, last) = match (&login.first, &login.last) {
            (Some(f), Some(l)) => (f.cmd_sn, l),
            _ => panic!("full feature phase without a login exchange"),
        };
        Ffp {
            ini: InitiatorSession::new(outcome, limits, now),
            settings,
            discovery: login.cfg.target_name.is_none(),
            params: outcome.session.clone(),
            max_xmit: max_xmit as usize,
            max_tasks: settings.max_tasks(),
            outbox: Outbox::new(digests),
            target_decoder: FrameDecoder {
                digests,
                max_data_segment_len: max_xmit,
            },
            live: BTreeMap::new(),
            by_itt: HashMap::new(),
            next_token: 1,
            next_cmd_sn,
            // The login's window is where the session starts from.
            max_cmd_sn: last.max_cmd_sn,
            acks: HashSet::from([last.stat_sn.wrapping_add(1)]),
            pings: VecDeque::new(),
            in_timeout: false,
            logging_out: false,
            ending: false,
            ended: false,
            closed: false,
        }
    }

    fn live_itt(&mut self, itt: u32) -> Option<&mut Live> {
        let token = self.by_itt.get(&itt)?;
        self.live.get_mut(token)
    }

    /// The live task a PDU the initiator sends belongs to.
    fn sending(&mut self, itt: u32, p: &Pdu) -> &mut Live {
        let Some(token) = self.by_itt.get(&itt).copied() else {
            panic!("the initiator sent a PDU for ITT {itt:#x}, which no live task holds: {p:?}");
        };
        match self.live.get_mut(&token) {
            Some(t) => t,
            None => panic!("ITT {itt:#x} maps to task {token}, which is gone"),
        }
    }

    /// One task from the driver.
    fn submit(&mut self, job: Job, arg: u8, lba: u8, run: &mut InitiatorRun) {
        if self.logging_out || self.ending || (self.discovery && job.needs_normal_session()) {
            return;
        }
        let token = self.next_token;
        self.next_token += 1;
        let full = self.live.len() >= self.max_tasks;
        let (result, what) = match job {
            Job::Read { .. } | Job::Write { .. } | Job::TestUnitReady => {
                let Some(req) = scsi_request(job, arg, lba, token) else {
                    return;
                };
                (
                    self.ini.submit(req.clone(), token),
                    What::Scsi(Box::new(req)),
                )
            }
            Job::SendTargets => (
                self.ini.submit_text(&[("SendTargets", "All")], token),
                What::Text,
            ),
            Job::AbortTask => {
                let scsi: Vec<u32> = self
                    .live
                    .values()
                    .filter(|t| t.request().is_some())
                    .map(|t| t.itt)
                    .collect();
                let rtt = match scsi.len() {
                    0 => 0x7777,
                    n => scsi
                        .get(usize::from(arg) % n)
                        .copied()
                        .unwrap_or(RESERVED_TAG),
                };
                let f = TmfFunction::ABORT_TASK;
                let r = self.ini.submit_task_mgmt(f, Lun::from_index(0), rtt, token);
                (r, What::TaskMgmt(f))
            }
            Job::LogicalUnitReset => {
                let f = TmfFunction::LOGICAL_UNIT_RESET;
                let lun = Lun::from_index(u16::from(arg & 1));
                // Referenced Task Tag is reserved for all but ABORT TASK
                // (RFC 7143 §11.5.2).
                let r = self.ini.submit_task_mgmt(f, lun, RESERVED_TAG, token);
                (r, What::TaskMgmt(f))
            }
            Job::Ping => (self.ini.submit_ping(token), What::Ping),
            Job::Logout => {
                self.logging_out = true;
                (self.ini.submit_logout(0, 0, token), What::Logout)
            }
        };
        match result {
            Ok(itt) => {
                assert!(
                    !full,
                    "a task taken with all {} tags in use",
                    self.max_tasks
                );
                assert_ne!(itt, RESERVED_TAG, "a task with the reserved tag");
                if let Some(other) = self.by_itt.insert(itt, token) {
                    panic!("ITT {itt:#x} handed out while task {other} holds it");
                }
                self.live.insert(token, Live::new(itt, what));
                run.submitted += 1;
            }
            Err(SubmitError::Full(_)) => {
                assert!(
                    full,
                    "refused as full with {} of {} tags in use",
                    self.live.len(),
                    self.max_tasks
                );
                run.refused += 1;
            }
            Err(SubmitError::Failed(_)) => {
                assert!(self.ini.failure().is_some(), "refused as failed, but live");
            }
            Err(e) => panic!("the workload's task was refused: {e}"),
        }
    }

    /// Notes a target PDU before the initiator sees it.
    fn note(&mut self, pdu: &Pdu, data: &[u8], run: &mut InitiatorRun) {
        if let Some((exp, max)) = window_of(pdu) {
            // RFC 7143 §4.2.2.1: ignored when MaxCmdSN < ExpCmdSN - 1;
            // otherwise only a newer MaxCmdSN counts.
            if !sn_lt(max, exp.wrapping_sub(1)) && sn_lt(self.max_cmd_sn, max) {
                self.max_cmd_sn = max;
            }
        }
        if let Some(ack) = status_stat_sn(pdu) {
            self.acks.insert(ack);
        }
        let max_burst = self.params.max_burst_length;
        match pdu {
            Pdu::DataIn(d) => {
                run.data_ins += 1;
                if let Some(t) = self.live_itt(d.itt) {
                    t.data_in(d, data);
                }
            }
            Pdu::ScsiResponse(r) => {
                if let Some(t) = self.live_itt(r.itt) {
                    if t.in_flight && t.request().is_some() {
                        t.ended((r.response, r.status));
                    }
                }
            }
            Pdu::R2t(r) => {
                run.r2ts += 1;
                if let Some(t) = self.live_itt(r.itt) {
                    t.r2t(r, max_burst);
                }
            }
            Pdu::NopIn(n) if n.itt == RESERVED_TAG && n.ttt != RESERVED_TAG => {
                self.pings.push_back(n.ttt);
            }
            Pdu::TextResponse(r) => {
                if let Some(t) = self.live_itt(r.itt) {
                    if t.in_flight && matches!(t.what, What::Text) {
                        if r.final_bit && !r.cont {
                            t.in_flight = false;
                        } else {
                            t.continuation = Some(r.ttt);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// One PDU from the target.
    fn receive(&mut self, frame: Frame, now: Instant, run: &mut InitiatorRun, out: &mut Vec<u8>) {
        if let Ok(pdu) = Pdu::decode(&frame.bhs) {
            self.note(&pdu, &frame.data, run);
        }
        if let Err(e) = self.ini.handle_frame(frame, now) {
            // The connection cannot go on (RFC 7143 §7.8).
            self.ini
                .fail(format!("undecodable PDU from the target: {e}"));
        }
        self.pump(run, out);
    }

    /// Time passes: the keep-alive timer runs when it is due.
    fn tick(&mut self, now: Instant, run: &mut InitiatorRun, out: &mut Vec<u8>) {
        if self.ini.poll_timeout().is_some_and(|t| t <= now) {
            self.in_timeout = true;
            self.ini.handle_timeout(now);
            self.pump(run, out);
            self.in_timeout = false;
        }
    }

    /// Drains what the session sends, completes and reports, as the driver
    /// does after every input, and checks the state it leaves.
    fn pump(&mut self, run: &mut InitiatorRun, out: &mut Vec<u8>) {
        loop {
            let mut moved = false;
            while let Some(p) = self.ini.poll_transmit() {
                moved = true;
                self.send(p, run, out);
            }
            while let Some(c) = self.ini.poll_completion() {
                moved = true;
                self.completed(c, run);
            }
            let mut logout = false;
            while let Some(e) = self.ini.poll_event() {
                moved = true;
                logout |= self.event(e, run);
            }
            if logout {
                self.submit(Job::Logout, 0, 0, run);
            }
            if !moved {
                break;
            }
        }
        let in_use = self.ini.tasks_in_use();
        assert_eq!(
            in_use,
            self.live.len(),
            "the session holds {in_use} tags for {} live tasks",
            self.live.len()
        );
        assert!(in_use <= self.max_tasks, "{in_use} tags in use");
        if self.ini.failure().is_some() {
            return;
        }
        assert!(
            self.pings.is_empty(),
            "NOP-In pings left unanswered (RFC 7143 §11.19): {:?}",
            self.pings
        );
        for t in self.live.values() {
            for b in &t.bursts {
                assert_eq!(
                    b.next_offset, b.end,
                    "an R2T (TTT {:#x}) answered only up to {}",
                    b.ttt, b.next_offset
                );
            }
            if let Some(u) = &t.unsolicited {
                assert_eq!(u.next_offset, u.end, "unsolicited data stopped short");
            }
        }
    }

    /// Returns whether the driver should log out.
    fn event(&mut self, e: SessionEvent, run: &mut InitiatorRun) -> bool {
        match e {
            SessionEvent::Failed(why) => {
                assert!(
                    self.live.is_empty(),
                    "the session failed ({why}) with tasks never completed: {:?}",
                    self.live.keys().collect::<Vec<_>>()
                );
                if !self.ended {
                    run.failed = Some(why);
                }
                self.closed = true;
            }
            SessionEvent::Async { event, .. } => {
                run.async_events += 1;
                match event {
                    AsyncEvent::LOGOUT_REQUEST => return true,
                    AsyncEvent::CONNECTION_DROP | AsyncEvent::SESSION_DROP => self.ending = true,
                    _ => {}
                }
            }
            SessionEvent::UnitAttention { .. } => {
                assert!(
                    self.settings.unit_attention_retry,
                    "a unit attention retry with retries off"
                );
                run.unit_attentions += 1;
            }
        }
        false
    }

    fn completed(&mut self, c: Completed<u32>, run: &mut InitiatorRun) {
        let Some(t) = self.live.remove(&c.token) else {
            panic!("task {} completed twice, or was never taken", c.token);
        };
        self.by_itt.remove(&t.itt);
        let reply = match c.result {
            Ok(reply) => reply,
            Err(_) => {
                run.errors += 1;
                return;
            }
        };
        assert!(
            t.ever_sent,
            "task {} got a reply but was never sent",
            c.token
        );
        run.replies += 1;
        match (reply, &t.what) {
            (Reply::Scsi(r), What::Scsi(req)) => {
                assert!(
                    r.data.len() <= req.read_len as usize,
                    "a read of {} bytes completed with {}",
                    req.read_len,
                    r.data.len()
                );
                assert!(
                    !t.broken,
                    "a command completed after Data-In out of order or past its length"
                );
                if req.discard_data {
                    assert!(r.data.is_empty(), "discarded data came back");
                } else {
                    assert!(
                        r.data.as_ref() == t.data.as_ref(),
                        "the data read ({} bytes) is not what the target sent ({} bytes)",
                        r.data.len(),
                        t.data.len()
                    );
                }
                assert_eq!(
                    Some((r.response, r.status.0)),
                    t.status,
                    "a command completed with another status than the target's"
                );
                if r.response == 0 && r.status == Status::GOOD {
                    run.good += 1;
                }
                run.read_bytes += r.data.len() as u64;
            }
            (Reply::Text(_), What::Text) => run.text_replies += 1,
            (Reply::TaskMgmt(_), What::TaskMgmt(_)) => run.tmf_replies += 1,
            (Reply::Nop(_), What::Ping) => run.nop_replies += 1,
            (Reply::Logout(_), What::Logout) => {
                // The target closes the connection after a Logout
                // Response (RFC 7143 §11.15).
                run.logged_out = true;
                self.ending = true;
            }
            (reply, what) => panic!("a {what:?} task completed with {reply:?}"),
        }
    }

    /// CmdSN of a PDU the initiator sends (RFC 7143 §4.2.2.1).
    fn cmd_sn(&mut self, cmd_sn: u32, immediate: bool, p: &Pdu) {
        assert_eq!(
            cmd_sn, self.next_cmd_sn,
            "CmdSN out of sequence (RFC 7143 §4.2.2.1): {p:?}"
        );
        if !immediate {
            assert!(
                sn_le(cmd_sn, self.max_cmd_sn),
                "CmdSN {cmd_sn} beyond MaxCmdSN {} (RFC 7143 §4.2.2.1): {p:?}",
                self.max_cmd_sn
            );
            self.next_cmd_sn = cmd_sn.wrapping_add(1);
        }
    }

    /// One PDU the initiator sends: checked, then put on the wire.
    fn send(&mut self, p: OutPdu, run: &mut InitiatorRun, out: &mut Vec<u8>) {
        assert!(
            !self.ended,
            "the initiator sent {:?} after the connection ended",
            p.pdu
        );
        run.pdus_out += 1;
        assert!(
            p.data.len() <= self.max_xmit,
            "{} data bytes for the target's MaxRecvDataSegmentLength of {}: {:?}",
            p.data.len(),
            self.max_xmit,
            p.pdu
        );
        let Some(data) = p.data.as_mem().cloned() else {
            panic!("the initiator sent a file range: {:?}", p.pdu);
        };
        if let Some(e) = exp_stat_sn_of(&p.pdu) {
            assert!(
                self.acks.contains(&e),
                "ExpStatSN {e} acknowledges a status the target never sent (RFC 7143 §4.2.2.2): {:?}",
                p.pdu
            );
        }
        match &p.pdu {
            Pdu::ScsiCommand(c) => self.command(c, &data, &p.pdu, run),
            Pdu::DataOut(d) => self.data_out(d, &data, &p.pdu, run),
            Pdu::NopOut(n) => {
                if n.itt == RESERVED_TAG {
                    // An answer to the target's ping, or a bare ExpStatSN
                    // update (RFC 7143 §11.18).
                    assert!(n.immediate, "NOP-Out with ITT 0xffffffff and I=0");
                    if n.ttt != RESERVED_TAG {
                        assert_eq!(
                            self.pings.pop_front(),
                            Some(n.ttt),
                            "a NOP-Out answering no ping: {n:?}"
                        );
                        run.ping_echoes += 1;
                    }
                } else if self.by_itt.contains_key(&n.itt) {
                    let t = self.sending(n.itt, &p.pdu);
                    assert!(matches!(t.what, What::Ping), "NOP-Out for a {:?}", t.what);
                    assert!(!t.ever_sent, "a ping sent twice");
                    assert_eq!(n.ttt, RESERVED_TAG, "a ping with a TTT");
                    t.sent();
                } else {
                    assert!(
                        self.in_timeout,
                        "NOP-Out with ITT {:#x} of no task outside the keep-alive timeout",
                        n.itt
                    );
                    assert_eq!(n.ttt, RESERVED_TAG, "a keep-alive ping with a TTT");
                    run.keepalives += 1;
                }
                self.cmd_sn(n.cmd_sn, n.immediate, &p.pdu);
            }
            Pdu::TextRequest(r) => {
                let t = self.sending(r.itt, &p.pdu);
                assert!(
                    matches!(t.what, What::Text),
                    "Text Request for {:?}",
                    t.what
                );
                match t.continuation.take() {
                    Some(ttt) => {
                        assert_eq!(r.ttt, ttt, "a text continuation with another TTT");
                        assert!(data.is_empty(), "a continuation request with text");
                        run.text_continuations += 1;
                    }
                    None => {
                        assert!(!t.ever_sent, "Text Request sent twice: {r:?}");
                        assert_eq!(r.ttt, RESERVED_TAG, "a new text request with a TTT");
                        t.sent();
                    }
                }
                self.cmd_sn(r.cmd_sn, r.immediate, &p.pdu);
            }
            Pdu::TaskMgmtRequest(r) => {
                let t = self.sending(r.itt, &p.pdu);
                assert!(
                    matches!(t.what, What::TaskMgmt(f) if f == r.function),
                    "TMF request {} for {:?}",
                    r.function,
                    t.what
                );
                assert!(!t.ever_sent, "TMF request sent twice");
                t.sent();
                self.cmd_sn(r.cmd_sn, r.immediate, &p.pdu);
            }
            Pdu::LogoutRequest(r) => {
                let t = self.sending(r.itt, &p.pdu);
                assert!(matches!(t.what, What::Logout), "Logout for {:?}", t.what);
                assert!(!t.ever_sent, "Logout Request sent twice");
                t.sent();
                self.cmd_sn(r.cmd_sn, r.immediate, &p.pdu);
            }
            other => panic!(
                "the initiator sent {:?} in full feature phase",
                other.opcode()
            ),
        }
        let mut bytes = Vec::new();
        encode_into(&mut self.outbox, p.clone(), &mut bytes);
        let mut buf = BytesMut::from(&bytes[..]);
        match self.target_decoder.decode(&mut buf) {
            Ok(Some(f)) if buf.is_empty() => {
                assert_eq!(Pdu::decode(&f.bhs).ok(), Some(p.pdu.clone()), "header");
                assert!(f.data == data, "the data segment does not round-trip");
            }
            other => panic!("the target cannot frame {:?}: {other:?}", p.pdu),
        }
        out.extend_from_slice(&bytes);
    }

    fn command(&mut self, c: &ScsiCommand, data: &[u8], p: &Pdu, run: &mut InitiatorRun) {
        assert!(!c.immediate, "a SCSI command sent for immediate delivery");
        self.cmd_sn(c.cmd_sn, c.immediate, p);
        let (immediate_data, initial_r2t) = (self.params.immediate_data, self.params.initial_r2t);
        let first_burst = self.params.first_burst_length as usize;
        let max_xmit = self.max_xmit;
        let t = self.sending(c.itt, p);
        assert!(
            !t.in_flight,
            "SCSI Command for ITT {:#x} sent again while the target holds it",
            c.itt
        );
        let Some(req) = t.request() else {
            panic!("SCSI Command for a {:?}", t.what);
        };
        let write = req.write.clone();
        let edtl = if write.is_empty() {
            req.read_len
        } else {
            write.len() as u32
        };
        assert_eq!(
            (c.expected_data_transfer_length, c.cdb, c.lun),
            (edtl, req.cdb, req.lun),
            "the command is not the one submitted"
        );
        assert_eq!(
            (c.read, c.write),
            (req.read_len > 0, !write.is_empty()),
            "R and W bits"
        );
        let n = data.len();
        assert!(
            n == 0 || immediate_data,
            "{n} bytes of immediate data with ImmediateData=No"
        );
        assert!(
            n <= first_burst.min(max_xmit),
            "{n} bytes of immediate data (FirstBurstLength {first_burst})"
        );
        assert!(
            write.get(..n) == Some(data),
            "immediate data is not the write's first bytes"
        );
        t.sent();
        if !c.final_bit {
            assert!(
                !initial_r2t,
                "F=0 (unsolicited Data-Out to follow) with InitialR2T=Yes (RFC 7143 §13.10)"
            );
            t.unsolicited = Some(Unsolicited {
                end: write.len().min(first_burst),
                next_offset: n,
                next_sn: 0,
            });
        }
        run.immediate_bytes += n as u64;
    }

    fn data_out(&mut self, d: &DataOut, data: &[u8], p: &Pdu, run: &mut InitiatorRun) {
        let max_burst = self.params.max_burst_length as usize;
        let t = self.sending(d.itt, p);
        assert!(
            t.in_flight,
            "Data-Out for a command not sent or already ended: {d:?}"
        );
        let Some(req) = t.request() else {
            panic!("Data-Out for a {:?}", t.what);
        };
        assert_eq!(d.lun, req.lun, "Data-Out for another LUN");
        let offset = d.buffer_offset as usize;
        let end = offset + data.len();
        assert!(
            req.write.get(offset..end) == Some(data),
            "Data-Out for bytes {offset}..{end} of a {}-byte write, or not its bytes",
            req.write.len()
        );
        let (next_offset, next_sn, last) = if d.ttt == RESERVED_TAG {
            let Some(u) = t.unsolicited.as_mut() else {
                panic!("unsolicited Data-Out after a command with F=1: {d:?}");
            };
            run.unsolicited_bytes += data.len() as u64;
            (&mut u.next_offset, &mut u.next_sn, u.end)
        } else {
            let Some(b) = t
                .bursts
                .iter_mut()
                .find(|b| b.ttt == d.ttt && b.next_offset < b.end)
            else {
                panic!(
                    "Data-Out for TTT {:#x}, which no valid R2T asked for: {d:?}",
                    d.ttt
                );
            };
            run.solicited_bytes += data.len() as u64;
            (&mut b.next_offset, &mut b.next_sn, b.end)
        };
        assert_eq!(
            d.data_sn, *next_sn,
            "DataSN counts from 0 per R2T or unsolicited burst (RFC 7143 §11.7.5)"
        );
        assert_eq!(offset, *next_offset, "Data-Out leaves a gap or overlaps");
        assert!(
            end <= last,
            "Data-Out up to {end}, the burst ends at {last}"
        );
        assert!(
            last - offset <= max_burst,
            "a burst beyond MaxBurstLength {max_burst}"
        );
        assert_eq!(d.final_bit, end == last, "F on the last Data-Out only");
        *next_offset = end;
        *next_sn = next_sn.wrapping_add(1);
    }

    /// The connection ends with the input (or the target leaving): the
    /// driver fails the session or takes its commands back.
    fn end(&mut self, why: &str, run: &mut InitiatorRun, out: &mut Vec<u8>) {
        self.ended = true;
        if self.ini.failure().is_none() {
            if self.settings.take_back {
                for (req, token) in self.ini.take_unfinished(why) {
                    let Some(t) = self.live.remove(&token) else {
                        panic!("take_unfinished gave back task {token}, which is not live");
                    };
                    self.by_itt.remove(&t.itt);
                    assert_eq!(
                        t.request().map(|r| r.cdb),
                        Some(req.cdb),
                        "take_unfinished gave back another command"
                    );
                    run.taken_back += 1;
                }
            } else {
                self.ini.fail(why.to_owned());
            }
        }
        self.pump(run, out);
        assert!(
            self.live.is_empty(),
            "tasks never completed: {:?}",
            self.live.keys().collect::<Vec<_>>()
        );
        assert!(
            self.ini.submit_ping(0).is_err(),
            "an ended session took a new task"
        );
        self.closed = true;
    }
}

/// One initiator connection driven step by step. [`initiator`] runs an
/// input through it; the seed generator drives it against the session
/// harness's target and records what that target sent.
pub struct InitiatorHarness {
    settings: Settings,
    stage: Stage<LoginSide, Ffp>,
    decoder: FrameDecoder,
    rbuf: BytesMut,
    now: Instant,
    run: InitiatorRun,
    /// What the initiator sends (kept for a recording target).
    sent: Sent,
}

impl Stepped for InitiatorHarness {
    type Run = InitiatorRun;

    /// The first Login Request is sent at once.
    fn new(settings: u8) -> Self {
        let settings = Settings::from_byte(settings);
        let mut login = LoginSide::new(login_config(settings));
        let mut run = InitiatorRun::default();
        let mut sent = Sent::default();
        let first = login.login.start();
        login.send(first, &mut run, &mut sent.bytes);
        InitiatorHarness {
            settings,
            stage: Stage::Login(Box::new(login)),
            decoder: FrameDecoder::new(LOGIN_SEGMENT_MAX as u32),
            rbuf: BytesMut::new(),
            now: Instant::now(),
            run,
            sent,
        }
    }

    fn is_closed(&self) -> bool {
        matches!(self.stage, Stage::Closed)
    }

    fn step(&mut self, tag: u8, payload: &[u8]) {
        let arg = |i: usize| payload.get(i).copied().unwrap_or(0);
        match (tag, &mut self.stage) {
            (_, Stage::Closed) => return,
            (1, Stage::Ffp(f)) => {
                self.now += elapsed(payload);
                f.tick(self.now, &mut self.run, &mut self.sent.bytes);
            }
            (2, Stage::Ffp(f)) => {
                f.submit(Job::from_byte(arg(0)), arg(1), arg(2), &mut self.run);
                f.pump(&mut self.run, &mut self.sent.bytes);
            }
            (1 | 2, Stage::Login(_)) => {}
            (_, _) => {
                self.rbuf.extend_from_slice(payload);
                self.receive();
            }
        }
        self.settle();
        self.sent.step_done();
    }

    /// The input ended: the connection goes.
    fn finish(mut self) -> InitiatorRun {
        if let Stage::Ffp(f) = &mut self.stage {
            f.end("the input ended", &mut self.run, &mut self.sent.bytes);
        }
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

    /// Ends the connection when the session failed or the target leaves.
    fn settle(&mut self) {
        if let Stage::Ffp(f) = &mut self.stage {
            if f.ending && !f.closed {
                f.end(
                    "the target closed the connection",
                    &mut self.run,
                    &mut self.sent.bytes,
                );
            }
            if f.closed {
                self.stage = Stage::Closed;
            }
        }
    }

    /// Hands every whole PDU in the read buffer to the initiator.
    fn receive(&mut self) {
        loop {
            let decoded = self.decoder.decode(&mut self.rbuf);
            match &mut self.stage {
                Stage::Closed => return,
                Stage::Login(login) => {
                    let frame = match decoded {
                        Ok(Some(f)) => f,
                        Ok(None) => return,
                        Err(e) => {
                            self.run.login_error = Some(format!("bad login response: {e}"));
                            self.stage = Stage::Closed;
                            return;
                        }
                    };
                    login.received(&frame);
                    match login.login.handle_frame(&frame) {
                        Ok(LoginProgress::Send(p)) => {
                            login.send(p, &mut self.run, &mut self.sent.bytes)
                        }
                        Ok(LoginProgress::Done(outcome)) => {
                            login.done(&outcome, &mut self.run);
                            self.start_session(&outcome);
                        }
                        Err(e) => {
                            self.run.login_error = Some(e.to_string());
                            self.stage = Stage::Closed;
                            return;
                        }
                    }
                }
                Stage::Ffp(f) => {
                    match decoded {
                        Ok(Some(frame)) => {
                            f.receive(frame, self.now, &mut self.run, &mut self.sent.bytes)
                        }
                        Ok(None) => return,
                        Err(e) => {
                            // A digest error or an oversize segment: at
                            // ERL 0 the connection cannot recover (§7.8).
                            f.ini.fail(format!("bad PDU from the target: {e}"));
                            f.pump(&mut self.run, &mut self.sent.bytes);
                        }
                    }
                    if f.ending || f.closed {
                        self.settle();
                    }
                }
            }
        }
    }

    /// Login completed: full feature phase begins with the first workload.
    fn start_session(&mut self, outcome: &LoginOutcome) {
        let Stage::Login(login) = &self.stage else {
            return;
        };
        let mut f = Ffp::new(login, outcome, self.settings, self.now);
        self.run.logged_in = true;
        self.run.discovery = f.discovery;
        self.decoder = FrameDecoder {
            digests: Digests {
                header: outcome.conn.header_digest,
                data: outcome.conn.data_digest,
            },
            max_data_segment_len: outcome.conn.max_recv_data_segment_length,
        };
        if f.discovery {
            f.submit(Job::SendTargets, 0, 0, &mut self.run);
        } else {
            let read = Job::Read {
                bytes: 4096,
                discard: false,
            };
            f.submit(read, 0, 0, &mut self.run);
            f.submit(Job::Write { bytes: 96 << 10 }, 0, 1, &mut self.run);
        }
        f.pump(&mut self.run, &mut self.sent.bytes);
        self.stage = Stage::Ffp(Box::new(f));
    }
}

pub fn initiator(data: &[u8]) -> InitiatorRun {
    run_steps::<InitiatorHarness>(data)
}
