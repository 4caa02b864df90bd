//! [`ConnCore`]: one connection's protocol core and the target's LUs,
//! joined.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ironlun_proto::target::{
    AbortMark, AbortScope, CloseReason, Event, ScsiResult, ScsiTask, TargetConnection,
};
use ironlun_proto::OutPdu;
use ironlun_scsi::{
    IoKind, ItNexus, LogicalUnit, LunMap, NexusId, Request, Response, Sense, Start,
};
use ironlun_scsi_codes::{Asc, SenseCode, SenseKey, Status};
use ironlun_wire::{Frame, Lun, WireError};
use tracing::warn;

use crate::abort_wait::{AbortHold, AbortWait};
use crate::action::{Action, Command, Done, Recipients, SessionSignal, Staged};

/// Where commands run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Commands that cannot block (RAM and null LUs, reads a file LU
    /// serves from memory) run inside the core; the others are handed
    /// out as [`Action::Run`] or [`Action::Stage`]. The daemon.
    Inline,
    /// Every command is handed out as [`Action::Run`] (or
    /// [`Action::Stage`]): the driver decides when each finishes. The fuzz
    /// harness, which holds commands as a slow backend would and checks
    /// every response.
    Driver,
}

/// A normal session's view of the target's LUs.
pub struct Lus {
    pub map: Arc<LunMap>,
    /// This session's I_T nexus.
    pub nexus: NexusId,
    /// Who the nexus is (reservations and unit attentions key on it).
    pub identity: ItNexus,
    /// The session reinstated one of the same nexus (RFC 7143 §6.3.5).
    pub replaced: bool,
}

/// One connection in full feature phase: feed it frames, time and
/// completions; take its [`Action`]s, then its PDUs.
///
/// Every input runs the protocol's events to the end before it returns,
/// so what a PDU asked for (a command, task management) has been done or
/// handed out before the next PDU is seen: task management finds commands
/// in the state their order on the wire implies.
pub struct ConnCore {
    conn: TargetConnection,
    /// `None` for a discovery session.
    lus: Option<Lus>,
    dispatch: Dispatch,
    /// Medium access of file and block LUs goes out as [`Action::Stage`].
    stage: bool,
    actions: VecDeque<Action>,
    close: Option<CloseReason>,
    /// The time of the last input that brought one.
    pub(crate) now: Option<Instant>,
    /// This connection's task management responses waiting for other
    /// sessions to end the tasks they aborted there.
    pub(crate) waits: Vec<Waiting>,
    /// Other sessions' waits on tasks of this connection their task
    /// management ended (a `None` hold: nobody waits, as for PREEMPT AND
    /// ABORT, but the protocol's record is still settled).
    holds: Vec<(AbortMark, Option<AbortHold>)>,
    /// The connection is going away: holds need no acknowledgement.
    ending: bool,
    /// Commands handed out as [`Action::Run`] and not finished, by ITT:
    /// the flag an abort sets so that one not yet started never runs.
    running: HashMap<u32, Arc<AtomicBool>>,
    /// Commands whose status was queued, waiting for the driver to say
    /// when it hands them to the socket ([`ConnCore::statuses_sent`]);
    /// `None` while latency is not measured.
    answered: Option<Vec<Answered>>,
}

/// A command whose status is queued: what its latency needs.
struct Answered {
    lun: u16,
    kind: IoKind,
    arrived: Instant,
}

/// Most statuses [`ConnCore::statuses_sent`] is waited for: a driver that
/// calls it after each batch never comes near; one that does not call it
/// loses latencies past this, not memory.
const MAX_ANSWERED: usize = 4096;

/// A task management response held until other sessions release it, or
/// until the deadline.
pub(crate) struct Waiting {
    pub(crate) itt: u32,
    pub(crate) wait: AbortWait,
    pub(crate) deadline: Option<Instant>,
}

impl ConnCore {
    /// Takes over a connection whose login completed. A normal session's
    /// nexus is registered with every LU (its first command sees the
    /// unit attention SAM-5 §6.3.1 asks for).
    pub fn new(conn: TargetConnection, lus: Option<Lus>, dispatch: Dispatch, stage: bool) -> Self {
        if let Some(l) = &lus {
            l.map.attach_nexus(l.nexus, &l.identity, l.replaced);
        }
        ConnCore {
            conn,
            lus,
            dispatch,
            stage,
            actions: VecDeque::new(),
            close: None,
            now: None,
            waits: Vec::new(),
            holds: Vec::new(),
            ending: false,
            running: HashMap::new(),
            answered: None,
        }
    }

