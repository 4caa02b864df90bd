//! Full feature phase of one target connection, sans I/O
//! (RFC 7143 §4.2, §7, §11).
//!
//! # Contract
//!
//! [`TargetConnection`] is a state machine with no sockets and no clock:
//!
//! * inputs: [`handle_frame`](TargetConnection::handle_frame) for each PDU
//!   received, [`complete`](TargetConnection::complete) when a SCSI task the
//!   driver executed finishes, [`finish_tmf`](TargetConnection::finish_tmf)
//!   after the driver decided a task management function,
//!   [`handle_timeout`](TargetConnection::handle_timeout) with the current
//!   time, and [`request_logout`](TargetConnection::request_logout) at
//!   shutdown;
//! * outputs: [`poll_transmit`](TargetConnection::poll_transmit) yields PDUs
//!   to send in order, [`poll_event`](TargetConnection::poll_event) yields
//!   work for the driver ([`Event`]), and
//!   [`poll_timeout`](TargetConnection::poll_timeout) says when to call
//!   `handle_timeout` next.
//!
//! The driver drains events before transmitting, so a response never
//! overtakes the work it depends on.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

use crate::dataout::{DataOutError, DataOutProgress, WriteCollect};
use crate::negotiate::{Negotiator, Role, Stage};
use crate::params::{ConnParams, SessionParams};
use crate::window::{sn_le, sn_lt, Admission, CmdWindow};
use crate::OutPdu;
use ironlun_payload::DataOutBuffer;
use ironlun_scsi_codes::{SenseCode, Status};
use ironlun_wire::text::{encode_pairs, parse_pairs, TextAccumulator, TextChunker};
use ironlun_wire::{
    frame::{parse_ahs, AHS_TYPE_EXTENDED_CDB},
    AsyncEvent, AsyncMessage, Bhs, DataIn, DataOut, Frame, LogoutReason, LogoutRequest,
    LogoutResponse, LogoutResult, Lun, NopIn, NopOut, Payload, Pdu, R2t, Reject, Residual,
    ScsiCommand, ScsiResponse, ServiceResponse, TaskMgmtRequest, TaskMgmtResponse, TextRequest,
    TextResponse, TmfFunction, TmfResponse, WireError, RESERVED_TAG,
};
use login::LoginResult;

mod command;
pub mod login;
mod observer;
mod reject;
mod session;
mod text;
mod third_party;
pub mod tmf;

pub use observer::{DigestKind, Observer};
pub use reject::Violation;
use session::PendingLogout;
use text::TextExchange;
pub use text::{Directory, SendTargetsQuery, TargetListing};
pub use third_party::AbortMark;
use third_party::ThirdParty;
use tmf::PendingTmf;
pub use tmf::{AbortScope, TmfAction, TmfPlan, TmfRequest};

/// Limits and timers of a full feature phase connection.
#[derive(Clone, Debug)]
pub struct FfpConfig {
    /// Commands the session holds at once (the CmdSN window).
    pub queue_depth: u32,
    /// Immediate commands in flight beyond the window.
    pub max_immediate: u32,
    /// Largest Expected Data Transfer Length accepted for a write.
    pub max_write_transfer_length: u32,
    /// Bytes of solicited write data that may be requested and buffered at
    /// once, across the connection's tasks.
    pub solicit_budget: u64,
    /// Ping an idle initiator this often (None: never).
    pub nop_interval: Option<Duration>,
    /// Drop the connection if a ping stays unanswered this long.
    pub nop_timeout: Duration,
    /// Bound on text (SendTargets, negotiation) collected from the peer.
    pub text_limit: usize,
}

impl Default for FfpConfig {
    fn default() -> Self {
        FfpConfig {
            queue_depth: 128,
            max_immediate: 16,
            max_write_transfer_length: 8 << 20,
            solicit_budget: 64 << 20,
            nop_interval: Some(Duration::from_secs(30)),
            nop_timeout: Duration::from_secs(30),
            text_limit: 64 << 10,
        }
    }
}

