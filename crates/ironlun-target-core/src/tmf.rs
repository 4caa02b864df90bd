//! Task management carried out: on the LUs, on this connection's tasks
//! and, through signals, on other sessions' (RFC 7143 §11.5, SAM-5 §7).

use std::time::{Duration, Instant};

use ironlun_proto::target::{tmf, AbortScope, TmfAction, TmfPlan, TmfRequest};
use ironlun_scsi::{LunMap, NexusId};
use ironlun_wire::TmfResponse;
use tracing::{debug, warn};

use crate::abort_wait::AbortWait;
use crate::action::SessionSignal;
use crate::core::{ConnCore, Waiting};

/// Longest a task management response waits for other sessions to end
/// the tasks it aborted there. Past it the response goes out anyway
/// (the function was carried out; only its order against the other
/// sessions' statuses is lost) and a warning is logged: a recipient whose
/// backend hangs, or whose initiator never acknowledges, cannot hold the
/// requester up for longer than this, well inside an initiator's task
/// management timeout (30 s for open-iscsi's LU reset).
pub const OTHERS_WAIT_LIMIT: Duration = Duration::from_secs(10);

impl ConnCore {
    /// Carries out a task management function as [`TmfRequest::plan`]
    /// decides it. This connection's tasks are aborted by the protocol
    /// before the response; other sessions' tasks on the same LU (one
    /// shared task set: TST=000b) are ended through their signals, and
    /// the response waits until they are gone.
    pub(crate) fn task_management(&mut self, req: TmfRequest) {
        let index = req.lun.index();
        let lus = self.lus();
        let map = lus.map(|l| (l.map.clone(), l.nexus));
        let plan = req.plan(index.is_some_and(|n| lus.is_some_and(|l| l.map.get(n).is_some())));
        if let Some((m, nexus)) = &map {
            sanitize_waits_end(m, *nexus, index, &plan);
        }
        let mut response = plan.response;
        // Other sessions' tasks to end: (LUN, by CLEAR TASK SET).
        let mut others = None;
        match plan.action {
            TmfAction::Nothing => {}
            TmfAction::ClearTaskSet => others = Some((index, true)),
            TmfAction::ResetLu => {
                if let (Some((m, nexus)), Some(n)) = (&map, index) {
                    m.reset_lu_from(n, *nexus);
                }
                others = Some((index, false));
            }
            TmfAction::ResetTarget { cold } => {
                if let Some((m, _)) = &map {
                    m.reset_all();
                }
                if cold {
                    // Every other session closes now; this one after its
                    // response (the protocol closes it).
                    self.signal_others(SessionSignal::Close(
                        "target cold reset by another initiator",
                    ));
                } else {
                    others = Some((None, false));
                }
            }
            TmfAction::ResetNexus => {
                if let Some((m, nexus)) = &map {
                    m.nexus_reset(*nexus);
                }
            }
            TmfAction::Query(scope) => {
                response = tmf::query_response(self.conn().has_tasks(scope));
            }
        }
        debug!(function = %req.function, %response, "task management");
        if let Some((lun, cleared)) = others.filter(|_| response == TmfResponse::FUNCTION_COMPLETE)
        {
            self.abort_others_and_wait(req.itt, lun, cleared);
        }
        self.conn_mut().finish_tmf(req.itt, response, plan.scope);
        self.flag_aborted();
    }

    /// Asks every other session to end its tasks on `lun` and holds the
    /// response to `itt` until they have (SAM-5 §7.11; RFC 7143
    /// §4.2.3.3), or until [`OTHERS_WAIT_LIMIT`].
    fn abort_others_and_wait(&mut self, itt: u32, lun: Option<u16>, cleared: bool) {
        let (wait, hold) = AbortWait::new();
        self.signal_others(SessionSignal::Abort {
            lun,
            cleared,
            hold: Some(hold),
        });
        self.conn_mut().hold_tmf(itt);
        let deadline = self.now.and_then(|t| t.checked_add(OTHERS_WAIT_LIMIT));
        self.waits.push(Waiting {
            itt,
            wait,
            deadline,
        });
    }

    /// Lets go the responses whose wait is over: every hold released, or
    /// (with the time) the deadline passed.
    pub(crate) fn release_waits(&mut self, now: Option<Instant>) {
        let mut i = 0;
        while let Some(w) = self.waits.get(i) {
            let expired = matches!((now, w.deadline), (Some(n), Some(d)) if n >= d);
            if !w.wait.is_released() && !expired {
                i = i.saturating_add(1);
                continue;
            }
            let w = self.waits.remove(i);
            if !w.wait.is_released() {
                warn!(
                    itt = w.itt,
                    "task management response sent before other sessions ended the tasks it aborted (waited {OTHERS_WAIT_LIMIT:?})"
                );
            }
            self.conn_mut().release_tmf(w.itt);
        }
    }
}

/// The LUs learn which tasks `plan` aborts, so that a SANITIZE command
/// (IMMED=0) among them stops waiting for its operation, which goes on
/// (SBC-4 §4.11.2): the abort completes now, not when the operation does.
/// A reset or CLEAR TASK SET aborts every nexus's tasks.
fn sanitize_waits_end(map: &LunMap, nexus: NexusId, lun: Option<u16>, plan: &TmfPlan) {
    if plan.response != TmfResponse::FUNCTION_COMPLETE {
        return;
    }
    let whose = match plan.action {
        TmfAction::ClearTaskSet | TmfAction::ResetLu | TmfAction::ResetTarget { .. } => None,
        _ => Some(nexus),
    };
    match (plan.scope, lun) {
        (AbortScope::Task(_) | AbortScope::Lun(_), Some(n)) => map.tasks_aborted(Some(n), whose),
        (AbortScope::All, _) => map.tasks_aborted(None, whose),
        _ => {}
    }
}