    /// The session's LUN map changed while it runs (an operator added,
    /// removed or remapped LUNs): later commands see `map`; the nexus is
    /// attached to and detached from LUs as
    /// [`LunMap::change_to`] says. Commands already running finish on the
    /// LU they started on. Whether REPORT LUNS now answers differently.
    pub fn set_map(&mut self, map: Arc<LunMap>) -> bool {
        let Some(l) = self.lus.as_mut() else {
            return false;
        };
        let changed = l.map.change_to(&map, l.nexus, &l.identity);
        if let Some(answered) = &mut self.answered {
            // A LUN number that now names another LU: its statuses' time
            // would land on the wrong LU's histogram.
            answered.retain(|a| same_lu(&l.map, &map, a.lun));
        }
        l.map = map;
        changed
    }

    /// This session's LUN map (none for discovery).
    pub fn map(&self) -> Option<&Arc<LunMap>> {
        self.lus.as_ref().map(|l| &l.map)
    }

    /// Measures each command's latency, from the arrival of its SCSI
    /// Command PDU to its status leaving: the driver then calls
    /// [`ConnCore::statuses_sent`] as it hands PDUs to the socket.
    pub fn measure_latency(&mut self) {
        self.answered.get_or_insert_with(Vec::new);
    }

    /// The statuses queued since the last call are being sent now:
    /// each command's time goes to its LU's latency histogram, under the
    /// kind its counters counted it as (commands no LU counted, and those
    /// answered without a status, have none). `now` is asked only if
    /// there is something to time.
    #[inline]
    pub fn statuses_sent(&mut self, now: impl FnOnce() -> Instant) {
        let Some(answered) = self.answered.as_mut().filter(|a| !a.is_empty()) else {
            return;
        };
        let now = now();
        if let Some(l) = &self.lus {
            // Consecutive statuses are mostly for one LUN: look it up once.
            let mut last: Option<(u16, &Arc<LogicalUnit>)> = None;
            for a in answered.iter() {
                let lu = match last {
                    Some((n, lu)) if n == a.lun => Some(lu),
                    _ => l.map.get(a.lun),
                };
                if let Some(lu) = lu {
                    lu.record_latency(a.kind, now.saturating_duration_since(a.arrived));
                    last = Some((a.lun, lu));
                }
            }
        }
        answered.clear();
    }

    /// The protocol core, to read its state (timeouts, tasks, counters).
    #[inline]
    pub fn conn(&self) -> &TargetConnection {
        &self.conn
    }

    /// Whether medium access is handed out for a ring (the driver turns
    /// it off when it finds it has none).
    pub fn set_staging(&mut self, on: bool) {
        self.stage = on;
    }

    pub fn handle_frame(&mut self, frame: Frame, now: Instant) {
        self.now = Some(now);
        self.conn.handle_frame(frame, now);
        self.run_events();
    }

    /// Bytes that do not decode: the protocol decides (it closes).
    pub fn handle_frame_error(&mut self, err: &WireError) {
        self.conn.handle_frame_error(err);
        self.run_events();
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = Some(now);
        self.conn.handle_timeout(now);
        self.release_waits(Some(now));
        self.run_events();
    }

    /// When [`ConnCore::handle_timeout`] must next be called: the
    /// protocol's timers, and the bound on a task management response
    /// waiting for other sessions.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let waits = self.waits.iter().filter_map(|w| w.deadline).min();
        match (self.conn.poll_timeout(), waits) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The target asks the initiator to log out within `wait`.
    pub fn request_logout(&mut self, now: Instant, wait: Duration) {
        self.conn.request_logout(now, wait);
        self.run_events();
    }

    /// A command handed out earlier finished.
    pub fn completed(&mut self, done: Done) {
        if !self.running.is_empty() {
            self.running.remove(&done.itt);
        }
        self.finish(done);
        self.run_events();
    }

    /// [`ConnCore::abort_for_other`] with nobody waiting.
    pub fn abort_from_other(&mut self, lun: Option<u16>, cleared: bool) -> usize {
        self.abort_for_other(lun, cleared, None)
    }