/// A CDB as received: the 16 bytes of the BHS, or longer with an extended
/// CDB AHS (RFC 7143 §11.2.2.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cdb {
    bytes: [u8; 16],
    ext: Option<Box<[u8]>>,
}

impl Cdb {
    pub fn new(bytes: [u8; 16]) -> Self {
        Cdb { bytes, ext: None }
    }

    pub fn as_slice(&self) -> &[u8] {
        match &self.ext {
            Some(e) => e,
            None => &self.bytes,
        }
    }
}

/// A SCSI command ready to execute: its data, if any, is all here.
#[derive(Clone, Debug)]
pub struct ScsiTask {
    pub itt: u32,
    pub lun: Lun,
    pub cdb: Cdb,
    pub attr: u8,
    pub read: bool,
    pub write: bool,
    pub expected_data_transfer_length: u32,
    /// Write data: exactly the bytes the initiator sent (EDTL bytes), in
    /// the pieces its PDUs carried.
    pub data_out: DataOutBuffer,
}

/// What the device made of a task.
#[derive(Clone, Debug, Default)]
pub struct ScsiResult {
    /// SCSI status (SAM-5 §5.3.1).
    pub status: Status,
    /// Sense data for CHECK CONDITION, empty otherwise.
    pub sense: Bytes,
    /// Data for the initiator (Data-In); sent up to EDTL bytes.
    pub data_in: Payload,
    /// The command's own transfer length in bytes, read or write, against
    /// which residuals are computed (RFC 7143 §11.4.5).
    pub transfer_length: u32,
}

/// Why a connection ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The initiator logged out.
    LoggedOut,
    /// An ERL 0 protocol error: the connection (and so the session) ends.
    ProtocolError(String),
    /// A NOP-In ping went unanswered.
    NopTimeout,
    /// The initiator did not log out after the target asked it to.
    LogoutTimeout,
    /// A TARGET COLD RESET completed: the target closes every connection
    /// once the response is sent (RFC 7143 §11.6.1).
    TargetColdReset,
}

/// Work for the driver.
#[derive(Clone, Debug)]
pub enum Event {
    Execute(ScsiTask),
    /// The task's data transfer broke the protocol: answer it with CHECK
    /// CONDITION and this sense through [`TargetConnection::complete`].
    FailTask {
        itt: u32,
        lun: Lun,
        sense: SenseCode,
    },
    TaskManagement(TmfRequest),
    /// Send what `poll_transmit` returned, then close the connection.
    Close(CloseReason),
}

enum TaskState {
    Collecting(WriteCollect),
    Executing,
}

struct Task {
    /// When its SCSI Command PDU was handed in. (Its LUN is `cmd.lun`,
    /// not a field of its own, and `reserved` is a u32: that keeps the
    /// task table's entries at 256 bytes, and larger ones take glibc's
    /// longer memcpy loop on every move, +46 instructions per command
    /// under callgrind.)
    arrived: Instant,
    cmd: ScsiCommand,
    cdb: Cdb,
    /// Holds a slot of the command window (non-immediate).
    windowed: bool,
    aborted: bool,
    /// Aborted by another I_T nexus with TAS=1: it ends with TASK ABORTED
    /// status rather than silently (SAM-5 §5.6, SPC-5 §7.5.8).
    answer_aborted: bool,
    /// Solicited bytes reserved from the budget (at most the task's
    /// Expected Data Transfer Length; u32 keeps the task small, see
    /// `arrived`).
    reserved: u32,
    state: TaskState,
}

/// Counters for the daemon's statistics.
#[derive(Clone, Debug, Default)]
pub struct ConnStats {
    pub commands: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub rejects: u64,
    pub ignored_cmd_sn: u64,
    pub data_out_errors: u64,
}

