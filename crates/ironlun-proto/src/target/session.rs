//! The connection's own exchanges: NOP-Out/NOP-In keep-alive, logout, and
//! the target asking for one (RFC 7143 §11.14–§11.19, §11.9).

use super::*;

pub(super) struct PendingLogout {
    itt: u32,
    windowed: bool,
    response: LogoutResult,
}

impl TargetConnection {
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closing {
            return;
        }
        if let Some(deadline) = self.logout_deadline {
            if now >= deadline {
                self.close(CloseReason::LogoutTimeout);
                return;
            }
        }
        match self.ping {
            Some((_, deadline)) if now >= deadline => self.close(CloseReason::NopTimeout),
            Some(_) => {}
            None => {
                if let Some(interval) = self.cfg.nop_interval {
                    if self
                        .last_rx
                        .checked_add(interval)
                        .is_some_and(|due| now >= due)
                    {
                        self.send_ping(now);
                    }
                }
            }
        }
    }

    pub(super) fn send_ping(&mut self, now: Instant) {
        let ttt = self.alloc_ttt();
        self.push_ping(ttt);
        // A timeout past the clock's range sets no deadline: the next
        // interval pings again.
        self.ping = now.checked_add(self.cfg.nop_timeout).map(|d| (ttt, d));
    }

    /// A NOP-In the initiator must answer: ITT reserved, TTT valid,
    /// StatSN not advanced (RFC 7143 §11.19.2).
    pub(super) fn push_ping(&mut self, ttt: u32) {
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu::new(Pdu::NopIn(NopIn {
            lun: Lun::default(),
            itt: RESERVED_TAG,
            ttt,
            stat_sn: self.stat_sn,
            exp_cmd_sn: self.window.exp_cmd_sn(),
            max_cmd_sn: max,
        })));
    }

    /// Asks the initiator to log out within `wait` (an Asynchronous
    /// Message with [`AsyncEvent::LOGOUT_REQUEST`], RFC 7143 §11.9.1); the
    /// connection closes if it does not.
    pub fn request_logout(&mut self, now: Instant, wait: Duration) {
        if self.closing || self.logout.is_some() {
            return;
        }
        let secs = u16::try_from(wait.as_secs()).unwrap_or(u16::MAX);
        let stat_sn = self.next_stat_sn();
        let max = self.window.max_cmd_sn();
        self.out
            .push_back(OutPdu::new(Pdu::AsyncMessage(AsyncMessage {
                lun: Lun::default(),
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
                async_event: AsyncEvent::LOGOUT_REQUEST,
                async_vcode: 0,
                parameter1: 0,
                parameter2: 0,
                parameter3: secs,
            })));
        // Give the initiator the time it was told, plus a little to answer.
        self.logout_deadline = now.checked_add(wait.saturating_add(Duration::from_secs(2)));
    }

    pub(super) fn on_nop_out_no_reply(&mut self, n: &NopOut) {
        // ITT 0xffffffff: either the answer to our ping (TTT echoes it) or
        // an initiator ping that wants no reply (RFC 7143 §11.18.2).
        if let Some((ttt, _)) = self.ping {
            if ttt == n.ttt {
                self.ping = None;
            }
        }
        self.solicit_answered(n.ttt);
    }

    pub(super) fn on_nop_out(&mut self, n: NopOut, data: Bytes, windowed: bool) {
        if n.ttt != RESERVED_TAG {
            // A NOP-Out with a valid ITT must not carry a TTT.
            self.reject_pdu(&Pdu::NopOut(n), Violation::NopOutTtt);
            self.finish_command(windowed);
            return;
        }
        let mut echo = data;
        echo.truncate(self.conn.max_xmit_data_segment_length as usize);
        let stat_sn = self.next_stat_sn();
        self.finish_command(windowed);
        let max = self.window.max_cmd_sn();
        self.out.push_back(OutPdu {
            pdu: Pdu::NopIn(NopIn {
                lun: n.lun,
                itt: n.itt,
                ttt: RESERVED_TAG,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
            }),
            data: echo.into(),
        });
    }

    pub(super) fn on_logout(&mut self, l: LogoutRequest, windowed: bool) {
        // Reasons and responses: RFC 7143 §11.14.1, §11.15.1.
        let response = match l.reason {
            LogoutReason::CLOSE_SESSION => LogoutResult::CLOSED,
            // Close a connection: with one connection per session only our
            // own CID exists.
            LogoutReason::CLOSE_CONNECTION if l.cid == self.cid => LogoutResult::CLOSED,
            LogoutReason::CLOSE_CONNECTION => LogoutResult::CID_NOT_FOUND,
            // Connection recovery needs ERL 2.
            LogoutReason::REMOVE_FOR_RECOVERY => LogoutResult::RECOVERY_NOT_SUPPORTED,
            _ => {
                self.reject_pdu(&Pdu::LogoutRequest(l), Violation::LogoutReason);
                self.finish_command(windowed);
                return;
            }
        };
        self.logout = Some(PendingLogout {
            itt: l.itt,
            windowed,
            response,
        });
        if response != LogoutResult::CLOSED {
            self.check_logout();
            return;
        }
        // Tasks still waiting for data will never get it: abort them.
        let waiting: Vec<u32> = self
            .tasks
            .iter()
            .filter(|(_, t)| matches!(t.state, TaskState::Collecting(_)))
            .map(|(itt, _)| *itt)
            .collect();
        for itt in waiting {
            self.abort_task(itt);
        }
        self.check_logout();
    }

    pub(super) fn check_logout(&mut self) {
        let Some(l) = self.logout.take() else {
            return;
        };
        if l.response == LogoutResult::CLOSED && !self.tasks.is_empty() {
            // Answer once the executing tasks are done.
            self.logout = Some(l);
            return;
        }
        let stat_sn = self.next_stat_sn();
        self.finish_command(l.windowed);
        let max = self.window.max_cmd_sn();
        self.out
            .push_back(OutPdu::new(Pdu::LogoutResponse(LogoutResponse {
                response: l.response,
                itt: l.itt,
                stat_sn,
                exp_cmd_sn: self.window.exp_cmd_sn(),
                max_cmd_sn: max,
                // ERL 0 keeps no task state for reconnection.
                time2wait: 0,
                time2retain: 0,
            })));
        if l.response == LogoutResult::CLOSED {
            self.close(CloseReason::LoggedOut);
        }
    }
}
