//! The initiator side of the protocol, sans I/O, laid out like the
//! target's ([`crate::target`]): [`login`] walks the login stages and
//! negotiates through the same key table as the target; after it,
//! [`InitiatorSession`] runs the full feature phase of one connection
//! (RFC 7143 §4.2, §11): tags and CmdSN for each task and the command
//! window set by the target's MaxCmdSN (here), SCSI commands with
//! immediate, unsolicited and solicited Data-Out, Data-In reassembly and
//! status (`command`), NOP-In answers, keep-alive pings and logout
//! (`session`), text exchanges with continuation (`text`) and task
//! management (`tmf`).
//!
//! # Contract (sans-IO)
//! Inputs: [`InitiatorSession::submit`] (and the other `submit_*`),
//! [`InitiatorSession::handle_frame`], [`InitiatorSession::handle_timeout`].
//! Outputs: [`InitiatorSession::poll_transmit`] (PDUs to write, in order),
//! [`InitiatorSession::poll_completion`] (finished tasks with the caller's
//! token `T`), [`InitiatorSession::poll_event`], [`InitiatorSession::poll_timeout`].
//! Time is always passed in. Nothing here blocks, and nothing the target
//! sends can make it panic: a PDU that breaks a rule fails its task, or
//! the connection when it cannot be tied to a task.

mod command;
pub mod login;
mod session;
mod text;
mod tmf;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ironlun_scsi_codes::{SenseCode, SenseKey, Status};
use ironlun_wire::text::{encode_pairs, parse_pairs};
use ironlun_wire::{
    AsyncEvent, DataIn, DataOut, Frame, LogoutReason, LogoutRequest, LogoutResult, Lun, NopIn,
    NopOut, Pdu, RejectReason, Residual, ScsiCommand, ScsiResponse, ServiceResponse,
    TaskMgmtRequest, TextRequest, TmfFunction, TmfResponse, WireError, RESERVED_TAG,
};

use crate::params::{ConnParams, SessionParams};
use crate::window::{sn_le, sn_lt};
use crate::OutPdu;

use command::{scsi_command_pdus, ScsiTask};
pub use command::{ScsiReply, ScsiRequest, ATTR_SIMPLE};
pub use login::{
    default_isid, InitiatorLogin, LoginConfig, LoginError, LoginOutcome, LoginProgress,
};
use session::ping_pdu;
use text::text_request_pdu;
use tmf::tmf_pdu;

/// Tasks one session may hold (tags in use); bounds every per-task table.
pub const MAX_TASKS_LIMIT: usize = 0xfffe;

/// What a task ended with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Scsi(ScsiReply),
    /// The key/value pairs of a text exchange (SendTargets).
    Text(Vec<(String, String)>),
    /// Task management response (RFC 7143 §11.6.1).
    TaskMgmt(TmfResponse),
    /// Logout response code (RFC 7143 §11.15.1).
    Logout(LogoutResult),
    /// A NOP-In answered our ping; its data.
    Nop(Bytes),
}

/// Why a task did not get a reply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error("target rejected the PDU (reason 0x{code:02x}: {0}, RFC 7143 §11.17.1)", code = .0.0)]
    Rejected(RejectReason),
    #[error("target broke the protocol for this task: {0}")]
    Protocol(String),
    #[error("connection failed: {0}")]
    ConnectionFailed(String),
    /// Ended by our own ABORT TASK, which the target completed: it sends
    /// no response for the task (RFC 7143 §11.5.1, SAM-5 §7.2).
    #[error("aborted by task management (ABORT TASK)")]
    Aborted,
    /// Never sent: the session did not take the task.
    #[error("not sent: {0}")]
    Refused(SubmitError),
}

/// A task that finished, with the caller's token.
#[derive(Debug)]
pub struct Completed<T> {
    pub token: T,
    pub result: Result<Reply, TaskError>,
}

/// Something the target told the session outside any task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// Asynchronous Message (RFC 7143 §11.9): event and parameters.
    /// [`AsyncEvent::LOGOUT_REQUEST`] asks us to log out within Parameter3
    /// seconds; [`AsyncEvent::CONNECTION_DROP`] and
    /// [`AsyncEvent::SESSION_DROP`] announce a dropped connection or
    /// session; [`AsyncEvent::SCSI_ASYNC_EVENT`] carries SCSI sense in
    /// `data`.
    Async {
        event: AsyncEvent,
        parameters: [u16; 3],
        data: Bytes,
    },
    /// The connection cannot go on (protocol violation or keep-alive
    /// timeout); every task has been completed with an error.
    Failed(String),
    /// A Logout Response answered our logout (its task completes too):
    /// the target closes the connection (RFC 7143 §11.15).
    LoggedOut { response: LogoutResult },
    /// A command ended with UNIT ATTENTION and is being sent again
    /// (see [`SessionLimits::unit_attention_retries`]); `sense` says what
    /// happened.
    UnitAttention { lun: Lun, sense: Bytes },
}

