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
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

use crate::dataout::{DataOutError, DataOutProgress, WriteCollect};
use crate::login::LoginResult;
use crate::negotiate::{Negotiator, Role, Stage};
use crate::params::{ConnParams, SessionParams};
use crate::window::{sn_le, sn_lt, Admission, CmdWindow};
use crate::OutPdu;
use ironlun_payload::DataOutBuffer;
use ironlun_wire::text::{encode_pairs, parse_pairs, TextAccumulator, TextChunker};
use ironlun_wire::{
    frame::{parse_ahs, AHS_TYPE_EXTENDED_CDB},
    AsyncMessage, Bhs, DataIn, DataOut, Frame, LogoutRequest, LogoutResponse, Lun, NopIn, NopOut,
    Payload, Pdu, R2t, Reject, Residual, ScsiCommand, ScsiResponse, TaskMgmtRequest,
    TaskMgmtResponse, TextRequest, TextResponse, WireError, RESERVED_TAG,
};

/// Reject reasons (RFC 7143 §11.17.1).
pub mod reject_reason {
    pub const DATA_DIGEST_ERROR: u8 = 0x02;
    pub const SNACK_REJECT: u8 = 0x03;
    pub const PROTOCOL_ERROR: u8 = 0x04;
    pub const COMMAND_NOT_SUPPORTED: u8 = 0x05;
    pub const IMMEDIATE_COMMAND_REJECT: u8 = 0x06;
    pub const TASK_IN_PROGRESS: u8 = 0x07;
    pub const INVALID_PDU_FIELD: u8 = 0x09;
    pub const WAITING_FOR_LOGOUT: u8 = 0x0c;
}

/// Task management function codes (RFC 7143 §11.5.1).
pub mod tmf {
    pub const ABORT_TASK: u8 = 1;
    pub const ABORT_TASK_SET: u8 = 2;
    pub const CLEAR_ACA: u8 = 3;
    pub const CLEAR_TASK_SET: u8 = 4;
    pub const LOGICAL_UNIT_RESET: u8 = 5;
    pub const TARGET_WARM_RESET: u8 = 6;
    pub const TARGET_COLD_RESET: u8 = 7;
    pub const TASK_REASSIGN: u8 = 8;
    pub const QUERY_TASK: u8 = 9;
    pub const QUERY_TASK_SET: u8 = 10;
    pub const I_T_NEXUS_RESET: u8 = 11;
    pub const QUERY_ASYNC_EVENT: u8 = 12;

    // Responses (RFC 7143 §11.6.1).
    pub const FUNCTION_COMPLETE: u8 = 0;
    pub const TASK_DOES_NOT_EXIST: u8 = 1;
    pub const LUN_DOES_NOT_EXIST: u8 = 2;
    pub const TASK_STILL_ALLEGIANT: u8 = 3;
    pub const REASSIGNMENT_NOT_SUPPORTED: u8 = 4;
    pub const NOT_SUPPORTED: u8 = 5;
    pub const AUTHORIZATION_FAILED: u8 = 6;
    /// QUERY TASK / QUERY TASK SET found tasks (RFC 7144 §4.6, SAM-5
    /// FUNCTION SUCCEEDED).
    pub const FUNCTION_SUCCEEDED: u8 = 7;
    pub const REJECTED: u8 = 255;

    /// QUERY TASK / QUERY TASK SET: FUNCTION SUCCEEDED when the tasks
    /// exist (SAM-5 §7.8, §7.9).
    pub fn query_response(found: bool) -> u8 {
        if found {
            FUNCTION_SUCCEEDED
        } else {
            FUNCTION_COMPLETE
        }
    }
}

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

/// Which targets SendTargets reports (RFC 7143 Appendix C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendTargetsQuery<'a> {
    /// `SendTargets=All` in a discovery session.
    All,
    /// `SendTargets=<iSCSI name>`.
    Named(&'a str),
}

/// One target in a SendTargets answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetListing {
    pub name: String,
    /// `address:port,portal-group-tag` strings (RFC 7143 §13.8).
    pub addresses: Vec<String>,
}

/// What the connection asks of the daemon in full feature phase.
pub trait Directory: Send {
    /// Targets visible to `initiator` for the query.
    fn send_targets(&self, initiator: &str, query: SendTargetsQuery<'_>) -> Vec<TargetListing>;
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
    pub status: u8,
    /// Sense data for CHECK CONDITION, empty otherwise.
    pub sense: Bytes,
    /// Data for the initiator (Data-In); sent up to EDTL bytes.
    pub data_in: Payload,
    /// The command's own transfer length in bytes, read or write, against
    /// which residuals are computed (RFC 7143 §11.4.5).
    pub transfer_length: u32,
}

/// A task management request for the driver to decide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmfRequest {
    pub itt: u32,
    pub function: u8,
    pub lun: Lun,
    pub referenced_task_tag: u32,
}

/// What the device must do for a task management function, beyond
/// aborting this connection's tasks in `scope`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmfAction {
    Nothing,
    /// CLEAR TASK SET: other initiators' tasks on the LU end too (the task
    /// set is shared, TST=000b).
    ClearTaskSet,
    /// LOGICAL UNIT RESET of the addressed LU.
    ResetLu,
    /// TARGET WARM or COLD RESET of every LU; a cold reset also closes
    /// every other session (RFC 7143 §11.5.1).
    ResetTarget {
        cold: bool,
    },
    /// I_T NEXUS RESET on every LU.
    ResetNexus,
    /// QUERY TASK / QUERY TASK SET: the response is FUNCTION SUCCEEDED if
    /// live tasks fall in this scope ([`tmf::query_response`]).
    Query(AbortScope),
}

