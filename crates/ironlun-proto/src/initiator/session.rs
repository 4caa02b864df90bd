//! The initiator's full feature phase on one connection (RFC 7143 §4.2,
//! §11): tags and CmdSN for each task, the command window set by the
//! target's MaxCmdSN, immediate / unsolicited / solicited Data-Out,
//! Data-In reassembly, status, NOP-In answers and keep-alive pings, text
//! exchanges with continuation, task management and logout.
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

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ironlun_scsi_codes::{SenseCode, SenseKey, Status};
use ironlun_wire::text::{encode_pairs, parse_pairs};
use ironlun_wire::{
    AsyncEvent, DataIn, DataOut, Frame, LogoutRequest, Lun, NopIn, NopOut, Pdu, RejectReason,
    Residual, ScsiCommand, ScsiResponse, TaskMgmtRequest, TextRequest, TmfFunction, TmfResponse,
    WireError, RESERVED_TAG,
};

use super::login::LoginOutcome;
use crate::params::{ConnParams, SessionParams};
use crate::window::{sn_le, sn_lt};
use crate::OutPdu;

/// Tasks one session may hold (tags in use); bounds every per-task table.
pub const MAX_TASKS_LIMIT: usize = 0xfffe;

/// Largest text response (SendTargets) we collect across continuations.
const TEXT_LIMIT: usize = 1 << 20;

/// SCSI task attribute SIMPLE (SAM-5 §8.6, RFC 7143 §11.3.1.1 ATTR).
pub const ATTR_SIMPLE: u8 = 1;

/// One SCSI command to run.
#[derive(Clone, Debug, Default)]
pub struct ScsiRequest {
    pub lun: Lun,
    pub cdb: [u8; 16],
    /// Bytes the command reads (Data-In expected), 0 for none.
    pub read_len: u32,
    /// Bytes the command writes; empty for none.
    pub write: Bytes,
    /// Task attribute (RFC 7143 §11.3.1.1).
    pub attr: u8,
    /// Check Data-In for order and length as always, but keep none of it
    /// ([`ScsiReply::data`] is then empty): for a load generator that
    /// does not look at what it read, like IOMeter with no verification.
    /// The bytes still cross into user space once, from the socket.
    pub discard_data: bool,
}

/// A finished SCSI command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScsiReply {
    /// iSCSI response code (RFC 7143 §11.4.3): 0 = command completed.
    pub response: u8,
    /// SCSI status (SAM-5 §5.3.1).
    pub status: Status,
    /// Sense data (without the SenseLength prefix), when status carries it.
    pub sense: Bytes,
    /// Data read, `read_len` bytes less any residual underflow (none when
    /// the request said [`ScsiRequest::discard_data`]).
    pub data: Bytes,
    pub residual: Residual,
}

/// What a task ended with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Scsi(ScsiReply),
    /// The key/value pairs of a text exchange (SendTargets).
    Text(Vec<(String, String)>),
    /// Task management response (RFC 7143 §11.6.1).
    TaskMgmt(TmfResponse),
    /// Logout response code (RFC 7143 §11.15.1).
    Logout(u8),
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
        reason: u8,
        cid: u16,
    },
    Ping,
}

#[derive(Debug)]
struct ScsiTask {
    req: ScsiRequest,
    data: DataBuf,
    /// Next DataSN expected in Data-In (RFC 7143 §11.7.5).
    exp_data_sn: u32,
    /// Times sent again after a unit attention.
    ua_retries: u8,
}

/// Data-In collected for one command: one PDU's data is kept as it came
/// (no copy); several are joined into one buffer; discarded data is only
/// counted.
#[derive(Debug)]
enum DataBuf {
    Empty,
    One(Bytes),
    Many(BytesMut),
    Counted(usize),
}

impl DataBuf {
    fn len(&self) -> usize {
        match self {
            DataBuf::Empty => 0,
            DataBuf::One(b) => b.len(),
            DataBuf::Many(b) => b.len(),
            DataBuf::Counted(n) => *n,
        }
    }

