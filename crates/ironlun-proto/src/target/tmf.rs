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
    pub(super) fn covers(self, tag: u32, task: &Task) -> bool {
        match self {
            AbortScope::None => false,
            AbortScope::Task(rtt) => tag == rtt,
            // The same LU however the initiator addressed it.
            AbortScope::Lun(lun) => lun.index().is_some() && task.cmd.lun.index() == lun.index(),
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

    pub(super) fn abort_task(&mut self, itt: u32) {
        let Some(task) = self.tasks.get_mut(&itt) else {
            return;
        };
        let newly = !task.aborted;
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
        if newly {
            self.observe(|o| o.tasks_aborted(1));
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
            self.observe(|o| o.task_management(p.function, p.response));
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