/// Why a submit was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("all {0} task tags are in use")]
    Full(usize),
    #[error("the connection has failed: {0}")]
    Failed(String),
    #[error("write of {len} bytes exceeds what one command may carry")]
    TooLong { len: usize },
    /// A Logout was sent on this connection: nothing new may follow it
    /// (RFC 7143 §11.14).
    #[error("the connection is logging out")]
    LoggingOut,
}

/// A submit the session did not take: why, and the caller's token back,
/// so that the driver can still answer its caller.
#[derive(Debug)]
pub struct Refused<T> {
    pub error: SubmitError,
    pub token: T,
}

impl<T> From<Refused<T>> for SubmitError {
    fn from(r: Refused<T>) -> Self {
        r.error
    }
}

/// Timing and size limits of the session.
#[derive(Clone, Debug)]
pub struct SessionLimits {
    /// Tasks (tags) in use at once; submits beyond it are refused.
    pub max_tasks: usize,
    /// Ping the target after this much silence (RFC 7143 §11.18).
    pub nop_interval: Option<Duration>,
    /// Fail the connection if a ping is not answered in this time.
    pub nop_timeout: Duration,
    /// Times a command that ends in CHECK CONDITION with UNIT ATTENTION
    /// is sent again before the caller sees it (0: never). A unit
    /// attention reports an event (power on, reset, I_T nexus loss after
    /// reconnecting, parameters changed), not a fault of the command,
    /// which the device did not run (SAM-5 §5.14, SPC-4 §5.14); an
    /// initiator that retries is how Linux's SCSI layer behaves. Each
    /// retry is announced as [`SessionEvent::UnitAttention`].
    pub unit_attention_retries: u8,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_tasks: 1024,
            nop_interval: Some(Duration::from_secs(10)),
            nop_timeout: Duration::from_secs(15),
            unit_attention_retries: 0,
        }
    }
}

#[derive(Debug)]
enum Body {
    Scsi(ScsiTask),
    Text {
        lun: Lun,
        request: Bytes,
        text: Vec<u8>,
    },
    TaskMgmt {
        function: TmfFunction,
        lun: Lun,
        referenced_itt: u32,
        ref_cmd_sn: u32,
    },
    Logout {
        reason: LogoutReason,
        cid: u16,
    },
    Ping,
}

#[derive(Debug)]
struct Task<T> {
    token: T,
    itt: u32,
    /// CmdSN the task was sent with (for ABORT TASK's RefCmdSN).
    cmd_sn: u32,
    sent: bool,
    body: Body,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u16,
    task: Option<Task<T>>,
}

/// The initiator side of one full-feature connection. `T` is the caller's
/// token, handed back with each completion.
#[derive(Debug)]
pub struct InitiatorSession<T> {
    params: SessionParams,
    conn: ConnParams,
    limits: SessionLimits,
    cmd_sn: u32,
    exp_cmd_sn: u32,
    max_cmd_sn: u32,
    exp_stat_sn: u32,
    slots: Vec<Slot<T>>,
    free: Vec<u16>,
    in_use: usize,
    /// Tasks waiting for the command window to open, in submit order.
    waiting: VecDeque<u16>,
    out: VecDeque<OutPdu>,
    done: VecDeque<Completed<T>>,
    events: VecDeque<SessionEvent>,
    failed: Option<String>,
    /// A Logout Request went out: no new request may follow it, and
    /// tasks still waiting for the window stay unsent (RFC 7143 §11.14).
    logging_out: bool,
    last_rx: Instant,
    /// Deadline of an unanswered keep-alive ping.
    ping_deadline: Option<Instant>,
}

impl<T> InitiatorSession<T> {
    pub fn new(login: &LoginOutcome, limits: SessionLimits, now: Instant) -> Self {
        let max_tasks = limits.max_tasks.clamp(1, MAX_TASKS_LIMIT);
        InitiatorSession {
            params: login.session.clone(),
            conn: login.conn.clone(),
            limits: SessionLimits {
                max_tasks,
                ..limits
            },
            cmd_sn: login.cmd_sn,
            exp_cmd_sn: login.exp_cmd_sn,
            max_cmd_sn: login.max_cmd_sn,
            exp_stat_sn: login.exp_stat_sn,
            slots: Vec::new(),
            free: Vec::new(),
            in_use: 0,
            waiting: VecDeque::new(),
            out: VecDeque::new(),
            done: VecDeque::new(),
            events: VecDeque::new(),
            failed: None,
            logging_out: false,
            last_rx: now,
            ping_deadline: None,
        }
    }

