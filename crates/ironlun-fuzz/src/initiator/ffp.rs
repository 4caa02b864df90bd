//! The `initiator` harness's account of full feature phase: every PDU
//! the core sends is checked against what the target allowed and what
//! the harness asked for, every task the harness hands in must come back
//! exactly once, and the logout the target asks for must go out in time
//! and end the connection (see the list in the module above).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ironlun_initiator_core::{InitiatorCore, Phase, Request};
use ironlun_proto::initiator::{
    Completed, LoginOutcome, Reply, ScsiRequest, SubmitError, TaskError,
};
use ironlun_proto::params::SessionParams;
use ironlun_proto::window::{sn_le, sn_lt};
use ironlun_proto::OutPdu;
use ironlun_scsi_codes::Status;
use ironlun_wire::{
    AsyncEvent, DataIn, DataOut, Digests, Frame, FrameDecoder, LogoutReason, LogoutRequest, Lun,
    NopOut, Outbox, Pdu, R2t, ScsiCommand, ServiceResponse, TmfFunction, RESERVED_TAG,
};

use super::login_check::LoginSide;
use super::{scsi_request, InitiatorRun, Job, Settings};
use crate::session::encode_into;

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
    status: Option<(ServiceResponse, Status)>,
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
    fn ended(&mut self, status: (ServiceResponse, Status)) {
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
            self.ended((ServiceResponse::COMMAND_COMPLETED, status));
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

/// Full feature phase: the harness's account of the connection the
/// core runs and of the tasks the harness handed it.
pub(super) struct Ffp {
    settings: Settings,
    pub(super) discovery: bool,
    params: SessionParams,
    max_xmit: usize,
    max_tasks: usize,
    outbox: Outbox,
    /// Frames what the initiator sends as the target would.
    target_decoder: FrameDecoder,
    live: BTreeMap<u32, Live>,
    by_itt: HashMap<u32, u32>,
    /// Requests the core refused: each still completes, once, with why.
    refused: HashSet<u32>,
    next_token: u32,
    /// CmdSN of the next non-immediate command.
    next_cmd_sn: u32,
    /// The largest MaxCmdSN the target allowed (RFC 7143 §4.2.2.1).
    max_cmd_sn: u32,
    /// ExpStatSN values a status the target sent allows.
    acks: HashSet<u32>,
    /// TTTs of NOP-In pings to answer.
    pings: VecDeque<u32>,
    pub(super) in_timeout: bool,
    /// When the target asked for a logout, and the seconds it gave
    /// (Parameter3, RFC 7143 §11.9.1).
    logout_asked: Option<(Instant, u16)>,
    /// A Logout Request went out: nothing new may follow it (§11.14).
    logout_sent: bool,
    /// ITT of the Logout the core sent of itself.
    own_logout: Option<u32>,
    /// The connection is over (the core said so).
    pub(super) ended: bool,
}

impl Ffp {
    pub(super) fn new(login: &LoginSide, outcome: &LoginOutcome, settings: Settings) -> Self {
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
            refused: HashSet::new(),
            next_token: 1,
            next_cmd_sn,
            // The login's window is where the session starts from.
            max_cmd_sn: last.max_cmd_sn,
            acks: HashSet::from([last.stat_sn.wrapping_add(1)]),
            pings: VecDeque::new(),
            in_timeout: false,
            logout_asked: None,
            logout_sent: false,
            own_logout: None,
            ended: false,
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

    /// One task from the driver, handed to the core: taken exactly when
    /// the core says it takes requests, otherwise refused for a reason
    /// that holds, and answered either way.
    pub(super) fn submit(
        &mut self,
        core: &mut InitiatorCore<u32>,
        job: Job,
        (arg, lba): (u8, u8),
        now: Instant,
        run: &mut InitiatorRun,
    ) {
        if self.discovery && job.needs_normal_session() {
            return;
        }
        let token = self.next_token;
        self.next_token += 1;
        let Some((request, what)) = self.request(job, arg, lba, token) else {
            return;
        };
        let full = self.live.len() >= self.max_tasks;
        // A logout of ours is taken while the one the target asked for
        // still waits (and goes out in its place).
        let replaces_asked =
            job == Job::Logout && self.logout_asked.is_some() && !self.logout_sent && !full;
        let accepts = core.accepts_requests() || replaces_asked;
        match core.handle_request(request, token, now) {
            Ok(itt) => {
                assert!(accepts, "the core took a task while it said it takes none");
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
            Err(e) => {
                assert!(
                    !accepts,
                    "the core refused a task ({e}) while it said it takes them"
                );
                match e {
                    SubmitError::Full(_) => {
                        assert!(
                            full,
                            "refused as full with {} of {} tags in use",
                            self.live.len(),
                            self.max_tasks
                        );
                        run.refused += 1;
                    }
                    SubmitError::LoggingOut => assert!(
                        self.logout_sent || self.logout_asked.is_some(),
                        "refused as logging out with no logout under way"
                    ),
                    SubmitError::Failed(_) => assert!(
                        core.phase() != Phase::FullFeature,
                        "refused as failed in full feature phase"
                    ),
                    e => panic!("the workload's task was refused: {e}"),
                }
                self.refused.insert(token);
            }
        }
    }

    /// The request a job makes.
    fn request(&self, job: Job, arg: u8, lba: u8, token: u32) -> Option<(Request, What)> {
        Some(match job {
            Job::Read { .. } | Job::Write { .. } | Job::TestUnitReady => {
                let req = scsi_request(job, arg, lba, token)?;
                (Request::Scsi(req.clone()), What::Scsi(Box::new(req)))
            }
            Job::SendTargets => (
                Request::Text(vec![("SendTargets".into(), "All".into())]),
                What::Text,
            ),
            Job::AbortTask => {
                let scsi: Vec<u32> = self
                    .live
                    .values()
                    .filter(|t| t.request().is_some())
                    .map(|t| t.itt)
                    .collect();
                let referenced_itt = match scsi.len() {
                    0 => 0x7777,
                    n => scsi
                        .get(usize::from(arg) % n)
                        .copied()
                        .unwrap_or(RESERVED_TAG),
                };
                let function = TmfFunction::ABORT_TASK;
                let lun = Lun::from_index(0);
                let r = Request::TaskMgmt {
                    function,
                    lun,
                    referenced_itt,
                };
                (r, What::TaskMgmt(function))
            }
            Job::LogicalUnitReset => {
                let function = TmfFunction::LOGICAL_UNIT_RESET;
                let lun = Lun::from_index(u16::from(arg & 1));
                // Referenced Task Tag is reserved for all but ABORT TASK
                // (RFC 7143 §11.5.2).
                let r = Request::TaskMgmt {
                    function,
                    lun,
                    referenced_itt: RESERVED_TAG,
                };
                (r, What::TaskMgmt(function))
            }
            Job::Ping => (Request::Ping, What::Ping),
            Job::Logout => (Request::Logout, What::Logout),
        })
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

    /// Notes one frame from the target before the core sees it. Returns
    /// whether it answers the Logout sent: the core must then end the
    /// connection (RFC 7143 §11.15).
    pub(super) fn note_frame(&mut self, frame: &Frame, run: &mut InitiatorRun) -> bool {
        let Ok(pdu) = Pdu::decode(&frame.bhs) else {
            return false;
        };
        self.note(&pdu, &frame.data, run);
        match &pdu {
            Pdu::LogoutResponse(r) => {
                self.own_logout == Some(r.itt)
                    || self
                        .live_itt(r.itt)
                        .is_some_and(|t| t.in_flight && matches!(t.what, What::Logout))
            }
            _ => false,
        }
    }

    /// An Asynchronous Message the core reported.
    pub(super) fn async_event(
        &mut self,
        event: AsyncEvent,
        parameters: [u16; 3],
        now: Instant,
        run: &mut InitiatorRun,
    ) {
        run.async_events += 1;
        if event == AsyncEvent::LOGOUT_REQUEST && self.logout_asked.is_none() && !self.logout_sent {
            self.logout_asked = Some((now, parameters[2]));
        }
    }

    /// The state the core leaves after each input.
    pub(super) fn check_state(&self, core: &InitiatorCore<u32>) {
        let in_use = core.tasks_in_use();
        if !core.uses_connection() {
            assert_eq!(in_use, 0, "tags in use without a connection");
            return;
        }
        let own = usize::from(self.own_logout.is_some());
        assert_eq!(
            in_use,
            self.live.len() + own,
            "the session holds {in_use} tags for {} live tasks",
            self.live.len()
        );
        assert!(in_use <= self.max_tasks + own, "{in_use} tags in use");
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
        // RFC 7143 §11.9.1: the Logout the target asked for is due within
        // Parameter3 seconds; until it is sent the core must mean to act
        // by then.
        if let (Some((at, secs)), false) = (self.logout_asked, self.logout_sent) {
            let due = at + Duration::from_secs(u64::from(secs));
            assert!(
                core.poll_timeout().is_some_and(|t| t <= due),
                "the target asked for a logout within {secs} s; the core has not sent it and wakes at {:?}",
                core.poll_timeout().map(|t| t.saturating_duration_since(at))
            );
        }
    }

    pub(super) fn completed(&mut self, c: Completed<u32>, run: &mut InitiatorRun) {
        if self.refused.remove(&c.token) {
            assert!(
                matches!(
                    c.result,
                    Err(TaskError::Refused(_) | TaskError::ConnectionFailed(_))
                ),
                "a refused task completed with {:?}",
                c.result
            );
            return;
        }
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
                    Some((r.response, r.status)),
                    t.status,
                    "a command completed with another status than the target's"
                );
                if r.response == ServiceResponse::COMMAND_COMPLETED && r.status == Status::GOOD {
                    run.good += 1;
                }
                run.read_bytes += r.data.len() as u64;
            }
            (Reply::Text(_), What::Text) => run.text_replies += 1,
            (Reply::TaskMgmt(_), What::TaskMgmt(_)) => run.tmf_replies += 1,
            (Reply::Nop(_), What::Ping) => run.nop_replies += 1,
            // The core ends the connection after it (RFC 7143 §11.15).
            (Reply::Logout(_), What::Logout) => {}
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
    pub(super) fn send(&mut self, p: OutPdu, run: &mut InitiatorRun, out: &mut Vec<u8>) {
        assert!(
            !self.ended,
            "the initiator sent {:?} after the connection ended",
            p.pdu
        );
        let new_request = match &p.pdu {
            Pdu::ScsiCommand(_) | Pdu::TaskMgmtRequest(_) | Pdu::LogoutRequest(_) => true,
            Pdu::TextRequest(t) => t.ttt == RESERVED_TAG,
            Pdu::NopOut(n) => n.itt != RESERVED_TAG,
            _ => false,
        };
        assert!(
            !(new_request && self.logout_sent),
            "a new request after the Logout Request (RFC 7143 §11.14): {:?}",
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
            Pdu::NopOut(n) => self.nop_out(n, &p.pdu, run),
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
            Pdu::LogoutRequest(r) => self.logout(r, &p.pdu),
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

    /// A NOP-Out: an answer to the target's ping, a ping of ours, or a
    /// keep-alive (RFC 7143 §11.18).
    fn nop_out(&mut self, n: &NopOut, p: &Pdu, run: &mut InitiatorRun) {
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
            let t = self.sending(n.itt, p);
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
        self.cmd_sn(n.cmd_sn, n.immediate, p);
    }

    /// A Logout Request: the harness's, or the core's own.
    fn logout(&mut self, r: &LogoutRequest, p: &Pdu) {
        if self.by_itt.contains_key(&r.itt) {
            let t = self.sending(r.itt, p);
            assert!(matches!(t.what, What::Logout), "Logout for {:?}", t.what);
            t.sent();
        } else {
            // The core's own: only when the target asked for it
            // (RFC 7143 §11.9.1), closing a connection or the
            // session.
            assert!(
                self.logout_asked.is_some(),
                "a Logout neither the driver nor the target asked for: {r:?}"
            );
            assert!(
                matches!(
                    r.reason,
                    LogoutReason::CLOSE_SESSION | LogoutReason::CLOSE_CONNECTION
                ),
                "a requested logout with reason {}",
                r.reason
            );
            self.own_logout = Some(r.itt);
        }
        self.logout_sent = true;
        self.cmd_sn(r.cmd_sn, r.immediate, p);
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

    /// The session ended: every task was answered or handed back.
    pub(super) fn check_end(&self) {
        assert!(
            self.live.is_empty(),
            "tasks never completed: {:?}",
            self.live.keys().collect::<Vec<_>>()
        );
        assert!(
            self.refused.is_empty(),
            "refused requests never answered: {:?}",
            self.refused
        );
    }

    /// A SCSI command the core handed back for another path.
    pub(super) fn orphaned(&mut self, req: &ScsiRequest, token: u32, run: &mut InitiatorRun) {
        assert!(
            self.settings.take_back,
            "a command handed back with failover off"
        );
        if self.refused.remove(&token) {
            return; // handed in after the end
        }
        let Some(t) = self.live.remove(&token) else {
            panic!("the core handed back task {token}, which is not live");
        };
        self.by_itt.remove(&t.itt);
        assert_eq!(
            t.request().map(|r| r.cdb),
            Some(req.cdb),
            "the core handed back another command"
        );
        run.taken_back += 1;
    }
}
