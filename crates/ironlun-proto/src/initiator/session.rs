//! The connection's own exchanges: NOP-In answers and keep-alive pings,
//! logout, and the timers behind them (RFC 7143 §11.14, §11.18, §11.19).

use super::*;

/// A NOP-Out ping that wants a NOP-In back (RFC 7143 §11.18).
pub(super) fn ping_pdu(h: Header) -> OutPdu {
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
pub(super) const KEEPALIVE_ITT: u32 = 0x0000_fffe;

impl<T> InitiatorSession<T> {
    /// Logout (RFC 7143 §11.14): reason 0 closes the session. Once it is
    /// sent, the session takes no new task and sends none still waiting
    /// for the window.
    pub fn submit_logout(
        &mut self,
        reason: LogoutReason,
        cid: u16,
        token: T,
    ) -> Result<u32, Refused<T>> {
        self.add(Body::Logout { reason, cid }, token, true)
    }

    /// A NOP-Out ping that the target answers with a NOP-In.
    pub fn submit_ping(&mut self, token: T) -> Result<u32, Refused<T>> {
        self.add(Body::Ping, token, true)
    }

    pub(super) fn nop_in(&mut self, n: NopIn, data: Bytes) {
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
            // (RFC 7143 §11.18.2), no more of it than the target takes
            // in one PDU (a ping should carry none, §11.19.2).
            let max_xmit = self.conn.max_xmit_data_segment_length.max(512) as usize;
            let data = data.slice(..data.len().min(max_xmit));
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

    /// When [`InitiatorSession::handle_timeout`] wants to run next.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Logging out, the connection asks nothing more of the target
        // (RFC 7143 §11.14): the logout's own deadline is the driver's.
        if self.failed.is_some() || self.logging_out {
            return None;
        }
        match self.ping_deadline {
            Some(d) => Some(d),
            // An interval past the clock's range means no ping.
            None => self
                .limits
                .nop_interval
                .and_then(|i| self.last_rx.checked_add(i)),
        }
    }

    /// Keep-alive: after `nop_interval` of silence, ping; if the ping is not
    /// answered within `nop_timeout`, fail the connection.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.failed.is_some() || self.logging_out {
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
        if self
            .last_rx
            .checked_add(interval)
            .is_some_and(|due| now >= due)
        {
            self.ping_deadline = now.checked_add(self.limits.nop_timeout);
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
