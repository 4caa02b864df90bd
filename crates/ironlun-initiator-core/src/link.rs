//! A session's connections: logging in, losing one, taking its commands
//! back, reconnecting with back-off (RFC 7143 §6.3.5: the same ISID
//! reinstates the session), and the end.

use std::time::Instant;

use ironlun_proto::initiator::{
    Completed, InitiatorSession, LoginOutcome, Refused, ScsiRequest, TaskError,
};
use ironlun_wire::{Digests, FrameDecoder};

use crate::core::{login_decoder, InitiatorCore, Link, Logout, Tok};
use crate::event::{End, Event, LoginFailure};

impl<T> InitiatorCore<T> {
    /// The login completed: full feature phase on the negotiated values,
    /// and the commands taken back from the last connection sent again.
    pub(crate) fn logged_in(&mut self, outcome: Box<LoginOutcome>, now: Instant) {
        let mut s = InitiatorSession::new(&outcome, self.cfg.limits.clone(), now);
        let held = std::mem::take(&mut self.held);
        let reissued = held.len();
        for (req, token) in held {
            if let Err(Refused {
                error,
                token: Tok::User(token),
            }) = s.submit(req, Tok::User(token))
            {
                self.done.push_back(Completed {
                    token,
                    result: Err(TaskError::Refused(error)),
                });
            }
        }
        self.decoder = FrameDecoder {
            digests: Digests {
                header: outcome.conn.header_digest,
                data: outcome.conn.data_digest,
            },
            max_data_segment_len: outcome.conn.max_recv_data_segment_length,
        };
        self.link = Link::Up(s);
        self.logout = Logout::None;
        self.attempts = 0;
        let reinstated = self.logged_in_once;
        self.logged_in_once = true;
        self.events.push_back(Event::LoggedIn {
            outcome,
            reinstated,
            reissued,
        });
    }

    /// A login attempt failed. The first ends the session: a session
    /// that never began is not retried. Later ones count against the
    /// reconnection policy.
    pub(crate) fn login_failed(&mut self, failure: LoginFailure, now: Instant) {
        self.transmit.clear();
        self.decoder = login_decoder();
        if matches!(self.link, Link::LoggingIn { .. }) {
            self.events.push_back(Event::Disconnect);
        }
        if !self.logged_in_once {
            self.lost_why = failure.to_string();
            return self.end(End::LoginFailed(failure));
        }
        if let Some(end) = self.closing.take() {
            return self.end(end);
        }
        self.events.push_back(Event::LoginFailed(failure));
        self.next_attempt(now);
    }

    /// The connection failed in full feature phase.
    pub(crate) fn lose(&mut self, why: String, now: Instant) {
        let taken_back = self.drop_connection(&why);
        self.events.push_back(Event::ConnectionFailed {
            why: why.clone(),
            taken_back,
        });
        self.lost_why = why;
        self.after_connection(now);
    }

    /// Ends the full feature phase connection: its unfinished SCSI
    /// commands are taken back (the target ran them or not; they can be
    /// sent again), its other tasks fail. Returns how many were taken.
    pub(crate) fn drop_connection(&mut self, why: &str) -> usize {
        let Link::Up(s) = &mut self.link else {
            return 0;
        };
        let back = s.take_unfinished(why);
        while let Some(Completed { token, result }) = s.poll_completion() {
            if let Tok::User(token) = token {
                self.done.push_back(Completed { token, result });
            }
        }
        let n = back.len();
        self.held
            .extend(back.into_iter().filter_map(|(req, token)| match token {
                Tok::User(t) => Some((req, t)),
                Tok::Logout => None,
            }));
        // Replaced at once by the caller's next state.
        self.link = Link::Ended;
        self.logout = Logout::None;
        self.decoder = login_decoder();
        self.events.push_back(Event::Disconnect);
        n
    }

    /// The connection is gone: the session ends if it was closing, or
    /// tries again.
    pub(crate) fn after_connection(&mut self, now: Instant) {
        if let Some(end) = self.closing.take() {
            return self.end(end);
        }
        self.attempts = 0;
        self.next_attempt(now);
    }

    /// Waits for the next attempt, or gives up after the last.
    pub(crate) fn next_attempt(&mut self, now: Instant) {
        self.attempts += 1;
        let policy = &self.cfg.reconnect;
        if self.attempts > policy.attempts {
            let end = End::GaveUp {
                why: self.lost_why.clone(),
                attempts: policy.attempts,
            };
            return self.end(end);
        }
        self.link = Link::Waiting {
            at: now + policy.delay(self.attempts),
        };
    }

    /// The session is over: commands still held fail, or go back to the
    /// driver for another path when reconnection gave up with failover.
    pub(crate) fn end(&mut self, end: End) {
        self.link = Link::Ended;
        self.transmit.clear();
        self.orphaning = self.cfg.failover && matches!(end, End::GaveUp { .. });
        for (req, token) in std::mem::take(&mut self.held) {
            self.dispose(req, token);
        }
        self.events.push_back(Event::Ended(end));
    }

    /// Hands the SCSI commands taken back from a lost connection (those
    /// waiting for the next login, [`held`](Self::held)) to the caller
    /// now, through [`poll_orphan`](Self::poll_orphan), to be sent on
    /// another path: a caller with a live path need not wait for this
    /// one's reconnection. The session still reconnects. Returns how
    /// many.
    pub fn hand_back_held(&mut self) -> usize {
        let n = self.held.len();
        self.orphans.extend(self.held.drain(..));
        n
    }

    /// A SCSI command the ended session cannot run.
    pub(crate) fn dispose(&mut self, req: ScsiRequest, token: T) {
        if self.orphaning {
            self.orphans.push_back((req, token));
        } else {
            self.done.push_back(Completed {
                token,
                result: Err(TaskError::ConnectionFailed(self.lost_why.clone())),
            });
        }
    }
}