/// The decision on a task management request: response code, the
/// connection's tasks it aborts, and the device action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmfPlan {
    pub response: u8,
    pub scope: AbortScope,
    pub action: TmfAction,
}

impl TmfRequest {
    /// Decides the function (SAM-5 §7, RFC 7143 §11.5.1, RFC 7144 §4.6) at
    /// ERL 0; `lu_exists` says whether the addressed LUN has an LU.
    pub fn plan(&self, lu_exists: bool) -> TmfPlan {
        let plan = |response, scope, action| TmfPlan {
            response,
            scope,
            action,
        };
        let lun = AbortScope::Lun(self.lun);
        match (self.function, lu_exists) {
            (tmf::ABORT_TASK, _) => plan(
                tmf::FUNCTION_COMPLETE,
                AbortScope::Task(self.referenced_task_tag),
                TmfAction::Nothing,
            ),
            (tmf::ABORT_TASK_SET, true) => plan(tmf::FUNCTION_COMPLETE, lun, TmfAction::Nothing),
            (tmf::CLEAR_TASK_SET, true) => {
                plan(tmf::FUNCTION_COMPLETE, lun, TmfAction::ClearTaskSet)
            }
            (tmf::LOGICAL_UNIT_RESET, true) => {
                plan(tmf::FUNCTION_COMPLETE, lun, TmfAction::ResetLu)
            }
            (
                tmf::ABORT_TASK_SET
                | tmf::CLEAR_TASK_SET
                | tmf::LOGICAL_UNIT_RESET
                | tmf::QUERY_TASK
                | tmf::QUERY_TASK_SET,
                false,
            ) => plan(
                tmf::LUN_DOES_NOT_EXIST,
                AbortScope::None,
                TmfAction::Nothing,
            ),
            (tmf::TARGET_WARM_RESET | tmf::TARGET_COLD_RESET, _) => plan(
                tmf::FUNCTION_COMPLETE,
                AbortScope::All,
                TmfAction::ResetTarget {
                    cold: self.function == tmf::TARGET_COLD_RESET,
                },
            ),
            (tmf::I_T_NEXUS_RESET, _) => plan(
                tmf::FUNCTION_COMPLETE,
                AbortScope::All,
                TmfAction::ResetNexus,
            ),
            (tmf::QUERY_TASK, true) => plan(
                tmf::FUNCTION_COMPLETE,
                AbortScope::None,
                TmfAction::Query(AbortScope::Task(self.referenced_task_tag)),
            ),
            (tmf::QUERY_TASK_SET, true) => plan(
                tmf::FUNCTION_COMPLETE,
                AbortScope::None,
                TmfAction::Query(lun),
            ),
            // No task allegiance reassignment at ERL 0.
            (tmf::TASK_REASSIGN, _) => plan(
                tmf::REASSIGNMENT_NOT_SUPPORTED,
                AbortScope::None,
                TmfAction::Nothing,
            ),
            // CLEAR ACA (NACA is never accepted, so there is no ACA) and
            // QUERY ASYNCHRONOUS EVENT.
            _ => plan(tmf::NOT_SUPPORTED, AbortScope::None, TmfAction::Nothing),
        }
    }
}

/// A set of this connection's tasks: the ones a TMF aborts or queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbortScope {
    None,
    Task(u32),
    Lun(Lun),
    All,
}

