//! Tasks another I_T nexus's task management ends on this connection
//! (LOGICAL UNIT RESET, CLEAR TASK SET, target reset, PREEMPT AND ABORT
//! from another session): TASK ABORTED or silence as the LU's TAS bit
//! says (SAM-5 §5.6, SPC-5 §7.5.8), and when they count as ended for the
//! requester's response (RFC 7143 §4.2.3.3): gone, and their statuses
//! acknowledged by the initiator's ExpStatSN.

use super::*;

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
    /// Its tasks still held when aborted (running on a backend), which
    /// must end before it is settled.
    running: Vec<u32>,
    /// A TASK ABORTED status went out for one of its tasks.
    answered: bool,
    /// Once every task is gone, the StatSN the initiator must acknowledge
    /// (RFC 7143 §4.2.3.3 d: the statuses sent before the task
    /// management response must have reached it).
    ack_from: Option<u32>,
}

impl TargetConnection {
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
            .map(|(tag, t)| (*tag, t.aborted, tas(t.cmd.lun)))
            .collect();
        let mark = AbortMark(self.next_mark);
        self.next_mark = self.next_mark.wrapping_add(1);
        let mut record = ThirdParty {
            mark,
            running: Vec::new(),
            answered: false,
            ack_from: None,
        };
        let mut ended = 0usize;
        for &(itt, already, answer) in &in_scope {
            if !already {
                ended = ended.saturating_add(1);
                record.answered |= self.abort_other(itt, answer);
            }
            if self.tasks.contains_key(&itt) {
                record.running.push(itt);
            }
        }
        if self.third_party.len() >= MAX_THIRD_PARTY {
            self.third_party.remove(0);
        }
        self.third_party.push(record);
        if ended > 0 {
            self.observe(|o| o.tasks_aborted(ended));
        }
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
            if r.running.contains(&itt) {
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
        if r.running.iter().any(running) {
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
}

/// TASK ABORTED (SAM-5 §5.3.1): no data, no sense, no residual.
fn task_aborted(task: &Task) -> ScsiResult {
    ScsiResult {
        status: Status::TASK_ABORTED,
        transfer_length: task.cmd.expected_data_transfer_length,
        ..ScsiResult::default()
    }
}
