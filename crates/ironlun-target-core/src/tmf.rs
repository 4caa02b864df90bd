//! Task management carried out: on the LUs, on this connection's tasks
//! and, through signals, on other sessions' (RFC 7143 §11.5, SAM-5 §7).

use ironlun_proto::target::{tmf, AbortScope, TmfAction, TmfPlan, TmfRequest};
use ironlun_scsi::{LunMap, NexusId};
use ironlun_wire::TmfResponse;
use tracing::debug;

use crate::action::SessionSignal;
use crate::core::ConnCore;

impl ConnCore {
    /// Carries out a task management function as [`TmfRequest::plan`]
    /// decides it. This connection's tasks are aborted by the protocol
    /// before the response; other sessions' tasks on the same LU (one
    /// shared task set: TST=000b) are ended through their signals.
    pub(crate) fn task_management(&mut self, req: TmfRequest) {
        let index = req.lun.index();
        let lus = self.lus();
        let map = lus.map(|l| (l.map.clone(), l.nexus));
        let plan = req.plan(index.is_some_and(|n| lus.is_some_and(|l| l.map.get(n).is_some())));
        if let Some((m, nexus)) = &map {
            sanitize_waits_end(m, *nexus, index, &plan);
        }
        let mut response = plan.response;
        let abort = |lun, cleared| SessionSignal::Abort { lun, cleared };
        match plan.action {
            TmfAction::Nothing => {}
            TmfAction::ClearTaskSet => self.signal_others(abort(index, true)),
            TmfAction::ResetLu => {
                if let (Some((m, _)), Some(n)) = (&map, index) {
                    m.reset_lu(n);
                }
                self.signal_others(abort(index, false));
            }
            TmfAction::ResetTarget { cold } => {
                if let Some((m, _)) = &map {
                    m.reset_all();
                }
                self.signal_others(if cold {
                    // Every other session closes now; this one after its
                    // response (the protocol closes it).
                    SessionSignal::Close("target cold reset by another initiator")
                } else {
                    abort(None, false)
                });
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
        self.conn_mut().finish_tmf(req.itt, response, plan.scope);
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