impl AbortScope {
    fn covers(self, tag: u32, task: &Task) -> bool {
        match self {
            AbortScope::None => false,
            AbortScope::Task(rtt) => tag == rtt,
            // The same LU however the initiator addressed it.
            AbortScope::Lun(lun) => lun.index().is_some() && task.lun.index() == lun.index(),
            AbortScope::All => true,
        }
    }
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
    /// CONDITION and this sense (key, ASC, ASCQ) through
    /// [`TargetConnection::complete`].
    FailTask {
        itt: u32,
        lun: Lun,
        sense: (u8, u8, u8),
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
    lun: Lun,
    cmd: ScsiCommand,
    cdb: Cdb,
    /// Holds a slot of the command window (non-immediate).
    windowed: bool,
    aborted: bool,
    /// Solicited bytes reserved from the budget.
    reserved: u64,
    state: TaskState,
}

struct PendingTmf {
    itt: u32,
    function: u8,
    response: u8,
    windowed: bool,
    /// The driver has decided the response.
    decided: bool,
}

struct PendingLogout {
    itt: u32,
    windowed: bool,
    response: u8,
}

struct TextExchange {
    itt: u32,
    ttt: u32,
    out: TextChunker,
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
    logout: Option<PendingLogout>,
    closing: bool,
    out: VecDeque<OutPdu>,
    events: VecDeque<Event>,
    last_rx: Instant,
    ping: Option<(u32, Instant)>,
    logout_deadline: Option<Instant>,
    pub stats: ConnStats,
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
            logout: None,
            closing: false,
            out: VecDeque::new(),
            events: VecDeque::new(),
            last_rx: now,
            ping: None,
            logout_deadline: None,
            stats: ConnStats::default(),
        }
    }

    /// Tasks held by this connection (collecting data or executing).
    pub fn tasks_in_progress(&self) -> usize {
        self.tasks.len()
    }

    pub fn poll_transmit(&mut self) -> Option<OutPdu> {
        self.out.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ping = match (self.ping, self.cfg.nop_interval) {
            (Some((_, deadline)), _) => Some(deadline),
            (None, Some(interval)) => Some(self.last_rx + interval),
            (None, None) => None,
        };
        match (ping, self.logout_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closing {
            return;
        }
        if let Some(deadline) = self.logout_deadline {
            if now >= deadline {
                self.close(CloseReason::LogoutTimeout);
                return;
            }
        }
        match self.ping {
            Some((_, deadline)) if now >= deadline => self.close(CloseReason::NopTimeout),
            Some(_) => {}
            None => {
                if let Some(interval) = self.cfg.nop_interval {
                    if now >= self.last_rx + interval {
                        self.send_ping(now);
                    }
                }
            }
        }
    }

    fn send_ping(&mut self, now: Instant) {
        let ttt = self.alloc_ttt();
        // A target ping: ITT reserved, TTT valid, StatSN not advanced
        // (RFC 7143 §11.19.2).
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu::new(Pdu::NopIn(NopIn {
            lun: Lun::default(),
            itt: RESERVED_TAG,
            ttt,
            stat_sn: self.stat_sn,
            exp_cmd_sn: self.window.exp_cmd_sn(),
            max_cmd_sn: max,
        })));
        self.ping = Some((ttt, now + self.cfg.nop_timeout));
    }

    /// Asks the initiator to log out within `wait` (RFC 7143 §11.9.1,
    /// AsyncEvent 1); the connection closes if it does not.
    pub fn request_logout(&mut self, now: Instant, wait: Duration) {
        if self.closing || self.logout.is_some() {
            return;
        }
        let secs = u16::try_from(wait.as_secs()).unwrap_or(u16::MAX);
        let stat_sn = self.next_stat_sn();
        let max = self.window.max_cmd_sn();
        self.out
            .push_back(OutPdu::new(Pdu::AsyncMessage(AsyncMessage {
                lun: Lun::default(),
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
                async_event: 1,
                async_vcode: 0,
                parameter1: 0,
                parameter2: 0,
                parameter3: secs,
            })));
        // Give the initiator the time it was told, plus a little to answer.
        self.logout_deadline = Some(now + wait + Duration::from_secs(2));
    }

    /// A frame could not be decoded cleanly.
    pub fn handle_frame_error(&mut self, err: &WireError) {
        match err {
            WireError::DataDigest { bhs, .. } => {
                // RFC 7143 §7.8: discard the PDU, Reject it. At ERL 0 the
                // command cannot be recovered: fail the connection too.
                self.reject(bhs, reject_reason::DATA_DIGEST_ERROR);
                self.close(CloseReason::ProtocolError(err.to_string()));
            }
            WireError::DataSegmentTooLong { bhs, .. } => {
                self.reject(bhs, reject_reason::PROTOCOL_ERROR);
                self.close(CloseReason::ProtocolError(err.to_string()));
            }
            other => self.close(CloseReason::ProtocolError(other.to_string())),
        }
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
            Err(WireError::UnknownOpcode(_)) => {
                self.reject(&frame.bhs, reject_reason::COMMAND_NOT_SUPPORTED);
                return;
            }
            Err(_) => {
                self.reject(&frame.bhs, reject_reason::INVALID_PDU_FIELD);
                return;
            }
        };
        match pdu {
            Pdu::DataOut(d) => self.on_data_out(d, frame.data),
            Pdu::NopOut(n) if n.itt == RESERVED_TAG => self.on_nop_out_no_reply(&n),
            Pdu::ScsiCommand(_)
            | Pdu::NopOut(_)
            | Pdu::TaskMgmtRequest(_)
            | Pdu::TextRequest(_)
            | Pdu::LogoutRequest(_) => self.on_command(pdu, frame),
            Pdu::SnackRequest(_) => {
                // No SNACK at ERL 0 (RFC 7143 §11.16).
                self.reject(&frame.bhs, reject_reason::PROTOCOL_ERROR)
            }
            Pdu::LoginRequest(_) => self.reject(&frame.bhs, reject_reason::PROTOCOL_ERROR),
            // Target opcodes sent by an initiator.
            _ => self.reject(&frame.bhs, reject_reason::PROTOCOL_ERROR),
        }
    }

    /// Command-class PDUs pass the CmdSN window (RFC 7143 §4.2.2.1).
    fn on_command(&mut self, pdu: Pdu, frame: Frame) {
        let (immediate, cmd_sn) = match &pdu {
            Pdu::ScsiCommand(c) => (c.immediate, c.cmd_sn),
            Pdu::NopOut(n) => (n.immediate, n.cmd_sn),
            Pdu::TaskMgmtRequest(t) => (t.immediate, t.cmd_sn),
            Pdu::TextRequest(t) => (t.immediate, t.cmd_sn),
            Pdu::LogoutRequest(l) => (l.immediate, l.cmd_sn),
            _ => return,
        };
        if self.logout.is_some() && !matches!(pdu, Pdu::LogoutRequest(_)) {
            self.reject(&frame.bhs, reject_reason::WAITING_FOR_LOGOUT);
            return;
        }
        if immediate {
            if self.immediate_in_flight >= self.cfg.max_immediate {
                self.reject(&frame.bhs, reject_reason::IMMEDIATE_COMMAND_REJECT);
                return;
            }
            self.dispatch(pdu, frame, false);
            return;
        }
        match self.window.classify(cmd_sn) {
            Admission::InOrder => {
                self.window.accept_in_order();
                self.dispatch(pdu, frame, true);
                self.drain_ahead();
            }
            Admission::Ahead => {
                if self.ahead.iter().any(|(sn, _)| *sn == cmd_sn) {
                    self.stats.ignored_cmd_sn += 1;
                } else {
                    self.ahead.push((cmd_sn, frame));
                }
            }
            Admission::Outside => {
                // Silently ignored (RFC 7143 §4.2.2.1); the initiator will
                // time out the command.
                self.stats.ignored_cmd_sn += 1;
            }
        }
    }

    fn drain_ahead(&mut self) {
        loop {
            let exp = self.window.exp_cmd_sn();
            let Some(pos) = self.ahead.iter().position(|(sn, _)| *sn == exp) else {
                // Commands the window moved past can never be delivered.
                self.ahead.retain(|(sn, _)| sn_lt(exp, *sn));
                return;
            };
            let (_, frame) = self.ahead.swap_remove(pos);
            let Ok(pdu) = Pdu::decode(&frame.bhs) else {
                continue;
            };
            self.window.accept_in_order();
            self.dispatch(pdu, frame, true);
        }
    }

    fn dispatch(&mut self, pdu: Pdu, frame: Frame, windowed: bool) {
        if !windowed {
            self.immediate_in_flight += 1;
        }
        match pdu {
            Pdu::ScsiCommand(c) => self.on_scsi_command(c, frame, windowed),
            Pdu::NopOut(n) => self.on_nop_out(n, frame.data, windowed),
            Pdu::TaskMgmtRequest(t) => self.on_tmf(t, windowed),
            Pdu::TextRequest(t) => self.on_text(t, frame.data, windowed),
            Pdu::LogoutRequest(l) => self.on_logout(l, windowed),
            _ => self.finish_command(windowed),
        }
    }

    /// A command-class PDU has been answered: free its window slot or its
    /// immediate slot.
    fn finish_command(&mut self, windowed: bool) {
        if windowed {
            self.window.release();
        } else {
            self.immediate_in_flight = self.immediate_in_flight.saturating_sub(1);
        }
    }

    fn on_scsi_command(&mut self, c: ScsiCommand, frame: Frame, windowed: bool) {
        self.stats.commands += 1;
        if self.discovery {
            // Discovery sessions carry no SCSI commands (RFC 7143 §4.3).
            self.reject(&frame.bhs, reject_reason::PROTOCOL_ERROR);
            self.finish_command(windowed);
            return;
        }
        if self.tasks.contains_key(&c.itt) || c.itt == RESERVED_TAG {
            self.reject(&frame.bhs, reject_reason::TASK_IN_PROGRESS);
            self.finish_command(windowed);
            return;
        }
        let cdb = match self.cdb_of(&c, &frame) {
            Ok(cdb) => cdb,
            Err(reason) => {
                self.reject(&frame.bhs, reason);
                self.finish_command(windowed);
                return;
            }
        };
        let edtl = c.expected_data_transfer_length;
        let imm_len = frame.data.len() as u64;
        // Checks on the data that came with the command (RFC 7143 §11.3.4,
        // §13.11, §13.14).
        let bad_data = if c.read && c.write {
            // Bidirectional commands are not supported.
            Some(reject_reason::COMMAND_NOT_SUPPORTED)
        } else if imm_len > 0
            && (!c.write
                || !self.session.immediate_data
                || imm_len > u64::from(edtl)
                || imm_len > u64::from(self.session.first_burst_length))
        {
            Some(reject_reason::PROTOCOL_ERROR)
        } else {
            None
        };
        if let Some(reason) = bad_data {
            self.reject(&frame.bhs, reason);
            self.finish_command(windowed);
            return;
        }

        let task = Task {
            lun: c.lun,
            cdb,
            windowed,
            aborted: false,
            reserved: 0,
            state: TaskState::Executing,
            cmd: c,
        };
        let itt = task.cmd.itt;
        if task.cmd.write && edtl > 0 {
            if edtl > self.cfg.max_write_transfer_length {
                // Too large to buffer: execute with no data; the device
                // answers that the transfer cannot be done.
                self.tasks.insert(itt, task);
                self.execute(itt, DataOutBuffer::new());
                return;
            }
            let collect = WriteCollect::new(
                edtl,
                frame.data,
                self.session.unsolicited_limit(edtl),
                self.session.initial_r2t,
            );
            if collect.is_complete() {
                let data = collect.into_data();
                self.tasks.insert(itt, task);
                self.execute(itt, data);
                return;
            }
            let mut task = task;
            task.state = TaskState::Collecting(collect);
            self.tasks.insert(itt, task);
            self.solicit_queue.push_back(itt);
            self.pump_r2ts();
        } else {
            self.tasks.insert(itt, task);
            self.execute(itt, DataOutBuffer::new());
        }
    }

    /// The CDB, extended by an Extended CDB AHS when present.
    fn cdb_of(&self, c: &ScsiCommand, frame: &Frame) -> Result<Cdb, u8> {
        let mut cdb = Cdb::new(c.cdb);
        if frame.ahs.is_empty() {
            return Ok(cdb);
        }
        let segments = parse_ahs(&frame.ahs).map_err(|_| reject_reason::INVALID_PDU_FIELD)?;
        for s in segments {
            if s.ahs_type == AHS_TYPE_EXTENDED_CDB {
                // The AHS holds the CDB bytes beyond the first 16, after one
                // reserved byte (RFC 7143 §11.2.2.3).
                let extra = s.data.get(1..).unwrap_or(&[]);
                if extra.len() > 244 {
                    return Err(reject_reason::INVALID_PDU_FIELD);
                }
                let mut full = c.cdb.to_vec();
                full.extend_from_slice(extra);
                cdb.ext = Some(full.into_boxed_slice());
            }
        }
        Ok(cdb)
    }

    fn execute(&mut self, itt: u32, data: DataOutBuffer) {
        let Some(task) = self.tasks.get_mut(&itt) else {
            return;
        };
        task.state = TaskState::Executing;
        self.stats.write_bytes += data.len() as u64;
        self.events.push_back(Event::Execute(ScsiTask {
            itt,
            lun: task.lun,
            cdb: task.cdb.clone(),
            attr: task.cmd.attr,
            read: task.cmd.read,
            write: task.cmd.write,
            expected_data_transfer_length: task.cmd.expected_data_transfer_length,
            data_out: data,
        }));
    }

    /// Sends R2Ts for collecting tasks in arrival order, within the
    /// solicited-data budget and MaxOutstandingR2T.
    fn pump_r2ts(&mut self) {
        let max_outstanding = usize::from(self.session.max_outstanding_r2t);
        let max_burst = self.session.max_burst_length;
        let mut i = 0;
        while let Some(&itt) = self.solicit_queue.get(i) {
            let ttt = self.next_ttt;
            let reserved_now = self.reserved;
            let budget = self.cfg.solicit_budget;
            let Some(task) = self.tasks.get_mut(&itt) else {
                self.solicit_queue.remove(i);
                continue;
            };
            let TaskState::Collecting(collect) = &mut task.state else {
                self.solicit_queue.remove(i);
                continue;
            };
            if task.reserved == 0 {
                let need = u64::from(collect.bytes_to_request());
                if need == 0 {
                    // Only unsolicited data is still to come.
                    self.solicit_queue.remove(i);
                    continue;
                }
                // Reserve the whole solicited part at once so tasks cannot
                // starve each other; an oversize task runs alone.
                if reserved_now > 0 && reserved_now + need > budget {
                    break;
                }
                task.reserved = need;
                self.reserved += need;
            }
            let lun = task.lun;
            let mut sent = Vec::new();
            let mut t = ttt;
            while let Some(r) = collect.next_r2t(max_outstanding, max_burst, t) {
                sent.push(r);
                t = next_tag(t);
            }
            let done_requesting = collect.bytes_to_request() == 0;
            self.next_ttt = t;
            for r in sent {
                let max = self.window.max_cmd_sn();
                self.out.push_back(OutPdu::new(Pdu::R2t(R2t {
                    lun,
                    itt,
                    ttt: r.ttt,
                    // R2T carries the next StatSN without using it
                    // (RFC 7143 §11.8.3).
                    stat_sn: self.stat_sn,
                    exp_cmd_sn: self.window.exp_cmd_sn(),
                    max_cmd_sn: max,
                    r2t_sn: r.r2t_sn,
                    buffer_offset: r.offset,
                    desired_data_transfer_length: r.len,
                })));
            }
            if done_requesting {
                self.solicit_queue.remove(i);
            } else {
                i += 1;
            }
        }
    }

    fn on_data_out(&mut self, d: DataOut, data: Bytes) {
        let Some(task) = self.tasks.get_mut(&d.itt) else {
            // Data for a task that was rejected, aborted or never existed:
            // discard it (RFC 7143 §11.7, an ITT we do not know).
            return;
        };
        let TaskState::Collecting(collect) = &mut task.state else {
            // The task is already executing (for instance a write refused
            // without collecting its data): late data is discarded.
            return;
        };
        match collect.accept(d.ttt, d.data_sn, d.buffer_offset, d.final_bit, data) {
            Ok(DataOutProgress::More) => {}
            Ok(DataOutProgress::SequenceDone) => self.pump_r2ts(),
            Ok(DataOutProgress::Complete) => {
                let reserved = task.reserved;
                let state = std::mem::replace(&mut task.state, TaskState::Executing);
                self.reserved = self.reserved.saturating_sub(reserved);
                if let Some(t) = self.tasks.get_mut(&d.itt) {
                    t.reserved = 0;
                }
                if let TaskState::Collecting(c) = state {
                    self.execute(d.itt, c.into_data());
                }
                self.pump_r2ts();
            }
            Err(e) => self.data_out_error(d.itt, e),
        }
    }

    /// A Data-Out sequencing error ends the task, not the connection: it
    /// is answered with CHECK CONDITION (RFC 7143 §11.4.7.2) and any data
    /// still arriving for it is discarded. Other sessions and the rest of
    /// this one are unaffected.
    fn data_out_error(&mut self, itt: u32, e: DataOutError) {
        self.stats.data_out_errors += 1;
        let Some(task) = self.tasks.get_mut(&itt) else {
            return;
        };
        task.state = TaskState::Executing;
        let reserved = std::mem::take(&mut task.reserved);
        let lun = task.lun;
        self.reserved = self.reserved.saturating_sub(reserved);
        self.solicit_queue.retain(|t| *t != itt);
        self.events.push_back(Event::FailTask {
            itt,
            lun,
            sense: e.sense(),
        });
        self.pump_r2ts();
    }

    /// The driver finished executing a task.
    pub fn complete(&mut self, itt: u32, result: ScsiResult) {
        let Some(task) = self.tasks.remove(&itt) else {
            return;
        };
        self.release_task_resources(&task);
        if task.aborted {
            self.finish_command(task.windowed);
            self.check_pending_tmfs();
            self.check_logout();
            return;
        }
        // Free the window slot first, so the response already advertises
        // it in MaxCmdSN.
        self.finish_command(task.windowed);
        if !self.closing {
            self.respond(&task, result);
        }
        self.check_logout();
    }

    fn release_task_resources(&mut self, task: &Task) {
        self.reserved = self.reserved.saturating_sub(task.reserved);
    }

    /// Data-In PDUs and status for a completed command
    /// (RFC 7143 §11.4, §11.7).
    fn respond(&mut self, task: &Task, r: ScsiResult) {
        let itt = task.cmd.itt;
        let edtl = task.cmd.expected_data_transfer_length;
        let residual = Residual::of(edtl, r.transfer_length);
        let mut data = r.data_in;
        if data.len() > edtl as usize {
            data.truncate(edtl as usize);
        }
        if !task.cmd.read {
            data.clear();
        }
        self.stats.read_bytes += data.len() as u64;
        let good = r.status == 0 && r.sense.is_empty();
        let mut data_sn = 0u32;
        if !data.is_empty() {
            let seg = self.conn.max_xmit_data_segment_length.max(512) as usize;
            let burst = self.session.max_burst_length.max(512) as usize;
            let total = data.len();
            let mut off = 0usize;
            while off < total {
                let burst_end = ((off / burst) + 1) * burst;
                let n = seg.min(total - off).min(burst_end - off);
                let chunk = data.slice(off..off + n);
                off += n;
                let last = off == total;
                // F ends each Data-In sequence, bounded by MaxBurstLength
                // (RFC 7143 §13.13); S carries the status on the last PDU
                // when it is GOOD (phase collapse, RFC 7143 §11.7.4).
                let end_of_burst = last || off == burst_end;
                let collapse = last && good;
                let (stat_sn, residual_field) = if collapse {
                    (self.next_stat_sn(), residual)
                } else {
                    (0, Residual::None)
                };
                let max = self.window.max_cmd_sn();
                self.out.push_back(OutPdu {
                    pdu: Pdu::DataIn(DataIn {
                        final_bit: end_of_burst,
                        ack: false,
                        residual: residual_field,
                        status: collapse.then_some(r.status),
                        lun: task.lun,
                        itt,
                        ttt: RESERVED_TAG,
                        stat_sn,
                        exp_cmd_sn: self.window.exp_cmd_sn(),
                        max_cmd_sn: max,
                        data_sn,
                        buffer_offset: (off - n) as u32,
                    }),
                    data: chunk,
                });
                data_sn = data_sn.wrapping_add(1);
            }
            if good {
                return;
            }
        }
        // A separate SCSI Response: sense data travels in its data segment
        // behind a 2-byte SenseLength (RFC 7143 §11.4.7).
        let payload = if r.sense.is_empty() {
            Bytes::new()
        } else {
            let mut b = BytesMut::with_capacity(2 + r.sense.len());
            b.put_u16(r.sense.len() as u16);
            b.extend_from_slice(&r.sense);
            b.freeze()
        };
        let stat_sn = self.next_stat_sn();
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu {
            pdu: Pdu::ScsiResponse(ScsiResponse {
                bidi_residual: Residual::None,
                residual,
                response: 0,
                status: r.status,
                itt,
                snack_tag: 0,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
                exp_data_sn: data_sn,
            }),
            data: payload.into(),
        });
    }

    fn on_nop_out_no_reply(&mut self, n: &NopOut) {
        // ITT 0xffffffff: either the answer to our ping (TTT echoes it) or
        // an initiator ping that wants no reply (RFC 7143 §11.18.2).
        if let Some((ttt, _)) = self.ping {
            if ttt == n.ttt {
                self.ping = None;
            }
        }
    }

    fn on_nop_out(&mut self, n: NopOut, data: Bytes, windowed: bool) {
        if n.ttt != RESERVED_TAG {
            // A NOP-Out with a valid ITT must not carry a TTT.
            self.reject_pdu(&Pdu::NopOut(n), reject_reason::PROTOCOL_ERROR);
            self.finish_command(windowed);
            return;
        }
        let mut echo = data;
        echo.truncate(self.conn.max_xmit_data_segment_length as usize);
        let stat_sn = self.next_stat_sn();
        self.finish_command(windowed);
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu {
            pdu: Pdu::NopIn(NopIn {
                lun: n.lun,
                itt: n.itt,
                ttt: RESERVED_TAG,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
            }),
            data: echo.into(),
        });
    }

    fn on_text(&mut self, t: TextRequest, data: Bytes, windowed: bool) {
        if t.ttt != RESERVED_TAG {
            // A continuation of an exchange we hold a TTT for (RFC 7143
            // §11.10.4): either more initiator text, or a request for the
            // next piece of our long answer.
            let matches = self
                .text_tx
                .as_ref()
                .is_some_and(|x| x.ttt == t.ttt && x.itt == t.itt);
            if !matches {
                self.reject_pdu(&Pdu::TextRequest(t), reject_reason::PROTOCOL_ERROR);
                self.finish_command(windowed);
                return;
            }
            if !self.text_rx.in_progress() {
                self.send_text_chunk(t, windowed);
                return;
            }
        } else {
            // A new exchange replaces any unfinished one.
            self.text_rx.reset();
        }
        self.text_tx = None;
        let text = match self.text_rx.push(&data, t.cont) {
            Ok(Some(text)) => text,
            Ok(None) => {
                // The initiator continues: acknowledge with an empty answer.
                let ttt = self.alloc_ttt();
                self.text_tx = Some(TextExchange {
                    itt: t.itt,
                    ttt,
                    out: TextChunker::default(),
                });
                self.text_response(&t, ttt, false, false, Bytes::new(), windowed);
                return;
            }
            Err(_) => {
                self.reject_pdu(&Pdu::TextRequest(t), reject_reason::PROTOCOL_ERROR);
                self.finish_command(windowed);
                return;
            }
        };
        let pairs = match parse_pairs(&text) {
            Ok(p) => p,
            Err(_) => {
                self.reject_pdu(&Pdu::TextRequest(t), reject_reason::PROTOCOL_ERROR);
                self.finish_command(windowed);
                return;
            }
        };
        let answer = self.answer_text(&pairs);
        self.text_tx = Some(TextExchange {
            itt: t.itt,
            ttt: RESERVED_TAG,
            out: TextChunker::new(answer),
        });
        self.send_text_chunk(t, windowed);
    }

    /// Answers a full-feature text request: SendTargets (RFC 7143 §13.3,
    /// Appendix C) and renegotiation of keys allowed in full feature phase.
    fn answer_text(&mut self, pairs: &[(String, String)]) -> Vec<u8> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut others = Vec::new();
        for (k, v) in pairs {
            if k == "SendTargets" {
                let listings = match (v.as_str(), self.discovery) {
                    ("All", true) => self
                        .directory
                        .send_targets(&self.initiator_name, SendTargetsQuery::All),
                    // In a normal session "All" and the empty value report
                    // the session's own target.
                    ("All", false) | ("", false) => match &self.target_name {
                        Some(n) => self
                            .directory
                            .send_targets(&self.initiator_name, SendTargetsQuery::Named(n)),
                        None => Vec::new(),
                    },
                    ("", true) => {
                        out.push((k.clone(), "Reject".into()));
                        continue;
                    }
                    (name, discovery) => {
                        let allowed = discovery || self.target_name.as_deref() == Some(name);
                        if allowed {
                            self.directory
                                .send_targets(&self.initiator_name, SendTargetsQuery::Named(name))
                        } else {
                            Vec::new()
                        }
                    }
                };
                for l in listings {
                    out.push(("TargetName".into(), l.name));
                    for a in l.addresses {
                        out.push(("TargetAddress".into(), a));
                    }
                }
            } else {
                others.push((k.clone(), v.clone()));
            }
        }
        if !others.is_empty() {
            let mut neg = Negotiator::new(Role::Target);
            neg.set_discovery(self.discovery);
            neg.set_ours(
                crate::keys::KeyId::MAX_RECV_DATA_SEGMENT_LENGTH,
                crate::keys::Value::Number(u64::from(self.conn.max_recv_data_segment_length)),
            );
            match neg.respond(&others, Stage::FullFeature) {
                Ok(answers) => {
                    if neg.peer_offered(crate::keys::KeyId::MAX_RECV_DATA_SEGMENT_LENGTH) {
                        self.conn.max_xmit_data_segment_length =
                            neg.conn_params().max_xmit_data_segment_length;
                    }
                    out.extend(answers);
                }
                Err(_) => out.extend(others.into_iter().map(|(k, _)| (k, "Reject".into()))),
            }
        }
        encode_pairs(out.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }

    fn send_text_chunk(&mut self, t: TextRequest, windowed: bool) {
        let seg = self.conn.max_xmit_data_segment_length as usize;
        let Some(mut x) = self.text_tx.take() else {
            self.finish_command(windowed);
            return;
        };
        let (chunk, more) = x.out.next_chunk(seg);
        if more {
            // Long answer: C=1, F=0 and a TTT the initiator echoes to get
            // the rest (RFC 7143 §11.11.2).
            if x.ttt == RESERVED_TAG {
                x.ttt = self.alloc_ttt();
            }
            let ttt = x.ttt;
            self.text_tx = Some(x);
            self.text_response(&t, ttt, false, true, chunk, windowed);
        } else {
            self.text_response(&t, RESERVED_TAG, true, false, chunk, windowed);
        }
    }

    fn text_response(
        &mut self,
        t: &TextRequest,
        ttt: u32,
        final_bit: bool,
        cont: bool,
        data: Bytes,
        windowed: bool,
    ) {
        let stat_sn = self.next_stat_sn();
        self.finish_command(windowed);
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu {
            pdu: Pdu::TextResponse(TextResponse {
                final_bit,
                cont,
                lun: t.lun,
                itt: t.itt,
                ttt,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
            }),
            data: data.into(),
        });
    }

    fn on_logout(&mut self, l: LogoutRequest, windowed: bool) {
        // Reasons (RFC 7143 §11.14.1): 0 close the session, 1 close the
        // connection, 2 remove it for recovery (needs ERL 2).
        let response = match l.reason {
            0 => 0,
            // Close a connection: with one connection per session only our
            // own CID exists (response 1: CID not found).
            1 if l.cid == self.cid => 0,
            1 => 1,
            // Connection recovery needs ERL 2 (response 2: not supported).
            2 => 2,
            _ => {
                self.reject_pdu(&Pdu::LogoutRequest(l), reject_reason::INVALID_PDU_FIELD);
                self.finish_command(windowed);
                return;
            }
        };
        self.logout = Some(PendingLogout {
            itt: l.itt,
            windowed,
            response,
        });
        if response != 0 {
            self.check_logout();
            return;
        }
        // Tasks still waiting for data will never get it: abort them.
        let waiting: Vec<u32> = self
            .tasks
            .iter()
            .filter(|(_, t)| matches!(t.state, TaskState::Collecting(_)))
            .map(|(itt, _)| *itt)
            .collect();
        for itt in waiting {
            self.abort_task(itt);
        }
        self.check_logout();
    }

    fn check_logout(&mut self) {
        let Some(l) = self.logout.take() else {
            return;
        };
        if l.response == 0 && !self.tasks.is_empty() {
            // Answer once the executing tasks are done.
            self.logout = Some(l);
            return;
        }
        let stat_sn = self.next_stat_sn();
        self.finish_command(l.windowed);
        let max = self.window.max_cmd_sn();
        self.out
            .push_back(OutPdu::new(Pdu::LogoutResponse(LogoutResponse {
                response: l.response,
                itt: l.itt,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
                // ERL 0 keeps no task state for reconnection.
                time2wait: 0,
                time2retain: 0,
            })));
        if l.response == 0 {
            self.close(CloseReason::LoggedOut);
        }
    }

    fn on_tmf(&mut self, t: TaskMgmtRequest, windowed: bool) {
        self.tmfs.push(PendingTmf {
            itt: t.itt,
            function: t.function,
            response: tmf::FUNCTION_COMPLETE,
            windowed,
            decided: false,
        });
        if t.function == tmf::ABORT_TASK && !self.tasks.contains_key(&t.referenced_task_tag) {
            // RFC 7143 §11.5.1: a task not found whose RefCmdSN lies in the
            // window is considered received and aborted (function
            // complete); otherwise it does not exist.
            let in_window = sn_le(self.window.exp_cmd_sn(), t.ref_cmd_sn)
                && sn_lt(t.ref_cmd_sn, t.cmd_sn.wrapping_add(1));
            let response = if in_window {
                tmf::FUNCTION_COMPLETE
            } else {
                tmf::TASK_DOES_NOT_EXIST
            };
            self.finish_tmf(t.itt, response, AbortScope::None);
            return;
        }
        self.events.push_back(Event::TaskManagement(TmfRequest {
            itt: t.itt,
            function: t.function,
            lun: t.lun,
            referenced_task_tag: t.referenced_task_tag,
        }));
    }

    /// The driver's decision on a TMF: the response code and which of this
    /// connection's tasks it aborts. The response goes out once the aborted
    /// tasks that are executing have finished (RFC 7143 §4.2.3.3).
    pub fn finish_tmf(&mut self, itt: u32, response: u8, scope: AbortScope) {
        let Some(p) = self.tmfs.iter_mut().find(|p| p.itt == itt) else {
            return;
        };
        p.response = response;
        p.decided = true;
        if response == tmf::FUNCTION_COMPLETE {
            let victims: Vec<u32> = self
                .tasks
                .iter()
                .filter(|(tag, t)| scope.covers(**tag, t))
                .map(|(tag, _)| *tag)
                .collect();
            for v in victims {
                self.abort_task(v);
            }
        }
        self.check_pending_tmfs();
    }

    /// Whether live (not aborted) tasks fall in `scope`: QUERY TASK and
    /// QUERY TASK SET (SAM-5 §7.8, §7.9).
    pub fn has_tasks(&self, scope: AbortScope) -> bool {
        self.tasks
            .iter()
            .any(|(tag, t)| !t.aborted && scope.covers(*tag, t))
    }

    /// Aborts tasks because of another I_T nexus's action (a LOGICAL UNIT
    /// RESET, CLEAR TASK SET or PREEMPT AND ABORT from another session).
    /// With TAS=0 in the Control mode page they end without a response
    /// (SAM-5 §5.6; RFC 7143 §4.2.3.3); data still arriving for them is
    /// discarded. Returns how many were aborted.
    pub fn abort_third_party(&mut self, scope: AbortScope) -> usize {
        let victims: Vec<u32> = self
            .tasks
            .iter()
            .filter(|(tag, t)| !t.aborted && scope.covers(**tag, t))
            .map(|(tag, _)| *tag)
            .collect();
        for v in &victims {
            self.abort_task(*v);
        }
        self.check_pending_tmfs();
        self.check_logout();
        victims.len()
    }

    fn abort_task(&mut self, itt: u32) {
        let Some(task) = self.tasks.get_mut(&itt) else {
            return;
        };
        task.aborted = true;
        if matches!(task.state, TaskState::Collecting(_)) {
            if let Some(task) = self.tasks.remove(&itt) {
                self.release_task_resources(&task);
                self.finish_command(task.windowed);
            }
            self.solicit_queue.retain(|t| *t != itt);
        }
    }

    fn check_pending_tmfs(&mut self) {
        if self.tasks.values().any(|t| t.aborted) {
            return;
        }
        let (decided, waiting): (Vec<PendingTmf>, Vec<PendingTmf>) = std::mem::take(&mut self.tmfs)
            .into_iter()
            .partition(|p| p.decided);
        self.tmfs = waiting;
        for p in decided {
            let stat_sn = self.next_stat_sn();
            self.finish_command(p.windowed);
            let max = self.window.max_cmd_sn();
            self.out
                .push_back(OutPdu::new(Pdu::TaskMgmtResponse(TaskMgmtResponse {
                    response: p.response,
                    itt: p.itt,
                    stat_sn,
                    exp_cmd_sn: self.window.exp_cmd_sn(),
                    max_cmd_sn: max,
                })));
            if p.function == tmf::TARGET_COLD_RESET && p.response == tmf::FUNCTION_COMPLETE {
                self.close(CloseReason::TargetColdReset);
            }
        }
        self.pump_r2ts();
    }

    fn next_stat_sn(&mut self) -> u32 {
        let s = self.stat_sn;
        self.stat_sn = self.stat_sn.wrapping_add(1);
        s
    }

    fn alloc_ttt(&mut self) -> u32 {
        let t = self.next_ttt;
        self.next_ttt = next_tag(t);
        t
    }

    fn reject_pdu(&mut self, pdu: &Pdu, reason: u8) {
        let bhs = pdu.encode();
        self.reject(&bhs, reason);
    }

    /// Reject carries the offending header (RFC 7143 §11.17.2). Reject
    /// advances StatSN like any status-bearing PDU.
    fn reject(&mut self, bhs: &Bhs, reason: u8) {
        self.stats.rejects += 1;
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

    fn close(&mut self, reason: CloseReason) {
        if !self.closing {
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
