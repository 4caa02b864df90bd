//! Task management requests (RFC 7143 §11.5).

use super::*;

/// A Task Management Function Request (RFC 7143 §11.5).
pub(super) fn tmf_pdu(
    h: Header,
    function: TmfFunction,
    lun: Lun,
    referenced: u32,
    ref_cmd_sn: u32,
) -> OutPdu {
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

impl<T> InitiatorSession<T> {
    /// A task management function (RFC 7143 §11.5), sent immediately.
    pub fn submit_task_mgmt(
        &mut self,
        function: TmfFunction,
        lun: Lun,
        referenced_itt: u32,
        token: T,
    ) -> Result<u32, Refused<T>> {
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

    /// The SCSI command a completed ABORT TASK ended: the target sends no
    /// response for it (RFC 7143 §11.5.1), so its tag would otherwise stay
    /// held until the connection ends. `None` for any other function or
    /// response, or a command no longer live.
    pub(super) fn aborted_by(&self, tmf_itt: u32, response: TmfResponse) -> Option<u32> {
        let Body::TaskMgmt {
            function,
            referenced_itt,
            ..
        } = &self.find(tmf_itt)?.body
        else {
            return None;
        };
        if *function != TmfFunction::ABORT_TASK || response != TmfResponse::FUNCTION_COMPLETE {
            return None;
        }
        let task = self.find(*referenced_itt)?;
        (task.sent && matches!(task.body, Body::Scsi(_))).then_some(*referenced_itt)
    }
}