    /// Another session's task management ended this session's tasks on
    /// `lun` (all LUNs with `None`). On an LU with TAS=1 each ends with
    /// TASK ABORTED status (SAM-5 §5.6, SPC-5 §7.5.8): a write still
    /// waiting for Data-Out at once, a command already running when it
    /// finishes. With TAS=0 they end silently, and with `cleared`, if any
    /// ended, the LU tells this nexus COMMANDS CLEARED BY ANOTHER
    /// INITIATOR (SAM-5 §7.5). `hold` is dropped once the ended tasks are
    /// gone and the initiator has acknowledged their statuses
    /// (RFC 7143 §4.2.3.3). How many tasks ended.
    pub fn abort_for_other(
        &mut self,
        lun: Option<u16>,
        cleared: bool,
        hold: Option<AbortHold>,
    ) -> usize {
        let scope = lun.map_or(AbortScope::All, |n| AbortScope::Lun(Lun::from_index(n)));
        let map = self.lus.as_ref().map(|l| l.map.clone());
        let tas_of = |n: Option<u16>| {
            n.and_then(|n| map.as_ref()?.get(n).map(|lu| lu.tas()))
                .unwrap_or(false)
        };
        let (mark, ended) = self.conn.abort_by_other(scope, |l| tas_of(l.index()));
        self.flag_aborted();
        if ended > 0 && cleared && !tas_of(lun) {
            if let (Some(n), Some(l)) = (lun, &self.lus) {
                l.map.commands_cleared(n, l.nexus);
            }
        }
        self.holds.push((mark, hold));
        self.run_events();
        ended
    }

    /// The driver stops serving the connection (it only waits for running
    /// commands now): the initiator can no longer acknowledge statuses,
    /// so other sessions' holds are released as soon as the tasks end.
    pub fn connection_ending(&mut self) {
        self.ending = true;
        self.settle_holds();
    }

    #[inline]
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Whether [`ConnCore::poll_action`] has anything (most inputs hand
    /// nothing out: a cheap check first).
    #[inline]
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// The next PDU to send. A task management response whose wait for
    /// other sessions is over joins the queue first.
    #[inline]
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<OutPdu> {
        if !self.waits.is_empty() {
            self.release_waits(None);
        }
        self.conn.poll_transmit()
    }

    /// Why the protocol asked to close, once it did: send what
    /// [`ConnCore::poll_transmit`] gives, then close.
    #[inline]
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.close.as_ref()
    }

    #[inline]
    pub fn is_closing(&self) -> bool {
        self.conn.is_closing()
    }

    /// Runs the protocol's events; finishing a task may queue more.
    fn run_events(&mut self) {
        while let Some(ev) = self.conn.poll_event() {
            match ev {
                Event::Execute(task) => self.execute(task),
                Event::FailTask { itt, lun, sense } => self.fail(itt, lun, sense),
                Event::TaskManagement(req) => self.task_management(req),
                Event::Close(reason) => {
                    self.close.get_or_insert(reason);
                }
            }
        }
        self.settle_holds();
    }

    /// Tells the commands waiting for a thread that they were aborted.
    pub(crate) fn flag_aborted(&mut self) {
        for (itt, flag) in &self.running {
            if self.conn.is_aborted(*itt) {
                flag.store(true, Ordering::Release);
            }
        }
    }

    /// Drops the holds whose tasks are gone (and acknowledged): the
    /// waiting sessions may answer.
    fn settle_holds(&mut self) {
        if self.holds.is_empty() {
            return;
        }
        let need_ack = !self.ending;
        let conn = &mut self.conn;
        self.holds
            .retain(|(mark, _)| !conn.third_party_settled(*mark, need_ack));
    }

    /// The protocol found the task's data transfer broken: CHECK
    /// CONDITION with its sense, in the LU's sense format.
    fn fail(&mut self, itt: u32, lun: Lun, sense: SenseCode) {
        let r = match &self.lus {
            Some(l) => l.map.check_condition(lun.index(), Sense::from_code(sense)),
            None => Response::default(),
        };
        self.conn.complete(itt, to_result(r));
    }

