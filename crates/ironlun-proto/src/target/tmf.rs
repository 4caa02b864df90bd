//! Task management (RFC 7143 §11.5, §11.6): what each function
//! ([`TmfFunction`], named in ironlun-wire with the response codes,
//! [`TmfResponse`]) does to this connection's tasks, and the tasks waiting
//! for one.

use super::*;

/// QUERY TASK / QUERY TASK SET: FUNCTION SUCCEEDED when the tasks
/// exist (SAM-5 §7.8, §7.9).
pub fn query_response(found: bool) -> TmfResponse {
    if found {
        TmfResponse::FUNCTION_SUCCEEDED
    } else {
        TmfResponse::FUNCTION_COMPLETE
    }
}

/// A task management request for the driver to decide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmfRequest {
    pub itt: u32,
    pub function: TmfFunction,
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
    pub response: TmfResponse,
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
            (TmfFunction::ABORT_TASK, _) => plan(
                TmfResponse::FUNCTION_COMPLETE,
                AbortScope::Task(self.referenced_task_tag),
                TmfAction::Nothing,
            ),
            (TmfFunction::ABORT_TASK_SET, true) => {
                plan(TmfResponse::FUNCTION_COMPLETE, lun, TmfAction::Nothing)
            }
            (TmfFunction::CLEAR_TASK_SET, true) => {
                plan(TmfResponse::FUNCTION_COMPLETE, lun, TmfAction::ClearTaskSet)
            }
            (TmfFunction::LOGICAL_UNIT_RESET, true) => {
                plan(TmfResponse::FUNCTION_COMPLETE, lun, TmfAction::ResetLu)
            }
            (
                TmfFunction::ABORT_TASK_SET
                | TmfFunction::CLEAR_TASK_SET
                | TmfFunction::LOGICAL_UNIT_RESET
                | TmfFunction::QUERY_TASK
                | TmfFunction::QUERY_TASK_SET,
                false,
            ) => plan(
                TmfResponse::LUN_DOES_NOT_EXIST,
                AbortScope::None,
                TmfAction::Nothing,
            ),
            (TmfFunction::TARGET_WARM_RESET | TmfFunction::TARGET_COLD_RESET, _) => plan(
                TmfResponse::FUNCTION_COMPLETE,
                AbortScope::All,
                TmfAction::ResetTarget {
                    cold: self.function == TmfFunction::TARGET_COLD_RESET,
                },
            ),
            (TmfFunction::I_T_NEXUS_RESET, _) => plan(
                TmfResponse::FUNCTION_COMPLETE,
                AbortScope::All,
                TmfAction::ResetNexus,
            ),
            (TmfFunction::QUERY_TASK, true) => plan(
                TmfResponse::FUNCTION_COMPLETE,
                AbortScope::None,
                TmfAction::Query(AbortScope::Task(self.referenced_task_tag)),
            ),
            (TmfFunction::QUERY_TASK_SET, true) => plan(
                TmfResponse::FUNCTION_COMPLETE,
                AbortScope::None,
                TmfAction::Query(lun),
            ),
            // No task allegiance reassignment at ERL 0.
            (TmfFunction::TASK_REASSIGN, _) => plan(
                TmfResponse::REASSIGNMENT_NOT_SUPPORTED,
                AbortScope::None,
                TmfAction::Nothing,
            ),
            // CLEAR ACA (NACA is never accepted, so there is no ACA) and
            // QUERY ASYNCHRONOUS EVENT.
            _ => plan(
                TmfResponse::NOT_SUPPORTED,
                AbortScope::None,
                TmfAction::Nothing,
            ),
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

pub(super) struct PendingTmf {
    itt: u32,
    function: TmfFunction,
    response: TmfResponse,
    windowed: bool,
    /// The driver has decided the response.
    decided: bool,
    /// The driver holds the response back (other sessions are still
    /// ending the tasks it aborted), until [`TargetConnection::release_tmf`].
    held: bool,
}

/// Most third-party aborts a connection tracks at once; past it the
/// oldest is given up (its requester stops waiting for it).
const MAX_THIRD_PARTY: usize = 64;

/// One abort by another I_T nexus, as [`TargetConnection::abort_by_other`]
/// returns it: the handle to ask whether its tasks are gone
/// ([`TargetConnection::third_party_settled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortMark(u64);

/// The tasks one third-party abort ended, until they are gone and the
/// initiator has acknowledged their TASK ABORTED statuses.
pub(super) struct ThirdParty {
    mark: AbortMark,
    /// Its tasks that were executing when aborted.
    executing: Vec<u32>,
    /// A TASK ABORTED status went out for one of its tasks.
    answered: bool,
    /// Once every task is gone, the StatSN the initiator must acknowledge
    /// (RFC 7143 §4.2.3.3 d: the statuses sent before the task
    /// management response must have reached it).
    ack_from: Option<u32>,
}