/// One target connection in full feature phase.
pub struct TargetConnection {
    cfg: FfpConfig,
    session: SessionParams,
    conn: ConnParams,
    discovery: bool,
    cid: u16,
    initiator_name: String,
    target_name: Option<String>,
    directory: Box<dyn Directory>,
    stat_sn: u32,
    window: CmdWindow,
    /// Commands received ahead of ExpCmdSN, waiting for the gap to fill.
    ahead: Vec<(u32, Frame)>,
    immediate_in_flight: u32,
    tasks: HashMap<u32, Task>,
    next_ttt: u32,
    /// Solicited bytes reserved by tasks, against `cfg.solicit_budget`.
    reserved: u64,
    /// Write tasks waiting for budget before their first R2T, FIFO.
    solicit_queue: VecDeque<u32>,
    text_rx: TextAccumulator,
    text_tx: Option<TextExchange>,
    tmfs: Vec<PendingTmf>,
    /// Tasks other nexuses aborted, one record per abort, until they are
    /// gone and their TASK ABORTED statuses acknowledged.
    third_party: Vec<ThirdParty>,
    next_mark: u64,
    /// The initiator's ExpStatSN: statuses before it have arrived
    /// (RFC 7143 §4.2.2.2).
    exp_stat_sn: u32,
    /// TTT of the NOP-In asking the initiator to acknowledge TASK ABORTED
    /// statuses, while it is unanswered.
    solicit: Option<u32>,
    logout: Option<PendingLogout>,
    closing: bool,
    out: VecDeque<OutPdu>,
    events: VecDeque<Event>,
    last_rx: Instant,
    ping: Option<(u32, Instant)>,
    logout_deadline: Option<Instant>,
    pub stats: ConnStats,
    /// Told of rare events as they happen (task management, aborts,
    /// digest errors, why the connection closes).
    observer: Option<Arc<dyn Observer>>,
}

impl TargetConnection {
    pub fn new(
        login: &LoginResult,
        cfg: FfpConfig,
        directory: Box<dyn Directory>,
        now: Instant,
    ) -> Self {
        TargetConnection {
            window: CmdWindow::new(login.exp_cmd_sn, cfg.queue_depth),
            text_rx: TextAccumulator::new(cfg.text_limit),
            cfg,
            session: login.session.clone(),
            conn: login.conn.clone(),
            discovery: login.discovery,
            cid: login.cid,
            initiator_name: login.initiator_name.clone(),
            target_name: login.target.as_ref().map(|t| t.name.clone()),
            directory,
            stat_sn: login.next_stat_sn,
            ahead: Vec::new(),
            immediate_in_flight: 0,
            tasks: HashMap::new(),
            next_ttt: 1,
            reserved: 0,
            solicit_queue: VecDeque::new(),
            text_tx: None,
            tmfs: Vec::new(),
            third_party: Vec::new(),
            next_mark: 0,
            exp_stat_sn: login.next_stat_sn,
            solicit: None,
            logout: None,
            closing: false,
            out: VecDeque::new(),
            events: VecDeque::new(),
            last_rx: now,
            ping: None,
            logout_deadline: None,
            stats: ConnStats::default(),
            observer: None,
        }
    }