    fn execute(&mut self, task: ScsiTask) {
        let Some(l) = &self.lus else {
            // Discovery sessions never execute SCSI (the protocol rejects
            // the command before this point).
            self.conn.complete(task.itt, ScsiResult::default());
            return;
        };
        let lun = task.lun.index();
        let lu = lun.and_then(|n| l.map.get(n));
        let cdb = task.cdb.as_slice();
        // has_files first: RAM and null LUs skip the staging checks. A
        // store with its own asynchronous path (RBD) is staged whether or
        // not the driver has a ring.
        let staged = |lu: &&Arc<LogicalUnit>| {
            ((self.stage && lu.has_files()) || lu.has_async_medium())
                && lu.stageable(cdb, task.data_out.len())
        };
        if let Some(lu) = lu.filter(staged) {
            match start(lu, l, &task) {
                None => {}
                Some(Start::Done(response)) => {
                    return self.finish(Done {
                        itt: task.itt,
                        lun,
                        response,
                    })
                }
                Some(Start::Io(io)) => {
                    let itt = task.itt;
                    return self
                        .actions
                        .push_back(Action::Stage(Staged { itt, lun, io }));
                }
            }
        }
        let may_block = lu.is_some_and(|lu| lu.may_block(cdb, task.expected_data_transfer_length));
        if may_block || self.dispatch == Dispatch::Driver {
            let aborted = Arc::new(AtomicBool::new(false));
            self.running.insert(task.itt, aborted.clone());
            let cmd = Command {
                lun,
                nexus: l.nexus,
                map: Arc::clone(&l.map),
                task,
                aborted,
            };
            return self.actions.push_back(Action::Run(cmd));
        }
        let response = l.map.execute(lun, l.nexus, cdb, &task.data_out);
        self.finish(Done {
            itt: task.itt,
            lun,
            response,
        });
    }

    /// Hands a response to the protocol. If the command aborted other
    /// nexuses' tasks (PREEMPT AND ABORT, SPC-4 §5.13.12.2), their
    /// sessions are told to end them.
    fn finish(&mut self, done: Done) {
        let Done { itt, lun, response } = done;
        if response.status == Status::CHECK_CONDITION {
            self.note_space(lun, &response);
        }
        if !response.abort_nexuses.is_empty() {
            self.actions.push_back(Action::Signal {
                to: Recipients::Nexuses(response.abort_nexuses.clone()),
                signal: SessionSignal::Abort {
                    lun,
                    cleared: false,
                    hold: None,
                },
            });
        }
        let kind = response.counted;
        let arrived = self.conn.complete(itt, to_result(response));
        if let (Some(answered), Some(lun), Some(kind), Some(arrived)) =
            (&mut self.answered, lun, kind, arrived)
        {
            if answered.len() < MAX_ANSWERED {
                answered.push(Answered { lun, kind, arrived });
            }
        }
    }

    /// A write refused for want of space is logged once per episode, with
    /// the LUN and the space left (SBC-4 §4.7.3.6); the initiator has its
    /// DATA PROTECT sense, reads and other LUs go on.
    fn note_space(&self, lun: Option<u16>, r: &Response) {
        let full = SenseCode::new(
            SenseKey::DATA_PROTECT,
            Asc::SPACE_ALLOCATION_FAILED_WRITE_PROTECT,
        );
        if SenseCode::parse(&r.sense) != Some(full) {
            return;
        }
        let Some((n, lu)) = lun.and_then(|n| Some((n, self.lus.as_ref()?.map.get(n)?))) else {
            return;
        };
        if lu.space_refused() {
            let free = lu.backend().free_bytes();
            warn!(
                lun = n,
                free_bytes = ?free,
                "out of space: writes to this LUN fail with DATA PROTECT / SPACE ALLOCATION FAILED WRITE PROTECT until space is freed; reads and other LUNs go on"
            );
        }
    }

    /// Asks every other session of the target to act.
    pub(crate) fn signal_others(&mut self, signal: SessionSignal) {
        self.actions.push_back(Action::Signal {
            to: Recipients::AllOthers,
            signal,
        });
    }

    pub(crate) fn lus(&self) -> Option<&Lus> {
        self.lus.as_ref()
    }

    pub(crate) fn conn_mut(&mut self) -> &mut TargetConnection {
        &mut self.conn
    }
}

/// Whether `lun` names the same LU in both maps.
fn same_lu(old: &LunMap, new: &LunMap, lun: u16) -> bool {
    matches!((old.get(lun), new.get(lun)), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
}

/// The device's checks and, if they pass, its medium access to stage.
fn start(lu: &Arc<LogicalUnit>, l: &Lus, task: &ScsiTask) -> Option<Start> {
    lu.start(&Request {
        nexus: l.nexus,
        cdb: task.cdb.as_slice(),
        data_out: &task.data_out,
        map: &l.map,
    })
}

/// The device's response as the protocol's result (the transport works
/// out residuals from the transfer length, RFC 7143 §11.4.5).
fn to_result(r: Response) -> ScsiResult {
    ScsiResult {
        status: r.status,
        sense: r.sense,
        data_in: r.data,
        transfer_length: r.transfer_length,
    }
}