    fn count(&mut self, n: usize) {
        *self = DataBuf::Counted(self.len() + n);
    }

    fn append(&mut self, d: Bytes, capacity: usize) {
        *self = match std::mem::replace(self, DataBuf::Empty) {
            DataBuf::Empty => DataBuf::One(d),
            DataBuf::One(first) => {
                let mut m = BytesMut::with_capacity(capacity.max(first.len() + d.len()));
                m.extend_from_slice(&first);
                m.extend_from_slice(&d);
                DataBuf::Many(m)
            }
            DataBuf::Many(mut m) => {
                m.extend_from_slice(&d);
                DataBuf::Many(m)
            }
            DataBuf::Counted(n) => DataBuf::Counted(n + d.len()),
        }
    }

    fn take(&mut self) -> Bytes {
        match std::mem::replace(self, DataBuf::Empty) {
            DataBuf::Empty => Bytes::new(),
            DataBuf::One(b) => b,
            DataBuf::Many(m) => m.freeze(),
            DataBuf::Counted(_) => Bytes::new(),
        }
    }
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
        self.failed.is_none() && self.in_use < self.limits.max_tasks
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

    /// Queues a SCSI command. It is sent at once if the window allows,
    /// otherwise when the target raises MaxCmdSN. Returns the task tag.
    pub fn submit(&mut self, req: ScsiRequest, token: T) -> Result<u32, SubmitError> {
        if u32::try_from(req.write.len()).is_err() {
            return Err(SubmitError::TooLong {
                len: req.write.len(),
            });
        }
        self.add(
            Body::Scsi(ScsiTask {
                req,
                data: DataBuf::Empty,
                exp_data_sn: 0,
                ua_retries: 0,
            }),
            token,
            false,
        )
    }

    /// Starts a text exchange (e.g. `SendTargets=All`, RFC 7143 §11.10).
    pub fn submit_text(&mut self, pairs: &[(&str, &str)], token: T) -> Result<u32, SubmitError> {
        let request = Bytes::from(encode_pairs(pairs.iter().copied()));
        self.add(
            Body::Text {
                lun: Lun::default(),
                request,
                text: Vec::new(),
            },
            token,
            false,
        )
    }

    /// A task management function (RFC 7143 §11.5), sent immediately.
    pub fn submit_task_mgmt(
        &mut self,
        function: TmfFunction,
        lun: Lun,
        referenced_itt: u32,
        token: T,
    ) -> Result<u32, SubmitError> {
        let ref_cmd_sn = self
            .find(referenced_itt)
            .map(|t| t.cmd_sn)
            .unwrap_or(self.cmd_sn);
        self.add(
            Body::TaskMgmt {
                function,
                lun,
                referenced_itt,
                ref_cmd_sn,
            },
            token,
            true,
        )
    }

    /// Logout (RFC 7143 §11.14): reason 0 closes the session.
    pub fn submit_logout(&mut self, reason: u8, cid: u16, token: T) -> Result<u32, SubmitError> {
        self.add(Body::Logout { reason, cid }, token, true)
    }

    /// A NOP-Out ping that the target answers with a NOP-In.
    pub fn submit_ping(&mut self, token: T) -> Result<u32, SubmitError> {
        self.add(Body::Ping, token, true)
    }

    fn find(&self, itt: u32) -> Option<&Task<T>> {
        let (idx, generation) = split_itt(itt);
        self.slots
            .get(usize::from(idx))
            .filter(|s| s.generation == generation)
            .and_then(|s| s.task.as_ref())
    }