    pub fn session_params(&self) -> &SessionParams {
        &self.params
    }

    pub fn conn_params(&self) -> &ConnParams {
        &self.conn
    }

    /// Tasks holding a tag (sent or waiting for the window).
    pub fn tasks_in_use(&self) -> usize {
        self.in_use
    }

    /// Commands the target's window lets us send now (RFC 7143 §4.2.2.1).
    pub fn window_open(&self) -> u32 {
        if sn_le(self.cmd_sn, self.max_cmd_sn) {
            self.max_cmd_sn.wrapping_sub(self.cmd_sn).wrapping_add(1)
        } else {
            0
        }
    }

    /// Whether another task can be submitted.
    pub fn has_capacity(&self) -> bool {
        self.failed.is_none() && !self.logging_out && self.in_use < self.limits.max_tasks
    }

    /// Whether a Logout Request has gone out on this connection.
    pub fn is_logging_out(&self) -> bool {
        self.logging_out
    }

    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<OutPdu> {
        self.out.pop_front()
    }

    #[must_use]
    pub fn poll_completion(&mut self) -> Option<Completed<T>> {
        self.done.pop_front()
    }

    #[must_use]
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    fn find(&self, itt: u32) -> Option<&Task<T>> {
        let (idx, generation) = split_itt(itt);
        self.slots
            .get(usize::from(idx))
            .filter(|s| s.generation == generation)
            .and_then(|s| s.task.as_ref())
    }