impl TargetConnection {
    pub(super) fn on_tmf(&mut self, t: TaskMgmtRequest, windowed: bool) {
        self.tmfs.push(PendingTmf {
            itt: t.itt,
            function: t.function,
            response: TmfResponse::FUNCTION_COMPLETE,
            windowed,
            decided: false,
            held: false,
        });
        if t.function == TmfFunction::ABORT_TASK && !self.tasks.contains_key(&t.referenced_task_tag)
        {
            // RFC 7143 §11.5.1: a task not found whose RefCmdSN lies in the
            // window is considered received and aborted (function
            // complete); otherwise it does not exist.
            let in_window = sn_le(self.window.exp_cmd_sn(), t.ref_cmd_sn)
                && sn_lt(t.ref_cmd_sn, t.cmd_sn.wrapping_add(1));
            let response = if in_window {
                TmfResponse::FUNCTION_COMPLETE
            } else {
                TmfResponse::TASK_DOES_NOT_EXIST
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
    /// tasks that are executing have finished (RFC 7143 §4.2.3.3), and,
    /// if [`TargetConnection::hold_tmf`] held it, once released.
    pub fn finish_tmf(&mut self, itt: u32, response: TmfResponse, scope: AbortScope) {
        let Some(p) = self.tmfs.iter_mut().find(|p| p.itt == itt) else {
            return;
        };
        p.response = response;
        p.decided = true;
        if response == TmfResponse::FUNCTION_COMPLETE {
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

    /// Holds a TMF's response back until [`TargetConnection::release_tmf`]:
    /// the driver waits for other sessions to end the tasks it aborted
    /// there (RFC 7143 §4.2.3.3, SAM-5 §7.11). Call before
    /// [`TargetConnection::finish_tmf`].
    pub fn hold_tmf(&mut self, itt: u32) {
        if let Some(p) = self.tmfs.iter_mut().find(|p| p.itt == itt) {
            p.held = true;
        }
    }

    /// Lets a held TMF response go (once this connection's aborted tasks
    /// are gone too).
    pub fn release_tmf(&mut self, itt: u32) {
        if let Some(p) = self.tmfs.iter_mut().find(|p| p.itt == itt) {
            p.held = false;
        }
        self.check_pending_tmfs();
    }

    /// Whether the task is held and aborted (its execution may still be
    /// running).
    pub fn is_aborted(&self, itt: u32) -> bool {
        self.tasks.get(&itt).is_some_and(|t| t.aborted)
    }

    /// Whether live (not aborted) tasks fall in `scope`: QUERY TASK and
    /// QUERY TASK SET (SAM-5 §7.8, §7.9).
    pub fn has_tasks(&self, scope: AbortScope) -> bool {
        self.tasks
            .iter()
            .any(|(tag, t)| !t.aborted && scope.covers(*tag, t))
    }

    /// Aborts tasks because of another I_T nexus's action (a LOGICAL UNIT
    /// RESET, CLEAR TASK SET or PREEMPT AND ABORT from another session)
    /// as if TAS were 0 everywhere: they end without a response. Returns
    /// how many were aborted.
    pub fn abort_third_party(&mut self, scope: AbortScope) -> usize {
        let (mark, ended) = self.abort_by_other(scope, |_| false);
        self.third_party.retain(|r| r.mark != mark);
        ended
    }

    /// Aborts tasks because of another I_T nexus's action. A task on an
    /// LU where `tas` says TAS=1 ends with TASK ABORTED status (SAM-5
    /// §5.6, SPC-5 §7.5.8): at once if it was still waiting for Data-Out,
    /// when its execution finishes otherwise; with TAS=0 it ends without a
    /// response (RFC 7143 §4.2.3.3). Data-Out still arriving for a task
    /// that ended is discarded, so the target never waits for it. Returns
    /// the abort's mark, for [`TargetConnection::third_party_settled`],
    /// and how many tasks were aborted.
    pub fn abort_by_other(
        &mut self,
        scope: AbortScope,
        tas: impl Fn(Lun) -> bool,
    ) -> (AbortMark, usize) {
        // Tasks already aborted (by this session's own task management)
        // are not aborted again, but are waited for all the same.
        let in_scope: Vec<(u32, bool, bool)> = self
            .tasks
            .iter()
            .filter(|(tag, t)| scope.covers(**tag, t))
            .map(|(tag, t)| (*tag, t.aborted, tas(t.lun)))
            .collect();
        let mark = AbortMark(self.next_mark);
        self.next_mark = self.next_mark.wrapping_add(1);
        let mut record = ThirdParty {
            mark,
            executing: Vec::new(),
            answered: false,
            ack_from: None,
        };
        let mut ended = 0;
        for &(itt, already, answer) in &in_scope {
            if !already {
                ended += 1;
                record.answered |= self.abort_other(itt, answer);
            }
            if self.tasks.contains_key(&itt) {
                record.executing.push(itt);
            }
        }
        if self.third_party.len() >= MAX_THIRD_PARTY {
            self.third_party.remove(0);
        }
        self.third_party.push(record);
        self.check_pending_tmfs();
        self.check_logout();
        (mark, ended)
    }

    /// Aborts one task for another nexus. A task waiting for Data-Out
    /// ends now; an executing one when it finishes. True if a TASK
    /// ABORTED status went out now.
    fn abort_other(&mut self, itt: u32, answer: bool) -> bool {
        let Some(task) = self.tasks.get_mut(&itt) else {
            return false;
        };
        task.aborted = true;
        task.answer_aborted = answer;
        if !matches!(task.state, TaskState::Collecting(_)) {
            return false;
        }
        let Some(task) = self.tasks.remove(&itt) else {
            return false;
        };
        self.release_task_resources(&task);
        self.solicit_queue.retain(|t| *t != itt);
        self.finish_command(task.windowed);
        let answered = answer && !self.closing;
        if answered {
            self.respond(&task, task_aborted(&task));
        }
        answered
    }

    /// An executing task another nexus aborted has finished: its TASK
    /// ABORTED status, if TAS asked for one.
    pub(super) fn end_aborted(&mut self, task: &Task) {
        if !task.answer_aborted || self.closing {
            return;
        }
        self.respond(task, task_aborted(task));
        let itt = task.cmd.itt;
        for r in &mut self.third_party {
            if r.executing.contains(&itt) {
                r.answered = true;
            }
        }
    }

    /// Whether the tasks of a third-party abort are gone and, if any got
    /// a TASK ABORTED status, the initiator has acknowledged it (its
    /// ExpStatSN passed the StatSN sent last when they were gone,
    /// RFC 7143 §4.2.3.3 d; a NOP-In asks for it). `need_ack: false`
    /// skips the acknowledgement (the connection is going away). A
    /// settled mark is forgotten; an unknown one is settled.
    pub fn third_party_settled(&mut self, mark: AbortMark, need_ack: bool) -> bool {
        let Some(pos) = self.third_party.iter().position(|r| r.mark == mark) else {
            return true;
        };
        let tasks = &self.tasks;
        let Some(r) = self.third_party.get_mut(pos) else {
            return true;
        };
        let running = |itt: &u32| tasks.get(itt).is_some_and(|t| t.aborted);
        if r.executing.iter().any(running) {
            return false;
        }
        if r.answered && need_ack && !self.closing {
            let need = *r.ack_from.get_or_insert(self.stat_sn);
            if !sn_le(need, self.exp_stat_sn) {
                self.solicit_ack();
                return false;
            }
        }
        self.third_party.swap_remove(pos);
        true
    }

    /// Asks the initiator to acknowledge the statuses sent so far: a
    /// NOP-In with a TTT, which it answers with a NOP-Out carrying its
    /// ExpStatSN (RFC 7143 §11.19.1). One at a time.
    fn solicit_ack(&mut self) {
        if self.solicit.is_some() {
            return;
        }
        let ttt = self.alloc_ttt();
        self.push_ping(ttt);
        self.solicit = Some(ttt);
    }

    pub(super) fn solicit_answered(&mut self, ttt: u32) {
        if self.solicit == Some(ttt) {
            self.solicit = None;
        }
    }

    pub(super) fn abort_task(&mut self, itt: u32) {
        let Some(task) = self.tasks.get_mut(&itt) else {
            return;
        };
        task.aborted = true;
        // The requester's own tasks end without a response
        // (RFC 7143 §11.5.1), whoever aborted them first.
        task.answer_aborted = false;
        if matches!(task.state, TaskState::Collecting(_)) {
            if let Some(task) = self.tasks.remove(&itt) {
                self.release_task_resources(&task);
                self.finish_command(task.windowed);
            }
            self.solicit_queue.retain(|t| *t != itt);
        }
    }

    pub(super) fn check_pending_tmfs(&mut self) {
        if self.tasks.values().any(|t| t.aborted) {
            return;
        }
        let (decided, waiting): (Vec<PendingTmf>, Vec<PendingTmf>) = std::mem::take(&mut self.tmfs)
            .into_iter()
            .partition(|p| p.decided && !p.held);
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
            if p.function == TmfFunction::TARGET_COLD_RESET
                && p.response == TmfResponse::FUNCTION_COMPLETE
            {
                self.close(CloseReason::TargetColdReset);
            }
        }
        self.pump_r2ts();
    }
}

/// TASK ABORTED (SAM-5 §5.3.1): no data, no sense, no residual.
fn task_aborted(task: &Task) -> ScsiResult {
    ScsiResult {
        status: Status::TASK_ABORTED,
        transfer_length: task.cmd.expected_data_transfer_length,
        ..ScsiResult::default()
    }
}