    fn add(&mut self, body: Body, token: T, immediate: bool) -> Result<u32, SubmitError> {
        if let Some(why) = &self.failed {
            return Err(SubmitError::Failed(why.clone()));
        }
        if self.in_use >= self.limits.max_tasks {
            return Err(SubmitError::Full(self.limits.max_tasks));
        }
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = u16::try_from(self.slots.len())
                    .map_err(|_| SubmitError::Full(self.limits.max_tasks))?;
                self.slots.push(Slot {
                    generation: 0,
                    task: None,
                });
                i
            }
        };
        let Some(slot) = self.slots.get_mut(usize::from(idx)) else {
            return Err(SubmitError::Full(self.limits.max_tasks));
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
        self.in_use += 1;
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
        while sn_le(self.cmd_sn, self.max_cmd_sn) {
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
                if n.ttt == RESERVED_TAG || n.itt != RESERVED_TAG {
                    // A NOP-In that is a response advances StatSN
                    // (RFC 7143 §11.19.5).
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
                self.finish_matching(t.itt, Ok(Reply::TaskMgmt(t.response)), |b| {
                    matches!(b, Body::TaskMgmt { .. })
                });
            }
            Pdu::LogoutResponse(l) => {
                self.advance_stat_sn(l.stat_sn);
                self.update_window(l.exp_cmd_sn, l.max_cmd_sn);
                self.finish_matching(l.itt, Ok(Reply::Logout(l.response)), |b| {
                    matches!(b, Body::Logout { .. })
                });
            }
            Pdu::Reject(r) => {
                self.advance_stat_sn(r.stat_sn);
                self.update_window(r.exp_cmd_sn, r.max_cmd_sn);
                // The data segment is the rejected header (RFC 7143
                // §11.17.3); its ITT names the task.
                let itt = data
                    .get(16..20)
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map(u32::from_be_bytes);
                match itt.filter(|i| self.find(*i).is_some()) {
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

    fn scsi_task(&mut self, itt: u32) -> Option<&mut ScsiTask> {
        let (idx, generation) = split_itt(itt);
        match self
            .slots
            .get_mut(usize::from(idx))
            .filter(|s| s.generation == generation)
            .and_then(|s| s.task.as_mut())
        {
            Some(Task {
                sent: true,
                body: Body::Scsi(t),
                ..
            }) => Some(t),
            _ => None,
        }
    }

    fn data_in(&mut self, d: DataIn, data: Bytes) {
        let Some(task) = self.scsi_task(d.itt) else {
            return self.fail(format!("Data-In for unknown task 0x{:08x}", d.itt));
        };
        let read_len = task.req.read_len as usize;
        let offset = d.buffer_offset as usize;
        let problem = if d.data_sn != task.exp_data_sn {
            Some(format!(
                "Data-In DataSN {} where {} was due",
                d.data_sn, task.exp_data_sn
            ))
        } else if offset != task.data.len() {
            // DataPDUInOrder=Yes (RFC 7143 §13.18): no gaps, no overlap.
            Some(format!(
                "Data-In at offset {offset}, expected {}",
                task.data.len()
            ))
        } else if offset + data.len() > read_len {
            Some(format!(
                "Data-In ends at {} past the {read_len} bytes asked for",
                offset + data.len()
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            return self.finish(d.itt, Err(TaskError::Protocol(p)));
        }
        task.exp_data_sn = task.exp_data_sn.wrapping_add(1);
        if task.req.discard_data {
            task.data.count(data.len());
        } else if !data.is_empty() {
            task.data.append(data, read_len);
        }
        if let Some(status) = d.status {
            // Phase collapse: status in the last Data-In (RFC 7143 §11.7.4).
            let data = task.data.take();
            self.finish(
                d.itt,
                Ok(Reply::Scsi(ScsiReply {
                    response: 0,
                    status: Status(status),
                    sense: Bytes::new(),
                    data,
                    residual: d.residual,
                })),
            );
        }
    }

    fn scsi_response(&mut self, r: ScsiResponse, data: Bytes) {
        let Some(task) = self.scsi_task(r.itt) else {
            return self.fail(format!("SCSI Response for unknown task 0x{:08x}", r.itt));
        };
        let read = task.data.take();
        // Sense data: SenseLength (2 bytes) then the sense (RFC 7143
        // §11.4.7.2).
        let sense = match data.get(..2).and_then(|l| <[u8; 2]>::try_from(l).ok()) {
            Some(l) => {
                let n = usize::from(u16::from_be_bytes(l));
                data.slice(2..(2 + n).min(data.len()))
            }
            None => Bytes::new(),
        };
        let status = Status(r.status);
        if r.response == 0
            && status == Status::CHECK_CONDITION
            && SenseCode::parse(&sense).map(|c| c.key) == Some(SenseKey::UNIT_ATTENTION)
            && self.retry(r.itt, sense.clone())
        {
            return;
        }
        self.finish(
            r.itt,
            Ok(Reply::Scsi(ScsiReply {
                response: r.response,
                status,
                sense,
                data: read,
                residual: r.residual,
            })),
        );
    }

    /// Queues a command that met a unit attention again, if it has
    /// retries left. The target has finished with the old command
    /// (it sent the response), so its tag may be reused.
    fn retry(&mut self, itt: u32, sense: Bytes) -> bool {
        let limit = self.limits.unit_attention_retries;
        let (idx, generation) = split_itt(itt);
        let Some(task) = self
            .slots
            .get_mut(usize::from(idx))
            .filter(|s| s.generation == generation)
            .and_then(|s| s.task.as_mut())
        else {
            return false;
        };
        let Body::Scsi(t) = &mut task.body else {
            return false;
        };
        if t.ua_retries >= limit {
            return false;
        }
        t.ua_retries += 1;
        t.exp_data_sn = 0;
        t.data = DataBuf::Empty;
        let lun = t.req.lun;
        task.sent = false;
        self.events
            .push_back(SessionEvent::UnitAttention { lun, sense });
        self.waiting.push_back(idx);
        self.flush_waiting();
        true
    }

    fn r2t(&mut self, itt: u32, ttt: u32, offset: u32, len: u32) {
        let max_xmit = self.conn.max_xmit_data_segment_length.max(512) as usize;
        let max_burst = self.params.max_burst_length;
        let exp_stat_sn = self.exp_stat_sn;
        let Some(task) = self.scsi_task(itt) else {
            return self.fail(format!("R2T for unknown task 0x{itt:08x}"));
        };
        let total = task.req.write.len();
        let end = offset as usize + len as usize;
        if len == 0 || end > total || len > max_burst || ttt == RESERVED_TAG {
            let why = format!(
                "R2T for bytes {offset}..{end} (TTT 0x{ttt:08x}) of a {total}-byte write, \
                 MaxBurstLength {max_burst} (RFC 7143 §11.8)"
            );
            return self.finish(itt, Err(TaskError::Protocol(why)));
        }
        let (write, lun) = (task.req.write.clone(), task.req.lun);
        push_data_out(
            &mut self.out,
            &write,
            lun,
            itt,
            ttt,
            offset as usize,
            end,
            max_xmit,
            exp_stat_sn,
        );
    }

    fn nop_in(&mut self, n: NopIn, data: Bytes) {
        if n.itt == KEEPALIVE_ITT {
            // The answer to a keep-alive ping: receiving it was the point.
            return;
        }
        if n.itt != RESERVED_TAG {
            self.finish_matching(n.itt, Ok(Reply::Nop(data)), |b| matches!(b, Body::Ping));
            return;
        }
        if n.ttt != RESERVED_TAG {
            // The target pings us: answer with its TTT and its data
            // (RFC 7143 §11.18.2).
            self.out.push_back(OutPdu {
                pdu: Pdu::NopOut(NopOut {
                    immediate: true,
                    lun: n.lun,
                    itt: RESERVED_TAG,
                    ttt: n.ttt,
                    cmd_sn: self.cmd_sn,
                    exp_stat_sn: self.exp_stat_sn,
                }),
                data: data.into(),
            });
        }
    }

    fn text_response(&mut self, itt: u32, ttt: u32, final_bit: bool, cont: bool, data: Bytes) {
        let (idx, generation) = split_itt(itt);
        let cmd_sn = self.cmd_sn;
        let exp_stat_sn = self.exp_stat_sn;
        let Some(Task {
            body: Body::Text { lun, text, .. },
            sent: true,
            ..
        }) = self
            .slots
            .get_mut(usize::from(idx))
            .filter(|s| s.generation == generation)
            .and_then(|s| s.task.as_mut())
        else {
            return self.fail(format!("Text Response for unknown task 0x{itt:08x}"));
        };
        if text.len() + data.len() > TEXT_LIMIT {
            return self.finish(
                itt,
                Err(TaskError::Protocol(format!(
                    "text response longer than {TEXT_LIMIT} bytes"
                ))),
            );
        }
        text.extend_from_slice(&data);
        if final_bit && !cont {
            let result = parse_pairs(text)
                .map(Reply::Text)
                .map_err(|e| TaskError::Protocol(e.to_string()));
            return self.finish(itt, result);
        }
        // More to come: an empty request with the target's TTT asks for it
        // (RFC 7143 §11.10.4).
        let lun = *lun;
        self.out
            .push_back(OutPdu::new(Pdu::TextRequest(TextRequest {
                immediate: true,
                final_bit: true,
                cont: false,
                lun,
                itt,
                ttt,
                cmd_sn,
                exp_stat_sn,
            })));
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
            self.in_use -= 1;
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

    /// When [`InitiatorSession::handle_timeout`] wants to run next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.failed.is_some() {
            return None;
        }
        match self.ping_deadline {
            Some(d) => Some(d),
            None => self.limits.nop_interval.map(|i| self.last_rx + i),
        }
    }

    /// Keep-alive: after `nop_interval` of silence, ping; if the ping is not
    /// answered within `nop_timeout`, fail the connection.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.failed.is_some() {
            return;
        }
        if let Some(deadline) = self.ping_deadline {
            if now >= deadline {
                self.fail(format!(
                    "no answer from the target for {:?} (NOP-Out ping unanswered)",
                    self.limits.nop_timeout
                ));
            }
            return;
        }
        let Some(interval) = self.limits.nop_interval else {
            return;
        };
        if now >= self.last_rx + interval {
            self.ping_deadline = Some(now + self.limits.nop_timeout);
            // An unsolicited ping with ITT=0xffffffff asks for no answer;
            // this one uses a reserved-free ITT so the target answers, but
            // holds no task: its NOP-In is recognised by ITT alone.
            self.out.push_back(OutPdu::new(Pdu::NopOut(NopOut {
                immediate: true,
                lun: Lun::default(),
                itt: KEEPALIVE_ITT,
                ttt: RESERVED_TAG,
                cmd_sn: self.cmd_sn,
                exp_stat_sn: self.exp_stat_sn,
            })));
        }
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

/// A SCSI Command and the unsolicited Data-Out that follows it: immediate
/// data (ImmediateData=Yes) and unsolicited Data-Out PDUs (InitialR2T=No),
/// together at most FirstBurstLength (RFC 7143 §4.2.5.2).
fn scsi_command_pdus(
    out: &mut VecDeque<OutPdu>,
    req: &ScsiRequest,
    h: Header,
    params: &SessionParams,
    max_xmit: usize,
) {
    let write_len = req.write.len() as u32;
    let edtl = if write_len > 0 {
        write_len
    } else {
        req.read_len
    };
    let unsolicited = params.unsolicited_limit(write_len) as usize;
    let immediate_len = if params.immediate_data {
        unsolicited.min(max_xmit)
    } else {
        0
    };
    let data_out_end = if params.initial_r2t {
        immediate_len
    } else {
        unsolicited
    };
    let more_unsolicited = data_out_end > immediate_len;
    out.push_back(OutPdu {
        pdu: Pdu::ScsiCommand(ScsiCommand {
            immediate: h.immediate,
            final_bit: !more_unsolicited,
            read: req.read_len > 0,
            write: write_len > 0,
            attr: req.attr & 0x07,
            lun: req.lun,
            itt: h.itt,
            expected_data_transfer_length: edtl,
            cmd_sn: h.cmd_sn,
            exp_stat_sn: h.exp_stat_sn,
            cdb: req.cdb,
        }),
        data: req.write.slice(..immediate_len).into(),
    });
    if more_unsolicited {
        push_data_out(
            out,
            &req.write,
            req.lun,
            h.itt,
            RESERVED_TAG,
            immediate_len,
            data_out_end,
            max_xmit,
            h.exp_stat_sn,
        );
    }
}

/// A Text Request that fits one PDU (RFC 7143 §11.10).
fn text_request_pdu(h: Header, lun: Lun, request: &Bytes) -> OutPdu {
    OutPdu {
        pdu: Pdu::TextRequest(TextRequest {
            immediate: h.immediate,
            final_bit: true,
            cont: false,
            lun,
            itt: h.itt,
            ttt: RESERVED_TAG,
            cmd_sn: h.cmd_sn,
            exp_stat_sn: h.exp_stat_sn,
        }),
        data: request.clone().into(),
    }
}

/// A Task Management Function Request (RFC 7143 §11.5).
fn tmf_pdu(h: Header, function: TmfFunction, lun: Lun, referenced: u32, ref_cmd_sn: u32) -> OutPdu {
    OutPdu::new(Pdu::TaskMgmtRequest(TaskMgmtRequest {
        immediate: h.immediate,
        function,
        lun,
        itt: h.itt,
        referenced_task_tag: referenced,
        cmd_sn: h.cmd_sn,
        exp_stat_sn: h.exp_stat_sn,
        ref_cmd_sn,
        exp_data_sn: 0,
    }))
}

/// A NOP-Out ping that wants a NOP-In back (RFC 7143 §11.18).
fn ping_pdu(h: Header) -> OutPdu {
    OutPdu::new(Pdu::NopOut(NopOut {
        immediate: true,
        lun: Lun::default(),
        itt: h.itt,
        ttt: RESERVED_TAG,
        cmd_sn: h.cmd_sn,
        exp_stat_sn: h.exp_stat_sn,
    }))
}

/// ITT of keep-alive pings: outside every task tag (tags use generation
/// numbers ≥ 1 in the high half, this one has generation 0).
const KEEPALIVE_ITT: u32 = 0x0000_fffe;

fn make_itt(idx: u16, generation: u16) -> u32 {
    (u32::from(generation) << 16) | u32::from(idx)
}

fn split_itt(itt: u32) -> (u16, u16) {
    ((itt & 0xffff) as u16, (itt >> 16) as u16)
}

/// Data-Out PDUs for bytes `from..to` of `write`, no PDU longer than
/// `max_xmit` (the target's MaxRecvDataSegmentLength), DataSN from 0 and F
/// on the last (RFC 7143 §11.7).
#[allow(clippy::too_many_arguments)]
fn push_data_out(
    out: &mut VecDeque<OutPdu>,
    write: &Bytes,
    lun: Lun,
    itt: u32,
    ttt: u32,
    from: usize,
    to: usize,
    max_xmit: usize,
    exp_stat_sn: u32,
) {
    let mut offset = from;
    let mut data_sn = 0u32;
    while offset < to {
        let end = (offset + max_xmit).min(to);
        out.push_back(OutPdu {
            pdu: Pdu::DataOut(DataOut {
                final_bit: end == to,
                lun,
                itt,
                ttt,
                exp_stat_sn,
                data_sn,
                buffer_offset: offset as u32,
            }),
            data: write.slice(offset..end).into(),
        });
        data_sn = data_sn.wrapping_add(1);
        offset = end;
    }
}