    fn add(&mut self, body: Body, token: T, immediate: bool) -> Result<u32, Refused<T>> {
        let refuse = |error, token| Err(Refused { error, token });
        if let Some(why) = &self.failed {
            return refuse(SubmitError::Failed(why.clone()), token);
        }
        if self.logging_out {
            return refuse(SubmitError::LoggingOut, token);
        }
        let full = SubmitError::Full(self.limits.max_tasks);
        if self.in_use >= self.limits.max_tasks {
            return refuse(full, token);
        }
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                let Ok(i) = u16::try_from(self.slots.len()) else {
                    return refuse(full, token);
                };
                self.slots.push(Slot {
                    generation: 0,
                    task: None,
                });
                i
            }
        };
        let Some(slot) = self.slots.get_mut(usize::from(idx)) else {
            return refuse(full, token);
        };
        slot.generation = slot.generation.wrapping_add(1);
        let itt = make_itt(idx, slot.generation);
        slot.task = Some(Task {
            token,
            itt,
            cmd_sn: 0,
            sent: false,
            body,
        });
        self.in_use = self.in_use.saturating_add(1);
        if immediate {
            self.send(idx, true);
        } else {
            self.waiting.push_back(idx);
            self.flush_waiting();
        }
        Ok(itt)
    }

    /// Sends waiting tasks while the window is open (RFC 7143 §4.2.2.1:
    /// a non-immediate command needs CmdSN ≤ MaxCmdSN).
    fn flush_waiting(&mut self) {
        while !self.logging_out && sn_le(self.cmd_sn, self.max_cmd_sn) {
            let Some(idx) = self.waiting.pop_front() else {
                break;
            };
            self.send(idx, false);
        }
    }

    fn send(&mut self, idx: u16, immediate: bool) {
        let cmd_sn = self.cmd_sn;
        let exp_stat_sn = self.exp_stat_sn;
        let max_xmit = self.conn.max_xmit_data_segment_length.max(512) as usize;
        let Some(task) = self
            .slots
            .get_mut(usize::from(idx))
            .and_then(|s| s.task.as_mut())
        else {
            return;
        };
        task.sent = true;
        task.cmd_sn = cmd_sn;
        let h = Header {
            itt: task.itt,
            immediate,
            cmd_sn,
            exp_stat_sn,
        };
        let out = &mut self.out;
        match &task.body {
            Body::Scsi(t) => scsi_command_pdus(out, &t.req, h, &self.params, max_xmit),
            Body::Text { lun, request, .. } => out.push_back(text_request_pdu(h, *lun, request)),
            Body::TaskMgmt {
                function,
                lun,
                referenced_itt,
                ref_cmd_sn,
            } => out.push_back(tmf_pdu(h, *function, *lun, *referenced_itt, *ref_cmd_sn)),
            Body::Logout { reason, cid } => {
                self.logging_out = true;
                out.push_back(OutPdu::new(Pdu::LogoutRequest(LogoutRequest {
                    immediate,
                    reason: *reason,
                    itt: h.itt,
                    cid: *cid,
                    cmd_sn,
                    exp_stat_sn,
                })));
            }
            Body::Ping => out.push_back(ping_pdu(h)),
        }
        // A ping carries no CmdSN of its own (RFC 7143 §11.18), nor does
        // an immediate command take one.
        if !immediate && !matches!(task.body, Body::Ping) {
            self.cmd_sn = self.cmd_sn.wrapping_add(1);
        }
    }

    /// Handles one PDU from the target. A header that does not decode is
    /// the driver's to act on (the connection cannot go on, RFC 7143
    /// §7.8); the session is left as it was.
    pub fn handle_frame(&mut self, frame: Frame, now: Instant) -> Result<(), WireError> {
        let pdu = Pdu::decode(&frame.bhs)?;
        self.handle_pdu(pdu, frame.data, now);
        Ok(())
    }

    fn handle_pdu(&mut self, pdu: Pdu, data: Bytes, now: Instant) {
        if self.failed.is_some() {
            return;
        }
        self.last_rx = now;
        self.ping_deadline = None;
        match pdu {
            Pdu::DataIn(d) => {
                if d.status.is_some() {
                    self.advance_stat_sn(d.stat_sn);
                }
                self.update_window(d.exp_cmd_sn, d.max_cmd_sn);
                self.data_in(d, data);
            }
            Pdu::ScsiResponse(r) => {
                self.advance_stat_sn(r.stat_sn);
                self.update_window(r.exp_cmd_sn, r.max_cmd_sn);
                self.scsi_response(r, data);
            }
            Pdu::R2t(r) => {
                self.update_window(r.exp_cmd_sn, r.max_cmd_sn);
                self.r2t(
                    r.itt,
                    r.ttt,
                    r.buffer_offset,
                    r.desired_data_transfer_length,
                );
            }
            Pdu::NopIn(n) => {
                if n.itt != RESERVED_TAG {
                    // Only a NOP-In that answers a ping advances StatSN:
                    // with ITT 0xffffffff it carries the next StatSN
                    // without using it (RFC 7143 §11.19.5).
                    self.advance_stat_sn(n.stat_sn);
                }
                self.update_window(n.exp_cmd_sn, n.max_cmd_sn);
                self.nop_in(n, data);
            }
            Pdu::TextResponse(t) => {
                self.advance_stat_sn(t.stat_sn);
                self.update_window(t.exp_cmd_sn, t.max_cmd_sn);
                self.text_response(t.itt, t.ttt, t.final_bit, t.cont, data);
            }
            Pdu::TaskMgmtResponse(t) => {
                self.advance_stat_sn(t.stat_sn);
                self.update_window(t.exp_cmd_sn, t.max_cmd_sn);
                let aborted = self.aborted_by(t.itt, t.response);
                self.finish_matching(t.itt, Ok(Reply::TaskMgmt(t.response)), |b| {
                    matches!(b, Body::TaskMgmt { .. })
                });
                if let Some(itt) = aborted {
                    self.finish(itt, Err(TaskError::Aborted));
                }
            }
            Pdu::LogoutResponse(l) => {
                self.advance_stat_sn(l.stat_sn);
                self.update_window(l.exp_cmd_sn, l.max_cmd_sn);
                let ours = self
                    .find(l.itt)
                    .is_some_and(|t| t.sent && matches!(t.body, Body::Logout { .. }));
                self.finish_matching(l.itt, Ok(Reply::Logout(l.response)), |b| {
                    matches!(b, Body::Logout { .. })
                });
                if ours {
                    self.events.push_back(SessionEvent::LoggedOut {
                        response: l.response,
                    });
                }
            }
            Pdu::Reject(r) => {
                self.advance_stat_sn(r.stat_sn);
                self.update_window(r.exp_cmd_sn, r.max_cmd_sn);
                // The data segment is the rejected header (RFC 7143
                // §11.17.3); its ITT names the task. A task still waiting
                // for the window was never sent: the target cannot have
                // rejected it (and finishing it would leave its slot in
                // the waiting queue, to be sent again when reused).
                let itt = data
                    .get(16..20)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map(u32::from_be_bytes);
                match itt.filter(|i| self.find(*i).is_some_and(|t| t.sent)) {
                    Some(itt) => self.finish(itt, Err(TaskError::Rejected(r.reason))),
                    None => self.fail(format!(
                        "target rejected a PDU we cannot name (reason 0x{:02x}: {})",
                        r.reason.0, r.reason
                    )),
                }
            }
            Pdu::AsyncMessage(a) => {
                self.advance_stat_sn(a.stat_sn);
                self.update_window(a.exp_cmd_sn, a.max_cmd_sn);
                self.events.push_back(SessionEvent::Async {
                    event: a.async_event,
                    parameters: [a.parameter1, a.parameter2, a.parameter3],
                    data,
                });
            }
            other => self.fail(format!(
                "target sent an initiator opcode ({})",
                other.opcode()
            )),
        }
        self.flush_waiting();
    }

    /// Takes the target's ExpCmdSN/MaxCmdSN (RFC 7143 §4.2.2.1): only
    /// newer values count, and a MaxCmdSN below ExpCmdSN - 1 is ignored.
    fn update_window(&mut self, exp: u32, max: u32) {
        if sn_lt(max, exp.wrapping_sub(1)) {
            return;
        }
        if sn_lt(self.exp_cmd_sn, exp) {
            self.exp_cmd_sn = exp;
        }
        if sn_lt(self.max_cmd_sn, max) {
            self.max_cmd_sn = max;
        }
    }

    fn advance_stat_sn(&mut self, stat_sn: u32) {
        let next = stat_sn.wrapping_add(1);
        if sn_lt(self.exp_stat_sn, next) {
            self.exp_stat_sn = next;
        }
    }

    fn finish_matching(
        &mut self,
        itt: u32,
        result: Result<Reply, TaskError>,
        is_kind: impl Fn(&Body) -> bool,
    ) {
        match self.find(itt) {
            Some(t) if t.sent && is_kind(&t.body) => self.finish(itt, result),
            _ => self.fail(format!("response for unknown task 0x{itt:08x}")),
        }
    }

    fn finish(&mut self, itt: u32, result: Result<Reply, TaskError>) {
        let (idx, generation) = split_itt(itt);
        let Some(slot) = self
            .slots
            .get_mut(usize::from(idx))
            .filter(|s| s.generation == generation)
        else {
            return;
        };
        if let Some(task) = slot.task.take() {
            debug_assert!(self.in_use > 0, "a task ended that was not in use");
            self.in_use = self.in_use.saturating_sub(1);
            self.free.push(idx);
            self.done.push_back(Completed {
                token: task.token,
                result,
            });
        }
    }

    /// Ends the connection: every task completes with an error and an
    /// event says why.
    pub fn fail(&mut self, why: String) {
        if self.failed.is_some() {
            return;
        }
        self.failed = Some(why.clone());
        self.waiting.clear();
        self.out.clear();
        for (idx, slot) in self.slots.iter_mut().enumerate() {
            if let Some(task) = slot.task.take() {
                self.done.push_back(Completed {
                    token: task.token,
                    result: Err(TaskError::ConnectionFailed(why.clone())),
                });
                if let Ok(i) = u16::try_from(idx) {
                    self.free.push(i);
                }
            }
        }
        self.in_use = 0;
        self.events.push_back(SessionEvent::Failed(why));
    }

    /// Takes every unfinished SCSI command back (with its token), so that
    /// a caller whose connection died can run them elsewhere; other tasks
    /// fail. Used for reconnect and multipath failover.
    pub fn take_unfinished(&mut self, why: &str) -> Vec<(ScsiRequest, T)> {
        let mut back = Vec::new();
        for (idx, slot) in self.slots.iter_mut().enumerate() {
            let Some(task) = slot.task.take() else {
                continue;
            };
            if let Ok(i) = u16::try_from(idx) {
                self.free.push(i);
            }
            match task.body {
                Body::Scsi(t) => back.push((t.req, task.token)),
                _ => self.done.push_back(Completed {
                    token: task.token,
                    result: Err(TaskError::ConnectionFailed(why.to_owned())),
                }),
            }
        }
        self.in_use = 0;
        self.waiting.clear();
        self.out.clear();
        if self.failed.is_none() {
            self.failed = Some(why.to_owned());
        }
        back
    }
}

/// The header fields every initiator request carries.
#[derive(Clone, Copy)]
struct Header {
    itt: u32,
    immediate: bool,
    cmd_sn: u32,
    exp_stat_sn: u32,
}

fn make_itt(idx: u16, generation: u16) -> u32 {
    (u32::from(generation) << 16) | u32::from(idx)
}

fn split_itt(itt: u32) -> (u16, u16) {
    ((itt & 0xffff) as u16, (itt >> 16) as u16)
}