    /// Tasks held by this connection (collecting data or executing).
    pub fn tasks_in_progress(&self) -> usize {
        self.tasks.len()
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<OutPdu> {
        self.out.pop_front()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When `handle_timeout` must next be called.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ping = match (self.ping, self.cfg.nop_interval) {
            (Some((_, deadline)), _) => Some(deadline),
            (None, Some(interval)) => self.last_rx.checked_add(interval),
            (None, None) => None,
        };
        match (ping, self.logout_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A frame could not be decoded cleanly.
    pub fn handle_frame_error(&mut self, err: &WireError) {
        match err {
            WireError::HeaderDigest { .. } => self.observe(|o| o.digest_error(DigestKind::Header)),
            WireError::DataDigest { .. } => self.observe(|o| o.digest_error(DigestKind::Data)),
            _ => {}
        }
        // A data digest error (RFC 7143 §7.8) or an oversized segment:
        // Reject the PDU, whose header is sound. At ERL 0 the command cannot
        // be recovered: the connection fails either way.
        let header = match err {
            WireError::DataDigest { bhs, .. } | WireError::DataSegmentTooLong { bhs, .. } => {
                Some(bhs)
            }
            _ => None,
        };
        if let (Some(bhs), Some(v)) = (header, Violation::of_wire(err)) {
            self.reject(bhs, v);
        }
        self.close(CloseReason::ProtocolError(err.to_string()));
    }

    /// Handles one received PDU.
    pub fn handle_frame(&mut self, frame: Frame, now: Instant) {
        if self.closing {
            return;
        }
        self.last_rx = now;
        // Any traffic shows the initiator is alive.
        self.ping = None;
        let pdu = match Pdu::decode(&frame.bhs) {
            Ok(p) => p,
            Err(e) => {
                let v = Violation::of_wire(&e).unwrap_or(Violation::InvalidField);
                self.reject(&frame.bhs, v);
                return;
            }
        };
        if let Some(sn) = pdu.exp_stat_sn() {
            self.note_exp_stat_sn(sn);
        }
        match pdu {
            Pdu::DataOut(d) => self.on_data_out(d, frame.data),
            Pdu::NopOut(n) if n.itt == RESERVED_TAG => self.on_nop_out_no_reply(&n),
            Pdu::ScsiCommand(_)
            | Pdu::NopOut(_)
            | Pdu::TaskMgmtRequest(_)
            | Pdu::TextRequest(_)
            | Pdu::LogoutRequest(_) => self.on_command(pdu, frame),
            Pdu::SnackRequest(_) => self.reject(&frame.bhs, Violation::Snack),
            // A Login Request, or target opcodes sent by an initiator.
            _ => self.reject(&frame.bhs, Violation::WrongOpcode),
        }
    }

    /// The initiator acknowledges statuses up to `sn` (exclusive); a value
    /// behind the last one or beyond what was sent is ignored.
    fn note_exp_stat_sn(&mut self, sn: u32) {
        if sn_lt(self.exp_stat_sn, sn) && sn_le(sn, self.stat_sn) {
            self.exp_stat_sn = sn;
        }
    }

    pub(super) fn next_stat_sn(&mut self) -> u32 {
        let s = self.stat_sn;
        self.stat_sn = self.stat_sn.wrapping_add(1);
        s
    }

    pub(super) fn alloc_ttt(&mut self) -> u32 {
        let t = self.next_ttt;
        self.next_ttt = next_tag(t);
        t
    }

    pub(super) fn reject_pdu(&mut self, pdu: &Pdu, v: Violation) {
        let bhs = pdu.encode();
        self.reject(&bhs, v);
    }

    /// Reject carries the offending header (RFC 7143 §11.17.2) and the
    /// reason [`Violation::reason`] gives. Reject advances StatSN like any
    /// status-bearing PDU.
    pub(super) fn reject(&mut self, bhs: &Bhs, v: Violation) {
        let reason = v.reason();
        self.stats.rejects = self.stats.rejects.saturating_add(1);
        let stat_sn = self.next_stat_sn();
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu {
            pdu: Pdu::Reject(Reject {
                reason,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
                data_sn_or_r2t_sn: 0,
            }),
            data: Bytes::copy_from_slice(&bhs.0).into(),
        });
    }

    pub(super) fn close(&mut self, reason: CloseReason) {
        if !self.closing {
            self.observe(|o| o.closing(&reason));
            self.closing = true;
            self.events.push_back(Event::Close(reason));
        }
    }

    pub fn is_closing(&self) -> bool {
        self.closing
    }
}

/// Next target transfer tag, skipping the reserved value.
fn next_tag(t: u32) -> u32 {
    match t.wrapping_add(1) {
        RESERVED_TAG => 1,
        n => n,
    }
}

#[cfg(test)]
mod tests {
    /// A task table entry moves on every insert and removal: past 256
    /// bytes, glibc's memcpy takes its longer loop (callgrind counts the
    /// difference on every command).
    #[test]
    fn a_task_table_entry_fits_256_bytes() {
        assert!(std::mem::size_of::<(u32, super::Task)>() <= 256);
    }
}
